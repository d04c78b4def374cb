//! `amtool global-get-post [options] <model-in> <feature-rspecifier> <post-wspecifier>`:
//! Kaldi's gmm-global-get-post. Top-`--n` Gaussian posteriors per frame from
//! a global GMM (DiagGmm as Kaldi's tool; a FullGmm works the same way),
//! pruned below `--min-post` and renormalised (`VectorToPosteriorEntry`).

use super::kaldi::dim_matches;
use clap::Args;

use amtool_formats::kaldi::holder::Posterior;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::{SequentialTableReader, TableWriter};

use super::engine_args::EngineArgs;
use super::global_gmm::{gaussians_to_keep, read_global_model};
use super::KaldiStandard;
use crate::score::gselect::posterior_entry;
use crate::score::likes::UtteranceQueue;
use crate::stats::fmt_g;
use crate::{kaldi_log, kaldi_warn};

#[derive(Debug, Clone, Args)]
pub struct GetPostArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Number of Gaussians to keep per frame.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub n: i32,
    /// Minimum posterior to output before pruning and renormalizing (e.g. 0.01).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub min_post: f32,
    /// Global GMM (DiagGmm or FullGmm).
    #[arg(value_name = "MODEL-IN")]
    pub model: String,
    /// Features (rspecifier).
    #[arg(value_name = "FEATURE-RSPECIFIER")]
    pub features: String,
    /// Posteriors (wspecifier).
    #[arg(value_name = "POST-WSPECIFIER")]
    pub output: String,
}

/// Run `amtool global-get-post`; returns the exit status.
pub fn run(args: GetPostArgs) -> i32 {
    match get_post(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn get_post(args: &GetPostArgs) -> Result<i32, String> {
    let model = read_global_model(
        &args.model,
        "posteriors over Gaussians need a global DiagGmm or FullGmm",
    )?;
    if args.n <= 0 {
        return Err(format!("--n={} must be positive", args.n));
    }
    if !(args.min_post >= 0.0 && args.min_post < 1.0) {
        return Err(format!("--min-post={} must be in [0, 1)", args.min_post));
    }
    let (num_gauss, n) = gaussians_to_keep(&model, &args.model, args.n as usize, "")?;
    let all = model.num_gaussians() as f64;
    let engine = args.engine.engine_for(&args.features, &model, all)?;
    let mut loaded = engine.load(&model).map_err(|e| e.to_string())?;
    let mut reader =
        SequentialTableReader::<Matrix<f32>>::open(&args.features).map_err(|e| e.to_string())?;
    let mut writer = TableWriter::<Posterior>::open(&args.output).map_err(|e| e.to_string())?;
    let (mut num_done, mut num_err) = (0usize, 0usize);
    let (mut tot_like, mut tot_t) = (0f64, 0i64);
    let mut queue = UtteranceQueue::default();
    loop {
        let next = reader.next_entry().map_err(|e| e.to_string())?;
        let end = next.is_none();
        if let Some((key, feats)) = next {
            if feats.rows() == 0 {
                kaldi_warn!("Empty features for utterance {key}");
                num_err += 1;
                continue;
            }
            if !dim_matches(&key, feats.cols(), model.dim) {
                num_err += 1;
                continue;
            }
            queue.push(key, feats);
        }
        if !(end || queue.full(num_gauss)) {
            continue;
        }
        for (key, feats, ll) in queue
            .score_components(loaded.as_mut(), &model, 0)
            .map_err(|e| e.to_string())?
        {
            let mut post = Vec::with_capacity(feats.rows());
            let mut like_this_file = 0f64;
            for row in ll.chunks(num_gauss) {
                let (p, like) = posterior_entry(row, n, args.min_post);
                post.push(p);
                like_this_file += like as f64;
            }
            tot_like += like_this_file;
            tot_t += feats.rows() as i64;
            writer
                .write(&key, &Posterior(post))
                .map_err(|e| e.to_string())?;
            num_done += 1;
        }
        if end {
            break;
        }
    }
    writer.close().map_err(|e| e.to_string())?;
    kaldi_log!(
        "Done {num_done} files, {num_err} with errors, average UBM log-likelihood is {} over {tot_t} frames.",
        fmt_g(tot_like / tot_t as f64)
    );
    Ok(if num_done != 0 { 0 } else { 1 })
}
