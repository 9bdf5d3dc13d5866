//! Progress reporting for long work, without drawing anything.
//!
//! Libraries never print: they report through this trait, and only the binary implements it with
//! progress bars. Methods take `&self` so one reporter can be shared by worker threads.

/// Receives progress of long-running work (builds, counting, warm-up).
pub trait Progress: Send + Sync {
    /// A new stage begins; `total` is its size in `unit`s when known.
    fn start(&self, stage: &str, total: Option<u64>, unit: ProgressUnit) {
        let _ = (stage, total, unit);
    }
    /// `delta` more units of the current stage are done.
    fn advance(&self, delta: u64) {
        let _ = delta;
    }
    /// The current stage is done.
    fn finish(&self) {}
}

/// What a stage counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressUnit {
    /// Bytes (shown as a rate such as MB/s).
    Bytes,
    /// Items: tokens, entries, steps.
    Items,
}

/// A reporter that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}
