//! Building a model drafter whose tokenizer differs from the target's, once for every command
//! that needs one (`anyspec generate --algo`, `anyspec demo`).
//!
//! Commands load their inputs (checkpoints, vocabulary map, affinity matrix, shortlist) with
//! their own flag names in the errors; this module turns loaded inputs into a
//! [`Drafter`] for one [`Algo`].

use anyhow::Context;
use anyspec_core::Drafter;
use anyspec_drafters::hetero::ContextMapping;
use anyspec_drafters::slrs::{ExpansionPlan, SlrsConfig, SlrsDrafter, StringSpace, TextTreeModel};
use anyspec_drafters::{Algo, Bridge, HeteroConfig, HeteroModelDrafter, RdkForm, SlemDrafter};
use anyspec_models::{Llama, TextTokenizer};
use anyspec_vocab_map::{TokenKind, VocabMap, Vocabulary};

/// The two sides of a pair and the map between them.
pub(crate) struct Pair<'a> {
    pub(crate) target_vocab: &'a Vocabulary,
    pub(crate) drafter_vocab: &'a Vocabulary,
    pub(crate) target_tokenizer: &'a TextTokenizer,
    pub(crate) drafter_tokenizer: &'a TextTokenizer,
    pub(crate) map: &'a VocabMap,
    /// Width of the target model's logit rows (may exceed its tokenizer's vocabulary).
    pub(crate) target_rows: usize,
}

/// Per-algorithm options, already loaded and checked by the caller.
#[derive(Default)]
pub(crate) struct Options {
    /// The RDK redistribution (required for [`Algo::Rdk`]).
    pub(crate) rdk: Option<RdkForm>,
    /// FR shortlist of drafter ids for TLI / RDK.
    pub(crate) shortlist: Option<Vec<u32>>,
    /// How the token-level bridges keep the drafter's context.
    pub(crate) context: ContextMapping,
    /// Lookahead and budget of SLRS.
    pub(crate) slrs: SlrsConfig,
    /// When the SLRS worst case exceeds the budget, lower the lookahead to the largest that fits
    /// instead of refusing (the demo's choice; `generate` refuses and names the lookahead).
    pub(crate) slrs_fit_lookahead: bool,
}

/// The drafter for `algo` over `pair`, with `model` as the drafter's weights.
///
/// # Errors
/// Every combination that cannot work (RDK without an affinity matrix, a bridge the pair
/// refuses, an SLRS expansion over budget), before any generation starts.
pub(crate) fn build(algo: Algo, pair: &Pair<'_>, model: Llama, options: Options) -> anyhow::Result<Box<dyn Drafter>> {
    let drafter: Box<dyn Drafter> = match algo {
        Algo::Slem => Box::new(SlemDrafter::new(model, pair.target_tokenizer.clone(), pair.drafter_tokenizer.clone())?),
        Algo::Slrs => {
            let drafter_rows = model.config().vocab_size.max(pair.drafter_vocab.len());
            let space = string_space(pair.target_vocab, pair.target_rows, pair.drafter_vocab, drafter_rows)?;
            let mut config = options.slrs;
            if options.slrs_fit_lookahead {
                let plan = ExpansionPlan::new(&space);
                if plan.worst_case(config.lookahead) > config.budget {
                    config.lookahead = Some(plan.largest_lookahead_within(config.budget).with_context(|| {
                        format!("slrs: not even one drafter token fits a budget of {} positions", config.budget)
                    })?);
                }
            }
            let tree = TextTreeModel::new(model, pair.target_tokenizer.clone(), pair.drafter_tokenizer.clone())?;
            Box::new(SlrsDrafter::new(tree, space, config)?)
        }
        Algo::Union | Algo::Tli | Algo::Rdk => {
            let bridge = match algo {
                Algo::Union => Bridge::Union,
                Algo::Tli => Bridge::Tli,
                _ => Bridge::Rdk(options.rdk.context(
                    "rdk needs a token-affinity matrix over the target's vocabulary \
                     (build one with `anyspec affinity build --tokenizer <target>/tokenizer.json --corpus ...`)",
                )?),
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
    Ok(drafter)
}

/// The SLRS string space of a pair: every non-special token's byte surface, by id.
fn string_space(
    target: &Vocabulary,
    target_rows: usize,
    drafter: &Vocabulary,
    drafter_rows: usize,
) -> anyhow::Result<StringSpace> {
    let surfaces = |vocab: &Vocabulary| -> Vec<Option<Vec<u8>>> {
        (0..vocab.len() as u32)
            .map(|id| match vocab.token(id) {
                Some(token) if token.kind != TokenKind::Special => vocab.surface(id).map(<[u8]>::to_vec),
                _ => None,
            })
            .collect()
    };
    let (t, d) = (surfaces(target), surfaces(drafter));
    Ok(StringSpace::new(&borrow(&t), target_rows, &borrow(&d), drafter_rows)?)
}

/// Borrowed surfaces, the form `StringSpace::new` takes.
fn borrow(surfaces: &[Option<Vec<u8>>]) -> Vec<Option<&[u8]>> {
    surfaces.iter().map(Option::as_deref).collect()
}
