//! The only code of the crate that uses `unsafe`: the AVX2/FMA and AVX-512 kernels (`core::arch`
//! intrinsics, called only after run-time feature detection) and the persistent thread pool
//! (which lends a borrowed closure to its workers for the duration of one call). Every
//! `unsafe` block carries a `// SAFETY:` comment.
#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2_q8;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2_q8_groups;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512_q8_groups;
pub(crate) mod pool;
