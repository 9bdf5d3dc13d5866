//! `anyspec demo --quick`: on the committed assets/demo models (`--model tiny`), and on
//! SmolLM2-135M-Instruct when the model can be had (from the model cache, fetched once).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::temp_dir;

fn assets() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../assets/demo")
}

fn anyspec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_anyspec")).args(args).output().expect("the anyspec binary runs")
}

/// `demo --model tiny --quick` with the assets inside the binary, run from `cwd` with
/// everything cached under `cache`. The self-speculative depth is given: chosen by timing, it
/// could differ between two runs on a busy machine, and the DynaSpec router is cached per depth
/// (a second run would then rightly build the other depth's router).
fn demo_json(cwd: &Path, cache: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_anyspec"))
        .args(["demo", "--model", "tiny", "--fixed-gamma", "--quick", "--json", "--no-progress", "--first-layers", "2"])
        .arg("--cache-dir")
        .arg(cache)
        .current_dir(cwd)
        .output()
        .expect("the anyspec binary runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("--json prints one JSON object")
}

#[test]
fn quick_demo_prints_a_table_where_every_greedy_method_matches_autoregressive() {
    let dir = temp_dir("demo", "quick");
    let (cwd, cache) = (dir.join("empty"), dir.join("cache"));
    std::fs::create_dir_all(&cwd).unwrap();
    let report = demo_json(&cwd, &cache);
    assert_eq!(report["temperature"], 0.0);
    assert_eq!(report["prompts"].as_array().unwrap().len(), 2);
    assert_eq!(report["first_layers"], 2);
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
    // A warning names exactly the rows that drafted nothing or had every drafted token rejected.
    let warnings: Vec<&str> = report["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    for row in &rows[1..] {
        let (drafted, accepted) = (row["drafted"].as_u64().unwrap(), row["accepted"].as_u64().unwrap());
        let useless = drafted == 0 || (drafted >= 16 && accepted == 0);
        let method = row["method"].as_str().unwrap();
        let warned =
            warnings.iter().any(|w| w.starts_with(&format!("{method}:")) || w.starts_with(&format!("{method} ")));
        assert_eq!(warned, useless, "{method}: drafted {drafted}, accepted {accepted}, warnings {warnings:?}");
    }
    // The model drafter must actually draft and sometimes be right on this text.
    let model = rows.iter().find(|r| r["method"] == "model, same tokenizer").unwrap();
    assert!(model["accepted"].as_u64().unwrap() > 0, "{model}");

    // The assets came out of the binary into the cache directory, not from a source tree.
    let assets_dir = PathBuf::from(report["assets"].as_str().unwrap());
    assert!(assets_dir.starts_with(cache.join("demo-assets")), "{}", assets_dir.display());
    assert!(assets_dir.join("target/model.safetensors").is_file());

    // The first run built the artifacts; the second reuses them, and the unpacked assets.
    let artifacts = report["artifacts"].as_array().unwrap();
    assert!(!artifacts.is_empty());
    assert!(artifacts.iter().all(|a| a["built"] == true), "{artifacts:?}");
    assert!(artifacts.iter().all(|a| Path::new(a["path"].as_str().unwrap()).starts_with(cache.join("demo"))));
    let again = demo_json(&cwd, &cache);
    let reused = again["artifacts"].as_array().unwrap();
    assert_eq!(reused.len(), artifacts.len(), "{reused:?}");
    assert!(reused.iter().all(|a| a["built"] == false), "{reused:?}");
    assert_eq!(again["rows"][0]["matches_ar"], true);
    assert_eq!(again["assets"], report["assets"]);
    assert_eq!(std::fs::read_dir(cache.join("demo-assets")).unwrap().count(), 1);

    // Nothing was written in the working directory, and the cache holds only anyspec's areas.
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0, "the demo wrote into its working directory");
    let list = crate::support::json(&anyspec(&["cache", "list", "--json", "--cache-dir", cache.to_str().unwrap()]));
    assert_eq!(list["others"].as_array().unwrap().len(), 0, "{list}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_directory_without_demo_assets_is_a_clear_error() {
    let cache = temp_dir("demo", "no-assets");
    let out = anyspec(&[
        "demo",
        "--model",
        "tiny",
        "--assets",
        env!("CARGO_MANIFEST_DIR"),
        "--no-progress",
        "--cache-dir",
        cache.to_str().unwrap(),
    ]);
    std::fs::remove_dir_all(&cache).ok();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--assets") && err.contains("cargo xtask demo-assets"), "{err}");
}

#[test]
fn methods_selects_rows_and_sampling_runs_them() {
    let cache = temp_dir("demo", "methods");
    let (assets, cache_arg) = (assets(), cache.to_str().unwrap().to_string());
    let common = [
        "demo",
        "--model",
        "tiny",
        "--json",
        "--no-progress",
        "--assets",
        assets.to_str().unwrap(),
        "--cache-dir",
        &cache_arg,
    ];
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
        // Sampled rows carry the acceptance audit instead; autoregressive decoding has none.
        assert_eq!(row["audit"].is_null(), row["method"] == "autoregressive", "{row}");
    }
    let mut args = common.to_vec();
    args.extend(["--methods", "tli,medusa"]);
    let out = anyspec(&args);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"medusa\"") && err.contains("slrs"), "{err}");
    // The EAGLE drafter ships for SmolLM2 only: asked for on the tiny target, the reason.
    let mut args = common.to_vec();
    args.extend(["--methods", "hybrid-eagle"]);
    let out = anyspec(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no EAGLE drafter is trained for the tiny target"), "{err}");
    std::fs::remove_dir_all(&cache).ok();
}

/// `--rounds 2`: each prompt is generated twice by every method and the faster kept, so the
/// counters are those of one generation per prompt; the model drafter's reading of the prompt is
/// timed apart from its decoding. Rounds of sampled runs, and no rounds, are refused.
#[test]
fn rounds_keep_one_generation_per_prompt_and_the_drafters_prefill_is_apart() {
    let cache = temp_dir("demo", "rounds");
    let (assets, cache_arg) = (assets(), cache.to_str().unwrap().to_string());
    let common =
        ["demo", "--model", "tiny", "--no-progress", "--assets", assets.to_str().unwrap(), "--cache-dir", &cache_arg];
    let mut args = common.to_vec();
    args.extend(["--json", "--methods", "prompt,self", "--first-layers", "2", "--prompts", "2", "--max-tokens", "8"]);
    args.extend(["--rounds", "2"]);
    let out = anyspec(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["rounds"], 2);
    for row in report["rows"].as_array().unwrap() {
        let method = row["method"].as_str().unwrap();
        assert_eq!(row["generated"], 16, "{method}: two prompts of 8 tokens, not two rounds' worth");
        assert_eq!(row["matches_ar"], true, "{method}");
        let prefill = row["drafter_prefill_ms"].as_f64().unwrap();
        match method {
            "autoregressive" => assert_eq!(prefill, 0.0),
            // The tiny drafter's pass over each prompt.
            m if m.starts_with("self-speculative") => assert!(prefill > 0.0, "{row}"),
            _ => assert!(prefill >= 0.0, "{row}"),
        }
    }
    for (extra, expected) in [
        (&["--rounds", "0"][..], "--rounds 0"),
        (&["--rounds", "3", "--temperature", "0.8"][..], "--rounds 3 with --temperature 0.8"),
    ] {
        let mut args = common.to_vec();
        args.extend(extra);
        let out = anyspec(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(expected), "{extra:?}: {err}");
    }
    std::fs::remove_dir_all(&cache).ok();
}

#[test]
fn save_tokens_writes_every_rows_greedy_output_and_replaces_only_its_own_files() {
    let cache = temp_dir("demo", "save-tokens");
    let tokens = cache.join("tokens.json");
    let run = |path: &Path| {
        anyspec(&[
            "demo",
            "--model",
            "tiny",
            "--methods",
            "prompt,dict,hybrid",
            "--prompts",
            "2",
            "--max-tokens",
            "12",
            "--no-progress",
            "--cache-dir",
            cache.to_str().unwrap(),
            "--save-tokens",
            path.to_str().unwrap(),
        ])
    };
    let out = run(&tokens);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&tokens).unwrap()).unwrap();
    assert_eq!(saved["format"], "anyspec-demo-tokens/1");
    assert_eq!(saved["temperature"], 0.0);
    assert!(saved["verify_cost"].as_array().unwrap().len() >= 2, "{saved}");
    assert!(Path::new(saved["dictionary"].as_str().unwrap()).is_file(), "{saved}");
    let prompts = saved["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 2);
    assert!(prompts.iter().all(|p| !p["ids"].as_array().unwrap().is_empty()));
    let methods = saved["methods"].as_array().unwrap();
    let keys: Vec<&str> = methods.iter().map(|m| m["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["ar", "prompt", "dict", "hybrid"]);
    // Greedy: every row wrote the autoregressive tokens, up to 12 per prompt.
    let ar = &methods[0]["outputs"];
    assert_eq!(ar.as_array().unwrap().len(), 2);
    assert!(ar.as_array().unwrap().iter().all(|o| (1..=12).contains(&o.as_array().unwrap().len())), "{ar}");
    assert!(methods.iter().all(|m| &m["outputs"] == ar), "{saved}");

    // A second run replaces its own file; any other file is refused before generating, untouched.
    assert!(run(&tokens).status.success());
    let other = cache.join("notes.json");
    std::fs::write(&other, "{\"mine\": true}").unwrap();
    let out = run(&other);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--save-tokens") && err.contains("not a token file"), "{err}");
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "{\"mine\": true}");
    let out = run(&cache);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a directory"));
    std::fs::remove_dir_all(&cache).ok();
}

#[test]
fn too_many_prompts_and_an_unknown_model_file_are_clear_errors() {
    let cache = temp_dir("demo", "errors");
    let cache = cache.to_str().unwrap();
    let out = anyspec(&["demo", "--model", "tiny", "--prompts", "1000", "--no-progress", "--cache-dir", cache]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--prompts 1000") && err.contains("1..="), "{err}");
    let out = anyspec(&["demo", "--model-file", "/nonexistent/model.gguf", "--no-progress", "--cache-dir", cache]);
    std::fs::remove_dir_all(cache).ok();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--model-file /nonexistent/model.gguf"), "{err}");
}

/// `anyspec demo --model-file <SmolLM2> ARGS --json` with a cache directory of its own, parsed;
/// `None` where the real-model tests are skipped (no model and no way to fetch it).
fn smollm2_demo(name: &str, args: &[&str]) -> Option<serde_json::Value> {
    let model = anyspec_model_store::testing::model_for_tests(
        &anyspec_model_store::SMOLLM2_135M_INSTRUCT_Q4_1,
        "ANYSPEC_SMOLLM2_GGUF",
    )?;
    let cache = temp_dir("demo", name);
    let mut all = vec!["demo", "--model-file", model.to_str().unwrap(), "--json", "--no-progress", "--cache-dir"];
    all.push(cache.to_str().unwrap());
    all.extend(args);
    let out = anyspec(&all);
    std::fs::remove_dir_all(&cache).ok();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn on_smollm2_the_cheap_drafters_and_the_self_speculative_drafter_keep_the_greedy_output() {
    // --quick: DynaSpec's router is built small (seconds); the prompts and tokens are given.
    // γ is fixed: the γ tuner weighs measured drafting costs, so on a busy machine it may stop
    // asking EAGLE after a step or two (a CI run saw 2 tokens drafted in 32 steps), and the
    // assertion that EAGLE drafts and is sometimes right would then hang on timing.
    let methods = "prompt,self,dynaspec,eagle,hybrid-eagle";
    let args = ["--methods", methods, "--first-layers", "4", "--prompts", "2", "--max-tokens", "16", "--quick"];
    let args = [&args[..], &["--fixed-gamma"]].concat();
    let Some(report) = smollm2_demo("smollm2", &args) else { return };
    assert!(report["target"].as_str().unwrap().contains("SmolLM2"), "{}", report["target"]);
    assert!(report["fallback"].is_null());
    assert_eq!(report["first_layers"], 4);
    // The verification cost curve starts at 1 and a wider pass is never free.
    let v: Vec<f64> = report["verify_cost"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert_eq!(v[0], 1.0);
    assert!(v.last().unwrap() > &1.0, "{v:?}");
    let rows = report["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["method"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "autoregressive",
            "prompt lookup",
            "self-speculative, first 4 layers",
            "DynaSpec-PA shortlist, first 4 layers",
            "EAGLE, 1 layer, FR-8192 head",
            "hybrid (prompt lookup + EAGLE)"
        ]
    );
    // The EAGLE drafter drafts from the target's features (recorded as it verifies), and is
    // sometimes right.
    let eagle = &rows[4];
    assert!(eagle["drafted"].as_u64().unwrap() > 0 && eagle["accepted"].as_u64().unwrap() > 0, "{eagle}");
    // DynaSpec's router was built for this model and the drafter's depth, into the cache.
    let router =
        report["artifacts"].as_array().unwrap().iter().find(|a| a["name"].as_str().unwrap().contains("DynaSpec"));
    let router = router.expect("the DynaSpec router is listed among the artifacts");
    assert!(router["detail"].as_str().unwrap().contains("first 4 layers"), "{router}");
    for row in rows {
        assert_eq!(row["matches_ar"], true, "{row}");
        assert_eq!(row["group_speedups"].as_array().unwrap().len(), report["groups"].as_array().unwrap().len());
    }
    // The chat template was applied: the model answers rather than continues the prompt.
    assert!(report["prompts"][0]["tokens"].as_u64().unwrap() > 10);
}

/// `anyspec demo --temperature 0.8` on SmolLM2 runs every method, and each one's acceptance tests
/// pass as often as the target's logits promise (the audit's |z| < 4): prompt lookup, the
/// dictionary and SLEM (deterministic drafts, accepted with p(d)), the model drafters through
/// every bridge and SLRS (accepted with Σ min(p, q)). `anyspec_core::audit`'s tests show a wrong
/// rule fails the same check. γ is fixed (2): the γ tuner stops drafting where drafts do not pay
/// and probes less and less often, which would leave the poor drafters' rules nearly untested.
#[test]
fn on_smollm2_at_temperature_0_8_every_method_accepts_as_the_logits_promise() {
    let args = ["--temperature", "0.8", "--first-layers", "4", "--prompts", "3", "--max-tokens", "32", "--quick"];
    let args = [&args[..], &["--fixed-gamma", "--gamma", "2"]].concat();
    let Some(report) = smollm2_demo("smollm2-sampled", &args) else { return };
    let rows = report["rows"].as_array().unwrap();
    assert!(rows.len() >= 10, "every method runs: {}", rows.len());
    let mut audited_tests = 0;
    for row in &rows[1..] {
        assert!(row["generated"].as_u64().unwrap() > 0, "{row}");
        let audit = &row["audit"];
        let tests = audit["tests"].as_u64().unwrap();
        audited_tests += tests;
        if tests > 0 {
            let z = audit["z"].as_f64().unwrap();
            assert!(z.abs() < 4.0, "{}: {audit}", row["method"]);
        }
    }
    assert!(audited_tests >= 100, "only {audited_tests} acceptance tests over every method");
}
