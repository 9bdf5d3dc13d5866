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

/// SmolLM2-135M-Instruct Q4_1 (the real GGUF, found or fetched as every real-model test does):
/// greedy generation with a drafter gives exactly the tokens of greedy generation without one,
/// for prompt lookup (deterministic drafts) and for a model drafter (the same file on the exact
/// f32-activation kernel, so its drafts sometimes differ from the target's choices and get
/// rejected).
#[test]
fn on_smollm2_greedy_generation_with_a_drafter_equals_it_without() {
    use anyspec_core::{GenerationConfig, generate};
    use anyspec_drafters::ModelDrafter;
    use anyspec_model_store::SMOLLM2_135M_INSTRUCT_Q4_1;
    use anyspec_model_store::testing::model_for_tests;
    use anyspec_models::{Checkpoint, DeviceChoice, Engine, Kernel, LlamaTarget, LoadOptions};
    use std::ops::ControlFlow;

    let Some(path) = model_for_tests(&SMOLLM2_135M_INSTRUCT_Q4_1, "ANYSPEC_SMOLLM2_GGUF") else { return };
    let checkpoint = Checkpoint::open(&path).unwrap();
    let device = DeviceChoice::Cpu.device().unwrap();
    let text = "Repeat this list exactly: apples, pears, plums, cherries, apples, pears, plums, cherries.";
    let prompt = checkpoint.tokenizer().unwrap().encode(&checkpoint.chat_prompt(None, text).unwrap()).unwrap();
    let target_model = checkpoint.load_model(&device).unwrap();
    let config = GenerationConfig {
        gamma: 4,
        max_new_tokens: 48,
        sampling: SamplingConfig::greedy(),
        ..GenerationConfig::default()
    };
    let run = |drafter: Option<&mut dyn Drafter>| {
        let mut target = LlamaTarget::new(target_model.clone());
        let mut rng = StdRng::seed_from_u64(0);
        generate(&mut target, drafter, &prompt, &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap()
    };
    let reference = run(None);
    let mut lookup = PromptLookup::new(PromptLookupConfig::default()).unwrap();
    let exact = if Kernel::Avx2.is_supported() { Kernel::Avx2 } else { Kernel::Scalar };
    let drafter_model =
        checkpoint.load_model_with(&device, &LoadOptions::engine(Engine::Native).with_kernel(Some(exact))).unwrap();
    let mut model_drafter = ModelDrafter::new(drafter_model, 49_152);
    for (name, drafter) in [("prompt lookup", &mut lookup as &mut dyn Drafter), ("model", &mut model_drafter)] {
        let generation = run(Some(drafter));
        assert_eq!(generation.tokens, reference.tokens, "{name} drafter");
        assert!(generation.stats.accepted > 0, "{name}: no draft was accepted, so nothing was verified");
        assert!(generation.stats.steps < reference.stats.steps, "{name}: speculation saved no step");
    }
}
