//! Where the native engine's forward passes spend their time, section by section.
//!
//! # Why
//!
//! Whether speculative decoding pays on a CPU depends on what a pass over k positions costs
//! against a pass over one, and that ratio is set by the work that grows with the rows (the
//! activations' quantization, SwiGLU, RoPE, attention), not by the weight-streaming matrix
//! products that dominate a single position. Whole-pass timings cannot tell them apart, and
//! `perf` on a shared VM attributes time to symbols, not to the steps of a layer. These timers
//! lap [`std::time::Instant`] between the steps of every layer of
//! [`Engine::Native`](crate::Engine::Native) passes (`cargo xtask bench-cpu --sections` prints
//! them per width and context).
//!
//! # Cost
//!
//! Off (the default), a pass pays three relaxed loads of a global flag (at the start of its
//! layers, of its final norm and of its LM head) and nothing else. On, it pays a clock read
//! and an atomic add per section and layer (tens of nanoseconds each, well under 1% of a
//! SmolLM2 pass).
//!
//! # Scope
//!
//! The totals are global to the process: every native model's passes add to them, on every
//! thread that calls one. Time one model at a time (a speculative decoder's drafter and target
//! would be summed together). A section is timed on the calling thread, from its start to its
//! end, pool threads' work included (a product's section ends when its last chunk is done).
//!
//! ```
//! use anyspec_models::sections::{self, Section};
//!
//! sections::set_enabled(true);
//! // ... run passes of a native model here ...
//! let times = sections::take();
//! sections::set_enabled(false);
//! println!("attention: {:?} of {:?}", times.get(Section::Attention), times.total());
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A step of a native forward pass (every layer's share summed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Section {
    /// The RMSNorms before attention and before the MLP.
    Norms,
    /// The query/key/value product (activation quantization included, as for every product).
    Qkv,
    /// Splitting the product into queries, keys and values, and rotating them (RoPE; the
    /// pass's rotation tables and scratch buffers included).
    Rope,
    /// Appending the keys and values to the cache and attending over it.
    Attention,
    /// The attention's output projection.
    Output,
    /// The residual additions.
    Residual,
    /// The MLP's gate and up products (one matrix), and SwiGLU where that matrix stores gate
    /// and up rows in pairs of runs (the activation then runs inside the product's threads).
    GateUp,
    /// SwiGLU, `silu(gate) · up`, and gathering its rows for the down product, where the gate
    /// and up rows are stacked (zero where they are paired: see [`Section::GateUp`]).
    Swiglu,
    /// The MLP's down product.
    Down,
    /// The final RMSNorm.
    FinalNorm,
    /// The LM head (full or pruned).
    Logits,
}

impl Section {
    /// Every section, in the order of a pass.
    pub const ALL: [Section; 11] = [
        Section::Norms,
        Section::Qkv,
        Section::Rope,
        Section::Attention,
        Section::Output,
        Section::Residual,
        Section::GateUp,
        Section::Swiglu,
        Section::Down,
        Section::FinalNorm,
        Section::Logits,
    ];

    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Section::Norms => "RMSNorms",
            Section::Qkv => "qkv product",
            Section::Rope => "split + RoPE",
            Section::Attention => "attention",
            Section::Output => "output product",
            Section::Residual => "residual adds",
            Section::GateUp => "gate/up product",
            Section::Swiglu => "SwiGLU",
            Section::Down => "down product",
            Section::FinalNorm => "final norm",
            Section::Logits => "LM head",
        }
    }
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static NANOS: [AtomicU64; Section::ALL.len()] = [const { AtomicU64::new(0) }; Section::ALL.len()];

/// Turns the timers on or off (off when a process starts). Turning them on does not clear
/// what they hold: [`take`] does.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether the timers are on.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The time summed in each section since the last call (or since the process started), and
/// zero again.
pub fn take() -> SectionTimes {
    SectionTimes { nanos: std::array::from_fn(|i| NANOS[i].swap(0, Ordering::Relaxed)) }
}

/// Time per [`Section`], as [`take`] returns it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SectionTimes {
    nanos: [u64; Section::ALL.len()],
}

impl SectionTimes {
    /// The time spent in `section`.
    pub fn get(&self, section: Section) -> Duration {
        Duration::from_nanos(self.nanos[section as usize])
    }

    /// The time of all sections together.
    pub fn total(&self) -> Duration {
        Duration::from_nanos(self.nanos.iter().sum())
    }
}

/// Laps of one pass: [`lap`](Stopwatch::lap) adds the time since the previous lap (or the
/// start) to a section. Reads the clock only when the timers were on at its start.
pub(crate) struct Stopwatch(Option<Instant>);

impl Stopwatch {
    pub(crate) fn start() -> Self {
        Stopwatch(enabled().then(Instant::now))
    }

    #[inline]
    pub(crate) fn lap(&mut self, section: Section) {
        if let Some(last) = &mut self.0 {
            let now = Instant::now();
            let nanos = u64::try_from(now.duration_since(*last).as_nanos()).unwrap_or(u64::MAX);
            NANOS[section as usize].fetch_add(nanos, Ordering::Relaxed);
            *last = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The one test that turns the timers on, so that no two tests race on the flag. Other
    // tests' native passes may add to the totals while it is on, so it checks its own laps
    // only.
    #[test]
    fn laps_count_only_when_enabled_and_take_clears() {
        set_enabled(false);
        let _ = take();
        let mut off = Stopwatch::start();
        std::thread::sleep(Duration::from_millis(2));
        off.lap(Section::Swiglu);
        assert!(take().get(Section::Swiglu) < Duration::from_millis(2), "a disabled stopwatch recorded time");

        set_enabled(true);
        let mut on = Stopwatch::start();
        std::thread::sleep(Duration::from_millis(2));
        on.lap(Section::Swiglu);
        std::thread::sleep(Duration::from_millis(1));
        on.lap(Section::Down);
        set_enabled(false);
        let times = take();
        assert!(times.get(Section::Swiglu) >= Duration::from_millis(2), "{times:?}");
        assert!(times.get(Section::Down) >= Duration::from_millis(1), "{times:?}");
        assert!(times.total() >= times.get(Section::Swiglu) + times.get(Section::Down));
        assert!(take().get(Section::Swiglu) < Duration::from_millis(2), "take did not clear the totals");
    }
}
