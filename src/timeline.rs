//! Phase marks of one process, for `amtool bench --case startup`: with
//! `AMTOOL_TIMELINE=1` in its environment a process notes when each phase
//! of its start-up ends (CUDA context, kernel module, allocations, model
//! upload, first statistics, ...) and prints them on one stderr line as it
//! exits, seconds since `main` began. Without the variable a mark costs one
//! load of a flag.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The variable that turns the marks on.
pub const ENV: &str = "AMTOOL_TIMELINE";
/// What the report line starts with (the bench case looks for it).
pub const PREFIX: &str = "LOG (amtool) timeline:";

struct Timeline {
    start: Instant,
    marks: Mutex<Vec<(&'static str, f64)>>,
}

static TIMELINE: OnceLock<Option<Timeline>> = OnceLock::new();

fn timeline() -> Option<&'static Timeline> {
    TIMELINE
        .get_or_init(|| {
            (std::env::var(ENV).as_deref() == Ok("1")).then(|| Timeline {
                start: Instant::now(),
                marks: Mutex::new(Vec::new()),
            })
        })
        .as_ref()
}

/// Start the clock (the first call of anything here starts it; `main` calls
/// this first).
pub fn start() {
    timeline();
}

/// Note that `phase` ended now.
pub fn mark(phase: &'static str) {
    if let Some(t) = timeline() {
        let s = t.start.elapsed().as_secs_f64();
        if let Ok(mut m) = t.marks.lock() {
            m.push((phase, s));
        }
    }
}

/// The report line: `PREFIX phase=seconds ...` in the order marked.
pub fn format(marks: &[(&str, f64)]) -> String {
    let parts: Vec<String> = marks.iter().map(|(p, s)| format!("{p}={s:.6}")).collect();
    format!("{PREFIX} {}", parts.join(" "))
}

/// Parse a report line back into (phase, seconds since start) pairs.
pub fn parse(line: &str) -> Option<Vec<(String, f64)>> {
    let rest = line.trim().strip_prefix(PREFIX)?;
    rest.split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Host seconds spent in named steps, summed over calls (`amtool bench`
/// turns them on to say where a pipeline's main thread spends its time).
static TALLY_ON: AtomicBool = AtomicBool::new(false);
static TALLIES: Mutex<Vec<(&'static str, f64)>> = Mutex::new(Vec::new());

/// Start summing the steps [`tally`] times, from zero.
pub fn tallies_on() {
    if let Ok(mut t) = TALLIES.lock() {
        t.clear();
    }
    TALLY_ON.store(true, Ordering::Relaxed);
}

/// Stop summing; the sums so far, in the order first seen.
pub fn tallies_off() -> Vec<(&'static str, f64)> {
    TALLY_ON.store(false, Ordering::Relaxed);
    TALLIES.lock().map(|t| t.clone()).unwrap_or_default()
}

/// Runs `f`; while tallies are on, adds its wall time to the sum of `step`.
/// Off, this costs one load of a flag.
pub fn tally<R>(step: &'static str, f: impl FnOnce() -> R) -> R {
    let _t = Tally::start(step);
    f()
}

/// While tallies are on, adds `seconds` measured elsewhere (a device's
/// event times) to the sum of `step`.
pub fn add(step: &'static str, seconds: f64) {
    if !TALLY_ON.load(Ordering::Relaxed) {
        return;
    }
    if let Ok(mut t) = TALLIES.lock() {
        match t.iter_mut().find(|(s, _)| *s == step) {
            Some((_, v)) => *v += seconds,
            None => t.push((step, seconds)),
        }
    }
}

/// A step being timed for its tally: its wall time is added when it is
/// dropped (nothing is timed while tallies are off).
pub struct Tally {
    step: &'static str,
    t0: Option<Instant>,
}

impl Tally {
    pub fn start(step: &'static str) -> Self {
        Tally {
            step,
            t0: TALLY_ON.load(Ordering::Relaxed).then(Instant::now),
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        let Some(t0) = self.t0 else { return };
        add(self.step, t0.elapsed().as_secs_f64());
    }
}

/// Print the report (when marks are on), after a last mark `exit`.
pub fn report() {
    if let Some(t) = timeline() {
        mark("exit");
        if let Ok(m) = t.marks.lock() {
            eprintln!("{}", format(&m));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_sum_each_step_while_on() {
        assert_eq!(tally("off", || 7), 7);
        tallies_on();
        tally("a", || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        tally("b", || ());
        tally("a", || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        let t = tallies_off();
        tally("after", || ());
        // Other tests of this process may tally their own steps meanwhile.
        let step = |name| t.iter().find(|(s, _)| *s == name).map(|(_, v)| *v);
        assert!(step("a").is_some_and(|v| v >= 0.004), "{t:?}");
        assert!(step("b").is_some(), "{t:?}");
        assert!(step("off").is_none(), "{t:?}");
        assert!(!tallies_off().iter().any(|(s, _)| *s == "after"));
    }

    #[test]
    fn a_report_line_parses_back() {
        let line = format(&[("context", 0.125), ("first_stats", 0.25)]);
        assert_eq!(
            parse(&line),
            Some(vec![
                ("context".into(), 0.125),
                ("first_stats".into(), 0.25)
            ])
        );
        assert_eq!(parse("LOG (amtool) something else"), None);
        assert_eq!(parse(&format!("{PREFIX} context=abc")), None);
    }
}
