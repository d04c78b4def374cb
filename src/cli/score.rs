//! `amtool score [options] <model-in> <feature-rspecifier> <loglikes-wspecifier>`:
//! per-frame log-likelihoods.
//! - A Kaldi model (TransitionModel + AmDiagGmm): gmm-compute-likes, one
//!   `frames × pdfs` float matrix per utterance (the input of
//!   latgen-faster-mapped and other decoders).
//! - A global DiagGmm or FullGmm: gmm-global-get-frame-likes /
//!   fgmm-global-get-frame-likes, one float vector per utterance, or with
//!   `--average=true` one float (the mean over its frames); `--gselect`
//!   limits each frame to the Gaussians of a Gaussian-selection table.
//!
//! Scoring runs on the engine `--use-gpu` picks (whole mixtures); with
//! `--gselect` the few selected Gaussians are evaluated on the host.

use clap::Args;

use amtool_formats::kaldi::holder::{Basic, Int32VectorVector};
use amtool_formats::kaldi::matrix::{Matrix, Vector};
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader, TableWriter};

use super::engine_args::{EngineArgs, GpusArg};
use super::global_gmm::gselect_for;
use super::{kaldi, KaldiStandard};
use crate::kaldi_log;
use crate::model::AcousticModel;
use crate::score::likes::{log_sum_exp, preselect_loglikes, UtteranceQueue};
use crate::stats::fmt_g;
use crate::train::prefetch::PrefetchedFeats;
use crate::train::write_behind::{SharedRows, WriteBehind};

use std::sync::Arc;

#[derive(Debug, Clone, Args)]
pub struct ScoreArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub gpus: GpusArg,
    /// Global GMMs: write the average per-frame log-likelihood of each utterance
    /// (one float) instead of the per-frame vector.
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub average: bool,
    /// Global GMMs: rspecifier of Gaussian-selection lists limiting the Gaussians of each frame.
    #[arg(long, value_name = "RSPECIFIER", default_value = "")]
    pub gselect: String,
    /// Lattice rescoring (gmm-rescore-lattice): compact lattices to rescore; the
    /// output is then a lattice wspecifier and each arc's acoustic cost becomes
    /// the model's −log-likelihood of its frame's pdf.
    #[arg(long, value_name = "RSPECIFIER", default_value = "")]
    pub lattices: String,
    /// With --lattices: add in the input lattices' acoustic costs with this scale
    /// rather than discarding them.
    #[arg(
        long,
        value_name = "FLOAT",
        default_value_t = 0.0,
        allow_hyphen_values = true
    )]
    pub old_acoustic_scale: f32,
    /// Model: Kaldi model (gmm-compute-likes), DiagGmm or FullGmm (frame likes).
    #[arg(value_name = "MODEL-IN")]
    pub model: String,
    /// Features (rspecifier).
    #[arg(value_name = "FEATURE-RSPECIFIER")]
    pub features: String,
    /// Log-likelihoods (wspecifier); with --lattices, the rescored lattices.
    #[arg(value_name = "LOGLIKES-WSPECIFIER")]
    pub output: String,
}

/// Run `amtool score`; returns the exit status.
pub fn run(args: ScoreArgs) -> i32 {
    if !args.lattices.is_empty() {
        if args.average || !args.gselect.is_empty() {
            return super::fail("--average and --gselect do not apply to lattice rescoring");
        }
        let gpus = Some(args.gpus.gpus);
        return super::rescore_lattice::run_on(
            super::rescore_lattice::RescoreLatticeArgs {
                std: args.std,
                old_acoustic_scale: args.old_acoustic_scale,
                use_gpu: args.engine.use_gpu,
                model: args.model,
                lattices: args.lattices,
                features: args.features,
                output: args.output,
            },
            gpus,
        );
    }
    match score(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn score(args: &ScoreArgs) -> Result<i32, String> {
    let file = super::global_gmm::read_model_file(&args.model)?;
    let global = file.is_global();
    let model = file.into_acoustic_model();
    if global {
        frame_likes(args, &model)
    } else {
        if args.average || !args.gselect.is_empty() {
            return Err(format!(
                "--average and --gselect apply to global GMMs; {} is an acoustic model \
                 (gmm-compute-likes has neither)",
                args.model
            ));
        }
        compute_likes(args, &model)
    }
}

/// Features of one utterance, checked against the model's dimension.
fn check_feats(key: &str, m: &Matrix<f32>, model: &AcousticModel) -> Result<(), String> {
    if m.rows() > 0 && m.cols() != model.dim {
        return Err(format!(
            "utterance {key}: features have dimension {}, the model {}",
            m.cols(),
            model.dim
        ));
    }
    Ok(())
}

/// gmm-compute-likes.
fn compute_likes(args: &ScoreArgs, model: &AcousticModel) -> Result<i32, String> {
    let all = model.num_gaussians() as f64;
    let engine = args
        .engine
        .engine_on(&args.gpus, &args.features, model, all)?;
    let num_done = likes_table(engine.as_ref(), model, &args.features, &args.output)?;
    kaldi_log!("gmm-compute-likes: computed likelihoods for {num_done} utterances.");
    Ok(0)
}

/// The table work of gmm-compute-likes (also what `amtool bench` times end
/// to end): features read ahead on a thread, utterances scored in batches
/// (see [`UtteranceQueue`]) and written in their input order as
/// frames × states matrices. Returns the number of utterances written.
pub fn likes_table(
    engine: &dyn crate::engine::Engine,
    model: &AcousticModel,
    features: &str,
    output: &str,
) -> Result<usize, String> {
    let mut loaded = crate::engine::load_for_loglikes(engine, model).map_err(|e| e.to_string())?;
    likes_table_loaded(loaded.as_mut(), model, features, output)
}

/// [`likes_table`] with the model already on its engine. The output is
/// written behind on its own thread (a frames × states matrix per utterance
/// is far more bytes than its features), so that writing one batch overlaps
/// scoring the next; each batch's log-likelihoods stay in one buffer that
/// the writer shares, and buffers are reused once written.
pub fn likes_table_loaded(
    loaded: &mut dyn crate::engine::LoadedModel,
    model: &AcousticModel,
    features: &str,
    output: &str,
) -> Result<usize, String> {
    let mut reader = PrefetchedFeats::open(features).map_err(|e| e.to_string())?;
    let mut writer = WriteBehind::<SharedRows>::open(output, 64).map_err(|e| e.to_string())?;
    let ns = model.num_states();
    let mut num_done = 0usize;
    let mut queue = UtteranceQueue::default();
    let mut buffers = BufferPool::default();
    loop {
        let next = reader.next_entry().map_err(|e| e.to_string())?;
        if let Some((key, feats)) = next.as_ref() {
            check_feats(key, feats, model)?;
        }
        let end = next.is_none();
        if let Some((key, feats)) = next {
            queue.push(key, feats);
        }
        if !(end || queue.full(ns)) {
            continue;
        }
        let mut out = buffers.take();
        let utts = queue
            .score_states_into(loaded, model.dim, &mut out)
            .map_err(|e| e.to_string())?;
        let buf = buffers.share(out);
        let mut start = 0;
        for (key, rows) in utts {
            // An empty utterance gives an empty (0 × 0) matrix, as Kaldi's Matrix does.
            let cols = if rows == 0 { 0 } else { ns };
            let buf = buf.clone();
            writer
                .write(
                    key,
                    SharedRows {
                        buf,
                        start,
                        rows,
                        cols,
                    },
                )
                .map_err(|e| e.to_string())?;
            start += rows * ns;
            num_done += 1;
        }
        if end {
            break;
        }
    }
    writer.close().map_err(|e| e.to_string())?;
    Ok(num_done)
}

/// Batch output buffers shared with the writer thread, reused once it is
/// done with them.
#[derive(Default)]
struct BufferPool {
    shared: Vec<Arc<Vec<f32>>>,
}

impl BufferPool {
    /// A buffer no entry in flight uses any more, or a new one.
    fn take(&mut self) -> Vec<f32> {
        let free = self.shared.iter().position(|b| Arc::strong_count(b) == 1);
        free.and_then(|i| Arc::try_unwrap(self.shared.swap_remove(i)).ok())
            .unwrap_or_default()
    }

    /// `buf` shared (kept for reuse; at most a few are kept).
    fn share(&mut self, buf: Vec<f32>) -> Arc<Vec<f32>> {
        let buf = Arc::new(buf);
        if self.shared.len() >= 4 {
            self.shared.remove(0);
        }
        self.shared.push(buf.clone());
        buf
    }
}

enum LikesWriter {
    Frames(TableWriter<Vector<f32>>),
    Average(TableWriter<Basic<f32>>),
}

/// gmm-global-get-frame-likes / fgmm-global-get-frame-likes.
fn frame_likes(args: &ScoreArgs, model: &AcousticModel) -> Result<i32, String> {
    // With --gselect the selected Gaussians are evaluated on the host: no engine.
    let engine = if args.gselect.is_empty() {
        Some(args.engine.engine_on(
            &args.gpus,
            &args.features,
            model,
            model.num_gaussians() as f64,
        )?)
    } else {
        None
    };
    let mut loaded = match &engine {
        Some(e) => {
            Some(crate::engine::load_for_loglikes(e.as_ref(), model).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    let mut reader =
        SequentialTableReader::<Matrix<f32>>::open(&args.features).map_err(|e| e.to_string())?;
    let mut gselect = if args.gselect.is_empty() {
        None
    } else {
        Some(
            RandomAccessTableReader::<Int32VectorVector>::open(&args.gselect)
                .map_err(|e| e.to_string())?,
        )
    };
    let mut writer = if args.average {
        LikesWriter::Average(TableWriter::open(&args.output).map_err(|e| e.to_string())?)
    } else {
        LikesWriter::Frames(TableWriter::open(&args.output).map_err(|e| e.to_string())?)
    };
    let (mut num_done, mut num_err) = (0usize, 0usize);
    let (mut tot_like, mut tot_frames) = (0f64, 0f64);
    // Writes one utterance's per-frame likelihoods (or their average).
    let mut emit = |key: &str, likes: Vec<f32>| -> Result<(), String> {
        let frames = likes.len();
        // Kaldi's Vector::Sum(): a double sum returned as float.
        let sum = likes.iter().map(|&x| x as f64).sum::<f64>() as f32;
        tot_like += sum as f64;
        tot_frames += frames as f64;
        match &mut writer {
            LikesWriter::Average(w) => w.write(key, &Basic(sum / frames as f32)),
            LikesWriter::Frames(w) => w.write(key, &Vector::new(likes)),
        }
        .map_err(|e| e.to_string())?;
        num_done += 1;
        Ok(())
    };
    let mut queue = UtteranceQueue::default();
    loop {
        let next = reader.next_entry().map_err(|e| e.to_string())?;
        if let Some((key, feats)) = next.as_ref() {
            check_feats(key, feats, model)?;
        }
        match (gselect.as_mut(), loaded.as_mut()) {
            (Some(g), _) => {
                let Some((key, feats)) = next else { break };
                let frames = feats.rows();
                let Some(sel) = gselect_for(g, &key, frames)? else {
                    num_err += 1;
                    continue;
                };
                let mut likes = Vec::with_capacity(frames);
                for (t, ids) in sel.0.iter().enumerate() {
                    if ids.is_empty() {
                        return Err(format!(
                            "{}: utterance {key}, frame {t}: empty Gaussian selection",
                            args.gselect
                        ));
                    }
                    let ll = preselect_loglikes(model, 0, feats.row(t), ids).map_err(|e| {
                        format!("{}: utterance {key}, frame {t}: {e}", args.gselect)
                    })?;
                    likes.push(log_sum_exp(&ll));
                }
                emit(&key, likes)?;
            }
            (None, Some(l)) => {
                let end = next.is_none();
                if let Some(e) = next {
                    queue.push(e.0, e.1);
                }
                if end || queue.full(1) {
                    for (key, _, likes) in queue
                        .score_states(l.as_mut(), model.dim)
                        .map_err(|e| e.to_string())?
                    {
                        emit(&key, likes)?;
                    }
                }
                if end {
                    break;
                }
            }
            (None, None) => return Err("internal error: no engine loaded".to_string()),
        }
    }
    match writer {
        LikesWriter::Average(w) => w.close(),
        LikesWriter::Frames(w) => w.close(),
    }
    .map_err(|e| e.to_string())?;
    kaldi_log!("Done {num_done} files; {num_err} with errors.");
    kaldi_log!(
        "Overall likelihood per frame = {} over {} frames.",
        fmt_g(tot_like / tot_frames),
        fmt_g(tot_frames)
    );
    Ok(if num_done != 0 { 0 } else { 1 })
}
