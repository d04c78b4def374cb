//! `--use-gpu` and `--threads`, the engine options of every subcommand that
//! computes with a model (Kaldi's `--use-gpu` values, parsed as the training
//! subcommands parse them: yes, no, optional, wait), and `--gpus`, amtool's
//! own, for the subcommands that spread their frames over several GPUs.

use clap::Args;

use super::train_io::parse_use_gpu;
use crate::engine::choice::JobSize;
use crate::engine::{self, Engine, Gpus, UseGpu};
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

/// `--gpus`: how many GPUs one process computes on.
#[derive(Debug, Clone, Args)]
pub struct GpusArg {
    /// GPUs to compute on (amtool's own option): a number, or all (every
    /// GPU CUDA_VISIBLE_DEVICES leaves visible), chosen by free memory as
    /// with one; the frames are split among them, with results the same to
    /// the bit for any number. Ignored on the CPU. AMTOOL_PARTITIONS=P
    /// uses each device (or the CPU) as P logical partitions, to test the
    /// splitting without the devices.
    #[arg(long, value_name = "N|all", default_value = "1")]
    pub gpus: Gpus,
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
        engine_for_job(self.use_gpu, self.threads, None, features, per_frame)
    }

    /// [`engine_for`](Self::engine_for) on the GPUs `gpus` asks for (see
    /// [`engine::select_gpus`]).
    pub fn engine_on(
        &self,
        gpus: &GpusArg,
        features: &str,
        model: &AcousticModel,
        gaussians_per_frame: f64,
    ) -> Result<Box<dyn Engine>, String> {
        let per_frame = (gaussians_per_frame, model.dim, model.kind);
        engine_for_job(
            self.use_gpu,
            self.threads,
            Some(gpus.gpus),
            features,
            per_frame,
        )
    }
}

/// [`EngineArgs::engine_for`] for a tool with its own option fields; a
/// frame's work is (Gaussians, dimension, covariance kind). With `gpus`,
/// the engine of [`engine::select_gpus`]; without, one device.
pub fn engine_for_job(
    use_gpu: UseGpu,
    threads: usize,
    gpus: Option<Gpus>,
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
    match gpus {
        Some(g) => engine::select_gpus(use_gpu, threads, g, job.as_ref()),
        None => engine::select_for(use_gpu, threads, job.as_ref()),
    }
    .map_err(|e| e.to_string())
}
