//! The fused CubeCL acceptance kernel against the plain-tensor reference, both on wgpu (Mesa's
//! lavapipe in CI), and its verdicts against the host rule of anyspec-core.

use anyspec_core::verify::{speculative_sampling, speculative_sampling_point_mass};
use anyspec_kernels::acceptance::{AcceptanceRow, is_fused};
use anyspec_kernels::{
    AcceptanceInputs, Error, Uniforms, acceptance_fused, acceptance_reference, read_acceptance, verdict_from_rows,
    verify_on_device,
};
use burn::tensor::{Device, DeviceKind, Tensor};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::{ScriptedRng, draw, host_script, random_distribution, uniform, upload};

fn wgpu() -> Device {
    Device::wgpu(DeviceKind::DefaultDevice)
}

/// Totals are sums of `V` non-negative f32 terms in two different orders; each is within
/// `(V − 1)·ε·Σ` of the exact sum (ε = 2⁻²⁴, the unit roundoff), so they differ by at most
/// `2(V − 1)·ε` relative.
fn total_bound(vocab: usize, total: f32) -> f32 {
    // f32::EPSILON is 2⁻²³ = 2ε.
    (vocab as f32 - 1.0) * f32::EPSILON * total.abs()
}

/// Compares kernel and reference rows: flags, `q(d)` and samples exactly, totals within the
/// summation bound.
fn assert_rows_agree(fused: &[AcceptanceRow], reference: &[AcceptanceRow], vocab: usize, what: &str) {
    assert_eq!(fused.len(), reference.len(), "{what}: rows");
    for (j, (f, r)) in fused.iter().zip(reference).enumerate() {
        assert_eq!((f.accepted, f.draft_at_token), (r.accepted, r.draft_at_token), "{what}, row {j}");
        assert_eq!(f.sample, r.sample, "{what}, row {j}: sample (totals {} vs {})", f.total, r.total);
        let bound = total_bound(vocab, r.total);
        assert!(
            (f.total - r.total).abs() <= bound,
            "{what}, row {j}: total {} vs {} (bound {bound})",
            f.total,
            r.total
        );
    }
}

struct Case {
    p: Vec<Vec<f32>>,
    q: Vec<Vec<f32>>,
    tokens: Vec<u32>,
    sampled: bool,
    uniforms: Uniforms,
}

fn random_case(rng: &mut StdRng, gamma: usize, vocab: usize, sharp: f64, sampled: bool) -> Case {
    let p: Vec<Vec<f32>> = (0..=gamma).map(|_| random_distribution(rng, vocab, sharp)).collect();
    let q: Vec<Vec<f32>> = (0..gamma).map(|_| random_distribution(rng, vocab, sharp)).collect();
    let tokens = (0..gamma).map(|j| if sampled { draw(rng, &q[j]) } else { draw(rng, &p[j]) }).collect();
    let uniforms = Uniforms { accept: (0..gamma).map(|_| uniform(rng)).collect(), residual: uniform(rng) };
    Case { p, q, tokens, sampled, uniforms }
}

impl Case {
    fn inputs(&self, device: &Device) -> AcceptanceInputs {
        let q = self.sampled.then(|| upload(&self.q, device));
        AcceptanceInputs::new(upload(&self.p, device), &self.tokens, q, &self.uniforms).unwrap()
    }

    fn host_verdict(&self) -> anyspec_core::Verdict {
        let q = self.sampled.then_some(self.q.as_slice());
        let mut scripted = ScriptedRng::new(&host_script(&self.p, q, &self.tokens, &self.uniforms));
        if self.sampled {
            speculative_sampling(&self.p, &self.tokens, &self.q, &mut scripted).unwrap()
        } else {
            speculative_sampling_point_mass(&self.p, &self.tokens, &mut scripted).unwrap()
        }
    }
}

#[test]
fn the_fused_kernel_equals_the_reference_and_the_host_rule() {
    let device = wgpu();
    let mut rng = StdRng::seed_from_u64(23);
    let mut outcomes = [0usize; 2];
    // Vocabularies below, at and well above the 256 units of a cube (chunks of 1 to 79 entries).
    for (case, vocab) in [3, 37, 256, 257, 1000, 5000, 20_000].into_iter().cycle().take(84).enumerate() {
        let gamma = case % 6;
        let sampled = case % 2 == 0;
        let c = random_case(&mut rng, gamma, vocab, [1.0, 4.0, 12.0][case % 3], sampled);
        assert!(is_fused(&c.inputs(&device)), "wgpu must run the fused kernel");
        let fused = read_acceptance(acceptance_fused(c.inputs(&device)).unwrap()).unwrap();
        let reference = read_acceptance(acceptance_reference(c.inputs(&device))).unwrap();
        let what = format!("case {case}: γ = {gamma}, V = {vocab}, sampled = {sampled}");
        assert_rows_agree(&fused, &reference, vocab, &what);
        let verdict = verdict_from_rows(&fused, &c.tokens).unwrap();
        assert_eq!(verdict, c.host_verdict(), "{what}");
        // The public entry point takes the fused path on wgpu and gives the same verdict.
        let q = c.sampled.then(|| upload(&c.q, &device));
        assert_eq!(verify_on_device(upload(&c.p, &device), &c.tokens, q, &c.uniforms).unwrap(), verdict, "{what}");
        outcomes[usize::from(verdict.bonus)] += 1;
    }
    assert!(outcomes[0] >= 10 && outcomes[1] >= 10, "both outcomes exercised: {outcomes:?}");
}

#[test]
fn strided_inputs_give_the_contiguous_result() {
    let device = wgpu();
    let mut rng = StdRng::seed_from_u64(7);
    for (gamma, vocab, sampled) in [(3, 700, true), (4, 300, false), (0, 513, false)] {
        let c = random_case(&mut rng, gamma, vocab, 4.0, sampled);
        let contiguous = read_acceptance(acceptance_fused(c.inputs(&device)).unwrap()).unwrap();
        // p stored transposed ([V, γ + 1] in memory); q a column window of a wider tensor.
        let p_columns: Vec<Vec<f32>> = (0..vocab).map(|i| c.p.iter().map(|row| row[i]).collect()).collect();
        let p = upload(&p_columns, &device).transpose();
        let q = c.sampled.then(|| {
            let padded: Vec<Vec<f32>> =
                c.q.iter().map(|row| [vec![9.0; 5], row.clone(), vec![9.0; 3]].concat()).collect();
            upload(&padded, &device).narrow(1, 5, vocab)
        });
        let inputs = AcceptanceInputs::new(p, &c.tokens, q, &c.uniforms).unwrap();
        let strided = read_acceptance(acceptance_fused(inputs.clone()).unwrap()).unwrap();
        // The same chunks in the same order: bit-identical to the contiguous launch.
        assert_eq!(strided, contiguous, "γ = {gamma}, V = {vocab}, sampled = {sampled}");
        let reference = read_acceptance(acceptance_reference(inputs)).unwrap();
        assert_rows_agree(&strided, &reference, vocab, &format!("strided γ = {gamma}, V = {vocab}"));
    }
}

#[test]
fn a_residual_without_mass_falls_back_to_the_target_row() {
    let device = wgpu();
    // q = p in both drafted rows: max(p − q, 0) is 0 everywhere, so both rows sample from p.
    let p = vec![vec![0.25, 0.25, 0.5], vec![0.5, 0.5, 0.0], vec![0.1, 0.2, 0.7]];
    let q = p[..2].to_vec();
    for residual in [0.1, 0.3, 0.6, 0.95] {
        let uniforms = Uniforms { accept: vec![0.3, 0.9], residual };
        let inputs = AcceptanceInputs::new(upload(&p, &device), &[2, 1], Some(upload(&q, &device)), &uniforms).unwrap();
        let fused = read_acceptance(acceptance_fused(inputs.clone()).unwrap()).unwrap();
        let reference = read_acceptance(acceptance_reference(inputs)).unwrap();
        assert_rows_agree(&fused, &reference, 3, &format!("u = {residual}"));
        for row in &fused[..2] {
            assert!((row.total - 1.0).abs() < 1e-6, "the mass of p, not of the empty residual: {row:?}");
        }
        // Row 1 samples p_1 = [0.5, 0.5, 0]: token 0 below u = 0.5, token 1 above, never 2.
        assert_eq!(fused[1].sample, u32::from(residual >= 0.5), "u = {residual}");
    }
}

#[test]
fn non_finite_rows_and_impossible_drafts_are_errors() {
    let device = wgpu();
    let nan = vec![vec![f32::NAN, 0.5, 0.5]];
    let uniforms = Uniforms { accept: vec![], residual: 0.3 };
    assert!(verify_on_device(upload(&nan, &device), &[], None, &uniforms).is_err());
    let p = vec![vec![0.5, 0.5], vec![0.5, 0.5]];
    let q = vec![vec![0.0, 1.0]];
    let uniforms = Uniforms { accept: vec![0.5], residual: 0.5 };
    assert!(matches!(
        verify_on_device(upload(&p, &device), &[0], Some(upload(&q, &device)), &uniforms),
        Err(Error::DraftTokenImpossible { position: 0, token: 0 })
    ));
}

#[test]
fn the_fused_kernel_refuses_a_flex_tensor() {
    let p: Tensor<2> = upload(&[vec![0.5, 0.5]], &Device::flex());
    let inputs = AcceptanceInputs::new(p, &[], None, &Uniforms { accept: vec![], residual: 0.5 }).unwrap();
    assert!(!is_fused(&inputs));
    assert!(matches!(acceptance_fused(inputs), Err(Error::Unsupported(_))));
}
