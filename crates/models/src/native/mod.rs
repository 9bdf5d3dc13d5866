//! The native CPU engine: a Llama forward pass on host memory whose matrix products are
//! `anyspec-cpu-kernels`' (weights repacked once at load, quantized weights kept quantized, one
//! pass over the weights for all the positions of a draft, every core).
//!
//! Why not burn's flex backend: its general matmul runs 2–48-row products on unpacked weights
//! (a quarter of the packed tile's speed), cannot hold GGML-quantized weights, and concatenates
//! the KV cache on every step. Scoring a 6-token draft cost about 2.4–3.6 single steps there;
//! speculative decoding only pays when it costs about one. The burn engine stays for wgpu/cuda
//! and as the reference these tests compare against.
//!
//! Layout: activations are row-major `[positions, width]`; the KV cache is `[position, kv_width]`
//! per layer, grown in place and truncated on rollback (no copy); a token tree's nodes keep their
//! keys and values in the same layout (see [`tree`]).

mod cache;
pub(crate) mod ops;
mod tree;

use std::sync::Arc;

use anyspec_cpu_kernels::{Kernel, Matrix, Threads, WeightFormat};

pub(crate) use cache::NativeCache;
pub(crate) use tree::NativeTree;

use crate::config::LlamaConfig;
use crate::error::{Error, Result};
use crate::llama::PrunedHead;
use crate::rope::Rope;
use crate::sections::{Section, Stopwatch};
use crate::source::{RawMatrix, WeightSource};

/// A linear layer: one kernel matrix (q/k/v and gate/up are stacked along the output rows so a
/// layer makes four kernel calls, not seven), or several when the stacked parts are stored in
/// different formats (mixed-quantization files).
#[derive(Debug)]
struct Projection {
    parts: Vec<Matrix>,
    bias: Option<Vec<f32>>,
    outputs: usize,
    /// `Some(run)` for a gate/up projection stored as pairs of runs of `run` gate rows and
    /// `run` up rows ([`Projection::gate_up`]): read only by [`Projection::forward_swiglu`].
    paired: Option<usize>,
}

/// Rows per run of a paired gate/up projection: four of the AVX-512 kernel's 16-row pairs of
/// groups, and a whole number of its 16-lane SwiGLU steps (so the activation gives the same
/// bits on a run as on a whole row).
const GATE_UP_RUN: usize = 64;

impl Projection {
    /// `y[m, ·] = x[m, ·] · Wᵀ + b` for the `m = x.len() / cols` rows of `x`.
    fn forward(&self, x: &[f32], y: &mut Vec<f32>, threads: &Threads) -> Result<()> {
        debug_assert!(self.paired.is_none(), "a paired gate/up projection is read by forward_swiglu");
        let m = x.len() / self.parts[0].cols();
        y.clear();
        y.resize(m * self.outputs, 0.0);
        if let [only] = self.parts.as_slice() {
            only.matmul(x, y, threads)?;
        } else {
            let mut offset = 0;
            let mut part_out = Vec::new();
            for part in &self.parts {
                let rows = part.rows();
                part_out.clear();
                part_out.resize(m * rows, 0.0);
                part.matmul(x, &mut part_out, threads)?;
                for r in 0..m {
                    y[r * self.outputs + offset..r * self.outputs + offset + rows]
                        .copy_from_slice(&part_out[r * rows..(r + 1) * rows]);
                }
                offset += rows;
            }
        }
        if let Some(bias) = &self.bias {
            ops::add_bias(y, bias);
        }
        Ok(())
    }

    /// Stacks `parts` along the output rows, as one kernel matrix when their formats agree.
    fn stacked(parts: Vec<RawMatrix>, bias: Option<Vec<f32>>) -> Result<Self> {
        let outputs = parts.iter().map(|p| p.rows).sum();
        let same_format = parts.windows(2).all(|w| w[0].format == w[1].format && w[0].cols == w[1].cols);
        let matrices = if same_format && parts.len() > 1 {
            let (format, cols) = (parts[0].format, parts[0].cols);
            let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.bytes.len()).sum());
            let mut order = Vec::with_capacity(outputs);
            let mut base = 0;
            for part in &parts {
                bytes.extend_from_slice(&part.bytes);
                order.extend(part.order().map(|source_row| base + source_row));
                base += part.rows;
            }
            vec![Matrix::from_bytes_permuted(format, outputs, cols, &bytes, &order)?]
        } else {
            parts.iter().map(RawMatrix::to_matrix).collect::<Result<Vec<_>>>()?
        };
        Ok(Projection { parts: matrices, bias, outputs, paired: None })
    }

    /// A gated MLP's gate and up matrices (`[width, hidden]` each, no bias): one kernel matrix
    /// of pairs of runs (gate rows `r·run..`, then the same up rows) when both are stored
    /// alike and `run` divides `width`, so that [`Projection::forward_swiglu`] applies the
    /// activation inside the product's threads ([`Matrix::matmul_paired`]); else the two
    /// stacked as usual.
    fn gate_up(gate: RawMatrix, up: RawMatrix, bias: Option<Vec<f32>>, run: usize) -> Result<Self> {
        let width = gate.rows;
        let alike = gate.format == up.format && gate.cols == up.cols && up.rows == width;
        if bias.is_some() || !alike || run == 0 || !width.is_multiple_of(run) {
            return Self::stacked(vec![gate, up], bias);
        }
        let mut bytes = Vec::with_capacity(gate.bytes.len() + up.bytes.len());
        bytes.extend_from_slice(&gate.bytes);
        bytes.extend_from_slice(&up.bytes);
        let (gate_rows, up_rows): (Vec<usize>, Vec<usize>) = (gate.order().collect(), up.order().collect());
        let order: Vec<usize> = (0..width / run)
            .flat_map(|r| {
                let rows = r * run..(r + 1) * run;
                gate_rows[rows.clone()].iter().copied().chain(up_rows[rows].iter().map(|&u| width + u))
            })
            .collect();
        let matrix = Matrix::from_bytes_permuted(gate.format, 2 * width, gate.cols, &bytes, &order)?;
        Ok(Projection { parts: vec![matrix], bias: None, outputs: 2 * width, paired: Some(run) })
    }

    /// `SwiGLU(gate, up)` of the rows of `x` into `gated`, `[m, width]`, for a gate/up
    /// projection; `products` is scratch for one that is not paired (its stacked
    /// `[m, 2·width]` products). Laps the gate/up product and SwiGLU sections; a paired
    /// projection applies the activation inside the product's threads, so its SwiGLU section
    /// stays at zero.
    fn forward_swiglu(
        &self,
        x: &[f32],
        gated: &mut Vec<f32>,
        products: &mut Vec<f32>,
        threads: &Threads,
        laps: &mut Stopwatch,
    ) -> Result<()> {
        let width = self.outputs / 2;
        gated.clear();
        if let (Some(run), [matrix]) = (self.paired, self.parts.as_slice()) {
            gated.resize(x.len() / matrix.cols() * width, 0.0);
            matrix.matmul_paired(x, gated, run, threads, &anyspec_cpu_kernels::swiglu)?;
            laps.lap(Section::GateUp);
            return Ok(());
        }
        self.forward(x, products, threads)?;
        laps.lap(Section::GateUp);
        for row in products.chunks_exact_mut(2 * width) {
            let (gate, up) = row.split_at_mut(width);
            anyspec_cpu_kernels::swiglu(gate, up);
            gated.extend_from_slice(gate);
        }
        laps.lap(Section::Swiglu);
        Ok(())
    }
}

#[derive(Debug)]
struct Layer {
    attention_norm: Vec<f32>,
    mlp_norm: Vec<f32>,
    /// Outputs: queries, keys, values.
    qkv: Projection,
    output: Projection,
    /// Outputs: gate, up.
    gate_up: Projection,
    down: Projection,
}

impl Layer {
    /// Reads the layer whose tensors are named `{p}.self_attn.…`, `{p}.mlp.…` and
    /// `{p}.*_layernorm.weight`, each matrix made ready (kernel, layout) by `ready` as soon as it
    /// is built.
    fn load(
        source: &mut dyn WeightSource,
        p: &str,
        c: &LlamaConfig,
        ready: &dyn Fn(&mut Matrix) -> Result<()>,
    ) -> Result<Self> {
        let hidden = c.hidden_size;
        let q_width = c.num_heads * c.head_dim;
        let kv_width = c.num_kv_heads * c.head_dim;
        let attn = |s: &str| format!("{p}.self_attn.{s}");
        let mlp = |s: &str| format!("{p}.mlp.{s}");
        let qkv_bias = if c.qkv_bias {
            let mut bias = source.read_f32(&attn("q_proj.bias"), &[q_width])?;
            bias.extend(source.read_f32(&attn("k_proj.bias"), &[kv_width])?);
            bias.extend(source.read_f32(&attn("v_proj.bias"), &[kv_width])?);
            Some(bias)
        } else {
            None
        };
        let o_bias = c.o_bias.then(|| source.read_f32(&attn("o_proj.bias"), &[hidden])).transpose()?;
        let (gate_up_bias, down_bias) = if c.mlp_bias {
            let mut gu = source.read_f32(&mlp("gate_proj.bias"), &[c.intermediate_size])?;
            gu.extend(source.read_f32(&mlp("up_proj.bias"), &[c.intermediate_size])?);
            (Some(gu), Some(source.read_f32(&mlp("down_proj.bias"), &[hidden])?))
        } else {
            (None, None)
        };
        // Each projection is made ready as soon as it is built: interleaving copies a
        // matrix, and the weight memory takes back the first copy's bytes only while it is
        // the latest buffer (a layer's four projections built before any was interleaved
        // had left three first copies behind, a third of the model).
        let projection = |parts: Vec<RawMatrix<'_>>, bias: Option<Vec<f32>>| -> Result<Projection> {
            let mut projection = Projection::stacked(parts, bias)?;
            projection.parts.iter_mut().try_for_each(&ready)?;
            Ok(projection)
        };
        let attention_norm = source.read_f32(&format!("{p}.input_layernorm.weight"), &[hidden])?;
        let mlp_norm = source.read_f32(&format!("{p}.post_attention_layernorm.weight"), &[hidden])?;
        let qkv = projection(
            vec![
                source.read_raw(&attn("q_proj.weight"), q_width, hidden)?.into_owned(),
                source.read_raw(&attn("k_proj.weight"), kv_width, hidden)?.into_owned(),
                source.read_raw(&attn("v_proj.weight"), kv_width, hidden)?.into_owned(),
            ],
            qkv_bias,
        )?;
        let output = projection(vec![source.read_raw(&attn("o_proj.weight"), hidden, q_width)?], o_bias)?;
        let gate_up = {
            let gate = source.read_raw(&mlp("gate_proj.weight"), c.intermediate_size, hidden)?.into_owned();
            let up = source.read_raw(&mlp("up_proj.weight"), c.intermediate_size, hidden)?.into_owned();
            let mut projection = Projection::gate_up(gate, up, gate_up_bias, GATE_UP_RUN)?;
            projection.parts.iter_mut().try_for_each(ready)?;
            projection
        };
        let down =
            projection(vec![source.read_raw(&mlp("down_proj.weight"), hidden, c.intermediate_size)?], down_bias)?;
        Ok(Layer { attention_norm, mlp_norm, qkv, output, gate_up, down })
    }
}

/// A Llama-family model on the native CPU engine.
#[derive(Debug)]
pub(crate) struct NativeLlama {
    config: LlamaConfig,
    kernel: Kernel,
    /// `[vocab, hidden]`, or `None` when tied to the LM head.
    embeddings: Option<Arc<Matrix>>,
    /// `[vocab, hidden]`: logits are `hidden · headᵀ`.
    lm_head: Arc<Matrix>,
    /// Shared, so that a model made of the first layers ([`NativeLlama::first_layers`]) costs
    /// no memory.
    layers: Vec<Arc<Layer>>,
    norm: Vec<f32>,
    rope: Rope,
}

/// Scratch buffers of one forward pass, reused across layers.
#[derive(Default)]
struct Scratch {
    normed: Vec<f32>,
    qkv: Vec<f32>,
    attention: Vec<f32>,
    projected: Vec<f32>,
    gate_up: Vec<f32>,
    gated: Vec<f32>,
}

/// The attention block as [`NativeLlama::layers`] runs it: `(layer, queries [m, q_width],
/// keys and values [m, kv_width] of the new positions, output [m, q_width])`. The queries and
/// keys are already rotated.
pub(crate) type Attend<'a> = dyn FnMut(usize, &[f32], &[f32], &[f32], &mut [f32]) -> Result<()> + 'a;

impl NativeLlama {
    /// Reads every tensor of the architecture from `source` (names as in Hugging Face
    /// checkpoints, with the `model.` prefix), keeping quantized weights quantized.
    pub(crate) fn load(
        source: &mut dyn WeightSource,
        config: LlamaConfig,
        kernel: Kernel,
        storage: Option<WeightFormat>,
    ) -> Result<Self> {
        let mut source = Converting { source, storage };
        let source = &mut source;
        let c = &config;
        let prefix = if source.contains("embed_tokens.weight") { "" } else { "model." };
        let (hidden, vocab) = (c.hidden_size, c.vocab_size);
        // Each matrix is given its kernel (and interleaved) as soon as it is read, the largest
        // first: interleaving copies a matrix, and the copy of the 49,152-row embedding table
        // made after every layer was loaded had been the load's (and the run's) memory peak.
        let ready = |matrix: &mut Matrix| ready_for(kernel, matrix);
        let embeddings = source.read_raw(&format!("{prefix}embed_tokens.weight"), vocab, hidden)?.to_matrix()?;
        let (mut embeddings, mut lm_head) = if c.tie_word_embeddings || !source.contains("lm_head.weight") {
            if !c.tie_word_embeddings {
                return Err(Error::MissingTensor { tensor: "lm_head.weight".into(), expected: vec![vocab, hidden] });
            }
            (None, embeddings)
        } else {
            (Some(embeddings), source.read_raw("lm_head.weight", vocab, hidden)?.to_matrix()?)
        };
        if let Some(table) = embeddings.as_mut() {
            // Only ever read a row at a time: it keeps the file's layout.
            table.set_kernel(kernel)?;
        }
        ready(&mut lm_head)?;
        let mut layers = Vec::with_capacity(c.num_layers);
        for i in 0..c.num_layers {
            layers.push(Layer::load(source, &format!("{prefix}layers.{i}"), c, &ready)?);
        }
        let norm = source.read_f32(&format!("{prefix}norm.weight"), &[hidden])?;
        let rope = Rope::new(c.head_dim, c.rope_theta, &c.rope_scaling)?;
        Ok(NativeLlama {
            config,
            kernel,
            embeddings: embeddings.map(Arc::new),
            lm_head: Arc::new(lm_head),
            layers: layers.into_iter().map(Arc::new).collect(),
            norm,
            rope,
        })
    }

    /// The model made of the first `count` layers, then this model's final norm and LM head,
    /// sharing every weight with it: the self-speculative (early-exit) drafter, with no
    /// training. `count` must be in `1..=num_layers`.
    pub(crate) fn first_layers(&self, count: usize) -> Result<Self> {
        if count == 0 || count > self.layers.len() {
            return Err(Error::InvalidArgument(format!(
                "a model of the first {count} layers of a {}-layer model; ask for 1..={0}",
                self.layers.len()
            )));
        }
        Ok(NativeLlama {
            config: LlamaConfig { num_layers: count, ..self.config.clone() },
            kernel: self.kernel,
            embeddings: self.embeddings.clone(),
            lm_head: Arc::clone(&self.lm_head),
            layers: self.layers[..count].to_vec(),
            norm: self.norm.clone(),
            rope: self.rope.clone(),
        })
    }

    pub(crate) fn kernel(&self) -> Kernel {
        self.kernel
    }

    pub(crate) fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// Bytes of weights held in memory (quantized formats count their quantized size).
    pub(crate) fn weight_bytes(&self) -> usize {
        let projections = self.layers.iter().flat_map(|l| [&l.qkv, &l.output, &l.gate_up, &l.down]);
        let matrices: usize = projections.flat_map(|p| &p.parts).map(Matrix::memory_bytes).sum();
        matrices + self.lm_head.memory_bytes() + self.embeddings.as_deref().map_or(0, Matrix::memory_bytes)
    }

    /// The LM head as `[vocab, hidden]` rows, dequantized exactly.
    pub(crate) fn lm_head_rows(&self) -> Vec<f32> {
        self.lm_head.to_f32()
    }

    /// The final RMSNorm's gain, `[hidden]`.
    pub(crate) fn final_norm_weight(&self) -> &[f32] {
        &self.norm
    }

    /// The input embedding table, `[vocab, hidden]` rows, dequantized exactly (the LM head's
    /// when they are tied).
    pub(crate) fn embedding_rows(&self) -> Vec<f32> {
        self.embeddings.as_deref().unwrap_or(&self.lm_head).to_f32()
    }

    /// The input embedding of `token`, `[hidden]`, dequantized exactly.
    pub(crate) fn embedding(&self, token: u32) -> Result<Vec<f32>> {
        self.check_tokens(&[token])?;
        let table: &Matrix = self.embeddings.as_deref().unwrap_or(&self.lm_head);
        let mut row = vec![0.0; self.config.hidden_size];
        table.row_f32(token as usize, &mut row)?;
        Ok(row)
    }

    /// Checks the tokens of a pass against the vocabulary.
    pub(crate) fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        match tokens.iter().find(|&&t| t as usize >= self.config.vocab_size) {
            Some(&token) => Err(Error::TokenOutOfRange { token, vocab_size: self.config.vocab_size }),
            None => Ok(()),
        }
    }

    /// Runs `tokens` at `positions` through every layer with `attend` as the attention block;
    /// returns the hidden states before the final norm, `[tokens.len(), hidden]`. Inputs are
    /// validated by the callers.
    pub(crate) fn layers(
        &self,
        tokens: &[u32],
        positions: &[usize],
        threads: &Threads,
        attend: &mut Attend<'_>,
    ) -> Result<Vec<f32>> {
        let mut h = vec![0.0f32; tokens.len() * self.config.hidden_size];
        self.embed_into(tokens, &mut h)?;
        self.layers_on_rows(h, positions, threads, attend)
    }

    /// The input embeddings of `tokens` into `out` (`[tokens.len(), hidden]`, flat).
    pub(crate) fn embed_into(&self, tokens: &[u32], out: &mut [f32]) -> Result<()> {
        let table: &Matrix = self.embeddings.as_deref().unwrap_or(&self.lm_head);
        for (row, &token) in out.chunks_exact_mut(self.config.hidden_size).zip(tokens) {
            table.row_f32(token as usize, row)?;
        }
        Ok(())
    }

    /// [`NativeLlama::layers`] on input rows `h` (`[positions.len(), hidden]`) instead of token
    /// embeddings: what a feature drafter, whose inputs are not tokens, runs.
    pub(crate) fn layers_on_rows(
        &self,
        mut h: Vec<f32>,
        positions: &[usize],
        threads: &Threads,
        attend: &mut Attend<'_>,
    ) -> Result<Vec<f32>> {
        let c = &self.config;
        let m = positions.len();
        let q_width = c.num_heads * c.head_dim;
        let kv_width = c.num_kv_heads * c.head_dim;
        let eps = c.rms_norm_eps as f32;
        let mut laps = Stopwatch::start();
        let (cos, sin) = self.rope.tables_at(positions.iter().copied());
        let mut s = Scratch::default();
        s.normed.resize(m * c.hidden_size, 0.0);
        s.attention.resize(m * q_width, 0.0);
        let qkv_width = q_width + 2 * kv_width;
        laps.lap(Section::Rope);
        for (index, layer) in self.layers.iter().enumerate() {
            ops::rms_norm_into(&h, &layer.attention_norm, eps, &mut s.normed);
            laps.lap(Section::Norms);
            layer.qkv.forward(&s.normed, &mut s.qkv, threads)?;
            laps.lap(Section::Qkv);
            let mut queries = Vec::with_capacity(m * q_width);
            let mut keys = Vec::with_capacity(m * kv_width);
            let mut values = Vec::with_capacity(m * kv_width);
            for (i, row) in s.qkv.chunks_exact(qkv_width).enumerate() {
                let rope = i * c.head_dim..(i + 1) * c.head_dim;
                let start = queries.len();
                queries.extend_from_slice(&row[..q_width]);
                ops::rotate_heads(&mut queries[start..], c.head_dim, &cos[rope.clone()], &sin[rope.clone()]);
                let start = keys.len();
                keys.extend_from_slice(&row[q_width..q_width + kv_width]);
                ops::rotate_heads(&mut keys[start..], c.head_dim, &cos[rope.clone()], &sin[rope]);
                values.extend_from_slice(&row[q_width + kv_width..]);
            }
            laps.lap(Section::Rope);
            attend(index, &queries, &keys, &values, &mut s.attention)?;
            laps.lap(Section::Attention);
            layer.output.forward(&s.attention, &mut s.projected, threads)?;
            laps.lap(Section::Output);
            add_into(&mut h, &s.projected);
            laps.lap(Section::Residual);

            ops::rms_norm_into(&h, &layer.mlp_norm, eps, &mut s.normed);
            laps.lap(Section::Norms);
            layer.gate_up.forward_swiglu(&s.normed, &mut s.gated, &mut s.gate_up, threads, &mut laps)?;
            layer.down.forward(&s.gated, &mut s.projected, threads)?;
            laps.lap(Section::Down);
            add_into(&mut h, &s.projected);
            laps.lap(Section::Residual);
        }
        Ok(h)
    }

    /// The final norm of the rows of `h`.
    pub(crate) fn final_norm(&self, h: &[f32]) -> Vec<f32> {
        let mut laps = Stopwatch::start();
        let mut out = vec![0.0; h.len()];
        ops::rms_norm_into(h, &self.norm, self.config.rms_norm_eps as f32, &mut out);
        laps.lap(Section::FinalNorm);
        out
    }

    /// Logits of final-norm hidden rows, `[rows, vocab]` (or `[rows, head.len()]` over the
    /// vocabulary rows of a pruned head), flat.
    pub(crate) fn logits(&self, normed: &[f32], head: Option<&PrunedHead>, threads: &Threads) -> Result<Vec<f32>> {
        let mut laps = Stopwatch::start();
        let out = self.untimed_logits(normed, head, threads)?;
        laps.lap(Section::Logits);
        Ok(out)
    }

    /// [`NativeLlama::logits`] over the whole vocabulary, one vector per row: each row's
    /// logits are written where they are handed on (no `[rows, vocab]` buffer copied row by row
    /// afterwards).
    pub(crate) fn logit_rows(&self, normed: &[f32], threads: &Threads) -> Result<Vec<Vec<f32>>> {
        let mut laps = Stopwatch::start();
        let rows = normed.len() / self.config.hidden_size;
        let mut out: Vec<Vec<f32>> = (0..rows).map(|_| vec![0.0; self.config.vocab_size]).collect();
        let mut slices: Vec<&mut [f32]> = out.iter_mut().map(Vec::as_mut_slice).collect();
        self.lm_head.matmul_into_rows(normed, &mut slices, threads)?;
        laps.lap(Section::Logits);
        Ok(out)
    }

    fn untimed_logits(&self, normed: &[f32], head: Option<&PrunedHead>, threads: &Threads) -> Result<Vec<f32>> {
        let rows = normed.len() / self.config.hidden_size;
        let Some(head) = head else {
            let mut out = vec![0.0; rows * self.config.vocab_size];
            self.lm_head.matmul(normed, &mut out, threads)?;
            return Ok(out);
        };
        let n = head.ids.len();
        let mut out = vec![0.0; rows * n];
        match head.blocks.as_ref().filter(|b| Arc::ptr_eq(&b.native.head, &self.lm_head)) {
            // Whole blocks of the ordered copy, then the extra ids gathered from the head.
            Some(picked) => {
                let extra = picked.extra.len();
                let blocks = n - extra;
                if extra == 0 {
                    picked.native.rows.matmul_blocks(normed, &picked.selected, &mut out, threads)?;
                } else {
                    let mut from_blocks = vec![0.0; rows * blocks];
                    picked.native.rows.matmul_blocks(normed, &picked.selected, &mut from_blocks, threads)?;
                    let mut gathered = vec![0.0; rows * extra];
                    self.lm_head.matmul_rows(normed, &picked.extra, &mut gathered, threads)?;
                    for (r, row) in out.chunks_exact_mut(n).enumerate() {
                        row[..blocks].copy_from_slice(&from_blocks[r * blocks..(r + 1) * blocks]);
                        row[blocks..].copy_from_slice(&gathered[r * extra..(r + 1) * extra]);
                    }
                }
            }
            None => self.lm_head.matmul_rows(normed, &head.ids, &mut out, threads)?,
        }
        Ok(out)
    }

    /// The LM head (shared with the models of this one's first layers).
    pub(crate) fn lm_head(&self) -> Arc<Matrix> {
        Arc::clone(&self.lm_head)
    }

    /// Runs `tokens` (positions `cache.len()..`) against `cache`, appends their keys and values,
    /// and returns the final-norm hidden states of the last `rows` positions, flat.
    pub(crate) fn final_hidden(
        &self,
        tokens: &[u32],
        cache: &mut NativeCache,
        rows: usize,
        threads: &Threads,
    ) -> Result<Vec<f32>> {
        self.check_tokens(tokens)?;
        let mut h = vec![0.0f32; tokens.len() * self.config.hidden_size];
        self.embed_into(tokens, &mut h)?;
        self.final_hidden_of_rows(h, cache, rows, threads)
    }

    /// [`NativeLlama::final_hidden`] on input rows (`[positions, hidden]`, flat) in place of
    /// token embeddings.
    pub(crate) fn final_hidden_of_rows(
        &self,
        inputs: Vec<f32>,
        cache: &mut NativeCache,
        rows: usize,
        threads: &Threads,
    ) -> Result<Vec<f32>> {
        let c = &self.config;
        if !inputs.len().is_multiple_of(c.hidden_size) {
            return Err(Error::InvalidArgument(format!(
                "input rows of {} values are not whole rows of the hidden size {}",
                inputs.len(),
                c.hidden_size
            )));
        }
        let len = inputs.len() / c.hidden_size;
        if len == 0 {
            return Err(Error::InvalidArgument("a forward pass needs at least one token".into()));
        }
        if rows == 0 || rows > len {
            return Err(Error::InvalidArgument(format!(
                "asked for the logits of {rows} positions from a pass over {len} tokens; ask for 1..={len}"
            )));
        }
        cache.check(c)?;
        let start = cache.len();
        if start + len > c.max_position_embeddings {
            return Err(Error::ContextFull { needed: start + len, max: c.max_position_embeddings });
        }
        let positions: Vec<usize> = (start..start + len).collect();
        let h = self.layers_on_rows(inputs, &positions, threads, &mut |index, q, k, v, out| {
            cache.append(index, k, v);
            cache.attend_causal(c, index, start, q, out, threads);
            Ok(())
        })?;
        cache.advance(len);
        Ok(self.final_norm(&h[(len - rows) * c.hidden_size..]))
    }

    pub(crate) fn new_cache(&self) -> NativeCache {
        NativeCache::new(&self.config, self.kernel)
    }
}

/// An EAGLE-style feature drafter on the native engine (Li et al. 2024): `fc` maps the pair
/// `[E(x_{t+1}); f_t]` (the next token's embedding and the target's final-norm hidden state
/// that predicted it) to the input of `model`'s own decoder layers, whose final norm is the
/// predicted feature `f̂_{t+1}`. The embedding table and the LM head are the target's, shared
/// (`Arc`), so the drafter adds only its layers' weights; its RoPE is plain at the target's θ.
#[derive(Debug)]
pub(crate) struct NativeFeatureModel {
    fc: Projection,
    model: NativeLlama,
}

impl NativeFeatureModel {
    /// Reads `fc.weight` `[hidden, 2·hidden]`, `fc.bias`, `layers.{i}.…` for `i < layers` and
    /// `norm.weight` from `source`, with the target's shape (no projection biases), each matrix
    /// stored as `storage` (`None`: as read) with the target's kernel.
    pub(crate) fn load(
        target: &NativeLlama,
        source: &mut dyn WeightSource,
        layers: usize,
        storage: Option<WeightFormat>,
    ) -> Result<Self> {
        // Plain RoPE at the target's θ, as `anyspec-train` trains the drafter (its attention
        // sees only relative positions, so no scaling for long contexts is needed or learnt).
        let config = LlamaConfig {
            num_layers: layers,
            qkv_bias: false,
            o_bias: false,
            mlp_bias: false,
            rope_scaling: crate::config::RopeScaling::None,
            ..target.config.clone()
        };
        if layers == 0 {
            return Err(Error::InvalidArgument("a feature drafter needs at least one layer".into()));
        }
        if source.contains(&format!("layers.{layers}.input_layernorm.weight")) {
            return Err(Error::InvalidArgument(format!(
                "the feature drafter's weights hold more than the {layers} layers asked for; pass its layer count"
            )));
        }
        let kernel = target.kernel;
        let mut source = Converting { source, storage };
        let source = &mut source;
        let ready = |matrix: &mut Matrix| ready_for(kernel, matrix);
        let hidden = config.hidden_size;
        let bias = source.read_f32("fc.bias", &[hidden])?;
        let mut fc =
            Projection::stacked(vec![source.read_raw("fc.weight", hidden, 2 * hidden)?.into_owned()], Some(bias))?;
        fc.parts.iter_mut().try_for_each(ready)?;
        let layers = (0..layers)
            .map(|i| Layer::load(source, &format!("layers.{i}"), &config, &ready).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        let norm = source.read_f32("norm.weight", &[hidden])?;
        let model = NativeLlama {
            kernel,
            embeddings: target.embeddings.clone(),
            lm_head: Arc::clone(&target.lm_head),
            rope: Rope::new(config.head_dim, config.rope_theta, &config.rope_scaling)?,
            config,
            layers,
            norm,
        };
        Ok(NativeFeatureModel { fc, model })
    }

    /// The drafter's layers as a model (its configuration, cache shape and weights).
    pub(crate) fn model(&self) -> &NativeLlama {
        &self.model
    }

    /// Bytes of the drafter's own weights (the shared head and embeddings not counted).
    pub(crate) fn own_weight_bytes(&self) -> usize {
        let projections = self.model.layers.iter().flat_map(|l| [&l.qkv, &l.output, &l.gate_up, &l.down]);
        projections.chain([&self.fc]).flat_map(|p| &p.parts).map(Matrix::memory_bytes).sum()
    }

    /// Runs the pairs `(tokens[i], features[i])` (positions `cache.len()..`) against `cache`,
    /// appends their keys and values, and returns the predicted features of the last `rows`
    /// pairs (final-normed, `[rows, hidden]` flat).
    pub(crate) fn forward(
        &self,
        tokens: &[u32],
        features: &[f32],
        cache: &mut NativeCache,
        rows: usize,
        threads: &Threads,
    ) -> Result<Vec<f32>> {
        let hidden = self.model.config.hidden_size;
        if features.len() != tokens.len() * hidden {
            return Err(Error::InvalidArgument(format!(
                "a feature drafter pass over {} tokens needs {} feature values ({} per token), got {}",
                tokens.len(),
                tokens.len() * hidden,
                hidden,
                features.len()
            )));
        }
        self.model.check_tokens(tokens)?;
        let mut pairs = vec![0.0f32; tokens.len() * 2 * hidden];
        let mut embedded = vec![0.0f32; tokens.len() * hidden];
        self.model.embed_into(tokens, &mut embedded)?;
        for ((pair, e), f) in
            pairs.chunks_exact_mut(2 * hidden).zip(embedded.chunks_exact(hidden)).zip(features.chunks_exact(hidden))
        {
            pair[..hidden].copy_from_slice(e);
            pair[hidden..].copy_from_slice(f);
        }
        let mut inputs = Vec::new();
        self.fc.forward(&pairs, &mut inputs, threads)?;
        self.model.final_hidden_of_rows(inputs, cache, rows, threads)
    }
}

/// Gives a weight matrix its kernel, and its layout for that kernel.
fn ready_for(kernel: Kernel, matrix: &mut Matrix) -> Result<()> {
    matrix.set_kernel(kernel)?;
    // The 8-bit kernel scores a draft's positions at a fraction of the instructions per weight
    // when the rows are interleaved in groups of eight (the other kernels would read them back
    // row by row, for no gain). A tied LM head is also the embedding table: its rows are then
    // read back one per token, which costs little.
    if kernel.reads_interleaved() {
        matrix.interleave_rows();
    }
    Ok(())
}

/// A weight source whose matrices are converted to `storage` on the way (when given).
struct Converting<'a> {
    source: &'a mut dyn WeightSource,
    storage: Option<WeightFormat>,
}

impl WeightSource for Converting<'_> {
    fn contains(&self, name: &str) -> bool {
        self.source.contains(name)
    }

    fn read_f32(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        self.source.read_f32(name, shape)
    }

    fn read_raw(&mut self, name: &str, rows: usize, cols: usize) -> Result<RawMatrix<'_>> {
        let raw = self.source.read_raw(name, rows, cols)?;
        match self.storage {
            None => Ok(raw),
            Some(format) => Ok(raw.converted(format)?),
        }
    }
}

fn add_into(h: &mut [f32], delta: &[f32]) {
    for (a, &b) in h.iter_mut().zip(delta) {
        *a += b;
    }
}
