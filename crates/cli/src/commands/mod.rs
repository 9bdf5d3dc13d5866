//! One module per subcommand: its clap arguments and its `run`.

pub(crate) mod affinity;
pub(crate) mod cache;
pub(crate) mod completions;
pub(crate) mod demo;
pub(crate) mod dict;
pub(crate) mod dynaspec;
pub(crate) mod generate;
pub(crate) mod shortlist;
pub(crate) mod simulate;
pub(crate) mod theory;
pub(crate) mod vocab;
