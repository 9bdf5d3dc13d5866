#!/usr/bin/env python3
"""Autoregressive and speculative decoding speed: anyspec (burn, CPU) against Python transformers
on the same checkpoint, in one run. Prints a markdown report (and writes reports/models-bench.md).

What it does:
1. Writes a random-weight Llama checkpoint (hidden 512, 8 layers, 8 query / 4 key-value heads,
   vocabulary 32000, f32, ~56M parameters) and a layer-skip drafter made of its first 2 layers
   (same embeddings, norm and head, so the drafter agrees with the target part of the time).
   Both use the fixture tokenizer of crates/models/tests/data.
2. Greedy autoregressive decoding of --tokens tokens with transformers (torch, float32, eager
   attention, --threads threads) and with `anyspec generate --json --ignore-eos` (release
   build). Decode tokens/s excludes the prompt's prefill on both sides; both outputs are
   compared token for token.
3. Speculative decoding with the drafter for each γ: measured speed-up over autoregressive
   decoding beside anyspec-core's walltime improvement factor (`anyspec theory`) for the
   measured acceptance rate α and drafter cost c.
4. The cost of one verification pass over k = 2..8 positions relative to k = 1 (the target
   drafting for itself, so every drafted token is accepted).

Run from the repository root after `cargo build --release -p anyspec-cli`:
    python3 xtask/python/bench_vs_transformers.py [--tokens 128] [--threads 2]
Needs torch, transformers, safetensors from PyPI (xtask/python/requirements.txt).
"""

import argparse
import json
import os
import shutil
import subprocess
import time

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOKENIZER = os.path.join(ROOT, "crates", "models", "tests", "data", "tokenizer.json")
PROMPT = "The quick brown fox jumps over the lazy dog while speculative decoding"


def make_checkpoints(out):
    from transformers import AutoModelForCausalLM, LlamaConfig

    target_dir, drafter_dir = os.path.join(out, "target"), os.path.join(out, "drafter")
    if os.path.exists(os.path.join(drafter_dir, "config.json")):
        return target_dir, drafter_dir
    config = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=8,
                         num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=2048,
                         rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            elif "embed_tokens" in name or "lm_head" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                # Small residual updates: later layers refine rather than replace, so a prefix of
                # the layers is a reasonable drafter.
                p.copy_(0.3 * torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)
    model.save_pretrained(target_dir, safe_serialization=True)
    shutil.copy(TOKENIZER, os.path.join(target_dir, "tokenizer.json"))

    config.num_hidden_layers = 2
    drafter = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    drafter.load_state_dict(model.state_dict(), strict=False)
    drafter.save_pretrained(drafter_dir, safe_serialization=True)
    shutil.copy(TOKENIZER, os.path.join(drafter_dir, "tokenizer.json"))
    return target_dir, drafter_dir


def python_autoregressive(target_dir, ids, tokens):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32, attn_implementation="eager").eval()
    input_ids = torch.tensor([ids])
    kwargs = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
    with torch.no_grad():
        model.generate(input_ids, max_new_tokens=8, min_new_tokens=8, **kwargs)  # warm-up
        start = time.perf_counter()
        model(input_ids)
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        out = model.generate(input_ids, max_new_tokens=tokens, min_new_tokens=tokens, **kwargs)
        total = time.perf_counter() - start
    generated = out[0, len(ids):].tolist()
    return generated, tokens / max(total - prefill, 1e-9), prefill


def anyspec(binary, *args, threads=None):
    env = dict(os.environ)
    if threads:
        # burn's flex backend runs on rayon's global pool: give it the threads torch gets.
        env["RAYON_NUM_THREADS"] = str(threads)
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="/tmp/anyspec-bench")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1,
                        help="threads for torch and for burn (RAYON_NUM_THREADS); on a busy machine "
                             "more than 1 makes torch's OpenMP pool spin and collapse")
    parser.add_argument("--gammas", default="1,2,3,4,6")
    parser.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "anyspec"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    target_dir, drafter_dir = make_checkpoints(args.out)
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(TOKENIZER).encode(PROMPT).ids
    common = ["generate", "--target", target_dir, "--prompt", PROMPT, "--max-tokens", str(args.tokens),
              "--ignore-eos", "--json"]
    anyspec(args.binary, *common[:-3], "8", "--ignore-eos", "--json")  # warm the page cache
    ours = anyspec(args.binary, *common, threads=args.threads)
    py_tokens, py_tps, py_prefill = python_autoregressive(target_dir, ids, args.tokens)
    same = sum(a == b for a, b in zip(ours["tokens"], py_tokens))

    lines = [
        "# anyspec-models: CPU decoding speed against Python transformers",
        "",
        f"Random-weight Llama (hidden 512, 8 layers, GQA 8/4, vocab 32000, f32), prompt {len(ids)} tokens, "
        f"{args.tokens} greedy tokens, {args.threads} thread(s) for torch and for burn, torch {torch.__version__}.",
        "",
        "| runtime | decode tokens/s | prefill ms |",
        "|---|---|---|",
        f"| transformers (eager, f32) | {py_tps:.1f} | {py_prefill * 1e3:.1f} |",
        f"| anyspec (burn flex, f32) | {ours['tokens_per_second']:.1f} | {ours['prefill_ms']:.1f} |",
        "",
        f"**anyspec / transformers decode speed: {ours['tokens_per_second'] / py_tps:.2f}×**; "
        f"greedy outputs agree on {same}/{args.tokens} tokens.",
        "",
        "## Speculative decoding with a 2-layer layer-skip drafter",
        "",
        "| γ | α (measured) | tokens/step | drafter cost c | tokens/s | measured speed-up | theory factor |",
        "|---|---|---|---|---|---|---|",
    ]
    ar_step_ms = ours["decode_ms"] / max(ours["steps"], 1)
    for gamma in [int(g) for g in args.gammas.split(",")]:
        spec = anyspec(args.binary, *common, "--drafter", drafter_dir, "--gamma", str(gamma), threads=args.threads)
        assert spec["tokens"] == ours["tokens"], "greedy speculative decoding must equal autoregressive"
        alpha = spec["acceptance_rate"]
        cost = (spec["draft_ms"] / max(spec["drafted"], 1)) / ar_step_ms
        theory = anyspec(args.binary, "theory", "--alpha", f"{min(alpha, 0.999999):.6f}", "--gamma", str(gamma),
                         "--cost", f"{cost:.6f}", "--json")
        lines.append(
            f"| {gamma} | {alpha:.3f} | {spec['tokens_per_step']:.2f} | {cost:.3f} | "
            f"{spec['tokens_per_second']:.1f} | {spec['tokens_per_second'] / ours['tokens_per_second']:.2f}× | "
            f"{theory['improvement_factor']:.2f}× |")
    # Cost of scoring k positions in one pass relative to k = 1: the target drafts for itself at
    # temperature 0, so every step verifies γ + 1 = k positions (all accepted); verify time per
    # step includes the device-side verification. k = 1 is the autoregressive run.
    lines += ["", "## Cost of one verification pass over k positions (relative to k = 1)", "",
              "| k | verify ms/step | relative to k = 1 | per position |", "|---|---|---|---|",
              f"| 1 | {ours['verify_ms'] / ours['steps']:.2f} | 1.00 | 1.00 |"]
    base = ours["verify_ms"] / ours["steps"]
    for k in range(2, 9):
        own = anyspec(args.binary, *common, "--drafter", target_dir, "--gamma", str(k - 1), threads=args.threads)
        per_step = own["verify_ms"] / own["steps"]
        lines.append(f"| {k} | {per_step:.2f} | {per_step / base:.2f} | {per_step / base / k:.2f} |")
    lines += ["", "The theory factor assumes scoring γ + 1 positions costs one target step; the gap between "
              "the two columns is mostly that assumption (see `cargo bench -p anyspec-models --bench score`)."]
    report = "\n".join(lines) + "\n"
    print(report)
    os.makedirs(os.path.join(ROOT, "reports"), exist_ok=True)
    with open(os.path.join(ROOT, "reports", "models-bench.md"), "w") as f:
        f.write(report)


if __name__ == "__main__":
    main()
