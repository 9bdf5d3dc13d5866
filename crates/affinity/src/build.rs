//! From co-occurrence counts to the row-stochastic `M` of RDK (oov-sampling-rdk.txt Eq. 2).
//!
//! Two scores `s_ij`, chosen by [`AffinityParams::score`]:
//!
//! - [`AffinityScore::Covariance`], the paper's: Eq. 2 is `M_ij = exp(Ω_ij/τ) / Σ_{k∈T}
//!   exp(Ω_ik/τ)` with `Ω` a normalized covariance of the target's distribution (§4, App. C.3:
//!   "each entry `M_ij` is the normalized covariance between token i and token j"), "estimated
//!   from data". Here `Ω` is estimated from windowed co-occurrence: with `P_ij = c_ij / T` the
//!   probability that a window pair is `(i, j)` and `P_i = r_i / T` its marginal, `Ω_ij = (P_ij −
//!   P_i P_j) / √(P_i (1 − P_i) P_j (1 − P_j))`, the Pearson correlation of the indicators "one end
//!   of the pair is i" and "the other is j", and `Ω_ii = 1`. A pair never seen (or seen fewer than
//!   `min_count` times) has `Ω_ij = −√(P_i P_j / ((1 − P_i)(1 − P_j)))`, which is stored as 0:
//!   the error is at most that magnitude, tiny for all but the most frequent tokens. For Eq. 2 as
//!   written the softmax runs over the whole vocabulary, missing entries counting as `Ω = 0`
//!   ([`anyspec_core::projection::rdk_dense_kernel`] and its first-order form, the drafters'
//!   "taylor" RDK form); [`anyspec_core::projection::AffinityMatrix::from_scores`] instead
//!   normalizes over the stored entries only (ours).
//! - [`AffinityScore::Ppmi`], ours and the default, described below.
//!
//! The PPMI construction, and why:
//!
//! - **Score.** `s_ij = PPMI(i, j) = max(0, ln(c_ij · T / (r_i · r_j)))`, with `c_ij` the windowed
//!   co-occurrence count ([`CooccurrenceCounts`]), `r_i = Σ_j c_ij` and `T = Σ_i r_i`. Raw
//!   (log-)counts would send every row's mass to the most frequent tokens (`the`, `,`), which
//!   co-occur with everything; PMI measures how much more often `j` appears near `i` than chance.
//!   Keeping only positive values makes "no entry" mean "score 0, independent", which is exactly
//!   what the dense softmax kernel behind the first-order form
//!   ([`anyspec_core::projection::rdk_dense_kernel_first_order`]) assumes of a missing score.
//! - **Noise floor.** Pairs seen fewer than `min_count` times get no entry: PMI of rare pairs is
//!   dominated by chance.
//! - **Self-affinity.** Co-occurrence says nothing about a token and itself, yet RDK must keep
//!   most of the mass a drafter puts on a token on that token. Each non-empty row gets the entry
//!   `s_ii = max_j s_ij`: the token is at least as affine to itself as to its best neighbour.
//! - **Sparsity.** Each row keeps its `top_k − 1` best neighbours (by score, then count, then id)
//!   plus itself.
//! - **Rows.** `M_ij = exp(s_ij/τ) / Σ_k exp(s_ik/τ)` over the row's kept entries
//!   ([`anyspec_core::projection::AffinityMatrix::from_scores`]). A token never seen, or with no
//!   neighbour above the floor, keeps an empty row: the identity.

use anyspec_vocab_map::Fingerprint;

use crate::affinity::{Affinity, AffinityInfo, MEMORY};
use crate::cooccurrence::CooccurrenceCounts;
use crate::error::{Error, Result};

/// Which score `s_ij` the rows of `M` are a softmax of (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AffinityScore {
    /// Ours: positive PMI of windowed co-occurrence, self-score the row's best.
    #[default]
    Ppmi,
    /// The paper's Eq. 2 / App. C.3: a normalized covariance `Ω` (the correlation of windowed
    /// co-occurrence), `Ω_ii = 1`.
    Covariance,
}

/// Parameters of an affinity build.
#[derive(Clone, Debug, PartialEq)]
pub struct AffinityParams {
    /// The score behind `M`.
    pub score: AffinityScore,
    /// Largest distance, in tokens, at which two tokens co-occur.
    pub window: usize,
    /// Softmax temperature `τ`: small values keep rows peaked on the token and its best
    /// neighbours, large values spread them evenly over the kept entries.
    pub tau: f64,
    /// Most entries per row, the token itself included (1 gives the identity everywhere).
    pub top_k: usize,
    /// Pairs seen fewer times than this get no entry.
    pub min_count: u64,
    /// Distinct pairs held in memory while counting; the rarest are dropped beyond it.
    pub max_pairs: usize,
    /// Counting threads (0 = every core).
    pub threads: usize,
}

impl Default for AffinityParams {
    fn default() -> Self {
        AffinityParams {
            score: AffinityScore::Ppmi,
            window: 4,
            tau: 1.0,
            top_k: 32,
            min_count: 3,
            max_pairs: 32 << 20,
            threads: 0,
        }
    }
}

impl AffinityParams {
    /// Checks every parameter.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming the first bad one.
    pub fn validate(&self) -> Result<()> {
        if self.window == 0 || self.window > 1024 {
            return Err(Error::invalid("window", "in 1..=1024 tokens", self.window));
        }
        if !(self.tau.is_finite() && self.tau > 0.0) {
            return Err(Error::invalid("tau", "a finite number > 0", self.tau));
        }
        if self.top_k == 0 || self.top_k > 65_536 {
            return Err(Error::invalid(
                "top_k",
                "in 1..=65536 (entries per row, the token itself included)",
                self.top_k,
            ));
        }
        if self.min_count == 0 {
            return Err(Error::invalid("min_count", "at least 1", 0));
        }
        if self.max_pairs < 1024 {
            return Err(Error::invalid("max_pairs", "at least 1024", self.max_pairs));
        }
        Ok(())
    }
}

/// Turns co-occurrence counts into an affinity matrix for the target tokenizer `target`.
/// `corpus` describes what was counted, for the file's record.
///
/// # Errors
/// [`Error::InvalidParameter`] for bad parameters or a window that differs from the counts',
/// [`Error::EmptyCorpus`] when nothing was counted.
pub fn build_affinity(
    counts: &CooccurrenceCounts,
    target: Fingerprint,
    params: &AffinityParams,
    corpus: &str,
) -> Result<Affinity> {
    params.validate()?;
    if counts.window() != params.window {
        return Err(Error::invalid(
            "window",
            "the window the counts were made with",
            format!("{} (counts use {})", params.window, counts.window()),
        ));
    }
    if counts.tokens() == 0 {
        return Err(Error::EmptyCorpus { files: corpus.to_string() });
    }
    let n = counts.vocab_size();
    let mut row_sums = vec![0f64; n];
    let mut degree = vec![0usize; n];
    for (i, j, c) in counts.pairs() {
        row_sums[i as usize] += c as f64;
        row_sums[j as usize] += c as f64;
        if c >= params.min_count {
            degree[i as usize] += 1;
            degree[j as usize] += 1;
        }
    }
    let total: f64 = row_sums.iter().sum();
    // Neighbour lists of every row, filled through per-row cursors (a counting sort by row).
    let mut starts = Vec::with_capacity(n + 1);
    starts.push(0usize);
    for d in &degree {
        starts.push(starts.last().copied().unwrap_or(0) + d);
    }
    let mut cursor = starts.clone();
    let mut neighbours = vec![(0u32, 0f64, 0u64); starts[n]];
    for (i, j, c) in counts.pairs() {
        if c < params.min_count {
            continue;
        }
        let (ri, rj) = (row_sums[i as usize] / total, row_sums[j as usize] / total);
        let score = match params.score {
            AffinityScore::Ppmi => (c as f64 * total / (row_sums[i as usize] * row_sums[j as usize])).ln(),
            AffinityScore::Covariance => {
                let spread = (ri * (1.0 - ri) * rj * (1.0 - rj)).sqrt();
                if spread > 0.0 { (c as f64 / total - ri * rj) / spread } else { 0.0 }
            }
        };
        for (row, col) in [(i, j), (j, i)] {
            neighbours[cursor[row as usize]] = (col, score, c);
            cursor[row as usize] += 1;
        }
    }
    let mut row_offsets = Vec::with_capacity(n + 1);
    row_offsets.push(0usize);
    let (mut columns, mut values) = (Vec::new(), Vec::new());
    let keep = params.top_k - 1;
    for row in 0..n {
        let list = &mut neighbours[starts[row]..starts[row + 1]];
        let by_rank =
            |a: &(u32, f64, u64), b: &(u32, f64, u64)| b.1.total_cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0));
        if keep > 0 && list.len() > keep {
            list.select_nth_unstable_by(keep - 1, by_rank);
        }
        let mut kept: Vec<(u32, f32)> =
            list.iter().take(keep).filter(|e| e.1 > 0.0).map(|&(col, pmi, _)| (col, pmi as f32)).collect();
        let own = match params.score {
            AffinityScore::Ppmi => kept.iter().map(|e| e.1).reduce(f32::max),
            // Ω_ii = 1 (a correlation), for every token seen with a neighbour.
            AffinityScore::Covariance => (!kept.is_empty()).then_some(1.0),
        };
        if let Some(own) = own {
            kept.push((row as u32, own));
            kept.sort_unstable_by_key(|e| e.0);
            columns.extend(kept.iter().map(|e| e.0));
            values.extend(kept.iter().map(|e| e.1));
        }
        row_offsets.push(columns.len());
    }
    let scores = anyspec_core::projection::SparseScores::from_csr(n, row_offsets, columns, values)
        .map_err(|source| Error::InvalidMatrix { path: std::path::PathBuf::from(MEMORY), source })?;
    let info = AffinityInfo {
        target_fingerprint: target,
        vocab_size: n,
        window: params.window,
        tau: params.tau,
        top_k: params.top_k,
        min_count: params.min_count,
        score: match params.score {
            AffinityScore::Ppmi => "ppmi",
            AffinityScore::Covariance => "covariance",
        }
        .to_string(),
        corpus: corpus.to_string(),
        tokens: counts.tokens(),
        distinct_pairs: counts.distinct_pairs() as u64,
        prune_floor: counts.prune_floor(),
    };
    Affinity::from_scores(scores, info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(top_k: usize) -> AffinityParams {
        AffinityParams { window: 1, tau: 1.0, top_k, min_count: 1, ..AffinityParams::default() }
    }

    #[test]
    fn ppmi_rows_keep_self_and_best_neighbours() {
        // Token 0 always next to 1, token 2 always next to 3; token 4 next to everything once.
        let mut c = CooccurrenceCounts::new(6, 1, 1 << 20).unwrap();
        for _ in 0..5 {
            c.count_sequence(&[0, 1]).unwrap();
            c.count_sequence(&[2, 3]).unwrap();
        }
        c.count_sequence(&[4, 0, 4, 2]).unwrap();
        let a = build_affinity(&c, Fingerprint([0; 32]), &params(32), "test").unwrap();
        let (offsets, cols, vals) = a.matrix().csr();
        let row0: Vec<(u32, f32)> = (offsets[0]..offsets[1]).map(|k| (cols[k], vals[k])).collect();
        // Row 0: 1 (PMI high), 4 (lower), and itself with the best score.
        assert_eq!(row0.iter().map(|e| e.0).collect::<Vec<_>>(), vec![0, 1, 4]);
        assert!((row0[0].1 - row0[1].1).abs() < 1e-6 && row0[0].1 > row0[2].1);
        // Token 5 never occurs: empty (identity) row.
        assert_eq!(offsets[5], offsets[6]);
        for row in 0..5 {
            let s: f32 = vals[offsets[row]..offsets[row + 1]].iter().sum();
            assert!((s - 1.0).abs() < 1e-5, "row {row} sums to {s}");
        }
        // top_k = 2 keeps one neighbour (the best) and the token itself.
        let a = build_affinity(&c, Fingerprint([0; 32]), &params(2), "test").unwrap();
        let (offsets, cols, _) = a.matrix().csr();
        assert_eq!(&cols[offsets[0]..offsets[1]], &[0, 1]);
    }

    #[test]
    fn covariance_rows_are_correlations_with_one_on_the_diagonal() {
        // Tokens 0 and 1 always adjacent, 2 and 3 too; 4 next to 0 and 2 once each.
        let mut c = CooccurrenceCounts::new(6, 1, 1 << 20).unwrap();
        for _ in 0..5 {
            c.count_sequence(&[0, 1]).unwrap();
            c.count_sequence(&[2, 3]).unwrap();
        }
        c.count_sequence(&[4, 0, 4, 2]).unwrap();
        let covariance = AffinityParams { score: AffinityScore::Covariance, ..params(32) };
        let a = build_affinity(&c, Fingerprint([0; 32]), &covariance, "test").unwrap();
        assert_eq!(a.info().score, "covariance");
        let (offsets, cols, vals) = a.scores().csr();
        let row0: Vec<(u32, f32)> = (offsets[0]..offsets[1]).map(|k| (cols[k], vals[k])).collect();
        // Window-1 pairs: {0,1} ×5, {2,3} ×5, {0,4} ×2, {2,4} ×1, so T = 2 · 13 = 26 and the
        // pair marginals are r_0 = 7, r_1 = 5: P_01 = 5/26, P_0 = 7/26, P_1 = 5/26.
        assert_eq!((c.get(0, 1), c.get(0, 4), c.get(2, 4)), (5, 2, 1));
        let (p01, p0, p1): (f64, f64, f64) = (5.0 / 26.0, 7.0 / 26.0, 5.0 / 26.0);
        let want01 = (p01 - p0 * p1) / (p0 * (1.0 - p0) * p1 * (1.0 - p1)).sqrt();
        assert_eq!(row0.iter().map(|e| e.0).collect::<Vec<_>>(), vec![0, 1, 4]);
        assert!((row0[0].1 - 1.0).abs() < 1e-6, "Ω_00 = 1: {row0:?}");
        assert!((f64::from(row0[1].1) - want01).abs() < 1e-6, "Ω_01 {} vs {want01}", row0[1].1);
        // PPMI would score the self entry as the row's best, not 1.
        let ppmi = build_affinity(&c, Fingerprint([0; 32]), &params(32), "test").unwrap();
        let (offsets, _, vals) = ppmi.scores().csr();
        assert!((vals[offsets[0]] - 1.0).abs() > 1e-3);
    }

    #[test]
    fn parameters_are_checked() {
        let c = CooccurrenceCounts::new(3, 1, 1 << 20).unwrap();
        assert!(matches!(build_affinity(&c, Fingerprint([0; 32]), &params(4), "x"), Err(Error::EmptyCorpus { .. })));
        let bad = AffinityParams { tau: 0.0, ..params(4) };
        assert!(bad.validate().unwrap_err().to_string().contains("tau"));
        let other_window = AffinityParams { window: 2, ..params(4) };
        assert!(build_affinity(&c, Fingerprint([0; 32]), &other_window, "x").is_err());
    }
}
