//! `cargo xtask fuzz` end to end: the self-test targets' panics, aborts, absurd allocations and
//! hangs must come back as findings (saved, named, failing the command), and a real target runs
//! clean.

use std::path::PathBuf;
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("anyspec-xtask-fuzz-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs `xtask fuzz --json` with `args`; returns the exit success and the parsed summary.
fn fuzz(out: &PathBuf, args: &[&str]) -> (bool, serde_json::Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["fuzz", "--json", "--seed", "3", "--out"])
        .arg(out)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    (output.status.success(), summary)
}

fn findings(summary: &serde_json::Value, target: &str) -> Vec<serde_json::Value> {
    let t = summary["targets"].as_array().unwrap().iter().find(|t| t["target"] == target).unwrap();
    t["findings"].as_array().unwrap().clone()
}

#[test]
fn panics_aborts_and_absurd_allocations_are_findings() {
    let out = scratch("crash");
    let (ok, summary) = fuzz(&out, &["--seconds", "1", "--target", "selftest-panic,selftest-abort,selftest-alloc"]);
    assert!(!ok, "findings must fail the command");
    // One panic site, however often it panicked.
    let panics = findings(&summary, "selftest-panic");
    assert_eq!(panics.len(), 1, "{panics:?}");
    assert_eq!(panics[0]["kind"], "panic");
    assert!(panics[0]["message"].as_str().unwrap().contains("the self-test target panics"), "{panics:?}");
    // Shrunk to nothing: every input but the seed panics, the empty one too.
    assert_eq!(panics[0]["len"], 0);
    // Every abort kills a worker: each is a finding, its input saved and rebuilt from the tick.
    let aborts = findings(&summary, "selftest-abort");
    assert!(!aborts.is_empty() && aborts.iter().all(|f| f["kind"] == "crash"), "{aborts:?}");
    assert!(aborts[0]["message"].as_str().unwrap().contains("SIGABRT"), "{aborts:?}");
    let allocs = findings(&summary, "selftest-alloc");
    assert!(
        allocs[0]["message"].as_str().unwrap().contains("memory allocation of 1099511627776 bytes failed"),
        "{allocs:?}"
    );
    for f in panics.iter().chain(&aborts).chain(&allocs) {
        let input = PathBuf::from(f["input"].as_str().unwrap());
        let saved = std::fs::read(&input).unwrap();
        assert_ne!(saved, b"a valid input", "the seed itself was saved as the finding");
        assert!(input.with_extension("txt").is_file());
    }
    assert!(summary["total_executions"].as_u64().unwrap() > 3);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_hang_is_killed_and_reported() {
    let out = scratch("hang");
    let (ok, summary) = fuzz(&out, &["--seconds", "1", "--hang-seconds", "1", "--target", "selftest-hang"]);
    assert!(!ok);
    let hangs = findings(&summary, "selftest-hang");
    assert_eq!(hangs[0]["kind"], "hang", "{hangs:?}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_real_target_runs_clean_and_counts_its_executions() {
    let out = scratch("clean");
    let (ok, summary) = fuzz(&out, &["--seconds", "0.5", "--target", "config-json"]);
    assert!(ok, "{summary}");
    let t = &summary["targets"][0];
    assert_eq!((t["seeds_accepted"].as_u64(), t["seeds"].as_u64()), (Some(5), Some(5)), "{t}");
    assert!(t["executions"].as_u64().unwrap() > 50, "{t}");
    assert!(t["refused"].as_u64().unwrap() > 0, "{t}");
    std::fs::remove_dir_all(&out).unwrap();
}
