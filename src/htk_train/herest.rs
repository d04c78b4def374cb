//! One HERest pass: read the HMM set, run forward-backward over every
//! utterance of the script, accumulate, update, write the set back (`-M`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use amtool_formats::htk::config::Config;
use amtool_formats::htk::mlf::Mlf;
use amtool_formats::htk::mmf::{HmmList, HmmSet};
use amtool_formats::htk::param::ParamFile;
use amtool_formats::htk::parmkind::{ParmKind, HASCOMPX, HASCRCC};
use rayon::prelude::*;

use super::accs::{HerestAccs, HtkUpdate};
use super::fb::{forward_backward, FbFailure, OutProbs, Pruning};
use super::labels::{base_name, label_file_name, load_labels};
use super::sentence::{HmmTable, Sentence};
use super::sink::AccSink;
use super::update::{htk_round_trip, ml_update, UpdateReport, UpdateSettings};
use crate::engine::{self, FrameBatch, Gpus, LoadedModel, UseGpu};
use crate::model::htk::HtkModel;
use crate::model::AcousticModel;
use crate::{Error, Result};

/// Everything a HERest command line says.
#[derive(Debug, Clone)]
pub struct HerestJob {
    pub configs: Vec<PathBuf>,
    pub mlfs: Vec<PathBuf>,
    pub mmfs: Vec<PathBuf>,
    pub hmm_list: PathBuf,
    pub data: Vec<String>,
    pub out_dir: Option<PathBuf>,
    pub prune: Pruning,
    pub flags: HtkUpdate,
    pub min_var: f32,
    pub mix_floor: f32,
    pub min_egs: u64,
    pub binary: bool,
    /// `-T`: 1 prints HERest's per-utterance lines.
    pub trace: u32,
    /// Where state log-likelihoods come from.
    pub scorer: Scorer,
    /// `--gpus` (amtool's own): the GPUs an engine scorer computes on.
    pub gpus: Gpus,
    /// `-L DIR`: label files are looked up as DIR/<base>.<ext> (else next to the data).
    pub lab_dir: Option<PathBuf>,
    /// `-X EXT`: label file extension (`lab`).
    pub lab_ext: String,
    /// `-s FILE`: HERest's statistics report (examples and state occupancies per HMM).
    pub stats: Option<PathBuf>,
    /// `-p N`: N > 0 writes `HER<N>.acc` instead of updating; 0 reads the
    /// accumulator files given as data and updates.
    pub par_mode: Option<u32>,
    /// `-d DIR`: where the definition file of an HMM that no MMF defines is
    /// (DIR/<physical name>; else the name as a path).
    pub hmm_dir: Option<PathBuf>,
    /// `-x EXT`: the extension of those files.
    pub hmm_ext: Option<String>,
    /// `-o EXT`: the extension those files are saved with (else their own).
    pub new_ext: Option<String>,
}

impl HerestJob {
    /// HERest's defaults (HERest.c's globals): update tmvw, -m 3, no pruning.
    pub fn new() -> Self {
        HerestJob {
            configs: vec![],
            mlfs: vec![],
            mmfs: vec![],
            hmm_list: PathBuf::new(),
            data: vec![],
            out_dir: None,
            prune: Pruning::default(),
            flags: HtkUpdate::default(),
            min_var: 0.0,
            mix_floor: 0.0,
            min_egs: 3,
            binary: false,
            trace: 0,
            scorer: Scorer::Htk,
            gpus: Gpus::default(),
            lab_dir: None,
            lab_ext: "lab".into(),
            stats: None,
            par_mode: None,
            hmm_dir: None,
            hmm_ext: None,
            new_ext: None,
        }
    }
}

impl Default for HerestJob {
    fn default() -> Self {
        Self::new()
    }
}

/// HShell's `MakeFN`: `fn` with its folder replaced by `dir` and its
/// extension by `ext` (each where given).
pub fn make_fn(name: &str, dir: Option<&Path>, ext: Option<&str>) -> PathBuf {
    let p = Path::new(name);
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = ext
        .map(str::to_string)
        .or_else(|| p.extension().map(|e| e.to_string_lossy().into_owned()));
    let file = match ext {
        Some(e) if !e.is_empty() => format!("{stem}.{e}"),
        _ => stem,
    };
    match dir {
        Some(d) => d.join(file),
        None => p.parent().unwrap_or(Path::new("")).join(file),
    }
}

/// HModel's `LoadHMMSet`: the `-H` MMFs, then, for every physical HMM of the
/// list that none of them defines, its own definition file (`-d`, `-x`).
/// Returns the set and the number of MMFs (the files after them are HMM files).
fn load_hmm_set(job: &HerestJob, list: &HmmList) -> Result<(HmmSet, usize)> {
    let mut set = HmmSet::default();
    for p in &job.mmfs {
        let name = p.display().to_string();
        let bytes = std::fs::read(p).map_err(|e| Error::Io {
            path: name.clone(),
            source: e,
        })?;
        set.add_mmf(&bytes, &name)?;
    }
    for (_, phys) in &list.entries {
        if set.hmm(phys).is_some() {
            continue;
        }
        let path = make_fn(phys, job.hmm_dir.as_deref(), job.hmm_ext.as_deref());
        let name = path.display().to_string();
        let bytes = std::fs::read(&path).map_err(|e| {
            Error::Mismatch(format!(
                "HMM {phys} is in no MMF (-H) and its definition file {name} cannot be read: {e}"
            ))
        })?;
        set.add_mmf(&bytes, &name)?;
        if set.hmm(phys).is_none() {
            return Err(Error::Mismatch(format!(
                "{name}: no definition of HMM ~h \"{phys}\""
            )));
        }
    }
    set.finish()?;
    Ok((set, job.mmfs.len()))
}

/// Who computes the output probabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scorer {
    /// HTK's own float arithmetic ([`super::score`]), for HERest's exact numbers.
    Htk,
    /// An amtool engine (CPU or CUDA, Kaldi's expanded form).
    Engine(UseGpu),
}

/// What a pass produced.
#[derive(Debug, Clone)]
pub struct HerestOutcome {
    pub set: HmmSet,
    pub accs: HerestAccs,
    pub report: UpdateReport,
    pub skipped: Vec<String>,
    pub written: Vec<PathBuf>,
    /// False for `-p N` with N > 0 (accumulators written, no update).
    pub updated: bool,
}

impl HerestOutcome {
    pub fn avg_log_prob(&self) -> f64 {
        self.accs.total_pr / self.accs.total_frames as f64
    }
}

/// An utterance's forward-backward: its log probability (or why it
/// failed), the beta pass's retries, and with an engine its state
/// occupancies as (frame, model state, occupancy).
type UttOut = (
    std::result::Result<f64, FbFailure>,
    Vec<f64>,
    Vec<(u32, u32, f32)>,
);

/// One utterance scored by the engine.
struct Scored {
    datafn: String,
    labfn: String,
    labels: Vec<String>,
    feats: Vec<f32>,
    /// The features moved as the engine's model is (empty for HTK's scorer).
    moved: Vec<f32>,
    frames: usize,
    state_ll: Vec<f32>,
    /// Columns of `state_ll`: all model states (engine) or the sentence's.
    stride: usize,
    col: Vec<u32>,
    comp_ll: HashMap<usize, Vec<f32>>,
}

fn load_config(paths: &[PathBuf]) -> Result<Config> {
    let mut c = Config::default();
    for p in paths {
        c.extend(Config::load(p)?);
    }
    Ok(c)
}

/// Run one HERest pass (accumulate over `job.data`, update, save into `out_dir`).
pub fn run(job: &HerestJob) -> Result<HerestOutcome> {
    let config = load_config(&job.configs)?;
    check_out_dir(job)?;
    let list = HmmList::load(&job.hmm_list)?;
    let (set, num_mmfs) = load_hmm_set(job, &list)?;
    let models = PassModels::new(&set, job.scorer)?;
    let table = HmmTable::new(&set, &list, &models.model)?;
    if job.trace & 1 != 0 {
        print!("{}", header(job, &set, list.entries.len()));
    }
    let opts = PassOptions::read(job, &config, &set, &models.set_name)?;
    if job.par_mode == Some(0) {
        let accs = sum_acc_files(job, &set, opts.binary_acc)?;
        return finish(job, (set, num_mmfs), accs, Vec::new(), opts.map_tau, false);
    }
    let (accs, skipped) = accumulate(job, &set, &models, &table, &opts)?;
    if let Some(n) = job.par_mode {
        return write_par_accs(job, n, set, accs, skipped, opts.binary_acc);
    }
    finish(job, (set, num_mmfs), accs, skipped, opts.map_tau, true)
}

fn check_out_dir(job: &HerestJob) -> Result<()> {
    match &job.out_dir {
        Some(d) if !d.is_dir() => Err(Error::Mismatch(format!(
            "-M {}: output directory does not exist",
            d.display()
        ))),
        _ => Ok(()),
    }
}

/// The models a pass scores with, made once from the set as loaded.
struct PassModels {
    set_name: String,
    /// The set as read: HERest scores with the <GCONST>s of the file (7
    /// digits), so the scorer does too.
    scoring: HmmSet,
    model: HtkModel,
    log_wt: Vec<Vec<f32>>,
    /// The average of the means (what an engine's model and features are
    /// moved by).
    offset: Vec<f32>,
    /// An engine scorer's model: moved by `offset`, HERest's log weights.
    engine_model: Option<AcousticModel>,
}

impl PassModels {
    fn new(set: &HmmSet, scorer: Scorer) -> Result<Self> {
        let set_name = set.files.last().cloned().unwrap_or_default();
        let scoring = set.clone();
        let model = HtkModel::from_hmm_set(&scoring, &set_name)?;
        let log_wt = super::score::log_weights(&scoring);
        let offset = mean_offset(set);
        let engine_model = match scorer {
            Scorer::Engine(_) => Some(engine_model(&scoring, &set_name, &offset, &log_wt)?),
            Scorer::Htk => None,
        };
        Ok(PassModels {
            set_name,
            scoring,
            model,
            log_wt,
            offset,
            engine_model,
        })
    }
}

/// The average of the set's means.
fn mean_offset(set: &HmmSet) -> Vec<f32> {
    let mut o = vec![0f64; set.options.vec_size];
    for m in &set.means {
        for (a, b) in o.iter_mut().zip(m) {
            *a += *b as f64 / set.means.len() as f64;
        }
    }
    o.into_iter().map(|x| x as f32).collect()
}

/// The model an engine scores with: the means moved by `offset`
/// (log-likelihoods do not change), so that the engines' expanded form
/// x·Σ⁻¹μ − ½xᵀΣ⁻¹x does not cancel large terms (HTK features are not
/// mean-normalised: c0 is near 70), and HERest's log weights.
fn engine_model(
    scoring: &HmmSet,
    set_name: &str,
    offset: &[f32],
    log_wt: &[Vec<f32>],
) -> Result<AcousticModel> {
    let mut shifted = scoring.clone();
    for m in &mut shifted.means {
        for (a, b) in m.iter_mut().zip(offset) {
            *a -= b;
        }
    }
    let mut em = HtkModel::from_hmm_set(&shifted, set_name)?;
    for (ms, g) in em.model.states.iter_mut().enumerate() {
        let s = em.set_state[ms];
        for (c, &mi) in em.mixture_of[ms].iter().enumerate() {
            let w = scoring.states[s].streams[0].mixtures[mi].weight;
            g.gconsts[c] += (log_wt[s][mi] as f64 - (w as f64).ln()) as f32;
        }
    }
    Ok(em.model)
}

/// What the configuration and the label files give a pass.
struct PassOptions {
    mlfs: Vec<(String, Mlf)>,
    /// The parameter kind the data must have.
    want: Option<ParmKind>,
    map_tau: f64,
    binary_acc: bool,
}

impl PassOptions {
    fn read(job: &HerestJob, config: &Config, set: &HmmSet, set_name: &str) -> Result<Self> {
        let mut mlfs = Vec::new();
        for m in &job.mlfs {
            mlfs.push((m.display().to_string(), Mlf::load(m)?));
        }
        let target = match config.get("HPARM", "TARGETKIND") {
            Some(k) => Some(
                k.parse::<ParmKind>()
                    .map_err(|e| Error::Mismatch(format!("config TARGETKIND = {k}: {e}")))?,
            ),
            None => None,
        };
        let map_tau = match config.get_f64("HMAP", "MAPTAU") {
            Some(Ok(v)) => v,
            Some(Err(e)) => return Err(Error::Mismatch(format!("config: {e}"))),
            None => 20.0,
        };
        check_map(job, set, set_name)?;
        let binary_acc = match config.get_bool("HTRAIN", "BINARYACCFORMAT") {
            Some(Ok(b)) => b,
            Some(Err(e)) => return Err(Error::Mismatch(format!("config: {e}"))),
            None => true,
        };
        Ok(PassOptions {
            mlfs,
            want: target.or(set.options.parm_kind),
            map_tau,
            binary_acc,
        })
    }
}

/// MAP (`-u p`) as HTK's HMap takes it: no transitions, no full covariances.
fn check_map(job: &HerestJob, set: &HmmSet, set_name: &str) -> Result<()> {
    if job.flags.map && job.flags.trans {
        return Err(Error::Mismatch(
            "HERest -u p with t: MAP has no transition update (HMap)".into(),
        ));
    }
    if job.flags.map
        && set
            .pdfs
            .iter()
            .any(|p| !matches!(p.cov, amtool_formats::htk::mmf::Covariance::Diag(_)))
    {
        return Err(Error::Mismatch(format!(
            "{set_name}: MAP estimation of full covariance matrices is not supported (as in HTK)"
        )));
    }
    Ok(())
}

/// `-p 0`: the accumulator files given as data, summed.
fn sum_acc_files(job: &HerestJob, set: &HmmSet, binary_acc: bool) -> Result<HerestAccs> {
    let mut accs = HerestAccs::zeros(set);
    let mut total_pr = 0f64;
    for f in &job.data {
        let bytes = std::fs::read(f).map_err(|e| Error::Io {
            path: f.clone(),
            source: e,
        })?;
        let (pr, t) = super::accfile::read_into(set, &mut accs, job.flags, &bytes, binary_acc, f)?;
        total_pr += pr as f32 as f64;
        accs.total_frames += t;
    }
    accs.total_pr = total_pr;
    Ok(accs)
}

/// `-p N`, N > 0: the accumulators written as `HER<N>.acc`, no update.
fn write_par_accs(
    job: &HerestJob,
    n: u32,
    set: HmmSet,
    accs: HerestAccs,
    skipped: Vec<String>,
    binary_acc: bool,
) -> Result<HerestOutcome> {
    let dir = job.out_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let path = dir.join(format!("HER{n}.acc"));
    let bytes = super::accfile::write(&set, &accs, job.flags, binary_acc);
    crate::train::io::write_output(&path.display().to_string(), &bytes)?;
    Ok(HerestOutcome {
        set,
        accs,
        report: UpdateReport::default(),
        skipped,
        written: vec![path],
        updated: false,
    })
}

/// Utterances read and scored together (one engine call).
const BATCH: usize = 32;
/// Utterances a thread's forward-backward accumulators take, in order.
const CHUNK: usize = 4;

/// Forward-backward over every utterance of `job.data`, batch by batch:
/// the accumulators and the utterances skipped.
fn accumulate(
    job: &HerestJob,
    set: &HmmSet,
    models: &PassModels,
    table: &HmmTable,
    opts: &PassOptions,
) -> Result<(HerestAccs, Vec<String>)> {
    let eng = match job.scorer {
        Scorer::Engine(g) => Some(engine::select_gpus(g, 0, job.gpus, None)?),
        Scorer::Htk => None,
    };
    let mut lm = match (&eng, &models.engine_model) {
        (Some(e), Some(m)) => Some(e.load(m)?),
        _ => None,
    };
    let mut engine_accs = models
        .engine_model
        .as_ref()
        .map(|m| crate::stats::ModelAccumulators::zeros(m, engine_flags(job.flags)));
    let ctx = FbContext {
        job,
        set,
        models,
        table,
        inv_var: super::score::inverse_variances(&models.scoring),
        multi_mix: set.states.iter().any(|s| s.streams[0].num_mixes > 1),
        engine: lm.is_some(),
    };
    let dim = models.model.model.dim;
    let mut accs = HerestAccs::zeros(set);
    let mut skipped = Vec::new();
    for batch in job.data.chunks(BATCH) {
        let mut scored = batch
            .iter()
            .map(|datafn| read_utterance(&ctx, opts, datafn))
            .collect::<Result<Vec<_>>>()?;
        if let Some(lm) = lm.as_mut() {
            // One engine call for the batch. (The engine's accumulate splits
            // state occupancies into components itself: no component
            // log-likelihoods needed.)
            let utts: Vec<&[f32]> = scored.iter().map(|u| u.moved.as_slice()).collect();
            let ll = crate::score::likes::state_loglikes_batch(lm.as_mut(), &utts, dim)?;
            for (u, ll) in scored.iter_mut().zip(ll) {
                u.state_ll = ll;
            }
        }
        let per_utt = forward_backward_batch(&ctx, &mut scored, &mut accs)?;
        // An engine gathers the mixture statistics from the state
        // occupancies: the batch's in one call, settled after the last batch.
        if let (Some(lm), Some(macc)) = (lm.as_mut(), engine_accs.as_mut()) {
            send_occupancies(lm.as_mut(), &scored, &per_utt, dim, macc)?;
        }
        report_batch(job, &scored, per_utt, &mut accs, &mut skipped);
    }
    if let (Some(lm), Some(macc)) = (lm.as_mut(), engine_accs.as_mut()) {
        lm.settle(macc)?;
    }
    if let Some(macc) = &engine_accs {
        add_engine_stats(
            set,
            &models.model,
            &models.offset,
            macc,
            job.flags,
            &mut accs,
        );
    }
    Ok((accs, skipped))
}

/// The engine statistics HERest's update flags need.
fn engine_flags(f: HtkUpdate) -> crate::stats::accumulators::UpdateFlags {
    crate::stats::accumulators::UpdateFlags {
        means: f.means || f.vars,
        variances: f.vars,
        weights: f.weights,
        transitions: false,
    }
}

/// What every utterance's forward-backward of a pass reads.
struct FbContext<'a> {
    job: &'a HerestJob,
    set: &'a HmmSet,
    models: &'a PassModels,
    table: &'a HmmTable,
    inv_var: Vec<Vec<f32>>,
    multi_mix: bool,
    /// Whether an engine scores (else HTK's own arithmetic).
    engine: bool,
}

/// An utterance's labels and features, checked against the set.
fn read_utterance(ctx: &FbContext<'_>, opts: &PassOptions, datafn: &str) -> Result<Scored> {
    let job = ctx.job;
    let model = &ctx.models.model.model;
    let dim = model.dim;
    let labfn = label_file_name(datafn, job.lab_dir.as_deref(), &job.lab_ext);
    let labels = load_labels(&opts.mlfs, &labfn)?;
    let pf = ParamFile::open(datafn)?;
    let strip = |k: ParmKind| k.without(HASCOMPX | HASCRCC);
    if let Some(w) = opts.want {
        if strip(pf.kind) != strip(w) {
            return Err(Error::Mismatch(format!(
                "{datafn}: parameter kind {} differs from the HMM set's {} \
                 (feature conversion is not supported: code the features with HCopy)",
                pf.kind, w
            )));
        }
    }
    if pf.ncols != dim {
        return Err(Error::Mismatch(format!(
            "{datafn}: vector size {} is incompatible with the HMM set's {dim}",
            pf.ncols
        )));
    }
    let feats = pf.to_f32();
    let moved = if ctx.engine {
        feats
            .chunks(dim)
            .flat_map(|x| x.iter().zip(&ctx.models.offset).map(|(a, b)| a - b))
            .collect()
    } else {
        Vec::new()
    };
    Ok(Scored {
        datafn: datafn.to_string(),
        labfn,
        labels,
        feats,
        moved,
        frames: pf.n_frames(),
        state_ll: Vec::new(),
        stride: model.num_states(),
        col: (0..model.num_states() as u32).collect(),
        comp_ll: HashMap::new(),
    })
}

/// Forward-backward of a batch's utterances in fixed chunks, each chunk
/// summed in order into its own accumulators and the chunks added into
/// `accs` in order: the result does not depend on the number of threads.
fn forward_backward_batch(
    ctx: &FbContext<'_>,
    scored: &mut [Scored],
    accs: &mut HerestAccs,
) -> Result<Vec<UttOut>> {
    type ChunkOut = (HerestAccs, Vec<UttOut>);
    let results: Vec<Result<ChunkOut>> = scored
        .par_chunks_mut(CHUNK)
        .map(|chunk| {
            let mut acc = HerestAccs::zeros(ctx.set);
            let rs = chunk
                .iter_mut()
                .map(|u| utterance_fb(ctx, u, &mut acc))
                .collect::<Result<Vec<_>>>()?;
            Ok((acc, rs))
        })
        .collect();
    let mut per_utt = Vec::with_capacity(scored.len());
    for res in results {
        let (acc, rs) = res?;
        accs.add(&acc);
        per_utt.extend(rs);
    }
    Ok(per_utt)
}

/// One utterance's forward-backward into `acc` (its output probabilities
/// from HTK's scorer here, or the engine's already in `u`); frees what it
/// no longer needs of `u`.
fn utterance_fb(ctx: &FbContext<'_>, u: &mut Scored, acc: &mut HerestAccs) -> Result<UttOut> {
    let (job, models) = (ctx.job, ctx.models);
    let model = &models.model;
    let dim = model.model.dim;
    let sent = Sentence::new(ctx.table, &u.labels, &u.labfn)?;
    if !ctx.engine {
        let states = sentence_states(&sent);
        u.col = vec![u32::MAX; model.model.num_states()];
        for (k, &ms) in states.iter().enumerate() {
            u.col[ms] = k as u32;
        }
        u.stride = states.len();
        u.state_ll = vec![0f32; u.frames * states.len()];
        super::score::score(
            &models.scoring,
            model,
            &ctx.inv_var,
            &models.log_wt,
            &u.feats,
            dim,
            &states,
            &mut u.state_ll,
            &mut u.comp_ll,
        );
    }
    let op = OutProbs {
        state_ll: &u.state_ll,
        stride: u.stride,
        col: &u.col,
    };
    let mut sink = AccSink {
        set: ctx.set,
        model,
        sent: &sent,
        u: job.flags,
        min_fp: job.prune.min_forward_prob,
        feats: &u.feats,
        dim,
        comp_ll: &u.comp_ll,
        acc,
        retries: Vec::new(),
        occupancies: ctx.engine.then(Vec::new),
    };
    // Statistics reach the sink only once the beta pass has succeeded, so a
    // skipped utterance adds nothing.
    let r = forward_backward(
        &sent,
        &op,
        u.frames,
        &job.prune,
        ctx.multi_mix && !ctx.engine,
        &mut sink,
    );
    let retries = sink.retries;
    let occs = sink.occupancies.unwrap_or_default();
    if r.is_ok() {
        for m in &sent.models[1..] {
            acc.num_egs[m.hmm] += 1;
        }
    }
    u.state_ll = Vec::new();
    u.comp_ll = HashMap::new();
    if !ctx.engine {
        u.feats = Vec::new();
    }
    Ok((r, retries, occs))
}

/// HERest's lines for a batch's utterances (`-T 1`), their log
/// probabilities and frames into `accs`, and the ones skipped.
fn report_batch(
    job: &HerestJob,
    scored: &[Scored],
    per_utt: Vec<UttOut>,
    accs: &mut HerestAccs,
    skipped: &mut Vec<String>,
) {
    let trace = job.trace & 1 != 0;
    for (u, (r, retries, _)) in scored.iter().zip(per_utt) {
        if trace {
            println!(
                " Processing Data: {}; Label {}",
                base_name(&u.datafn),
                base_name(&u.labfn)
            );
            for b in &retries {
                println!("Retrying Beta pass at {b:5.1}");
            }
        }
        match r {
            Ok(pr) => {
                if trace {
                    println!(
                        " Utterance prob per frame = {}",
                        amtool_formats::htk::cfmt::fmt_e(pr / u.frames as f64)
                    );
                }
                accs.total_pr += pr;
                accs.total_frames += u.frames as u64;
            }
            Err(f) => {
                if trace {
                    match f {
                        FbFailure::TooShort { states, frames } => {
                            println!(" Unable to traverse {states} states in {frames} frames")
                        }
                        FbFailure::Pruned => println!(" No path found in beta pass"),
                    }
                }
                eprintln!(
                    "WARNING [-7324]  StepBack: File {} - bad data or over pruning",
                    u.datafn
                );
                skipped.push(u.datafn.clone());
            }
        }
    }
}

/// Update and save (`round_trip`: the set went through HERest's
/// ConvDiagC/ConvLogWt, i.e. not `-p 0`).
fn finish(
    job: &HerestJob,
    (mut set, num_mmfs): (HmmSet, usize),
    accs: HerestAccs,
    skipped: Vec<String>,
    map_tau: f64,
    round_trip: bool,
) -> Result<HerestOutcome> {
    if let Some(path) = &job.stats {
        crate::train::io::write_output(
            &path.display().to_string(),
            stat_report(&set, &accs).as_bytes(),
        )?;
    }
    if round_trip {
        htk_round_trip(&mut set);
    }
    let st = UpdateSettings {
        flags: job.flags,
        min_egs: job.min_egs,
        min_var: job.min_var,
        mix_floor: job.mix_floor,
        map_tau,
    };
    let report = if job.flags.map {
        super::update::map_update(&mut set, &accs, &st)
    } else {
        ml_update(&mut set, &accs, &st)
    };
    set.normalise_transitions_like_htk();
    let written = save_set(job, &set, num_mmfs)?;
    Ok(HerestOutcome {
        set,
        accs,
        report,
        skipped,
        written,
        updated: true,
    })
}

/// HModel's `SaveHMMSet`: every file the set was read from written back
/// under its own name, in `-M DIR` (else where it was read from); the HMM
/// definition files (those after the `num_mmfs` MMFs) with the `-o` extension.
fn save_set(job: &HerestJob, set: &HmmSet, num_mmfs: usize) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (i, f) in set.files.iter().enumerate() {
        let ext = if i >= num_mmfs {
            job.new_ext.as_deref()
        } else {
            None
        };
        let path = make_fn(f, job.out_dir.as_deref(), ext);
        set.save_file(i, &path, job.binary)?;
        written.push(path);
    }
    Ok(written)
}

/// The distinct model states of a sentence, in order of first use.
fn sentence_states(sent: &Sentence) -> Vec<usize> {
    let mut seen = std::collections::HashSet::new();
    let mut v = Vec::new();
    for m in &sent.models[1..] {
        for j in 2..m.n {
            if seen.insert(m.states[j]) {
                v.push(m.states[j]);
            }
        }
    }
    v
}

/// HERest's `-s` report (`StatReport`): per HMM in scan order its number,
/// quoted name, number of examples and the occupancy of each emitting state.
pub fn stat_report(set: &HmmSet, accs: &HerestAccs) -> String {
    let mut out = String::new();
    for (px, (h, name)) in super::update::scan_order(set).into_iter().enumerate() {
        out.push_str(&format!(
            "{:4} {:>14} {:4} ",
            px + 1,
            amtool_formats::htk::mmf::quote(&name),
            accs.num_egs[h]
        ));
        for &s in &set.hmms[h].states {
            out.push_str(&format!(" {:10.6}", accs.weight[s].occ));
        }
        out.push('\n');
    }
    out
}

/// The lines HERest -T 1 prints before the first utterance.
fn header(job: &HerestJob, set: &HmmSet, logical: usize) -> String {
    let u = job.flags;
    let max_m = super::update::max_mixes(set);
    let mut s = format!("HERest  {} Updating: ", if u.map { "MAP" } else { "ML" });
    for (on, name) in [
        (u.trans, "Transitions "),
        (u.means, "Means "),
        (u.vars, "Variances "),
        (u.weights && max_m > 1, "MixWeights "),
    ] {
        if on {
            s.push_str(name);
        }
    }
    s.push_str("\n\n ");
    if let Some(n) = job.par_mode {
        s.push_str(&format!("Parallel-Mode[{n}] "));
    }
    s.push_str(&format!(
        "System is {}\n",
        if is_shared(set) { "SHARED" } else { "PLAIN" }
    ));
    let physical = set.macros.iter().filter(|m| m.kind == b'h').count();
    s.push_str(&format!(
        "{logical} Logical/{physical} Physical Models Loaded, VecSize={}\n",
        set.options.vec_size
    ));
    if !job.mmfs.is_empty() {
        s.push_str(&format!("{} MMF input files\n", job.mmfs.len()));
    }
    let p = &job.prune;
    if p.init < super::fb::NOPRUNE {
        if p.inc != 0.0 {
            s.push_str(&format!(
                "Pruning-On[{:.1} {:.1} {:.1}]\n",
                p.init, p.inc, p.limit
            ));
        } else {
            s.push_str(&format!("Pruning-On[{:.1}]\n", p.init));
        }
    } else {
        s.push_str("Pruning-Off\n");
    }
    s
}

/// HModel's SHAREDHS: some HMM uses a macro other than `~h`/`~o`.
fn is_shared(set: &HmmSet) -> bool {
    use amtool_formats::htk::mmf::Covariance;
    let used = |kind: u8, target: usize| -> bool {
        match kind {
            b's' => set.hmms.iter().any(|h| h.states.contains(&target)),
            b't' => set.hmms.iter().any(|h| h.transp == target),
            b'm' => set.states.iter().any(|s| {
                s.streams
                    .iter()
                    .any(|st| st.mixtures.iter().any(|m| m.pdf == target))
            }),
            b'u' => set.pdfs.iter().any(|p| p.mean == target),
            b'v' => set.pdfs.iter().any(|p| p.cov == Covariance::Diag(target)),
            b'i' | b'c' => set.pdfs.iter().any(|p| {
                p.cov == Covariance::InvCovar(target) || p.cov == Covariance::LltCovar(target)
            }),
            b'x' => set.pdfs.iter().any(|p| p.cov == Covariance::Xform(target)),
            b'w' => set.states.iter().any(|s| s.sweights == Some(target)),
            b'd' => set.states.iter().any(|s| s.dur == Some(target)),
            _ => false,
        }
    };
    set.macros.iter().any(|m| used(m.kind, m.target))
}

/// Sends the state occupancies of a batch's utterances that passed the
/// forward-backward (`per_utt`, as `(frame, model state, occupancy)`) to the
/// engine as one deferred statistics call, with their moved features.
fn send_occupancies(
    lm: &mut dyn LoadedModel,
    scored: &[Scored],
    per_utt: &[UttOut],
    dim: usize,
    macc: &mut crate::stats::ModelAccumulators,
) -> Result<()> {
    let mut moved = Vec::new();
    let mut offsets = vec![0usize];
    let mut pairs = Vec::new();
    for (u, (r, _, occs)) in scored.iter().zip(per_utt) {
        if r.is_err() {
            continue;
        }
        moved.extend_from_slice(&u.moved);
        let base = offsets.len() - 1;
        offsets.resize(base + u.frames + 1, 0);
        for &(t, ms, g) in occs {
            offsets[base + t as usize + 1] += 1;
            pairs.push((ms, g));
        }
        for t in base..base + u.frames {
            offsets[t + 1] += offsets[t];
        }
    }
    if moved.is_empty() {
        return Ok(());
    }
    let targets = crate::engine::FrameTargets::Weighted {
        offsets: &offsets,
        pairs: &pairs,
    };
    lm.accumulate_deferred(FrameBatch::new(&moved, dim), targets, macc)?;
    Ok(())
}

/// Turn an engine's statistics (per model state and component: occupancy,
/// Σγx′, Σγx′² or Σγx′x′ᵀ on features moved by `offset`) into HERest's
/// accumulators, centred on each Gaussian's current (moved) mean and added
/// to the shared objects they belong to.
fn add_engine_stats(
    set: &HmmSet,
    model: &HtkModel,
    offset: &[f32],
    macc: &crate::stats::ModelAccumulators,
    u: HtkUpdate,
    accs: &mut HerestAccs,
) {
    use amtool_formats::htk::mmf::Covariance;
    let dim = macc.dim;
    let vlen = match macc.kind {
        crate::model::CovKind::Diagonal => dim,
        crate::model::CovKind::Full => dim * (dim + 1) / 2,
    };
    for (ms, sa) in macc.states.iter().enumerate() {
        let s = model.set_state[ms];
        for (c, &mi) in model.mixture_of[ms].iter().enumerate() {
            let n = sa.occupancy[c];
            let pdf = &set.pdfs[set.states[s].streams[0].mixtures[mi].pdf];
            let mu: Vec<f64> = set.means[pdf.mean]
                .iter()
                .zip(offset)
                .map(|(m, o)| (*m - *o) as f64)
                .collect();
            if u.weights {
                accs.weight[s].c[mi] += n;
            }
            accs.weight[s].occ += n;
            if sa.mean_acc.is_empty() {
                continue;
            }
            let s1 = &sa.mean_acc[c * dim..(c + 1) * dim];
            if u.means {
                let ma = &mut accs.mean[pdf.mean];
                ma.occ += n;
                for k in 0..dim {
                    ma.sum[k] += s1[k] - mu[k] * n;
                }
            }
            if u.vars && !sa.var_acc.is_empty() {
                let s2 = &sa.var_acc[c * vlen..(c + 1) * vlen];
                match pdf.cov {
                    Covariance::Diag(v) => {
                        let va = &mut accs.var[v];
                        va.occ += n;
                        for k in 0..dim {
                            va.sum[k] += s2[k] - 2.0 * mu[k] * s1[k] + mu[k] * mu[k] * n;
                        }
                    }
                    Covariance::InvCovar(cv) => {
                        let va = &mut accs.covar[cv];
                        va.occ += n;
                        let mut idx = 0;
                        for i in 0..dim {
                            for j in 0..=i {
                                va.sum[idx] +=
                                    s2[idx] - mu[i] * s1[j] - mu[j] * s1[i] + mu[i] * mu[j] * n;
                                idx += 1;
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}
