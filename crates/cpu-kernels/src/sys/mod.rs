//! The only code of the crate that uses `unsafe`: the AVX2/FMA and AVX-512 kernels (`core::arch`
//! intrinsics, called only after run-time feature detection), the persistent thread pool
//! (which lends a borrowed closure to its workers for the duration of one call) and the weight
//! memory (slabs on transparent huge pages, carved into buffers). Every
//! `unsafe` block carries a `// SAFETY:` comment.
#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2_q8;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2_q8_groups;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512_activation;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512_attention;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512_f32;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512_panels;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512_q8_groups;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512_quantize;
pub(crate) mod pool;
#[cfg(target_arch = "x86_64")]
pub(crate) mod roofline;
pub(crate) mod weight_memory;

/// `$kernel::<M, F>(args…)` with the activation-row count `$m` (1..=8; more is 8) as the const
/// parameter `M`, so that a kernel's loops over the rows unroll; `F` is the caller's format
/// parameter.
#[cfg(target_arch = "x86_64")]
macro_rules! for_row_count {
    ($m:expr, $kernel:ident::<F>($($arg:expr),*)) => {
        match $m {
            1 => $kernel::<1, F>($($arg),*),
            2 => $kernel::<2, F>($($arg),*),
            3 => $kernel::<3, F>($($arg),*),
            4 => $kernel::<4, F>($($arg),*),
            5 => $kernel::<5, F>($($arg),*),
            6 => $kernel::<6, F>($($arg),*),
            7 => $kernel::<7, F>($($arg),*),
            _ => $kernel::<8, F>($($arg),*),
        }
    };
}
#[cfg(target_arch = "x86_64")]
pub(crate) use for_row_count;
