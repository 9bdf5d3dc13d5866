//! `anyspec affinity`: build → inspect on the committed fixtures, stable JSON fields, refusals
//! and flag errors.

use crate::support::{affinity_fixture as fixture, anyspec, json, temp_dir};

#[test]
fn build_then_inspect_with_rows() {
    let dir = temp_dir("affinity", "build");
    let matrix = dir.join("m.safetensors").display().to_string();
    let (tokenizer, corpus) = (fixture("tokenizer.json"), fixture("corpus.txt"));
    let built = json(&anyspec(&[
        "affinity",
        "build",
        "--tokenizer",
        &tokenizer,
        "--corpus",
        &corpus,
        "-o",
        &matrix,
        "--window",
        "3",
        "--tau",
        "0.5",
        "--top-k",
        "6",
        "--min-count",
        "2",
        "--json",
    ]));
    assert_eq!(built["info"]["window"], 3);
    assert_eq!(built["info"]["top_k"], 6);
    assert_eq!(built["info"]["score"], "ppmi");
    assert_eq!(built["info"]["corpus"], "corpus.txt");
    assert_eq!(built["info"]["target_fingerprint"].as_str().unwrap().len(), 64);
    let rows = built["shape"]["rows_with_entries"].as_u64().unwrap();
    assert!(rows > 50, "{built}");
    assert!(built["shape"]["mean_entries_per_row"].as_f64().unwrap() <= 6.0);

    let inspected = json(&anyspec(&[
        "affinity",
        "inspect",
        &matrix,
        "--tokenizer",
        &tokenizer,
        "--row",
        "Ġthe",
        "--row",
        "0",
        "--json",
    ]));
    assert_eq!(inspected["info"], built["info"]);
    assert_eq!(inspected["tokenizer_checked"], true);
    let the = &inspected["rows"][0];
    assert_eq!(the["id"], 337);
    let weights: Vec<f64> = the["entries"].as_array().unwrap().iter().map(|e| e["weight"].as_f64().unwrap()).collect();
    assert!((weights.iter().sum::<f64>() - 1.0).abs() < 1e-4, "{weights:?}");
    assert!(weights.windows(2).all(|w| w[0] >= w[1]), "entries sorted by weight");
    assert!(inspected["rows"][1]["entries"].as_array().unwrap().is_empty(), "<|endoftext|> never occurs: identity");

    let text = anyspec(&["affinity", "inspect", &matrix]);
    assert!(text.status.success());
    assert!(String::from_utf8_lossy(&text.stdout).contains("tau 0.5"));

    // The paper's Eq. 2 score: recorded in the file, and the rows differ from PPMI's.
    let covariance = dir.join("omega.safetensors").display().to_string();
    let built = json(&anyspec(&[
        "affinity",
        "build",
        "--tokenizer",
        &tokenizer,
        "--corpus",
        &corpus,
        "-o",
        &covariance,
        "--window",
        "3",
        "--tau",
        "0.5",
        "--top-k",
        "6",
        "--min-count",
        "2",
        "--score",
        "covariance",
        "--json",
    ]));
    assert_eq!(built["info"]["score"], "covariance");
    let row = |path: &str| {
        json(&anyspec(&["affinity", "inspect", path, "--tokenizer", &tokenizer, "--row", "Ġthe", "--json"]))["rows"][0]
            ["entries"]
            .clone()
    };
    assert_ne!(row(&covariance), row(&matrix));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn refusals_and_flag_errors() {
    let dir = temp_dir("affinity", "errors");
    let matrix = dir.join("m.safetensors").display().to_string();
    let (tokenizer, corpus) = (fixture("tokenizer.json"), fixture("corpus.txt"));
    let out =
        anyspec(&["affinity", "build", "--tokenizer", &tokenizer, "--corpus", &corpus, "-o", &matrix, "--tau", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tau must be"), "{}", String::from_utf8_lossy(&out.stderr));
    let out =
        anyspec(&["affinity", "build", "--tokenizer", &tokenizer, "--corpus", &corpus, "-o", &matrix, "--top-k", "0"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--top-k must be"));

    json(&anyspec(&["affinity", "build", "--tokenizer", &tokenizer, "--corpus", &corpus, "-o", &matrix, "--json"]));
    let other = fixture("no_eos.json");
    let out = anyspec(&["affinity", "inspect", &matrix, "--tokenizer", &other]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("built for the target tokenizer with fingerprint"), "{err}");
    let out = anyspec(&["affinity", "inspect", &matrix, "--row", "Ġthe"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--row needs --tokenizer"));
    let out = anyspec(&["affinity", "inspect", &corpus]);
    assert!(!out.status.success());
    std::fs::remove_dir_all(&dir).unwrap();
}
