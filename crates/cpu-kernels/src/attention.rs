//! Softmax attention of one query head over keys and values held in a KV cache.
//!
//! At long contexts attention, not the weights, dominates a decoding step: on SmolLM2-135M at
//! 800 tokens of context each new token reads 9 heads × 800 keys and values in each of 30
//! layers. [`attend_queries`] computes it for the queries that read one head of the cache (one
//! query: [`attend_head`]) in two passes over a score buffer (scores, then the weighted sum of
//! values), with AVX2/FMA where the CPU has them (the softmax's exponentials eight at a time,
//! like ggml's) and a portable loop otherwise; both give the softmax of `q·k/√d` up to float
//! rounding.

use std::cell::RefCell;

#[cfg(target_arch = "x86_64")]
use crate::sys::avx2;

thread_local! {
    /// The scratch of [`attend_queries`], one per thread, kept between calls: a decoding step
    /// makes one call per layer, query row and head, too many to allocate for each.
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch { scores: Vec::new(), totals: Vec::new() }) };
}

/// Softmax numerators, `[query, position]`, and their sums, one per query.
struct Scratch {
    scores: Vec<f32>,
    totals: Vec<f32>,
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

/// One query on the portable path (any width, any CPU): scores, softmax, weighted sum.
#[allow(clippy::too_many_arguments)] // The entry point's arguments and its scratch buffer.
fn attend_portable(
    query: &[f32],
    keys: &[f32],
    values: &[f32],
    layout: HeadLayout,
    count: usize,
    scale: f32,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    let width = query.len();
    out.fill(0.0);
    if count == 0 {
        return;
    }
    scores.clear();
    scores.extend((0..count).map(|j| {
        let k = &keys[layout.offset + j * layout.stride..][..width];
        query.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale
    }));
    let total = softmax_numerators(scores);
    for (j, &w) in scores.iter().enumerate() {
        let v = &values[layout.offset + j * layout.stride..][..width];
        for (o, &x) in out.iter_mut().zip(v) {
            *o += w * x;
        }
    }
    normalize(out, total);
}

/// `exp(s - max s)` in place; returns their sum (the softmax's denominator).
fn softmax_numerators(scores: &mut [f32]) -> f32 {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0.0f32;
    for score in scores.iter_mut() {
        *score = (*score - max).exp();
        total += *score;
    }
    total
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
/// equals [`attend_head`]'s for its query alone, bit for bit ([`attend_head`] is this function
/// with one query, and a query's operations do not depend on the others), so scoring a draft
/// gives the same attention as decoding its tokens one by one. A query over no position gets
/// zeros.
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
    let n = counts.len();
    assert!(n > 0 && queries.len().is_multiple_of(n), "attention: queries of unequal width");
    let width = queries.len() / n;
    assert_eq!(out.len(), queries.len(), "attention: output and queries differ in length");
    let most = counts.iter().copied().max().unwrap_or(0);
    if most > 0 {
        let last = layout.offset + (most - 1) * layout.stride + width;
        assert!(last <= keys.len() && last <= values.len(), "attention: a position lies outside the cache");
    }
    #[cfg(target_arch = "x86_64")]
    let fast = width.is_multiple_of(8) && avx2::supported();
    #[cfg(not(target_arch = "x86_64"))]
    let fast = false;
    SCRATCH.with_borrow_mut(|Scratch { scores, totals }| {
        if !fast {
            for ((q, o), &count) in queries.chunks_exact(width).zip(out.chunks_exact_mut(width)).zip(counts) {
                attend_portable(q, keys, values, layout, count, scale, scores, o);
            }
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            scores.clear();
            scores.resize(n * most, 0.0);
            let (offset, stride) = (layout.offset, layout.stride);
            avx2::attention_scores_multi(queries, width, counts, keys, offset, stride, scale, scores, most);
            totals.clear();
            totals.extend(
                counts.iter().enumerate().map(|(i, &c)| avx2::softmax_numerators(&mut scores[i * most..i * most + c])),
            );
            avx2::attention_sum_multi(scores, most, counts, values, offset, stride, width, out);
            for ((o, &total), &count) in out.chunks_exact_mut(width).zip(totals.iter()).zip(counts) {
                // A query over no position keeps the zeros of its empty sum.
                if count > 0 {
                    normalize(o, total);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn matches_the_textbook_softmax_for_strided_heads_and_odd_widths() {
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) * 4.0 - 2.0
        };
        // Widths on the AVX2 path (multiples of 8, with and without a 16-lane tail) and off it.
        for (width, heads, count) in [(64, 3, 37), (24, 2, 5), (8, 1, 1), (6, 2, 9)] {
            let stride = width * heads;
            let keys: Vec<f32> = (0..stride * count).map(|_| next()).collect();
            let values: Vec<f32> = (0..stride * count).map(|_| next()).collect();
            let q: Vec<f32> = (0..width).map(|_| next()).collect();
            let layout = HeadLayout { offset: width * (heads - 1), stride };
            let mut out = vec![0.0; width];
            attend_head(&q, &keys, &values, layout, count, 0.3, &mut out);
            let expected = reference(&q, &keys, &values, layout, count, 0.3);
            for (i, (&o, &e)) in out.iter().zip(&expected).enumerate() {
                assert!((f64::from(o) - e).abs() < 1e-5, "width {width}, lane {i}: {o} vs {e}");
            }
        }
    }

    #[test]
    fn queries_together_equal_each_query_alone_bit_for_bit() {
        let mut seed = 777u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) * 4.0 - 2.0
        };
        // A causal draft: three query heads per key-value head, at four positions (counts
        // growing by one per position), odd and even numbers of queries, and a width off the
        // AVX2 path.
        for (width, n, counts) in [
            (64, 12, (0..12).map(|i| 40 + i / 3).collect::<Vec<_>>()),
            (64, 3, vec![5, 5, 5]),
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
    #[should_panic(expected = "outside the cache")]
    fn a_position_outside_the_cache_is_a_panic_not_a_wild_read() {
        let data = vec![0.0f32; 64];
        let mut out = vec![0.0; 8];
        attend_head(&[0.0; 8], &data, &data, HeadLayout { offset: 0, stride: 16 }, 5, 1.0, &mut out);
    }
}
