//! Training the three demo tokenizers with the `tokenizers` crate, deliberately of different
//! families so that the drafters exercise every kind of vocabulary bridge:
//!
//! - [`train_byte_level_bpe`]: GPT-2 style byte-level BPE (the target's, ~8k tokens);
//! - [`train_metaspace_bpe`]: SentencePiece/Llama style — `▁` marks word starts, BPE merges, and
//!   the 256 `<0xXX>` byte-fallback tokens for characters outside the learnt alphabet;
//! - [`byte_tokenizer`]: one token per byte (the SLRS drafter's: every drafter token is short,
//!   so the prefix probabilities ψ(t) of SLRS are cheap).
//!
//! All three put their end-of-document token at id 0 so that documents can be joined into one
//! training stream.

use std::str::FromStr;

use serde_json::{Value, json};
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::{AddedToken, Tokenizer};

use crate::error::{Error, Result};

/// The end-of-document token of the byte-level tokenizers (id 0).
pub const BYTE_LEVEL_EOS: &str = "<|endoftext|>";
/// The end-of-document token of the Metaspace tokenizer (id 0, SentencePiece's `</s>`).
pub const METASPACE_EOS: &str = "</s>";

/// A GPT-2 style byte-level BPE of `vocab_size` tokens (end-of-document token included) trained
/// on `texts`. Every string is encodable: the 256 byte symbols are in the initial alphabet.
pub fn train_byte_level_bpe<S: AsRef<str> + Send + Sync>(texts: &[S], vocab_size: usize) -> Result<Tokenizer> {
    check_vocab("vocab_size", vocab_size, 257 + 1)?;
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tokenizer.with_decoder(Some(ByteLevel::default()));
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(2)
        .show_progress(false)
        .special_tokens(vec![AddedToken::from(BYTE_LEVEL_EOS, true)])
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build()
        .into();
    tokenizer.train(&mut trainer, texts.iter()).map_err(Error::tokenizer("training the byte-level BPE"))?;
    Ok(tokenizer)
}

/// A SentencePiece-style BPE of `vocab_size` tokens in all: `</s>` (id 0), `<unk>`, `<s>`, the
/// 256 byte-fallback tokens `<0x00>..<0xFF>`, then the learnt pieces. Words start with `▁`; at
/// most `alphabet` distinct characters are learnt, rarer ones are spelt as UTF-8 bytes.
pub fn train_metaspace_bpe<S: AsRef<str> + Send + Sync>(
    texts: &[S],
    vocab_size: usize,
    alphabet: usize,
) -> Result<Tokenizer> {
    let reserved = 3 + 256;
    check_vocab("vocab_size", vocab_size, reserved + alphabet + 1)?;
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer.with_pre_tokenizer(Some(Metaspace::new('▁', PrependScheme::First, true)));
    let specials = [METASPACE_EOS, "<unk>", "<s>"].map(|t| AddedToken::from(t, true)).to_vec();
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(vocab_size - 256)
        .min_frequency(2)
        .show_progress(false)
        .special_tokens(specials)
        .limit_alphabet(alphabet)
        .build()
        .into();
    tokenizer.train(&mut trainer, texts.iter()).map_err(Error::tokenizer("training the Metaspace BPE"))?;

    // The trainer cannot add byte-fallback tokens, so they are spliced into the serialised
    // model after the three special tokens, shifting the learnt pieces up by 256.
    let text = tokenizer.to_string(false).map_err(Error::tokenizer("serialising"))?;
    let mut doc: Value = serde_json::from_str(&text).map_err(|e| splice_error(e.to_string()))?;
    let vocab = doc["model"]["vocab"].as_object().ok_or_else(|| splice_error("model.vocab is not a map".into()))?;
    let mut shifted = serde_json::Map::new();
    for (token, id) in vocab {
        let id = id.as_u64().ok_or_else(|| splice_error(format!("id of {token:?} is not a number")))?;
        if token.starts_with("<0x") && token.len() == 6 {
            return Err(splice_error(format!("the learnt piece {token:?} collides with a byte-fallback token")));
        }
        shifted.insert(token.clone(), json!(if id < 3 { id } else { id + 256 }));
    }
    for byte in 0..=255u32 {
        shifted.insert(format!("<0x{byte:02X}>"), json!(3 + byte));
    }
    doc["model"]["vocab"] = Value::Object(shifted);
    doc["model"]["byte_fallback"] = json!(true);
    doc["model"]["fuse_unk"] = json!(true);
    doc["model"]["unk_token"] = json!("<unk>");
    // Llama's decoder: `▁` back to spaces, bytes back to characters, then drop the space that
    // the pre-tokenizer prepended to the text.
    doc["decoder"] = json!({
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]
    });
    Tokenizer::from_str(&doc.to_string()).map_err(Error::tokenizer("rebuilding the Metaspace BPE with byte fallback"))
}

/// One token per byte: `<|endoftext|>` is id 0 and byte `b` is id `1 + b`, written with GPT-2's
/// printable byte alphabet so that the `ByteLevel` pre-tokenizer and decoder apply unchanged.
pub fn byte_tokenizer() -> Result<Tokenizer> {
    let mut vocab = serde_json::Map::new();
    vocab.insert(BYTE_LEVEL_EOS.into(), json!(0));
    for (byte, symbol) in gpt2_byte_symbols().into_iter().enumerate() {
        vocab.insert(symbol.to_string(), json!(1 + byte));
    }
    let doc = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [{
            "id": 0, "content": BYTE_LEVEL_EOS, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true
        }],
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": []
        }
    });
    Tokenizer::from_str(&doc.to_string()).map_err(Error::tokenizer("building the byte tokenizer"))
}

/// GPT-2's `bytes_to_unicode`: printable bytes stand for themselves, the others are shifted to
/// code points from U+0100 on, so every byte is one visible character.
fn gpt2_byte_symbols() -> [char; 256] {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut symbols = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        let code = if printable(b) {
            b
        } else {
            next += 1;
            next - 1
        };
        symbols[b as usize] = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
    }
    symbols
}

fn check_vocab(field: &'static str, value: usize, at_least: usize) -> Result<()> {
    if value < at_least {
        return Err(Error::InvalidSetting {
            field,
            value: value.to_string(),
            reason: "it is too small for the reserved tokens and alphabet; raise it",
        });
    }
    Ok(())
}

fn splice_error(message: String) -> Error {
    Error::Tokenizer { what: "adding byte fallback", message }
}

/// Encodes every text and joins them into one stream, each followed by `eos`.
pub fn encode_stream<S: AsRef<str> + Send + Sync>(tokenizer: &Tokenizer, texts: &[S], eos: u32) -> Result<Vec<u32>> {
    let encodings = tokenizer
        .encode_batch(texts.iter().map(|t| t.as_ref()).collect::<Vec<_>>(), false)
        .map_err(Error::tokenizer("encoding the corpus"))?;
    let mut stream = Vec::with_capacity(encodings.iter().map(|e| e.len() + 1).sum());
    for encoding in encodings {
        stream.extend_from_slice(encoding.get_ids());
        stream.push(eos);
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_symbols_are_distinct_and_keep_printable_ascii() {
        let symbols = gpt2_byte_symbols();
        let distinct: std::collections::HashSet<char> = symbols.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
        assert_eq!(symbols[b'a' as usize], 'a');
        assert_eq!(symbols[b' ' as usize], 'Ġ');
    }
}
