//! The heterogeneous-vocabulary drafters (union, TLI, RDK, SLEM) end to end: a drafter with
//! another tokenizer (tests/data/hetero-drafter, made by xtask/python/make_hetero_fixtures.py)
//! in front of the anyspec-models conformance fixtures.

mod fixtures;
mod greedy;
mod head;
mod lossless;
mod stats;
mod validation;
