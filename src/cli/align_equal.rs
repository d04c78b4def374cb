//! `amtool align-equal [options] <graphs-rspecifier> <features-rspecifier>
//! <alignments-wspecifier>`: Kaldi's align-equal-compiled — an equally
//! spaced alignment of each utterance through a random path of its training
//! graph, the random choices seeded from the key as Kaldi seeds them (see
//! [`crate::align::equal`]), so the alignments are Kaldi's.

use clap::Args;

use amtool_formats::kaldi::fst::StdVectorFst;
use amtool_formats::kaldi::holder::Int32Vector;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader, TableWriter};

use super::{kaldi, KaldiStandard};
use crate::align::equal::{equal_align, key_seed, EqualAlignError};
use crate::{kaldi_log, kaldi_warn};

#[derive(Debug, Clone, Args)]
pub struct AlignEqualArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    /// Write output in binary mode.
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub binary: bool,
    /// Training graphs (rspecifier of VectorFst<StdArc>).
    #[arg(value_name = "GRAPHS-RSPECIFIER")]
    pub graphs: String,
    /// Features (rspecifier; only their number of frames is used).
    #[arg(value_name = "FEATURES-RSPECIFIER")]
    pub features: String,
    /// Alignments (wspecifier of int32 vectors).
    #[arg(value_name = "ALIGNMENTS-WSPECIFIER")]
    pub alignments: String,
}

/// Run `amtool align-equal`; returns the exit status.
pub fn run(args: AlignEqualArgs) -> i32 {
    match align_equal(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn align_equal(args: &AlignEqualArgs) -> Result<i32, String> {
    let mut graphs =
        SequentialTableReader::<StdVectorFst>::open(&args.graphs).map_err(|e| e.to_string())?;
    let mut feats =
        RandomAccessTableReader::<Matrix<f32>>::open(&args.features).map_err(|e| e.to_string())?;
    let mut writer =
        TableWriter::<Int32Vector>::open(&args.alignments).map_err(|e| e.to_string())?;
    let (mut done, mut no_feat, mut error) = (0usize, 0usize, 0usize);
    while let Some((key, fst)) = graphs.next_entry().map_err(|e| e.to_string())? {
        let Some(m) = feats.get(&key).map_err(|e| e.to_string())? else {
            kaldi_warn!("No features for utterance {key}");
            no_feat += 1;
            continue;
        };
        let frames = m.rows();
        if frames == 0 {
            kaldi_warn!("Zero-length utterance: {key}");
            error += 1;
            continue;
        }
        match equal_align(&fst, frames, key_seed(&key)) {
            Ok(ali) => {
                writer
                    .write(&key, &Int32Vector(ali))
                    .map_err(|e| e.to_string())?;
                done += 1;
            }
            Err(EqualAlignError::EmptyGraph) => {
                kaldi_warn!("Empty decoding graph for {key}");
                error += 1;
            }
            Err(e) => {
                kaldi_warn!("{e}");
                kaldi_warn!("AlignEqual: did not align utterence {key}");
                error += 1;
            }
        }
    }
    writer.close().map_err(|e| e.to_string())?;
    if done != 0 && no_feat == 0 && error == 0 {
        kaldi_log!("Success: done {done} utterances.");
    } else {
        kaldi_warn!(
            "Computed {done} alignments; {no_feat} lacked features, {error} had other errors."
        );
    }
    Ok(if done != 0 { 0 } else { 1 })
}
