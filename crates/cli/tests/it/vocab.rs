//! `anyspec vocab`: stable JSON fields, artifacts that refuse other tokenizers, flag errors.

use std::path::PathBuf;
use std::process::Command;

fn anyspec(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_anyspec")).args(args).output().expect("the binary runs")
}

/// A fixture tokenizer of anyspec-vocab-map.
fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vocab-map/tests/data").join(name).display().to_string()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn stats_json_has_stable_fields_and_hand_checked_values() {
    let (t, d) = (fixture("tiny_bytelevel.json"), fixture("tiny_sentencepiece.json"));
    let raw = json(&anyspec(&["vocab", "stats", "--target", &t, "--drafter", &d, "--match", "raw", "--json"]));
    assert_eq!(raw["mode"], "raw");
    assert_eq!(raw["target_size"], 7);
    assert_eq!(raw["drafter_size"], 11);
    assert_eq!(raw["intersection"], 2);
    assert!((raw["ratio"].as_f64().unwrap() - 2.0 / 7.0).abs() < 1e-12);
    assert_eq!(raw["target_fingerprint"].as_str().unwrap().len(), 64);
    let bytes = json(&anyspec(&["vocab", "stats", "--target", &t, "--drafter", &d, "--json"]));
    assert_eq!(bytes["mode"], "bytes", "bytes is the default");
    assert_eq!(bytes["intersection"], 5);
}

#[test]
fn a_built_map_is_refused_against_another_drafter_naming_both_fingerprints() {
    let dir = std::env::temp_dir().join(format!("anyspec-cli-vocab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_path = dir.join("map.asvm").display().to_string();
    let (t, d) = (fixture("bytelevel.json"), fixture("metaspace.json"));
    let built = json(&anyspec(&["vocab", "build", "--target", &t, "--drafter", &d, "--out", &out_path, "--json"]));
    let inspected = json(&anyspec(&["vocab", "inspect", &out_path, "--target", &t, "--drafter", &d, "--json"]));
    assert_eq!(inspected["intersection"], built["intersection"]);
    assert_eq!(inspected["checked_against_tokenizers"], true);

    let wrong = fixture("sentencepiece.json");
    let out = anyspec(&["vocab", "inspect", &out_path, "--target", &t, "--drafter", &wrong]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(built["drafter_fingerprint"].as_str().unwrap()), "{stderr}");
    assert!(stderr.contains("rebuild the map"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn decompositions_json_reports_counts_and_n_max() {
    let (t, d) = (fixture("tiny_bytelevel.json"), fixture("tiny_sentencepiece.json"));
    let report = json(&anyspec(&["vocab", "decompositions", "--target", &t, "--drafter", &d, "--json"]));
    let all = &report["summaries"][0];
    assert_eq!(all["subset"], "all");
    assert_eq!(all["tokens"], 6);
    assert_eq!(all["max_count"], "6");
    assert_eq!(all["n_max"], 3);
}

#[test]
fn errors_name_the_flag() {
    let out = anyspec(&["vocab", "stats", "--target", "/no/such.json", "--drafter", &fixture("wordpiece.json")]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--target") && stderr.contains("/no/such.json"), "{stderr}");
    let out = anyspec(&["vocab", "tokens", "--tokenizer", &fixture("wordpiece.json")]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ids"));
}

#[test]
fn every_json_output_is_an_object_with_a_warnings_array() {
    // Scripts read warnings from `--json` as people read them on stderr: an empty array when all
    // is well, also for the commands whose results are lists.
    let (t, d) = (fixture("tiny_bytelevel.json"), fixture("tiny_sentencepiece.json"));
    let runs: [&[&str]; 3] = [
        &["vocab", "stats", "--target", &t, "--drafter", &d, "--json"],
        &["vocab", "decompositions", "--target", &t, "--drafter", &d, "--json"],
        &["vocab", "tokens", "--tokenizer", &t, "--ids", "1,2", "--json"],
    ];
    for args in runs {
        let report = json(&anyspec(args));
        assert_eq!(report["warnings"], serde_json::json!([]), "{args:?}: {report}");
    }
    let tokens = json(&anyspec(&["vocab", "tokens", "--tokenizer", &t, "--ids", "1,2", "--json"]));
    assert_eq!(tokens["tokens"].as_array().map(Vec::len), Some(2), "{tokens}");
}
