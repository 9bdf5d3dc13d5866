//! The draft → verify loop, generic over any drafter and any target.
//!
//! A [`Drafter`] proposes up to γ tokens (with or without the distributions they were drawn from);
//! a [`Target`] scores the γ + 1 positions of the draft in one call and rolls its state back to
//! the accepted prefix. [`generate`] drives them until a stop condition and keeps [`Stats`].

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::adaptive::{GammaTuner, StepObservation};
use crate::draft::{Draft, DraftOrigin};
use crate::error::{Error, Result};
use crate::sampling::SamplingConfig;
use crate::theory::ratio;
use crate::verify::{DeterministicRule, Verdict, verify_logits};

/// The model whose distribution is preserved.
///
/// Implementations keep whatever state makes scoring cheap (a KV cache) and are told, through
/// [`Target::rollback`], which prefix of the last scored sequence survived verification.
pub trait Target {
    /// Number of tokens in the target vocabulary; every logit row has this length.
    fn vocab_size(&self) -> usize;

    /// The longest sequence (prompt + generated) the target can score, if it has a limit.
    fn max_sequence_len(&self) -> Option<usize> {
        None
    }

    /// Scores the last `draft_len + 1` positions of `sequence` in one call.
    ///
    /// Row `i` holds the logits of the token that follows `sequence[..len − draft_len + i]`, so
    /// row 0 scores the first drafted token and the last row scores the token after the whole
    /// draft. `sequence` always extends the prefix kept by the last [`Target::rollback`].
    fn score(&mut self, sequence: &[u32], draft_len: usize) -> Result<Vec<Vec<f32>>>;

    /// Keeps state for `sequence[..len]` of the last scored sequence and drops the rest.
    fn rollback(&mut self, len: usize) -> Result<()>;

    /// Scores `sequence` (whose last `draft.len()` tokens are the draft) and verifies the draft.
    ///
    /// The default scores on the host and applies the `anyspec-core` rule; a target that keeps
    /// logits on an accelerator may override it to verify there and move O(γ) numbers back.
    fn verify(
        &mut self,
        sequence: &[u32],
        draft: &Draft,
        sampling: &SamplingConfig,
        rule: DeterministicRule,
        rng: &mut dyn RngCore,
    ) -> Result<Verdict> {
        let logits = self.score(sequence, draft.len())?;
        verify_logits(&logits, draft, sampling, rule, rng)
    }
}

/// A source of draft tokens.
pub trait Drafter {
    /// Proposes at most `max_tokens` target-vocabulary tokens to follow `context` (the prompt and
    /// everything generated so far).
    ///
    /// A drafter that samples must report the distribution of each token after applying
    /// `sampling`, the same transform the target uses. Drafters with a cache compare `context`
    /// with what they saw last time: it only grows, except that the tokens after the last
    /// accepted one are replaced.
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> Result<Draft>;

    /// The confidence class ([`Draft::confidence_class`]) the next draft for `context` will come
    /// under, when the drafter knows it before drafting: a hybrid that has found a free draft,
    /// or that will ask its costly model. `None` (the default): not known in advance.
    ///
    /// [`generate_tuned`] asks before each step and has the γ tuner choose how many tokens to ask
    /// for from that class's acceptance and drafting cost ([`crate::GammaTuner::next_gamma_for`]);
    /// a draft that carries no class of its own (a sampled one, say) is cut by this one. Like the
    /// draft, it may depend on `context` and the drafter's past only, so either choice is made
    /// before any token is drawn and verification stays lossless.
    fn source_class(&mut self, context: &[u32]) -> Option<u16> {
        let _ = context;
        None
    }
}

impl<T: Target + ?Sized> Target for &mut T {
    fn vocab_size(&self) -> usize {
        (**self).vocab_size()
    }
    fn max_sequence_len(&self) -> Option<usize> {
        (**self).max_sequence_len()
    }
    fn score(&mut self, sequence: &[u32], draft_len: usize) -> Result<Vec<Vec<f32>>> {
        (**self).score(sequence, draft_len)
    }
    fn rollback(&mut self, len: usize) -> Result<()> {
        (**self).rollback(len)
    }
    fn verify(
        &mut self,
        sequence: &[u32],
        draft: &Draft,
        sampling: &SamplingConfig,
        rule: DeterministicRule,
        rng: &mut dyn RngCore,
    ) -> Result<Verdict> {
        (**self).verify(sequence, draft, sampling, rule, rng)
    }
}

impl<D: Drafter + ?Sized> Drafter for &mut D {
    fn propose(
        &mut self,
        context: &[u32],
        max_tokens: usize,
        sampling: &SamplingConfig,
        rng: &mut dyn RngCore,
    ) -> Result<Draft> {
        (**self).propose(context, max_tokens, sampling, rng)
    }

    fn source_class(&mut self, context: &[u32]) -> Option<u16> {
        (**self).source_class(context)
    }
}

/// What to generate and when to stop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenerationConfig {
    /// Most tokens a drafter may propose per step (γ ≥ 1).
    pub gamma: usize,
    /// Whether every step asks for `gamma` tokens or for the γ ≤ `gamma` that the measured
    /// acceptance and costs favour.
    #[serde(default)]
    pub gamma_policy: GammaPolicy,
    /// Most new tokens to generate.
    pub max_new_tokens: usize,
    /// Tokens that end generation; the stop token itself is emitted.
    pub stop_tokens: Vec<u32>,
    /// The transform applied to target and drafter logits alike.
    pub sampling: SamplingConfig,
    /// How deterministic drafts are verified.
    #[serde(skip)]
    pub deterministic_rule: DeterministicRule,
}

impl Default for GenerationConfig {
    fn default() -> Self {
        GenerationConfig {
            gamma: 5,
            gamma_policy: GammaPolicy::Fixed,
            max_new_tokens: 128,
            stop_tokens: Vec::new(),
            sampling: SamplingConfig::default(),
            deterministic_rule: DeterministicRule::default(),
        }
    }
}

impl GenerationConfig {
    /// Checks every field against its allowed range.
    pub fn validate(&self) -> Result<()> {
        if self.gamma == 0 {
            return Err(Error::invalid("gamma", "≥ 1 (the most tokens drafted per step)", 0));
        }
        self.sampling.validate()
    }
}

/// How many tokens each step asks the drafter for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GammaPolicy {
    /// Always [`GenerationConfig::gamma`] (fewer only near the token budget or the context end).
    #[default]
    Fixed,
    /// The γ in `0..=gamma` with the most expected tokens per second under the acceptance rate
    /// and the drafter and verification costs measured so far ([`GammaTuner`];
    /// speculative-decoding.txt §3.5). γ = 0 makes a plain step, so a drafter that does not pay
    /// costs little more than plain decoding.
    Adaptive,
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason", content = "token")]
pub enum StopReason {
    /// `max_new_tokens` were generated.
    MaxTokens,
    /// A stop token was emitted.
    StopToken(u32),
    /// The target's context window is full.
    ContextFull,
    /// The per-token callback asked to stop.
    Callback,
}

/// Counters of a generation; the derived rates are methods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Verification steps (target calls).
    pub steps: u64,
    /// Drafted tokens offered for verification.
    pub drafted: u64,
    /// Drafted tokens accepted.
    pub accepted: u64,
    /// Steps at which a drafted token was rejected (at most one per step).
    pub rejected: u64,
    /// Tokens emitted (accepted + one per step, less anything cut by a stop condition).
    pub generated: u64,
    /// Wall time spent in the drafter.
    pub draft_time: Duration,
    /// Wall time spent scoring and verifying.
    pub verify_time: Duration,
    /// Drafted tokens offered for verification by the steps that followed a step which
    /// drafted too (see [`Stats::steady_draft_time`]).
    #[serde(default)]
    pub steady_drafted: u64,
    /// Wall time spent in the drafter by those steps.
    ///
    /// A drafter with a cache reads every token emitted since its last draft before it drafts
    /// again, so the first draft after a run of plain steps also pays for reading that run (a
    /// batch of up to 64 positions after the γ tuner's longest wait). In a step that follows a
    /// drafting step there are only the last step's one or two new tokens to read, as in
    /// speculative-decoding.txt's model of a step (γ runs of the drafter, Definition 3.7's c).
    /// [`Stats::steady_draft_cost`] divides the two.
    #[serde(default)]
    pub steady_draft_time: Duration,
}

impl Stats {
    /// Accepted / drafted, the empirical α when every step drafts (0 when nothing was drafted).
    pub fn acceptance_rate(&self) -> f64 {
        ratio(self.accepted, self.drafted)
    }

    /// Share of acceptance tests passed, `accepted / (accepted + rejected)`: the estimate of the
    /// per-token acceptance probability α of the theory. (`acceptance_rate` also counts drafted
    /// tokens after a rejection, which were never tested, so it is lower than α.)
    pub fn per_token_acceptance(&self) -> f64 {
        ratio(self.accepted, self.accepted + self.rejected)
    }

    /// Mean number of drafted tokens accepted per step.
    pub fn mean_accepted_length(&self) -> f64 {
        ratio(self.accepted, self.steps)
    }

    /// Tokens emitted per verification step: the speed-up over autoregressive decoding when
    /// drafting is free.
    pub fn tokens_per_step(&self) -> f64 {
        ratio(self.generated, self.steps)
    }

    /// Seconds of drafting per drafted token in steady drafting (the steps that followed a
    /// drafting step: [`Stats::steady_draft_time`]), or `None` when no such step drafted.
    /// [`Stats::draft_time`] ÷ [`Stats::drafted`] also counts what the drafter read after runs
    /// of plain steps, which a row that drafts rarely spreads over few drafted tokens.
    pub fn steady_draft_cost(&self) -> Option<f64> {
        (self.steady_drafted > 0).then(|| self.steady_draft_time.as_secs_f64() / self.steady_drafted as f64)
    }

    /// Adds another generation's counters to these.
    pub fn merge(&mut self, other: &Stats) {
        self.steps += other.steps;
        self.drafted += other.drafted;
        self.accepted += other.accepted;
        self.rejected += other.rejected;
        self.generated += other.generated;
        self.draft_time += other.draft_time;
        self.verify_time += other.verify_time;
        self.steady_drafted += other.steady_drafted;
        self.steady_draft_time += other.steady_draft_time;
    }
}

/// The result of [`generate`].
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// The new tokens (the prompt excluded).
    pub tokens: Vec<u32>,
    /// Why generation ended.
    pub stop_reason: StopReason,
    /// Counters.
    pub stats: Stats,
}

/// Runs draft → verify steps until a stop condition.
///
/// Without a drafter, or when a drafter proposes nothing, a step is one autoregressive token.
/// `on_token` sees every emitted token in order (for streaming) and may stop generation.
/// Under [`GammaPolicy::Adaptive`] a fresh [`GammaTuner`] learns during this call; to carry
/// what it learned across calls (several prompts with one drafter), use [`generate_tuned`].
pub fn generate(
    target: &mut dyn Target,
    drafter: Option<&mut dyn Drafter>,
    prompt: &[u32],
    config: &GenerationConfig,
    rng: &mut dyn RngCore,
    on_token: &mut dyn FnMut(u32) -> ControlFlow<()>,
) -> Result<Generation> {
    let mut tuner = (config.gamma_policy == GammaPolicy::Adaptive).then(|| GammaTuner::new(config.gamma));
    generate_tuned(target, drafter, prompt, config, tuner.as_mut(), rng, on_token)
}

/// [`generate`] with the caller's [`GammaTuner`] choosing γ at each step (up to
/// `config.gamma`), whatever `config.gamma_policy` says; `None` drafts `config.gamma` tokens
/// per step. The tuner keeps what it measures (acceptance, drafter and verification costs), so
/// the next call starts from it.
pub fn generate_tuned(
    target: &mut dyn Target,
    mut drafter: Option<&mut dyn Drafter>,
    prompt: &[u32],
    config: &GenerationConfig,
    mut tuner: Option<&mut GammaTuner>,
    rng: &mut dyn RngCore,
    on_token: &mut dyn FnMut(u32) -> ControlFlow<()>,
) -> Result<Generation> {
    config.validate()?;
    if prompt.is_empty() {
        return Err(Error::EmptyPrompt);
    }
    let vocab_size = target.vocab_size();
    if let Some(&token) = prompt.iter().find(|&&t| t as usize >= vocab_size) {
        return Err(Error::TokenOutOfRange { token, vocab_size });
    }
    let max_len = target.max_sequence_len();
    if let Some(max_len) = max_len
        && prompt.len() >= max_len
    {
        return Err(Error::PromptTooLong { prompt_len: prompt.len(), max_len });
    }

    let mut sequence = prompt.to_vec();
    let mut output = Vec::new();
    let mut stats = Stats::default();
    // Whether the last step verified a drafted token (for the steady drafting counters).
    let mut previous_drafted = false;
    let stop_reason = loop {
        let remaining = config.max_new_tokens - output.len();
        if remaining == 0 {
            break StopReason::MaxTokens;
        }
        let room = max_len.map_or(usize::MAX, |m| m.saturating_sub(sequence.len()));
        if room == 0 {
            break StopReason::ContextFull;
        }
        // A step emits up to γ + 1 tokens; never draft what could not be kept.
        let asked = Instant::now();
        let source = match (&tuner, drafter.as_deref_mut()) {
            (Some(_), Some(drafter)) => drafter.source_class(&sequence),
            _ => None,
        };
        let announce_time = asked.elapsed();
        let wanted = match (&tuner, &drafter) {
            (Some(tuner), Some(_)) => tuner.next_gamma_for(source).min(config.gamma),
            _ => config.gamma,
        };
        let gamma = wanted.min(remaining.min(room) - 1);

        let started = Instant::now();
        let mut draft = match drafter.as_deref_mut() {
            Some(drafter) if gamma > 0 => drafter.propose(&sequence, gamma, &config.sampling, rng)?,
            _ => Draft::empty(),
        };
        let draft_time = started.elapsed() + announce_time;
        stats.draft_time += draft_time;
        check_draft(&draft, gamma, vocab_size)?;
        // Verify only what pays: decided from γ, and from the deterministic draft's confidence
        // class or else the class the drafter announced before drafting, never from a sampled
        // draft's tokens (lossless).
        let class = draft.cut_class().or(source);
        if let Some(tuner) = tuner.as_deref() {
            draft.truncate(tuner.verify_len_for(gamma, class));
        }

        let started = Instant::now();
        let committed = sequence.len();
        sequence.extend_from_slice(&draft.tokens);
        let verdict = target.verify(&sequence, &draft, &config.sampling, config.deterministic_rule, rng)?;
        sequence.truncate(committed + verdict.accepted);
        target.rollback(sequence.len())?;
        sequence.push(verdict.next_token);
        let verify_time = started.elapsed();
        stats.verify_time += verify_time;
        if let Some(tuner) = tuner.as_deref_mut().filter(|_| drafter.is_some()) {
            let step = StepObservation {
                drafted: draft.len(),
                accepted: verdict.accepted,
                bonus: verdict.bonus,
                draft_time,
                verify_time,
                class,
                source,
            };
            tuner.observe(&step);
        }

        stats.steps += 1;
        let drafted = draft.len() as u64
            + u64::from(matches!(draft.origin, DraftOrigin::Sampled { outside_target: Some(_), .. }));
        stats.drafted += drafted;
        if previous_drafted && drafted > 0 {
            stats.steady_drafted += drafted;
            stats.steady_draft_time += draft_time;
        }
        previous_drafted = drafted > 0;
        stats.accepted += verdict.accepted as u64;
        stats.rejected += u64::from(!verdict.bonus);

        let mut stop = None;
        for &token in &sequence[committed..] {
            output.push(token);
            stats.generated += 1;
            let callback = on_token(token);
            if config.stop_tokens.contains(&token) {
                stop = Some(StopReason::StopToken(token));
            } else if callback.is_break() {
                stop = Some(StopReason::Callback);
            }
            if stop.is_some() {
                break;
            }
        }
        if let Some(reason) = stop {
            break reason;
        }
    };
    Ok(Generation { tokens: output, stop_reason, stats })
}

/// Rejects drafts that break the [`Drafter`] contract before they reach verification.
fn check_draft(draft: &Draft, gamma: usize, vocab_size: usize) -> Result<()> {
    if draft.len() > gamma {
        return Err(Error::LengthMismatch {
            what: "drafted tokens (at most the γ asked for)",
            expected: gamma,
            got: draft.len(),
        });
    }
    if let Some(&token) = draft.tokens.iter().find(|&&t| t as usize >= vocab_size) {
        return Err(Error::TokenOutOfRange { token, vocab_size });
    }
    Ok(())
}
