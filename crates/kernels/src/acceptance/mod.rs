//! The acceptance step of speculative sampling as one device operation with an O(γ) result.
//!
//! Given the target distributions `p` (`[γ + 1, V]`), the draft distributions `q` (`[γ, V]`, or a
//! point mass on each drafted token), the γ drafted tokens and γ + 1 uniforms, the step computes
//! for every row `j` the acceptance test of `d_j`, `q_j(d_j)`, the residual `max(p_j − q_j, 0)`
//! (`p_γ` itself for the bonus row), its normalizer, and one inverse-CDF sample from it. The
//! result is a packed `[γ + 1, 4]` tensor (see [`Column`]) that the host reads back in one copy.
//!
//! Two bodies compute it:
//! - [`acceptance_reference`]: plain burn tensor ops (gather, compare, clamp, cumulative sum,
//!   reductions), a dozen launches on a GPU. It runs everywhere and is what flex executes.
//! - `acceptance_fused` (features `wgpu` / `cuda`): one hand-written CubeCL kernel, one cube
//!   per row, reached through a `#[backend_extension]` trait on burn's CubeCL backend.
//!
//! [`acceptance`] picks the fused kernel on CubeCL devices and the reference elsewhere. Tests
//! compare the two on wgpu and both against the host rule of `anyspec-core`.

#[cfg(feature = "cubecl")]
mod cube;
mod reference;

use burn::tensor::Tensor;
use rand::{Rng, RngCore};

use crate::error::{Error, Result};
use crate::readback::read_f32;

#[cfg(feature = "cubecl")]
pub use cube::acceptance_fused;
pub use reference::acceptance_reference;

/// The uniform numbers one verification consumes.
#[derive(Clone, Debug, PartialEq)]
pub struct Uniforms {
    /// `u_j` for the acceptance test `u_j · q_j(d_j) < p_j(d_j)` of each drafted token.
    pub accept: Vec<f64>,
    /// The uniform that picks the residual (or bonus) token by inverse-CDF sampling.
    pub residual: f64,
}

impl Uniforms {
    /// Draws γ + 1 uniforms in `[0, 1)`: the acceptance tests in order, then the residual.
    pub fn draw(gamma: usize, rng: &mut dyn RngCore) -> Self {
        let accept = (0..gamma).map(|_| rng.random::<f64>()).collect();
        Uniforms { accept, residual: rng.random::<f64>() }
    }
}

/// Sampled indices travel as f32 in the packed result; f32 holds every integer up to 2²⁴ exactly.
pub const MAX_VOCAB: usize = 1 << 24;

/// The columns of the packed `[γ + 1, 4]` result, one row per stopping point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// Mass of the row's residual (`max(p_j − q_j, 0)`, or `p_γ` in the bonus row); the mass of
    /// `p_j` when the residual had none. Non-finite when `p_j` held NaN or infinities.
    Total = 0,
    /// The inverse-CDF sample from the residual, as an exact f32 integer.
    Sample = 1,
    /// 1 when `d_j` passes `u_j · q_j(d_j) < p_j(d_j)` or `p_j(d_j) ≥ q_j(d_j)`, else 0; 1 in the
    /// bonus row, which has no test.
    Accept = 2,
    /// `q_j(d_j)` (1 for a point mass, and in the bonus row), so the host can refuse drafts whose
    /// distribution gives their own token probability 0.
    DraftAtToken = 3,
}

/// Number of columns in the packed result.
pub const COLUMNS: usize = 4;

/// Validated inputs of one acceptance step. Building it checks every shape, so the bodies never
/// see inconsistent input.
#[derive(Clone, Debug)]
pub struct AcceptanceInputs {
    pub(crate) target_probs: Tensor<2>,
    pub(crate) draft_probs: Option<Tensor<2>>,
    pub(crate) tokens: Vec<u32>,
    pub(crate) uniforms: Uniforms,
    pub(crate) vocab: usize,
}

impl AcceptanceInputs {
    /// Checks the shapes of one verification.
    ///
    /// - `target_probs`: `[γ + 1, V]`, row `j` the target distribution after `draft[..j]`.
    /// - `draft_tokens`: the γ drafted ids, each below `V`.
    /// - `draft_probs`: `[γ, V]` for a sampled draft, `None` for a deterministic one. Ignored
    ///   when γ = 0.
    /// - `uniforms`: γ acceptance uniforms and the residual one.
    ///
    /// Strided (transposed, sliced) tensors are accepted as they are.
    pub fn new(
        target_probs: Tensor<2>,
        draft_tokens: &[u32],
        draft_probs: Option<Tensor<2>>,
        uniforms: &Uniforms,
    ) -> Result<Self> {
        let gamma = draft_tokens.len();
        let [rows, vocab] = target_probs.dims();
        if rows != gamma + 1 {
            return Err(shape("target rows (γ + 1)", gamma + 1, rows));
        }
        if uniforms.accept.len() != gamma {
            return Err(shape("acceptance uniforms (γ)", gamma, uniforms.accept.len()));
        }
        if vocab == 0 || vocab > MAX_VOCAB {
            return Err(Error::Shape {
                what: "vocabulary size of the target distributions",
                expected: format!("1 to {MAX_VOCAB}"),
                got: vocab.to_string(),
            });
        }
        if let Some(&token) = draft_tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::TokenOutOfRange { token, vocab_size: vocab });
        }
        // With nothing drafted the draft distributions play no part (and an empty upload may not
        // even know the vocabulary size).
        let draft_probs = draft_probs.filter(|_| gamma > 0);
        if let Some(q) = &draft_probs
            && q.dims() != [gamma, vocab]
        {
            return Err(Error::Shape {
                what: "draft distributions",
                expected: format!("[{gamma}, {vocab}]"),
                got: format!("{:?}", q.dims()),
            });
        }
        if let Some(q) = &draft_probs
            && q.device() != target_probs.device()
        {
            return Err(Error::Shape {
                what: "device of the draft distributions",
                expected: format!("{:?} (the target's)", target_probs.device()),
                got: format!("{:?}", q.device()),
            });
        }
        Ok(AcceptanceInputs {
            target_probs,
            draft_probs,
            tokens: draft_tokens.to_vec(),
            uniforms: uniforms.clone(),
            vocab,
        })
    }

    /// γ, the number of drafted tokens.
    pub fn gamma(&self) -> usize {
        self.tokens.len()
    }
}

/// The acceptance step on the inputs' device: the fused CubeCL kernel where one is compiled in
/// and the device runs CubeCL with f32 inputs, [`acceptance_reference`] otherwise.
pub fn acceptance(inputs: AcceptanceInputs) -> Tensor<2> {
    #[cfg(feature = "cubecl")]
    if is_fused(&inputs) {
        return cube::fused(inputs);
    }
    acceptance_reference(inputs)
}

/// Whether [`acceptance`] runs the fused kernel for these inputs: a CubeCL device (wgpu, CUDA)
/// compiled in, and f32 distributions.
pub fn is_fused(inputs: &AcceptanceInputs) -> bool {
    #[cfg(feature = "cubecl")]
    {
        cube::supports(inputs)
    }
    #[cfg(not(feature = "cubecl"))]
    {
        let _ = inputs;
        false
    }
}

/// One packed row read back: what the host needs from one stopping point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AcceptanceRow {
    /// [`Column::Total`].
    pub total: f32,
    /// [`Column::Sample`], converted to an id.
    pub sample: u32,
    /// [`Column::Accept`].
    pub accepted: bool,
    /// [`Column::DraftAtToken`].
    pub draft_at_token: f32,
}

/// Reads a packed `[rows, 4]` result back in one copy.
pub fn read_acceptance(packed: Tensor<2>) -> Result<Vec<AcceptanceRow>> {
    let [_, columns] = packed.dims();
    if columns != COLUMNS {
        return Err(shape("columns of the packed acceptance result", COLUMNS, columns));
    }
    let values = read_f32(packed)?;
    values
        .chunks_exact(COLUMNS)
        .map(|row| {
            let index = row[Column::Sample as usize];
            // An exact non-negative integer below 2²⁴ (see MAX_VOCAB); anything else is a bug
            // in a body, reported rather than truncated.
            if !(index >= 0.0 && index < MAX_VOCAB as f32 && index.fract() == 0.0) {
                return Err(Error::Readback { message: format!("sampled index {index} is not a token id") });
            }
            Ok(AcceptanceRow {
                total: row[Column::Total as usize],
                sample: index as u32,
                accepted: row[Column::Accept as usize] >= 0.5,
                draft_at_token: row[Column::DraftAtToken as usize],
            })
        })
        .collect()
}

fn shape(what: &'static str, expected: usize, got: usize) -> Error {
    Error::Shape { what, expected: expected.to_string(), got: got.to_string() }
}
