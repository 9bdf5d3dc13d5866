//! Speculative verification on the device: only O(γ) numbers come back to the host.
//!
//! The host rule ([`anyspec_core::verify`]) walks the draft and stops at the first rejection,
//! drawing a uniform only where it needs one. On a device that walk would cost one round trip
//! per drafted token, so here every decision is made at once from uniforms drawn up front
//! ([`Uniforms`]): the acceptance test of every drafted token, and a residual sample for every
//! possible stopping point (a correction after a rejection at position j, or the bonus token
//! after a full acceptance). The host then reads back γ decisions and γ + 1 candidate tokens (one
//! packed copy, see [`crate::acceptance`]) and keeps the candidate at the first rejection. Given the same uniforms the result is exactly
//! the host rule's (tests drive both with the same numbers).

use anyspec_core::Verdict;
use burn::tensor::Tensor;

use crate::acceptance::{AcceptanceInputs, AcceptanceRow, Uniforms, acceptance, read_acceptance};
use crate::error::{Error, Result};

/// Verifies a draft on the device.
///
/// - `target_probs`: `[γ + 1, vocab]`, row `j` the target distribution after `draft[..j]`.
/// - `draft_tokens`: the γ drafted ids.
/// - `draft_probs`: `[γ, vocab]` draft distributions for a sampled draft, or `None` for a
///   deterministic draft (a point mass on each token, speculative-decoding.txt with `q = δ_d`).
///
/// Accepts `d_j` when `p_j(d_j) ≥ q_j(d_j)` or `u_j · q_j(d_j) < p_j(d_j)`; the emitted token
/// comes from the normalized residual `max(p_j − q_j, 0)` at the first rejection (`p_j` with
/// `d_j` removed for a point mass), or from `p_γ` when everything was accepted. A residual with
/// no mass (rounding) falls back to `p_j`, as the host rule does.
///
/// The step itself is [`crate::acceptance()`]: one fused CubeCL kernel on wgpu/CUDA, burn tensor
/// ops elsewhere; either way one `[γ + 1, 4]` f32 copy comes back to the host.
pub fn verify_on_device(
    target_probs: Tensor<2>,
    draft_tokens: &[u32],
    draft_probs: Option<Tensor<2>>,
    uniforms: &Uniforms,
) -> Result<Verdict> {
    let inputs = AcceptanceInputs::new(target_probs, draft_tokens, draft_probs, uniforms)?;
    verdict_from_rows(&read_acceptance(acceptance(inputs))?, draft_tokens)
}

/// The verdict from the packed acceptance rows: the first rejected position (or γ) and the
/// sample of that row. Refuses non-finite target rows and drafted tokens whose own draft
/// distribution gives them probability 0, as the host rule does.
pub fn verdict_from_rows(rows: &[AcceptanceRow], draft_tokens: &[u32]) -> Result<Verdict> {
    let gamma = draft_tokens.len();
    if rows.len() != gamma + 1 {
        return Err(Error::Shape {
            what: "packed acceptance rows (γ + 1)",
            expected: (gamma + 1).to_string(),
            got: rows.len().to_string(),
        });
    }
    if let Some(row) = rows.iter().find(|row| !row.total.is_finite()) {
        return Err(Error::Core(anyspec_core::Error::EmptyDistribution {
            what: "a target row on the device (non-finite mass: NaN or +inf logits)",
            sum: f64::from(row.total),
        }));
    }
    let mut accepted = gamma;
    for (j, row) in rows[..gamma].iter().enumerate() {
        let q = row.draft_at_token;
        if !(q > 0.0 && q.is_finite()) {
            return Err(Error::DraftTokenImpossible { position: j, token: draft_tokens[j] });
        }
        if !row.accepted {
            accepted = j;
            break;
        }
    }
    Ok(Verdict { accepted, next_token: rows[accepted].sample, bonus: accepted == gamma })
}
