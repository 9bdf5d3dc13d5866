//! `anyspec dynaspec`: build → inspect on the small conformance checkpoint, refusals of a router
//! for another model and of impossible parameters.

use std::path::Path;

use crate::support::{affinity_fixture as fixture, anyspec, json, temp_dir};

fn model(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data").join(name).display().to_string()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn build_inspect_and_refusals() {
    let dir = temp_dir("dynaspec", "build");
    // Enough text for ten 128-token windows (one is held out): the fixture corpus four times.
    let corpus = dir.join("corpus.txt");
    std::fs::write(&corpus, std::fs::read_to_string(fixture("corpus.txt")).unwrap().repeat(4)).unwrap();
    let corpus = corpus.display().to_string();
    let router = dir.join("router.safetensors").display().to_string();
    let target = model("llama3-gqa");
    let small = ["--clusters", "8", "--drafter-layers", "1", "--epochs", "2", "--hidden", "16"];
    let mut args = vec!["dynaspec", "build", "--model", &target, "--corpus", &corpus, "-o", &router, "--json"];
    args.extend_from_slice(&small);
    let built = json(&anyspec(&args));
    assert_eq!(built["clusters"], 8);
    assert_eq!(built["vocab_size"], 320);
    assert_eq!(built["loss_log"].as_array().unwrap().len(), 2);
    let recall = built["build"]["recall"].as_array().unwrap();
    assert!(!recall.is_empty() && recall.iter().all(|r| r["target_mass"].as_f64().unwrap() <= 1.0 + 1e-9));

    let inspected = json(&anyspec(&["dynaspec", "inspect", &router, "--model", &target, "--json"]));
    for field in ["model_fingerprint", "clusters", "data_digest", "positions", "loss_log"] {
        assert_eq!(inspected[field], built[field], "{field}");
    }
    // Another model's head: refused, with the fix.
    let out = anyspec(&["dynaspec", "inspect", &router, "--model", &model("qwen2-tied-bf16")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("was built for the model with fingerprint"), "{}", stderr(&out));

    // M larger than the vocabulary, a drafter as deep as the model: named before any work.
    let mut args = vec!["dynaspec", "build", "--model", &target, "--corpus", &corpus, "-o", &router, "--force"];
    args.extend_from_slice(&["--clusters", "321"]);
    let out = anyspec(&args);
    assert!(stderr(&out).contains("--clusters must be in 1..=320"), "{}", stderr(&out));
    let mut args = vec!["dynaspec", "build", "--model", &target, "--corpus", &corpus, "-o", &router, "--force"];
    args.extend_from_slice(&["--drafter-layers", "3"]);
    let out = anyspec(&args);
    assert!(stderr(&out).contains("--drafter-layers must be in 1..=2"), "{}", stderr(&out));
    // The output may not be an input.
    let out = anyspec(&["dynaspec", "build", "--model", &target, "--corpus", &corpus, "-o", &corpus]);
    assert!(!out.status.success() && stderr(&out).contains("same file as the input"), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn eagle_build_inspect_and_refusals() {
    let dir = temp_dir("dynaspec", "eagle");
    // Enough text for ten 256-token capture windows (one is held out).
    let corpus = dir.join("corpus.txt");
    std::fs::write(&corpus, std::fs::read_to_string(fixture("corpus.txt")).unwrap().repeat(8)).unwrap();
    let corpus = corpus.display().to_string();
    let drafter = dir.join("eagle.safetensors").display().to_string();
    let target = model("llama3-gqa");
    let args = ["dynaspec", "eagle", "--model", &target, "--corpus", &corpus, "-o", &drafter, "--epochs", "2"];
    let mut with_json = args.to_vec();
    with_json.extend(["--window", "32", "--ce-shortlist", "64", "--json"]);
    let built = json(&anyspec(&with_json));
    assert_eq!(built["layers"], 1);
    assert_eq!(built["loss_log"].as_array().unwrap().len(), 2);
    assert_eq!(built["valid_accuracy"].as_array().unwrap().len(), 2);
    assert!(built["build"]["valid_positions"].as_u64().unwrap() > 0);

    let inspected = json(&anyspec(&["dynaspec", "inspect", &drafter, "--model", &target, "--json"]));
    for field in ["model_fingerprint", "layers", "positions", "loss_log", "valid_accuracy"] {
        assert_eq!(inspected[field], built[field], "{field}");
    }
    let text = String::from_utf8_lossy(&anyspec(&["dynaspec", "inspect", &drafter]).stdout).into_owned();
    assert!(text.contains("an EAGLE drafter of 1 layer"), "{text}");
    // Another model's head: refused, with the fix.
    let out = anyspec(&["dynaspec", "inspect", &drafter, "--model", &model("qwen2-tied-bf16")]);
    assert!(!out.status.success() && stderr(&out).contains("anyspec dynaspec eagle"), "{}", stderr(&out));
    // A file that is not an EAGLE drafter is not replaced without --force; the output may not
    // be an input.
    let out = anyspec(&["dynaspec", "eagle", "--model", &target, "--corpus", &corpus, "-o", &corpus]);
    assert!(!out.status.success() && stderr(&out).contains("same file as the input"), "{}", stderr(&out));
    let other = dir.join("notes.txt");
    std::fs::write(&other, "keep me").unwrap();
    let out = anyspec(&["dynaspec", "eagle", "--model", &target, "--corpus", &corpus, "-o", other.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "keep me");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn eagle_on_chats_reads_prompt_and_answer_records() {
    let dir = temp_dir("dynaspec", "eagle-chats");
    // The fixture model with a chat template ([INST] … [/INST]).
    let target = dir.join("model");
    std::fs::create_dir_all(&target).unwrap();
    for name in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(Path::new(&model("llama3-gqa")).join(name), target.join(name)).unwrap();
    }
    let text = std::fs::read_to_string(fixture("corpus.txt")).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.split_whitespace().count() >= 6).collect();
    let words = |line: &str, n: usize| line.split_whitespace().take(n).collect::<Vec<_>>().join(" ");
    let record = |i: usize| {
        let (prompt, answer) = (words(lines[i % lines.len()], 3), words(lines[(i + 1) % lines.len()], 4));
        format!("{}\n", serde_json::json!({ "prompt": prompt, "answer": answer }))
    };
    let chats = dir.join("chats.jsonl");
    std::fs::write(&chats, (0..20).map(record).collect::<String>()).unwrap();
    let (chats, target) = (chats.display().to_string(), target.display().to_string());
    let drafter = dir.join("eagle.safetensors").display().to_string();
    let base = ["dynaspec", "eagle", "--model", &target, "--corpus", &chats, "-o", &drafter, "--epochs", "1"];
    let mut args = base.to_vec();
    args.extend(["--window", "16", "--ce-shortlist", "64", "--prompt-field", "prompt", "--text-field", "answer"]);
    args.extend(["--prompt-context", "4", "--json"]);
    // Without a chat template the model cannot read chats: said so, nothing written.
    let out = anyspec(&args);
    assert!(!out.status.success() && stderr(&out).contains("chat template"), "{}", stderr(&out));
    assert!(!Path::new(&drafter).exists());
    std::fs::write(Path::new(&target).join("tokenizer_config.json"), r#"{"chat_template": "[INST] {{ m }} [/INST]"}"#)
        .unwrap();
    let built = json(&anyspec(&args));
    let positions = |built: &serde_json::Value| {
        let (train, valid) = (&built["build"]["train_positions"], &built["build"]["valid_positions"]);
        (train.as_u64().unwrap(), valid.as_u64().unwrap())
    };
    let (train, valid) = positions(&built);
    assert!(valid > 0 && train > valid, "two of the twenty chats are held out: {train} {valid}");
    assert_eq!(built["positions"].as_u64().unwrap(), train);
    // Each chat keeps its answer and --prompt-context positions of its prompt: five more
    // each, a hundred in all.
    let mut longer = args.clone();
    let context = longer.iter().position(|a| *a == "4").unwrap();
    longer[context] = "9";
    let (train9, valid9) = positions(&json(&anyspec(&longer)));
    assert_eq!(train9 + valid9, train + valid + 100);
    let mut misnamed = args.clone();
    let field = misnamed.iter().position(|a| *a == "answer").unwrap();
    misnamed[field] = "reply";
    misnamed.push("--force");
    let out = anyspec(&misnamed);
    assert!(!out.status.success() && stderr(&out).contains("\"reply\""), "{}", stderr(&out));
    let corpus_txt = dir.join("corpus.txt");
    std::fs::write(&corpus_txt, &text).unwrap();
    let mut txt = args.clone();
    let corpus_txt = corpus_txt.display().to_string();
    txt[5] = &corpus_txt;
    txt.push("--force");
    let out = anyspec(&txt);
    assert!(!out.status.success() && stderr(&out).contains("*.jsonl"), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}
