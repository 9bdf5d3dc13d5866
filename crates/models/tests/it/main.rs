//! Integration tests of anyspec-models, compiled as one binary.

// Tests report skips and measured agreement on stderr (shown with --nocapture).
#![allow(clippy::print_stderr)]

mod common;
mod conformance;
mod errors;
mod first_layers;
mod generation;
mod gguf;
mod hidden;
mod smollm2;
mod tree;
