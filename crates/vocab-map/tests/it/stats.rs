use anyspec_core::NoProgress;
use anyspec_vocab_map::stats::{
    DrafterTrie, Overlap, corpus_overlap, count_decompositions, fertility, injectivity, shortest_tokens,
};
use anyspec_vocab_map::{MatchMode, TokenKind, VocabMap};

use crate::fixture;

#[test]
fn overlap_reads_sizes_and_ratios_off_the_map() {
    let target = fixture("tiny_bytelevel.json");
    let drafter = fixture("tiny_sentencepiece.json");
    let raw = Overlap::of(&VocabMap::build(&target, &drafter, MatchMode::Raw));
    assert_eq!((raw.target_size, raw.drafter_size, raw.intersection), (7, 11, 2));
    assert!((raw.ratio - 2.0 / 7.0).abs() < 1e-12);
    assert!((raw.jaccard - 2.0 / 16.0).abs() < 1e-12);
    let bytes = Overlap::of(&VocabMap::build(&target, &drafter, MatchMode::Bytes));
    assert_eq!(bytes.intersection, 5);
    assert_eq!(bytes.drafter_collisions, 2);
    let json = serde_json::to_value(&bytes).unwrap();
    for field in ["mode", "target_size", "drafter_size", "intersection", "ratio", "jaccard"] {
        assert!(json.get(field).is_some(), "--json field {field} is missing: {json}");
    }
    assert_eq!(json["mode"], "bytes");
}

#[test]
fn corpus_overlap_counts_tokens_used_on_both_sides() {
    let target = fixture("tiny_bytelevel.json");
    let drafter = fixture("tiny_sentencepiece.json");
    let map = VocabMap::build(&target, &drafter, MatchMode::Bytes);
    // Target: ab | Ġa | Ġ | b | a — all paired but `ab`. Drafter: ▁ab | ▁a | ▁ | ba — all but `ba`.
    let c = corpus_overlap(&map, &target, &drafter, "ab a ba", &NoProgress).unwrap();
    assert_eq!((c.target.distinct_tokens, c.target.distinct_shared), (5, 4));
    assert_eq!((c.target.occurrences, c.target.occurrences_shared), (5, 4));
    assert_eq!((c.drafter.distinct_tokens, c.drafter.distinct_shared), (4, 3));
    // Twice the text: distinct counts stay, occurrences double (the tiny byte-level vocabulary has
    // no newline token, so BPE drops it; the SentencePiece one encodes it as the special `<unk>`).
    let c = corpus_overlap(&map, &target, &drafter, "ab a ba\nab a ba", &NoProgress).unwrap();
    assert_eq!((c.target.distinct_tokens, c.target.occurrences, c.target.occurrences_shared), (5, 10, 8));
    assert_eq!((c.drafter.distinct_tokens, c.drafter.distinct_shared), (5, 3));
    assert_eq!((c.drafter.occurrences, c.drafter.occurrences_shared), (9, 6));
}

#[test]
fn injectivity_finds_the_lines_a_tokenizer_cannot_reproduce() {
    let text = "Hello, world!\ntwo  spaces\n日本\n leading space\n";
    // WordPiece squashes spaces and drops unknown characters; byte-level BPE keeps everything; the
    // Metaspace fixture (prepend "first", a decoder that strips the first space) loses a leading
    // space; the Llama-2-style fixture keeps it.
    let expected = [("wordpiece.json", 3), ("bytelevel.json", 0), ("sentencepiece.json", 0), ("metaspace.json", 1)];
    for (name, mismatched) in expected {
        let found = injectivity(&fixture(name), text, &NoProgress).unwrap();
        assert_eq!(found.snippets, 4, "{name}");
        assert_eq!(found.mismatched, mismatched, "{name}: {:?}", found.examples);
        assert_eq!(found.examples.len(), mismatched as usize);
        assert!((found.share - mismatched as f64 / 4.0).abs() < 1e-12);
    }
    let wordpiece = injectivity(&fixture("wordpiece.json"), text, &NoProgress).unwrap();
    assert_eq!(wordpiece.examples[0].original, "two  spaces");
    assert_eq!(wordpiece.examples[0].decoded, "two spaces");
}

#[test]
fn fertility_is_tokens_per_whitespace_word() {
    let f = fertility(&fixture("tiny_bytelevel.json"), "ab a ba", &NoProgress).unwrap();
    assert_eq!((f.tokens, f.words), (5, 3));
    assert!((f.fertility - 5.0 / 3.0).abs() < 1e-12);
    assert!((f.bytes_per_token - 7.0 / 5.0).abs() < 1e-12);
}

#[test]
fn decompositions_count_every_drafter_token_sequence_hand_checked() {
    let target = fixture("tiny_bytelevel.json");
    let drafter = fixture("tiny_sentencepiece.json");
    let trie = DrafterTrie::build(&drafter, None);
    assert_eq!(trie.token_count(), 8, "the 3 special tokens are left out");
    let found = count_decompositions(&target, &trie, &NoProgress);
    // Drafter surfaces: " " twice (▁, <0x20>), "a" twice (a, <0x61>), "b", " a", " ab", "ba".
    // "Ġab" = " ab": [" ab"], [" a", "b"], and 2 × 2 spellings of [" ", "a", "b"].
    let ab = found.get(5).unwrap();
    assert_eq!(ab.count(), Some(6));
    assert_eq!((ab.min_tokens, ab.max_tokens), (1, 3));
    assert_eq!(found.get(4).unwrap().count(), Some(2), "\"ab\" = a·b with two a's");
    assert_eq!(found.get(0).unwrap().count(), Some(2));
    assert_eq!(found.get(1).unwrap().count(), Some(1));
    assert!(found.get(6).is_none(), "special tokens are not counted");
    let summary = found.summary(|_| true);
    assert_eq!(summary.tokens, 6);
    assert_eq!(summary.undecomposable, 0);
    assert_eq!(summary.max_count, "6");
    assert_eq!(summary.max_count_token, Some(5));
    assert_eq!(summary.n_max, 3);
}

#[test]
fn a_vocabulary_against_its_shortest_tokens_spells_every_token() {
    let vocab = fixture("bytelevel.json");
    // Every single byte is a token of a byte-level vocabulary, so even the 256 shortest tokens
    // spell every token; the long ones have many spellings.
    let keep = shortest_tokens(&vocab, 256);
    assert_eq!(keep.iter().filter(|&&k| k).count(), 256);
    let trie = DrafterTrie::build(&vocab, Some(&keep));
    let found = count_decompositions(&vocab, &trie, &NoProgress);
    let summary = found.summary(|_| true);
    assert_eq!(summary.undecomposable, 0);
    assert_eq!(summary.count.as_ref().unwrap().min, 1.0);
    // With single bytes only, every token has exactly one spelling, of as many tokens as bytes.
    let longest = vocab
        .tokens()
        .filter(|(_, t)| t.kind != TokenKind::Special)
        .map(|(id, _)| vocab.surface(id).unwrap().len())
        .max()
        .unwrap();
    assert_eq!(summary.n_max as usize, longest);
    assert_eq!(summary.max_count, "1");
    // With the whole vocabulary, counts grow.
    let all = count_decompositions(&vocab, &DrafterTrie::build(&vocab, None), &NoProgress).summary(|_| true);
    assert!(all.count.unwrap().max > 1.0);
}
