//! `amtool sum-accs [--binary] <stats-out> <stats-in1> [<stats-in2> ...]`:
//! Kaldi's gmm-sum-accs, gmm-global-sum-accs and fgmm-global-sum-accs. The
//! kind of accumulators is read from the first input (every input must be of
//! that kind); the sum is written atomically, with the tool's log lines.

use clap::Args;

use amtool_formats::kaldi::accs::{AccumDiagGmm, AccumFullGmm, AmAccs};
use amtool_formats::kaldi::model::ObjectKind;
use amtool_formats::kaldi::object::{object_to_bytes, read_object, KaldiObject};

use super::train_io::{read_object_file, write_object_file, InputObject};
use super::{kaldi, KaldiStandard};
use crate::stats::fmt_g;
use crate::train::sum_accs::{sum_am, sum_diag, sum_full, total_stats_count};

#[derive(Debug, Clone, Args)]
pub struct SumAccsArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    /// Write output in binary mode.
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub binary: bool,
    /// The Kaldi tool this run stands in for (set by the shims).
    #[arg(long, hide = true, default_value = "amtool-sum-accs")]
    pub kaldi_tool: String,
    /// Output accumulators (wxfilename).
    #[arg(value_name = "STATS-OUT")]
    pub output: String,
    /// Input accumulators (rxfilenames), all of one kind.
    #[arg(value_name = "STATS-IN", required = true, num_args = 1..)]
    pub inputs: Vec<String>,
}

/// Run `amtool sum-accs`; returns the exit status.
pub fn run(args: SumAccsArgs) -> i32 {
    match run_inner(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn wanted_kind(tool: &str) -> Option<ObjectKind> {
    match tool {
        "gmm-sum-accs" => Some(ObjectKind::AmAccs),
        "gmm-global-sum-accs" => Some(ObjectKind::DiagAccs),
        "fgmm-global-sum-accs" => Some(ObjectKind::FullAccs),
        _ => None,
    }
}

fn describe_wanted(k: ObjectKind) -> &'static str {
    match k {
        ObjectKind::AmAccs => "GMM accumulators (gmm-acc-stats-ali)",
        ObjectKind::DiagAccs => "diagonal GMM accumulators (gmm-global-acc-stats)",
        _ => "full-covariance GMM accumulators (fgmm-global-acc-stats)",
    }
}

fn read_all<T: KaldiObject>(
    inputs: &[InputObject],
    kind: ObjectKind,
) -> Result<Vec<(String, T)>, String> {
    inputs
        .iter()
        .map(|i| {
            if i.kind != kind {
                return Err(i
                    .kind
                    .mismatch_error(&i.name, describe_wanted(kind))
                    .to_string());
            }
            read_object::<T>(&i.data)
                .map(|a| (i.name.clone(), a))
                .map_err(|e| e.in_file(&i.name).to_string())
        })
        .collect()
}

fn run_inner(args: &SumAccsArgs) -> Result<i32, String> {
    let inputs = args
        .inputs
        .iter()
        .map(|rx| read_object_file(rx))
        .collect::<Result<Vec<_>, _>>()?;
    let first = &inputs[0];
    let kind = match wanted_kind(&args.kaldi_tool) {
        Some(k) => k,
        None => match first.kind {
            k @ (ObjectKind::AmAccs | ObjectKind::DiagAccs | ObjectKind::FullAccs) => k,
            k => {
                return Err(k
                    .mismatch_error(&first.name, "GMM accumulators (of gmm-acc-stats-ali, gmm-global-acc-stats or fgmm-global-acc-stats)")
                    .to_string())
            }
        },
    };
    let out = &args.output;
    match kind {
        ObjectKind::AmAccs => {
            let accs = read_all::<AmAccs>(&inputs, kind)?;
            let sum = sum_am(&accs).map_err(|e| e.to_string())?;
            write_object_file(out, &sum.to_bytes(args.binary))?;
            let frames = sum.gmm.total_frames;
            crate::kaldi_log!(
                "Summed {} stats, total count {}, avg like/frame {}",
                accs.len(),
                fmt_g(frames),
                fmt_g(sum.gmm.total_like / frames)
            );
            crate::kaldi_log!(
                "Total count of stats is {}",
                fmt_g(total_stats_count(&sum.gmm))
            );
        }
        ObjectKind::DiagAccs => {
            let accs = read_all::<AccumDiagGmm>(&inputs, kind)?;
            let sum = sum_diag(&accs).map_err(|e| e.to_string())?;
            write_object_file(out, &object_to_bytes(&sum, args.binary))?;
        }
        _ => {
            let accs = read_all::<AccumFullGmm>(&inputs, kind)?;
            let sum = sum_full(&accs).map_err(|e| e.to_string())?;
            write_object_file(out, &object_to_bytes(&sum, args.binary))?;
        }
    }
    crate::kaldi_log!("Written stats to {out}");
    Ok(0)
}
