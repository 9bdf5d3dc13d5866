//! Device-side verification against the host rule of anyspec-core, driven by the same uniforms.

use std::collections::VecDeque;

use anyspec_core::SamplingConfig;
use anyspec_core::sampling::logits_to_probs;
use anyspec_core::verify::{speculative_sampling, speculative_sampling_point_mass};
use anyspec_kernels::readback::read_rows;
use anyspec_kernels::{Error, Uniforms, device_probs, verify_on_device};
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

#[cfg(feature = "wgpu")]
mod fused;
mod gathered_head;

/// An RNG whose `random::<f64>()` returns prepared values (rand 0.9 turns the top 53 bits of
/// `next_u64` into `k · 2⁻⁵³`), so the host rule can be fed exactly the uniforms the device used.
struct ScriptedRng(VecDeque<u64>);

impl ScriptedRng {
    fn new(values: &[f64]) -> Self {
        ScriptedRng(values.iter().map(|&u| ((u * (1u64 << 53) as f64) as u64) << 11).collect())
    }
}

impl RngCore for ScriptedRng {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0.pop_front().expect("the host rule asked for more uniforms than the script holds")
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// A uniform on the 2⁻⁵³ grid that `ScriptedRng` reproduces exactly.
fn uniform(rng: &mut StdRng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

fn random_distribution(rng: &mut StdRng, vocab: usize, sharpness: f64) -> Vec<f32> {
    let logits: Vec<f32> = (0..vocab).map(|_| (rng.random::<f64>() * sharpness) as f32).collect();
    logits_to_probs(&logits, &SamplingConfig::default()).unwrap()
}

fn draw(rng: &mut StdRng, probs: &[f32]) -> u32 {
    anyspec_core::sampling::sample(probs, rng).unwrap()
}

fn upload(rows: &[Vec<f32>], device: &Device) -> Tensor<2> {
    let cols = rows.first().map_or(0, Vec::len);
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    Tensor::from_data(TensorData::new(flat, [rows.len(), cols]), device)
}

/// The uniforms the host rule consumes for these inputs, in its order: one per drafted token
/// where `p < q` (until the first rejection), then the residual one.
fn host_script(p: &[Vec<f32>], q: Option<&[Vec<f32>]>, tokens: &[u32], uniforms: &Uniforms) -> Vec<f64> {
    let mut script = Vec::new();
    for (j, &token) in tokens.iter().enumerate() {
        let p_t = f64::from(p[j][token as usize]);
        let q_t = q.map_or(1.0, |q| f64::from(q[j][token as usize]));
        if p_t >= q_t {
            continue;
        }
        script.push(uniforms.accept[j]);
        if uniforms.accept[j] * q_t >= p_t {
            break;
        }
    }
    script.push(uniforms.residual);
    script
}

#[test]
fn device_verdicts_equal_the_host_rule_given_the_same_uniforms() {
    let device = Device::flex();
    let mut rng = StdRng::seed_from_u64(11);
    let mut checked = [0usize; 2];
    for case in 0..400 {
        let vocab = 8 + case % 40;
        let gamma = case % 7;
        let sharp = [1.0, 4.0, 12.0][case % 3];
        let p: Vec<Vec<f32>> = (0..=gamma).map(|_| random_distribution(&mut rng, vocab, sharp)).collect();
        let q: Vec<Vec<f32>> = (0..gamma).map(|_| random_distribution(&mut rng, vocab, sharp)).collect();
        let sampled = case % 2 == 0;
        // Sampled drafts come from q; deterministic ones from p (so some get accepted).
        let tokens: Vec<u32> =
            (0..gamma).map(|j| if sampled { draw(&mut rng, &q[j]) } else { draw(&mut rng, &p[j]) }).collect();
        let uniforms =
            Uniforms { accept: (0..gamma).map(|_| uniform(&mut rng)).collect(), residual: uniform(&mut rng) };

        let q_device = sampled.then(|| upload(&q, &device));
        let ours = verify_on_device(upload(&p, &device), &tokens, q_device, &uniforms).unwrap();
        let script = host_script(&p, sampled.then_some(q.as_slice()), &tokens, &uniforms);
        let mut scripted = ScriptedRng::new(&script);
        let host = if sampled {
            speculative_sampling(&p, &tokens, &q, &mut scripted).unwrap()
        } else {
            speculative_sampling_point_mass(&p, &tokens, &mut scripted).unwrap()
        };
        assert_eq!(ours, host, "case {case}: γ = {gamma}, vocab = {vocab}, sampled = {sampled}");
        checked[usize::from(ours.bonus)] += 1;
    }
    // Both outcomes were exercised.
    assert!(checked[0] > 50 && checked[1] > 50, "{checked:?}");
}

#[test]
fn device_probabilities_equal_the_host_transform() {
    let device = Device::flex();
    let mut rng = StdRng::seed_from_u64(5);
    let logits: Vec<Vec<f32>> =
        (0..4).map(|_| (0..33).map(|_| (rng.random::<f64>() * 8.0 - 4.0) as f32).collect()).collect();
    for sampling in [SamplingConfig::default(), SamplingConfig::new(0.6, None, 1.0).unwrap(), SamplingConfig::greedy()]
    {
        let ours = read_rows(device_probs(upload(&logits, &device), &sampling).unwrap()).unwrap();
        for (row, logits) in ours.iter().zip(&logits) {
            let host = logits_to_probs(logits, &sampling).unwrap();
            let diff = row.iter().zip(&host).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(diff < 1e-6, "{sampling:?}: max |Δ| = {diff}");
        }
    }
    let truncated = SamplingConfig::new(1.0, Some(5), 1.0).unwrap();
    assert!(matches!(device_probs(upload(&logits, &device), &truncated), Err(Error::Unsupported(_))));
}

#[test]
fn malformed_inputs_are_errors_not_panics() {
    let device = Device::flex();
    let p = vec![vec![0.5, 0.5]; 2];
    let one = Uniforms { accept: vec![0.5], residual: 0.5 };
    // Wrong number of target rows.
    assert!(matches!(verify_on_device(upload(&p, &device), &[0, 1], None, &one), Err(Error::Shape { .. })));
    // A token outside the vocabulary.
    assert!(matches!(
        verify_on_device(upload(&p, &device), &[7], None, &one),
        Err(Error::TokenOutOfRange { token: 7, vocab_size: 2 })
    ));
    // A drafted token the draft distribution cannot produce.
    let q = vec![vec![0.0, 1.0]];
    assert!(matches!(
        verify_on_device(upload(&p, &device), &[0], Some(upload(&q, &device)), &one),
        Err(Error::DraftTokenImpossible { position: 0, token: 0 })
    ));
    // NaN probabilities (from NaN logits) are reported, not sampled.
    let nan = vec![vec![f32::NAN, 0.5]];
    let err = verify_on_device(upload(&nan, &device), &[], None, &Uniforms { accept: vec![], residual: 0.3 });
    assert!(err.is_err(), "{err:?}");
}

#[test]
fn the_residual_never_returns_the_rejected_point_mass_token() {
    let device = Device::flex();
    // p puts 0.3 on the drafted token 2; u = 0.9 rejects it; the residual excludes token 2.
    let p = vec![vec![0.2, 0.5, 0.3], vec![1.0, 0.0, 0.0]];
    for k in 0..50 {
        let uniforms = Uniforms { accept: vec![0.9], residual: f64::from(k) / 50.0 };
        let verdict = verify_on_device(upload(&p, &device), &[2], None, &uniforms).unwrap();
        assert_eq!(verdict.accepted, 0);
        assert_ne!(verdict.next_token, 2);
    }
}

#[test]
fn the_packed_reference_rows_hold_flags_samples_and_totals() {
    use anyspec_kernels::{AcceptanceInputs, acceptance_reference, read_acceptance};
    let device = Device::flex();
    let p = vec![vec![0.2, 0.7, 0.1], vec![0.3, 0.3, 0.4]];
    let uniforms = Uniforms { accept: vec![0.5], residual: 0.9 };
    let inputs = AcceptanceInputs::new(upload(&p, &device), &[1], None, &uniforms).unwrap();
    let rows = read_acceptance(acceptance_reference(inputs)).unwrap();
    // Row 0: 0.5 · 1 < 0.7 accepts; residual [0.2, 0, 0.1] has mass 0.3 and 0.9 · 0.3 lies past
    // the cumulative 0.2, so the sample is 2. Row 1 (bonus): cumulative [0.3, 0.6, 1.0] vs 0.9.
    assert!(rows[0].accepted && rows[1].accepted);
    assert_eq!((rows[0].sample, rows[1].sample), (2, 2));
    assert_eq!((rows[0].draft_at_token, rows[1].draft_at_token), (1.0, 1.0));
    assert!((rows[0].total - 0.3).abs() < 1e-6 && (rows[1].total - 1.0).abs() < 1e-6, "{rows:?}");
}
