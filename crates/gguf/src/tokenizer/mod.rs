//! The tokenizer described by a GGUF file's `tokenizer.*` metadata, built as a Hugging Face
//! [`tokenizers::Tokenizer`].
//!
//! Two vocabulary kinds are supported, named by `tokenizer.ggml.model`:
//!
//! - `"gpt2"`: byte-level BPE from `tokenizer.ggml.tokens` and `tokenizer.ggml.merges`. The
//!   pre-tokenizer (how text is split into words before merging) is not stored in the file, only
//!   its name, `tokenizer.ggml.pre`; llama.cpp maps each name to regular expressions
//!   (`llama_vocab::impl::load` and `llm_tokenizer_bpe` in `src/llama-vocab.cpp`), and
//!   [`pre_tokenizer_for`] maps the same names to the pre-tokenizers of the models' own
//!   `tokenizer.json`, so that encoding matches the original model's tokenizer.
//! - `"llama"`: SentencePiece vocabularies with `tokenizer.ggml.scores`, built as transformers'
//!   GGUF converter builds them: merges derived from the scores (the `spm` module's docs say how).
//!
//! Tokens whose `tokenizer.ggml.token_type` is 3 (control) or 4 (user-defined) become added
//! tokens, matched in the text before pre-tokenization, so `<|im_start|>` encodes as one id.

mod chat;
mod spm;

use std::collections::HashMap;

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::template::{SpecialToken, TemplateProcessing};
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

pub use chat::apply_chat_template;

use crate::error::{Error, Result};
use crate::file::GgufFile;
use crate::value::MetadataValue;

/// llama.cpp's token types (`enum llama_token_type` / gguf-py's `TokenType`).
pub mod token_type {
    /// An ordinary token.
    pub const NORMAL: i64 = 1;
    /// The unknown token.
    pub const UNKNOWN: i64 = 2;
    /// A control token (`<|im_start|>`, `</s>`).
    pub const CONTROL: i64 = 3;
    /// A token added by the model's authors, matched verbatim in text.
    pub const USER_DEFINED: i64 = 4;
    /// An unused slot.
    pub const UNUSED: i64 = 5;
    /// A byte-fallback token (`<0x0A>`).
    pub const BYTE: i64 = 6;
}

/// The tokenizer of a GGUF file, with the special-token facts the runtime needs.
#[derive(Clone, Debug)]
pub struct GgufTokenizer {
    /// The tokenizer. `encode(text, true)` adds `bos` in front when `add_bos` is set.
    pub tokenizer: Tokenizer,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.eot_token_id`: the end of a chat turn, where it differs from `eos`
    /// (Llama 3's `<|eot_id|>`); generation should stop at either.
    pub eot: Option<u32>,
    /// `tokenizer.ggml.add_bos_token` (when absent: true for `"llama"` vocabularies, false for
    /// `"gpt2"` ones, as llama.cpp defaults).
    pub add_bos: bool,
    /// `tokenizer.chat_template`, the model's Jinja chat template (see [`apply_chat_template`]).
    pub chat_template: Option<String>,
}

/// The facts read from the metadata, shared by both vocabulary kinds.
pub(crate) struct Vocab<'a> {
    pub(crate) file: String,
    pub(crate) tokens: Vec<&'a str>,
    /// Token types, one per token (1, normal, when the file has none).
    pub(crate) types: Vec<i64>,
}

impl Vocab<'_> {
    pub(crate) fn error(&self, why: impl Into<String>) -> Error {
        Error::Tokenizer { file: self.file.clone(), why: why.into() }
    }

    /// Token string → id, keeping the first id of a string that appears twice.
    pub(crate) fn ids(&self) -> HashMap<String, u32> {
        let mut ids = HashMap::with_capacity(self.tokens.len());
        for (id, token) in self.tokens.iter().enumerate() {
            // The vocabulary's length was checked to fit in a u32.
            ids.entry((*token).to_string()).or_insert(id as u32);
        }
        ids
    }

    /// The control and user-defined tokens, as added tokens.
    pub(crate) fn added_tokens(&self) -> Vec<AddedToken> {
        self.tokens
            .iter()
            .zip(&self.types)
            .filter(|(_, ty)| matches!(**ty, token_type::CONTROL | token_type::USER_DEFINED))
            .map(|(token, ty)| AddedToken::from((*token).to_string(), *ty == token_type::CONTROL).normalized(false))
            .collect()
    }
}

/// Builds the tokenizer described by `file`'s metadata.
pub fn tokenizer_from_gguf(file: &GgufFile) -> Result<GgufTokenizer> {
    let label = file.label();
    let fail = |why: String| Error::Tokenizer { file: label.clone(), why };
    let model = file.get_str("tokenizer.ggml.model").map_err(|e| fail(e.to_string()))?;
    let tokens = string_array(file, "tokenizer.ggml.tokens")?;
    if tokens.is_empty() {
        return Err(fail("tokenizer.ggml.tokens is empty".to_string()));
    }
    if u32::try_from(tokens.len()).is_err() {
        return Err(fail(format!("{} tokens do not fit u32 ids", tokens.len())));
    }
    let types = match file.get("tokenizer.ggml.token_type") {
        None => vec![token_type::NORMAL; tokens.len()],
        Some(_) => {
            let items = file.get_array("tokenizer.ggml.token_type")?;
            if items.len() != tokens.len() {
                return Err(fail(format!(
                    "tokenizer.ggml.token_type has {} entries for {} tokens",
                    items.len(),
                    tokens.len()
                )));
            }
            items
                .iter()
                .map(|v| {
                    v.as_i64()
                        .ok_or_else(|| fail(format!("tokenizer.ggml.token_type holds {}, not integers", v.type_name())))
                })
                .collect::<Result<Vec<_>>>()?
        }
    };
    let vocab = Vocab { file: label.clone(), tokens, types };
    let n = vocab.tokens.len() as u64;
    let special_id = |key: &str| -> Result<Option<u32>> {
        match file.get(key) {
            None => Ok(None),
            Some(_) => {
                let id = file.get_u64(key)?;
                if id >= n {
                    return Err(fail(format!("{key} is {id} but the vocabulary has {n} tokens")));
                }
                Ok(Some(id as u32))
            }
        }
    };
    let bos = special_id("tokenizer.ggml.bos_token_id")?;
    let eos = special_id("tokenizer.ggml.eos_token_id")?;
    let eot = special_id("tokenizer.ggml.eot_token_id")?;
    let unk = special_id("tokenizer.ggml.unknown_token_id")?;
    let add_bos_default = model == "llama";
    let add_bos = match file.get("tokenizer.ggml.add_bos_token") {
        None => add_bos_default,
        Some(_) => file.get_bool("tokenizer.ggml.add_bos_token")?,
    };
    let mut tokenizer = match model {
        "gpt2" => {
            let pre = file.get_str("tokenizer.ggml.pre").unwrap_or("default");
            let merges = string_array(file, "tokenizer.ggml.merges")?;
            bpe_tokenizer(&vocab, &merges, pre)?
        }
        "llama" => {
            let scores = match file.get("tokenizer.ggml.scores") {
                None => None,
                Some(_) => Some(float_array(file, "tokenizer.ggml.scores")?),
            };
            let add_space_prefix = match file.get("tokenizer.ggml.add_space_prefix") {
                None => true,
                Some(_) => file.get_bool("tokenizer.ggml.add_space_prefix")?,
            };
            spm::spm_tokenizer(&vocab, scores.as_deref(), unk, add_space_prefix)?
        }
        other => {
            return Err(fail(format!(
                "tokenizer.ggml.model is '{other}'; anyspec builds 'gpt2' (byte-level BPE) and 'llama' (SentencePiece) vocabularies"
            )));
        }
    };
    tokenizer.add_special_tokens(&vocab.added_tokens());
    if let (true, Some(bos)) = (add_bos, bos) {
        // The template names the BOS token by a fixed id, so that its text (which the
        // template syntax would parse) cannot break the template.
        let bos_token = SpecialToken::new("bos".to_string(), vec![bos], vec![vocab.tokens[bos as usize].to_string()])
            .map_err(|e| build_error(&label, "the BOS template", e))?;
        let template = TemplateProcessing::builder()
            .try_single("bos $A")
            .and_then(|b| b.try_pair("bos $A bos $B"))
            .map_err(|e| build_error(&label, "the BOS template", e.into()))?
            .special_tokens(vec![bos_token])
            .build()
            .map_err(|e| build_error(&label, "the BOS template", e.into()))?;
        tokenizer.with_post_processor(Some(template));
    }
    let chat_template = match file.get("tokenizer.chat_template") {
        None => None,
        Some(_) => Some(file.get_str("tokenizer.chat_template")?.to_string()),
    };
    Ok(GgufTokenizer { tokenizer, bos, eos, eot, add_bos, chat_template })
}

/// [`tokenizer_from_gguf`], then checks that the vocabulary has `expected_vocab` tokens (the
/// rows of the model's embedding matrix): a mismatch means the tokenizer belongs to another
/// model, or the file is corrupt.
pub fn tokenizer_from_gguf_checked(file: &GgufFile, expected_vocab: usize) -> Result<GgufTokenizer> {
    let tok = tokenizer_from_gguf(file)?;
    check_vocab_size(file, &tok, expected_vocab)?;
    Ok(tok)
}

/// Checks that `tok` has `expected_vocab` tokens (see [`tokenizer_from_gguf_checked`]).
pub fn check_vocab_size(file: &GgufFile, tok: &GgufTokenizer, expected_vocab: usize) -> Result<()> {
    let found = tok.tokenizer.get_vocab_size(true);
    let tokens = file.get_array("tokenizer.ggml.tokens").map(<[MetadataValue]>::len).unwrap_or(found);
    if tokens != expected_vocab {
        return Err(Error::Tokenizer {
            file: file.label(),
            why: format!(
                "the vocabulary has {tokens} tokens but the model's embedding has {expected_vocab} rows; the tokenizer does not belong to this model"
            ),
        });
    }
    Ok(())
}

pub(crate) fn build_error(file: &str, what: &str, source: Box<dyn std::error::Error + Send + Sync>) -> Error {
    Error::TokenizerBuild { file: file.to_string(), what: what.to_string(), source }
}

fn string_array<'a>(file: &'a GgufFile, key: &str) -> Result<Vec<&'a str>> {
    typed_array(file, key, "an array of strings", MetadataValue::as_str)
}

fn float_array(file: &GgufFile, key: &str) -> Result<Vec<f32>> {
    typed_array(file, key, "an array of floats", MetadataValue::as_f32)
}

/// The array under `key` with every element converted by `convert`, or an error naming the
/// element type found when one does not convert.
fn typed_array<'a, T>(
    file: &'a GgufFile,
    key: &str,
    expected: &'static str,
    convert: impl Fn(&'a MetadataValue) -> Option<T>,
) -> Result<Vec<T>> {
    let items = file.get_array(key)?;
    items
        .iter()
        .map(|v| {
            convert(v).ok_or_else(|| Error::WrongType {
                file: file.label(),
                key: key.to_string(),
                expected,
                found: format!("an array of {}", v.type_name()),
            })
        })
        .collect()
}

/// Llama 3's split regex (its `tokenizer.json`; llama.cpp's `llama3` pre type).
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen 2's split regex: Llama 3's with single digits (llama.cpp's `qwen2` pre type).
const QWEN2_REGEX: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// llama.cpp's fallback for pre types it does not know (`default:` in `llm_tokenizer_bpe`).
const DEFAULT_REGEXES: &[&str] = &[
    r"[\p{P}\$\+<=>\^~\|]+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    r"\p{N}+",
    r"[0-9][0-9][0-9]",
];

/// Whether a pre type needs an NFC normalizer (Qwen 2's `tokenizer.json` has one).
fn needs_nfc(pre: &str) -> bool {
    matches!(pre, "qwen2" | "stablelm2")
}

/// The pre-tokenizer for llama.cpp pre type `pre` (`tokenizer.ggml.pre`), matching the model's
/// own `tokenizer.json`:
///
/// | pre type | pre-tokenizer |
/// |---|---|
/// | `gpt2`, `mpt`, `olmo`, `jais` | `ByteLevel(use_regex=true)` |
/// | `smollm`, `starcoder`, `refact`, `codeshell`, `command-r` | `Digits(individual)`, then `ByteLevel(use_regex=true)` |
/// | `llama3`, `llama-bpe`, `dbrx`, `smaug-bpe` | `Split(Llama 3 regex)`, then `ByteLevel` |
/// | `qwen2`, `stablelm2` | `Split(Qwen 2 regex)`, then `ByteLevel` (and an NFC normalizer) |
/// | anything else (`default`) | llama.cpp's default regexes in turn, then `ByteLevel` |
pub fn pre_tokenizer_for(pre: &str) -> Result<PreTokenizerWrapper, tokenizers::Error> {
    let byte_level_regex = ByteLevel::new(false, true, true);
    let byte_level_plain = ByteLevel::new(false, true, false);
    let split = |regex: &str| -> Result<PreTokenizerWrapper, tokenizers::Error> {
        Ok(Split::new(SplitPattern::Regex(regex.to_string()), SplitDelimiterBehavior::Isolated, false)?.into())
    };
    Ok(match pre {
        "gpt2" | "mpt" | "olmo" | "jais" => byte_level_regex.into(),
        "smollm" | "starcoder" | "refact" | "codeshell" | "command-r" => {
            Sequence::new(vec![Digits::new(true).into(), byte_level_regex.into()]).into()
        }
        "llama3" | "llama-bpe" | "dbrx" | "smaug-bpe" => {
            Sequence::new(vec![split(LLAMA3_REGEX)?, byte_level_plain.into()]).into()
        }
        "qwen2" | "stablelm2" => Sequence::new(vec![split(QWEN2_REGEX)?, byte_level_plain.into()]).into(),
        _ => {
            let mut steps = DEFAULT_REGEXES.iter().map(|r| split(r)).collect::<Result<Vec<_>, _>>()?;
            steps.push(byte_level_plain.into());
            Sequence::new(steps).into()
        }
    })
}

/// Splits a merge rule `"left right"` as llama.cpp does: at the first space after the first
/// character (a left part may itself be a space in vocabularies that are not byte-level).
fn split_merge(merge: &str) -> Option<(&str, &str)> {
    let first = merge.chars().next()?.len_utf8();
    let at = merge[first..].find(' ')? + first;
    let (left, right) = (&merge[..at], &merge[at + 1..]);
    (!right.is_empty()).then_some((left, right))
}

fn bpe_tokenizer(vocab: &Vocab<'_>, merges: &[&str], pre: &str) -> Result<Tokenizer> {
    let ids = vocab.ids();
    let mut pairs = Vec::with_capacity(merges.len());
    for (i, merge) in merges.iter().enumerate() {
        let Some((left, right)) = split_merge(merge) else {
            return Err(vocab.error(format!("merge {i} ({merge:?}) is not two tokens separated by a space")));
        };
        for part in [left, right] {
            if !ids.contains_key(part) {
                return Err(
                    vocab.error(format!("merge {i} ({merge:?}) names {part:?}, which is not in the vocabulary"))
                );
            }
        }
        if !ids.contains_key(&format!("{left}{right}")) {
            return Err(vocab.error(format!(
                "merge {i} ({merge:?}) makes {:?}, which is not in the vocabulary",
                format!("{left}{right}")
            )));
        }
        pairs.push((left.to_string(), right.to_string()));
    }
    // llama.cpp lets Llama 3 vocabularies skip merging for words that are whole tokens, as
    // their tokenizer.json does (`ignore_merges`).
    let ignore_merges = matches!(pre, "llama3" | "llama-bpe");
    let model = BPE::builder()
        .vocab_and_merges(ids.into_iter().collect::<tokenizers::models::bpe::Vocab>(), pairs)
        .ignore_merges(ignore_merges)
        .build()
        .map_err(|e| build_error(&vocab.file, "the BPE model", e))?;
    let mut tokenizer = Tokenizer::new(model);
    let pre_tokenizer = pre_tokenizer_for(pre).map_err(|e| build_error(&vocab.file, "the pre-tokenizer", e))?;
    tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
    if needs_nfc(pre) {
        tokenizer.with_normalizer(Some(NFC));
    }
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    Ok(tokenizer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_split_at_the_first_inner_space() {
        assert_eq!(split_merge("Ġ t"), Some(("Ġ", "t")));
        assert_eq!(split_merge("  x"), Some((" ", "x")));
        assert_eq!(split_merge("ab"), None);
        assert_eq!(split_merge("a "), None);
        assert_eq!(split_merge(""), None);
    }

    /// The words `pre` splits `text` into, in byte-level form (a space shows as `Ġ`).
    fn words(pre: &str, text: &str) -> Vec<String> {
        use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
        let mut s = PreTokenizedString::from(text);
        pre_tokenizer_for(pre).unwrap().pre_tokenize(&mut s).unwrap();
        s.get_splits(OffsetReferential::Original, OffsetType::Byte).into_iter().map(|(w, _, _)| w.to_string()).collect()
    }

    #[test]
    fn pre_types_split_digits_as_their_models_do() {
        assert_eq!(words("gpt2", "x 12345"), ["x", "Ġ12345"]);
        assert_eq!(words("smollm", "x 12345"), ["x", "Ġ", "1", "2", "3", "4", "5"]);
        assert_eq!(words("llama3", "x 12345"), ["x", "Ġ", "123", "45"]);
        assert_eq!(words("qwen2", "x 12"), ["x", "Ġ", "1", "2"]);
    }

    #[test]
    fn llama3_keeps_newlines_apart_and_attaches_punctuation_to_words() {
        assert_eq!(words("llama-bpe", "a\n\n b"), ["a", "ĊĊ", "Ġb"]);
        assert_eq!(words("llama3", ".Hello"), [".Hello"]);
        assert_eq!(words("gpt2", ".Hello"), [".", "Hello"]);
    }

    #[test]
    fn every_named_pre_type_builds() {
        for pre in ["gpt2", "smollm", "llama3", "llama-bpe", "qwen2", "default", "new-one"] {
            assert!(pre_tokenizer_for(pre).is_ok(), "{pre}");
        }
    }
}
