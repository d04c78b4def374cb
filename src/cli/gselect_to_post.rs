//! `amtool gselect-to-post [options] <model-in> <feature-rspecifier> <gselect-rspecifier> <post-wspecifier>`:
//! Kaldi's fgmm-global-gselect-to-post (FullGmm; a DiagGmm works the same
//! way). Per frame, the log-likelihoods of only the selected Gaussians are
//! evaluated and turned into posteriors; `--min-post` prunes and
//! renormalises.

use super::kaldi::dim_matches;
use clap::Args;

use amtool_formats::kaldi::holder::{Int32VectorVector, Posterior};
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader, TableWriter};

use super::global_gmm::{gselect_for, read_global_model};
use super::KaldiStandard;
use crate::score::gselect::preselected_posteriors;
use crate::score::likes::preselect_loglikes;
use crate::stats::fmt_g;
use crate::{kaldi_log, kaldi_warn};

#[derive(Debug, Clone, Args)]
pub struct GselectToPostArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    /// If nonzero, posteriors below this threshold are pruned away and the rest renormalized.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub min_post: f32,
    /// Global GMM (FullGmm or DiagGmm).
    #[arg(value_name = "MODEL-IN")]
    pub model: String,
    /// Features (rspecifier).
    #[arg(value_name = "FEATURE-RSPECIFIER")]
    pub features: String,
    /// Gaussian selection (rspecifier), e.g. from `amtool gselect`.
    #[arg(value_name = "GSELECT-RSPECIFIER")]
    pub gselect: String,
    /// Posteriors (wspecifier).
    #[arg(value_name = "POST-WSPECIFIER")]
    pub output: String,
}

/// Run `amtool gselect-to-post`; returns the exit status.
pub fn run(args: GselectToPostArgs) -> i32 {
    match gselect_to_post(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn gselect_to_post(args: &GselectToPostArgs) -> Result<i32, String> {
    let model = read_global_model(
        &args.model,
        "posteriors over Gaussians need a global FullGmm or DiagGmm",
    )?;
    let mut reader =
        SequentialTableReader::<Matrix<f32>>::open(&args.features).map_err(|e| e.to_string())?;
    let mut gselect = RandomAccessTableReader::<Int32VectorVector>::open(&args.gselect)
        .map_err(|e| e.to_string())?;
    let mut writer = TableWriter::<Posterior>::open(&args.output).map_err(|e| e.to_string())?;
    let (mut num_done, mut num_err) = (0usize, 0usize);
    let (mut tot_loglike, mut tot_frames, mut tot_posts) = (0f64, 0f64, 0i64);
    'utts: while let Some((key, feats)) = reader.next_entry().map_err(|e| e.to_string())? {
        let frames = feats.rows();
        let Some(sel) = gselect_for(&mut gselect, &key, frames)? else {
            num_err += 1;
            continue;
        };
        if frames > 0 && !dim_matches(&key, feats.cols(), model.dim) {
            num_err += 1;
            continue;
        }
        let mut post = Vec::with_capacity(frames);
        let (mut like_this_file, mut posts) = (0f64, 0i64);
        for (t, ids) in sel.0.iter().enumerate() {
            if ids.is_empty() {
                kaldi_warn!("Empty Gaussian selection for utterance {key} at frame {t}");
                num_err += 1;
                continue 'utts;
            }
            let mut ll = preselect_loglikes(&model, 0, feats.row(t), ids)
                .map_err(|e| format!("{}: utterance {key}, frame {t}: {e}", args.gselect))?;
            match preselected_posteriors(&mut ll, ids, args.min_post) {
                Some((p, like)) => {
                    like_this_file += like as f64;
                    posts += p.len() as i64;
                    post.push(p);
                }
                None => {
                    kaldi_warn!(
                        "Skipping utterance {key} because bad posterior-sum encountered (NaN?)"
                    );
                    num_err += 1;
                    continue 'utts;
                }
            }
        }
        writer
            .write(&key, &Posterior(post))
            .map_err(|e| e.to_string())?;
        num_done += 1;
        tot_loglike += like_this_file;
        tot_frames += frames as f64;
        tot_posts += posts;
    }
    writer.close().map_err(|e| e.to_string())?;
    kaldi_log!("Done {num_done} files; {num_err} had errors.");
    kaldi_log!(
        "Overall loglike per frame is {} with {} entries per frame,  over {} frames",
        fmt_g(tot_loglike / tot_frames),
        fmt_g(tot_posts as f64 / tot_frames),
        fmt_g(tot_frames)
    );
    Ok(if num_done != 0 { 0 } else { 1 })
}
