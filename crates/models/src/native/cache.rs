//! The native engine's KV cache: per layer, keys and values `[position, kv_heads · head_dim]`,
//! written in place. A rollback truncates (keeping the allocation), so the next pass overwrites
//! the rejected positions without copying anything.

use anyspec_cpu_kernels::{
    ATTENTION_SPAN, HeadLayout, Kernel, KeyTiles, Threads, attend_head, attend_span_with, merge_spans,
    span_partial_len, spans_for, write_key_tiles,
};

use crate::config::LlamaConfig;
use crate::error::{Error, Result};

/// Multiply-adds of one attention call (rows × heads × keys × head width) above which it is
/// spread over the kernel threads; below, handing the heads out costs more than it saves.
const PARALLEL_ATTENTION_MACS: usize = 64 * 1024;

/// Rows of a pass attended by one job at most (a prompt's rows go in chunks).
const ROWS_PER_JOB: usize = 32;

/// Keys and values of one layer (or of one layer of a token tree), `[entry, kv_width]`, and,
/// where the model's kernel reads them, the keys again in [`KeyTiles`]' transposed layout.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyValues {
    pub(crate) keys: Vec<f32>,
    pub(crate) values: Vec<f32>,
    /// Empty unless the cache keeps tiles ([`NativeCache::new`]).
    pub(crate) tiles: Vec<f32>,
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
    head_dim: usize,
    /// The model's kernel, whose SIMD code attends (`attend_span_with`).
    kernel: Kernel,
    /// Whether the keys are also kept in tiles: where the kernel's scores read them
    /// ([`KeyTiles::used_by`]; AVX-512 at 64-wide heads: about twice the AVX2 scores' speed,
    /// for half as much cache memory again).
    tiled: bool,
}

/// Positions reserved up front, so that a short generation never reallocates.
const INITIAL_POSITIONS: usize = 512;

impl NativeCache {
    /// An empty cache for a model whose matrices use `kernel`.
    pub(crate) fn new(config: &LlamaConfig, kernel: Kernel) -> Self {
        let kv_width = config.num_kv_heads * config.head_dim;
        let positions = INITIAL_POSITIONS.min(config.max_position_embeddings);
        let reserve = positions * kv_width;
        let tiled = KeyTiles::used_by(kernel, config.head_dim);
        let layer = KeyValues {
            keys: Vec::with_capacity(reserve),
            values: Vec::with_capacity(reserve),
            tiles: if tiled {
                Vec::with_capacity(anyspec_cpu_kernels::key_tiles_len(positions, config.num_kv_heads, config.head_dim))
            } else {
                Vec::new()
            },
        };
        NativeCache {
            layers: vec![layer; config.num_layers],
            len: 0,
            kv_width,
            head_dim: config.head_dim,
            kernel,
            tiled,
        }
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

    /// Keeps the first `len` positions; a `len` at or past the end changes nothing. The key
    /// tiles keep their length: the lanes past `len` are stale, read by no score, and
    /// overwritten as positions are appended again.
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
        let kv = &mut self.layers[layer];
        if self.tiled {
            let heads = self.kv_width / self.head_dim;
            write_key_tiles(&mut kv.tiles, kv.keys.len() / self.kv_width, keys, heads, self.head_dim);
        }
        kv.keys.extend_from_slice(keys);
        kv.values.extend_from_slice(values);
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
        if start + rows <= window {
            // No query's window cuts the cache: spans of positions, the query heads that share
            // a key-value head reading it together.
            self.attend_spans(c, layer, start, queries, out, threads);
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
    /// one job per key-value head, group of query heads, chunk of rows and span of positions
    /// ([`ATTENTION_SPAN`]), whose queries (those heads at the chunk's rows) read the span's
    /// keys and values once ([`attend_span`]); the spans are then merged per query
    /// ([`merge_spans`]). Results are bit for bit those of one query at a time, however the
    /// jobs are cut.
    ///
    /// The query heads of a key-value head share a job unless the context is a single span
    /// and the pass a single row: then one job per query head keeps both threads busy (three
    /// jobs of three queries on two threads had measured slower than nine of one at short
    /// contexts, 152 vs 161 tok/s, where the keys come from cache anyway).
    fn attend_spans(
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
        let spans = spans_for(start + rows);
        let heads_per_job = if spans == 1 && rows == 1 { 1 } else { group };
        let splits = group / heads_per_job;
        // Rows go in chunks: a long pass (a prompt) so that a job's scores stay in the core's
        // cache, and a draft over a short context so that there are two jobs per thread
        // (three jobs, one per key-value head, left one of two threads idle a third of the
        // time).
        let wanted = (2 * threads.count()).div_ceil(c.num_kv_heads * splits * spans);
        let chunk_rows = rows.div_ceil(wanted.clamp(1, rows)).min(ROWS_PER_JOB);
        let chunks = rows.div_ceil(chunk_rows);
        let part = span_partial_len(head_dim);
        let job_len = chunk_rows * heads_per_job * part;
        let jobs = c.num_kv_heads * splits * chunks * spans;
        let mut partials = vec![0.0f32; jobs * job_len];
        // Job index = (((kv_head · splits) + split) · chunks + chunk) · spans + span.
        let attend_job = |job: usize, result: &mut [f32]| {
            let (span, rest) = (job % spans, job / spans);
            let (chunk, rest) = (rest % chunks, rest / chunks);
            let (split, kv_head) = (rest % splits, rest / splits);
            let rows_of_chunk = chunk * chunk_rows..(chunk * chunk_rows + chunk_rows).min(rows);
            // The chunk's rows that see a position of the span (earlier rows of a prompt see
            // none of its later spans).
            let first_row = rows_of_chunk.start.max((span * ATTENTION_SPAN).saturating_sub(start));
            if first_row >= rows_of_chunk.end {
                return;
            }
            let first_head = kv_head * group + split * heads_per_job;
            let mut gathered = Vec::with_capacity(rows_of_chunk.len() * heads_per_job * head_dim);
            let mut counts = Vec::with_capacity(rows_of_chunk.len() * heads_per_job);
            for i in first_row..rows_of_chunk.end {
                let heads = i * q_width + first_head * head_dim;
                gathered.extend_from_slice(&queries[heads..heads + heads_per_job * head_dim]);
                counts.extend(std::iter::repeat_n(start + i + 1, heads_per_job));
            }
            let skipped = (first_row - rows_of_chunk.start) * heads_per_job * part;
            let layout = HeadLayout { offset: kv_head * head_dim, stride: self.kv_width };
            let tiles = self.tiled.then_some(KeyTiles { data: &kv.tiles, heads: c.num_kv_heads, head: kv_head });
            let result = &mut result[skipped..];
            let (keys, values) = (&kv.keys, &kv.values);
            attend_span_with(self.kernel, &gathered, &counts, keys, tiles, values, layout, scale, span, result);
        };
        let work = rows * c.num_heads * (start + rows) * head_dim;
        if work >= PARALLEL_ATTENTION_MACS && jobs > 1 {
            threads.for_each_chunk_mut(&mut partials, job_len, &attend_job);
        } else {
            partials.chunks_exact_mut(job_len).enumerate().for_each(|(job, r)| attend_job(job, r));
        }
        for kv_head in 0..c.num_kv_heads {
            for split in 0..splits {
                for i in 0..rows {
                    let (chunk, row_in_chunk) = (i / chunk_rows, i % chunk_rows);
                    let jobs_at = ((kv_head * splits + split) * chunks + chunk) * spans;
                    for h in 0..heads_per_job {
                        let query = row_in_chunk * heads_per_job + h;
                        // A row's spans start at 0 and end at its own position: a job that
                        // skipped the row left its partial result zero, which merges as empty.
                        let of_span = |span: usize| {
                            let at = (jobs_at + span) * job_len + query * part;
                            &partials[at..at + part]
                        };
                        let head = kv_head * group + split * heads_per_job + h;
                        let at = i * q_width + head * head_dim;
                        merge_spans((0..spans).map(of_span), &mut out[at..at + head_dim]);
                    }
                }
            }
        }
    }
}
