//! Building from the committed corpus: hand-checked entries, sharded counting, determinism.

use anyspec_core::NoProgress;
use anyspec_dict_builder::{BuildParams, CorpusOptions, Dictionary, NgramCounts, build_dictionary, write_dictionary};

use crate::common::{data, ids, temp_dir, vocabulary};

fn count(paths: &[std::path::PathBuf], max_order: usize) -> NgramCounts {
    NgramCounts::count_files(paths, &CorpusOptions::default(), max_order, 2, &NoProgress).unwrap()
}

#[test]
fn hand_checked_entries() {
    let vocabulary = vocabulary();
    let counts = count(&[data("corpus.txt")], 3);
    // Counts read off the corpus by eye.
    assert_eq!(counts.get(2, " гарне місто"), 3);
    assert_eq!(counts.get(2, "Thank you"), 2);
    assert_eq!(counts.get(3, "Thank you for"), 2);
    assert_eq!(counts.get(1, "Добрий"), 2);

    // p_min 0.1 (below the paper's grid) keeps every entry checked below.
    let loose = BuildParams { min_prob: 0.1, ..BuildParams::default() };
    let bytes = build_dictionary(&counts, &vocabulary, &loose, 2, &NoProgress).unwrap();
    let dir = temp_dir("hand");
    let path = dir.join("fixture.dict");
    write_dictionary(&path, &bytes).unwrap();
    let dictionary = Dictionary::open(&path, &vocabulary.fingerprint()).unwrap();
    assert_eq!(dictionary.size_bytes(), bytes.len());

    // "Добрий" (line start, one token) is always followed by " день": probability 2/2.
    assert_eq!(dictionary.get(&ids(&vocabulary, "Добрий")), Some(ids(&vocabulary, " день")));
    // " гарне" → " місто" (3 times as a bigram) beats " місто на" (2 times as a trigram).
    assert_eq!(dictionary.get(&ids(&vocabulary, " гарне")), Some(ids(&vocabulary, " місто")));
    // "Thank" → " you" (bigram, 2) ties " you for" (trigram, 2); ties go to the smaller sequence.
    assert_eq!(dictionary.get(&ids(&vocabulary, "Thank")), Some(ids(&vocabulary, " you")));
    // "Thank you" → " for", seen only in the trigram.
    assert_eq!(dictionary.get(&ids(&vocabulary, "Thank you")), Some(ids(&vocabulary, " for")));
    // Words that are never followed by anything frequent have no entry.
    assert_eq!(dictionary.get(&ids(&vocabulary, " Харків")), None);

    // min_prob 0.55 drops "Thank" (2/4) but keeps " гарне" (3/5).
    let strict = BuildParams { min_prob: 0.55, ..BuildParams::default() };
    let bytes = build_dictionary(&counts, &vocabulary, &strict, 2, &NoProgress).unwrap();
    let strict = Dictionary::from_bytes(bytes, &path, &vocabulary.fingerprint()).unwrap();
    assert_eq!(strict.get(&ids(&vocabulary, "Thank")), None);
    assert_eq!(strict.get(&ids(&vocabulary, " гарне")), Some(ids(&vocabulary, " місто")));
    // The default, the paper's p_min 0.8, drops " гарне" (3/5) too and keeps "Добрий" (2/2).
    let bytes = build_dictionary(&counts, &vocabulary, &BuildParams::default(), 2, &NoProgress).unwrap();
    let deployed = Dictionary::from_bytes(bytes, &path, &vocabulary.fingerprint()).unwrap();
    assert_eq!(deployed.get(&ids(&vocabulary, " гарне")), None);
    assert_eq!(deployed.get(&ids(&vocabulary, "Добрий")), Some(ids(&vocabulary, " день")));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_defaults_are_the_papers_deployed_configuration() {
    // dictspec.txt §4.5.3 and §4.6: n123, 200k entries, p_min 0.8; §4.4: at most 8 tokens.
    let p = BuildParams::default();
    assert_eq!((p.orders.as_slice(), p.max_entries, p.min_prob), (&[1, 2, 3][..], 200_000, 0.8));
    assert_eq!((p.max_prefix, p.max_continuation), (8, 8));
}

#[test]
fn merged_shards_build_the_same_dictionary_as_one_count() {
    let vocabulary = vocabulary();
    let corpus = std::fs::read_to_string(data("corpus.txt")).unwrap();
    let lines: Vec<&str> = corpus.lines().collect();
    let dir = temp_dir("shards");
    let (a, b) = (dir.join("a.txt"), dir.join("b.txt"));
    std::fs::write(&a, lines[..17].join("\n") + "\n").unwrap();
    std::fs::write(&b, lines[17..].join("\n") + "\n").unwrap();

    let (shard_a, shard_b) = (dir.join("a.counts"), dir.join("b.counts"));
    count(std::slice::from_ref(&a), 3).write_shard(&shard_a).unwrap();
    count(std::slice::from_ref(&b), 3).write_shard(&shard_b).unwrap();
    let merged = NgramCounts::merge_shards(&[&shard_a, &shard_b]).unwrap();
    let whole = count(&[a.clone(), b.clone()], 3);
    assert_eq!(merged, whole);

    let params = BuildParams { max_entries: 50, ..BuildParams::default() };
    let from_merged = build_dictionary(&merged, &vocabulary, &params, 2, &NoProgress).unwrap();
    let from_whole = build_dictionary(&whole, &vocabulary, &params, 1, &NoProgress).unwrap();
    assert_eq!(from_merged, from_whole, "merge(count(a), count(b)) must build what count(a ∪ b) builds");
    let dictionary = Dictionary::from_bytes(from_whole, &a, &vocabulary.fingerprint()).unwrap();
    assert_eq!(dictionary.len(), 50);

    // Shards counted to different orders do not merge.
    let shard_c = dir.join("c.counts");
    count(std::slice::from_ref(&a), 2).write_shard(&shard_c).unwrap();
    let err = NgramCounts::merge_shards(&[&shard_a, &shard_c]).unwrap_err().to_string();
    assert!(err.contains("c.counts") && err.contains("orders up to 2"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn orders_above_the_counted_ones_are_refused() {
    let counts = count(&[data("corpus.txt")], 2);
    let params = BuildParams { orders: vec![1, 2, 3], ..BuildParams::default() };
    let err = build_dictionary(&counts, &vocabulary(), &params, 1, &NoProgress).unwrap_err().to_string();
    assert!(err.contains("orders") && err.contains("max-order"), "{err}");
}

#[test]
fn every_entry_respects_the_length_limits() {
    let vocabulary = vocabulary();
    let counts = count(&[data("corpus.txt")], 3);
    let params = BuildParams { max_prefix: 2, max_continuation: 1, min_count: 1, ..BuildParams::default() };
    let bytes = build_dictionary(&counts, &vocabulary, &params, 2, &NoProgress).unwrap();
    let dictionary = Dictionary::from_bytes(bytes, &data("x"), &vocabulary.fingerprint()).unwrap();
    assert!(!dictionary.is_empty());
    for (prefix, continuation) in dictionary.entries() {
        assert!((1..=2).contains(&prefix.len()) && continuation.len() == 1, "{prefix:?} → {continuation:?}");
    }
}
