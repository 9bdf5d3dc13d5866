//! The drafters over a real (crafted) dictionary, through the `Drafter` trait.

use std::path::Path;
use std::sync::Arc;

use anyspec_core::{Draft, Drafter, SamplingConfig};
use anyspec_dict_builder::{BuildParams, Dictionary, TableEntry, encode_dictionary};
use anyspec_drafters::{
    DictionaryDrafter, Hybrid, HybridOrder, PromptLookup, PromptLookupConfig, TokenNgramConfig, TokenNgramDrafter,
    TokenNgramModel,
};
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
    // Each draft is labelled with the length of the prefix it was found under.
    let found_under = |prefix: usize| DictionaryDrafter::confidence_class(prefix);
    assert_eq!(
        propose(&mut drafter, &[5, 1, 2], 8),
        Draft::deterministic(vec![8, 8, 8, 8]).with_confidence_class(found_under(2))
    );
    assert_eq!(
        propose(&mut drafter, &[5, 3, 2], 2),
        Draft::deterministic(vec![7, 7]).with_confidence_class(found_under(1))
    );
    assert_ne!(found_under(1), found_under(2));
    assert_eq!(propose(&mut drafter, &[5, 3, 4], 8), Draft::empty());
}

#[test]
fn prompt_lookup_labels_a_copy_with_how_long_the_two_contexts_agree() {
    let mut lookup = PromptLookup::new(PromptLookupConfig::default()).unwrap();
    // The context's last 5 tokens [1, 2, 3, 4, 5] occurred before (after 9, not 8): the 3-gram
    // index finds the copy, and the agreement grows back to 5 tokens.
    let context = [9, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5];
    let draft = propose(&mut lookup, &context, 2);
    assert_eq!(draft.tokens, vec![6, 7]);
    assert_eq!(draft.confidence_class, Some(PromptLookup::confidence_class(5)));
    // One token of agreement: class 1.
    let draft = propose(&mut lookup, &[4, 6, 7, 4], 2);
    assert_eq!((draft.tokens, draft.confidence_class), (vec![6, 7], Some(PromptLookup::confidence_class(1))));
    // A long repetition is capped at 16.
    let long: Vec<u32> = (0..40).map(|i| i % 20).collect();
    assert_eq!(propose(&mut lookup, &long, 2).confidence_class, Some(PromptLookup::confidence_class(16)));
    assert_eq!(PromptLookup::confidence_class(16), PromptLookup::confidence_class(40));
    // The classes are the lengths themselves, apart from the dictionary's.
    assert_eq!(PromptLookup::confidence_class(5), 5);
    assert!(DictionaryDrafter::confidence_class(1) > PromptLookup::confidence_class(16));
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
fn a_hybrid_with_the_token_ngram_model_falls_back_to_it() {
    // The corpus says 2 is followed by 7, 7.
    let corpus: &[u32] = &[2, 7, 7, 1];
    let model = Arc::new(TokenNgramModel::build([corpus], TokenNgramConfig::default()).unwrap());
    let prompt = PromptLookup::new(PromptLookupConfig::default()).unwrap();
    let mut hybrid = Hybrid::new(TokenNgramDrafter::new(model), prompt, HybridOrder::PromptFirst);
    // 2 recurs in the context: prompt lookup answers.
    assert_eq!(propose(&mut hybrid, &[2, 3, 9, 2], 4).tokens, vec![3, 9, 2]);
    // Nothing recurs: the n-gram model answers, chaining 2 → 7 → 7 → 1.
    let draft = propose(&mut hybrid, &[8, 2], 4);
    assert_eq!(draft.tokens, vec![7, 7, 1]);
    assert!(draft.confidence_class.is_some_and(|c| c >= 512), "{draft:?}");
    assert!(propose(&mut hybrid, &[8, 5], 4).is_empty());
    assert_eq!(hybrid.sources(), (1, 1));
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

/// Two plausible bugs, for the audit to catch: a deterministic token accepted when it is the
/// target's most likely one (a greedy check left on while sampling), a sampled one with
/// probability `min(1, q/p)` (target and drafter swapped).
fn wrong_rule(
    p: &[Vec<f32>],
    draft: &Draft,
    _: anyspec_core::DeterministicRule,
    rng: &mut dyn rand::RngCore,
) -> anyspec_core::Result<anyspec_core::Verdict> {
    use anyspec_core::sampling::{argmax, sample};
    use anyspec_core::{DraftOrigin, Verdict};
    use rand::Rng;
    for (j, &d) in draft.tokens.iter().enumerate() {
        let pd = f64::from(p[j][d as usize]);
        let chance = match &draft.origin {
            DraftOrigin::Deterministic => f64::from(u8::from(argmax(&p[j]) == d)),
            DraftOrigin::Sampled { distributions, .. } => {
                (f64::from(distributions[j][d as usize]) / pd.max(1e-12)).min(1.0)
            }
        };
        if rng.random::<f64>() >= chance {
            return Ok(Verdict { accepted: j, next_token: sample(&p[j], rng)?, bonus: false });
        }
    }
    Ok(Verdict { accepted: draft.len(), next_token: sample(&p[draft.len()], rng)?, bonus: true })
}

/// SmolLM2-135M-Instruct Q4_1 at temperature 0.8: for prompt lookup (deterministic drafts,
/// accepted with probability p(d)) and a model drafter (sampled drafts, accepted with
/// probability Σ min(p, q)), the acceptance tests passed over a short run lie within four
/// standard deviations of the sum of those probabilities computed from the target's logits
/// ([`anyspec_core::AuditedTarget`]): the real-model check that the sampled path runs the rule
/// the statistical suite proved. The same run with a wrong rule fails the check.
#[test]
fn on_smollm2_at_temperature_0_8_acceptance_is_what_the_logits_promise() {
    use anyspec_core::audit::HostRule;
    use anyspec_core::{AcceptanceAudit, AuditedTarget, GenerationConfig, generate};
    use anyspec_drafters::ModelDrafter;
    use anyspec_model_store::SMOLLM2_135M_INSTRUCT_Q4_1;
    use anyspec_model_store::testing::model_for_tests;
    use anyspec_models::{Checkpoint, DeviceChoice, LlamaTarget};
    use std::ops::ControlFlow;

    let Some(path) = model_for_tests(&SMOLLM2_135M_INSTRUCT_Q4_1, "ANYSPEC_SMOLLM2_GGUF") else { return };
    let checkpoint = Checkpoint::open(&path).unwrap();
    let device = DeviceChoice::Cpu.device().unwrap();
    let tokenizer = checkpoint.tokenizer().unwrap();
    let prompts: Vec<Vec<u32>> = [
        "Repeat this list three times: apples, pears, plums, cherries, figs, dates.",
        "Summarize in one sentence: The cat sat on the mat. The cat was black. The mat was red.",
    ]
    .iter()
    .map(|text| tokenizer.encode(&checkpoint.chat_prompt(None, text).unwrap()).unwrap())
    .collect();
    let target_model = checkpoint.load_model(&device).unwrap();
    let config = GenerationConfig {
        gamma: 4,
        max_new_tokens: 96,
        sampling: SamplingConfig::new(0.8, None, 1.0).unwrap(),
        ..GenerationConfig::default()
    };
    let audit = |drafter: &mut dyn Drafter, rule: HostRule| {
        let mut total = AcceptanceAudit::default();
        for (seed, prompt) in prompts.iter().enumerate() {
            let mut target = AuditedTarget::with_rule(LlamaTarget::new(target_model.clone()), rule);
            let mut rng = StdRng::seed_from_u64(seed as u64);
            generate(&mut target, Some(&mut *drafter), prompt, &config, &mut rng, &mut |_| ControlFlow::Continue(()))
                .unwrap();
            total.merge(target.audit());
        }
        total
    };
    // The self-speculative drafter: the target's first 6 of 30 layers and its head. Its q is far
    // enough from p that a wrong rule shows (the same model as drafter would accept everything).
    let mut first_layers = ModelDrafter::new(target_model.first_layers(6).unwrap(), 49_152);
    let mut lookup = PromptLookup::new(PromptLookupConfig::default()).unwrap();
    // A token n-gram model of a few sentences in the prompts' vein: deterministic drafts from
    // outside the context.
    let text = tokenizer
        .encode_continuation(
            "Here is the list repeated three times:\n\n1. Apples, pears, plums, cherries, figs, dates.\n2. Apples, \
             pears, plums, cherries, figs, dates.\n3. Apples, pears, plums, cherries, figs, dates.\n\nThe cat sat on \
             the mat. The cat was black, and the mat was red: a black cat sat on a red mat. In summary, the black \
             cat sat on the red mat.",
        )
        .unwrap();
    let mut ngram =
        TokenNgramDrafter::new(Arc::new(TokenNgramModel::build([&text[..]], TokenNgramConfig::default()).unwrap()));
    for (name, drafter) in [
        ("prompt lookup", &mut lookup as &mut dyn Drafter),
        ("token n-gram model", &mut ngram),
        ("first 6 layers", &mut first_layers),
    ] {
        let proved = audit(drafter, |p, d, r, rng| anyspec_core::verify::verify_draft(p, d, r, rng));
        assert!(proved.tests >= 40, "{name}: only {} acceptance tests", proved.tests);
        assert!(
            proved.z().abs() < 4.0,
            "{name}: {} of {} tests passed, {:.1} expected (z = {:.2})",
            proved.passed,
            proved.tests,
            proved.expected,
            proved.z()
        );
    }
    // The same check has power where the expectations are not all near 0 or 1: prompt lookup's
    // drafts mostly are (SmolLM2 is sure of what it copies, or of not copying it), so the wrong
    // rule is shown on the model drafter (and on toy models of every kind in anyspec-core).
    let wrong = audit(&mut first_layers, wrong_rule);
    assert!(wrong.z().abs() > 4.0, "the wrong rule passed the audit: {wrong:?}, z = {:.2}", wrong.z());
}
