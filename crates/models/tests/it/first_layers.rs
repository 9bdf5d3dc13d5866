//! The self-speculative drafter: a model made of the target's first layers and its head.

use std::collections::HashMap;

use anyspec_kernels::readback::read_rows;
use anyspec_models::{Checkpoint, DeviceChoice, Engine, LoadOptions};
use safetensors::SafeTensors;
use safetensors::tensor::TensorView;

use crate::common::{fixture_dir, load, load_on, max_abs_diff, reference};

/// The llama3-gqa fixture rewritten as a one-layer checkpoint: its config says one layer and its
/// file holds every tensor except those of layer 1. An independent way to build the same model.
fn one_layer_checkpoint() -> ScratchDir {
    let source = fixture_dir("llama3-gqa");
    let dir = ScratchDir::new("one-layer");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(source.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["num_hidden_layers"], 2, "the fixture changed: this test expects two layers");
    config["num_hidden_layers"] = 1.into();
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    std::fs::copy(source.join("tokenizer.json"), dir.path().join("tokenizer.json")).unwrap();
    let bytes = std::fs::read(source.join("model.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let kept: HashMap<String, TensorView<'_>> =
        tensors.tensors().into_iter().filter(|(name, _)| !name.contains("layers.1.")).collect();
    assert!(kept.len() < tensors.len(), "no tensor of layer 1 was dropped");
    let out = safetensors::serialize(kept, None).unwrap();
    std::fs::write(dir.path().join("model.safetensors"), out).unwrap();
    dir
}

/// A directory under the system's temporary directory, removed when dropped.
struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("anyspec-models-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        ScratchDir(path)
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_first_layer_equals_a_one_layer_checkpoint_and_all_layers_equal_the_model() {
    let model = load("llama3-gqa");
    let ids = reference("llama3-gqa").input_ids;
    let n = ids.len();
    let logits = |m: &anyspec_models::Llama| read_rows(m.forward(&ids, &mut m.new_cache(), n).unwrap()).unwrap();

    let device = DeviceChoice::Cpu.device().unwrap();
    let dir = one_layer_checkpoint();
    let separate = Checkpoint::open(dir.path()).unwrap().load_model_with(&device, &LoadOptions::default()).unwrap();
    let first = model.first_layers(1).unwrap();
    assert_eq!(first.config().num_layers, 1);
    let (ours, theirs) = (logits(&first), logits(&separate));
    assert_eq!(max_abs_diff(&ours, &theirs), 0.0, "first_layers(1) differs from the one-layer checkpoint");

    let full = logits(&model);
    assert_eq!(max_abs_diff(&logits(&model.first_layers(2).unwrap()), &full), 0.0);
    // The negative control: one layer is not the whole model.
    assert!(max_abs_diff(&ours, &full) > 1e-3, "one layer gave the two-layer logits");
    // Weights are shared, not copied.
    assert!(first.weight_bytes().unwrap() < model.weight_bytes().unwrap());
}

#[test]
fn impossible_layer_counts_and_the_burn_engine_are_refused() {
    let model = load("llama3-gqa");
    for count in [0, 3] {
        let err = model.first_layers(count).unwrap_err().to_string();
        assert!(err.contains("1..=2"), "{count}: {err}");
    }
    let err = load_on("llama3-gqa", Engine::Burn).first_layers(1).unwrap_err().to_string();
    assert!(err.contains("native engine"), "{err}");
}
