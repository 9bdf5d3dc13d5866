//! Integration tests of anyspec-cpu-kernels (one binary).

mod bad_input;
mod formats;
mod matmul;
mod threads;
