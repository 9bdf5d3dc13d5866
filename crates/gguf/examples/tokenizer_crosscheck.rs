//! Checks the tokenizers this crate builds from GGUF metadata against Hugging Face
//! `tokenizer.json` files: the vocabulary (and merges) of the `tokenizer.json` are written into
//! GGUF metadata the way llama.cpp's converter writes them, the tokenizer is rebuilt from that
//! metadata, and both encode every line (and every group of 7 lines) of the text files.
//!
//! ```text
//! cargo run --release -p anyspec-gguf --example tokenizer_crosscheck -- \
//!     ../shared/tokenizers/llama3/tokenizer.json llama-bpe ../shared/corpora/flores200-dev/ukr_Cyrl.dev
//! ```
//!
//! The second argument is the `tokenizer.ggml.pre` to test (`gpt2`, `smollm`, `llama-bpe`,
//! `qwen2`, ...), or `spm` for a SentencePiece vocabulary such as Llama 2's. A `tokenizer.json`
//! has no SentencePiece scores, so `spm` gives pieces the scores of Llama 2's `tokenizer.model`:
//! minus the id, with the whitespace piece `▁▁` last (-1e9).
#![allow(clippy::print_stdout)]
use anyspec_gguf::tokenizer::tokenizer_from_gguf;
use anyspec_gguf::{GgufFile, GgufWriter, MetadataValue};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        println!("usage: tokenizer_crosscheck TOKENIZER_JSON PRE_TYPE|spm TEXT_FILE...");
        std::process::exit(2);
    }
    let (json, mode) = (&args[1], &args[2]);
    let hf = tokenizers::Tokenizer::from_file(json).unwrap();
    let raw: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let n = hf.get_vocab_size(true);
    let vocab = hf.get_vocab(true);
    let mut tokens = vec![String::new(); n];
    for (t, id) in &vocab {
        tokens[*id as usize] = t.clone();
    }
    let mut types = vec![1i32; n];
    for a in raw["added_tokens"].as_array().unwrap() {
        let id = a["id"].as_u64().unwrap() as usize;
        types[id] = if a["special"].as_bool().unwrap() { 3 } else { 4 };
    }
    let mut w = GgufWriter::new();
    if mode == "spm" {
        types[0] = 2;
        for (i, t) in tokens.iter().enumerate() {
            if t.starts_with("<0x") && t.len() == 6 {
                types[i] = 6;
            }
        }
        let scores: Vec<MetadataValue> =
            (0..n).map(|i| MetadataValue::F32(if tokens[i] == "▁▁" { -1e9 } else { -(i as f32) })).collect();
        w.metadata("tokenizer.ggml.scores", MetadataValue::Array(scores));
        w.metadata("tokenizer.ggml.model", "llama".into())
            .metadata("tokenizer.ggml.unknown_token_id", MetadataValue::U32(0))
            .metadata("tokenizer.ggml.add_bos_token", false.into());
    } else {
        let merges: Vec<String> = raw["model"]["merges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| match m {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(p) => format!("{} {}", p[0].as_str().unwrap(), p[1].as_str().unwrap()),
                _ => panic!(),
            })
            .collect();
        w.metadata("tokenizer.ggml.model", "gpt2".into())
            .metadata("tokenizer.ggml.pre", mode.as_str().into())
            .metadata("tokenizer.ggml.merges", merges.into());
    }
    w.metadata("tokenizer.ggml.tokens", tokens.clone().into()).metadata(
        "tokenizer.ggml.token_type",
        MetadataValue::Array(types.iter().map(|&t| MetadataValue::I32(t)).collect()),
    );
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    let ours = tokenizer_from_gguf(&file).unwrap().tokenizer;
    let (mut same, mut diff) = (0, 0);
    for path in &args[3..] {
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = text.lines().take(3000).collect();
        let mut chunks: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        chunks.extend(lines.chunks(7).map(|c| c.join("\n")));
        for c in &chunks {
            let a = hf.encode(c.as_str(), false).unwrap();
            let b = ours.encode(c.as_str(), false).unwrap();
            if a.get_ids() == b.get_ids() {
                same += 1;
            } else {
                diff += 1;
                if diff <= 3 {
                    println!(
                        "DIFF {:?}\n hf  {:?}\n us  {:?}",
                        &c[..c.len().min(80)],
                        &a.get_tokens()[..a.len().min(20)],
                        &b.get_tokens()[..b.len().min(20)]
                    );
                }
            }
        }
    }
    println!("{mode}: {same} same, {diff} differ");
}
