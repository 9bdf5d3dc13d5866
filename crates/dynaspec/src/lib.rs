//! # anyspec-dynaspec
//!
//! DynaSpec ("context-aware dynamic shortlists for large-vocabulary speculative decoding",
//! `shared/papers/dynaspec.txt`): the drafter's LM head is evaluated only on the union of a few
//! token clusters that a small router picks for the current context; the target still verifies
//! over the full vocabulary, so decoding stays exact.
//!
//! - [`spherical_kmeans`] → [`Clusters`]: §4.2's partition of the vocabulary, spherical k-means
//!   of the normalized LM-head rows, unbalanced, deterministic for a seed, multi-threaded.
//! - [`Router`]: the two-layer ReLU MLP `r_θ([E(x_t), H̃_{t−1}]) ∈ ℝ^M` (§4.2), on the host.
//! - [`ClusterBudget`]: DynaSpec-F (fixed `k`) and DynaSpec-PA (Eq. 3's `k_c(t)`);
//!   [`TokenBudget`]: FR-Spec (fixed `K`) and PA-FR (App. A.3's `K_fr(t)`).
//! - [`DynamicShortlister`], [`FrequencyShortlister`] → [`Shortlist`]: the ids the drafter's head
//!   is evaluated on, always with EOS.
//! - [`RouterFile`]: clusters + router + build record in one safetensors artifact, checksummed,
//!   written atomically, refused against another model ([`model_fingerprint`]).
//!
//! - [`ShortlistDrafter`]: a model drafter (the self-speculative first layers) whose head is
//!   evaluated only on the shortlist of each draft position, under a [`HeadPolicy`] (full,
//!   FR/PA-FR, DynaSpec-F/PA); the target verifies over the full vocabulary. Every policy's
//!   shortlists are whole blocks of a partition (clusters; the frequency ranking cut at its
//!   budgets), and the drafter's head is a copy ordered block by block
//!   (`anyspec_models::Llama::head_blocks`), so a shortlist costs its own rows.
//! - [`build_router`]: the whole offline build for a model and corpus text (clusters, training
//!   data from the drafter's hidden states and the target's distributions, training, held-out
//!   recall beside FR-Spec at equal size).
//!
//! The router's training loop (BCE over multi-label cluster targets, burn autodiff) lives in
//! `anyspec-train`; reading a model's hidden states in `anyspec-models`.

#![deny(missing_docs)]

mod artifact;
mod budget;
mod build;
mod clusters;
mod drafter;
mod eagle;
mod error;
mod router;
mod shortlist;

pub use artifact::{ROUTER_FORMAT, ROUTER_FORMAT_VERSION, RouterFile, RouterInfo, data_digest, model_fingerprint};
pub use budget::{ClusterBudget, TokenBudget};
pub use build::{BuildParams, BuildReport, RecallRow, build_router};
pub use clusters::{Clusters, KMeansParams, spherical_kmeans};
pub use drafter::{HeadPolicy, ShortlistDrafter, ShortlistStats};
pub use eagle::{
    EAGLE_FORMAT, EAGLE_FORMAT_VERSION, EagleBuildParams, EagleChat, EagleFile, EagleInfo, EagleReport, build_eagle,
    build_eagle_on_chats,
};
pub use error::{Error, Result};
pub use router::{Router, top_k};
pub use shortlist::{DynamicShortlister, FrequencyShortlister, Shortlist};
