//! The native engine's KV cache: per layer, keys and values `[position, kv_heads · head_dim]`,
//! written in place. A rollback truncates (keeping the allocation), so the next pass overwrites
//! the rejected positions without copying anything.

use anyspec_cpu_kernels::{HeadLayout, Threads, attend_head, attend_queries};

use crate::config::LlamaConfig;
use crate::error::{Error, Result};

/// Multiply-adds of one attention call (rows × heads × keys × head width) above which it is
/// spread over the kernel threads; below, handing the heads out costs more than it saves.
const PARALLEL_ATTENTION_MACS: usize = 64 * 1024;

/// Keys and values of one layer (or of one layer of a token tree), `[entry, kv_width]`.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyValues {
    pub(crate) keys: Vec<f32>,
    pub(crate) values: Vec<f32>,
}

impl KeyValues {
    pub(crate) fn key(&self, entry: usize, head: usize, head_dim: usize, kv_width: usize) -> &[f32] {
        let at = entry * kv_width + head * head_dim;
        &self.keys[at..at + head_dim]
    }

    pub(crate) fn value(&self, entry: usize, head: usize, head_dim: usize, kv_width: usize) -> &[f32] {
        let at = entry * kv_width + head * head_dim;
        &self.values[at..at + head_dim]
    }
}

/// The KV cache of one sequence on the native engine.
#[derive(Clone, Debug)]
pub(crate) struct NativeCache {
    layers: Vec<KeyValues>,
    len: usize,
    kv_width: usize,
}

/// Positions reserved up front, so that a short generation never reallocates.
const INITIAL_POSITIONS: usize = 512;

impl NativeCache {
    pub(crate) fn new(config: &LlamaConfig) -> Self {
        let kv_width = config.num_kv_heads * config.head_dim;
        let reserve = INITIAL_POSITIONS.min(config.max_position_embeddings) * kv_width;
        let layer = KeyValues { keys: Vec::with_capacity(reserve), values: Vec::with_capacity(reserve) };
        NativeCache { layers: vec![layer; config.num_layers], len: 0, kv_width }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn layer(&self, index: usize) -> &KeyValues {
        &self.layers[index]
    }

    /// Refuses a cache made for another model.
    pub(crate) fn check(&self, config: &LlamaConfig) -> Result<()> {
        let kv_width = config.num_kv_heads * config.head_dim;
        if self.layers.len() != config.num_layers || self.kv_width != kv_width {
            return Err(Error::InvalidArgument(format!(
                "the KV cache was made for {} layers of width {} but the model has {} of width {kv_width}; \
                 make it with Llama::new_cache",
                self.layers.len(),
                self.kv_width,
                config.num_layers
            )));
        }
        Ok(())
    }

    /// Keeps the first `len` positions; a `len` at or past the end changes nothing.
    pub(crate) fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        for layer in &mut self.layers {
            layer.keys.truncate(len * self.kv_width);
            layer.values.truncate(len * self.kv_width);
        }
        self.len = len;
    }

    /// Appends the keys and values of new positions to one layer (the pass's length is
    /// recorded by [`NativeCache::advance`] once every layer has its share).
    pub(crate) fn append(&mut self, layer: usize, keys: &[f32], values: &[f32]) {
        self.layers[layer].keys.extend_from_slice(keys);
        self.layers[layer].values.extend_from_slice(values);
    }

    pub(crate) fn advance(&mut self, positions: usize) {
        self.len += positions;
    }

    /// Causal attention of the new positions `start..` of one layer (already appended) over
    /// everything before them and themselves; `queries` is `[m, heads · head_dim]`.
    pub(crate) fn attend_causal(
        &self,
        c: &LlamaConfig,
        layer: usize,
        start: usize,
        queries: &[f32],
        out: &mut [f32],
        threads: &Threads,
    ) {
        let (head_dim, group) = (c.head_dim, c.num_heads / c.num_kv_heads);
        let window = c.sliding_window.unwrap_or(usize::MAX);
        let scale = 1.0 / (head_dim as f32).sqrt();
        let kv = &self.layers[layer];
        let rows = queries.len() / (c.num_heads * head_dim);
        if rows > 1 && start + rows <= window {
            // No query's window cuts the cache: the query heads that share a key-value head
            // read it together. (A single row keeps one job per head: three jobs of three
            // queries on two threads measured slower than nine of one, 152 vs 161 tok/s.)
            self.attend_shared(c, layer, start, queries, out, threads);
            return;
        }
        // One (query row, head) pair per chunk of the output.
        let attend_one = |index: usize, o: &mut [f32]| {
            let (i, head) = (index / c.num_heads, index % c.num_heads);
            let q = &queries[index * head_dim..(index + 1) * head_dim];
            let query_position = start + i;
            // transformers' sliding window keeps keys with query − key < window.
            let first = (query_position + 1).saturating_sub(window);
            let kv_head = head / group;
            let layout = HeadLayout { offset: first * self.kv_width + kv_head * head_dim, stride: self.kv_width };
            attend_head(q, &kv.keys, &kv.values, layout, query_position + 1 - first, scale, o);
        };
        // Spread over the threads when the work outweighs handing it out (~a few µs).
        let work = rows * c.num_heads * (start + rows).min(window) * head_dim;
        if work >= PARALLEL_ATTENTION_MACS {
            threads.for_each_chunk_mut(out, head_dim, &attend_one);
        } else {
            out.chunks_exact_mut(head_dim).enumerate().for_each(|(index, o)| attend_one(index, o));
        }
    }

    /// [`attend_causal`](Self::attend_causal) when every query sees the cache from position 0:
    /// one job per key-value head and chunk of rows, whose queries (the `group` heads that
    /// share it, at each row of the chunk) read its keys and values once
    /// ([`attend_queries`]), with results bit for bit those of one query at a time.
    fn attend_shared(
        &self,
        c: &LlamaConfig,
        layer: usize,
        start: usize,
        queries: &[f32],
        out: &mut [f32],
        threads: &Threads,
    ) {
        let (head_dim, group) = (c.head_dim, c.num_heads / c.num_kv_heads);
        let scale = 1.0 / (head_dim as f32).sqrt();
        let kv = &self.layers[layer];
        let q_width = c.num_heads * head_dim;
        let rows = queries.len() / q_width;
        if rows == 0 {
            return;
        }
        // Rows per job: enough jobs for two per thread where the rows allow it (with one row,
        // one job per key-value head).
        let splits = (2 * threads.count()).div_ceil(c.num_kv_heads).clamp(1, rows.max(1));
        let chunk_rows = rows.div_ceil(splits);
        let chunks = rows.div_ceil(chunk_rows);
        let job_len = chunk_rows * group * head_dim;
        let mut results = vec![0.0f32; c.num_kv_heads * chunks * job_len];
        let attend_job = |job: usize, result: &mut [f32]| {
            let (kv_head, chunk) = (job / chunks, job % chunks);
            let first_row = chunk * chunk_rows;
            let job_rows = chunk_rows.min(rows - first_row);
            let mut gathered = Vec::with_capacity(job_rows * group * head_dim);
            let mut counts = Vec::with_capacity(job_rows * group);
            for i in first_row..first_row + job_rows {
                let heads = i * q_width + kv_head * group * head_dim;
                gathered.extend_from_slice(&queries[heads..heads + group * head_dim]);
                counts.extend(std::iter::repeat_n(start + i + 1, group));
            }
            let layout = HeadLayout { offset: kv_head * head_dim, stride: self.kv_width };
            let n = gathered.len();
            attend_queries(&gathered, &counts, &kv.keys, &kv.values, layout, scale, &mut result[..n]);
        };
        let work = rows * c.num_heads * (start + rows) * head_dim;
        if work >= PARALLEL_ATTENTION_MACS {
            threads.for_each_chunk_mut(&mut results, job_len, &attend_job);
        } else {
            results.chunks_exact_mut(job_len).enumerate().for_each(|(job, r)| attend_job(job, r));
        }
        for (job, result) in results.chunks_exact(job_len).enumerate() {
            let (kv_head, chunk) = (job / chunks, job % chunks);
            let first_row = chunk * chunk_rows;
            for (r, heads) in result.chunks_exact(group * head_dim).take(chunk_rows.min(rows - first_row)).enumerate() {
                let at = (first_row + r) * q_width + kv_head * group * head_dim;
                out[at..at + group * head_dim].copy_from_slice(heads);
            }
        }
    }
}
