//! A tokenizer together with its id → token table, the input of every map and statistic.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokenizers::Tokenizer;

use crate::{Error, Fingerprint, SurfaceStyle};

/// How a token entered the vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    /// A token of the model's own vocabulary (BPE, WordPiece, Unigram, …).
    Normal,
    /// An added token that is not special: matched before the model runs, decoded as text.
    Added,
    /// A special (control) token such as `<s>` or `<|endoftext|>`: never part of ordinary text.
    Special,
}

impl TokenKind {
    /// The byte that stands for this kind in the canonical form hashed by [`Fingerprint`].
    fn canonical_byte(self) -> u8 {
        match self {
            TokenKind::Normal => 0,
            TokenKind::Added => 1,
            TokenKind::Special => 2,
        }
    }
}

/// One entry of a vocabulary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The token's string exactly as the tokenizer stores it (`Ġthe`, `▁the`, `##ing`, `<0x0A>`).
    pub raw: String,
    /// Whether the token is a normal, added or special one.
    pub kind: TokenKind,
}

/// A loaded Hugging Face tokenizer and its canonical id → token table.
///
/// The table is read once, at load time, so that maps and statistics index plain vectors instead
/// of hashing strings through the tokenizer for every id.
#[derive(Clone)]
pub struct Vocabulary {
    name: String,
    tokenizer: Tokenizer,
    /// Indexed by id; `None` where no token has that id (a hole in the id space).
    tokens: Vec<Option<Token>>,
    fingerprint: Fingerprint,
    style: SurfaceStyle,
    /// Every token's byte surface, concatenated in id order; id `i` owns
    /// `surface_bytes[surface_offsets[i]..surface_offsets[i + 1]]` (empty for a hole).
    surface_bytes: Vec<u8>,
    surface_offsets: Vec<usize>,
    /// Whether each id is a byte-fallback token `<0xNN>`.
    byte_fallback: Vec<bool>,
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary")
            .field("name", &self.name)
            .field("len", &self.tokens.len())
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl Vocabulary {
    /// Loads a Hugging Face `tokenizer.json`.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read, [`Error::Tokenizer`] when it is not a tokenizer
    /// the `tokenizers` crate understands, [`Error::EmptyVocabulary`] when it has no tokens.
    pub fn from_file(path: &Path) -> Result<Vocabulary, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        Vocabulary::from_bytes(&bytes, path)
    }

    /// Parses the bytes of a `tokenizer.json` already in memory; `path` names it in errors and
    /// reports.
    ///
    /// # Errors
    /// As [`Vocabulary::from_file`], without [`Error::Io`].
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Vocabulary, Error> {
        let refused = |message: String| Error::Tokenizer { path: path.to_path_buf(), message };
        // The `tokenizers` crate panics ("Helper") on some malformed JSON inside a section (its
        // `decoder` deserializer unwraps), so the syntax is checked first, by serde_json alone.
        serde_json::from_slice::<anyspec_core::artifact::JsonSyntax>(bytes)
            .map_err(|err| refused(format!("the file is not valid JSON ({err})")))?;
        let tokenizer = Tokenizer::from_bytes(bytes).map_err(|err| refused(err.to_string()))?;
        Vocabulary::from_tokenizer(tokenizer, path.display().to_string())
            .map_err(|err| err.with_path(path.to_path_buf()))
    }

    /// Wraps an already constructed tokenizer; `name` appears in error messages and reports.
    ///
    /// # Errors
    /// [`Error::EmptyVocabulary`] when the tokenizer has no tokens.
    pub fn from_tokenizer(tokenizer: Tokenizer, name: impl Into<String>) -> Result<Vocabulary, Error> {
        let name = name.into();
        let model_vocab = tokenizers::Model::get_vocab(tokenizer.get_model());
        let added = tokenizer.get_added_tokens_decoder();
        let max_id = model_vocab.values().chain(added.keys()).copied().max();
        let Some(max_id) = max_id else {
            return Err(Error::EmptyVocabulary { path: PathBuf::from(name) });
        };
        // The id table is indexed by id: an id of 4 billion in a file of ten tokens would ask for
        // 128 GB. Real tokenizers number their tokens densely (a few reserved holes at most).
        let token_count = model_vocab.len() + added.len();
        let limit = token_count.saturating_mul(4).saturating_add(1 << 16);
        if max_id as usize >= limit {
            return Err(Error::SparseIds { path: PathBuf::from(name), max_id, tokens: token_count, limit });
        }
        let mut tokens: Vec<Option<Token>> = vec![None; max_id as usize + 1];
        for (raw, id) in model_vocab {
            tokens[id as usize] = Some(Token { raw, kind: TokenKind::Normal });
        }
        // Added tokens override the model's entry for the same id: GPT-2's `<|endoftext|>` is in
        // both, and it is the added-token declaration that says it is special.
        for (id, token) in added {
            let kind = if token.special { TokenKind::Special } else { TokenKind::Added };
            tokens[id as usize] = Some(Token { raw: token.content, kind });
        }
        let fingerprint = Fingerprint::of_canonical(
            tokens.iter().map(|slot| slot.as_ref().map(|t| (t.raw.as_str(), t.kind.canonical_byte()))),
        );
        let style = SurfaceStyle::detect(&tokenizer);
        let mut surface_bytes = Vec::new();
        let mut surface_offsets = Vec::with_capacity(tokens.len() + 1);
        let mut byte_fallback = Vec::with_capacity(tokens.len());
        surface_offsets.push(0);
        for slot in &tokens {
            let is_byte = match slot {
                Some(token) => style.surface_into(&token.raw, token.kind, &mut surface_bytes),
                None => false,
            };
            byte_fallback.push(is_byte);
            surface_offsets.push(surface_bytes.len());
        }
        Ok(Vocabulary { name, tokenizer, tokens, fingerprint, style, surface_bytes, surface_offsets, byte_fallback })
    }

    /// The tokenizer, for encoding and decoding text.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The size of the id space: one more than the largest id. Id arrays (maps, logits) have this
    /// length. Equal to [`Vocabulary::token_count`] unless some ids are unused.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Always false: a vocabulary without tokens is refused at load time. Present because a type
    /// with `len` is expected to have it.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The number of ids that carry a token.
    pub fn token_count(&self) -> usize {
        self.tokens.iter().filter(|t| t.is_some()).count()
    }

    /// The fingerprint of the canonical vocabulary (see [`Fingerprint`]).
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The name given at load time (the file path for [`Vocabulary::from_file`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The token with this id, if any.
    pub fn token(&self, id: u32) -> Option<&Token> {
        self.tokens.get(id as usize).and_then(Option::as_ref)
    }

    /// Every `(id, token)` in id order, skipping unused ids.
    pub fn tokens(&self) -> impl Iterator<Item = (u32, &Token)> + '_ {
        self.tokens.iter().enumerate().filter_map(|(id, t)| t.as_ref().map(|t| (id as u32, t)))
    }

    /// How this tokenizer spells text in its tokens.
    pub fn style(&self) -> &SurfaceStyle {
        &self.style
    }

    /// The bytes token `id` contributes to decoded text (see [`SurfaceStyle`]): `Ġthe`, `▁the`
    /// and a word-initial WordPiece `the` all give ` the`, `<0x0A>` gives a newline. `None` for
    /// an unused id.
    pub fn surface(&self, id: u32) -> Option<&[u8]> {
        self.token(id)?;
        let id = id as usize;
        Some(&self.surface_bytes[self.surface_offsets[id]..self.surface_offsets[id + 1]])
    }

    /// The byte surface of every token that can appear in text, by id: `None` for special
    /// tokens (`<|endoftext|>`, `<s>`) and unused ids. This is the string space of the
    /// string-level methods (SLRS spells target tokens out of these bytes).
    pub fn text_surfaces(&self) -> Vec<Option<&[u8]>> {
        (0..self.len() as u32)
            .map(|id| self.token(id).filter(|t| t.kind != TokenKind::Special).and_then(|_| self.surface(id)))
            .collect()
    }

    /// Whether token `id` is a SentencePiece byte-fallback token `<0xNN>`.
    pub fn is_byte_fallback(&self, id: u32) -> bool {
        self.byte_fallback.get(id as usize).copied().unwrap_or(false)
    }
}
