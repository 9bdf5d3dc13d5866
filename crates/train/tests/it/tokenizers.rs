use anyspec_train::{byte_tokenizer, encode_stream, train_byte_level_bpe, train_metaspace_bpe};

use crate::fixture_texts;

const SAMPLE: &str = "“Oh! Your uncle!” — Mr. Darcy’s naïve café, 1813.\nNew line ☃";

#[test]
fn byte_level_bpe_round_trips_and_learns_merges() {
    let texts = fixture_texts();
    let tokenizer = train_byte_level_bpe(&texts, 600).unwrap();
    assert_eq!(tokenizer.get_vocab_size(true), 600);
    assert_eq!(tokenizer.token_to_id("<|endoftext|>"), Some(0));
    let ids = tokenizer.encode(SAMPLE, false).unwrap().get_ids().to_vec();
    assert_eq!(tokenizer.decode(&ids, false).unwrap(), SAMPLE);
    // Merges make common English shorter than its bytes.
    let common = "she was very glad that he had";
    assert!(tokenizer.encode(common, false).unwrap().len() < common.len() / 2);
}

#[test]
fn metaspace_bpe_has_byte_fallback_and_round_trips() {
    let texts = fixture_texts();
    let tokenizer = train_metaspace_bpe(&texts, 700, 60).unwrap();
    assert_eq!(tokenizer.get_vocab_size(true), 700);
    assert_eq!(tokenizer.token_to_id("</s>"), Some(0));
    assert_eq!(tokenizer.token_to_id("<0x00>"), Some(3));
    assert_eq!(tokenizer.token_to_id("<0xFF>"), Some(258));
    let encoding = tokenizer.encode(SAMPLE, false).unwrap();
    // The snowman is not in the learnt alphabet: it is spelt as its three UTF-8 bytes.
    assert!(encoding.get_tokens().iter().any(|t| t == "<0xE2>"), "{:?}", encoding.get_tokens());
    assert!(encoding.get_tokens().iter().any(|t| t.starts_with('▁')));
    assert_eq!(tokenizer.decode(encoding.get_ids(), false).unwrap(), SAMPLE);
}

#[test]
fn byte_tokenizer_is_one_token_per_byte() {
    let tokenizer = byte_tokenizer().unwrap();
    assert_eq!(tokenizer.get_vocab_size(true), 257);
    let ids = tokenizer.encode(SAMPLE, false).unwrap().get_ids().to_vec();
    let expected: Vec<u32> = SAMPLE.bytes().map(|b| 1 + u32::from(b)).collect();
    assert_eq!(ids, expected);
    assert_eq!(tokenizer.decode(&ids, false).unwrap(), SAMPLE);
    let stream = encode_stream(&tokenizer, &["ab", "c"], 0).unwrap();
    assert_eq!(stream, vec![98, 99, 0, 100, 0]);
}
