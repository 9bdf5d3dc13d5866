#!/usr/bin/env python3
"""Tiny random-weight Llama-family checkpoints and their reference logits from `transformers`.

Writes, under crates/models/tests/data/ (or the directory given as the first argument):

- tokenizer.json: a byte-level BPE tokenizer (vocabulary 320) trained on a few sentences,
  with a BOS token added by the post-processor as Llama's tokenizer does.
- llama3-gqa/: Llama with grouped-query attention (4 query heads, 2 key/value heads) and
  Llama-3 RoPE scaling, untied embeddings, f32, one model.safetensors.
- qwen2-tied-bf16/: Qwen2 with q/k/v biases and tied embeddings, stored in bf16.
- mistral-window-f16/: Mistral with a 5-token sliding window, stored in f16 and sharded
  (model.safetensors.index.json + two shards).

Each directory gets config.json, the weights, tokenizer.json and reference.safetensors holding
`input_ids` (the fixed prompt, I64) and `logits` (float32 logits of every prompt position computed
by transformers in float32 from the stored weights) and `greedy` (20 greedy tokens from
`model.generate`).

Run: python3 xtask/python/make_model_fixtures.py   (needs torch, transformers, tokenizers,
safetensors from PyPI; see xtask/python/requirements.txt). Deterministic: fixed seeds.
"""

import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

PROMPT = "The quick brown fox jumps over the lazy dog while speculative decoding"
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Speculative decoding drafts tokens with a small model and verifies them with a large one.",
    "A drafter proposes, the target disposes: lossless sampling keeps the distribution exact.",
    "Rust and burn run the model on the CPU; the tokenizer maps text to ids and back.",
    "while the dog sleeps, the fox reads papers about decoding and verification",
] * 20
VOCAB = 320


def make_tokenizer(path):
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    tok.save(path)
    return tok


def randomize(model, seed):
    """Weights large enough that logits differ clearly between tokens (the default 0.02
    initialisation gives near-uniform logits, which would make a 1e-4 test meaningless)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name or "lm_head" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in**0.5)


def build(out_dir, name, config, dtype, seed, tokenizer_path, ids, shard=None):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    randomize(model, seed)
    model = model.to(dtype).eval()
    target = os.path.join(out_dir, name)
    shutil.rmtree(target, ignore_errors=True)
    kwargs = {"safe_serialization": True}
    if shard:
        kwargs["max_shard_size"] = shard
    model.save_pretrained(target, **kwargs)
    shutil.copy(tokenizer_path, os.path.join(target, "tokenizer.json"))
    for extra in ["generation_config.json"]:
        p = os.path.join(target, extra)
        if os.path.exists(p):
            os.remove(p)

    # The reference: the stored (possibly rounded) weights, loaded back in float32 as a user
    # would. (`model.float()` would not do: `.to(bf16)` also rounds the rotary `inv_freq` buffer.)
    reference = AutoModelForCausalLM.from_pretrained(
        target, dtype=torch.float32, attn_implementation="eager").eval()
    input_ids = torch.tensor([ids])
    with torch.no_grad():
        logits = reference(input_ids).logits[0].contiguous()
        greedy = reference.generate(
            input_ids, max_new_tokens=20, do_sample=False, pad_token_id=0, eos_token_id=None
        )[0, len(ids):].contiguous()
    top2 = torch.topk(logits, 2, dim=-1).values
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"logit std {logits.std():.3f}, smallest top-1/top-2 gap {(top2[:, 0] - top2[:, 1]).min():.4f}")
    save_file(
        {"input_ids": input_ids[0].to(torch.int64), "logits": logits, "greedy": greedy.to(torch.int64)},
        os.path.join(target, "reference.safetensors"),
    )


def main():
    from transformers import LlamaConfig, MistralConfig, Qwen2Config

    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "..", "crates", "models", "tests", "data")
    os.makedirs(out_dir, exist_ok=True)
    tokenizer_path = os.path.join(out_dir, "tokenizer.json")
    tok = make_tokenizer(tokenizer_path)
    ids = tok.encode(PROMPT).ids
    print(f"prompt: {len(ids)} tokens: {ids}")
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    common = dict(vocab_size=VOCAB, bos_token_id=bos, eos_token_id=eos, rms_norm_eps=1e-5,
                  hidden_act="silu", max_position_embeddings=128)

    llama = LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=False,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 32},
        **common)
    build(out_dir, "llama3-gqa", llama, torch.float32, 1, tokenizer_path, ids)

    qwen = Qwen2Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, tie_word_embeddings=True, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **common)
    build(out_dir, "qwen2-tied-bf16", qwen, torch.bfloat16, 2, tokenizer_path, ids)

    mistral = MistralConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=False, sliding_window=5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **common)
    build(out_dir, "mistral-window-f16", mistral, torch.float16, 3, tokenizer_path, ids, shard="40KB")


if __name__ == "__main__":
    main()
