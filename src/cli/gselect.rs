//! `amtool gselect [options] <model-in> <feature-rspecifier> <gselect-wspecifier>`:
//! Kaldi's gmm-gselect (DiagGmm) and fgmm-gselect (FullGmm). For each frame
//! the `--n` best Gaussians, best first; with `--gselect` the choice is
//! limited to (and refined from) an earlier selection.

use super::kaldi::dim_matches;
use clap::Args;

use amtool_formats::kaldi::holder::{Basic, Int32VectorVector};
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader, TableWriter};

use super::engine_args::{EngineArgs, GpusArg};
use super::global_gmm::{gaussians_to_keep, read_global_model};
use super::KaldiStandard;
use crate::model::CovKind;
use crate::score::gselect::select_top;
use crate::score::likes::{preselect_loglikes, UtteranceQueue};
use crate::stats::fmt_g;
use crate::{kaldi_log, kaldi_warn};

#[derive(Debug, Clone, Args)]
pub struct GselectArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub gpus: GpusArg,
    /// Number of Gaussians to keep per frame.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub n: i32,
    /// Rspecifier of earlier Gaussian selections to limit the search to.
    #[arg(long, value_name = "RSPECIFIER", default_value = "")]
    pub gselect: String,
    /// Wspecifier for the total log-likelihood of each utterance (float).
    #[arg(long, value_name = "WSPECIFIER", default_value = "")]
    pub write_likes: String,
    /// Global GMM: DiagGmm (gmm-gselect) or FullGmm (fgmm-gselect).
    #[arg(value_name = "MODEL-IN")]
    pub model: String,
    /// Features (rspecifier).
    #[arg(value_name = "FEATURE-RSPECIFIER")]
    pub features: String,
    /// Gaussian selection (wspecifier).
    #[arg(value_name = "GSELECT-WSPECIFIER")]
    pub output: String,
}

/// Run `amtool gselect`; returns the exit status.
pub fn run(args: GselectArgs) -> i32 {
    match gselect(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn gselect(args: &GselectArgs) -> Result<i32, String> {
    let model = read_global_model(
        &args.model,
        "Gaussian selection needs a global DiagGmm or FullGmm",
    )?;
    if args.n <= 0 {
        return Err(format!("--n={} must be positive", args.n));
    }
    let (num_gauss, n) = gaussians_to_keep(
        &model,
        &args.model,
        args.n as usize,
        "Note: this means the Gaussian selection is pointless.",
    )?;
    // With --gselect the preselected Gaussians are evaluated on the host: no engine.
    let engine = if args.gselect.is_empty() {
        let all = model.num_gaussians() as f64;
        Some(
            args.engine
                .engine_on(&args.gpus, &args.features, &model, all)?,
        )
    } else {
        None
    };
    let mut loaded = match &engine {
        Some(e) => Some(e.load(&model).map_err(|e| e.to_string())?),
        None => None,
    };
    let mut reader =
        SequentialTableReader::<Matrix<f32>>::open(&args.features).map_err(|e| e.to_string())?;
    // The selection and likelihood writers, then the preselection (Kaldi's order).
    let mut out = Outputs::open(args)?;
    let mut pre = if args.gselect.is_empty() {
        None
    } else {
        Some(
            RandomAccessTableReader::<Int32VectorVector>::open(&args.gselect)
                .map_err(|e| e.to_string())?,
        )
    };
    let mut num_err = 0usize;
    let mut warned_size = false;
    let mut queue = UtteranceQueue::default();
    loop {
        let next = reader.next_entry().map_err(|e| e.to_string())?;
        let end = next.is_none();
        if let Some((key, feats)) = next {
            let frames = feats.rows();
            if frames > 0 && !dim_matches(&key, feats.cols(), model.dim) {
                num_err += 1;
                continue;
            }
            let Some(pre) = pre.as_mut() else {
                if frames == 0 {
                    kaldi_warn!("Empty features for utterance {key}");
                    num_err += 1;
                    continue;
                }
                queue.push(key, feats);
                if queue.full(num_gauss) {
                    select_queued(&mut queue, &mut loaded, &model, n, &mut out)?;
                }
                continue;
            };
            // With --gselect: the preselected Gaussians, on the host, at once.
            let Some(p) = pre.get(&key).map_err(|e| e.to_string())? else {
                kaldi_warn!("No gselect information for utterance {key}");
                num_err += 1;
                continue;
            };
            if p.0.len() != frames {
                kaldi_warn!(
                    "Input gselect for utterance {key} has wrong size {} vs. {frames}",
                    p.0.len()
                );
                num_err += 1;
                continue;
            }
            let pre_sel = Preselected {
                model: &model,
                file: &args.gselect,
                key: &key,
                n,
            };
            let (sel, tot) = pre_sel.refine(&feats, &p.0, &mut warned_size)?;
            out.finish(&key, frames, sel, tot)?;
        }
        if end {
            select_queued(&mut queue, &mut loaded, &model, n, &mut out)?;
            break;
        }
    }
    let (num_done, tot_like, tot_t) = out.close()?;
    kaldi_log!(
        "Done {num_done} files, {num_err} with errors, average UBM log-likelihood is {} over {tot_t} frames.",
        fmt_g(tot_like / tot_t as f64)
    );
    Ok(if num_done != 0 { 0 } else { 1 })
}

/// The tables written and the running totals.
struct Outputs {
    writer: TableWriter<Int32VectorVector>,
    likes_writer: Option<TableWriter<Basic<f32>>>,
    num_done: usize,
    tot_like: f64,
    tot_t: i64,
}

impl Outputs {
    /// The selection table (and `--write-likes`'), opened.
    fn open(args: &GselectArgs) -> Result<Self, String> {
        let writer =
            TableWriter::<Int32VectorVector>::open(&args.output).map_err(|e| e.to_string())?;
        let likes_writer = if args.write_likes.is_empty() {
            None
        } else {
            Some(TableWriter::<Basic<f32>>::open(&args.write_likes).map_err(|e| e.to_string())?)
        };
        Ok(Outputs {
            writer,
            likes_writer,
            num_done: 0,
            tot_like: 0.0,
            tot_t: 0,
        })
    }

    /// Both tables closed; (files done, Σ log-likelihood, frames).
    fn close(self) -> Result<(usize, f64, i64), String> {
        self.writer.close().map_err(|e| e.to_string())?;
        if let Some(w) = self.likes_writer {
            w.close().map_err(|e| e.to_string())?;
        }
        Ok((self.num_done, self.tot_like, self.tot_t))
    }

    /// One utterance's selection, its log line every 10 files (Kaldi's), its likelihood.
    fn finish(
        &mut self,
        key: &str,
        frames: usize,
        sel: Vec<Vec<i32>>,
        like: f64,
    ) -> Result<(), String> {
        self.writer
            .write(key, &Int32VectorVector(sel))
            .map_err(|e| e.to_string())?;
        if self.num_done % 10 == 0 {
            kaldi_log!(
                "For {}'th file, average UBM likelihood over {frames} frames is {}",
                self.num_done,
                fmt_g(like / frames as f64)
            );
        }
        self.tot_t += frames as i64;
        self.tot_like += like;
        if let Some(w) = self.likes_writer.as_mut() {
            w.write(key, &Basic(like as f32))
                .map_err(|e| e.to_string())?;
        }
        self.num_done += 1;
        Ok(())
    }
}

/// `--gselect`: one utterance's preselected Gaussians refined on the host.
struct Preselected<'a> {
    model: &'a crate::model::AcousticModel,
    /// The preselection's rspecifier (for errors).
    file: &'a str,
    key: &'a str,
    n: usize,
}

impl Preselected<'_> {
    /// The `n` best of each frame's preselection `pre` and the utterance's
    /// log-likelihood over them. Warns once (`warned`) when a preselection
    /// is no larger than `n`.
    fn refine(
        &self,
        feats: &Matrix<f32>,
        pre: &[Vec<i32>],
        warned: &mut bool,
    ) -> Result<(Vec<Vec<i32>>, f64), String> {
        let (key, n) = (self.key, self.n);
        let mut sel = Vec::with_capacity(pre.len());
        let mut tot = 0f64;
        for (t, ids) in pre.iter().enumerate() {
            if ids.is_empty() {
                return Err(format!(
                    "{}: utterance {key}, frame {t}: empty Gaussian selection",
                    self.file
                ));
            }
            if ids.len() <= n && !*warned {
                *warned = true;
                kaldi_warn!(
                    "Preselect size is less or equal to than final size, doing nothing: {} < {n} [won't warn again]",
                    ids.len()
                );
            }
            let ll = preselect_loglikes(self.model, 0, feats.row(t), ids)
                .map_err(|e| format!("{}: utterance {key}, frame {t}: {e}", self.file))?;
            let (s, like) = select_top(&ll, Some(ids), n);
            sel.push(s);
            tot += like as f64;
        }
        Ok((sel, tot))
    }
}

/// Selects for every queued utterance from one engine call's log-likelihoods.
fn select_queued(
    queue: &mut UtteranceQueue,
    loaded: &mut Option<Box<dyn crate::engine::LoadedModel + '_>>,
    model: &crate::model::AcousticModel,
    n: usize,
    out: &mut Outputs,
) -> Result<(), String> {
    if queue.is_empty() {
        return Ok(());
    }
    let Some(l) = loaded.as_mut() else {
        return Err("internal error: no engine loaded".to_string());
    };
    let num_gauss = model.states[0].num_components();
    for (key, feats, ll) in queue
        .score_components(l.as_mut(), model, 0)
        .map_err(|e| e.to_string())?
    {
        let mut sel = Vec::with_capacity(feats.rows());
        let mut tot = 0f64;
        for (t, row) in ll.chunks(num_gauss).enumerate() {
            let (s, like) = if model.kind == CovKind::Full {
                // Kaldi's float full-covariance log-likelihoods are up to
                // ~0.05 from the engine's: re-evaluate the engine's best
                // (and any within FULL_MARGIN of the n-th) in Kaldi's
                // arithmetic and select among those, so near-ties fall
                // as Kaldi's do.
                let cand = candidates(row, n, FULL_MARGIN);
                let exact = preselect_loglikes(model, 0, feats.row(t), &cand)
                    .map_err(|e| format!("utterance {key}: {e}"))?;
                select_top(&exact, Some(&cand), n)
            } else {
                select_top(row, None, n)
            };
            sel.push(s);
            tot += like as f64;
        }
        // Kaldi's DiagGmm::GaussianSelection returns the total as float.
        let like = if model.kind == CovKind::Full {
            tot
        } else {
            tot as f32 as f64
        };
        out.finish(&key, feats.rows(), sel, like)?;
    }
    Ok(())
}

/// Log-likelihood margin (nats) within which full-covariance candidates are
/// re-evaluated: several times the largest engine-vs-Kaldi difference seen.
const FULL_MARGIN: f32 = 0.5;

/// The Gaussians whose log-likelihood is within `margin` of the `n`-th best
/// (at least the `n` best), in index order.
fn candidates(row: &[f32], n: usize, margin: f32) -> Vec<i32> {
    let mut sorted = row.to_vec();
    let k = row.len() - n;
    sorted.select_nth_unstable_by(k, |a, b| a.total_cmp(b));
    let thresh = sorted[k] - margin;
    row.iter()
        .enumerate()
        .filter(|(_, &l)| l >= thresh)
        .map(|(g, _)| g as i32)
        .collect()
}
