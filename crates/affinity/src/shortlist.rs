//! Frequency-ranked drafter shortlists (FR pruning, as in FR-Spec; the RDK paper's Algorithm 3
//! was not available to this project, so this is the well-defined version: rank by corpus
//! frequency, keep the top `m`).
//!
//! The drafter runs with its LM head restricted to the shortlist, so it can only propose those
//! tokens. A drafter that cannot propose its end-of-sequence token never stops a draft where the
//! text ends, so the end-of-sequence token is **forced in**: forced tokens take their place in the
//! shortlist first, and the `size − forced` most frequent other tokens fill the rest (ties broken
//! by the lower id, so tokens the corpus never uses come last, in id order). Which token ends a sequence is named by the caller, or recognised among the
//! special tokens by its conventional name ([`EOS_NAMES`]). With `keep_special`, every special
//! token is forced in as well.
//!
//! On disk (`format_version` 1):
//!
//! ```text
//! offset  size  field
//! 0       8     magic b"ASSHORTL"
//! 8       4     format version, u32 little-endian
//! 12      8     payload length n, u64 little-endian
//! 20      n     payload (bincode 2, standard configuration): drafter fingerprint and vocabulary
//!               size, parameters, corpus record, forced ids, kept ids (ascending) and their counts
//! 20 + n  32    SHA-256 of bytes 0 .. 20 + n
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use anyspec_core::Progress;
use anyspec_core::artifact::{ArtifactKind, MAX_PLAUSIBLE_VERSION};
use anyspec_dict_builder::CorpusOptions;
use anyspec_vocab_map::{Fingerprint, TokenKind, Vocabulary};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::tokenized::fold_tokenized;

/// The first bytes of every shortlist file.
pub const SHORTLIST_MAGIC: [u8; 8] = *b"ASSHORTL";
/// The format version this build writes and reads.
pub const SHORTLIST_FORMAT_VERSION: u32 = 1;
/// Special-token names recognised as end-of-sequence when none is named explicitly.
pub const EOS_NAMES: &[&str] =
    &["</s>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "<|im_end|>", "<eos>", "<|end|>", "[SEP]"];

/// The largest drafter vocabulary a shortlist file may declare (2^24 ids, as the acceptance
/// kernels allow): the file's size field is not trusted with an allocation beyond it.
pub const MAX_DRAFTER_VOCAB: usize = 1 << 24;
const HEADER_LEN: usize = 8 + 4 + 8;
/// The most bytes bincode may claim while decoding a payload. It allocates a string's length
/// before reading it, so a damaged length field asked for gigabytes (exabytes once) and aborted
/// the process; a shortlist of the largest drafter vocabulary needs under 100 MB.
const DECODE_LIMIT: usize = 1 << 28;
const CHECKSUM_LEN: usize = 32;

/// How often each drafter token occurs in a corpus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenFrequencies {
    counts: Vec<u64>,
}

impl TokenFrequencies {
    /// Frequencies from explicit counts, indexed by token id.
    pub fn from_counts(counts: Vec<u64>) -> Self {
        TokenFrequencies { counts }
    }

    /// Streams the corpus, tokenizes it with the vocabulary's tokenizer (no special tokens added)
    /// and counts every token id, on `threads` threads (0 = every core).
    ///
    /// # Errors
    /// Corpus and tokenizer errors.
    pub fn count_files(
        paths: &[PathBuf],
        options: &CorpusOptions,
        vocabulary: &Vocabulary,
        threads: usize,
        progress: &dyn Progress,
    ) -> Result<TokenFrequencies> {
        let n = vocabulary.len();
        let parts = fold_tokenized(
            paths,
            options,
            vocabulary.tokenizer(),
            threads,
            progress,
            || vec![0u64; n],
            |counts, ids| {
                for &id in ids {
                    let slot = counts.get_mut(id as usize).ok_or_else(|| {
                        Error::invalid("token id", "below the vocabulary size", format!("{id} (vocabulary of {n})"))
                    })?;
                    *slot += 1;
                }
                Ok(())
            },
        )?;
        let mut counts = vec![0u64; n];
        for part in parts {
            for (total, c) in counts.iter_mut().zip(part) {
                *total += c;
            }
        }
        Ok(TokenFrequencies { counts })
    }

    /// Occurrences of each token id.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Tokens counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Which token(s) end a sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EosRule {
    /// The special tokens whose content is one of [`EOS_NAMES`]; an error if there is none.
    Auto,
    /// These exact token strings.
    Named(Vec<String>),
}

/// Parameters of a shortlist build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShortlistParams {
    /// `m`, the number of drafter tokens kept (forced tokens included).
    pub size: usize,
    /// Force every special token in, not only the end-of-sequence token(s).
    pub keep_special: bool,
    /// How the end-of-sequence token is found.
    pub eos: EosRule,
}

/// A frequency-ranked shortlist of drafter tokens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shortlist {
    drafter_fingerprint: Fingerprint,
    drafter_size: usize,
    keep_special: bool,
    corpus: String,
    corpus_tokens: u64,
    covered_tokens: u64,
    eos: Vec<u32>,
    forced: Vec<u32>,
    ids: Vec<u32>,
}

impl Shortlist {
    /// Ranks the drafter's tokens by `frequencies` and keeps `params.size` of them, the
    /// end-of-sequence (and, with `keep_special`, every special) token forced in.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a size of 0 or above the vocabulary, or frequencies of
    /// another length; [`Error::NoEndOfSequence`] / [`Error::UnknownToken`] when the
    /// end-of-sequence token cannot be found; [`Error::ShortlistTooSmall`] when the forced tokens
    /// alone exceed the size; [`Error::EmptyCorpus`] when nothing was counted.
    pub fn build(
        vocabulary: &Vocabulary,
        frequencies: &TokenFrequencies,
        params: &ShortlistParams,
        corpus: &str,
    ) -> Result<Shortlist> {
        let n = vocabulary.len();
        if params.size == 0 || params.size > n {
            return Err(Error::invalid(
                "size",
                "in 1..=the drafter vocabulary size",
                format!("{} (vocabulary of {n})", params.size),
            ));
        }
        if frequencies.counts.len() != n {
            return Err(Error::invalid(
                "token frequencies",
                "counted with this drafter tokenizer",
                format!("{} counts for a vocabulary of {n}", frequencies.counts.len()),
            ));
        }
        if frequencies.total() == 0 {
            return Err(Error::EmptyCorpus { files: corpus.to_string() });
        }
        let eos = end_of_sequence(vocabulary, &params.eos)?;
        let mut forced = eos.clone();
        if params.keep_special {
            forced.extend(vocabulary.tokens().filter(|(_, t)| t.kind == TokenKind::Special).map(|(id, _)| id));
        }
        forced.sort_unstable();
        forced.dedup();
        if forced.len() > params.size {
            let what =
                if params.keep_special { "end-of-sequence and special tokens" } else { "end-of-sequence tokens" };
            return Err(Error::ShortlistTooSmall { size: params.size, forced: forced.len(), what: what.to_string() });
        }
        let mut ranked: Vec<u32> =
            vocabulary.tokens().map(|(id, _)| id).filter(|id| forced.binary_search(id).is_err()).collect();
        ranked.sort_unstable_by(|&a, &b| {
            frequencies.counts[b as usize].cmp(&frequencies.counts[a as usize]).then(a.cmp(&b))
        });
        let mut ids: Vec<u32> =
            forced.iter().copied().chain(ranked.into_iter().take(params.size - forced.len())).collect();
        ids.sort_unstable();
        let covered_tokens = ids.iter().map(|&id| frequencies.counts[id as usize]).sum();
        Ok(Shortlist {
            drafter_fingerprint: vocabulary.fingerprint(),
            drafter_size: n,
            keep_special: params.keep_special,
            corpus: corpus.to_string(),
            corpus_tokens: frequencies.total(),
            covered_tokens,
            eos,
            forced,
            ids,
        })
    }

    /// The kept drafter token ids, ascending.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Whether drafter token `id` is kept.
    pub fn contains(&self, id: u32) -> bool {
        self.ids.binary_search(&id).is_ok()
    }

    /// A mask over the drafter vocabulary: `true` where the token is kept.
    pub fn mask(&self) -> Vec<bool> {
        let mut mask = vec![false; self.drafter_size];
        for &id in &self.ids {
            mask[id as usize] = true;
        }
        mask
    }

    /// The end-of-sequence token id(s), all kept.
    pub fn eos(&self) -> &[u32] {
        &self.eos
    }

    /// Tokens forced in (end-of-sequence, and special tokens with `keep_special`), ascending.
    pub fn forced(&self) -> &[u32] {
        &self.forced
    }

    /// Fingerprint of the drafter tokenizer.
    pub fn drafter_fingerprint(&self) -> Fingerprint {
        self.drafter_fingerprint
    }

    /// Size of the drafter's id space.
    pub fn drafter_size(&self) -> usize {
        self.drafter_size
    }

    /// Whether every special token was forced in.
    pub fn keep_special(&self) -> bool {
        self.keep_special
    }

    /// The corpus files counted.
    pub fn corpus(&self) -> &str {
        &self.corpus
    }

    /// Tokens counted in the corpus.
    pub fn corpus_tokens(&self) -> u64 {
        self.corpus_tokens
    }

    /// Fraction of the corpus's tokens that are in the shortlist.
    pub fn coverage(&self) -> f64 {
        if self.corpus_tokens == 0 { 0.0 } else { self.covered_tokens as f64 / self.corpus_tokens as f64 }
    }

    /// The file's bytes.
    ///
    /// # Errors
    /// [`Error::Corrupt`] if bincode fails (it does not for shortlists this crate builds).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let payload = bincode::serde::encode_to_vec(self, bincode::config::standard())
            .map_err(|e| Error::corrupt(Path::new("<memory>"), e.to_string()))?;
        let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len() + CHECKSUM_LEN);
        bytes.extend_from_slice(&SHORTLIST_MAGIC);
        bytes.extend_from_slice(&SHORTLIST_FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&payload);
        let checksum = Sha256::digest(&bytes);
        bytes.extend_from_slice(&checksum);
        Ok(bytes)
    }

    /// Writes the shortlist to `path` atomically.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = self.to_bytes()?;
        anyspec_core::artifact::write_atomically(path, |w| w.write_all(&bytes)).map_err(Error::io("write", path))
    }

    /// Reads a shortlist and checks that it was built for the drafter tokenizer with fingerprint
    /// `expected_drafter`.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::NotAnArtifact`], [`Error::Version`], [`Error::Corrupt`] or
    /// [`Error::DropsEndOfSequence`] for a file that is not a sound shortlist, and
    /// [`Error::WrongTokenizer`] when it was built for another drafter tokenizer.
    pub fn load(path: &Path, expected_drafter: &Fingerprint) -> Result<Shortlist> {
        let shortlist = Shortlist::load_unchecked(path)?;
        if shortlist.drafter_fingerprint != *expected_drafter {
            return Err(Error::WrongTokenizer {
                path: path.to_path_buf(),
                role: "drafter",
                built_for: shortlist.drafter_fingerprint.to_string(),
                given: expected_drafter.to_string(),
            });
        }
        Ok(shortlist)
    }

    /// Reads a shortlist without comparing it with a tokenizer, to inspect it.
    ///
    /// # Errors
    /// As [`Shortlist::load`], except [`Error::WrongTokenizer`].
    pub fn load_unchecked(path: &Path) -> Result<Shortlist> {
        let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
        Shortlist::from_bytes(&bytes, path)
    }

    /// Parses a file's bytes; `path` only names the source in errors.
    ///
    /// # Errors
    /// As [`Shortlist::load_unchecked`].
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Shortlist> {
        let corrupt = |problem: String| Error::corrupt(path, problem);
        let magic_len = SHORTLIST_MAGIC.len();
        if bytes.len() < magic_len && SHORTLIST_MAGIC.starts_with(bytes) {
            return Err(corrupt(format!("truncated to {} bytes", bytes.len())));
        }
        if bytes.len() < magic_len || bytes[..magic_len] != SHORTLIST_MAGIC {
            return Err(Error::NotAnArtifact {
                path: path.to_path_buf(),
                expected: "an anyspec shortlist",
                found: ArtifactKind::describe(bytes),
            });
        }
        if bytes.len() < HEADER_LEN {
            return Err(corrupt(format!("truncated to {} bytes", bytes.len())));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or_default());
        if version > MAX_PLAUSIBLE_VERSION {
            return Err(corrupt(format!("its format version field reads {version}, which no anyspec writes")));
        }
        if version != SHORTLIST_FORMAT_VERSION {
            return Err(Error::Version {
                path: path.to_path_buf(),
                expected: SHORTLIST_FORMAT_VERSION,
                found: version.to_string(),
            });
        }
        let payload_len = u64::from_le_bytes(bytes[12..20].try_into().unwrap_or_default());
        let needed = usize::try_from(payload_len)
            .ok()
            .and_then(|n| n.checked_add(HEADER_LEN + CHECKSUM_LEN))
            .unwrap_or(usize::MAX);
        if bytes.len() != needed {
            return Err(corrupt(format!(
                "{} bytes where the header announces {needed}; truncated or padded",
                bytes.len()
            )));
        }
        let (content, stored) = bytes.split_at(needed - CHECKSUM_LEN);
        if Sha256::digest(content).as_slice() != stored {
            return Err(corrupt("checksum mismatch".to_string()));
        }
        let (shortlist, used): (Shortlist, usize) = bincode::serde::decode_from_slice(
            &content[HEADER_LEN..],
            bincode::config::standard().with_limit::<DECODE_LIMIT>(),
        )
        .map_err(|e| match e {
            bincode::error::DecodeError::LimitExceeded => {
                corrupt(format!("payload does not decode: a length field claims more than {} MiB", DECODE_LIMIT >> 20))
            }
            e => corrupt(format!("payload does not decode ({e})")),
        })?;
        if used != content.len() - HEADER_LEN {
            return Err(corrupt("unused bytes after the payload".to_string()));
        }
        shortlist.check(path)?;
        Ok(shortlist)
    }

    /// Invariants a sound file keeps: ids ascending, in range, the forced and end-of-sequence
    /// tokens among them.
    fn check(&self, path: &Path) -> Result<()> {
        let corrupt = |problem: String| Error::corrupt(path, problem);
        // The size is read from the file and `mask` allocates it: 2^60 would abort the process.
        if self.drafter_size == 0 || self.drafter_size > MAX_DRAFTER_VOCAB {
            return Err(corrupt(format!(
                "its drafter vocabulary size reads {}, outside 1..={MAX_DRAFTER_VOCAB} (no real tokenizer is larger)",
                self.drafter_size
            )));
        }
        if self.ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(corrupt("kept ids are not strictly ascending".to_string()));
        }
        if let Some(&bad) = self.ids.iter().find(|&&id| id as usize >= self.drafter_size) {
            return Err(corrupt(format!("kept id {bad} is outside the drafter vocabulary of {}", self.drafter_size)));
        }
        if let Some(&eos) = self.eos.iter().find(|&&id| !self.contains(id)) {
            return Err(Error::DropsEndOfSequence { path: path.to_path_buf(), token: eos });
        }
        if let Some(&f) = self.forced.iter().find(|&&id| !self.contains(id)) {
            return Err(corrupt(format!("forced token {f} is not kept")));
        }
        Ok(())
    }
}

/// Finds the end-of-sequence token id(s) by the rule.
fn end_of_sequence(vocabulary: &Vocabulary, rule: &EosRule) -> Result<Vec<u32>> {
    match rule {
        EosRule::Named(names) => names
            .iter()
            .map(|name| {
                vocabulary.tokens().find(|(_, t)| t.raw == *name).map(|(id, _)| id).ok_or_else(|| Error::UnknownToken {
                    token: name.clone(),
                    tokenizer: vocabulary.name().to_string(),
                })
            })
            .collect(),
        EosRule::Auto => {
            let found: Vec<u32> = vocabulary
                .tokens()
                .filter(|(_, t)| t.kind != TokenKind::Normal && EOS_NAMES.contains(&t.raw.as_str()))
                .map(|(id, _)| id)
                .collect();
            if found.is_empty() {
                Err(Error::NoEndOfSequence { tokenizer: vocabulary.name().to_string() })
            } else {
                Ok(found)
            }
        }
    }
}
