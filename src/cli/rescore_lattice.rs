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
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader, TableWriter};

use super::train_io::parse_use_gpu;
use super::KaldiStandard;
use crate::engine::{self, UseGpu};
use crate::model::AcousticModel;
use crate::score::rescore::{prepare, LatticeBatch, Skip};

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
    match rescore(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn rescore(args: &RescoreLatticeArgs) -> Result<i32, String> {
    let bytes = crate::train::io::read_input(&args.model).map_err(|e| e.to_string())?;
    let model = KaldiModel::from_bytes(&bytes).map_err(|e| e.in_file(&args.model).to_string())?;
    let dim = model.am.dim;
    let engine = engine::select(args.use_gpu, 0).map_err(|e| e.to_string())?;
    let mut loaded = engine
        .load(&AcousticModel::from_am_diag_gmm(&model.am))
        .map_err(|e| e.to_string())?;

    let mut features =
        RandomAccessTableReader::<Matrix<f32>>::open(&args.features).map_err(|e| e.to_string())?;
    let mut lattices =
        SequentialTableReader::<CompactLattice>::open(&args.lattices).map_err(|e| e.to_string())?;
    let mut writer =
        TableWriter::<CompactLattice>::open(&args.output).map_err(|e| e.to_string())?;

    // Lattices are rescored in batches: one engine call scores the frames of
    // many utterances (up to MAX_LOGLIKES log-likelihoods at a time).
    const MAX_LOGLIKES: usize = 1 << 25;
    let num_pdfs = loaded.num_states().max(1);
    let mut batch = LatticeBatch::new(dim);
    let mut rows_pending: Vec<usize> = Vec::new();
    let (mut num_done, mut num_err, mut num_frames) = (0usize, 0usize, 0i64);
    let mut flush = |batch: &mut LatticeBatch,
                     rows: &mut Vec<usize>,
                     num_done: &mut usize,
                     num_frames: &mut i64|
     -> Result<(), String> {
        let scored = batch
            .score(&model.trans, loaded.as_mut())
            .map_err(|e| e.to_string())?;
        for ((key, clat), r) in scored.into_iter().zip(rows.drain(..)) {
            writer.write(&key, &clat).map_err(|e| e.to_string())?;
            *num_done += 1;
            *num_frames += r as i64;
        }
        Ok(())
    };
    while let Some((key, mut clat)) = lattices.next_entry().map_err(|e| e.to_string())? {
        let Some(feats) = features.get(&key).map_err(|e| e.to_string())? else {
            crate::kaldi_warn!("No feature found for utterance {key}. Skipping");
            num_err += 1;
            continue;
        };
        if feats.cols() != dim {
            return Err(format!(
                "{}: utterance {key}: feature dimension {} does not match the model's {dim}",
                args.features,
                feats.cols()
            ));
        }
        match prepare(
            &mut clat,
            &model.trans,
            feats.rows(),
            args.old_acoustic_scale,
        ) {
            Ok(plan) => {
                rows_pending.push(feats.rows());
                batch.push(key, clat, plan, feats.data());
            }
            Err(Skip(msg)) => {
                crate::kaldi_warn!("{msg} [utterance {key}]");
                num_err += 1;
            }
        }
        if batch.num_frames() * num_pdfs >= MAX_LOGLIKES {
            flush(
                &mut batch,
                &mut rows_pending,
                &mut num_done,
                &mut num_frames,
            )?;
        }
    }
    if !batch.is_empty() {
        flush(
            &mut batch,
            &mut rows_pending,
            &mut num_done,
            &mut num_frames,
        )?;
    }
    writer.close().map_err(|e| e.to_string())?;
    crate::kaldi_log!("Done {num_done} lattices with errors on {num_err}, #frames is {num_frames}");
    Ok(if num_done != 0 { 0 } else { 1 })
}
