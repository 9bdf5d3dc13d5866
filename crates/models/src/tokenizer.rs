//! The checkpoint's `tokenizer.json`, with a fingerprint of its vocabulary.

use std::path::{Path, PathBuf};

use tokenizers::Tokenizer;

use crate::error::{Error, Result};

/// A Hugging Face tokenizer loaded from `tokenizer.json`.
#[derive(Clone, Debug)]
pub struct TextTokenizer {
    inner: Tokenizer,
    path: PathBuf,
}

impl TextTokenizer {
    /// Loads `tokenizer.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let inner = Tokenizer::from_file(path)
            .map_err(|e| Error::Tokenizer { path: path.to_owned(), message: e.to_string() })?;
        Ok(TextTokenizer { inner, path: path.to_owned() })
    }

    /// The tokenizer a GGUF file's metadata describes, refused when its ids do not fit the
    /// model's `vocab_size` embedding rows.
    pub fn from_gguf(file: &anyspec_gguf::GgufFile, path: &Path, vocab_size: usize) -> Result<Self> {
        let built = anyspec_gguf::tokenizer::tokenizer_from_gguf(file)
            .map_err(|e| Error::Tokenizer { path: path.to_owned(), message: e.to_string() })?;
        let tokenizer = TextTokenizer { inner: built.tokenizer, path: path.to_owned() };
        let ids = tokenizer.vocab_size();
        if ids > vocab_size {
            return Err(Error::Tokenizer {
                path: path.to_owned(),
                message: format!(
                    "the tokenizer has {ids} tokens but the model has {vocab_size} embedding rows; \
                     the metadata does not belong to these weights"
                ),
            });
        }
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
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, true).map_err(|e| Error::Tokenization { message: e.to_string() })
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
