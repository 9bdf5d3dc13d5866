"""Checks that Python `transformers` loads the demo checkpoints and agrees with anyspec.

For each model under assets/demo it loads the checkpoint with AutoModelForCausalLM (f16 weights
converted to f32, as anyspec does) and its tokenizer.json with `tokenizers`, greedily generates
40 tokens from the first demo prompt, and compares the token ids with
`anyspec generate --temperature 0` on the same checkpoint.

    pip install torch transformers
    cargo build --release -p anyspec-cli
    python3 xtask/python/check_demo_assets.py [assets/demo]
"""

import json
import subprocess
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

ROOT = Path(__file__).resolve().parents[2]
ASSETS = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "demo"
ANYSPEC = ROOT / "target" / "release" / "anyspec"
TOKENS = 40


def main() -> int:
    prompts = json.loads((ASSETS / "prompts.json").read_text())
    prompt = prompts[0]
    failures = 0
    for name in ["target", "drafter-same", "drafter-sp", "drafter-byte"]:
        directory = ASSETS / name
        model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float32)
        model.eval()
        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        ids = tokenizer.encode(prompt, add_special_tokens=True).ids
        with torch.no_grad():
            out = model.generate(
                torch.tensor([ids]),
                max_new_tokens=TOKENS,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
                min_new_tokens=TOKENS,
            )
        hf_tokens = out[0, len(ids):].tolist()
        run = subprocess.run(
            [str(ANYSPEC), "generate", "--target", str(directory), "--prompt", prompt,
             "--max-tokens", str(TOKENS), "--ignore-eos", "--json"],
            capture_output=True, text=True, check=True,
        )
        ours = json.loads(run.stdout)["tokens"]
        same = ours == hf_tokens
        failures += not same
        params = sum(p.numel() for p in model.parameters())
        print(f"{name}: transformers loaded {params / 1e6:.2f} M parameters; "
              f"greedy {TOKENS} tokens {'identical' if same else 'DIFFER'} to anyspec generate")
        if not same:
            print("  transformers:", hf_tokens)
            print("  anyspec:     ", ours)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
