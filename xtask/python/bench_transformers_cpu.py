#!/usr/bin/env python3
"""transformers on the CPU, measured the way `cargo xtask bench-cpu` measures anyspec, on the same
GGUF file (which transformers dequantizes to float32 at load): the cost of a k-position pass
(k = 1..8, all k logit rows, after a 64-token context, cache rolled back after each), greedy
decode tokens/s and 64-token prefill tokens/s. Prints one JSON object; bench-cpu runs it with
`--python PATH` and puts its rows beside ours.

Needs torch, transformers, gguf and accelerate (see make_gguf_fixtures.py's header).
    python3 xtask/python/bench_transformers_cpu.py --model FILE.gguf --threads 2 --ids 1,2,3,...
"""

import argparse
import json
import os
import statistics
import time

import torch
from transformers import AutoModelForCausalLM, DynamicCache

CONTEXT = 64
MAX_K = 8
DECODE_STEPS = 32


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--ids", required=True, help="comma-separated prompt ids (>= 72)")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ids = [int(x) for x in args.ids.split(",")]
    directory, name = os.path.split(os.path.abspath(args.model))
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    model.eval()

    def run(tokens, cache):
        with torch.no_grad():
            return model(torch.tensor([tokens]), past_key_values=cache, use_cache=True).logits

    prefill = []
    for _ in range(max(args.reps, 2)):
        start = time.perf_counter()
        run(ids[:CONTEXT], DynamicCache())
        prefill.append(time.perf_counter() - start)

    cache = DynamicCache()
    run(ids[:CONTEXT], cache)
    pass_ms = []
    for k in range(1, MAX_K + 1):
        draft = ids[CONTEXT:CONTEXT + k]
        times = []
        for _ in range(args.reps + 1):
            start = time.perf_counter()
            run(draft, cache)
            times.append((time.perf_counter() - start) * 1e3)
            cache.crop(-k)  # transformers 5: a negative count removes that many tokens
        pass_ms.append(statistics.median(times[1:]))

    token = ids[CONTEXT]
    start = time.perf_counter()
    for _ in range(DECODE_STEPS):
        logits = run([token], cache)
        token = int(logits[0, -1].argmax())
    decode = DECODE_STEPS / (time.perf_counter() - start)
    print(json.dumps({
        "runtime": f"transformers {__import__('transformers').__version__} (torch {torch.__version__}, eager)",
        "storage": "f32 (dequantized at load)",
        "threads": args.threads,
        "pass_ms": pass_ms,
        "decode_tokens_per_s": decode,
        "prefill_tokens_per_s": CONTEXT / statistics.median(prefill),
        "weight_bytes": None,
    }))


if __name__ == "__main__":
    main()
