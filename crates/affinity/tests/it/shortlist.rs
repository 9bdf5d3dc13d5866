//! Shortlists: frequency ranking, end-of-sequence kept, round trips and refused files.

use anyspec_affinity::{EosRule, Error, Shortlist, ShortlistParams, TokenFrequencies};
use anyspec_core::NoProgress;
use anyspec_dict_builder::CorpusOptions;
use anyspec_vocab_map::Vocabulary;

use crate::{data, other_tokenizer, temp_dir};

fn drafter() -> Vocabulary {
    Vocabulary::from_file(&data("tokenizer.json")).unwrap()
}

fn frequencies(vocab: &Vocabulary) -> TokenFrequencies {
    TokenFrequencies::count_files(&[data("corpus.txt")], &CorpusOptions::default(), vocab, 2, &NoProgress).unwrap()
}

fn params(size: usize) -> ShortlistParams {
    ShortlistParams { size, keep_special: false, eos: EosRule::Auto }
}

#[test]
fn keeps_the_most_frequent_tokens_and_eos() {
    let vocab = drafter();
    let freqs = frequencies(&vocab);
    let list = Shortlist::build(&vocab, &freqs, &params(20), "corpus.txt").unwrap();
    assert_eq!(list.ids().len(), 20);
    // `<|endoftext|>` (id 0) never occurs in the corpus, yet it is kept.
    assert_eq!(freqs.counts()[0], 0);
    assert!(list.contains(0) && list.eos() == [0]);
    // Every kept ordinary token is at least as frequent as every dropped one.
    let counts = freqs.counts();
    let min_kept = list.ids().iter().filter(|&&id| id != 0).map(|&id| counts[id as usize]).min().unwrap();
    let max_dropped = (0..vocab.len() as u32).filter(|id| !list.contains(*id)).map(|id| counts[id as usize]).max();
    assert!(max_dropped.unwrap() <= min_kept, "{max_dropped:?} > {min_kept}");
    assert!(list.coverage() > 0.2 && list.coverage() < 1.0, "{}", list.coverage());
    assert_eq!(list.mask().iter().filter(|&&m| m).count(), 20);
    // A bigger list covers more of the corpus.
    let bigger = Shortlist::build(&vocab, &freqs, &params(200), "corpus.txt").unwrap();
    assert!(bigger.coverage() > list.coverage());
}

#[test]
fn eos_rules_and_sizes_are_checked() {
    let vocab = drafter();
    let freqs = frequencies(&vocab);
    let named = ShortlistParams { eos: EosRule::Named(vec!["Ġthe".into()]), ..params(5) };
    let list = Shortlist::build(&vocab, &freqs, &named, "c").unwrap();
    assert!(list.contains(337) && !list.contains(0));
    let unknown = ShortlistParams { eos: EosRule::Named(vec!["</nope>".into()]), ..params(5) };
    assert!(matches!(Shortlist::build(&vocab, &freqs, &unknown, "c"), Err(Error::UnknownToken { .. })));
    let too_small = ShortlistParams { eos: EosRule::Named(vec!["a".into(), "b".into()]), ..params(1) };
    let err = Shortlist::build(&vocab, &freqs, &too_small, "c").unwrap_err();
    assert!(matches!(err, Error::ShortlistTooSmall { forced: 2, .. }), "{err}");
    assert!(Shortlist::build(&vocab, &freqs, &params(0), "c").is_err());
    assert!(Shortlist::build(&vocab, &freqs, &params(vocab.len() + 1), "c").is_err());
    // A tokenizer without any end-of-sequence-like special token needs --eos.
    let plain = Vocabulary::from_file(&data("no_eos.json")).unwrap();
    let plain_freqs = TokenFrequencies::from_counts(vec![1; plain.len()]);
    let err = Shortlist::build(&plain, &plain_freqs, &params(3), "c").unwrap_err();
    assert!(matches!(err, Error::NoEndOfSequence { .. }), "{err}");
    assert!(err.to_string().contains("--eos"), "{err}");
}

#[test]
fn save_load_round_trip_and_refusals() {
    let vocab = drafter();
    let list = Shortlist::build(&vocab, &frequencies(&vocab), &params(50), "corpus.txt").unwrap();
    let dir = temp_dir("shortlist");
    let path = dir.join("s.bin");
    list.save(&path).unwrap();
    assert_eq!(Shortlist::load(&path, &vocab.fingerprint()).unwrap(), list);

    let other = Vocabulary::from_file(&other_tokenizer()).unwrap();
    let err = Shortlist::load(&path, &other.fingerprint()).unwrap_err();
    assert!(matches!(err, Error::WrongTokenizer { role: "drafter", .. }), "{err}");

    let bytes = std::fs::read(&path).unwrap();
    for cut in [0, 5, 15, bytes.len() - 1] {
        std::fs::write(dir.join("cut.bin"), &bytes[..cut]).unwrap();
        let err = Shortlist::load(&dir.join("cut.bin"), &vocab.fingerprint()).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "cut at {cut}: {err}");
    }
    let mut flipped = bytes.clone();
    flipped[30] ^= 1;
    std::fs::write(dir.join("flip.bin"), &flipped).unwrap();
    let err = Shortlist::load(&dir.join("flip.bin"), &vocab.fingerprint()).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
    let err = Shortlist::load(&data("corpus.txt"), &vocab.fingerprint()).unwrap_err();
    assert!(matches!(err, Error::NotAnArtifact { .. }), "{err}");
    std::fs::write(dir.join("map.bin"), b"ASVOCMAP\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0").unwrap();
    let err = Shortlist::load(&dir.join("map.bin"), &vocab.fingerprint()).unwrap_err();
    assert!(err.to_string().contains("it holds a vocabulary map"), "{err}");
    // A damaged version field is corruption, not a request to rebuild "with this version".
    let mut damaged = bytes.clone();
    damaged[8..12].copy_from_slice(&16_711_681u32.to_le_bytes());
    std::fs::write(dir.join("version.bin"), &damaged).unwrap();
    let err = Shortlist::load(&dir.join("version.bin"), &vocab.fingerprint()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }) && err.to_string().contains("16711681"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Found by `cargo xtask fuzz` (shortlist target): a payload field set to a huge varint, with the
/// checksum recomputed, aborted the process in two ways. A string length made bincode allocate
/// it before reading (1.9 GB and 8 EB in the two findings), and a drafter vocabulary size of
/// 2^40 loaded, then `mask` allocated it. Every position is now an error or a sane shortlist.
#[test]
fn a_huge_field_anywhere_in_the_payload_is_an_error_not_an_abort() {
    use sha2::{Digest, Sha256};
    let vocab = drafter();
    let list = Shortlist::build(&vocab, &frequencies(&vocab), &params(20), "corpus.txt").unwrap();
    let original = list.to_bytes().unwrap();
    let payload_end = original.len() - 32;
    let (mut too_long, mut too_large) = (0, 0);
    // Replace the varint at each position (1, 3 or 5 bytes long in bincode's encoding) by a
    // 9-byte one, then repair the payload length and the checksum.
    for (value, replaced) in [(u64::MAX, 1), (u64::MAX, 3), (1 << 40, 1), (1 << 40, 3), (1 << 40, 5)] {
        for at in 20..payload_end - replaced {
            let mut bytes = original.clone();
            let mut huge = vec![0xFD];
            huge.extend_from_slice(&value.to_le_bytes());
            bytes.splice(at..at + replaced, huge);
            let end = bytes.len() - 32;
            bytes[12..20].copy_from_slice(&((end - 20) as u64).to_le_bytes());
            let sum = Sha256::digest(&bytes[..end]);
            bytes[end..].copy_from_slice(&sum);
            match Shortlist::from_bytes(&bytes, std::path::Path::new("huge.shortlist")) {
                Ok(loaded) => {
                    assert!(loaded.drafter_size() <= anyspec_affinity::MAX_DRAFTER_VOCAB, "position {at}");
                    assert_eq!(loaded.mask().len(), loaded.drafter_size());
                }
                Err(Error::Corrupt { problem, .. }) => {
                    too_long += usize::from(problem.contains("a length field claims more than 256 MiB"));
                    too_large += usize::from(problem.contains("drafter vocabulary size reads 1099511627776"));
                }
                Err(other) => panic!("position {at}: {other:?}"),
            }
        }
    }
    assert!(too_long > 0 && too_large > 0, "{too_long} lengths, {too_large} sizes refused");
}
