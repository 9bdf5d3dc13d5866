//! Integration tests of `anyspec-dict-builder`, compiled as one binary.

mod build;
mod common;
mod emulate;
mod errors;
mod lookup;
