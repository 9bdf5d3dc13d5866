//! The drafters over a real (crafted) dictionary, through the `Drafter` trait.

use std::path::Path;
use std::sync::Arc;

use anyspec_core::{Draft, Drafter, SamplingConfig};
use anyspec_dict_builder::{BuildParams, Dictionary, TableEntry, encode_dictionary};
use anyspec_drafters::{DictionaryDrafter, Hybrid, HybridOrder, PromptLookup, PromptLookupConfig};
use anyspec_vocab_map::Fingerprint;
use rand::SeedableRng;
use rand::rngs::StdRng;

fn dictionary(entries: &[(&[u32], &[u32])]) -> Arc<Dictionary> {
    let table: Vec<TableEntry<'_>> =
        entries.iter().map(|&(prefix, continuation)| TableEntry { prefix, continuation, count: 1, total: 1 }).collect();
    let fingerprint = Fingerprint([1; 32]);
    let bytes = encode_dictionary(&table, &fingerprint, &BuildParams::default(), 0, 0).unwrap();
    Arc::new(Dictionary::from_bytes(bytes, Path::new("test.dict"), &fingerprint).unwrap())
}

fn propose(drafter: &mut dyn Drafter, context: &[u32], max_tokens: usize) -> Draft {
    let mut rng = StdRng::seed_from_u64(0);
    drafter.propose(context, max_tokens, &SamplingConfig::default(), &mut rng).unwrap()
}

#[test]
fn dictionary_drafter_uses_the_longest_suffix_and_respects_gamma() {
    let dict = dictionary(&[(&[2], &[7, 7, 7]), (&[1, 2], &[8, 8, 8, 8])]);
    let mut drafter = DictionaryDrafter::new(dict);
    assert_eq!(propose(&mut drafter, &[5, 1, 2], 8), Draft::deterministic(vec![8, 8, 8, 8]));
    assert_eq!(propose(&mut drafter, &[5, 3, 2], 2), Draft::deterministic(vec![7, 7]));
    assert_eq!(propose(&mut drafter, &[5, 3, 4], 8), Draft::empty());
}

#[test]
fn hybrid_falls_back_in_either_order() {
    let dict = dictionary(&[(&[2], &[7, 7])]);
    let prompt = || PromptLookup::new(PromptLookupConfig::default()).unwrap();
    // Context where both have an answer: prompt lookup says [3] follows 2.
    let both = [2, 3, 9, 2];
    // Context where only prompt lookup has one.
    let prompt_only = [4, 5, 6, 4];

    let mut dict_first = Hybrid::new(DictionaryDrafter::new(Arc::clone(&dict)), prompt(), HybridOrder::DictionaryFirst);
    assert_eq!(propose(&mut dict_first, &both, 4).tokens, vec![7, 7]);
    assert_eq!(propose(&mut dict_first, &prompt_only, 4).tokens, vec![5, 6, 4]);
    assert_eq!(dict_first.sources(), (1, 1));

    let mut prompt_first = Hybrid::new(DictionaryDrafter::new(Arc::clone(&dict)), prompt(), HybridOrder::PromptFirst);
    assert_eq!(propose(&mut prompt_first, &both, 4).tokens, vec![3, 9, 2]);
    // Nothing recurs here, so the dictionary answers.
    assert_eq!(propose(&mut prompt_first, &[8, 2], 4).tokens, vec![7, 7]);
    assert!(propose(&mut prompt_first, &[8, 1], 4).is_empty());
    assert_eq!(prompt_first.sources(), (1, 1));
}

#[test]
fn every_draft_is_deterministic_and_within_gamma() {
    let dict = dictionary(&[(&[1], &[1, 2, 3, 4, 5, 6, 7, 8])]);
    let mut hybrid = Hybrid::new(
        DictionaryDrafter::new(dict),
        PromptLookup::new(PromptLookupConfig { min_ngram: 1, max_ngram: 2 }).unwrap(),
        HybridOrder::DictionaryFirst,
    );
    let context: Vec<u32> = (0..200u32).map(|i| (i * 5 + i / 7) % 9).collect();
    for len in 1..context.len() {
        for gamma in [1, 3, 8] {
            let draft = propose(&mut hybrid, &context[..len], gamma);
            assert!(draft.len() <= gamma);
            assert_eq!(draft.origin, anyspec_core::DraftOrigin::Deterministic);
        }
    }
}
