//! One entry point for every drafter whose tokenizer differs from the target's: [`build`] turns
//! a drafter model, the two tokenizers and the map between their vocabularies into a
//! [`Drafter`] for the algorithm asked for, or for the one [`AlgoRequest::Auto`] picks.
//!
//! ```text
//! Vocabulary ×2 ─► VocabMap ─┐
//! TextTokenizer ×2 ──────────┼─► Pair ─┐
//! target logit width ────────┘         ├─► build(AlgoRequest, …) ─► Built { drafter, choice }
//! drafter Llama, Options ──────────────┘
//! ```
//!
//! Every combination that cannot work (RDK without an affinity matrix, a bridge the pair
//! refuses, an SLRS expansion over its budget) is refused here, before any generation starts.

use anyspec_core::Drafter;
use anyspec_models::{Llama, TextTokenizer};
use anyspec_vocab_map::{VocabMap, Vocabulary};

use crate::error::{Error, Result};
use crate::hetero::auto::{Algo, AutoChoice, PairFacts, choose};
use crate::hetero::bridge::{Bridge, ContextMapping, HeteroConfig, RdkForm};
use crate::hetero::model_drafter::HeteroModelDrafter;
use crate::hetero::slem::SlemDrafter;
use crate::hetero::slrs::{ExpansionPlan, SlrsConfig, SlrsDrafter, StringSpace, TextTreeModel};

/// Which algorithm to draft with: one named, or the one [`choose`] picks for the pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AlgoRequest {
    /// Pick from the vocabulary overlap, the temperature, the drafter's token length on
    /// [`Options::sample_text`] and whether [`Options::rdk`] is given (see [`crate::hetero::auto`]).
    Auto,
    /// This algorithm.
    Fixed(Algo),
}

impl From<Algo> for AlgoRequest {
    fn from(algo: Algo) -> Self {
        AlgoRequest::Fixed(algo)
    }
}

/// The two sides of a drafter–target pair and the map between their vocabularies.
#[derive(Clone, Copy, Debug)]
pub struct Pair<'a> {
    /// The target's vocabulary.
    pub target_vocab: &'a Vocabulary,
    /// The drafter's vocabulary.
    pub drafter_vocab: &'a Vocabulary,
    /// The target's tokenizer.
    pub target_tokenizer: &'a TextTokenizer,
    /// The drafter's tokenizer.
    pub drafter_tokenizer: &'a TextTokenizer,
    /// Target ↔ drafter tokens (`VocabMap::build` or `VocabMap::load` over the two vocabularies).
    pub map: &'a VocabMap,
    /// Width of the target model's logit rows (its `vocab_size`, which may exceed its
    /// tokenizer's vocabulary).
    pub target_rows: usize,
}

/// Text on which [`AlgoRequest::Auto`] measures the drafter's token length when the caller has
/// none of its own (the prompt is better: it is the text the drafter will see).
pub const DEFAULT_SAMPLE_TEXT: &str = "The quick brown fox jumps over the lazy dog, and then it runs into the forest.";

/// Per-algorithm inputs, already loaded and checked by the caller.
#[derive(Clone, Debug)]
pub struct Options {
    /// The RDK redistribution: required for [`Algo::Rdk`]; for [`AlgoRequest::Auto`], its
    /// presence lets the rule pick RDK.
    pub rdk: Option<RdkForm>,
    /// FR shortlist of drafter ids ([`Algo::Tli`] and [`Algo::Rdk`] only): the drafter's LM
    /// head is pruned to it.
    pub shortlist: Option<Vec<u32>>,
    /// How the token-level bridges (union, TLI, RDK) keep the drafter's context.
    pub context: ContextMapping,
    /// Lookahead and budget of [`Algo::Slrs`].
    pub slrs: SlrsConfig,
    /// When the SLRS worst case exceeds the budget, lower the lookahead to the largest that
    /// fits instead of refusing the pair.
    pub slrs_fit_lookahead: bool,
    /// Sampling temperature the drafter will run at ([`AlgoRequest::Auto`] only).
    pub temperature: f32,
    /// Text the drafter's mean token length is measured on ([`AlgoRequest::Auto`] only).
    pub sample_text: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rdk: None,
            shortlist: None,
            context: ContextMapping::default(),
            slrs: SlrsConfig::default(),
            slrs_fit_lookahead: false,
            temperature: 0.0,
            sample_text: DEFAULT_SAMPLE_TEXT.to_owned(),
        }
    }
}

/// A drafter from [`build`], and which algorithm it runs and why.
pub struct Built {
    /// The drafter, ready for `anyspec_core::generate`.
    pub drafter: Box<dyn Drafter>,
    /// The algorithm; for [`AlgoRequest::Auto`] with the rule's reason.
    pub choice: AutoChoice,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Built").field("choice", &self.choice).finish_non_exhaustive()
    }
}

impl AlgoRequest {
    /// The algorithm this request stands for on `pair`: a fixed one as it is, `Auto` by the rule
    /// of [`choose`] over the pair's overlap, `temperature`, the drafter's bytes per token on
    /// `sample_text` and whether an affinity matrix is at hand.
    ///
    /// # Errors
    /// [`Error::Model`] when the drafter's tokenizer cannot encode `sample_text`.
    pub fn resolve(
        self,
        pair: &Pair<'_>,
        temperature: f32,
        sample_text: &str,
        has_affinity: bool,
    ) -> Result<AutoChoice> {
        Ok(match self {
            AlgoRequest::Fixed(algo) => AutoChoice { algo, reason: format!("{algo} was asked for") },
            AlgoRequest::Auto => choose(&PairFacts {
                intersection: pair.map.intersection(),
                target_vocab: pair.target_vocab.token_count(),
                drafter_vocab: pair.drafter_vocab.token_count(),
                temperature,
                drafter_mean_token_bytes: bytes_per_token(sample_text, pair.drafter_tokenizer)?,
                has_affinity,
                slrs_available: true,
            }),
        })
    }
}

/// The drafter `request` asks for over `pair`, with `model` as the drafter's weights.
///
/// # Errors
/// [`Error::AlgoInput`] for RDK without [`Options::rdk`], or an input the fixed algorithm does not
/// use; [`Error::UnusableBridge`] for a bridge the pair refuses (TLI with no shared token);
/// [`Error::SlrsBudget`] for an SLRS expansion over its budget; model and tokenizer errors.
pub fn build(request: AlgoRequest, pair: &Pair<'_>, model: Llama, options: Options) -> Result<Built> {
    let choice = request.resolve(pair, options.temperature, &options.sample_text, options.rdk.is_some())?;
    let algo = choice.algo;
    if let AlgoRequest::Fixed(_) = request {
        if options.rdk.is_some() && algo != Algo::Rdk {
            return Err(unused(algo, "an affinity matrix (Options::rdk), which only rdk uses"));
        }
        if options.shortlist.is_some() && !matches!(algo, Algo::Tli | Algo::Rdk) {
            return Err(unused(algo, "a shortlist (Options::shortlist), which prunes the drafter for tli or rdk only"));
        }
    }
    let drafter: Box<dyn Drafter> = match algo {
        Algo::Slem => Box::new(SlemDrafter::new(model, pair.target_tokenizer.clone(), pair.drafter_tokenizer.clone())?),
        Algo::Slrs => {
            let drafter_rows = model.config().vocab_size.max(pair.drafter_vocab.len());
            let space = StringSpace::new(
                &pair.target_vocab.text_surfaces(),
                pair.target_rows,
                &pair.drafter_vocab.text_surfaces(),
                drafter_rows,
            )?;
            let mut config = options.slrs;
            if options.slrs_fit_lookahead {
                let plan = ExpansionPlan::new(&space);
                if plan.worst_case(config.lookahead) > config.budget {
                    // When not even one drafter token fits, SlrsDrafter::new refuses the pair and
                    // says what budget would do.
                    if let Some(fits) = plan.largest_lookahead_within(config.budget) {
                        config.lookahead = Some(fits);
                    }
                }
            }
            let tree = TextTreeModel::new(model, pair.target_tokenizer.clone(), pair.drafter_tokenizer.clone())?;
            Box::new(SlrsDrafter::new(tree, space, config)?)
        }
        Algo::Union | Algo::Tli | Algo::Rdk => {
            let bridge = match algo {
                Algo::Union => Bridge::Union,
                Algo::Tli => Bridge::Tli,
                _ => Bridge::Rdk(options.rdk.ok_or_else(|| {
                    Error::AlgoInput {
                        algo: algo.name(),
                        problem: "needs a token-affinity matrix over the target's vocabulary (Options::rdk; \
                              anyspec_affinity builds one from a corpus)"
                            .into(),
                    }
                })?),
            };
            let mut config = HeteroConfig::new(bridge);
            config.context = options.context;
            config.shortlist = options.shortlist;
            Box::new(HeteroModelDrafter::new(
                model,
                config,
                pair.map.id_map()?,
                pair.target_tokenizer.clone(),
                pair.drafter_tokenizer.clone(),
                pair.target_rows,
            )?)
        }
    };
    Ok(Built { drafter, choice })
}

fn unused(algo: Algo, what: &str) -> Error {
    Error::AlgoInput { algo: algo.name(), problem: format!("does not use {what}; drop it or choose that algorithm") }
}

/// Bytes of text per drafter token on `text`: how long the drafter's tokens are on real text
/// (a vocabulary-wide mean would be dominated by the 256 single-byte tokens of a small
/// byte-level vocabulary).
fn bytes_per_token(text: &str, tokenizer: &TextTokenizer) -> Result<f64> {
    let tokens = tokenizer.encode_continuation(text)?.len();
    Ok(if tokens == 0 { 0.0 } else { text.len() as f64 / tokens as f64 })
}
