//! [`TrainableLlama`]: the Llama decoder of `anyspec-models` laid out for training — batched
//! `[batch, seq]` inputs, a causal mask over whole windows, no KV cache — over plain tensors that
//! the trainer turns into autodiff leaves each step.
//!
//! The blocks are `anyspec_models::blocks` (RMSNorm, rotate-half RoPE and its tables, SwiGLU,
//! scaled-dot-product attention, the causal mask), the ones the burn engine of
//! `anyspec_models::Llama` runs: only the batching, the parameter layout and grouped-query
//! attention's `repeat_kv` are written here. With a tied LM head this is `transformers`'
//! `LlamaForCausalLM`, so a saved checkpoint reloads to the same logits; the `it` tests check
//! that against both of `anyspec-models`' engines (the native one has its own host-slice
//! arithmetic, so it would catch an error in the shared blocks too).

use anyspec_models::RopeScaling;
use anyspec_models::blocks::{Rope, apply_rope, attention, causal_mask, rms_norm, swiglu};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{Error, Result};
use crate::spec::ModelSpec;

/// How a parameter is laid out, which decides how it is saved and whether it is weight-decayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `[vocab, hidden]` embedding table, saved as is.
    Embedding,
    /// A `Linear` weight held as `[in, out]`, saved transposed as PyTorch's `[out, in]`.
    Linear,
    /// An RMSNorm gain held as `[1, width]`, saved as a vector.
    Norm,
}

/// One named parameter: its Hugging Face tensor name, layout and value.
#[derive(Clone, Debug)]
pub(crate) struct Param {
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) value: Tensor<2>,
}

/// The indices of one layer's parameters in [`TrainableLlama::params`].
const PER_LAYER: usize = 9;

/// A Llama decoder whose parameters are plain tensors, in the order
/// `embed_tokens`, then per layer `input_layernorm, q, k, v, o, post_attention_layernorm, gate,
/// up, down`, then the final `norm`.
#[derive(Clone, Debug)]
pub struct TrainableLlama {
    spec: ModelSpec,
    /// Plain RoPE (`rope_scaling: null` in the saved `config.json`).
    rope: Rope,
    pub(crate) params: Vec<Param>,
}

impl TrainableLlama {
    /// A freshly initialised model: weights from N(0, 0.02²) (the output projections of each
    /// residual branch scaled down by √(2·layers), as GPT-2 does), norm gains at one.
    pub fn new(spec: ModelSpec, seed: u64, device: &Device) -> Result<Self> {
        spec.validate()?;
        let rope = Rope::new(spec.head_dim(), spec.rope_theta, &RopeScaling::None)?;
        let mut rng = StdRng::seed_from_u64(seed);
        let (h, kv) = (spec.hidden_size, spec.num_kv_heads * spec.head_dim());
        let std = 0.02;
        let residual_std = std / (2.0 * spec.num_layers as f64).sqrt();
        let mut params = Vec::with_capacity(2 + PER_LAYER * spec.num_layers);
        let mut normal = |rows: usize, cols: usize, std: f64| {
            let values: Vec<f32> = (0..rows * cols).map(|_| (gaussian(&mut rng) * std) as f32).collect();
            Tensor::<2>::from_data(TensorData::new(values, [rows, cols]), device)
        };
        let ones = |width: usize| Tensor::<2>::ones([1, width], device);
        let param = |name: String, kind, value| Param { name, kind, value };
        params.push(param("model.embed_tokens.weight".into(), Kind::Embedding, normal(spec.vocab_size, h, std)));
        for i in 0..spec.num_layers {
            let p = format!("model.layers.{i}");
            params.push(param(format!("{p}.input_layernorm.weight"), Kind::Norm, ones(h)));
            params.push(param(format!("{p}.self_attn.q_proj.weight"), Kind::Linear, normal(h, h, std)));
            params.push(param(format!("{p}.self_attn.k_proj.weight"), Kind::Linear, normal(h, kv, std)));
            params.push(param(format!("{p}.self_attn.v_proj.weight"), Kind::Linear, normal(h, kv, std)));
            params.push(param(format!("{p}.self_attn.o_proj.weight"), Kind::Linear, normal(h, h, residual_std)));
            params.push(param(format!("{p}.post_attention_layernorm.weight"), Kind::Norm, ones(h)));
            params.push(param(
                format!("{p}.mlp.gate_proj.weight"),
                Kind::Linear,
                normal(h, spec.intermediate_size, std),
            ));
            params.push(param(format!("{p}.mlp.up_proj.weight"), Kind::Linear, normal(h, spec.intermediate_size, std)));
            params.push(param(
                format!("{p}.mlp.down_proj.weight"),
                Kind::Linear,
                normal(spec.intermediate_size, h, residual_std),
            ));
        }
        params.push(param("model.norm.weight".into(), Kind::Norm, ones(h)));
        Ok(TrainableLlama { spec, rope, params })
    }

    /// The architecture.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The mean next-token cross-entropy (nats) of `batch` windows of `seq + 1` tokens each,
    /// laid end to end in `windows`: position `t` of a window predicts token `t + 1`.
    ///
    /// `params` are the tensors to compute with (autodiff leaves while training, or
    /// [`TrainableLlama::params`] values for evaluation), in this model's order.
    pub(crate) fn loss(&self, params: &[Tensor<2>], windows: &[u32], batch: usize, seq: usize) -> Result<Tensor<1>> {
        if windows.len() != batch * (seq + 1) {
            return Err(Error::InvalidSetting {
                field: "windows",
                value: windows.len().to_string(),
                reason: "a batch needs batch × (seq_len + 1) tokens",
            });
        }
        let device = params[0].device();
        let mut inputs = Vec::with_capacity(batch * seq);
        let mut targets = Vec::with_capacity(batch * seq);
        for window in windows.chunks_exact(seq + 1) {
            inputs.extend_from_slice(&window[..seq]);
            targets.extend(window[1..].iter().map(|&t| i64::from(t)));
        }
        let logits = self.logits(params, &inputs, batch, seq)?;
        let targets = Tensor::<2, Int>::from_data(TensorData::new(targets, [batch * seq, 1]), &device);
        let picked = log_softmax(logits, 1).gather(1, targets);
        Ok(picked.mean().neg())
    }

    /// Logits `[batch · seq, vocab]` of `tokens` (`batch` rows of `seq` tokens, row-major), every
    /// row attending causally within itself from position 0.
    pub(crate) fn logits(&self, params: &[Tensor<2>], tokens: &[u32], batch: usize, seq: usize) -> Result<Tensor<2>> {
        let s = &self.spec;
        if let Some(&token) = tokens.iter().find(|&&t| t as usize >= s.vocab_size) {
            return Err(Error::TokenOutOfRange { token, vocab_size: s.vocab_size });
        }
        if tokens.len() != batch * seq || seq == 0 {
            return Err(Error::InvalidSetting {
                field: "tokens",
                value: tokens.len().to_string(),
                reason: "logits need batch × seq_len tokens with seq_len > 0",
            });
        }
        let device = params[0].device();
        let n = batch * seq;
        let ids: Vec<i64> = tokens.iter().map(|&t| i64::from(t)).collect();
        let ids = Tensor::<1, Int>::from_data(TensorData::new(ids, [n]), &device);
        let embed = params[0].clone();
        let mut h = embed.clone().select(0, ids);

        let (cos, sin) = self.rope.tensors_at::<4>(0..seq, &device);
        let mask = Tensor::<4>::from_data(TensorData::new(causal_mask(0, seq, None), [1, 1, seq, seq]), &device);

        for layer in params[1..1 + PER_LAYER * s.num_layers].chunks_exact(PER_LAYER) {
            let [input_norm, q, k, v, o, post_norm, gate, up, down] = layer else {
                unreachable!("chunks_exact yields {PER_LAYER} parameters");
            };
            let x = rms_norm(h.clone(), input_norm, s.rms_norm_eps);
            let heads = Heads { heads: s.num_heads, kv_heads: s.num_kv_heads, head_dim: s.head_dim() };
            let attn = self_attention(x, [q, k, v, o], heads, &cos, &sin, &mask, batch, seq);
            h = h + attn;
            let x = rms_norm(h.clone(), post_norm, s.rms_norm_eps);
            let mlp = swiglu(x.clone().matmul(gate.clone()), x.matmul(up.clone())).matmul(down.clone());
            h = h + mlp;
        }
        let norm = &params[1 + PER_LAYER * s.num_layers];
        Ok(rms_norm(h, norm, s.rms_norm_eps).matmul(embed.transpose()))
    }

    /// The current parameter values, in order.
    pub(crate) fn values(&self) -> Vec<Tensor<2>> {
        self.params.iter().map(|p| p.value.clone()).collect()
    }

    /// Mean cross-entropy over `windows` without recording gradients.
    pub fn evaluate(&self, windows: &[u32], batch: usize, seq: usize) -> Result<f32> {
        let loss = self.loss(&self.values(), windows, batch, seq)?;
        scalar(loss, "loss")
    }

    /// Logits `[tokens.len(), vocab]` of one sequence, read back to the host row by row: what a
    /// reloaded checkpoint is compared against.
    pub fn sequence_logits(&self, tokens: &[u32]) -> Result<Vec<Vec<f32>>> {
        let logits = self.logits(&self.values(), tokens, 1, tokens.len())?;
        let values = host(logits, "logits")?;
        Ok(values.chunks_exact(self.spec.vocab_size).map(<[f32]>::to_vec).collect())
    }
}

/// The attention heads of a layer: query heads, key/value heads (fewer for grouped-query
/// attention) and the width of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Heads {
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
}

/// Llama self-attention of `batch` windows of `seq` positions laid end to end in `x`
/// (`[batch · seq, width]`): the `q`, `k`, `v`, `o` projections held `[in, out]`, RoPE from the
/// `cos`/`sin` tables (`[1 or batch, 1, seq, head_dim]`), the additive `mask` (`[1, 1, seq, seq]`).
/// Returns `[batch · seq, width]`, the output projection applied.
#[allow(clippy::too_many_arguments)]
pub(crate) fn self_attention(
    x: Tensor<2>,
    [q, k, v, o]: [&Tensor<2>; 4],
    Heads { heads, kv_heads, head_dim: d }: Heads,
    cos: &Tensor<4>,
    sin: &Tensor<4>,
    mask: &Tensor<4>,
    batch: usize,
    seq: usize,
) -> Tensor<2> {
    let group = heads / kv_heads;
    let split = |t: Tensor<2>, n: usize| t.reshape([batch, seq, n, d]).swap_dims(1, 2);
    let q = apply_rope(split(x.clone().matmul(q.clone()), heads), cos, sin);
    let k = apply_rope(split(x.clone().matmul(k.clone()), kv_heads), cos, sin);
    let v = split(x.matmul(v.clone()), kv_heads);
    // Each key/value head serves `group` consecutive query heads, as `repeat_kv` in transformers.
    let repeat = |t: Tensor<4>| -> Tensor<4> {
        if group == 1 {
            t
        } else {
            t.reshape([batch, kv_heads, 1, seq, d]).repeat_dim(2, group).reshape([batch, heads, seq, d])
        }
    };
    let (k, v) = (repeat(k), repeat(v));
    let out = attention(q, k, v, mask).swap_dims(1, 2).reshape([batch * seq, heads * d]);
    out.matmul(o.clone())
}

/// A standard normal draw (Box–Muller), so initialisation needs no distribution crate.
pub(crate) fn gaussian(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A tensor's values on the host.
pub(crate) fn host<const D: usize>(tensor: Tensor<D>, name: &str) -> Result<Vec<f32>> {
    tensor
        .try_into_data()
        .map_err(|e| Error::Device { tensor: name.to_owned(), message: format!("{e:?}") })?
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| Error::Device { tensor: name.to_owned(), message: format!("{e:?}") })
}

/// A one-element tensor's value on the host.
pub(crate) fn scalar(tensor: Tensor<1>, name: &str) -> Result<f32> {
    host(tensor, name)?
        .first()
        .copied()
        .ok_or_else(|| Error::Device { tensor: name.to_owned(), message: "the tensor is empty".into() })
}
