//! `amtool rescore-lattice [options] <model-in> <lattice-rspecifier>
//! <feature-rspecifier> <lattice-wspecifier>`: Kaldi's gmm-rescore-lattice.
//! Replaces the acoustic costs of compact lattices with the model's
//! −log-likelihoods of their frames (graph costs untouched) and writes
//! compact lattices (non-compact input lattices are converted, as Kaldi's
//! compact-lattice reader does); the library is [`crate::score::rescore`].
//!
//! Per-utterance problems (no features, a transition-id the model lacks,
//! lattice/feature length mismatch, cyclic or empty lattice) are warned about
//! and counted; the run ends with Kaldi's "Done N lattices with errors on M,
//! #frames is F" and exits 1 when no lattice was rescored.

use clap::Args;

use amtool_formats::kaldi::lattice::CompactLattice;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader};

use super::train_io::parse_use_gpu;
use super::KaldiStandard;
use amtool_formats::kaldi::transition::TransitionModel;

use crate::engine::{self, Gpus, LoadedModel, UseGpu};
use crate::model::AcousticModel;
use crate::score::rescore::{prepare, FramePlan, LatticeBatch, ScoredBatch, Skip};
use crate::train::write_behind::WriteBehind;

#[derive(Debug, Clone, Args)]
pub struct RescoreLatticeArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    /// Add in the scores in the input lattices with this scale, rather than discarding them.
    #[arg(
        long,
        value_name = "FLOAT",
        default_value_t = 0.0,
        allow_hyphen_values = true
    )]
    pub old_acoustic_scale: f32,
    /// Compute on a GPU: yes, no or optional (use one if there is one).
    #[arg(long, value_name = "WHEN", default_value = "optional", value_parser = parse_use_gpu)]
    pub use_gpu: UseGpu,
    /// The acoustic model (TransitionModel + AmDiagGmm), e.g. final.mdl.
    #[arg(value_name = "MODEL-IN")]
    pub model: String,
    /// Compact lattices to rescore, e.g. ark:lat.1.
    #[arg(value_name = "LATTICE-RSPECIFIER")]
    pub lattices: String,
    /// Features of the same utterances, e.g. scp:feats.scp.
    #[arg(value_name = "FEATURE-RSPECIFIER")]
    pub features: String,
    /// Rescored compact lattices, e.g. ark:lat.rescored.1.
    #[arg(value_name = "LATTICE-WSPECIFIER")]
    pub output: String,
}

/// Run `amtool rescore-lattice`; returns the exit status.
pub fn run(args: RescoreLatticeArgs) -> i32 {
    run_on(args, None)
}

/// [`run`] on the GPUs `gpus` asks for (`amtool score --lattices --gpus`),
/// or on one device.
pub fn run_on(args: RescoreLatticeArgs, gpus: Option<Gpus>) -> i32 {
    match rescore(&args, gpus) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn rescore(args: &RescoreLatticeArgs, gpus: Option<Gpus>) -> Result<i32, String> {
    let bytes = crate::train::io::read_input(&args.model).map_err(|e| e.to_string())?;
    let model = KaldiModel::from_bytes(&bytes).map_err(|e| e.in_file(&args.model).to_string())?;
    let engine = match gpus {
        Some(g) => engine::select_gpus(args.use_gpu, 0, g, None),
        None => engine::select(args.use_gpu, 0),
    }
    .map_err(|e| e.to_string())?;
    let mut loaded =
        crate::engine::load_for_loglikes(engine.as_ref(), &AcousticModel::from_am_diag_gmm(&model.am))
            .map_err(|e| e.to_string())?;
    let tables = LatticeTables {
        lattices: &args.lattices,
        features: &args.features,
        output: &args.output,
    };
    let done = rescore_tables(
        loaded.as_mut(),
        &model.trans,
        model.am.dim,
        &tables,
        args.old_acoustic_scale,
    )?;
    crate::kaldi_log!(
        "Done {} lattices with errors on {}, #frames is {}",
        done.lattices,
        done.errors,
        done.frames
    );
    Ok(if done.lattices != 0 { 0 } else { 1 })
}

/// The tables of a rescoring run.
pub struct LatticeTables<'a> {
    pub lattices: &'a str,
    pub features: &'a str,
    pub output: &'a str,
}

/// What a rescoring run did: lattices written, lattices skipped, frames.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rescored {
    pub lattices: usize,
    pub errors: usize,
    pub frames: i64,
}

/// One lattice as the reading thread hands it over: ready to score, or
/// skipped with Kaldi's warning.
enum Read {
    Ready(String, CompactLattice, Matrix<f32>),
    Skipped(String),
}

/// Lattices the reading thread may be ahead of the scoring.
const READ_AHEAD: usize = 256;
/// Rescored lattices the writing thread may be behind.
const WRITE_BEHIND: usize = 256;

/// The table work of gmm-rescore-lattice (also what `amtool bench` times):
/// lattices read in order and their features looked up on a reading
/// thread, rescored here in batches with `loaded` (one engine call scores
/// the frames of many utterances, up to `MAX_LOGLIKES` log-likelihoods at a
/// time, or `MAX_FRAMES` frames), applied to their lattices on another
/// thread and written on a third, so reading, scoring, applying and writing
/// overlap. Output order, warnings and counts are those of one thread.
pub fn rescore_tables(
    loaded: &mut dyn LoadedModel,
    trans: &TransitionModel,
    dim: usize,
    tables: &LatticeTables,
    old_acoustic_scale: f32,
) -> Result<Rescored, String> {
    let mut writer = WriteBehind::<CompactLattice>::open(tables.output, WRITE_BEHIND)
        .map_err(|e| e.to_string())?;
    crate::timeline::mark("lat_start");
    let (tx, rx) = std::sync::mpsc::sync_channel(READ_AHEAD);
    let done = std::thread::scope(|scope| {
        let reader = scope.spawn(move || read_lattices(tables, dim, tx));
        let scored = score_lattices(loaded, trans, dim, old_acoustic_scale, rx, &mut writer);
        // The reader stops at its first error or when the scorer hangs up.
        let read = reader
            .join()
            .unwrap_or_else(|_| Err("the lattice reader failed".into()));
        let done = scored?;
        read.map(|()| done)
    })?;
    crate::timeline::mark("lat_scored_all");
    writer.close().map_err(|e| e.to_string())?;
    crate::timeline::mark("lat_written");
    Ok(done)
}

/// The reading thread: every lattice of the table, in order, with its
/// features (or Kaldi's warning when it has none), into `tx`; stops at the first error (returned) or
/// when the receiver is gone.
fn read_lattices(
    tables: &LatticeTables,
    dim: usize,
    tx: std::sync::mpsc::SyncSender<Read>,
) -> Result<(), String> {
    let mut features =
        RandomAccessTableReader::<Matrix<f32>>::open(tables.features).map_err(|e| e.to_string())?;
    let mut lattices = SequentialTableReader::<CompactLattice>::open(tables.lattices)
        .map_err(|e| e.to_string())?;
    while let Some((key, clat)) = lattices.next_entry().map_err(|e| e.to_string())? {
        let Some(feats) = features.get(&key).map_err(|e| e.to_string())? else {
            let msg = format!("No feature found for utterance {key}. Skipping");
            if tx.send(Read::Skipped(msg)).is_err() {
                break;
            }
            continue;
        };
        if feats.cols() != dim {
            return Err(format!(
                "{}: utterance {key}: feature dimension {} does not match the model's {dim}",
                tables.features,
                feats.cols()
            ));
        }
        if tx.send(Read::Ready(key, clat, feats.clone())).is_err() {
            break;
        }
    }
    crate::timeline::mark("lat_read_all");
    Ok(())
}

/// The scoring stage: lattices from the reader batched and scored here;
/// each scored batch applied to its lattices and written, in order, on an
/// applying thread while the next one scores. Warnings are printed and
/// counted in order.
fn score_lattices(
    loaded: &mut dyn LoadedModel,
    trans: &TransitionModel,
    dim: usize,
    old_acoustic_scale: f32,
    rx: std::sync::mpsc::Receiver<Read>,
    writer: &mut WriteBehind<CompactLattice>,
) -> Result<Rescored, String> {
    std::thread::scope(|scope| {
        let (to_apply, scored) = std::sync::mpsc::sync_channel::<(ScoredBatch, Vec<usize>)>(1);
        let (give_back, buffers) = std::sync::mpsc::channel::<Vec<f32>>();
        let applier = scope.spawn(move || apply_and_write(trans, scored, give_back, writer));
        let prep = Prepare {
            trans,
            old_acoustic_scale,
        };
        let skipped = batch_and_score(loaded, dim, &prep, rx, to_apply, buffers);
        let written = applier
            .join()
            .unwrap_or_else(|_| Err("the lattice writer failed".into()));
        let (written, errors) = (written?, skipped?);
        Ok(Rescored { errors, ..written })
    })
}

/// What prepares a lattice for scoring (Kaldi's scaling and checks).
struct Prepare<'a> {
    trans: &'a TransitionModel,
    old_acoustic_scale: f32,
}

/// Threads that prepare a batch's lattices together.
const PREPARE_THREADS: usize = 4;

impl Prepare<'_> {
    /// Each read lattice's plan (or why it is skipped), in order; the
    /// lattices are prepared on up to [`PREPARE_THREADS`] threads.
    fn all(&self, read: &mut [Read]) -> Vec<Option<Result<FramePlan, Skip>>> {
        let mut plans: Vec<Option<Result<FramePlan, Skip>>> = read.iter().map(|_| None).collect();
        let per = read.len().div_ceil(PREPARE_THREADS).max(1);
        std::thread::scope(|scope| {
            for (items, out) in read.chunks_mut(per).zip(plans.chunks_mut(per)) {
                scope.spawn(move || {
                    for (item, plan) in items.iter_mut().zip(out) {
                        if let Read::Ready(_, clat, feats) = item {
                            *plan = Some(prepare(
                                clat,
                                self.trans,
                                feats.rows(),
                                self.old_acoustic_scale,
                            ));
                        }
                    }
                });
            }
        });
        plans
    }
}

/// Lattices from the reader into batches, each prepared (in parallel),
/// scored and sent to the applying thread; returns the number skipped
/// (with their warnings, in input order).
fn batch_and_score(
    loaded: &mut dyn LoadedModel,
    dim: usize,
    prep: &Prepare<'_>,
    rx: std::sync::mpsc::Receiver<Read>,
    to_apply: std::sync::mpsc::SyncSender<(ScoredBatch, Vec<usize>)>,
    buffers: std::sync::mpsc::Receiver<Vec<f32>>,
) -> Result<usize, String> {
    // A batch is scored at this many log-likelihoods or frames, whichever
    // comes first: big enough to fill a GPU, small enough that reading the
    // next batch and writing the last overlap its scoring.
    const MAX_LOGLIKES: usize = 1 << 25;
    const MAX_FRAMES: usize = 1 << 15;
    let num_pdfs = loaded.num_states().max(1);
    let mut batch = LatticeBatch::new(dim);
    let mut skipped = 0;
    let mut flush = |pending: &mut Vec<Read>| -> Result<bool, String> {
        let plans = prep.all(pending);
        let mut rows = Vec::new();
        for (item, plan) in pending.drain(..).zip(plans) {
            match (item, plan) {
                (Read::Ready(key, clat, feats), Some(Ok(plan))) => {
                    rows.push(feats.rows());
                    batch.push(key, clat, plan, feats.data());
                }
                (Read::Ready(key, ..), Some(Err(Skip(msg)))) => {
                    crate::kaldi_warn!("{msg} [utterance {key}]");
                    skipped += 1;
                }
                (Read::Skipped(msg), _) => {
                    crate::kaldi_warn!("{msg}");
                    skipped += 1;
                }
                (Read::Ready(key, ..), None) => {
                    return Err(format!("utterance {key}: its lattice was not prepared"))
                }
            }
        }
        while let Ok(buf) = buffers.try_recv() {
            batch.recycle(buf);
        }
        let scored = batch.score_only(loaded).map_err(|e| e.to_string())?;
        // A closed channel: the applying thread stopped on an error (its own).
        Ok(to_apply.send((scored, rows)).is_ok())
    };
    let mut pending: Vec<Read> = Vec::new();
    let mut frames = 0;
    for item in rx {
        if let Read::Ready(_, _, feats) = &item {
            frames += feats.rows();
        }
        pending.push(item);
        if frames * num_pdfs >= MAX_LOGLIKES || frames >= MAX_FRAMES {
            frames = 0;
            if !flush(&mut pending)? {
                return Ok(skipped);
            }
        }
    }
    if !pending.is_empty() {
        flush(&mut pending)?;
    }
    Ok(skipped)
}

/// The applying thread: each scored batch's scores into its lattices, then
/// written in order; the scores buffers go back for the next batches.
fn apply_and_write(
    trans: &TransitionModel,
    scored: std::sync::mpsc::Receiver<(ScoredBatch, Vec<usize>)>,
    give_back: std::sync::mpsc::Sender<Vec<f32>>,
    writer: &mut WriteBehind<CompactLattice>,
) -> Result<Rescored, String> {
    let mut done = Rescored::default();
    for (batch, rows) in scored {
        let (lattices, buf) = batch.apply(trans);
        let _ = give_back.send(buf);
        for ((key, clat), r) in lattices.into_iter().zip(rows) {
            writer.write(key, clat).map_err(|e| e.to_string())?;
            done.lattices += 1;
            done.frames += r as i64;
        }
    }
    Ok(done)
}
