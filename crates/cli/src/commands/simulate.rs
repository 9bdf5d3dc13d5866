//! `anyspec simulate`: every verification rule on toy Markov models, measured against theory.

use anyspec_core::Progress;

/// Runs the draft → verify engine on toy Markov target/drafter pairs for every rule and prints
/// measured acceptance, tokens per step and the theoretical values side by side.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(_args: Args, _progress: &dyn Progress) -> anyhow::Result<()> {
    anyhow::bail!("not written yet")
}
