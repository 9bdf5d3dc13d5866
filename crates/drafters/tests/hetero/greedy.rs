//! At temperature 0 every bridge reproduces autoregressive decoding token for token, through
//! real burn models with two different tokenizers.

use std::ops::ControlFlow;

use anyspec_core::{Drafter, Generation, GenerationConfig, SamplingConfig, generate};
use anyspec_drafters::hetero::ContextMapping;
use anyspec_drafters::{Bridge, HeteroConfig, HeteroModelDrafter, RdkForm, SlemDrafter};
use anyspec_models::LlamaTarget;
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::fixtures::{affinity, drafter_dir, id_map, load, prompt, target_dir, tokenizer};

pub(crate) fn run(drafter: Option<&mut dyn Drafter>, sampling: SamplingConfig, tokens: usize, seed: u64) -> Generation {
    let mut target = LlamaTarget::new(load(&target_dir()));
    let config = GenerationConfig { gamma: 4, max_new_tokens: tokens, sampling, ..GenerationConfig::default() };
    let mut rng = StdRng::seed_from_u64(seed);
    generate(&mut target, drafter, &prompt(), &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap()
}

pub(crate) fn token_level(bridge: Bridge) -> HeteroModelDrafter {
    HeteroModelDrafter::new(
        load(&drafter_dir()),
        HeteroConfig::new(bridge),
        id_map(),
        tokenizer(&target_dir()),
        tokenizer(&drafter_dir()),
        320,
    )
    .unwrap()
}

pub(crate) fn slem() -> SlemDrafter {
    SlemDrafter::new(load(&drafter_dir()), tokenizer(&target_dir()), tokenizer(&drafter_dir())).unwrap()
}

fn check(name: &str, drafter: &mut dyn Drafter) {
    let plain = run(None, SamplingConfig::greedy(), 40, 0);
    let speculative = run(Some(drafter), SamplingConfig::greedy(), 40, 0);
    assert_eq!(speculative.tokens, plain.tokens, "{name}");
    // The bridge drafted and the target took some of it: fewer steps than tokens.
    assert!(speculative.stats.drafted > 0 && speculative.stats.accepted > 0, "{name}: {:?}", speculative.stats);
    assert!(speculative.stats.steps < plain.stats.steps, "{name}: {:?}", speculative.stats);
}

#[test]
fn union_at_temperature_zero_is_autoregressive_decoding() {
    check("union", &mut token_level(Bridge::Union));
}

#[test]
fn tli_at_temperature_zero_is_autoregressive_decoding() {
    let mut drafter = token_level(Bridge::Tli);
    // The pruned head computes the 314 shared rows (bytes + 58 merges), not all 322.
    assert_eq!(drafter.head_rows(), 314);
    check("tli", &mut drafter);
}

#[test]
fn tli_with_shared_ids_at_temperature_zero_is_autoregressive_decoding() {
    let mut config = HeteroConfig::new(Bridge::Tli);
    config.context = ContextMapping::SharedIds;
    let mut drafter = HeteroModelDrafter::new(
        load(&drafter_dir()),
        config,
        id_map(),
        tokenizer(&target_dir()),
        tokenizer(&drafter_dir()),
        320,
    )
    .unwrap();
    check("tli shared ids", &mut drafter);
    // The drafter sees the target's segmentation: more of its drafts are accepted than with
    // re-tokenized context on the same 40 tokens.
    let shared = run(Some(&mut drafter), SamplingConfig::greedy(), 40, 0);
    let retokenized = run(Some(&mut token_level(Bridge::Tli)), SamplingConfig::greedy(), 40, 0);
    assert!(shared.stats.accepted > retokenized.stats.accepted, "{:?} vs {:?}", shared.stats, retokenized.stats);
}

#[test]
fn rdk_at_temperature_zero_is_autoregressive_decoding() {
    check("rdk exact", &mut token_level(Bridge::Rdk(RdkForm::Exact(affinity()))));
}

#[test]
fn slem_at_temperature_zero_is_autoregressive_decoding() {
    check("slem", &mut slem());
}

#[test]
fn the_drafters_context_spells_the_targets_text() {
    let mut drafter = token_level(Bridge::Tli);
    let out = run(Some(&mut drafter), SamplingConfig::greedy(), 20, 0);
    let context = [prompt(), out.tokens].concat();
    // Zero tokens asked for: the drafter only brings its context up to date.
    let mut rng = StdRng::seed_from_u64(0);
    drafter.propose(&context, 0, &SamplingConfig::greedy(), &mut rng).unwrap();
    let target_text = tokenizer(&target_dir()).decode(&context).unwrap();
    let drafter_text = tokenizer(&drafter_dir()).decode(drafter.drafter_context()).unwrap();
    assert_eq!(drafter_text, target_text);
    // Its own BOS, not the target's.
    assert_eq!(drafter.drafter_context()[0], 256);
}
