//! A progress line over utterances for the long-running subcommands, shown
//! only when stderr is a terminal (recipes redirect stderr to log files and
//! must see Kaldi's log lines only). Warnings printed while it is shown go
//! through [`Progress::suspend`] so they do not tear the bar.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    bar: Option<ProgressBar>,
    frames: u64,
}

impl Progress {
    /// A spinner counting utterances and frames, or nothing when stderr is
    /// not a terminal.
    pub fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} {pos} utterances {msg} [{elapsed}]")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            b
        });
        Progress { bar, frames: 0 }
    }

    /// One more utterance of `frames` frames.
    pub fn utterance(&mut self, frames: usize) {
        self.frames += frames as u64;
        if let Some(b) = &self.bar {
            b.inc(1);
            b.set_message(format!("{} frames", self.frames));
        }
    }

    /// Run `f` (which prints) with the bar hidden.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }

    pub fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}
