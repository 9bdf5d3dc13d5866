//! The WGPU code path against the CPU one (flex) on the committed fixtures: logits of a full
//! forward, of k-token verification and of a token tree (tree attention), device verification
//! verdicts, and greedy generation.
//!
//! Runs only with `--features wgpu`; CI installs Mesa's software Vulkan driver (lavapipe) so
//! these run without a GPU.
//!
//! Tolerance: both backends compute in f32 and differ only in accumulation order (matmul tiling,
//! reductions). Each matches transformers within 1e-4 at every position (the conformance tests;
//! measured 1.05e-5 on flex), so the two are asserted to agree within the same 1e-4 with each
//! other and with transformers.
#![cfg(feature = "wgpu")]

use std::ops::ControlFlow;

use anyspec_core::engine::Target;
use anyspec_core::sampling::argmax;
use anyspec_core::{DeterministicRule, Draft, DraftOrigin, Drafter, GenerationConfig, SamplingConfig, generate};
use anyspec_kernels::readback::read_rows;
use anyspec_models::{Checkpoint, DeviceChoice, Llama, LlamaTarget, Session, TreeNode, Verification};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

#[path = "it/common.rs"]
#[allow(dead_code)]
mod common;

use common::{FIXTURES, fixture_dir, max_abs_diff, reference};

const TOLERANCE: f32 = 1e-4;

fn load_on(name: &str, choice: DeviceChoice) -> Llama {
    let device = choice.device().unwrap();
    Checkpoint::open(fixture_dir(name)).unwrap().load_model(&device).unwrap()
}

fn both(name: &str) -> [Llama; 2] {
    [load_on(name, DeviceChoice::Cpu), load_on(name, DeviceChoice::Wgpu)]
}

#[test]
fn full_forward_logits_agree_between_cpu_and_wgpu() {
    for name in FIXTURES {
        let reference = reference(name);
        let ids = &reference.input_ids;
        let [cpu, gpu] = both(name).map(|model| {
            let mut cache = model.new_cache();
            read_rows(model.forward(ids, &mut cache, ids.len()).unwrap()).unwrap()
        });
        let diff = max_abs_diff(&gpu, &cpu);
        assert!(diff <= TOLERANCE, "{name}: cpu vs wgpu max |Δ| = {diff}");
        let diff = max_abs_diff(&gpu, &reference.logits);
        assert!(diff <= TOLERANCE, "{name}: wgpu vs transformers max |Δ| = {diff}");
    }
}

#[test]
fn pruned_head_logits_on_wgpu_are_the_full_logits_at_the_kept_ids() {
    // On wgpu the burn engine keeps no copy of the kept rows: the gathered head kernel of
    // anyspec-kernels reads them in place. Out of order, with a repeat.
    let kept: Vec<u32> = vec![300, 5, 1, 5, 17, 0];
    for name in FIXTURES {
        let reference = reference(name);
        let ids = &reference.input_ids;
        let [cpu, gpu] = both(name).map(|model| {
            let head = model.pruned_head(&kept).unwrap();
            let mut cache = model.new_cache();
            read_rows(model.forward_pruned(ids, &mut cache, ids.len(), &head).unwrap()).unwrap()
        });
        let diff = max_abs_diff(&gpu, &cpu);
        assert!(diff <= TOLERANCE, "{name}: cpu vs wgpu pruned logits max |Δ| = {diff}");
        for (position, (row, full)) in gpu.iter().zip(&reference.logits).enumerate() {
            for (j, &id) in kept.iter().enumerate() {
                let delta = (row[j] - full[id as usize]).abs();
                assert!(delta <= TOLERANCE, "{name}: position {position}, kept id {id}: |Δ| = {delta}");
            }
        }
    }
}

#[test]
fn auto_verification_treats_wgpu_as_a_device_and_the_cpu_as_the_host() {
    assert!(!anyspec_kernels::is_host_device(&DeviceChoice::Wgpu.device().unwrap()));
    assert!(anyspec_kernels::is_host_device(&DeviceChoice::Cpu.device().unwrap()));
}

#[test]
fn token_tree_logits_agree_between_cpu_and_wgpu() {
    // A branchy tree below a 6-token prefix (the mistral fixture's window of 5 cuts through it).
    let parents = [None, Some(0), Some(0), Some(1), Some(1), Some(2), None, Some(6), Some(3), Some(8)];
    let nodes: Vec<TreeNode> =
        parents.iter().enumerate().map(|(i, &parent)| TreeNode { token: (37 * i as u32 + 11) % 320, parent }).collect();
    let rows: Vec<usize> = (0..nodes.len()).collect();
    for name in FIXTURES {
        let prefix = &reference(name).input_ids[..6];
        let [cpu, gpu] = both(name).map(|model| {
            let mut cache = model.new_cache();
            model.forward(prefix, &mut cache, 1).unwrap();
            read_rows(model.forward_tree(&nodes, &rows, &cache, None).unwrap()).unwrap()
        });
        let diff = max_abs_diff(&gpu, &cpu);
        assert!(diff <= TOLERANCE, "{name}: cpu vs wgpu tree logits max |Δ| = {diff}");
    }
}

#[test]
fn k_token_verification_logits_agree_between_cpu_and_wgpu() {
    for name in FIXTURES {
        let reference = reference(name);
        let ids = &reference.input_ids;
        for k in [1, 3, 5, 8] {
            // Prefill 4 tokens, then score k tokens per pass; after each pass roll back two
            // positions (a rejection) and rescore them with the next chunk.
            let [cpu, gpu] = both(name).map(|model| {
                let mut cache = model.new_cache();
                let mut rows = read_rows(model.forward(&ids[..4], &mut cache, 4).unwrap()).unwrap();
                let mut start = 4;
                while start < ids.len() {
                    let end = (start + k).min(ids.len());
                    let scored = read_rows(model.forward(&ids[start..end], &mut cache, end - start).unwrap()).unwrap();
                    rows.truncate(start);
                    rows.extend(scored);
                    if end == ids.len() {
                        break;
                    }
                    let rollback = if end - start > 2 { 2 } else { 0 };
                    cache.truncate(end - rollback);
                    start = end - rollback;
                }
                rows
            });
            assert_eq!(cpu.len(), ids.len());
            let diff = max_abs_diff(&gpu, &cpu);
            assert!(diff <= TOLERANCE, "{name}, k = {k}: cpu vs wgpu max |Δ| = {diff}");
        }
    }
}

#[test]
fn device_verification_verdicts_agree_between_cpu_and_wgpu() {
    // The same uniforms (same seed) on both devices: the fused CubeCL kernel on wgpu and the
    // tensor-op reference on flex must reach the same verdicts. Drafts are the transformers
    // greedy continuation (mostly accepted) and a shifted one (mostly rejected), deterministic
    // and sampled from a flattened copy of the target's own distribution.
    let name = "llama3-gqa";
    let reference = reference(name);
    let ids = &reference.input_ids[..10];
    let vocab = load_on(name, DeviceChoice::Cpu).config().vocab_size;
    let mut targets = both(name).map(|model| LlamaTarget::new(model).with_verification(Verification::Device));
    let mut draft_rng = StdRng::seed_from_u64(99);
    let mut checked = [0usize; 2];
    for step in 0..24 {
        let gamma = 1 + step % 4;
        let tokens: Vec<u32> = if step % 3 == 0 {
            reference.greedy[..gamma].to_vec()
        } else {
            (0..gamma).map(|_| draft_rng.random_range(0..vocab as u32)).collect()
        };
        let draft = if step % 2 == 0 {
            Draft::deterministic(tokens.clone())
        } else {
            // A near-uniform draft distribution that gives every token mass.
            let distributions = (0..gamma)
                .map(|_| {
                    let raw: Vec<f32> = (0..vocab).map(|_| 0.5 + draft_rng.random::<f32>()).collect();
                    let total: f32 = raw.iter().sum();
                    raw.iter().map(|w| w / total).collect()
                })
                .collect();
            Draft {
                tokens: tokens.clone(),
                origin: DraftOrigin::Sampled { distributions, outside_target: None },
                confidence_class: None,
            }
        };
        let temperature = [1.0, 0.7, 0.0][step % 3];
        let sampling = if temperature == 0.0 {
            SamplingConfig::greedy()
        } else {
            SamplingConfig::new(temperature, None, 1.0).unwrap()
        };
        let mut sequence = ids.to_vec();
        sequence.extend_from_slice(&tokens);
        let [cpu, gpu] = [0, 1].map(|k| {
            let mut rng = StdRng::seed_from_u64(1000 + step as u64);
            let verdict =
                targets[k].verify(&sequence, &draft, &sampling, DeterministicRule::PointMass, &mut rng).unwrap();
            targets[k].rollback(ids.len()).unwrap();
            verdict
        });
        assert_eq!(gpu, cpu, "step {step}: γ = {gamma}, T = {temperature}, draft {:?}", draft.origin);
        checked[usize::from(cpu.bonus)] += 1;
    }
    assert!(checked[0] > 0 && checked[1] > 0, "both outcomes exercised: {checked:?}");
}

/// A greedy drafter over the model itself that corrupts every fifth proposal, so that
/// temperature-0 speculative decoding sees both acceptances and rejections.
struct CorruptedGreedyDrafter {
    session: Session,
    proposed: usize,
}

impl Drafter for CorruptedGreedyDrafter {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        _sampling: &SamplingConfig,
        _rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        let vocab = self.session.model().config().vocab_size as u32;
        let mut sequence = context.to_vec();
        let mut tokens = Vec::new();
        for _ in 0..max_tokens {
            let rows =
                self.session.logits_on_host(&sequence, 1).map_err(|e| anyspec_core::Error::Drafter(Box::new(e)))?;
            let mut token = argmax(&rows[0]);
            self.proposed += 1;
            if self.proposed.is_multiple_of(5) {
                token = (token + 1) % vocab;
            }
            tokens.push(token);
            sequence.push(token);
        }
        Ok(Draft::deterministic(tokens))
    }
}

#[test]
fn greedy_generation_is_identical_on_cpu_and_wgpu() {
    for name in FIXTURES {
        let reference = reference(name);
        let config = GenerationConfig {
            gamma: 4,
            max_new_tokens: reference.greedy.len(),
            sampling: SamplingConfig::greedy(),
            ..GenerationConfig::default()
        };
        for speculative in [false, true] {
            let [cpu, gpu] = [DeviceChoice::Cpu, DeviceChoice::Wgpu].map(|choice| {
                let mut target = LlamaTarget::new(load_on(name, choice));
                let mut drafter = CorruptedGreedyDrafter { session: Session::new(load_on(name, choice)), proposed: 0 };
                let drafter = speculative.then_some(&mut drafter as &mut dyn Drafter);
                let mut rng = StdRng::seed_from_u64(0);
                let out = generate(&mut target, drafter, &reference.input_ids, &config, &mut rng, &mut |_| {
                    ControlFlow::Continue(())
                })
                .unwrap();
                out.tokens
            });
            assert_eq!(gpu, cpu, "{name}, speculative = {speculative}");
            assert_eq!(gpu, reference.greedy, "{name}, speculative = {speculative}");
        }
    }
}
