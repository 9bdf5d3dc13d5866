//! Integration tests of anyspec-core, compiled as one binary.

mod acceptance;
mod engine;
mod lossless;
mod power;
mod properties;
mod stats;
