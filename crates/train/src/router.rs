//! Training DynaSpec's cluster router (§4.2, "Training the router"): a two-layer ReLU MLP over
//! `[E(x_t), H̃_{t−1}]`, multi-label over `M` clusters, binary cross-entropy with hard labels
//!
//! `L_r = E[ Σ_m −y_{t,m} log σ(s_{t,m}) − (1 − y_{t,m}) log(1 − σ(s_{t,m})) ]`,
//!
//! AdamW (this crate's), burn autodiff. The data are plain host arrays; which clusters are
//! positive, and why, is the caller's choice (`anyspec-dynaspec` builds them from the target's
//! most likely next tokens).

use std::time::Instant;

use anyspec_core::{Progress, ProgressUnit};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::adamw::{AdamW, AdamWConfig};
use crate::error::{Error, Result};
use crate::model::{Kind, Param, host, scalar};

/// Router training examples: `inputs` is `[positions, input_size]` row-major; `positives[i]`
/// lists the clusters labelled 1 for position `i` (all others are 0).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouterData {
    /// Feature rows, flat.
    pub inputs: Vec<f32>,
    /// Width of a feature row (`d_r`).
    pub input_size: usize,
    /// Positive clusters per row.
    pub positives: Vec<Vec<u32>>,
    /// `M`.
    pub clusters: usize,
}

impl RouterData {
    /// Number of positions.
    pub fn len(&self) -> usize {
        self.positives.len()
    }

    /// Whether there is no position.
    pub fn is_empty(&self) -> bool {
        self.positives.is_empty()
    }

    fn validate(&self, what: &'static str) -> Result<()> {
        let bad = |reason: &'static str, value: String| Err(Error::InvalidSetting { field: what, value, reason });
        if self.is_empty() || self.input_size == 0 || self.clusters == 0 {
            return bad(
                "router data needs at least one position, one input and one cluster",
                format!("{} positions", self.len()),
            );
        }
        if self.inputs.len() != self.len() * self.input_size {
            return bad("inputs must hold positions × input_size values", format!("{} values", self.inputs.len()));
        }
        if let Some(m) = self.positives.iter().flatten().find(|&&m| m as usize >= self.clusters) {
            return bad("a positive cluster is not below the number of clusters", m.to_string());
        }
        if self.inputs.iter().any(|v| !v.is_finite()) {
            return bad("a feature is not finite", "NaN or infinite".into());
        }
        Ok(())
    }
}

/// Hyper-parameters of [`train_router`].
#[derive(Clone, Debug, PartialEq)]
pub struct RouterTrainConfig {
    /// Width of the hidden layer.
    pub hidden: usize,
    /// Passes over the data.
    pub epochs: usize,
    /// Positions per step.
    pub batch_size: usize,
    /// AdamW learning rate (constant).
    pub learning_rate: f64,
    /// AdamW weight decay (weights only; biases are not decayed).
    pub weight_decay: f64,
    /// Seed of the initial weights and the shuffles.
    pub seed: u64,
}

impl Default for RouterTrainConfig {
    fn default() -> Self {
        RouterTrainConfig { hidden: 256, epochs: 8, batch_size: 256, learning_rate: 1e-3, weight_decay: 0.01, seed: 0 }
    }
}

/// A trained router, row-major as `anyspec_dynaspec::Router` takes it: `w1` `[hidden, input]`,
/// `w2` `[clusters, hidden]`, with the loss per epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterWeights {
    /// First layer, `[hidden, input]`.
    pub w1: Vec<f32>,
    /// First bias.
    pub b1: Vec<f32>,
    /// Second layer, `[clusters, hidden]`.
    pub w2: Vec<f32>,
    /// Second bias.
    pub b2: Vec<f32>,
    /// Mean training `L_r` (summed over clusters, averaged over positions) of each epoch.
    pub loss_log: Vec<f32>,
    /// `L_r` on the validation data after each epoch (empty without validation data).
    pub valid_log: Vec<f32>,
    /// Seconds spent.
    pub seconds: f64,
}

/// Trains the router on `train` (and scores `valid` after every epoch) on `device`.
///
/// The output bias starts at each cluster's log-odds of being positive in `train`, so the first
/// steps learn context rather than the base rates.
///
/// # Errors
/// [`Error::InvalidSetting`] for inconsistent data or a zero setting, [`Error::Diverged`] when the
/// loss becomes NaN or infinite, [`Error::Device`] when a tensor cannot be read back.
pub fn train_router(
    train: &RouterData,
    valid: Option<&RouterData>,
    config: &RouterTrainConfig,
    device: &Device,
    progress: &dyn Progress,
) -> Result<RouterWeights> {
    train.validate("train")?;
    if let Some(v) = valid {
        v.validate("valid")?;
        if v.input_size != train.input_size || v.clusters != train.clusters {
            return Err(Error::InvalidSetting {
                field: "valid",
                value: format!("{}×{}", v.input_size, v.clusters),
                reason: "validation data must have the training data's input width and clusters",
            });
        }
    }
    for (field, value) in [("hidden", config.hidden), ("epochs", config.epochs), ("batch_size", config.batch_size)] {
        if value == 0 {
            return Err(Error::InvalidSetting { field, value: "0".into(), reason: "it must be positive" });
        }
    }
    if !(config.learning_rate > 0.0 && config.learning_rate.is_finite()) {
        return Err(Error::InvalidSetting {
            field: "learning_rate",
            value: config.learning_rate.to_string(),
            reason: "it must be a positive finite number",
        });
    }
    let (d, h, m) = (train.input_size, config.hidden, train.clusters);
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut uniform = |rows: usize, cols: usize, fan_in: usize| {
        let bound = (6.0 / fan_in as f64).sqrt();
        let values: Vec<f32> = (0..rows * cols).map(|_| ((rng.random::<f64>() * 2.0 - 1.0) * bound) as f32).collect();
        Tensor::<2>::from_data(TensorData::new(values, [rows, cols]), device)
    };
    let w1 = uniform(d, h, d);
    let w2 = uniform(h, m, h).mul_scalar(0.5);
    let mut positives = vec![0usize; m];
    train.positives.iter().flatten().for_each(|&c| positives[c as usize] += 1);
    let prior: Vec<f32> = positives
        .iter()
        .map(|&p| {
            let rate = (p as f64 + 0.5) / (train.len() as f64 + 1.0);
            (rate / (1.0 - rate)).ln() as f32
        })
        .collect();
    // Biases are `Kind::Norm` only so that AdamW does not decay them.
    let mut params = vec![
        Param { name: "w1".into(), kind: Kind::Linear, value: w1 },
        Param { name: "b1".into(), kind: Kind::Norm, value: Tensor::zeros([1, h], device) },
        Param { name: "w2".into(), kind: Kind::Linear, value: w2 },
        Param { name: "b2".into(), kind: Kind::Norm, value: Tensor::from_data(TensorData::new(prior, [1, m]), device) },
    ];
    let mut optimizer = AdamW::new(
        AdamWConfig { beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weight_decay: config.weight_decay, max_grad_norm: 5.0 },
        &params,
    );
    let started = Instant::now();
    let steps_per_epoch = train.len().div_ceil(config.batch_size);
    progress.start("training the router", Some((config.epochs * steps_per_epoch) as u64), ProgressUnit::Items);
    let mut order: Vec<usize> = (0..train.len()).collect();
    let (mut loss_log, mut valid_log) = (Vec::new(), Vec::new());
    for epoch in 0..config.epochs {
        order.shuffle(&mut rng);
        let mut total = 0.0f64;
        for (step, batch) in order.chunks(config.batch_size).enumerate() {
            let leaves: Vec<Tensor<2>> = params.iter().map(|p| p.value.clone().autodiff().require_grad()).collect();
            let (x, y) = batch_tensors(train, batch, &leaves[0].device());
            let loss = bce(&leaves, x, y);
            let gradients = loss.backward();
            let value = scalar(loss.without_autodiff(), "router loss")?;
            if !value.is_finite() {
                return Err(Error::Diverged { step: epoch * steps_per_epoch + step + 1, loss: value });
            }
            total += f64::from(value) * batch.len() as f64;
            let grads = leaves
                .iter()
                .zip(&params)
                .map(|(leaf, p)| {
                    leaf.grad(&gradients).ok_or_else(|| Error::Device {
                        tensor: p.name.clone(),
                        message: "no gradient was recorded for this parameter".into(),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            drop(leaves);
            optimizer.update(&mut params, grads, config.learning_rate)?;
            progress.advance(1);
        }
        loss_log.push((total / train.len() as f64) as f32);
        if let Some(v) = valid {
            valid_log.push(evaluate(&params, v, config.batch_size, device)?);
        }
    }
    progress.finish();
    let values: Vec<Vec<f32>> = params.iter().map(|p| host(p.value.clone(), &p.name)).collect::<Result<Vec<_>>>()?;
    Ok(RouterWeights {
        w1: transpose(&values[0], d, h),
        b1: values[1].clone(),
        w2: transpose(&values[2], h, m),
        b2: values[3].clone(),
        loss_log,
        valid_log,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// `L_r` of the current weights on `data`, without gradients.
fn evaluate(params: &[Param], data: &RouterData, batch_size: usize, device: &Device) -> Result<f32> {
    let values: Vec<Tensor<2>> = params.iter().map(|p| p.value.clone()).collect();
    let mut total = 0.0f64;
    let all: Vec<usize> = (0..data.len()).collect();
    for batch in all.chunks(batch_size) {
        let (x, y) = batch_tensors(data, batch, device);
        total += f64::from(scalar(bce(&values, x, y), "router loss")?) * batch.len() as f64;
    }
    Ok((total / data.len() as f64) as f32)
}

fn batch_tensors(data: &RouterData, rows: &[usize], device: &Device) -> (Tensor<2>, Tensor<2>) {
    let (d, m) = (data.input_size, data.clusters);
    let mut x = Vec::with_capacity(rows.len() * d);
    let mut y = vec![0f32; rows.len() * m];
    for (i, &r) in rows.iter().enumerate() {
        x.extend_from_slice(&data.inputs[r * d..(r + 1) * d]);
        for &c in &data.positives[r] {
            y[i * m + c as usize] = 1.0;
        }
    }
    (
        Tensor::from_data(TensorData::new(x, [rows.len(), d]), device),
        Tensor::from_data(TensorData::new(y, [rows.len(), m]), device),
    )
}

/// Binary cross-entropy with logits, summed over clusters and averaged over rows, in the stable
/// form `max(s, 0) − s·y + ln(1 + e^{−|s|})`.
fn bce(params: &[Tensor<2>], x: Tensor<2>, y: Tensor<2>) -> Tensor<1> {
    let hidden = relu(x.matmul(params[0].clone()) + params[1].clone());
    let s = hidden.matmul(params[2].clone()) + params[3].clone();
    let loss = s.clone().clamp_min(0.0) - s.clone() * y + s.abs().neg().exp().log1p();
    let rows = loss.dims()[0] as f64;
    loss.sum().div_scalar(rows)
}

/// `[rows, cols]` row-major → `[cols, rows]` row-major.
fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    out
}
