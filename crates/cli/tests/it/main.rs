//! Integration tests of the `anyspec` binary, compiled as one test binary.

mod dict;
mod generate;
mod simulate;
mod theory;
mod vocab;
