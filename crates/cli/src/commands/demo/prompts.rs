//! The demo's prompts: read from the assets, encoded for the target (through its chat template
//! for SmolLM2), and spread over the category groups when only some are used.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

use super::assets::Assets;

/// A prompt of the demo, ready to generate from.
pub(super) struct Prompt {
    pub(super) category: String,
    pub(super) group: String,
    /// The user's text (before any chat template).
    pub(super) text: String,
    pub(super) ids: Vec<u32>,
}

/// One prompt of `assets/demo/specbench-prompts.json`.
#[derive(Deserialize)]
struct PromptEntry {
    pub(super) category: String,
    pub(super) group: String,
    pub(super) prompt: String,
}

/// `count` prompts spread over the list (every category group represented when it can be).
pub(super) fn spread(prompts: Vec<Prompt>, count: usize) -> Vec<Prompt> {
    let n = prompts.len();
    let picks: Vec<usize> = (0..count).map(|i| i * n / count).collect();
    prompts.into_iter().enumerate().filter(|(i, _)| picks.contains(i)).map(|(_, p)| p).collect()
}

/// The prompts: for the tiny target, `prompts.json` (Gutenberg passages, continued as text);
/// for SmolLM2, `specbench-prompts.json` through the model's chat template.
pub(super) fn read_prompts(dir: &Path, assets: &Assets, tiny: bool) -> anyhow::Result<Vec<Prompt>> {
    let entries: Vec<PromptEntry> = if tiny {
        let path = dir.join("prompts.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let prompts: Vec<String> =
            serde_json::from_str(&text).with_context(|| format!("{} is not a JSON list of strings", path.display()))?;
        prompts
            .into_iter()
            .map(|prompt| PromptEntry { category: "gutenberg".into(), group: "gutenberg".into(), prompt })
            .collect()
    } else {
        let path = dir.join("specbench-prompts.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a JSON list of {{category, group, prompt}} objects", path.display()))?
    };
    if entries.is_empty() || entries.iter().any(|p| p.prompt.trim().is_empty()) {
        bail!("{}: the prompt list must hold at least one non-empty prompt", dir.display());
    }
    entries
        .into_iter()
        .map(|entry| {
            let text =
                if tiny { entry.prompt.clone() } else { assets.target_checkpoint.chat_prompt(None, &entry.prompt)? };
            let ids = assets.target_tokenizer.encode(&text)?;
            Ok(Prompt { category: entry.category, group: entry.group, text: entry.prompt, ids })
        })
        .collect()
}
