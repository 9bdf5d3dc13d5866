//! Cost of SLRS drafting: one walk with its full ψ expansion, as the target's tokens get longer,
//! for a character-level drafter and for a drafter with multi-byte tokens; and one sampled draft
//! with the real fixture pair (burn models, byte-level BPE tokenizers), its ψ levels scored as one
//! tree-attention pass each against one drafter call per continuation.
//!
//! Synthetic target: every string of 1..=L letters over {a, b, c, d} (all prefixes are tokens,
//! so every trie node is live). Drafters: the four letters (character-level), or every string of
//! 1..=3 letters (multi-byte: a prefix of `l` letters has about 1.8^l spellings). The number of
//! drafter positions scored per walk is in each benchmark's name (`positions=`), computed from
//! the vocabularies by `ExpansionPlan`; the time per walk divided by it is the cost of one scored
//! drafter position in the toy model (the real cost is one drafter forward position each).
//!
//! With `../shared/tokenizers` present, `slrs_plan` times the check made before generation
//! (building the string space and the worst-case plan) for real tokenizer pairs, with the
//! worst-case positions per drafted token and the largest lookahead within the default budget
//! in the names; the drafter is either the real one or its single-byte tokens only (a
//! byte-level drafter spelling the same text). Absent that folder, it is skipped.

use std::path::{Path, PathBuf};

use anyspec_core::toy::MarkovChain;
use anyspec_core::{Drafter, SamplingConfig};
use anyspec_drafters::slrs::{
    DEFAULT_SLRS_BUDGET, ExpansionPlan, MarkovTreeModel, SlrsConfig, SlrsDrafter, StringSpace, TextTreeModel,
};
use anyspec_models::{Checkpoint, DeviceChoice, Llama, TextTokenizer};
use anyspec_vocab_map::Vocabulary;
use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::StdRng;

const LETTERS: [&str; 4] = ["a", "b", "c", "d"];

/// Every string of `1..=max_len` letters.
fn strings(max_len: usize) -> Vec<String> {
    let mut all = Vec::new();
    let mut level = vec![String::new()];
    for _ in 0..max_len {
        level = level.iter().flat_map(|s| LETTERS.iter().map(move |l| format!("{s}{l}"))).collect();
        all.extend(level.iter().cloned());
    }
    all
}

fn space(target: &[String], drafter: &[String]) -> StringSpace {
    let t: Vec<Option<&[u8]>> = target.iter().map(|s| Some(s.as_bytes())).collect();
    let d: Vec<Option<&[u8]>> = drafter.iter().map(|s| Some(s.as_bytes())).collect();
    StringSpace::new(&t, t.len(), &d, d.len()).expect("valid vocabularies")
}

fn toy_walks(c: &mut Criterion) {
    let mut group = c.benchmark_group("slrs_walk");
    group.sample_size(10);
    for (name, drafter) in [("char_drafter", strings(1)), ("multibyte_drafter", strings(3))] {
        for max_len in [2, 3, 4, 5, 6] {
            let target = strings(max_len);
            let space = space(&target, &drafter);
            let positions = ExpansionPlan::new(&space).worst_case(None);
            let mut rng = StdRng::seed_from_u64(max_len as u64);
            let after_target = MarkovChain::random(target.len(), drafter.len(), 1.0, &mut rng);
            let after_drafter = MarkovChain::random(drafter.len(), drafter.len(), 1.0, &mut rng);
            let model = MarkovTreeModel::new(after_target, after_drafter).expect("valid chains");
            let config = SlrsConfig { lookahead: None, budget: u64::MAX, ..SlrsConfig::default() };
            let mut slrs = SlrsDrafter::new(model, space, config).expect("within budget");
            let sampling = SamplingConfig::default();
            group.bench_function(format!("{name}/L={max_len}/positions={positions}"), |b| {
                b.iter(|| slrs.walk(&[0], &sampling, &mut rng).expect("walk"));
            });
        }
    }
    group.finish();
}

fn load(dir: &Path) -> Llama {
    Checkpoint::open(dir).and_then(|c| c.load_model(&DeviceChoice::Cpu.device()?)).expect("fixture model loads")
}

fn real_pair(c: &mut Criterion) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target_dir = root.join("../models/tests/data/mistral-window-f16");
    let drafter_dir = root.join("tests/data/hetero-drafter");
    let tokenizer = |dir: &Path| TextTokenizer::from_file(&dir.join("tokenizer.json")).expect("fixture tokenizer");
    let vocabulary = |dir: &Path| Vocabulary::from_file(&dir.join("tokenizer.json")).expect("fixture vocabulary");
    let (target_vocab, drafter_vocab) = (vocabulary(&target_dir), vocabulary(&drafter_dir));
    let model = load(&drafter_dir);
    let drafter_size = model.config().vocab_size;
    let space = StringSpace::new(&target_vocab.text_surfaces(), 320, &drafter_vocab.text_surfaces(), drafter_size)
        .expect("valid vocabularies");
    let positions = ExpansionPlan::new(&space).worst_case(None);
    let prompt = tokenizer(&target_dir).encode("The quick brown fox jumps over the lazy").expect("encode");
    let mut rng = StdRng::seed_from_u64(0);
    let mut group = c.benchmark_group("slrs_real_pair");
    group.sample_size(10);
    // Each level of the ψ tree as one tree-attention pass (the default), against the baseline of
    // one drafter call per continuation, in the same run.
    for (scoring, batched) in [("tree_attention", true), ("one_call_per_continuation", false)] {
        let mut text =
            TextTreeModel::new(model.clone(), tokenizer(&target_dir), tokenizer(&drafter_dir)).expect("tree model");
        text.set_tree_batching(batched);
        let config = SlrsConfig { lookahead: None, budget: u64::MAX, ..SlrsConfig::default() };
        let mut slrs = SlrsDrafter::new(text, space.clone(), config).expect("budget");
        for (name, sampling) in [("greedy", SamplingConfig::greedy()), ("temperature_1", SamplingConfig::default())] {
            group.bench_function(format!("{name}/{scoring}/one_token/worst_positions={positions}"), |b| {
                b.iter(|| slrs.propose(&prompt, 1, &sampling, &mut rng).expect("propose"));
            });
        }
    }
    group.finish();
}

fn real_tokenizer_plans(c: &mut Criterion) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tokenizers");
    if !dir.is_dir() {
        return; // The shared data is not on this machine: nothing to measure.
    }
    let mut group = c.benchmark_group("slrs_plan");
    group.sample_size(10);
    for (target, drafter) in [("llama3", "gpt2"), ("qwen2", "llama2")] {
        let vocabulary = |name: &str| Vocabulary::from_file(&dir.join(name).join("tokenizer.json"));
        let (Ok(target_vocab), Ok(drafter_vocab)) = (vocabulary(target), vocabulary(drafter)) else { continue };
        let target_surfaces = target_vocab.text_surfaces();
        for bytes_only in [true, false] {
            let mut drafter_surfaces = drafter_vocab.text_surfaces();
            if bytes_only {
                drafter_surfaces.iter_mut().filter(|s| s.is_some_and(|s| s.len() != 1)).for_each(|s| *s = None);
            }
            let build = || {
                let space =
                    StringSpace::new(&target_surfaces, target_vocab.len(), &drafter_surfaces, drafter_vocab.len())
                        .expect("valid vocabularies");
                let plan = ExpansionPlan::new(&space);
                (space, plan)
            };
            let (space, plan) = build();
            let worst = plan.worst_case(None);
            let worst = if worst == u64::MAX { "over_2^64".to_string() } else { worst.to_string() };
            let fits = plan.largest_lookahead_within(DEFAULT_SLRS_BUDGET).map_or("none".into(), |l| l.to_string());
            let kind = if bytes_only { "byte_drafter" } else { "full_drafter" };
            let name = format!(
                "{target}_target/{drafter}_{kind}/trie_nodes={}/worst_positions={worst}/lookahead_within_default_budget={fits}",
                space.node_count()
            );
            group.bench_function(name, |b| b.iter(build));
        }
    }
    group.finish();
}

criterion_group!(benches, toy_walks, real_pair, real_tokenizer_plans);
criterion_main!(benches);
