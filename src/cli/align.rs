//! `amtool align [options] <model-in> <graphs-rspecifier> <feature-rspecifier>
//! <alignments-wspecifier> [scores-wspecifier]`: Kaldi's gmm-align-compiled.
//!
//! Per training graph (in the graph table's order): features looked up by
//! key, transition log-probabilities added with the two scales, Kaldi's
//! FasterDecoder with `--beam` (and `--retry-beam` when no final state is
//! reached), the best path's transition-ids written as the alignment.
//! Utterances are gathered into batches (read by `align_batch`). On the CPU
//! engine the searches of a batch run in parallel, each computing a pdf's
//! log-likelihoods when it first asks for them (`align::LazyLoglikes`). A
//! device engine scores every pdf of a batch's frames in one call and
//! copies back each utterance's own pdfs (`LoadedModel::state_loglikes_subset`),
//! in a pipeline (`EngineJob`): reading, scoring of batch n + 1 and the
//! searches of batch n overlap. Results are written and logged in input
//! order.

use clap::Args;
use rayon::prelude::*;

use amtool_formats::kaldi::holder::{Basic, Int32Vector};
use amtool_formats::kaldi::matrix::Vector;
use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::table::TableWriter;
use amtool_formats::kaldi::transition::TransitionModel;
use std::time::Instant;

use super::align_batch::{Batch, BatchReader, Entry, Pending, ReadOptions};
use super::engine_args::EngineArgs;
use super::KaldiStandard;
use crate::align::decoder::{BestPath, DecoderOptions};
use crate::align::graph::transition_costs;
use crate::align::{align_utterance, AlignConfig, AlignOutcome, LazyLoglikes, ScaledLoglikes};
use crate::engine::cpu::{CpuEngine, PackedModel};
use crate::engine::{Engine, StateSubsets};
use crate::model::AcousticModel;
use crate::score::likes::{state_subsets_into, BATCH_FRAMES, BATCH_VALUES};
use crate::score::model_file::ModelFile;
use crate::stats::fmt_g;
use crate::{kaldi_log, kaldi_warn};

#[derive(Debug, Clone, Args)]
pub struct AlignArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Scaling factor for acoustic likelihoods.
    #[arg(long, value_name = "FLOAT", default_value_t = 1.0)]
    pub acoustic_scale: f32,
    /// Decoding beam used in alignment.
    #[arg(long, value_name = "FLOAT", default_value_t = 200.0)]
    pub beam: f32,
    /// If true, do 'careful' alignment, which is better at detecting alignment
    /// failure (involves loop to start of decoding graph).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = super::kaldi::parse_bool)]
    pub careful: bool,
    /// Decoding beam for second try at alignment (0: no retry).
    #[arg(long, value_name = "FLOAT", default_value_t = 0.0)]
    pub retry_beam: f32,
    /// Scale of self-loop versus non-self-loop log probs [relative to acoustics].
    #[arg(long, value_name = "FLOAT", default_value_t = 1.0)]
    pub self_loop_scale: f32,
    /// Transition-probability scale [relative to acoustics].
    #[arg(long, value_name = "FLOAT", default_value_t = 1.0)]
    pub transition_scale: f32,
    /// Wspecifier for table of vectors containing the acoustic log-likelihoods
    /// per frame for each utterance.
    #[arg(long, value_name = "WSPECIFIER", default_value = "")]
    pub write_per_frame_acoustic_loglikes: String,
    /// Decoder max active states (FasterDecoder; gmm-align-compiled keeps the default).
    #[arg(long, value_name = "N", default_value_t = i32::MAX)]
    pub max_active: i32,
    /// Decoder min active states (FasterDecoder; gmm-align-compiled keeps the default).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub min_active: i32,
    /// Increment used in decoder [obscure setting] (FasterDecoder).
    #[arg(long, value_name = "FLOAT", default_value_t = 0.5)]
    pub beam_delta: f32,
    /// Setting used in decoder to control hash behavior (FasterDecoder).
    #[arg(long, value_name = "FLOAT", default_value_t = 2.0)]
    pub hash_ratio: f32,
    /// Model (TransitionModel + AmDiagGmm).
    #[arg(value_name = "MODEL-IN")]
    pub model: String,
    /// Training graphs (rspecifier of VectorFst<StdArc>, compile-train-graphs' output).
    #[arg(value_name = "GRAPHS-RSPECIFIER")]
    pub graphs: String,
    /// Features (rspecifier, looked up by the graphs' keys).
    #[arg(value_name = "FEATURE-RSPECIFIER")]
    pub features: String,
    /// Alignments (wspecifier of int32 vectors).
    #[arg(value_name = "ALIGNMENTS-WSPECIFIER")]
    pub alignments: String,
    /// Scores: −(graph + acoustic cost) of each best path, acoustic part scaled (wspecifier of floats).
    #[arg(value_name = "SCORES-WSPECIFIER")]
    pub scores: Option<String>,
}

/// Run `amtool align`; returns the exit status.
pub fn run(args: AlignArgs) -> i32 {
    match align(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

/// Counts behind Kaldi's summary lines, and where the time went.
#[derive(Debug, Default, Clone)]
pub struct Totals {
    pub done: usize,
    pub err: usize,
    pub retried: usize,
    pub like: f64,
    pub frames: i64,
    /// Wall seconds computing log-likelihoods: the engine calls, or (CPU
    /// engine, computed as the search needs them) the searches' wall time
    /// times the share of their thread time spent computing.
    pub likes_seconds: f64,
    /// Wall seconds of the searches, likelihoods excluded. On an engine
    /// that scores batches, the searches of batch n run while batch n + 1
    /// is scored: the two may add up to more than the job's time.
    pub search_seconds: f64,
    /// Pdf log-likelihoods computed (frames × pdfs when all are scored).
    pub pdf_evals: u64,
}

struct Writers {
    ali: TableWriter<Int32Vector>,
    scores: Option<TableWriter<Basic<f32>>>,
    per_frame: Option<TableWriter<Vector<f32>>>,
}

impl Writers {
    fn open(tables: &AlignTables<'_>) -> Result<Self, String> {
        Ok(Writers {
            ali: TableWriter::open(tables.alignments).map_err(|e| e.to_string())?,
            scores: optional_writer(tables.scores.unwrap_or(""))?,
            per_frame: optional_writer(tables.per_frame)?,
        })
    }

    /// An aligned utterance of `frames` frames: its outputs and counts.
    fn write(
        &mut self,
        key: &str,
        path: &BestPath,
        frames: usize,
        s: &AlignSettings,
        tot: &mut Totals,
    ) -> Result<(), String> {
        let (g, a) = path.total_weight();
        let like = -(g + a) / s.acoustic_scale;
        tot.done += 1;
        tot.like += like as f64;
        tot.frames += frames as i64;
        self.ali
            .write(key, &Int32Vector(path.alignment()))
            .map_err(|e| e.to_string())?;
        if let Some(w) = self.scores.as_mut() {
            w.write(key, &Basic(-(g + a))).map_err(|e| e.to_string())?;
        }
        if let Some(w) = self.per_frame.as_mut() {
            let scale = -1.0 / s.acoustic_scale;
            let v: Vec<f32> = path
                .per_frame_acoustic_costs()
                .iter()
                .map(|c| c * scale)
                .collect();
            w.write(key, &Vector::new(v)).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn close(self) -> Result<(), String> {
        self.ali.close().map_err(|e| e.to_string())?;
        if let Some(w) = self.scores {
            w.close().map_err(|e| e.to_string())?;
        }
        if let Some(w) = self.per_frame {
            w.close().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

fn optional_writer<H: amtool_formats::kaldi::holder::Holder>(
    w: &str,
) -> Result<Option<TableWriter<H>>, String> {
    if w.is_empty() {
        return Ok(None);
    }
    TableWriter::open(w).map(Some).map_err(|e| e.to_string())
}

/// The tables of one alignment job (rspecifiers and wspecifiers; "" or
/// `None`: not written).
pub struct AlignTables<'a> {
    pub graphs: &'a str,
    pub features: &'a str,
    pub alignments: &'a str,
    pub scores: Option<&'a str>,
    pub per_frame: &'a str,
}

/// The search options of one alignment job.
#[derive(Debug, Clone, Copy)]
pub struct AlignSettings {
    pub config: AlignConfig,
    pub decoder: DecoderOptions,
    pub acoustic_scale: f32,
    pub transition_scale: f32,
    pub self_loop_scale: f32,
}

impl AlignSettings {
    fn from_args(args: &AlignArgs) -> Result<Self, String> {
        let config = AlignConfig {
            beam: args.beam,
            retry_beam: args.retry_beam,
            careful: args.careful,
        };
        config.check()?;
        let decoder = DecoderOptions {
            beam: args.beam,
            max_active: args.max_active,
            min_active: args.min_active,
            beam_delta: args.beam_delta,
            hash_ratio: args.hash_ratio,
        };
        let o = decoder;
        if o.hash_ratio < 1.0
            || o.max_active <= 1
            || o.min_active < 0
            || o.min_active >= o.max_active
        {
            return Err(format!(
                "bad decoder options: --hash-ratio {} (≥ 1), --max-active {} (> 1), --min-active {} (0 ≤ n < max-active)",
                o.hash_ratio, o.max_active, o.min_active
            ));
        }
        Ok(AlignSettings {
            config,
            decoder,
            acoustic_scale: args.acoustic_scale,
            transition_scale: args.transition_scale,
            self_loop_scale: args.self_loop_scale,
        })
    }
}

fn align(args: &AlignArgs) -> Result<i32, String> {
    let settings = AlignSettings::from_args(args)?;
    let file = ModelFile::read(&args.model).map_err(|e| e.to_string())?;
    let ModelFile::Am(KaldiModel { trans, .. }) = &file else {
        return Err(format!(
            "{}: a GMM model (TransitionModel + AmDiagGmm) is needed, not a global GMM",
            args.model
        ));
    };
    let model = file.acoustic_model();
    // On the CPU only the pdfs the search asks for are computed (about 17 a
    // frame at the recipes' beams: align_ark), and a GPU scores every pdf
    // (copying back each utterance's own); so a job is sized by what the CPU
    // would compute, and goes to the GPU only when even that outlasts its
    // start-up.
    let np = model.num_states().max(1);
    let per_frame = model.num_gaussians() as f64 / np as f64 * np.min(PDFS_SEARCHED) as f64;
    let engine = args.engine.engine_for(&args.features, &model, per_frame)?;
    let tables = AlignTables {
        graphs: &args.graphs,
        features: &args.features,
        alignments: &args.alignments,
        scores: args.scores.as_deref(),
        per_frame: &args.write_per_frame_acoustic_loglikes,
    };
    let tot = align_tables(engine.as_ref(), trans, &model, &tables, &settings)?;
    kaldi_log!(
        "Overall log-likelihood per frame is {} over {} frames.",
        fmt_g(tot.like / tot.frames as f64),
        tot.frames
    );
    kaldi_log!(
        "Retried {} out of {} utterances.",
        tot.retried,
        tot.done + tot.err
    );
    kaldi_log!("Done {}, errors on {}", tot.done, tot.err);
    Ok(if tot.done != 0 { 0 } else { 1 })
}

/// Pdfs a frame's search asks for at the recipes' beams (align_ark: 16.5 on
/// the fixture model, 16.8 on a 2,000-pdf one), rounded up.
const PDFS_SEARCHED: usize = 20;

/// Frames of a batch of utterances on an engine that scores batches: small
/// enough that scoring batch n + 1 overlaps most of the search of batch n,
/// large enough that each engine call keeps a GPU busy. (On the CPU, a
/// batch is what the threads share: [`BATCH_FRAMES`].)
const DEVICE_BATCH_FRAMES: usize = BATCH_FRAMES / 2;

/// Where a batch's log-likelihoods come from.
enum Likelihoods<'e> {
    /// Each utterance's own pdfs of the batch's frames in one engine call
    /// (the GPU: every pdf scored there, only these copied back).
    Engine(Box<dyn crate::engine::LoadedModel + 'e>),
    /// The CPU engine's kernels, each pdf when the search first needs it,
    /// on a pool of the engine's threads.
    Lazy(PackedModel, rayon::ThreadPool),
}

impl<'e> Likelihoods<'e> {
    fn new(engine: &'e dyn Engine, model: &AcousticModel) -> Result<Self, String> {
        let Some(threads) = engine.cpu_threads() else {
            // Kaldi's accuracy, so that the totals print Kaldi's digits.
            let loaded =
                crate::engine::load_for_loglikes(engine, model).map_err(|e| e.to_string())?;
            return Ok(Likelihoods::Engine(loaded));
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("amtool-align-{i}"))
            .build()
            .map_err(|e| format!("cannot start the alignment threads: {e}"))?;
        Ok(Likelihoods::Lazy(
            CpuEngine::pack(model).map_err(|e| e.to_string())?,
            pool,
        ))
    }
}

/// An error unless every transition-id's pdf is one of the model's.
fn check_pdfs(id2pdf: &[i32], num_pdfs: usize) -> Result<(), String> {
    match id2pdf
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, &p)| p < 0 || p as usize >= num_pdfs)
    {
        Some((tid, p)) => Err(format!(
            "transition-id {tid} has pdf {p}, but the acoustic model has {num_pdfs} pdfs"
        )),
        None => Ok(()),
    }
}

/// gmm-align-compiled's work on `engine`: every graph of `tables.graphs` in
/// order, its features looked up by key, outputs and per-utterance log lines
/// written; returns the counts (the caller logs the summary).
pub fn align_tables(
    engine: &dyn Engine,
    trans: &TransitionModel,
    model: &AcousticModel,
    tables: &AlignTables<'_>,
    settings: &AlignSettings,
) -> Result<Totals, String> {
    let costs = transition_costs(trans, settings.transition_scale, settings.self_loop_scale);
    let id2pdf = trans.id2pdf();
    check_pdfs(id2pdf, model.num_states())?;
    let likes = Likelihoods::new(engine, model)?;
    let on_device = matches!(likes, Likelihoods::Engine(_));
    let opts = ReadOptions {
        transition_costs: &costs,
        careful: settings.config.careful,
        dim: model.dim,
        num_pdfs: model.num_states(),
        id2pdf,
        columns: on_device,
        batch_frames: if on_device {
            DEVICE_BATCH_FRAMES
        } else {
            BATCH_FRAMES
        },
        batch_values: BATCH_VALUES,
    };
    let mut out = Writers::open(tables)?;
    let mut tot = Totals::default();
    match likes {
        Likelihoods::Lazy(packed, pool) => {
            let mut reader = BatchReader::open(tables.graphs, tables.features, opts)?;
            while let Some(batch) = reader.next_batch()? {
                let outcomes = search_lazy(&batch, &packed, &pool, settings, &mut tot);
                write_batch(batch, outcomes, settings, &mut out, &mut tot)?;
            }
        }
        Likelihoods::Engine(mut loaded) => {
            let job = EngineJob {
                loaded: loaded.as_mut(),
                dim: model.dim,
                settings,
            };
            job.run(tables, opts, &mut out, &mut tot)?;
        }
    }
    out.close()?;
    Ok(tot)
}

/// The searches of a batch in parallel on `pool`, each pdf's log-likelihoods
/// computed when its search first needs them; adds the time split to `tot`.
fn search_lazy(
    batch: &Batch,
    packed: &PackedModel,
    pool: &rayon::ThreadPool,
    s: &AlignSettings,
    tot: &mut Totals,
) -> Vec<AlignOutcome> {
    let t0 = Instant::now();
    let utts: Vec<&Pending> = batch.utterances().collect();
    let done: Vec<(AlignOutcome, f64, f64, usize)> = pool.install(|| {
        utts.par_iter()
            .map(|p| {
                let t = Instant::now();
                let mut costs = LazyLoglikes::new(packed, p.feats.data(), s.acoustic_scale);
                let o = align_utterance(&p.graph, &mut costs, &s.config, s.decoder);
                (
                    o,
                    t.elapsed().as_secs_f64(),
                    costs.busy.as_secs_f64(),
                    costs.computed,
                )
            })
            .collect()
    });
    let wall = t0.elapsed().as_secs_f64();
    let (all, busy): (f64, f64) = done.iter().fold((0.0, 0.0), |a, d| (a.0 + d.1, a.1 + d.2));
    let share = if all > 0.0 { busy / all } else { 0.0 };
    tot.likes_seconds += wall * share;
    tot.search_seconds += wall * (1.0 - share);
    tot.pdf_evals += done.iter().map(|d| d.3 as u64).sum::<u64>();
    done.into_iter().map(|d| d.0).collect()
}

/// A batch with its log-likelihoods: each utterance's own pdfs' columns.
#[derive(Default)]
struct Scored {
    batch: Batch,
    subsets: StateSubsets,
    /// The batch's frames gathered for the engine call (kept for reuse).
    frames: Vec<f32>,
    loglikes: Vec<f32>,
}

/// A searched batch.
struct Searched {
    scored: Scored,
    outcomes: Vec<AlignOutcome>,
    seconds: f64,
}

/// An alignment job on an engine that scores batches (a GPU), as a
/// pipeline: a thread reads and prepares batches, this one scores batch
/// n + 1 while another searches batch n (its utterances in parallel), and
/// batches are written in order as their searches end. So a job takes
/// about the longest of reading, scoring and searching, not their sum.
struct EngineJob<'a, 'e> {
    loaded: &'a mut (dyn crate::engine::LoadedModel + 'e),
    dim: usize,
    settings: &'a AlignSettings,
}

impl EngineJob<'_, '_> {
    fn run(
        mut self,
        tables: &AlignTables<'_>,
        opts: ReadOptions<'_>,
        out: &mut Writers,
        tot: &mut Totals,
    ) -> Result<(), String> {
        let s = self.settings;
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            let (graphs, features) = (tables.graphs, tables.features);
            std::thread::Builder::new()
                .name("amtool-align-read".into())
                .spawn_scoped(scope, move || read_batches(graphs, features, opts, tx))
                .map_err(|e| format!("cannot start the reading thread: {e}"))?;
            let mut spare = Scored::default();
            let mut searching = None;
            for batch in rx {
                spare.batch = batch?;
                let scored = self.score(spare, tot)?;
                spare = match searching.take() {
                    Some(h) => write_searched(join(h)?, s, out, tot)?,
                    None => Scored::default(),
                };
                let h = std::thread::Builder::new()
                    .name("amtool-align-search".into())
                    .spawn_scoped(scope, move || search_scored(scored, s))
                    .map_err(|e| format!("cannot start the search thread: {e}"))?;
                searching = Some(h);
            }
            if let Some(h) = searching {
                write_searched(join(h)?, s, out, tot)?;
            }
            Ok(())
        })
    }

    /// The batch's log-likelihoods in one engine call (the buffers of
    /// `scored` reused).
    fn score(&mut self, mut scored: Scored, tot: &mut Totals) -> Result<Scored, String> {
        let t0 = Instant::now();
        scored.subsets.clear();
        for p in scored.batch.utterances() {
            scored.subsets.push(p.feats.rows(), &p.pdfs);
        }
        let Scored {
            batch,
            subsets,
            frames,
            loglikes,
        } = &mut scored;
        let utts = batch.utterances().map(|p| p.feats.data());
        state_subsets_into(self.loaded, utts, self.dim, subsets, frames, loglikes).map_err(
            |e| {
                let mut keys = batch.utterances().map(|p| p.key.as_str());
                let first = keys.next().unwrap_or("");
                format!(
                    "utterances {first} .. {}: {e}",
                    keys.last().unwrap_or(first)
                )
            },
        )?;
        tot.likes_seconds += t0.elapsed().as_secs_f64();
        tot.pdf_evals += (batch.frames * self.loaded.num_states()) as u64;
        Ok(scored)
    }
}

/// The reading thread: batches into `tx` until the tables end, an error
/// (sent on), or the receiver hangs up.
fn read_batches(
    graphs: &str,
    features: &str,
    opts: ReadOptions<'_>,
    tx: std::sync::mpsc::SyncSender<Result<Batch, String>>,
) {
    let mut reader = match BatchReader::open(graphs, features, opts) {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Err(e));
            return;
        }
    };
    loop {
        let next = reader.next_batch().transpose();
        let stop = !matches!(next, Some(Ok(_)));
        if let Some(b) = next {
            if tx.send(b).is_err() {
                return;
            }
        }
        if stop {
            return;
        }
    }
}

fn join<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> Result<T, String> {
    h.join()
        .map_err(|_| "an alignment search thread panicked".to_string())
}

/// The searches of a scored batch in parallel, each over its utterance's
/// columns.
fn search_scored(scored: Scored, s: &AlignSettings) -> Searched {
    let t0 = Instant::now();
    let utts: Vec<&Pending> = scored.batch.utterances().collect();
    let parts = scored.subsets.split(&scored.loglikes);
    let outcomes = utts
        .par_iter()
        .zip(parts.par_iter())
        .map(|(p, &ll)| {
            let mut costs = ScaledLoglikes {
                loglikes: ll,
                frames: p.feats.rows(),
                columns: p.pdfs.len(),
                scale: s.acoustic_scale,
            };
            align_utterance(&p.graph, &mut costs, &s.config, s.decoder)
        })
        .collect();
    let seconds = t0.elapsed().as_secs_f64();
    Searched {
        scored,
        outcomes,
        seconds,
    }
}

/// Write a searched batch; its buffers, for the next.
fn write_searched(
    mut done: Searched,
    s: &AlignSettings,
    out: &mut Writers,
    tot: &mut Totals,
) -> Result<Scored, String> {
    tot.search_seconds += done.seconds;
    let batch = std::mem::take(&mut done.scored.batch);
    write_batch(batch, done.outcomes, s, out, tot)?;
    Ok(done.scored)
}

/// Outputs and log lines of a searched batch, in input order.
fn write_batch(
    batch: Batch,
    outcomes: Vec<AlignOutcome>,
    s: &AlignSettings,
    out: &mut Writers,
    tot: &mut Totals,
) -> Result<(), String> {
    let mut outcomes = outcomes.into_iter();
    for entry in batch.entries {
        let p = match entry {
            Entry::Skipped(warning) => {
                kaldi_warn!("{warning}");
                tot.err += 1;
                continue;
            }
            Entry::Utterance(p) => p,
        };
        let outcome = outcomes
            .next()
            .ok_or_else(|| format!("no search outcome for utterance {}", p.key))?;
        let key = &p.key;
        // This Kaldi build logs each utterance's key before aligning it.
        kaldi_log!("{key}");
        let retried = match &outcome {
            AlignOutcome::Done { retried, .. } | AlignOutcome::Failed { retried } => *retried,
        };
        if retried {
            tot.retried += 1;
            kaldi_warn!(
                "Retrying utterance {key} with beam {}",
                fmt_g(s.config.retry_beam as f64)
            );
        }
        let path = match outcome {
            AlignOutcome::Failed { .. } => {
                kaldi_warn!(
                    "Did not successfully decode file {key}, len = {}",
                    p.feats.rows()
                );
                tot.err += 1;
                continue;
            }
            AlignOutcome::Done { path, .. } => path,
        };
        out.write(key, &path, p.feats.rows(), s, tot)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::LoadedModel;

    /// The CPU engine seen as a device engine: alignment scores whole
    /// batches (each utterance's own pdfs, `state_loglikes_subset`) and runs
    /// the pipeline of reading, scoring and searching threads.
    pub(crate) struct Batched(pub CpuEngine);

    impl Engine for Batched {
        fn name(&self) -> &'static str {
            "cpu (batches)"
        }
        fn device(&self) -> String {
            self.0.device()
        }
        fn load<'e>(&'e self, model: &AcousticModel) -> crate::Result<Box<dyn LoadedModel + 'e>> {
            self.0.load(model)
        }
    }

    fn fixture() -> (TransitionModel, AcousticModel) {
        let bytes = std::fs::read("testdata/kaldi/final.mdl").unwrap();
        let k = KaldiModel::from_bytes(&bytes).unwrap();
        let m = AcousticModel::from_am_diag_gmm(&k.am);
        (k.trans, m)
    }

    /// On both paths: an utterance without features is counted (its
    /// warning kept in its place), a missing table is an error, and a
    /// transition model whose pdfs the acoustic model lacks is refused.
    #[test]
    fn skipped_utterances_and_bad_tables_on_both_paths() {
        let (trans, model) = fixture();
        let d = tempfile::tempdir().unwrap();
        let scp = d.path().join("f.scp");
        let lines: String = std::fs::read_to_string("testdata/kaldi/acc/feats_cmvn_deltas.scp")
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("s01-002 "))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&scp, lines).unwrap();
        let feats = format!("scp:{}", scp.display());
        let ali = format!("ark:{}", d.path().join("a.ark").display());
        let engines: [&dyn Engine; 2] = [
            &CpuEngine::new(1).unwrap(),
            &Batched(CpuEngine::new(1).unwrap()),
        ];
        for e in engines {
            let mut tables = AlignTables {
                graphs: "ark:testdata/kaldi/ali/graphs.fsts.ark",
                features: &feats,
                alignments: &ali,
                scores: None,
                per_frame: "",
            };
            let tot = align_tables(
                e,
                &trans,
                &model,
                &tables,
                &crate::bench::align::fixture_settings(),
            )
            .unwrap();
            assert_eq!((tot.done, tot.err), (39, 1), "{}", e.name());
            tables.graphs = "ark:/nonexistent/graphs.ark";
            assert!(align_tables(
                e,
                &trans,
                &model,
                &tables,
                &crate::bench::align::fixture_settings()
            )
            .is_err());
            let mut fewer = model.clone();
            fewer.states.truncate(10);
            let err = align_tables(
                e,
                &trans,
                &fewer,
                &tables,
                &crate::bench::align::fixture_settings(),
            )
            .unwrap_err();
            assert!(err.contains("10 pdfs"), "{err}");
        }
    }
}
