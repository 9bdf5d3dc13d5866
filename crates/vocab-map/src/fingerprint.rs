//! A stable identity for a vocabulary, independent of how its `tokenizer.json` is formatted.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The SHA-256 of a vocabulary's canonical form: every id in order with its token string and its
/// kind (normal, added, special).
///
/// Artifacts built for a tokenizer record its fingerprint and refuse to load against another one.
/// Hashing the canonical vocabulary rather than the file means that re-saving a tokenizer (other
/// key order, whitespace, escapes) keeps its fingerprint, while any change to an id, a token string
/// or a token's special flag changes it. Normalizers, pre-tokenizers and merges are deliberately
/// not part of it: the artifacts in this crate depend only on the id ↔ token table.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Fingerprint(pub [u8; 32]);

/// A version tag hashed first, so that a future change of the canonical form cannot collide with
/// fingerprints computed by this one.
const DOMAIN: &[u8] = b"anyspec-vocabulary-fingerprint-v1\0";

impl Fingerprint {
    /// Hashes a canonical vocabulary given as `(token, kind byte)` per id slot, `None` for an id
    /// that no token uses.
    pub(crate) fn of_canonical<'a>(slots: impl ExactSizeIterator<Item = Option<(&'a str, u8)>>) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(DOMAIN);
        hasher.update((slots.len() as u64).to_le_bytes());
        for slot in slots {
            match slot {
                None => hasher.update([0u8]),
                Some((token, kind)) => {
                    hasher.update([1u8, kind]);
                    hasher.update((token.len() as u64).to_le_bytes());
                    hasher.update(token.as_bytes());
                }
            }
        }
        Fingerprint(hasher.finalize().into())
    }

    /// The first eight hex digits, enough to tell fingerprints apart in messages and tables.
    pub fn short(&self) -> String {
        self.to_string()[..8].to_string()
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Fingerprint {
    type Err = crate::Error;

    /// Parses the 64 hex digits that [`Display`](fmt::Display) writes.
    fn from_str(s: &str) -> Result<Self, crate::Error> {
        let invalid = || {
            crate::Error::InvalidParameter(anyspec_core::InvalidParameter {
                name: "fingerprint",
                value: s.to_string(),
                expected: "64 hexadecimal digits",
            })
        };
        if s.len() != 64 || !s.is_ascii() {
            return Err(invalid());
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| invalid())?;
        }
        Ok(Fingerprint(bytes))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_64_lowercase_hex_digits() {
        let mut bytes = [0u8; 32];
        bytes[0] = 0xAB;
        bytes[31] = 0x01;
        let text = Fingerprint(bytes).to_string();
        assert_eq!(text.len(), 64);
        assert!(text.starts_with("ab00"));
        assert!(text.ends_with("01"));
        assert_eq!(Fingerprint(bytes).short(), "ab000000");
        assert_eq!(text.parse::<Fingerprint>().unwrap(), Fingerprint(bytes));
        assert!("ab".parse::<Fingerprint>().is_err());
        assert!(text.replace('a', "g").parse::<Fingerprint>().is_err());
    }

    #[test]
    fn token_boundaries_and_kinds_change_the_hash() {
        let a = Fingerprint::of_canonical([Some(("ab", 0)), Some(("c", 0))].into_iter());
        let b = Fingerprint::of_canonical([Some(("a", 0)), Some(("bc", 0))].into_iter());
        let c = Fingerprint::of_canonical([Some(("ab", 0)), Some(("c", 2))].into_iter());
        let d = Fingerprint::of_canonical([Some(("ab", 0)), None, Some(("c", 0))].into_iter());
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
        assert_eq!(a, Fingerprint::of_canonical([Some(("ab", 0)), Some(("c", 0))].into_iter()));
    }
}
