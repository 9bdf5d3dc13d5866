//! `dequantize` against hand-built blocks, and quantize → dequantize round trips.

use anyspec_cpu_kernels::{WeightFormat, dequantize, quantize};
use half::f16;
use proptest::prelude::*;

fn h(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

fn deq(format: WeightFormat, bytes: &[u8], n: usize) -> Vec<f32> {
    let mut out = vec![f32::NAN; n];
    dequantize(format, bytes, &mut out).unwrap();
    out
}

#[test]
fn names_and_sizes_are_ggml_s() {
    let table = [
        (WeightFormat::F32, "f32", 1, 4),
        (WeightFormat::F16, "f16", 1, 2),
        (WeightFormat::BF16, "bf16", 1, 2),
        (WeightFormat::Q8_0, "q8_0", 32, 34),
        (WeightFormat::Q4_0, "q4_0", 32, 18),
        (WeightFormat::Q4_1, "q4_1", 32, 20),
        (WeightFormat::Q4_K, "q4_K", 256, 144),
        (WeightFormat::Q6_K, "q6_K", 256, 210),
    ];
    for (format, name, len, bytes) in table {
        assert_eq!(format.name(), name);
        assert_eq!(format.block_len(), len, "{name}");
        assert_eq!(format.block_bytes(), bytes, "{name}");
        assert_eq!(format.row_bytes(len * 3).unwrap(), bytes * 3, "{name}");
    }
    assert!(WeightFormat::Q4_1.row_bytes(48).is_err());
    assert!(WeightFormat::Q6_K.row_bytes(512 + 32).is_err());
}

#[test]
fn float_formats() {
    let bytes: Vec<u8> = [1.5f32, -2.25].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(deq(WeightFormat::F32, &bytes, 2), [1.5, -2.25]);
    // f16 0x3E00 = 1.5, 0xC000 = -2; bf16 0x3FC0 = 1.5, 0xC010 = -2.25.
    assert_eq!(deq(WeightFormat::F16, &[0x00, 0x3E, 0x00, 0xC0], 2), [1.5, -2.0]);
    assert_eq!(deq(WeightFormat::BF16, &[0xC0, 0x3F, 0x10, 0xC0], 2), [1.5, -2.25]);
}

#[test]
fn q8_0_block() {
    let mut block = vec![0x00, 0x38]; // d = 0.5
    block.extend((0..32).map(|i| (i as i8 * 4 - 64) as u8));
    let expected: Vec<f32> = (0..32).map(|i| (i * 4 - 64) as f32 * 0.5).collect();
    assert_eq!(deq(WeightFormat::Q8_0, &block, 32), expected);
}

#[test]
fn q4_0_block_nibble_order() {
    let mut block = vec![0x00, 0x40]; // d = 2
    // Low nibble of byte j is element j, high nibble element j + 16.
    block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let mut expected = vec![0.0; 32];
    for j in 0..16 {
        expected[j] = (j as f32 - 8.0) * 2.0;
        expected[j + 16] = (15.0 - j as f32 - 8.0) * 2.0;
    }
    assert_eq!(deq(WeightFormat::Q4_0, &block, 32), expected);
}

#[test]
fn q4_1_block_nibble_order() {
    let mut block = vec![0x00, 0x3C, 0x00, 0xB8]; // d = 1, m = -0.5
    block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let mut expected = vec![0.0; 32];
    for j in 0..16 {
        expected[j] = j as f32 - 0.5;
        expected[j + 16] = (15 - j) as f32 - 0.5;
    }
    assert_eq!(deq(WeightFormat::Q4_1, &block, 32), expected);
}

/// Packs eight 6-bit (scale, min) pairs the way ggml's `get_scale_min_k4` unpacks them.
fn pack_k4_scales(sc: [u8; 8], mn: [u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..4 {
        q[j] = sc[j] & 63 | ((sc[j + 4] >> 4) << 6);
        q[j + 4] = mn[j] & 63 | ((mn[j + 4] >> 4) << 6);
        q[j + 8] = (sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4);
    }
    q
}

#[test]
fn q4_k_block_scale_packing() {
    // Scales and mins above 15 in the upper four sub-blocks exercise the split high bits.
    let sc = [1, 2, 3, 63, 17, 33, 50, 9];
    let mn = [0, 5, 63, 7, 40, 1, 22, 63];
    // A hand-checked packing of the first bytes: sc[0] = 1 plus sc[4] >> 4 = 1 in bits 6..8.
    let packed = pack_k4_scales(sc, mn);
    assert_eq!(packed[0], 1 | (1 << 6));
    assert_eq!(packed[8], (17 & 15) | ((40 & 15) << 4));
    let (d, dmin) = (0.5f32, 0.25f32);
    let mut block = Vec::new();
    block.extend(h(d));
    block.extend(h(dmin));
    block.extend(packed);
    // Element e: chunk c = e / 64 uses qs[32c..32c+32], low nibbles for sub-block 2c, high for
    // 2c + 1. Give element e the nibble (e * 7) % 16.
    let nib = |e: usize| ((e * 7) % 16) as u8;
    let mut qs = [0u8; 128];
    for c in 0..4 {
        for l in 0..32 {
            qs[32 * c + l] = nib(64 * c + l) | (nib(64 * c + 32 + l) << 4);
        }
    }
    block.extend(qs);
    assert_eq!(block.len(), 144);
    let expected: Vec<f32> = (0..256)
        .map(|e| {
            let s = e / 32;
            d * f32::from(sc[s]) * f32::from(nib(e)) - dmin * f32::from(mn[s])
        })
        .collect();
    assert_eq!(deq(WeightFormat::Q4_K, &block, 256), expected);
}

#[test]
fn q6_k_block_bit_packing() {
    let d = 0.125f32;
    let scales: [i8; 16] = [1, -2, 3, -4, 5, -6, 7, -8, 127, -128, 11, 12, -13, 14, 15, -16];
    let q = |e: usize| ((e * 13 + 5) % 64) as u8; // 6-bit values, offset by 32 when used
    let mut ql = [0u8; 128];
    let mut qh = [0u8; 64];
    for e in 0..256 {
        let (half, r) = (e / 128, e % 128);
        let (t, l) = (r / 32, r % 32);
        let lo = q(e) & 15;
        let byte = half * 64 + l + if t % 2 == 1 { 32 } else { 0 };
        ql[byte] |= if t < 2 { lo } else { lo << 4 };
        qh[half * 32 + l] |= (q(e) >> 4) << (2 * t);
    }
    let mut block = Vec::new();
    block.extend(ql);
    block.extend(qh);
    block.extend(scales.map(|s| s as u8));
    block.extend(h(d));
    assert_eq!(block.len(), 210);
    // Element e is in sub-block e / 16 (sixteen of sixteen).
    let expected: Vec<f32> = (0..256).map(|e| d * f32::from(scales[e / 16]) * (f32::from(q(e)) - 32.0)).collect();
    assert_eq!(deq(WeightFormat::Q6_K, &block, 256), expected);
}

#[test]
fn quantize_matches_hand_computed_q8_0() {
    let mut x = vec![0.0f32; 32];
    x[0] = 12.7;
    x[1] = -6.35;
    x[2] = 0.049;
    let b = quantize(WeightFormat::Q8_0, &x).unwrap();
    assert_eq!(&b[..2], &h(0.1));
    assert_eq!(b[2] as i8, 127);
    assert_eq!(b[3] as i8, -64); // -63.5 rounds away from zero
    assert_eq!(b[4] as i8, 0);
}

#[test]
fn quantize_refuses_k_quants() {
    assert!(quantize(WeightFormat::Q4_K, &[0.0; 256]).is_err());
    assert!(quantize(WeightFormat::Q6_K, &[0.0; 256]).is_err());
}

#[test]
fn quantize_all_zero_blocks() {
    for format in [WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q4_1] {
        let b = quantize(format, &[0.0; 64]).unwrap();
        assert_eq!(deq(format, &b, 64), vec![0.0; 64], "{format}");
    }
}

proptest! {
    #[test]
    fn round_trips_within_ggml_bounds(x in prop::collection::vec(-8.0f32..8.0, 32..=32), scale in 0.01f32..100.0) {
        let x: Vec<f32> = x.iter().map(|v| v * scale).collect();
        let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let min = x.iter().copied().fold(f32::MAX, f32::min);
        let max = x.iter().copied().fold(f32::MIN, f32::max);
        for (format, bound) in [
            // Half a step, plus the f16 rounding of the scale over up to 127 steps.
            (WeightFormat::Q8_0, amax / 127.0 * (0.5 + 127.0 / 1024.0)),
            // The value of largest magnitude may be clamped a whole step (8 → 7 steps).
            (WeightFormat::Q4_0, amax / 8.0 * (1.0 + 8.0 / 1024.0)),
            // Half a step plus the f16 roundings of the step and of the minimum.
            (WeightFormat::Q4_1, (max - min) / 15.0 * (0.5 + 15.0 / 1024.0) + min.abs() / 1024.0),
            (WeightFormat::F16, amax / 1024.0),
            (WeightFormat::BF16, amax / 128.0),
            (WeightFormat::F32, 0.0),
        ] {
            let b = quantize(format, &x).unwrap();
            prop_assert_eq!(b.len(), format.row_bytes(32).unwrap());
            let y = deq(format, &b, 32);
            for (a, b) in x.iter().zip(&y) {
                prop_assert!((a - b).abs() <= bound * 1.0001, "{}: {} -> {} (bound {})", format, a, b, bound);
            }
        }
    }
}
