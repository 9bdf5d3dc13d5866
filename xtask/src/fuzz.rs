//! `cargo xtask fuzz`: a mutation fuzzer for every loader, on stable Rust.
//!
//! Each target (see [`targets::TARGETS`]) starts from valid artifacts, feeds mutants of them to
//! its loader and counts what the loader does. Refusing a mutant with an error is the expected
//! outcome and accepting it is fine; a **finding** is a panic, an abort, an input that runs past
//! the hang limit, or one that makes the loader hold more memory than the cap.
//!
//! # How
//! For every target, this process (the supervisor) starts itself again as a *worker* and watches
//! it. The worker generates input number `i` as a pure function of (seed, target, `i`)
//! ([`mutate::mutant`], then the target's checksum repair on most inputs), writes `i` into a tick
//! file, and runs the loader under `catch_unwind`:
//! - a panic is caught in the worker, which saves the input (shrunk while the same panic still
//!   happens) and goes on;
//! - an abort, or an allocation refused by the memory cap ([`memory`]), kills the worker: the
//!   supervisor rebuilds input `i` from the tick, saves it with the worker's last words, and
//!   starts a new worker at `i + 1`;
//! - a tick that does not move for the hang limit gets the worker killed and its input saved;
//! - an input that takes longer than a second is reported as slow (not a failure).
//!
//! Findings go to `<target dir>/fuzz/<target>/` (or `--out`): the input as `.bin` and a `.txt`
//! that says what happened and how to replay it (`cargo xtask fuzz --target T --replay FILE`).
//! The command exits with status 1 when it found anything.

mod memory;
mod mutate;
mod targets;

use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rand::Rng;
use serde::{Deserialize, Serialize};

pub(crate) use memory::CappedAllocator;

/// Inputs slower than this are reported (not failed).
const SLOW: Duration = Duration::from_secs(1);
/// At most this many worker restarts (crashes or hangs) per target before giving up on it.
const MAX_RESTARTS: usize = 20;
/// Mutants never grow past this many bytes.
const MAX_INPUT: usize = 1 << 20;

/// Fuzz every loader with mutants of valid artifacts (stable Rust, no cargo-fuzz).
///
/// Targets: gguf, gguf-model, dictionary, count-shard, vocab-map, affinity, shortlist,
/// config-json, safetensors, tokenizer-json (`--list` says what each runs). A panic, an abort, a
/// hang or an allocation past the memory cap is a finding: the input is saved under the output
/// directory with a note on how to replay it, and the command exits with status 1. For the
/// overflow checks of debug builds, run it in the dev or test profile (`cargo xtask fuzz`, or
/// `cargo run -p xtask --profile test -- fuzz`), not in release.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Seconds of fuzzing per target (the targets run one after the other).
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Fuzz only these targets (repeat the flag, or separate names with commas).
    #[arg(long = "target", value_delimiter = ',')]
    targets: Vec<String>,
    /// Seed of the mutations; a run with the same seed tries the same inputs in the same order.
    /// Default: drawn from the clock, and printed.
    #[arg(long)]
    seed: Option<u64>,
    /// Where findings are saved (default: `<target dir>/fuzz`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The most memory a worker may hold, in MiB: asking for more is a finding.
    #[arg(long, default_value_t = 1024)]
    memory_mb: usize,
    /// An input still running after this many seconds is a hang: the worker is killed.
    #[arg(long, default_value_t = 10.0)]
    hang_seconds: f64,
    /// Print a JSON summary on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// List the targets and what each feeds its input to, then exit.
    #[arg(long)]
    list: bool,
    /// Run one saved input through the target (`--target`) in this process, without catching
    /// anything, and print what the loader said: for debugging a finding.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// Write the seed inputs of the targets into this directory (`<target>-<n>.bin`), then exit.
    #[arg(long, value_name = "DIR")]
    write_seeds: Option<PathBuf>,
    /// Internal: run as the worker of one target, starting at `--start`.
    #[arg(long, hide = true)]
    worker: bool,
    /// Internal: the worker's first iteration.
    #[arg(long, hide = true, default_value_t = 0)]
    start: u64,
}

/// What one finding was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    /// The loader panicked.
    Panic,
    /// The process died (abort, allocation past the cap, stack overflow, signal).
    Crash,
    /// The input ran past the hang limit.
    Hang,
    /// The input took more than a second: reported, not a failure.
    Slow,
}

impl Kind {
    fn fails(self) -> bool {
        self != Kind::Slow
    }
}

/// One finding, as saved and reported.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Finding {
    target: String,
    kind: Kind,
    seed: u64,
    iteration: u64,
    /// The panic message and location, or the worker's last words.
    message: String,
    /// The saved input.
    input: PathBuf,
    /// Its length after shrinking (panics) or as run.
    len: usize,
}

/// One worker's account, written as JSON at the end of its run.
#[derive(Debug, Default, Serialize, Deserialize)]
struct WorkerReport {
    executions: u64,
    accepted: u64,
    refused: u64,
    /// How many of the seeds the loader accepted (they all should).
    seeds_accepted: usize,
    seeds: usize,
    /// Panics seen, deduplicated by location into `findings`.
    panics: u64,
    findings: Vec<Finding>,
}

/// One target's totals over all its workers.
#[derive(Debug, Default, Serialize)]
struct TargetSummary {
    target: String,
    seconds: f64,
    executions: u64,
    accepted: u64,
    refused: u64,
    seeds_accepted: usize,
    seeds: usize,
    findings: Vec<Finding>,
}

#[derive(Debug, Serialize)]
struct Summary {
    seed: u64,
    seconds_per_target: f64,
    total_executions: u64,
    total_findings: usize,
    failing_findings: usize,
    targets: Vec<TargetSummary>,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    if args.list {
        #[allow(clippy::print_stdout)]
        for (name, what) in targets::TARGETS {
            println!("{name:16} {what}");
        }
        return Ok(());
    }
    let names = selected_targets(&args.targets)?;
    if let Some(dir) = &args.write_seeds {
        return write_seeds(&names, dir);
    }
    if let Some(file) = &args.replay {
        let [name] = names.as_slice() else { bail!("--replay needs exactly one --target") };
        return replay(name, file);
    }
    let out = match &args.out {
        Some(out) => out.clone(),
        None => target_dir().join("fuzz"),
    };
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    if args.worker {
        let [name] = names.as_slice() else { bail!("a worker runs exactly one target") };
        return worker(name, seed, args, &out);
    }
    supervise(&names, seed, args, &out)
}

/// The names of the targets to run: all of them by default, or those asked for (checked).
fn selected_targets(asked: &[String]) -> Result<Vec<String>> {
    if asked.is_empty() {
        return Ok(targets::TARGETS.iter().map(|(n, _)| (*n).to_string()).collect());
    }
    for name in asked {
        if !targets::TARGETS.iter().chain(targets::SELF_TESTS).any(|(n, _)| n == name) {
            bail!(
                "no fuzz target named {name:?}; the targets are {} (see `cargo xtask fuzz --list`)",
                targets::TARGETS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(asked.to_vec())
}

/// `$CARGO_TARGET_DIR`, or the workspace's `target/`.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| targets::repo_root().join("target"), PathBuf::from)
}

/// Input `iteration` of a run: the seeds themselves first, then mutants, most of them with
/// their checksums repaired.
fn input(target: &dyn targets::Target, seed: u64, name: &str, iteration: u64) -> Vec<u8> {
    let seeds = target.seeds();
    if let Some(s) = usize::try_from(iteration).ok().and_then(|i| seeds.get(i)) {
        return s.clone();
    }
    let mut rng = mutate::rng_for(seed, name, iteration);
    let mut bytes = mutate::mutant(&mut rng, seeds, MAX_INPUT);
    if rng.random_bool(0.9) {
        target.fix(&mut rng, &mut bytes);
    }
    bytes
}

// ---------------------------------------------------------------------------------------------
// The worker.

/// The message and location of the last panic on this thread, set by the quiet panic hook.
type LastPanic = Arc<Mutex<Option<String>>>;

fn quiet_panic_hook() -> LastPanic {
    let last: LastPanic = Arc::default();
    let sink = Arc::clone(&last);
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with a non-string payload".to_string());
        let location = info.location().map_or_else(|| "an unknown location".to_string(), |l| l.to_string());
        if let Ok(mut slot) = sink.lock() {
            *slot = Some(format!("panicked at {location}: {message}"));
        }
    }));
    last
}

/// What one run of the target did.
enum Outcome {
    Accepted,
    Refused,
    /// The panic message, with its location.
    Panicked(String),
}

fn execute(target: &mut dyn targets::Target, bytes: &[u8], last_panic: &LastPanic) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| target.run(bytes))) {
        Ok(Ok(())) => Outcome::Accepted,
        Ok(Err(_)) => Outcome::Refused,
        Err(_) => Outcome::Panicked(
            last_panic.lock().ok().and_then(|mut p| p.take()).unwrap_or_else(|| "a panic".to_string()),
        ),
    }
}

/// The location part of a panic message (`panicked at FILE:LINE:COL: …`): panics at one place
/// are one finding.
fn panic_site(message: &str) -> &str {
    message.split(": ").next().unwrap_or(message)
}

/// Removes chunks of `bytes` (repairing checksums after each cut) while the loader still panics
/// at the same place; at most `budget`.
fn shrink(
    target: &mut dyn targets::Target,
    bytes: Vec<u8>,
    site: &str,
    last_panic: &LastPanic,
    budget: Duration,
) -> Vec<u8> {
    let start = Instant::now();
    let mut best = bytes;
    let mut rng = mutate::rng_for(0, "shrink", 0);
    let mut chunk = best.len() / 2;
    while chunk >= 1 && start.elapsed() < budget {
        let mut at = 0;
        while at + chunk <= best.len() && start.elapsed() < budget {
            let mut candidate = best.clone();
            candidate.drain(at..at + chunk);
            let same = |c: &[u8], target: &mut dyn targets::Target| matches!(execute(target, c, last_panic), Outcome::Panicked(m) if panic_site(&m) == site);
            if same(&candidate, target) {
                best = candidate;
                continue;
            }
            let mut repaired = candidate;
            target.fix(&mut rng, &mut repaired);
            if repaired.len() < best.len() && same(&repaired, target) {
                best = repaired;
                continue;
            }
            at += chunk;
        }
        chunk /= 2;
    }
    best
}

fn worker(name: &str, seed: u64, args: &Args, out: &Path) -> Result<()> {
    let dir = out.join(name);
    let work = out.join("work").join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let mut target = targets::make(name, &work)?;
    let last_panic = quiet_panic_hook();
    // The cap counts from here: the seeds and the target's own tables are outside it.
    memory::set_limit(args.memory_mb.saturating_mul(1 << 20));
    let tick = Tick::create(&work)?;
    let mut report = WorkerReport { seeds: target.seeds().len(), ..WorkerReport::default() };
    let mut panic_sites = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds.max(0.0));
    // Every worker runs the seeds first (iterations 0..seeds, which all should be accepted),
    // then the mutants from `--start` on.
    let seed_count = report.seeds as u64;
    let mut iteration = 0;
    while iteration < seed_count || Instant::now() < deadline {
        if iteration == seed_count {
            iteration = iteration.max(args.start);
        }
        let bytes = input(target.as_ref(), seed, name, iteration);
        tick.set(iteration)?;
        let began = Instant::now();
        let outcome = execute(target.as_mut(), &bytes, &last_panic);
        let took = began.elapsed();
        report.executions += 1;
        let is_seed = iteration < seed_count;
        match outcome {
            Outcome::Accepted => {
                report.accepted += 1;
                report.seeds_accepted += usize::from(is_seed);
            }
            Outcome::Refused => report.refused += 1,
            Outcome::Panicked(message) => {
                report.panics += 1;
                let site = panic_site(&message).to_string();
                if panic_sites.insert(site.clone()) {
                    let small = shrink(target.as_mut(), bytes.clone(), &site, &last_panic, Duration::from_secs(5));
                    report.findings.push(save(&dir, name, Kind::Panic, seed, iteration, &message, &small)?);
                }
            }
        }
        if took > SLOW {
            let message = format!("took {:.1} s", took.as_secs_f64());
            report.findings.push(save(&dir, name, Kind::Slow, seed, iteration, &message, &bytes)?);
        }
        iteration += 1;
    }
    let _ = std::panic::take_hook();
    let text = serde_json::to_string(&report)?;
    std::fs::write(work.join("report.json"), text).context("writing the worker's report")?;
    Ok(())
}

/// The iteration a worker is running, in a file the supervisor reads: written before every
/// input, so that the input of a worker that died can be rebuilt.
struct Tick {
    file: std::fs::File,
}

impl Tick {
    fn path(work: &Path) -> PathBuf {
        work.join("tick")
    }

    fn create(work: &Path) -> Result<Tick> {
        let path = Tick::path(work);
        let file = std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Tick { file })
    }

    #[cfg(unix)]
    fn set(&self, iteration: u64) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.write_all_at(&iteration.to_le_bytes(), 0).context("writing the tick file")
    }

    #[cfg(not(unix))]
    fn set(&self, iteration: u64) -> Result<()> {
        use std::io::{Seek, SeekFrom, Write};
        let mut file = &self.file;
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&iteration.to_le_bytes()))
            .context("writing the tick file")
    }

    fn read(work: &Path) -> Option<u64> {
        let bytes = std::fs::read(Tick::path(work)).ok()?;
        Some(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?))
    }
}

/// Saves `bytes` and a note next to it; returns the finding.
fn save(dir: &Path, name: &str, kind: Kind, seed: u64, iteration: u64, message: &str, bytes: &[u8]) -> Result<Finding> {
    let stem = format!("{kind:?}-{seed}-{iteration}").to_lowercase();
    let input = dir.join(format!("{stem}.bin"));
    std::fs::write(&input, bytes).with_context(|| format!("saving {}", input.display()))?;
    let note = format!(
        "target: {name}\nkind: {kind:?}\nseed: {seed}\niteration: {iteration}\nbytes: {}\n{message}\n\nreplay: cargo xtask fuzz --target {name} --replay {}\n",
        bytes.len(),
        input.display()
    );
    std::fs::write(dir.join(format!("{stem}.txt")), note)?;
    Ok(Finding {
        target: name.to_string(),
        kind,
        seed,
        iteration,
        message: message.to_string(),
        input,
        len: bytes.len(),
    })
}

// ---------------------------------------------------------------------------------------------
// The supervisor.

fn supervise(names: &[String], seed: u64, args: &Args, out: &Path) -> Result<()> {
    let exe = std::env::current_exe().context("finding the xtask executable to start workers")?;
    let mut summaries = Vec::new();
    for name in names {
        if !args.json {
            eprintln_progress(&format!("fuzzing {name} for {} s (seed {seed})", args.seconds));
        }
        summaries.push(fuzz_target(&exe, name, seed, args, out)?);
    }
    let total_executions = summaries.iter().map(|s| s.executions).sum();
    let total_findings = summaries.iter().map(|s| s.findings.len()).sum();
    let failing_findings = summaries.iter().flat_map(|s| &s.findings).filter(|f| f.kind.fails()).count();
    let summary = Summary {
        seed,
        seconds_per_target: args.seconds,
        total_executions,
        total_findings,
        failing_findings,
        targets: summaries,
    };
    print_summary(&summary, args.json, out)?;
    if failing_findings > 0 {
        bail!("{failing_findings} finding(s): inputs and notes under {}", out.display());
    }
    Ok(())
}

#[allow(clippy::print_stderr)]
fn eprintln_progress(line: &str) {
    eprintln!("{line}");
}

fn fuzz_target(exe: &Path, name: &str, seed: u64, args: &Args, out: &Path) -> Result<TargetSummary> {
    let work = out.join("work").join(name);
    let dir = out.join(name);
    std::fs::create_dir_all(&work)?;
    std::fs::create_dir_all(&dir)?;
    let began = Instant::now();
    let deadline = began + Duration::from_secs_f64(args.seconds.max(0.0));
    let hang = Duration::from_secs_f64(args.hang_seconds.max(0.1));
    let mut summary = TargetSummary { target: name.to_string(), ..TargetSummary::default() };
    let mut start = 0u64;
    let mut first = true;
    let mut restarts = 0;
    // The target, built in this process only to rebuild the input of a worker that died.
    let mut rebuilt: Option<Box<dyn targets::Target>> = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if !first && left < Duration::from_millis(100) {
            break;
        }
        let report_path = work.join("report.json");
        let _ = std::fs::remove_file(&report_path);
        let _ = std::fs::remove_file(Tick::path(&work));
        let mut child = Command::new(exe)
            .arg("fuzz")
            .args(["--worker", "--target", name, "--seed", &seed.to_string(), "--start", &start.to_string()])
            .args(["--seconds", &left.as_secs_f64().to_string(), "--memory-mb", &args.memory_mb.to_string()])
            .arg("--out")
            .arg(out)
            // No backtraces: a worker's last words must end with what killed it (an allocation
            // refused by the cap, an abort's message), not with the frames a backtrace prints
            // after it when the user's environment sets RUST_BACKTRACE.
            .env("RUST_BACKTRACE", "0")
            .env("RUST_LIB_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting a fuzz worker")?;
        let stderr = child.stderr.take();
        let last_words = std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut stderr) = stderr {
                let _ = stderr.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        });
        // Watch the tick: a worker that keeps one input past the hang limit is killed.
        let mut seen = Tick::read(&work);
        let mut moved = Instant::now();
        let mut hung = false;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            std::thread::sleep(Duration::from_millis(20));
            let now = Tick::read(&work);
            if now != seen {
                seen = now;
                moved = Instant::now();
            } else if moved.elapsed() > hang {
                let _ = child.kill();
                hung = true;
                break child.wait()?;
            }
        };
        let last_words = last_words.join().unwrap_or_default();
        first = false;
        if status.success() && !hung {
            let text = std::fs::read_to_string(&report_path).context("reading the worker's report")?;
            let report: WorkerReport = serde_json::from_str(&text)?;
            summary.executions += report.executions;
            summary.accepted += report.accepted;
            summary.refused += report.refused;
            (summary.seeds_accepted, summary.seeds) = (report.seeds_accepted, report.seeds);
            summary.findings.extend(report.findings);
            break;
        }
        // The worker died or hung on input `tick`: rebuild it, save it, go on after it.
        let Some(tick) = Tick::read(&work) else {
            bail!("the {name} worker failed before its first input ({status}):\n{}", tail(&last_words));
        };
        if rebuilt.is_none() {
            rebuilt = Some(targets::make(name, &work)?);
        }
        let target = rebuilt.as_deref().context("the target was just built")?;
        let bytes = input(target, seed, name, tick);
        let (kind, message) = if hung {
            (Kind::Hang, format!("still running after {:.0} s; the worker was killed", hang.as_secs_f64()))
        } else {
            (Kind::Crash, format!("the worker died ({status}); its last words:\n{}", tail(&last_words)))
        };
        summary.findings.push(save(&dir, name, kind, seed, tick, &message, &bytes)?);
        // The worker's counts died with it: count what it ran from the ticks (the seeds, then
        // the mutants from `start`).
        let seeds = rebuilt.as_ref().map_or(0, |t| t.seeds().len() as u64);
        summary.executions += if tick < seeds { tick + 1 } else { seeds + tick + 1 - start.max(seeds) };
        start = tick.max(seeds.saturating_sub(1)) + 1;
        restarts += 1;
        if restarts >= MAX_RESTARTS {
            break;
        }
    }
    summary.seconds = began.elapsed().as_secs_f64();
    Ok(summary)
}

/// The last lines of a worker's stderr.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

#[allow(clippy::print_stdout)]
fn print_summary(summary: &Summary, json: bool, out: &Path) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(summary)?);
        return Ok(());
    }
    println!(
        "{:16} {:>11} {:>9} {:>10} {:>10} {:>6} {:>9}",
        "target", "executions", "per s", "accepted", "refused", "seeds", "findings"
    );
    for t in &summary.targets {
        println!(
            "{:16} {:>11} {:>9.0} {:>10} {:>10} {:>6} {:>9}",
            t.target,
            t.executions,
            t.executions as f64 / t.seconds.max(1e-9),
            t.accepted,
            t.refused,
            format!("{}/{}", t.seeds_accepted, t.seeds),
            t.findings.len()
        );
    }
    println!(
        "total: {} executions, {} findings ({} failing), seed {}",
        summary.total_executions, summary.total_findings, summary.failing_findings, summary.seed
    );
    for t in &summary.targets {
        if t.seeds_accepted < t.seeds {
            println!("warning: {} accepted only {} of its {} seeds", t.target, t.seeds_accepted, t.seeds);
        }
        for f in &t.findings {
            println!(
                "{} {:?} at iteration {}: {}\n  input: {}",
                f.target,
                f.kind,
                f.iteration,
                f.message,
                f.input.display()
            );
        }
    }
    if summary.total_findings > 0 {
        println!("findings saved under {}", out.display());
    }
    Ok(())
}

/// `--write-seeds`: every seed of every target, as files.
#[allow(clippy::print_stdout)]
fn write_seeds(names: &[String], dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for name in names {
        let work = target_dir().join("fuzz").join("work").join(format!("seeds-{name}"));
        std::fs::create_dir_all(&work)?;
        let target = targets::make(name, &work)?;
        for (i, seed) in target.seeds().iter().enumerate() {
            let path = dir.join(format!("{name}-{i}.bin"));
            std::fs::write(&path, seed).with_context(|| format!("writing {}", path.display()))?;
            println!("{}", path.display());
        }
    }
    Ok(())
}

/// `--replay`: one input through the target, nothing caught.
#[allow(clippy::print_stdout)]
fn replay(name: &str, file: &Path) -> Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let work = target_dir().join("fuzz").join("work").join(format!("replay-{name}"));
    std::fs::create_dir_all(&work)?;
    let mut target = targets::make(name, &work)?;
    // The same cap as the workers, so that an input found for asking too much aborts here too.
    memory::set_limit(1 << 30);
    match target.run(&bytes) {
        Ok(()) => println!("{name} accepted the {} bytes of {}", bytes.len(), file.display()),
        Err(e) => println!("{name} refused the {} bytes of {}: {e}", bytes.len(), file.display()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The panic hook is global: the tests that replace it take turns.
    static HOOK: Mutex<()> = Mutex::new(());

    #[test]
    fn a_panicking_target_is_caught_and_its_site_is_named() {
        let _turn = HOOK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let last = quiet_panic_hook();
        let mut target = targets::make("selftest-panic", Path::new("/nonexistent")).unwrap();
        let seed = target.seeds()[0].clone();
        assert!(matches!(execute(target.as_mut(), &seed, &last), Outcome::Accepted));
        let Outcome::Panicked(message) = execute(target.as_mut(), b"mutant", &last) else {
            panic!("the self-test target did not panic on a mutant")
        };
        let _ = std::panic::take_hook();
        assert!(message.contains("the self-test target panics on a mutant of 6 bytes"), "{message}");
        assert!(panic_site(&message).starts_with("panicked at xtask/src/fuzz/targets.rs:"), "{message}");
    }

    #[test]
    fn shrinking_keeps_the_panic_and_removes_the_rest() {
        /// Panics when the input holds the byte 0xFF.
        struct NeedsFf(Vec<Vec<u8>>);
        impl targets::Target for NeedsFf {
            fn seeds(&self) -> &[Vec<u8>] {
                &self.0
            }
            fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
                assert!(!bytes.contains(&0xFF), "found 0xFF");
                Err("no".into())
            }
        }
        let _turn = HOOK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let last = quiet_panic_hook();
        let mut target = NeedsFf(vec![vec![1; 100]]);
        let mut input = vec![0u8; 300];
        input[123] = 0xFF;
        let Outcome::Panicked(message) = execute(&mut target, &input, &last) else { panic!("no panic") };
        let small = shrink(&mut target, input, panic_site(&message), &last, Duration::from_secs(5));
        let _ = std::panic::take_hook();
        assert_eq!(small, vec![0xFF]);
    }

    #[test]
    fn inputs_start_with_the_seeds_and_are_reproducible() {
        let target = targets::make("selftest-panic", Path::new("/nonexistent")).unwrap();
        assert_eq!(input(target.as_ref(), 9, "selftest-panic", 0), target.seeds()[0]);
        for i in 1..50 {
            let a = input(target.as_ref(), 9, "selftest-panic", i);
            assert_eq!(a, input(target.as_ref(), 9, "selftest-panic", i));
        }
        let differ = (1..50).filter(|&i| input(target.as_ref(), 9, "selftest-panic", i) != target.seeds()[0]).count();
        assert!(differ > 45, "only {differ} of 49 mutants differ from the seed");
    }

    #[test]
    fn every_target_builds_and_accepts_its_seeds() {
        let work = std::env::temp_dir().join(format!("anyspec-fuzz-test-{}", std::process::id()));
        for (name, _) in targets::TARGETS {
            let dir = work.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let mut target = targets::make(name, &dir).unwrap();
            let seeds = target.seeds().to_vec();
            assert!(!seeds.is_empty(), "{name} has no seeds");
            for (i, seed) in seeds.iter().enumerate() {
                assert_eq!(target.run(seed), Ok(()), "{name} refused its seed {i}");
            }
            // A checksum repair leaves an intact input intact.
            let mut rng = mutate::rng_for(0, name, 0);
            for seed in &seeds {
                let mut fixed = seed.clone();
                target.fix(&mut rng, &mut fixed);
                assert_eq!(target.run(&fixed), Ok(()), "{name}: the repair broke a seed");
            }
            // A truncated seed is refused, not accepted and not a panic.
            let cut = &seeds[0][..seeds[0].len() / 2];
            assert!(target.run(cut).is_err(), "{name} accepted half a seed");
        }
        std::fs::remove_dir_all(&work).unwrap();
    }

    #[test]
    fn unknown_targets_are_refused_with_the_list() {
        let err = selected_targets(&["gguff".to_string()]).unwrap_err().to_string();
        assert!(err.contains("no fuzz target named \"gguff\"") && err.contains("tokenizer-json"), "{err}");
        assert_eq!(selected_targets(&[]).unwrap().len(), targets::TARGETS.len());
    }
}
