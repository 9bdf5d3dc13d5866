//! The training loop: random windows of a token stream, next-token cross-entropy, AdamW.

use std::time::Instant;

use anyspec_core::{Progress, ProgressUnit};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::adamw::{AdamW, AdamWConfig, learning_rate};
use crate::error::{Error, Result};
use crate::model::{TrainableLlama, scalar};

/// How to train.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainConfig {
    /// Optimiser steps.
    pub steps: usize,
    /// Windows per step.
    pub batch_size: usize,
    /// Tokens per window (each window predicts `seq_len` next tokens).
    pub seq_len: usize,
    /// Peak learning rate.
    pub learning_rate: f64,
    /// The learning rate at the last step, as a fraction of the peak.
    pub final_lr_fraction: f64,
    /// Steps of linear warm-up.
    pub warmup_steps: usize,
    /// AdamW's decoupled weight decay.
    pub weight_decay: f64,
    /// Evaluate on the validation stream every this many steps (and after the last).
    pub eval_every: usize,
    /// Windows per evaluation (taken evenly through the validation stream, the same each time).
    pub eval_windows: usize,
    /// Seed of window sampling.
    pub seed: u64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            steps: 100,
            batch_size: 8,
            seq_len: 64,
            learning_rate: 3e-3,
            final_lr_fraction: 0.1,
            warmup_steps: 10,
            weight_decay: 0.1,
            eval_every: 50,
            eval_windows: 16,
            seed: 0,
        }
    }
}

/// One logged step.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct StepLog {
    /// 1-based step number.
    pub step: usize,
    /// Training loss of the step's batch (nats per token).
    pub loss: f32,
    /// Validation loss, on evaluation steps.
    pub valid_loss: Option<f32>,
    /// The learning rate used.
    pub learning_rate: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f32,
    /// Seconds since training began.
    pub elapsed_s: f64,
}

/// The history of a training run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TrainReport {
    /// Every step.
    pub steps: Vec<StepLog>,
    /// Tokens predicted during training.
    pub tokens_seen: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl TrainReport {
    /// The last validation loss, if any evaluation ran.
    pub fn final_valid_loss(&self) -> Option<f32> {
        self.steps.iter().rev().find_map(|s| s.valid_loss)
    }
}

/// Trains `model` on random windows of `train` (a token stream with documents separated by the
/// end-of-document token), evaluating on `valid`; `on_step` sees every step (for logs).
pub fn train(
    model: &mut TrainableLlama,
    train: &[u32],
    valid: &[u32],
    config: &TrainConfig,
    progress: &dyn Progress,
    on_step: &mut dyn FnMut(&StepLog),
) -> Result<TrainReport> {
    validate(config)?;
    let window = config.seq_len + 1;
    for stream in [train, valid] {
        if stream.len() < window {
            return Err(Error::NotEnoughTokens { tokens: stream.len(), needed: window });
        }
    }
    let mut optimizer = AdamW::new(
        AdamWConfig { beta1: 0.9, beta2: 0.95, epsilon: 1e-8, weight_decay: config.weight_decay, max_grad_norm: 1.0 },
        &model.params,
    );
    let mut rng = StdRng::seed_from_u64(config.seed);
    let valid_windows = evenly_spaced_windows(valid, window, config.eval_windows);
    let mut report = TrainReport::default();
    let started = Instant::now();
    progress.start("training", Some(config.steps as u64), ProgressUnit::Items);
    for step in 0..config.steps {
        let mut batch = Vec::with_capacity(config.batch_size * window);
        for _ in 0..config.batch_size {
            let start = rng.random_range(0..=train.len() - window);
            batch.extend_from_slice(&train[start..start + window]);
        }
        let lr = learning_rate(step, config.steps, config.warmup_steps, config.learning_rate, config.final_lr_fraction);
        let leaves: Vec<_> = model.values().into_iter().map(|v| v.autodiff().require_grad()).collect();
        let loss = model.loss(&leaves, &batch, config.batch_size, config.seq_len)?;
        let gradients = loss.backward();
        let loss = scalar(loss.without_autodiff(), "loss")?;
        if !loss.is_finite() {
            return Err(Error::Diverged { step: step + 1, loss });
        }
        let grads = leaves
            .iter()
            .zip(&model.params)
            .map(|(leaf, p)| {
                leaf.grad(&gradients).ok_or_else(|| Error::Device {
                    tensor: p.name.clone(),
                    message: "no gradient was recorded for this parameter".into(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        drop(leaves);
        let grad_norm = optimizer.update(&mut model.params, grads, lr)?;
        report.tokens_seen += (config.batch_size * config.seq_len) as u64;
        let last = step + 1 == config.steps;
        let valid_loss = if (step + 1).is_multiple_of(config.eval_every) || last {
            Some(model.evaluate(&valid_windows, valid_windows.len() / window, config.seq_len)?)
        } else {
            None
        };
        let log = StepLog {
            step: step + 1,
            loss,
            valid_loss,
            learning_rate: lr,
            grad_norm,
            elapsed_s: started.elapsed().as_secs_f64(),
        };
        on_step(&log);
        report.steps.push(log);
        progress.advance(1);
    }
    progress.finish();
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

fn validate(config: &TrainConfig) -> Result<()> {
    let positive = |field, value: usize| {
        if value == 0 {
            Err(Error::InvalidSetting { field, value: "0".into(), reason: "it must be positive" })
        } else {
            Ok(())
        }
    };
    positive("steps", config.steps)?;
    positive("batch_size", config.batch_size)?;
    positive("seq_len", config.seq_len)?;
    positive("eval_every", config.eval_every)?;
    positive("eval_windows", config.eval_windows)?;
    if !(config.learning_rate > 0.0 && config.learning_rate.is_finite()) {
        return Err(Error::InvalidSetting {
            field: "learning_rate",
            value: config.learning_rate.to_string(),
            reason: "it must be a positive finite number",
        });
    }
    Ok(())
}

/// `count` windows of `window` tokens spread evenly over `stream` (fewer if it is short), so that
/// every evaluation scores the same text.
fn evenly_spaced_windows(stream: &[u32], window: usize, count: usize) -> Vec<u32> {
    let room = stream.len() - window;
    let count = count.min(room / window + 1).max(1);
    let mut out = Vec::with_capacity(count * window);
    for i in 0..count {
        let start = if count == 1 { 0 } else { i * room / (count - 1) };
        out.extend_from_slice(&stream[start..start + window]);
    }
    out
}
