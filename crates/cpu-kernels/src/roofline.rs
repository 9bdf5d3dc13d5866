//! What one core of this CPU can do at most, measured: the ceilings a kernel's speed is read
//! against ("say how close a kernel gets").
//!
//! # Why measured
//!
//! The peak rates differ between CPUs that report the same instruction sets: one Xeon of the
//! project's 2-core machines retired one 16-lane FMA per cycle and another two, though both
//! list AVX-512 F. A roofline written into a report from one machine was wrong on the next, so
//! `cargo xtask bench-cpu` measures these rates in the same run as the kernels it compares to
//! them.
//!
//! Each rate is that of a loop of independent chains of the instruction on one core (sixteen,
//! twelve for the 8-lane FMA: enough to hide a 4-cycle latency on three ports), for about
//! `duration`: a throughput, the most the core's ports allow. Values stay bounded (no
//! overflow to infinity, no denormals), so the rate is that of ordinary operands.

use std::time::{Duration, Instant};

/// Instructions per second one core retires, for the instruction sets this CPU has (`None`
/// where it lacks them or the platform is not x86-64).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CorePeaks {
    /// 8-lane f32 fused multiply-adds (`vfmadd…ps ymm`, AVX2/FMA) per second.
    pub fma8: Option<f64>,
    /// 16-lane f32 fused multiply-adds (`vfmadd…ps zmm`, AVX-512 F) per second.
    pub fma16: Option<f64>,
    /// 16-lane `vpdpbusd` (AVX-512 VNNI: 64 products of unsigned by signed bytes, summed in
    /// fours) per second.
    pub dpbusd16: Option<f64>,
}

impl CorePeaks {
    /// The most f32 multiply-adds per second a core does, with whichever FMA is faster.
    pub fn f32_macs(&self) -> Option<f64> {
        let eight = self.fma8.map(|r| 8.0 * r);
        let sixteen = self.fma16.map(|r| 16.0 * r);
        match (eight, sixteen) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The most 8-bit multiply-adds per second a core does with `vpdpbusd`.
    pub fn int8_macs(&self) -> Option<f64> {
        self.dpbusd16.map(|r| 64.0 * r)
    }
}

/// Measures [`CorePeaks`] on the calling thread, spending about `duration` on each rate.
pub fn core_peaks(duration: Duration) -> CorePeaks {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::sys::roofline as sys;
        CorePeaks {
            fma8: rate(duration, sys::fma8, sys::FMA8_CHAINS),
            fma16: rate(duration, sys::fma16, sys::CHAINS),
            dpbusd16: rate(duration, sys::dpbusd16, sys::CHAINS),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = duration;
        CorePeaks::default()
    }
}

/// Instructions per second of `kernel(rounds)` (which retires `chains · rounds` of them), run
/// for about `duration` after a short warm-up; the fastest of five runs. `None` when the
/// kernel cannot run on this CPU.
#[cfg(target_arch = "x86_64")]
fn rate(duration: Duration, kernel: fn(u64) -> Option<f64>, chains: usize) -> Option<f64> {
    let mut rounds = 1u64 << 12;
    // Warm up and size the runs: double until one run takes a fifth of the budget.
    loop {
        let start = Instant::now();
        std::hint::black_box(kernel(rounds)?);
        if start.elapsed() * 5 >= duration || rounds >= 1 << 40 {
            break;
        }
        rounds *= 2;
    }
    let mut best = 0.0f64;
    for _ in 0..5 {
        let start = Instant::now();
        std::hint::black_box(kernel(rounds)?);
        best = best.max((chains as u64 * rounds) as f64 / start.elapsed().as_secs_f64().max(1e-9));
    }
    Some(best)
}

/// GB/s of reading `data` on `threads` threads, each a contiguous share, with the prefetching
/// of the quantized kernels (without AVX2, a plain loop): the fastest of seven passes after an
/// untimed one. The ceiling of a product that streams its weights once per call. A thread is
/// started per share and pass, which a buffer of tens of megabytes makes negligible.
pub fn read_rate(data: &[u64], threads: usize) -> f64 {
    let share = data.len().div_ceil(threads.max(1)).max(1);
    let sum = |part: &[u64]| -> u64 {
        #[cfg(target_arch = "x86_64")]
        if let Some(sum) = crate::sys::roofline::streamed_sum(part) {
            return sum;
        }
        part.iter().fold(0u64, |s, &v| s.wrapping_add(v))
    };
    let pass = || {
        std::thread::scope(|scope| {
            let handles: Vec<_> = data.chunks(share).map(|part| scope.spawn(move || sum(part))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).fold(0u64, u64::wrapping_add)
        })
    };
    std::hint::black_box(pass());
    (0..7)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(pass());
            std::mem::size_of_val(data) as f64 / start.elapsed().as_secs_f64().max(1e-9) / 1e9
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rates_are_those_of_a_real_core() {
        let peaks = core_peaks(Duration::from_millis(20));
        // Between one instruction every ten nanoseconds and twenty per nanosecond (four ports
        // at 5 GHz): a loop that was optimized away, or a timer that did not run, falls outside.
        for rate in [peaks.fma8, peaks.fma16, peaks.dpbusd16].into_iter().flatten() {
            assert!((1e8..2e10).contains(&rate), "{rate:e} instructions per second");
        }
        if let (Some(a), Some(b)) = (peaks.fma8, peaks.f32_macs()) {
            assert!(b >= 8.0 * a);
        }
    }

    #[test]
    fn the_read_rate_sums_what_it_reads() {
        // The streamed sum is the plain one, with a tail that is not a whole line.
        let data: Vec<u64> = (0..1_000_003u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        #[cfg(target_arch = "x86_64")]
        if let Some(sum) = crate::sys::roofline::streamed_sum(&data) {
            assert_eq!(sum, data.iter().fold(0u64, |s, &v| s.wrapping_add(v)));
        }
        // Between 0.1 GB/s and 10 TB/s: a loop optimized away, or a timer that did not run,
        // falls outside.
        for threads in [1, 2] {
            let rate = read_rate(&data, threads);
            assert!((0.1..1e4).contains(&rate), "{rate} GB/s on {threads} threads");
        }
    }
}
