//! The methods the demo compares: the table of rows ([`METHODS`]), which of them `--methods`
//! selects, and the drafter each builds for one prompt.

use anyhow::{Context, bail};
use anyspec_core::{Drafter, GammaTuner, GenerationConfig};
use anyspec_drafters::hetero::{self, AlgoRequest};
use anyspec_drafters::slrs::SlrsConfig;
use anyspec_drafters::{
    Algo, DictionaryDrafter, Hybrid, HybridOrder, LookupFirst, ModelDrafter, PromptLookup, PromptLookupConfig, RdkForm,
    TokenNgramDrafter,
};
use anyspec_dynaspec::{HeadPolicy, ShortlistDrafter};
use anyspec_models::{FeatureTap, LlamaTarget};

use super::assets::{Assets, HeteroDrafter};
use super::prompts::Prompt;
use super::timing::{Setup, Timed, run_one};

/// A method's drafter for one prompt; `None` decodes autoregressively.
type MaybeDrafter = Option<Box<dyn Drafter>>;

/// The EAGLE drafter for one prompt and the tap the target must record its features into.
fn eagle(setup: &Setup) -> anyhow::Result<(ShortlistDrafter, FeatureTap)> {
    let feature = setup.assets.eagle.as_ref().map_err(|why| anyhow::anyhow!("{why}"))?;
    let (policy, blocks) = setup.eagle_head.clone().context("the EAGLE drafter's head was not set up")?;
    let tap = FeatureTap::new();
    Ok((ShortlistDrafter::features(feature.clone(), tap.clone(), policy, Some(blocks))?, tap))
}

/// How a method drafts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Autoregressive,
    PromptLookup,
    Dictionary,
    Hybrid,
    /// The token n-gram model of the target's earlier answers.
    Ngram,
    /// Prompt lookup first, the token n-gram model when it has nothing.
    HybridNgram,
    /// The target's first L layers and its head.
    FirstLayers,
    /// The same drafter with its head evaluated only on DynaSpec's routed shortlist.
    DynaSpec,
    /// The EAGLE feature drafter: one layer over the target's own features, the target's head.
    Eagle,
    /// Prompt lookup first, the EAGLE drafter when it has nothing.
    HybridEagle,
    /// A smaller model with the target's tokenizer.
    Same,
    /// The token-level drafter with another tokenizer, through this algorithm.
    Hetero(Algo),
    /// The byte-level drafter through SLRS.
    Slrs,
    /// The token-level drafter through the algorithm `anyspec generate --algo auto` picks.
    Auto,
}

/// A row of the table.
pub(super) struct Method {
    /// What `--methods` calls it.
    pub(super) key: &'static str,
    pub(super) kind: Kind,
    /// One line for the legend under the table.
    pub(super) about: &'static str,
}

/// Every method the demo compares, autoregressive first (the reference of `speedup` and
/// `matches_ar`).
pub(super) const METHODS: &[Method] = &[
    Method { key: "ar", kind: Kind::Autoregressive, about: "one target forward pass per token" },
    Method {
        key: "prompt",
        kind: Kind::PromptLookup,
        about: "the tokens that followed the last earlier occurrence of the context's last 3..1 tokens",
    },
    Method {
        key: "dict",
        kind: Kind::Dictionary,
        about: "DictSpec n-gram dictionary of the target's tokenizer, built from the target's own answers to other \
                prompts (assets/demo/target-outputs.txt.gz; the tiny target: the Gutenberg corpus.txt.gz)",
    },
    Method { key: "hybrid", kind: Kind::Hybrid, about: "prompt lookup first, the dictionary when it has nothing" },
    Method {
        key: "ngram",
        kind: Kind::Ngram,
        about: "token n-gram model (orders 1..4) of the dictionary's text, drafting by chaining each longest \
                suffix's most frequent next token (ours; llama.cpp's static lookup cache is the same idea)",
    },
    Method {
        key: "hybrid-ngram",
        kind: Kind::HybridNgram,
        about: "prompt lookup first, the token n-gram model when it has nothing (ours)",
    },
    Method {
        key: "self",
        kind: Kind::FirstLayers,
        about: "the target's first L layers, then its final norm and head: an early-exit drafter, no training",
    },
    Method {
        key: "dynaspec",
        kind: Kind::DynaSpec,
        about: "the self-speculative drafter with its head only on DynaSpec's routed clusters (dynaspec.txt \
                §4, Eq. 3's position-aware budget k₀ = 64, k₁ = 32); the router is built from the \
                dictionary's text on first use",
    },
    Method {
        key: "eagle",
        kind: Kind::Eagle,
        about: "EAGLE-style feature drafter: one decoder layer over [E(x), f] predicts the target's next \
                final-norm hidden state f from its last one, drafting through the target's own head on its \
                8,192 most frequent tokens (FR-Spec; assets/demo/eagle-smollm2.safetensors, trained on the \
                target's answers by `anyspec dynaspec eagle`)",
    },
    Method {
        key: "hybrid-eagle",
        kind: Kind::HybridEagle,
        about: "prompt lookup first, the EAGLE drafter when it has nothing (ours)",
    },
    Method { key: "same", kind: Kind::Same, about: "a smaller model sharing the target's tokenizer" },
    Method {
        key: "union",
        kind: Kind::Hetero(Algo::Union),
        about: "the drafter over the union of vocabularies; drafts outside the target's are rejected",
    },
    Method {
        key: "tli",
        kind: Kind::Hetero(Algo::Tli),
        about: "the drafter restricted to the shared tokens, its LM head pruned to them",
    },
    Method {
        key: "rdk",
        kind: Kind::Hetero(Algo::Rdk),
        about: "TLI, then redistributed over the target's vocabulary by the affinity matrix (exact)",
    },
    Method {
        key: "slem",
        kind: Kind::Hetero(Algo::Slem),
        about: "the drafter's text re-tokenized with the target tokenizer, verified by exact match",
    },
    Method {
        key: "slrs",
        kind: Kind::Slrs,
        about: "drafter-byte spells target tokens byte by byte; string-level rejection sampling against ψ \
                (at temperature > 0 the lookahead is cut so ψ costs at most 500 drafter positions per token)",
    },
    Method {
        key: "auto",
        kind: Kind::Auto,
        about: "the algorithm `anyspec generate --algo auto` picks for the drafter",
    },
];

/// Drafter positions SLRS may score per drafted token when sampling (temperature > 0). At
/// temperature 0 the expansion collapses to the walk's own path and the default budget applies.
///
/// With drafter-byte, 500 allows a lookahead of 3 bytes (488 positions); 4 bytes would be 1,791.
/// Each position costs about one drafter forward position even batched as a tree, so at 4 bytes
/// the row took 125 s of the demo's time (6 prompts × 64 tokens at T = 0.8) for 1.32 tokens per
/// step, against 1.10 at 2 bytes.
pub(super) const SAMPLED_SLRS_BUDGET: u64 = 500;

/// Builds a method's drafter for one prompt, and the feature tap the target must fill when the
/// drafter reads the target's features.
fn build_drafter(method: &Method, setup: &Setup) -> anyhow::Result<(MaybeDrafter, Option<FeatureTap>)> {
    match method.kind {
        Kind::Eagle => {
            let (drafter, tap) = eagle(setup)?;
            return Ok((Some(Box::new(drafter)), Some(tap)));
        }
        Kind::HybridEagle => {
            let (drafter, tap) = eagle(setup)?;
            let prompt = PromptLookup::new(PromptLookupConfig::default())?;
            return Ok((Some(Box::new(LookupFirst::new(prompt, drafter))), Some(tap)));
        }
        _ => {}
    }
    let a = &setup.assets;
    let drafter: MaybeDrafter = match method.kind {
        Kind::Autoregressive => None,
        Kind::PromptLookup => Some(Box::new(PromptLookup::new(PromptLookupConfig::default())?)),
        Kind::Dictionary => Some(Box::new(DictionaryDrafter::new(a.dictionary.clone()))),
        Kind::Hybrid => {
            let prompt = PromptLookup::new(PromptLookupConfig::default())?;
            let dictionary = DictionaryDrafter::new(a.dictionary.clone());
            Some(Box::new(Hybrid::new(dictionary, prompt, HybridOrder::PromptFirst)))
        }
        Kind::Ngram => Some(Box::new(TokenNgramDrafter::new(a.ngram.clone()))),
        Kind::HybridNgram => {
            let prompt = PromptLookup::new(PromptLookupConfig::default())?;
            Some(Box::new(Hybrid::new(TokenNgramDrafter::new(a.ngram.clone()), prompt, HybridOrder::PromptFirst)))
        }
        Kind::FirstLayers => {
            let (_, model) = setup.first_layers.as_ref().context("the self-speculative drafter was not set up")?;
            Some(Box::new(ModelDrafter::new(model.clone(), a.target_rows)))
        }
        Kind::DynaSpec => {
            let (_, model) = setup.first_layers.as_ref().context("the self-speculative drafter was not set up")?;
            let (shortlister, blocks) = setup.dynaspec.as_ref().context("the DynaSpec router was not set up")?;
            let policy = HeadPolicy::Dynamic(Box::new(shortlister.clone()));
            Some(Box::new(ShortlistDrafter::with_head_blocks(model.clone(), policy, a.target_rows, blocks.clone())?))
        }
        Kind::Same => {
            let (_, model) = a.same.as_ref().context("this target has no smaller model with its tokenizer")?;
            Some(Box::new(ModelDrafter::new(model.clone(), a.target_rows)))
        }
        Kind::Hetero(algo) => Some(hetero(a, &a.token_drafter, algo)?),
        Kind::Slrs => Some(hetero(a, &a.byte_drafter, Algo::Slrs)?),
        Kind::Auto => Some(hetero(a, &a.token_drafter, a.auto_algo)?),
        Kind::Eagle | Kind::HybridEagle => unreachable!("built above"),
    };
    Ok((drafter, None))
}

/// The drafter `d` (another tokenizer than the target's) through `algo`.
fn hetero(a: &Assets, d: &HeteroDrafter, algo: Algo) -> anyhow::Result<Box<dyn Drafter>> {
    let pair = hetero::Pair {
        target_vocab: &a.target_vocabulary,
        drafter_vocab: &d.vocabulary,
        target_tokenizer: &a.target_tokenizer,
        drafter_tokenizer: &d.tokenizer,
        map: &d.map,
        target_rows: a.target_rows,
    };
    let rdk = (algo == Algo::Rdk).then(|| RdkForm::Exact(a.affinity.matrix().clone()));
    let options = hetero::Options {
        rdk,
        slrs: SlrsConfig { lookahead: None, budget: a.slrs_budget, ..SlrsConfig::default() },
        slrs_fit_lookahead: true,
        ..hetero::Options::default()
    };
    Ok(hetero::build(AlgoRequest::Fixed(algo), &pair, d.model.clone(), options)?.drafter)
}

/// The row's name: the drafter behind it named where there is one.
pub(super) fn method_name(method: &Method, setup: &Setup) -> String {
    let a = &setup.assets;
    match method.kind {
        Kind::Autoregressive => "autoregressive".into(),
        Kind::PromptLookup => "prompt lookup".into(),
        Kind::Dictionary => "dictionary".into(),
        Kind::Hybrid => "hybrid (prompt lookup + dictionary)".into(),
        Kind::Ngram => "token n-gram model".into(),
        Kind::HybridNgram => "hybrid (prompt lookup + n-gram model)".into(),
        Kind::FirstLayers => match &setup.first_layers {
            Some((l, _)) => format!("self-speculative, {}", crate::output::first_layers(*l)),
            None => "self-speculative".into(),
        },
        Kind::DynaSpec => match &setup.first_layers {
            Some((l, _)) => format!("DynaSpec-PA shortlist, {}", crate::output::first_layers(*l)),
            None => "DynaSpec-PA shortlist".into(),
        },
        Kind::Eagle => format!("EAGLE, 1 layer, FR-{} head", super::assets::EAGLE_HEAD_TOKENS),
        Kind::HybridEagle => "hybrid (prompt lookup + EAGLE)".into(),
        Kind::Same => "model, same tokenizer".into(),
        Kind::Hetero(algo) => format!("{} → {}", algo_label(algo), a.token_drafter.name),
        Kind::Slrs => format!("SLRS → {}", a.byte_drafter.name),
        Kind::Auto => format!("auto ({}) → {}", algo_label(a.auto_algo), a.token_drafter.name),
    }
}

fn algo_label(algo: Algo) -> &'static str {
    match algo {
        Algo::Union => "union",
        Algo::Tli => "TLI",
        Algo::Rdk => "RDK",
        Algo::Slem => "SLEM",
        Algo::Slrs => "SLRS",
    }
}

/// The methods `--methods` names, in table order, autoregressive first; without the flag, every
/// method the target has (the same-tokenizer model only where one ships, the EAGLE rows only
/// where a drafter is trained for the target: `eagle` is `Err(why)` otherwise).
pub(super) fn select_methods(
    keys: Option<&[String]>,
    has_same: bool,
    eagle: Result<(), &str>,
) -> anyhow::Result<Vec<&'static Method>> {
    let is_eagle = |m: &Method| matches!(m.kind, Kind::Eagle | Kind::HybridEagle);
    let available = |m: &Method| (m.kind != Kind::Same || has_same) && (!is_eagle(m) || eagle.is_ok());
    let Some(keys) = keys else { return Ok(METHODS.iter().filter(|m| available(m)).collect()) };
    let known: Vec<&str> = METHODS.iter().map(|m| m.key).collect();
    if let Some(unknown) = keys.iter().find(|k| !known.contains(&k.trim())) {
        bail!("--methods: unknown method {unknown:?}; choose from {}", known[1..].join(", "));
    }
    if keys.iter().any(|k| k.trim() == "same") && !has_same {
        bail!("--methods same: no smaller model with SmolLM2's tokenizer ships; use `self`, or --model tiny");
    }
    if let (Some(key), Err(why)) = (keys.iter().find(|k| matches!(k.trim(), "eagle" | "hybrid-eagle")), eagle) {
        bail!("--methods {}: {why}; the EAGLE drafter ships for SmolLM2-135M-Instruct Q4_1 only", key.trim());
    }
    Ok(METHODS
        .iter()
        .enumerate()
        .filter(|(i, m)| *i == 0 || keys.iter().any(|k| k.trim() == m.key))
        .map(|(_, m)| m)
        .collect())
}

/// One method's runs: its γ tuner lives across the prompts.
pub(super) struct MethodRun {
    pub(super) method: &'static Method,
    pub(super) name: String,
    pub(super) tuner: Option<GammaTuner>,
}

impl MethodRun {
    pub(super) fn new(method: &'static Method, setup: &Setup, config: &GenerationConfig) -> Self {
        MethodRun { method, name: method_name(method, setup), tuner: setup.tuner(config) }
    }

    /// Generates from `prompt` with a fresh drafter (drafters keep per-sequence state).
    pub(super) fn generate(
        &mut self,
        setup: &Setup,
        target: &mut LlamaTarget,
        prompt: &Prompt,
        config: &GenerationConfig,
        seed: u64,
    ) -> anyhow::Result<Timed> {
        let name = &self.name;
        let (mut drafter, tap) =
            build_drafter(self.method, setup).with_context(|| format!("building the {name} drafter"))?;
        let drafter = drafter.as_deref_mut().map(|d| d as &mut dyn Drafter);
        // Only a feature drafter's row has the target record its features.
        target.set_feature_tap(tap);
        let result = run_one(target, drafter, &prompt.ids, config, self.tuner.as_mut(), seed);
        target.set_feature_tap(None);
        result.with_context(|| format!("generating with {name}"))
    }
}
