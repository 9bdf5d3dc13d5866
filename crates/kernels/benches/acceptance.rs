//! The acceptance step, γ = 4 over a 32k vocabulary, including the one packed readback:
//! - `reference/flex`: the plain-tensor body on the CPU (what flex always runs);
//! - with `--features wgpu`: `reference/wgpu` (a dozen tensor-op launches) against
//!   `fused/wgpu` (one CubeCL launch) on the default wgpu adapter. On a machine without a GPU
//!   that adapter is Mesa's lavapipe, which runs shaders on the CPU: its timings show launch
//!   and pass counts, not GPU speed.
//!
//! `cargo bench -p anyspec-kernels --features wgpu --bench acceptance`; compare fused with
//! reference on the same device.

use std::hint::black_box;

use anyspec_kernels::{AcceptanceInputs, Uniforms, acceptance_reference, read_acceptance};
use burn::tensor::{Device, Tensor, TensorData};
use criterion::{Criterion, criterion_group, criterion_main};

const GAMMA: usize = 4;
const VOCAB: usize = 32_000;

/// Deterministic, unequal distributions (a hash of the index, normalized per row).
fn rows(count: usize, salt: u64) -> Vec<f32> {
    let mut values = Vec::with_capacity(count * VOCAB);
    for r in 0..count {
        let raw: Vec<f32> = (0..VOCAB)
            .map(|i| {
                let h = (i as u64 ^ (r as u64) << 20 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                (h % 1000) as f32 + 1.0
            })
            .collect();
        let total: f32 = raw.iter().sum();
        values.extend(raw.iter().map(|w| w / total));
    }
    values
}

fn inputs(device: &Device) -> AcceptanceInputs {
    let p = Tensor::<2>::from_data(TensorData::new(rows(GAMMA + 1, 1), [GAMMA + 1, VOCAB]), device);
    let q = Tensor::<2>::from_data(TensorData::new(rows(GAMMA, 2), [GAMMA, VOCAB]), device);
    // Draft tokens the draft favours; uniforms that reject at position 2.
    let tokens = [17, 4_242, 9_001, 31_999];
    let uniforms = Uniforms { accept: vec![0.1, 0.2, 0.999, 0.3], residual: 0.6 };
    AcceptanceInputs::new(p, &tokens, Some(q), &uniforms).expect("consistent bench inputs")
}

fn acceptance_step(c: &mut Criterion) {
    let mut group = c.benchmark_group("acceptance_gamma4_vocab32k");
    let flex = inputs(&Device::flex());
    group.bench_function("reference/flex", |b| {
        b.iter(|| black_box(read_acceptance(acceptance_reference(flex.clone())).expect("readback")))
    });
    #[cfg(feature = "wgpu")]
    {
        let gpu = inputs(&Device::wgpu(burn::tensor::DeviceKind::DefaultDevice));
        group.bench_function("reference/wgpu", |b| {
            b.iter(|| black_box(read_acceptance(acceptance_reference(gpu.clone())).expect("readback")))
        });
        group.bench_function("fused/wgpu", |b| {
            b.iter(|| {
                let packed = anyspec_kernels::acceptance_fused(gpu.clone()).expect("a CubeCL device");
                black_box(read_acceptance(packed).expect("readback"))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, acceptance_step);
criterion_main!(benches);
