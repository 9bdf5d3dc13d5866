//! `anyspec demo --quick` on the committed assets/demo models.

use std::path::PathBuf;
use std::process::{Command, Output};

fn assets() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../assets/demo")
}

fn anyspec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_anyspec")).args(args).output().expect("the anyspec binary runs")
}

fn demo_json(cache: &std::path::Path) -> serde_json::Value {
    let assets = assets();
    let out = anyspec(&[
        "demo",
        "--quick",
        "--json",
        "--no-progress",
        "--assets",
        assets.to_str().unwrap(),
        "--cache",
        cache.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("--json prints one JSON object")
}

#[test]
fn quick_demo_prints_a_table_where_every_greedy_method_matches_autoregressive() {
    let cache = std::env::temp_dir().join(format!("anyspec-demo-test-{}", std::process::id()));
    let report = demo_json(&cache);
    assert_eq!(report["temperature"], 0.0);
    assert_eq!(report["prompts"].as_array().unwrap().len(), 2);
    let rows = report["rows"].as_array().unwrap();
    assert!(rows.len() >= 4, "{rows:?}");
    assert_eq!(rows[0]["method"], "autoregressive");
    assert!(rows[0]["acceptance_rate"].is_null());
    assert!((rows[0]["speedup"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    let max_tokens = report["max_tokens"].as_u64().unwrap();
    for row in rows {
        let method = row["method"].as_str().unwrap();
        assert_eq!(row["matches_ar"], true, "{method} changed the greedy output");
        // No stop tokens in the demo: every method generates max_tokens for each prompt.
        assert_eq!(row["generated"].as_u64().unwrap(), 2 * max_tokens, "{method}");
        let tokens_per_step = row["tokens_per_step"].as_f64().unwrap();
        assert!(tokens_per_step >= 1.0, "{method}: {tokens_per_step}");
        assert!(row["tokens_per_second"].as_f64().unwrap() > 0.0, "{method}");
        if method != "autoregressive" {
            let rate = row["acceptance_rate"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&rate), "{method}: {rate}");
            let steps = row["steps"].as_u64().unwrap();
            let accepted = row["accepted"].as_u64().unwrap();
            // Each step emits its accepted drafts plus one target token.
            assert_eq!(accepted + steps, row["generated"].as_u64().unwrap(), "{method}");
        }
    }
    // The model drafter must actually draft and sometimes be right on this text.
    let model = rows.iter().find(|r| r["method"] == "model, same tokenizer").unwrap();
    assert!(model["accepted"].as_u64().unwrap() > 0, "{model}");

    // The first run built the artifacts; the second reuses them.
    let artifacts = report["artifacts"].as_array().unwrap();
    assert!(!artifacts.is_empty());
    assert!(artifacts.iter().all(|a| a["built"] == true), "{artifacts:?}");
    let again = demo_json(&cache);
    assert!(again["artifacts"].as_array().unwrap().iter().all(|a| a["built"] == false));
    assert_eq!(again["rows"][0]["matches_ar"], true);
    std::fs::remove_dir_all(&cache).ok();
}

#[test]
fn a_directory_without_demo_assets_is_a_clear_error() {
    let out = anyspec(&["demo", "--assets", env!("CARGO_MANIFEST_DIR"), "--no-progress"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--assets") && err.contains("cargo xtask demo-assets"), "{err}");
}

#[test]
fn methods_selects_rows_and_sampling_runs_them() {
    let cache = std::env::temp_dir().join(format!("anyspec-demo-methods-{}", std::process::id()));
    let (assets, cache_arg) = (assets(), cache.to_str().unwrap().to_string());
    let common = ["demo", "--json", "--no-progress", "--assets", assets.to_str().unwrap(), "--cache", &cache_arg];
    let mut args = common.to_vec();
    args.extend(["--methods", "slrs,tli", "--temperature", "0.8", "--prompts", "1", "--max-tokens", "8"]);
    let out = anyspec(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = report["rows"].as_array().unwrap().iter().map(|r| r["method"].as_str().unwrap()).collect();
    // Table order, autoregressive first whatever the list says.
    assert_eq!(names, ["autoregressive", "TLI → drafter-sp", "SLRS → drafter-byte"]);
    for row in report["rows"].as_array().unwrap() {
        assert_eq!(row["generated"], 8, "{row}");
        assert!(row["matches_ar"].is_null(), "sampled rows are not compared: {row}");
    }
    let mut args = common.to_vec();
    args.extend(["--methods", "tli,medusa"]);
    let out = anyspec(&args);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"medusa\"") && err.contains("slrs"), "{err}");
    std::fs::remove_dir_all(&cache).ok();
}
