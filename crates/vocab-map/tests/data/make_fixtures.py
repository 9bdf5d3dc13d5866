"""Regenerates the fixture tokenizers in this directory (not run by tests or CI).

    pip install tokenizers==0.23.3
    python3 make_fixtures.py /path/to/tinyshakespeare_train.txt

Each fixture is a small tokenizer trained on the first 200 kB of Tiny Shakespeare (public
domain), one per surface style the crate must decode:

- bytelevel.json: GPT-2-style byte-level BPE (`Ġ` = space), special `<|endoftext|>`.
- sentencepiece.json: Llama-2-style BPE: `Prepend("▁")` + `Replace(" ", "▁")` normalizer, no
  pre-tokenizer, byte fallback `<0x00>`..`<0xFF>`, decoder `Replace` + `ByteFallback` + `Fuse` +
  `Strip`, specials `<unk>`, `<s>`, `</s>`.
- metaspace.json: BPE with a `Metaspace` pre-tokenizer, byte fallback, and a `Metaspace` +
  `ByteFallback` + `Fuse` decoder.
- wordpiece.json: BERT-style WordPiece (`##` continuations), specials `[PAD]` `[UNK]` `[CLS]`
  `[SEP]` `[MASK]`.
"""

import json
import sys

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

text = open(sys.argv[1], encoding="utf-8").read()[:200_000]
lines = text.splitlines()


def save(tok_json, name):
    with open(name, "w", encoding="utf-8") as f:
        json.dump(tok_json, f, ensure_ascii=False, separators=(",", ":"))
    # Check that the file loads and round-trips.
    t = Tokenizer.from_file(name)
    sample = "Hello, world!\nWhat light through yonder window breaks? 日本"
    print(name, t.get_vocab_size(True), repr(t.decode(t.encode(sample).ids)))


# Byte-level BPE.
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=700,
    special_tokens=["<|endoftext|>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
)
tok.train_from_iterator(lines, trainer)
save(json.loads(tok.to_str()), "bytelevel.json")


def byte_fallback_bpe(vocab_size):
    """A BPE trained on Metaspace words, with `<0xNN>` tokens inserted at ids 3..=258."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    tok.train_from_iterator(lines, trainer)
    j = json.loads(tok.to_str())
    trained = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for token, _ in trained:
        if token not in vocab:
            vocab[token] = len(vocab)
    j["model"]["vocab"] = vocab
    j["model"]["byte_fallback"] = True
    j["model"]["fuse_unk"] = True
    for added in j["added_tokens"]:
        added["id"] = vocab[added["content"]]
    return j


# Llama-2 style.
j = byte_fallback_bpe(600)
j["normalizer"] = {
    "type": "Sequence",
    "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}],
}
j["pre_tokenizer"] = None
j["decoder"] = {
    "type": "Sequence",
    "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    ],
}
save(j, "sentencepiece.json")

# Metaspace pre-tokenizer and decoder.
j = byte_fallback_bpe(650)
j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True}
j["decoder"] = {
    "type": "Sequence",
    "decoders": [
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ],
}
save(j, "metaspace.json")

# WordPiece.
tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
tok.normalizer = normalizers.BertNormalizer(lowercase=False)
tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
tok.decoder = decoders.WordPiece(prefix="##")
trainer = trainers.WordPieceTrainer(
    vocab_size=600, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False
)
tok.train_from_iterator(lines, trainer)
save(json.loads(tok.to_str()), "wordpiece.json")
