//! `--use-gpu` and `--threads`, the engine options of every subcommand that
//! computes with a model (Kaldi's `--use-gpu` values: yes, no, optional).

use clap::Args;

use crate::engine::{self, Engine, UseGpu};

#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Compute on a GPU: yes (or fail), no, optional (GPU if usable, else CPU).
    #[arg(long, value_name = "WHEN", default_value = "optional", value_parser = parse_use_gpu)]
    pub use_gpu: UseGpu,
    /// CPU threads (0: one per CPU).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub threads: usize,
}

fn parse_use_gpu(s: &str) -> Result<UseGpu, String> {
    match s {
        "yes" | "true" => Ok(UseGpu::Yes),
        "no" | "false" => Ok(UseGpu::No),
        "optional" | "wait" => Ok(UseGpu::Optional),
        _ => Err(format!(
            "invalid --use-gpu value {s:?} (expected yes, no or optional)"
        )),
    }
}

impl EngineArgs {
    /// The engine these options ask for.
    pub fn engine(&self) -> Result<Box<dyn Engine>, String> {
        engine::select(self.use_gpu, self.threads).map_err(|e| e.to_string())
    }
}
