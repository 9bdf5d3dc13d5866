//! The whole router build on the small conformance checkpoint of `anyspec-models` (a random
//! two-layer Llama): the artifact it writes, the recall it reports, the errors it gives.

use std::path::PathBuf;

use anyspec_core::NoProgress;
use anyspec_dynaspec::{BuildParams, RouterFile, build_router, model_fingerprint};
use anyspec_models::{Checkpoint, DeviceChoice, Llama, LoadOptions};
use anyspec_train::RouterTrainConfig;

fn model() -> Llama {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/llama3-gqa");
    let device = DeviceChoice::Cpu.device().unwrap();
    Checkpoint::open(dir).unwrap().load_model_with(&device, &LoadOptions::default()).unwrap()
}

/// Deterministic pseudo-text: a few repeated "phrases" so that contexts recur.
fn texts(vocab: u32) -> Vec<Vec<u32>> {
    (0..12u32).map(|d| (0..40u32).map(|i| (d * 7 + i * i * 13 + (i / 5) * 3) % vocab).collect()).collect()
}

fn params(clusters: usize) -> BuildParams {
    BuildParams {
        clusters,
        kmeans_iterations: 10,
        drafter_layers: 1,
        window: 20,
        max_positions: 1000,
        valid_every: 4,
        recall_budgets: vec![1, 2, 4, clusters],
        threads: 2,
        train: RouterTrainConfig { hidden: 16, epochs: 3, batch_size: 32, ..Default::default() },
        corpus: "synthetic".into(),
        ..BuildParams::default()
    }
}

#[test]
fn a_build_round_trips_and_its_recall_grows_with_the_budget_to_everything() {
    let model = model();
    let vocab = model.config().vocab_size;
    let (file, report) = build_router(&model, &texts(vocab as u32), &params(8), &NoProgress).unwrap();
    assert_eq!(file.clusters.len(), 8);
    assert_eq!(file.clusters.vocab_size(), vocab);
    assert_eq!(file.info.drafter_layers, 1);
    assert_eq!(report.loss_log.len(), 3);
    assert!(report.train_positions > 0 && report.valid_positions > 0);
    // 12 texts of 40 tokens in windows of 20: 24 windows of 19 positions.
    assert_eq!(report.train_positions + report.valid_positions, 24 * 19);
    let masses: Vec<f64> = report.recall.iter().map(|r| r.target_mass).collect();
    assert!(masses.windows(2).all(|w| w[0] <= w[1] + 1e-9), "recall must not fall as the budget grows: {masses:?}");
    let all = report.recall.last().unwrap();
    // Every cluster: the whole vocabulary, so the whole (recorded) target mass and every top-1.
    assert_eq!(all.mean_size, vocab as f64);
    assert!(all.target_mass > 0.99 && all.top1_hit == 1.0, "{all:?}");
    assert!(report.recall[0].mean_size < vocab as f64);

    let fingerprint = model_fingerprint(vocab, model.config().hidden_size, &model.lm_head_rows().unwrap());
    assert_eq!(file.info.model_fingerprint, fingerprint);
    let dir = std::env::temp_dir().join(format!("anyspec-dynaspec-build-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("router.safetensors");
    file.save(&path).unwrap();
    assert_eq!(RouterFile::load(&path, &fingerprint).unwrap(), file);
    // The same build again is byte-identical (seeded k-means and training).
    let (again, _) = build_router(&model, &texts(vocab as u32), &params(8), &NoProgress).unwrap();
    assert_eq!(again.to_bytes(), file.to_bytes());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn impossible_builds_are_refused_with_the_fix() {
    let model = model();
    let vocab = model.config().vocab_size;
    let e = build_router(&model, &texts(vocab as u32), &params(vocab + 1), &NoProgress).unwrap_err().to_string();
    assert!(e.contains(&format!("1..={vocab}")), "{e}");
    let deep = BuildParams { drafter_layers: 3, ..params(4) };
    assert!(build_router(&model, &texts(vocab as u32), &deep, &NoProgress).is_err());
    let e = build_router(&model, &[vec![1]], &params(4), &NoProgress).unwrap_err().to_string();
    assert!(e.contains("give more text"), "{e}");
}
