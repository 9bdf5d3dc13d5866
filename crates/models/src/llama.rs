//! The Llama-family decoder: embeddings, pre-norm attention + SwiGLU layers, final norm, LM head.
//!
//! Batch size is always one (speculative decoding verifies one sequence at a time), so
//! activations are `[positions, width]` and attention runs per key/value head. The arithmetic
//! of each block (RMSNorm, RoPE, SwiGLU, attention) is [`crate::blocks`], which
//! `anyspec-train`'s training model runs too.

use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::blocks::{apply_rope, attention, causal_mask, rms_norm, swiglu};
use crate::cache::BurnCache;
use crate::config::LlamaConfig;
use crate::error::{Error, Result};
use crate::rope::Rope;
use crate::source::WeightSource;
use crate::weights::transpose;

mod tree;

pub use tree::TreeNode;
pub(crate) use tree::{BurnTree, GrownTree, grow_tree};

/// A `Linear` layer stored as `[in, out]` so that `x.matmul(weight)` needs no transpose.
#[derive(Clone, Debug)]
struct Linear {
    weight: Tensor<2>,
    bias: Option<Tensor<2>>,
}

impl Linear {
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let y = x.matmul(self.weight.clone());
        match &self.bias {
            Some(bias) => y + bias.clone(),
            None => y,
        }
    }
}

#[derive(Clone, Debug)]
struct Layer {
    input_norm: Tensor<2>,
    post_attention_norm: Tensor<2>,
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
}

/// A slice of a model's LM head: the rows of the vocabulary ids a drafter may produce
/// (see [`Llama::pruned_head`](crate::Llama::pruned_head)). Cheap to clone.
#[derive(Clone, Debug)]
pub struct PrunedHead {
    pub(crate) ids: Vec<u32>,
    /// `[hidden, ids.len()]` on the burn engine on flex; the native engine multiplies the kept
    /// rows of its head in place, and the burn engine on a CubeCL device runs the gathered
    /// head kernel: neither needs a copy.
    pub(crate) weight: Option<Tensor<2>>,
    /// Made of whole blocks of a native model's ordered head copy
    /// ([`Llama::pruned_head_blocks`](crate::Llama::pruned_head_blocks)).
    pub(crate) blocks: Option<crate::head_blocks::PickedBlocks>,
}

impl PrunedHead {
    /// The kept vocabulary ids, in column order.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Number of kept rows.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no row is kept (never true for a head built by [`Llama::pruned_head`](crate::Llama::pruned_head)).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The sliced head of the burn engine, or an error for a head made by a native model.
    pub(crate) fn burn_weight(&self) -> Result<Tensor<2>> {
        self.weight.clone().ok_or_else(|| {
            Error::InvalidArgument(
                "this pruned head was made by a model on the native CPU engine; make it with the model that uses it"
                    .into(),
            )
        })
    }
}

/// The attention block of one layer, as [`Llama::layers`] runs it: `(layer index, layer, normed
/// input, cos, sin) → output`. Causal attention over the KV cache for ordinary passes, tree
/// attention for token trees.
type Attend<'a> = dyn FnMut(usize, &Layer, Tensor<2>, &Tensor<3>, &Tensor<3>) -> Tensor<2> + 'a;

/// A Llama-family model on the burn engine (any burn device). Cheap to clone: tensors are
/// reference-counted.
#[derive(Clone, Debug)]
pub(crate) struct BurnLlama {
    config: LlamaConfig,
    device: Device,
    /// The `[vocab, hidden]` embedding matrix, or `None` when it is tied to the LM head: then
    /// embeddings are columns of the `[hidden, vocab]` head, so the matrix is held once.
    embeddings: Option<Tensor<2>>,
    layers: Vec<Layer>,
    norm: Tensor<2>,
    /// `[hidden, vocab]`.
    lm_head: Tensor<2>,
    rope: Rope,
}

impl BurnLlama {
    /// Loads the weights from `source` (a safetensors checkpoint or a dequantized GGUF file).
    pub(crate) fn load_from(source: &mut dyn WeightSource, config: LlamaConfig, device: &Device) -> Result<Self> {
        Loader { files: source, config: &config, device, prefix: "" }.load()
    }

    /// The configuration the model was built from.
    pub(crate) fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// Runs `tokens` (positions `cache.len()..`) through the model, appends their keys and values
    /// to `cache`, and returns the logits of the last `logits_rows` positions,
    /// `[logits_rows, vocab]`, still on the device.
    ///
    /// One call over k tokens gives the same logits as k calls over one token each: the causal
    /// mask lets position `i` see the cache and the new positions up to `i`.
    pub(crate) fn forward(&self, tokens: &[u32], cache: &mut BurnCache, logits_rows: usize) -> Result<Tensor<2>> {
        Ok(self.final_hidden(tokens, cache, logits_rows)?.matmul(self.lm_head.clone()))
    }

    /// [`Llama::forward`] with the logits of only the vocabulary rows kept in `head`,
    /// `[logits_rows, head.len()]`: column `j` is the logit of token `head.ids()[j]`.
    ///
    /// A drafter that can only ever use a subset of its vocabulary (the tokens its target also
    /// has, or a frequency shortlist) skips the rest of the LM-head product, the largest single
    /// matrix product of a small model.
    pub(crate) fn forward_pruned(
        &self,
        tokens: &[u32],
        cache: &mut BurnCache,
        logits_rows: usize,
        head: &PrunedHead,
    ) -> Result<Tensor<2>> {
        let hidden = self.final_hidden(tokens, cache, logits_rows)?;
        self.pruned_logits(hidden, head)
    }

    /// Logits of final-norm hidden rows over the vocabulary rows of `head`, `[rows,
    /// head.len()]`: on a CubeCL device (wgpu, CUDA) the gathered head kernel of
    /// `anyspec-kernels` reads the kept columns of the LM head where they lie; elsewhere the
    /// slice `head` holds is multiplied.
    pub(crate) fn pruned_logits(&self, hidden: Tensor<2>, head: &PrunedHead) -> Result<Tensor<2>> {
        match &head.weight {
            Some(weight) => Ok(hidden.matmul(weight.clone())),
            None if anyspec_kernels::gathered_head_is_fused(&self.device) => {
                Ok(anyspec_kernels::gathered_head(hidden, self.lm_head.clone(), &head.ids)?)
            }
            None => Ok(hidden.matmul(head.burn_weight()?)),
        }
    }

    /// The `[hidden, kept]` slice of the LM head for the vocabulary rows `ids`, built once and
    /// passed to [`Llama::forward_pruned`] at every step. On a CubeCL device nothing is copied:
    /// the gathered head kernel reads the rows in place ([`Llama::pruned_logits`]), so a
    /// shortlist that changes at every step (DynaSpec) costs no copy of the head.
    pub(crate) fn pruned_head(&self, ids: &[u32]) -> Result<PrunedHead> {
        if ids.is_empty() {
            return Err(Error::InvalidArgument("a pruned LM head needs at least one vocabulary row".into()));
        }
        if let Some(&token) = ids.iter().find(|&&t| t as usize >= self.config.vocab_size) {
            return Err(Error::TokenOutOfRange { token, vocab_size: self.config.vocab_size });
        }
        if anyspec_kernels::gathered_head_is_fused(&self.device) {
            return Ok(PrunedHead { ids: ids.to_vec(), weight: None, blocks: None });
        }
        let index: Vec<i64> = ids.iter().map(|&t| i64::from(t)).collect();
        let index = Tensor::<1, Int>::from_data(TensorData::new(index, [ids.len()]), &self.device);
        Ok(PrunedHead { ids: ids.to_vec(), weight: Some(self.lm_head.clone().select(1, index)), blocks: None })
    }

    /// Full-vocabulary logits of final-norm hidden rows.
    pub(crate) fn head_logits(&self, hidden: Tensor<2>) -> Result<Tensor<2>> {
        Ok(hidden.matmul(self.lm_head.clone()))
    }

    /// The LM head as `[vocab, hidden]` rows, on the host.
    pub(crate) fn lm_head_rows(&self) -> Result<Vec<f32>> {
        let rows = anyspec_kernels::readback::read_rows(self.lm_head.clone().transpose())?;
        Ok(rows.concat())
    }

    /// The final RMSNorm's gain, `[hidden]`, on the host.
    pub(crate) fn final_norm_weight(&self) -> Result<Vec<f32>> {
        Ok(anyspec_kernels::readback::read_rows(self.norm.clone())?.concat())
    }

    /// The input embedding of `token`, `[hidden]`, on the host.
    pub(crate) fn embedding(&self, token: u32) -> Result<Vec<f32>> {
        if token as usize >= self.config.vocab_size {
            return Err(Error::TokenOutOfRange { token, vocab_size: self.config.vocab_size });
        }
        let id = Tensor::<1, Int>::from_data(TensorData::new(vec![i64::from(token)], [1]), &self.device);
        let row = match &self.embeddings {
            Some(table) => table.clone().select(0, id),
            None => self.lm_head.clone().select(1, id).transpose(),
        };
        Ok(anyspec_kernels::readback::read_rows(row)?.concat())
    }

    /// Refuses a cache made for another model (another layer count).
    pub(crate) fn check_cache(&self, cache: &BurnCache) -> Result<()> {
        if cache.num_layers() != self.config.num_layers {
            return Err(Error::InvalidArgument(format!(
                "the KV cache was made for {} layers but the model has {}; make it with Llama::new_cache",
                cache.num_layers(),
                self.config.num_layers
            )));
        }
        Ok(())
    }

    /// The final-norm hidden states of the last `logits_rows` positions, `[logits_rows, hidden]`.
    pub(crate) fn final_hidden(&self, tokens: &[u32], cache: &mut BurnCache, logits_rows: usize) -> Result<Tensor<2>> {
        let c = &self.config;
        let len = tokens.len();
        if len == 0 {
            return Err(Error::InvalidArgument("a forward pass needs at least one token".into()));
        }
        if logits_rows == 0 || logits_rows > len {
            return Err(Error::InvalidArgument(format!(
                "asked for the logits of {logits_rows} positions from a pass over {len} tokens; \
                 ask for 1..={len}"
            )));
        }
        if let Some(&token) = tokens.iter().find(|&&t| t as usize >= c.vocab_size) {
            return Err(Error::TokenOutOfRange { token, vocab_size: c.vocab_size });
        }
        self.check_cache(cache)?;
        let start = cache.len();
        if start + len > c.max_position_embeddings {
            return Err(Error::ContextFull { needed: start + len, max: c.max_position_embeddings });
        }
        let positions: Vec<usize> = (start..start + len).collect();
        let mask = self.mask(start, len);
        let h = self.layers(tokens, &positions, &mut |index, layer, x, cos, sin| {
            self.causal_attention(layer, index, x, cos, sin, &mask, cache)
        });
        cache.advance(len);

        let last = h.narrow(0, len - logits_rows, logits_rows);
        Ok(rms_norm(last, &self.norm, c.rms_norm_eps))
    }

    /// Embeds `tokens` at `positions` and runs every layer, with `attend(layer index, layer,
    /// normed input, cos, sin)` as the attention block; returns the hidden states before the
    /// final norm, `[tokens.len(), hidden]`. Inputs are validated by the callers.
    fn layers(&self, tokens: &[u32], positions: &[usize], attend: &mut Attend<'_>) -> Tensor<2> {
        let c = &self.config;
        let len = tokens.len();
        let ids: Vec<i64> = tokens.iter().map(|&t| i64::from(t)).collect();
        let ids = Tensor::<1, Int>::from_data(TensorData::new(ids, [len]), &self.device);
        let mut h = match &self.embeddings {
            Some(table) => table.clone().select(0, ids),
            None => self.lm_head.clone().select(1, ids).transpose(),
        };

        let (cos, sin) = self.rope.tensors_at::<3>(positions.iter().copied(), &self.device);

        for (index, layer) in self.layers.iter().enumerate() {
            let attn = attend(index, layer, rms_norm(h.clone(), &layer.input_norm, c.rms_norm_eps), &cos, &sin);
            h = h + attn;
            let x = rms_norm(h.clone(), &layer.post_attention_norm, c.rms_norm_eps);
            let mlp = layer.down_proj.forward(swiglu(layer.gate_proj.forward(x.clone()), layer.up_proj.forward(x)));
            h = h + mlp;
        }
        h
    }

    /// A fresh cache for this model.
    pub(crate) fn new_cache(&self) -> BurnCache {
        BurnCache::new(self.config.num_layers)
    }

    /// The causal mask of `len` new positions after `start` cached ones, `[1, group · len,
    /// start + len]`: [`causal_mask`] repeated for the `group` query heads that
    /// [`BurnLlama::causal_attention`] stacks along the position axis.
    fn mask(&self, start: usize, len: usize) -> Tensor<3> {
        let group = self.config.num_heads / self.config.num_kv_heads;
        let mask = causal_mask(start, len, self.config.sliding_window).repeat(group);
        Tensor::from_data(TensorData::new(mask, [1, group * len, start + len]), &self.device)
    }

    /// Queries `[heads, len, head_dim]` and keys and values `[kv_heads, len, head_dim]` of one
    /// layer, rotated for the positions `cos`/`sin` were made for.
    fn project(&self, layer: &Layer, x: Tensor<2>, cos: &Tensor<3>, sin: &Tensor<3>) -> [Tensor<3>; 3] {
        let c = &self.config;
        let len = x.dims()[0];
        let split = |t: Tensor<2>, n: usize| t.reshape([len, n, c.head_dim]).swap_dims(0, 1);
        let q = apply_rope(split(layer.q_proj.forward(x.clone()), c.num_heads), cos, sin);
        let k = apply_rope(split(layer.k_proj.forward(x.clone()), c.num_kv_heads), cos, sin);
        let v = split(layer.v_proj.forward(x), c.num_kv_heads);
        [q, k, v]
    }

    /// Causal attention of new positions over the cache and themselves; appends their keys and
    /// values to the cache.
    #[allow(clippy::too_many_arguments)]
    fn causal_attention(
        &self,
        layer: &Layer,
        index: usize,
        x: Tensor<2>,
        cos: &Tensor<3>,
        sin: &Tensor<3>,
        mask: &Tensor<3>,
        cache: &mut BurnCache,
    ) -> Tensor<2> {
        let c = &self.config;
        let len = x.dims()[0];
        let (heads, kv_heads, head_dim) = (c.num_heads, c.num_kv_heads, c.head_dim);
        let group = heads / kv_heads;
        let [q, k, v] = self.project(layer, x, cos, sin);
        let (k, v) = cache.append(index, k, v);

        // Grouped-query attention without copying keys: the `group` query heads that share a
        // key/value head are stacked along the position axis (and the mask with them).
        let q = q.reshape([kv_heads, group * len, head_dim]);
        let out = attention(q, k, v, mask).reshape([heads, len, head_dim]).swap_dims(0, 1);
        layer.o_proj.forward(out.reshape([len, heads * head_dim]))
    }
}

/// Reads every tensor of the architecture, checking names and shapes as it goes.
struct Loader<'a> {
    files: &'a mut dyn WeightSource,
    config: &'a LlamaConfig,
    device: &'a Device,
    prefix: &'static str,
}

impl Loader<'_> {
    fn load(mut self) -> Result<BurnLlama> {
        // Base-model checkpoints (LlamaModel) name tensors without the `model.` prefix.
        self.prefix = if self.files.contains("embed_tokens.weight") { "" } else { "model." };
        let c = self.config;
        let (hidden, vocab) = (c.hidden_size, c.vocab_size);
        let q_width = c.num_heads * c.head_dim;
        let kv_width = c.num_kv_heads * c.head_dim;
        let mut layers = Vec::with_capacity(c.num_layers);
        for i in 0..c.num_layers {
            let p = format!("layers.{i}");
            layers.push(Layer {
                input_norm: self.vector(&format!("{p}.input_layernorm.weight"), hidden)?,
                post_attention_norm: self.vector(&format!("{p}.post_attention_layernorm.weight"), hidden)?,
                q_proj: self.linear(&format!("{p}.self_attn.q_proj"), hidden, q_width, c.qkv_bias)?,
                k_proj: self.linear(&format!("{p}.self_attn.k_proj"), hidden, kv_width, c.qkv_bias)?,
                v_proj: self.linear(&format!("{p}.self_attn.v_proj"), hidden, kv_width, c.qkv_bias)?,
                o_proj: self.linear(&format!("{p}.self_attn.o_proj"), q_width, hidden, c.o_bias)?,
                gate_proj: self.linear(&format!("{p}.mlp.gate_proj"), hidden, c.intermediate_size, c.mlp_bias)?,
                up_proj: self.linear(&format!("{p}.mlp.up_proj"), hidden, c.intermediate_size, c.mlp_bias)?,
                down_proj: self.linear(&format!("{p}.mlp.down_proj"), c.intermediate_size, hidden, c.mlp_bias)?,
            });
        }
        let norm = self.vector("norm.weight", hidden)?;
        let embed_name = format!("{}embed_tokens.weight", self.prefix);
        let embed = self.files.read_f32(&embed_name, &[vocab, hidden])?;
        let (embeddings, lm_head) = if c.tie_word_embeddings || !self.files.contains("lm_head.weight") {
            if !c.tie_word_embeddings {
                return Err(Error::MissingTensor { tensor: "lm_head.weight".into(), expected: vec![vocab, hidden] });
            }
            (None, self.matrix(transpose(&embed, vocab, hidden), hidden, vocab))
        } else {
            let head = self.files.read_f32("lm_head.weight", &[vocab, hidden])?;
            (Some(self.matrix(embed, vocab, hidden)), self.matrix(transpose(&head, vocab, hidden), hidden, vocab))
        };
        Ok(BurnLlama {
            config: c.clone(),
            device: self.device.clone(),
            embeddings,
            layers,
            norm,
            lm_head,
            rope: Rope::new(c.head_dim, c.rope_theta, &c.rope_scaling)?,
        })
    }

    fn matrix(&self, values: Vec<f32>, rows: usize, cols: usize) -> Tensor<2> {
        Tensor::from_data(TensorData::new(values, [rows, cols]), self.device)
    }

    /// A 1-D checkpoint tensor as a `[1, len]` row that broadcasts over positions.
    fn vector(&mut self, name: &str, len: usize) -> Result<Tensor<2>> {
        let values = self.files.read_f32(&format!("{}{name}", self.prefix), &[len])?;
        Ok(self.matrix(values, 1, len))
    }

    fn linear(&mut self, name: &str, input: usize, output: usize, bias: bool) -> Result<Linear> {
        let weight = self.files.read_f32(&format!("{}{name}.weight", self.prefix), &[output, input])?;
        let weight = self.matrix(transpose(&weight, output, input), input, output);
        let bias = if bias { Some(self.vector(&format!("{name}.bias"), output)?) } else { None };
        Ok(Linear { weight, bias })
    }
}
