//! `cargo xtask repro vocab`: hetero-vocab-sd's vocabulary tables (4, 5, 6, 8, 9) recomputed on
//! the tokenizers in `<data>/tokenizers`, written to `reports/vocab.md`.
//!
//! The paper's own values (hetero-vocab-sd.txt, appendix C Tables 4-6, appendix D Table 8,
//! appendix F Table 9) are constants below, each attributed to its table, and are printed beside
//! ours. Models whose tokenizer is not in `<data>/tokenizers` (Gemma-2, CodeLlama) say so.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use anyspec_core::NoProgress;
use anyspec_vocab_map::stats::{
    CorpusOverlap, DecompositionSummary, Describe, DrafterTrie, Overlap, count_decompositions, injectivity,
    shortest_tokens, token_counts,
};
use anyspec_vocab_map::{MatchMode, TokenKind, VocabMap, Vocabulary};

/// The tokenizer directories the report covers, in table order, with the models they stand for.
const TOKENIZERS: &[(&str, &str)] = &[
    ("llama3.1", "Llama-3.1 (8B/70B targets; Llama-3.2 drafters share it)"),
    ("llama3", "Llama-3"),
    ("qwen2", "Qwen2"),
    ("qwen2.5-reconstructed", "Qwen2.5 (reconstructed file; Qwen2.5-0.5B drafter)"),
    ("starcoder", "StarCoder (tiny_starcoder_py drafter)"),
    ("phi3", "Phi-3 (Phi-3.5-mini drafter)"),
    ("codestral-22b", "Mistral v3 (Mixtral-8x22B target)"),
    ("mixtral-8x7b", "Mixtral-8x7B / Mistral-7B v0.1"),
    ("llama2", "Llama-2 (CodeLlama's base vocabulary; vicuna-68m shares it)"),
    ("gpt2", "GPT-2"),
];

/// Target × drafter pairs: first the paper's Table 5/6 pairs that our tokenizers stand for
/// (Mixtral-8x22B = codestral-22b, Mistral v3; Phi-3-medium = phi3; CodeLlama ≈ llama2, its base
/// vocabulary without CodeLlama's 16 extra tokens; vicuna-68m = llama2; Qwen2-0.5B = qwen2;
/// tiny_starcoder_py = starcoder), then pairs of our own choosing.
const PAIRS: &[(&str, &str)] = &[
    ("llama3.1", "qwen2"),
    ("codestral-22b", "llama2"),
    ("codestral-22b", "qwen2"),
    ("phi3", "qwen2"),
    ("llama2", "starcoder"),
    ("llama3.1", "qwen2.5-reconstructed"),
    ("llama3.1", "starcoder"),
    ("llama3.1", "phi3"),
    ("llama3.1", "llama2"),
    ("codestral-22b", "qwen2.5-reconstructed"),
    ("codestral-22b", "starcoder"),
    ("llama2", "qwen2.5-reconstructed"),
];

/// hetero-vocab-sd Table 4 (vocabulary sizes): (paper model, |V| as printed, our tokenizer or
/// `None` where `<data>/tokenizers` lacks it).
const PAPER_TABLE4: &[(&str, usize, Option<&str>)] = &[
    ("google/Gemma-2-9b (target)", 256_000, None),
    ("meta-llama/Llama-3.1-70B (target)", 128_256, Some("llama3.1")),
    ("mistralai/Mixtral-8x22B-Instruct-v0.1 (target)", 32_768, Some("codestral-22b")),
    ("microsoft/Phi-3-medium-128k-instruct (target)", 32_011, Some("phi3")),
    ("codellama/CodeLlama-13b-Instruct-hf (target)", 32_016, None),
    ("Qwen/Qwen2-0.5B-Instruct (drafter)", 151_646, Some("qwen2")),
    ("bigcode/tiny_starcoder_py (drafter)", 49_152, Some("starcoder")),
    ("double7/vicuna-68m (drafter)", 32_000, Some("llama2")),
];

/// hetero-vocab-sd Table 5: (paper target, paper drafter, |T∩D|, |T∩D|/|T| as printed, our
/// target, our drafter). `None`: the paper's tokenizer is not in `<data>/tokenizers`; CodeLlama's
/// stand-in is llama2 (CodeLlama's vocabulary is Llama-2's plus 16 tokens).
#[allow(clippy::type_complexity)]
const PAPER_TABLE5: &[(&str, &str, usize, &str, Option<(&str, &str)>)] = &[
    ("Llama-3.1-70B", "Qwen2-0.5B-Instruct", 109_566, "0.85", Some(("llama3.1", "qwen2"))),
    ("Gemma-2-9b", "vicuna-68m", 30_489, "0.12", None),
    ("Mixtral-8x22B-Instruct-v0.1", "vicuna-68m", 24_184, "0.74", Some(("codestral-22b", "llama2"))),
    ("Mixtral-8x22B-Instruct-v0.1", "Qwen2-0.5B-Instruct", 10_566, "0.32", Some(("codestral-22b", "qwen2"))),
    ("Phi-3-medium-128k-instruct", "Qwen2-0.5B-Instruct", 9_588, "0.30", Some(("phi3", "qwen2"))),
    ("CodeLlama-13b-Instruct-hf", "tiny_starcoder_py", 8_481, "0.26", Some(("llama2", "starcoder"))),
];

/// hetero-vocab-sd Table 6: |T'∩D'|/|T'| over the tokens of 50 random prompts of a task, as
/// printed: (paper target, paper drafter, task, value, our target, our drafter).
#[allow(clippy::type_complexity)]
const PAPER_TABLE6: &[(&str, &str, &str, &str, Option<(&str, &str)>)] = &[
    ("Llama-3.1-70B", "Qwen2-0.5B-Instruct", "long-ctx summ", "1.00", Some(("llama3.1", "qwen2"))),
    ("Mixtral-8x22B-Instruct-v0.1", "vicuna-68m", "summ", "0.99", Some(("codestral-22b", "llama2"))),
    ("Gemma-2-9b", "vicuna-68m", "summ", "0.99", None),
    ("CodeLlama-13b-Instruct-hf", "tiny_starcoder_py", "coding", "0.73", Some(("llama2", "starcoder"))),
    ("Phi-3-medium-128k-instruct", "Qwen2-0.5B-Instruct", "long-ctx summ", "0.25", Some(("phi3", "qwen2"))),
    ("Mixtral-8x22B-Instruct-v0.1", "Qwen2-0.5B-Instruct", "long-ctx summ", "0.24", Some(("codestral-22b", "qwen2"))),
];

/// hetero-vocab-sd Table 8 (Qwen2-7B-Instruct, the 150,000 shortest tokens), as printed:
/// (statistic, token length in characters, number of combinations).
const PAPER_TABLE8: &[(&str, &str, &str)] = &[
    ("mean", "6.21", "144.31"),
    ("std", "2.87", "880.98"),
    ("min", "1.00", "1.00"),
    ("25%", "4.00", "7.00"),
    ("50%", "6.00", "15.00"),
    ("75%", "8.00", "56.00"),
    ("max", "17.00", "65536.00"),
];

/// hetero-vocab-sd Table 9 (injectivity on 100-character CNN-DM prefixes), as printed:
/// (library, tokenizer, injective, our tokenizer).
const PAPER_TABLE9: &[(&str, &str, &str, Option<&str>)] = &[
    ("SentencePiece", "SentencePiece", "True", None),
    ("Hugging Face", "gpt2", "True", Some("gpt2")),
    ("Hugging Face", "double7/vicuna-68m", "False", Some("llama2")),
    ("Hugging Face", "bigcode/tiny_starcoder_py", "True", Some("starcoder")),
    ("Hugging Face", "Qwen/Qwen2-0.5B-Instruct", "True", Some("qwen2")),
];

/// The paper's Table 5 value for a pair of our tokenizers, if it stands for one of the paper's.
fn paper_intersection(target: &str, drafter: &str) -> Option<(usize, &'static str)> {
    PAPER_TABLE5.iter().find(|row| row.4 == Some((target, drafter))).map(|row| (row.2, row.3))
}

/// Corpora for Tables 6 and 9: (label, path under `<data>/corpora`, how to read it).
const CORPORA: &[(&str, &str, Format)] = &[
    ("wikitext-2 test (en)", "en-wikitext2/wikitext2_raw_test_part.txt", Format::Text),
    ("FLORES-200 dev (en)", "flores200-dev/eng_Latn.dev", Format::Text),
    ("FLORES-200 dev (uk)", "flores200-dev/ukr_Cyrl.dev", Format::Text),
    ("HumanEval prompts (code)", "code-humaneval/HumanEval_shared.jsonl", Format::JsonlField("prompt")),
    (
        "CNN/DM 100-char prefixes (Spec-Bench summarization)",
        "prompts-specbench/question.jsonl",
        Format::SpecBenchSummaryPrefix(100),
    ),
];

#[derive(Clone, Copy)]
enum Format {
    Text,
    JsonlField(&'static str),
    /// The first N characters of each Spec-Bench `summarization` prompt's article (its
    /// "Summarize: " instruction removed), one prefix per line; prefixes containing a line break
    /// are skipped (Table 9 round-trips line by line).
    SpecBenchSummaryPrefix(usize),
}

/// The corpus Table 6 restricts the intersection to.
const OVERLAP_CORPUS: usize = 0;

pub(crate) fn run(data: &Path) -> anyhow::Result<()> {
    let tokenizer_dir = data.join("tokenizers");
    anyhow::ensure!(
        tokenizer_dir.is_dir(),
        "--data: {} has no tokenizers/ directory; pass the shared data directory (default ../shared)",
        data.display()
    );
    let mut vocabs = Vec::new();
    for &(dir, model) in TOKENIZERS {
        let path = tokenizer_dir.join(dir).join("tokenizer.json");
        if !path.exists() {
            note(&format!("skipping {dir}: {} is absent", path.display()));
            continue;
        }
        note(&format!("loading {dir}"));
        let started = Instant::now();
        let vocab = Vocabulary::from_file(&path)?;
        vocabs.push(Loaded { dir, model, vocab, load_seconds: started.elapsed().as_secs_f64() });
    }
    let corpora = load_corpora(&data.join("corpora"))?;

    let mut out = String::new();
    writeln!(out, "# Vocabulary statistics of hetero-vocab-sd, recomputed\n")?;
    writeln!(
        out,
        "Generated by `cargo xtask repro vocab --data {}` from `{}`. Tokenizers are identified by the \
         first 8 hex digits of their vocabulary fingerprint (SHA-256 of the canonical id → token table).\n",
        data.display(),
        tokenizer_dir.display()
    )?;
    writeln!(
        out,
        "**Paper values** are copied from hetero-vocab-sd.txt (appendix C Tables 4–6, appendix D \
         Table 8, appendix F Table 9) and printed beside ours. The paper's Gemma-2 and CodeLlama \
         tokenizers are not in `{}`: their rows say so (CodeLlama's vocabulary is Llama-2's plus 16 \
         tokens, so llama2 stands in for it where noted).\n",
        tokenizer_dir.display()
    )?;
    writeln!(out, "Timings are from a {} build of xtask.\n", if cfg!(debug_assertions) { "debug" } else { "release" })?;

    table4(&mut out, &vocabs)?;
    table5(&mut out, &vocabs)?;
    table6(&mut out, &vocabs, &corpora)?;
    table8(&mut out, &vocabs)?;
    table9(&mut out, &vocabs, &corpora)?;
    all_pairs(&mut out, &vocabs)?;

    std::fs::create_dir_all("reports").context("cannot create reports/")?;
    let path = PathBuf::from("reports/vocab.md");
    anyspec_core::artifact::write_atomically(&path, |w| std::io::Write::write_all(w, out.as_bytes()))
        .with_context(|| format!("cannot write {}", path.display()))?;
    note(&format!("wrote {}", path.display()));
    Ok(())
}

struct Loaded {
    dir: &'static str,
    model: &'static str,
    vocab: Vocabulary,
    load_seconds: f64,
}

struct Corpus {
    label: &'static str,
    text: String,
}

#[allow(clippy::print_stderr)]
fn note(message: &str) {
    eprintln!("repro vocab: {message}");
}

fn load_corpora(dir: &Path) -> anyhow::Result<Vec<Corpus>> {
    let mut corpora = Vec::new();
    for &(label, rel, format) in CORPORA {
        let path = dir.join(rel);
        if !path.exists() {
            note(&format!("skipping corpus {label}: {} is absent", path.display()));
            continue;
        }
        let raw = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let text = match format {
            Format::Text => raw,
            Format::JsonlField(field) => {
                let mut text = String::new();
                for (n, line) in raw.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                    let value: serde_json::Value = serde_json::from_str(line)
                        .with_context(|| format!("{} line {}: not JSON", path.display(), n + 1))?;
                    if let Some(s) = value[field].as_str() {
                        text.push_str(s);
                        if !s.ends_with('\n') {
                            text.push('\n');
                        }
                    }
                }
                text
            }
            Format::SpecBenchSummaryPrefix(chars) => {
                let mut text = String::new();
                for (n, line) in raw.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                    let value: serde_json::Value = serde_json::from_str(line)
                        .with_context(|| format!("{} line {}: not JSON", path.display(), n + 1))?;
                    if value["category"].as_str() != Some("summarization") {
                        continue;
                    }
                    let Some(prompt) = value["turns"][0].as_str() else { continue };
                    let article = prompt.strip_prefix("Summarize:").unwrap_or(prompt).trim_start();
                    let prefix: String = article.chars().take(chars).collect();
                    if prefix.contains('\n') || prefix.contains('\r') {
                        continue;
                    }
                    text.push_str(&prefix);
                    text.push('\n');
                }
                text
            }
        };
        corpora.push(Corpus { label, text });
    }
    Ok(corpora)
}

fn find<'a>(vocabs: &'a [Loaded], dir: &str) -> Option<&'a Loaded> {
    vocabs.iter().find(|l| l.dir == dir)
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn table4(out: &mut String, vocabs: &[Loaded]) -> anyhow::Result<()> {
    writeln!(out, "## Table 4: vocabulary sizes\n")?;
    writeln!(out, "|T| counts every id with a token, added and special tokens included (as `get_vocab()` does).\n")?;
    writeln!(
        out,
        "| tokenizer | stands for | style | model tokens | added | of which special | total | fingerprint | load (s) | paper (Table 4) |"
    )?;
    writeln!(out, "|---|---|---|--:|--:|--:|--:|---|--:|---|")?;
    for l in vocabs {
        let (mut normal, mut added, mut special) = (0, 0, 0);
        for (_, token) in l.vocab.tokens() {
            match token.kind {
                TokenKind::Normal => normal += 1,
                TokenKind::Added => added += 1,
                TokenKind::Special => special += 1,
            }
        }
        let paper = match PAPER_TABLE4.iter().find(|row| row.2 == Some(l.dir)) {
            Some(&(model, size, _)) => format!(
                "{model}: {}{}",
                thousands(size),
                if size == l.vocab.token_count() { " (matches)" } else { " (differs)" }
            ),
            None => "–".into(),
        };
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | `{}` | {:.2} | {paper} |",
            l.dir,
            l.model,
            l.vocab.style().name(),
            thousands(normal),
            thousands(added + special),
            thousands(special),
            thousands(l.vocab.token_count()),
            l.vocab.fingerprint().short(),
            l.load_seconds
        )?;
    }
    writeln!(out)?;
    for &(model, size, ours) in PAPER_TABLE4 {
        if ours.is_none_or(|dir| find(vocabs, dir).is_none()) {
            writeln!(
                out,
                "- Paper Table 4 row without a tokenizer in `<data>/tokenizers`: {model}, |V| = {}.",
                thousands(size)
            )?;
        }
    }
    writeln!(out)?;
    Ok(())
}

fn table5(out: &mut String, vocabs: &[Loaded]) -> anyhow::Result<()> {
    writeln!(out, "## Table 5: |T∩D| — raw strings (the paper's definition) and byte surfaces side by side\n")?;
    writeln!(
        out,
        "`raw`: equal token strings, added tokens included. `bytes`: equal decoded byte surfaces \
         (`Ġthe` = `▁the` = ` the`), special tokens excluded, one token per surface (collisions such as \
         `▁` vs `<0x20>` resolved in favour of the ordinary token). Ratio = |T∩D| / |T|. Build times \
         exclude loading.\n"
    )?;
    writeln!(
        out,
        "| target T | drafter D | |T| | |D| | raw |T∩D| | raw ratio | bytes |T∩D| | bytes ratio | bytes / raw | build raw / bytes (ms) | paper (Table 5) |T∩D| / ratio |"
    )?;
    writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")?;
    for &(t, d) in PAIRS {
        let (Some(target), Some(drafter)) = (find(vocabs, t), find(vocabs, d)) else { continue };
        let started = Instant::now();
        let raw = VocabMap::build(&target.vocab, &drafter.vocab, MatchMode::Raw);
        let raw_ms = started.elapsed().as_secs_f64() * 1e3;
        let started = Instant::now();
        let bytes = VocabMap::build(&target.vocab, &drafter.vocab, MatchMode::Bytes);
        let bytes_ms = started.elapsed().as_secs_f64() * 1e3;
        let (r, b) = (Overlap::of(&raw), Overlap::of(&bytes));
        let paper = match paper_intersection(t, d) {
            Some((value, ratio)) if value == r.intersection => format!("{} / {ratio} (matches)", thousands(value)),
            Some((value, ratio)) => format!("{} / {ratio} (differs)", thousands(value)),
            None => "– (pair not in the paper)".into(),
        };
        writeln!(
            out,
            "| {t} | {d} | {} | {} | {} | {} | {} | {} | {:.2}× | {raw_ms:.0} / {bytes_ms:.0} | {paper} |",
            thousands(r.target_size),
            thousands(r.drafter_size),
            thousands(r.intersection),
            pct(r.ratio),
            thousands(b.intersection),
            pct(b.ratio),
            b.intersection as f64 / r.intersection.max(1) as f64,
        )?;
    }
    writeln!(out)?;
    for &(t, d, value, ratio, ours) in PAPER_TABLE5 {
        if ours.is_none() {
            writeln!(
                out,
                "- Paper Table 5 row without tokenizers here: {t} × {d}, |T∩D| = {} ({ratio}); Gemma-2's \
                 tokenizer is not in `<data>/tokenizers`.",
                thousands(value)
            )?;
        }
    }
    writeln!(
        out,
        "- CodeLlama-13b-Instruct-hf's tokenizer is not in `<data>/tokenizers`; llama2 (its base \
         vocabulary, 32,000 of CodeLlama's 32,016 tokens) stands in for it.\n"
    )?;
    Ok(())
}

fn table6(out: &mut String, vocabs: &[Loaded], corpora: &[Corpus]) -> anyhow::Result<()> {
    let Some(corpus) = corpora.get(OVERLAP_CORPUS) else { return Ok(()) };
    writeln!(out, "## Table 6: the intersection restricted to tokens used on a corpus\n")?;
    writeln!(
        out,
        "The paper's Table 6: |T'∩D'|/|T'|, where T' and D' are the tokens that appear when 50 randomly \
         selected prompts of a task are tokenized, matched as raw token strings (its Table 5 \
         definition). The paper's task data (long-context summarization, summarization, coding) is not \
         named beyond that and is not available here; we use every line of the corpora below. First \
         the paper's pairs on each corpus with raw matching and the paper's |T'∩D'| (a token counts when \
         both tokenizers use it on the corpus), then, for every pair, {}: \"used\" counts \
         distinct tokens, \"occurrences\" weights them by frequency.\n",
        corpus.label
    )?;
    // Encode every corpus once per tokenizer, not once per pair.
    let mut counts: Vec<(&str, usize, Vec<u64>)> = Vec::new();
    for &(t, d) in PAIRS {
        for dir in [t, d] {
            let Some(l) = find(vocabs, dir) else { continue };
            for (ci, c) in corpora.iter().enumerate() {
                if !counts.iter().any(|(name, i, _)| *name == dir && *i == ci) {
                    note(&format!("table 6: encoding {} with {dir}", c.label));
                    counts.push((dir, ci, token_counts(&l.vocab, &c.text, &NoProgress)?));
                }
            }
        }
    }
    let counts_of = |dir: &str, ci: usize| {
        counts.iter().find(|(name, i, _)| *name == dir && *i == ci).map(|(_, _, c)| c.as_slice())
    };

    write!(out, "| paper target × drafter (ours) |")?;
    for c in corpora {
        write!(out, " raw |T'∩D'|/|T'| on {} |", c.label)?;
    }
    writeln!(out, " paper (Table 6) | paper task |")?;
    writeln!(out, "|---|{}--:|---|", "--:|".repeat(corpora.len()))?;
    for &(pt, pd, task, value, ours) in PAPER_TABLE6 {
        let Some((t, d)) = ours else {
            writeln!(
                out,
                "| {pt} × {pd} (Gemma-2's tokenizer is not in `<data>/tokenizers`) |{} {value} | {task} |",
                " – |".repeat(corpora.len())
            )?;
            continue;
        };
        let (Some(target), Some(drafter)) = (find(vocabs, t), find(vocabs, d)) else { continue };
        write!(out, "| {pt} × {pd} ({t} × {d}) |")?;
        let map = VocabMap::build(&target.vocab, &drafter.vocab, MatchMode::Raw);
        for ci in 0..corpora.len() {
            let (Some(tc), Some(dc)) = (counts_of(t, ci), counts_of(d, ci)) else {
                write!(out, " – |")?;
                continue;
            };
            write!(out, " {:.2} |", used_intersection_ratio(&map, tc, dc))?;
        }
        writeln!(out, " {value} | {task} |")?;
    }
    writeln!(
        out,
        "\nCodeLlama's tokenizer is not in `<data>/tokenizers`; llama2 stands in for it (32,000 of its \
         32,016 tokens).\n"
    )?;

    writeln!(out, "### Every pair on {}, raw and byte-surface matching\n", corpus.label)?;
    writeln!(
        out,
        "| target T | drafter D | T used | shared (raw) | shared (bytes) | T occurrences shared (bytes) | D used | shared (raw) | shared (bytes) | D occurrences shared (bytes) |"
    )?;
    writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")?;
    for &(t, d) in PAIRS {
        let (Some(target), Some(drafter)) = (find(vocabs, t), find(vocabs, d)) else { continue };
        let (Some(target_counts), Some(drafter_counts)) = (counts_of(t, OVERLAP_CORPUS), counts_of(d, OVERLAP_CORPUS))
        else {
            continue;
        };
        let raw_map = VocabMap::build(&target.vocab, &drafter.vocab, MatchMode::Raw);
        let raw = CorpusOverlap::from_counts(&raw_map, target_counts, drafter_counts, corpus.text.len());
        let map = VocabMap::build(&target.vocab, &drafter.vocab, MatchMode::Bytes);
        let c = CorpusOverlap::from_counts(&map, target_counts, drafter_counts, corpus.text.len());
        writeln!(
            out,
            "| {t} | {d} | {} | {} | {} | {} | {} | {} | {} | {} |",
            thousands(c.target.distinct_tokens),
            pct(raw.target.distinct_ratio),
            pct(c.target.distinct_ratio),
            pct(c.target.occurrence_ratio),
            thousands(c.drafter.distinct_tokens),
            pct(raw.drafter.distinct_ratio),
            pct(c.drafter.distinct_ratio),
            pct(c.drafter.occurrence_ratio),
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// |T'∩D'| / |T'|: T' and D' the ids the target and the drafter use (count > 0), a target id in
/// the intersection when its `map` partner is in D'.
fn used_intersection_ratio(map: &VocabMap, target_counts: &[u64], drafter_counts: &[u64]) -> f64 {
    let partner = map.target_to_drafter();
    let (mut used, mut shared) = (0usize, 0usize);
    for (id, &count) in target_counts.iter().enumerate() {
        if count == 0 {
            continue;
        }
        used += 1;
        if partner.get(id).is_some_and(|&p| drafter_counts.get(p as usize).is_some_and(|&c| c > 0)) {
            shared += 1;
        }
    }
    if used == 0 { 0.0 } else { shared as f64 / used as f64 }
}

fn table8(out: &mut String, vocabs: &[Loaded]) -> anyhow::Result<()> {
    let Some(qwen) = find(vocabs, "qwen2") else { return Ok(()) };
    const SHORTEST: usize = 150_000;
    note("table 8: decompositions of Qwen2");
    let started = Instant::now();
    let keep = shortest_tokens(&qwen.vocab, SHORTEST);
    let trie = DrafterTrie::build(&qwen.vocab, Some(&keep));
    let trie_seconds = started.elapsed().as_secs_f64();
    let found = count_decompositions(&qwen.vocab, &trie, &NoProgress);
    let seconds = started.elapsed().as_secs_f64();
    let inside = |id: u32| keep.get(id as usize) == Some(&true);
    writeln!(out, "## Table 8: decompositions of Qwen2 tokens into its own {} shortest tokens\n", thousands(SHORTEST))?;
    writeln!(
        out,
        "For each non-special Qwen2 token, the exact number of sequences of drafter tokens (the {} \
         shortest Qwen2 tokens by byte length) whose concatenation is its byte surface, by dynamic \
         programming over a byte trie (u128, big integers past that). The paper could not count the \
         longest 1,646 tokens (151,646 − 150,000; the 3 special tokens are among them, and are not \
         counted here, hence 1,643 below); here every token is counted, in {seconds:.2} s in total (trie: \
         {trie_seconds:.2} s, {} nodes). `n_max` is the most drafter tokens in any decomposition \
         (reconstruction of the paper's constant, whose exact definition is not available). Statistics \
         follow pandas' `describe()` (sample std, interpolated quartiles) over the decomposable tokens. \
         The paper's values are in the second table below.\n",
        thousands(trie.token_count()),
        thousands(trie.node_count())
    )?;
    writeln!(
        out,
        "| target tokens | count | undecomposable | mean | std | min | 25% | 50% | 75% | max (exact) | n_max |"
    )?;
    writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")?;
    let rows: [(&str, DecompositionSummary); 3] = [
        ("all", found.summary(|_| true)),
        ("the 150,000 shortest", found.summary(inside)),
        ("the rest (longest)", found.summary(|id| !inside(id))),
    ];
    for (label, s) in rows {
        let f = |pick: fn(&Describe) -> f64| s.count.as_ref().map_or("–".to_string(), |d| sci(pick(d)));
        writeln!(
            out,
            "| {label} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            thousands(s.tokens),
            thousands(s.undecomposable),
            f(|d| d.mean),
            f(|d| d.std),
            f(|d| d.min),
            f(|d| d.q1),
            f(|d| d.median),
            f(|d| d.q3),
            s.max_count,
            s.n_max,
        )?;
    }
    writeln!(out)?;

    // The paper's Table 8, beside the 150,000 shortest with both tie orders at the cut.
    let lengths = |keep: &[bool], chars: bool| {
        let values: Vec<f64> = (0..keep.len() as u32)
            .filter(|&id| keep[id as usize])
            .filter_map(|id| qwen.vocab.surface(id))
            .map(|b| if chars { String::from_utf8_lossy(b).chars().count() as f64 } else { b.len() as f64 })
            .collect();
        Describe::of(&values)
    };
    let cut_len = (0..keep.len() as u32)
        .filter(|&id| keep[id as usize])
        .filter_map(|id| qwen.vocab.surface(id).map(<[u8]>::len))
        .max()
        .unwrap_or(0);
    let at_cut = |keep: &[bool], inside: bool| {
        (0..keep.len() as u32)
            .filter(|&id| keep[id as usize] == inside)
            .filter(|&id| qwen.vocab.surface(id).map(<[u8]>::len) == Some(cut_len))
            .filter(|&id| qwen.vocab.token(id).is_some_and(|t| t.kind != TokenKind::Special))
            .count()
    };
    // The other tie order: among tokens of the cut's length, keep the highest ids instead.
    let mut order: Vec<(usize, std::cmp::Reverse<u32>)> = qwen
        .vocab
        .tokens()
        .filter(|(_, t)| t.kind != TokenKind::Special)
        .map(|(id, _)| (qwen.vocab.surface(id).map_or(0, <[u8]>::len), std::cmp::Reverse(id)))
        .collect();
    order.sort_unstable();
    let mut keep_high = vec![false; keep.len()];
    for &(_, std::cmp::Reverse(id)) in order.iter().take(SHORTEST) {
        keep_high[id as usize] = true;
    }
    let trie_high = DrafterTrie::build(&qwen.vocab, Some(&keep_high));
    let found_high = count_decompositions(&qwen.vocab, &trie_high, &NoProgress);
    let low = found.summary(inside).count;
    let high = found_high.summary(|id| keep_high.get(id as usize) == Some(&true)).count;
    let (bytes_low, chars_low, chars_high) = (lengths(&keep, false), lengths(&keep, true), lengths(&keep_high, true));
    writeln!(
        out,
        "### Table 8 beside the paper (the 150,000 shortest tokens)\n\nThe cut at 150,000 falls inside \
         the {cut_len}-byte tokens: {} of them are kept and {} are not, so which ones are kept is a tie \
         the paper does not break. `lowest ids` keeps the lowest ids among them (our default, \
         `shortest_tokens`), `highest ids` the highest; the combination counts depend on it. Token \
         length: the paper's unit is characters; ours counts UTF-8 characters of the decoded byte \
         surface (a byte-level token that splits a character counts U+FFFD once per broken sequence) \
         and, separately, bytes. Paper: hetero-vocab-sd Table 8 (Qwen2-7B-Instruct).\n",
        thousands(at_cut(&keep, true)),
        thousands(at_cut(&keep, false)),
    )?;
    writeln!(
        out,
        "| statistic | token length, chars (lowest ids) | chars (highest ids) | bytes (lowest ids) | paper token length | combinations (lowest ids) | combinations (highest ids) | paper combinations |"
    )?;
    writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|")?;
    let picks: [fn(&Describe) -> f64; 7] =
        [|d| d.mean, |d| d.std, |d| d.min, |d| d.q1, |d| d.median, |d| d.q3, |d| d.max];
    for (&(stat, paper_len, paper_comb), pick) in PAPER_TABLE8.iter().zip(picks) {
        let cell = |d: &Option<Describe>| d.as_ref().map_or("–".to_string(), |d| sci(pick(d)));
        writeln!(
            out,
            "| {stat} | {} | {} | {} | {paper_len} | {} | {} | {paper_comb} |",
            cell(&chars_low),
            cell(&chars_high),
            cell(&bytes_low),
            cell(&low),
            cell(&high),
        )?;
    }
    let bytes_match = PAPER_TABLE8
        .iter()
        .zip(picks)
        .all(|(&(_, paper_len, _), pick)| bytes_low.as_ref().is_some_and(|d| sci(pick(d)) == paper_len));
    writeln!(
        out,
        "\nThe paper's token-length column {} our byte lengths in every row{}. The paper's mean and std \
         of the combinations lie between our two tie orders; the quartiles, min and max agree with both.\n",
        if bytes_match { "equals" } else { "does not equal" },
        if bytes_match {
            " (its \"characters\" are bytes, or token-string characters with Ġ for the space)"
        } else {
            ""
        }
    )?;
    Ok(())
}

/// Plain numbers below a million, scientific notation above.
fn sci(x: f64) -> String {
    if x.abs() < 1e6 { format!("{x:.2}") } else { format!("{x:.3e}") }
}

fn table9(out: &mut String, vocabs: &[Loaded], corpora: &[Corpus]) -> anyhow::Result<()> {
    writeln!(out, "## Table 9: injectivity — share of lines s with decode(encode(s)) ≠ s\n")?;
    writeln!(
        out,
        "Snippets are the non-empty lines of each corpus; encoding adds no special tokens and decoding \
         skips none. The paper (appendix F) round-trips 100-character prefixes of randomly sampled \
         CNN-DM examples and reports only whether every prefix survived (`Injective`); CNN-DM itself is \
         not in `<data>/corpora`, so the last column uses the CNN/DailyMail articles inside Spec-Bench's \
         summarization prompts (`prompts-specbench/question.jsonl`, \"Summarize: \" removed, the first \
         100 characters of each, prefixes with a line break skipped). `paper` is Table 9's \
         `Injective` for the model our tokenizer stands for. (Fertility, dictspec Table 3, is in \
         `anyspec vocab fertility` and the DictSpec report.)\n"
    )?;
    write!(out, "| tokenizer |")?;
    for c in corpora {
        write!(out, " {} |", c.label)?;
    }
    writeln!(out, " paper (Table 9) |")?;
    writeln!(out, "|---|{}---|", "--:|".repeat(corpora.len()))?;
    let mut examples = Vec::new();
    for l in vocabs {
        note(&format!("table 9: {}", l.dir));
        write!(out, "| {} |", l.dir)?;
        for c in corpora {
            let inj = injectivity(&l.vocab, &c.text, &NoProgress)?;
            write!(out, " {} ({}/{}) |", pct(inj.share), inj.mismatched, inj.snippets)?;
            if let Some(m) = inj.examples.first()
                && examples.len() < 12
            {
                examples.push(format!(
                    "- {} on {}: `{:?}` → `{:?}`",
                    l.dir,
                    c.label,
                    clip(&m.original),
                    clip(&m.decoded)
                ));
            }
        }
        let paper = PAPER_TABLE9
            .iter()
            .find(|row| row.3 == Some(l.dir))
            .map_or("–".to_string(), |&(library, name, injective, _)| format!("{library} {name}: {injective}"));
        writeln!(out, " {paper} |")?;
    }
    for &(library, name, injective, ours) in PAPER_TABLE9 {
        if ours.is_none() {
            writeln!(
                out,
                "\nPaper Table 9 also lists the {library} library's own tokenizer (\"{name}\"): {injective}; \
                 it is not a tokenizer file and is not run here. The paper finds vicuna-68m not \
                 injective on its prefixes; the llama2 file here (whose vocabulary vicuna-68m shares) \
                 round-trips every snippet above, and we have not found which of vicuna-68m's tokenizer \
                 settings makes the difference."
            )?;
        }
    }
    writeln!(out, "\nFirst mismatch per tokenizer and corpus (up to 12):\n")?;
    for e in examples {
        writeln!(out, "{e}")?;
    }
    writeln!(out)?;
    Ok(())
}

fn clip(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() <= MAX { s.to_string() } else { format!("{}…", s.chars().take(MAX).collect::<String>()) }
}

fn all_pairs(out: &mut String, vocabs: &[Loaded]) -> anyhow::Result<()> {
    writeln!(out, "## Appendix: every pair of tokenizers (|A∩B|, raw / bytes)\n")?;
    writeln!(out, "Row = A, column = B; symmetric in |A∩B|. Ours; the paper has no such table.\n")?;
    write!(out, "| A \\ B |")?;
    for l in vocabs {
        write!(out, " {} |", l.dir)?;
    }
    writeln!(out)?;
    writeln!(out, "|---|{}", "--:|".repeat(vocabs.len()))?;
    for a in vocabs {
        write!(out, "| {} |", a.dir)?;
        for b in vocabs {
            let raw = VocabMap::build(&a.vocab, &b.vocab, MatchMode::Raw).intersection();
            let bytes = VocabMap::build(&a.vocab, &b.vocab, MatchMode::Bytes).intersection();
            write!(out, " {} / {} |", thousands(raw), thousands(bytes))?;
        }
        writeln!(out)?;
    }
    writeln!(out)?;
    Ok(())
}
