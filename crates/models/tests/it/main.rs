//! Integration tests of anyspec-models, compiled as one binary.

mod common;
mod conformance;
mod errors;
mod generation;
mod gguf;
mod smollm2;
mod tree;
