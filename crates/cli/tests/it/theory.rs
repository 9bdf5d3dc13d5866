//! `anyspec theory`: figures, JSON and errors that name the flag.

use std::process::Command;

fn anyspec(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_anyspec")).args(args).output().expect("the binary runs")
}

#[test]
fn json_output_has_stable_fields_and_the_closed_form_values() {
    let out = anyspec(&["theory", "--alpha", "0.8", "--gamma", "5", "--cost", "0.05", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tokens = json["expected_tokens_per_step"].as_f64().unwrap();
    assert!((tokens - (1.0 - 0.8f64.powi(6)) / 0.2).abs() < 1e-9);
    let factor = json["improvement_factor"].as_f64().unwrap();
    assert!((factor - tokens / 1.25).abs() < 1e-9);
    assert!(json["best_gamma"].as_u64().unwrap() >= 1);
}

#[test]
fn the_table_names_every_quantity() {
    let out = anyspec(&["theory", "--alpha", "0.5", "--gamma", "3"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in ["expected tokens per step", "1.8750", "best γ"] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn out_of_range_arguments_name_the_flag_and_the_range() {
    for (args, needle) in [
        (vec!["--alpha", "1.5", "--gamma", "3"], "--alpha must be in [0, 1], got 1.5"),
        (vec!["--alpha", "0.5", "--gamma", "0"], "--gamma must be ≥ 1"),
        (vec!["--alpha", "0.5", "--gamma", "2", "--cost", "-1"], "--cost must be"),
    ] {
        let out = anyspec(&[&["theory"][..], &args].concat());
        assert!(!out.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: expected {needle:?} in {stderr}");
    }
}
