//! EAGLE-style feature drafters (Li et al., "EAGLE: Speculative Sampling Requires Rethinking
//! Feature Uncertainty", 2024): a small decoder that runs on the *target's* features.
//!
//! At each position the drafter reads the pair `[E(x_{t+1}); f_t]` — the embedding of the token
//! just chosen and the target's final-norm hidden state `f_t` that chose it — maps it to the
//! hidden width with `fc`, runs its own decoder layer(s) with their own KV cache, and its final
//! norm gives `f̂_{t+1}`, a guess of the target's next feature. The target's LM head, applied to
//! `f̂_{t+1}` (whole, or a shortlist of it), drafts the next token; drafting goes on from the
//! guessed feature. The target's features carry all its context, so one layer drafts far better
//! than a separate small model of the same cost, and the head is shared, so the drafter adds
//! only its layer's weights (about 4.6 M values for SmolLM2's shape).
//!
//! Only the native CPU engine runs it; its weights come from `anyspec-train`'s `train_eagle`
//! (names `fc.weight`, `fc.bias`, `layers.0.…`, `norm.weight`).

use std::collections::HashMap;
use std::sync::Arc;

use anyspec_cpu_kernels::{Threads, WeightFormat};

use crate::error::{Error, Result};
use crate::model::{KvCache, Llama};
use crate::native::NativeFeatureModel;
use crate::source::HostTensors;

/// Named f32 tensors: shape and row-major values (`[out, in]` for linear weights, as PyTorch).
pub type FeatureTensors = HashMap<String, (Vec<usize>, Vec<f32>)>;

/// An EAGLE-style feature drafter bound to its target (see the module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct FeatureModel {
    inner: Arc<NativeFeatureModel>,
    threads: Threads,
    target: Llama,
    /// The longest span of pairs its attention was trained over, when known.
    attention_window: Option<usize>,
}

impl Llama {
    /// The feature drafter of `layers` decoder layers whose weights are `tensors`, sharing this
    /// model's embedding table and LM head (its RoPE is plain at this model's θ, as
    /// `anyspec-train` trains it); its matrices stored as `storage` (`None`: f32;
    /// `Some(Q8_0)` quarters the bytes a draft step reads).
    ///
    /// # Errors
    /// On the burn engine (the drafter runs on the native CPU engine only), for a missing tensor
    /// or one of the wrong shape, and for weights holding more layers than `layers`.
    pub fn feature_model(
        &self,
        tensors: &FeatureTensors,
        layers: usize,
        storage: Option<WeightFormat>,
    ) -> Result<FeatureModel> {
        let Some((native, threads)) = self.native() else {
            return Err(Error::InvalidArgument(
                "the feature (EAGLE) drafter runs on the native CPU engine only; load the target with --engine native"
                    .into(),
            ));
        };
        let mut source = HostTensors { tensors };
        let inner = NativeFeatureModel::load(native, &mut source, layers, storage)?;
        Ok(FeatureModel {
            inner: Arc::new(inner),
            threads: threads.clone(),
            target: self.clone(),
            attention_window: None,
        })
    }
}

impl FeatureModel {
    /// This drafter, declared trained with attention over at most `window` consecutive pairs
    /// (`anyspec-train`'s training window, `EagleInfo::window`); 0 means no limit.
    ///
    /// A drafter (`anyspec_dynaspec::ShortlistDrafter::features`) then keeps its attention
    /// within such a window: over a longer context the attention would span distances the
    /// layer never saw while training, and its predictions fall off.
    #[must_use]
    pub fn with_attention_window(mut self, window: usize) -> Self {
        self.attention_window = (window > 0).then_some(window);
        self
    }

    /// The longest span of pairs its attention was trained over (`None`: unknown, no limit).
    pub fn attention_window(&self) -> Option<usize> {
        self.attention_window
    }

    /// The target whose features it reads and whose head it shares: its
    /// [`Llama::logits_of_hidden`] turns a predicted feature into logits, full or pruned.
    pub fn target(&self) -> &Llama {
        &self.target
    }

    /// The width of a feature.
    pub fn hidden_size(&self) -> usize {
        self.inner.model().config().hidden_size
    }

    /// Bytes of the drafter's own weights (the shared head and embeddings not counted).
    pub fn weight_bytes(&self) -> usize {
        self.inner.own_weight_bytes()
    }

    /// An empty cache for the drafter's layers.
    pub fn new_cache(&self) -> KvCache {
        KvCache::from_native(self.inner.model().new_cache())
    }

    /// Runs the pairs `(tokens[i], features[i·hidden..])` as positions `cache.len()..` and
    /// returns the predicted features of the last `rows` pairs, `[rows, hidden]` flat.
    ///
    /// # Errors
    /// For a cache of another engine, a token outside the vocabulary, `features` not one row per
    /// token, `rows` not in `1..=tokens.len()`, or a full context.
    pub fn forward(&self, tokens: &[u32], features: &[f32], cache: &mut KvCache, rows: usize) -> Result<Vec<f32>> {
        let cache = cache.native_mut().ok_or_else(|| {
            Error::InvalidArgument(
                "the KV cache was made by a model on another engine; use FeatureModel::new_cache".into(),
            )
        })?;
        self.inner.forward(tokens, features, cache, rows, &self.threads)
    }
}
