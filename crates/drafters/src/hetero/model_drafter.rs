//! [`HeteroModelDrafter`]: a model drafter with another tokenizer than the target's, reaching
//! the target through a token-level [`Bridge`].

use anyspec_core::projection::{ABSENT, IdMap, rdk_exact_point_argmax, union_projection};
use anyspec_core::sampling::{argmax, checked_argmax, logits_to_probs, sample};
use anyspec_core::{Draft, DraftOrigin, Drafter, SamplingConfig};
use anyspec_models::{Llama, TextTokenizer};
use rand::RngCore;

use crate::error::{Error, Result};
use crate::hetero::bridge::{Bridge, ContextMapping, HeteroConfig, RdkForm};
use crate::hetero::context::ContextSync;
use crate::hetero::source::{BurnDrafterModel, DrafterModel};
use crate::hetero::text::{encode_after, text_after};

/// A model drafter whose tokenizer differs from the target's, reaching the target through a
/// token-level [`Bridge`] (union, TLI or RDK).
///
/// The drafter keeps its own context in its own ids (see the `hetero` module): the prompt and the
/// target's tokens are re-tokenized through text, drafted tokens are reused one for one, and
/// its KV cache is kept over the common prefix. Each drafted token is drawn from the bridge's
/// distribution over target ids and the draft carries exactly those distributions, so
/// speculative sampling preserves the target's distribution (at temperature 0 the draft is the
/// arg-max of the same distribution, verified by exact match).
///
/// With top-k / top-p, the transform is applied to the logits the bridge can use (after
/// restriction to the kept rows), which defines a different but equally valid drafter; the
/// reported distribution is always the one sampled from.
#[derive(Clone, Debug)]
pub struct HeteroModelDrafter<M = BurnDrafterModel> {
    model: M,
    bridge: Bridge,
    map: IdMap,
    target_to_drafter: Vec<u32>,
    /// Drafter rows computed when the head is pruned, and the target id of each.
    kept: Option<(Vec<u32>, Vec<u32>)>,
    target_tokenizer: TextTokenizer,
    drafter_tokenizer: TextTokenizer,
    context: ContextSync,
    target_vocab_size: usize,
    lookbehind: usize,
}

impl HeteroModelDrafter<BurnDrafterModel> {
    /// A burn model drafting for a target with `target_vocab_size` ids (the width of the
    /// target's logit rows, which may exceed its tokenizer's vocabulary).
    ///
    /// `map` pairs drafter and target tokens (`anyspec_vocab_map::VocabMap::id_map`);
    /// `target_tokenizer` and `drafter_tokenizer` are the two `tokenizer.json` files the map
    /// was built from.
    pub fn new(
        model: Llama,
        config: HeteroConfig,
        map: IdMap,
        target_tokenizer: TextTokenizer,
        drafter_tokenizer: TextTokenizer,
        target_vocab_size: usize,
    ) -> Result<Self> {
        Self::with_model(
            BurnDrafterModel::new(model),
            config,
            map,
            target_tokenizer,
            drafter_tokenizer,
            target_vocab_size,
        )
    }
}

impl<M: DrafterModel> HeteroModelDrafter<M> {
    /// [`HeteroModelDrafter::new`] over any [`DrafterModel`].
    ///
    /// # Errors
    /// [`Error::UnusableBridge`] when the bridge cannot work for this pair: TLI or RDK with an
    /// empty intersection (or a shortlist that keeps none of it), a shortlist with the union
    /// bridge, an affinity matrix of another size than the target vocabulary, or a target
    /// whose logit rows are narrower than the map's target side.
    pub fn with_model(
        mut model: M,
        config: HeteroConfig,
        map: IdMap,
        target_tokenizer: TextTokenizer,
        drafter_tokenizer: TextTokenizer,
        target_vocab_size: usize,
    ) -> Result<Self> {
        let bridge_name = config.bridge.name();
        let unusable = |reason: String| Error::UnusableBridge { bridge: bridge_name, reason };
        if target_vocab_size < map.target_size() {
            return Err(unusable(format!(
                "the vocabulary map covers {} target ids but the target model scores only {target_vocab_size}; \
                 build the map from the target checkpoint's tokenizer.json",
                map.target_size()
            )));
        }
        if let Bridge::Rdk(form) = &config.bridge
            && form.size() != map.target_size()
        {
            return Err(unusable(format!(
                "the affinity matrix is {0} × {0} but the target vocabulary has {1} ids; \
                 build it with the target's tokenizer",
                form.size(),
                map.target_size()
            )));
        }
        let model_rows = model.vocab_size().min(map.drafter_size());
        let kept = match (&config.bridge, &config.shortlist) {
            (Bridge::Union, Some(_)) => {
                return Err(unusable(
                    "union measures the drafter's whole vocabulary and takes no shortlist; \
                     drop the shortlist or use tli or rdk"
                        .into(),
                ));
            }
            (Bridge::Union, None) => None,
            (_, shortlist) => {
                let allowed = shortlist.as_ref().map(|ids| {
                    let mut allowed = vec![false; map.drafter_size()];
                    for &d in ids {
                        if let Some(slot) = allowed.get_mut(d as usize) {
                            *slot = true;
                        }
                    }
                    allowed
                });
                let (drafter_ids, target_ids): (Vec<u32>, Vec<u32>) = (0..model_rows as u32)
                    .filter_map(|d| map.target_of(d).map(|t| (d, t)))
                    .filter(|&(d, _)| allowed.as_ref().is_none_or(|a| a[d as usize]))
                    .unzip();
                if drafter_ids.is_empty() {
                    return Err(unusable(if shortlist.is_some() {
                        "the shortlist keeps no token the two vocabularies share; rebuild it for this drafter".into()
                    } else {
                        "the two vocabularies share no token (empty intersection); use slem (string-level exact match), which needs none".into()
                    }));
                }
                Some((drafter_ids, target_ids))
            }
        };
        let prune = config.prune_head || config.shortlist.is_some();
        match (&kept, prune) {
            (Some((ids, _)), true) => model.keep_rows(Some(ids))?,
            _ => model.keep_rows(None)?,
        }
        let target_to_drafter = map.target_to_drafter();
        Ok(HeteroModelDrafter {
            target_to_drafter: target_to_drafter.clone(),
            model,
            bridge: config.bridge,
            kept: kept.filter(|_| prune),
            map,
            target_tokenizer,
            drafter_tokenizer,
            context: match config.context {
                ContextMapping::Retokenize => ContextSync::new(config.lookbehind)?,
                ContextMapping::SharedIds => {
                    ContextSync::new(config.lookbehind)?.with_shared_ids(target_to_drafter.clone())
                }
            },
            target_vocab_size,
            lookbehind: config.lookbehind,
        })
    }

    /// The bridge.
    pub fn bridge(&self) -> &Bridge {
        &self.bridge
    }

    /// The drafter model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// Number of LM-head rows computed per drafted token.
    pub fn head_rows(&self) -> usize {
        self.kept.as_ref().map_or(self.model.vocab_size(), |(ids, _)| ids.len())
    }

    /// The drafter ids of the current context (after the last [`Drafter::propose`]).
    pub fn drafter_context(&self) -> &[u32] {
        self.context.drafter()
    }

    /// One drafting step after `sequence` (drafter ids): the drafted target token, the drafter
    /// ids to feed next (empty: stop drafting), and the distribution it was drawn from. `None`
    /// when the union bridge drew a token outside the target vocabulary (its distribution is
    /// then the second element).
    fn step(&mut self, sequence: &[u32], sampling: &SamplingConfig, rng: &mut dyn RngCore) -> Result<StepOutcome> {
        let logits = self.model.next_logits(sequence)?;
        let greedy = sampling.is_greedy();
        if greedy && let Some(outcome) = self.greedy_step(&logits, sequence)? {
            return Ok(outcome);
        }
        // Over target ids, the distribution the token is drawn from.
        let q = match (&self.bridge, &self.kept) {
            (Bridge::Union, _) => {
                let probs = logits_to_probs(&self.full_row(logits), sampling)?;
                let union = union_projection(&probs, &self.map)?;
                let d = if greedy { argmax(&probs) } else { sample(&probs, &mut *rng)? };
                let on_target = self.widen(union.on_target);
                return Ok(match self.map.target_of(d) {
                    Some(t) => StepOutcome::Token { target: t, drafter: vec![d], q: on_target },
                    None => StepOutcome::Outside { q: on_target },
                });
            }
            (_, Some((_, targets))) => {
                let probs = logits_to_probs(&logits, sampling)?;
                let mut q = vec![0.0f32; self.map.target_size()];
                for (&t, &p) in targets.iter().zip(&probs) {
                    q[t as usize] = p;
                }
                q
            }
            (_, None) => {
                let probs = logits_to_probs(&self.full_row(logits), sampling)?;
                anyspec_core::projection::tli_projection(&probs, &self.map)?
            }
        };
        let q = match &self.bridge {
            Bridge::Rdk(form) => form.apply(&q)?,
            _ => q,
        };
        let t = if greedy { argmax(&q) } else { sample(&q, &mut *rng)? };
        let drafter = self.drafter_ids_of(t, sequence)?;
        Ok(StepOutcome::Token { target: t, drafter, q: self.widen(q) })
    }

    /// At temperature 0 with a pruned head (TLI, and RDK's exact form): the token
    /// [`HeteroModelDrafter::step`]'s general path would draw, found without its vectors over
    /// the target vocabulary. The TLI distribution is then a point mass on the target id of the
    /// best kept row, so TLI drafts that id and RDK the arg-max of that id's affinity row
    /// ([`rdk_exact_point_argmax`], the same token bit for bit). A greedy draft carries no
    /// distribution ([`Draft::deterministic`]), so none is built. `None` where the general path
    /// applies.
    ///
    /// Why: on SmolLM2 (49,152 target ids) the general path went over up to four such vectors
    /// per drafted token (RDK: the TLI vector, its `f64` spread, the normalized copy, the
    /// arg-max scan).
    fn greedy_step(&mut self, logits: &[f32], sequence: &[u32]) -> Result<Option<StepOutcome>> {
        let Some((_, targets)) = &self.kept else { return Ok(None) };
        let affinity = match &self.bridge {
            Bridge::Tli => None,
            Bridge::Rdk(RdkForm::Exact(matrix)) => Some(matrix),
            Bridge::Union | Bridge::Rdk(RdkForm::Taylor { .. }) => return Ok(None),
        };
        // Where logits_to_probs puts the point mass at temperature 0 (the logits checked alike).
        let best = checked_argmax(logits)?;
        let tli = targets.get(best).copied().ok_or(Error::InvalidParameter(anyspec_core::InvalidParameter {
            name: "drafter logits",
            expected: "one per kept row",
            value: format!("{} for {} rows", logits.len(), targets.len()),
        }))?;
        let target = match affinity {
            Some(matrix) => rdk_exact_point_argmax(tli, matrix)?,
            None => tli,
        };
        let drafter = self.drafter_ids_of(target, sequence)?;
        Ok(Some(StepOutcome::Token { target, drafter, q: Vec::new() }))
    }

    /// The drafter ids that continue `sequence` with target token `t`: its own id when the
    /// drafter has one, else its text re-tokenized (RDK may draw a token the drafter lacks).
    fn drafter_ids_of(&self, t: u32, sequence: &[u32]) -> Result<Vec<u32>> {
        Ok(match self.target_to_drafter.get(t as usize) {
            Some(&d) if d != ABSENT && (d as usize) < self.model.vocab_size() => vec![d],
            // RDK drew a token the drafter does not have: feed its text.
            _ => {
                let mut tail =
                    self.context.target()[self.context.target().len().saturating_sub(self.lookbehind)..].to_vec();
                let start = tail.len();
                tail.push(t);
                let text = text_after(&self.target_tokenizer, &tail, start, self.lookbehind)?;
                encode_after(&self.drafter_tokenizer, sequence, &text, self.lookbehind)?
            }
        })
    }

    /// A full-head logit row cut or padded (−∞) to the drafter tokenizer's ids.
    fn full_row(&self, mut logits: Vec<f32>) -> Vec<f32> {
        logits.resize(self.map.drafter_size(), f32::NEG_INFINITY);
        logits
    }

    /// A distribution over the map's target ids, padded with zeros to the target model's rows.
    fn widen(&self, mut q: Vec<f32>) -> Vec<f32> {
        q.resize(self.target_vocab_size, 0.0);
        q
    }

    fn propose_inner(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> Result<Draft> {
        let mut sequence = self.context.sync(context, &self.target_tokenizer, &self.drafter_tokenizer)?.to_vec();
        // The conversion holds back a partial character: a draft must follow the whole context.
        if sequence.is_empty() || self.context.target().len() != context.len() {
            return Ok(Draft::empty());
        }
        let max_len = self.model.max_sequence_len();
        let (mut tokens, mut distributions, mut outside) = (Vec::new(), Vec::new(), None);
        while tokens.len() < max_tokens && sequence.len() <= max_len {
            match self.step(&sequence, sampling, rng)? {
                StepOutcome::Outside { q } => {
                    outside = Some(q);
                    break;
                }
                StepOutcome::Token { target, drafter, q } => {
                    tokens.push(target);
                    distributions.push(q);
                    if drafter.is_empty() {
                        break;
                    }
                    self.context.push_aligned(&[target], &drafter);
                    sequence.extend_from_slice(&drafter);
                }
            }
        }
        Ok(if sampling.is_greedy() {
            Draft::deterministic(tokens)
        } else {
            Draft {
                tokens,
                origin: DraftOrigin::Sampled { distributions, outside_target: outside },
                confidence_class: None,
            }
        })
    }
}

enum StepOutcome {
    Token { target: u32, drafter: Vec<u32>, q: Vec<f32> },
    Outside { q: Vec<f32> },
}

impl<M: DrafterModel> Drafter for HeteroModelDrafter<M> {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> anyspec_core::Result<Draft> {
        self.propose_inner(context, max_tokens, sampling, rng).map_err(Into::into)
    }
}
