//! `anyspec generate`: text from a Hugging Face checkpoint, autoregressive or speculative with a
//! model drafter (same tokenizer, or another one through `--algo`), streamed to stdout with
//! statistics on stderr.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use anyspec_core::engine::Target;
use anyspec_core::{Drafter, GenerationConfig, SamplingConfig, StopReason, generate};
use anyspec_drafters::hetero::{self, AlgoRequest, ContextMapping};
use anyspec_drafters::slrs::{DEFAULT_SLRS_BUDGET, SlrsConfig};
use anyspec_drafters::{Algo, AutoChoice, ModelDrafter, RdkForm};
use anyspec_models::{
    Checkpoint, DeviceChoice, Engine, Kernel, Llama, LlamaTarget, LoadOptions, TextTokenizer, Verification,
};
use anyspec_vocab_map::{MatchMode, VocabMap, Vocabulary};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Serialize;

use crate::args::{flag_error, parse_device, vocabulary_of};
use crate::output::print_json;

/// Generates text with a Llama-family checkpoint (Llama 2/3, TinyLlama, Mistral, Qwen2).
///
/// Without --drafter every step is one autoregressive token. With --drafter, a smaller
/// checkpoint drafts up to --gamma tokens per step and the target verifies them in one forward
/// pass; the output distribution is the target's exactly (at --temperature 0, the same tokens
/// as autoregressive decoding). A drafter with another tokenizer needs --algo: tli (token-level
/// intersection, pruned LM head), slem (string-level exact match), rdk (TLI + affinity
/// redistribution, needs --affinity), union (baseline), or auto (picks one and says why).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Target model: a Hugging Face checkpoint directory (config.json, model.safetensors or a
    /// sharded index, tokenizer.json) or a GGUF file (llama.cpp's format; Q4_0, Q4_1, Q8_0,
    /// Q4_K, Q6_K, F16, BF16 and F32 tensors, quantized weights kept quantized on the CPU).
    #[arg(long, value_name = "DIR|FILE.gguf")]
    target: PathBuf,
    /// Drafter model (directory or .gguf). With another tokenizer than the target's, also give
    /// --algo.
    #[arg(long, value_name = "DIR|FILE.gguf")]
    drafter: Option<PathBuf>,
    /// How a drafter with another tokenizer reaches the target: tli, slem, slrs, rdk, union or
    /// auto (chooses from the vocabulary overlap, the temperature and the drafter's token
    /// lengths, and prints which and why).
    #[arg(long, value_enum, requires = "drafter")]
    algo: Option<AlgoArg>,
    /// Vocabulary map built by `anyspec vocab build` for exactly this target and drafter
    /// tokenizer; without it the map is built on the fly (byte-surface matching).
    #[arg(long, value_name = "FILE", requires = "algo")]
    vocab_map: Option<PathBuf>,
    /// Token-affinity matrix for --algo rdk, built by `anyspec affinity build` with the
    /// target's tokenizer.
    #[arg(long, value_name = "FILE", requires = "algo")]
    affinity: Option<PathBuf>,
    /// RDK form: exact (sparse Mᵀq) or taylor (first-order kernel over the raw scores).
    #[arg(long, value_enum, default_value = "exact")]
    rdk: RdkArg,
    /// FR-Spec shortlist of drafter tokens (`anyspec shortlist build`, drafter tokenizer) for
    /// --algo tli or rdk: the drafter's LM head is pruned to it.
    #[arg(long, value_name = "FILE", requires = "algo")]
    shortlist: Option<PathBuf>,
    /// --algo tli, rdk, union: how the target's tokens reach the drafter. `retokenize` decodes
    /// them and encodes the text with the drafter's tokenizer; `shared-ids` maps them one for
    /// one when all are shared (text otherwise), keeping the target's segmentation.
    #[arg(long, value_enum, default_value = "retokenize")]
    drafter_context: ContextArg,
    /// --algo slrs: most drafter tokens one walk spells a target token with (the paper's
    /// n_max); unset lets walks run to the longest target token.
    #[arg(long, value_name = "N")]
    slrs_lookahead: Option<usize>,
    /// --algo slrs: most drafter positions scored per drafted token; a pair whose worst case
    /// exceeds it is refused before generation (lower --slrs-lookahead instead).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SLRS_BUDGET)]
    slrs_budget: u64,
    /// The text to continue (with --chat: the user's message).
    #[arg(long)]
    prompt: String,
    /// Wrap --prompt in the target's chat template (from the GGUF metadata or
    /// tokenizer_config.json) as one user turn, so an instruction-tuned model answers it.
    #[arg(long)]
    chat: bool,
    /// With --chat: a system message (else the template's default, if it has one).
    #[arg(long, requires = "chat")]
    system: Option<String>,
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
    /// Where drafts are verified: `device` computes the acceptance step where the logits are
    /// (O(γ) numbers back to the host), `host` reads the γ + 1 logit rows back and applies the
    /// rule there, `auto` picks device on a GPU and host on the CPU, where nothing has to move.
    #[arg(long, default_value = "auto", value_parser = parse_verification)]
    verify: Verification,
    /// Which implementation runs the models: `native` (CPU only: packed and quantized weights,
    /// one pass over the weights for a whole draft), `burn` (burn tensors on any device, f32
    /// weights), or `auto` (native on the CPU, burn on a GPU).
    #[arg(long, default_value = "auto", value_parser = parse_engine)]
    engine: Engine,
    /// Kernel threads of the native engine (default: every core).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Matrix kernel of the native engine: `best` (llama.cpp's 8-bit activations for Q4/Q8
    /// weights: `avx512-q8` where AVX-512 VNNI exists, else `avx2-q8`; the two give identical
    /// logits), `avx2` (f32 activations, exact to the file's weights), or `scalar` (portable).
    #[arg(long, default_value = "best", value_parser = parse_kernel)]
    kernel: KernelChoice,
    /// Keep generating past the end-of-sequence token (for benchmarks).
    #[arg(long)]
    ignore_eos: bool,
    /// Print one JSON object (text, tokens, statistics) instead of streaming text.
    #[arg(long)]
    json: bool,
}

/// `--algo`: the names of [`Algo`], and `auto` for [`AlgoRequest::Auto`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum AlgoArg {
    Tli,
    Slem,
    Slrs,
    Rdk,
    Union,
    Auto,
}

impl From<AlgoArg> for AlgoRequest {
    fn from(arg: AlgoArg) -> Self {
        match arg {
            AlgoArg::Tli => AlgoRequest::Fixed(Algo::Tli),
            AlgoArg::Slem => AlgoRequest::Fixed(Algo::Slem),
            AlgoArg::Slrs => AlgoRequest::Fixed(Algo::Slrs),
            AlgoArg::Rdk => AlgoRequest::Fixed(Algo::Rdk),
            AlgoArg::Union => AlgoRequest::Fixed(Algo::Union),
            AlgoArg::Auto => AlgoRequest::Auto,
        }
    }
}

/// `--rdk`: which form of RDK's redistribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RdkArg {
    Exact,
    Taylor,
}

/// `--drafter-context`: [`ContextMapping`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ContextArg {
    Retokenize,
    SharedIds,
}

impl From<ContextArg> for ContextMapping {
    fn from(arg: ContextArg) -> Self {
        match arg {
            ContextArg::Retokenize => ContextMapping::Retokenize,
            ContextArg::SharedIds => ContextMapping::SharedIds,
        }
    }
}

fn parse_verification(name: &str) -> Result<Verification, String> {
    name.parse().map_err(|e: anyspec_models::Error| e.to_string())
}

fn parse_engine(name: &str) -> Result<Engine, String> {
    name.parse().map_err(|e: anyspec_models::Error| e.to_string())
}

/// `--kernel`: `None` for `best`, which lets the engine pick [`Kernel::best`] for the CPU it
/// runs on. (A newtype, because clap reads a bare `Option` field as an optional flag.)
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernelChoice(pub(crate) Option<Kernel>);

pub(crate) fn parse_kernel(name: &str) -> Result<KernelChoice, String> {
    let kernel = match name.to_ascii_lowercase().as_str() {
        "best" => return Ok(KernelChoice(None)),
        "scalar" => Kernel::Scalar,
        "avx2" => Kernel::Avx2,
        "avx2-q8" | "avx2q8" => Kernel::Avx2Q8,
        "avx512-q8" | "avx512q8" => Kernel::Avx512Q8,
        _ => return Err(format!("unknown kernel {name:?}; use best, avx512-q8, avx2-q8, avx2 or scalar")),
    };
    if !kernel.is_supported() {
        return Err(format!("this CPU lacks the instructions of the {name} kernel; use best or scalar"));
    }
    Ok(KernelChoice(Some(kernel)))
}

/// What `--json` prints; field names are stable.
#[derive(Debug, Serialize)]
struct Report {
    text: String,
    tokens: Vec<u32>,
    prompt_tokens: usize,
    stop_reason: StopReason,
    device: &'static str,
    /// `native` or `burn`: the implementation that ran the target.
    engine: &'static str,
    /// The native engine's matrix kernel (`null` on burn).
    kernel: Option<String>,
    /// The native engine's kernel threads (1 on burn).
    threads: usize,
    speculative: bool,
    /// The bridge for a drafter with another tokenizer (`null` for a same-tokenizer drafter).
    algo: Option<Algo>,
    /// Why `--algo auto` chose `algo` (`null` otherwise).
    algo_reason: Option<String>,
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

/// Fewer rejected drafted tokens than this, all rejected, are no evidence of a useless drafter.
pub(crate) const REJECTED_DRAFTS_TO_WARN: u64 = 16;

/// Why a drafter that ran did not help, when it did not: it proposed nothing, or nothing it
/// proposed was accepted. `who` names it ("--drafter PATH", a demo row's method).
pub(crate) fn drafter_warning(who: &str, stats: &anyspec_core::Stats) -> Option<String> {
    if stats.steps > 0 && stats.drafted == 0 {
        Some(format!("{who} proposed no token in {} steps, so it only cost time", stats.steps))
    } else if stats.drafted >= REJECTED_DRAFTS_TO_WARN && stats.accepted == 0 {
        Some(format!(
            "{who}: all {} drafted tokens were rejected, so it only cost time: it does not predict this target",
            stats.drafted
        ))
    } else {
        None
    }
}

/// [`drafter_warning`] for `--drafter`, with what to do about it.
fn drafter_warnings(stats: &anyspec_core::Stats, drafter: &Path) -> Vec<String> {
    let who = format!("--drafter {}", drafter.display());
    let Some(warning) = drafter_warning(&who, stats) else { return Vec::new() };
    let fix = if stats.drafted == 0 {
        "its vocabulary may not cover the target's tokens (a drafter with another tokenizer needs --algo); check \
         the pair with `anyspec vocab stats`, or run without --drafter"
    } else {
        "choose a drafter trained on similar text, or run without --drafter"
    };
    vec![format!("{warning}; {fix}")]
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
    let text = if args.chat {
        target_checkpoint.chat_prompt(args.system.as_deref(), &args.prompt).with_context(|| {
            format!("--chat with --target {} (without --chat the prompt is used as it is)", args.target.display())
        })?
    } else {
        args.prompt.clone()
    };
    let prompt = tokenizer.encode(&text)?;
    let context = target_checkpoint.config().max_position_embeddings;
    if prompt.is_empty() {
        bail!("--prompt encodes to no tokens; give text the tokenizer can encode");
    }
    if prompt.len() >= context {
        bail!(
            "--prompt is {} tokens but the target's context window is {context} tokens ({}), and \
             one position is needed for each new token; shorten the prompt",
            prompt.len(),
            args.target.display()
        );
    }
    let options = LoadOptions::engine(args.engine).with_kernel(args.kernel.0).with_threads(args.threads);
    let load_model = |checkpoint: &Checkpoint, flag: &str| -> anyhow::Result<Llama> {
        checkpoint.load_model_with(&device, &options).with_context(|| format!("{flag} {}", checkpoint.path().display()))
    };
    let mut target = LlamaTarget::new(load_model(&target_checkpoint, "--target")?).with_verification(args.verify);
    let mut choice = None;
    let mut drafter: Option<Box<dyn Drafter>> = match &args.drafter {
        None => None,
        Some(dir) => {
            let checkpoint = open(dir, "--drafter")?;
            let window = checkpoint.config().max_position_embeddings;
            if window < prompt.len() + args.gamma {
                crate::output::warn(format!(
                    "--drafter {}: its context window is {window} positions and the prompt {} tokens: it drafts from \
                     the most recent tokens only, which it sees without what came before",
                    dir.display(),
                    prompt.len()
                ));
            }
            let (target_vocab, drafter_vocab) = vocabularies(&target_checkpoint, &tokenizer, &checkpoint)?;
            match args.algo {
                None => {
                    check_same_tokenizer(&args.target, dir, &target_vocab, &drafter_vocab)?;
                    Some(Box::new(ModelDrafter::new(load_model(&checkpoint, "--drafter")?, target.vocab_size())))
                }
                Some(algo) => {
                    let vocabularies = (&target_vocab, &drafter_vocab);
                    let load = || load_model(&checkpoint, "--drafter");
                    let request = algo.into();
                    let (drafter, chosen) = hetero_drafter(
                        &args,
                        request,
                        vocabularies,
                        &tokenizer,
                        &sampling,
                        &checkpoint,
                        &load,
                        target.vocab_size(),
                    )?;
                    choice = Some(chosen);
                    Some(drafter)
                }
            }
        }
    };
    let auto = args.algo == Some(AlgoArg::Auto);
    if let Some(chosen) = &choice
        && !args.json
        && auto
    {
        note(&format!("--algo auto chose {}: {}", chosen.algo, chosen.reason));
    }
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
        drafter.as_mut().map(|d| d.as_mut() as &mut dyn Drafter),
        &prompt,
        &config,
        &mut rng,
        &mut |token| stream.push(token),
    )
    .map_err(|err| match (&err, &args.drafter) {
        (anyspec_core::Error::Drafter(_), Some(path)) => {
            anyhow::Error::new(err).context(format!("--drafter {}", path.display()))
        }
        _ => anyhow::Error::new(err).context(format!("--target {}", args.target.display())),
    })?;
    let decode_time = started.elapsed();
    if let Some(err) = stream.error.take() {
        return Err(err);
    }
    stream.finish()?;

    let stats = &generation.stats;
    // On stderr, and in the `warnings` array that print_json gives every report.
    for warning in args.drafter.as_deref().map(|path| drafter_warnings(stats, path)).unwrap_or_default() {
        crate::output::warn(warning);
    }
    let report = Report {
        text: tokenizer.decode(&generation.tokens)?,
        tokens: generation.tokens.clone(),
        prompt_tokens: prompt.len(),
        stop_reason: generation.stop_reason,
        device: args.device.name(),
        engine: target.model().engine().name(),
        kernel: target.model().kernel().map(|k| format!("{k:?}").to_ascii_lowercase()),
        threads: target.model().threads(),
        speculative: drafter.is_some(),
        algo: choice.as_ref().map(|c| c.algo),
        algo_reason: choice.filter(|_| auto).map(|c| c.reason),
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

/// The vocabularies of both checkpoints (from `tokenizer.json` or the GGUF metadata); the
/// target's tokenizer is already loaded.
fn vocabularies(
    target: &Checkpoint,
    target_tokenizer: &TextTokenizer,
    drafter: &Checkpoint,
) -> anyhow::Result<(Vocabulary, Vocabulary)> {
    let drafter_tokenizer = drafter
        .tokenizer()
        .with_context(|| format!("--drafter {}: reading its tokenizer", drafter.path().display()))?;
    Ok((vocabulary_of(target, target_tokenizer, "--target")?, vocabulary_of(drafter, &drafter_tokenizer, "--drafter")?))
}

/// A model drafter without `--algo` proposes target ids directly, so both checkpoints must share
/// one tokenizer; compared through the canonical vocabulary fingerprint of anyspec-vocab-map.
fn check_same_tokenizer(target: &Path, drafter: &Path, t: &Vocabulary, d: &Vocabulary) -> anyhow::Result<()> {
    if t.fingerprint() != d.fingerprint() {
        bail!(
            "--drafter {} uses another tokenizer than --target {} (vocabulary fingerprints {} and {}); \
             choose how drafts cross between the vocabularies with --algo tli|slem|rdk|union|auto \
             (auto picks one), or pick a drafter from the target's model family",
            drafter.display(),
            target.display(),
            d.fingerprint().short(),
            t.fingerprint().short()
        );
    }
    Ok(())
}

/// Builds the drafter `--algo` asks for (choosing one for `auto`) through
/// [`anyspec_drafters::hetero::build`], loading the inputs its flags name and refusing every
/// combination that cannot work before any generation starts.
#[allow(clippy::too_many_arguments)]
fn hetero_drafter(
    args: &Args,
    request: AlgoRequest,
    (target_vocab, drafter_vocab): (&Vocabulary, &Vocabulary),
    target_tokenizer: &TextTokenizer,
    sampling: &SamplingConfig,
    checkpoint: &Checkpoint,
    model: &dyn Fn() -> anyhow::Result<Llama>,
    target_vocab_size: usize,
) -> anyhow::Result<(Box<dyn Drafter>, AutoChoice)> {
    let map = match &args.vocab_map {
        Some(path) => VocabMap::load(path, target_vocab, drafter_vocab)
            .with_context(|| format!("--vocab-map {}", path.display()))?,
        None => VocabMap::build(target_vocab, drafter_vocab, MatchMode::Bytes),
    };
    let drafter_tokenizer =
        checkpoint.tokenizer().with_context(|| format!("--drafter {}", checkpoint.dir().display()))?;
    let pair = hetero::Pair {
        target_vocab,
        drafter_vocab,
        target_tokenizer,
        drafter_tokenizer: &drafter_tokenizer,
        map: &map,
        target_rows: target_vocab_size,
    };
    let choice = request.resolve(&pair, sampling.temperature, &args.prompt, args.affinity.is_some())?;
    let chosen = choice.algo;
    if args.affinity.is_some() && chosen != Algo::Rdk {
        bail!("--affinity is only used by --algo rdk (the algorithm is {chosen}); drop it or use --algo rdk");
    }
    if args.shortlist.is_some() && !matches!(chosen, Algo::Tli | Algo::Rdk) {
        bail!("--shortlist prunes the drafter for --algo tli or rdk (the algorithm is {chosen}); drop it");
    }

    let rdk = if chosen == Algo::Rdk { Some(rdk_form(args, target_vocab)?) } else { None };
    let shortlist = match &args.shortlist {
        Some(path) => Some(
            anyspec_affinity::Shortlist::load(path, &drafter_vocab.fingerprint())
                .with_context(|| format!("--shortlist {}", path.display()))?
                .ids()
                .to_vec(),
        ),
        None => None,
    };
    let options = hetero::Options {
        rdk,
        shortlist,
        context: args.drafter_context.into(),
        slrs: SlrsConfig { lookahead: args.slrs_lookahead, budget: args.slrs_budget, ..SlrsConfig::default() },
        ..hetero::Options::default()
    };
    let built = hetero::build(AlgoRequest::Fixed(chosen), &pair, model()?, options).map_err(|err| {
        // The library speaks of the lookahead and the budget; here they are flags.
        let flags = match err {
            anyspec_drafters::Error::SlrsBudget { .. } => {
                " (the lookahead is --slrs-lookahead, the budget --slrs-budget)"
            }
            _ => "",
        };
        anyhow::Error::new(err).context(format!("--algo {chosen}{flags}"))
    })?;
    Ok((built.drafter, choice))
}

fn rdk_form(args: &Args, target_vocab: &Vocabulary) -> anyhow::Result<RdkForm> {
    let Some(path) = &args.affinity else {
        bail!(
            "--algo rdk needs --affinity FILE, a token-affinity matrix over the target's vocabulary \
             (build one with `anyspec affinity build --tokenizer <target>/tokenizer.json --corpus ...`)"
        );
    };
    let affinity = anyspec_affinity::Affinity::load(path, &target_vocab.fingerprint())
        .with_context(|| format!("--affinity {}", path.display()))?;
    let tau = affinity.tau();
    let (matrix, scores, _) = affinity.into_parts();
    Ok(match args.rdk {
        RdkArg::Taylor => RdkForm::Taylor { scores, tau },
        RdkArg::Exact => RdkForm::Exact(matrix),
    })
}

#[allow(clippy::print_stderr)]
fn note(line: &str) {
    eprintln!("{line}");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[allow(clippy::print_stderr)]
fn print_stats(r: &Report) {
    eprintln!();
    eprintln!(
        "{} tokens ({:?}) on {} ({} engine, {} threads) · load {:.0} ms · prefill {} tokens in {:.1} ms · \
         decode {:.1} ms = {:.1} tokens/s",
        r.tokens.len(),
        r.stop_reason,
        r.device,
        r.engine,
        r.threads,
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use anyspec_core::Stats;

    use super::{REJECTED_DRAFTS_TO_WARN, drafter_warnings};

    fn stats(steps: u64, drafted: u64, accepted: u64) -> Stats {
        Stats { steps, drafted, accepted, ..Stats::default() }
    }

    #[test]
    fn a_drafter_that_never_drafts_or_is_never_right_is_warned_about_once() {
        let path = Path::new("d");
        let silent = drafter_warnings(&stats(20, 0, 0), path);
        assert_eq!(silent.len(), 1);
        assert!(silent[0].contains("proposed no token in 20 steps"), "{silent:?}");
        let wrong = drafter_warnings(&stats(20, 60, 0), path);
        assert_eq!(wrong.len(), 1);
        assert!(wrong[0].contains("all 60 drafted tokens were rejected"), "{wrong:?}");
        assert!(silent[0].contains("--algo") && wrong[0].contains("similar text"), "the fix is not named");
        // Helpful drafters, and too few rejections to judge, are not warned about.
        assert!(drafter_warnings(&stats(20, 60, 1), path).is_empty());
        assert!(drafter_warnings(&stats(3, REJECTED_DRAFTS_TO_WARN - 1, 0), path).is_empty());
        assert!(drafter_warnings(&stats(0, 0, 0), path).is_empty());
    }
}
