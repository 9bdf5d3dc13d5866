#!/usr/bin/env python3
"""Makes smollm2_tokenizer_ids.json: reference token ids of SmolLM2-135M-Instruct's tokenizer.

Usage: python3 make_tokenizer_fixture.py /path/to/SmolLM2-135M-Instruct.Q4_1.gguf
Needs: pip install gguf transformers   (transformers brings the `tokenizers` Python package)

Two references are recorded for every string:

- "hf": SmolLM2's own tokenizer.json pipeline, rebuilt with the Python `tokenizers` package from
  the GGUF's vocabulary and merges: BPE (no byte fallback), pre-tokenizer
  Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False, use_regex=True)],
  the control tokens (token_type 3) as special added tokens. This is what anyspec must match.
- "transformers_gguf": transformers' own GGUF converter
  (AutoTokenizer.from_pretrained(dir, gguf_file=...)), an independent construction. It builds
  the pre-tokenizer without the Digits step (it treats every "gpt2" vocabulary of a llama
  model like Llama 3's), so it differs from "hf" on runs of digits; recorded for comparison.
"""

import json
import os
import sys

import gguf
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

STRINGS = [
    "The quick brown fox jumps over the lazy dog. It's 5 o'clock somewhere!",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "12345",
    "Price: $1,299.99 (was 2024-11-22)",
    "Привіт, як справи? Київ — столиця України.",
    "emoji: 😀👍🏽 and 🇺🇦",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "  leading spaces, trailing tabs\t\t\nand\r\nwindows newlines   ",
    "",
]


def field_strings(reader, key):
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def field_ints(reader, key):
    field = reader.fields[key]
    return [int(field.parts[i][0]) for i in field.data]


def main():
    path = sys.argv[1]
    reader = gguf.GGUFReader(path)
    tokens = field_strings(reader, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in field_strings(reader, "tokenizer.ggml.merges")]
    types = field_ints(reader, "tokenizer.ggml.token_type")
    vocab = {t: i for i, t in reversed(list(enumerate(tokens)))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3]
    )

    try:
        from transformers import AutoTokenizer

        hf_gguf = AutoTokenizer.from_pretrained(
            os.path.dirname(os.path.abspath(path)), gguf_file=os.path.basename(path)
        )
    except Exception as e:  # transformers' GGUF support needs PyTorch; the reference is optional
        print(f"transformers' GGUF converter unavailable ({e}); recording null", file=sys.stderr)
        hf_gguf = None

    cases = []
    for s in STRINGS:
        ids = tok.encode(s, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == s, s
        cases.append(
            {
                "text": s,
                "hf": ids,
                "transformers_gguf": (
                    hf_gguf.encode(s, add_special_tokens=False) if hf_gguf else None
                ),
            }
        )
    out = {
        "model": "SmolLM2-135M-Instruct.Q4_1.gguf (sha256 b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53)",
        "made_by": "crates/gguf/tests/data/make_tokenizer_fixture.py",
        "cases": cases,
    }
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "smollm2_tokenizer_ids.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
