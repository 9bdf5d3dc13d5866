//! Vocabulary sizes and intersections (the paper's Tables 4 and 5).

use serde::{Deserialize, Serialize};

use crate::{MatchMode, VocabMap};

/// `|T|`, `|D|`, `|T ∩ D|` and `|T ∩ D| / |T|` for one map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Overlap {
    /// How tokens were matched.
    pub mode: MatchMode,
    /// `|T|`: target tokens, added and special ones included (as `get_vocab()` counts them).
    pub target_size: usize,
    /// `|D|`: drafter tokens, added and special ones included.
    pub drafter_size: usize,
    /// `|T ∩ D|`: paired tokens.
    pub intersection: usize,
    /// `|T ∩ D| / |T|`.
    pub ratio: f64,
    /// `|T ∩ D| / |T ∪ D|`, the Jaccard index of the two vocabularies.
    pub jaccard: f64,
    /// Target ids left unpaired because another target id has the same key.
    pub target_collisions: usize,
    /// Drafter ids left unpaired because another drafter id has the same key.
    pub drafter_collisions: usize,
    /// Target ids that take no part in matching (special tokens in `bytes` mode).
    pub target_excluded: usize,
    /// Drafter ids that take no part in matching.
    pub drafter_excluded: usize,
}

impl Overlap {
    /// Reads the statistics off a map.
    pub fn of(map: &VocabMap) -> Overlap {
        let (t, d) = (map.target(), map.drafter());
        let intersection = map.intersection();
        let union = t.token_count + d.token_count - intersection;
        Overlap {
            mode: map.mode(),
            target_size: t.token_count,
            drafter_size: d.token_count,
            intersection,
            ratio: ratio(intersection, t.token_count),
            jaccard: ratio(intersection, union),
            target_collisions: t.collisions,
            drafter_collisions: d.collisions,
            target_excluded: t.excluded,
            drafter_excluded: d.excluded,
        }
    }
}

pub(crate) fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}
