//! Rotary position embeddings, including Llama 3's frequency-dependent rescaling.
//!
//! The tables are computed on the host for just the positions of each forward pass: a full
//! table for a 128k-token context window would cost hundreds of megabytes per model.
//!
//! Public as [`crate::blocks::Rope`]: the burn engine, the native engine and `anyspec-train`'s
//! training model all take their tables from here, so the three rotate alike.

use burn::tensor::{Device, Tensor, TensorData};

use crate::config::RopeScaling;
use crate::error::{Error, Result};

/// The inverse frequencies of one model; `cos`/`sin` rows are made per forward pass.
#[derive(Clone, Debug)]
pub struct Rope {
    inv_freq: Vec<f32>,
    head_dim: usize,
}

impl Rope {
    /// `inv_freq[i] = theta^(−2i/d)`, then rescaled as `transformers` does for the rope type.
    ///
    /// Refuses a `head_dim` that is zero or odd (rotate-half pairs the two halves of a head) and
    /// a `theta` that is not a positive number, as [`LlamaConfig`](crate::LlamaConfig) does.
    pub fn new(head_dim: usize, theta: f64, scaling: &RopeScaling) -> Result<Self> {
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(Error::UnsupportedConfig {
                field: "head_dim",
                value: head_dim.to_string(),
                reason: "rotary embeddings need an even, positive head dimension",
            });
        }
        if !(theta.is_finite() && theta > 0.0) {
            return Err(Error::UnsupportedConfig {
                field: "rope_theta",
                value: theta.to_string(),
                reason: "it must be a positive number (the RoPE base, e.g. 10000)",
            });
        }
        let half = head_dim / 2;
        let base: Vec<f64> = (0..half).map(|i| 1.0 / theta.powf((2 * i) as f64 / head_dim as f64)).collect();
        let scaled: Vec<f64> = match *scaling {
            RopeScaling::None => base,
            RopeScaling::Linear { factor } => base.iter().map(|f| f / factor).collect(),
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => {
                // transformers.modeling_rope_utils._compute_llama3_parameters.
                let low_freq_wavelen = original_max_position_embeddings / low_freq_factor;
                let high_freq_wavelen = original_max_position_embeddings / high_freq_factor;
                base.iter()
                    .map(|&f| {
                        let wavelen = 2.0 * std::f64::consts::PI / f;
                        if wavelen > low_freq_wavelen {
                            f / factor
                        } else if wavelen < high_freq_wavelen {
                            f
                        } else {
                            let smooth = (original_max_position_embeddings / wavelen - low_freq_factor)
                                / (high_freq_factor - low_freq_factor);
                            (1.0 - smooth) * f / factor + smooth * f
                        }
                    })
                    .collect()
            }
        };
        Ok(Rope { inv_freq: scaled.into_iter().map(|f| f as f32).collect(), head_dim })
    }

    /// The width of the heads the tables are made for.
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// `cos` and `sin` for `positions`, in order, each `[positions.len(), head_dim]` row-major
    /// with the half-width table repeated twice (the `rotate_half` convention of Hugging Face).
    /// Positions need not be contiguous: the nodes of a token tree sit at the positions of their
    /// depths, so they repeat.
    pub fn tables_at(&self, positions: impl ExactSizeIterator<Item = usize>) -> (Vec<f32>, Vec<f32>) {
        let len = positions.len();
        let mut cos = Vec::with_capacity(len * self.head_dim);
        let mut sin = Vec::with_capacity(len * self.head_dim);
        for position in positions {
            for _ in 0..2 {
                for &f in &self.inv_freq {
                    // transformers multiplies in f32, then takes cos/sin in f32.
                    let angle = position as f32 * f;
                    cos.push(angle.cos());
                    sin.push(angle.sin());
                }
            }
        }
        (cos, sin)
    }

    /// [`Rope::tables_at`] as tensors on `device`, shaped `[1, …, 1, positions, head_dim]` to
    /// broadcast over activations of rank `D` whose last two axes are positions and head
    /// features (what [`apply_rope`](crate::blocks::apply_rope) takes). `D` must be at least 2;
    /// a smaller rank does not compile.
    pub fn tensors_at<const D: usize>(
        &self,
        positions: impl ExactSizeIterator<Item = usize>,
        device: &Device,
    ) -> (Tensor<D>, Tensor<D>) {
        const { assert!(D >= 2, "RoPE tables need a positions axis and a head axis") };
        let mut shape = [1; D];
        shape[D - 2] = positions.len();
        shape[D - 1] = self.head_dim;
        let (cos, sin) = self.tables_at(positions);
        let tensor = |values| Tensor::<D>::from_data(TensorData::new(values, shape), device);
        (tensor(cos), tensor(sin))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_zero_is_the_identity() {
        let (cos, sin) = Rope::new(8, 10_000.0, &RopeScaling::None).unwrap().tables_at(0..1);
        assert!(cos.iter().all(|&c| c == 1.0) && sin.iter().all(|&s| s == 0.0));
    }

    #[test]
    fn llama3_scaling_keeps_high_frequencies_and_slows_low_ones() {
        let scaling = RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 64.0,
        };
        let plain = Rope::new(16, 500_000.0, &RopeScaling::None).unwrap();
        let scaled = Rope::new(16, 500_000.0, &scaling).unwrap();
        // The first frequency (wavelength 2π < 64 / 4) is untouched, the last (huge wavelength) is /8.
        assert_eq!(plain.inv_freq[0], scaled.inv_freq[0]);
        let last = plain.inv_freq.len() - 1;
        assert!((plain.inv_freq[last] / 8.0 - scaled.inv_freq[last]).abs() < 1e-12);
    }

    #[test]
    fn odd_or_zero_head_dims_and_bad_bases_are_refused() {
        for (head_dim, theta) in [(0, 10_000.0), (7, 10_000.0), (8, 0.0), (8, -1.0), (8, f64::NAN)] {
            assert!(matches!(Rope::new(head_dim, theta, &RopeScaling::None), Err(Error::UnsupportedConfig { .. })));
        }
    }
}
