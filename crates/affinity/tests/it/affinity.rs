//! Affinity matrices: hand-checked counts, row-stochastic rows, round trips and refused files.

use anyspec_affinity::{Affinity, AffinityParams, CooccurrenceCounts, Error, build_affinity};
use anyspec_core::NoProgress;
use anyspec_core::projection::{rdk_dense_kernel_first_order, rdk_exact};
use anyspec_dict_builder::CorpusOptions;
use anyspec_vocab_map::Vocabulary;

use crate::{data, other_tokenizer, temp_dir};

fn target() -> Vocabulary {
    Vocabulary::from_file(&data("tokenizer.json")).unwrap()
}

fn params() -> AffinityParams {
    AffinityParams { window: 3, tau: 0.5, top_k: 8, min_count: 2, ..AffinityParams::default() }
}

fn build(vocab: &Vocabulary, threads: usize) -> Affinity {
    let p = params();
    let counts = CooccurrenceCounts::count_files(
        &[data("corpus.txt")],
        &CorpusOptions::default(),
        vocab,
        p.window,
        p.max_pairs,
        threads,
        &NoProgress,
    )
    .unwrap();
    build_affinity(&counts, vocab.fingerprint(), &p, "corpus.txt").unwrap()
}

#[test]
fn counts_on_a_tiny_corpus_equal_hand_counts() {
    let vocab = target();
    let dir = temp_dir("hand");
    let corpus = dir.join("tiny.txt");
    // Token ids from the fixture: "the" 454, " morning" 370, " the" 337, " evening" 421.
    std::fs::write(&corpus, "the morning the evening\n\nthe morning\n").unwrap();
    let ids = |text: &str| vocab.tokenizer().encode_fast(text, false).unwrap().get_ids().to_vec();
    assert_eq!(ids("the morning the evening"), vec![454, 370, 337, 421]);
    assert_eq!(ids("the morning"), vec![454, 370]);
    let counts =
        CooccurrenceCounts::count_files(&[corpus], &CorpusOptions::default(), &vocab, 2, 1 << 20, 2, &NoProgress)
            .unwrap();
    // Window 2 over [the, ␣morning, ␣the, ␣evening] and [the, ␣morning]; lines never join.
    assert_eq!(counts.get(454, 370), 2); // line 1 (distance 1) + line 2
    assert_eq!(counts.get(454, 337), 1);
    assert_eq!(counts.get(370, 337), 1);
    assert_eq!(counts.get(370, 421), 1);
    assert_eq!(counts.get(337, 421), 1);
    assert_eq!(counts.get(454, 421), 0, "distance 3 is outside the window");
    assert_eq!(counts.get(370, 454), counts.get(454, 370), "counts are symmetric");
    assert_eq!((counts.tokens(), counts.distinct_pairs(), counts.unigram(454), counts.unigram(370)), (6, 5, 2, 2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn thread_count_does_not_change_the_matrix() {
    let vocab = target();
    assert_eq!(build(&vocab, 1), build(&vocab, 3));
}

#[test]
fn rows_are_stochastic_and_rdk_keeps_a_distribution() {
    let vocab = target();
    let affinity = build(&vocab, 2);
    let (offsets, columns, values) = affinity.matrix().csr();
    assert!(affinity.rows_with_entries() > 50, "{} rows", affinity.rows_with_entries());
    for row in 0..vocab.len() {
        let range = offsets[row]..offsets[row + 1];
        if range.is_empty() {
            continue;
        }
        assert!(range.len() <= params().top_k);
        let sum: f64 = values[range.clone()].iter().map(|&v| f64::from(v)).sum();
        assert!((sum - 1.0).abs() < 1e-5, "row {row} sums to {sum}");
        assert!(columns[range.clone()].contains(&(row as u32)), "row {row} lacks its own token");
        assert!(columns[range].windows(2).all(|w| w[0] < w[1]), "row {row} columns not ascending");
    }
    let mut q = vec![0.0f32; vocab.len()];
    q[337] = 0.7;
    q[370] = 0.3;
    for spread in [
        rdk_exact(&q, affinity.matrix()).unwrap(),
        rdk_dense_kernel_first_order(&q, affinity.scores(), affinity.tau()).unwrap(),
    ] {
        assert!((spread.iter().map(|&v| f64::from(v)).sum::<f64>() - 1.0).abs() < 1e-4);
    }
    let exact = rdk_exact(&q, affinity.matrix()).unwrap();
    assert!(exact[337] < 0.7 && exact.iter().filter(|&&v| v > 0.0).count() > 2, "mass must move along the rows");
}

#[test]
fn the_artifact_is_byte_reproducible_with_its_metadata_keys_sorted() {
    let vocab = target();
    let (first, second) = (build(&vocab, 1), build(&vocab, 2));
    let bytes = first.to_bytes().unwrap();
    // The old writer's header followed the order of a fresh HashMap (13 keys, its own random
    // seed) at every call, so eight equal calls would be a fluke.
    for _ in 0..8 {
        assert!(first.to_bytes().unwrap() == bytes, "two serialisations of one matrix differ");
    }
    assert!(second.to_bytes().unwrap() == bytes, "two builds of one matrix differ");
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    assert_eq!(header_len % 8, 0);
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
    let keys = ["checksum", "corpus", "format", "format_version", "target_fingerprint", "window"];
    let positions: Vec<usize> = keys.iter().map(|key| header.find(&format!("\"{key}\":")).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "metadata keys out of order: {header}");
    assert!(header.starts_with("{\"__metadata__\":{"), "{header}");
}

#[test]
fn save_load_round_trip_and_refusals() {
    let vocab = target();
    let affinity = build(&vocab, 2);
    let dir = temp_dir("roundtrip");
    let path = dir.join("m.safetensors");
    affinity.save(&path).unwrap();
    let loaded = Affinity::load(&path, &vocab.fingerprint()).unwrap();
    assert_eq!(loaded, affinity);
    assert_eq!(loaded.info().window, 3);
    assert_eq!(loaded.info().score, "ppmi");

    let other = Vocabulary::from_file(&other_tokenizer()).unwrap();
    let err = Affinity::load(&path, &other.fingerprint()).unwrap_err();
    assert!(matches!(err, Error::WrongTokenizer { role: "target", .. }), "{err}");
    assert!(err.to_string().contains(&other.fingerprint().to_string()), "{err}");

    let bytes = std::fs::read(&path).unwrap();
    let truncated = dir.join("truncated.safetensors");
    for cut in [3, 40, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&truncated, &bytes[..cut]).unwrap();
        let err = Affinity::load(&truncated, &vocab.fingerprint()).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "cut at {cut}: {err}");
    }
    // Flip one byte in the last tensor's data: the checksum catches it.
    let mut flipped = bytes.clone();
    let last = flipped.len() - 2;
    flipped[last] ^= 0x5a;
    let corrupt = dir.join("flipped.safetensors");
    std::fs::write(&corrupt, &flipped).unwrap();
    let err = Affinity::load(&corrupt, &vocab.fingerprint()).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");

    // Another kind of file altogether, and another anyspec artifact: named, not "corrupt".
    let err = Affinity::load(&data("corpus.txt"), &vocab.fingerprint()).unwrap_err();
    assert!(matches!(err, Error::NotAnArtifact { found, .. } if found.starts_with("no anyspec artifact")), "{err}");
    let shortlist = dir.join("other.shortlist");
    std::fs::write(&shortlist, b"ASSHORTL\x01\0\0\0\0\0\0\0\0\0\0\0").unwrap();
    let err = Affinity::load(&shortlist, &vocab.fingerprint()).unwrap_err();
    assert!(err.to_string().contains("it holds a drafter shortlist"), "{err}");
    // A damaged version ("1" with one bit flipped) is corruption, not a version to rebuild with.
    let entry = br#""format_version":"1""#;
    let at = bytes.windows(entry.len()).position(|w| w == entry).expect("the version entry is in the header");
    let mut damaged = bytes.clone();
    damaged[at + entry.len() - 2] ^= 0x40;
    std::fs::write(&corrupt, &damaged).unwrap();
    let err = Affinity::load(&corrupt, &vocab.fingerprint()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }) && err.to_string().contains("\"q\""), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file whose checksum is right but whose rows do not sum to 1 (written by hand, as a buggy
/// writer would) is refused by the row-stochasticity check, not accepted.
#[test]
fn non_stochastic_rows_are_refused() {
    use anyspec_core::projection::SparseScores;
    let vocab = target();
    let n = vocab.len();
    let mut offsets = vec![0usize; n + 1];
    for o in offsets.iter_mut().skip(1) {
        *o = 2;
    }
    let scores = SparseScores::from_csr(n, offsets, vec![0, 1], vec![1.0, 0.0]).unwrap();
    let info = build(&vocab, 1).info().clone();
    let good = Affinity::from_scores(scores, info).unwrap();
    let dir = temp_dir("stochastic");
    let path = dir.join("m.safetensors");
    good.save(&path).unwrap();
    // Rewrite `values` to 0.5, 0.25 and re-seal the checksum the way the writer computes it, by
    // going through the public format: rebuild from bytes with edited tensor data.
    let bytes = std::fs::read(&path).unwrap();
    let edited = edit_values(&bytes, &[0.5, 0.25]);
    std::fs::write(&path, edited).unwrap();
    let err = Affinity::load(&path, &vocab.fingerprint()).unwrap_err();
    assert!(matches!(err, Error::InvalidMatrix { .. }), "{err}");
    assert!(format!("{:?}", err).contains("row-stochastic") || err.to_string().contains("row-stochastic"), "{err:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Replaces the `values` tensor's data and recomputes the checksum metadata exactly as the
/// writer does (length-prefixed metadata entries in key order, then tensors in file order).
fn edit_values(bytes: &[u8], new_values: &[f32]) -> Vec<u8> {
    use safetensors::{Dtype, SafeTensors, tensor::TensorView};
    use sha2::{Digest, Sha256};
    let (_, header) = SafeTensors::read_metadata(bytes).unwrap();
    let mut metadata: std::collections::BTreeMap<String, String> =
        header.metadata().clone().unwrap().into_iter().collect();
    metadata.remove("checksum");
    let tensors = SafeTensors::deserialize(bytes).unwrap();
    let values: Vec<u8> = new_values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let names = ["row_offsets", "columns", "values", "scores"];
    let data: Vec<Vec<u8>> = names
        .iter()
        .map(|&n| if n == "values" { values.clone() } else { tensors.tensor(n).unwrap().data().to_vec() })
        .collect();
    let mut hasher = Sha256::new();
    let mut piece = |b: &[u8]| {
        hasher.update((b.len() as u64).to_le_bytes());
        hasher.update(b);
    };
    for (k, v) in &metadata {
        piece(k.as_bytes());
        piece(v.as_bytes());
    }
    for (n, d) in names.iter().zip(&data) {
        piece(n.as_bytes());
        piece(d);
    }
    let checksum: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    metadata.insert("checksum".into(), checksum);
    let dtypes = [Dtype::U64, Dtype::U32, Dtype::F32, Dtype::F32];
    let views: Vec<(&str, TensorView<'_>)> = names
        .iter()
        .zip(dtypes)
        .zip(&data)
        .map(|((&n, dt), d)| {
            let len = d.len() / if dt == Dtype::U64 { 8 } else { 4 };
            (n, TensorView::new(dt, vec![len], d).unwrap())
        })
        .collect();
    safetensors::serialize(views, Some(metadata.into_iter().collect())).unwrap()
}

#[test]
fn restriction_to_a_drafter_keeps_self_and_out_of_vocabulary_targets() {
    let vocab = target();
    let affinity = build(&vocab, 1);
    let n = vocab.len();
    // A drafter with the even target ids only.
    let in_drafter: Vec<bool> = (0..n).map(|t| t % 2 == 0).collect();
    let restricted = affinity.restricted_to_drafter(&in_drafter).unwrap();
    let (offsets, columns, values) = restricted.matrix().csr();
    assert!(restricted.rows_with_entries() > 10, "{}", restricted.rows_with_entries());
    for row in 0..n {
        let range = offsets[row]..offsets[row + 1];
        if range.is_empty() {
            continue;
        }
        assert!(in_drafter[row], "row {row} of a token the drafter lacks must be empty");
        assert!(columns[range.clone()].iter().all(|&c| c as usize == row || !in_drafter[c as usize]));
        let sum: f64 = values[range].iter().map(|&v| f64::from(v)).sum();
        assert!((sum - 1.0).abs() < 1e-5);
    }
    // RDK through the restricted matrix puts mass only where the drafter had some, or on
    // tokens the drafter lacks.
    let row = (0..n).find(|&r| offsets[r + 1] > offsets[r]).unwrap();
    let mut q = vec![0.0f32; n];
    q[row] = 1.0;
    let spread = rdk_exact(&q, restricted.matrix()).unwrap();
    assert!(spread.iter().enumerate().all(|(t, &v)| v == 0.0 || t == row || !in_drafter[t]));
    assert!(spread[row] < 1.0, "row {row} reaches out-of-vocabulary targets");
    // A drafter with every token: the identity.
    assert_eq!(affinity.restricted_to_drafter(&vec![true; n]).unwrap().matrix().nnz(), 0);
    assert!(affinity.restricted_to_drafter(&[true]).is_err());
}
