//! The checkpoint's `tokenizer.json`, with a fingerprint of its vocabulary.
//!
//! # A tokenizer and the model's vocabulary
//! The model's embedding has `vocab_size` rows; the tokenizer names some of those ids.
//! - A tokenizer with ids at or beyond `vocab_size` is refused when a checkpoint loads it
//!   ([`crate::Checkpoint::tokenizer`]): it would feed the model ids it has no row for.
//! - A tokenizer with fewer ids is common and harmless (Qwen2 pads its 151,646 tokens to 151,936
//!   rows), so loading it says nothing; but an id it cannot decode is refused when it is decoded
//!   ([`TextTokenizer::decode`]), rather than silently left out of the text. A warning at load
//!   would fire on every padded checkpoint; the refusal fires only when the model actually
//!   produces such an id, which a trained model essentially never does.

use std::path::{Path, PathBuf};

use tokenizers::Tokenizer;

use crate::error::{Error, Result};

/// Parses the bytes of a `tokenizer.json`; the error is the message to show.
///
/// The `tokenizers` crate panics ("Helper") on some malformed JSON inside a section (its
/// `decoder` deserializer unwraps an error), so the syntax is checked first, by serde_json alone.
pub(crate) fn parse_tokenizer_json(bytes: &[u8]) -> std::result::Result<Tokenizer, String> {
    serde_json::from_slice::<anyspec_core::artifact::JsonSyntax>(bytes)
        .map_err(|e| format!("the file is not valid JSON ({e})"))?;
    let tokenizer = Tokenizer::from_bytes(bytes).map_err(|e| e.to_string())?;
    if let Some(processor) = tokenizer.get_post_processor() {
        let json = serde_json::to_value(processor).map_err(|e| e.to_string())?;
        check_templates(&json)?;
    }
    Ok(tokenizer)
}

/// Refuses a `TemplateProcessing` post-processor (anywhere in a `Sequence`) whose `single` or
/// `pair` template names a special token that its `special_tokens` table does not define: the
/// `tokenizers` crate checks this when such a processor is built in code but not when it is read
/// from JSON, and then panics ("no entry found for key") in every encode that adds special
/// tokens, as [`TextTokenizer::encode`] does.
fn check_templates(processor: &serde_json::Value) -> std::result::Result<(), String> {
    use serde_json::Value;
    match processor {
        Value::Object(fields) => {
            if fields.get("type").and_then(Value::as_str) == Some("TemplateProcessing") {
                let defined = fields.get("special_tokens").and_then(Value::as_object);
                for template in ["single", "pair"] {
                    for piece in fields.get(template).and_then(Value::as_array).into_iter().flatten() {
                        let special = piece.get("SpecialToken").and_then(|s| s.get("id")).and_then(Value::as_str);
                        if let Some(id) = special
                            && !defined.is_some_and(|d| d.contains_key(id))
                        {
                            return Err(format!(
                                "the post-processor's {template} template adds the special token {id:?}, which its \
                                 special_tokens table does not define"
                            ));
                        }
                    }
                }
            }
            fields.values().try_for_each(check_templates)
        }
        Value::Array(items) => items.iter().try_for_each(check_templates),
        _ => Ok(()),
    }
}

/// A Hugging Face tokenizer loaded from `tokenizer.json`.
#[derive(Clone, Debug)]
pub struct TextTokenizer {
    inner: Tokenizer,
    path: PathBuf,
    /// One past the largest id, added tokens included.
    id_end: usize,
}

impl TextTokenizer {
    /// Loads `tokenizer.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_owned(), source })?;
        let inner =
            parse_tokenizer_json(&bytes).map_err(|message| Error::Tokenizer { path: path.to_owned(), message })?;
        Ok(TextTokenizer::new(inner, path))
    }

    fn new(inner: Tokenizer, path: &Path) -> Self {
        let id_end = inner.get_vocab(true).values().max().map_or(0, |&id| id as usize + 1);
        TextTokenizer { inner, path: path.to_owned(), id_end }
    }

    /// Refuses a tokenizer with ids at or beyond the model's `vocab_size` embedding rows: it does
    /// not belong to the model, and the model would be fed ids it has no row for.
    pub(crate) fn check_fits(&self, vocab_size: usize) -> Result<()> {
        if self.id_end > vocab_size {
            return Err(Error::Tokenizer {
                path: self.path.clone(),
                message: format!(
                    "the tokenizer has ids up to {} but the model has {vocab_size} embedding rows (vocab_size); \
                     the tokenizer does not belong to these weights",
                    self.id_end - 1
                ),
            });
        }
        Ok(())
    }

    /// The tokenizer a GGUF file's metadata describes, refused when its ids do not fit the
    /// model's `vocab_size` embedding rows.
    pub fn from_gguf(file: &anyspec_gguf::GgufFile, path: &Path, vocab_size: usize) -> Result<Self> {
        let built = anyspec_gguf::tokenizer::tokenizer_from_gguf(file)
            .map_err(|e| Error::Tokenizer { path: path.to_owned(), message: e.to_string() })?;
        let tokenizer = TextTokenizer::new(built.tokenizer, path);
        tokenizer.check_fits(vocab_size)?;
        Ok(tokenizer)
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The wrapped `tokenizers` tokenizer, for callers that need more than encode/decode.
    pub fn inner(&self) -> &Tokenizer {
        &self.inner
    }

    /// Text → ids, with the special tokens the tokenizer's post-processor adds (a BOS for Llama).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self.inner.encode(text, true).map_err(|e| Error::Tokenization { message: e.to_string() })?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text → ids without the special tokens of the post-processor: for text that continues a
    /// sequence (no BOS in the middle of a stream).
    pub fn encode_continuation(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self.inner.encode(text, false).map_err(|e| Error::Tokenization { message: e.to_string() })?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Ids → text, without special tokens.
    ///
    /// # Errors
    /// [`Error::UndecodableToken`] for an id the tokenizer has no token for:
    /// it would otherwise vanish from the text without a word.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        if let Some(&token) = ids.iter().find(|&&id| self.inner.id_to_token(id).is_none()) {
            return Err(Error::UndecodableToken { token, path: self.path.clone(), id_end: self.id_end });
        }
        self.inner.decode(ids, true).map_err(|e| Error::Tokenization { message: e.to_string() })
    }

    /// One past the largest id the tokenizer knows, added tokens included.
    pub fn id_end(&self) -> usize {
        self.id_end
    }

    /// Number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// A 64-bit FNV-1a hash of every `(id, token)` pair in id order: two tokenizers with the same
    /// fingerprint map every id to the same token string, which is what a drafter that shares
    /// the target's ids needs.
    pub fn vocabulary_fingerprint(&self) -> u64 {
        let mut pairs: Vec<(u32, String)> = self.inner.get_vocab(true).into_iter().map(|(t, id)| (id, t)).collect();
        pairs.sort_unstable();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for &b in bytes {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        };
        for (id, token) in &pairs {
            feed(&id.to_le_bytes());
            feed(&(token.len() as u64).to_le_bytes());
            feed(token.as_bytes());
        }
        hash
    }
}
