//! `--use-gpu` and `--threads`, the engine options of every subcommand that
//! computes with a model (Kaldi's `--use-gpu` values, parsed as the training
//! subcommands parse them: yes, no, optional, wait).

use clap::Args;

use super::train_io::parse_use_gpu;
use crate::engine::choice::JobSize;
use crate::engine::{self, Engine, UseGpu};
use crate::model::{AcousticModel, CovKind};
use crate::train::job_frames::estimate_frames;

#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Compute on a GPU: yes (or fail), no, optional (GPU if usable, else CPU).
    #[arg(long, value_name = "yes|no|optional", default_value = "optional", value_parser = parse_use_gpu)]
    pub use_gpu: UseGpu,
    /// CPU threads (0: one per CPU).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub threads: usize,
}

impl EngineArgs {
    /// The engine these options ask for.
    pub fn engine(&self) -> Result<Box<dyn Engine>, String> {
        engine::select(self.use_gpu, self.threads).map_err(|e| e.to_string())
    }

    /// The engine for scoring the table `features` against `model`, each
    /// frame against `gaussians_per_frame` of its Gaussians: with
    /// `--use-gpu=optional`, the one that finishes first (see
    /// [`engine::choice`]; a job too small to pay for the GPU's start-up
    /// stays on the CPU, with one log line).
    pub fn engine_for(
        &self,
        features: &str,
        model: &AcousticModel,
        gaussians_per_frame: f64,
    ) -> Result<Box<dyn Engine>, String> {
        let per_frame = (gaussians_per_frame, model.dim, model.kind);
        engine_for_job(self.use_gpu, self.threads, features, per_frame)
    }
}

/// [`EngineArgs::engine_for`] for a tool with its own option fields; a
/// frame's work is (Gaussians, dimension, covariance kind).
pub fn engine_for_job(
    use_gpu: UseGpu,
    threads: usize,
    features: &str,
    (gaussians_per_frame, dim, kind): (f64, usize, CovKind),
) -> Result<Box<dyn Engine>, String> {
    let job = match use_gpu {
        UseGpu::Optional => estimate_frames(features).map(|frames| JobSize {
            frames,
            gaussians_per_frame,
            dim,
            kind,
        }),
        _ => None,
    };
    engine::select_for(use_gpu, threads, job.as_ref()).map_err(|e| e.to_string())
}
