//! The demo's small models and prompts, compiled into the binary.
//!
//! An installed `anyspec` (`cargo install --path crates/cli`) has no source tree to read
//! `assets/demo/` from, so the files the demo reads travel inside the binary (about 28 MB: the
//! tiny target and its three drafters, the Gutenberg corpus, SmolLM2's answers that its
//! dictionary is built from, SmolLM2's small drafter and EAGLE drafter, and the prompts) and are unpacked into the cache's `demo-assets/<digest>/` on first use. Embedding
//! is worth it: the demo then works offline from any directory, and the alternative, fetching
//! them, would need a place to fetch from that no one has to keep up. The paths are relative to
//! this file and read at compile time only; a rebuilt `assets/demo` (`cargo xtask demo-assets`)
//! is picked up by the next build, and gets a new directory because the digest changes.

use std::path::{Path, PathBuf};

use anyspec_model_store::{BundleFile, layout::DEMO_ASSETS, unpack_bundle};

macro_rules! bundled {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_bytes!(concat!("../../../../../assets/demo/", $name)))),*]
    };
}

/// Every file of `assets/demo/` that the demo reads.
const FILES: &[BundleFile] = bundled![
    "prompts.json",
    "specbench-prompts.json",
    "corpus.txt.gz",
    "target-outputs.txt.gz",
    "eagle-smollm2.safetensors",
    "target/config.json",
    "target/model.safetensors",
    "target/tokenizer.json",
    "drafter-same/config.json",
    "drafter-same/model.safetensors",
    "drafter-same/tokenizer.json",
    "drafter-sp/config.json",
    "drafter-sp/model.safetensors",
    "drafter-sp/tokenizer.json",
    "drafter-byte/config.json",
    "drafter-byte/model.safetensors",
    "drafter-byte/tokenizer.json",
    "drafter-smollm2/config.json",
    "drafter-smollm2/model.safetensors",
    "drafter-smollm2/tokenizer.json",
];

/// The bundled assets as a directory under `cache_root`, unpacked on first use.
pub(super) fn assets_dir(cache_root: &Path) -> anyhow::Result<PathBuf> {
    let unpacked = unpack_bundle(cache_root, DEMO_ASSETS, FILES)?;
    if unpacked.unpacked {
        tracing::info!("unpacked the demo's bundled assets into {}", unpacked.path.display());
    }
    Ok(unpacked.path)
}
