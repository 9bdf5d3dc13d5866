//! AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization") over plain tensors, with
//! global-norm gradient clipping and a warm-up + cosine learning-rate schedule.
//!
//! Written here rather than through `burn-optim` because our parameters are plain tensors named
//! after their checkpoint tensors (no `Module` derive), which keeps export a straight walk.

use burn::tensor::Tensor;

use crate::error::Result;
use crate::model::{Kind, Param, scalar};

/// Hyper-parameters of [`AdamW`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AdamWConfig {
    pub(crate) beta1: f64,
    pub(crate) beta2: f64,
    pub(crate) epsilon: f64,
    pub(crate) weight_decay: f64,
    /// Gradients are scaled down so that their global L2 norm is at most this.
    pub(crate) max_grad_norm: f64,
}

/// The moment estimates of every parameter.
pub(crate) struct AdamW {
    config: AdamWConfig,
    first: Vec<Tensor<2>>,
    second: Vec<Tensor<2>>,
    step: i32,
}

impl AdamW {
    pub(crate) fn new(config: AdamWConfig, params: &[Param]) -> Self {
        let zeros = || params.iter().map(|p| p.value.zeros_like()).collect();
        AdamW { config, first: zeros(), second: zeros(), step: 0 }
    }

    /// Applies one update with learning rate `lr`; returns the gradient norm before clipping.
    /// Norm gains are not weight-decayed (decaying them towards zero would fight the
    /// normalisation), as is usual for transformers.
    pub(crate) fn update(&mut self, params: &mut [Param], grads: Vec<Tensor<2>>, lr: f64) -> Result<f32> {
        let c = &self.config;
        self.step += 1;
        let squares: Vec<Tensor<1>> = grads.iter().map(|g| g.clone().square().sum()).collect();
        let norm = scalar(Tensor::cat(squares, 0).sum(), "gradient norm")?.sqrt();
        let clip = if f64::from(norm) > c.max_grad_norm { c.max_grad_norm / f64::from(norm) } else { 1.0 };
        let correction1 = 1.0 - c.beta1.powi(self.step);
        let correction2 = 1.0 - c.beta2.powi(self.step);
        for (i, (param, grad)) in params.iter_mut().zip(grads).enumerate() {
            let grad = grad.mul_scalar(clip);
            let m = self.first[i].clone().mul_scalar(c.beta1) + grad.clone().mul_scalar(1.0 - c.beta1);
            let v = self.second[i].clone().mul_scalar(c.beta2) + grad.square().mul_scalar(1.0 - c.beta2);
            let step =
                m.clone().div_scalar(correction1) / v.clone().div_scalar(correction2).sqrt().add_scalar(c.epsilon);
            let decay = if param.kind == Kind::Norm { 1.0 } else { 1.0 - lr * c.weight_decay };
            param.value = param.value.clone().mul_scalar(decay) - step.mul_scalar(lr);
            self.first[i] = m;
            self.second[i] = v;
        }
        Ok(norm)
    }
}

/// Linear warm-up over `warmup` steps to `peak`, then a cosine decay to `peak · floor` at `total`.
pub(crate) fn learning_rate(step: usize, total: usize, warmup: usize, peak: f64, floor: f64) -> f64 {
    if step < warmup {
        return peak * (step + 1) as f64 / warmup as f64;
    }
    let span = total.saturating_sub(warmup).max(1);
    let progress = ((step - warmup) as f64 / span as f64).min(1.0);
    let cosine = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
    peak * (floor + (1.0 - floor) * cosine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_peaks_and_decays_to_the_floor() {
        assert!((learning_rate(0, 100, 10, 1.0, 0.1) - 0.1).abs() < 1e-12);
        assert!((learning_rate(9, 100, 10, 1.0, 0.1) - 1.0).abs() < 1e-12);
        assert!((learning_rate(10, 100, 10, 1.0, 0.1) - 1.0).abs() < 1e-12);
        assert!((learning_rate(100, 100, 10, 1.0, 0.1) - 0.1).abs() < 1e-12);
        let mid = learning_rate(55, 100, 10, 1.0, 0.1);
        assert!((mid - 0.55).abs() < 1e-9, "{mid}");
    }
}
