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

#[test]
fn a_size_beyond_the_tokens_seen_is_reported_as_a_warning() {
    let dir = temp_dir("shortlist", "unseen");
    let tokenizer = fixture("tokenizer.json");
    let corpus = dir.join("tiny.txt");
    std::fs::write(&corpus, "the the the").unwrap();
    let build = |size: &str, name: &str| {
        let out = anyspec(&[
            "shortlist",
            "build",
            "--tokenizer",
            &tokenizer,
            "--corpus",
            corpus.to_str().unwrap(),
            "--size",
            size,
            "-o",
            dir.join(name).to_str().unwrap(),
            "--json",
        ]);
        (json(&out), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (built, stderr) = build("30", "big.bin");
    let warnings = built["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{built}");
    let warning = warnings[0].as_str().unwrap();
    assert!(warning.contains("never occur in the corpus") && warning.contains("--size"), "{warning}");
    assert!(stderr.contains("never occur in the corpus"), "the warning is not on stderr: {stderr}");
    // The size it suggests keeps only tokens that were seen (plus the forced end-of-sequence).
    let suggested = warning.rsplit("at most ").next().unwrap().trim().to_owned();
    let (small, _) = build(&suggested, "small.bin");
    assert_eq!(small["warnings"].as_array().unwrap().len(), 0, "{small}");
    std::fs::remove_dir_all(&dir).ok();
}
