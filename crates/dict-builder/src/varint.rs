//! LEB128 variable-length integers, the compact integer encoding of count shards and of the
//! dictionary's continuation blob.

/// Appends `value` as LEB128 (7 bits per byte, high bit = more bytes follow).
pub(crate) fn write(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads a LEB128 value at `*pos`, advancing `pos`; `None` when the bytes end early or the value
/// overflows 64 bits (a corrupt file, never a panic).
#[inline]
pub(crate) fn read(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value: u64 = 0;
    let mut shift = 0u32;
    loop {
        let byte = *bytes.get(*pos)?;
        *pos += 1;
        if shift >= 64 || (shift == 63 && byte > 1) {
            return None;
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_truncation() {
        let values = [0u64, 1, 127, 128, 300, 1 << 21, u64::from(u32::MAX), u64::MAX];
        let mut bytes = Vec::new();
        for &v in &values {
            write(&mut bytes, v);
        }
        let mut pos = 0;
        for &v in &values {
            assert_eq!(read(&bytes, &mut pos), Some(v));
        }
        assert_eq!(pos, bytes.len());
        assert_eq!(read(&[0x80, 0x80], &mut 0), None);
        assert_eq!(read(&[0xff; 11], &mut 0), None);
    }
}
