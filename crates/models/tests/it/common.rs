//! Fixture loading shared by the tests.

use std::path::PathBuf;

use anyspec_models::{Checkpoint, DeviceChoice, Engine, Llama, LoadOptions};
use safetensors::SafeTensors;

/// The three conformance checkpoints made by xtask/python/make_model_fixtures.py.
pub(crate) const FIXTURES: [&str; 3] = ["llama3-gqa", "qwen2-tied-bf16", "mistral-window-f16"];

pub(crate) fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("data").join(name)
}

/// A fixture on the default CPU engine (the native one).
pub(crate) fn load(name: &str) -> Llama {
    load_on(name, Engine::Auto)
}

pub(crate) fn load_on(name: &str, engine: Engine) -> Llama {
    let device = DeviceChoice::Cpu.device().unwrap();
    Checkpoint::open(fixture_dir(name)).unwrap().load_model_with(&device, &LoadOptions::engine(engine)).unwrap()
}

/// Every fixture on every CPU engine, labelled `fixture/engine`, with the fixture's name first
/// so that `reference(name)` still finds it.
pub(crate) fn every_engine() -> Vec<(String, Llama)> {
    FIXTURES
        .iter()
        .flat_map(|name| [Engine::Native, Engine::Burn].map(|engine| (name.to_string(), load_on(name, engine))))
        .collect()
}

/// What transformers computed for the fixed prompt.
pub(crate) struct Reference {
    pub(crate) input_ids: Vec<u32>,
    /// `[positions][vocab]`.
    pub(crate) logits: Vec<Vec<f32>>,
    pub(crate) greedy: Vec<u32>,
}

pub(crate) fn reference(name: &str) -> Reference {
    let bytes = std::fs::read(fixture_dir(name).join("reference.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let ints = |key: &str| -> Vec<u32> {
        let view = tensors.tensor(key).unwrap();
        view.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect()
    };
    let logits = tensors.tensor("logits").unwrap();
    let vocab = logits.shape()[1];
    let values: Vec<f32> = logits.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    Reference {
        input_ids: ints("input_ids"),
        logits: values.chunks(vocab).map(<[f32]>::to_vec).collect(),
        greedy: ints("greedy"),
    }
}

/// Largest absolute difference between two sets of rows.
pub(crate) fn max_abs_diff(ours: &[Vec<f32>], theirs: &[Vec<f32>]) -> f32 {
    assert_eq!(ours.len(), theirs.len(), "row count");
    ours.iter()
        .zip(theirs)
        .flat_map(|(a, b)| {
            assert_eq!(a.len(), b.len(), "row length");
            a.iter().zip(b).map(|(x, y)| (x - y).abs())
        })
        .fold(0.0, f32::max)
}
