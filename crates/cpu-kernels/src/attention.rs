//! Softmax attention of one query head over keys and values held in a KV cache.
//!
//! At long contexts attention, not the weights, dominates a decoding step: on SmolLM2-135M at
//! 800 tokens of context each new token reads 9 heads × 800 keys and values in each of 30
//! layers. [`attend_queries`] computes it for the queries that read one head of the cache (one
//! query: [`attend_head`]) in two passes over a score buffer (scores, then the weighted sum of
//! values), with AVX2/FMA where the CPU has them (the softmax's exponentials eight at a time,
//! like ggml's) and a portable loop otherwise; both give the softmax of `q·k/√d` up to float
//! rounding. With AVX-512 ([`attend_span_with`] and [`Kernel::Avx512Q8`]) the scores read a
//! transposed copy of the keys ([`KeyTiles`]) and the sums take 16 lanes at a time, about
//! twice the AVX2 code's speed (`cargo bench -p anyspec-cpu-kernels --bench attention`) and
//! the same bits.
//!
//! # Spans
//!
//! The positions are cut into spans of [`ATTENTION_SPAN`] at fixed boundaries (0, 128, 256, …
//! from the head's first position), and each span is attended on its own ([`attend_span`]: the
//! span's own maximum score, its sum of numerators and its unnormalised weighted sum of
//! values), then the spans are merged in order ([`merge_spans`]: rescaled to the largest
//! maximum, summed, normalised), as flash-decoding does. Spans let a caller give one key-value
//! head's long context to several threads while each key and value is still read once for all
//! the queries that share it: on SmolLM2 at 767 tokens of context, one job per query head read
//! every key three times and a decoding step cost 1.7× a short-context one.
//!
//! The boundaries depend on the positions alone, never on how many queries are attended
//! together, how the spans are spread over threads or in what order jobs finish: a query's
//! result is the same bits whichever call computes it, so scoring a draft gives the same
//! attention as decoding its tokens one by one. A context of at most one span gives exactly
//! the single-pass softmax (the merge multiplies by `exp(0) = 1`).

use std::cell::RefCell;

use crate::Kernel;
#[cfg(target_arch = "x86_64")]
use crate::sys::{avx2, avx512_attention};

/// Positions per span (see the module docs): long enough that a span's scores and sums are
/// most of its cost, short enough that a context of a few hundred tokens gives every thread
/// work. At most 32 KB of keys and 32 KB of values of a 64-wide head.
pub const ATTENTION_SPAN: usize = 128;

thread_local! {
    /// The scratch of [`attend_span`], one per thread, kept between calls: a decoding step
    /// makes one call per layer, head and span, too many to allocate for each.
    static SCRATCH: RefCell<Scratch> =
        const { RefCell::new(Scratch { scores: Vec::new(), sums: Vec::new(), spans: Vec::new() }) };
}

/// Softmax numerators, `[query, position]`, weighted sums `[query, width]`, and the partial
/// results of [`attend_queries`].
struct Scratch {
    scores: Vec<f32>,
    sums: Vec<f32>,
    spans: Vec<f32>,
}

/// Where one head's vectors sit in a cache: position `j`'s vector is
/// `data[offset + j·stride ..][..width]`, `width` being the query's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadLayout {
    /// Index of position 0's vector.
    pub offset: usize,
    /// Floats from one position's vector to the next.
    pub stride: usize,
}

/// Positions per tile of [`KeyTiles`].
pub const KEY_TILE: usize = 16;
const _: () = assert!(ATTENTION_SPAN.is_multiple_of(KEY_TILE), "a span starts at a tile's first position");

/// A second copy of a cache's keys, transposed in tiles of [`KEY_TILE`] positions, which the
/// AVX-512 scores read ([`attend_span_with`]).
///
/// # Why
///
/// A score is a 64-wide dot product. Over keys stored position by position, a SIMD kernel
/// multiplies a query by a key lane-wise and must then add the lanes of every product across
/// the register: the shuffles of that reduction cost as much as the multiply-adds, on the
/// same ports (the AVX2 scores reach ~30 GFLOP/s on one core of the 2-core Xeon). In a tile,
/// dimension `d` of 16 consecutive positions is one 16-lane vector, so one multiply-add of
/// query element `d` (broadcast) and that vector advances 16 scores at once, with no
/// reduction at all. Writing a new key into its tile is 64 scattered stores per head, once
/// per position and layer; the keys stay in their row layout too, for every other reader.
///
/// # Layout
///
/// `data[((t · heads + h) · width + d) · KEY_TILE + l]` is dimension `d` of head `h`'s key at
/// position `t · KEY_TILE + l`; lanes past the cache's length hold stale or zero values,
/// whose products the kernel computes with its tile and discards. [`write_key_tiles`] fills it.
#[derive(Clone, Copy, Debug)]
pub struct KeyTiles<'a> {
    /// Every head's tiles, laid out as above.
    pub data: &'a [f32],
    /// Key-value heads in the cache.
    pub heads: usize,
    /// The head whose keys are attended.
    pub head: usize,
}

impl KeyTiles<'_> {
    /// Whether `kernel` reads key tiles on this CPU for heads of `width` (so that a cache
    /// need not keep them otherwise): [`Kernel::Avx512Q8`] on a CPU with AVX-512 F, `width` a
    /// multiple of 16.
    pub fn used_by(kernel: Kernel, width: usize) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            kernel == Kernel::Avx512Q8 && width.is_multiple_of(16) && avx512_attention::supported()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (kernel, width);
            false
        }
    }
}

/// Floats of [`KeyTiles::data`] covering `positions` positions of `heads` heads of `width`.
pub const fn key_tiles_len(positions: usize, heads: usize, width: usize) -> usize {
    positions.div_ceil(KEY_TILE) * heads * width * KEY_TILE
}

/// Writes the keys of positions `first..first + m` (`keys`: `[m, heads · width]`, position by
/// position, as a cache appends them) into `tiles` ([`KeyTiles`]' layout), growing it to cover
/// them; earlier positions are kept.
///
/// # Panics
/// When `keys` is not whole positions of `heads · width` floats.
pub fn write_key_tiles(tiles: &mut Vec<f32>, first: usize, keys: &[f32], heads: usize, width: usize) {
    let kv_width = heads * width;
    assert!(kv_width > 0 && keys.len().is_multiple_of(kv_width), "key tiles: keys of the wrong width");
    let m = keys.len() / kv_width;
    let needed = key_tiles_len(first + m, heads, width);
    if tiles.len() < needed {
        tiles.resize(needed, 0.0);
    }
    for (i, key) in keys.chunks_exact(kv_width).enumerate() {
        let (t, lane) = ((first + i) / KEY_TILE, (first + i) % KEY_TILE);
        for (h, head) in key.chunks_exact(width).enumerate() {
            let base = (t * heads + h) * width * KEY_TILE + lane;
            for (d, &x) in head.iter().enumerate() {
                tiles[base + d * KEY_TILE] = x;
            }
        }
    }
}

/// Floats of one query's partial result in [`attend_span`]: its weighted sum of values
/// (`width`), then the span's largest score, then its sum of numerators.
pub const fn span_partial_len(width: usize) -> usize {
    width + 2
}

/// How many spans cover `count` positions.
pub const fn spans_for(count: usize) -> usize {
    count.div_ceil(ATTENTION_SPAN)
}

/// Writes `Σ_j softmax(scale · q·k_j)_j v_j` over `count` positions into `out`.
///
/// # Panics
/// When `out` and `query` differ in length, or a key or value of the `count` positions lies
/// outside `keys` or `values` (the caller's shapes are wrong, not the user's input).
pub fn attend_head(
    query: &[f32],
    keys: &[f32],
    values: &[f32],
    layout: HeadLayout,
    count: usize,
    scale: f32,
    out: &mut [f32],
) {
    assert_eq!(out.len(), query.len(), "attention: output and query widths differ");
    attend_queries(query, &[count], keys, values, layout, scale, out);
}

/// One query over one span on the portable path (any width, any CPU): scores, numerators,
/// weighted sum, into `partial` ([`span_partial_len`] floats).
#[allow(clippy::too_many_arguments)] // The entry point's arguments and its scratch buffer.
fn span_portable(
    query: &[f32],
    keys: &[f32],
    values: &[f32],
    layout: HeadLayout,
    count: usize,
    scale: f32,
    scores: &mut Vec<f32>,
    partial: &mut [f32],
) {
    let width = query.len();
    let (out, stats) = partial.split_at_mut(width);
    out.fill(0.0);
    scores.clear();
    scores.extend((0..count).map(|j| {
        let k = &keys[layout.offset + j * layout.stride..][..width];
        query.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale
    }));
    let (max, total) = softmax_numerators(scores);
    for (j, &w) in scores.iter().enumerate() {
        let v = &values[layout.offset + j * layout.stride..][..width];
        for (o, &x) in out.iter_mut().zip(v) {
            *o += w * x;
        }
    }
    stats[0] = max;
    stats[1] = total;
}

/// The largest score, then `exp(s - max s)` in place; returns both the maximum and the
/// numerators' sum (the softmax's denominator).
fn softmax_numerators(scores: &mut [f32]) -> (f32, f32) {
    let max = largest(scores);
    let mut total = 0.0f32;
    for score in scores.iter_mut() {
        *score = (*score - max).exp();
        total += *score;
    }
    (max, total)
}

/// The largest of `scores` (−∞ for none), folded in order, as the softmax kernels do.
fn largest(scores: &[f32]) -> f32 {
    scores.iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

/// The width of each of the `counts.len()` queries laid end to end in `queries`.
///
/// # Panics
/// When there is no query, or `queries` does not split into that many of equal width.
fn query_width(queries: &[f32], counts: &[usize]) -> usize {
    let n = counts.len();
    assert!(n > 0 && queries.len().is_multiple_of(n), "attention: queries of unequal width");
    queries.len() / n
}

fn normalize(out: &mut [f32], total: f32) {
    let inv = 1.0 / total;
    for o in out.iter_mut() {
        *o *= inv;
    }
}

/// [`attend_head`] for several queries over the same head of a cache (the query heads that
/// share a key-value head, at the positions of a draft): query `i` is
/// `queries[i·width..(i+1)·width]` and attends over the first `counts[i]` positions of
/// `layout` (`width = queries.len() / counts.len()`), into `out[i·width..(i+1)·width]`.
///
/// Each key and value is read from memory once for all the queries instead of once per
/// query: at long contexts the cache, not the arithmetic, is what a query costs. Every output
/// equals [`attend_head`]'s for its query alone, bit for bit (a query's operations do not
/// depend on the others, and the spans are cut at the same positions; see the module docs),
/// so scoring a draft gives the same attention as decoding its tokens one by one. A query
/// over no position gets zeros.
///
/// # Panics
/// When `queries` is not `counts.len()` queries of equal width, `out` differs from `queries`
/// in length, or a position lies outside `keys` or `values` (the caller's shapes are wrong).
pub fn attend_queries(
    queries: &[f32],
    counts: &[usize],
    keys: &[f32],
    values: &[f32],
    layout: HeadLayout,
    scale: f32,
    out: &mut [f32],
) {
    attend_queries_with(Kernel::best(), queries, counts, keys, None, values, layout, scale, out);
}

/// [`attend_queries`] with the SIMD code of `kernel` and, where the kernel reads them, the
/// keys' tiles (see [`attend_span_with`]).
///
/// # Panics
/// As for [`attend_span_with`].
#[allow(clippy::too_many_arguments)] // attend_queries' arguments, the kernel and the tiles.
pub fn attend_queries_with(
    kernel: Kernel,
    queries: &[f32],
    counts: &[usize],
    keys: &[f32],
    tiles: Option<KeyTiles<'_>>,
    values: &[f32],
    layout: HeadLayout,
    scale: f32,
    out: &mut [f32],
) {
    let (n, width) = (counts.len(), query_width(queries, counts));
    assert_eq!(out.len(), queries.len(), "attention: output and queries differ in length");
    let spans = spans_for(counts.iter().copied().max().unwrap_or(0));
    let part = span_partial_len(width);
    let mut partials = SCRATCH.with_borrow_mut(|s| std::mem::take(&mut s.spans));
    partials.clear();
    partials.resize(spans * n * part, 0.0);
    for (span, result) in partials.chunks_exact_mut(n * part).enumerate() {
        attend_span_with(kernel, queries, counts, keys, tiles, values, layout, scale, span, result);
    }
    for (i, o) in out.chunks_exact_mut(width).enumerate() {
        merge_spans(partials.chunks_exact(n * part).map(|s| &s[i * part..(i + 1) * part]), o);
    }
    SCRATCH.with_borrow_mut(|s| s.spans = partials);
}

/// Span `span` of [`attend_queries`]: positions `span·ATTENTION_SPAN ..` up to the next
/// boundary or the query's count, for each query, into `partials[i·part..(i+1)·part]` (`part =`
/// [`span_partial_len`]`(width)`): the weighted sum of the span's values with weights
/// `exp(score − max)`, the span's largest score `max`, and the sum of those weights. A query
/// with no position in the span gets zeros, a maximum of −∞ and a sum of 0, which
/// [`merge_spans`] skips. The arguments are [`attend_queries`]'s.
///
/// # Panics
/// As for [`attend_queries`], and when `partials` is shorter than `counts.len() · part`.
#[allow(clippy::too_many_arguments)] // attend_queries' arguments and the span.
pub fn attend_span(
    queries: &[f32],
    counts: &[usize],
    keys: &[f32],
    values: &[f32],
    layout: HeadLayout,
    scale: f32,
    span: usize,
    partials: &mut [f32],
) {
    attend_span_with(Kernel::best(), queries, counts, keys, None, values, layout, scale, span, partials);
}

/// [`attend_span`] with the SIMD code of `kernel`. Where [`KeyTiles::used_by`] the kernel
/// (AVX-512 F, widths a multiple of 16), the weighted values are added with AVX-512 (16
/// lanes, four queries per load of a value; the same bits as AVX2, see
/// `sys/avx512_attention.rs`), and, given `tiles` (the same keys as `keys`, transposed), the
/// scores are computed from the tiles (the AVX2 scores' chains of multiply-adds, summed in
/// the same order: the same bits). Otherwise scores, softmax and sums use AVX2/FMA where the
/// CPU has them and the width is a multiple of 8, else the portable loop. A model passes its matrices' kernel, so that
/// `--kernel avx2q8` measures the AVX2 code throughout.
///
/// # Panics
/// As for [`attend_span`], and when `tiles` does not cover the span's positions.
#[allow(clippy::too_many_arguments)] // attend_span's arguments, the kernel and the tiles.
pub fn attend_span_with(
    kernel: Kernel,
    queries: &[f32],
    counts: &[usize],
    keys: &[f32],
    tiles: Option<KeyTiles<'_>>,
    values: &[f32],
    layout: HeadLayout,
    scale: f32,
    span: usize,
    partials: &mut [f32],
) {
    let (n, width) = (counts.len(), query_width(queries, counts));
    let part = span_partial_len(width);
    assert!(partials.len() >= n * part, "attention: the partial results do not fit");
    let first = span * ATTENTION_SPAN;
    // Positions of the span each query sees.
    let in_span = |count: usize| count.min(first + ATTENTION_SPAN).saturating_sub(first);
    let most = counts.iter().map(|&c| in_span(c)).max().unwrap_or(0);
    if most > 0 {
        let last = layout.offset + (first + most - 1) * layout.stride + width;
        assert!(last <= keys.len() && last <= values.len(), "attention: a position lies outside the cache");
    }
    let layout = HeadLayout { offset: layout.offset + first * layout.stride, stride: layout.stride };
    let span_counts: Vec<usize> = counts.iter().map(|&c| in_span(c)).collect();
    #[cfg(target_arch = "x86_64")]
    let fast = width.is_multiple_of(8) && avx2::supported();
    #[cfg(not(target_arch = "x86_64"))]
    let (fast, _) = (false, (kernel, tiles));
    SCRATCH.with_borrow_mut(|Scratch { scores, sums, .. }| {
        if !fast {
            for ((q, p), &count) in queries.chunks_exact(width).zip(partials.chunks_exact_mut(part)).zip(&span_counts) {
                span_portable(q, keys, values, layout, count, scale, scores, p);
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            scores.clear();
            scores.resize(n * most.max(1), 0.0);
            let row = most.max(1);
            let (offset, stride) = (layout.offset, layout.stride);
            let wide = KeyTiles::used_by(kernel, width);
            match tiles.filter(|_| wide) {
                Some(t) => {
                    // The span's first tile (spans start at multiples of KEY_TILE).
                    let tile_stride = t.heads * width * KEY_TILE;
                    let base = (first / KEY_TILE) * tile_stride + t.head * width * KEY_TILE;
                    avx512_attention::attention_scores_tiled(
                        queries,
                        width,
                        &span_counts,
                        t.data,
                        base,
                        tile_stride,
                        scale,
                        scores,
                        row,
                    );
                }
                None => {
                    avx2::attention_scores_multi(
                        queries,
                        width,
                        &span_counts,
                        keys,
                        offset,
                        stride,
                        scale,
                        scores,
                        row,
                    );
                }
            }
            sums.clear();
            sums.resize(n * width, 0.0);
            for (i, &c) in span_counts.iter().enumerate() {
                let row_scores = &mut scores[i * row..i * row + c];
                let (max, total) = if wide {
                    avx512_attention::softmax_numerators(row_scores)
                } else {
                    avx2::softmax_numerators(row_scores)
                };
                partials[i * part + width] = max;
                partials[i * part + width + 1] = total;
            }
            if wide {
                avx512_attention::attention_sum_multi(scores, row, &span_counts, values, offset, stride, width, sums);
            } else {
                avx2::attention_sum_multi(scores, row, &span_counts, values, offset, stride, width, sums);
            }
            for (p, s) in partials.chunks_exact_mut(part).zip(sums.chunks_exact(width)) {
                p[..width].copy_from_slice(s);
            }
        }
    });
}

/// Merges one query's span results ([`attend_span`], in span order) into its attention
/// output: `Σ_s e^{m_s − M} o_s / Σ_s e^{m_s − M} t_s`, `M` the largest span maximum. Spans
/// with no position are skipped; a query over no position at all gets zeros.
///
/// # Panics
/// When a partial result is not [`span_partial_len`]`(out.len())` floats.
pub fn merge_spans<'a>(partials: impl Iterator<Item = &'a [f32]> + Clone, out: &mut [f32]) {
    let width = out.len();
    let seen = |p: &&[f32]| {
        assert_eq!(p.len(), span_partial_len(width), "attention: a partial result of the wrong width");
        p[width + 1] > 0.0
    };
    let mut spans = partials.filter(seen);
    out.fill(0.0);
    let Some(first) = spans.clone().next() else {
        return;
    };
    if spans.clone().nth(1).is_none() {
        // One span: the single-pass softmax, exactly.
        out.copy_from_slice(&first[..width]);
        normalize(out, first[width + 1]);
        return;
    }
    let top = spans.clone().map(|p| p[width]).fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0.0f32;
    for p in &mut spans {
        let factor = (p[width] - top).exp();
        total += factor * p[width + 1];
        for (o, &x) in out.iter_mut().zip(&p[..width]) {
            *o += factor * x;
        }
    }
    normalize(out, total);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repeatable stream of floats uniform in `[-half, half)` (a linear congruential generator).
    fn uniform(mut seed: u64, half: f32) -> impl FnMut() -> f32 {
        move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) * 2.0 * half - half
        }
    }

    /// The textbook softmax attention in f64.
    fn reference(q: &[f32], keys: &[f32], values: &[f32], layout: HeadLayout, count: usize, scale: f32) -> Vec<f64> {
        let w = q.len();
        let at = |data: &[f32], j: usize| data[layout.offset + j * layout.stride..][..w].to_vec();
        let scores: Vec<f64> = (0..count)
            .map(|j| {
                at(keys, j).iter().zip(q).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum::<f64>() * f64::from(scale)
            })
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = e.iter().sum();
        (0..w).map(|i| (0..count).map(|j| e[j] * f64::from(at(values, j)[i])).sum::<f64>() / total).collect()
    }

    #[test]
    fn matches_the_textbook_softmax_for_strided_heads_odd_widths_and_long_contexts() {
        let mut next = uniform(12345, 2.0);
        // Widths on the AVX2 path (multiples of 8, with and without a 16-lane tail) and off it;
        // counts within one span, on, just past and well past span boundaries.
        let span = ATTENTION_SPAN;
        for (width, heads, count) in [
            (64, 3, 37),
            (24, 2, 5),
            (8, 1, 1),
            (6, 2, 9),
            (64, 3, span),
            (64, 3, span + 1),
            (64, 3, 3 * span + 17),
            (6, 3, 300),
        ] {
            let stride = width * heads;
            let mut keys: Vec<f32> = (0..stride * count).map(|_| next()).collect();
            // Large scores at the last positions (in a late span for the long counts), so that
            // the merge's rescaling of the spans matters.
            for k in &mut keys[stride * count.saturating_sub(5)..] {
                *k *= 4.0;
            }
            let values: Vec<f32> = (0..stride * count).map(|_| next()).collect();
            let q: Vec<f32> = (0..width).map(|_| next()).collect();
            let layout = HeadLayout { offset: width * (heads - 1), stride };
            let mut out = vec![0.0; width];
            attend_head(&q, &keys, &values, layout, count, 0.3, &mut out);
            let expected = reference(&q, &keys, &values, layout, count, 0.3);
            for (i, (&o, &e)) in out.iter().zip(&expected).enumerate() {
                assert!((f64::from(o) - e).abs() < 1e-5, "width {width}, count {count}, lane {i}: {o} vs {e}");
            }
        }
    }

    #[test]
    fn queries_together_equal_each_query_alone_bit_for_bit() {
        let mut next = uniform(777, 2.0);
        // A causal draft: three query heads per key-value head, at four positions (counts
        // growing by one per position), odd and even numbers of queries, and a width off the
        // AVX2 path.
        for (width, n, counts) in [
            (64, 12, (0..12).map(|i| 40 + i / 3).collect::<Vec<_>>()),
            (64, 3, vec![5, 5, 5]),
            (96, 3, vec![7, 8, 9]),
            (40, 3, vec![3, 4, 4]),
            (24, 5, vec![1, 2, 3, 9, 9]),
            (6, 2, vec![4, 7]),
        ] {
            let stride = width * 2;
            let count = counts.iter().copied().max().unwrap();
            let keys: Vec<f32> = (0..stride * count).map(|_| next()).collect();
            let values: Vec<f32> = (0..stride * count).map(|_| next()).collect();
            let queries: Vec<f32> = (0..n * width).map(|_| next()).collect();
            let layout = HeadLayout { offset: width, stride };
            let mut together = vec![0.0; n * width];
            attend_queries(&queries, &counts, &keys, &values, layout, 0.125, &mut together);
            for i in 0..n {
                let mut alone = vec![0.0; width];
                let q = &queries[i * width..(i + 1) * width];
                attend_head(q, &keys, &values, layout, counts[i], 0.125, &mut alone);
                let got = &together[i * width..(i + 1) * width];
                assert!(
                    got.iter().zip(&alone).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "width {width}, query {i}: {got:?} vs {alone:?}"
                );
                let expected = reference(q, &keys, &values, layout, counts[i], 0.125);
                assert!(got.iter().zip(&expected).all(|(&o, &e)| (f64::from(o) - e).abs() < 1e-5));
            }
        }
    }

    #[test]
    fn the_avx512_code_over_key_tiles_gives_the_avx2_codes_bits() {
        if !KeyTiles::used_by(Kernel::Avx512Q8, 64) {
            return; // No AVX-512 on this CPU: the tiles are never read.
        }
        let mut next = uniform(2024, 2.0);
        // A causal draft of six rows of three query heads over three spans (the last partial),
        // the keys' tiles written in two appends as a cache writes them.
        let (width, heads, head) = (64, 3, 2);
        let counts: Vec<usize> = (0..18).map(|i| 300 + i / 3).collect();
        let most = 306;
        let keys: Vec<f32> = (0..most * heads * width).map(|_| next()).collect();
        let values: Vec<f32> = (0..most * heads * width).map(|_| next()).collect();
        let queries: Vec<f32> = (0..counts.len() * width).map(|_| next()).collect();
        let mut tiles = Vec::new();
        write_key_tiles(&mut tiles, 0, &keys[..300 * heads * width], heads, width);
        write_key_tiles(&mut tiles, 300, &keys[300 * heads * width..], heads, width);
        let layout = HeadLayout { offset: head * width, stride: heads * width };
        let tiled = Some(KeyTiles { data: &tiles, heads, head });
        let mut wide = vec![0.0; queries.len()];
        attend_queries_with(Kernel::Avx512Q8, &queries, &counts, &keys, tiled, &values, layout, 0.125, &mut wide);
        let mut narrow = vec![0.0; queries.len()];
        attend_queries_with(Kernel::Avx2Q8, &queries, &counts, &keys, None, &values, layout, 0.125, &mut narrow);
        assert!(wide.iter().zip(&narrow).all(|(a, b)| a.to_bits() == b.to_bits()));
        let expected = reference(&queries[17 * width..], &keys, &values, layout, counts[17], 0.125);
        assert!(wide[17 * width..].iter().zip(&expected).all(|(&o, &e)| (f64::from(o) - e).abs() < 1e-5));
    }

    #[test]
    fn spans_attended_apart_and_merged_give_the_same_bits_as_one_call() {
        let mut next = uniform(99, 2.0);
        // A draft of three rows of two query heads whose counts straddle a span boundary, as a
        // threaded caller hands spans to different jobs and merges them afterwards.
        let (width, stride) = (64, 128);
        let counts = vec![255, 255, 256, 256, 257, 257];
        let most = 257;
        let keys: Vec<f32> = (0..stride * most).map(|_| next()).collect();
        let values: Vec<f32> = (0..stride * most).map(|_| next()).collect();
        let queries: Vec<f32> = (0..counts.len() * width).map(|_| next()).collect();
        let layout = HeadLayout { offset: 0, stride };
        let mut together = vec![0.0; queries.len()];
        attend_queries(&queries, &counts, &keys, &values, layout, 0.125, &mut together);
        let part = span_partial_len(width);
        let spans = spans_for(most);
        assert_eq!(spans, 3);
        // Each span in its own call, the last span first.
        let mut partials = vec![vec![0.0; counts.len() * part]; spans];
        for span in (0..spans).rev() {
            attend_span(&queries, &counts, &keys, &values, layout, 0.125, span, &mut partials[span]);
        }
        for (i, &count) in counts.iter().enumerate() {
            let mut merged = vec![0.0; width];
            merge_spans(partials.iter().map(|p| &p[i * part..(i + 1) * part]), &mut merged);
            let mut alone = vec![0.0; width];
            attend_head(&queries[i * width..(i + 1) * width], &keys, &values, layout, count, 0.125, &mut alone);
            let got = &together[i * width..(i + 1) * width];
            assert!(got.iter().zip(&merged).all(|(a, b)| a.to_bits() == b.to_bits()), "query {i}: merged apart");
            assert!(got.iter().zip(&alone).all(|(a, b)| a.to_bits() == b.to_bits()), "query {i}: alone");
        }
    }

    #[test]
    fn a_merge_that_ignored_the_span_maxima_would_be_caught() {
        // The rescaling by e^{m_s − M} is what makes spans add up: summing the spans' raw
        // numerators (each relative to its own maximum) gives another, wrong, answer, which
        // the reference test above would reject.
        let width = 8;
        let count = ATTENTION_SPAN + 4;
        let keys: Vec<f32> = (0..width * count).map(|i| if i / width < ATTENTION_SPAN { 0.1 } else { 3.0 }).collect();
        let values: Vec<f32> = (0..width * count).map(|i| (i / width) as f32).collect();
        let q = vec![1.0; width];
        let layout = HeadLayout { offset: 0, stride: width };
        let part = span_partial_len(width);
        let mut partials = vec![vec![0.0; part]; 2];
        for (span, p) in partials.iter_mut().enumerate() {
            attend_span(&q, &[count], &keys, &values, layout, 1.0, span, p);
        }
        let (mut raw, mut total) = (vec![0.0f64; width], 0.0f64);
        for p in &partials {
            total += f64::from(p[width + 1]);
            for (r, &x) in raw.iter_mut().zip(&p[..width]) {
                *r += f64::from(x);
            }
        }
        let expected = reference(&q, &keys, &values, layout, count, 1.0);
        let mut merged = vec![0.0; width];
        merge_spans(partials.iter().map(Vec::as_slice), &mut merged);
        assert!((f64::from(merged[0]) - expected[0]).abs() < 1e-4, "{} vs {}", merged[0], expected[0]);
        assert!(
            (raw[0] / total - expected[0]).abs() > 1.0,
            "the unscaled merge is {} vs {}",
            raw[0] / total,
            expected[0]
        );
    }

    #[test]
    #[should_panic(expected = "outside the cache")]
    fn a_position_outside_the_cache_is_a_panic_not_a_wild_read() {
        let data = vec![0.0f32; 64];
        let mut out = vec![0.0; 8];
        attend_head(&[0.0; 8], &data, &data, HeadLayout { offset: 0, stride: 16 }, 5, 1.0, &mut out);
    }
}
