//! Progress on long work, one way for every command: a bar on a terminal, plain lines otherwise
//! (logs and CI keep them), or nothing (tests).

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// A progress bar on a terminal, plain lines otherwise.
    Auto,
    /// Plain lines on stderr.
    Lines,
    /// Nothing (tests).
    Silent,
}

/// A progress display over `total` steps of some unit.
pub struct Progress {
    bar: Option<ProgressBar>,
    lines: bool,
}

impl Progress {
    /// A display in `mode`; `what` ends the bar's line (`"runs"`, `"iterations"`), `prefix`
    /// starts it (an experiment's name, or empty).
    pub fn new(mode: ProgressMode, total: u64, what: &str, prefix: &str) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let bar = (mode == ProgressMode::Auto && terminal).then(|| {
            let bar = ProgressBar::new(total);
            let template = format!(
                "{{prefix:.bold}} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {what} (eta {{eta}}) {{msg}}"
            );
            let style = ProgressStyle::with_template(&template)
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.set_prefix(prefix.to_string());
            bar
        });
        let lines = mode == ProgressMode::Lines || (mode == ProgressMode::Auto && !terminal);
        Progress { bar, lines }
    }

    /// Moves the bar to `position`.
    pub fn set_position(&self, position: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(position);
        }
    }

    /// Advances the bar by `steps`.
    pub fn inc(&self, steps: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(steps);
        }
    }

    /// The bar's message; built only when a bar shows it.
    pub fn message(&self, text: impl FnOnce() -> String) {
        if let Some(bar) = &self.bar {
            bar.set_message(text());
        }
    }

    /// Whether plain lines are wanted (no bar, not silent).
    pub fn lines(&self) -> bool {
        self.lines
    }

    /// Prints `text` as a line when lines are wanted; built only then.
    pub fn line(&self, text: impl FnOnce() -> String) {
        if self.lines {
            eprintln!("{}", text());
        }
    }

    /// Clears the bar at the end of the work.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
