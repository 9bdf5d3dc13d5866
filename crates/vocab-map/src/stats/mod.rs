//! Vocabulary statistics: the paper's Tables 4–6, 8 and 9, and DictSpec's fertility.
//!
//! Every statistic is a plain serde struct whose field names are part of the `--json` interface
//! of `anyspec vocab`: they are stable.

mod corpus;
mod decompose;
mod describe;
mod overlap;
mod text;

pub use corpus::{CorpusOverlap, SideUsage, corpus_overlap, token_counts};
pub use decompose::{
    DecompositionSummary, Decompositions, DrafterTrie, TokenDecomposition, count_decompositions, shortest_tokens,
};
pub use describe::Describe;
pub use overlap::Overlap;
pub use text::{Fertility, Injectivity, Mismatch, fertility, injectivity};
