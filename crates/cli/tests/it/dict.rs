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
fn chained_continuations_keep_the_entries_and_draft_further() {
    let dir = temp_dir().join("chained");
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    let (tokenizer, corpus) = (fixture("tokenizer.json"), fixture("corpus.txt"));
    let build = |rule: &str, out: &str| {
        let args = ["dict", "build", "--corpus", &corpus, "--tokenizer", &tokenizer, "--min-count", "1"];
        json(&anyspec(&[&args[..], &["--continuations", rule, "-o", &path(out), "--json"]].concat()))
    };
    let plain = build("most-frequent", "plain.dict");
    let chained = build("chained", "chained.dict");
    // Chaining changes only what is stored after each prefix, never which prefixes are kept.
    assert_eq!(plain["entries"], chained["entries"]);
    assert!(chained["bytes"].as_u64().unwrap() > plain["bytes"].as_u64().unwrap(), "{plain} {chained}");
    let info = json(&anyspec(&["dict", "info", &path("chained.dict"), "--json"]));
    assert_eq!(info["info"]["params"]["continuations"], "chained");
    let emulate = |dict: &str| {
        let args = ["dict", "emulate", "--dict", &path(dict), "--tokenizer", &tokenizer, "--text", &corpus];
        json(&anyspec(&[&args[..], &["--per-line", "--drafter", "dict", "--json"]].concat()))
    };
    let (plain, chained) = (emulate("plain.dict"), emulate("chained.dict"));
    // On its own corpus, the chained dictionary drafts and gets accepted further per step.
    let mal = |r: &serde_json::Value| r["mean_accepted_length"].as_f64().unwrap();
    assert!(mal(&chained) > mal(&plain), "{plain} {chained}");
    let bad = anyspec(&["dict", "build", "--corpus", &corpus, "--tokenizer", &tokenizer, "--continuations", "longest"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("most-frequent"));
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

#[test]
fn empty_text_and_inputs_given_twice_are_refused() {
    let dir = std::env::temp_dir().join(format!("anyspec-cli-dict-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    let (tokenizer, corpus) = (fixture("tokenizer.json"), fixture("corpus.txt"));
    std::fs::write(dir.join("empty.txt"), "").unwrap();

    // An empty corpus writes no dictionary (it used to write a 0-entry one and exit 0).
    let out =
        anyspec(&["dict", "build", "--tokenizer", &tokenizer, "--corpus", &path("empty.txt"), "-o", &path("e.dict")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("corpus holds no text") && err.contains("non-empty corpus"), "{err}");
    assert!(!dir.join("e.dict").exists(), "a refused build left a file");

    // The same corpus twice, directly or through a link, would count it twice.
    let twice = ["dict", "build", "--tokenizer", &tokenizer, "--corpus", &corpus, "--corpus"];
    let out = anyspec(&[&twice[..], &[&corpus, "-o", &path("t.dict")]].concat());
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("are the same file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&corpus, dir.join("link.txt")).unwrap();
        let out = anyspec(&[&twice[..], &[&path("link.txt"), "-o", &path("t.dict")]].concat());
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("counts would be added twice"));
    }

    // Merging one shard twice would double its counts.
    json(&anyspec(&["dict", "count", "--corpus", &corpus, "-o", &path("a.counts"), "--json"]));
    let out = anyspec(&["dict", "merge", &path("a.counts"), &path("a.counts"), "-o", &path("m.counts")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("are the same file"));
    assert!(!dir.join("m.counts").exists());

    // Emulating on text without tokens says so instead of reporting a 0× speedup.
    let out =
        anyspec(&["dict", "emulate", "--tokenizer", &tokenizer, "--drafter", "prompt", "--text", &path("empty.txt")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no tokens to replay"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_checkpoint_directory_or_a_gguf_file_gives_its_tokenizer() {
    let dir = std::env::temp_dir().join(format!("anyspec-cli-dict-checkpoint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    let checkpoint = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/llama3-gqa");
    let build = |tokenizer: &str, out: &str| {
        anyspec(&[
            "dict",
            "build",
            "--tokenizer",
            tokenizer,
            "--corpus",
            &fixture("corpus.txt"),
            "-o",
            out,
            "--no-progress",
        ])
    };
    // The directory's tokenizer is its tokenizer.json: the same dictionary, byte for byte.
    let from_dir = build(checkpoint.to_str().unwrap(), &path("dir.dict"));
    assert!(from_dir.status.success(), "{}", String::from_utf8_lossy(&from_dir.stderr));
    let from_json = build(checkpoint.join("tokenizer.json").to_str().unwrap(), &path("json.dict"));
    assert!(from_json.status.success(), "{}", String::from_utf8_lossy(&from_json.stderr));
    assert_eq!(std::fs::read(path("dir.dict")).unwrap(), std::fs::read(path("json.dict")).unwrap());
    // A GGUF file that is not a model: the error says it was read as one.
    std::fs::write(dir.join("broken.gguf"), b"GGUF\x03\x00\x00\x00").unwrap();
    let out = build(&path("broken.gguf"), &path("g.dict"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tokenizer") && err.contains("cannot open the model"), "{err}");
    // Neither JSON nor a model: the error lists what the flag takes.
    std::fs::write(dir.join("notes.txt"), "hello").unwrap();
    let out = build(&path("notes.txt"), &path("n.dict"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a GGUF file or a checkpoint directory"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
