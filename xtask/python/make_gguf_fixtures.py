#!/usr/bin/env python3
"""Reference fixtures for the GGUF conformance tests of SmolLM2-135M-Instruct Q4_1.

Writes, under crates/models/tests/data/smollm2/ (or --out):

- passage.txt (only with --make-passage CORPUS_DIR): the opening of "Alice's Adventures in
  Wonderland" (Lewis Carroll, 1865; public domain), whole paragraphs from "CHAPTER I." of
  `pg11` in shared/corpora/en-gutenberg until the next paragraph would pass PASSAGE_TOKENS tokens.
- llama_cpp.json: llama.cpp's tokenization of the passage (no BOS: the file says
  tokenizer.ggml.add_bos_token = false), its greedy argmax at every position with teacher
  forcing (one evaluation with logits of all positions), each position's NLL and top-1 margin,
  the perplexity, the same for the eight prompts of transformers.json, and, with
  --llama-perplexity BIN, the figure printed by llama.cpp's own `llama-perplexity` tool.
- tokenize.json: llama.cpp's token ids for a few test strings.
- transformers.json: the f32 model that `transformers` dequantizes from the GGUF file: shape,
  sha256 and first values of a few tensors, and for eight prompts the last position's top-64
  logits, logsumexp and 16 fixed logits, plus the argmax of every position; the passage's
  perplexity under the same model.

Requirements (pip, in a virtual environment such as /work/venv):
    pip install numpy gguf transformers accelerate torch
  (transformers needs accelerate to load GGUF files. PyPI's default `torch` wheel pulls the CUDA
  libraries, ~4 GB, about 5 minutes here; a CPU build works the same.)
and the Python binding of llama.cpp, `llama_cpp` from llama-cpp-python==0.3.36, either
    CMAKE_ARGS="-DGGML_NATIVE=ON" pip install llama-cpp-python==0.3.36   (builds llama.cpp)
or, reusing a llama.cpp built from the vendor/llama.cpp tree of that sdist with
-DBUILD_SHARED_LIBS=ON: PYTHONPATH=<sdist dir> LLAMA_CPP_LIB_PATH=<build>/bin, plus
`pip install numpy jinja2 diskcache typing-extensions`.

Run (from the repository root):
    python xtask/python/make_gguf_fixtures.py --model PATH/SmolLM2-135M-Instruct.Q4_1.gguf \
        [--make-passage ../shared/corpora/en-gutenberg] \
        [--llama-perplexity /work/llama.cpp-build/bin/llama-perplexity] [--only llama|transformers]

Deterministic: greedy argmax and fixed inputs; llama.cpp runs with 2 threads (its float sums
depend on the thread count only through the order of reductions, which can move the last bits).
"""

import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "..", "crates", "models", "tests", "data", "smollm2"))

PASSAGE_DOC = "pg11"
PASSAGE_START = "CHAPTER I."
PASSAGE_TOKENS = 2048
PASSAGE_SOURCE = (
    "Lewis Carroll, Alice's Adventures in Wonderland (1865), public domain: shared/corpora/en-gutenberg pg11 "
    "(GITenberg/Alice-s-Adventures-in-Wonderland_11 : 11-0.txt @ 7f18748e114b994d5d9454d5793581bc0b9cf9d7), "
    "whole paragraphs from 'CHAPTER I.' while the text stays within 2048 llama.cpp tokens"
)
N_CTX = 4096
N_THREADS = 2

TENSORS = [
    "model.embed_tokens.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.0.self_attn.k_proj.weight",
    "model.layers.0.self_attn.v_proj.weight",
    "model.layers.0.mlp.down_proj.weight",
    "model.layers.29.input_layernorm.weight",
    "model.norm.weight",
]

# Logits recorded at these ids for every prompt: the three special tokens (<|endoftext|>,
# <|im_start|>, <|im_end|>), the newline byte token, then ids spread over the vocabulary.
FIXED_IDS = [0, 1, 2, 198, 17, 216, 260, 314, 1000, 2000, 4096, 8192, 16384, 32768, 40000, 49151]

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "Once upon a time, in a small village,",
    "1, 2, 3, 4, 5,",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the boiling point of water?<|im_end|>\n<|im_start|>assistant\n",
    "Київ є столицею",
    "The quick brown fox jumps over the lazy",
    "Speculative decoding makes language models faster by",
]

TOKENIZE_STRINGS = [
    ("english", "Hello, world! This is a simple English sentence.", False),
    ("code", "def add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n\treturn a + b  # tab\n", False),
    ("digits", "12345", False),
    ("ukrainian", "Привіт, світе! Як справи?", False),
    ("emoji", "I love 🦀 and 🐍! 👍🏽", False),
    ("chatml_special", "<|im_start|>user\nHi<|im_end|>\n", True),
    ("chatml_plain", "<|im_start|>user\nHi<|im_end|>\n", False),
    ("spaces", "  leading and   multiple spaces\n\n\nnewlines", False),
]


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def write_json(path, value):
    text = json.dumps(value, ensure_ascii=False, indent=1)
    # Lists of numbers on one line each: readable diffs without a line per number.
    text = re.sub(r"\[\s*\n\s*([-0-9.e,\s]*?)\s*\]", lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
        f.write("\n")
    os.replace(path + ".tmp", path)
    log(f"wrote {path} ({os.path.getsize(path)} bytes)")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_info(path):
    return {"file": os.path.basename(path), "sha256": sha256_file(path), "bytes": os.path.getsize(path)}


def r(x, digits=5):
    return round(float(x), digits)


def log_softmax(logits):
    """Row-wise log-softmax in float64."""
    z = logits.astype(np.float64)
    m = z.max(axis=-1, keepdims=True)
    return z - (m + np.log(np.exp(z - m).sum(axis=-1, keepdims=True)))


def logsumexp(row):
    z = row.astype(np.float64)
    m = z.max()
    return float(m + np.log(np.exp(z - m).sum()))


def teacher_forced(logits, ids):
    """Argmax, top-1 margin and NLL of every position; perplexity over positions 1..n-1."""
    order = np.argsort(-logits, axis=-1, kind="stable")[:, :2]
    argmax = order[:, 0]
    rows = np.arange(len(ids))
    margin = logits[rows, order[:, 0]] - logits[rows, order[:, 1]]
    lp = log_softmax(logits)
    # Position i's logits predict token i+1; the first token has no prediction.
    nll = -lp[rows[:-1], np.asarray(ids[1:])]
    return {
        "argmax": [int(a) for a in argmax],
        "top1_margin": [r(m, 4) for m in margin],
        "nll": [r(x) for x in nll],
        "mean_nll": float(nll.mean()),
        "perplexity": float(math.exp(nll.mean())),
    }


def last_position(logits_row):
    top = np.argsort(-logits_row, kind="stable")[:64]
    return {
        "top64": [[int(i), float(logits_row[i])] for i in top],
        "logsumexp": logsumexp(logits_row),
        "fixed": [float(logits_row[i]) for i in FIXED_IDS],
    }


def make_passage(corpus_dir, count_tokens):
    with open(os.path.join(corpus_dir, "gutenberg_en.index.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    start, length = next((int(r[3]), int(r[4])) for r in rows if r[0] == PASSAGE_DOC)
    with open(os.path.join(corpus_dir, "gutenberg_en.txt"), "rb") as f:
        f.seek(start)
        book = f.read(length).decode("utf-8")
    book = book[book.index(PASSAGE_START) :]
    paragraphs = re.split(r"\n\n+", book)
    kept = []
    for paragraph in paragraphs:
        candidate = "\n\n".join(kept + [paragraph])
        if count_tokens(candidate) > PASSAGE_TOKENS:
            break
        kept.append(paragraph)
    return "\n\n".join(kept) + "\n"


def load_llama(model_path):
    from llama_cpp import Llama

    return Llama(
        model_path=model_path,
        n_ctx=N_CTX,
        n_batch=N_CTX,
        n_ubatch=512,
        n_threads=N_THREADS,
        n_threads_batch=N_THREADS,
        logits_all=True,
        verbose=False,
    )


def llama_logits(llm, ids):
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float32)


def run_llama(args, passage, prompts_ids):
    import llama_cpp

    llm = load_llama(args.model)
    ids = llm.tokenize(passage.encode("utf-8"), add_bos=False, special=False)
    log(f"llama.cpp: passage of {len(passage)} chars -> {len(ids)} tokens")
    assert llm.detokenize(ids).decode("utf-8") == passage, "llama.cpp does not round-trip the passage"
    logits = llama_logits(llm, ids)
    forced = teacher_forced(logits, ids)
    log(f"llama.cpp: passage perplexity {forced['perplexity']:.4f}")
    prompts = []
    for text, pids in zip(PROMPTS, prompts_ids):
        own = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        pl = llama_logits(llm, pids)
        prompts.append(
            {
                "text": text,
                "ids": pids,
                "llama_cpp_ids_agree": own == pids,
                "argmax": [int(a) for a in pl.argmax(axis=-1)],
                "last": last_position(pl[-1]),
            }
        )
    out = {
        "generator": "xtask/python/make_gguf_fixtures.py",
        "llama_cpp_python": llama_cpp.__version__,
        "model": model_info(args.model),
        "settings": {
            "n_ctx": N_CTX,
            "n_threads": N_THREADS,
            "add_bos": False,
            "logits": "all positions",
            "flash_attn": False,
            "kv_cache": "f16 keys and values (llama.cpp's default)",
            "note": "llama.cpp's CPU path multiplies Q4_1/Q8_0 weights by activations quantized to Q8_1/Q8_0, "
            "so its logits differ from an f32-activation implementation by more than rounding",
        },
        "passage": {
            "file": "passage.txt",
            "source": PASSAGE_SOURCE,
            "sha256": hashlib.sha256(passage.encode("utf-8")).hexdigest(),
            "n_tokens": len(ids),
            "ids": ids,
            "argmax": forced["argmax"],
            "top1_margin": forced["top1_margin"],
            "nll": forced["nll"],
            "perplexity": {
                "value": forced["perplexity"],
                "mean_nll": forced["mean_nll"],
                "definition": "exp of the mean over positions i = 1..n-1 (0-based) of -ln softmax(logits[i-1])[ids[i]], "
                "natural log, float64 log-softmax of llama.cpp's float32 logits; position 0 is not scored; "
                "nll[j] is the term of position j+1",
            },
        },
        "prompts": {"fixed_ids": FIXED_IDS, "items": prompts},
    }
    if args.llama_perplexity:
        out["llama_perplexity_tool"] = run_llama_perplexity(args, llm, ids)
    write_json(os.path.join(args.out, "llama_cpp.json"), out)

    tokenized = []
    for name, text, special in TOKENIZE_STRINGS:
        tids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        tokenized.append(
            {
                "name": name,
                "text": text,
                "parse_special": special,
                "ids": tids,
                "pieces": [llm.detokenize([t], special=True).decode("utf-8", errors="backslashreplace") for t in tids],
            }
        )
    write_json(
        os.path.join(args.out, "tokenize.json"),
        {
            "generator": "xtask/python/make_gguf_fixtures.py",
            "llama_cpp_python": llama_cpp.__version__,
            "model": model_info(args.model),
            "add_bos": False,
            "note": "pieces are each token detokenized alone; a byte that is part of a multi-byte character shows as \\xNN",
            "strings": tokenized,
        },
    )


def perplexity_context(n_tokens):
    """The largest power-of-two context (at most 2048) that llama-perplexity accepts: it needs at
    least two chunks' worth of tokens."""
    ctx = 2048
    while ctx > 16 and 2 * ctx > n_tokens:
        ctx //= 2
    return ctx


def chunked_perplexity(llm, ids, ctx):
    """llama-perplexity's figure recomputed with the binding: whole chunks of `ctx` tokens, each
    evaluated from an empty cache, scoring positions ctx/2 .. ctx-2 of each chunk (each predicting
    the next token)."""
    first = ctx // 2
    nll = []
    for start in range(0, len(ids) - ctx + 1, ctx):
        chunk = ids[start : start + ctx]
        lp = log_softmax(llama_logits(llm, chunk))
        nll.extend(-lp[j, chunk[j + 1]] for j in range(first, ctx - 1))
    return float(math.exp(np.mean(nll))), len(nll)


def run_llama_perplexity(args, llm, ids):
    ctx = perplexity_context(len(ids))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.dirname(args.llama_perplexity) + ":" + env.get("LD_LIBRARY_PATH", "")
    runs = []
    # The tool's default turns flash attention on for the CPU; the binding's default (used for
    # every other figure here) leaves it off. Both are recorded.
    for extra in [[], ["-fa", "off"]]:
        cmd = [args.llama_perplexity, "-m", args.model, "-f", os.path.join(args.out, "passage.txt"), "-c", str(ctx),
               "-b", str(ctx), "-t", str(N_THREADS)] + extra
        log("running " + " ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        text = proc.stdout + proc.stderr
        final = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", text)
        if proc.returncode != 0 or final is None:
            log(text[-2000:])
            raise SystemExit("llama-perplexity printed no final estimate")
        runs.append(
            {
                "command": " ".join(["llama-perplexity", "-m", "MODEL", "-f", "passage.txt"] + cmd[5:]),
                "final_estimate": float(final.group(1)),
                "final_estimate_stderr": float(final.group(2)),
                "chunk_running_ppl": [float(c) for c in re.findall(r"\[\d+\]([0-9.]+)", text)],
            }
        )
    replicated, scored = chunked_perplexity(llm, ids, ctx)
    return {
        "runs": runs,
        "replicated_with_the_binding": replicated,
        "positions_scored": scored,
        "definition": "llama-perplexity needs at least 2 * c tokens, splits them into whole chunks of c tokens, "
        "evaluates each from an empty cache (a BOS replaces the first token only when the vocabulary adds one, which "
        "SmolLM2's does not) and scores positions c/2 .. c-2 of each chunk, each predicting the next token; the "
        "figure is exp of the mean NLL over those positions. The first run is the tool's default (flash attention "
        "on for the CPU), the second matches the binding's settings; replicated_with_the_binding recomputes the "
        "figure that way with the binding",
    }


def run_transformers(args, passage, prompts_ids, passage_ids):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(N_THREADS)
    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(os.path.abspath(args.model)), gguf_file=os.path.basename(args.model), dtype=torch.float32
    )
    model.eval()
    state = model.state_dict()
    tensors = []
    for name in TENSORS:
        t = state[name].detach().to(torch.float32).contiguous().numpy()
        tensors.append(
            {
                "name": name,
                "shape": list(t.shape),
                "sha256_f32le": hashlib.sha256(t.astype("<f4").tobytes()).hexdigest(),
                "first8": [float(x) for x in t.reshape(-1)[:8]],
            }
        )
    prompts = []
    with torch.no_grad():
        for text, pids in zip(PROMPTS, prompts_ids):
            logits = model(torch.tensor([pids])).logits[0].to(torch.float32).numpy()
            prompts.append(
                {
                    "text": text,
                    "ids": pids,
                    "argmax": [int(a) for a in logits.argmax(axis=-1)],
                    "last": last_position(logits[-1]),
                }
            )
        passage_logits = model(torch.tensor([passage_ids])).logits[0].to(torch.float32).numpy()
    forced = teacher_forced(passage_logits, passage_ids)
    log(f"transformers: passage perplexity {forced['perplexity']:.4f}")
    write_json(
        os.path.join(args.out, "transformers.json"),
        {
            "generator": "xtask/python/make_gguf_fixtures.py",
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "model": model_info(args.model),
            "load": "AutoModelForCausalLM.from_pretrained(dir, gguf_file=name, dtype=torch.float32): every tensor "
            "dequantized to f32; q_proj/k_proj un-permuted from GGUF's rotary layout back to Hugging Face's",
            "tensors": {
                "layout": "row-major as transformers holds them ([out, in] for Linear weights); sha256 of the "
                "little-endian f32 bytes",
                "items": tensors,
            },
            "prompts": {
                "fixed_ids": FIXED_IDS,
                "note": "ids are llama.cpp's tokenization with special tokens parsed and no BOS; 'last' is the last "
                "position's logits: top64 [id, value] pairs by value, logsumexp (float64), and the values at fixed_ids",
                "items": prompts,
            },
            "passage": {
                "ids": "as in llama_cpp.json",
                "argmax": forced["argmax"],
                "perplexity": forced["perplexity"],
                "mean_nll": forced["mean_nll"],
                "definition": "as in llama_cpp.json",
            },
        },
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--make-passage", metavar="CORPUS_DIR")
    parser.add_argument("--llama-perplexity", metavar="BIN")
    parser.add_argument("--only", choices=["llama", "transformers"])
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    passage_path = os.path.join(args.out, "passage.txt")

    if args.make_passage:
        llm = load_llama(args.model)
        passage = make_passage(args.make_passage, lambda s: len(llm.tokenize(s.encode("utf-8"), add_bos=False)))
        del llm
        with open(passage_path, "w", encoding="utf-8") as f:
            f.write(passage)
        log(f"wrote {passage_path} ({len(passage)} chars)")
    with open(passage_path, encoding="utf-8") as f:
        passage = f.read()

    if args.only != "transformers":
        llm = load_llama(args.model)
        prompts_ids = [llm.tokenize(p.encode("utf-8"), add_bos=False, special=True) for p in PROMPTS]
        del llm
        run_llama(args, passage, prompts_ids)
    if args.only != "llama":
        with open(os.path.join(args.out, "llama_cpp.json"), encoding="utf-8") as f:
            reference = json.load(f)
        prompts_ids = [item["ids"] for item in reference["prompts"]["items"]]
        run_transformers(args, passage, prompts_ids, reference["passage"]["ids"])


if __name__ == "__main__":
    main()
