//! Weight formats and their reference (scalar, ggml-identical) dequantizers and quantizers.
//!
//! The block layouts are ggml's (`ggml-common.h`), and the arithmetic follows
//! `dequantize_row_*` / `quantize_row_*_ref` in `ggml-quants.c` operation by operation, each
//! product and sum rounded to f32 in the same order, with no fused multiply-add. That is also
//! what gguf-py's numpy dequantizers (used by transformers to load a GGUF) compute, so the
//! weights dequantized here are bit-identical to theirs.

use half::{bf16, f16};

use crate::{Error, Result};

/// Storage formats of a weight matrix.
///
/// GGML block layouts exactly as ggml defines them (`ggml-common.h` / `ggml-quants.c`):
/// - `Q8_0` = `{f16 d; i8 qs[32]}` (34 bytes per 32 weights), value = `qs[i] * d`;
/// - `Q4_0` = `{f16 d; u8 qs[16]}`, value = `(nibble - 8) * d`; the low nibbles are elements
///   0..16, the high nibbles 16..32;
/// - `Q4_1` = `{f16 d; f16 m; u8 qs[16]}`, value = `nibble * d + m` (same nibble order);
/// - `Q4_K` = `{f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}` (144 bytes per 256 weights): eight
///   sub-blocks of 32 with 6-bit scales and mins;
/// - `Q6_K` = `{u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}` (210 bytes per 256 weights):
///   sixteen sub-blocks of 16 with 8-bit scales.
///
/// The float formats are little-endian, one value per "block".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[allow(non_camel_case_types)] // ggml's names
pub enum WeightFormat {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16 (the top half of an f32).
    BF16,
    /// ggml `Q8_0`: 32 signed bytes and one f16 scale.
    Q8_0,
    /// ggml `Q4_0`: 32 nibbles offset by 8 and one f16 scale.
    Q4_0,
    /// ggml `Q4_1`: 32 nibbles, one f16 scale and one f16 minimum.
    Q4_1,
    /// ggml `Q4_K`: super-blocks of 256 nibbles with 6-bit sub-block scales and mins.
    Q4_K,
    /// ggml `Q6_K`: super-blocks of 256 six-bit values with 8-bit sub-block scales.
    Q6_K,
}

/// Weights per `Q8_0`/`Q4_0`/`Q4_1` block (ggml's `QK8_0`, `QK4_0`, `QK4_1`).
pub(crate) const QK: usize = 32;
/// Weights per k-quant super-block (ggml's `QK_K`).
pub(crate) const QK_K: usize = 256;

impl WeightFormat {
    /// Every format, in declaration order.
    pub const ALL: [WeightFormat; 8] = [
        WeightFormat::F32,
        WeightFormat::F16,
        WeightFormat::BF16,
        WeightFormat::Q8_0,
        WeightFormat::Q4_0,
        WeightFormat::Q4_1,
        WeightFormat::Q4_K,
        WeightFormat::Q6_K,
    ];

    /// ggml's name of the format (`"f32"`, `"q4_1"`, `"q4_K"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "f32",
            WeightFormat::F16 => "f16",
            WeightFormat::BF16 => "bf16",
            WeightFormat::Q8_0 => "q8_0",
            WeightFormat::Q4_0 => "q4_0",
            WeightFormat::Q4_1 => "q4_1",
            WeightFormat::Q4_K => "q4_K",
            WeightFormat::Q6_K => "q6_K",
        }
    }

    /// Weights per block (1 for the float formats).
    pub fn block_len(self) -> usize {
        match self {
            WeightFormat::F32 | WeightFormat::F16 | WeightFormat::BF16 => 1,
            WeightFormat::Q8_0 | WeightFormat::Q4_0 | WeightFormat::Q4_1 => QK,
            WeightFormat::Q4_K | WeightFormat::Q6_K => QK_K,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            WeightFormat::F32 => 4,
            WeightFormat::F16 | WeightFormat::BF16 => 2,
            WeightFormat::Q8_0 => 2 + QK,
            WeightFormat::Q4_0 => 2 + QK / 2,
            WeightFormat::Q4_1 => 4 + QK / 2,
            WeightFormat::Q4_K => 4 + 12 + QK_K / 2,
            WeightFormat::Q6_K => QK_K / 2 + QK_K / 4 + QK_K / 16 + 2,
        }
    }

    /// Bytes of one row of `cols` weights; an error if `cols` is not a multiple of
    /// [`block_len`](Self::block_len).
    pub fn row_bytes(self, cols: usize) -> Result<usize> {
        let block = self.block_len();
        if !cols.is_multiple_of(block) {
            return Err(Error::NotMultiple { what: "cols", value: cols, multiple: block });
        }
        Ok(cols / block * self.block_bytes())
    }
}

impl std::fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[inline]
pub(crate) fn read_f16(bytes: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// Reference (scalar, exact, ggml-identical) dequantization of whole rows: `bytes` holds
/// `out.len() / block_len` blocks. This is the spec the fast paths are tested against.
pub fn dequantize(format: WeightFormat, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    let block = format.block_len();
    if !out.len().is_multiple_of(block) {
        return Err(Error::NotMultiple { what: "output length", value: out.len(), multiple: block });
    }
    let expected = out.len() / block * format.block_bytes();
    if bytes.len() != expected {
        return Err(Error::Length { what: "quantized bytes", expected, got: bytes.len() });
    }
    dequantize_unchecked(format, bytes, out);
    Ok(())
}

/// [`dequantize`] for lengths already checked by the caller.
pub(crate) fn dequantize_unchecked(format: WeightFormat, bytes: &[u8], out: &mut [f32]) {
    let bb = format.block_bytes();
    let bl = format.block_len();
    for (block, out) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(bl)) {
        dequantize_block(format, block, out);
    }
}

/// Dequantizes one block (`format.block_bytes()` bytes into `format.block_len()` values).
#[inline]
pub(crate) fn dequantize_block(format: WeightFormat, b: &[u8], y: &mut [f32]) {
    match format {
        WeightFormat::F32 => y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        WeightFormat::F16 => y[0] = read_f16(b, 0),
        WeightFormat::BF16 => y[0] = bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32(),
        WeightFormat::Q8_0 => {
            let d = read_f16(b, 0);
            for (y, &q) in y[..QK].iter_mut().zip(&b[2..2 + QK]) {
                *y = f32::from(q as i8) * d;
            }
        }
        WeightFormat::Q4_0 => {
            let d = read_f16(b, 0);
            let qs = &b[2..2 + QK / 2];
            for (j, &q) in qs.iter().enumerate() {
                y[j] = f32::from((q & 0x0F) as i8 - 8) * d;
                y[j + QK / 2] = f32::from((q >> 4) as i8 - 8) * d;
            }
        }
        WeightFormat::Q4_1 => {
            let d = read_f16(b, 0);
            let m = read_f16(b, 2);
            let qs = &b[4..4 + QK / 2];
            for (j, &q) in qs.iter().enumerate() {
                y[j] = f32::from(q & 0x0F) * d + m;
                y[j + QK / 2] = f32::from(q >> 4) * d + m;
            }
        }
        WeightFormat::Q4_K => dequantize_q4_k(b, y),
        WeightFormat::Q6_K => dequantize_q6_k(b, y),
    }
}

/// ggml's `get_scale_min_k4`: the `j`-th 6-bit scale and min of a `Q4_K` super-block.
#[inline]
pub(crate) fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

fn dequantize_q4_k(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 0);
    let min = read_f16(b, 2);
    let scales = &b[4..16];
    let qs = &b[16..16 + QK_K / 2];
    for chunk in 0..QK_K / 64 {
        let q = &qs[chunk * 32..chunk * 32 + 32];
        let (sc1, m1) = scale_min_k4(2 * chunk, scales);
        let (sc2, m2) = scale_min_k4(2 * chunk + 1, scales);
        let (d1, m1) = (d * f32::from(sc1), min * f32::from(m1));
        let (d2, m2) = (d * f32::from(sc2), min * f32::from(m2));
        let y = &mut y[chunk * 64..chunk * 64 + 64];
        for l in 0..32 {
            y[l] = d1 * f32::from(q[l] & 0x0F) - m1;
            y[l + 32] = d2 * f32::from(q[l] >> 4) - m2;
        }
    }
}

fn dequantize_q6_k(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, QK_K / 2 + QK_K / 4 + QK_K / 16);
    for half in 0..2 {
        let ql = &b[half * 64..half * 64 + 64];
        let qh = &b[QK_K / 2 + half * 32..QK_K / 2 + half * 32 + 32];
        let sc = &b[QK_K / 2 + QK_K / 4 + half * 8..QK_K / 2 + QK_K / 4 + half * 8 + 8];
        let y = &mut y[half * 128..half * 128 + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i8 - 32;
            let q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            let s = |i: usize| d * f32::from(sc[is + i] as i8);
            y[l] = s(0) * f32::from(q1);
            y[l + 32] = s(2) * f32::from(q2);
            y[l + 64] = s(4) * f32::from(q3);
            y[l + 96] = s(6) * f32::from(q4);
        }
    }
}

/// Reference quantizers for `Q8_0`, `Q4_0` and `Q4_1` (ggml's `quantize_row_*_ref`), so tests
/// and fixtures can build quantized models; the float formats are converted (round to
/// nearest even). An error for the k-quants, whose ggml quantizers search for scales and are
/// not reproduced here.
pub fn quantize(format: WeightFormat, values: &[f32]) -> Result<Vec<u8>> {
    let block = format.block_len();
    if !values.len().is_multiple_of(block) {
        return Err(Error::NotMultiple { what: "values length", value: values.len(), multiple: block });
    }
    let mut out = Vec::with_capacity(values.len() / block * format.block_bytes());
    match format {
        WeightFormat::F32 => values.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        WeightFormat::F16 => values.iter().for_each(|&v| out.extend_from_slice(&f16::from_f32(v).to_le_bytes())),
        WeightFormat::BF16 => values.iter().for_each(|&v| out.extend_from_slice(&bf16::from_f32(v).to_le_bytes())),
        WeightFormat::Q8_0 => values.chunks_exact(QK).for_each(|x| quantize_q8_0(x, &mut out)),
        WeightFormat::Q4_0 => values.chunks_exact(QK).for_each(|x| quantize_q4_0(x, &mut out)),
        WeightFormat::Q4_1 => values.chunks_exact(QK).for_each(|x| quantize_q4_1(x, &mut out)),
        WeightFormat::Q4_K | WeightFormat::Q6_K => {
            return Err(Error::Unsupported {
                format,
                operation: "quantize",
                supported: "f32, f16, bf16, q8_0, q4_0, q4_1",
            });
        }
    }
    Ok(out)
}

fn quantize_q8_0(x: &[f32], out: &mut Vec<u8>) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
    out.extend(x.iter().map(|v| (v * id).round() as i8 as u8));
}

fn quantize_q4_0(x: &[f32], out: &mut Vec<u8>) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
    let q = |v: f32| ((v * id + 8.5) as i8).min(15) as u8;
    out.extend((0..QK / 2).map(|j| q(x[j]) | (q(x[j + QK / 2]) << 4)));
}

fn quantize_q4_1(x: &[f32], out: &mut Vec<u8>) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    let d = (max - min) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
    out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
    let q = |v: f32| (((v - min) * id + 0.5) as i8).min(15) as u8;
    out.extend((0..QK / 2).map(|j| q(x[j]) | (q(x[j + QK / 2]) << 4)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_min_k4_unpacks_the_high_bits() {
        // Sub-block 5: scale = low nibble of q[9] | top two bits of q[1] << 4,
        // min = high nibble of q[9] | top two bits of q[5] << 4.
        let mut q = [0u8; 12];
        q[1] = 0b1100_0011;
        q[5] = 0b0100_0111;
        q[9] = 0xA5;
        assert_eq!(scale_min_k4(1, &q), (3, 7));
        assert_eq!(scale_min_k4(5, &q), (0x5 | (0b11 << 4), 0xA | (0b01 << 4)));
    }

    #[test]
    fn row_bytes_are_whole_blocks() {
        for format in WeightFormat::ALL {
            let n = format.block_len();
            assert_eq!(format.row_bytes(4 * n).unwrap(), 4 * format.block_bytes());
            if n > 1 {
                assert!(format.row_bytes(n + 1).is_err());
            }
        }
    }
}
