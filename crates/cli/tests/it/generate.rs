//! `anyspec generate` on the tiny checkpoints of anyspec-models.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data").join(name)
}

fn anyspec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_anyspec")).args(args).output().expect("the anyspec binary runs")
}

/// `generate --json` on the llama3-gqa fixture with `extra` flags: the report and what was
/// written to stderr.
fn generate_with_stderr(extra: &[&str]) -> (serde_json::Value, String) {
    let target = fixture("llama3-gqa");
    let mut args = vec!["generate", "--target", target.to_str().unwrap(), "--prompt", "The quick brown fox", "--json"];
    args.extend_from_slice(extra);
    let out = anyspec(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = serde_json::from_slice(&out.stdout).expect("--json prints one JSON object");
    (report, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn generate_json(extra: &[&str]) -> serde_json::Value {
    generate_with_stderr(extra).0
}

fn stderr_of_failure(args: &[&str]) -> String {
    let out = anyspec(args);
    assert!(!out.status.success(), "expected failure for {args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn greedy_speculative_decoding_equals_autoregressive_token_for_token() {
    let plain = generate_json(&["--max-tokens", "40", "--ignore-eos"]);
    for (drafter, gamma) in [("qwen2-tied-bf16", "3"), ("llama3-gqa", "5"), ("mistral-window-f16", "1")] {
        let drafter = fixture(drafter);
        let spec = generate_json(&[
            "--max-tokens",
            "40",
            "--ignore-eos",
            "--drafter",
            drafter.to_str().unwrap(),
            "--gamma",
            gamma,
        ]);
        assert_eq!(spec["tokens"], plain["tokens"], "drafter {}", drafter.display());
        assert_eq!(spec["speculative"], true);
        assert!(spec["drafted"].as_u64().unwrap() > 0);
    }
    assert_eq!(plain["tokens"].as_array().unwrap().len(), 40);
    // The target drafting for itself accepts every drafted token at temperature 0.
    let own = fixture("llama3-gqa");
    let spec =
        generate_json(&["--max-tokens", "40", "--ignore-eos", "--drafter", own.to_str().unwrap(), "--gamma", "4"]);
    assert_eq!(spec["acceptance_rate"], 1.0);
    assert_eq!(spec["tokens_per_step"], 5.0);
}

#[test]
fn a_drafter_whose_every_draft_is_rejected_is_a_warning_on_stderr_and_in_json() {
    let run = |drafter: &str| {
        let drafter = fixture(drafter);
        let drafter = drafter.to_str().unwrap();
        generate_with_stderr(&["--max-tokens", "40", "--ignore-eos", "--drafter", drafter, "--gamma", "3"])
    };
    // This fixture drafts for another random model: every draft is rejected.
    let (report, stderr) = run("qwen2-tied-bf16");
    assert_eq!(report["accepted"], 0, "{report}");
    let warnings = report["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{report}");
    assert!(warnings[0].as_str().unwrap().contains("drafted tokens were rejected"), "{report}");
    assert_eq!(stderr.matches("drafted tokens were rejected").count(), 1, "warned not exactly once: {stderr}");
    // The target drafting for itself is always right: no warning.
    let (report, stderr) = run("llama3-gqa");
    assert_eq!(report["warnings"], serde_json::json!([]));
    assert!(!stderr.contains("WARN"), "{stderr}");
}

#[test]
fn every_verification_place_gives_the_same_greedy_tokens() {
    let drafter = fixture("qwen2-tied-bf16");
    let drafter = drafter.to_str().unwrap();
    let runs: Vec<serde_json::Value> = ["auto", "device", "host"]
        .iter()
        .map(|place| generate_json(&["--max-tokens", "24", "--ignore-eos", "--drafter", drafter, "--verify", place]))
        .collect();
    assert!(runs.iter().all(|r| r["tokens"] == runs[0]["tokens"]), "{runs:?}");
    let target = fixture("llama3-gqa");
    let err =
        stderr_of_failure(&["generate", "--target", target.to_str().unwrap(), "--prompt", "x", "--verify", "gpu"]);
    assert!(err.contains("auto, device or host"), "{err}");
}

#[test]
fn sampling_is_reproducible_with_a_seed() {
    let a = generate_json(&["--temperature", "1.0", "--seed", "9", "--max-tokens", "20", "--ignore-eos"]);
    let b = generate_json(&["--temperature", "1.0", "--seed", "9", "--max-tokens", "20", "--ignore-eos"]);
    let c = generate_json(&["--temperature", "1.0", "--seed", "10", "--max-tokens", "20", "--ignore-eos"]);
    assert_eq!(a["tokens"], b["tokens"]);
    assert_ne!(a["tokens"], c["tokens"]);
}

#[test]
fn bad_inputs_are_clear_errors() {
    let target = fixture("llama3-gqa");
    let target = target.to_str().unwrap();
    let err = stderr_of_failure(&["generate", "--target", target, "--prompt", ""]);
    assert!(err.contains("--prompt is empty"), "{err}");
    let long = "ab ".repeat(100);
    let err = stderr_of_failure(&["generate", "--target", target, "--prompt", &long]);
    assert!(err.contains("context window is 128 tokens"), "{err}");
    let err = stderr_of_failure(&["generate", "--target", target, "--prompt", "x", "--device", "tpu"]);
    assert!(err.contains("\"tpu\""), "{err}");
    let err = stderr_of_failure(&["generate", "--target", target, "--prompt", "x", "--gamma", "0"]);
    assert!(err.contains("--gamma"), "{err}");
    let err = stderr_of_failure(&["generate", "--target", target, "--prompt", "x", "--top-p", "2"]);
    assert!(err.contains("--top-p"), "{err}");
    if !cfg!(feature = "cuda") {
        let err = stderr_of_failure(&["generate", "--target", target, "--prompt", "x", "--device", "cuda"]);
        assert!(err.contains("--features cuda"), "{err}");
    }
}

#[test]
fn negative_numbers_reach_the_range_checks() {
    let target = fixture("llama3-gqa");
    let target = target.to_str().unwrap();
    for (flag, value) in [("--temperature", "-1"), ("--top-p", "-0.5")] {
        let err = stderr_of_failure(&["generate", "--target", target, "--prompt", "x", flag, value]);
        assert!(err.contains(&format!("{flag} must be")) && !err.contains("unexpected argument"), "{err}");
    }
    let err =
        stderr_of_failure(&["dict", "build", "--tokenizer", "t", "--corpus", "c", "-o", "d", "--min-prob", "-0.1"]);
    assert!(err.contains("--min-prob must be"), "{err}");
}

#[test]
fn a_drafter_window_shorter_than_the_prompt_is_a_warning_on_stderr_and_in_json() {
    // The target itself as drafter, told it has a window of 4 positions.
    let dir = fixture_copy("llama3-gqa", "short-window");
    let config_path = dir.join("config.json");
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(&config_path).unwrap()).unwrap();
    config["max_position_embeddings"] = serde_json::json!(4);
    std::fs::write(&config_path, serde_json::to_vec(&config).unwrap()).unwrap();
    let (report, stderr) = generate_with_stderr(&[
        "--max-tokens",
        "8",
        "--ignore-eos",
        "--drafter",
        dir.to_str().unwrap(),
        "--gamma",
        "3",
    ]);
    let warnings: Vec<&str> = report["warnings"].as_array().unwrap().iter().filter_map(|w| w.as_str()).collect();
    assert_eq!(warnings.iter().filter(|w| w.contains("context window is 4 positions")).count(), 1, "{report}");
    assert_eq!(stderr.matches("context window is 4 positions").count(), 1, "warned not exactly once: {stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_drafter_with_another_tokenizer_is_refused() {
    // A copy of a fixture checkpoint with the dict-builder fixture's tokenizer.
    let dir = fixture_copy("mistral-window-f16", "other-tokenizer");
    let other = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dict-builder/tests/data/tokenizer.json");
    std::fs::copy(other, dir.join("tokenizer.json")).unwrap();
    let target = fixture("llama3-gqa");
    let err = stderr_of_failure(&[
        "generate",
        "--target",
        target.to_str().unwrap(),
        "--drafter",
        dir.to_str().unwrap(),
        "--prompt",
        "x",
    ]);
    // That tokenizer has 587 ids for 320 embedding rows: it cannot belong to the checkpoint.
    assert!(err.contains("--drafter") && err.contains("does not belong to these weights"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
    // A consistent checkpoint whose tokenizer is not the target's.
    let err = stderr_of_failure(&[
        "generate",
        "--target",
        target.to_str().unwrap(),
        "--drafter",
        hetero_drafter().to_str().unwrap(),
        "--prompt",
        "x",
    ]);
    assert!(err.contains("another tokenizer"), "{err}");
}

#[test]
fn a_broken_drafter_checkpoint_is_named_as_the_drafter() {
    // The target itself as drafter, with a RoPE base that makes its logits NaN: that used to
    // surface mid-generation as the target's "logits contain NaN".
    let target = fixture("llama3-gqa");
    let dir = fixture_copy("llama3-gqa", "broken-drafter");
    let config_path = dir.join("config.json");
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(&config_path).unwrap()).unwrap();
    config["rope_theta"] = (-1.0).into();
    std::fs::write(&config_path, config.to_string()).unwrap();
    let err = stderr_of_failure(&[
        "generate",
        "--target",
        target.to_str().unwrap(),
        "--drafter",
        dir.to_str().unwrap(),
        "--prompt",
        "The quick brown fox",
    ]);
    assert!(err.contains(&format!("--drafter {}", dir.display())) && err.contains("rope_theta"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A fresh copy of the fixture checkpoint `name` in a temporary directory named after `label`
/// (the caller changes a file of it and removes it).
fn fixture_copy(name: &str, label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("anyspec-cli-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    dir
}

/// The drafter of anyspec-drafters' heterogeneous-vocabulary tests: another tokenizer than the
/// model fixtures (other ids, three merges fewer, six of its own).
fn hetero_drafter() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../drafters/tests/data/hetero-drafter")
}

fn hetero_json(extra: &[&str]) -> (serde_json::Value, String) {
    let (target, drafter) = (fixture("mistral-window-f16"), hetero_drafter());
    let mut args = vec![
        "generate",
        "--target",
        target.to_str().unwrap(),
        "--drafter",
        drafter.to_str().unwrap(),
        "--prompt",
        "The quick brown fox",
        "--max-tokens",
        "30",
        "--ignore-eos",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = anyspec(&args);
    assert!(out.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
    (
        serde_json::from_slice(&out.stdout).expect("--json prints one JSON object"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_algo_at_temperature_zero_reproduces_autoregressive_decoding() {
    let target = fixture("mistral-window-f16");
    let plain = {
        let out = anyspec(&[
            "generate",
            "--target",
            target.to_str().unwrap(),
            "--prompt",
            "The quick brown fox",
            "--max-tokens",
            "30",
            "--ignore-eos",
            "--json",
        ]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    for algo in ["union", "tli", "slem", "slrs"] {
        let (spec, _) = hetero_json(&["--algo", algo]);
        assert_eq!(spec["tokens"], plain["tokens"], "--algo {algo}");
        assert_eq!(spec["algo"], algo);
        assert!(spec["accepted"].as_u64().unwrap() > 0, "--algo {algo}: {spec}");
    }
}

#[test]
fn auto_says_which_algorithm_it_chose_and_why() {
    // Greedy decoding picks SLEM, as hetero-vocab-sd.txt's Tables 1 and 7 do (even though 314 of
    // the drafter's 322 tokens are shared, where the rule before the paper picked TLI).
    let (greedy, _) = hetero_json(&["--algo", "auto"]);
    assert_eq!(greedy["algo"], "slem");
    assert!(greedy["algo_reason"].as_str().unwrap().contains("Tables 1 and 7"), "{greedy}");
    // Sampling, with a drafter whose tokens average 1.46 bytes on the prompt (≤ 1.5): SLRS.
    let (sampled, _) = hetero_json(&["--algo", "auto", "--temperature", "0.8"]);
    assert_eq!(sampled["algo"], "slrs");
    assert!(sampled["algo_reason"].as_str().unwrap().contains("short"), "{sampled}");
    // Without --json the choice goes to stderr.
    let (target, drafter) = (fixture("mistral-window-f16"), hetero_drafter());
    let out = anyspec(&[
        "generate",
        "--target",
        target.to_str().unwrap(),
        "--drafter",
        drafter.to_str().unwrap(),
        "--prompt",
        "x",
        "--max-tokens",
        "3",
        "--algo",
        "auto",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("--algo auto chose slem"), "{err}");
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn algos_that_cannot_work_are_refused_before_generation() {
    let (target, drafter) = (fixture("mistral-window-f16"), hetero_drafter());
    let (t, d) = (target.to_str().unwrap(), drafter.to_str().unwrap());
    let base = ["generate", "--target", t, "--drafter", d, "--prompt", "x"];
    let with = |extra: &[&'static str]| -> Vec<String> { base.iter().chain(extra).map(|s| s.to_string()).collect() };
    let err = stderr_of_failure(&base);
    assert!(err.contains("--algo tli|slem|rdk|union|auto"), "{err}");
    let err = stderr_of_failure(&refs(&with(&["--algo", "rdk"])));
    assert!(err.contains("--algo rdk needs --affinity"), "{err}");
    let err = stderr_of_failure(&refs(&with(&["--algo", "slem", "--shortlist", "nowhere.shortlist"])));
    assert!(err.contains("--shortlist"), "{err}");
    // A vocabulary map built for another pair of tokenizers.
    let other = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dict-builder/tests/data/tokenizer.json");
    let map = std::env::temp_dir().join(format!("anyspec-cli-wrong-map-{}.asvm", std::process::id()));
    let out = anyspec(&[
        "vocab",
        "build",
        "--target",
        other.to_str().unwrap(),
        "--drafter",
        drafter.join("tokenizer.json").to_str().unwrap(),
        "--out",
        map.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut args = with(&["--algo", "tli", "--vocab-map"]);
    args.push(map.to_str().unwrap().to_owned());
    let err = stderr_of_failure(&refs(&args));
    assert!(err.contains("--vocab-map"), "{err}");
    let _ = std::fs::remove_file(map);
}

#[test]
fn rdk_and_shortlists_run_from_their_artifacts_and_refuse_other_tokenizers() {
    let dir = std::env::temp_dir().join(format!("anyspec-cli-rdk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dict-builder/tests/data/corpus.txt");
    let (target, drafter) = (fixture("mistral-window-f16"), hetero_drafter());
    let build = |what: &str, tokenizer: &Path, out: &Path, extra: &[&str]| {
        let mut args = vec![
            what,
            "build",
            "--tokenizer",
            tokenizer.to_str().unwrap(),
            "--corpus",
            corpus.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = anyspec(&args);
        assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let (matrix, wrong_matrix, shortlist) =
        (dir.join("m.safetensors"), dir.join("wrong.safetensors"), dir.join("s.shortlist"));
    build("affinity", &target.join("tokenizer.json"), &matrix, &[]);
    build("affinity", &drafter.join("tokenizer.json"), &wrong_matrix, &[]);
    build("shortlist", &drafter.join("tokenizer.json"), &shortlist, &["--size", "64"]);

    let (reference, _) = hetero_json(&["--algo", "tli"]);
    for extra in [
        vec!["--algo", "rdk", "--affinity", matrix.to_str().unwrap()],
        vec!["--algo", "rdk", "--affinity", matrix.to_str().unwrap(), "--rdk", "taylor"],
        vec!["--algo", "tli", "--shortlist", shortlist.to_str().unwrap()],
    ] {
        // Greedy: the same tokens as any other lossless bridge (TLI's are autoregressive).
        let (out, _) = hetero_json(&extra);
        assert_eq!(out["tokens"], reference["tokens"], "{extra:?}");
        assert!(out["drafted"].as_u64().unwrap() > 0, "{extra:?}");
    }
    let (t, d) = (target.to_str().unwrap(), drafter.to_str().unwrap());
    let err = stderr_of_failure(&[
        "generate",
        "--target",
        t,
        "--drafter",
        d,
        "--prompt",
        "x",
        "--algo",
        "rdk",
        "--affinity",
        wrong_matrix.to_str().unwrap(),
    ]);
    assert!(err.contains("--affinity"), "{err}");
    // A shortlist of the drafter's tokens is not a target matrix, and vice versa.
    let err = stderr_of_failure(&[
        "generate",
        "--target",
        t,
        "--drafter",
        d,
        "--prompt",
        "x",
        "--algo",
        "tli",
        "--shortlist",
        matrix.to_str().unwrap(),
    ]);
    assert!(err.contains("--shortlist"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn engines_kernels_and_threads_give_the_same_greedy_tokens_and_are_reported() {
    let native = generate_json(&["--max-tokens", "16", "--ignore-eos", "--engine", "native", "--threads", "1"]);
    assert_eq!((native["engine"].as_str(), native["threads"].as_u64()), (Some("native"), Some(1)));
    let scalar = generate_json(&["--max-tokens", "16", "--ignore-eos", "--kernel", "scalar", "--threads", "2"]);
    assert_eq!((scalar["kernel"].as_str(), scalar["threads"].as_u64()), (Some("scalar"), Some(2)));
    let burn = generate_json(&["--max-tokens", "16", "--ignore-eos", "--engine", "burn"]);
    assert_eq!((burn["engine"].as_str(), burn["kernel"].as_str()), (Some("burn"), None));
    assert_eq!(native["tokens"], burn["tokens"]);
    assert_eq!(native["tokens"], scalar["tokens"]);

    let target = fixture("llama3-gqa");
    let target = target.to_str().unwrap();
    let err = stderr_of_failure(&["generate", "--target", target, "--prompt", "x", "--engine", "tpu"]);
    assert!(err.contains("\"tpu\"") && err.contains("native"), "{err}");
    let err = stderr_of_failure(&["generate", "--target", target, "--prompt", "x", "--kernel", "neon"]);
    assert!(err.contains("\"neon\"") && err.contains("scalar"), "{err}");
    let err = stderr_of_failure(&["generate", "--target", target, "--prompt", "x", "--threads", "0"]);
    assert!(err.contains("thread"), "{err}");
    // --chat needs a template; this checkpoint has none.
    let err = stderr_of_failure(&["generate", "--target", target, "--prompt", "x", "--chat"]);
    assert!(err.contains("chat template") && err.contains("without --chat"), "{err}");
}
