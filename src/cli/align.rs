//! `amtool align [options] <model-in> <graphs-rspecifier> <feature-rspecifier>
//! <alignments-wspecifier> [scores-wspecifier]`: Kaldi's gmm-align-compiled.
//!
//! Per training graph (in the graph table's order): features looked up by
//! key, transition log-probabilities added with the two scales, Kaldi's
//! FasterDecoder with `--beam` (and `--retry-beam` when no final state is
//! reached), the best path's transition-ids written as the alignment.
//! Utterances are gathered into batches: the engine scores every pdf of a
//! batch's frames in one call (the GPU when there is one), then the searches
//! run in parallel on the CPU; results are written and logged in input order.

use clap::Args;
use rayon::prelude::*;

use amtool_formats::kaldi::fst::StdVectorFst;
use amtool_formats::kaldi::holder::{Basic, Int32Vector};
use amtool_formats::kaldi::matrix::{Matrix, Vector};
use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader, TableWriter};

use super::engine_args::EngineArgs;
use super::KaldiStandard;
use std::time::Instant;

use amtool_formats::kaldi::transition::TransitionModel;

use crate::align::decoder::DecoderOptions;
use crate::align::graph::{add_transition_probs, make_careful, transition_costs, DecodingGraph};
use crate::align::{align_utterance, AlignConfig, AlignOutcome, LazyLoglikes, ScaledLoglikes};
use crate::engine::cpu::{CpuEngine, PackedModel};
use crate::engine::Engine;
use crate::model::AcousticModel;
use crate::score::likes::{split_rows, state_loglikes_into, BATCH_FRAMES, BATCH_VALUES};
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

/// An utterance waiting for its batch's likelihoods.
struct Pending {
    key: String,
    graph: DecodingGraph,
    feats: Matrix<f32>,
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
    /// Wall seconds of the searches, likelihoods excluded.
    pub search_seconds: f64,
    /// Pdf log-likelihoods computed (frames × pdfs when all are scored).
    pub pdf_evals: u64,
}

struct Writers {
    ali: TableWriter<Int32Vector>,
    scores: Option<TableWriter<Basic<f32>>>,
    per_frame: Option<TableWriter<Vector<f32>>>,
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
    // and copies them all back; so a job is sized by what the CPU would
    // compute, and goes to the GPU only when even that outlasts its start-up.
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

/// Where a batch's log-likelihoods come from.
enum Likelihoods<'e> {
    /// Every pdf of the batch's frames in one engine call (the GPU), into
    /// buffers kept from batch to batch (gathered frames, log-likelihoods:
    /// a batch's are up to 256 MB, and new pages cost more than the copy).
    Engine(Box<dyn crate::engine::LoadedModel + 'e>, Vec<f32>, Vec<f32>),
    /// The CPU engine's kernels, each pdf when the search first needs it,
    /// on a pool of the engine's threads.
    Lazy(PackedModel, rayon::ThreadPool),
}

impl<'e> Likelihoods<'e> {
    fn new(engine: &'e dyn Engine, model: &AcousticModel) -> Result<Self, String> {
        let Some(threads) = engine.cpu_threads() else {
            let loaded = engine.load(model).map_err(|e| e.to_string())?;
            return Ok(Likelihoods::Engine(loaded, Vec::new(), Vec::new()));
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
    let mut likes = Likelihoods::new(engine, model)?;
    let mut graphs =
        SequentialTableReader::<StdVectorFst>::open(tables.graphs).map_err(|e| e.to_string())?;
    let mut feats =
        RandomAccessTableReader::<Matrix<f32>>::open(tables.features).map_err(|e| e.to_string())?;
    let mut out = Writers {
        ali: TableWriter::open(tables.alignments).map_err(|e| e.to_string())?,
        scores: optional_writer(tables.scores.unwrap_or(""))?,
        per_frame: optional_writer(tables.per_frame)?,
    };
    let mut tot = Totals::default();
    let mut batch: Vec<Pending> = Vec::new();
    let mut batch_frames = 0usize;
    let np = model.num_states();
    loop {
        let next = graphs.next_entry().map_err(|e| e.to_string())?;
        let end = next.is_none();
        if let Some((key, mut fst)) = next {
            let Some(m) = feats.get(&key).map_err(|e| e.to_string())? else {
                tot.err += 1;
                kaldi_warn!("No features for utterance {key}");
                continue;
            };
            if m.rows() == 0 {
                kaldi_warn!("Zero-length utterance: {key}");
                tot.err += 1;
                continue;
            }
            if !super::kaldi::dim_matches(&key, m.cols(), model.dim) {
                tot.err += 1;
                continue;
            }
            let m = m.clone();
            add_transition_probs(&mut fst, &costs).map_err(|e| format!("utterance {key}: {e}"))?;
            if settings.config.careful {
                make_careful(&mut fst);
            }
            let Some(graph) = DecodingGraph::pack(&fst) else {
                kaldi_warn!("Empty decoding graph for {key}");
                tot.err += 1;
                continue;
            };
            batch_frames += m.rows();
            batch.push(Pending {
                key,
                graph,
                feats: m,
            });
        }
        if !batch.is_empty()
            && (end || batch_frames >= BATCH_FRAMES || batch_frames * np >= BATCH_VALUES)
        {
            let outcomes = search_batch(
                &batch,
                &mut likes,
                model,
                trans.id2pdf(),
                settings,
                &mut tot,
            )?;
            write_batch(&mut batch, outcomes, settings, &mut out, &mut tot)?;
            batch_frames = 0;
        }
        if end {
            break;
        }
    }
    out.ali.close().map_err(|e| e.to_string())?;
    if let Some(w) = out.scores {
        w.close().map_err(|e| e.to_string())?;
    }
    if let Some(w) = out.per_frame {
        w.close().map_err(|e| e.to_string())?;
    }
    Ok(tot)
}

/// The batch's searches in parallel, with its likelihoods from the engine
/// (one call) or computed as the searches need them; adds the time split
/// to `tot`.
fn search_batch(
    batch: &[Pending],
    likes: &mut Likelihoods<'_>,
    model: &AcousticModel,
    id2pdf: &[i32],
    s: &AlignSettings,
    tot: &mut Totals,
) -> Result<Vec<AlignOutcome>, String> {
    let np = model.num_states();
    let t0 = Instant::now();
    match likes {
        Likelihoods::Engine(loaded, gathered, ll) => {
            let frames = batch.iter().map(|p| p.feats.data());
            state_loglikes_into(loaded.as_mut(), frames, model.dim, gathered, ll).map_err(|e| {
                let (first, last) = (&batch[0].key, &batch[batch.len() - 1].key);
                format!("utterances {first} .. {last}: {e}")
            })?;
            let n = ll.len();
            let t1 = Instant::now();
            let tid_column: Vec<u32> = id2pdf.iter().map(|&p| p.max(0) as u32).collect();
            let parts = split_rows(ll, batch.iter().map(|p| p.feats.rows()), np);
            let outcomes = batch
                .par_iter()
                .zip(parts.par_iter())
                .map(|(p, &ll)| {
                    let mut costs = ScaledLoglikes {
                        loglikes: ll,
                        columns: np,
                        tid_column: &tid_column,
                        scale: s.acoustic_scale,
                    };
                    align_utterance(&p.graph, &mut costs, &s.config, s.decoder)
                })
                .collect();
            tot.likes_seconds += (t1 - t0).as_secs_f64();
            tot.search_seconds += t1.elapsed().as_secs_f64();
            tot.pdf_evals += n as u64;
            Ok(outcomes)
        }
        Likelihoods::Lazy(packed, pool) => {
            let packed = &*packed;
            let done: Vec<(AlignOutcome, f64, f64, usize)> = pool.install(|| {
                batch
                    .par_iter()
                    .map(|p| {
                        let t = Instant::now();
                        let mut costs =
                            LazyLoglikes::new(packed, p.feats.data(), id2pdf, s.acoustic_scale);
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
            let (all, busy): (f64, f64) =
                done.iter().fold((0.0, 0.0), |a, d| (a.0 + d.1, a.1 + d.2));
            let share = if all > 0.0 { busy / all } else { 0.0 };
            tot.likes_seconds += wall * share;
            tot.search_seconds += wall * (1.0 - share);
            tot.pdf_evals += done.iter().map(|d| d.3 as u64).sum::<u64>();
            Ok(done.into_iter().map(|d| d.0).collect())
        }
    }
}

/// Outputs and log lines of a searched batch, in input order.
fn write_batch(
    batch: &mut Vec<Pending>,
    outcomes: Vec<AlignOutcome>,
    s: &AlignSettings,
    out: &mut Writers,
    tot: &mut Totals,
) -> Result<(), String> {
    for (p, outcome) in batch.drain(..).zip(outcomes) {
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
        let (g, a) = path.total_weight();
        let like = -(g + a) / s.acoustic_scale;
        tot.done += 1;
        tot.like += like as f64;
        tot.frames += p.feats.rows() as i64;
        out.ali
            .write(key, &Int32Vector(path.alignment()))
            .map_err(|e| e.to_string())?;
        if let Some(w) = out.scores.as_mut() {
            w.write(key, &Basic(-(g + a))).map_err(|e| e.to_string())?;
        }
        if let Some(w) = out.per_frame.as_mut() {
            let scale = -1.0 / s.acoustic_scale;
            let v: Vec<f32> = path
                .per_frame_acoustic_costs()
                .iter()
                .map(|c| c * scale)
                .collect();
            w.write(key, &Vector::new(v)).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
