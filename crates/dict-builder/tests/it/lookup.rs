//! The longest-suffix rule.

use crate::common::crafted;

#[test]
fn the_longest_matching_suffix_wins() {
    let dictionary = crafted(&[(&[5], &[1]), (&[4, 5], &[2, 2]), (&[3, 4, 5], &[3, 3, 3]), (&[9, 9], &[4])]);
    let mut out = Vec::new();
    assert_eq!(dictionary.longest_suffix_match(&[8, 3, 4, 5], 8, &mut out), Some(3));
    assert_eq!(out, [3, 3, 3]);
    assert_eq!(dictionary.longest_suffix_match(&[8, 4, 5], 8, &mut out), Some(2));
    assert_eq!(out, [2, 2]);
    assert_eq!(dictionary.longest_suffix_match(&[7, 5], 8, &mut out), Some(1));
    assert_eq!(out, [1]);
    // A key that is not a suffix of the context does not match, even if it occurs earlier.
    assert_eq!(dictionary.longest_suffix_match(&[9, 9, 6], 8, &mut out), None);
    assert!(out.is_empty());
    // The draft is cut to the tokens asked for.
    assert_eq!(dictionary.longest_suffix_match(&[3, 4, 5], 2, &mut out), Some(3));
    assert_eq!(out, [3, 3]);
    assert_eq!(dictionary.longest_suffix_match(&[], 8, &mut out), None);
}

#[test]
fn only_the_last_eight_tokens_count_and_wide_ids_never_match() {
    let eight: Vec<u32> = (1..=8).collect();
    let dictionary = crafted(&[(&eight, &[42]), (&[8], &[7])]);
    let mut out = Vec::new();
    let mut context = vec![100, 200];
    context.extend(&eight);
    assert_eq!(dictionary.longest_suffix_match(&context, 8, &mut out), Some(8));
    assert_eq!(out, [42]);
    // Keys hold one byte per id here; 256 and 70 000 cannot be in any key, but the suffix after
    // them still matches.
    assert_eq!(dictionary.info().key_width, 1);
    assert_eq!(dictionary.longest_suffix_match(&[1, 70_000, 256, 8], 8, &mut out), Some(1));
    assert_eq!(out, [7]);
    assert_eq!(dictionary.longest_suffix_match(&[8, 256], 8, &mut out), None);
}

#[test]
fn identical_continuations_are_stored_once() {
    let shared: Vec<(Vec<u32>, Vec<u32>)> =
        (0..200u32).map(|i| (vec![i + 1000], vec![1, 2, 3, 4, 5, 6, 7, 8])).collect();
    let distinct: Vec<(Vec<u32>, Vec<u32>)> =
        (0..200u32).map(|i| (vec![i + 1000], vec![i + 1, i + 2, 3, 4, 5, 6, 7, 8])).collect();
    let as_refs = |v: &[(Vec<u32>, Vec<u32>)]| -> usize {
        let entries: Vec<(&[u32], &[u32])> = v.iter().map(|(p, c)| (p.as_slice(), c.as_slice())).collect();
        crafted(&entries).size_bytes()
    };
    assert!(as_refs(&shared) + 1000 < as_refs(&distinct));
}
