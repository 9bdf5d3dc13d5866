//! Integration tests of anyspec-gguf, compiled as one binary.

mod fixtures;
mod hostile;
mod real_model;
mod roundtrip;
mod tokenizer;
