//! `amtool est [options] <model-in> <stats-in> <model-out>`: Kaldi's gmm-est
//! (a TransitionModel + AmDiagGmm model), gmm-global-est (a DiagGmm) and
//! fgmm-global-est (a FullGmm), chosen by what the model file holds. The
//! update itself is `train::est`; this prints its messages as Kaldi's log
//! lines and writes the model (and `--write-occs`) atomically.

use clap::Args;

use amtool_formats::kaldi::accs::{AccumDiagGmm, AccumFullGmm, AmAccs};
use amtool_formats::kaldi::gmm::DiagGmm;
use amtool_formats::kaldi::matrix::Vector;
use amtool_formats::kaldi::model::{KaldiModel, ObjectKind};
use amtool_formats::kaldi::object::{object_to_bytes, read_object, KaldiObject};

use super::train_io::{print_msgs, read_object_file, write_object_file, InputObject};
use super::{kaldi, KaldiStandard};
use crate::stats::mle_diag::MleDiagOptions;
use crate::stats::mle_full::MleFullOptions;
use crate::stats::transition::MleTransitionOptions;
use crate::stats::UpdateFlags;
use crate::train::convert::parse_update_flags;
use crate::train::est::{est_am, est_diag, est_full, AmEstOptions, GlobalEstOptions};

#[derive(Debug, Clone, Args)]
pub struct EstArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    /// Write output in binary mode.
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub binary: bool,
    /// Increase the number of mixture components to this overall target (0: no).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub mix_up: i32,
    /// gmm-est: merge mixture components down to this overall target (0: no).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub mix_down: i32,
    /// gmm-est: power to allocate Gaussians to states when mixing up or down.
    #[arg(long, value_name = "X", default_value_t = 0.2)]
    pub power: f32,
    /// gmm-est: minimum per-Gaussian count enforced while mixing up and down.
    #[arg(long, value_name = "X", default_value_t = 20.0)]
    pub min_count: f32,
    /// While mixing up, perturb means by standard deviation times this factor.
    #[arg(long, value_name = "X", default_value_t = 0.01)]
    pub perturb_factor: f32,
    /// Which parameters to update: subset of mvwt (gmm-est) or mvw (global GMMs). Default: all.
    #[arg(long, value_name = "FLAGS")]
    pub update_flags: Option<String>,
    /// gmm-est: file to write the pdf occupancies to (a text vector).
    #[arg(long, value_name = "WXFILENAME", default_value = "")]
    pub write_occs: String,
    /// gmm-est: floor on transition probabilities.
    #[arg(long, value_name = "X", default_value_t = 0.01)]
    pub transition_floor: f32,
    /// gmm-est: minimum count of a transition state for its probabilities to be updated.
    #[arg(long, value_name = "X", default_value_t = 5.0)]
    pub transition_min_count: f32,
    /// gmm-est: share transition statistics among states with the same pdfs.
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub share_for_pdfs: bool,
    /// Minimum weight below which a Gaussian is not updated (and is removed).
    #[arg(long, value_name = "X", default_value_t = 1.0e-5)]
    pub min_gaussian_weight: f32,
    /// Minimum occupancy to update a Gaussian (default 10 for diagonal, 100 for full covariance).
    #[arg(long, value_name = "X")]
    pub min_gaussian_occupancy: Option<f32>,
    /// Diagonal GMMs: variance floor (absolute).
    #[arg(long, value_name = "X", default_value_t = 0.001)]
    pub min_variance: f32,
    /// Full-covariance GMMs: floor on the eigenvalues of the covariances.
    #[arg(long, value_name = "X", default_value_t = 0.001)]
    pub variance_floor: f32,
    /// Full-covariance GMMs: maximum condition number of the covariances.
    #[arg(long, value_name = "X", default_value_t = 1.0e4)]
    pub max_condition: f32,
    /// Remove Gaussians with too little data (rather than leave them unchanged).
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub remove_low_count_gaussians: bool,
    /// The Kaldi tool this run stands in for (set by the shims).
    #[arg(long, hide = true, default_value = "amtool-est")]
    pub kaldi_tool: String,
    /// Model to update (rxfilename): a model, a DiagGmm or a FullGmm.
    #[arg(value_name = "MODEL-IN")]
    pub model_in: String,
    /// Accumulators of the matching acc-stats (rxfilename).
    #[arg(value_name = "STATS-IN")]
    pub stats_in: String,
    /// Updated model (wxfilename).
    #[arg(value_name = "MODEL-OUT")]
    pub model_out: String,
}

/// Run `amtool est`; returns the exit status.
pub fn run(args: EstArgs) -> i32 {
    match run_inner(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn read_stats<T: KaldiObject>(stats: &InputObject, kind: ObjectKind) -> Result<T, String> {
    if stats.kind != kind {
        return Err(stats
            .kind
            .mismatch_error(&stats.name, kind.describe())
            .to_string());
    }
    read_object::<T>(&stats.data).map_err(|e| e.in_file(&stats.name).to_string())
}

fn non_negative(name: &str, v: i32) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("--{name}={v}: expected a number >= 0"))
}

fn run_inner(args: &EstArgs) -> Result<i32, String> {
    let wanted = super::shims::model_kind_read_by(&args.kaldi_tool);
    let model = read_object_file(&args.model_in)?;
    let kind = match (wanted, model.kind) {
        (None, k @ (ObjectKind::Model | ObjectKind::DiagGmm | ObjectKind::FullGmm)) => k,
        (Some(w), k) if w == k => k,
        (w, k) => {
            return Err(k
                .mismatch_error(
                    &model.name,
                    w.map_or(
                        "a GMM model (TransitionModel + AmDiagGmm), a DiagGmm or a FullGmm",
                        ObjectKind::describe,
                    ),
                )
                .to_string())
        }
    };
    let stats = read_object_file(&args.stats_in)?;
    let mix_up = non_negative("mix-up", args.mix_up)?;
    let mix_down = non_negative("mix-down", args.mix_down)?;
    let out = &args.model_out;
    match kind {
        ObjectKind::Model => {
            let mut m = KaldiModel::from_bytes(&model.data)
                .map_err(|e| e.in_file(&model.name).to_string())?;
            let accs: AmAccs = read_stats(&stats, ObjectKind::AmAccs)?;
            let flags = parse_update_flags(args.update_flags.as_deref().unwrap_or("mvwt"), "mvwt")
                .map_err(|e| e.to_string())?;
            let opts = AmEstOptions {
                gmm: MleDiagOptions {
                    min_gaussian_weight: args.min_gaussian_weight,
                    min_gaussian_occupancy: args.min_gaussian_occupancy.unwrap_or(10.0),
                    min_variance: args.min_variance,
                    remove_low_count_gaussians: args.remove_low_count_gaussians,
                },
                transitions: MleTransitionOptions {
                    floor: args.transition_floor,
                    mincount: args.transition_min_count,
                    share_for_pdfs: args.share_for_pdfs,
                },
                update_flags: flags,
                mix_up,
                mix_down,
                perturb_factor: args.perturb_factor,
                power: args.power,
                min_count: args.min_count,
            };
            let (msgs, occs) =
                est_am(&mut m, &accs, &opts).map_err(|e| format!("{}: {e}", stats.name))?;
            print_msgs(&msgs);
            if !args.write_occs.is_empty() {
                // Kaldi writes the occupancies in text mode whatever --binary says.
                let v = Vector { data: occs };
                write_object_file(&args.write_occs, &object_to_bytes(&v, false))?;
            }
            write_object_file(out, &m.to_bytes(args.binary))?;
        }
        ObjectKind::DiagGmm | ObjectKind::FullGmm => {
            if mix_down != 0 || !args.write_occs.is_empty() {
                return Err(
                    "--mix-down and --write-occs apply to models (gmm-est), not to global GMMs"
                        .into(),
                );
            }
            let f = parse_update_flags(args.update_flags.as_deref().unwrap_or("mvw"), "mvw")
                .map_err(|e| e.to_string())?;
            let gopts = GlobalEstOptions {
                update_flags: UpdateFlags {
                    transitions: false,
                    ..f
                },
                mix_up,
                perturb_factor: args.perturb_factor,
            };
            let bytes = if kind == ObjectKind::DiagGmm {
                let mut g: DiagGmm =
                    read_object(&model.data).map_err(|e| e.in_file(&model.name).to_string())?;
                let accs: AccumDiagGmm = read_stats(&stats, ObjectKind::DiagAccs)?;
                let mle = MleDiagOptions {
                    min_gaussian_weight: args.min_gaussian_weight,
                    min_gaussian_occupancy: args.min_gaussian_occupancy.unwrap_or(10.0),
                    min_variance: args.min_variance,
                    remove_low_count_gaussians: args.remove_low_count_gaussians,
                };
                let msgs = est_diag(&mut g, &accs, &mle, &gopts)
                    .map_err(|e| format!("{}: {e}", stats.name))?;
                print_msgs(&msgs);
                object_to_bytes(&g, args.binary)
            } else {
                let mut g = crate::model::kaldi::read_full_gmm(&model.data)
                    .map_err(|e| e.in_file(&model.name).to_string())?;
                let accs: AccumFullGmm = read_stats(&stats, ObjectKind::FullAccs)?;
                let mle = MleFullOptions {
                    min_gaussian_weight: args.min_gaussian_weight,
                    min_gaussian_occupancy: args.min_gaussian_occupancy.unwrap_or(100.0),
                    variance_floor: args.variance_floor,
                    max_condition: args.max_condition,
                    remove_low_count_gaussians: args.remove_low_count_gaussians,
                };
                let msgs = est_full(&mut g, &accs, &mle, &gopts)
                    .map_err(|e| format!("{}: {e}", stats.name))?;
                print_msgs(&msgs);
                object_to_bytes(&g, args.binary)
            };
            write_object_file(out, &bytes)?;
        }
        _ => unreachable!("model kind checked above"),
    }
    crate::kaldi_log!("Written model to {out}");
    Ok(0)
}
