//! `estep_fullcov_gselect`: the statistics `fgmm-global-acc-stats
//! --gselect` gathers in an i-vector recipe — one full-covariance UBM
//! (default M = 2048, D = 60), each frame scored and accumulated against
//! its selected components only (default 20; T = 1,000,000 frames). Frames
//! and selections come from [`random::selected_frames`]: runs of frames
//! around a centre component, each frame's selection the components nearest
//! it among those near the centre, best first.

use super::json::Json;
use super::random::{self, Rng};
use super::{
    acc_errs, check_frames, estep_line, estep_ops, k_of, report_errs, time_median, BenchConfig,
};
use crate::engine::{reference, Engine, FrameBatch, FrameTargets, Selection};
use crate::model::CovKind;
use crate::stats::{ModelAccumulators, UpdateFlags};
use crate::Result;

/// Components selected a frame (the recipes' `--num-gselect`, 20 in
/// `sid/train_ivector_extractor.sh`; fewer when the UBM is smaller).
pub const SELECTED: usize = 20;

pub fn estep_fullcov_gselect(
    engine: &dyn Engine,
    cfg: &BenchConfig,
    emit: &mut dyn FnMut(&Json),
) -> Result<()> {
    let case = "estep_fullcov_gselect";
    let t = cfg.frames.unwrap_or(1_000_000);
    let d = cfg.dim.unwrap_or(60);
    let m = cfg.gaussians.unwrap_or(2048);
    let kind = CovKind::Full;
    let mut rng = Rng::new(cfg.seed.wrapping_add(5));
    let model = random::model(&mut rng, &[m], d, kind);
    let n = SELECTED.min(m);
    let (data, offsets, comps) = random::selected_frames(&mut rng, &model, t, n);
    let feats = FrameBatch::new(&data, d);
    let targets = |frames: usize| {
        FrameTargets::Selected(Selection {
            offsets: &offsets[..=frames],
            components: &comps[..offsets[frames]],
            weights: None,
        })
    };
    let mut lm = engine.load(&model)?;
    let timing = time_median(cfg.reps, || {
        let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
        lm.accumulate(feats, targets(t), &mut acc)?;
        Ok(lm.last_kernel_seconds())
    })?;
    let check = check_frames(cfg, t, n, k_of(d, kind));
    let sub = FrameBatch::new(&data[..check * d], d);
    let mut out = ModelAccumulators::zeros(&model, UpdateFlags::default());
    lm.accumulate(sub, targets(check), &mut out)?;
    let r = reference::accumulate(&model, sub, targets(check), UpdateFlags::default());
    let err = report_errs(case, &acc_errs(&out, &r));
    let ops = estep_ops(d, kind) * comps.len() as f64;
    let shape = Json::new()
        .str("case", case)
        .int("T", t)
        .int("D", d)
        .int("M", m)
        .int("selected", n);
    emit(&estep_line(engine, &timing, shape, ops, t, err));
    Ok(())
}
