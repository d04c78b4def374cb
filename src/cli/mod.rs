//! One file per subcommand: parse options, call the library, write outputs.
//! Each reads like a Kaldi `gmmbin/` main: tables in, library calls, tables out.
//!
//! [`main_with_args`] is the whole program: it resolves Kaldi tool names
//! ([`shims`]), rewrites Kaldi-style options ([`kaldi`]), parses with clap and
//! runs the subcommand. Exit status is Kaldi's: 0 on success, 1 on error.

pub mod acc_stats;
pub mod align;
mod align_batch;
pub mod align_equal;
pub mod bench;
pub mod boost_silence;
pub mod copy;
pub mod copy_options;
pub mod copy_to_htk;
pub mod docs;
pub mod engine_args;
pub mod est;
pub mod global_get_post;
pub mod global_gmm;
pub mod gselect;
pub mod gselect_to_post;
pub mod herest;
pub mod kaldi;
pub mod map_adapt;
pub mod progress;
pub mod rescore_lattice;
pub mod score;
pub mod score_htk;
pub mod shims;
pub mod sum_accs;
pub mod train_io;
pub mod ubm_map;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "amtool",
    version,
    about = "GPU-accelerated GMM/HMM acoustic-model toolkit for Kaldi and HTK files",
    args_override_self = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Options every Kaldi program accepts (`--config` is expanded before parsing).
#[derive(Debug, Clone, Args)]
pub struct KaldiStandard {
    /// Verbose level (higher = more logging).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub verbose: i32,
    /// Print the command line to stderr (Kaldi's default).
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub print_args: bool,
    /// Read options from FILE (lines of --x=y); options on the command line win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the benchmark cases (../shared/bench/README.md) and print one JSON line per case.
    Bench(bench::BenchArgs),
    /// Copy Kaldi tables or objects, converting binary/text (copy-feats, copy-matrix,
    /// copy-vector, copy-int-vector, copy-post, gmm-copy, gmm-global-copy, fgmm-global-copy,
    /// lattice-copy); HTK MMFs and parameter files too.
    Copy(copy::CopyArgs),
    /// Accumulate EM statistics (gmm-acc-stats-ali, gmm-acc-stats, gmm-global-acc-stats,
    /// fgmm-global-acc-stats).
    AccStats(acc_stats::AccStatsArgs),
    /// Forced alignment with a Kaldi model and training graphs (gmm-align-compiled).
    Align(align::AlignArgs),
    /// Equally spaced alignments through the training graphs (align-equal-compiled).
    AlignEqual(align_equal::AlignEqualArgs),
    /// Scale the weights of the Gaussians of the listed phones' pdfs (gmm-boost-silence).
    BoostSilence(boost_silence::BoostSilenceArgs),
    /// Sum accumulator files (gmm-sum-accs, gmm-global-sum-accs, fgmm-global-sum-accs).
    SumAccs(sum_accs::SumAccsArgs),
    /// Re-estimate a model from accumulated statistics (gmm-est, gmm-global-est, fgmm-global-est).
    Est(est::EstArgs),
    /// Per-frame log-likelihoods: gmm-compute-likes (Kaldi model), gmm-global-get-frame-likes
    /// and fgmm-global-get-frame-likes (global DiagGmm / FullGmm); with --lattices, lattice
    /// rescoring (gmm-rescore-lattice).
    Score(score::ScoreArgs),
    /// Per-frame state log-likelihoods of an HTK HMM set (MMFs + HMM list); columns are the
    /// emitting states of the listed HMMs in list order.
    ScoreHtk(score_htk::ScoreHtkArgs),
    /// Gaussian selection: the n best Gaussians of a global GMM per frame (gmm-gselect, fgmm-gselect).
    Gselect(gselect::GselectArgs),
    /// Top-n Gaussian posteriors of a global GMM per frame (gmm-global-get-post).
    GlobalGetPost(global_get_post::GetPostArgs),
    /// Posteriors over the selected Gaussians of a global GMM (fgmm-global-gselect-to-post).
    GselectToPost(gselect_to_post::GselectToPostArgs),
    /// MAP adaptation of a Kaldi model per speaker or utterance (gmm-adapt-map).
    MapAdapt(map_adapt::MapAdaptArgs),
    /// Relevance-MAP adaptation of a diagonal UBM per speaker or utterance (GMM-UBM
    /// speaker recognition): adapted GMMs or mean supervectors.
    UbmMap(ubm_map::UbmMapArgs),
    /// Write each matrix of a Kaldi table as an HTK parameter file (copy-feats-to-htk).
    CopyToHtk(copy_to_htk::CopyToHtkArgs),
    /// Replace the acoustic scores on compact lattices using a new model (gmm-rescore-lattice).
    RescoreLattice(rescore_lattice::RescoreLatticeArgs),
    /// HTK embedded Baum-Welch re-estimation with all of HERest's own options (-C -I -S -H -M -t -u -d -x -o ...).
    Herest(herest::HerestArgs),
    /// Create symlinks named like the Kaldi tools amtool replaces (put DIR first on PATH).
    Shims {
        /// Folder for the links (created if missing).
        dir: PathBuf,
    },
    /// Print a shell completion script (e.g. `amtool completions bash > /etc/bash_completion.d/amtool`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages generated from these option definitions into DIR.
    #[command(hide = true)]
    Man {
        /// Folder for the roff pages (created if missing).
        dir: PathBuf,
        /// Also write the bash/zsh/fish completion scripts into this folder.
        #[arg(long, value_name = "DIR")]
        completions: Option<PathBuf>,
    },
}

impl Command {
    /// Kaldi programs echo their command line on stderr; amtool's own utility
    /// subcommands don't.
    fn is_kaldi_style(&self) -> bool {
        !matches!(
            self,
            Command::Shims { .. }
                | Command::Completions { .. }
                | Command::Man { .. }
                | Command::Bench(_)
                | Command::Herest(_)
        )
    }
}

/// Run a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    match cli.command {
        Command::Bench(args) => bench::run(&args),
        Command::Copy(args) => copy::run(args),
        Command::AccStats(args) => acc_stats::run(args),
        Command::SumAccs(args) => sum_accs::run(args),
        Command::Align(args) => align::run(args),
        Command::AlignEqual(args) => align_equal::run(args),
        Command::BoostSilence(args) => boost_silence::run(args),
        Command::Est(args) => est::run(args),
        Command::Score(args) => score::run(args),
        Command::ScoreHtk(args) => score_htk::run(args),
        Command::Gselect(args) => gselect::run(args),
        Command::GlobalGetPost(args) => global_get_post::run(args),
        Command::GselectToPost(args) => gselect_to_post::run(args),
        Command::MapAdapt(args) => map_adapt::run(args),
        Command::UbmMap(args) => ubm_map::run(args),
        Command::CopyToHtk(args) => copy_to_htk::run(&args),
        Command::RescoreLattice(args) => rescore_lattice::run(args),
        Command::Herest(args) => herest::run(args),
        Command::Shims { dir } => {
            let exe = match std::env::current_exe() {
                Ok(e) => e,
                Err(e) => return fail(&format!("cannot find the amtool executable: {e}")),
            };
            match shims::make_links(&dir, &exe) {
                Ok(n) => {
                    eprintln!("amtool: made {n} links in {}", dir.display());
                    0
                }
                Err(e) => fail(&e),
            }
        }
        Command::Completions { shell } => {
            use std::io::Write;
            match std::io::stdout().write_all(&docs::completion(shell)) {
                Ok(()) => 0,
                Err(e) => fail(&format!("writing the completion script: {e}")),
            }
        }
        Command::Man { dir, completions } => {
            let mut n = match docs::write_man_pages(&dir) {
                Ok(w) => w.len(),
                Err(e) => return fail(&format!("writing man pages to {}: {e}", dir.display())),
            };
            if let Some(c) = completions {
                match docs::write_completions(&c) {
                    Ok(w) => n += w.len(),
                    Err(e) => return fail(&format!("writing completions to {}: {e}", c.display())),
                }
            }
            eprintln!("amtool: wrote {n} files");
            0
        }
    }
}

/// Prints an error the way Kaldi does and returns exit status 1.
pub fn fail(msg: &str) -> i32 {
    eprintln!(
        "ERROR ({}[amtool-{}]) {msg}",
        kaldi::program(),
        env!("CARGO_PKG_VERSION")
    );
    1
}

/// How argv (argv[0] included) is read: the program name for log lines (the
/// Kaldi tool a link is named for, else `amtool-SUB`), the amtool subcommand
/// with the options the tool's name fixes, and the tool's own arguments.
pub fn invoked_as(args: &[OsString]) -> (String, Vec<OsString>, &[OsString]) {
    let argv0 = args
        .first()
        .cloned()
        .unwrap_or_else(|| OsString::from("amtool"));
    let invoked = PathBuf::from(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Through a shim: the tool name selects the subcommand; every argument is the tool's.
    match shims::find(&invoked) {
        Some(shim) => (
            invoked.clone(),
            shim.argv.iter().map(OsString::from).collect(),
            &args[1..],
        ),
        None if args.len() > 1 && !args[1].to_string_lossy().starts_with('-') => (
            format!("amtool-{}", args[1].to_string_lossy()),
            vec![args[1].clone()],
            &args[2..],
        ),
        None => ("amtool".to_string(), Vec::new(), &args[1..]),
    }
}

/// The argument list clap parses for subcommand `sub` (with its fixed
/// options) and the tool's arguments `rest`, Kaldi's option syntax rewritten
/// ([`kaldi::normalize_args`]; `--config` files read).
pub fn clap_args(sub: Vec<OsString>, rest: &[OsString]) -> Result<Vec<OsString>, String> {
    // `amtool bench` is not a Kaldi tool: its options take `--case NAME` too.
    // HERest's options are HTK's single-dash ones: no Kaldi rewriting.
    let rest = if sub.is_empty() || sub[0] == "bench" || sub[0] == "herest" {
        rest.to_vec()
    } else {
        kaldi::normalize_args(rest)?
    };
    let mut full = vec![OsString::from("amtool")];
    full.extend(sub);
    full.extend(rest);
    Ok(full)
}

/// The program: `args` is the full argv, argv[0] included.
pub fn main_with_args(args: Vec<OsString>) -> i32 {
    let (program, sub, rest) = invoked_as(&args);
    kaldi::set_program(&program);
    let full = match clap_args(sub, rest) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    let cli = match Cli::try_parse_from(&full) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
                _ => 1,
            };
        }
    };
    if cli.command.is_kaldi_style() && !print_args_disabled(&full) {
        let line: Vec<String> = args
            .iter()
            .map(|a| kaldi::escape(&a.to_string_lossy()))
            .collect();
        eprintln!("{} ", line.join(" "));
    }
    run(cli)
}

fn print_args_disabled(full: &[OsString]) -> bool {
    let mut last = None;
    for a in full {
        let a = a.to_string_lossy();
        if a == "--" {
            break;
        }
        if let Some(v) = a.strip_prefix("--print-args=") {
            last = kaldi::parse_bool(v).ok();
        }
    }
    last == Some(false)
}
