//! `anyspec generate`: text from a Hugging Face checkpoint, autoregressive or speculative with a
//! same-tokenizer model drafter, streamed to stdout with statistics on stderr.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use anyspec_core::engine::Target;
use anyspec_core::{Drafter, GenerationConfig, SamplingConfig, StopReason, generate};
use anyspec_drafters::ModelDrafter;
use anyspec_models::{Checkpoint, DeviceChoice, LlamaTarget, TextTokenizer};
use anyspec_vocab_map::Vocabulary;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Serialize;

use crate::commands::theory::flag_error;
use crate::output::print_json;

/// Generates text with a Llama-family checkpoint (Llama 2/3, TinyLlama, Mistral, Qwen2).
///
/// Without --drafter every step is one autoregressive token. With --drafter, a smaller
/// checkpoint that shares the target's tokenizer drafts up to --gamma tokens per step and the
/// target verifies them in one forward pass; the output distribution is the target's exactly
/// (at --temperature 0, the same tokens as autoregressive decoding).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Target checkpoint directory (config.json, model.safetensors or a sharded index,
    /// tokenizer.json).
    #[arg(long, value_name = "DIR")]
    target: PathBuf,
    /// Drafter checkpoint directory; must use the same tokenizer as the target.
    #[arg(long, value_name = "DIR")]
    drafter: Option<PathBuf>,
    /// The text to continue.
    #[arg(long)]
    prompt: String,
    /// Sampling temperature for target and drafter alike (0 = greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Keep the smallest set of most probable tokens whose mass reaches P (1 keeps all).
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Keep only the K most probable tokens.
    #[arg(long)]
    top_k: Option<usize>,
    /// Most tokens drafted per verification step (γ).
    #[arg(long, default_value_t = 5)]
    gamma: usize,
    /// Most new tokens to generate.
    #[arg(long, default_value_t = 128)]
    max_tokens: usize,
    /// Seed of the sampling RNG.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where the models run: cpu, wgpu or cuda (the last two need the cargo feature of that name).
    #[arg(long, default_value = "cpu", value_parser = parse_device)]
    device: DeviceChoice,
    /// Keep generating past the end-of-sequence token (for benchmarks).
    #[arg(long)]
    ignore_eos: bool,
    /// Print one JSON object (text, tokens, statistics) instead of streaming text.
    #[arg(long)]
    json: bool,
}

fn parse_device(name: &str) -> Result<DeviceChoice, String> {
    let choice: DeviceChoice = name.parse().map_err(|e: anyspec_models::Error| e.to_string())?;
    choice.device().map_err(|e| e.to_string())?;
    Ok(choice)
}

/// What `--json` prints; field names are stable.
#[derive(Debug, Serialize)]
struct Report {
    text: String,
    tokens: Vec<u32>,
    prompt_tokens: usize,
    stop_reason: StopReason,
    device: &'static str,
    speculative: bool,
    gamma: usize,
    load_ms: f64,
    prefill_ms: f64,
    decode_ms: f64,
    tokens_per_second: f64,
    steps: u64,
    drafted: u64,
    accepted: u64,
    acceptance_rate: f64,
    mean_accepted_length: f64,
    tokens_per_step: f64,
    draft_ms: f64,
    verify_ms: f64,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if args.prompt.trim().is_empty() {
        bail!("--prompt is empty; give the text to continue");
    }
    let sampling = SamplingConfig::new(args.temperature, args.top_k, args.top_p).map_err(flag_error)?;
    let started = Instant::now();
    let device = args.device.device()?;
    let target_checkpoint = open(&args.target, "--target")?;
    let tokenizer = target_checkpoint.tokenizer().with_context(|| format!("--target {}", args.target.display()))?;
    let prompt = tokenizer.encode(&args.prompt)?;
    let context = target_checkpoint.config().max_position_embeddings;
    if prompt.is_empty() {
        bail!("--prompt encodes to no tokens; give text the tokenizer can encode");
    }
    if prompt.len() >= context {
        bail!(
            "--prompt is {} tokens but the target's context window is {context} tokens \
             (max_position_embeddings in {}); shorten the prompt",
            prompt.len(),
            args.target.join("config.json").display()
        );
    }
    let drafter_checkpoint = match &args.drafter {
        Some(dir) => {
            let checkpoint = open(dir, "--drafter")?;
            check_same_tokenizer(&args.target, dir)?;
            Some(checkpoint)
        }
        None => None,
    };

    let mut target = LlamaTarget::new(target_checkpoint.load_model(&device)?);
    let mut drafter = match &drafter_checkpoint {
        Some(checkpoint) => Some(ModelDrafter::new(checkpoint.load_model(&device)?, target.vocab_size())),
        None => None,
    };
    let load_time = started.elapsed();

    let config = GenerationConfig {
        gamma: args.gamma,
        max_new_tokens: args.max_tokens,
        stop_tokens: if args.ignore_eos { Vec::new() } else { target_checkpoint.config().eos_token_ids.clone() },
        sampling,
        ..GenerationConfig::default()
    };
    config.validate().map_err(flag_error)?;

    // Prefill the prompt on its own so its cost is reported apart from decoding; the first step
    // of `generate` reuses the cache.
    let started = Instant::now();
    target.score(&prompt, 0)?;
    let prefill_time = started.elapsed();

    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut stream = TextStream::new(&tokenizer, !args.json);
    let started = Instant::now();
    let generation = generate(
        &mut target,
        drafter.as_mut().map(|d| d as &mut dyn Drafter),
        &prompt,
        &config,
        &mut rng,
        &mut |token| stream.push(token),
    )?;
    let decode_time = started.elapsed();
    if let Some(err) = stream.error.take() {
        return Err(err);
    }
    stream.finish()?;

    let stats = &generation.stats;
    let report = Report {
        text: tokenizer.decode(&generation.tokens)?,
        tokens: generation.tokens.clone(),
        prompt_tokens: prompt.len(),
        stop_reason: generation.stop_reason,
        device: args.device.name(),
        speculative: drafter.is_some(),
        gamma: args.gamma,
        load_ms: ms(load_time),
        prefill_ms: ms(prefill_time),
        decode_ms: ms(decode_time),
        tokens_per_second: stats.generated as f64 / decode_time.as_secs_f64().max(1e-9),
        steps: stats.steps,
        drafted: stats.drafted,
        accepted: stats.accepted,
        acceptance_rate: stats.acceptance_rate(),
        mean_accepted_length: stats.mean_accepted_length(),
        tokens_per_step: stats.tokens_per_step(),
        draft_ms: ms(stats.draft_time),
        verify_ms: ms(stats.verify_time),
    };
    if args.json {
        return print_json(&report);
    }
    print_stats(&report);
    Ok(())
}

fn open(dir: &Path, flag: &str) -> anyhow::Result<Checkpoint> {
    Checkpoint::open(dir).with_context(|| format!("{flag} {}", dir.display()))
}

/// A model drafter proposes target ids directly, so both checkpoints must share one tokenizer;
/// compared through the canonical vocabulary fingerprint of anyspec-vocab-map.
fn check_same_tokenizer(target: &Path, drafter: &Path) -> anyhow::Result<()> {
    let load = |dir: &Path, flag: &str| {
        let path = dir.join("tokenizer.json");
        Vocabulary::from_file(&path).with_context(|| format!("{flag}: reading {}", path.display()))
    };
    let (t, d) = (load(target, "--target")?, load(drafter, "--drafter")?);
    if t.fingerprint() != d.fingerprint() {
        bail!(
            "--drafter {} uses another tokenizer than --target {} (vocabulary fingerprints {} and {}); \
             a model drafter must share the target's tokenizer: pick a drafter from the same model family",
            drafter.display(),
            target.display(),
            d.fingerprint().short(),
            t.fingerprint().short()
        );
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[allow(clippy::print_stderr)]
fn print_stats(r: &Report) {
    eprintln!();
    eprintln!(
        "{} tokens ({:?}) on {} · load {:.0} ms · prefill {} tokens in {:.1} ms · decode {:.1} ms = {:.1} tokens/s",
        r.tokens.len(),
        r.stop_reason,
        r.device,
        r.load_ms,
        r.prompt_tokens,
        r.prefill_ms,
        r.decode_ms,
        r.tokens_per_second
    );
    if r.speculative {
        eprintln!(
            "γ = {} · acceptance rate {:.3} · mean accepted length {:.2} · tokens per step {:.2} · \
             {} steps · draft {:.1} ms · verify {:.1} ms",
            r.gamma, r.acceptance_rate, r.mean_accepted_length, r.tokens_per_step, r.steps, r.draft_ms, r.verify_ms
        );
    } else {
        eprintln!("autoregressive · {} steps · tokens per step {:.2}", r.steps, r.tokens_per_step);
    }
}

/// Prints decoded text as tokens arrive, holding back a tail that is not yet valid UTF-8 (a
/// byte-level token can end inside a multi-byte character).
struct TextStream<'a> {
    tokenizer: &'a TextTokenizer,
    enabled: bool,
    tokens: Vec<u32>,
    printed: usize,
    error: Option<anyhow::Error>,
}

impl<'a> TextStream<'a> {
    fn new(tokenizer: &'a TextTokenizer, enabled: bool) -> Self {
        TextStream { tokenizer, enabled, tokens: Vec::new(), printed: 0, error: None }
    }

    fn push(&mut self, token: u32) -> ControlFlow<()> {
        self.tokens.push(token);
        if !self.enabled {
            return ControlFlow::Continue(());
        }
        match self.flush(false) {
            Ok(()) => ControlFlow::Continue(()),
            Err(err) => {
                self.error = Some(err);
                ControlFlow::Break(())
            }
        }
    }

    fn flush(&mut self, last: bool) -> anyhow::Result<()> {
        let text = self.tokenizer.decode(&self.tokens)?;
        if !last && text.ends_with('\u{FFFD}') {
            return Ok(());
        }
        // Decoding can rewrite earlier characters (cleanup of spaces); print only a clean suffix.
        if let Some(new) = text.get(self.printed..)
            && text.is_char_boundary(self.printed)
        {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(new.as_bytes())?;
            stdout.flush()?;
            self.printed = text.len();
        }
        Ok(())
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        if self.enabled {
            self.flush(true)?;
            writeln!(std::io::stdout())?;
        }
        Ok(())
    }
}
