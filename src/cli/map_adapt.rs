//! `amtool map-adapt [options] <model-in> <feature-rspecifier> <posteriors-rspecifier> <map-am-wspecifier>`:
//! Kaldi's gmm-adapt-map. MAP estimates of the model's GMMs (`MapAmDiagGmmUpdate`)
//! per speaker (`--spk2utt`) or per utterance, written as a table of
//! AmDiagGmm objects keyed by speaker or utterance (the input of
//! gmm-latgen-map). Posteriors are over transition-ids, as ali-to-post writes
//! them. Statistics are gathered by the engine `--use-gpu` picks.
//!
//! Per-utterance problems are warned about and skipped as Kaldi does: a
//! missing posterior or a posterior/feature length mismatch counts as an
//! error; an utterance of spk2utt without features is skipped (not counted,
//! as in Kaldi), and a speaker with no data gets the unadapted model.

use super::kaldi::dim_matches;
use clap::Args;

use amtool_formats::kaldi::gmm::AmDiagGmm;
use amtool_formats::kaldi::holder::{Posterior, TokenVector};
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader, TableWriter};

use super::engine_args::EngineArgs;
use super::{kaldi, KaldiStandard};
use crate::engine::{FrameBatch, FrameTargets, LoadedModel};
use crate::model::AcousticModel;
use crate::score::map::{map_am_update, MapOptions};
use crate::score::model_file::ModelFile;
use crate::stats::{fmt_g, ModelAccumulators, UpdateFlags};
use crate::train::convert::{augment, parse_update_flags};
use crate::{kaldi_log, kaldi_warn};

#[derive(Debug, Clone, Args)]
pub struct MapAdaptArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Rspecifier for the speaker to utterance-list map (adapt per speaker).
    #[arg(long, value_name = "RSPECIFIER", default_value = "")]
    pub spk2utt: String,
    /// Accepted for Kaldi compatibility; the wspecifier's `t`/`b` decides, as in Kaldi.
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub binary: bool,
    /// Which GMM parameters are updated: a subset of mvw.
    #[arg(long, value_name = "FLAGS", default_value = "mw")]
    pub update_flags: String,
    /// Tau value for updating means.
    #[arg(long, value_name = "TAU", default_value_t = 10.0)]
    pub mean_tau: f32,
    /// Tau value for updating variances (note: only relevant if update-flags contains "v").
    #[arg(long, value_name = "TAU", default_value_t = 50.0)]
    pub variance_tau: f32,
    /// Tau value for updating weights.
    #[arg(long, value_name = "TAU", default_value_t = 10.0)]
    pub weight_tau: f32,
    /// Kaldi model (TransitionModel + AmDiagGmm).
    #[arg(value_name = "MODEL-IN")]
    pub model: String,
    /// Features (rspecifier).
    #[arg(value_name = "FEATURE-RSPECIFIER")]
    pub features: String,
    /// Posteriors over transition-ids (rspecifier).
    #[arg(value_name = "POSTERIORS-RSPECIFIER")]
    pub posteriors: String,
    /// Adapted models, one AmDiagGmm per speaker or utterance (wspecifier).
    #[arg(value_name = "MAP-AM-WSPECIFIER")]
    pub output: String,
}

/// Run `amtool map-adapt`; returns the exit status.
pub fn run(args: MapAdaptArgs) -> i32 {
    match map_adapt(&args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

/// The running totals gmm-adapt-map logs.
#[derive(Default)]
struct Totals {
    like: f64,
    like_change: f64,
    t: f64,
    done: usize,
    err: usize,
}

struct Adapter<'a> {
    mdl: &'a KaldiModel,
    model: &'a AcousticModel,
    loaded: Box<dyn LoadedModel + 'a>,
    flags: UpdateFlags,
    opts: MapOptions,
}

impl Adapter<'_> {
    /// Adds one utterance's statistics; `Ok(false)` (after a warning) when
    /// the utterance is unusable. Returns Kaldi's float (file_like, file_t).
    fn accumulate(
        &mut self,
        utt: &str,
        feats: &Matrix<f32>,
        post: &Posterior,
        acc: &mut ModelAccumulators,
    ) -> Result<Option<(f32, f32)>, String> {
        if post.0.len() != feats.rows() {
            kaldi_warn!(
                "Posteriors has wrong size {} vs. {} (utterance {utt})",
                post.0.len(),
                feats.rows()
            );
            return Ok(None);
        }
        if feats.rows() > 0 && !dim_matches(utt, feats.cols(), self.model.dim) {
            return Ok(None);
        }
        let mut offsets = Vec::with_capacity(post.0.len() + 1);
        let mut pairs = Vec::new();
        let mut file_t = 0f32;
        offsets.push(0);
        for (t, frame) in post.0.iter().enumerate() {
            for &(tid, w) in frame {
                let Some(pdf) = self.mdl.trans.transition_id_to_pdf(tid) else {
                    kaldi_warn!(
                        "Posterior of utterance {utt} at frame {t} has transition-id {tid}, \
                         which the model does not have ({} transition-ids)",
                        self.mdl.trans.num_transition_ids()
                    );
                    return Ok(None);
                };
                pairs.push((pdf as u32, w));
                file_t += w;
            }
            offsets.push(pairs.len());
        }
        if feats.rows() == 0 {
            return Ok(Some((0.0, 0.0)));
        }
        let batch = FrameBatch::new(feats.data(), self.model.dim);
        let weighted_like = self
            .loaded
            .accumulate(
                batch,
                FrameTargets::Weighted {
                    offsets: &offsets,
                    pairs: &pairs,
                },
                acc,
            )
            .map_err(|e| format!("utterance {utt}: {e}"))?;
        // Kaldi's file_like adds each pair's log-likelihood unweighted
        // (AccumulateForGmm returns it unscaled); with unit weights (ali-to-post)
        // that is the engine's weighted sum, otherwise score the frames again.
        if pairs.iter().all(|&(_, w)| w == 1.0) {
            return Ok(Some((weighted_like as f32, file_t)));
        }
        let ns = self.loaded.num_states();
        let mut ll = vec![0f32; batch.frames * ns];
        self.loaded
            .state_loglikes(batch, &mut ll)
            .map_err(|e| format!("utterance {utt}: {e}"))?;
        let mut file_like = 0f32;
        for t in 0..batch.frames {
            for &(pdf, _) in &pairs[offsets[t]..offsets[t + 1]] {
                file_like += ll[t * ns + pdf as usize];
            }
        }
        Ok(Some((file_like, file_t)))
    }

    /// MAP update from `acc`; returns the AmDiagGmm and (objf change, frames).
    fn update(&self, acc: &ModelAccumulators) -> Result<(AmDiagGmm, f32, f32), String> {
        let mut states = self.model.states.clone();
        let (obj, frames) = map_am_update(
            &self.opts,
            &acc.states,
            self.flags,
            &mut states,
            self.model.dim,
        )?;
        let am = AcousticModel {
            dim: self.model.dim,
            kind: self.model.kind,
            states,
        }
        .to_am_diag_gmm()?;
        Ok((am, obj, frames))
    }
}

fn map_adapt(args: &MapAdaptArgs) -> Result<i32, String> {
    let flags = parse_update_flags(&args.update_flags, "mvw").map_err(|e| e.to_string())?;
    let ModelFile::Am(mdl) = ModelFile::read(&args.model).map_err(|e| e.to_string())? else {
        return Err(format!(
            "{}: gmm-adapt-map needs a Kaldi acoustic model (TransitionModel + AmDiagGmm)",
            args.model
        ));
    };
    let model = AcousticModel::from_am_diag_gmm(&mdl.am);
    // Statistics of the posted states only: a state's Gaussians a frame.
    let per_state = model.num_gaussians() as f64 / model.num_states().max(1) as f64;
    let engine = args.engine.engine_for(&args.features, &model, per_state)?;
    let loaded = engine.load(&model).map_err(|e| e.to_string())?;
    let mut ad = Adapter {
        mdl: &mdl,
        model: &model,
        loaded,
        flags,
        opts: MapOptions {
            mean_tau: args.mean_tau,
            variance_tau: args.variance_tau,
            weight_tau: args.weight_tau,
        },
    };
    let acc_flags = augment(UpdateFlags {
        transitions: false,
        ..flags
    });
    let mut posts =
        RandomAccessTableReader::<Posterior>::open(&args.posteriors).map_err(|e| e.to_string())?;
    let mut writer = TableWriter::<AmDiagGmm>::open(&args.output).map_err(|e| e.to_string())?;
    let mut tot = Totals::default();
    let mut tot_t_check = 0f64;
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
                let Some(p) = posts.get(utt).map_err(|e| e.to_string())? else {
                    kaldi_warn!("Did not find posteriors for utterance {utt}");
                    tot.err += 1;
                    continue;
                };
                match ad.accumulate(utt, f, p, &mut acc)? {
                    Some((like, t)) => {
                        tot.like += like as f64;
                        tot.t += t as f64;
                        tot.done += 1;
                    }
                    None => tot.err += 1,
                }
            }
            let (am, obj, frames) = ad.update(&acc).map_err(|e| format!("speaker {spk}: {e}"))?;
            kaldi_log!(
                "For speaker {spk}, objective function change from MAP was {} over {} frames.",
                fmt_g((obj / frames) as f64),
                fmt_g(frames as f64)
            );
            tot.like_change += obj as f64;
            tot_t_check += frames as f64;
            writer.write(&spk, &am).map_err(|e| e.to_string())?;
        }
    } else {
        let mut feats = SequentialTableReader::<Matrix<f32>>::open(&args.features)
            .map_err(|e| e.to_string())?;
        while let Some((utt, f)) = feats.next_entry().map_err(|e| e.to_string())? {
            let mut acc = ModelAccumulators::zeros(&model, acc_flags);
            let Some(p) = posts.get(&utt).map_err(|e| e.to_string())? else {
                kaldi_warn!("Did not find aligned transcription for utterance {utt}");
                tot.err += 1;
                continue;
            };
            match ad.accumulate(&utt, &f, p, &mut acc)? {
                Some((like, t)) => {
                    tot.like += like as f64;
                    tot.t += t as f64;
                    tot.done += 1;
                }
                None => {
                    tot.err += 1;
                    continue;
                }
            }
            let (am, obj, frames) = ad
                .update(&acc)
                .map_err(|e| format!("utterance {utt}: {e}"))?;
            kaldi_log!(
                "For utterance {utt}, objective function change from MAP was {} over {} frames.",
                fmt_g((obj / frames) as f64),
                fmt_g(frames as f64)
            );
            tot.like_change += obj as f64;
            tot_t_check += frames as f64;
            writer.write(&utt, &am).map_err(|e| e.to_string())?;
        }
    }
    writer.close().map_err(|e| e.to_string())?;
    if (tot.t - tot_t_check).abs() > 1e-3 * tot.t.abs().max(1.0) {
        kaldi_warn!(
            "Posterior weights ({}) and MAP occupancies ({}) differ",
            fmt_g(tot.t),
            fmt_g(tot_t_check)
        );
    }
    kaldi_log!("Done {} files, {} with errors", tot.done, tot.err);
    kaldi_log!(
        "Overall acoustic likelihood was {} and change in likelihod per frame was {} over {} frames.",
        fmt_g(tot.like / tot.t),
        fmt_g(tot.like_change / tot.t),
        fmt_g(tot.t)
    );
    Ok(if tot.done != 0 { 0 } else { 1 })
}
