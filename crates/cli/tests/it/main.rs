//! Integration tests of the `anyspec` binary, compiled as one test binary.

mod affinity;
mod cache;
mod demo;
mod dict;
mod dynaspec;
mod generate;
mod outputs;
mod shortlist;
mod simulate;
mod support;
mod theory;
mod vocab;
