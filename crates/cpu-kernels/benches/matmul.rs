//! Matrix products at the shapes of SmolLM2-135M (hidden 576, intermediate 1536, 3 KV heads of
//! 64, vocabulary 49,152): Q4_1 and f32 layers and the Q8_0 LM head, for M = 1..=8 activation
//! rows and 1 or 2 threads; f16 layers in rows and in panels.
//!
//! Throughput is reported in bytes of weights read per call, so criterion prints GB/s; the
//! multiply-adds per call are `M · K · N`. Each case cycles through enough copies of its matrix
//! (at least 32 MiB in all, four times the L3 cache) that every call reads its weights from
//! memory, as in a decoding step of a real model; a single copy would stay in cache and
//! measure the cache instead. Run with
//! `cargo bench -p anyspec-cpu-kernels --bench matmul` (add a criterion filter such as
//! `q4_1/576x1536` to run a part); `cargo test --benches` runs each case once. The quantized
//! cases run in both layouts, rows one after the other and interleaved in groups of eight
//! (`.../interleaved`), one after the other in the same run; on a CPU with AVX-512 VNNI the
//! AVX2 kernel's interleaved case follows (`.../Avx2Q8/interleaved`).

use anyspec_cpu_kernels::{Kernel, Matrix, RowBlocks, Threads, WeightFormat, quantize};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::time::Duration;

/// `(K, N)`: input columns, output rows.
const LAYERS: [(usize, usize); 4] = [(576, 576), (576, 192), (576, 1536), (1536, 576)];
const HEAD: (usize, usize) = (576, 49_152);
/// Bytes of weights each case cycles through.
const WORKING_SET: usize = 32 << 20;

/// Random weights of `format`, built directly as blocks (quick even for the 28M-weight head).
fn weights(format: WeightFormat, k: usize, n: usize, rng: &mut StdRng) -> Matrix {
    if matches!(format, WeightFormat::F32 | WeightFormat::F16) {
        let values: Vec<f32> = (0..k * n).map(|_| rng.random_range(-0.1f32..0.1)).collect();
        return Matrix::from_bytes(format, n, k, &quantize(format, &values).unwrap()).unwrap();
    }
    let bb = format.block_bytes();
    let mut bytes = vec![0u8; n * format.row_bytes(k).unwrap()];
    rng.fill(&mut bytes[..]);
    for block in bytes.chunks_exact_mut(bb) {
        block[..2].copy_from_slice(&f16::from_f32(rng.random_range(0.001f32..0.01)).to_le_bytes());
        if format == WeightFormat::Q4_1 {
            block[2..4].copy_from_slice(&f16::from_f32(-0.05).to_le_bytes());
        }
    }
    // Check once that the generated blocks are what `quantize` would make of their shape.
    debug_assert_eq!(quantize(format, &vec![0.0; k]).unwrap().len(), k / format.block_len() * bb);
    Matrix::from_bytes(format, n, k, &bytes).unwrap()
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(800))
}

/// How a case stores its weights.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    Rows,
    Interleaved,
}

fn bench_shape(
    c: &mut Criterion,
    format: WeightFormat,
    (k, n): (usize, usize),
    pools: &[Threads],
    kernel: Kernel,
    layout: Layout,
) {
    let mut rng = StdRng::seed_from_u64(1);
    let first = weights(format, k, n, &mut rng);
    let copies = WORKING_SET.div_ceil(first.memory_bytes()).max(1);
    let mut matrices = vec![first];
    matrices.extend((1..copies).map(|_| weights(format, k, n, &mut rng)));
    for matrix in &mut matrices {
        matrix.set_kernel(kernel).unwrap();
        if layout == Layout::Interleaved {
            assert!(matrix.interleave_rows(), "{format} has no interleaved (or panel) layout");
        }
    }
    let x: Vec<f32> = (0..8 * k).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let mut y = vec![0.0f32; 8 * n];
    let mut suffix = if kernel == Kernel::best() { String::new() } else { format!("/{kernel:?}") };
    if layout == Layout::Interleaved {
        suffix.push_str("/interleaved");
    }
    let mut group = c.benchmark_group(format!("{}/{k}x{n}{suffix}", format.name()));
    group.throughput(Throughput::Bytes(matrices[0].memory_bytes() as u64));
    for pool in pools {
        for m in 1..=8 {
            let id = BenchmarkId::new(format!("t{}", pool.count()), m);
            let mut next = 0;
            group.bench_function(id, |b| {
                b.iter(|| {
                    next = (next + 1) % matrices.len();
                    matrices[next].matmul(black_box(&x[..m * k]), &mut y[..m * n], pool).unwrap();
                });
            });
        }
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    let pools = [Threads::new(1).unwrap(), Threads::new(2).unwrap()];
    // Each quantized case in both layouts, one after the other: the ratio of the two is the
    // interleaved layout's gain. Where the default kernel is the AVX-512 one, the AVX2 kernel
    // follows on the interleaved layout: the ratio is VNNI's gain.
    let interleaved_baseline = (Kernel::best() == Kernel::Avx512Q8).then_some(Kernel::Avx2Q8);
    let quantized = LAYERS.map(|shape| (WeightFormat::Q4_1, shape)).into_iter().chain([(WeightFormat::Q8_0, HEAD)]);
    for (format, shape) in quantized {
        for layout in [Layout::Rows, Layout::Interleaved] {
            bench_shape(c, format, shape, &pools, Kernel::best(), layout);
        }
        if let Some(kernel) = interleaved_baseline {
            bench_shape(c, format, shape, &pools, kernel, Layout::Interleaved);
        }
    }
    // f32 rows; f16 in rows (widened to f32 at load) and, where the kernel reads them, in
    // panels of sixteen rows at two bytes a weight: the ratio is the panel layout's gain.
    for shape in LAYERS {
        bench_shape(c, WeightFormat::F32, shape, &pools, Kernel::best(), Layout::Rows);
        bench_shape(c, WeightFormat::F16, shape, &pools, Kernel::best(), Layout::Rows);
        if Kernel::best().reads_panels() {
            bench_shape(c, WeightFormat::F16, shape, &pools, Kernel::best(), Layout::Interleaved);
        }
    }
    // The other kernels beside the default one, on one shape.
    for kernel in [Kernel::Avx2, Kernel::Scalar] {
        if kernel != Kernel::best() && kernel.is_supported() {
            bench_shape(c, WeightFormat::Q4_1, (576, 1536), &pools, kernel, Layout::Rows);
        }
    }
    // A pruned head: 8,192 rows gathered from the 49,152.
    let mut rng = StdRng::seed_from_u64(2);
    let head = weights(WeightFormat::Q8_0, HEAD.0, HEAD.1, &mut rng);
    let select: Vec<u32> = (0..8192).map(|_| rng.random_range(0..HEAD.1 as u32)).collect();
    let x: Vec<f32> = (0..8 * HEAD.0).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let mut y = vec![0.0f32; 8 * 8192.max(HEAD.1 / 4)];
    let mut group = c.benchmark_group("q8_0/576x49152/rows8192");
    for pool in &pools {
        for m in [1, 6] {
            group.bench_function(BenchmarkId::new(format!("t{}", pool.count()), m), |b| {
                b.iter(|| {
                    head.matmul_rows(black_box(&x[..m * HEAD.0]), &select, &mut y[..m * select.len()], pool).unwrap()
                });
            });
        }
    }
    group.finish();

    // A DynaSpec shortlist: 32 of 256 clusters of the interleaved head (1/8 of the rows, spread
    // over the vocabulary), as the whole head's product, a gathered product of the same rows
    // on the interleaved head, and the product of whole blocks of a copy ordered cluster by
    // cluster (RowBlocks). The last against the first is the shortlist's gain.
    let mut head = head;
    head.interleave_rows();
    let mut assignment: Vec<(u32, u32)> = (0..HEAD.1 as u32).map(|r| (rng.random_range(0..256u32), r)).collect();
    assignment.sort_unstable();
    let mut clusters = vec![Vec::new(); 256];
    for (c, r) in assignment {
        clusters[c as usize].push(r);
    }
    // Eight disjoint selections that cover the head, one per call in turn: a single one would
    // stay in the cache (an eighth of the head is 3.8 MB) and measure the cache instead.
    let selections: Vec<Vec<u32>> = (0..8u32).map(|s| (s..256).step_by(8).collect()).collect();
    let blocks = RowBlocks::new(&head, clusters).unwrap();
    let ids: Vec<Vec<u32>> = selections.iter().map(|s| blocks.selected_rows(s)).collect();
    let most = ids.iter().map(Vec::len).max().unwrap_or(0);
    let mut y = vec![0.0f32; 8 * most];
    let mut whole = vec![0.0f32; 8 * HEAD.1];
    let mut group = c.benchmark_group("q8_0/576x49152/interleaved/shortlist32of256");
    for pool in &pools {
        for m in [1, 6] {
            let x = &x[..m * HEAD.0];
            let t = pool.count();
            group.bench_function(BenchmarkId::new(format!("whole/t{t}"), m), |b| {
                b.iter(|| head.matmul(black_box(x), &mut whole[..m * HEAD.1], pool).unwrap());
            });
            let mut turn = 0;
            group.bench_function(BenchmarkId::new(format!("gathered/t{t}"), m), |b| {
                b.iter(|| {
                    turn = (turn + 1) % 8;
                    let ids = &ids[turn];
                    head.matmul_rows(black_box(x), ids, &mut y[..m * ids.len()], pool).unwrap()
                });
            });
            group.bench_function(BenchmarkId::new(format!("blocks/t{t}"), m), |b| {
                b.iter(|| {
                    turn = (turn + 1) % 8;
                    let out = &mut y[..m * ids[turn].len()];
                    blocks.matmul_blocks(black_box(x), &selections[turn], out, pool).unwrap()
                });
            });
        }
    }
    group.finish();
}

criterion_group! { name = matmul; config = config(); targets = benches }
criterion_main!(matmul);
