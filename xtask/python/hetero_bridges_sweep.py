#!/usr/bin/env python3
"""Acceptance and tokens per step of every bridge between the fixture target and the fixture
drafter with another tokenizer (crates/drafters/tests/data/hetero-drafter), through
`anyspec generate --json`.

For each bridge and temperature it sums, over three prompts (and three seeds when sampling),
drafted / accepted tokens, emitted tokens and verification steps, and prints a markdown table:
acceptance = accepted / drafted (the engine's acceptance_rate), tokens per step = emitted /
steps. RDK and FR use an affinity matrix and a 128-token shortlist built from CORPUS.

Run from the repository root after `cargo build -p anyspec-cli`:
    python3 xtask/python/hetero_bridges_sweep.py CORPUS [MAX_TOKENS]
(CORPUS: any English text, e.g. ../shared/corpora/en-wikitext2/wikitext2_raw_test_part.txt.)
"""

import json
import os
import subprocess
import sys
import tempfile

ANYSPEC = "target/debug/anyspec"
TARGET = "crates/models/tests/data/mistral-window-f16"
DRAFTER = "crates/drafters/tests/data/hetero-drafter"
PROMPTS = ["The quick brown fox", "Speculative decoding drafts tokens", "the dog sleeps while"]


def run(args):
    out = subprocess.run([ANYSPEC] + args, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"anyspec {' '.join(args)}: {out.stderr}")
    return out.stdout


def main():
    corpus = sys.argv[1]
    max_tokens = sys.argv[2] if len(sys.argv) > 2 else "40"
    tmp = tempfile.mkdtemp()
    affinity, shortlist = os.path.join(tmp, "m.safetensors"), os.path.join(tmp, "s.shortlist")
    run(["affinity", "build", "--tokenizer", f"{TARGET}/tokenizer.json", "--corpus", corpus, "-o", affinity])
    run(["shortlist", "build", "--tokenizer", f"{DRAFTER}/tokenizer.json", "--corpus", corpus,
         "--size", "128", "-o", shortlist])
    shared = ["--drafter-context", "shared-ids"]
    variants = [
        ("union", "union", []), ("tli", "tli", []), ("tli + FR-128", "tli", ["--shortlist", shortlist]),
        ("rdk exact", "rdk", ["--affinity", affinity]),
        ("rdk taylor", "rdk", ["--affinity", affinity, "--rdk", "taylor"]),
        ("slem", "slem", []), ("slrs", "slrs", []),
        ("union, shared ids", "union", shared), ("tli, shared ids", "tli", shared),
        ("rdk exact, shared ids", "rdk", ["--affinity", affinity] + shared),
    ]
    print("| temperature | bridge | acceptance | tokens per step |")
    print("|---|---|---:|---:|")
    for temperature in ["0", "1"]:
        seeds = ["0"] if temperature == "0" else ["0", "1", "2"]
        for name, algo, extra in variants:
            drafted = accepted = emitted = steps = 0
            for prompt in PROMPTS:
                for seed in seeds:
                    d = json.loads(run([
                        "generate", "--target", TARGET, "--drafter", DRAFTER, "--prompt", prompt,
                        "--max-tokens", max_tokens, "--ignore-eos", "--json", "--algo", algo,
                        "--temperature", temperature, "--seed", seed] + extra))
                    drafted += d["drafted"]
                    accepted += d["accepted"]
                    emitted += len(d["tokens"])
                    steps += d["steps"]
            print(f"| {temperature} | {name} | {accepted / drafted:.3f} | {emitted / steps:.2f} |")


if __name__ == "__main__":
    main()
