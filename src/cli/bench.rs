//! `amtool bench`: run the benchmark cases of ../shared/bench/README.md on an
//! engine and print one JSON object per line (see [`crate::bench`]).

use clap::Args;

use crate::bench::{self, BenchConfig};
use crate::engine::{self, Gpus};

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Engine to run: cpu or cuda.
    #[arg(long, default_value = "cpu", value_name = "NAME")]
    pub engine: String,
    /// Run on this many GPUs (a number or all) through the multi-device
    /// engine, whose statistics are the same for any number; the JSON lines
    /// get a "gpus" key (the devices, AMTOOL_PARTITIONS logical partitions
    /// counted). The cpu engine takes its AMTOOL_PARTITIONS.
    #[arg(long, value_name = "N|all")]
    pub gpus: Option<Gpus>,
    /// Case to run (repeatable; default: all engine cases): estep_seed000, score_seed002,
    /// score_seed002_var, fullcov_score_seed001, acc_ali, acc_stats_ark, score_ark,
    /// estep_fullcov, estep_fullcov_gselect, score_lattice, align_ark (these two read
    /// testdata/: run from the source
    /// folder; align_ark keeps its archives and models in --path when given); and the
    /// feature-archive read
    /// cases (never by default; they write --frames x --dim floats, ~1 GB): read_ark,
    /// read_ark_compressed; and startup (never by default: amtool acc-stats processes on a
    /// recipe-sized job from testdata/, each --use-gpu value alone and --jobs at once).
    #[arg(long = "case", value_name = "NAME")]
    pub cases: Vec<String>,
    /// Frames per case (T for estep_seed000) instead of the paper's.
    #[arg(long, value_name = "N")]
    pub frames: Option<usize>,
    /// Gaussians of the estep GMMs (estep_seed000: one M instead of 32, 256, 2048;
    /// estep_fullcov 256, estep_fullcov_gselect 2048).
    #[arg(long, value_name = "M")]
    pub gaussians: Option<usize>,
    /// States (pdfs for acc_ali).
    #[arg(long, value_name = "S")]
    pub states: Option<usize>,
    /// Gaussians per state (the mean for score_seed002_var and acc_ali).
    #[arg(long, value_name = "G")]
    pub gaussians_per_state: Option<usize>,
    /// Feature dimension.
    #[arg(long, value_name = "D")]
    pub dim: Option<usize>,
    /// CPU engine threads (0: one per CPU).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub threads: usize,
    /// Timed runs per case after one warm-up (the median is reported; at least 3
    /// for figures you publish).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub reps: usize,
    /// Folder for the temporary archives of the read cases (default: the system's temp folder).
    #[arg(long, value_name = "DIR")]
    pub path: Option<std::path::PathBuf>,
    /// Processes the startup case runs at once.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub jobs: usize,
    /// Most frames checked against the float64 reference.
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    pub check_frames: usize,
}

/// Returns the exit status.
pub fn run(args: &BenchArgs) -> i32 {
    let engine = match args.gpus {
        Some(g) => engine::by_name_gpus(&args.engine, args.threads, g),
        None => engine::by_name(&args.engine, args.threads),
    };
    let engine = match engine {
        Ok(e) => e,
        Err(e) => return super::fail(&e.to_string()),
    };
    let cfg = BenchConfig {
        frames: args.frames,
        gaussians: args.gaussians,
        states: args.states,
        gauss_per_state: args.gaussians_per_state,
        dim: args.dim,
        reps: args.reps,
        check_frames: args.check_frames.max(1),
        path: args.path.clone(),
        jobs: args.jobs,
        ..BenchConfig::default()
    };
    let cases: Vec<String> = if args.cases.is_empty() {
        let here = bench::lattice::data_present();
        if !here {
            crate::kaldi_log!(
                "score_lattice and align_ark left out: no testdata/kaldi here (run from the source folder)"
            );
        }
        bench::CASES
            .iter()
            .filter(|c| here || !["score_lattice", "align_ark"].contains(c))
            .map(|s| s.to_string())
            .collect()
    } else {
        args.cases.clone()
    };
    for case in &cases {
        let gpus = args.gpus.map(|_| engine.devices());
        let r = bench::run_case(engine.as_ref(), case, &cfg, &mut |j| match gpus {
            Some(n) => println!("{}", j.clone().int("gpus", n).line()),
            None => println!("{}", j.line()),
        });
        if let Err(e) = r {
            return super::fail(&format!("bench case {case}: {e}"));
        }
    }
    0
}
