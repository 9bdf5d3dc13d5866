//! Invariants that hold for every input, checked with proptest.

use anyspec_core::SamplingConfig;
use anyspec_core::projection::{
    ABSENT, IdMap, SparseScores, rdk_dense_kernel, rdk_dense_kernel_first_order, rdk_exact, tli_projection,
    union_projection,
};
use anyspec_core::sampling::logits_to_probs;
use anyspec_core::verify::{speculative_sampling, speculative_sampling_point_mass};
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;

fn sum(v: &[f32]) -> f64 {
    v.iter().map(|&x| f64::from(x)).sum()
}

fn distribution(n: usize) -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(0.0f32..1.0, n).prop_filter_map("needs mass", |w| {
        let total: f32 = w.iter().sum();
        (total > 1e-3).then(|| w.iter().map(|x| x / total).collect())
    })
}

fn sampling() -> impl Strategy<Value = SamplingConfig> {
    (0.0f32..3.0, proptest::option::of(1usize..10), 0.05f32..=1.0)
        .prop_map(|(temperature, top_k, top_p)| SamplingConfig { temperature, top_k, top_p })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn transformed_logits_are_a_distribution(
        logits in proptest::collection::vec(-50.0f32..50.0, 1..40),
        config in sampling(),
    ) {
        let p = logits_to_probs(&logits, &config).unwrap();
        prop_assert!((sum(&p) - 1.0).abs() < 1e-5);
        prop_assert!(p.iter().all(|&x| (0.0..=1.0).contains(&x)));
        if let Some(k) = config.top_k {
            prop_assert!(p.iter().filter(|&&x| x > 0.0).count() <= k.max(1));
        }
        // The arg-max always survives truncation.
        let best = anyspec_core::sampling::argmax(&logits);
        prop_assert!(p[best as usize] > 0.0);
    }

    #[test]
    fn verdicts_are_well_formed(
        rows in proptest::collection::vec(distribution(7), 1..9),
        drafts in proptest::collection::vec(distribution(7), 8),
        seed in any::<u64>(),
    ) {
        let gamma = rows.len() - 1;
        let mut rng = StdRng::seed_from_u64(seed);
        let q = &drafts[..gamma];
        let tokens: Vec<u32> = q.iter().map(|row| anyspec_core::sampling::sample(row, &mut rng).unwrap()).collect();
        let verdict = speculative_sampling(&rows, &tokens, q, &mut rng).unwrap();
        prop_assert!(verdict.accepted <= gamma);
        prop_assert_eq!(verdict.bonus, verdict.accepted == gamma);
        prop_assert!(rows[verdict.accepted][verdict.next_token as usize] > 0.0, "emitted a token the target rules out");
        let verdict = speculative_sampling_point_mass(&rows, &tokens, &mut rng).unwrap();
        prop_assert!(rows[verdict.accepted][verdict.next_token as usize] > 0.0);
    }

    #[test]
    fn projections_stay_on_the_target_support(
        q in distribution(9),
        pairs in proptest::collection::vec(proptest::option::of(0u32..12), 9),
    ) {
        // Make the map one-to-one by keeping the first claim on each target token.
        let mut claimed = [false; 12];
        let map: Vec<u32> = pairs.iter().map(|p| match p {
            Some(t) if !claimed[*t as usize] => { claimed[*t as usize] = true; *t }
            _ => ABSENT,
        }).collect();
        let map = IdMap::new(map, 12).unwrap();
        let union = union_projection(&q, &map).unwrap();
        prop_assert!((sum(&union.on_target) + union.outside_mass - 1.0).abs() < 1e-5);
        let targets: Vec<bool> = (0..12).map(|t| map.drafter_to_target().contains(&t)).collect();
        for (t, &p) in union.on_target.iter().enumerate() {
            prop_assert!(p == 0.0 || targets[t]);
        }
        match tli_projection(&q, &map) {
            Ok(tli) => {
                prop_assert!((sum(&tli) - 1.0).abs() < 1e-5);
                for (t, &p) in tli.iter().enumerate() {
                    prop_assert!(p == 0.0 || targets[t]);
                }
            }
            Err(_) => prop_assert!(union.outside_mass > 1.0 - 1e-5),
        }
    }

    #[test]
    fn rdk_is_a_distribution_and_the_b2_expansion_matches_the_dense_kernel_to_first_order(
        q in distribution(10),
        entries in proptest::collection::vec((0usize..10, 0u32..10, -1.0f32..1.0), 0..40),
        epsilon_exp in 2u32..5,
    ) {
        // Scores a_ij = ε · s_ij with |s| ≤ 1 and τ = 1: the paper's assumption |a|/τ ≪ 1.
        let epsilon = 10f64.powi(-(epsilon_exp as i32));
        let scores = csr(10, &entries, epsilon as f32);
        let dense = rdk_dense_kernel(&q, &scores, 1.0).unwrap();
        let taylor = rdk_dense_kernel_first_order(&q, &scores, 1.0).unwrap();
        prop_assert!((sum(&dense) - 1.0).abs() < 1e-5 && (sum(&taylor) - 1.0).abs() < 1e-5);
        // First order: the error is O(ε²); with at most 40 entries of |s| ≤ 1 per matrix, a
        // generous constant is 40.
        let error = dense.iter().zip(&taylor).map(|(a, b)| f64::from((a - b).abs())).fold(0.0, f64::max);
        prop_assert!(error <= 40.0 * epsilon * epsilon + 1e-6, "error {error} at ε = {epsilon}");

        // The sparse exact form on the row-softmax of the same scores is a distribution too.
        let m = anyspec_core::projection::AffinityMatrix::from_scores(&scores, 0.5).unwrap();
        let p = rdk_exact(&q, &m).unwrap();
        prop_assert!((sum(&p) - 1.0).abs() < 1e-5 && p.iter().all(|&x| x >= 0.0));
    }
}

/// CSR scores from (row, column, value) triples; duplicates keep the last value.
fn csr(n: usize, entries: &[(usize, u32, f32)], scale: f32) -> SparseScores {
    let mut rows: Vec<std::collections::BTreeMap<u32, f32>> = vec![Default::default(); n];
    for &(r, c, v) in entries {
        rows[r].insert(c, v * scale);
    }
    let mut row_offsets = vec![0];
    let (mut columns, mut values) = (Vec::new(), Vec::new());
    for row in rows {
        for (c, v) in row {
            columns.push(c);
            values.push(v);
        }
        row_offsets.push(columns.len());
    }
    SparseScores::from_csr(n, row_offsets, columns, values).unwrap()
}

#[test]
fn b2_expansion_error_grows_outside_the_assumption() {
    // The bound above is tight enough to fail: at ε = 1 the expansion is visibly off.
    let q = vec![0.5, 0.5, 0.0, 0.0];
    let scores = csr(4, &[(0, 1, 1.0), (1, 2, -1.0), (0, 3, 0.8)], 3.0);
    let dense = rdk_dense_kernel(&q, &scores, 1.0).unwrap();
    let taylor = rdk_dense_kernel_first_order(&q, &scores, 1.0).unwrap();
    let error = dense.iter().zip(&taylor).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(error > 0.05, "error {error}");
}
