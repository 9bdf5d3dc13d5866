//! Integration tests of anyspec-gguf, compiled as one binary.

mod real_model;
mod tokenizer;
