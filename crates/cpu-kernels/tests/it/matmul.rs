//! `matmul` and `matmul_rows` against a naive f64 reference over the dequantized weights, on
//! every kernel this CPU supports.

use anyspec_cpu_kernels::{Kernel, Matrix, Threads, WeightFormat, quantize};
use half::f16;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub(crate) fn kernels() -> Vec<Kernel> {
    Kernel::ALL.into_iter().filter(|k| k.is_supported()).collect()
}

/// Random weight bytes of `format`: quantized through the reference quantizer where there is
/// one, random blocks with a sane scale for the k-quants.
pub(crate) fn random_weights(format: WeightFormat, rows: usize, cols: usize, rng: &mut StdRng) -> Vec<u8> {
    let values: Vec<f32> = (0..rows * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    match format {
        WeightFormat::Q4_K | WeightFormat::Q6_K => {
            let n = rows * cols / 256;
            let mut bytes: Vec<u8> = (0..n * format.block_bytes()).map(|_| rng.random()).collect();
            for block in bytes.chunks_exact_mut(format.block_bytes()) {
                let d = f16::from_f32(rng.random_range(0.001f32..0.05)).to_le_bytes();
                if format == WeightFormat::Q4_K {
                    block[..2].copy_from_slice(&d);
                    let dmin = f16::from_f32(rng.random_range(0.0f32..0.05)).to_le_bytes();
                    block[2..4].copy_from_slice(&dmin);
                } else {
                    block[208..210].copy_from_slice(&d);
                }
            }
            bytes
        }
        _ => quantize(format, &values).unwrap(),
    }
}

/// The error bounds of one output: `Σ |x||w|` (f32 rounding) and `Σ |w| · max|x_block| / 254`
/// (half a step of 8-bit activations quantized per 32-block).
#[derive(Clone, Copy)]
struct Bounds {
    magnitude: f64,
    step: f64,
}

/// `y[m][j] = Σ_k x[m][k] · w[rows_of[j]][k]` in f64, and its error bounds.
fn reference(w: &[f32], cols: usize, x: &[f32], select: &[usize]) -> (Vec<f64>, Vec<Bounds>) {
    let m = x.len() / cols;
    let mut y = Vec::new();
    let mut bounds = Vec::new();
    for i in 0..m {
        let xs = &x[i * cols..(i + 1) * cols];
        for &r in select {
            let (mut s, mut magnitude, mut step) = (0.0f64, 0.0f64, 0.0f64);
            for k in 0..cols {
                let p = f64::from(xs[k]) * f64::from(w[r * cols + k]);
                s += p;
                magnitude += p.abs();
                let block = &xs[k / 32 * 32..(k / 32 * 32 + 32).min(cols)];
                let amax = block.iter().fold(0.0f32, |a, v| a.max(v.abs()));
                step += f64::from(w[r * cols + k].abs()) * f64::from(amax) / 254.0;
            }
            y.push(s);
            bounds.push(Bounds { magnitude, step });
        }
    }
    (y, bounds)
}

fn assert_close(got: &[f32], want: &[f64], bounds: &[Bounds], kernel: Kernel, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, ((&g, &w), b)) in got.iter().zip(want).zip(bounds).enumerate() {
        let tol = match kernel {
            // Activations rounded to 8 bits (and their scales to f16): half a step per weight.
            k if k.quantizes_activations() => 1.01 * b.step + 2e-3 * b.magnitude + 1e-30,
            _ => 1e-5 * b.magnitude + 1e-30,
        };
        assert!((f64::from(g) - w).abs() <= tol, "{what}: y[{i}] = {g}, want {w} (tol {tol})");
    }
}

/// The matrix of `bytes` in each layout it has: rows one after the other, and (for the formats
/// that have one) interleaved in groups of eight, checked to hold the same weights.
pub(crate) fn layouts(format: WeightFormat, rows: usize, cols: usize, bytes: &[u8]) -> Vec<(&'static str, Matrix)> {
    let plain = Matrix::from_bytes(format, rows, cols, bytes).unwrap();
    let mut interleaved = Matrix::from_bytes(format, rows, cols, bytes).unwrap();
    let mut all = Vec::new();
    if interleaved.interleave_rows() {
        assert!(interleaved.is_interleaved());
        assert_eq!(interleaved.to_f32(), plain.to_f32(), "{format}: interleaving changed the weights");
        for row in [0, rows - 1] {
            let (mut a, mut b) = (vec![0.0; cols], vec![0.0; cols]);
            plain.row_f32(row, &mut a).unwrap();
            interleaved.row_f32(row, &mut b).unwrap();
            assert_eq!(a, b, "{format}: row {row} read back from the interleaved layout");
        }
        all.push(("interleaved", interleaved));
    } else {
        assert!(!interleaved.is_interleaved());
    }
    all.insert(0, ("rows", plain));
    all
}

fn check(format: WeightFormat, rows: usize, blocks: usize, m: usize, threads: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let cols = blocks * format.block_len().max(8);
    let bytes = random_weights(format, rows, cols, &mut rng);
    let x: Vec<f32> = (0..m * cols).map(|_| rng.random_range(-2.0f32..2.0)).collect();
    let pool = Threads::new(threads).unwrap();
    let w = Matrix::from_bytes(format, rows, cols, &bytes).unwrap().to_f32();
    let all: Vec<usize> = (0..rows).collect();
    let (want, mag) = reference(&w, cols, &x, &all);
    let select: Vec<u32> = (0..rows + 3).map(|_| rng.random_range(0..rows as u32)).collect();
    let sel: Vec<usize> = select.iter().map(|&r| r as usize).collect();
    let (want_sel, mag_sel) = reference(&w, cols, &x, &sel);
    for (layout, mut matrix) in layouts(format, rows, cols, &bytes) {
        for kernel in kernels() {
            matrix.set_kernel(kernel).unwrap();
            let what = format!("{format} {rows}x{cols} m={m} threads={threads} {kernel:?} {layout}");
            let mut y = vec![f32::NAN; m * rows + 1];
            matrix.matmul(&x, &mut y, &pool).unwrap();
            assert_close(&y[..m * rows], &want, &mag, kernel, &what);
            assert!(y[m * rows].is_nan(), "{what}: wrote past M·rows");
            let mut y = vec![f32::NAN; m * sel.len()];
            matrix.matmul_rows(&x, &select, &mut y, &pool).unwrap();
            assert_close(&y, &want_sel, &mag_sel, kernel, &format!("{what} rows"));
        }
    }
}

fn format_strategy() -> impl Strategy<Value = WeightFormat> {
    prop::sample::select(WeightFormat::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn matmul_matches_f64_reference(
        format in format_strategy(),
        rows in 1usize..40,
        blocks in 1usize..4,
        m in 0usize..=9,
        threads in 1usize..=3,
        seed in any::<u64>(),
    ) {
        check(format, rows, blocks, m, threads, seed);
    }
}

#[test]
fn large_products_use_every_thread_and_agree() {
    // Big enough to be shared among threads; rows not a multiple of any chunk.
    for format in WeightFormat::ALL {
        let blocks = if format.block_len() == 256 { 2 } else { 12 };
        for m in [1, 6, 9] {
            check(format, 301, blocks, m, 3, 7);
        }
    }
}

#[test]
fn kernels_agree_with_each_other() {
    // The scalar and SIMD paths on the same inputs: close to each other, not just to f64.
    let mut rng = StdRng::seed_from_u64(3);
    let threads = Threads::new(2).unwrap();
    for format in WeightFormat::ALL {
        let (rows, cols) = (67, 512);
        let bytes = random_weights(format, rows, cols, &mut rng);
        let x: Vec<f32> = (0..5 * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let mut matrix = Matrix::from_bytes(format, rows, cols, &bytes).unwrap();
        let mut outs = Vec::new();
        // The exact-weight kernels only: Avx2Q8 and Avx512Q8 round the activations.
        for kernel in kernels().into_iter().filter(|k| !k.quantizes_activations()) {
            matrix.set_kernel(kernel).unwrap();
            let mut y = vec![0.0; 5 * rows];
            matrix.matmul(&x, &mut y, &threads).unwrap();
            outs.push(y);
        }
        for y in &outs[1..] {
            for (a, b) in y.iter().zip(&outs[0]) {
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{format}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn permuted_rows_equal_permuted_dequantized_rows() {
    let mut rng = StdRng::seed_from_u64(11);
    for format in WeightFormat::ALL {
        let (rows, cols) = (12, format.block_len().max(32) * 2);
        let bytes = random_weights(format, rows, cols, &mut rng);
        let mut order: Vec<usize> = (0..rows).collect();
        order.reverse();
        order.swap(0, 5);
        let plain = Matrix::from_bytes(format, rows, cols, &bytes).unwrap().to_f32();
        let permuted = Matrix::from_bytes_permuted(format, rows, cols, &bytes, &order).unwrap();
        assert_eq!(permuted.rows(), rows);
        let got = permuted.to_f32();
        for (i, &src) in order.iter().enumerate() {
            assert_eq!(&got[i * cols..(i + 1) * cols], &plain[src * cols..(src + 1) * cols], "{format} row {i}");
            let mut row = vec![0.0; cols];
            permuted.row_f32(i, &mut row).unwrap();
            assert_eq!(row, &plain[src * cols..(src + 1) * cols], "{format} row_f32 {i}");
        }
    }
}

#[test]
fn from_f32_equals_f32_bytes_and_memory_stays_quantized() {
    let (rows, cols) = (3, 64);
    let w: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.25 - 7.0).collect();
    let a = Matrix::from_f32(rows, cols, &w).unwrap();
    let bytes = quantize(WeightFormat::F32, &w).unwrap();
    let b = Matrix::from_bytes(WeightFormat::F32, rows, cols, &bytes).unwrap();
    assert_eq!(a.to_f32(), w);
    assert_eq!(b.to_f32(), w);
    let q = Matrix::from_bytes(WeightFormat::Q4_1, rows, cols, &quantize(WeightFormat::Q4_1, &w).unwrap()).unwrap();
    assert_eq!(q.memory_bytes(), rows * cols / 32 * 20);
    assert_eq!(q.format(), WeightFormat::Q4_1);
    assert_eq!((q.rows(), q.cols()), (rows, cols));
}

#[test]
fn results_do_not_depend_on_batch_threads_or_gathering() {
    // Bit for bit: an activation row gets the same outputs whether it is scored alone or among
    // up to nine rows, on one thread or three, through matmul or matmul_rows. Greedy decoding
    // with a drafter equals decoding without one only if verification and plain decoding
    // compute identical logits.
    let mut rng = StdRng::seed_from_u64(5);
    let single = Threads::new(1).unwrap();
    let three = Threads::new(3).unwrap();
    for format in WeightFormat::ALL {
        let (rows, cols) = (203, format.block_len().max(32) * 3 + if format.block_len() == 1 { 5 } else { 0 });
        let bytes = random_weights(format, rows, cols, &mut rng);
        let x: Vec<f32> = (0..9 * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let select: Vec<u32> = (0..rows as u32).rev().collect();
        for (layout, mut matrix) in layouts(format, rows, cols, &bytes) {
            for kernel in kernels() {
                matrix.set_kernel(kernel).unwrap();
                let mut alone = vec![0.0; 9 * rows];
                for i in 0..9 {
                    matrix.matmul(&x[i * cols..(i + 1) * cols], &mut alone[i * rows..(i + 1) * rows], &single).unwrap();
                }
                for (m, threads) in [(2, &single), (5, &three), (6, &three), (7, &single), (8, &single), (9, &three)] {
                    let mut y = vec![0.0; m * rows];
                    matrix.matmul(&x[..m * cols], &mut y, threads).unwrap();
                    assert!(y == alone[..m * rows], "{format} {kernel:?} {layout} m={m}");
                    let mut g = vec![0.0; m * rows];
                    matrix.matmul_rows(&x[..m * cols], &select, &mut g, threads).unwrap();
                    for i in 0..m {
                        for (j, &r) in select.iter().enumerate() {
                            assert!(
                                g[i * rows + j].to_bits() == y[i * rows + r as usize].to_bits(),
                                "{format} {kernel:?} {layout} m={m} gathered row {r}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn interleaved_rows_give_the_row_layouts_products() {
    // The exact-weight kernels read the interleaved rows back: bit for bit the same outputs.
    // The 8-bit kernel sums in another order: equal within its rounding.
    let mut rng = StdRng::seed_from_u64(17);
    let threads = Threads::new(2).unwrap();
    for format in [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4_1] {
        let (rows, cols) = (45, 96);
        let bytes = random_weights(format, rows, cols, &mut rng);
        let x: Vec<f32> = (0..7 * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let [(_, mut plain), (_, mut interleaved)] = <[_; 2]>::try_from(layouts(format, rows, cols, &bytes)).unwrap();
        assert!(interleaved.memory_bytes() >= plain.memory_bytes());
        for kernel in kernels() {
            plain.set_kernel(kernel).unwrap();
            interleaved.set_kernel(kernel).unwrap();
            let (mut a, mut b) = (vec![0.0; 7 * rows], vec![0.0; 7 * rows]);
            plain.matmul(&x, &mut a, &threads).unwrap();
            interleaved.matmul(&x, &mut b, &threads).unwrap();
            for (i, (p, q)) in a.iter().zip(&b).enumerate() {
                if kernel.quantizes_activations() {
                    assert!((p - q).abs() <= 1e-4 * (1.0 + p.abs()), "{format} {kernel:?} y[{i}]: {p} vs {q}");
                } else {
                    assert_eq!(p.to_bits(), q.to_bits(), "{format} {kernel:?} y[{i}]: {p} vs {q}");
                }
            }
        }
    }
    // Formats without an interleaved kernel keep their layout.
    let bytes = random_weights(WeightFormat::Q6_K, 8, 256, &mut rng);
    let mut k_quant = Matrix::from_bytes(WeightFormat::Q6_K, 8, 256, &bytes).unwrap();
    assert!(!k_quant.interleave_rows() && !k_quant.is_interleaved());
}

#[test]
fn the_avx512_kernel_equals_the_avx2_kernel_bit_for_bit() {
    // The same computation with other instructions (vpdpbusd on sixteen rows): identical outputs
    // in both layouts, alone or batched, on one thread or three, whole or gathered, with an odd
    // number of groups (a lone last group) and chunks that start on either group of a pair.
    if !Kernel::Avx512Q8.is_supported() {
        return; // no AVX-512 VNNI on this CPU: nothing to compare
    }
    let mut rng = StdRng::seed_from_u64(19);
    let single = Threads::new(1).unwrap();
    let three = Threads::new(3).unwrap();
    for format in [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4_1] {
        let (rows, cols) = (203, 160);
        let bytes = random_weights(format, rows, cols, &mut rng);
        let x: Vec<f32> = (0..9 * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let select: Vec<u32> = (0..rows as u32).rev().step_by(3).collect();
        for (layout, mut matrix) in layouts(format, rows, cols, &bytes) {
            for (m, threads) in [(1, &single), (2, &three), (6, &single), (8, &three), (9, &three)] {
                let mut outputs = Vec::new();
                for kernel in [Kernel::Avx2Q8, Kernel::Avx512Q8] {
                    matrix.set_kernel(kernel).unwrap();
                    let mut y = vec![0.0; m * rows];
                    matrix.matmul(&x[..m * cols], &mut y, threads).unwrap();
                    let mut g = vec![0.0; m * select.len()];
                    matrix.matmul_rows(&x[..m * cols], &select, &mut g, threads).unwrap();
                    outputs.push((y, g));
                }
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&outputs[0].0), bits(&outputs[1].0), "{format} {layout} m={m}");
                assert_eq!(bits(&outputs[0].1), bits(&outputs[1].1), "{format} {layout} m={m} gathered");
            }
        }
    }
}

#[test]
fn shared_bytes_read_in_place_equal_copied_bytes() {
    use std::sync::Arc;
    let mut rng = StdRng::seed_from_u64(13);
    let threads = Threads::new(2).unwrap();
    for format in WeightFormat::ALL {
        let (rows, cols) = (37, format.block_len().max(32) * 2);
        let bytes = random_weights(format, rows, cols, &mut rng);
        // The tensor sits at an offset inside a larger buffer, as in a GGUF file.
        let mut file = vec![0xAAu8; 100];
        file.extend_from_slice(&bytes);
        file.extend_from_slice(&[0x55; 7]);
        let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(file);
        let shared = Matrix::from_shared_bytes(format, rows, cols, Arc::clone(&owner), 100).unwrap();
        let copied = Matrix::from_bytes(format, rows, cols, &bytes).unwrap();
        assert_eq!(shared.to_f32(), copied.to_f32(), "{format}");
        assert_eq!(shared.memory_bytes(), copied.memory_bytes(), "{format}");
        let x: Vec<f32> = (0..3 * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let (mut a, mut b) = (vec![0.0; 3 * rows], vec![0.0; 3 * rows]);
        shared.matmul(&x, &mut a, &threads).unwrap();
        copied.matmul(&x, &mut b, &threads).unwrap();
        assert_eq!(a, b, "{format}");
        let mut row = vec![0.0; cols];
        shared.row_f32(rows - 1, &mut row).unwrap();
        assert_eq!(row, &copied.to_f32()[(rows - 1) * cols..], "{format}");
        if format.block_len() > 1 {
            assert_eq!(Arc::strong_count(&owner), 2, "{format}: the matrix keeps the owner");
        }
        // One byte short, and an offset past the end.
        let short = Matrix::from_shared_bytes(format, rows, cols, Arc::clone(&owner), 108).unwrap_err();
        assert!(matches!(short, anyspec_cpu_kernels::Error::Length { .. }), "{short}");
        assert!(Matrix::from_shared_bytes(format, rows, cols, Arc::clone(&owner), usize::MAX).is_err());
    }
}

#[test]
fn row_blocks_and_row_ranges_give_the_source_products_bit_for_bit() {
    // A shortlist made of whole blocks of a matrix copied block by block (a DynaSpec head
    // ordered by cluster) must score every token exactly as the whole head does: the drafter's
    // logits, and so its draft, may not depend on how the head was laid out.
    use anyspec_cpu_kernels::{BLOCK_ALIGN, RowBlocks};
    let mut rng = StdRng::seed_from_u64(23);
    let single = Threads::new(1).unwrap();
    let three = Threads::new(3).unwrap();
    for format in WeightFormat::ALL {
        let (rows, cols) = (203, format.block_len().max(32) * 3);
        let bytes = random_weights(format, rows, cols, &mut rng);
        let x: Vec<f32> = (0..9 * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        // A partition of the rows in shuffled order into blocks of 0, 1, a few and many rows.
        let mut shuffled: Vec<u32> = (0..rows as u32).collect();
        for i in (1..rows).rev() {
            shuffled.swap(i, rng.random_range(0..=i));
        }
        let sizes = [1usize, 0, 37, 5, 16, 17, 90];
        let mut blocks = Vec::new();
        let mut taken = 0;
        for &size in &sizes {
            blocks.push(shuffled[taken..taken + size].to_vec());
            taken += size;
        }
        blocks.push(shuffled[taken..].to_vec());
        let selected: Vec<u32> = vec![6, 2, 1, 7, 0, 3, 6, 5];
        for (layout, mut matrix) in layouts(format, rows, cols, &bytes) {
            for kernel in kernels() {
                matrix.set_kernel(kernel).unwrap();
                let ordered = RowBlocks::new(&matrix, blocks.clone()).unwrap();
                assert_eq!(ordered.len(), blocks.len());
                let padded: usize = blocks.iter().map(|b| b.len().next_multiple_of(BLOCK_ALIGN)).sum();
                assert!(ordered.memory_bytes() >= padded * matrix.memory_bytes() / rows / 2);
                let kept = ordered.selected_rows(&selected);
                for (m, threads) in [(1, &single), (1, &three), (3, &three), (8, &single), (9, &three)] {
                    let mut y = vec![0.0; m * rows];
                    matrix.matmul(&x[..m * cols], &mut y, threads).unwrap();
                    let mut b = vec![f32::NAN; m * kept.len()];
                    ordered.matmul_blocks(&x[..m * cols], &selected, &mut b, threads).unwrap();
                    for i in 0..m {
                        for (j, &r) in kept.iter().enumerate() {
                            assert!(
                                b[i * kept.len() + j].to_bits() == y[i * rows + r as usize].to_bits(),
                                "{format} {kernel:?} {layout} m={m}: block output {j} (row {r})"
                            );
                        }
                    }
                    // Ranges straight on the source, some not starting on a group.
                    let ranges = [40..41, 0..35, 190..203, 7..7, 3..100];
                    let n: usize = ranges.iter().map(|r| r.len()).sum();
                    let mut r = vec![f32::NAN; m * n];
                    matrix.matmul_ranges(&x[..m * cols], &ranges, &mut r, threads).unwrap();
                    let want: Vec<usize> = ranges.iter().flat_map(|r| r.clone()).collect();
                    for i in 0..m {
                        for (j, &row) in want.iter().enumerate() {
                            assert!(
                                r[i * n + j].to_bits() == y[i * rows + row].to_bits(),
                                "{format} {kernel:?} {layout} m={m}: range output {j} (row {row})"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn paired_products_are_the_products_combined_run_by_run() {
    // matmul_paired gives, bit for bit, matmul's outputs of each pair of runs put through
    // `combine`: for every layout, kernel, run length, number of activation rows (past the
    // kernels' eight) and thread count, with chunks that split the rows unevenly.
    let mut rng = StdRng::seed_from_u64(23);
    let single = Threads::new(1).unwrap();
    let three = Threads::new(3).unwrap();
    // Not SwiGLU on purpose: a combine that uses both halves and their positions, so a run
    // combined with the wrong partner, or landing in the wrong place, shows.
    let combine = |a: &mut [f32], b: &[f32]| {
        for (t, (p, q)) in a.iter_mut().zip(b).enumerate() {
            *p = *p * 3.0 - *q + t as f32;
        }
    };
    for format in [WeightFormat::F32, WeightFormat::Q8_0, WeightFormat::Q4_1] {
        for (run, pairs) in [(16, 7), (64, 5), (8, 3)] {
            let (rows, cols) = (2 * run * pairs, 64);
            let bytes = random_weights(format, rows, cols, &mut rng);
            let x: Vec<f32> = (0..10 * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            for (layout, mut matrix) in layouts(format, rows, cols, &bytes) {
                for kernel in kernels() {
                    matrix.set_kernel(kernel).unwrap();
                    for (m, threads) in [(1, &single), (1, &three), (4, &three), (10, &three), (3, &single)] {
                        let mut plain = vec![0.0; m * rows];
                        matrix.matmul(&x[..m * cols], &mut plain, threads).unwrap();
                        let mut want = vec![0.0; m * rows / 2];
                        for (products, out) in plain.chunks_exact_mut(rows).zip(want.chunks_exact_mut(rows / 2)) {
                            for (both, o) in products.chunks_exact_mut(2 * run).zip(out.chunks_exact_mut(run)) {
                                let (a, b) = both.split_at_mut(run);
                                combine(a, b);
                                o.copy_from_slice(a);
                            }
                        }
                        let mut got = vec![f32::NAN; m * rows / 2 + 3];
                        matrix.matmul_paired(&x[..m * cols], &mut got, run, threads, &combine).unwrap();
                        let what = format!("{format} {kernel:?} {layout} run={run} m={m} t={}", threads.count());
                        assert!(
                            got[..m * rows / 2].iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()),
                            "{what}"
                        );
                        assert!(got[m * rows / 2..].iter().all(|v| v.is_nan()), "{what}: wrote past m·rows/2");
                    }
                }
            }
        }
    }
}

#[test]
fn products_into_row_slices_are_the_products() {
    // matmul_into_rows writes each activation row's outputs into its own slice, bit for bit
    // what matmul writes into one buffer, and refuses a row count or slice that does not fit.
    let mut rng = StdRng::seed_from_u64(29);
    let three = Threads::new(3).unwrap();
    for format in [WeightFormat::F32, WeightFormat::Q8_0, WeightFormat::Q4_1] {
        let (rows, cols) = (301, 64);
        let bytes = random_weights(format, rows, cols, &mut rng);
        let x: Vec<f32> = (0..9 * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        for (layout, mut matrix) in layouts(format, rows, cols, &bytes) {
            for kernel in kernels() {
                matrix.set_kernel(kernel).unwrap();
                for m in [1, 4, 9] {
                    let mut flat = vec![0.0; m * rows];
                    matrix.matmul(&x[..m * cols], &mut flat, &three).unwrap();
                    let mut own: Vec<Vec<f32>> = (0..m).map(|i| vec![f32::NAN; rows + i]).collect();
                    let mut slices: Vec<&mut [f32]> = own.iter_mut().map(Vec::as_mut_slice).collect();
                    matrix.matmul_into_rows(&x[..m * cols], &mut slices, &three).unwrap();
                    for (i, row) in own.iter().enumerate() {
                        let want = &flat[i * rows..(i + 1) * rows];
                        let what = format!("{format} {kernel:?} {layout} m={m} row {i}");
                        assert!(row[..rows].iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()), "{what}");
                        assert!(row[rows..].iter().all(|v| v.is_nan()), "{what}: wrote past the row");
                    }
                }
            }
        }
        let matrix = Matrix::from_bytes(format, rows, cols, &bytes).unwrap();
        let mut short = [vec![0.0; rows], vec![0.0; rows - 1]];
        let mut slices: Vec<&mut [f32]> = short.iter_mut().map(Vec::as_mut_slice).collect();
        let e = matrix.matmul_into_rows(&x[..2 * cols], &mut slices, &three).unwrap_err().to_string();
        assert!(e.contains('y') && e.contains("301") && e.contains("300"), "{e}");
        let e = matrix.matmul_into_rows(&x[..3 * cols], &mut slices, &three).unwrap_err().to_string();
        assert!(e.contains("output rows") && e.contains('3') && e.contains('2'), "{e}");
    }
}
