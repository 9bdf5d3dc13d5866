#!/usr/bin/env python3
"""llama.cpp on the prompts of `anyspec demo` (assets/demo/specbench-prompts.json), for the
side-by-side table of reports/real-model.md.

For every prompt, through SmolLM2's chat template (with its default system prompt, as
`anyspec demo` applies it):
- autoregressive decoding: `llama-bench -p 0 -n N -d <prompt tokens>` (token generation at that
  context depth; llama.cpp's own benchmark of plain decoding);
- prompt-lookup decoding: `llama-lookup -f prompt -n N --temp 0` (its n-gram lookup drafter,
  default draft length 3), from its "decoded … speed" line.

Usage: python3 xtask/python/bench_llama_cpp_demo.py --bin DIR --model FILE [--tokens 96]
         [--threads 2] [--prompts assets/demo/specbench-prompts.json] [--json OUT]
Prints one line per prompt and the totals (tokens / seconds, summed over prompts).
"""

import argparse
import json
import os
import re
import subprocess
import tempfile

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chat(prompt: str) -> str:
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n"
            "<|im_start|>assistant\n")


def run(cmd, env):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", default="assets/demo/specbench-prompts.json")
    ap.add_argument("--json")
    args = ap.parse_args()
    env = dict(os.environ, LD_LIBRARY_PATH=args.bin)
    rows = []
    for item in json.load(open(args.prompts)):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(chat(item["prompt"]))
            path = f.name
        out = run([f"{args.bin}/llama-lookup", "-m", args.model, "-f", path, "-n", str(args.tokens),
                   "-t", str(args.threads), "--temp", "0"], env)
        os.unlink(path)
        text = out.stdout + out.stderr
        encoded = int(re.search(r"encoded\s+(\d+) tokens", text).group(1))
        m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", text)
        lookup_tokens, lookup_seconds = int(m.group(1)), float(m.group(2))
        drafted = int(re.search(r"n_drafted\s*=\s*(\d+)", text).group(1))
        accepted = int(re.search(r"n_accept\s*=\s*(\d+)", text).group(1))
        bench = run([f"{args.bin}/llama-bench", "-m", args.model, "-p", "0", "-n", str(args.tokens),
                     "-d", str(encoded), "-t", str(args.threads), "-r", "2", "-o", "json"], env)
        ar_speed = json.loads(bench.stdout)[0]["avg_ts"]
        row = {"category": item["category"], "group": item["group"], "prompt_tokens": encoded,
               "ar_tokens_per_second": ar_speed, "lookup_tokens": lookup_tokens,
               "lookup_seconds": lookup_seconds, "lookup_drafted": drafted, "lookup_accepted": accepted}
        rows.append(row)
        print(f"{item['category']:15} {encoded:5} prompt tokens  AR {ar_speed:6.1f} tok/s  "
              f"lookup {lookup_tokens / lookup_seconds:6.1f} tok/s ({accepted}/{drafted} accepted)", flush=True)
    ar_seconds = sum(args.tokens / r["ar_tokens_per_second"] for r in rows)
    ar_total = args.tokens * len(rows) / ar_seconds
    lookup_total = sum(r["lookup_tokens"] for r in rows) / sum(r["lookup_seconds"] for r in rows)
    print(f"overall: AR {ar_total:.1f} tok/s, lookup {lookup_total:.1f} tok/s ({lookup_total / ar_total:.2f}x)")
    if args.json:
        json.dump({"rows": rows, "ar_tokens_per_second": ar_total, "lookup_tokens_per_second": lookup_total},
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
