//! The low-cost router of DynaSpec §4.2: a two-layer MLP with ReLU, `r_θ : ℝ^{d_r} → ℝ^M`,
//! scoring clusters from `[E(x_t), H̃_{t−1}]` (the current token's embedding and the drafter's
//! previous final hidden state), run on the host.
//!
//! It runs once per draft position, between two drafter passes, so its cost is added to the
//! drafter's: the two layers are `anyspec-cpu-kernels` matrices (the row kernel with the widest
//! SIMD the CPU has, on the calling thread), not plain loops, which the default x86-64 target
//! compiles to 4-wide SSE. For SmolLM2's 1152 → 256 → 256 router that took the router column of
//! `anyspec dynaspec bench` from 0.18 to 0.08 ms per position with f32 matrices.
//!
//! Between two draft positions the drafter streams its layers and head through the cache, so the
//! router's weights come from memory each time: at f32 their 1.4 MB cost more than the head rows
//! a DynaSpec shortlist saves over a frequency list. The kernel matrices are therefore `Q8_0`
//! (ggml's 8-bit blocks of 32, 0.37 MB; activations rounded to 8 bits, as for the model's own
//! layers) whenever the widths are multiples of 32, interleaved for the 8-bit kernel as a model's
//! layers are. The stored weights stay f32, and [`Router::with_f32_kernels`] multiplies by them
//! exactly. `benches/router.rs` times the three in one run (one run each, this machine):
//!
//! | router scores, one position | weights from memory | in cache |
//! |---|---|---|
//! | `Q8_0`, interleaved (the default) | 19 µs | 12 µs |
//! | `Q8_0`, rows as stored | 26 µs | 34 µs |
//! | f32 kernel matrices | 58–61 µs | 24–30 µs |
//! | plain loops | 72–77 µs | 55–65 µs |
//!
//! In `cargo xtask repro dynaspec` the router column went from 0.100 to 0.075 ms per position
//! with the EAGLE drafter and from 0.09 to 0.06 ms with the self-speculative one (`Q8_0` rows as
//! stored). That column is wall time around the whole routing step, and most of it is not the
//! product: with the interleaved matrices (and a 128-wide router) it stayed at 0.07 ms.
//!
//! The scores differ from f32's by the rounding, so a shortlist may too; decoding stays exact
//! (verification is the target's, over the full vocabulary). The kernels sum in their own order,
//! so scores may also differ in the last bits between CPUs with different SIMD.

use std::sync::Arc;

use anyspec_cpu_kernels::{self as kernels, Matrix, Threads, WeightFormat};

use crate::error::{Error, Result};

/// The router's weights: `s = W₂ · relu(W₁ · x + b₁) + b₂`, row-major.
#[derive(Clone, Debug)]
pub struct Router {
    input: usize,
    hidden: usize,
    clusters: usize,
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
    /// `W₁` and `W₂` as kernel matrices (`Q8_0` where the widths allow, see the module docs),
    /// and the single thread that multiplies them.
    layers: Arc<(Matrix, Matrix, Threads)>,
}

/// Routers are equal when their weights are (the kernel matrices are copies of them).
impl PartialEq for Router {
    fn eq(&self, other: &Router) -> bool {
        (self.input, self.hidden, self.clusters) == (other.input, other.hidden, other.clusters)
            && (&self.w1, &self.b1, &self.w2, &self.b2) == (&other.w1, &other.b1, &other.w2, &other.b2)
    }
}

impl Router {
    /// A router from its weights: `w1` is `[hidden, input]`, `w2` is `[clusters, hidden]`.
    ///
    /// # Errors
    /// When a dimension is 0, a length disagrees with the dimensions, or a weight is not finite.
    pub fn new(
        input: usize,
        hidden: usize,
        clusters: usize,
        w1: Vec<f32>,
        b1: Vec<f32>,
        w2: Vec<f32>,
        b2: Vec<f32>,
    ) -> Result<Router> {
        if input == 0 || hidden == 0 || clusters == 0 {
            return Err(Error::invalid(format!(
                "a router of input {input}, hidden {hidden} and {clusters} clusters; every size must be at least 1"
            )));
        }
        let expect = [
            ("w1", w1.len(), hidden * input),
            ("b1", b1.len(), hidden),
            ("w2", w2.len(), clusters * hidden),
            ("b2", b2.len(), clusters),
        ];
        for (name, got, want) in expect {
            if got != want {
                return Err(Error::invalid(format!("router weight {name} holds {got} values, expected {want}")));
            }
        }
        if [&w1, &b1, &w2, &b2].iter().any(|w| w.iter().any(|v| !v.is_finite())) {
            return Err(Error::invalid("a router weight is not finite (NaN or infinite); retrain the router"));
        }
        let layers = Arc::new(kernel_layers([input, hidden, clusters], &w1, &w2, true)?);
        Ok(Router { input, hidden, clusters, w1, b1, w2, b2, layers })
    }

    /// This router with f32 kernel matrices: the scores of the stored weights to f32 rounding,
    /// at about four times the bytes read per position (the A/B of `benches/router.rs`).
    ///
    /// # Errors
    /// Only when the kernel library refuses the shapes (it does not for a router `new` made).
    pub fn with_f32_kernels(mut self) -> Result<Router> {
        self.layers = Arc::new(kernel_layers([self.input, self.hidden, self.clusters], &self.w1, &self.w2, false)?);
        Ok(self)
    }

    /// Whether the kernel matrices are `Q8_0` (the default where the widths are multiples of
    /// 32) rather than f32.
    pub fn quantized(&self) -> bool {
        self.layers.0.format() == WeightFormat::Q8_0
    }

    /// `d_r`, the input width (`2 · hidden_size` of the model: embedding and hidden state).
    pub fn input_size(&self) -> usize {
        self.input
    }

    /// Width of the hidden layer.
    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// `M`, the number of cluster scores.
    pub fn clusters(&self) -> usize {
        self.clusters
    }

    /// The weights `(w1, b1, w2, b2)`.
    pub fn weights(&self) -> (&[f32], &[f32], &[f32], &[f32]) {
        (&self.w1, &self.b1, &self.w2, &self.b2)
    }

    /// Cluster scores `s = r_θ([E(x_t), H̃_{t−1}])` (logits; `σ(s)` is the probability that the
    /// cluster holds one of the likely next tokens).
    ///
    /// # Errors
    /// When `embedding.len() + prev_hidden.len()` is not the router's input width.
    pub fn scores(&self, embedding: &[f32], prev_hidden: &[f32]) -> Result<Vec<f32>> {
        if embedding.len() + prev_hidden.len() != self.input {
            return Err(Error::invalid(format!(
                "the router reads {} values ([E(x_t), H̃_(t−1)]) but got {} + {}; was it built for another model?",
                self.input,
                embedding.len(),
                prev_hidden.len()
            )));
        }
        let (w1, w2, threads) = &*self.layers;
        let product = |e: anyspec_cpu_kernels::Error| Error::invalid(format!("the router's product: {e}"));
        let x = [embedding, prev_hidden].concat();
        let mut h = vec![0.0; self.hidden];
        w1.matmul(&x, &mut h, threads).map_err(product)?;
        for (v, b) in h.iter_mut().zip(&self.b1) {
            *v = (*v + b).max(0.0);
        }
        let mut s = vec![0.0; self.clusters];
        w2.matmul(&h, &mut s, threads).map_err(product)?;
        for (v, b) in s.iter_mut().zip(&self.b2) {
            *v += b;
        }
        Ok(s)
    }
}

/// `W₁` (`[hidden, input]`) and `W₂` (`[clusters, hidden]`) as kernel matrices for widths
/// `[input, hidden, clusters]`: `Q8_0` when `quantize` and both input widths are multiples of
/// its block, f32 otherwise.
fn kernel_layers(widths: [usize; 3], w1: &[f32], w2: &[f32], quantize: bool) -> Result<(Matrix, Matrix, Threads)> {
    let [input, hidden, clusters] = widths;
    let block = WeightFormat::Q8_0.block_len();
    let q8 = quantize && input.is_multiple_of(block) && hidden.is_multiple_of(block);
    let matrix = |rows: usize, cols: usize, values: &[f32]| {
        let made = if q8 {
            kernels::quantize(WeightFormat::Q8_0, values)
                .and_then(|bytes| Matrix::from_bytes(WeightFormat::Q8_0, rows, cols, &bytes))
        } else {
            Matrix::from_f32(rows, cols, values)
        };
        let mut matrix = made.map_err(|e| Error::invalid(format!("the router's {rows} × {cols} layer: {e}")))?;
        // Multiplied whole at every position: the 8-bit kernel's own layout, as for a model's
        // layers (the f32 rows stay as they are, the exact reference).
        if q8 {
            matrix.interleave_rows();
        }
        Ok::<_, Error>(matrix)
    };
    Ok((matrix(hidden, input, w1)?, matrix(clusters, hidden, w2)?, Threads::single()))
}

/// The indices of the `k` largest scores, best first (ties to the lower index): `TopK_k(s)`.
pub fn top_k(scores: &[f32], k: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..scores.len() as u32).collect();
    let k = k.min(scores.len());
    let by_score = |a: &u32, b: &u32| scores[*b as usize].total_cmp(&scores[*a as usize]).then(a.cmp(b));
    if k < order.len() && k > 0 {
        order.select_nth_unstable_by(k - 1, by_score);
    }
    order.truncate(k);
    order.sort_by(by_score);
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_the_mlp_by_hand() {
        // input 3 (embedding 2 + hidden 1), hidden 2, clusters 2.
        let r = Router::new(
            3,
            2,
            2,
            vec![1.0, 0.0, 0.0, /**/ -1.0, 0.0, 1.0],
            vec![0.0, 0.5],
            vec![1.0, 1.0, /**/ 2.0, -1.0],
            vec![0.0, 0.1],
        )
        .unwrap();
        // h = relu([2, -2 + 3 + 0.5]) = [2, 1.5]; s = [3.5, 4 - 1.5 + 0.1].
        let s = r.scores(&[2.0, 7.0], &[3.0]).unwrap();
        assert!((s[0] - 3.5).abs() < 1e-6 && (s[1] - 2.6).abs() < 1e-6, "{s:?}");
        // The ReLU bites: h = relu([-2, 2 + 0 + 0.5]) = [0, 2.5].
        let s = r.scores(&[-2.0, 0.0], &[0.0]).unwrap();
        assert!((s[0] - 2.5).abs() < 1e-6 && (s[1] + 2.4).abs() < 1e-6, "{s:?}");
        assert!(r.scores(&[1.0], &[1.0]).unwrap_err().to_string().contains("reads 3 values"));
    }

    #[test]
    fn q8_0_kernels_score_like_the_f32_weights() {
        // Widths of whole Q8_0 blocks: the default kernels are 8-bit, `with_f32_kernels` exact.
        let (input, hidden, clusters) = (64, 32, 8);
        let wave = |n: usize, f: f32| (0..n).map(|i| (i as f32 * f).sin() * 0.2).collect::<Vec<f32>>();
        let (w1, b1, w2, b2) =
            (wave(hidden * input, 0.37), wave(hidden, 1.1), wave(clusters * hidden, 0.53), wave(clusters, 2.3));
        let q8 = Router::new(input, hidden, clusters, w1.clone(), b1.clone(), w2.clone(), b2.clone()).unwrap();
        let exact = q8.clone().with_f32_kernels().unwrap();
        assert!(q8.quantized() && !exact.quantized());
        let x = wave(input, 0.71);
        let h: Vec<f32> =
            (0..hidden).map(|j| (b1[j] + (0..input).map(|k| w1[j * input + k] * x[k]).sum::<f32>()).max(0.0)).collect();
        let by_hand: Vec<f32> =
            (0..clusters).map(|m| b2[m] + (0..hidden).map(|j| w2[m * hidden + j] * h[j]).sum::<f32>()).collect();
        let (a, b) = (exact.scores(&x[..32], &x[32..]).unwrap(), q8.scores(&x[..32], &x[32..]).unwrap());
        let scale = by_hand.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        for ((e, q), want) in a.iter().zip(&b).zip(&by_hand) {
            assert!((e - want).abs() < 1e-5 * scale, "f32 kernels {e} vs {want}");
            // 8-bit weights and activations: about 1% of the scores' scale, not more.
            assert!((q - want).abs() < 0.02 * scale, "q8_0 kernels {q} vs {want}");
        }
        assert_ne!(a, b, "the default kernels should be the 8-bit ones");
        // Widths that are not whole blocks keep f32 kernels.
        let odd = Router::new(3, 2, 2, vec![0.1; 6], vec![0.0; 2], vec![0.1; 4], vec![0.0; 2]).unwrap();
        assert!(!odd.quantized());
    }

    #[test]
    fn bad_weights_are_refused() {
        assert!(Router::new(2, 1, 1, vec![0.0; 3], vec![0.0], vec![0.0], vec![0.0]).is_err());
        assert!(Router::new(2, 1, 1, vec![f32::NAN, 0.0], vec![0.0], vec![0.0], vec![0.0]).is_err());
        assert!(Router::new(0, 1, 1, vec![], vec![0.0], vec![0.0], vec![0.0]).is_err());
    }

    #[test]
    fn top_k_is_best_first_with_ties_to_the_lower_index() {
        let s = [0.5, 2.0, 2.0, -1.0, 3.0];
        assert_eq!(top_k(&s, 3), vec![4, 1, 2]);
        assert_eq!(top_k(&s, 1), vec![4]);
        assert_eq!(top_k(&s, 9), vec![4, 1, 2, 0, 3]);
        assert!(top_k(&s, 0).is_empty());
    }
}
