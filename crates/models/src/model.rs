//! The public model types: [`Llama`], its [`KvCache`] and [`TreeCache`], over two engines.
//!
//! - **native** (the CPU default): `crate::native`, matrix products by `anyspec-cpu-kernels`
//!   on weights repacked at load, quantized GGUF weights kept quantized;
//! - **burn**: `crate::llama`, burn tensors on any burn device (flex, wgpu, cuda), weights in
//!   f32 (GGUF files are dequantized at load).
//!
//! Both compute the same model; the conformance tests hold each to `transformers`.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use anyspec_cpu_kernels::{Kernel, RowBlocks, Threads, WeightFormat};
use burn::tensor::{Device, Tensor, TensorData};

use crate::cache::BurnCache;
use crate::config::LlamaConfig;
use crate::error::{Error, Result};
use crate::head_blocks::{HeadBlocks, NativeBlocks, PickedBlocks};
use crate::llama::{BurnLlama, BurnTree, PrunedHead, TreeNode};
use crate::native::{NativeCache, NativeLlama, NativeTree};
use crate::source::WeightSource;
use crate::weights::WeightFiles;

/// Which implementation runs a model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// [`Engine::Native`] on the CPU device, [`Engine::Burn`] on accelerators.
    #[default]
    Auto,
    /// The native CPU engine: packed and quantized weights, `anyspec-cpu-kernels`. CPU only.
    Native,
    /// burn tensors on the chosen device, weights in f32.
    Burn,
}

impl Engine {
    /// The names `--engine` accepts: auto, native, burn.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Auto => "auto",
            Engine::Native => "native",
            Engine::Burn => "burn",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Engine {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "auto" => Ok(Engine::Auto),
            "native" => Ok(Engine::Native),
            "burn" => Ok(Engine::Burn),
            _ => Err(Error::InvalidArgument(format!("unknown engine {name:?}; use auto, native or burn"))),
        }
    }
}

/// How a checkpoint is loaded: the engine, and for the native engine its CPU kernel and thread
/// count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadOptions {
    /// Which implementation runs the model.
    pub engine: Engine,
    /// The native engine's matrix kernel; `None` picks [`Kernel::best`] for this CPU
    /// (llama.cpp's 8-bit-activation design for Q4/Q8 weights where AVX2 exists). Choose
    /// [`Kernel::Avx2`] or [`Kernel::Scalar`] for products exact to the file's weights.
    pub kernel: Option<Kernel>,
    /// The native engine's kernel threads; `None` uses every core.
    pub threads: Option<usize>,
    /// The native engine stores every weight matrix as it is in the file (`None`), or converts
    /// it at load to this float format (f32, f16 or bf16): to run or measure a quantized file as
    /// a float checkpoint.
    pub storage: Option<WeightFormat>,
}

impl LoadOptions {
    /// The defaults with another engine.
    pub fn engine(engine: Engine) -> Self {
        LoadOptions { engine, ..LoadOptions::default() }
    }

    /// With the native engine's kernel (`None`: the best for this CPU).
    pub fn with_kernel(mut self, kernel: Option<Kernel>) -> Self {
        self.kernel = kernel;
        self
    }

    /// With the native engine's thread count (`None`: every core).
    pub fn with_threads(mut self, threads: Option<usize>) -> Self {
        self.threads = threads;
        self
    }

    /// With the native engine's weight storage (`None`: as in the file).
    pub fn with_storage(mut self, storage: Option<WeightFormat>) -> Self {
        self.storage = storage;
        self
    }
}

#[derive(Clone, Debug)]
enum Inner {
    /// Boxed: burn's model holds far more inline state than the native engine's handle.
    Burn(Box<BurnLlama>),
    Native {
        model: Arc<NativeLlama>,
        threads: Threads,
    },
}

/// The final-norm hidden states and the logits of the last rows of a forward pass
/// ([`Llama::forward_with_hidden`]), on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct HiddenRows {
    /// One `[hidden_size]` vector per row: what the LM head multiplies.
    pub hidden: Vec<Vec<f32>>,
    /// One logit vector per row (over the pruned head's ids when one was given).
    pub logits: Vec<Vec<f32>>,
}

/// A loaded Llama-family model. Cheap to clone: weights are shared.
#[derive(Clone, Debug)]
pub struct Llama {
    inner: Inner,
    device: Device,
}

/// Keys and values of every layer for the tokens seen so far.
///
/// Rolling back after a rejection is [`KvCache::truncate`]: positions past the accepted prefix
/// are dropped and the next forward pass overwrites them.
#[derive(Clone, Debug)]
pub struct KvCache {
    inner: CacheInner,
}

#[derive(Clone, Debug)]
enum CacheInner {
    Burn(BurnCache),
    Native(NativeCache),
}

/// The nodes of a token tree run so far below one KV cache (see [`Llama::extend_tree`]): their
/// keys and values and their final hidden states. Clear it when the cache changes.
#[derive(Clone, Debug)]
pub struct TreeCache {
    inner: TreeInner,
}

#[derive(Clone, Debug)]
enum TreeInner {
    Burn(Box<BurnTree>),
    Native(NativeTree),
}

impl KvCache {
    /// Number of cached positions.
    pub fn len(&self) -> usize {
        match &self.inner {
            CacheInner::Burn(c) => c.len(),
            CacheInner::Native(c) => c.len(),
        }
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps the first `len` positions; a `len` at or past the end changes nothing.
    pub fn truncate(&mut self, len: usize) {
        match &mut self.inner {
            CacheInner::Burn(c) => c.truncate(len),
            CacheInner::Native(c) => c.truncate(len),
        }
    }

    /// Drops every position.
    pub fn clear(&mut self) {
        self.truncate(0);
    }
}

impl TreeCache {
    /// Number of nodes run so far.
    pub fn len(&self) -> usize {
        match &self.inner {
            TreeInner::Burn(t) => t.len(),
            TreeInner::Native(t) => t.len(),
        }
    }

    /// Whether no node has been run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every node (for a new tree, or after the KV cache changed).
    pub fn clear(&mut self) {
        match &mut self.inner {
            TreeInner::Burn(t) => t.clear(),
            TreeInner::Native(t) => t.clear(),
        }
    }
}

fn engine_mismatch(what: &str) -> Error {
    Error::InvalidArgument(format!(
        "the {what} was made by a model on another engine; make it with the model that uses it"
    ))
}

impl Llama {
    /// Loads the safetensors weights of the checkpoint in `dir` for `config` on `device`, with
    /// the engine [`Engine::Auto`] picks.
    pub fn load(dir: &Path, config: LlamaConfig, device: &Device) -> Result<Self> {
        Self::load_from(&mut WeightFiles::open(dir)?, config, device, &LoadOptions::default())
    }

    /// Loads from any weight source with the chosen engine.
    pub(crate) fn load_from(
        source: &mut dyn WeightSource,
        config: LlamaConfig,
        device: &Device,
        options: &LoadOptions,
    ) -> Result<Self> {
        let native = match options.engine {
            Engine::Auto => anyspec_kernels::is_host_device(device),
            Engine::Native if !anyspec_kernels::is_host_device(device) => {
                return Err(Error::InvalidArgument(
                    "the native engine runs on the CPU only; use --device cpu or --engine burn".into(),
                ));
            }
            Engine::Native => true,
            Engine::Burn => false,
        };
        let inner = if native {
            let kernel = options.kernel.unwrap_or_else(Kernel::best);
            let threads = match options.threads {
                Some(count) => Threads::new(count)?,
                None => Threads::available(),
            };
            Inner::Native { model: Arc::new(NativeLlama::load(source, config, kernel, options.storage)?), threads }
        } else {
            Inner::Burn(Box::new(BurnLlama::load_from(source, config, device)?))
        };
        Ok(Llama { inner, device: device.clone() })
    }

    /// The configuration the model was built from.
    pub fn config(&self) -> &LlamaConfig {
        match &self.inner {
            Inner::Burn(m) => m.config(),
            Inner::Native { model, .. } => model.config(),
        }
    }

    /// The device the weights live on (the CPU device for the native engine).
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The engine that runs the model ([`Engine::Native`] or [`Engine::Burn`]).
    pub fn engine(&self) -> Engine {
        match &self.inner {
            Inner::Burn(_) => Engine::Burn,
            Inner::Native { .. } => Engine::Native,
        }
    }

    /// The native engine's matrix kernel (`None` on the burn engine).
    pub fn kernel(&self) -> Option<Kernel> {
        match &self.inner {
            Inner::Burn(_) => None,
            Inner::Native { model, .. } => Some(model.kernel()),
        }
    }

    /// The number of threads of the native engine's kernels (1 on the burn engine, whose
    /// backend chooses its own).
    pub fn threads(&self) -> usize {
        match &self.inner {
            Inner::Burn(_) => 1,
            Inner::Native { threads, .. } => threads.count(),
        }
    }

    /// The same model (weights shared) with `threads` kernel threads on the native engine;
    /// the burn engine ignores it.
    pub fn with_threads(mut self, count: usize) -> Result<Self> {
        if let Inner::Native { threads, .. } = &mut self.inner {
            *threads = Threads::new(count)?;
        }
        Ok(self)
    }

    /// The model made of this model's first `count` layers, then its final norm and LM head,
    /// sharing every weight (no memory is copied): a self-speculative, early-exit drafter that
    /// needs no training and shares the target's tokenizer. Its cost per token is about
    /// `(count · layer + head) / (layers · layer + head)` of the whole model's.
    ///
    /// Native engine only; `count` must be in `1..=num_layers`.
    pub fn first_layers(&self, count: usize) -> Result<Self> {
        match &self.inner {
            Inner::Burn(_) => Err(Error::InvalidArgument(
                "a model of the first layers needs the native engine (the CPU engine); load with Engine::Native".into(),
            )),
            Inner::Native { model, threads } => Ok(Llama {
                inner: Inner::Native { model: Arc::new(model.first_layers(count)?), threads: threads.clone() },
                device: self.device.clone(),
            }),
        }
    }

    /// Bytes of weights held in memory (quantized weights at their quantized size), for the
    /// native engine; `None` on the burn engine.
    pub fn weight_bytes(&self) -> Option<usize> {
        match &self.inner {
            Inner::Burn(_) => None,
            Inner::Native { model, .. } => Some(model.weight_bytes()),
        }
    }

    /// A fresh cache for this model.
    pub fn new_cache(&self) -> KvCache {
        let inner = match &self.inner {
            Inner::Burn(m) => CacheInner::Burn(m.new_cache()),
            Inner::Native { model, .. } => CacheInner::Native(model.new_cache()),
        };
        KvCache { inner }
    }

    /// An empty token tree for this model.
    pub fn new_tree_cache(&self) -> TreeCache {
        let inner = match &self.inner {
            Inner::Burn(m) => TreeInner::Burn(Box::new(m.new_tree_cache())),
            Inner::Native { model, .. } => TreeInner::Native(model.new_tree()),
        };
        TreeCache { inner }
    }

    /// Runs `tokens` (positions `cache.len()..`) through the model, appends their keys and values
    /// to `cache`, and returns the logits of the last `logits_rows` positions,
    /// `[logits_rows, vocab]`, as a tensor on the model's device.
    ///
    /// One call over k tokens gives the same logits as k calls over one token each: position `i`
    /// sees the cache and the new positions up to `i`.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, logits_rows: usize) -> Result<Tensor<2>> {
        match (&self.inner, &mut cache.inner) {
            (Inner::Burn(m), CacheInner::Burn(c)) => m.forward(tokens, c, logits_rows),
            (Inner::Native { model, threads }, CacheInner::Native(c)) => {
                let flat = native_forward(model, threads, tokens, c, logits_rows, None)?;
                Ok(self.host_tensor(flat, logits_rows))
            }
            _ => Err(engine_mismatch("KV cache")),
        }
    }

    /// [`Llama::forward`] with the logits of only the vocabulary rows kept in `head`,
    /// `[logits_rows, head.len()]`: column `j` is the logit of token `head.ids()[j]`.
    ///
    /// A drafter that can only ever use a subset of its vocabulary (the tokens its target also
    /// has, or a frequency shortlist) skips the rest of the LM-head product, the largest single
    /// matrix product of a small model.
    pub fn forward_pruned(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_rows: usize,
        head: &PrunedHead,
    ) -> Result<Tensor<2>> {
        match (&self.inner, &mut cache.inner) {
            (Inner::Burn(m), CacheInner::Burn(c)) => m.forward_pruned(tokens, c, logits_rows, head),
            (Inner::Native { model, threads }, CacheInner::Native(c)) => {
                let flat = native_forward(model, threads, tokens, c, logits_rows, Some(head))?;
                Ok(self.host_tensor(flat, logits_rows))
            }
            _ => Err(engine_mismatch("KV cache")),
        }
    }

    /// [`Llama::forward`] (or [`Llama::forward_pruned`] with a head) with the logits read back
    /// to the host, one vector per row. On the native engine the full head's product writes
    /// each row's vector in place (a pruned head's rows are copied out of one buffer).
    pub fn forward_on_host(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_rows: usize,
        head: Option<&PrunedHead>,
    ) -> Result<Vec<Vec<f32>>> {
        match (&self.inner, &mut cache.inner) {
            (Inner::Burn(m), CacheInner::Burn(c)) => {
                let logits = match head {
                    None => m.forward(tokens, c, logits_rows)?,
                    Some(head) => m.forward_pruned(tokens, c, logits_rows, head)?,
                };
                Ok(anyspec_kernels::readback::read_rows(logits)?)
            }
            (Inner::Native { model, threads }, CacheInner::Native(c)) => {
                let normed = model.final_hidden(tokens, c, logits_rows, threads)?;
                native_logit_rows(model, threads, &normed, logits_rows, head)
            }
            _ => Err(engine_mismatch("KV cache")),
        }
    }

    /// [`Llama::forward_on_host`] that also returns the final-norm hidden states the logits were
    /// computed from: one `[hidden_size]` and one logit vector per row.
    ///
    /// The hidden state is what an LM head (full or pruned) multiplies, so a caller can evaluate
    /// any other head on it later (DynaSpec's router reads the drafter's previous hidden state,
    /// `H̃_{t−1}`). On the native engine nothing is copied beyond the hidden rows.
    pub fn forward_with_hidden(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        logits_rows: usize,
        head: Option<&PrunedHead>,
    ) -> Result<HiddenRows> {
        match (&self.inner, &mut cache.inner) {
            (Inner::Burn(m), CacheInner::Burn(c)) => {
                let hidden = m.final_hidden(tokens, c, logits_rows)?;
                let logits = match head {
                    None => m.head_logits(hidden.clone())?,
                    Some(head) => m.pruned_logits(hidden.clone(), head)?,
                };
                Ok(HiddenRows {
                    hidden: anyspec_kernels::readback::read_rows(hidden)?,
                    logits: anyspec_kernels::readback::read_rows(logits)?,
                })
            }
            (Inner::Native { model, threads }, CacheInner::Native(c)) => {
                let normed = model.final_hidden(tokens, c, logits_rows, threads)?;
                let logits = native_logit_rows(model, threads, &normed, logits_rows, head)?;
                Ok(HiddenRows { hidden: split_rows(normed, logits_rows), logits })
            }
            _ => Err(engine_mismatch("KV cache")),
        }
    }

    /// The logits of final-norm hidden rows (`[rows, hidden]` flat, as
    /// [`Llama::forward_with_hidden`] returns them) through the LM head, or through the pruned
    /// `head`: `[rows, vocab]` or `[rows, head.len()]`, flat. The head's product alone, with no
    /// layer: what a shortlist saves is measured with it.
    ///
    /// # Errors
    /// When `hidden` is empty or not a multiple of the hidden size.
    pub fn logits_of_hidden(&self, hidden: &[f32], head: Option<&PrunedHead>) -> Result<Vec<f32>> {
        let width = self.config().hidden_size;
        if hidden.is_empty() || !hidden.len().is_multiple_of(width) {
            return Err(Error::InvalidArgument(format!(
                "hidden rows of {} values are not whole rows of the hidden size {width}",
                hidden.len()
            )));
        }
        match &self.inner {
            Inner::Burn(m) => {
                let rows = self.host_tensor(hidden.to_vec(), hidden.len() / width);
                let logits = match head {
                    None => m.head_logits(rows)?,
                    Some(head) => m.pruned_logits(rows, head)?,
                };
                Ok(anyspec_kernels::readback::read_rows(logits)?.concat())
            }
            Inner::Native { model, threads } => model.logits(hidden, head, threads),
        }
    }

    /// The LM head's rows, `[vocab, hidden]` flat and row-major (row `v` is token `v`'s output
    /// weights), dequantized exactly: what DynaSpec clusters.
    pub fn lm_head_rows(&self) -> Result<Vec<f32>> {
        match &self.inner {
            Inner::Burn(m) => m.lm_head_rows(),
            Inner::Native { model, .. } => Ok(model.lm_head_rows()),
        }
    }

    /// The final RMSNorm's gain, `[hidden]`: the scale of the features a feature drafter
    /// predicts.
    pub fn final_norm_weight(&self) -> Result<Vec<f32>> {
        match &self.inner {
            Inner::Burn(m) => m.final_norm_weight(),
            Inner::Native { model, .. } => Ok(model.final_norm_weight().to_vec()),
        }
    }

    /// The input embedding table, `[vocab, hidden]` flat (the LM head's rows when they are
    /// tied), dequantized exactly.
    pub fn embedding_rows(&self) -> Result<Vec<f32>> {
        match &self.inner {
            Inner::Burn(_) => {
                let vocab = self.config().vocab_size as u32;
                Ok((0..vocab).map(|t| self.embedding(t)).collect::<Result<Vec<_>>>()?.concat())
            }
            Inner::Native { model, .. } => Ok(model.embedding_rows()),
        }
    }

    /// The input embedding of `token`, `[hidden]` (the LM head's row when they are tied).
    pub fn embedding(&self, token: u32) -> Result<Vec<f32>> {
        match &self.inner {
            Inner::Burn(m) => m.embedding(token),
            Inner::Native { model, .. } => model.embedding(token),
        }
    }

    /// The `[hidden, kept]` slice of the LM head for the vocabulary rows `ids`, built once and
    /// passed to [`Llama::forward_pruned`] at every step. (The native engine multiplies the kept
    /// rows in place and copies nothing.)
    pub fn pruned_head(&self, ids: &[u32]) -> Result<PrunedHead> {
        match &self.inner {
            Inner::Burn(m) => m.pruned_head(ids),
            Inner::Native { model, .. } => {
                if ids.is_empty() {
                    return Err(Error::InvalidArgument("a pruned LM head needs at least one vocabulary row".into()));
                }
                model.check_tokens(ids)?;
                Ok(PrunedHead { ids: ids.to_vec(), weight: None, blocks: None })
            }
        }
    }

    /// A partition of the vocabulary into `blocks` (each a list of ids; DynaSpec's token
    /// clusters, the segments of a frequency ranking) for heads pruned to whole blocks
    /// ([`Llama::pruned_head_blocks`]). The native engine copies its LM head block by block
    /// (the head's size again, plus under sixteen rows of padding per block): a shortlist of a
    /// few blocks then costs its own rows, where [`Llama::pruned_head`]'s gathered product on
    /// the interleaved head computes every group of eight rows its ids touch. The burn engine
    /// keeps the blocks only (its gathered kernel reads any rows in place).
    ///
    /// # Errors
    /// When a block names an id outside the vocabulary.
    pub fn head_blocks(&self, blocks: Vec<Vec<u32>>) -> Result<HeadBlocks> {
        let vocab = self.config().vocab_size;
        blocks.iter().try_for_each(|block| self.check_tokens(block))?;
        let native = match &self.inner {
            Inner::Burn(_) => None,
            Inner::Native { model, .. } => {
                let head = model.lm_head();
                Some(NativeBlocks { rows: Arc::new(RowBlocks::new(&head, blocks.clone())?), head })
            }
        };
        Ok(HeadBlocks { members: Arc::new(blocks), vocab, native })
    }

    /// A pruned head ([`Llama::pruned_head`]) over the ids of the blocks `selected` of `blocks`
    /// (in that order, each block's ids in its order), then those of `extra` not among them:
    /// the ids of the result, in column order, are [`PrunedHead::ids`]. The logits are those of
    /// the full head at these ids, bit for bit; on the native engine, with `blocks` made by
    /// this model (or one sharing its head, [`Llama::first_layers`]), they cost the selected
    /// blocks' rows.
    ///
    /// # Errors
    /// When a block index is out of range, an extra id is outside the vocabulary, the blocks
    /// were made for another vocabulary size, or no id is left.
    pub fn pruned_head_blocks(&self, blocks: &HeadBlocks, selected: &[u32], extra: &[u32]) -> Result<PrunedHead> {
        let vocab = self.config().vocab_size;
        if blocks.vocab != vocab {
            return Err(Error::InvalidArgument(format!(
                "the head blocks were made for a vocabulary of {} ids, this model has {vocab}; make them with \
                 Llama::head_blocks on this model",
                blocks.vocab
            )));
        }
        let mut ids = Vec::new();
        for &b in selected {
            let members = blocks.members(b as usize).ok_or_else(|| {
                Error::InvalidArgument(format!("head block {b} of {}; pick blocks 0..{0}", blocks.len()))
            })?;
            ids.extend_from_slice(members);
        }
        let in_blocks = ids.len();
        let extra: Vec<u32> = extra.iter().copied().filter(|e| !ids[..in_blocks].contains(e)).collect();
        self.check_tokens(&extra)?;
        ids.extend_from_slice(&extra);
        let native = match (&self.inner, &blocks.native) {
            (Inner::Native { model, .. }, Some(native)) if Arc::ptr_eq(&native.head, &model.lm_head()) => {
                Some(native.clone())
            }
            _ => None,
        };
        match native {
            Some(native) if !ids.is_empty() => Ok(PrunedHead {
                ids,
                weight: None,
                blocks: Some(PickedBlocks { native, selected: selected.to_vec(), extra }),
            }),
            _ => self.pruned_head(&ids),
        }
    }

    /// Checks ids against the vocabulary.
    fn check_tokens(&self, ids: &[u32]) -> Result<()> {
        let vocab = self.config().vocab_size;
        match ids.iter().find(|&&t| t as usize >= vocab) {
            Some(&token) => Err(Error::TokenOutOfRange { token, vocab_size: vocab }),
            None => Ok(()),
        }
    }

    /// Runs `nodes` as new nodes of `tree`, hung below `cache` (read, not changed). Node `i` of
    /// `nodes` becomes node `tree.len() + i`; its parent is any node of the tree or an earlier
    /// new node, by that numbering. Node `i` sits at position `cache.len() + depth(i)` and
    /// attends to the cache, its ancestors and itself (tree attention).
    pub fn extend_tree(&self, nodes: &[TreeNode], cache: &KvCache, tree: &mut TreeCache) -> Result<()> {
        match (&self.inner, &cache.inner, &mut tree.inner) {
            (Inner::Burn(m), CacheInner::Burn(c), TreeInner::Burn(t)) => m.extend_tree(nodes, c, t),
            (Inner::Native { model, threads }, CacheInner::Native(c), TreeInner::Native(t)) => {
                model.extend_tree(nodes, c, t, threads)
            }
            _ => Err(engine_mismatch("KV cache or token tree")),
        }
    }

    /// The logits after the nodes `rows` of `tree`, `[rows.len(), vocab]` (`[rows.len(),
    /// head.len()]` with a pruned head): for node `i`, the last row of an ordinary forward pass
    /// over the cache followed by the path from the root to node `i`.
    pub fn tree_logits(&self, tree: &TreeCache, rows: &[usize], head: Option<&PrunedHead>) -> Result<Tensor<2>> {
        match (&self.inner, &tree.inner) {
            (Inner::Burn(m), TreeInner::Burn(t)) => m.tree_logits(t, rows, head),
            (Inner::Native { model, threads }, TreeInner::Native(t)) => {
                let flat = model.tree_logits(t, rows, head, threads)?;
                Ok(self.host_tensor(flat, rows.len()))
            }
            _ => Err(engine_mismatch("token tree")),
        }
    }

    /// [`Llama::tree_logits`] read back to the host, one vector per requested node.
    pub fn tree_logits_on_host(
        &self,
        tree: &TreeCache,
        rows: &[usize],
        head: Option<&PrunedHead>,
    ) -> Result<Vec<Vec<f32>>> {
        match (&self.inner, &tree.inner) {
            (Inner::Burn(m), TreeInner::Burn(t)) => {
                Ok(anyspec_kernels::readback::read_rows(m.tree_logits(t, rows, head)?)?)
            }
            (Inner::Native { model, threads }, TreeInner::Native(t)) => {
                let flat = model.tree_logits(t, rows, head, threads)?;
                Ok(split_rows(flat, rows.len()))
            }
            _ => Err(engine_mismatch("token tree")),
        }
    }

    /// [`Llama::extend_tree`] on a fresh tree, then [`Llama::tree_logits`]: the logits after the
    /// nodes `rows` of the token tree `nodes` hung below `cache`, from one forward pass.
    pub fn forward_tree(
        &self,
        nodes: &[TreeNode],
        rows: &[usize],
        cache: &KvCache,
        head: Option<&PrunedHead>,
    ) -> Result<Tensor<2>> {
        if nodes.is_empty() {
            return Err(Error::InvalidArgument("a token tree needs at least one node".into()));
        }
        let mut tree = self.new_tree_cache();
        self.extend_tree(nodes, cache, &mut tree)?;
        self.tree_logits(&tree, rows, head)
    }

    /// `rows` host rows, flat, as a `[rows, width]` tensor on the model's device.
    fn host_tensor(&self, flat: Vec<f32>, rows: usize) -> Tensor<2> {
        let width = flat.len() / rows.max(1);
        Tensor::from_data(TensorData::new(flat, [rows, width]), &self.device)
    }
}

/// The native engine's forward pass: the last `rows` logit rows (over `head`'s ids when given),
/// flat, as both the tensor and the host forms are made from.
fn native_forward(
    model: &NativeLlama,
    threads: &Threads,
    tokens: &[u32],
    cache: &mut NativeCache,
    rows: usize,
    head: Option<&PrunedHead>,
) -> Result<Vec<f32>> {
    let normed = model.final_hidden(tokens, cache, rows, threads)?;
    model.logits(&normed, head, threads)
}

/// The logits of the native engine's final-norm rows, one vector per row: the full head's
/// written in place ([`NativeLlama::logit_rows`]), a pruned head's split out of its buffer.
fn native_logit_rows(
    model: &NativeLlama,
    threads: &Threads,
    normed: &[f32],
    rows: usize,
    head: Option<&PrunedHead>,
) -> Result<Vec<Vec<f32>>> {
    match head {
        None => model.logit_rows(normed, threads),
        Some(head) => Ok(split_rows(model.logits(normed, Some(head), threads)?, rows)),
    }
}

fn split_rows(flat: Vec<f32>, rows: usize) -> Vec<Vec<f32>> {
    let width = flat.len() / rows.max(1);
    flat.chunks_exact(width.max(1)).map(<[f32]>::to_vec).collect()
}

impl Llama {
    /// The native engine's model and threads, `None` on the burn engine.
    pub(crate) fn native(&self) -> Option<(&Arc<NativeLlama>, &Threads)> {
        match &self.inner {
            Inner::Native { model, threads } => Some((model, threads)),
            Inner::Burn(_) => None,
        }
    }
}

impl KvCache {
    /// A cache of the native engine.
    pub(crate) fn from_native(cache: NativeCache) -> Self {
        KvCache { inner: CacheInner::Native(cache) }
    }

    /// The native engine's cache, `None` for the burn engine's.
    pub(crate) fn native_mut(&mut self) -> Option<&mut NativeCache> {
        match &mut self.inner {
            CacheInner::Native(c) => Some(c),
            CacheInner::Burn(_) => None,
        }
    }
}
