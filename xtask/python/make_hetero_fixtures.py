#!/usr/bin/env python3
"""A tiny drafter with *another* tokenizer than the anyspec-models fixtures, for the
heterogeneous-vocabulary bridges of anyspec-drafters (union, TLI, RDK, SLEM).

Writes crates/drafters/tests/data/hetero-drafter/ (or the directory given as first argument):

- tokenizer.json: a byte-level BPE that differs from crates/models/tests/data/tokenizer.json in
  every way a real pair does: other ids (bytes first, then `<s>` and `</s>`, no `<unk>`), not
  all of the target's merges (the last three, `Ġmodel`, `Ġtoken` and `poses`, are missing, so
  the drafter spells those words with several tokens) and 6 merges of its own whose tokens the
  target does not have (`qu`, `ox`, `Ġf`, `Ġfox`, `Ġl`, `zy`). |D| = 322; |T ∩ D| = 316 by
  string (314 by byte surface, which leaves the special tokens out) of the target's 320.
- config.json + model.safetensors (float32): the Mistral fixture's layers with 10% multiplicative
  noise (seeded), embedding and LM-head rows re-indexed to the drafter's ids. A token both
  tokenizers have keeps the target fixture's rows; the drafter's own tokens get random rows.
  The drafter therefore resembles its target on shared tokens, as a distilled drafter would
  (random-weight models are otherwise uncorrelated and would accept nothing), while seeing its
  context through its own tokenization.

Pure Python (no torch, no numpy): safetensors is an 8-byte header length, a JSON header and raw
little-endian data. Deterministic. Run: python3 xtask/python/make_hetero_fixtures.py
"""

import json
import os
import random
import struct
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TARGET_DIR = os.path.join(ROOT, "crates", "models", "tests", "data", "mistral-window-f16")
OWN_MERGES = [["q", "u"], ["o", "x"], ["Ġ", "f"], ["Ġf", "ox"], ["Ġ", "l"], ["z", "y"]]
DROPPED_MERGES = 3


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = body[start:end]
        fmt = {"F16": "e", "F32": "f", "BF16": None}[info["dtype"]]
        count = (end - start) // struct.calcsize(fmt)
        out[name] = (info["shape"], list(struct.unpack(f"<{count}{fmt}", raw)))
    return out


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        raw = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def make_tokenizer(target):
    vocab_t = target["model"]["vocab"]
    by_id = sorted(vocab_t.items(), key=lambda kv: kv[1])
    alphabet = [s for s, i in by_id if 3 <= i < 3 + 256]
    assert len(alphabet) == 256
    merges = target["model"]["merges"][:-DROPPED_MERGES] + OWN_MERGES
    vocab = {}
    for s in alphabet:
        vocab[s] = len(vocab)
    specials = ["<s>", "</s>"]
    for s in specials:
        vocab[s] = len(vocab)
    for a, b in merges:
        tok = a + b
        assert tok not in vocab, tok
        vocab[tok] = len(vocab)
    for a, b in OWN_MERGES:
        assert a + b not in vocab_t, a + b
    tok = json.loads(json.dumps(target))
    tok["model"]["vocab"] = vocab
    tok["model"]["merges"] = merges
    tok["added_tokens"] = [
        {"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for s in specials
    ]
    bos = vocab["<s>"]
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]}},
    }
    return tok


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "crates", "drafters", "tests", "data", "hetero-drafter")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(TARGET_DIR, "tokenizer.json")) as f:
        target_tok = json.load(f)
    tok = make_tokenizer(target_tok)
    with open(os.path.join(out_dir, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    vocab_d, vocab_t = tok["model"]["vocab"], target_tok["model"]["vocab"]
    n = len(vocab_d)

    with open(os.path.join(TARGET_DIR, "config.json")) as f:
        config = json.load(f)
    hidden = config["hidden_size"]
    tensors = {}
    for shard in sorted(os.listdir(TARGET_DIR)):
        if shard.startswith("model-") and shard.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(TARGET_DIR, shard)))

    rng = random.Random(11)
    for name in sorted(tensors):
        if "embed_tokens" in name or "lm_head" in name:
            continue
        shape, values = tensors[name]
        tensors[name] = (shape, [v * (1.0 + 0.1 * rng.gauss(0.0, 1.0)) for v in values])
    shared = 0
    for name in ["model.embed_tokens.weight", "lm_head.weight"]:
        shape, values = tensors[name]
        rows = []
        for s, d in sorted(vocab_d.items(), key=lambda kv: kv[1]):
            t = vocab_t.get(s)
            if t is not None:
                rows.extend(values[t * hidden : (t + 1) * hidden])
                shared += 1
            else:
                rows.extend(0.5 * rng.gauss(0.0, 1.0) for _ in range(hidden))
        tensors[name] = ([n, hidden], rows)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)

    config.update(vocab_size=n, bos_token_id=vocab_d["<s>"], eos_token_id=vocab_d["</s>"],
                  dtype="float32")
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"drafter vocabulary {n}, {shared // 2} tokens shared by string with the target")


if __name__ == "__main__":
    main()
