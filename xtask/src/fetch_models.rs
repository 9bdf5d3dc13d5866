//! `cargo xtask fetch-models`: fetches the known model files into the model cache (see
//! `anyspec-model-store`) and prints where they are, one path per line on stdout, so that
//! `ANYSPEC_SMOLLM2_GGUF=$(cargo xtask fetch-models --model smollm2-135m-instruct-q4_1)` works.

use std::path::{Path, PathBuf};

use anyhow::Context;
use anyspec_model_store::{ModelStore, SMOLLM2_135M_INSTRUCT_Q4_1, cache_root, select_known};

/// Options of `fetch-models`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Only this model (default: every known model).
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// Re-hash every file, even one already in the cache (a corrupt one is removed: fetch again).
    #[arg(long)]
    verify: bool,
    /// The cache directory (default: $ANYSPEC_CACHE, else $XDG_CACHE_HOME/anyspec, else
    /// $HOME/.cache/anyspec).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// Progress goes to stderr; stdout carries only the paths.
#[allow(clippy::print_stderr, clippy::print_stdout)]
pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let store = ModelStore::new(cache_root(args.cache_dir.as_deref())?);
    for model in select_known(args.model.as_deref())? {
        let path = store
            .fetch_checked(model, args.verify, &mut |step: &str| eprintln!("{}: {step}", model.name))
            .with_context(|| format!("fetching {}", model.name))?;
        println!("{}", path.display());
    }
    Ok(())
}

/// `flag` (a `--model` path) if given, else SmolLM2-135M-Instruct Q4_1 from the model cache, or
/// an error that says how to fetch it.
pub(crate) fn smollm2_or(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    match flag {
        Some(path) => Ok(path.to_path_buf()),
        None => ModelStore::new(cache_root(None)?).locate(&SMOLLM2_135M_INSTRUCT_Q4_1).context(
            "SmolLM2-135M-Instruct Q4_1 is not in the model cache; run `cargo xtask fetch-models` or pass --model",
        ),
    }
}
