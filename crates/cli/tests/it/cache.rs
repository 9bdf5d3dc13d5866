//! `anyspec cache`, `anyspec --version` and `anyspec completions`: the parts of the binary that
//! make it an installed tool.

use std::path::Path;
use std::process::Command;

use crate::support::{anyspec, json, temp_dir};

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn cache_list_shows_each_area_and_clear_removes_only_the_named_ones() {
    let dir = temp_dir("cache", "list-clear");
    let root = dir.join("cache");
    write(&root.join("models/m.gguf"), &[0; 2048]);
    write(&root.join("demo/d.dict"), &[0; 100]);
    write(&root.join("demo-assets/abc/target/config.json"), b"{}");
    write(&root.join("notes.txt"), b"mine");
    let root_arg = root.to_str().unwrap();

    let list = json(&anyspec(&["cache", "list", "--json", "--cache-dir", root_arg]));
    assert_eq!(list["root"], root_arg);
    assert_eq!(list["total_bytes"], 2048 + 100 + 2);
    let area = |list: &serde_json::Value, name: &str| {
        list["areas"].as_array().unwrap().iter().find(|a| a["area"] == name).unwrap().clone()
    };
    assert_eq!(area(&list, "models")["bytes"], 2048);
    assert_eq!(area(&list, "demo")["files"], 1);
    assert_eq!(area(&list, "downloads")["exists"], false);
    assert_eq!(list["others"][0], root.join("notes.txt").to_str().unwrap());

    let text = anyspec(&["cache", "list", "--cache-dir", root_arg]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("2.0 KiB") && text.contains("notes.txt") && text.contains("never removed"), "{text}");

    let cleared = json(&anyspec(&["cache", "clear", "demo", "demo-assets", "--json", "--cache-dir", root_arg]));
    assert_eq!(cleared["freed_bytes"], 102);
    assert!(root.join("models/m.gguf").is_file());
    assert!(!root.join("demo").exists() && !root.join("demo-assets").exists());

    let out = anyspec(&["cache", "clear", "modles", "--cache-dir", root_arg]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`modles`") && err.contains("models, downloads, demo, demo-assets"), "{err}");
    assert!(root.join("models/m.gguf").is_file(), "a failed clear removed something");

    let out = anyspec(&["cache", "clear", "--cache-dir", root_arg]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!root.join("models").exists());
    assert_eq!(std::fs::read(root.join("notes.txt")).unwrap(), b"mine", "clear removed a file that is not anyspec's");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_cache_directory_is_the_flag_else_anyspec_cache_else_xdg() {
    let dir = temp_dir("cache", "where");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_anyspec"));
        command.args(args).env_remove("ANYSPEC_CACHE").env_remove("XDG_CACHE_HOME");
        for (key, value) in env {
            command.env(key, value);
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let (flag, env, xdg) = (dir.join("flag"), dir.join("env"), dir.join("xdg"));
    let (flag, env, xdg) = (flag.to_str().unwrap(), env.to_str().unwrap(), xdg.to_str().unwrap());
    let both = [("ANYSPEC_CACHE", env), ("XDG_CACHE_HOME", xdg)];
    assert_eq!(run(&["cache", "dir", "--cache-dir", flag], &both), flag);
    assert_eq!(run(&["cache", "dir"], &both), env);
    assert_eq!(run(&["cache", "dir"], &[("XDG_CACHE_HOME", xdg)]), format!("{xdg}/anyspec"));
    // Listing an empty cache creates nothing.
    let listed = run(&["cache", "list"], &[("ANYSPEC_CACHE", env)]);
    assert!(listed.contains("not created yet"), "{listed}");
    assert!(!Path::new(env).exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn version_names_the_commit_and_the_backends() {
    let out = anyspec(&["--version"]);
    assert!(out.status.success());
    let version = String::from_utf8(out.stdout).unwrap();
    assert!(version.starts_with(&format!("anyspec {}", env!("CARGO_PKG_VERSION"))), "{version}");
    assert!(version.contains("backends: cpu"), "{version}");
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8(out.stdout).unwrap().trim().to_owned());
    match head {
        Some(head) => assert!(version.contains(&format!("commit {head}")), "{version} is not HEAD {head}"),
        None => assert!(version.contains("commit unknown"), "{version}"),
    }
    // Subcommands report the same.
    let sub = anyspec(&["demo", "--version"]);
    assert!(String::from_utf8_lossy(&sub.stdout).contains("backends: cpu"));
}

#[test]
fn completions_cover_every_subcommand_and_unknown_shells_are_refused() {
    let out = anyspec(&["completions", "bash"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let script = String::from_utf8(out.stdout).unwrap();
    for word in ["_anyspec()", "demo", "generate", "cache", "completions", "--cache-dir", "--first-layers"] {
        assert!(script.contains(word), "the bash script lacks {word}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = anyspec(&["completions", shell]);
        assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("anyspec"), "{shell}");
    }
    let out = anyspec(&["completions", "tcsh"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tcsh") && err.contains("bash"), "{err}");
}

#[test]
fn cache_fetch_names_the_known_models_and_prints_the_path_of_one_in_the_cache() {
    let dir = temp_dir("cache", "fetch");
    let root = dir.join("cache");
    let root_arg = root.to_str().unwrap();
    let out = anyspec(&["cache", "fetch", "--model", "llama-9000", "--cache-dir", root_arg]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`llama-9000`") && err.contains("smollm2-135m-instruct-q4_1"), "{err}");
    assert!(!root.exists(), "a refused fetch created the cache");

    // A model already in the cache (a link to the real file) is found without pip or network.
    let model = &anyspec_model_store::SMOLLM2_135M_INSTRUCT_Q4_1;
    let Some(real) = anyspec_model_store::testing::model_for_tests(model, "ANYSPEC_SMOLLM2_GGUF") else {
        return;
    };
    std::fs::create_dir_all(root.join("models")).unwrap();
    let linked = root.join("models").join(model.file_name);
    #[cfg(unix)]
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    #[cfg(not(unix))]
    std::fs::copy(&real, &linked).unwrap();
    let out = anyspec(&["cache", "fetch", "--model", model.name, "--cache-dir", root_arg]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), linked.to_str().unwrap());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already in the cache"));
    std::fs::remove_dir_all(&dir).ok();
}
