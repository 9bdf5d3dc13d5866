//! `anyspec vocab`: vocabulary maps between two tokenizers and the statistics of
//! hetero-vocab-sd (Tables 4–6, 8, 9) and DictSpec (fertility).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use anyspec_core::Progress;
use anyspec_core::artifact::ArtifactKind;
use anyspec_vocab_map::stats::{
    CorpusOverlap, DecompositionSummary, DrafterTrie, Overlap, count_decompositions, shortest_tokens,
};
use anyspec_vocab_map::{MatchMode, TokenKind, VocabMap, Vocabulary};
use serde::Serialize;

use crate::output::{print_json, print_text, table};
use crate::output_guard::{Output, check_output};

/// Vocabulary maps and vocabulary statistics for two tokenizers.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// |T|, |D|, |T∩D| and |T∩D|/|T| (paper Tables 4–5); with --corpus, the overlap restricted to
    /// the tokens the corpus uses (Table 6).
    Stats(StatsArgs),
    /// Build the target ↔ drafter id map and write it as an artifact.
    Build(BuildArgs),
    /// Read a map artifact and print its header; with --target and --drafter, check it against them.
    Inspect(InspectArgs),
    /// The share of corpus lines s with decode(encode(s)) ≠ s (paper Table 9).
    Injectivity(CorpusArgs),
    /// Tokens per whitespace word of a corpus (DictSpec Table 3).
    Fertility(CorpusArgs),
    /// Exact counts of the drafter-token sequences that spell each target token (paper Appendix D,
    /// Table 8), and n_max.
    Decompositions(DecompositionsArgs),
    /// Show tokens with their raw string, byte surface and kind.
    Tokens(TokensArgs),
}

#[derive(Debug, clap::Args)]
struct PairArgs {
    /// The target model's tokenizer.json.
    #[arg(long, value_name = "TOKENIZER.JSON")]
    target: PathBuf,
    /// The drafter's tokenizer.json.
    #[arg(long, value_name = "TOKENIZER.JSON")]
    drafter: PathBuf,
    /// How tokens match: `raw` (equal token strings, the paper's definition) or `bytes` (equal
    /// decoded byte surfaces, special tokens excluded: `Ġthe` = `▁the`).
    #[arg(long = "match", value_enum, default_value_t = Mode::Bytes)]
    mode: Mode,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Mode {
    Raw,
    Bytes,
}

impl From<Mode> for MatchMode {
    fn from(mode: Mode) -> MatchMode {
        match mode {
            Mode::Raw => MatchMode::Raw,
            Mode::Bytes => MatchMode::Bytes,
        }
    }
}

#[derive(Debug, clap::Args)]
struct StatsArgs {
    #[command(flatten)]
    pair: PairArgs,
    /// A UTF-8 text file: also report the overlap among the tokens each tokenizer uses on it.
    #[arg(long, value_name = "FILE")]
    corpus: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct BuildArgs {
    #[command(flatten)]
    pair: PairArgs,
    /// Where to write the map (written atomically).
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    /// Replace an existing output file even if it is not a vocabulary map (an input is never replaced).
    #[arg(long)]
    force: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct InspectArgs {
    /// The map file written by `anyspec vocab build`.
    map: PathBuf,
    /// Check the map against this target tokenizer.json (needs --drafter too).
    #[arg(long, value_name = "TOKENIZER.JSON", requires = "drafter")]
    target: Option<PathBuf>,
    /// Check the map against this drafter tokenizer.json (needs --target too).
    #[arg(long, value_name = "TOKENIZER.JSON", requires = "target")]
    drafter: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct CorpusArgs {
    /// One or more tokenizer.json files (repeat the flag).
    #[arg(long = "tokenizer", value_name = "TOKENIZER.JSON", required = true)]
    tokenizers: Vec<PathBuf>,
    /// A UTF-8 text file.
    #[arg(long, value_name = "FILE")]
    corpus: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct DecompositionsArgs {
    /// The tokenizer whose tokens are decomposed.
    #[arg(long, value_name = "TOKENIZER.JSON")]
    target: PathBuf,
    /// The tokenizer whose tokens spell them (default: the target itself).
    #[arg(long, value_name = "TOKENIZER.JSON")]
    drafter: Option<PathBuf>,
    /// Keep only the drafter's N shortest tokens, as in the paper's "Qwen2 against its own
    /// 150,000 shortest tokens"; the summary is then split into target tokens inside and
    /// outside that set when target and drafter are the same tokenizer.
    #[arg(long, value_name = "N")]
    shortest: Option<usize>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct TokensArgs {
    /// The tokenizer.json.
    #[arg(long, value_name = "TOKENIZER.JSON")]
    tokenizer: PathBuf,
    /// Token ids to show (comma-separated).
    #[arg(long, value_delimiter = ',', conflicts_with = "text")]
    ids: Vec<u32>,
    /// Encode this text and show its tokens.
    #[arg(long)]
    text: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args, progress: &dyn Progress) -> anyhow::Result<()> {
    match args.command {
        Command::Stats(args) => stats(args, progress),
        Command::Build(args) => build(args),
        Command::Inspect(args) => inspect(args),
        Command::Injectivity(args) => injectivity(args, progress),
        Command::Fertility(args) => fertility(args, progress),
        Command::Decompositions(args) => decompositions(args, progress),
        Command::Tokens(args) => tokens(args),
    }
}

fn load(flag: &str, path: &Path) -> anyhow::Result<Vocabulary> {
    Vocabulary::from_file(path).with_context(|| format!("--{flag}: cannot use {}", path.display()))
}

fn read_corpus(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("--corpus: cannot read {} as UTF-8 text; pass a plain text file", path.display()))
}

fn percent(ratio: f64) -> String {
    format!("{:.2}%", 100.0 * ratio)
}

/// `anyspec vocab stats --json`.
#[derive(Serialize)]
struct StatsReport {
    target: String,
    drafter: String,
    target_fingerprint: String,
    drafter_fingerprint: String,
    #[serde(flatten)]
    overlap: Overlap,
    #[serde(skip_serializing_if = "Option::is_none")]
    corpus: Option<CorpusOverlap>,
}

fn stats(args: StatsArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let target = load("target", &args.pair.target)?;
    let drafter = load("drafter", &args.pair.drafter)?;
    let map = VocabMap::build(&target, &drafter, args.pair.mode.into());
    let corpus = match &args.corpus {
        Some(path) => {
            let text = read_corpus(path)?;
            Some(anyspec_vocab_map::stats::corpus_overlap(&map, &target, &drafter, &text, progress)?)
        }
        None => None,
    };
    let report = StatsReport {
        target: target.name().to_string(),
        drafter: drafter.name().to_string(),
        target_fingerprint: target.fingerprint().to_string(),
        drafter_fingerprint: drafter.fingerprint().to_string(),
        overlap: Overlap::of(&map),
        corpus,
    };
    if args.json {
        return print_json(&report);
    }
    let o = &report.overlap;
    let mut rows = vec![
        vec!["match mode".into(), o.mode.to_string()],
        vec!["|T| target tokens".into(), o.target_size.to_string()],
        vec!["|D| drafter tokens".into(), o.drafter_size.to_string()],
        vec!["|T∩D|".into(), o.intersection.to_string()],
        vec!["|T∩D| / |T|".into(), percent(o.ratio)],
        vec!["|T∩D| / |T∪D|".into(), percent(o.jaccard)],
        vec!["collisions (target / drafter)".into(), format!("{} / {}", o.target_collisions, o.drafter_collisions)],
        vec!["excluded (target / drafter)".into(), format!("{} / {}", o.target_excluded, o.drafter_excluded)],
    ];
    if let Some(c) = &report.corpus {
        for (side, usage) in [("target", &c.target), ("drafter", &c.drafter)] {
            rows.push(vec![
                format!("corpus: {side} tokens used, shared"),
                format!("{} of {} ({})", usage.distinct_shared, usage.distinct_tokens, percent(usage.distinct_ratio)),
            ]);
            rows.push(vec![
                format!("corpus: {side} occurrences shared"),
                format!("{} of {} ({})", usage.occurrences_shared, usage.occurrences, percent(usage.occurrence_ratio)),
            ]);
        }
    }
    print_text(&table(&["quantity", "value"], &rows))
}

/// `anyspec vocab build --json`.
#[derive(Serialize)]
struct BuildReport {
    out: String,
    target_fingerprint: String,
    drafter_fingerprint: String,
    #[serde(flatten)]
    overlap: Overlap,
    load_seconds: f64,
    build_seconds: f64,
    file_bytes: u64,
}

fn build(args: BuildArgs) -> anyhow::Result<()> {
    let output = Output { flag: "--out", path: &args.out, kind: ArtifactKind::VocabMap, force: args.force };
    check_output(&output, &[("--target", &args.pair.target), ("--drafter", &args.pair.drafter)])?;
    let started = Instant::now();
    let target = load("target", &args.pair.target)?;
    let drafter = load("drafter", &args.pair.drafter)?;
    let loaded = Instant::now();
    let map = VocabMap::build(&target, &drafter, args.pair.mode.into());
    let built = Instant::now();
    map.save(&args.out).with_context(|| format!("--out: cannot write the map to {}", args.out.display()))?;
    let report = BuildReport {
        out: args.out.display().to_string(),
        target_fingerprint: target.fingerprint().to_string(),
        drafter_fingerprint: drafter.fingerprint().to_string(),
        overlap: Overlap::of(&map),
        load_seconds: (loaded - started).as_secs_f64(),
        build_seconds: (built - loaded).as_secs_f64(),
        file_bytes: std::fs::metadata(&args.out).map(|m| m.len()).unwrap_or(0),
    };
    if args.json {
        return print_json(&report);
    }
    let rows = vec![
        vec!["written".into(), report.out.clone()],
        vec!["match mode".into(), report.overlap.mode.to_string()],
        vec!["|T∩D|".into(), report.overlap.intersection.to_string()],
        vec!["|T∩D| / |T|".into(), percent(report.overlap.ratio)],
        vec!["load (both tokenizers)".into(), format!("{:.3} s", report.load_seconds)],
        vec!["build".into(), format!("{:.3} s", report.build_seconds)],
        vec!["file size".into(), format!("{} bytes", report.file_bytes)],
    ];
    print_text(&table(&["quantity", "value"], &rows))
}

/// `anyspec vocab inspect --json`.
#[derive(Serialize)]
struct InspectReport {
    map: String,
    format_version: u32,
    mode: MatchMode,
    target_fingerprint: String,
    drafter_fingerprint: String,
    target_len: usize,
    drafter_len: usize,
    intersection: usize,
    checked_against_tokenizers: bool,
}

fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let map = match (&args.target, &args.drafter) {
        (Some(t), Some(d)) => VocabMap::load(&args.map, &load("target", t)?, &load("drafter", d)?)?,
        _ => VocabMap::load_unchecked(&args.map)?,
    };
    let report = InspectReport {
        map: args.map.display().to_string(),
        format_version: anyspec_vocab_map::artifact::FORMAT_VERSION,
        mode: map.mode(),
        target_fingerprint: map.target().fingerprint.to_string(),
        drafter_fingerprint: map.drafter().fingerprint.to_string(),
        target_len: map.target().len,
        drafter_len: map.drafter().len,
        intersection: map.intersection(),
        checked_against_tokenizers: args.target.is_some(),
    };
    if args.json {
        return print_json(&report);
    }
    let rows = vec![
        vec!["map".into(), report.map.clone()],
        vec!["format version".into(), report.format_version.to_string()],
        vec!["match mode".into(), report.mode.to_string()],
        vec!["target fingerprint".into(), report.target_fingerprint.clone()],
        vec!["drafter fingerprint".into(), report.drafter_fingerprint.clone()],
        vec!["target ids / drafter ids".into(), format!("{} / {}", report.target_len, report.drafter_len)],
        vec!["|T∩D|".into(), report.intersection.to_string()],
        vec![
            "matches the given tokenizers".into(),
            if report.checked_against_tokenizers { "yes" } else { "not checked" }.into(),
        ],
    ];
    print_text(&table(&["field", "value"], &rows))
}

#[derive(Serialize)]
struct Named<T> {
    tokenizer: String,
    #[serde(flatten)]
    value: T,
}

/// Reads the corpus once and applies one corpus statistic to every tokenizer given.
fn per_tokenizer<T, E>(
    args: &CorpusArgs,
    progress: &dyn Progress,
    measure: impl Fn(&Vocabulary, &str, &dyn Progress) -> Result<T, E>,
) -> anyhow::Result<Vec<Named<T>>>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let text = read_corpus(&args.corpus)?;
    let mut results = Vec::new();
    for path in &args.tokenizers {
        let vocab = load("tokenizer", path)?;
        let value = measure(&vocab, &text, progress)?;
        results.push(Named { tokenizer: vocab.name().to_string(), value });
    }
    Ok(results)
}

fn injectivity(args: CorpusArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let results = per_tokenizer(&args, progress, anyspec_vocab_map::stats::injectivity)?;
    if args.json {
        return print_json(&serde_json::json!({ "tokenizers": results }));
    }
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let example = r
                .value
                .examples
                .first()
                .map_or_else(String::new, |m| format!("{:?} → {:?}", clip(&m.original), clip(&m.decoded)));
            vec![
                r.tokenizer.clone(),
                r.value.snippets.to_string(),
                r.value.mismatched.to_string(),
                percent(r.value.share),
                example,
            ]
        })
        .collect();
    print_text(&table(&["tokenizer", "lines", "not round-tripped", "share", "first example"], &rows))
}

fn clip(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX { s.to_string() } else { format!("{}…", s.chars().take(MAX).collect::<String>()) }
}

fn fertility(args: CorpusArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let results = per_tokenizer(&args, progress, anyspec_vocab_map::stats::fertility)?;
    if args.json {
        return print_json(&serde_json::json!({ "tokenizers": results }));
    }
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            vec![
                r.tokenizer.clone(),
                r.value.tokens.to_string(),
                r.value.words.to_string(),
                format!("{:.3}", r.value.fertility),
                format!("{:.2}", r.value.bytes_per_token),
            ]
        })
        .collect();
    print_text(&table(&["tokenizer", "tokens", "words", "tokens/word", "bytes/token"], &rows))
}

/// `anyspec vocab decompositions --json`.
#[derive(Serialize)]
struct DecompositionsReport {
    target: String,
    drafter: String,
    drafter_tokens: usize,
    seconds: f64,
    /// Summaries by target-token subset: `all`, and with --shortest on one tokenizer also
    /// `in_shortest` and `outside_shortest`.
    summaries: Vec<NamedSummary>,
}

#[derive(Serialize)]
struct NamedSummary {
    subset: String,
    #[serde(flatten)]
    summary: DecompositionSummary,
}

fn decompositions(args: DecompositionsArgs, progress: &dyn Progress) -> anyhow::Result<()> {
    let target = load("target", &args.target)?;
    let drafter = match &args.drafter {
        Some(path) => load("drafter", path)?,
        None => target.clone(),
    };
    let same = target.fingerprint() == drafter.fingerprint();
    let keep = args.shortest.map(|n| shortest_tokens(&drafter, n));
    let started = Instant::now();
    let trie = DrafterTrie::build(&drafter, keep.as_deref());
    let found = count_decompositions(&target, &trie, progress);
    let seconds = started.elapsed().as_secs_f64();
    let mut summaries = vec![NamedSummary { subset: "all".into(), summary: found.summary(|_| true) }];
    if let (Some(keep), true) = (&keep, same) {
        let inside = |id: u32| keep.get(id as usize) == Some(&true);
        summaries.push(NamedSummary { subset: "in_shortest".into(), summary: found.summary(inside) });
        summaries.push(NamedSummary { subset: "outside_shortest".into(), summary: found.summary(|id| !inside(id)) });
    }
    let report = DecompositionsReport {
        target: target.name().to_string(),
        drafter: drafter.name().to_string(),
        drafter_tokens: trie.token_count(),
        seconds,
        summaries,
    };
    if args.json {
        return print_json(&report);
    }
    let float = |d: &Option<anyspec_vocab_map::stats::Describe>, f: fn(&anyspec_vocab_map::stats::Describe) -> f64| {
        d.as_ref().map_or_else(
            || "–".to_string(),
            |d| {
                let x = f(d);
                if x.abs() < 1e6 { format!("{x:.2}") } else { format!("{x:.3e}") }
            },
        )
    };
    let rows: Vec<Vec<String>> = report
        .summaries
        .iter()
        .map(|s| {
            let c = &s.summary.count;
            vec![
                s.subset.clone(),
                s.summary.tokens.to_string(),
                s.summary.undecomposable.to_string(),
                float(c, |d| d.mean),
                float(c, |d| d.std),
                float(c, |d| d.min),
                float(c, |d| d.q1),
                float(c, |d| d.median),
                float(c, |d| d.q3),
                s.summary.max_count.clone(),
                s.summary.n_max.to_string(),
            ]
        })
        .collect();
    let mut text = format!(
        "decompositions of {} tokens into {} of {}'s tokens, counted in {:.3} s\n\n",
        target.name(),
        report.drafter_tokens,
        drafter.name(),
        report.seconds
    );
    text.push_str(&table(
        &["subset", "tokens", "undecomposable", "mean", "std", "min", "25%", "50%", "75%", "max (exact)", "n_max"],
        &rows,
    ));
    print_text(&text)
}

/// One row of `anyspec vocab tokens --json`.
#[derive(Serialize)]
struct TokenRow {
    id: u32,
    raw: String,
    surface: String,
    surface_bytes: Vec<u8>,
    kind: TokenKind,
    byte_fallback: bool,
}

fn tokens(args: TokensArgs) -> anyhow::Result<()> {
    let vocab = load("tokenizer", &args.tokenizer)?;
    let ids: Vec<u32> = match &args.text {
        Some(text) => vocab
            .tokenizer()
            .encode(text.as_str(), false)
            .map_err(|err| anyhow::anyhow!("--text: the tokenizer cannot encode it: {err}"))?
            .get_ids()
            .to_vec(),
        None if args.ids.is_empty() => anyhow::bail!("pass --ids 1,2,3 or --text \"some text\" to choose the tokens"),
        None => args.ids.clone(),
    };
    let mut rows = Vec::new();
    for id in ids {
        let token = vocab
            .token(id)
            .ok_or_else(|| anyhow::anyhow!("--ids: {id} is not a token of {} ({} ids)", vocab.name(), vocab.len()))?;
        let bytes = vocab.surface(id).unwrap_or_default().to_vec();
        rows.push(TokenRow {
            id,
            raw: token.raw.clone(),
            surface: String::from_utf8_lossy(&bytes).into_owned(),
            surface_bytes: bytes,
            kind: token.kind,
            byte_fallback: vocab.is_byte_fallback(id),
        });
    }
    if args.json {
        return print_json(&serde_json::json!({ "tokens": rows }));
    }
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let kind = match r.kind {
                TokenKind::Normal if r.byte_fallback => "byte",
                TokenKind::Normal => "normal",
                TokenKind::Added => "added",
                TokenKind::Special => "special",
            };
            vec![r.id.to_string(), format!("{:?}", r.raw), format!("{:?}", r.surface), kind.into()]
        })
        .collect();
    let mut text = format!("{} ({} style)\n\n", vocab.name(), vocab.style().name());
    text.push_str(&table(&["id", "raw", "surface", "kind"], &table_rows));
    print_text(&text)
}
