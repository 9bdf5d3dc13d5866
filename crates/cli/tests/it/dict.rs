//! `anyspec dict`: count → merge → build → info → emulate on the dictionary fixtures, and errors
//! that name the flag or the file.

use std::path::{Path, PathBuf};
use std::process::Command;

fn anyspec(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_anyspec")).args(args).output().expect("the binary runs")
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dict-builder/tests/data").join(name).display().to_string()
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("anyspec-cli-dict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sharded_and_direct_builds_agree_and_emulate() {
    let dir = temp_dir();
    let path = |name: &str| dir.join(name).display().to_string();
    let (tokenizer, corpus) = (fixture("tokenizer.json"), fixture("corpus.txt"));

    let count = json(&anyspec(&["dict", "count", "--corpus", &corpus, "-o", &path("a.counts"), "--json"]));
    assert_eq!(count["max_order"], 3);
    assert!(count["distinct_by_order"][0].as_u64().unwrap() > 100);
    json(&anyspec(&["dict", "merge", &path("a.counts"), "-o", &path("m.counts"), "--json"]));

    let common = ["--tokenizer", &tokenizer, "--min-count", "1", "--json"];
    let direct =
        json(&anyspec(&[&["dict", "build", "--corpus", &corpus, "-o", &path("d.dict")][..], &common].concat()));
    let sharded = json(&anyspec(
        &[&["dict", "build", "--counts", &path("m.counts"), "-o", &path("s.dict")][..], &common].concat(),
    ));
    assert_eq!(direct["entries"], sharded["entries"]);
    assert_eq!(std::fs::read(path("d.dict")).unwrap(), std::fs::read(path("s.dict")).unwrap());

    let info = json(&anyspec(&["dict", "info", &path("d.dict"), "--json"]));
    assert_eq!(info["info"]["entries"], direct["entries"]);
    assert_eq!(info["tokenizer_fingerprint"], direct["tokenizer_fingerprint"]);

    for drafter in ["dict", "prompt", "hybrid"] {
        let out = anyspec(&[
            "dict",
            "emulate",
            "--dict",
            &path("d.dict"),
            "--tokenizer",
            &tokenizer,
            "--text",
            &corpus,
            "--per-line",
            "--drafter",
            drafter,
            "--json",
        ]);
        let report = json(&out);
        // Emulating on the build corpus itself: the dictionary must help.
        assert!(report["speedup"].as_f64().unwrap() >= 1.0, "{drafter}: {report}");
        if drafter != "prompt" {
            assert!(report["speedup"].as_f64().unwrap() > 1.3, "{drafter}: {report}");
        }
        assert_eq!(report["tokens"].as_u64().unwrap(), json(&out)["tokens"].as_u64().unwrap());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_name_the_flag_or_file() {
    let tokenizer = fixture("tokenizer.json");
    let corpus = fixture("corpus.txt");
    let out = anyspec(&[
        "dict",
        "build",
        "--tokenizer",
        &tokenizer,
        "--corpus",
        &corpus,
        "-o",
        "/tmp/x.dict",
        "--min-prob",
        "2",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--min-prob must be in [0, 1], got 2"));

    let out = anyspec(&["dict", "emulate", "--tokenizer", &tokenizer, "--text", &corpus]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dict"));

    let out = anyspec(&["dict", "info", &corpus]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("corpus.txt is not an anyspec n-gram dictionary"));
}
