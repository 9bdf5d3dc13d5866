//! `anyspec simulate`: measured figures agree with theory, and bad flags are clear errors.

use std::process::Command;

fn anyspec(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_anyspec")).args(args).output().expect("the binary runs")
}

#[test]
fn every_rule_runs_and_tokens_per_step_follow_theory() {
    let out = anyspec(&["simulate", "--tokens", "4000", "--json", "--no-progress"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let methods = json["methods"].as_array().unwrap();
    assert_eq!(methods.len(), 7);
    for m in methods {
        assert_eq!(m["tokens"].as_u64(), Some(4000), "{m}");
        let (theory, measured) =
            (m["theory_tokens_per_step"].as_f64().unwrap(), m["measured_tokens_per_step"].as_f64().unwrap());
        // Theory uses the stationary mean of α, so it is close but not exact: 10% is generous
        // for 4,000 tokens and still catches a rule that accepts too much or too little.
        assert!((theory - measured).abs() / theory < 0.1, "{}: theory {theory}, measured {measured}", m["method"]);
    }
    assert!(methods[1]["measured_tokens_per_step"].as_f64().unwrap() > 1.5, "a close drafter must pay off");
}

#[test]
fn bad_flags_name_the_flag() {
    for (args, needle) in [
        (vec!["--temperature", "-1"], "--temperature must be"),
        (vec!["--top-p", "0"], "--top-p must be in (0, 1]"),
        (vec!["--top-p", "1.5"], "--top-p must be in (0, 1]"),
        (vec!["--gamma", "0"], "--gamma must be ≥ 1"),
        (vec!["--overlap", "0"], "--overlap must be in (0, 1]"),
        // Dense vocab × vocab tables: 10^8 used to abort on allocation.
        (vec!["--vocab", "100000000"], "--vocab must be in 2..=4096"),
        (vec!["--vocab", "1"], "--vocab must be in 2..=4096"),
    ] {
        let out = anyspec(&[&["simulate", "--tokens", "10"][..], &args].concat());
        assert!(!out.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: expected {needle:?} in {stderr}");
    }
}
