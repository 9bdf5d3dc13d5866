//! Byte mutations of valid inputs, AFL's "havoc" stage on stable Rust: bit flips, interesting
//! bytes and integers (little-endian u32/u64 fields set to boundary values), arithmetic,
//! truncation, extension, chunk duplication, deletion and copying, splicing with another seed,
//! and, for the text formats, decimal numbers replaced by boundary values and JSON punctuation
//! inserted.
//!
//! Inputs are a pure function of (seed, target, iteration), so that the supervising process can
//! rebuild the input a crashed worker was running from the iteration number alone.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Bytes worth setting: the extremes and the sign boundary of a byte.
const INTERESTING_BYTES: [u8; 8] = [0x00, 0xFF, 0x7F, 0x80, 0x01, 0x20, 0x10, 0x40];

/// Boundary values of 32-bit fields.
const INTERESTING_U32: [u32; 12] =
    [0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF];

/// Boundary values of 64-bit fields.
const INTERESTING_U64: [u64; 10] = [
    0,
    1,
    0x7FFF_FFFF,
    0xFFFF_FFFF,
    0x1_0000_0000,
    0x7FFF_FFFF_FFFF_FFFF,
    0x8000_0000_0000_0000,
    0xFFFF_FFFF_FFFF_FFFF,
    1 << 40,
    (1 << 62) + 1,
];

/// Decimal numbers that sit on type boundaries, for the text formats (JSON).
const INTERESTING_NUMBERS: [&str; 14] = [
    "0",
    "1",
    "-1",
    "2",
    "255",
    "65536",
    "2147483647",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "1e308",
    "-0.0",
    "0.5",
];

/// Pieces of JSON syntax worth inserting.
const JSON_TOKENS: [&[u8]; 12] =
    [b"{", b"}", b"[", b"]", b"\"", b",", b":", b"null", b"-", b"\\u0000", b"\xff", b"[[[[[[[["];

/// The mutation kinds, as drawn.
const KINDS: usize = 14;

/// The generator for one iteration: a mix of the run's seed, the target and the iteration.
pub(crate) fn rng_for(seed: u64, target: &str, iteration: u64) -> StdRng {
    let name = target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x1000_0000_01b3));
    StdRng::seed_from_u64(splitmix(splitmix(seed ^ name).wrapping_add(iteration)))
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A mutant of one of `seeds`: one seed, then 1, 2, 4, 8 or 16 stacked mutations. Never longer
/// than `max_len` bytes (nor than twice the longest seed plus 4 KiB).
pub(crate) fn mutant(rng: &mut StdRng, seeds: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let mut data = seeds[rng.random_range(0..seeds.len())].clone();
    let longest = seeds.iter().map(Vec::len).max().unwrap_or(0);
    let max_len = max_len.min(longest * 2 + 4096);
    let stack = 1usize << rng.random_range(0..5);
    for _ in 0..stack {
        mutate_once(rng, &mut data, seeds, max_len);
    }
    data.truncate(max_len);
    data
}

/// Applies one randomly drawn mutation.
fn mutate_once(rng: &mut StdRng, data: &mut Vec<u8>, seeds: &[Vec<u8>], max_len: usize) {
    // An empty input can only grow.
    if data.is_empty() {
        extend(rng, data);
        return;
    }
    let len = data.len();
    match rng.random_range(0..KINDS) {
        0 => {
            let at = rng.random_range(0..len);
            data[at] ^= 1 << rng.random_range(0..8);
        }
        1 => {
            let at = rng.random_range(0..len);
            data[at] = INTERESTING_BYTES[rng.random_range(0..INTERESTING_BYTES.len())];
        }
        2 => {
            let at = rng.random_range(0..len);
            data[at] = rng.random();
        }
        3 => {
            // Truncation: mostly near the end, sometimes anywhere.
            let keep =
                if rng.random_bool(0.5) { len - rng.random_range(1..=len.min(16)) } else { rng.random_range(0..len) };
            data.truncate(keep);
        }
        4 => {
            if len < max_len {
                extend(rng, data);
            }
        }
        5 => {
            // Duplicate a chunk in place (repeated records, repeated keys).
            let (start, end) = chunk(rng, len);
            if len + (end - start) <= max_len {
                let piece = data[start..end].to_vec();
                let at = rng.random_range(0..=len);
                data.splice(at..at, piece);
            }
        }
        6 => {
            let (start, end) = chunk(rng, len);
            data.drain(start..end);
        }
        7 => {
            // Splice: this input's head, another seed's tail.
            let other = &seeds[rng.random_range(0..seeds.len())];
            if !other.is_empty() {
                let cut = rng.random_range(0..=len);
                let from = rng.random_range(0..other.len());
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
        }
        8 => {
            if len >= 4 {
                let at = field_position(rng, len, 4);
                let value = if rng.random_bool(0.8) {
                    INTERESTING_U32[rng.random_range(0..INTERESTING_U32.len())]
                } else {
                    u32::try_from(len).unwrap_or(u32::MAX).wrapping_add(rng.random_range(0..3)).wrapping_sub(1)
                };
                data[at..at + 4].copy_from_slice(&value.to_le_bytes());
            }
        }
        9 => {
            if len >= 8 {
                let at = field_position(rng, len, 8);
                let value = if rng.random_bool(0.8) {
                    INTERESTING_U64[rng.random_range(0..INTERESTING_U64.len())]
                } else {
                    (len as u64).wrapping_add(rng.random_range(0..3)).wrapping_sub(1)
                };
                data[at..at + 8].copy_from_slice(&value.to_le_bytes());
            }
        }
        10 => {
            // Arithmetic on a little-endian u32 (lengths and counts off by a few).
            if len >= 4 {
                let at = field_position(rng, len, 4);
                let old = u32::from_le_bytes(data[at..at + 4].try_into().unwrap_or([0; 4]));
                let delta = rng.random_range(1..=35u32);
                let new = if rng.random_bool(0.5) { old.wrapping_add(delta) } else { old.wrapping_sub(delta) };
                data[at..at + 4].copy_from_slice(&new.to_le_bytes());
            }
        }
        11 => replace_number(rng, data),
        12 => {
            let token = JSON_TOKENS[rng.random_range(0..JSON_TOKENS.len())];
            if len + token.len() <= max_len {
                let at = rng.random_range(0..=len);
                data.splice(at..at, token.iter().copied());
            }
        }
        _ => {
            // Copy a chunk over another place of the same input.
            let (start, end) = chunk(rng, len);
            let piece = data[start..end].to_vec();
            let at = rng.random_range(0..=len - piece.len());
            data[at..at + piece.len()].copy_from_slice(&piece);
        }
    }
}

/// A random chunk `[start, end)` of a non-empty input: mostly short.
fn chunk(rng: &mut StdRng, len: usize) -> (usize, usize) {
    let max = if rng.random_bool(0.8) { len.min(32) } else { len };
    let size = rng.random_range(1..=max);
    let start = rng.random_range(0..=len - size);
    (start, start + size)
}

/// Where to write an integer of `width` bytes: aligned to its width half the time (header
/// fields are), anywhere otherwise.
fn field_position(rng: &mut StdRng, len: usize, width: usize) -> usize {
    let at = rng.random_range(0..=len - width);
    if rng.random_bool(0.5) { at - at % width } else { at }
}

/// Appends random bytes, or a run of one byte.
fn extend(rng: &mut StdRng, data: &mut Vec<u8>) {
    let n = rng.random_range(1..=64);
    if rng.random_bool(0.5) {
        data.extend((0..n).map(|_| rng.random::<u8>()));
    } else {
        let byte = INTERESTING_BYTES[rng.random_range(0..INTERESTING_BYTES.len())];
        data.extend(std::iter::repeat_n(byte, n));
    }
}

/// Replaces one run of ASCII digits (with its sign) by a boundary number.
fn replace_number(rng: &mut StdRng, data: &mut Vec<u8>) {
    // Sample a few positions rather than scanning the whole input for every mutation.
    for _ in 0..8 {
        let at = rng.random_range(0..data.len());
        if !data[at].is_ascii_digit() {
            continue;
        }
        let mut start = at;
        while start > 0 && (data[start - 1].is_ascii_digit() || data[start - 1] == b'-') {
            start -= 1;
        }
        let mut end = at;
        while end < data.len() && (data[end].is_ascii_digit() || matches!(data[end], b'.' | b'e' | b'E')) {
            end += 1;
        }
        let number = INTERESTING_NUMBERS[rng.random_range(0..INTERESTING_NUMBERS.len())];
        data.splice(start..end, number.bytes());
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeds() -> Vec<Vec<u8>> {
        vec![
            b"{\"vocab_size\": 49152, \"hidden_size\": 576}".to_vec(),
            (0u8..=255).cycle().take(600).collect(),
            Vec::new(),
        ]
    }

    #[test]
    fn the_same_seed_and_iteration_give_the_same_input() {
        let seeds = seeds();
        for iteration in 0..200 {
            let a = mutant(&mut rng_for(7, "dictionary", iteration), &seeds, 1 << 20);
            let b = mutant(&mut rng_for(7, "dictionary", iteration), &seeds, 1 << 20);
            assert_eq!(a, b, "iteration {iteration}");
        }
        // Another seed, target or iteration draws another input (almost always: count them).
        let differ = |f: &dyn Fn(u64) -> StdRng| {
            (0..100)
                .filter(|&i| {
                    mutant(&mut rng_for(7, "dictionary", i), &seeds, 1 << 20) != mutant(&mut f(i), &seeds, 1 << 20)
                })
                .count()
        };
        assert!(differ(&|i| rng_for(8, "dictionary", i)) > 90);
        assert!(differ(&|i| rng_for(7, "gguf", i)) > 90);
        assert!(differ(&|i| rng_for(7, "dictionary", i + 1000)) > 90);
    }

    #[test]
    fn mutants_differ_from_their_seeds_and_stay_under_the_cap() {
        let seeds = seeds();
        let mut same = 0;
        let mut lengths = std::collections::BTreeSet::new();
        for iteration in 0..2000 {
            let input = mutant(&mut rng_for(1, "t", iteration), &seeds, 700);
            assert!(input.len() <= 700, "{} bytes", input.len());
            if seeds.contains(&input) {
                same += 1;
            }
            lengths.insert(input.len());
        }
        // A stack of mutations can cancel out (a bit flipped twice), rarely.
        assert!(same < 100, "{same} of 2000 mutants equal a seed");
        // Truncation, extension, insertion and deletion all change lengths.
        assert!(lengths.len() > 100, "only {} distinct lengths", lengths.len());
    }

    #[test]
    fn every_mutation_kind_applies_to_tiny_inputs_without_panicking() {
        let seeds = vec![vec![7u8]];
        let mut rng = rng_for(3, "tiny", 0);
        for _ in 0..20_000 {
            let mut data = vec![rng.random::<u8>(); rng.random_range(0..3)];
            mutate_once(&mut rng, &mut data, &seeds, 16);
        }
    }

    #[test]
    fn numbers_are_replaced_by_boundary_values() {
        let seeds = [b"{\"n\": 1234}".to_vec()];
        let mut seen = std::collections::BTreeSet::new();
        for iteration in 0..300 {
            let mut rng = rng_for(5, "numbers", iteration);
            let mut data = seeds[0].clone();
            replace_number(&mut rng, &mut data);
            seen.insert(String::from_utf8(data).unwrap());
        }
        assert!(seen.contains("{\"n\": 18446744073709551615}"), "{seen:?}");
        assert!(seen.contains("{\"n\": -1}"), "{seen:?}");
        assert!(seen.iter().all(|s| s.starts_with("{\"n\": ") && s.ends_with('}')), "{seen:?}");
    }
}
