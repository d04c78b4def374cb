//! `amtool rescore-lattice [options] <model-in> <lattice-rspecifier>
//! <feature-rspecifier> <lattice-wspecifier>`: Kaldi's gmm-rescore-lattice.
//! Replaces the acoustic costs of compact lattices with the model's
//! −log-likelihoods of their frames (graph costs untouched) and writes
//! compact lattices (non-compact input lattices are converted, as Kaldi's
//! compact-lattice reader does); the library is [`crate::score::rescore`].
//!
//! Lattices are scored in batches of up to 32,768 frames
//! (`AMTOOL_LATTICE_BATCH_FRAMES` sets another limit, for tuning).
//!
//! Per-utterance problems (no features, a transition-id the model lacks,
//! lattice/feature length mismatch, cyclic or empty lattice) are warned about
//! and counted; the run ends with Kaldi's "Done N lattices with errors on M,
//! #frames is F" and exits 1 when no lattice was rescored.

use clap::Args;

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

use amtool_formats::kaldi::lattice::CompactLattice;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader};
use amtool_formats::kaldi::transition::TransitionModel;

use super::train_io::parse_use_gpu;
use super::KaldiStandard;
use crate::engine::{self, Gpus, LoadedModel, UseGpu};
use crate::model::AcousticModel;
use crate::score::rescore::{prepare, LatticeBatch, Skip};
use crate::stage_clock::{StageClock, StageTime};
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
    let mut loaded = crate::engine::load_for_loglikes(
        engine.as_ref(),
        &AcousticModel::from_am_diag_gmm(&model.am),
    )
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
        &BatchPool::default(),
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

/// What a rescoring run did: lattices written, lattices skipped, frames,
/// and how long each stage worked.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rescored {
    pub lattices: usize,
    pub errors: usize,
    pub frames: i64,
    pub busy: StageBusy,
}

/// How long each stage of the pipeline worked (not waiting for the
/// others): reading and preparing (lattices parsed, features looked up,
/// Kaldi's checks, frames gathered into batches), scoring (the engine) and
/// applying (costs added, lattices handed to the writer).
#[derive(Debug, Clone, Copy, Default)]
pub struct StageBusy {
    pub read: StageTime,
    pub score: StageTime,
    pub apply: StageTime,
}

/// Rescored lattices the writing thread may be behind.
const WRITE_BEHIND: usize = 256;

/// A batch is scored at this many log-likelihoods or frames, whichever
/// comes first: big enough to fill a GPU, small enough that preparing the
/// next batch and applying the last overlap its scoring, and that the
/// pipeline fills and drains quickly (its first batch is read with nothing
/// to score, its last applied with nothing to read).
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    pub loglikes: usize,
    pub frames: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            loglikes: 1 << 25,
            frames: 1 << 15,
        }
    }
}

/// The variable that sets a batch's frame limit (for tuning on a device;
/// the default otherwise).
pub const BATCH_FRAMES_ENV: &str = "AMTOOL_LATTICE_BATCH_FRAMES";

impl BatchLimits {
    /// The default limits, with the frame limit from [`BATCH_FRAMES_ENV`]
    /// when it holds a positive number.
    pub fn from_env() -> Self {
        let frames = std::env::var(BATCH_FRAMES_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0);
        let d = Self::default();
        BatchLimits {
            frames: frames.unwrap_or(d.frames),
            ..d
        }
    }

    fn full(&self, batch: &LatticeBatch, num_pdfs: usize) -> bool {
        let frames = batch.num_frames();
        frames >= self.frames || frames * num_pdfs >= self.loglikes
    }

    /// Frames a batch usually holds (it may pass the limit by one
    /// utterance).
    fn frames_for(&self, num_pdfs: usize) -> usize {
        self.frames.min(self.loglikes / num_pdfs.max(1))
    }
}

/// Emptied batches (their frames and scores buffers) that a run hands
/// round and leaves for the next run in the process: a batch's buffers are
/// megabytes, and first writes to new pages cost more than the host's
/// share of the rescoring itself.
#[derive(Default)]
pub struct BatchPool(Mutex<Vec<LatticeBatch>>);

impl BatchPool {
    /// An empty batch of `dim`-wide frames, if one is kept.
    fn take(&self, dim: usize) -> Option<LatticeBatch> {
        let mut kept = self.0.lock().ok()?;
        let at = kept.iter().position(|b| b.dim() == dim)?;
        Some(kept.swap_remove(at))
    }

    /// Keep `batch` (emptied) for reuse.
    fn give(&self, batch: LatticeBatch) {
        if let Ok(mut kept) = self.0.lock() {
            kept.push(batch);
        }
    }
}

/// The table work of gmm-rescore-lattice (also what `amtool bench` times),
/// as a pipeline of threads joined by bounded channels: lattices are read,
/// their features looked up, prepared (Kaldi's checks) and their frames
/// copied into a batch on a reading thread; batches are scored here, one
/// engine call each and nothing else; applied to their lattices on an
/// applying thread and written on a writing thread. Batches go round (the
/// applier hands emptied ones back through `pool`, which keeps them for the
/// next call), so no stage allocates per batch.
/// Output order, warnings and counts are those of one thread; on any error
/// the output is not committed.
pub fn rescore_tables(
    loaded: &mut dyn LoadedModel,
    trans: &TransitionModel,
    dim: usize,
    tables: &LatticeTables,
    old_acoustic_scale: f32,
    pool: &BatchPool,
) -> Result<Rescored, String> {
    rescore_tables_in(
        loaded,
        trans,
        dim,
        tables,
        old_acoustic_scale,
        BatchLimits::from_env(),
        pool,
    )
}

/// [`rescore_tables`] with batches of at most `limits`.
pub fn rescore_tables_in(
    loaded: &mut dyn LoadedModel,
    trans: &TransitionModel,
    dim: usize,
    tables: &LatticeTables,
    old_acoustic_scale: f32,
    limits: BatchLimits,
    pool: &BatchPool,
) -> Result<Rescored, String> {
    let mut writer = WriteBehind::<CompactLattice>::open(tables.output, WRITE_BEHIND)
        .map_err(|e| e.to_string())?;
    crate::timeline::mark("lat_start");
    let prep = Prepare {
        trans,
        dim,
        old_acoustic_scale,
        limits,
        num_pdfs: loaded.num_states().max(1),
    };
    let done = std::thread::scope(|scope| {
        // Hand-to-hand channels: a stage that is ahead waits for the next
        // one to take its batch, so three batches go round (one filling,
        // one scoring, one applied).
        let (ready_tx, ready_rx) = sync_channel::<LatticeBatch>(0);
        let (scored_tx, scored_rx) = sync_channel::<LatticeBatch>(0);
        let reader = scope.spawn(move || prep.batches(tables, ready_tx, pool));
        let applier = scope.spawn(|| apply_and_write(trans, scored_rx, pool, &mut writer));
        let scored = score_batches(loaded, ready_rx, scored_tx);
        // Each stage stops at its own error or when its neighbour hangs up;
        // the first error in pipeline order is the run's.
        let read = joined(reader, "reader");
        let applied = joined(applier, "applier");
        let ((errors, read_s), score_s) = (read?, scored?);
        let applied = applied?;
        Ok::<_, String>(Rescored {
            errors,
            busy: StageBusy {
                read: read_s,
                score: score_s,
                ..applied.busy
            },
            ..applied
        })
    })?;
    crate::timeline::mark("lat_scored_all");
    writer.close().map_err(|e| e.to_string())?;
    crate::timeline::mark("lat_written");
    Ok(done)
}

/// A pipeline thread's result (its panic an error naming it).
fn joined<T>(
    h: std::thread::ScopedJoinHandle<'_, Result<T, String>>,
    what: &str,
) -> Result<T, String> {
    h.join()
        .unwrap_or_else(|_| Err(format!("the lattice {what} failed")))
}

/// What the reading thread needs: Kaldi's scaling and checks, and how
/// batches are formed.
struct Prepare<'a> {
    trans: &'a TransitionModel,
    dim: usize,
    old_acoustic_scale: f32,
    limits: BatchLimits,
    num_pdfs: usize,
}

/// The tables a reading thread reads.
struct Inputs {
    lattices: SequentialTableReader<CompactLattice>,
    features: RandomAccessTableReader<Matrix<f32>>,
}

impl Prepare<'_> {
    /// The reading thread: every lattice of the table in order, with its
    /// features, prepared and pushed with its frames into a batch (the
    /// features are copied from the table once, into the batch), sent to
    /// be scored when full and at the end; skipped lattices are warned
    /// about and counted here, so warnings keep input order. Batches come
    /// from `pool` (the applier gives them back). Stops at the first error (returned)
    /// or when the scorer hangs up; returns the lattices skipped and its
    /// busy time.
    fn batches(
        &self,
        tables: &LatticeTables,
        ready: SyncSender<LatticeBatch>,
        pool: &BatchPool,
    ) -> Result<(usize, StageTime), String> {
        let mut clock = StageClock::start();
        let mut inputs = Inputs {
            features: RandomAccessTableReader::open(tables.features).map_err(|e| e.to_string())?,
            lattices: SequentialTableReader::open(tables.lattices).map_err(|e| e.to_string())?,
        };
        let mut skipped = 0;
        let mut batch = self.new_batch(pool);
        while let Some(added) = clock
            .work
            .time(|| self.add_next(tables, &mut inputs, &mut batch))?
        {
            skipped += usize::from(!added);
            if self.limits.full(&batch, self.num_pdfs) {
                clock
                    .work
                    .time(|| batch.make_room_for_scores(self.num_pdfs));
                crate::timeline::mark("lat_prepared");
                // The next batch is taken after the scorer took this one:
                // by then the applier has given back the one before.
                if ready.send(batch).is_err() {
                    return Ok((skipped, clock.stop()));
                }
                batch = self.new_batch(pool);
            }
        }
        crate::timeline::mark("lat_read_all");
        if batch.is_empty() {
            pool.give(batch);
        } else {
            clock
                .work
                .time(|| batch.make_room_for_scores(self.num_pdfs));
            let _ = ready.send(batch);
        }
        Ok((skipped, clock.stop()))
    }

    /// An emptied batch from `pool`, or a new one with room for the
    /// frames it will hold.
    fn new_batch(&self, pool: &BatchPool) -> LatticeBatch {
        pool.take(self.dim).unwrap_or_else(|| {
            LatticeBatch::with_capacity(self.dim, self.limits.frames_for(self.num_pdfs))
        })
    }

    /// Read the next lattice and add it to `batch`: `Some(true)` when
    /// added, `Some(false)` when skipped (warned), `None` at the end.
    fn add_next(
        &self,
        tables: &LatticeTables,
        inputs: &mut Inputs,
        batch: &mut LatticeBatch,
    ) -> Result<Option<bool>, String> {
        let Some((key, mut clat)) = inputs.lattices.next_entry().map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let Some(feats) = inputs.features.get(&key).map_err(|e| e.to_string())? else {
            crate::kaldi_warn!("No feature found for utterance {key}. Skipping");
            return Ok(Some(false));
        };
        if feats.cols() != self.dim {
            return Err(format!(
                "{}: utterance {key}: feature dimension {} does not match the model's {}",
                tables.features,
                feats.cols(),
                self.dim
            ));
        }
        match prepare(&mut clat, self.trans, feats.rows(), self.old_acoustic_scale) {
            Ok(plan) => {
                batch.push(key, clat, plan, feats.data());
                Ok(Some(true))
            }
            Err(Skip(msg)) => {
                crate::kaldi_warn!("{msg} [utterance {key}]");
                Ok(Some(false))
            }
        }
    }
}

/// The scoring stage (the caller's thread, which owns the engine): each
/// ready batch scored and passed on, nothing else. Returns its busy
/// time; stops when the applier hangs up (its error is its own).
fn score_batches(
    loaded: &mut dyn LoadedModel,
    ready: Receiver<LatticeBatch>,
    scored: SyncSender<LatticeBatch>,
) -> Result<StageTime, String> {
    let mut clock = StageClock::start();
    for mut batch in ready {
        clock
            .work
            .time(|| batch.score_only(loaded))
            .map_err(|e| e.to_string())?;
        if scored.send(batch).is_err() {
            break;
        }
    }
    Ok(clock.stop())
}

/// The applying thread: each scored batch's scores into its lattices, then
/// handed to the writer in order; the emptied batches go back to the
/// pool.
fn apply_and_write(
    trans: &TransitionModel,
    scored: Receiver<LatticeBatch>,
    pool: &BatchPool,
    writer: &mut WriteBehind<CompactLattice>,
) -> Result<Rescored, String> {
    let mut done = Rescored::default();
    let mut clock = StageClock::start();
    for mut batch in scored {
        clock.work.time(|| -> Result<(), String> {
            done.lattices += batch.len();
            done.frames += batch.feature_rows() as i64;
            for (key, clat) in batch.apply(trans) {
                writer.write(key, clat).map_err(|e| e.to_string())?;
            }
            crate::timeline::mark("lat_applied");
            Ok(())
        })?;
        pool.give(batch);
    }
    done.busy.apply = clock.stop();
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amtool_formats::kaldi::table::TableWriter;
    use std::io::Read as _;

    struct Fixture {
        dir: tempfile::TempDir,
        model: KaldiModel,
        lattices: String,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(
            std::fs::File::open("testdata/kaldi/lattice/lat.ark.gz").unwrap(),
        )
        .read_to_end(&mut raw)
        .unwrap();
        let lat = dir.path().join("lat.ark");
        std::fs::write(&lat, raw).unwrap();
        let model =
            KaldiModel::from_bytes(&std::fs::read("testdata/kaldi/final.mdl").unwrap()).unwrap();
        Fixture {
            lattices: format!("ark:{}", lat.display()),
            dir,
            model,
        }
    }

    impl Fixture {
        fn path(&self, name: &str) -> String {
            self.dir.path().join(name).display().to_string()
        }

        /// Rescore into `out` with batches of at most `frames` frames.
        fn run(&self, features: &str, out: &str, frames: usize) -> Result<Rescored, String> {
            let engine = crate::engine::select(UseGpu::No, 1).unwrap();
            let mut loaded = engine
                .load(&AcousticModel::from_am_diag_gmm(&self.model.am))
                .unwrap();
            let tables = LatticeTables {
                lattices: &self.lattices,
                features,
                output: &format!("ark:{out}"),
            };
            let limits = BatchLimits {
                frames,
                ..BatchLimits::default()
            };
            let pool = BatchPool::default();
            let (trans, dim) = (&self.model.trans, self.model.am.dim);
            rescore_tables_in(loaded.as_mut(), trans, dim, &tables, 0.0, limits, &pool)
        }
    }

    /// The fixture's features without utterance `drop`, and with
    /// utterance `narrow` (if any) cut to 13 columns.
    fn features(f: &Fixture, drop: &str, narrow: &str) -> String {
        let spec = format!("ark:{}", f.path(&format!("feats-{drop}-{narrow}.ark")));
        let mut w = TableWriter::<Matrix<f32>>::open(&spec).unwrap();
        let feats = SequentialTableReader::<Matrix<f32>>::open(
            "scp:testdata/kaldi/acc/feats_cmvn_deltas.scp",
        )
        .unwrap();
        for (k, m) in feats.map(|e| e.unwrap()).filter(|(k, _)| k != drop) {
            if k == narrow {
                let rows: Vec<f32> = (0..m.rows())
                    .flat_map(|r| m.row(r)[..13].to_vec())
                    .collect();
                w.write(&k, &Matrix::from_vec(m.rows(), 13, rows).unwrap())
                    .unwrap();
            } else {
                w.write(&k, &m).unwrap();
            }
        }
        w.close().unwrap();
        spec
    }

    #[test]
    fn batch_boundaries_do_not_change_the_output() {
        let f = fixture();
        let feats = features(&f, "s01-007", "");
        let mut outputs = Vec::new();
        // One lattice a batch, boundaries inside the list, one batch.
        for frames in [1, 700, 1 << 20] {
            let out = f.path(&format!("out-{frames}.ark"));
            let done = f.run(&feats, &out, frames).unwrap();
            assert_eq!((done.lattices, done.errors), (39, 1));
            outputs.push((done.frames, std::fs::read(&out).unwrap()));
        }
        assert!(outputs.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn a_failure_after_written_batches_keeps_the_old_output() {
        let f = fixture();
        // Utterance 30 (s03-010) has features of the wrong dimension: the run stops
        // there, after batches before it were applied and written.
        let feats = features(&f, "", "s03-010");
        let out = f.path("out.ark");
        std::fs::write(&out, b"the old output").unwrap();
        let err = f.run(&feats, &out, 500).unwrap_err();
        assert!(
            err.contains("utterance s03-010: feature dimension 13"),
            "{err}"
        );
        assert_eq!(std::fs::read(&out).unwrap(), b"the old output");
    }
}
