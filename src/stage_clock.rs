//! How long a pipeline stage worked, for the benchmark's per-stage figures:
//! [`Stopwatch`] adds the wall time of the work it runs (not the waits on
//! the stage's neighbours), [`thread_cpu_seconds`] is the CPU time of the
//! calling thread (on a loaded machine, wall time also counts the stage's
//! time off the CPU).

/// Adds the wall time of the closures it runs.
#[derive(Debug, Default)]
pub struct Stopwatch(std::time::Duration);

impl Stopwatch {
    pub fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let t = std::time::Instant::now();
        let out = f();
        self.0 += t.elapsed();
        out
    }

    pub fn seconds(&self) -> f64 {
        self.0.as_secs_f64()
    }
}

/// CPU seconds the calling thread has run (Linux: the first field of
/// /proc/thread-self/schedstat, in nanoseconds); 0 where unavailable.
pub fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 * 1e-9)
}

/// A stage's work: wall seconds inside it and its thread's CPU seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTime {
    pub wall: f64,
    pub cpu: f64,
}

/// Times a stage that runs on a thread of its own from [`StageClock::start`]
/// to [`StageClock::stop`].
#[derive(Debug)]
pub struct StageClock {
    pub work: Stopwatch,
    cpu0: f64,
}

impl StageClock {
    pub fn start() -> Self {
        StageClock {
            work: Stopwatch::default(),
            cpu0: thread_cpu_seconds(),
        }
    }

    pub fn stop(&self) -> StageTime {
        StageTime {
            wall: self.work.seconds(),
            cpu: (thread_cpu_seconds() - self.cpu0).max(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_has_cpu_time_and_work_time() {
        let mut clock = StageClock::start();
        clock.work.time(|| {
            let t = std::time::Instant::now();
            while t.elapsed().as_millis() < 30 {
                std::hint::spin_loop();
            }
        });
        let t = clock.stop();
        assert!(t.wall >= 0.03);
        if std::path::Path::new("/proc/thread-self/schedstat").exists() {
            assert!(t.cpu > 0.0);
        }
    }
}
