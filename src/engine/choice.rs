//! `--use-gpu=optional` picks the engine that will finish first. A GPU
//! costs every process a fixed start-up (driver initialisation, context
//! creation and teardown: ~0.3–0.4 s on an H100, measured with
//! `amtool bench --case startup`, docs/performance.md) before its far
//! higher rate pays; a recipe's small jobs (a monophone model's
//! alignment statistics: milliseconds of arithmetic) finish sooner on the
//! CPU. The job's size is known before any engine opens: frames from the
//! feature table ([`crate::train::job_frames`]), Gaussians and dimension
//! from the model. Reading the features costs both engines the same, so
//! only the arithmetic and the start-up are compared.

use crate::model::CovKind;

/// The arithmetic of a job, in Gaussian evaluations × z length (each one
/// multiply-add of the scoring and one of the statistics).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobSize {
    pub frames: usize,
    /// Gaussians each frame is scored against (all of a global GMM's; the
    /// mean of a model's states for aligned statistics).
    pub gaussians_per_frame: f64,
    pub dim: usize,
    pub kind: CovKind,
}

impl JobSize {
    /// Gaussian evaluations × z length.
    pub fn work(&self) -> f64 {
        self.frames as f64
            * self.gaussians_per_frame
            * crate::engine::cuda::compile::kz(self.dim, self.kind) as f64
    }
}

/// What the choice assumes of the two engines.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineCosts {
    /// Seconds a process spends on the GPU before and after its work.
    pub gpu_startup_s: f64,
    /// Work units a second on one CPU thread.
    pub cpu_rate_per_thread: f64,
    /// Work units a second on the GPU.
    pub gpu_rate: f64,
}

/// Measured figures: GPU start-up on the H100 (`bench --case startup`:
/// 0.39 s between `--use-gpu=yes` and `no` on the same job, 0.3 s after
/// this project's cuts), CPU from the statistics benchmark (76,000
/// frames/s a thread of a 2048 × 40 GMM, 1.3e10 units/s; taken at less
/// than half, as smaller per-state GEMMs run slower), and the GPU at
/// 1e13 units/s (where its rate hardly matters against the start-up).
pub const MEASURED: EngineCosts = EngineCosts {
    gpu_startup_s: 0.3,
    cpu_rate_per_thread: 5e9,
    gpu_rate: 1e13,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Cpu,
    Gpu,
}

/// The choice and the seconds of arithmetic it expects of each engine
/// (start-up included for the GPU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub choice: Choice,
    pub cpu_s: f64,
    pub gpu_s: f64,
}

/// The engine that finishes `job` first on `threads` CPU threads (≥ 1).
pub fn choose(job: &JobSize, threads: usize, costs: &EngineCosts) -> Estimate {
    let work = job.work();
    let cpu_s = work / (costs.cpu_rate_per_thread * threads.max(1) as f64);
    let gpu_s = costs.gpu_startup_s + work / costs.gpu_rate;
    Estimate {
        choice: if cpu_s < gpu_s {
            Choice::Cpu
        } else {
            Choice::Gpu
        },
        cpu_s,
        gpu_s,
    }
}

/// Arithmetic a CPU thread should have before another is worth starting.
pub const MIN_THREAD_SECONDS: f64 = 0.02;

/// Threads worth starting for `job` on the CPU when the count was left open
/// (`--threads=0`): enough that each has at least [`MIN_THREAD_SECONDS`] of
/// arithmetic, at most `available`. A recipe runs its small jobs side by
/// side (`--nj` at once), so threads beyond that only contend.
pub fn threads_for(job: &JobSize, available: usize, costs: &EngineCosts) -> usize {
    let one = job.work() / costs.cpu_rate_per_thread;
    let wanted = (one / MIN_THREAD_SECONDS).ceil();
    (wanted.max(1.0) as usize).min(available.max(1))
}

/// The one log line of a CPU choice.
pub fn cpu_choice_line(job: &JobSize, threads: usize, est: &Estimate) -> String {
    let s = if threads == 1 { "" } else { "s" };
    format!(
        "--use-gpu=optional: about {} frames × {:.0} Gaussians of dimension {} take ~{:.3} s on the CPU ({threads} thread{s}), less than the GPU's start-up (~{:.2} s); computing on the CPU (--use-gpu=yes for the GPU)",
        job.frames, job.gaussians_per_frame, job.dim, est.cpu_s, est.gpu_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(frames: usize, gaussians_per_frame: f64, dim: usize) -> JobSize {
        JobSize {
            frames,
            gaussians_per_frame,
            dim,
            kind: CovKind::Diagonal,
        }
    }

    #[test]
    fn a_recipe_job_of_a_monophone_model_stays_on_the_cpu() {
        // train_mono at nj = 8: 77,000 frames, 1,000 Gaussians over 63 pdfs.
        let j = job(77_000, 1000.0 / 63.0, 39);
        for threads in [1, 2, 16] {
            let e = choose(&j, threads, &MEASURED);
            assert_eq!(e.choice, Choice::Cpu, "{threads} threads: {e:?}");
            assert!(e.cpu_s < e.gpu_s);
        }
    }

    #[test]
    fn a_small_job_left_to_choose_takes_few_threads() {
        // The monophone job: 77,000 × 15.9 Gaussians × 79 = 9.7e7 units,
        // ~19 ms on one thread.
        let j = job(77_000, 1000.0 / 63.0, 39);
        assert_eq!(threads_for(&j, 16, &MEASURED), 1);
        // Three times the frames: ~58 ms, three threads' worth.
        let j = job(231_000, 1000.0 / 63.0, 39);
        assert_eq!(threads_for(&j, 16, &MEASURED), 3);
        // A UBM E-step: every thread there is.
        let j = job(3_125_506, 2048.0, 40);
        assert_eq!(threads_for(&j, 16, &MEASURED), 16);
        assert_eq!(threads_for(&j, 0, &MEASURED), 1);
    }

    #[test]
    fn a_large_ubm_estep_goes_to_the_gpu() {
        // estep_seed000: 3.1 M frames of a 2048-Gaussian GMM.
        let j = job(3_125_506, 2048.0, 40);
        for threads in [2, 16, 128] {
            assert_eq!(choose(&j, threads, &MEASURED).choice, Choice::Gpu);
        }
    }

    #[test]
    fn more_threads_move_the_break_even_towards_the_gpu_side() {
        // A job between the two: the GPU for 2 threads, the CPU for 64.
        let j = job(200_000, 2048.0, 40);
        assert_eq!(choose(&j, 2, &MEASURED).choice, Choice::Gpu);
        assert_eq!(choose(&j, 64, &MEASURED).choice, Choice::Cpu);
    }

    #[test]
    fn the_break_even_is_where_cpu_time_equals_start_up() {
        let costs = EngineCosts {
            gpu_startup_s: 1.0,
            cpu_rate_per_thread: 1e9,
            gpu_rate: f64::INFINITY,
        };
        // kz = 2·4 + 1 = 9: 1e9 units are 1e9 / 9 / 10 frames of 10 Gaussians.
        let frames = (1e9 / 90.0) as usize;
        assert_eq!(
            choose(&job(frames - 100, 10.0, 4), 1, &costs).choice,
            Choice::Cpu
        );
        assert_eq!(
            choose(&job(frames + 100, 10.0, 4), 1, &costs).choice,
            Choice::Gpu
        );
    }

    #[test]
    fn full_covariances_weigh_their_longer_z() {
        let diag = JobSize {
            kind: CovKind::Diagonal,
            ..job(1000, 8.0, 40)
        };
        let full = JobSize {
            kind: CovKind::Full,
            ..diag
        };
        assert_eq!(diag.work(), 1000.0 * 8.0 * 81.0);
        assert_eq!(full.work(), 1000.0 * 8.0 * (40.0 + 820.0 + 1.0));
    }

    #[test]
    fn the_log_line_says_what_was_chosen_and_why() {
        let j = job(77_000, 16.0, 39);
        let e = choose(&j, 16, &MEASURED);
        let line = cpu_choice_line(&j, 16, &e);
        assert!(
            line.starts_with(
                "--use-gpu=optional: about 77000 frames × 16 Gaussians of dimension 39"
            ),
            "{line}"
        );
        assert!(line.contains("computing on the CPU"), "{line}");
        assert!(line.contains("16 threads"), "{line}");
    }
}
