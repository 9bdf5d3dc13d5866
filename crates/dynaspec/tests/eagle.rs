//! The EAGLE feature drafter: the native engine runs the drafter `anyspec-train` trains, its
//! artifact round-trips and is refused for another target, and drafting from the target's
//! features is lossless (greedy: the target's own output under every head policy; sampled: a
//! G-test of whole sequences against their exact probabilities).

use std::ops::ControlFlow;
use std::path::PathBuf;

use anyspec_core::goodness_of_fit::{PASS_P_VALUE, POWER_P_VALUE, g_test};
use anyspec_core::toy::{MarkovChain, MarkovTarget};
use anyspec_core::{Drafter, GenerationConfig, SamplingConfig, Target, generate};
use anyspec_dynaspec::{
    ClusterBudget, Clusters, DynamicShortlister, EagleBuildParams, EagleChat, EagleFile, EagleInfo,
    FrequencyShortlister, HeadPolicy, Router, ShortlistDrafter, TokenBudget, build_eagle_on_chats, model_fingerprint,
};
use anyspec_models::{
    Checkpoint, DeviceChoice, Engine, FeatureModel, FeatureTap, FeatureTensors, Llama, LlamaTarget, LoadOptions,
};
use anyspec_train::{EAGLE_TENSORS, EagleFrozen, EagleShape, EagleTrainConfig, EagleWeights, eagle_forward_host};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const VOCAB: usize = 320;
const EOS: u32 = 2;

fn load(engine: Engine) -> Llama {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/llama3-gqa");
    let device = DeviceChoice::Cpu.device().unwrap();
    Checkpoint::open(dir).unwrap().load_model_with(&device, &LoadOptions::engine(engine)).unwrap()
}

fn model() -> Llama {
    load(Engine::Native)
}

fn shape(model: &Llama) -> EagleShape {
    let c = model.config();
    EagleShape {
        hidden_size: c.hidden_size,
        num_heads: c.num_heads,
        num_kv_heads: c.num_kv_heads,
        head_dim: c.head_dim,
        intermediate_size: c.intermediate_size,
        rope_theta: c.rope_theta,
        rms_norm_eps: c.rms_norm_eps,
    }
}

/// Random drafter weights of the target's shape, named as `train_eagle` saves them (`scale`:
/// the spread of the matrices; large enough that the drafts vary with the features).
fn random_tensors(model: &Llama, seed: u64, scale: f32) -> FeatureTensors {
    let c = model.config();
    let (d, q, kv, m) = (c.hidden_size, c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim, c.intermediate_size);
    let shapes: [Vec<usize>; 12] = [
        vec![d, 2 * d],
        vec![d],
        vec![d],
        vec![q, d],
        vec![kv, d],
        vec![kv, d],
        vec![d, q],
        vec![d],
        vec![m, d],
        vec![m, d],
        vec![d, m],
        vec![d],
    ];
    let mut rng = StdRng::seed_from_u64(seed);
    EAGLE_TENSORS
        .iter()
        .zip(shapes)
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let values = if shape.len() == 1 && *name != "fc.bias" {
                (0..n).map(|_| 1.0 + 0.2 * (rng.random::<f32>() - 0.5)).collect()
            } else {
                (0..n).map(|_| scale * (rng.random::<f32>() - 0.5)).collect()
            };
            (name.to_string(), (shape, values))
        })
        .collect()
}

fn info(model: &Llama) -> EagleInfo {
    let c = model.config();
    EagleInfo {
        model_fingerprint: model_fingerprint(c.vocab_size, c.hidden_size, &model.lm_head_rows().unwrap()),
        hidden_size: c.hidden_size,
        layers: 1,
        corpus: "test".into(),
        data_digest: "0".repeat(64),
        positions: 10,
        epochs: 1,
        window: 8,
        ce_shortlist: 16,
        loss_log: vec![1.5, 1.25],
        valid_accuracy: vec![0.5, 0.75],
    }
}

#[test]
fn the_native_feature_model_runs_the_drafter_as_trained() {
    let model = model();
    let d = model.config().hidden_size;
    let tensors = random_tensors(&model, 1, 0.3);
    let weights = EagleWeights {
        tensors: tensors.iter().map(|(n, (s, v))| (n.clone(), s.clone(), v.clone())).collect(),
        loss_log: vec![],
        valid_loss_log: vec![],
        valid_accuracy_log: vec![],
        seconds: 0.0,
    };
    let (embeddings, head, norm) =
        (model.embedding_rows().unwrap(), model.lm_head_rows().unwrap(), model.final_norm_weight().unwrap());
    let frozen =
        EagleFrozen { embeddings: &embeddings, head: &head, vocab_size: VOCAB, shortlist: &[3], final_norm: &norm };
    let tokens = [5u32, 17, 260, 3, 99, 140, 7];
    let mut rng = StdRng::seed_from_u64(2);
    let features: Vec<f32> = (0..tokens.len() * d).map(|_| rng.random::<f32>() * 2.0 - 1.0).collect();
    let reference = eagle_forward_host(&weights, &frozen, &shape(&model), &tokens, &features, 0).unwrap();

    let feature = model.feature_model(&tensors, 1, None).unwrap();
    // In one pass, and position by position against the drafter's own cache.
    let whole = feature.forward(&tokens, &features, &mut feature.new_cache(), tokens.len()).unwrap();
    let mut cache = feature.new_cache();
    let mut stepwise = Vec::new();
    for (i, &t) in tokens.iter().enumerate() {
        stepwise.extend(feature.forward(&[t], &features[i * d..(i + 1) * d], &mut cache, 1).unwrap());
    }
    for (name, got) in [("one pass", &whole), ("position by position", &stepwise)] {
        let worst = got.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "{name}: largest difference {worst}");
    }
    // Not vacuous: the output depends on the features and on the earlier positions.
    let mut other = features.clone();
    other[0] += 1.0;
    let moved = feature.forward(&tokens, &other, &mut feature.new_cache(), tokens.len()).unwrap();
    assert!((moved[moved.len() - 1] - whole[whole.len() - 1]).abs() > 1e-5);

    // q8_0 storage stays close to the f32 drafter.
    let quantized = model.feature_model(&tensors, 1, Some(anyspec_models::WeightFormat::Q8_0)).unwrap();
    let q = quantized.forward(&tokens, &features, &mut quantized.new_cache(), tokens.len()).unwrap();
    let worst = q.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst < 0.05, "q8_0: largest difference {worst}");
    assert!(quantized.weight_bytes() * 3 < feature.weight_bytes(), "q8_0 holds about a quarter of the bytes");
}

#[test]
fn bad_drafter_weights_and_engines_are_refused_with_the_problem_named() {
    let model = model();
    let mut tensors = random_tensors(&model, 1, 0.3);
    let err = model.feature_model(&tensors, 2, None).unwrap_err().to_string();
    assert!(err.contains("layers.1"), "{err}");
    let two_layers = {
        let mut t = tensors.clone();
        let extra: Vec<_> = t
            .iter()
            .filter(|(n, _)| n.starts_with("layers.0."))
            .map(|(n, v)| (n.replace("layers.0.", "layers.1."), v.clone()))
            .collect();
        t.extend(extra);
        t
    };
    let err = model.feature_model(&two_layers, 1, None).unwrap_err().to_string();
    assert!(err.contains("more than the 1 layers"), "{err}");
    tensors.get_mut("fc.weight").unwrap().0 = vec![64, 64];
    let err = model.feature_model(&tensors, 1, None).unwrap_err().to_string();
    assert!(err.contains("fc.weight") && err.contains("[64, 64]"), "{err}");
    tensors.remove("norm.weight");
    let good = random_tensors(&model, 1, 0.3);
    assert!(model.feature_model(&tensors, 1, None).is_err());
    let err = load(Engine::Burn).feature_model(&good, 1, None).unwrap_err().to_string();
    assert!(err.contains("native"), "{err}");
    let feature = model.feature_model(&good, 1, None).unwrap();
    let err = feature.forward(&[1, 2], &[0.0; 64], &mut feature.new_cache(), 1).unwrap_err().to_string();
    assert!(err.contains("128 feature values"), "{err}");
}

#[test]
fn the_artifact_round_trips_and_is_refused_for_another_target_or_when_damaged() {
    let model = model();
    // Stored as f16: values that are f16 numbers come back exactly.
    let mut tensors = random_tensors(&model, 3, 0.3);
    for (_, values) in tensors.values_mut() {
        values.iter_mut().for_each(|v| *v = half::f16::from_f32(*v).to_f32());
    }
    let file = EagleFile { info: info(&model), tensors };
    let dir = std::env::temp_dir().join(format!("anyspec-eagle-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("eagle.safetensors");
    file.save(&path).unwrap();
    assert_eq!(
        anyspec_core::artifact::ArtifactKind::of_file(&path).unwrap(),
        Some(anyspec_core::artifact::ArtifactKind::FeatureDrafter)
    );
    let back = EagleFile::load(&path, &file.info.model_fingerprint).unwrap();
    assert_eq!(back, file);
    assert_eq!(back.to_bytes(), file.to_bytes(), "the bytes are deterministic");
    let err = EagleFile::load(&path, &"f".repeat(64)).unwrap_err().to_string();
    assert!(err.contains("another model") || err.contains("built for"), "{err}");
    let mut bytes = file.to_bytes();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let err = EagleFile::from_bytes(&bytes, &path).unwrap_err().to_string();
    assert!(err.contains("checksum"), "{err}");
    let err = EagleFile::from_bytes(b"ANYSPDIC and more", &path).unwrap_err().to_string();
    assert!(err.contains("dictionary"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A toy router over the drafter's features, random weights: 8 clusters, one per token of the
/// toy target's support, one for EOS and one for everything else, so that its shortlists hold
/// a context-dependent part of the support, and EOS, which the target never emits.
fn toy_dynamic(model: &Llama) -> DynamicShortlister {
    let m = 8;
    let assignment = (0..VOCAB as u32)
        .map(|t| match SUPPORT.iter().position(|&x| x == t) {
            Some(i) => i as u32,
            None if t == EOS => 6,
            None => 7,
        })
        .collect();
    let clusters = Clusters::from_assignment(assignment, m).unwrap();
    let (d, h) = (2 * model.config().hidden_size, 8);
    let mut rng = StdRng::seed_from_u64(9);
    let mut random = |n: usize| (0..n).map(|_| rng.random::<f32>() - 0.5).collect::<Vec<f32>>();
    // The cluster of all other tokens is never routed: the drafts are then mostly tokens the
    // target may emit (or EOS, which it never does), so many are accepted and many rejected.
    let mut b2 = random(m);
    b2[7] = -100.0;
    let router = Router::new(d, h, m, random(h * d), random(h), random(m * h), b2).unwrap();
    DynamicShortlister::new(clusters, router, ClusterBudget::PositionAware { k0: 4, k1: 2 }, &[EOS]).unwrap()
}

#[test]
fn greedy_eagle_drafting_is_the_targets_own_output_under_every_head_policy() {
    let model = model();
    let feature = model.feature_model(&random_tensors(&model, 4, 0.6), 1, None).unwrap();
    let config = GenerationConfig {
        gamma: 4,
        max_new_tokens: 40,
        sampling: SamplingConfig::greedy(),
        ..GenerationConfig::default()
    };
    let prompt = [1u32, 54, 260, 223, 83, 87, 75, 69, 77, 278];
    let mut rng = StdRng::seed_from_u64(0);
    let plain = generate(&mut LlamaTarget::new(model.clone()), None, &prompt, &config, &mut rng, &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap();
    let ranking: Vec<u32> = (0..VOCAB as u32).rev().collect();
    let policies = [
        HeadPolicy::Full,
        HeadPolicy::Frequency(
            FrequencyShortlister::new(&ranking, VOCAB, TokenBudget::Fixed { k: 100 }, &[EOS]).unwrap(),
        ),
        HeadPolicy::Dynamic(Box::new(toy_dynamic(&model))),
    ];
    for policy in policies {
        let tap = FeatureTap::new();
        let mut drafter = ShortlistDrafter::features(feature.clone(), tap.clone(), policy, None).unwrap();
        // Two prompts in a row through the same drafter and tap, as the demo runs them.
        for _ in 0..2 {
            let mut target = LlamaTarget::new(model.clone()).with_feature_tap(tap.clone());
            let out = generate(&mut target, Some(&mut drafter), &prompt, &config, &mut rng, &mut |_| {
                ControlFlow::Continue(())
            })
            .unwrap();
            assert_eq!(out.tokens, plain.tokens);
            assert!(out.stats.drafted > 0, "the drafter drafted once the target had scored the prompt");
        }
        assert!(drafter.stats().positions > 0);
    }
    // A target that does not share the tap leaves the drafter nothing to draft from.
    let mut drafter = ShortlistDrafter::features(feature, FeatureTap::new(), HeadPolicy::Full, None).unwrap();
    let out = generate(&mut LlamaTarget::new(model), Some(&mut drafter), &prompt, &config, &mut rng, &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!((out.tokens, out.stats.drafted), (plain.tokens, 0));
}

/// The greedy draft of `k` tokens from the pairs `(x_{i+1}, f_i)`, `i` in `from..n − 1`, run
/// in a fresh cache: what a drafter whose attention starts at pair `from` must propose.
fn draft_from_pairs(feature: &FeatureModel, context: &[u32], features: &[f32], from: usize, k: usize) -> Vec<u32> {
    let d = feature.hidden_size();
    let n = context.len();
    let mut cache = feature.new_cache();
    let rows = feature.forward(&context[from + 1..], &features[from * d..(n - 1) * d], &mut cache, 1).unwrap();
    let (mut predicted, mut out) = (rows, Vec::new());
    for t in 0..k {
        let logits = feature.target().logits_of_hidden(&predicted, None).unwrap();
        let token = anyspec_core::sampling::argmax(&logits);
        out.push(token);
        if t + 1 < k {
            predicted = feature.forward(&[token], &predicted, &mut cache, 1).unwrap();
        }
    }
    out
}

#[test]
fn a_drafter_trained_on_short_windows_attends_within_one() {
    let model = model();
    let d = model.config().hidden_size;
    let plain = model.feature_model(&random_tensors(&model, 7, 0.6), 1, None).unwrap();
    let windowed = plain.clone().with_attention_window(8);
    assert_eq!((plain.attention_window(), windowed.attention_window()), (None, Some(8)));
    let mut rng = StdRng::seed_from_u64(8);
    let context: Vec<u32> = (0..40).map(|_| rng.random_range(3..VOCAB as u32)).collect();
    let features: Vec<f32> = (0..context.len() * d).map(|_| rng.random::<f32>() * 2.0 - 1.0).collect();
    let tap = FeatureTap::new();
    tap.record(0, d, &features);
    let greedy = SamplingConfig::greedy();
    let mut drafter = ShortlistDrafter::features(windowed.clone(), tap.clone(), HeadPolicy::Full, None).unwrap();
    let mut unlimited = ShortlistDrafter::features(plain.clone(), tap.clone(), HeadPolicy::Full, None).unwrap();
    // Window 8, drafts of 2: the cache restarts from the last min(8 / 2, 8 − 2) = 4 true pairs
    // whenever the true pairs since the start plus the draft would pass 8.
    let (k, keep) = (2, 4);
    let mut base = None;
    for n in [12usize, 13, 15, 16, 17, 30, 31] {
        let ctx = &context[..n];
        let true_pairs = n - 1;
        let start = match base {
            Some(b) if true_pairs - b + k <= 8 => b,
            _ => true_pairs - keep,
        };
        base = Some(start);
        let got = drafter.propose(ctx, k, &greedy, &mut rng).unwrap().tokens;
        assert_eq!(
            got,
            draft_from_pairs(&windowed, ctx, &features, start, k),
            "context of {n}, window from pair {start}"
        );
        // Without a window the drafter attends to every pair from the first.
        let all = unlimited.propose(ctx, k, &greedy, &mut rng).unwrap().tokens;
        assert_eq!(all, draft_from_pairs(&plain, ctx, &features, 0, k), "context of {n}, no window");
    }
}

#[test]
fn chats_are_read_whole_and_trained_from_just_before_the_answer() {
    let model = model();
    let mut rng = StdRng::seed_from_u64(11);
    // Ten chats: prompts of 5..=40 tokens, answers of 4..=30; the fixture's context is 128.
    let chats: Vec<EagleChat> = (0..10)
        .map(|_| {
            let (prompt, answer) = (rng.random_range(5..=40), rng.random_range(4..=30));
            let tokens = (0..prompt + answer).map(|_| rng.random_range(3..VOCAB as u32)).collect();
            EagleChat { tokens, answer_start: prompt }
        })
        .collect();
    let params = |prompt_context| EagleBuildParams {
        prompt_context,
        ce_shortlist: 64,
        max_positions: 1 << 20,
        valid_every: 5,
        train: EagleTrainConfig { window: 16, batch_size: 4, epochs: 1, ..EagleTrainConfig::default() },
        ..EagleBuildParams::default()
    };
    for prompt_context in [1, 8, 64] {
        let (file, report) = build_eagle_on_chats(&model, &chats, &params(prompt_context), &anyspec_core::NoProgress)
            .unwrap_or_else(|e| panic!("prompt context {prompt_context}: {e}"));
        // Every fifth chat is held out; each keeps its answer and at most `prompt_context`
        // positions of its prompt.
        let kept = |c: &EagleChat| c.tokens.len() - c.answer_start.saturating_sub(prompt_context);
        let valid: usize = chats.iter().skip(4).step_by(5).map(kept).sum();
        let all: usize = chats.iter().map(kept).sum();
        assert_eq!((report.train_positions, report.valid_positions), (all - valid, valid), "{prompt_context}");
        assert_eq!(file.info.positions, all - valid);
    }
    // A chat past the model's context, or without a prompt or an answer: named, before any work.
    let mut long = chats.clone();
    long[3].tokens = (0..129).map(|i| 3 + i % 300).collect();
    let err = build_eagle_on_chats(&model, &long, &params(8), &anyspec_core::NoProgress).unwrap_err().to_string();
    assert!(err.contains("chat 4 has 129 tokens") && err.contains("context of 128"), "{err}");
    for answer_start in [0, chats[2].tokens.len()] {
        let mut bad = chats.clone();
        bad[2].answer_start = answer_start;
        let err = build_eagle_on_chats(&model, &bad, &params(8), &anyspec_core::NoProgress).unwrap_err().to_string();
        assert!(err.contains("chat 3 has no prompt or no answer"), "{err}");
    }
}

/// A toy target whose "features" are a fixed function of the token at each position, recorded
/// into the tap as `LlamaTarget` records its hidden states, so that the drafter's proposals
/// vary with the context while the exact output distribution is known.
struct FeatureMarkov {
    inner: MarkovTarget,
    tap: FeatureTap,
    table: Vec<f32>,
    width: usize,
}

impl Target for FeatureMarkov {
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    fn score(&mut self, sequence: &[u32], draft_len: usize) -> anyspec_core::Result<Vec<Vec<f32>>> {
        let rows: Vec<f32> = sequence
            .iter()
            .flat_map(|&t| self.table[t as usize * self.width..(t as usize + 1) * self.width].to_vec())
            .collect();
        self.tap.record(0, self.width, &rows);
        self.inner.score(sequence, draft_len)
    }

    fn rollback(&mut self, len: usize) -> anyspec_core::Result<()> {
        self.tap.truncate(len);
        self.inner.rollback(len)
    }
}

const SUPPORT: [u32; 6] = [10, 21, 32, 43, 54, 65];
const LENGTH: usize = 3;

fn target_chain(seed: u64) -> MarkovChain {
    let mut rng = StdRng::seed_from_u64(seed);
    let rows = (0..VOCAB)
        .map(|_| {
            let w: Vec<f64> = SUPPORT.iter().map(|_| 0.2 + rng.random::<f64>()).collect();
            let total: f64 = w.iter().sum();
            let mut row = vec![0.0f32; VOCAB];
            for (&t, w) in SUPPORT.iter().zip(&w) {
                row[t as usize] = (w / total) as f32;
            }
            row
        })
        .collect();
    MarkovChain::new(rows).unwrap()
}

fn exact(chain: &MarkovChain, sampling: &SamplingConfig) -> Vec<f64> {
    let s = SUPPORT.len();
    let transformed = chain.transformed(sampling).unwrap();
    (0..s.pow(LENGTH as u32))
        .map(|i| {
            let tokens: Vec<u32> = (0..LENGTH).map(|k| SUPPORT[(i / s.pow(k as u32)) % s]).collect();
            transformed.sequence_probability(10, &tokens).unwrap()
        })
        .collect()
}

#[test]
fn sampled_eagle_drafting_emits_the_target_distribution() {
    let model = model();
    let d = model.config().hidden_size;
    let feature = model.feature_model(&random_tensors(&model, 5, 0.6), 1, None).unwrap();
    let chain = target_chain(3);
    let sampling = SamplingConfig::new(0.9, None, 1.0).unwrap();
    let tap = FeatureTap::new();
    let mut rng = StdRng::seed_from_u64(6);
    let table: Vec<f32> = (0..VOCAB * d).map(|_| rng.random::<f32>() * 2.0 - 1.0).collect();
    let mut target =
        FeatureMarkov { inner: MarkovTarget::new(chain.clone()).unwrap(), tap: tap.clone(), table, width: d };
    let policy = HeadPolicy::Dynamic(Box::new(toy_dynamic(&model)));
    let mut drafter = ShortlistDrafter::features(feature, tap, policy, None).unwrap();
    let config = GenerationConfig {
        gamma: 3,
        max_new_tokens: LENGTH,
        sampling: sampling.clone(),
        ..GenerationConfig::default()
    };
    let mut counts = vec![0u64; SUPPORT.len().pow(LENGTH as u32)];
    let mut stats = anyspec_core::Stats::default();
    let prompt = [1u32, 54, 260, 10];
    for _ in 0..6_000 {
        let out =
            generate(&mut target, Some(&mut drafter), &prompt, &config, &mut rng, &mut |_| ControlFlow::Continue(()))
                .unwrap();
        stats.merge(&out.stats);
        let cell = out
            .tokens
            .iter()
            .rev()
            .fold(0, |acc, t| acc * SUPPORT.len() + SUPPORT.iter().position(|x| x == t).unwrap());
        counts[cell] += 1;
    }
    let test = g_test(&counts, &exact(&chain, &sampling)).unwrap();
    assert!(test.p_value > PASS_P_VALUE, "{test:?}");
    // Not vacuous: drafts were accepted and rejected.
    assert!(stats.accepted > 200 && stats.rejected > 200, "{stats:?}");
    // The same harness has power: the histogram against another chain's probabilities fails.
    let wrong = g_test(&counts, &exact(&target_chain(4), &sampling)).unwrap();
    assert!(wrong.p_value < POWER_P_VALUE, "{wrong:?}");
}
