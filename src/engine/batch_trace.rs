//! `AMTOOL_BATCH_TRACE=1` (or `2`, without the copying threads' marks):
//! the host's side of the statistics batch trace.
//! Marks of the host's steps (batches held, their copies, the devices made
//! ready, the bench job's start and end) and the lines of the batches a
//! device engine collects (`engine/cuda/model/batch_trace.rs`: when the
//! host sent each, when its device ran its kernels, when its sums were
//! downloaded, when the host collected it), on one clock. This is what
//! showed where acc_stats_ark's devices idled (docs/performance.md, ninth
//! session): a copy enqueued too late, a round's copies serialised with
//! its sends. Off, it costs one load of a flag a mark.
//!
//! The marks: `load`, `loaded-all`, `prepare-devN`/`prepared-devN` (the
//! model on the devices, made ready); `e16-*-devN` (the FP16 E-step's
//! forms made in the background, and joined by the first send;
//! `e16-host-devN`, `e16-up-devN`: the forms built on the host, then
//! uploaded); `hold-devN`, `must-devN`, `queue-devN` (a batch held,
//! waited for, queued on its device's thread); `recv-devN`, `took` (a
//! batch's result taken); `summed`, `folded`, `drop`, `finished`,
//! `dropped` (the job's end); and, by thread ([`thread_mark`], at `1`
//! only), each piece a copying thread takes: `pF.i` at its start, `w` once
//! its memory is free, `f` filled, `c` its copy queued, `PF.i` at its end
//! (F the batch's frames, i the piece). The twenty-third session's
//! findings came from these.
//!
//! The lines are kept in memory and written by [`flush`] (at the end of a
//! bench job, and as the process exits): written as they came, a thread's
//! line waited for the terminal or file and for the other threads' lines,
//! and the trace showed stalls that an untraced run did not have.

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The variable that turns the lines on.
pub const ENV: &str = "AMTOOL_BATCH_TRACE";

/// What the trace keeps, by the variable's value: `1` every mark, `2`
/// all but the copying threads' marks of each piece (five a piece, each
/// taking the lines' lock: with 24 threads they slowed the copies, and a
/// job's first milliseconds, which the trace is for), anything else none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Off,
    Batches,
    Pieces,
}

fn level_of(value: Option<&str>) -> Level {
    match value {
        Some("1") => Level::Pieces,
        Some("2") => Level::Batches,
        _ => Level::Off,
    }
}

fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| level_of(std::env::var(ENV).ok().as_deref()))
}

/// Whether the trace is on.
pub(crate) fn on() -> bool {
    level() != Level::Off
}

/// Milliseconds since the first use of the clock in this process.
pub(crate) fn now_ms() -> f64 {
    static T0: OnceLock<Instant> = OnceLock::new();
    T0.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
}

/// The lines not yet written.
static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Keeps `line` for [`flush`].
pub(crate) fn keep(line: String) {
    LINES.lock().unwrap_or_else(|e| e.into_inner()).push(line);
}

/// The lines kept so far, in the order they came; none kept after.
fn take_lines() -> Vec<String> {
    std::mem::take(&mut *LINES.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Writes the lines kept so far to stderr, in the order they came.
pub fn flush() {
    if !on() {
        return;
    }
    for line in take_lines() {
        eprintln!("{line}");
    }
}

/// A line marking a step of the host's job (its start, the model loaded,
/// the settle) on the batches' clock, when tracing is on.
pub fn mark(what: &str) {
    mark_with(|| what.to_string());
}

/// [`mark`] of a text made only when tracing is on.
pub fn mark_with(what: impl FnOnce() -> String) {
    if on() {
        keep(format!(
            "LOG (amtool) batch: mark={} at={:.3}",
            what(),
            now_ms()
        ));
    }
}

/// [`mark`] of `what` and the calling thread's name (`what@name`): the
/// copying threads' steps, which the trace pairs by thread.
/// Kept only at `AMTOOL_BATCH_TRACE=1`.
pub fn thread_mark(what: impl std::fmt::Display) {
    if level() != Level::Pieces {
        return;
    }
    mark_with(|| {
        let t = std::thread::current();
        format!("{what}@{}", t.name().unwrap_or("?"))
    });
}

/// The host's send of a batch: `(start, end)` ms, when tracing is on.
pub(crate) fn send_start() -> Option<f64> {
    on().then(now_ms)
}

pub(crate) fn send_span(start: Option<f64>) -> Option<(f64, f64)> {
    start.map(|s| (s, now_ms()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_the_host_times_nothing() {
        // The variable is not set for the test binary.
        if std::env::var(ENV).is_err() {
            assert_eq!(send_start(), None);
            assert_eq!(send_span(None), None);
        }
        let s = send_span(Some(1.0)).unwrap();
        assert!(s.0 == 1.0 && s.1 >= 0.0);
    }

    #[test]
    fn the_variable_picks_what_is_kept() {
        assert_eq!(level_of(Some("1")), Level::Pieces);
        assert_eq!(level_of(Some("2")), Level::Batches);
        for v in [None, Some("0"), Some(""), Some("yes")] {
            assert_eq!(level_of(v), Level::Off, "{v:?}");
        }
    }

    /// Lines are kept in the order they came, from any thread, and taken
    /// once.
    #[test]
    fn lines_are_kept_in_order_until_taken() {
        keep("first".into());
        std::thread::spawn(|| keep("second".into())).join().unwrap();
        keep("third".into());
        let lines = take_lines();
        let ours: Vec<&str> = lines
            .iter()
            .map(String::as_str)
            .filter(|l| ["first", "second", "third"].contains(l))
            .collect();
        assert_eq!(ours, ["first", "second", "third"]);
        assert!(!take_lines().iter().any(|l| l == "first"));
    }
}
