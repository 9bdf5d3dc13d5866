//! SLRS with real burn models and real (tiny) byte-level BPE tokenizers: the Mistral conformance
//! fixture of anyspec-models as the target, the 322-token hetero-drafter fixture as the drafter.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyspec_core::{DraftOrigin, Drafter, GenerationConfig, SamplingConfig, generate};
use anyspec_drafters::slrs::{SlrsConfig, SlrsDrafter, StringSpace, TextTreeModel};
use anyspec_models::{Checkpoint, DeviceChoice, Llama, LlamaTarget, TextTokenizer};
use anyspec_vocab_map::Vocabulary;
use rand::SeedableRng;
use rand::rngs::StdRng;

fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/mistral-window-f16")
}

fn drafter_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/hetero-drafter")
}

fn load(dir: &Path) -> Llama {
    Checkpoint::open(dir).unwrap().load_model(&DeviceChoice::Cpu.device().unwrap()).unwrap()
}

fn tokenizer(dir: &Path) -> TextTokenizer {
    TextTokenizer::from_file(&dir.join("tokenizer.json")).unwrap()
}

fn space(target_vocab_size: usize, drafter_vocab_size: usize) -> StringSpace {
    let target = Vocabulary::from_file(&target_dir().join("tokenizer.json")).unwrap();
    let drafter = Vocabulary::from_file(&drafter_dir().join("tokenizer.json")).unwrap();
    StringSpace::new(&target.text_surfaces(), target_vocab_size, &drafter.text_surfaces(), drafter_vocab_size).unwrap()
}

fn slrs_drafter() -> SlrsDrafter<TextTreeModel> {
    let model = load(&drafter_dir());
    let drafter_vocab = model.config().vocab_size;
    let text = TextTreeModel::new(model, tokenizer(&target_dir()), tokenizer(&drafter_dir())).unwrap();
    SlrsDrafter::new(text, space(320, drafter_vocab), SlrsConfig::default()).unwrap()
}

fn prompt() -> Vec<u32> {
    tokenizer(&target_dir()).encode("The quick brown fox jumps over the lazy").unwrap()
}

#[test]
fn greedy_slrs_with_real_models_reproduces_autoregressive_decoding() {
    let config =
        GenerationConfig { gamma: 4, max_new_tokens: 24, sampling: SamplingConfig::greedy(), ..Default::default() };
    let mut rng = StdRng::seed_from_u64(0);
    let mut target = LlamaTarget::new(load(&target_dir()));
    let plain = generate(&mut target, None, &prompt(), &config, &mut rng, &mut |_| ControlFlow::Continue(())).unwrap();
    let mut target = LlamaTarget::new(load(&target_dir()));
    let mut drafter = slrs_drafter();
    let spec =
        generate(&mut target, Some(&mut drafter), &prompt(), &config, &mut rng, &mut |_| ControlFlow::Continue(()))
            .unwrap();
    assert_eq!(spec.tokens, plain.tokens);
    assert!(spec.stats.drafted > 0, "{:?}", spec.stats);
}

#[test]
fn sampled_slrs_with_real_models_drafts_exact_sub_distributions() {
    let mut drafter = slrs_drafter();
    let mut rng = StdRng::seed_from_u64(1);
    let draft = drafter.propose(&prompt(), 2, &SamplingConfig::new(0.8, Some(8), 1.0).unwrap(), &mut rng).unwrap();
    let DraftOrigin::Sampled { distributions, outside_target } = &draft.origin else { panic!("{draft:?}") };
    for (row, &t) in distributions.iter().zip(&draft.tokens) {
        let sum: f64 = row.iter().map(|&x| f64::from(x)).sum();
        assert!(row.len() == 320 && row[t as usize] > 0.0 && sum <= 1.0 + 1e-5, "sum {sum}");
    }
    assert!(!draft.tokens.is_empty() || outside_target.is_some());
    let cost = drafter.last_cost();
    assert!(cost.positions <= drafter.plan().worst_case(None) * cost.walks, "{cost:?}");
}

#[test]
fn generation_past_the_drafter_window_shortens_drafts_instead_of_failing() {
    // The fixtures' windows are 128 positions: generation runs into the target's limit, and the
    // drafter's (its ids can outnumber the target's) must cut its walks rather than fail.
    let config =
        GenerationConfig { gamma: 4, max_new_tokens: 200, sampling: SamplingConfig::greedy(), ..Default::default() };
    let mut rng = StdRng::seed_from_u64(2);
    let mut target = LlamaTarget::new(load(&target_dir()));
    let mut drafter = slrs_drafter();
    let out =
        generate(&mut target, Some(&mut drafter), &prompt(), &config, &mut rng, &mut |_| ControlFlow::Continue(()))
            .unwrap();
    assert_eq!(out.stop_reason, anyspec_core::StopReason::ContextFull);
}

#[test]
fn sampled_slrs_with_real_models_runs_through_the_targets_verification() {
    // The target verifies ψ rows that sum to less than one and always-rejected "no proposal"
    // drafts; nothing in its (host or device) verification may assume a full distribution.
    let sampling = SamplingConfig::new(1.0, Some(16), 1.0).unwrap();
    let config = GenerationConfig { gamma: 3, max_new_tokens: 12, sampling, ..Default::default() };
    let mut rng = StdRng::seed_from_u64(3);
    let mut target = LlamaTarget::new(load(&target_dir()));
    let mut drafter = slrs_drafter();
    let out =
        generate(&mut target, Some(&mut drafter), &prompt(), &config, &mut rng, &mut |_| ControlFlow::Continue(()))
            .unwrap();
    assert_eq!(out.tokens.len(), 12);
    assert!(out.stats.drafted > 0, "{:?}", out.stats);
}

#[test]
fn a_level_scored_as_one_token_tree_equals_one_call_per_continuation() {
    use anyspec_drafters::slrs::TokenTreeModel;
    let model = load(&drafter_dir());
    let vocab = model.config().vocab_size as u32;
    let make = |batched: bool| {
        let mut text = TextTreeModel::new(model.clone(), tokenizer(&target_dir()), tokenizer(&drafter_dir())).unwrap();
        text.set_tree_batching(batched);
        text
    };
    let (mut batched, mut one_by_one) = (make(true), make(false));
    // Continuations with shared prefixes, repeats and an empty one, as a walk's levels and a
    // caller's mixed requests give them; then a longer context, so the cached prefix moves.
    let levels: Vec<Vec<Vec<u32>>> = vec![
        vec![vec![]],
        vec![vec![5], vec![7], vec![], vec![vocab - 1]],
        vec![vec![5, 9], vec![5, 11], vec![7, 9], vec![5, 9], vec![3, 3]],
        vec![vec![5, 9, 1, 2], vec![5, 9, 1, 3], vec![5, 8, 1, 2]],
    ];
    let mut context = prompt();
    for round in 0..2 {
        for level in &levels {
            let a = batched.next_logits(&context, level).unwrap();
            let b = one_by_one.next_logits(&context, level).unwrap();
            assert_eq!((a.len(), b.len()), (level.len(), level.len()));
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                let diff = x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
                assert!(diff <= 1e-4, "round {round}, continuation {:?}: max |Δ| = {diff}", level[i]);
            }
        }
        context.extend(tokenizer(&target_dir()).encode(" dog").unwrap());
    }
}
