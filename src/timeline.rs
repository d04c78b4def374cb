//! Phase marks of one process, for `amtool bench --case startup`: with
//! `AMTOOL_TIMELINE=1` in its environment a process notes when each phase
//! of its start-up ends (CUDA context, kernel module, allocations, model
//! upload, first statistics, ...) and prints them on one stderr line as it
//! exits, seconds since `main` began. Without the variable a mark costs one
//! load of a flag.

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
