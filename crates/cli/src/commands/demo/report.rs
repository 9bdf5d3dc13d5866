//! What the demo reports: one row per method (acceptance, drafter cost, the theory's factor,
//! speed, whether greedy output is unchanged), as JSON or as the tables.

use std::path::PathBuf;
use std::time::Duration;

use anyspec_core::{AcceptanceAudit, GammaPolicy, Stats};
use serde::Serialize;

use super::assets::Artifact;
use super::methods::{Kind, METHODS, Method, method_name};
use super::prompts::Prompt;
use super::timing::Setup;
use crate::commands::generate::drafter_warning;
use crate::output::table;

/// One row of `--json` output; field names are stable.
#[derive(Debug, Serialize)]
pub(super) struct Row {
    pub(super) method: String,
    pub(super) key: &'static str,
    /// Accepted / drafted (null for autoregressive decoding).
    pub(super) acceptance_rate: Option<f64>,
    /// Acceptance tests passed / taken: the estimate of the per-token α of the theory.
    pub(super) alpha: Option<f64>,
    /// Drafted tokens verified per step (the γ̄ of the theory column; 0 for a plain step).
    pub(super) drafted_per_step: Option<f64>,
    /// Drafted tokens accepted per step (null for autoregressive decoding).
    pub(super) mean_accepted_length: Option<f64>,
    pub(super) tokens_per_step: f64,
    /// Drafter time per drafted token ÷ autoregressive time per token (c of Definition 3.7).
    pub(super) drafter_cost: Option<f64>,
    /// Theorem 3.8 with the measured verification cost: E\[tokens\](α, γ̄) / (γ̄c + v(γ̄ + 1)).
    pub(super) theoretical_factor: Option<f64>,
    pub(super) tokens_per_second: f64,
    /// tokens_per_second over autoregressive tokens_per_second.
    pub(super) speedup: f64,
    /// speedup ÷ theoretical_factor.
    pub(super) efficiency: Option<f64>,
    /// Whether every prompt's output equals the autoregressive output (null unless temperature 0).
    pub(super) matches_ar: Option<bool>,
    /// Speedup per category group, in the order of `groups`.
    pub(super) group_speedups: Vec<f64>,
    /// When sampling: the acceptance tests against what the target's logits promised for them
    /// (null at temperature 0 and for autoregressive decoding).
    pub(super) audit: Option<AuditRow>,
    pub(super) generated: u64,
    pub(super) steps: u64,
    pub(super) drafted: u64,
    pub(super) accepted: u64,
    pub(super) decode_ms: f64,
    pub(super) draft_ms: f64,
    pub(super) verify_ms: f64,
}

/// What `--json` prints.
#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub(super) target: String,
    /// Why the tiny models ran instead of SmolLM2, when they did.
    pub(super) fallback: Option<String>,
    pub(super) assets: PathBuf,
    pub(super) cache: PathBuf,
    pub(super) device: &'static str,
    pub(super) threads: usize,
    pub(super) gamma: usize,
    pub(super) gamma_policy: GammaPolicy,
    pub(super) temperature: f32,
    pub(super) max_tokens: usize,
    /// Layers of the self-speculative drafter, and the tokens/s each candidate reached.
    pub(super) first_layers: Option<usize>,
    pub(super) first_layer_trials: Vec<(usize, f64)>,
    /// Cost of a target pass over k = 1, 2, … positions ÷ one position, measured on the first prompt.
    pub(super) verify_cost: Vec<f64>,
    pub(super) prompts: Vec<PromptInfo>,
    /// Category groups, in table order.
    pub(super) groups: Vec<String>,
    /// The autoregressive output for the first prompt, to show what the model writes.
    pub(super) sample: String,
    pub(super) artifacts: Vec<Artifact>,
    pub(super) rows: Vec<Row>,
    /// Methods left out, with the reason.
    pub(super) skipped: Vec<String>,
}

/// A warning per row whose drafter drafted nothing, or had every drafted token rejected.
pub(super) fn drafter_warnings(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|row| row.key != "ar")
        .filter_map(|row| {
            let stats = Stats { steps: row.steps, drafted: row.drafted, accepted: row.accepted, ..Stats::default() };
            drafter_warning(&row.method, &stats)
        })
        .collect()
}

/// [`AcceptanceAudit`] as the report prints it.
#[derive(Debug, Serialize)]
pub(super) struct AuditRow {
    /// Acceptance tests taken and passed.
    pub(super) tests: u64,
    pub(super) passed: u64,
    /// passed ÷ tests.
    pub(super) measured_rate: f64,
    /// The mean of each test's acceptance probability from the target's distribution: p(d) for
    /// a deterministic draft, Σ min(p, q) for a sampled one.
    pub(super) expected_rate: f64,
    /// (passed − expected) in standard deviations of the sum of the tests.
    pub(super) z: f64,
}

impl From<&AcceptanceAudit> for AuditRow {
    fn from(a: &AcceptanceAudit) -> Self {
        AuditRow {
            tests: a.tests,
            passed: a.passed,
            measured_rate: a.measured_rate(),
            expected_rate: a.expected_rate(),
            z: a.z(),
        }
    }
}

#[derive(Debug, Serialize)]
pub(super) struct PromptInfo {
    pub(super) category: String,
    pub(super) group: String,
    pub(super) tokens: usize,
    pub(super) text: String,
}

/// Counters, times and outputs of one method, per prompt.
#[derive(Default)]
pub(super) struct Outcome {
    pub(super) per_prompt: Vec<(Stats, Duration)>,
    pub(super) outputs: Vec<Vec<u32>>,
    /// Every prompt's acceptance audit, merged (when sampling).
    pub(super) audit: Option<AcceptanceAudit>,
}

impl Outcome {
    pub(super) fn total(&self, keep: &dyn Fn(usize) -> bool) -> (Stats, Duration) {
        let mut stats = Stats::default();
        let mut time = Duration::ZERO;
        for (_, (s, t)) in self.per_prompt.iter().enumerate().filter(|(i, _)| keep(*i)) {
            stats.merge(s);
            time += *t;
        }
        (stats, time)
    }
}

pub(super) fn tokens_per_second(stats: &Stats, time: Duration) -> f64 {
    stats.generated as f64 / time.as_secs_f64().max(1e-9)
}

/// `v(k)` at a real-valued width, on the straight line between measured widths (clamped).
pub(super) fn interpolate(costs: &[f64], width: f64) -> f64 {
    let last = costs.len() as f64;
    let w = width.clamp(1.0, last);
    let (lo, hi) = (w.floor() as usize, w.ceil() as usize);
    let (a, b) = (costs[lo - 1], costs[hi - 1]);
    a + (b - a) * (w - lo as f64)
}

/// Category groups in the order the prompts first name them.
pub(super) fn groups(prompts: &[Prompt]) -> Vec<String> {
    let mut groups: Vec<String> = Vec::new();
    for p in prompts {
        if !groups.contains(&p.group) {
            groups.push(p.group.clone());
        }
    }
    groups
}

pub(super) fn rows(
    results: &[(&Method, Outcome)],
    setup: &Setup,
    prompts: &[Prompt],
    groups: &[String],
    verify_cost: &[f64],
    greedy: bool,
) -> Vec<Row> {
    let (ar_stats, ar_time) = results[0].1.total(&|_| true);
    let ar_speed = tokens_per_second(&ar_stats, ar_time);
    let ar_seconds_per_token = ar_time.as_secs_f64() / ar_stats.generated.max(1) as f64;
    let group_speed = |outcome: &Outcome, group: &str| {
        let (s, t) = outcome.total(&|i| prompts[i].group == group);
        tokens_per_second(&s, t)
    };
    results
        .iter()
        .map(|(method, outcome)| {
            let (s, time) = outcome.total(&|_| true);
            let speculative = method.kind != Kind::Autoregressive;
            let speed = tokens_per_second(&s, time);
            let speedup = speed / ar_speed.max(1e-9);
            let cost = (speculative && s.drafted > 0)
                .then(|| s.draft_time.as_secs_f64() / s.drafted as f64 / ar_seconds_per_token.max(1e-12));
            // γ̄: the drafted tokens verified per step.
            let gamma = s.drafted as f64 / s.steps.max(1) as f64;
            let theory = speculative.then(|| {
                let alpha = s.per_token_acceptance().min(1.0 - 1e-9);
                let tokens = (1.0 - alpha.powf(gamma + 1.0)) / (1.0 - alpha);
                tokens / (gamma * cost.unwrap_or(0.0) + interpolate(verify_cost, gamma + 1.0))
            });
            Row {
                method: method_name(method, setup),
                key: method.key,
                acceptance_rate: speculative.then(|| s.acceptance_rate()),
                alpha: speculative.then(|| s.per_token_acceptance()),
                drafted_per_step: speculative.then_some(gamma),
                mean_accepted_length: speculative.then(|| s.mean_accepted_length()),
                tokens_per_step: s.tokens_per_step(),
                drafter_cost: cost,
                theoretical_factor: theory,
                tokens_per_second: speed,
                speedup,
                efficiency: theory.map(|t| speedup / t.max(1e-9)),
                matches_ar: greedy.then(|| outcome.outputs == results[0].1.outputs),
                group_speedups: groups
                    .iter()
                    .map(|g| group_speed(outcome, g) / group_speed(&results[0].1, g).max(1e-9))
                    .collect(),
                audit: outcome.audit.as_ref().filter(|_| speculative).map(AuditRow::from),
                generated: s.generated,
                steps: s.steps,
                drafted: s.drafted,
                accepted: s.accepted,
                decode_ms: time.as_secs_f64() * 1e3,
                draft_ms: s.draft_time.as_secs_f64() * 1e3,
                verify_ms: s.verify_time.as_secs_f64() * 1e3,
            }
        })
        .collect()
}

pub(super) fn render(report: &Report) -> String {
    // Greedy runs end with the comparison against autoregressive output; sampled runs, which
    // have none, with the acceptance audit instead.
    let sampled = report.rows.iter().any(|r| r.audit.is_some());
    let mut header =
        vec!["method", "drafted/step", "α", "tokens/step", "c", "theory", "tokens/s", "speedup", "speedup ÷ theory"];
    header.extend(if sampled { &["α promised", "z"][..] } else { &["matches_ar"][..] });
    let dash = || "—".to_string();
    let rows: Vec<Vec<String>> = report
        .rows
        .iter()
        .map(|r| {
            let mut row = vec![
                r.method.clone(),
                r.drafted_per_step.map_or_else(dash, |v| format!("{v:.2}")),
                r.alpha.map_or_else(dash, |v| format!("{v:.3}")),
                format!("{:.2}", r.tokens_per_step),
                r.drafter_cost.map_or_else(dash, |v| format!("{v:.3}")),
                r.theoretical_factor.map_or_else(dash, |v| format!("{v:.2}×")),
                format!("{:.1}", r.tokens_per_second),
                format!("{:.2}×", r.speedup),
                r.efficiency.map_or_else(dash, |v| format!("{v:.2}")),
            ];
            if sampled {
                row.push(r.audit.as_ref().map_or_else(dash, |a| format!("{:.3}", a.expected_rate)));
                row.push(r.audit.as_ref().map_or_else(dash, |a| format!("{:+.2}", a.z)));
            } else {
                row.push(r.matches_ar.map_or_else(dash, |m| if m { "yes".into() } else { "NO".into() }));
            }
            row
        })
        .collect();
    let policy = match report.gamma_policy {
        GammaPolicy::Fixed => format!("γ = {}", report.gamma),
        GammaPolicy::Adaptive => format!("γ ≤ {} (adaptive)", report.gamma),
    };
    let mut out = format!(
        "anyspec demo · {} · {} prompts × ≤ {} tokens · {policy} · temperature {} · {} × {} threads\n",
        report.target,
        report.prompts.len(),
        report.max_tokens,
        report.temperature,
        report.device,
        report.threads,
    );
    if let Some(why) = &report.fallback {
        out.push_str(&format!("note: {why}\n"));
    }
    out.push('\n');
    out.push_str(&table(&header, &rows));

    if report.groups.len() > 1 {
        out.push_str("\nspeedup by category group\n\n");
        let mut header: Vec<&str> = vec!["method"];
        header.extend(report.groups.iter().map(String::as_str));
        header.push("overall");
        let rows: Vec<Vec<String>> = report
            .rows
            .iter()
            .map(|r| {
                let mut row = vec![r.method.clone()];
                row.extend(r.group_speedups.iter().map(|s| format!("{s:.2}×")));
                row.push(format!("{:.2}×", r.speedup));
                row
            })
            .collect();
        out.push_str(&table(&header, &rows));
    }

    out.push_str(&format!(
        "\nverification cost v(k), a pass over k positions ÷ one (k = 1..{}): {}\n",
        report.verify_cost.len(),
        report.verify_cost.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join(" ")
    ));
    if let Some(l) = report.first_layers {
        let trials: Vec<String> =
            report.first_layer_trials.iter().map(|(l, s)| format!("L={l}: {s:.1} tok/s")).collect();
        out.push_str(&format!("self-speculative depth L = {l}, the fastest of {}\n", trials.join(", ")));
    }
    out.push_str(
        "α: acceptance tests passed ÷ taken · c: drafter time per drafted token ÷ autoregressive time per token · \
         theory: speculative-decoding.txt Thm 3.8 with the measured v, E[tokens](α, γ̄) / (γ̄c + v(γ̄+1))\n",
    );
    if sampled {
        out.push_str(
            "α promised: the mean over the same tests of what the rule accepts with, from the target's logits \
             (p(d) for a deterministic draft, Σ min(p, q) for a sampled one) · z: tests passed minus that sum, in \
             standard deviations (|z| < 4 is the rule at work)\n",
        );
    }
    out.push('\n');
    for artifact in &report.artifacts {
        let how = if artifact.built { "built" } else { "cached" };
        out.push_str(&format!("{} ({}, {how}): {}\n", artifact.name, artifact.detail, artifact.path.display()));
    }
    out.push('\n');
    for row in &report.rows {
        if let Some(method) = METHODS.iter().find(|m| m.key == row.key) {
            out.push_str(&format!("{}: {}\n", row.method, method.about));
        }
    }
    for skipped in &report.skipped {
        out.push_str(&format!("not run: {skipped}\n"));
    }
    out.push_str(&format!(
        "\nprompt ({}): {}\nautoregressive output: {}\n",
        report.prompts[0].category,
        report.prompts[0].text.trim(),
        report.sample.trim()
    ));
    out
}
