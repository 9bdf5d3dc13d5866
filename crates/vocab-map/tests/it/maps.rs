use anyspec_vocab_map::{ABSENT, MatchMode, VocabMap};

use crate::fixture;

/// Hand-checked: the byte-level vocabulary is {a, b, Ġ, Ġa, ab, Ġab, <|endoftext|>}, the
/// SentencePiece one {<unk>, <s>, </s>, <0x20>, <0x61>, a, b, ▁, ▁a, ▁ab, ba}.
#[test]
fn raw_matching_pairs_equal_strings_only() {
    let target = fixture("tiny_bytelevel.json");
    let drafter = fixture("tiny_sentencepiece.json");
    let map = VocabMap::build(&target, &drafter, MatchMode::Raw);
    assert_eq!(map.intersection(), 2, "only `a` and `b` are spelled alike");
    assert_eq!(map.drafter_of(0), Some(5));
    assert_eq!(map.drafter_of(1), Some(6));
    assert_eq!(map.drafter_of(2), None, "Ġ and ▁ differ as strings");
    assert_eq!(map.target().collisions, 0);
    assert_eq!(map.drafter().collisions, 0);
}

#[test]
fn bytes_matching_pairs_surfaces_and_prefers_ordinary_tokens_over_byte_fallback() {
    let target = fixture("tiny_bytelevel.json");
    let drafter = fixture("tiny_sentencepiece.json");
    let map = VocabMap::build(&target, &drafter, MatchMode::Bytes);
    // a, b, " " (Ġ/▁), " a" (Ġa/▁a), " ab" (Ġab/▁ab); `ab` and `ba` have no partner.
    assert_eq!(map.intersection(), 5);
    assert_eq!(map.target_to_drafter(), &[5, 6, 7, 8, ABSENT, 9, ABSENT]);
    assert_eq!(map.drafter_to_target(), &[ABSENT, ABSENT, ABSENT, ABSENT, ABSENT, 0, 1, 2, 3, 5, ABSENT]);
    // `<0x20>` collides with `▁` and `<0x61>` with `a`: the ordinary tokens win.
    assert_eq!(map.drafter().collisions, 2);
    assert_eq!(map.drafter().excluded, 3, "<unk>, <s>, </s>");
    assert_eq!(map.target().excluded, 1, "<|endoftext|>");
    assert_eq!(map.target().collisions, 0);
}

#[test]
fn maps_are_one_to_one_and_mutually_inverse_on_trained_fixtures() {
    let names = ["bytelevel.json", "sentencepiece.json", "metaspace.json", "wordpiece.json"];
    for t in names {
        for d in names {
            let target = fixture(t);
            let drafter = fixture(d);
            for mode in [MatchMode::Raw, MatchMode::Bytes] {
                let map = VocabMap::build(&target, &drafter, mode);
                assert_eq!(map.target_to_drafter().len(), target.len());
                assert_eq!(map.drafter_to_target().len(), drafter.len());
                for (tid, &did) in map.target_to_drafter().iter().enumerate() {
                    if did != ABSENT {
                        assert_eq!(map.target_of(did), Some(tid as u32), "{t} × {d} {mode}");
                        if mode == MatchMode::Bytes {
                            assert_eq!(target.surface(tid as u32), drafter.surface(did));
                        } else {
                            assert_eq!(target.token(tid as u32).unwrap().raw, drafter.token(did).unwrap().raw);
                        }
                    }
                }
                let back = map.drafter_to_target().iter().filter(|&&x| x != ABSENT).count();
                assert_eq!(back, map.intersection());
            }
        }
    }
}

#[test]
fn a_vocabulary_matches_itself_completely_in_raw_mode() {
    let vocab = fixture("metaspace.json");
    let map = VocabMap::build(&vocab, &vocab, MatchMode::Raw);
    assert_eq!(map.intersection(), vocab.token_count());
    // In bytes mode, specials are left out and `<0x20>` yields to `▁`.
    let bytes = VocabMap::build(&vocab, &vocab, MatchMode::Bytes);
    assert!(bytes.intersection() < vocab.token_count());
    assert_eq!(bytes.intersection() + bytes.target().collisions + bytes.target().excluded, vocab.token_count());
}

#[test]
fn bytes_mode_finds_pairs_across_families_that_raw_mode_misses() {
    let target = fixture("bytelevel.json");
    let drafter = fixture("sentencepiece.json");
    let raw = VocabMap::build(&target, &drafter, MatchMode::Raw).intersection();
    let bytes = VocabMap::build(&target, &drafter, MatchMode::Bytes).intersection();
    assert!(bytes > raw + 100, "bytes {bytes}, raw {raw}");
}

#[test]
fn match_modes_parse_and_reject_unknown_names() {
    assert_eq!("raw".parse::<MatchMode>().unwrap(), MatchMode::Raw);
    assert_eq!("bytes".parse::<MatchMode>().unwrap(), MatchMode::Bytes);
    let err = "string".parse::<MatchMode>().unwrap_err();
    assert!(err.to_string().contains("\"string\""), "{err}");
}

#[test]
fn the_map_feeds_anyspec_core_projections() {
    let target = fixture("tiny_bytelevel.json");
    let drafter = fixture("tiny_sentencepiece.json");
    let map = VocabMap::build(&target, &drafter, MatchMode::Bytes);
    let id_map = map.id_map().unwrap();
    assert_eq!(id_map.drafter_size(), drafter.len());
    assert_eq!(id_map.target_size(), target.len());
    assert_eq!(id_map.intersection_size(), 5);
    assert_eq!(id_map.target_to_drafter(), map.target_to_drafter());
    // TLI: mass on drafter tokens outside the intersection is dropped and the rest renormalized.
    let mut q = vec![0.0f32; drafter.len()];
    q[5] = 0.25; // `a` → target 0
    q[9] = 0.25; // `▁ab` → target 5
    q[10] = 0.5; // `ba`, not in the target
    let projected = anyspec_core::projection::tli_projection(&q, &id_map).unwrap();
    assert_eq!(projected, vec![0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0]);
}
