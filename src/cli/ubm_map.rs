//! `amtool ubm-map [options] <ubm-in> <feature-rspecifier> <out-wspecifier>`:
//! relevance-MAP adaptation of a diagonal GMM-UBM (Reynolds et al. 2000), the
//! GMM-UBM speaker-recognition recipe: per speaker (`--spk2utt`) or per
//! utterance, the UBM's own posteriors give the statistics, and each key gets
//! an adapted DiagGmm, or with `--supervector=true` its adapted means
//! stacked into one float vector (components × dim, Gaussian by Gaussian) —
//! a Kaldi vector archive for back ends that read supervectors.
//!
//! Kaldi has no such tool; the options follow gmm-adapt-map's (`--spk2utt`,
//! `--update-flags`), with `--relevance` the relevance factor r
//! (`score::map::relevance_map` has the formulas). Per-utterance problems are
//! handled as in gmm-adapt-map.

use super::kaldi::dim_matches;
use clap::Args;

use amtool_formats::kaldi::gmm::DiagGmm;
use amtool_formats::kaldi::holder::TokenVector;
use amtool_formats::kaldi::matrix::{Matrix, Vector};
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader, TableWriter};

use super::engine_args::EngineArgs;
use super::{kaldi, KaldiStandard};
use crate::engine::{FrameBatch, FrameTargets, LoadedModel};
use crate::model::kaldi::DiagNatural;
use crate::model::AcousticModel;
use crate::score::map::relevance_map;
use crate::score::model_file::ModelFile;
use crate::stats::{fmt_g, ModelAccumulators, UpdateFlags};
use crate::train::convert::{augment, parse_update_flags};
use crate::{kaldi_log, kaldi_warn};

#[derive(Debug, Clone, Args)]
pub struct UbmMapArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Rspecifier for the speaker to utterance-list map (adapt per speaker).
    #[arg(long, value_name = "RSPECIFIER", default_value = "")]
    pub spk2utt: String,
    /// Relevance factor r: α = n/(n + r) per Gaussian.
    #[arg(long, value_name = "R", default_value_t = 16.0)]
    pub relevance: f64,
    /// Which parameters are adapted: a subset of mvw.
    #[arg(long, value_name = "FLAGS", default_value = "m")]
    pub update_flags: String,
    /// Write the adapted means as one float vector per key instead of a DiagGmm.
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub supervector: bool,
    /// Diagonal UBM (DiagGmm).
    #[arg(value_name = "UBM-IN")]
    pub model: String,
    /// Features (rspecifier).
    #[arg(value_name = "FEATURE-RSPECIFIER")]
    pub features: String,
    /// Adapted GMMs or supervectors (wspecifier).
    #[arg(value_name = "OUT-WSPECIFIER")]
    pub output: String,
}

/// Run `amtool ubm-map`; returns the exit status.
pub fn run(args: UbmMapArgs) -> i32 {
    match ubm_map(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

enum Out {
    Gmm(TableWriter<DiagGmm>),
    Supervector(TableWriter<Vector<f32>>),
}

struct Ubm<'a> {
    model: &'a AcousticModel,
    loaded: Box<dyn LoadedModel + 'a>,
    flags: UpdateFlags,
    relevance: f64,
}

impl Ubm<'_> {
    /// Adds one utterance's statistics; `None` after a warning when unusable.
    fn accumulate(
        &mut self,
        utt: &str,
        f: &Matrix<f32>,
        acc: &mut ModelAccumulators,
    ) -> Result<Option<()>, String> {
        if f.rows() > 0 && !dim_matches(utt, f.cols(), self.model.dim) {
            return Ok(None);
        }
        if f.rows() > 0 {
            self.loaded
                .accumulate(
                    FrameBatch::new(f.data(), self.model.dim),
                    FrameTargets::Global,
                    acc,
                )
                .map_err(|e| format!("utterance {utt}: {e}"))?;
        }
        Ok(Some(()))
    }

    fn write(&self, key: &str, acc: &ModelAccumulators, out: &mut Out) -> Result<(), String> {
        let dim = self.model.dim;
        let mut st = self.model.states[0].clone();
        relevance_map(
            &mut st,
            dim,
            &acc.states[0],
            acc.total_frames,
            self.relevance,
            self.flags,
        )
        .map_err(|e| format!("{key}: {e}"))?;
        match out {
            Out::Gmm(w) => w.write(key, &st.to_diag_gmm(dim)?),
            Out::Supervector(w) => {
                let means = DiagNatural::from_state(&st).means;
                w.write(key, &Vector::new(means.iter().map(|&m| m as f32).collect()))
            }
        }
        .map_err(|e| e.to_string())
    }
}

fn ubm_map(args: &UbmMapArgs) -> Result<i32, String> {
    let flags = parse_update_flags(&args.update_flags, "mvw").map_err(|e| e.to_string())?;
    if !(args.relevance >= 0.0) {
        return Err(format!(
            "--relevance={} must not be negative",
            args.relevance
        ));
    }
    let ModelFile::Diag(g) = ModelFile::read(&args.model).map_err(|e| e.to_string())? else {
        return Err(format!(
            "{}: relevance MAP needs a diagonal UBM (DiagGmm)",
            args.model
        ));
    };
    let model = AcousticModel::from_diag_gmm(&g);
    let all = model.num_gaussians() as f64;
    let engine = args.engine.engine_for(&args.features, &model, all)?;
    let mut ubm = Ubm {
        model: &model,
        loaded: engine.load(&model).map_err(|e| e.to_string())?,
        flags,
        relevance: args.relevance,
    };
    let acc_flags = augment(flags);
    let mut out = if args.supervector {
        Out::Supervector(TableWriter::open(&args.output).map_err(|e| e.to_string())?)
    } else {
        Out::Gmm(TableWriter::open(&args.output).map_err(|e| e.to_string())?)
    };
    let (mut done, mut err, mut keys) = (0usize, 0usize, 0usize);
    let (mut tot_like, mut tot_t) = (0f64, 0f64);
    if !args.spk2utt.is_empty() {
        let mut spk2utt =
            SequentialTableReader::<TokenVector>::open(&args.spk2utt).map_err(|e| e.to_string())?;
        let mut feats = RandomAccessTableReader::<Matrix<f32>>::open(&args.features)
            .map_err(|e| e.to_string())?;
        while let Some((spk, utts)) = spk2utt.next_entry().map_err(|e| e.to_string())? {
            let mut acc = ModelAccumulators::zeros(&model, acc_flags);
            for utt in &utts.0 {
                let Some(f) = feats.get(utt).map_err(|e| e.to_string())? else {
                    kaldi_warn!("Did not find features for utterance {utt}");
                    continue;
                };
                match ubm.accumulate(utt, f, &mut acc)? {
                    Some(()) => done += 1,
                    None => err += 1,
                }
            }
            ubm.write(&spk, &acc, &mut out)?;
            keys += 1;
            tot_like += acc.total_like;
            tot_t += acc.total_frames;
        }
    } else {
        let mut feats = SequentialTableReader::<Matrix<f32>>::open(&args.features)
            .map_err(|e| e.to_string())?;
        while let Some((utt, f)) = feats.next_entry().map_err(|e| e.to_string())? {
            let mut acc = ModelAccumulators::zeros(&model, acc_flags);
            if ubm.accumulate(&utt, &f, &mut acc)?.is_none() {
                err += 1;
                continue;
            }
            ubm.write(&utt, &acc, &mut out)?;
            done += 1;
            keys += 1;
            tot_like += acc.total_like;
            tot_t += acc.total_frames;
        }
    }
    match out {
        Out::Gmm(w) => w.close(),
        Out::Supervector(w) => w.close(),
    }
    .map_err(|e| e.to_string())?;
    kaldi_log!("Done {done} files, {err} with errors; wrote {keys} adapted models.");
    kaldi_log!(
        "Average UBM log-likelihood per frame was {} over {} frames.",
        fmt_g(tot_like / tot_t),
        fmt_g(tot_t)
    );
    Ok(if done != 0 { 0 } else { 1 })
}
