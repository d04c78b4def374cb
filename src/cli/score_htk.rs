//! `amtool score-htk [options] <hmmlist> <feature-rspecifier>
//! <loglikes-wspecifier> <mmf>...`: per-frame state log-likelihoods of an
//! HTK HMM set, the HTK counterpart of gmm-compute-likes. The MMFs are loaded
//! together as HTK's `-H a -H b` does; the features are a Kaldi feature table,
//! or with `--htk-in` a table whose entries are HTK parameter files (e.g.
//! `scp:list` with lines `utt path/utt.mfc`), already of the set's parameter
//! kind (no conversion is done; the dimension is checked).
//!
//! Output columns, documented in the man page: for each logical HMM of the
//! list in list order, its emitting states 2..N-1 in order. A state tied into
//! several HMMs (or a logical HMM mapped to another's physical model) appears
//! in each column it stands for, with the same values. Each value is
//! log Σ_m c_m N(x; μ_m, Σ_m) of the state, components at or below HTK's
//! MINMIX weight left out as HTK does.

use clap::Args;

use amtool_formats::htk::mmf::{HmmList, HmmSet};
use amtool_formats::htk::param::ParamFile;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::{SequentialTableReader, TableWriter};

use super::engine_args::EngineArgs;
use super::{kaldi, KaldiStandard};
use crate::engine::FrameBatch;
use crate::model::htk::HtkModel;
use crate::train::prefetch::PrefetchedFeats;

#[derive(Debug, Clone, Args)]
pub struct ScoreHtkArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The feature table's entries are HTK parameter files (as copy-feats --htk-in).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub htk_in: bool,
    /// The HMM list (HERest's hmmList): one logical name per line, optionally its physical HMM.
    #[arg(value_name = "HMMLIST")]
    pub hmmlist: String,
    /// Features (rspecifier).
    #[arg(value_name = "FEATURE-RSPECIFIER")]
    pub features: String,
    /// Log-likelihoods (wspecifier): per utterance a frames × (emitting states
    /// of the listed HMMs, in list order) float matrix.
    #[arg(value_name = "LOGLIKES-WSPECIFIER")]
    pub output: String,
    /// The MMF files of the HMM set (HTK's -H), in order.
    #[arg(value_name = "MMF", required = true)]
    pub mmfs: Vec<String>,
}

/// Run `amtool score-htk`; returns the exit status.
pub fn run(args: ScoreHtkArgs) -> i32 {
    match score(&args) {
        Ok(()) => 0,
        Err(msg) => super::fail(&msg),
    }
}

/// Column → model state: the emitting states of the list's HMMs in order.
pub fn list_columns(set: &HmmSet, list: &HmmList, model: &HtkModel) -> Result<Vec<usize>, String> {
    let mut cols = Vec::new();
    for (logical, physical) in &list.entries {
        let hmm = set.hmm(physical).ok_or_else(|| {
            format!("HMM {physical} (for {logical} in the list) is not in the MMFs")
        })?;
        for &s in &hmm.states {
            let m = model.model_state[s].ok_or_else(|| {
                format!("internal error: state of HMM {physical} not in the model")
            })?;
            cols.push(m);
        }
    }
    Ok(cols)
}

fn score(args: &ScoreHtkArgs) -> Result<(), String> {
    let set = HmmSet::load(&args.mmfs).map_err(|e| e.to_string())?;
    let list = HmmList::load(&args.hmmlist).map_err(|e| e.to_string())?;
    let htk = HtkModel::from_hmm_set(&set, &args.mmfs.join(" ")).map_err(|e| e.to_string())?;
    let cols = list_columns(&set, &list, &htk)?;
    let all = htk.model.num_gaussians() as f64;
    let engine = args.engine.engine_for(&args.features, &htk.model, all)?;
    let mut loaded =
        crate::engine::load_for_loglikes(engine.as_ref(), &htk.model).map_err(|e| e.to_string())?;
    let dim = htk.model.dim;
    let ns = htk.model.num_states();
    let mut writer = TableWriter::<Matrix<f32>>::open(&args.output).map_err(|e| e.to_string())?;
    let mut next: Box<dyn FnMut() -> Result<Option<(String, Matrix<f32>)>, String>> = if args.htk_in
    {
        let mut r =
            SequentialTableReader::<ParamFile>::open(&args.features).map_err(|e| e.to_string())?;
        Box::new(move || {
            r.next_entry()
                .map(|o| o.map(|(k, f)| (k, f.to_matrix())))
                .map_err(|e| e.to_string())
        })
    } else {
        let mut r = PrefetchedFeats::open(&args.features).map_err(|e| e.to_string())?;
        Box::new(move || r.next_entry().map_err(|e| e.to_string()))
    };
    let (mut num_done, mut ll) = (0usize, Vec::new());
    while let Some((key, feats)) = next()? {
        if feats.rows() > 0 && feats.cols() != dim {
            return Err(format!(
                "utterance {key}: features have dimension {}, the HMM set {dim} \
                 (features must already be of the set's parameter kind)",
                feats.cols()
            ));
        }
        let t = feats.rows();
        ll.resize(t * ns, 0.0);
        if t > 0 {
            loaded
                .state_loglikes(FrameBatch::new(feats.data(), dim), &mut ll)
                .map_err(|e| format!("utterance {key}: {e}"))?;
        }
        let mut out = Vec::with_capacity(t * cols.len());
        for row in ll.chunks(ns.max(1)).take(t) {
            out.extend(cols.iter().map(|&c| row[c]));
        }
        let m = Matrix::from_vec(t, if t == 0 { 0 } else { cols.len() }, out)
            .ok_or("internal error: log-likelihood matrix of the wrong size")?;
        writer.write(&key, &m).map_err(|e| e.to_string())?;
        num_done += 1;
    }
    writer.close().map_err(|e| e.to_string())?;
    crate::kaldi_log!(
        "score-htk: computed likelihoods for {num_done} utterances ({} columns: the emitting states of {} listed HMMs).",
        cols.len(),
        list.entries.len()
    );
    Ok(())
}
