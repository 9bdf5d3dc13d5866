//! `anyspec theory`: closed-form expectations for an acceptance rate and draft length.

use anyspec_core::theory::TheoryReport;

use crate::args::flag_error;
use crate::output::{print_json, print_text, table};

/// Expected tokens per verification step, walltime improvement factor and the best γ
/// (speculative-decoding.txt Eq. 1 and Theorem 3.8).
#[derive(Debug, clap::Args)]
#[command(allow_negative_numbers = true)]
pub(crate) struct Args {
    /// Acceptance rate α in [0, 1]: the expected share of drafted tokens the target accepts.
    #[arg(long)]
    alpha: f64,
    /// Draft length γ ≥ 1: tokens drafted per verification step.
    #[arg(long)]
    gamma: usize,
    /// Cost c ≥ 0 of one drafter step relative to one target step (0 = free drafter, such as a
    /// dictionary).
    #[arg(long, default_value_t = 0.0)]
    cost: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let report = TheoryReport::new(args.alpha, args.gamma, args.cost).map_err(flag_error)?;
    if args.json {
        return print_json(&report);
    }
    let rows = vec![
        vec!["acceptance rate α".into(), format!("{}", report.alpha)],
        vec!["draft length γ".into(), format!("{}", report.gamma)],
        vec!["drafter cost c".into(), format!("{}", report.cost)],
        vec!["expected tokens per step".into(), format!("{:.4}", report.expected_tokens_per_step)],
        vec!["walltime improvement factor".into(), format!("{:.4}×", report.improvement_factor)],
        vec!["best γ (1..=64)".into(), format!("{}", report.best_gamma)],
        vec!["improvement factor at best γ".into(), format!("{:.4}×", report.best_improvement_factor)],
    ];
    print_text(&table(&["quantity", "value"], &rows))
}
