//! `anyspec shortlist`: build → inspect, end-of-sequence kept, refusals and flag errors.

use crate::support::{affinity_fixture as fixture, anyspec, json, temp_dir};

#[test]
fn build_keeps_eos_and_inspect_agrees() {
    let dir = temp_dir("shortlist", "build");
    let list = dir.join("s.bin").display().to_string();
    let (tokenizer, corpus) = (fixture("tokenizer.json"), fixture("corpus.txt"));
    let built = json(&anyspec(&[
        "shortlist",
        "build",
        "--tokenizer",
        &tokenizer,
        "--corpus",
        &corpus,
        "--size",
        "40",
        "-o",
        &list,
        "--json",
    ]));
    assert_eq!(built["size"], 40);
    assert_eq!(built["eos"], serde_json::json!([0]));
    assert_eq!(built["eos_tokens"], serde_json::json!(["<|endoftext|>"]));
    let coverage = built["coverage"].as_f64().unwrap();
    assert!(coverage > 0.2 && coverage < 1.0, "{built}");
    let inspected = json(&anyspec(&["shortlist", "inspect", &list, "--tokenizer", &tokenizer, "--json"]));
    for field in ["size", "eos", "coverage", "drafter_fingerprint", "corpus_tokens"] {
        assert_eq!(inspected[field], built[field], "{field}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_name_the_flag_and_the_fix() {
    let dir = temp_dir("shortlist", "errors");
    let list = dir.join("s.bin").display().to_string();
    let (tokenizer, corpus) = (fixture("tokenizer.json"), fixture("corpus.txt"));
    let out =
        anyspec(&["shortlist", "build", "--tokenizer", &tokenizer, "--corpus", &corpus, "--size", "0", "-o", &list]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--size must be"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A drafter tokenizer with no end-of-sequence token needs --eos.
    let plain = fixture("no_eos.json");
    let out = anyspec(&["shortlist", "build", "--tokenizer", &plain, "--corpus", &corpus, "--size", "2", "-o", &list]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--eos"), "{}", String::from_utf8_lossy(&out.stderr));
    let built = json(&anyspec(&[
        "shortlist",
        "build",
        "--tokenizer",
        &plain,
        "--corpus",
        &corpus,
        "--size",
        "2",
        "--eos",
        "c",
        "-o",
        &list,
        "--json",
    ]));
    assert_eq!(built["eos"], serde_json::json!([2]));
    let out = anyspec(&["shortlist", "inspect", &list, "--tokenizer", &tokenizer]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("built for the drafter tokenizer"));
    std::fs::remove_dir_all(&dir).unwrap();
}
