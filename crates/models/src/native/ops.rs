//! The element-wise and per-row operations of a Llama layer on host slices: RMSNorm, rotary
//! embeddings, SwiGLU and the attention of one query over a run of keys.
//!
//! These cost O(positions · width) against the O(positions · width²) of the matrix products, so
//! they are written as plain loops the compiler vectorizes; the matrix products are
//! `anyspec-cpu-kernels`' job.

/// `x · rsqrt(mean(x²) + ε) · w` for every row of `x` (`x.len()` a multiple of `w.len()`), in
/// place, in the order `transformers`' `LlamaRMSNorm` computes it: `(x · scale) · w`.
///
/// The sum of squares is [`dot`]'s eight lanes: a plain `.sum()` of f32 is one chain of
/// additions in order (the compiler may not reorder float sums). A wide pass normalizes every
/// position twice per layer on the calling thread while the kernel threads wait: measured on
/// SmolLM2 (2 threads, 64 tokens of context, section timers), the two norms of a layer went
/// from 0.36 to 0.14 ms per 4-position pass over all 30 layers (about 1.5 to 0.6 µs per
/// 576-wide row), and from 0.12 to 0.06 ms per single position. Each row's sum still depends
/// on that row alone, so a position gets the same numbers in a pass of any width.
pub(crate) fn rms_norm_into(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let width = weight.len();
    for (row, out) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let mean_square = dot(row, row) / width as f32;
        let scale = 1.0 / (mean_square + eps).sqrt();
        for ((o, &v), &w) in out.iter_mut().zip(row).zip(weight) {
            *o = (v * scale) * w;
        }
    }
}

/// Rotates every head of one position in place by the `rotate_half` convention of Hugging Face:
/// `x · cos + rotate_half(x) · sin` with `rotate_half([a, b]) = [−b, a]`. `cos`/`sin` are one
/// row of [`crate::rope::Rope::tables_at`] (the half table repeated twice).
pub(crate) fn rotate_heads(x: &mut [f32], head_dim: usize, cos: &[f32], sin: &[f32]) {
    let half = head_dim / 2;
    for head in x.chunks_exact_mut(head_dim) {
        let (first, second) = head.split_at_mut(half);
        for j in 0..half {
            let (a, b) = (first[j], second[j]);
            first[j] = a * cos[j] - b * sin[j];
            second[j] = b * cos[j + half] + a * sin[j + half];
        }
    }
}

/// Adds `bias` to every row of `x`.
pub(crate) fn add_bias(x: &mut [f32], bias: &[f32]) {
    for row in x.chunks_exact_mut(bias.len()) {
        for (v, &b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

/// `Σ a_i b_i` in eight independent lanes, so the compiler keeps it in vector registers.
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for l in 0..8 {
            lanes[l] += x[l] * y[l];
        }
    }
    let mut sum = lanes.iter().sum::<f32>();
    for (x, y) in a_rest.iter().zip(b_rest) {
        sum += x * y;
    }
    sum
}

/// `out += w · v`.
#[inline]
pub(crate) fn axpy(out: &mut [f32], w: f32, v: &[f32]) {
    for (o, &x) in out.iter_mut().zip(v) {
        *o += w * x;
    }
}

/// Attention of one query head over the keys it may see, as an online softmax (one pass, no
/// score buffer): `keys(i)`/`values(i)` give key and value `i` of `count`, `visible(i)` whether
/// the query may attend to it. Writes `Σ softmax(q·k/√d)_i v_i` into `out`.
pub(crate) fn attend<'a>(
    query: &[f32],
    count: usize,
    keys: impl Fn(usize) -> &'a [f32],
    values: impl Fn(usize) -> &'a [f32],
    visible: impl Fn(usize) -> bool,
    scale: f32,
    out: &mut [f32],
) {
    out.fill(0.0);
    let mut max = f32::NEG_INFINITY;
    let mut total = 0.0f32;
    for i in 0..count {
        if !visible(i) {
            continue;
        }
        let score = dot(query, keys(i)) * scale;
        if score > max {
            // Rescale what was accumulated under the old maximum.
            let factor = if max == f32::NEG_INFINITY { 0.0 } else { (max - score).exp() };
            for o in out.iter_mut() {
                *o *= factor;
            }
            total *= factor;
            max = score;
        }
        let weight = (score - max).exp();
        total += weight;
        axpy(out, weight, values(i));
    }
    if total > 0.0 {
        let inv = 1.0 / total;
        for o in out.iter_mut() {
            *o *= inv;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_gives_unit_root_mean_square_before_the_weight() {
        let x = [3.0, 4.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0];
        let mut out = [0.0; 8];
        rms_norm_into(&x, &[1.0, 2.0, 1.0, 1.0], 0.0, &mut out);
        // Row 1: rms = sqrt(25 / 4) = 2.5.
        assert_eq!(&out[..4], &[1.2, 3.2, 0.0, 0.0]);
        assert_eq!(&out[4..], &[1.0, 2.0, 1.0, 1.0]);
    }

    #[test]
    fn rotation_by_a_quarter_turn_maps_a_to_b_and_b_to_minus_a() {
        let mut x = [1.0, 2.0, 10.0, 20.0];
        rotate_heads(&mut x, 4, &[0.0, 0.0, 0.0, 0.0], &[1.0, 1.0, 1.0, 1.0]);
        assert_eq!(x, [-10.0, -20.0, 1.0, 2.0]);
    }

    #[test]
    fn online_softmax_equals_the_two_pass_formula() {
        let query = [0.3, -1.2, 0.5];
        let keys: Vec<[f32; 3]> = (0..7).map(|i| [i as f32 * 0.4, 1.0 - i as f32 * 0.3, 0.2]).collect();
        let values: Vec<[f32; 3]> = (0..7).map(|i| [i as f32, -(i as f32), 1.0]).collect();
        let visible = |i: usize| i != 2;
        let mut out = [0.0; 3];
        attend(&query, 7, |i| &keys[i], |i| &values[i], visible, 0.5, &mut out);
        let scores: Vec<f64> = (0..7)
            .filter(|&i| visible(i))
            .map(|i| keys[i].iter().zip(&query).map(|(k, q)| f64::from(k * q)).sum::<f64>() * 0.5)
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        let kept: Vec<usize> = (0..7).filter(|&i| visible(i)).collect();
        for d in 0..3 {
            let expected: f64 = kept.iter().zip(&weights).map(|(&i, w)| w / total * f64::from(values[i][d])).sum();
            assert!((f64::from(out[d]) - expected).abs() < 1e-5, "dim {d}: {} vs {expected}", out[d]);
        }
    }
}
