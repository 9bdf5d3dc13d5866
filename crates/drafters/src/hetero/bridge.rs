//! Token-level bridges and their settings: the drafter samples over its own vocabulary, the
//! draft is verified by speculative sampling against exactly the distribution (over target ids)
//! it was drawn from. The drafter that applies them is [`super::HeteroModelDrafter`].

use anyspec_core::projection::{AffinityMatrix, SparseScores, rdk_dense_kernel_first_order, rdk_exact};

use crate::hetero::text::DEFAULT_LOOKBEHIND;

/// How the drafter's distribution over its vocabulary `D` reaches the target vocabulary `T`.
#[derive(Clone, Debug)]
pub enum Bridge {
    /// hetero-vocab-sd.txt Algorithm 1: the drafter samples its full distribution; a token
    /// outside `T` ends the draft and is rejected for certain (the baseline).
    Union,
    /// hetero-vocab-sd.txt Algorithm 4: the drafter's distribution restricted to `T ∩ D` and
    /// renormalized; the LM head is pruned to the intersection so drafting gets cheaper.
    Tli,
    /// oov-sampling-rdk.txt Algorithm 1: TLI, then the mass spread over all of `T` by a
    /// row-stochastic affinity matrix, so drafts may contain tokens the drafter cannot produce.
    Rdk(RdkForm),
}

impl Bridge {
    /// The bridge's name, as [`crate::Algo`] spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Bridge::Union => "union",
            Bridge::Tli => "tli",
            Bridge::Rdk(_) => "rdk",
        }
    }
}

/// Which form of RDK's redistribution to apply.
#[derive(Clone, Debug)]
pub enum RdkForm {
    /// `p' = Mᵀ q'` with the sparse affinity matrix (exact).
    Exact(AffinityMatrix),
    /// The first-order expansion of the dense softmax kernel over raw scores with temperature
    /// `tau`: oov-sampling-rdk.txt App. B.2's intermediate form, not the paper's Eq. 3 (which is
    /// `anyspec_core::projection::rdk_taylor_eq3`, not wired in here); see
    /// `anyspec_core::projection::rdk_dense_kernel_first_order`.
    Taylor {
        /// Raw affinity scores over target ids.
        scores: SparseScores,
        /// Kernel temperature τ > 0.
        tau: f64,
    },
}

impl RdkForm {
    pub(crate) fn size(&self) -> usize {
        match self {
            RdkForm::Exact(m) => m.size(),
            RdkForm::Taylor { scores, .. } => scores.size(),
        }
    }

    pub(crate) fn apply(&self, tli: &[f32]) -> anyspec_core::Result<Vec<f32>> {
        match self {
            RdkForm::Exact(m) => rdk_exact(tli, m),
            RdkForm::Taylor { scores, tau } => rdk_dense_kernel_first_order(tli, scores, *tau),
        }
    }
}

/// Settings of a [`super::HeteroModelDrafter`].
#[derive(Clone, Debug)]
pub struct HeteroConfig {
    /// The bridge.
    pub bridge: Bridge,
    /// Compute logits only for the drafter rows the bridge can use (TLI and RDK: the
    /// intersection, cut further by `shortlist`). `false` computes the full head and projects
    /// on the host, which gives the same distribution at temperature-only sampling (softmax of
    /// a subset = renormalized softmax) and exists to measure what pruning saves.
    pub prune_head: bool,
    /// FR-Spec shortlist: drafter ids the drafter may produce (for example the most frequent
    /// ones in a corpus). TLI and RDK only; the union baseline measures the whole vocabulary.
    pub shortlist: Option<Vec<u32>>,
    /// Look-behind window, in tokens, for converting text between the tokenizers.
    pub lookbehind: usize,
    /// How the target's own tokens (prompt, corrections, bonus tokens) reach the drafter.
    pub context: ContextMapping,
}

/// How the target's tokens become the drafter's context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContextMapping {
    /// Decode with the target tokenizer and encode with the drafter's (look-behind window):
    /// the drafter sees its own canonical tokenization of the text.
    #[default]
    Retokenize,
    /// Map the new target tokens one for one when every one of them is shared (falling back to
    /// text otherwise): the drafter sees the target's segmentation. Better when the drafter
    /// was trained on (or, as in the test fixtures, derived from) the target's segmentation or
    /// the two tokenizers segment alike; on the fixture pair it raises tokens per step from
    /// 1.38 to 2.11 at temperature 0.
    SharedIds,
}

impl HeteroConfig {
    /// A configuration with the given bridge, a pruned head, no shortlist, the default
    /// look-behind window and re-tokenized context.
    pub fn new(bridge: Bridge) -> Self {
        HeteroConfig {
            bridge,
            prune_head: true,
            shortlist: None,
            lookbehind: DEFAULT_LOOKBEHIND,
            context: ContextMapping::default(),
        }
    }
}
