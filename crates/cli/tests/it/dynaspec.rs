//! `anyspec dynaspec`: build → inspect on the small conformance checkpoint, refusals of a router
//! for another model and of impossible parameters.

use std::path::Path;

use crate::support::{affinity_fixture as fixture, anyspec, json, temp_dir};

fn model(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data").join(name).display().to_string()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn build_inspect_and_refusals() {
    let dir = temp_dir("dynaspec", "build");
    // Enough text for ten 128-token windows (one is held out): the fixture corpus four times.
    let corpus = dir.join("corpus.txt");
    std::fs::write(&corpus, std::fs::read_to_string(fixture("corpus.txt")).unwrap().repeat(4)).unwrap();
    let corpus = corpus.display().to_string();
    let router = dir.join("router.safetensors").display().to_string();
    let target = model("llama3-gqa");
    let small = ["--clusters", "8", "--drafter-layers", "1", "--epochs", "2", "--hidden", "16"];
    let mut args = vec!["dynaspec", "build", "--model", &target, "--corpus", &corpus, "-o", &router, "--json"];
    args.extend_from_slice(&small);
    let built = json(&anyspec(&args));
    assert_eq!(built["clusters"], 8);
    assert_eq!(built["vocab_size"], 320);
    assert_eq!(built["loss_log"].as_array().unwrap().len(), 2);
    let recall = built["build"]["recall"].as_array().unwrap();
    assert!(!recall.is_empty() && recall.iter().all(|r| r["target_mass"].as_f64().unwrap() <= 1.0 + 1e-9));

    let inspected = json(&anyspec(&["dynaspec", "inspect", &router, "--model", &target, "--json"]));
    for field in ["model_fingerprint", "clusters", "data_digest", "positions", "loss_log"] {
        assert_eq!(inspected[field], built[field], "{field}");
    }
    // Another model's head: refused, with the fix.
    let out = anyspec(&["dynaspec", "inspect", &router, "--model", &model("qwen2-tied-bf16")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("was built for the model with fingerprint"), "{}", stderr(&out));

    // M larger than the vocabulary, a drafter as deep as the model: named before any work.
    let mut args = vec!["dynaspec", "build", "--model", &target, "--corpus", &corpus, "-o", &router, "--force"];
    args.extend_from_slice(&["--clusters", "321"]);
    let out = anyspec(&args);
    assert!(stderr(&out).contains("--clusters must be in 1..=320"), "{}", stderr(&out));
    let mut args = vec!["dynaspec", "build", "--model", &target, "--corpus", &corpus, "-o", &router, "--force"];
    args.extend_from_slice(&["--drafter-layers", "2"]);
    let out = anyspec(&args);
    assert!(stderr(&out).contains("--drafter-layers must be in 1..2"), "{}", stderr(&out));
    // The output may not be an input.
    let out = anyspec(&["dynaspec", "build", "--model", &target, "--corpus", &corpus, "-o", &corpus]);
    assert!(!out.status.success() && stderr(&out).contains("same file as the input"), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}
