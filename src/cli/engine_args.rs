//! `--use-gpu` and `--threads`, the engine options of every subcommand that
//! computes with a model (Kaldi's `--use-gpu` values, parsed as the training
//! subcommands parse them: yes, no, optional, wait).

use clap::Args;

use super::train_io::parse_use_gpu;
use crate::engine::{self, Engine, UseGpu};

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
}
