//! Vocabulary maps: which target token and which drafter token are "the same token".

use std::fmt;
use std::str::FromStr;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::{Error, Fingerprint, TokenKind, Vocabulary};

/// Marks an id with no counterpart in the other vocabulary: `anyspec_core`'s
/// `projection::ABSENT` (`u32::MAX`), so the arrays can be handed to its projections unchanged.
pub const ABSENT: u32 = anyspec_core::projection::ABSENT;

/// When a target token and a drafter token count as the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchMode {
    /// Equal token strings, special and added tokens included. This is what the paper measured
    /// (its Table 5; the authors' code intersects the `get_vocab()` keys); across tokenizer
    /// families it misses every pair spelled differently, such as `Ġthe` and `▁the`.
    Raw,
    /// Equal byte surfaces (see [`crate::SurfaceStyle`]), special tokens excluded: two tokens
    /// match when they stand for the same bytes of text, which is what token-level intersection
    /// (TLI) needs to accept a drafted token.
    #[default]
    Bytes,
}

impl MatchMode {
    /// The lowercase name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            MatchMode::Raw => "raw",
            MatchMode::Bytes => "bytes",
        }
    }
}

impl fmt::Display for MatchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MatchMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "raw" => Ok(MatchMode::Raw),
            "bytes" => Ok(MatchMode::Bytes),
            other => Err(Error::UnknownMatchMode { value: other.to_string() }),
        }
    }
}

/// One side of a map: which tokenizer and how large its id space is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapSide {
    /// The fingerprint of the tokenizer's vocabulary.
    pub fingerprint: Fingerprint,
    /// The size of the id space (the length of the array indexed by this side's ids).
    pub len: usize,
    /// The number of ids that carry a token (added and special tokens included).
    pub token_count: usize,
    /// Ids that share their key (string or surface) with a preferred id of the same vocabulary
    /// and so are left unmatched.
    pub collisions: usize,
    /// Ids that take no part in matching: special tokens in `bytes` mode, and tokens whose
    /// surface is empty.
    pub excluded: usize,
}

/// A one-to-one pairing of target and drafter tokens, as two id arrays.
///
/// `target_to_drafter[t]` is the drafter id paired with target token `t`, or [`ABSENT`];
/// `drafter_to_target` is its inverse. Every pair is mutual, so `|T ∩ D|` is the number of
/// entries that are not [`ABSENT`] in either array.
///
/// Where several tokens of one vocabulary share a key (SentencePiece's `▁` and `<0x20>` are both
/// a space) only one of them is paired, chosen deterministically: ordinary tokens before
/// byte-fallback tokens before added tokens before special tokens, then the lowest id. The
/// others count as collisions. Pairing the ordinary token keeps the pair the drafter actually
/// samples, and one-to-one maps are what a projection of probabilities needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VocabMap {
    pub(crate) mode: MatchMode,
    pub(crate) target: MapSide,
    pub(crate) drafter: MapSide,
    pub(crate) target_to_drafter: Vec<u32>,
    pub(crate) drafter_to_target: Vec<u32>,
}

impl VocabMap {
    /// Pairs the tokens of `target` and `drafter` that match under `mode`.
    pub fn build(target: &Vocabulary, drafter: &Vocabulary, mode: MatchMode) -> VocabMap {
        let (target_keys, target_side) = Keys::of(target, mode);
        let (drafter_keys, drafter_side) = Keys::of(drafter, mode);
        let mut target_to_drafter = vec![ABSENT; target.len()];
        let mut drafter_to_target = vec![ABSENT; drafter.len()];
        for (key, &t) in &target_keys.preferred {
            if let Some(&d) = drafter_keys.preferred.get(key) {
                target_to_drafter[t as usize] = d;
                drafter_to_target[d as usize] = t;
            }
        }
        VocabMap { mode, target: target_side, drafter: drafter_side, target_to_drafter, drafter_to_target }
    }

    /// How tokens were matched.
    pub fn mode(&self) -> MatchMode {
        self.mode
    }

    /// The target side: fingerprint, sizes, collisions.
    pub fn target(&self) -> &MapSide {
        &self.target
    }

    /// The drafter side: fingerprint, sizes, collisions.
    pub fn drafter(&self) -> &MapSide {
        &self.drafter
    }

    /// `|T ∩ D|`: the number of paired tokens.
    pub fn intersection(&self) -> usize {
        self.target_to_drafter.iter().filter(|&&d| d != ABSENT).count()
    }

    /// `target_to_drafter[t]`: the drafter id paired with target token `t`, or [`ABSENT`].
    pub fn target_to_drafter(&self) -> &[u32] {
        &self.target_to_drafter
    }

    /// `drafter_to_target[d]`: the target id paired with drafter token `d`, or [`ABSENT`]. This
    /// is the array `anyspec_core`'s token-level intersection projection takes.
    pub fn drafter_to_target(&self) -> &[u32] {
        &self.drafter_to_target
    }

    /// The drafter → target pairing as `anyspec_core`'s [`IdMap`](anyspec_core::projection::IdMap),
    /// the input of its union, TLI and RDK projections.
    ///
    /// # Errors
    /// [`Error::InvalidMap`] if `anyspec_core` rejects the arrays, which cannot happen for a map
    /// built or loaded by this crate (both check that the pairing is one-to-one).
    pub fn id_map(&self) -> Result<anyspec_core::projection::IdMap, Error> {
        anyspec_core::projection::IdMap::new(self.drafter_to_target.clone(), self.target.len)
            .map_err(|err| Error::InvalidMap { path: std::path::PathBuf::from("<in memory>"), reason: err.to_string() })
    }

    /// The drafter id paired with target token `t`, if any.
    pub fn drafter_of(&self, target_token: u32) -> Option<u32> {
        self.target_to_drafter.get(target_token as usize).copied().filter(|&d| d != ABSENT)
    }

    /// The target id paired with drafter token `d`, if any.
    pub fn target_of(&self, drafter_token: u32) -> Option<u32> {
        self.drafter_to_target.get(drafter_token as usize).copied().filter(|&t| t != ABSENT)
    }

    /// Checks the invariants a map read from disk must satisfy: array lengths equal the sizes,
    /// ids are in range, and the two arrays are inverse to each other.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.target_to_drafter.len() != self.target.len {
            return Err(format!(
                "the target → drafter array has {} entries for {} target ids",
                self.target_to_drafter.len(),
                self.target.len
            ));
        }
        if self.drafter_to_target.len() != self.drafter.len {
            return Err(format!(
                "the drafter → target array has {} entries for {} drafter ids",
                self.drafter_to_target.len(),
                self.drafter.len
            ));
        }
        for (t, &d) in self.target_to_drafter.iter().enumerate() {
            if d != ABSENT && self.drafter_to_target.get(d as usize) != Some(&(t as u32)) {
                return Err(format!("target token {t} maps to drafter token {d}, which does not map back"));
            }
        }
        let paired_back = self.drafter_to_target.iter().filter(|&&t| t != ABSENT).count();
        if paired_back != self.intersection() {
            return Err(format!(
                "{paired_back} drafter tokens are paired but only {} target tokens",
                self.intersection()
            ));
        }
        Ok(())
    }
}

/// The preferred id of every key of one vocabulary.
struct Keys<'v> {
    /// Fx hashing: keys are short byte strings from a trusted vocabulary, where SipHash's
    /// flooding resistance buys nothing and costs half the build time.
    preferred: FxHashMap<&'v [u8], u32>,
}

impl<'v> Keys<'v> {
    fn of(vocab: &'v Vocabulary, mode: MatchMode) -> (Keys<'v>, MapSide) {
        let mut preferred: FxHashMap<&'v [u8], u32> =
            FxHashMap::with_capacity_and_hasher(vocab.len(), Default::default());
        let mut excluded = 0;
        let mut keyed = 0;
        for (id, token) in vocab.tokens() {
            let key = match mode {
                MatchMode::Raw => token.raw.as_bytes(),
                MatchMode::Bytes => {
                    let surface = vocab.surface(id).unwrap_or_default();
                    if token.kind == TokenKind::Special || surface.is_empty() {
                        excluded += 1;
                        continue;
                    }
                    surface
                }
            };
            keyed += 1;
            let rank = |id: u32| preference(vocab, id);
            preferred
                .entry(key)
                .and_modify(|current| {
                    if rank(id) < rank(*current) {
                        *current = id;
                    }
                })
                .or_insert(id);
        }
        let side = MapSide {
            fingerprint: vocab.fingerprint(),
            len: vocab.len(),
            token_count: vocab.token_count(),
            collisions: keyed - preferred.len(),
            excluded,
        };
        (Keys { preferred }, side)
    }
}

/// Which of several ids with the same key is paired: smaller is preferred.
fn preference(vocab: &Vocabulary, id: u32) -> (u8, u32) {
    let class = match vocab.token(id).map(|t| t.kind) {
        Some(TokenKind::Normal) if vocab.is_byte_fallback(id) => 1,
        Some(TokenKind::Normal) => 0,
        Some(TokenKind::Added) => 2,
        Some(TokenKind::Special) | None => 3,
    };
    (class, id)
}
