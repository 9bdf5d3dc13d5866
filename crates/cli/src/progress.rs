//! Progress bars on stderr: the binary's implementation of `anyspec_core::Progress`.

use std::sync::Mutex;

use anyspec_core::{Progress, ProgressUnit};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Draws one indicatif bar per stage; draws nothing when disabled or when stderr is not a
/// terminal.
pub(crate) struct BarReporter {
    enabled: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl BarReporter {
    pub(crate) fn new(enabled: bool) -> Self {
        BarReporter { enabled, bar: Mutex::new(None) }
    }

    fn with_bar(&self, f: impl FnOnce(&ProgressBar)) {
        if let Ok(guard) = self.bar.lock()
            && let Some(bar) = guard.as_ref()
        {
            f(bar);
        }
    }
}

impl Progress for BarReporter {
    fn start(&self, stage: &str, total: Option<u64>, unit: ProgressUnit) {
        if !self.enabled {
            return;
        }
        let bar = match total {
            Some(total) => ProgressBar::new(total),
            None => ProgressBar::new_spinner(),
        };
        bar.set_draw_target(ProgressDrawTarget::stderr());
        let template = match (total.is_some(), unit) {
            (true, ProgressUnit::Bytes) => "{msg:>24} [{bar:30}] {bytes}/{total_bytes} ({binary_bytes_per_sec}, {eta})",
            (true, ProgressUnit::Items) => "{msg:>24} [{bar:30}] {pos}/{len} ({per_sec}, {eta})",
            (false, ProgressUnit::Bytes) => "{spinner} {msg:>24} {bytes} ({binary_bytes_per_sec})",
            (false, ProgressUnit::Items) => "{spinner} {msg:>24} {pos} ({per_sec})",
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(stage.to_string());
        if let Ok(mut guard) = self.bar.lock()
            && let Some(old) = guard.replace(bar)
        {
            old.finish_and_clear();
        }
    }

    fn advance(&self, delta: u64) {
        self.with_bar(|bar| bar.inc(delta));
    }

    fn finish(&self) {
        if let Ok(mut guard) = self.bar.lock()
            && let Some(bar) = guard.take()
        {
            bar.finish_and_clear();
        }
    }
}
