//! `anyspec dynaspec bench`: every head policy of the self-speculative drafter on the same
//! prompts, greedy, so that every row must produce the target's own output.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use anyspec_core::{GenerationConfig, Progress, ProgressUnit, SamplingConfig, generate};
use anyspec_dict_builder::CorpusOptions;
use anyspec_dynaspec::{
    ClusterBudget, DynamicShortlister, EagleFile, FrequencyShortlister, HeadPolicy, RouterFile, ShortlistDrafter,
    TokenBudget, model_fingerprint,
};
use anyspec_models::{
    Checkpoint, DeviceChoice, FeatureModel, FeatureTap, Llama, LlamaTarget, LoadOptions, PrunedHead, WeightFormat,
};
use rand::SeedableRng;
use serde::Serialize;

use crate::output::{print_json, print_text};

#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// The model (GGUF file or checkpoint directory) the router was built for.
    #[arg(long, value_name = "M.gguf|DIR")]
    model: PathBuf,
    /// The router (`anyspec dynaspec build`).
    #[arg(long)]
    router: PathBuf,
    /// Prompts: the demo's list (assets/demo/specbench-prompts.json, disjoint from the text the
    /// router of the demo is built from) or Spec-Bench's question.jsonl (first turns); the chat
    /// template is applied.
    #[arg(long)]
    prompts: PathBuf,
    /// Prompts per Spec-Bench category.
    #[arg(long, default_value_t = 2)]
    per_category: usize,
    /// Corpus whose token frequencies rank the FR-Spec and PA-FR lists (the router's corpus).
    #[arg(long, num_args = 1.., required = true)]
    corpus: Vec<PathBuf>,
    /// FR-Spec sizes (tokens).
    #[arg(long, value_delimiter = ',', default_value = "4096,8192,16384")]
    fr_sizes: Vec<usize>,
    /// PA-FR's k_max (App. A.3).
    #[arg(long, default_value_t = 16384)]
    pa_fr_max: usize,
    /// DynaSpec-F's clusters per position.
    #[arg(long, default_value_t = 32)]
    fixed_k: usize,
    /// DynaSpec-PA's k0 and k1 (Eq. 3).
    #[arg(long, value_delimiter = ',', default_value = "64,32")]
    pa_k: Vec<usize>,
    /// Draft length γ.
    #[arg(long, default_value_t = 4)]
    gamma: usize,
    /// New tokens per prompt.
    #[arg(long, default_value_t = 64)]
    max_new_tokens: usize,
    /// Draft with this EAGLE feature drafter (`anyspec dynaspec eagle`) instead of the model's
    /// first layers; the router must then read the model's own features (built with
    /// `--drafter-layers` = all of the model's layers).
    #[arg(long, value_name = "FILE")]
    eagle: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Milliseconds of one EAGLE drafter position without its head (the `fc` and its layer), the
/// mean of 48 calls after the pairs of `context`.
fn time_feature_forward(feature: &FeatureModel, context: &[u32]) -> anyhow::Result<f64> {
    let d = feature.hidden_size();
    let features = vec![0.5f32; context.len() * d];
    let mut cache = feature.new_cache();
    feature.forward(context, &features, &mut cache, 1)?;
    let started = Instant::now();
    let n = 48;
    for i in 0..n {
        feature.forward(&[context[i % context.len()]], &features[..d], &mut cache, 1)?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e3 / n as f64)
}

#[derive(Serialize)]
struct Row {
    policy: String,
    tokens_per_step: f64,
    tokens_per_second: f64,
    mean_shortlist: f64,
    vocab_share: f64,
    drafter_ms_per_position: f64,
    router_ms_per_position: f64,
    /// A drafter position at this row's mean shortlist size, ms: a 1-token-head position plus
    /// `head_ms_at_mean`, the head's product alone as this row's drafter computes it (medians
    /// of rounds interleaved across rows).
    position_ms_at_mean: f64,
    head_ms_at_mean: f64,
    recovered: f64,
    speed_vs_full: f64,
    same_output_as_full: bool,
}

#[derive(Serialize)]
struct Bench {
    prompts: usize,
    new_tokens: usize,
    gamma: usize,
    /// "first N layers" or "EAGLE (…)".
    drafter: String,
    drafter_layers: usize,
    vocab_size: usize,
    /// Drafter forward of one position with a 1-token head, and with the full head (ms).
    layers_ms: f64,
    full_head_ms: f64,
    rows: Vec<Row>,
}

fn spec_bench_prompts(path: &Path, per_category: usize) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("--prompts {}", path.display()))?;
    let items: Vec<(String, String)> = if text.trim_start().starts_with('[') {
        // The demo's prompt list: [{"category": …, "prompt": …}, …].
        let v: Vec<serde_json::Value> =
            serde_json::from_str(&text).with_context(|| format!("--prompts {}: not a JSON array", path.display()))?;
        v.iter()
            .map(|p| match (p["category"].as_str(), p["prompt"].as_str()) {
                (Some(c), Some(t)) => Ok((c.to_string(), t.to_string())),
                _ => bail!("--prompts {}: an entry without \"category\" and \"prompt\" strings", path.display()),
            })
            .collect::<anyhow::Result<_>>()?
    } else {
        // Spec-Bench's question.jsonl: the first turn of each question.
        let mut items = Vec::new();
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let v: serde_json::Value =
                serde_json::from_str(line).with_context(|| format!("--prompts {} line {}", path.display(), i + 1))?;
            let category = v["category"].as_str().unwrap_or("none").to_string();
            let Some(turn) = v["turns"].get(0).and_then(|t| t.as_str()) else {
                bail!(
                    "--prompts {} line {}: no \"turns\" array of strings (is it Spec-Bench's question.jsonl?)",
                    path.display(),
                    i + 1
                );
            };
            items.push((category, turn.to_string()));
        }
        items
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for (category, prompt) in items {
        if out.iter().filter(|(c, _)| *c == category).count() < per_category {
            out.push((category, prompt));
        }
    }
    if out.is_empty() {
        bail!("--prompts {} holds no prompt", path.display());
    }
    Ok(out)
}

/// Milliseconds of the head's product alone on one hidden row (`head`: pruned, or the whole
/// head), the mean of 48 calls.
fn time_head(model: &Llama, head: Option<&PrunedHead>, hidden: &[f32]) -> anyhow::Result<f64> {
    model.logits_of_hidden(hidden, head)?;
    let started = Instant::now();
    let n = 48;
    for _ in 0..n {
        std::hint::black_box(model.logits_of_hidden(hidden, head)?);
    }
    Ok(started.elapsed().as_secs_f64() * 1e3 / n as f64)
}

fn time_forward(model: &Llama, head: Option<&PrunedHead>, context: &[u32]) -> anyhow::Result<f64> {
    let mut cache = model.new_cache();
    model.forward_with_hidden(context, &mut cache, 1, head)?;
    let started = Instant::now();
    let n = 48;
    for i in 0..n {
        model.forward_with_hidden(&[context[i % context.len()]], &mut cache, 1, head)?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e3 / n as f64)
}

/// How a row's drafter evaluates its head.
#[derive(Clone, Copy, PartialEq)]
enum HeadKind {
    Full,
    /// A prefix of the frequency ranking.
    Ranked,
    /// A union of routed clusters.
    Clusters,
}

/// For each row, a head of its kind at its mean shortlist size, as its drafter computes it
/// (`None`: the whole head): the first ranked tokens in blocks of sixteen of a head copy
/// ordered by rank, or clusters (in a fixed order spread over the partition, since which
/// clusters are routed varies) of a head copy ordered by cluster until the size is reached.
fn heads_at_mean_size(
    drafter: &Llama,
    rows: &[Row],
    kinds: &[HeadKind],
    ranking: &[u32],
    clusters: &anyspec_dynaspec::Clusters,
) -> anyhow::Result<Vec<Option<PrunedHead>>> {
    let vocab = drafter.config().vocab_size;
    let ranked = drafter.head_blocks(ranking.chunks(16).map(<[u32]>::to_vec).collect())?;
    let by_cluster = drafter.head_blocks(clusters.all_members().to_vec())?;
    let mut spread: Vec<u32> = (0..clusters.len() as u32).collect();
    spread.sort_by_key(|&m| (u64::from(m) * 2_654_435_761) % (1 << 32));
    rows.iter()
        .zip(kinds)
        .map(|(row, kind)| {
            let size = (row.mean_shortlist.round() as usize).clamp(1, vocab);
            Ok(match kind {
                HeadKind::Full => None,
                HeadKind::Ranked => {
                    let blocks: Vec<u32> = (0..size.div_ceil(16) as u32).collect();
                    Some(drafter.pruned_head_blocks(&ranked, &blocks, &[])?)
                }
                HeadKind::Clusters => {
                    let mut total = 0;
                    let picked: Vec<u32> = spread
                        .iter()
                        .copied()
                        .take_while(|&m| {
                            let take = total < size;
                            total += clusters.members(m as usize).len();
                            take
                        })
                        .collect();
                    Some(drafter.pruned_head_blocks(&by_cluster, &picked, &[])?)
                }
            })
        })
        .collect()
}

pub(crate) fn run(args: BenchArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let checkpoint = Checkpoint::open(&args.model).with_context(|| format!("--model {}", args.model.display()))?;
    let tokenizer = checkpoint.tokenizer()?;
    let device = DeviceChoice::Cpu.device()?;
    let model = checkpoint.load_model_with(&device, &LoadOptions::default())?;
    let c = model.config().clone();
    let fingerprint = model_fingerprint(c.vocab_size, c.hidden_size, &model.lm_head_rows()?);
    let file = RouterFile::load(&args.router, &fingerprint)?;
    let drafter = model.first_layers(file.info.drafter_layers)?;
    let eos = c.eos_token_ids.clone();
    let eagle = match &args.eagle {
        Some(path) => {
            if file.info.drafter_layers != c.num_layers {
                bail!(
                    "--router reads the hidden state of the first {} layers, but the EAGLE drafter's is the model's \
                     own (all {} layers); build the router with --drafter-layers {}",
                    file.info.drafter_layers,
                    c.num_layers,
                    c.num_layers
                );
            }
            let f = EagleFile::load(path, &fingerprint).with_context(|| format!("--eagle {}", path.display()))?;
            let feature = model.feature_model(&f.tensors, f.info.layers, Some(WeightFormat::Q8_0))?;
            Some((feature.with_attention_window(f.info.window), f.info))
        }
        None => None,
    };

    let mut counts = vec![0u64; c.vocab_size];
    anyspec_dict_builder::for_each_chunk(&args.corpus, &CorpusOptions::default(), progress, |chunk| {
        for t in tokenizer.encode(&chunk).map_err(|e| anyspec_dict_builder::Error::Tokenizer {
            text: chunk.chars().take(40).collect(),
            message: e.to_string(),
        })? {
            counts[t as usize] += 1;
        }
        Ok(())
    })?;
    let mut ranking: Vec<u32> = (0..c.vocab_size as u32).collect();
    ranking.sort_by(|a, b| counts[*b as usize].cmp(&counts[*a as usize]).then(a.cmp(b)));

    let [k0, k1] = args.pa_k[..] else { bail!("--pa-k takes two numbers, k0,k1 (Eq. 3), got {:?}", args.pa_k) };
    let dynamic = |budget| -> anyhow::Result<HeadPolicy> {
        Ok(HeadPolicy::Dynamic(Box::new(DynamicShortlister::new(
            file.clusters.clone(),
            file.router.clone(),
            budget,
            &eos,
        )?)))
    };
    let frequency = |budget| -> anyhow::Result<HeadPolicy> {
        Ok(HeadPolicy::Frequency(FrequencyShortlister::new(&ranking, c.vocab_size, budget, &eos)?))
    };
    // Each row's head is timed below as the drafter computes it: whole, a prefix of the
    // frequency ranking (whole blocks of a copy ordered by rank), or routed clusters (whole
    // blocks of a copy ordered by cluster).
    let mut policies: Vec<(String, HeadPolicy)> = vec![("full head".into(), HeadPolicy::Full)];
    for &k in &args.fr_sizes {
        policies.push((format!("FR-{k}"), frequency(TokenBudget::Fixed { k })?));
    }
    policies.push((
        format!("PA-FR (k_max {})", args.pa_fr_max),
        frequency(TokenBudget::PositionAware { k_max: args.pa_fr_max })?,
    ));
    policies.push((format!("DynaSpec-F (k {})", args.fixed_k), dynamic(ClusterBudget::Fixed { k: args.fixed_k })?));
    policies.push((format!("DynaSpec-PA (k0 {k0}, k1 {k1})"), dynamic(ClusterBudget::PositionAware { k0, k1 })?));

    let prompts = spec_bench_prompts(&args.prompts, args.per_category)?;
    let encoded: Vec<Vec<u32>> = prompts
        .iter()
        .map(|(_, p)| -> anyhow::Result<Vec<u32>> { Ok(tokenizer.encode(&checkpoint.chat_prompt(None, p)?)?) })
        .collect::<anyhow::Result<_>>()?;
    let context = &encoded[0];
    let one_token = drafter.pruned_head(&[0])?;
    let (layers_ms, full_head_ms) = match &eagle {
        None => (time_forward(&drafter, Some(&one_token), context)?, time_forward(&drafter, None, context)?),
        Some((feature, _)) => {
            let layer = time_feature_forward(feature, context)?;
            let hidden = vec![0.5f32; c.hidden_size];
            (layer, layer + time_head(&model, None, &hidden)?)
        }
    };

    let config = GenerationConfig {
        gamma: args.gamma,
        max_new_tokens: args.max_new_tokens,
        sampling: SamplingConfig::greedy(),
        stop_tokens: eos.clone(),
        ..GenerationConfig::default()
    };
    let mut rows: Vec<Row> = Vec::new();
    progress.start("generating", Some((policies.len() * encoded.len()) as u64), ProgressUnit::Items);
    let mut full = (0.0, 0.0);
    let kinds: Vec<HeadKind> = policies
        .iter()
        .map(|(_, p)| match p {
            HeadPolicy::Full => HeadKind::Full,
            HeadPolicy::Frequency(_) => HeadKind::Ranked,
            HeadPolicy::Dynamic(_) => HeadKind::Clusters,
        })
        .collect();
    // Prompt by prompt, every policy in turn (the full head first, whose output is the
    // reference): a machine whose speed drifts during the run then slows every row alike,
    // where policy after policy would hand the drift to whichever rows ran in the slow stretch.
    struct Run {
        name: String,
        drafter: ShortlistDrafter,
        tap: FeatureTap,
        steps: u64,
        generated: u64,
        wall: Duration,
        same: bool,
    }
    let mut runs = Vec::with_capacity(policies.len());
    for (name, policy) in policies {
        let tap = FeatureTap::new();
        let drafter = match &eagle {
            Some((feature, _)) => ShortlistDrafter::features(feature.clone(), tap.clone(), policy, None)?,
            None => ShortlistDrafter::new(drafter.clone(), policy, c.vocab_size)?,
        };
        runs.push(Run { name, drafter, tap, steps: 0, generated: 0, wall: Duration::ZERO, same: true });
    }
    for prompt in &encoded {
        let mut reference: Option<Vec<u32>> = None;
        for run in &mut runs {
            let mut target = LlamaTarget::new(model.clone());
            if eagle.is_some() {
                target = target.with_feature_tap(run.tap.clone());
            }
            let mut rng = rand::rngs::StdRng::seed_from_u64(0);
            let started = Instant::now();
            let out = generate(&mut target, Some(&mut run.drafter), prompt, &config, &mut rng, &mut |_| {
                std::ops::ControlFlow::Continue(())
            })?;
            run.wall += started.elapsed();
            run.steps += out.stats.steps;
            run.generated += out.stats.generated;
            match &reference {
                Some(r) => run.same &= *r == out.tokens,
                None => reference = Some(out.tokens),
            }
            progress.advance(1);
        }
    }
    for run in runs {
        let s = run.drafter.stats();
        let tokens_per_step = run.generated as f64 / run.steps.max(1) as f64;
        let tokens_per_second = run.generated as f64 / run.wall.as_secs_f64().max(1e-9);
        if rows.is_empty() {
            full = (tokens_per_step, tokens_per_second);
        }
        rows.push(Row {
            policy: run.name,
            tokens_per_step,
            tokens_per_second,
            mean_shortlist: s.mean_shortlist(),
            vocab_share: s.mean_shortlist() / c.vocab_size as f64,
            drafter_ms_per_position: s.forward_time.as_secs_f64() * 1e3 / s.positions.max(1) as f64,
            router_ms_per_position: s.router_time.as_secs_f64() * 1e3 / s.positions.max(1) as f64,
            position_ms_at_mean: 0.0,
            head_ms_at_mean: 0.0,
            recovered: tokens_per_step / full.0,
            speed_vs_full: tokens_per_second / full.1,
            same_output_as_full: run.same,
        });
    }
    progress.finish();
    // The head's cost at each row's mean shortlist size, robust to a machine whose load drifts:
    // every round times every size once (a 1-token head first), the median of the rounds is kept.
    // The head's product alone (on the drafter's hidden state after the context): the layers'
    // time moves more with other load than a small head costs.
    let heads = heads_at_mean_size(&drafter, &rows, &kinds, &ranking, &file.clusters)?;
    let hidden = drafter.forward_with_hidden(context, &mut drafter.new_cache(), 1, Some(&one_token))?.hidden.concat();
    let rounds = 7;
    let mut samples = vec![Vec::with_capacity(rounds); heads.len() + 1];
    for _ in 0..rounds {
        samples[0].push(match &eagle {
            Some((feature, _)) => time_feature_forward(feature, context)?,
            None => time_forward(&drafter, Some(&one_token), context)?,
        });
        for (i, head) in heads.iter().enumerate() {
            samples[i + 1].push(time_head(&drafter, head.as_ref(), &hidden)?);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let one = median(&mut samples[0]);
    for (row, sample) in rows.iter_mut().zip(samples.iter_mut().skip(1)) {
        row.head_ms_at_mean = median(sample);
        row.position_ms_at_mean = one + row.head_ms_at_mean;
    }
    let bench = Bench {
        prompts: encoded.len(),
        new_tokens: args.max_new_tokens,
        gamma: args.gamma,
        drafter: match &eagle {
            Some((feature, info)) => format!(
                "EAGLE, {} layer over the model's features ({:.1} MB as q8_0, held-out top-1 {:.3})",
                info.layers,
                feature.weight_bytes() as f64 / 1e6,
                info.valid_accuracy.last().copied().unwrap_or(f32::NAN)
            ),
            None => crate::output::first_layers(file.info.drafter_layers),
        },
        drafter_layers: file.info.drafter_layers,
        vocab_size: c.vocab_size,
        layers_ms,
        full_head_ms,
        rows,
    };
    if args.json {
        return print_json(&bench);
    }
    let mut text = format!(
        "{} prompts × {} new tokens, greedy, γ = {}, drafter = {}; one drafter position: {:.2} ms with a \
         1-token head, {:.2} ms with the full {}-token head\n{:<28} {:>8} {:>8} {:>9} {:>7} {:>9} {:>9} {:>9} {:>8} {}",
        bench.prompts,
        bench.new_tokens,
        bench.gamma,
        bench.drafter,
        layers_ms,
        full_head_ms,
        c.vocab_size,
        "policy",
        "tok/step",
        "tok/s",
        "shortlist",
        "vocab%",
        "draft ms",
        "router ms",
        "recovered",
        "speed",
        "same output"
    );
    text.push_str(&format!(
        "\n(head ms at the mean shortlist, median of interleaved rounds: {})",
        bench.rows.iter().map(|r| format!("{} {:.3}", r.policy, r.head_ms_at_mean)).collect::<Vec<_>>().join("; ")
    ));
    for r in &bench.rows {
        text.push_str(&format!(
            "\n{:<28} {:>8.3} {:>8.2} {:>9.0} {:>6.1}% {:>9.3} {:>9.3} {:>8.1}% {:>7.3}× {}",
            r.policy,
            r.tokens_per_step,
            r.tokens_per_second,
            r.mean_shortlist,
            100.0 * r.vocab_share,
            r.drafter_ms_per_position,
            r.router_ms_per_position,
            100.0 * r.recovered,
            r.speed_vs_full,
            if r.same_output_as_full { "yes" } else { "NO" }
        ));
    }
    print_text(&text)
}
