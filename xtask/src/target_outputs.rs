//! `cargo xtask target-outputs`: SmolLM2-135M-Instruct's own greedy answers to chat prompts
//! that the demo does not use, gzipped into `assets/demo/target-outputs.txt.gz`: the text the
//! demo's DictSpec dictionary is counted from (issue 12: "built with SmolLM2's tokenizer, from
//! permissively licensed text or from the target's own outputs").
//!
//! Why the target's outputs: a dictionary proposes the continuations it has seen, and what the
//! target will write next is best predicted by what it wrote before (its phrasing, its list and
//! answer formats), not by nineteenth-century novels. The prompts cover the demo's category
//! groups and are disjoint from its prompts by construction, from the sources and in the
//! wording of `xtask/python/make_demo_prompts.py`: MT-Bench questions other than the demo's
//! (Apache-2.0); GSM8K *train* questions (MIT; the demo's math prompts are GSM8K test items);
//! Spec-Bench's Natural Questions and RAG items after the two of each the demo takes (CC BY-SA
//! 3.0); FLORES-200 dev German sentences other than the demo's (CC BY-SA 4.0); WikiText-2
//! articles other than the demo's two, to summarize and (their titles) as essay topics (CC BY-SA
//! 3.0); Vicuna-Bench questions (Apache-2.0); HumanEval problems to complete (MIT); Gutenberg
//! passages to summarize (public domain). SmolLM2 is Apache-2.0.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use anyspec_models::{Checkpoint, DeviceChoice, Engine, LoadOptions};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The shared data directory (corpora/prompts-mtbench and corpora/gsm8k).
    #[arg(long, default_value = "../shared")]
    data: PathBuf,
    /// The demo's prompts, which are left out (assets/demo/specbench-prompts.json).
    #[arg(long, default_value = "assets/demo/specbench-prompts.json")]
    demo_prompts: PathBuf,
    /// Where the gzipped answers go (one answer per paragraph).
    #[arg(long, default_value = "assets/demo/target-outputs.txt.gz")]
    out: PathBuf,
    /// Where the gzipped (prompt, answer) pairs go: one JSON object per line with the fields
    /// `prompt` (the user turn, before the chat template) and `answer`. `anyspec dynaspec eagle
    /// --chats` trains the EAGLE drafter on them with the prompt in the target's context, as
    /// the demo drafts.
    #[arg(long, default_value = "assets/demo/target-chats.jsonl.gz")]
    pairs_out: PathBuf,
    /// The GGUF model (default: SmolLM2-135M-Instruct Q4_1 from the model cache).
    #[arg(long)]
    model: Option<PathBuf>,
    /// GSM8K train questions answered.
    #[arg(long, default_value_t = 500)]
    gsm8k: usize,
    /// HumanEval problems to complete (MIT), at most.
    #[arg(long, default_value_t = 131)]
    humaneval: usize,
    /// Passages of the Gutenberg corpus to summarize (public domain; never from *Pride and
    /// Prejudice*, which the tiny demo holds out), at most.
    #[arg(long, default_value_t = 80)]
    gutenberg: usize,
    /// Prompts of each other kind at most: Spec-Bench QA, Spec-Bench RAG, FLORES-200 German →
    /// English, WikiText-2 summaries, WikiText-2 essay topics.
    #[arg(long, default_value_t = 80)]
    per_kind: usize,
    /// New tokens per answer at most (an answer also ends at the end-of-sequence token).
    #[arg(long, default_value_t = 192)]
    max_tokens: usize,
    /// Kernel threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

/// One JSON line of MT-Bench or Vicuna-Bench (`turns`), GSM8K (`question`) or HumanEval
/// (`prompt`).
#[derive(serde::Deserialize)]
struct Line {
    #[serde(default)]
    category: String,
    #[serde(default)]
    turns: Vec<String>,
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
}

#[derive(serde::Deserialize)]
struct DemoPrompt {
    prompt: String,
}

fn read_lines(path: &Path) -> anyhow::Result<Vec<Line>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{} line {}", path.display(), i + 1)))
        .collect()
}

/// The prompts: every MT-Bench and Vicuna-Bench first turn that is not a demo prompt, GSM8K
/// train questions, HumanEval problems, Spec-Bench QA and RAG items the demo does not take,
/// FLORES-200 German, WikiText-2 articles to summarize and their titles as essay topics, and
/// Gutenberg passages to summarize.
fn prompts(args: &Args) -> anyhow::Result<Vec<String>> {
    let demo: Vec<DemoPrompt> = serde_json::from_slice(
        &std::fs::read(&args.demo_prompts).with_context(|| format!("reading {}", args.demo_prompts.display()))?,
    )
    .with_context(|| format!("parsing {}", args.demo_prompts.display()))?;
    let corpora = args.data.join("corpora");
    let mut out: Vec<String> = Vec::new();
    for chat in ["prompts-mtbench/question.jsonl", "prompts-vicunabench/question.jsonl"] {
        out.extend(
            read_lines(&corpora.join(chat))?
                .into_iter()
                .filter_map(|l| l.turns.into_iter().next())
                .filter(|q| !demo.iter().any(|d| d.prompt.contains(q.as_str()) || q.contains(d.prompt.as_str()))),
        );
    }
    let chats = out.len();
    out.extend(read_lines(&corpora.join("gsm8k/train.jsonl"))?.into_iter().filter_map(|l| l.question).take(args.gsm8k));
    if out.len() == chats {
        bail!("no GSM8K questions in {}", corpora.join("gsm8k/train.jsonl").display());
    }
    out.extend(
        read_lines(&corpora.join("code-humaneval/HumanEval_shared.jsonl"))?
            .into_iter()
            .filter_map(|l| l.prompt)
            .take(args.humaneval)
            .map(|code| format!("Complete the following Python function:\n\n```python\n{}\n```", code.trim_end())),
    );
    // Spec-Bench QA and RAG: the demo takes the first two of each category.
    let specbench = read_lines(&corpora.join("prompts-specbench/question.jsonl"))?;
    for category in ["qa", "rag"] {
        let items = specbench.iter().filter(|l| l.category == category).skip(2).take(args.per_kind);
        out.extend(items.filter_map(|l| l.turns.first().cloned()));
    }
    // FLORES-200 dev German, three sentences per prompt; the demo starts at lines 0 and 10.
    let german_path = corpora.join("flores200-dev/deu_Latn.dev");
    let german: Vec<String> = std::fs::read_to_string(&german_path)
        .with_context(|| format!("reading {}", german_path.display()))?
        .lines()
        .map(str::to_string)
        .collect();
    out.extend(
        (20..german.len().saturating_sub(3))
            .step_by(10)
            .take(args.per_kind)
            .map(|start| format!("Translate German to English: {}", german[start..start + 3].join(" "))),
    );
    // WikiText-2 articles' openings; the demo summarizes articles 1 and 3.
    let wiki_path = corpora.join("en-wikitext2/wikitext2_raw_test_part.txt");
    let wiki = std::fs::read_to_string(&wiki_path).with_context(|| format!("reading {}", wiki_path.display()))?;
    let articles = wikitext_articles(&wiki);
    let others: Vec<&(String, String)> =
        articles.iter().enumerate().filter(|(i, _)| *i != 1 && *i != 3).map(|(_, article)| article).collect();
    out.extend(
        others
            .iter()
            .map(|(_, body)| body)
            .filter(|body| body.len() > 400)
            .take(args.per_kind)
            .map(|body| format!("Summarize the following article:\n\n{}", opening(body))),
    );
    // The same articles' titles as essay topics: open-ended prose, as the MT-Bench writing
    // and humanities questions ask for.
    out.extend(
        others
            .iter()
            .map(|(title, _)| title)
            .filter(|title| !title.is_empty())
            .take(args.per_kind)
            .map(|title| format!("Write a short essay about {title}.")),
    );
    out.extend(
        gutenberg_passages(&corpora, args.gutenberg)?
            .into_iter()
            .map(|passage| format!("Summarize the following passage:\n\n{passage}")),
    );
    Ok(out)
}

/// `count` passages of 600–1,800 bytes (whole paragraphs) spread evenly over the Gutenberg
/// corpus, none from *Pride and Prejudice* (pg1342, held out for the tiny demo's prompts).
fn gutenberg_passages(corpora: &Path, count: usize) -> anyhow::Result<Vec<String>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let dir = corpora.join("en-gutenberg");
    let text = std::fs::read_to_string(dir.join("gutenberg_en.txt"))
        .with_context(|| format!("reading {}", dir.join("gutenberg_en.txt").display()))?;
    let index = std::fs::read_to_string(dir.join("gutenberg_en.index.tsv"))
        .with_context(|| format!("reading {}", dir.join("gutenberg_en.index.tsv").display()))?;
    // The held-out book's byte range.
    let held_out = index.lines().find(|l| l.starts_with("pg1342\t")).and_then(|l| {
        let fields: Vec<&str> = l.split('\t').collect();
        Some((fields.get(3)?.parse::<usize>().ok()?, fields.get(4)?.parse::<usize>().ok()?))
    });
    let mut offset = 0;
    let mut paragraphs = Vec::new();
    for paragraph in text.split("\n\n") {
        let start = offset;
        offset += paragraph.len() + 2;
        if held_out.is_some_and(|(from, len)| start >= from && start < from + len) {
            continue;
        }
        let joined = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
        if (600..=1800).contains(&joined.len()) {
            paragraphs.push(joined);
        }
    }
    let step = (paragraphs.len() / count).max(1);
    Ok(paragraphs.into_iter().step_by(step).take(count).collect())
}

/// The titles and bodies of WikiText's top-level articles (` = Title = ` headings), WikiText's
/// tokenization of hyphens and number separators undone, as make_demo_prompts.py does.
fn wikitext_articles(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut articles = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with(" = ") && !line.starts_with(" = = ") {
            let mut body: Vec<&str> = Vec::new();
            for follow in &lines[i + 1..] {
                if follow.starts_with(" = ") {
                    if !body.is_empty() {
                        break;
                    }
                    continue;
                }
                if !follow.trim().is_empty() {
                    body.push(follow.trim());
                }
            }
            let mut joined = body.join(" ");
            let mut title = line.trim().trim_matches('=').trim().to_string();
            for (marked, plain) in [(" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", ".")] {
                joined = joined.replace(marked, plain);
                title = title.replace(marked, plain);
            }
            articles.push((title, joined));
        }
    }
    articles
}

/// The first 1,800 bytes of `body`, cut after its last full sentence.
fn opening(body: &str) -> String {
    let mut end = body.len().min(1800);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    match body[..end].rfind(". ") {
        Some(cut) => body[..=cut].to_string(),
        None => body[..end].to_string(),
    }
}

/// Progress goes to stderr.
#[allow(clippy::print_stderr)]
pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let model_path = crate::fetch_models::smollm2_or(args.model.as_deref())?;
    let prompts = prompts(args)?;
    eprintln!("{} prompts, at most {} new tokens each", prompts.len(), args.max_tokens);
    let checkpoint = Checkpoint::open(&model_path).with_context(|| format!("--model {}", model_path.display()))?;
    let tokenizer = checkpoint.tokenizer()?;
    let eos = checkpoint.config().eos_token_ids.clone();
    let device = DeviceChoice::Cpu.device()?;
    let options = LoadOptions::engine(Engine::Native).with_threads(Some(args.threads));
    let model = checkpoint.load_model_with(&device, &options)?;
    let started = Instant::now();
    let (mut answers, mut generated) = (Vec::with_capacity(prompts.len()), 0usize);
    for (i, prompt) in prompts.iter().enumerate() {
        let ids = tokenizer.encode(&checkpoint.chat_prompt(None, prompt)?)?;
        let mut cache = model.new_cache();
        let mut next = ids;
        let mut answer = Vec::new();
        while answer.len() < args.max_tokens {
            let logits = model.forward_on_host(&next, &mut cache, 1, None)?;
            let token = logits[0].iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i as u32);
            if eos.contains(&token) {
                break;
            }
            answer.push(token);
            next = vec![token];
        }
        generated += answer.len();
        answers.push(tokenizer.decode(&answer)?.trim().to_string());
        if (i + 1) % 25 == 0 || i + 1 == prompts.len() {
            eprintln!(
                "{}/{} answers, {generated} tokens, {:.0} s",
                i + 1,
                prompts.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    let text = answers.join("\n\n");
    let mut pairs = String::new();
    for (prompt, answer) in prompts.iter().zip(&answers) {
        pairs.push_str(&serde_json::to_string(&serde_json::json!({ "prompt": prompt, "answer": answer }))?);
        pairs.push('\n');
    }
    for (path, bytes) in [(&args.out, text.as_bytes()), (&args.pairs_out, pairs.as_bytes())] {
        anyspec_core::artifact::write_atomically(path, |file| {
            let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::best());
            gz.write_all(bytes)?;
            gz.finish().map(drop)
        })
        .with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!(
        "wrote {} and {} ({} answers, {generated} tokens) in {:.0} s",
        args.out.display(),
        args.pairs_out.display(),
        answers.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
