//! Carrying a drafter's distribution over its own vocabulary onto the target's.
//!
//! A drafter with another tokenizer produces `q` over its vocabulary `D`; speculative sampling
//! needs the distribution the draft was drawn from expressed over the target vocabulary `T`.
//! The [`IdMap`] pairs the tokens the two vocabularies share (built offline by
//! `anyspec-vocab-map`), as plain arrays so that anyone can construct one.
//!
//! | projection | paper | what happens to mass on `D \ T` |
//! |---|---|---|
//! | [`union_projection`] | hetero-vocab-sd.txt Alg 1 | kept; such drafts are always rejected |
//! | [`tli_projection`] | hetero-vocab-sd.txt Alg 4 | dropped; `q` renormalized on `T ∩ D` |
//! | [`rdk_exact`] | oov-sampling-rdk.txt Alg 1 (`p' = Mᵀq'`) | TLI, then spread over all of `T` by an affinity matrix |
//! | [`rdk_taylor_eq3`] | oov-sampling-rdk.txt Eq. 3 | TLI, then mixed with a prior `p` of the target's distribution |
//! | [`rdk_dense_kernel`] / [`rdk_dense_kernel_first_order`] | oov-sampling-rdk.txt Eq. 2 / App. B.2 | TLI, then spread by the dense softmax kernel over raw scores (exactly / to first order) |

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Marks a drafter token with no counterpart in the target vocabulary.
pub const ABSENT: u32 = u32::MAX;

/// Drafter-token → target-token ids for the tokens both vocabularies share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdMap {
    drafter_to_target: Vec<u32>,
    target_size: usize,
}

impl IdMap {
    /// Builds a map from `drafter_to_target[d]` (the target id of drafter token `d`, or
    /// [`ABSENT`]). Errors when an id is outside the target vocabulary or two drafter tokens map
    /// to one target token (the projection would then not be a distribution over target tokens).
    pub fn new(drafter_to_target: Vec<u32>, target_size: usize) -> Result<Self> {
        let mut seen = vec![false; target_size];
        for &t in &drafter_to_target {
            if t == ABSENT {
                continue;
            }
            let slot = seen.get_mut(t as usize).ok_or(Error::TokenOutOfRange { token: t, vocab_size: target_size })?;
            if *slot {
                return Err(Error::invalid(
                    "id map",
                    "one-to-one (each target token paired with at most one drafter token)",
                    format!("target token {t} paired twice"),
                ));
            }
            *slot = true;
        }
        Ok(IdMap { drafter_to_target, target_size })
    }

    /// The identity map for two equal vocabularies of `size` tokens.
    pub fn identity(size: usize) -> Self {
        IdMap { drafter_to_target: (0..size as u32).collect(), target_size: size }
    }

    /// Size of the drafter vocabulary.
    pub fn drafter_size(&self) -> usize {
        self.drafter_to_target.len()
    }

    /// Size of the target vocabulary.
    pub fn target_size(&self) -> usize {
        self.target_size
    }

    /// The target id of drafter token `d`, if the target has it.
    pub fn target_of(&self, drafter_token: u32) -> Option<u32> {
        self.drafter_to_target.get(drafter_token as usize).copied().filter(|&t| t != ABSENT)
    }

    /// The drafter → target array ([`ABSENT`] where unmatched).
    pub fn drafter_to_target(&self) -> &[u32] {
        &self.drafter_to_target
    }

    /// The inverse array: target → drafter ids ([`ABSENT`] where unmatched).
    pub fn target_to_drafter(&self) -> Vec<u32> {
        let mut inverse = vec![ABSENT; self.target_size];
        for (d, &t) in self.drafter_to_target.iter().enumerate() {
            if t != ABSENT {
                inverse[t as usize] = d as u32;
            }
        }
        inverse
    }

    /// `|T ∩ D|`.
    pub fn intersection_size(&self) -> usize {
        self.drafter_to_target.iter().filter(|&&t| t != ABSENT).count()
    }

    fn check_drafter_len(&self, draft_probs: &[f32]) -> Result<()> {
        if draft_probs.len() == self.drafter_to_target.len() {
            Ok(())
        } else {
            Err(Error::LengthMismatch {
                what: "drafter distribution (drafter vocabulary size of the id map)",
                expected: self.drafter_to_target.len(),
                got: draft_probs.len(),
            })
        }
    }
}

/// The drafter distribution over the union vocabulary, seen from the target.
#[derive(Clone, Debug, PartialEq)]
pub struct UnionProjection {
    /// `q(d)` at the target id of each shared token, 0 elsewhere; *not* renormalized.
    pub on_target: Vec<f32>,
    /// Mass the drafter puts on tokens the target does not have, `q(D \ T)`.
    pub outside_mass: f64,
}

/// Union projection (hetero-vocab-sd.txt Algorithm 1): both models are read as distributions
/// over `T ∪ D`, the target giving 0 to `D \ T` and the drafter 0 to `T \ D`. Sampling the
/// drafter is unchanged; a drafted token outside `T` is rejected for certain.
pub fn union_projection(draft_probs: &[f32], map: &IdMap) -> Result<UnionProjection> {
    map.check_drafter_len(draft_probs)?;
    let mut on_target = vec![0.0f32; map.target_size];
    let mut outside_mass = 0.0f64;
    for (&q, &t) in draft_probs.iter().zip(&map.drafter_to_target) {
        if t == ABSENT {
            outside_mass += f64::from(q);
        } else {
            on_target[t as usize] = q;
        }
    }
    Ok(UnionProjection { on_target, outside_mass })
}

/// Token-level intersection (hetero-vocab-sd.txt Algorithm 4): restrict `q` to `T ∩ D` and
/// renormalize, `q'(t) = q(t) / Σ_{x ∈ T∩D} q(x)`, indexed by target ids. The drafter must sample
/// from exactly this distribution. Errors when `q` has no mass on the intersection.
pub fn tli_projection(draft_probs: &[f32], map: &IdMap) -> Result<Vec<f32>> {
    map.check_drafter_len(draft_probs)?;
    let shared: f64 =
        draft_probs.iter().zip(&map.drafter_to_target).filter(|&(_, &t)| t != ABSENT).map(|(&q, _)| f64::from(q)).sum();
    if shared <= 0.0 || !shared.is_finite() {
        return Err(Error::EmptyDistribution {
            what: "the drafter distribution on the shared vocabulary (TLI)",
            sum: shared,
        });
    }
    let mut projected = vec![0.0f32; map.target_size];
    for (&q, &t) in draft_probs.iter().zip(&map.drafter_to_target) {
        if t != ABSENT {
            projected[t as usize] = (f64::from(q) / shared) as f32;
        }
    }
    Ok(projected)
}

/// A sparse, row-stochastic `N × N` matrix over target tokens, in CSR form: row `i` says how
/// RDK spreads the mass a drafter puts on token `i` (oov-sampling-rdk.txt Eq. 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AffinityMatrix {
    size: usize,
    row_offsets: Vec<usize>,
    columns: Vec<u32>,
    values: Vec<f32>,
}

/// How far a row sum may stray from 1 (values are stored as `f32`).
const ROW_SUM_TOLERANCE: f64 = 1e-4;

impl AffinityMatrix {
    /// Builds the matrix from CSR arrays, checking that every row is a probability vector.
    ///
    /// An empty row means "keep the mass where it is" (an implicit 1 on the diagonal), so a
    /// matrix that covers only some tokens is still row-stochastic.
    pub fn from_csr(size: usize, row_offsets: Vec<usize>, columns: Vec<u32>, values: Vec<f32>) -> Result<Self> {
        check_csr(&AFFINITY_CSR, size, &row_offsets, &columns, values.len())?;
        for row in 0..size {
            let (start, end) = (row_offsets[row], row_offsets[row + 1]);
            let mut sum = 0.0f64;
            for k in start..end {
                let (c, v) = (columns[k], values[k]);
                if !(v >= 0.0 && v.is_finite()) {
                    return Err(Error::InvalidProbability { what: "an affinity row", index: c as usize, value: v });
                }
                sum += f64::from(v);
            }
            if start != end && (sum - 1.0).abs() > ROW_SUM_TOLERANCE {
                return Err(Error::invalid(
                    "affinity rows",
                    "row-stochastic (each row sums to 1)",
                    format!("row {row} sums to {sum}"),
                ));
            }
        }
        Ok(AffinityMatrix { size, row_offsets, columns, values })
    }

    /// Builds row-stochastic rows from raw affinity scores with temperature `tau`:
    /// `M_ij = exp(a_ij/τ) / Σ_k exp(a_ik/τ)` over the stored entries of row `i`
    /// (the softmax kernel of Eq. 2, restricted to each row's kept neighbours).
    pub fn from_scores(scores: &SparseScores, tau: f64) -> Result<Self> {
        check_tau(tau)?;
        let mut values = Vec::with_capacity(scores.values.len());
        for row in 0..scores.size {
            let range = scores.row_offsets[row]..scores.row_offsets[row + 1];
            let max = scores.values[range.clone()].iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
            let weights: Vec<f64> = scores.values[range].iter().map(|&v| ((f64::from(v) - max) / tau).exp()).collect();
            let total: f64 = weights.iter().sum();
            values.extend(weights.iter().map(|w| (w / total) as f32));
        }
        AffinityMatrix::from_csr(scores.size, scores.row_offsets.clone(), scores.columns.clone(), values)
    }

    /// Number of target tokens `N`.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// The CSR arrays: row offsets, column ids, values.
    pub fn csr(&self) -> (&[usize], &[u32], &[f32]) {
        (&self.row_offsets, &self.columns, &self.values)
    }
}

/// Raw (not yet normalized) affinity scores `a_ij` in CSR form, for example pointwise mutual
/// information of co-occurring target tokens.
///
/// Validated once, by [`SparseScores::from_csr`]: the fields are private so that a value in hand
/// is always well formed, and the per-draft projections ([`rdk_dense_kernel_first_order`]) need
/// not re-check
/// millions of entries on every call.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseScores {
    /// Number of target tokens `N`.
    size: usize,
    /// `N + 1` offsets into `columns` / `values`.
    row_offsets: Vec<usize>,
    /// Column ids, each `< N`.
    columns: Vec<u32>,
    /// Finite scores.
    values: Vec<f32>,
    /// `Σ_k a_ik` of each row, for [`rdk_dense_kernel_first_order`]'s `Θ` term.
    row_sums: Vec<f64>,
}

impl SparseScores {
    /// Scores over `size` target tokens from CSR arrays: `size + 1` non-decreasing row offsets
    /// ending at the number of entries, column ids below `size`, finite values.
    pub fn from_csr(size: usize, row_offsets: Vec<usize>, columns: Vec<u32>, values: Vec<f32>) -> Result<Self> {
        let mut scores = SparseScores { size, row_offsets, columns, values, row_sums: Vec::new() };
        scores.validate()?;
        scores.row_sums = scores
            .row_offsets
            .windows(2)
            .map(|w| scores.values[w[0]..w[1]].iter().map(|&v| f64::from(v)).sum())
            .collect();
        Ok(scores)
    }

    /// Number of target tokens `N`.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// The CSR arrays: row offsets, column ids, values.
    pub fn csr(&self) -> (&[usize], &[u32], &[f32]) {
        (&self.row_offsets, &self.columns, &self.values)
    }

    fn validate(&self) -> Result<()> {
        check_csr(&SCORE_CSR, self.size, &self.row_offsets, &self.columns, self.values.len())?;
        if let Some((i, &v)) = self.values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(Error::InvalidProbability { what: "affinity scores", index: i, value: v });
        }
        Ok(())
    }
}

/// RDK, exact (oov-sampling-rdk.txt Algorithm 1): `p' = Mᵀ q'`, where `q'` is the TLI projection
/// of the drafter distribution (over target ids). Costs O(entries of the rows `q'` touches).
///
/// The result is the distribution the drafter samples from and the one verification uses, so a
/// draft may contain target tokens the drafter itself cannot produce.
pub fn rdk_exact(tli_probs: &[f32], affinity: &AffinityMatrix) -> Result<Vec<f32>> {
    if tli_probs.len() != affinity.size {
        return Err(Error::LengthMismatch {
            what: "TLI distribution (affinity size)",
            expected: affinity.size,
            got: tli_probs.len(),
        });
    }
    let mut out = vec![0.0f64; affinity.size];
    for (i, &q) in tli_probs.iter().enumerate() {
        if q <= 0.0 {
            continue;
        }
        let q = f64::from(q);
        let (start, end) = (affinity.row_offsets[i], affinity.row_offsets[i + 1]);
        if start == end {
            out[i] += q;
        }
        for k in start..end {
            out[affinity.columns[k] as usize] += q * f64::from(affinity.values[k]);
        }
    }
    normalize(out, "the RDK distribution")
}

/// `argmax(rdk_exact(q'))` for a TLI distribution `q'` that is a point mass on `token`, which is
/// what greedy drafting (temperature 0) draws from: found from the token's row of the affinity
/// matrix alone, without [`rdk_exact`]'s dense vectors over the whole target vocabulary (three
/// of them, 49,152 entries each on SmolLM2, per drafted token).
///
/// The same token as [`crate::sampling::argmax`] of [`rdk_exact`]'s result, bit for bit
/// (tested): the row's values are summed per column in the same order, normalized by the same
/// `f64` total and rounded to `f32` alike, and ties go to the lowest id.
///
/// # Errors
/// `token` outside the matrix, or a row whose mass is not positive (as [`rdk_exact`]).
pub fn rdk_exact_point_argmax(token: u32, affinity: &AffinityMatrix) -> Result<u32> {
    let row = token as usize;
    if row >= affinity.size {
        return Err(Error::TokenOutOfRange { token, vocab_size: affinity.size });
    }
    let (start, end) = (affinity.row_offsets[row], affinity.row_offsets[row + 1]);
    if start == end {
        // An empty row keeps the mass where it is.
        return Ok(token);
    }
    // (column, value) in the order rdk_exact adds them; a stable sort keeps that order within
    // a column, so each column's sum is rounded as there.
    let mut entries: Vec<(u32, f64)> =
        (start..end).map(|k| (affinity.columns[k], f64::from(affinity.values[k]))).collect();
    entries.sort_by_key(|&(column, _)| column);
    let mut sums: Vec<(u32, f64)> = Vec::with_capacity(entries.len());
    for (column, value) in entries {
        match sums.last_mut() {
            Some((last, sum)) if *last == column => *sum += value,
            _ => sums.push((column, 0.0 + value)),
        }
    }
    // The zeros between the columns leave the dense sum unchanged.
    let total: f64 = sums.iter().map(|&(_, v)| v).sum();
    if total <= 0.0 || !total.is_finite() {
        return Err(Error::EmptyDistribution { what: "the RDK distribution", sum: total });
    }
    // argmax's scan: id 0 first (0 unless the row has it), then a strictly larger value.
    let mut best = (0u32, 0.0f32);
    for (column, sum) in sums {
        let p = (sum / total) as f32;
        if column == 0 || p > best.1 {
            best = (column, p);
        }
    }
    Ok(best.0)
}

/// The first-order expansion of the dense softmax kernel [`rdk_dense_kernel`] in the scores,
/// the intermediate step of oov-sampling-rdk.txt App. B.2 (proof of Theorem 5.4) — **not** the
/// paper's Eq. 3, which is [`rdk_taylor_eq3`].
///
/// Exact RDK with the dense kernel `M_ij = exp(a_ij/τ) / Σ_{k∈T} exp(a_ik/τ)` over *all* `N`
/// target tokens (Eq. 2 with the scores `a` for `Ω`; a missing score counts as 0) costs O(N) per
/// touched row, O(N²) in the worst case. Expanding `exp(x) ≈ 1 + x` under `|a_ij| / τ ≪ 1` gives
/// App. B.2's
///
/// `(p_RDK)_j ≈ 1/N + θ_j/N − Θ/N²`, with `θ_j = Σ_i q'_i a_ij/τ`, `Θ = Σ_i q'_i s_i`,
/// `s_i = Σ_k a_ik/τ`,
///
/// which costs O(N + stored scores of the rows `q'` touches) and needs no target distribution.
/// (The paper goes on to assume `a_ij/τ ≈ θ p_j`, which turns this into Eq. 3.) The first-order
/// terms sum to zero, so the result sums to 1; entries the expansion drives below zero (outside
/// its assumption) are clipped and the vector renormalized, so it is always a distribution and
/// verification against it stays exact.
pub fn rdk_dense_kernel_first_order(tli_probs: &[f32], scores: &SparseScores, tau: f64) -> Result<Vec<f32>> {
    let n = check_kernel_inputs(tli_probs, scores, tau)?;
    let nf = n as f64;
    let mut shifted = vec![0.0f64; n];
    let mut mean_term = 0.0f64;
    for (i, &q) in tli_probs.iter().enumerate() {
        if q <= 0.0 {
            continue;
        }
        let q = f64::from(q);
        mean_term += q * scores.row_sums[i] / nf;
        for k in scores.row_offsets[i]..scores.row_offsets[i + 1] {
            shifted[scores.columns[k] as usize] += q * f64::from(scores.values[k]);
        }
    }
    let out = shifted.iter().map(|&s| ((1.0 + (s - mean_term) / tau) / nf).max(0.0)).collect();
    normalize(out, "the first-order RDK distribution")
}

/// RDK's linear-time form, oov-sampling-rdk.txt Eq. 3 as printed:
///
/// `p̃_i = (N q'_i + θ p_i) / (N + p_i)`, `θ = pᵀq'`, `N = |T|`, `p_Taylor = p̃ / Σ_j p̃_j`,
///
/// where `q'` is the TLI projection of the drafter's distribution over the target ids
/// (`tli_probs`, zero off the intersection) and `p` is the target's distribution. Theorem 5.4
/// bounds `‖p_Taylor − Mᵀq'‖₁` by `O(θ + 1/N²)` under App. B.2's assumption that the covariance
/// `Ω` behind `M` is dominated by one component aligned with `p`.
///
/// **What stands for `p` at draft time.** The paper evaluates Eq. 3 with the target's true `p`
/// (§6.2 is a synthetic experiment where `p` is known); a drafter must not wait for the target's
/// forward pass, or drafting would cost what it saves. The paper calls `M` "prior knowledge
/// about the target distribution p" estimated "on training data" (§4), and App. B.2 needs `p`
/// only as the direction `Ω` is dominated by, so what stands for `p` here is a fixed prior
/// passed as `prior`: the target's token frequencies over a corpus (the statistics FR pruning and
/// the affinity matrix are built from), normalized here. Whatever `prior` is, the result is the
/// distribution the draft is sampled from and verified against, so losslessness does not depend
/// on how good the prior is; only acceptance does.
///
/// All of `p̃` is non-negative, so no clipping is needed. Costs O(N).
pub fn rdk_taylor_eq3(tli_probs: &[f32], prior: &[f32]) -> Result<Vec<f32>> {
    if tli_probs.len() != prior.len() {
        return Err(Error::LengthMismatch {
            what: "target prior p for Eq. 3 (the TLI distribution's size, |T|)",
            expected: tli_probs.len(),
            got: prior.len(),
        });
    }
    for (what, values) in [("the TLI distribution q'", tli_probs), ("the target prior p", prior)] {
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !(v.is_finite() && **v >= 0.0)) {
            return Err(Error::InvalidProbability { what, index, value });
        }
    }
    let prior_sum: f64 = prior.iter().map(|&v| f64::from(v)).sum();
    if prior_sum <= 0.0 {
        return Err(Error::EmptyDistribution { what: "the target prior p (give token frequencies)", sum: prior_sum });
    }
    let q_sum: f64 = tli_probs.iter().map(|&v| f64::from(v)).sum();
    if q_sum <= 0.0 {
        return Err(Error::EmptyDistribution { what: "the TLI distribution q'", sum: q_sum });
    }
    let n = tli_probs.len() as f64;
    let p = |i: usize| f64::from(prior[i]) / prior_sum;
    let q = |i: usize| f64::from(tli_probs[i]) / q_sum;
    let theta: f64 = (0..tli_probs.len()).map(|i| p(i) * q(i)).sum();
    let tilde = (0..tli_probs.len()).map(|i| (n * q(i) + theta * p(i)) / (n + p(i))).collect();
    normalize(tilde, "the Eq. 3 RDK distribution")
}

/// The dense softmax-kernel RDK (Eq. 2 over all of `T`) that [`rdk_dense_kernel_first_order`]
/// approximates, computed exactly in O(N · rows
/// touched). For tests and for measuring the approximation, not for the hot path.
pub fn rdk_dense_kernel(tli_probs: &[f32], scores: &SparseScores, tau: f64) -> Result<Vec<f32>> {
    let n = check_kernel_inputs(tli_probs, scores, tau)?;
    let mut out = vec![0.0f64; n];
    let mut row = vec![0.0f64; n];
    for (i, &q) in tli_probs.iter().enumerate() {
        if q <= 0.0 {
            continue;
        }
        row.iter_mut().for_each(|r| *r = 0.0);
        for k in scores.row_offsets[i]..scores.row_offsets[i + 1] {
            row[scores.columns[k] as usize] = f64::from(scores.values[k]) / tau;
        }
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        let total: f64 = row.iter().map(|&v| (v - max).exp()).sum();
        for (o, &v) in out.iter_mut().zip(&row) {
            *o += f64::from(q) * (v - max).exp() / total;
        }
    }
    normalize(out, "the dense-kernel RDK distribution")
}

/// What a CSR matrix's errors call its parts.
struct CsrNames {
    /// The offsets array, for a wrong length.
    offsets: &'static str,
    /// Columns and values, for a count that disagrees with the last offset.
    entries: &'static str,
    /// The offsets array, for a row that ends before it starts.
    order: &'static str,
}

const AFFINITY_CSR: CsrNames = CsrNames {
    offsets: "affinity row offsets (N + 1)",
    entries: "affinity columns and values (the last row offset)",
    order: "affinity row offsets",
};

const SCORE_CSR: CsrNames = CsrNames {
    offsets: "score row offsets (N + 1)",
    entries: "score columns and values (the last row offset)",
    order: "score row offsets",
};

/// The structure shared by the CSR matrices here: `size + 1` offsets from 0, non-decreasing, the
/// last one the number of entries; one value per column id; column ids below `size`.
fn check_csr(names: &CsrNames, size: usize, offsets: &[usize], columns: &[u32], values: usize) -> Result<()> {
    if offsets.len() != size + 1 {
        return Err(Error::LengthMismatch { what: names.offsets, expected: size + 1, got: offsets.len() });
    }
    if columns.len() != values || offsets.last() != Some(&columns.len()) || offsets[0] != 0 {
        return Err(Error::LengthMismatch {
            what: names.entries,
            expected: offsets.last().copied().unwrap_or(0),
            got: columns.len().min(values),
        });
    }
    if let Some(row) = offsets.windows(2).position(|w| w[0] > w[1]) {
        let (start, end) = (offsets[row], offsets[row + 1]);
        return Err(Error::invalid(names.order, "non-decreasing", format!("row {row} spans {start}..{end}")));
    }
    if let Some(&c) = columns.iter().find(|&&c| c as usize >= size) {
        return Err(Error::TokenOutOfRange { token: c, vocab_size: size });
    }
    Ok(())
}

/// Validates the inputs of the softmax-kernel forms and returns `N`.
fn check_kernel_inputs(tli_probs: &[f32], scores: &SparseScores, tau: f64) -> Result<usize> {
    check_tau(tau)?;
    if tli_probs.len() != scores.size {
        return Err(Error::LengthMismatch {
            what: "TLI distribution (score matrix size)",
            expected: scores.size,
            got: tli_probs.len(),
        });
    }
    Ok(scores.size)
}

fn check_tau(tau: f64) -> Result<()> {
    if tau.is_finite() && tau > 0.0 { Ok(()) } else { Err(Error::invalid("tau", "a finite number > 0", tau)) }
}

fn normalize(values: Vec<f64>, what: &'static str) -> Result<Vec<f32>> {
    let total: f64 = values.iter().sum();
    if total <= 0.0 || !total.is_finite() {
        return Err(Error::EmptyDistribution { what, sum: total });
    }
    Ok(values.into_iter().map(|v| (v / total) as f32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> IdMap {
        // Drafter tokens 0, 1, 2, 3; the target (size 4) has drafter 0 as 2 and drafter 2 as 0.
        IdMap::new(vec![2, ABSENT, 0, ABSENT], 4).unwrap()
    }

    #[test]
    fn union_keeps_outside_mass_aside() {
        let u = union_projection(&[0.1, 0.2, 0.3, 0.4], &map()).unwrap();
        assert_eq!(u.on_target, vec![0.3, 0.0, 0.1, 0.0]);
        assert!((u.outside_mass - 0.6).abs() < 1e-7);
    }

    #[test]
    fn tli_renormalizes_on_the_intersection() {
        let q = tli_projection(&[0.1, 0.2, 0.3, 0.4], &map()).unwrap();
        assert!((q[0] - 0.75).abs() < 1e-6 && (q[2] - 0.25).abs() < 1e-6 && q[1] == 0.0 && q[3] == 0.0);
        assert!(tli_projection(&[0.0, 0.5, 0.0, 0.5], &map()).is_err());
    }

    #[test]
    fn maps_must_be_one_to_one_and_in_range() {
        assert!(IdMap::new(vec![1, 1], 3).is_err());
        assert!(IdMap::new(vec![5], 3).is_err());
        assert_eq!(map().target_to_drafter(), vec![2, ABSENT, 0, ABSENT]);
        assert_eq!(map().intersection_size(), 2);
    }

    #[test]
    fn rdk_moves_mass_along_affinity_rows() {
        // Row 0 keeps half its mass and gives half to token 3; other rows are the identity.
        let m = AffinityMatrix::from_csr(4, vec![0, 2, 2, 2, 2], vec![0, 3], vec![0.5, 0.5]).unwrap();
        let p = rdk_exact(&[0.8, 0.2, 0.0, 0.0], &m).unwrap();
        assert_eq!(p, vec![0.4, 0.2, 0.0, 0.4]);
        assert!(AffinityMatrix::from_csr(2, vec![0, 1, 1], vec![1], vec![0.7]).is_err(), "row 0 sums to 0.7");
    }

    /// The greedy shortcut picks `argmax(rdk_exact(point mass))` on random matrices with
    /// repeated columns (summed in order), empty rows, token 0 in and out of a row, and ties
    /// (equal values, and rows whose mass splits evenly), which only the lowest-id rule breaks.
    #[test]
    fn rdk_point_argmax_is_the_argmax_of_the_exact_distribution() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let size = 9;
        let (mut ties, mut checked) = (0, 0);
        for _ in 0..300 {
            let (mut offsets, mut columns, mut values) = (vec![0], Vec::new(), Vec::new());
            for _ in 0..size {
                let n = next(6) as usize;
                let weights: Vec<f32> = (0..n).map(|_| [1.0, 2.0, 2.0, 3.0][next(4) as usize]).collect();
                let total: f32 = weights.iter().sum();
                for w in weights {
                    columns.push(next(size as u64) as u32);
                    values.push(w / total);
                }
                offsets.push(columns.len());
            }
            let m = AffinityMatrix::from_csr(size, offsets, columns, values).unwrap();
            for token in 0..size as u32 {
                let mut point = vec![0.0f32; size];
                point[token as usize] = 1.0;
                let dense = rdk_exact(&point, &m).unwrap();
                let want = crate::sampling::argmax(&dense);
                let best = dense[want as usize];
                ties += usize::from(dense.iter().filter(|&&p| p == best).count() > 1);
                assert_eq!(rdk_exact_point_argmax(token, &m).unwrap(), want, "token {token}: {dense:?} {m:?}");
                checked += 1;
            }
        }
        assert!(ties > checked / 10, "the test must exercise ties: {ties} of {checked}");
        let m = AffinityMatrix::from_csr(2, vec![0, 0, 0], vec![], vec![]).unwrap();
        assert!(matches!(rdk_exact_point_argmax(2, &m), Err(Error::TokenOutOfRange { token: 2, vocab_size: 2 })));
    }

    #[test]
    fn eq3_follows_the_printed_formula() {
        // N = 4, q' = (0.75, 0, 0.25, 0), p = (0.5, 0.2, 0.2, 0.1): θ = pᵀq' = 0.425 and
        // p̃ = ((4·0.75 + 0.2125)/4.5, 0.085/4.2, (4·0.25 + 0.085)/4.2, 0.0425/4.1).
        let out = rdk_taylor_eq3(&[0.75, 0.0, 0.25, 0.0], &[0.5, 0.2, 0.2, 0.1]).unwrap();
        let tilde = [3.2125 / 4.5, 0.085 / 4.2, 1.085 / 4.2, 0.0425 / 4.1];
        let total: f64 = tilde.iter().sum();
        for (got, want) in out.iter().zip(tilde) {
            assert!((f64::from(*got) - want / total).abs() < 1e-6, "{out:?}");
        }
        // The prior is a distribution whatever its scale (frequencies may be passed as counts).
        assert_eq!(out, rdk_taylor_eq3(&[0.75, 0.0, 0.25, 0.0], &[50.0, 20.0, 20.0, 10.0]).unwrap());
    }

    #[test]
    fn b2_expansion_follows_its_formula_and_differs_from_eq3() {
        // One score a_01 = 0.3, τ = 1, q' on token 0: θ_j = (0, 0.3, 0), Θ = s_0 = 0.3 and
        // 1/N + θ_j/N − Θ/N² = (0.3, 0.4, 0.3).
        let scores = SparseScores::from_csr(3, vec![0, 1, 1, 1], vec![1], vec![0.3]).unwrap();
        let b2 = rdk_dense_kernel_first_order(&[1.0, 0.0, 0.0], &scores, 1.0).unwrap();
        for (got, want) in b2.iter().zip([0.3f32, 0.4, 0.3]) {
            assert!((got - want).abs() < 1e-6, "{b2:?}");
        }
        // With no information (no scores; a uniform prior) the two forms part ways: the dense
        // kernel spreads q' uniformly, Eq. 3 keeps q' and adds θ p_i / (N + p_i).
        let empty = SparseScores::from_csr(3, vec![0, 0, 0, 0], vec![], vec![]).unwrap();
        let uniform = rdk_dense_kernel_first_order(&[1.0, 0.0, 0.0], &empty, 1.0).unwrap();
        assert!(uniform.iter().all(|&v| (v - 1.0 / 3.0).abs() < 1e-6), "{uniform:?}");
        let eq3 = rdk_taylor_eq3(&[1.0, 0.0, 0.0], &[1.0, 1.0, 1.0]).unwrap();
        // θ = 1/3: p̃ = ((3 + 1/9)/(10/3), (1/9)/(10/3), (1/9)/(10/3)) = (0.9333, 0.0333, 0.0333).
        let tilde = [28.0 / 30.0, 1.0 / 30.0, 1.0 / 30.0];
        let total: f64 = tilde.iter().sum();
        for (got, want) in eq3.iter().zip(tilde) {
            assert!((f64::from(*got) - want / total).abs() < 1e-6, "{eq3:?}");
        }
    }

    #[test]
    fn eq3_refuses_bad_inputs_by_name() {
        let err = |q: &[f32], p: &[f32]| rdk_taylor_eq3(q, p).unwrap_err().to_string();
        assert!(err(&[1.0, 0.0], &[1.0]).contains("prior"));
        assert!(err(&[1.0, 0.0], &[0.5, -0.5]).contains("prior"));
        assert!(err(&[1.0, 0.0], &[0.0, 0.0]).contains("frequencies"));
        assert!(err(&[f32::NAN, 0.0], &[0.5, 0.5]).contains("TLI"));
        assert!(err(&[0.0, 0.0], &[0.5, 0.5]).contains("TLI"));
    }

    #[test]
    fn malformed_scores_are_refused_when_built() {
        let ok = SparseScores::from_csr(3, vec![0, 2, 2, 3], vec![0, 2, 1], vec![1.0, -0.5, 2.0]).unwrap();
        assert_eq!((ok.size(), ok.nnz()), (3, 3));
        let bad = |offsets: Vec<usize>, columns: Vec<u32>, values: Vec<f32>| {
            SparseScores::from_csr(3, offsets, columns, values).unwrap_err().to_string()
        };
        assert!(bad(vec![0, 2, 3], vec![0, 1, 2], vec![1.0; 3]).contains("N + 1"));
        assert!(bad(vec![0, 2, 1, 3], vec![0, 1, 2], vec![1.0; 3]).contains("row 1 spans 2..1"));
        assert!(bad(vec![0, 1, 1, 1], vec![3], vec![1.0]).contains('3'));
        assert!(bad(vec![0, 1, 1, 1], vec![0], vec![f32::NAN]).contains("NaN"));
        assert!(bad(vec![0, 1, 1, 2], vec![0, 1], vec![1.0]).contains("score columns and values"));
    }
}
