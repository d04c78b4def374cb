//! `amtool acc-stats [options] <model-in> <feature-rspecifier>
//! [<alignments-or-posteriors-rspecifier>] <stats-out>`: EM statistics, as
//! Kaldi's gmm-acc-stats-ali (alignments), gmm-acc-stats (posteriors),
//! gmm-global-acc-stats (a DiagGmm, three arguments) and
//! fgmm-global-acc-stats (a FullGmm). Utterances stream one at a time
//! through the engine `--use-gpu` selects; the output is written atomically
//! at the end, and the log lines are those of the Kaldi tool.

use clap::Args;

use crate::train::prefetch::SharedFeats;
use amtool_formats::kaldi::accs::AmAccs;
use amtool_formats::kaldi::any::AnyObject;
use amtool_formats::kaldi::gmm::DiagGmm;
use amtool_formats::kaldi::holder::{Int32Vector, Int32VectorVector, Posterior};
use amtool_formats::kaldi::matrix::Vector;
use amtool_formats::kaldi::model::{KaldiModel, ObjectKind};
use amtool_formats::kaldi::object::{object_to_bytes, read_object};
use amtool_formats::kaldi::table::RandomAccessTableReader;

use super::engine_args::GpusArg;
use super::progress::Progress;
use super::train_io::{parse_use_gpu, read_object_file, write_object_file};
use super::{kaldi, KaldiStandard};
use crate::engine::{Engine, UseGpu};
use crate::model::CovKind;
use crate::stats::fmt_g;
use crate::train::acc_stats::{AmAccStats, GlobalAccStats, UttOutcome};
use crate::train::convert::{model_from_diag, model_from_full, parse_update_flags};

#[derive(Debug, Clone, Args)]
pub struct AccStatsArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    /// Write output in binary mode.
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub binary: bool,
    /// Compute on the GPU: yes (or fail), no, optional (GPU if usable, else CPU).
    #[arg(long, value_name = "yes|no|optional", default_value = "optional", value_parser = parse_use_gpu)]
    pub use_gpu: UseGpu,
    /// CPU engine threads (0: one per CPU).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub threads: usize,
    #[command(flatten)]
    pub gpus: GpusArg,
    /// Which parameters the statistics are for: subset of mvwt (models; gmm-acc-stats)
    /// or mvw (global GMMs). Default: all.
    #[arg(long, value_name = "FLAGS")]
    pub update_flags: Option<String>,
    /// Global GMMs: rspecifier of Gaussian-selection lists limiting the Gaussians used on each frame.
    #[arg(long, value_name = "RSPECIFIER", default_value = "")]
    pub gselect: String,
    /// Global GMMs: rspecifier of per-frame weights (a float vector per utterance).
    #[arg(long, value_name = "RSPECIFIER", default_value = "")]
    pub weights: String,
    /// The Kaldi tool this run stands in for (set by the shims).
    #[arg(long, hide = true, default_value = "amtool-acc-stats")]
    pub kaldi_tool: String,
    /// <model-in> <feature-rspecifier> [<alignments-rspecifier|posteriors-rspecifier>] <stats-out>
    /// (three arguments for a global DiagGmm/FullGmm, four for a model).
    #[arg(value_name = "ARGS", num_args = 3..=4, required = true)]
    pub args: Vec<String>,
}

/// Run `amtool acc-stats`; returns the exit status.
pub fn run(args: AccStatsArgs) -> i32 {
    match run_inner(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn run_inner(args: &AccStatsArgs) -> Result<i32, String> {
    let tool = args.kaldi_tool.as_str();
    let want_args = match tool {
        "gmm-acc-stats-ali" | "gmm-acc-stats" => Some(4),
        "gmm-global-acc-stats" | "fgmm-global-acc-stats" => Some(3),
        _ => None,
    };
    if let Some(n) = want_args {
        if args.args.len() != n {
            return Err(format!(
                "{tool} takes {n} arguments, got {} (see --help)",
                args.args.len()
            ));
        }
    }
    let model = read_object_file(&args.args[0])?;
    if args.args.len() == 4 {
        if model.kind != ObjectKind::Model {
            return Err(model
                .kind
                .mismatch_error(
                    &model.name,
                    "a GMM model (TransitionModel + AmDiagGmm) for accumulation with alignments or posteriors",
                )
                .to_string());
        }
        if !args.gselect.is_empty() || !args.weights.is_empty() {
            return Err("--gselect and --weights apply to global GMMs (three arguments)".into());
        }
        let m =
            KaldiModel::from_bytes(&model.data).map_err(|e| e.in_file(&model.name).to_string())?;
        return am_stats(args, &m);
    }
    let wanted = super::shims::model_kind_read_by(tool);
    match model.kind {
        ObjectKind::DiagGmm | ObjectKind::FullGmm if wanted.is_none_or(|w| w == model.kind) => {
            global_stats(args, &model)
        }
        k => Err(k
            .mismatch_error(
                &model.name,
                match wanted {
                    Some(ObjectKind::FullGmm) => "a FullGmm",
                    Some(_) => "a DiagGmm",
                    None => "a DiagGmm or FullGmm (three arguments: a global GMM)",
                },
            )
            .to_string()),
    }
}

/// The targets table: alignments, posteriors, or either (`amtool acc-stats`
/// looks at each entry).
enum TargetsReader {
    Ali(RandomAccessTableReader<Int32Vector>),
    Post(RandomAccessTableReader<Posterior>),
    Any(RandomAccessTableReader<AnyObject>),
}

enum Targets {
    Ali(Vec<i32>),
    Post(Vec<Vec<(i32, f32)>>),
}

impl TargetsReader {
    fn get(&mut self, key: &str) -> Result<Option<Targets>, String> {
        let e = |e: amtool_formats::Error| e.to_string();
        Ok(match self {
            TargetsReader::Ali(r) => r.get(key).map_err(e)?.map(|a| Targets::Ali(a.0.clone())),
            TargetsReader::Post(r) => r.get(key).map_err(e)?.map(|p| Targets::Post(p.0.clone())),
            TargetsReader::Any(r) => match r.get(key).map_err(e)? {
                None => None,
                Some(AnyObject::Int32Vector(a)) => Some(Targets::Ali(a.0.clone())),
                Some(AnyObject::Posterior(p)) => Some(Targets::Post(p.0.clone())),
                Some(o) => {
                    return Err(format!(
                        "key {key}: the alignments/posteriors table holds a {}, expected an alignment (int32 vector) or a posterior",
                        o.object_type().describe()
                    ))
                }
            },
        })
    }
}

fn am_stats(args: &AccStatsArgs, model: &KaldiModel) -> Result<i32, String> {
    let (feats_spec, targets_spec, out) = (&args.args[1], &args.args[2], &args.args[3]);
    let posteriors_tool = args.kaldi_tool == "gmm-acc-stats";
    let flags = parse_update_flags(args.update_flags.as_deref().unwrap_or("mvwt"), "mvwt")
        .map_err(|e| e.to_string())?;
    crate::timeline::mark("model_read");
    let pdfs = model.am.pdfs.len().max(1);
    let gaussians: usize = model.am.pdfs.iter().map(|p| p.weights.len()).sum();
    let engine = engine_for(
        args,
        feats_spec,
        gaussians as f64 / pdfs as f64,
        model.am.dim,
        CovKind::Diagonal,
    )?;
    crate::timeline::mark("engine_open");
    let mut acc = AmAccStats::new(engine.as_ref(), model, flags).map_err(|e| e.to_string())?;
    crate::timeline::mark("model_load");
    let mut feats = SharedFeats::open(feats_spec).map_err(|e| e.to_string())?;
    let open_err = |e: amtool_formats::Error| e.to_string();
    let mut targets = match args.kaldi_tool.as_str() {
        "gmm-acc-stats-ali" => {
            TargetsReader::Ali(RandomAccessTableReader::open(targets_spec).map_err(open_err)?)
        }
        "gmm-acc-stats" => {
            TargetsReader::Post(RandomAccessTableReader::open(targets_spec).map_err(open_err)?)
        }
        _ => TargetsReader::Any(RandomAccessTableReader::open(targets_spec).map_err(open_err)?),
    };

    let mut progress = Progress::new();
    let (mut num_done, mut num_missing, mut num_other) = (0usize, 0usize, 0usize);
    let (mut tot_like, mut tot_t) = (0f64, 0f64);
    let mut saw_posteriors = posteriors_tool;
    while let Some((key, mat)) = feats.next_entry().map_err(|e| e.to_string())? {
        let Some(t) = targets.get(&key)? else {
            num_missing += 1;
            if !saw_posteriors {
                progress.suspend(|| crate::kaldi_warn!("No alignment for utterance {key}"));
            }
            continue;
        };
        let (rows, cols) = (mat.rows(), mat.cols());
        // Kaldi logs every 50th utterance's own likelihood: send what is
        // queued so that utterance's likelihood comes out alone.
        let report = (num_done + 1) % 50 == 0;
        if report {
            tot_like += acc.take_like().map_err(|e| e.to_string())?;
        }
        let outcome = match &t {
            // The features move into the batch (copied in with the others there).
            Targets::Ali(a) => acc.add_alignment(&key, mat, rows, cols, a),
            Targets::Post(p) => {
                saw_posteriors = true;
                acc.add_posterior(&key, mat, rows, cols, p)
            }
        }
        .map_err(|e| e.to_string())?;
        match outcome {
            UttOutcome::Skipped(w) => {
                progress.suspend(|| crate::kaldi_warn!("{w}"));
                num_other += 1;
            }
            UttOutcome::Done { weight } => {
                num_done += 1;
                tot_t += weight;
                progress.utterance(rows);
                if report {
                    let like = acc.take_like().map_err(|e| e.to_string())?;
                    crate::timeline::mark("stats_settled");
                    tot_like += like;
                    progress.suspend(|| {
                        crate::kaldi_log!(
                            "Processed {num_done} utterances; for utterance {key} avg. like is {} over {} frames.",
                            fmt_g(like / weight),
                            fmt_g(weight)
                        )
                    });
                }
            }
        }
    }
    tot_like += acc.take_like().map_err(|e| e.to_string())?;
    progress.finish();
    if saw_posteriors {
        crate::kaldi_log!(
            "Done {num_done} files, {num_missing} with no posteriors, {num_other} with other errors."
        );
        crate::kaldi_log!(
            "Overall avg like per frame (Gaussian only) = {} over {} frames.",
            fmt_g(tot_like / tot_t),
            fmt_g(tot_t)
        );
    } else {
        crate::kaldi_log!(
            "Done {num_done} files, {} with errors.",
            num_missing + num_other
        );
        crate::kaldi_log!(
            "Overall avg like per frame (Gaussian only) = {} over {} frames.",
            fmt_g(tot_like / tot_t),
            tot_t as i64
        );
    }
    crate::timeline::mark("stats_settled");
    let accs: AmAccs = acc.into_accs().map_err(|e| e.to_string())?;
    write_object_file(out, &accs.to_bytes(args.binary))?;
    crate::kaldi_log!("Written accs.");
    crate::timeline::mark("output_written");
    Ok(if num_done != 0 { 0 } else { 1 })
}

/// What a frame with Gaussian selection costs, in Gaussians of the full
/// path, for the engine choice (the selection is read only later): the
/// recipes' 20 selected (`sid/train_ivector_extractor.sh`), each about 2.5
/// Gaussians' work on the CPU (scored alone, statistics in f64: the CPU's
/// estep_fullcov_gselect against estep_fullcov at D = 60).
const GSELECT_GAUSSIANS_PER_FRAME: f64 = 50.0;

/// The engine `--use-gpu` asks for; with `optional`, the one that finishes
/// first a job of `gaussians_per_frame` Gaussians a frame over the
/// estimated frames of `feats_spec` (see [`engine::choice`]).
fn engine_for(
    args: &AccStatsArgs,
    feats_spec: &str,
    gaussians_per_frame: f64,
    dim: usize,
    kind: CovKind,
) -> Result<Box<dyn Engine>, String> {
    let per_frame = (gaussians_per_frame, dim, kind);
    let gpus = Some(args.gpus.gpus);
    super::engine_args::engine_for_job(args.use_gpu, args.threads, gpus, feats_spec, per_frame)
}

fn global_stats(args: &AccStatsArgs, model: &super::train_io::InputObject) -> Result<i32, String> {
    let (feats_spec, out) = (&args.args[1], &args.args[2]);
    let flags = parse_update_flags(args.update_flags.as_deref().unwrap_or("mvw"), "mvw")
        .map_err(|e| e.to_string())?;
    let full = model.kind == ObjectKind::FullGmm;
    let am = if full {
        let g = crate::model::kaldi::read_full_gmm(&model.data)
            .map_err(|e| e.in_file(&model.name).to_string())?;
        model_from_full(&g)
    } else {
        let g: DiagGmm =
            read_object(&model.data).map_err(|e| e.in_file(&model.name).to_string())?;
        model_from_diag(&g)
    };
    let per_frame = if args.gselect.is_empty() {
        am.num_gaussians() as f64
    } else {
        GSELECT_GAUSSIANS_PER_FRAME.min(am.num_gaussians() as f64)
    };
    let engine = engine_for(args, feats_spec, per_frame, am.dim, am.kind)?;
    // The features' reader reads ahead while the model goes to the engine.
    let mut feats = SharedFeats::open(feats_spec).map_err(|e| e.to_string())?;
    let mut acc = GlobalAccStats::new(engine.as_ref(), &am, flags).map_err(|e| e.to_string())?;
    if args.gselect.is_empty() && args.weights.is_empty() {
        acc.prepare_plain().map_err(|e| e.to_string())?;
    }
    let mut gselect = if args.gselect.is_empty() {
        None
    } else {
        Some(
            RandomAccessTableReader::<Int32VectorVector>::open(&args.gselect)
                .map_err(|e| e.to_string())?,
        )
    };
    let mut weights = if args.weights.is_empty() {
        None
    } else {
        Some(
            RandomAccessTableReader::<Vector<f32>>::open(&args.weights)
                .map_err(|e| e.to_string())?,
        )
    };

    let mut progress = Progress::new();
    let (mut num_done, mut num_err) = (0usize, 0usize);
    let (mut tot_like, mut tot_weight) = (0f64, 0f64);
    while let Some((key, mat)) = feats.next_entry().map_err(|e| e.to_string())? {
        let w = match &mut weights {
            None => None,
            Some(r) => match r.get(&key).map_err(|e| e.to_string())? {
                Some(v) => Some(v.data.clone()),
                None => {
                    progress.suspend(|| {
                        crate::kaldi_warn!("No per-frame weights available for utterance {key}")
                    });
                    num_err += 1;
                    continue;
                }
            },
        };
        let g = match &mut gselect {
            None => None,
            Some(r) => match r.get(&key).map_err(|e| e.to_string())? {
                Some(v) => Some(v.0.clone()),
                None => {
                    progress.suspend(|| {
                        crate::kaldi_warn!("No gselect information for utterance {key}")
                    });
                    num_err += 1;
                    continue;
                }
            },
        };
        let (rows, cols) = (mat.rows(), mat.cols());
        // The features move into the batch (copied in with the others there).
        let outcome = acc
            .add_utterance(&key, mat, rows, cols, w.as_deref(), g.as_deref())
            .map_err(|e| e.to_string())?;
        match outcome {
            UttOutcome::Skipped(msg) => {
                progress.suspend(|| crate::kaldi_warn!("{msg}"));
                num_err += 1;
            }
            UttOutcome::Done { weight } => {
                num_done += 1;
                tot_weight += weight;
                progress.utterance(rows);
            }
        }
    }
    tot_like += acc.take_like().map_err(|e| e.to_string())?;
    progress.finish();
    crate::kaldi_log!("Done {num_done} files; {num_err} with errors.");
    crate::kaldi_log!(
        "Overall likelihood per frame = {} over {} (weighted) frames.",
        fmt_g(tot_like / tot_weight),
        fmt_g(tot_weight)
    );
    let bytes = if full {
        object_to_bytes(&acc.into_full().map_err(|e| e.to_string())?, args.binary)
    } else {
        object_to_bytes(&acc.into_diag().map_err(|e| e.to_string())?, args.binary)
    };
    write_object_file(out, &bytes)?;
    crate::kaldi_log!("Written accs to {out}");
    Ok(if num_done != 0 { 0 } else { 1 })
}
