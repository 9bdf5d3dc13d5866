//! Every command that writes an artifact: it never writes over one of its inputs (directly, through
//! a symbolic link, `..` or a hard link), replaces another kind of file only with `--force`,
//! cleans up stale temporary files, and removes its own when interrupted by a signal.
//!
//! The fixtures are copied into a fresh directory first, so that a regression destroys copies,
//! not the committed files.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{anyspec, temp_dir};

/// Copies the fixtures every builder needs into `dir`; returns `dir`.
fn workspace(test: &str) -> PathBuf {
    let dir = temp_dir("outputs", test);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("sub")).unwrap();
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (from, to) in [
        ("dict-builder/tests/data/tokenizer.json", "dict-tokenizer.json"),
        ("dict-builder/tests/data/corpus.txt", "dict-corpus.txt"),
        ("affinity/tests/data/tokenizer.json", "tokenizer.json"),
        ("affinity/tests/data/corpus.txt", "corpus.txt"),
        ("vocab-map/tests/data/bytelevel.json", "target.json"),
        ("vocab-map/tests/data/metaspace.json", "drafter.json"),
    ] {
        fs::copy(crates.join(from), dir.join(to)).unwrap();
    }
    dir
}

/// One artifact builder: its arguments with `OUT` standing for the output path, and its inputs.
struct Builder {
    name: &'static str,
    args: &'static [&'static str],
    inputs: &'static [&'static str],
    /// A file name for its output.
    output: &'static str,
}

const BUILDERS: &[Builder] = &[
    Builder {
        name: "dict build",
        args: &["dict", "build", "--tokenizer", "dict-tokenizer.json", "--corpus", "dict-corpus.txt", "-o", "OUT"],
        inputs: &["dict-tokenizer.json", "dict-corpus.txt"],
        output: "out.dict",
    },
    Builder {
        name: "dict count",
        args: &["dict", "count", "--corpus", "dict-corpus.txt", "-o", "OUT"],
        inputs: &["dict-corpus.txt"],
        output: "out.counts",
    },
    Builder {
        name: "vocab build",
        args: &["vocab", "build", "--target", "target.json", "--drafter", "drafter.json", "--out", "OUT"],
        inputs: &["target.json", "drafter.json"],
        output: "out.vmap",
    },
    Builder {
        name: "affinity build",
        args: &["affinity", "build", "--tokenizer", "tokenizer.json", "--corpus", "corpus.txt", "-o", "OUT"],
        inputs: &["tokenizer.json", "corpus.txt"],
        output: "out.safetensors",
    },
    Builder {
        name: "shortlist build",
        args: &[
            "shortlist",
            "build",
            "--tokenizer",
            "tokenizer.json",
            "--corpus",
            "corpus.txt",
            "--size",
            "8",
            "-o",
            "OUT",
        ],
        inputs: &["tokenizer.json", "corpus.txt"],
        output: "out.shortlist",
    },
];

/// Runs `builder` in `dir` writing `output` (a path relative to `dir`), with `extra` arguments.
fn run(dir: &Path, builder: &Builder, output: &str, extra: &[&str]) -> std::process::Output {
    let path = |name: &str| dir.join(name).display().to_string();
    let mut args: Vec<String> = builder
        .args
        .iter()
        .map(|a| {
            if *a == "OUT" {
                path(output)
            } else if a.contains('.') {
                path(a)
            } else {
                a.to_string()
            }
        })
        .collect();
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    anyspec(&args)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts `out` failed saying that the output is the input, and that `input` is unchanged.
fn assert_refused(out: &std::process::Output, what: &str, input: &Path, before: &[u8]) {
    assert!(!out.status.success(), "{what}: exited 0");
    assert!(stderr(out).contains("is the same file as the input"), "{what}: {}", stderr(out));
    assert_eq!(fs::read(input).unwrap(), before, "{what}: the input was changed");
}

#[test]
fn no_builder_writes_over_its_inputs_by_any_name() {
    let dir = workspace("inputs");
    for builder in BUILDERS {
        for input in builder.inputs {
            let path = dir.join(input);
            let before = fs::read(&path).unwrap();
            let what = format!("{} -o {input}", builder.name);
            // Directly, and even with --force (which only concerns files that are not inputs).
            assert_refused(&run(&dir, builder, input, &[]), &what, &path, &before);
            assert_refused(&run(&dir, builder, input, &["--force"]), &format!("{what} --force"), &path, &before);
            // Through `..`.
            assert_refused(
                &run(&dir, builder, &format!("sub/../{input}"), &[]),
                &format!("{what} via .."),
                &path,
                &before,
            );
            // Through a hard link.
            let hard = dir.join(format!("hard-{input}"));
            let _ = fs::remove_file(&hard);
            fs::hard_link(&path, &hard).unwrap();
            assert_refused(
                &run(&dir, builder, &format!("hard-{input}"), &[]),
                &format!("{what} via a hard link"),
                &path,
                &before,
            );
            // Through a symbolic link.
            #[cfg(unix)]
            {
                let link = dir.join(format!("link-{input}"));
                let _ = fs::remove_file(&link);
                std::os::unix::fs::symlink(&path, &link).unwrap();
                let out = run(&dir, builder, &format!("link-{input}"), &["--force"]);
                assert_refused(&out, &format!("{what} via a symbolic link"), &path, &before);
            }
        }
        // The same build to a fresh name succeeds, so the refusals above were about the path.
        let out = run(&dir, builder, builder.output, &[]);
        assert!(out.status.success(), "{}: {}", builder.name, stderr(&out));
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_input_given_as_an_output_through_a_symlinked_input_is_refused() {
    // `--corpus link -o corpus.txt`, where link → corpus.txt: renaming over corpus.txt would
    // change what the link reads.
    #[cfg(unix)]
    {
        let dir = workspace("input-link");
        std::os::unix::fs::symlink(dir.join("dict-corpus.txt"), dir.join("corpus-link.txt")).unwrap();
        let before = fs::read(dir.join("dict-corpus.txt")).unwrap();
        let path = |name: &str| dir.join(name).display().to_string();
        let out = anyspec(&[
            "dict",
            "build",
            "--tokenizer",
            &path("dict-tokenizer.json"),
            "--corpus",
            &path("corpus-link.txt"),
            "-o",
            &path("dict-corpus.txt"),
        ]);
        assert_refused(&out, "--corpus link -o its target", &dir.join("dict-corpus.txt"), &before);
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn dict_merge_and_build_from_shards_refuse_a_shard_as_output() {
    let dir = workspace("shards");
    let path = |name: &str| dir.join(name).display().to_string();
    let out = run(&dir, &BUILDERS[1], "a.counts", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let before = fs::read(dir.join("a.counts")).unwrap();
    let merge = anyspec(&["dict", "merge", &path("a.counts"), "-o", &path("sub/../a.counts")]);
    assert_refused(&merge, "dict merge a -o a", &dir.join("a.counts"), &before);
    let build = anyspec(&[
        "dict",
        "build",
        "--tokenizer",
        &path("dict-tokenizer.json"),
        "--counts",
        &path("a.counts"),
        "-o",
        &path("a.counts"),
    ]);
    assert_refused(&build, "dict build --counts a -o a", &dir.join("a.counts"), &before);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn another_kind_of_file_is_replaced_only_with_force_and_the_same_kind_always() {
    let dir = workspace("force");
    // Build every kind once, then each builder once more over its own output: no --force needed.
    for builder in BUILDERS {
        for round in 0..2 {
            let out = run(&dir, builder, builder.output, &[]);
            assert!(out.status.success(), "{} round {round}: {}", builder.name, stderr(&out));
        }
    }
    for builder in BUILDERS {
        // A file that is not an artifact.
        fs::write(dir.join("notes.txt"), "my notes").unwrap();
        let out = run(&dir, builder, "notes.txt", &[]);
        assert!(!out.status.success(), "{}: replaced notes.txt without --force", builder.name);
        let message = stderr(&out);
        assert!(message.contains("not an anyspec artifact") && message.contains("--force"), "{message}");
        assert_eq!(fs::read(dir.join("notes.txt")).unwrap(), b"my notes");
        // Every other kind of artifact, named in the refusal.
        for other in BUILDERS.iter().filter(|b| b.output != builder.output) {
            let before = fs::read(dir.join(other.output)).unwrap();
            let out = run(&dir, builder, other.output, &[]);
            assert!(!out.status.success(), "{} replaced {} without --force", builder.name, other.output);
            assert!(stderr(&out).contains("already exists and is a"), "{}", stderr(&out));
            assert_eq!(fs::read(dir.join(other.output)).unwrap(), before);
        }
        // With --force, the file is replaced.
        let out = run(&dir, builder, "notes.txt", &["--force"]);
        assert!(out.status.success(), "{} --force: {}", builder.name, stderr(&out));
        assert_ne!(fs::read(dir.join("notes.txt")).unwrap(), b"my notes");
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[allow(clippy::print_stderr)]
fn stale_temporaries_of_dead_processes_are_removed_on_the_next_write() {
    if !Path::new("/proc/self").exists() {
        eprintln!("SKIPPED: no /proc here, so stale temporary files are never removed");
        return;
    }
    let dir = workspace("stale");
    // 4,194,305 is above the largest pid Linux hands out; pid 1 is alive.
    let stale = dir.join("out.dict.4194305.tmp");
    let live = dir.join("out.dict.1.tmp");
    fs::write(&stale, "left by a killed build").unwrap();
    fs::write(&live, "being written").unwrap();
    let out = run(&dir, &BUILDERS[0], "out.dict", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stale.exists(), "the stale temporary file is still there");
    assert!(live.exists(), "a live process's temporary file was removed");
    fs::remove_dir_all(&dir).unwrap();
}

/// `dict merge` of a shard read from a FIFO, writing over an existing shard whose temporary file
/// is made a FIFO too: the build blocks opening its temporary file, is sent SIGTERM there, and
/// must leave no temporary file and the old shard intact.
#[cfg(target_os = "linux")]
#[test]
#[allow(clippy::print_stderr)]
fn a_build_ended_by_sigterm_removes_its_temporary_file_and_keeps_the_old_artifact() {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let mkfifo = |path: &Path| Command::new("mkfifo").arg(path).status().is_ok_and(|s| s.success());
    let dir = workspace("signal");
    let shard = dir.join("a.counts");
    let out = run(&dir, &BUILDERS[1], "a.counts", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let output = dir.join("merged.counts");
    fs::copy(&shard, &output).unwrap();
    let before = fs::read(&output).unwrap();
    let input = dir.join("input.fifo");
    if !mkfifo(&input) {
        eprintln!("SKIPPED: mkfifo is not available");
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_anyspec"))
        .args(["dict", "merge"])
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The child waits for the input FIFO's writer, so its temporary file does not exist yet.
    let temp = dir.join(format!("merged.counts.{}.tmp", child.id()));
    assert!(mkfifo(&temp));
    fs::OpenOptions::new().write(true).open(&input).unwrap().write_all(&fs::read(&shard).unwrap()).unwrap();
    // Now it merges and blocks opening its temporary file (a FIFO with no reader).
    let wchan = format!("/proc/{}/wchan", child.id());
    let started = Instant::now();
    // The kernel function it waits in: `wait_for_partner` (or `fifo_open` on older kernels).
    let blocked = |w: &str| w.contains("wait_for_partner") || w.contains("fifo_open");
    while fs::read_to_string(&wchan).is_ok_and(|w| !blocked(&w)) && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Where wchan is not reported, give the child time to get there.
    std::thread::sleep(Duration::from_millis(300));
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    let message = String::from_utf8_lossy(
        &child
            .stderr
            .take()
            .map(|mut e| {
                let mut s = Vec::new();
                std::io::Read::read_to_end(&mut e, &mut s).unwrap();
                s
            })
            .unwrap_or_default(),
    )
    .into_owned();
    assert_eq!(status.signal(), Some(15), "the child did not end by SIGTERM: {status:?}, {message}");
    assert!(!temp.exists(), "the temporary file of the interrupted build is still there");
    assert_eq!(fs::read(&output).unwrap(), before, "the old artifact was changed");
    fs::remove_dir_all(&dir).unwrap();
}
