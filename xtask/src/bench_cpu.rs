//! `cargo xtask bench-cpu`: the native CPU engine on a real GGUF model (SmolLM2-135M-Instruct
//! Q4_1 by default), beside llama.cpp's `llama-bench` on the same file in the same run, written
//! to `reports/cpu-runtime.md` (and `.json`).
//!
//! What it measures, per thread count:
//! - the cost of scoring k = 1…8 new positions in one pass after a 64-token context, ÷ the cost
//!   of one (the number speculative decoding lives on: a γ = 5 draft is verified by a k = 6
//!   pass), with the logits of all k rows, as verification needs them;
//! - decode tokens/s (one token per step, greedy) and prefill tokens/s (a 64-token prompt);
//! - decode tokens/s after a 768-token context, where attention reads a KV cache as large as
//!   a third of the weights each step (llama.cpp: `llama-bench -d 768`), and the k-position
//!   passes again after that context: a draft's rows each attend over the whole cache, so at
//!   the demo's long prompts a wide pass costs more, relative to one position, than after 64
//!   tokens (llama.cpp: its pp-k rows at `-d 768`);
//! - GB/s of weights streamed at k = 1 and GFLOP/s at k = 8, against this machine's roofline,
//!   measured in the same run: the read rate of a buffer the size of the weights (read over
//!   and over, as decoding reads them) and of 1 GiB, on each thread count, and one core's peak
//!   FMA and `vpdpbusd` rates (`anyspec_cpu_kernels::roofline`);
//! - the same with the weights stored as f32 and f16 (converted at load), and the burn engine
//!   (the runtime before the native one) for the k-cost ratios;
//! - the process's peak resident memory (Linux `VmHWM`) before and after loading the file as
//!   `generate` does (first variant, first thread count) and timing it, beside the file's size.
//!
//! With `--sections`, each native row also gets a table of where its k = 1, 4 and 8 passes
//! spend their time (`anyspec_models::sections`: norms, each product, RoPE, attention,
//! SwiGLU, LM head), after both contexts: what a change to the per-row work is judged by.
//!
//! Timings are medians of repeated runs after a warm-up; every ratio is taken within this run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use anyspec_models::sections::{self, Section};
use anyspec_models::{Checkpoint, DeviceChoice, Engine, Kernel, Llama, LoadOptions, WeightFormat};
use serde::Serialize;

/// Options of `bench-cpu`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The GGUF model (default: SmolLM2-135M-Instruct Q4_1 from the model cache; fetch it with
    /// `cargo xtask fetch-models`).
    #[arg(long, value_name = "FILE.gguf")]
    model: Option<PathBuf>,
    /// Thread counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// `llama-bench` of a llama.cpp build, measured on the same file in the same run (see
    /// ../shared/notes/llama-cpp-peer.md for building it); without it the peer columns are empty.
    #[arg(long, value_name = "PATH")]
    llama_bench: Option<PathBuf>,
    /// A Python with torch, transformers, gguf and accelerate: runs
    /// xtask/python/bench_transformers_cpu.py on the same file (dequantized to f32), measured the
    /// same way, for the f32 rows' peer.
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Timed repetitions per figure (the median is reported).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Skip the f32/f16/burn rows (a quicker run).
    #[arg(long)]
    quantized_only: bool,
    /// Also time each section of the native passes (norms, products, RoPE, attention, SwiGLU,
    /// LM head) at k = 1, 4 and 8 after both contexts: mean µs per pass over `--reps` passes,
    /// the widths taking turns.
    #[arg(long)]
    sections: bool,
    /// Where the Markdown report goes (the JSON lands beside it).
    #[arg(long, default_value = "reports/cpu-runtime.md")]
    out: PathBuf,
}

const CONTEXT: usize = 64;
const MAX_K: usize = 8;
const DECODE_STEPS: usize = 32;
/// The context of the long-context decode figure: about the longest of the demo's prompts.
const LONG_CONTEXT: usize = 768;

#[derive(Debug, Serialize, serde::Deserialize)]
struct Row {
    runtime: String,
    storage: String,
    threads: usize,
    /// Median ms of a k-position pass, k = 1..=8.
    pass_ms: Vec<f64>,
    /// The same after [`LONG_CONTEXT`] tokens of context (absent from older reports and from
    /// the transformers script).
    #[serde(default)]
    pass_long_ms: Option<Vec<f64>>,
    decode_tokens_per_s: f64,
    prefill_tokens_per_s: f64,
    /// Decode tokens/s after [`LONG_CONTEXT`] tokens of context (absent from older reports
    /// and from the transformers script).
    #[serde(default)]
    decode_long_tokens_per_s: Option<f64>,
    weight_bytes: Option<usize>,
    /// With `--sections`: per context and width, where a pass spends its time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    sections: Vec<SectionProfile>,
}

/// Widths whose passes `--sections` times.
const SECTION_WIDTHS: [usize; 3] = [1, 4, 8];

/// Where the passes of one width after one context spend their time (means over the reps).
#[derive(Debug, Serialize, serde::Deserialize)]
struct SectionProfile {
    context: usize,
    k: usize,
    /// The whole pass (`forward_on_host`, logits read back).
    pass_us: f64,
    /// µs per pass in each section, in [`Section::ALL`]'s order, by name.
    sections_us: Vec<(String, f64)>,
}

#[derive(Debug, Serialize)]
struct Report {
    model: String,
    context: usize,
    reps: usize,
    parameters: usize,
    rows: Vec<Row>,
    memory: Option<Memory>,
    roofline: Option<Roofline>,
}

/// This machine's ceilings, measured in the run.
#[derive(Debug, Serialize)]
struct Roofline {
    /// The buffer of the first size: the weight bytes of the first native row.
    weight_bytes: usize,
    /// (threads, GB/s) reading a buffer of `weight_bytes` over and over.
    weights_read_gbs: Vec<(usize, f64)>,
    /// (threads, GB/s) reading [`MEMORY_READ_BYTES`], more than most last-level caches hold.
    memory_read_gbs: Vec<(usize, f64)>,
    /// One core's instructions per second (`anyspec_cpu_kernels::roofline::CorePeaks`).
    fma8_per_s: Option<f64>,
    fma16_per_s: Option<f64>,
    dpbusd16_per_s: Option<f64>,
}

/// The second read buffer: 1 GiB.
const MEMORY_READ_BYTES: usize = 1 << 30;

/// Measures [`Roofline`] for these thread counts, with a first buffer of `weight_bytes`.
fn roofline(weight_bytes: usize, threads: &[usize]) -> Roofline {
    let read = |bytes: usize| -> Vec<(usize, f64)> {
        // Filled, so that every page is mapped before the timing.
        let buffer: Vec<u64> = (0..bytes / 8).map(|i| i as u64).collect();
        threads.iter().map(|&t| (t, anyspec_cpu_kernels::roofline::read_rate(&buffer, t))).collect()
    };
    let peaks = anyspec_cpu_kernels::roofline::core_peaks(std::time::Duration::from_millis(200));
    Roofline {
        weight_bytes,
        weights_read_gbs: read(weight_bytes),
        memory_read_gbs: read(MEMORY_READ_BYTES),
        fma8_per_s: peaks.fma8,
        fma16_per_s: peaks.fma16,
        dpbusd16_per_s: peaks.dpbusd16,
    }
}

/// Peak resident memory of this process around the first model's load and timing.
#[derive(Debug, Serialize)]
struct Memory {
    file_bytes: u64,
    /// `VmHWM` before the model was loaded (the tokenizer and the binary are in).
    before_bytes: u64,
    /// `VmHWM` after it was loaded and timed (its KV cache held up to 64 + 32 positions).
    after_bytes: u64,
}

/// This process's peak resident set (`VmHWM` of `/proc/self/status`), where Linux tells it.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Weight elements of the matrices (what one position multiplies once).
fn parameters(model: &Llama) -> usize {
    let c = model.config();
    let q = c.num_heads * c.head_dim;
    let kv = c.num_kv_heads * c.head_dim;
    let layer = c.hidden_size * (q + 2 * kv) + q * c.hidden_size + 3 * c.hidden_size * c.intermediate_size;
    c.num_layers * layer + c.vocab_size * c.hidden_size
}

/// Greedy decoding of [`DECODE_STEPS`] tokens after `context` (prefilled first, not timed).
fn decode_rate(model: &Llama, context: &[u32]) -> anyhow::Result<f64> {
    let mut cache = model.new_cache();
    let logits = model.forward_on_host(context, &mut cache, 1, None)?;
    let argmax = |row: &[f32]| row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i as u32);
    let mut token = argmax(&logits[0]);
    let start = Instant::now();
    for _ in 0..DECODE_STEPS {
        let logits = model.forward_on_host(&[token], &mut cache, 1, None)?;
        token = argmax(&logits[0]);
    }
    Ok(DECODE_STEPS as f64 / start.elapsed().as_secs_f64())
}

/// Median ms of the k-position passes, k = 1..=[`MAX_K`], of `tokens` after the context in
/// `cache`, all k logit rows, rolled back after each. The widths take turns within each
/// repetition (k = 1..8, then again), so that a machine whose speed drifts during the run (a
/// shared VM) shifts every width alike and the ratios to k = 1 hold; timing each width's
/// repetitions in a block let the drift into the ratios. Each timed pass follows an untimed
/// single-position pass ([`settle`]): a pass right after a wide one costs more, and in turn
/// k = 1 always came after k = 8.
fn pass_times(
    model: &Llama,
    cache: &mut anyspec_models::KvCache,
    tokens: &[u32],
    reps: usize,
) -> anyhow::Result<Vec<f64>> {
    let context = cache.len();
    for k in 1..=MAX_K {
        model.forward_on_host(&tokens[..k], cache, k, None)?;
        cache.truncate(context);
    }
    let mut times: Vec<Vec<f64>> = (0..MAX_K).map(|_| Vec::with_capacity(reps)).collect();
    for _ in 0..reps {
        for (k, times) in (1..=MAX_K).zip(times.iter_mut()) {
            settle(model, cache, tokens)?;
            let start = Instant::now();
            model.forward_on_host(&tokens[..k], cache, k, None)?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
            cache.truncate(context);
        }
    }
    Ok(times.into_iter().map(median).collect())
}

/// An untimed single-position pass of `tokens[0]`, rolled back, before a timed one, so that
/// every width is timed after a single position, as most passes of a generation are (the
/// demo's calibration does the same; ARCHITECTURE.md says why: a pass costs more the longer
/// since the last one touched the weights, and so right after a wide one). Without it the
/// widths in turn put k = 1 after k = 8, and SmolLM2 Q4_1 read v(4) = 1.30–1.38 where passes
/// after a single position give 1.48–1.50.
fn settle(model: &Llama, cache: &mut anyspec_models::KvCache, tokens: &[u32]) -> anyhow::Result<()> {
    let context = cache.len();
    model.forward_on_host(&tokens[..1], cache, 1, None)?;
    cache.truncate(context);
    Ok(())
}

/// The k-position passes after `context` (prefilled first, not timed).
fn long_pass_times(model: &Llama, context: &[u32], tokens: &[u32], reps: usize) -> anyhow::Result<Vec<f64>> {
    let mut cache = model.new_cache();
    model.forward_on_host(context, &mut cache, 1, None)?;
    pass_times(model, &mut cache, tokens, reps)
}

/// Section timings ([`anyspec_models::sections`]) of the [`SECTION_WIDTHS`]-position passes of
/// `tokens` after `context` (prefilled first, not timed): the widths take turns within each
/// repetition, as in [`pass_times`], and the timers are off again on return, errors included.
fn section_profile(model: &Llama, context: &[u32], tokens: &[u32], reps: usize) -> anyhow::Result<Vec<SectionProfile>> {
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            sections::set_enabled(false);
        }
    }
    let mut cache = model.new_cache();
    model.forward_on_host(context, &mut cache, 1, None)?;
    let len = cache.len();
    for &k in &SECTION_WIDTHS {
        model.forward_on_host(&tokens[..k], &mut cache, k, None)?;
        cache.truncate(len);
    }
    let mut pass = [0.0f64; SECTION_WIDTHS.len()];
    let mut parts = [[0.0f64; Section::ALL.len()]; SECTION_WIDTHS.len()];
    let _off = Off;
    sections::set_enabled(true);
    for _ in 0..reps {
        for (w, &k) in SECTION_WIDTHS.iter().enumerate() {
            settle(model, &mut cache, tokens)?;
            let _ = sections::take();
            let start = Instant::now();
            model.forward_on_host(&tokens[..k], &mut cache, k, None)?;
            pass[w] += start.elapsed().as_secs_f64() * 1e6;
            let times = sections::take();
            for (part, &section) in parts[w].iter_mut().zip(&Section::ALL) {
                *part += times.get(section).as_secs_f64() * 1e6;
            }
            cache.truncate(len);
        }
    }
    let n = reps as f64;
    Ok(SECTION_WIDTHS
        .iter()
        .enumerate()
        .map(|(w, &k)| SectionProfile {
            context: len,
            k,
            pass_us: pass[w] / n,
            sections_us: Section::ALL.iter().zip(&parts[w]).map(|(s, &us)| (s.name().to_string(), us / n)).collect(),
        })
        .collect())
}

fn measure(model: &Llama, prompt: &[u32], reps: usize) -> anyhow::Result<(Vec<f64>, f64, f64)> {
    let mut cache = model.new_cache();
    // Prefill: the whole prompt, logits of the last row.
    let mut prefill = Vec::new();
    for _ in 0..reps.max(2) {
        cache.clear();
        let start = Instant::now();
        model.forward_on_host(&prompt[..CONTEXT], &mut cache, 1, None)?;
        prefill.push(start.elapsed().as_secs_f64());
    }
    let prefill_tokens_per_s = CONTEXT as f64 / median(prefill);
    let pass_ms = pass_times(model, &mut cache, &prompt[CONTEXT..CONTEXT + MAX_K], reps)?;
    // Decode: greedy, one token per step.
    let mut token = prompt[CONTEXT];
    let start = Instant::now();
    for _ in 0..DECODE_STEPS {
        let logits = model.forward_on_host(&[token], &mut cache, 1, None)?;
        token = logits[0].iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i as u32);
    }
    let decode_tokens_per_s = DECODE_STEPS as f64 / start.elapsed().as_secs_f64();
    Ok((pass_ms, decode_tokens_per_s, prefill_tokens_per_s))
}

#[derive(serde::Deserialize)]
struct LlamaBenchRow {
    n_prompt: usize,
    n_gen: usize,
    #[serde(default)]
    n_depth: usize,
    n_threads: usize,
    avg_ts: f64,
}

fn llama_bench(bin: &Path, model: &Path, threads: usize) -> anyhow::Result<Row> {
    let prompts: Vec<String> = (1..=MAX_K).map(|k| k.to_string()).chain(["64".into()]).collect();
    let lib_dir = bin.parent().unwrap_or(Path::new("."));
    let output = Command::new(bin)
        .env("LD_LIBRARY_PATH", lib_dir)
        .args(["-m", &model.display().to_string(), "-t", &threads.to_string(), "-p", &prompts.join(",")])
        .args(["-n", &DECODE_STEPS.to_string(), "-r", "5", "-o", "json"])
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !output.status.success() {
        bail!("{} failed: {}", bin.display(), String::from_utf8_lossy(&output.stderr));
    }
    let rows: Vec<LlamaBenchRow> = serde_json::from_slice(&output.stdout).context("reading llama-bench's JSON")?;
    // Decoding and the k-position passes after a long context: a second run, at depth
    // LONG_CONTEXT.
    let short_prompts: Vec<String> = (1..=MAX_K).map(|k| k.to_string()).collect();
    let output = Command::new(bin)
        .env("LD_LIBRARY_PATH", lib_dir)
        .args(["-m", &model.display().to_string(), "-t", &threads.to_string(), "-p", &short_prompts.join(",")])
        .args(["-n", &DECODE_STEPS.to_string(), "-d", &LONG_CONTEXT.to_string(), "-r", "3", "-o", "json"])
        .output()
        .with_context(|| format!("running {} -d {LONG_CONTEXT}", bin.display()))?;
    if !output.status.success() {
        bail!("{} -d {LONG_CONTEXT} failed: {}", bin.display(), String::from_utf8_lossy(&output.stderr));
    }
    let deep: Vec<LlamaBenchRow> = serde_json::from_slice(&output.stdout).context("reading llama-bench's JSON")?;
    let rate = |prompt: usize, generated: usize| {
        rows.iter()
            .find(|r| r.n_prompt == prompt && r.n_gen == generated && r.n_threads == threads && r.n_depth == 0)
            .map(|r| r.avg_ts)
    };
    let decode_long = deep.iter().find(|r| r.n_gen == DECODE_STEPS && r.n_depth == LONG_CONTEXT).map(|r| r.avg_ts);
    let mut pass_ms = Vec::new();
    let mut pass_long_ms = Vec::new();
    for k in 1..=MAX_K {
        let ts = rate(k, 0).with_context(|| format!("llama-bench printed no pp{k} row"))?;
        pass_ms.push(k as f64 / ts * 1e3);
        let deep_ts = deep
            .iter()
            .find(|r| r.n_prompt == k && r.n_gen == 0 && r.n_depth == LONG_CONTEXT)
            .map(|r| r.avg_ts)
            .with_context(|| format!("llama-bench -d {LONG_CONTEXT} printed no pp{k} row"))?;
        pass_long_ms.push(k as f64 / deep_ts * 1e3);
    }
    Ok(Row {
        runtime: "llama.cpp (llama-bench)".into(),
        storage: "as in the file".into(),
        threads,
        pass_ms,
        pass_long_ms: Some(pass_long_ms),
        decode_tokens_per_s: rate(0, DECODE_STEPS).context("llama-bench printed no tg row")?,
        prefill_tokens_per_s: rate(CONTEXT, 0).context("llama-bench printed no pp64 row")?,
        decode_long_tokens_per_s: Some(decode_long.context("llama-bench -d printed no tg row")?),
        weight_bytes: None,
        sections: Vec::new(),
    })
}

fn transformers(python: &Path, model: &Path, threads: usize, prompt: &[u32], reps: usize) -> anyhow::Result<Row> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/bench_transformers_cpu.py");
    let ids: Vec<String> = prompt.iter().map(u32::to_string).collect();
    let output = Command::new(python)
        .arg(&script)
        .args(["--model", &model.display().to_string(), "--threads", &threads.to_string()])
        .args(["--ids", &ids.join(","), "--reps", &reps.to_string()])
        .output()
        .with_context(|| format!("running {} {}", python.display(), script.display()))?;
    if !output.status.success() {
        bail!("{} failed: {}", script.display(), String::from_utf8_lossy(&output.stderr));
    }
    serde_json::from_slice(&output.stdout).context("reading bench_transformers_cpu.py's JSON")
}

/// Progress goes to stderr.
#[allow(clippy::print_stderr)]
pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let model_path = crate::fetch_models::smollm2_or(args.model.as_deref())?;
    let checkpoint = Checkpoint::open(&model_path).with_context(|| format!("--model {}", model_path.display()))?;
    let tokenizer = checkpoint.tokenizer()?;
    let text = "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg \
                combined movable metal type, oil-based ink and a wooden screw press into a system that could \
                produce books faster and more cheaply than any scribe. Within fifty years presses were at work \
                in more than two hundred cities across Europe, and the number of books in circulation grew from \
                thousands to millions.";
    let prompt = tokenizer.encode(text)?;
    if prompt.len() < CONTEXT + MAX_K {
        bail!("the benchmark text encodes to {} tokens; it needs {}", prompt.len(), CONTEXT + MAX_K);
    }
    // The benchmark text over and over: the tokens do not change a pass's cost.
    let long_context: Vec<u32> = prompt.iter().copied().cycle().take(LONG_CONTEXT).collect();
    let device = DeviceChoice::Cpu.device()?;
    let mut memory = None;
    let before = peak_rss_bytes();
    let mut rows = Vec::new();
    let mut params = 0;
    // (engine, storage, label, kernel): `None` is the best kernel for this CPU.
    let mut variants: Vec<(Engine, Option<WeightFormat>, &str, Option<Kernel>)> =
        vec![(Engine::Native, None, "as in the file", None)];
    if Kernel::best() == Kernel::Avx512Q8 {
        // The AVX2 kernel beside it, on the same file: the ratio is AVX-512 VNNI's gain.
        variants.push((Engine::Native, None, "as in the file", Some(Kernel::Avx2Q8)));
    }
    if !args.quantized_only {
        variants.push((Engine::Native, Some(WeightFormat::F32), "f32 (converted at load)", None));
        if Kernel::best() == Kernel::Avx512Q8 {
            // The f32 rows' AVX2 kernel beside the AVX-512 one: the ratio is AVX-512's gain.
            variants.push((Engine::Native, Some(WeightFormat::F32), "f32 (converted at load)", Some(Kernel::Avx2)));
        }
        variants.push((Engine::Native, Some(WeightFormat::F16), "f16 (converted at load)", None));
        if Kernel::best().reads_panels() {
            // f16 rows widened to f32 at load, as before the panel layout (the AVX2 kernel
            // reads no panels): the ratio is the panels' gain.
            variants.push((Engine::Native, Some(WeightFormat::F16), "f16 (converted at load)", Some(Kernel::Avx2)));
        }
        variants.push((Engine::Burn, None, "f32 (dequantized at load)", None));
    }
    for &threads in &args.threads {
        for &(engine, storage, label, kernel) in &variants {
            if engine == Engine::Burn && threads != args.threads[0] {
                continue; // burn's flex backend picks its own threads.
            }
            let which = kernel.map_or("best".to_string(), |k| format!("{k:?}"));
            eprintln!("measuring {engine} engine, {label}, {which} kernel, {threads} threads…");
            let options =
                LoadOptions::engine(engine).with_threads(Some(threads)).with_storage(storage).with_kernel(kernel);
            let model = checkpoint.load_model_with(&device, &options)?;
            params = parameters(&model);
            let (pass_ms, decode, prefill) = measure(&model, &prompt, args.reps)?;
            if let (None, Some(before), Some(after)) = (&memory, before, peak_rss_bytes()) {
                let file_bytes = std::fs::metadata(&model_path)?.len();
                memory = Some(Memory { file_bytes, before_bytes: before, after_bytes: after });
            }
            // After the memory reading, which stays that of a short context.
            let decode_long = decode_rate(&model, &long_context)?;
            let pass_long_ms = long_pass_times(&model, &long_context, &prompt[..MAX_K], args.reps)?;
            let mut profiles = Vec::new();
            if args.sections && engine == Engine::Native {
                eprintln!("  timing sections…");
                profiles.extend(section_profile(&model, &prompt[..CONTEXT], &prompt[CONTEXT..], args.reps)?);
                profiles.extend(section_profile(&model, &long_context, &prompt[..MAX_K], args.reps)?);
            }
            let runtime = match engine {
                Engine::Burn => "anyspec burn engine (flex)".to_string(),
                _ => format!("anyspec native ({:?} kernel)", model.kernel().expect("a native model has a kernel")),
            };
            rows.push(Row {
                runtime,
                storage: label.into(),
                threads: if engine == Engine::Burn { 0 } else { threads },
                pass_ms,
                pass_long_ms: Some(pass_long_ms),
                decode_tokens_per_s: decode,
                prefill_tokens_per_s: prefill,
                decode_long_tokens_per_s: Some(decode_long),
                weight_bytes: model.weight_bytes(),
                sections: profiles,
            });
        }
        if let Some(bin) = &args.llama_bench {
            eprintln!("measuring llama.cpp, {threads} threads…");
            rows.push(llama_bench(bin, &model_path, threads)?);
        }
        if let Some(python) = &args.python {
            eprintln!("measuring transformers, {threads} threads…");
            rows.push(transformers(python, &model_path, threads, &prompt, args.reps)?);
        }
    }
    // The ceilings last, after the models are dropped: the 1 GiB buffer is not held beside them.
    let roofline = rows.iter().find_map(|r| r.weight_bytes).map(|bytes| {
        eprintln!("measuring this machine's read rates and peak instruction rates…");
        roofline(bytes, &args.threads)
    });
    let report = Report {
        model: model_path.display().to_string(),
        context: CONTEXT,
        reps: args.reps,
        parameters: params,
        rows,
        memory,
        roofline,
    };
    write_report(&report, &args.out)
}

/// The measured ceilings, and how close the default native row of each thread count gets.
fn write_roofline(md: &mut String, report: &Report, r: &Roofline) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let rates = |v: &[(usize, f64)]| {
        v.iter()
            .map(|(t, g)| format!("{g:.1} GB/s on {t} thread{}", if *t == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let per_s = |v: Option<f64>| v.map_or("—".to_string(), |x| format!("{:.2} G", x / 1e9));
    let peaks = anyspec_cpu_kernels::roofline::CorePeaks {
        fma8: r.fma8_per_s,
        fma16: r.fma16_per_s,
        dpbusd16: r.dpbusd16_per_s,
    };
    writeln!(
        md,
        "\n## Roofline of this machine (measured in this run)\n\nReading a buffer the size of the weights ({:.1} MB) \
         over and over, as decoding reads them, with the quantized kernels' prefetching \
         (`anyspec_cpu_kernels::roofline::read_rate`): {}. Reading 1 GiB, more than most last-level caches hold: {}. One \
         core retires {} 8-lane f32 FMAs per second (AVX2), {} 16-lane ones (AVX-512) and {} 16-lane `vpdpbusd` (64 \
         8-bit multiply-adds each): at most {} f32 and {} 8-bit multiply-adds per second per core \
         (`anyspec_cpu_kernels::roofline`: independent chains of each instruction on one core). GB/s above counts \
         the weight bytes held by the engine (quantized at their quantized size) once per single-position pass; \
         GFLOP/s counts two per weight and position.\n",
        r.weight_bytes as f64 / 1e6,
        rates(&r.weights_read_gbs),
        rates(&r.memory_read_gbs),
        per_s(r.fma8_per_s),
        per_s(r.fma16_per_s),
        per_s(r.dpbusd16_per_s),
        per_s(peaks.f32_macs()),
        per_s(peaks.int8_macs()),
    )?;
    writeln!(
        md,
        "| row | threads | k=1: GB/s ÷ the weights-sized read rate | k=8: multiply-adds/s ÷ the cores' peak (8-bit for the 8-bit kernels) |"
    )?;
    writeln!(md, "|---|---|---|---|")?;
    for &(threads, read) in &r.weights_read_gbs {
        let Some(row) = report.rows.iter().find(|row| {
            row.threads == threads && row.storage == "as in the file" && row.runtime.starts_with("anyspec native")
        }) else {
            continue;
        };
        let gbs = row.weight_bytes.map(|b| b as f64 / (row.pass_ms[0] * 1e6));
        let macs = report.parameters as f64 * MAX_K as f64 / (row.pass_ms[MAX_K - 1] * 1e-3);
        // The 8-bit kernels' multiply-adds run as `vpdpbusd`, the others' as f32 FMAs.
        let per_core = if row.runtime.contains("Q8 kernel") { peaks.int8_macs() } else { peaks.f32_macs() };
        let peak = per_core.map(|p| p * threads as f64);
        writeln!(
            md,
            "| {} | {} | {} | {} |",
            row.runtime,
            threads,
            gbs.map_or("—".to_string(), |g| format!("{g:.1} ÷ {read:.1} = {:.0}%", 100.0 * g / read)),
            peak.map_or("—".to_string(), |p| format!(
                "{:.0} G ÷ {:.0} G = {:.0}%",
                macs / 1e9,
                p / 1e9,
                100.0 * macs / p
            )),
        )?;
    }
    Ok(())
}

/// The `--sections` tables: one per native row, a column per (context, width).
fn write_sections(md: &mut String, report: &Report) -> std::fmt::Result {
    use std::fmt::Write;
    for row in report.rows.iter().filter(|r| !r.sections.is_empty()) {
        writeln!(md, "\n## Where a pass spends its time: {}, {}, {} threads\n", row.runtime, row.storage, row.threads)?;
        writeln!(
            md,
            "µs per pass, mean of {} passes per column, the widths taking turns (`--sections`, \
             `anyspec_models::sections`); \"other\" is the whole pass less the sections (embedding, \
             handing the logits back). SwiGLU runs inside the gate/up product's threads where the \
             model's gate and up rows are paired (its row is zero then).\n",
            report.reps
        )?;
        let columns: Vec<String> = row.sections.iter().map(|p| format!("k={} after {}", p.k, p.context)).collect();
        writeln!(md, "| section | {} |", columns.join(" | "))?;
        writeln!(md, "|---|{}", "---|".repeat(columns.len()))?;
        for (i, section) in Section::ALL.iter().enumerate() {
            let cells: Vec<String> = row.sections.iter().map(|p| format!("{:.0}", p.sections_us[i].1)).collect();
            writeln!(md, "| {} | {} |", section.name(), cells.join(" | "))?;
        }
        let other: Vec<String> = row
            .sections
            .iter()
            .map(|p| format!("{:.0}", p.pass_us - p.sections_us.iter().map(|(_, us)| us).sum::<f64>()))
            .collect();
        writeln!(md, "| other | {} |", other.join(" | "))?;
        let whole: Vec<String> = row.sections.iter().map(|p| format!("**{:.0}**", p.pass_us)).collect();
        writeln!(md, "| whole pass | {} |", whole.join(" | "))?;
    }
    Ok(())
}

fn write_report(report: &Report, out: &Path) -> anyhow::Result<()> {
    use std::fmt::Write;
    let mut md = String::new();
    let file = Path::new(&report.model).file_name().map_or(report.model.clone(), |f| f.to_string_lossy().into());
    writeln!(md, "# CPU runtime: scoring a draft, decoding and prefill on {file}\n")?;
    writeln!(
        md,
        "Regenerate with `cargo run --release -p xtask -- bench-cpu --llama-bench PATH/llama-bench --python PATH/python` \
         (2-core machine; medians of {} runs; context {} tokens; the k-position passes return all k \
         logit rows, as verification needs; llama.cpp's pp-k rows are its prompt processing of k \
         tokens from an empty context). {} weight elements per position.{}{}\n",
        report.reps,
        report.context,
        report.parameters,
        if report.rows.iter().any(|r| r.runtime.starts_with("llama.cpp")) {
            ""
        } else {
            " llama.cpp was not measured in this run (`--llama-bench`)."
        },
        if report.rows.iter().any(|r| r.runtime.starts_with("transformers")) {
            ""
        } else {
            " transformers was not measured in this run (`--python`, a Python with torch, transformers, gguf and \
             accelerate)."
        },
    )?;
    writeln!(md, "## Cost of scoring k positions in one pass ÷ one position\n")?;
    writeln!(md, "| runtime | weights | threads | k=1 ms | k=2 | k=3 | k=4 | k=5 | k=6 | k=7 | k=8 |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    for row in &report.rows {
        let base = row.pass_ms[0];
        let ratios: Vec<String> = row.pass_ms[1..].iter().map(|ms| format!("{:.2}", ms / base)).collect();
        let threads = if row.threads == 0 { "auto".to_string() } else { row.threads.to_string() };
        writeln!(md, "| {} | {} | {} | {:.2} | {} |", row.runtime, row.storage, threads, base, ratios.join(" | "))?;
    }
    if report.rows.iter().any(|r| r.pass_long_ms.is_some()) {
        writeln!(md, "\n## The same after {LONG_CONTEXT} tokens of context\n")?;
        writeln!(
            md,
            "Each row of a draft attends over the whole cache, so at long prompts a wide pass costs \
             more, relative to one position, than after {} tokens.\n",
            report.context
        )?;
        writeln!(md, "| runtime | weights | threads | k=1 ms | k=2 | k=3 | k=4 | k=5 | k=6 | k=7 | k=8 |")?;
        writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|")?;
        for row in &report.rows {
            let Some(long) = &row.pass_long_ms else { continue };
            let ratios: Vec<String> = long[1..].iter().map(|ms| format!("{:.2}", ms / long[0])).collect();
            let threads = if row.threads == 0 { "auto".to_string() } else { row.threads.to_string() };
            writeln!(
                md,
                "| {} | {} | {} | {:.2} | {} |",
                row.runtime,
                row.storage,
                threads,
                long[0],
                ratios.join(" | ")
            )?;
        }
    }
    writeln!(md, "\n## Decode and prefill\n")?;
    writeln!(
        md,
        "| runtime | weights | threads | decode tok/s | decode tok/s after {LONG_CONTEXT} | prefill tok/s (64) | GB/s at k=1 | GFLOP/s at k=8 |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|")?;
    for row in &report.rows {
        let gbs = row.weight_bytes.map_or("—".to_string(), |b| format!("{:.1}", b as f64 / (row.pass_ms[0] * 1e6)));
        let gflops = 2.0 * report.parameters as f64 * MAX_K as f64 / (row.pass_ms[MAX_K - 1] * 1e6);
        let threads = if row.threads == 0 { "auto".to_string() } else { row.threads.to_string() };
        let long = row.decode_long_tokens_per_s.map_or("—".to_string(), |r| format!("{r:.1}"));
        writeln!(
            md,
            "| {} | {} | {} | {:.1} | {} | {:.1} | {} | {:.1} |",
            row.runtime, row.storage, threads, row.decode_tokens_per_s, long, row.prefill_tokens_per_s, gbs, gflops
        )?;
    }
    write_sections(&mut md, report)?;
    let peers: Vec<&Row> = report.rows.iter().filter(|r| r.runtime.starts_with("llama.cpp")).collect();
    if !peers.is_empty() {
        writeln!(md, "\n## Ours ÷ llama.cpp (same file, same run)\n")?;
        writeln!(
            md,
            "| threads | decode | decode after {LONG_CONTEXT} | prefill | k=6 cost ratio, ours | k=6 cost ratio, llama.cpp |"
        )?;
        writeln!(md, "|---|---|---|---|---|---|")?;
        for peer in peers {
            if let Some(ours) = report.rows.iter().find(|r| {
                r.threads == peer.threads && r.storage == "as in the file" && r.runtime.starts_with("anyspec native")
            }) {
                let long = match (ours.decode_long_tokens_per_s, peer.decode_long_tokens_per_s) {
                    (Some(a), Some(b)) => format!("{:.2}×", a / b),
                    _ => "—".to_string(),
                };
                writeln!(
                    md,
                    "| {} | {:.2}× | {} | {:.2}× | {:.2} | {:.2} |",
                    peer.threads,
                    ours.decode_tokens_per_s / peer.decode_tokens_per_s,
                    long,
                    ours.prefill_tokens_per_s / peer.prefill_tokens_per_s,
                    ours.pass_ms[5] / ours.pass_ms[0],
                    peer.pass_ms[5] / peer.pass_ms[0]
                )?;
            }
        }
    }
    let peers: Vec<&Row> = report.rows.iter().filter(|r| r.runtime.starts_with("transformers")).collect();
    if !peers.is_empty() {
        writeln!(md, "\n## Ours ÷ transformers (the same weights in f32 and f16, same run)\n")?;
        writeln!(
            md,
            "transformers dequantizes the file to f32, as our f32 rows do (f16 on its CPU path is not \
             what its users run, so it is measured in f32 only); our f16 rows hold the same weights \
             rounded to f16 at two bytes each.\n"
        )?;
        writeln!(
            md,
            "| threads | ours | decode | prefill | k=6 cost ratio, ours | k=6 cost ratio, transformers | k=6 pass, ours ÷ transformers |"
        )?;
        writeln!(md, "|---|---|---|---|---|---|---|")?;
        for peer in peers {
            for storage in ["f32 (converted at load)", "f16 (converted at load)"] {
                // The default kernel's row (the first of that storage and thread count).
                if let Some(ours) = report.rows.iter().find(|r| {
                    r.threads == peer.threads && r.storage == storage && r.runtime.starts_with("anyspec native")
                }) {
                    writeln!(
                        md,
                        "| {} | {} | {:.2}× | {:.2}× | {:.2} | {:.2} | {:.2} |",
                        peer.threads,
                        storage.split(' ').next().unwrap_or(storage),
                        ours.decode_tokens_per_s / peer.decode_tokens_per_s,
                        ours.prefill_tokens_per_s / peer.prefill_tokens_per_s,
                        ours.pass_ms[5] / ours.pass_ms[0],
                        peer.pass_ms[5] / peer.pass_ms[0],
                        ours.pass_ms[5] / peer.pass_ms[5]
                    )?;
                }
            }
        }
    }
    if let Some(m) = &report.memory {
        let mb = |b: u64| b as f64 / 1e6;
        writeln!(md, "\n## Memory\n")?;
        writeln!(
            md,
            "Peak resident memory of this process (`VmHWM`): {:.1} MB before loading the file, {:.1} MB after \
             loading it as `generate` does (first row above) and timing it: {:.2}× the file's {:.1} MB (the \
             issue's bound: 1.5× plus the KV cache); the load and the timing added {:.1} MB, {:.2}× the file, \
             the KV cache of their {} positions included. The load reads each tensor into memory (no map \
             of the weights stays resident) and gives each matrix its kernel layout as soon as it is read, so \
             the peak is the model's own weights plus one matrix in transit.",
            mb(m.before_bytes),
            mb(m.after_bytes),
            m.after_bytes as f64 / m.file_bytes as f64,
            mb(m.file_bytes),
            mb(m.after_bytes.saturating_sub(m.before_bytes)),
            m.after_bytes.saturating_sub(m.before_bytes) as f64 / m.file_bytes as f64,
            CONTEXT + DECODE_STEPS,
        )?;
    }
    if let Some(r) = &report.roofline {
        write_roofline(&mut md, report, r)?;
    }
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(out, md).with_context(|| format!("writing {}", out.display()))?;
    let json = out.with_extension("json");
    std::fs::write(&json, serde_json::to_string_pretty(report)?)?;
    Ok(())
}
