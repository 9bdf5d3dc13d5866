//! `cargo xtask fetch-models`: fetches the known model files into the model cache (see
//! `anyspec-model-store`) and prints where they are, one path per line on stdout, so that
//! `ANYSPEC_SMOLLM2_GGUF=$(cargo xtask fetch-models --model smollm2-135m-instruct-q4_1)` works.

use std::path::PathBuf;

use anyhow::Context;
use anyspec_model_store::{KnownModel, ModelStore, cache_root, known_models, require_known};

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
    let models: Vec<&KnownModel> = match &args.model {
        Some(name) => vec![require_known(name)?],
        None => known_models().iter().collect(),
    };
    for model in models {
        let path = store
            .fetch(model, &mut |step: &str| eprintln!("{}: {step}", model.name))
            .with_context(|| format!("fetching {}", model.name))?;
        if args.verify {
            eprintln!("{}: checking the sha256 of {}", model.name, path.display());
            store.verify(model).with_context(|| format!("verifying {}", model.name))?;
            eprintln!("{}: sha256 {} as pinned", model.name, model.file_sha256);
        }
        println!("{}", path.display());
    }
    Ok(())
}
