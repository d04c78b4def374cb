//! Re-estimation from accumulated statistics, as Kaldi's `gmm-est`,
//! `gmm-global-est` and `fgmm-global-est` do it: transition update, MLE GMM
//! update, then mixing down/up by occupancy. Returns the messages Kaldi logs,
//! in Kaldi's order and words (the CLI prints them), so recipes that grep
//! "objective function improvement" or "avg like per frame" see the same
//! lines.

use amtool_formats::kaldi::accs::{AccumAmDiagGmm, AccumDiagGmm, AccumFullGmm, AmAccs};
use amtool_formats::kaldi::gmm::{DiagGmm, FullGmm};
use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::transition::TransitionModel;

use crate::model::StateGmm;
use crate::stats::mixture_split::{
    merge_by_count, split_by_count, split_diag, split_full, KaldiRng,
};
use crate::stats::mle_diag::{mle_am_diag_update, mle_diag_gmm_update, MleDiagOptions};
use crate::stats::mle_full::{mle_full_gmm_update, MleFullOptions};
use crate::stats::transition::{mle_update, MleTransitionOptions, TransitionLayout};
use crate::stats::ModelAccumulators;
use crate::stats::{fmt_g, UpdateFlags};
use crate::train::convert::{
    diag_from_state, flags_from_kaldi, full_from_state, gmm_acc_from_diag, gmm_acc_from_full,
    model_accs_from_am, state_from_diag, state_from_full,
};
use crate::{Error, Result};

/// A line Kaldi would log.
#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    Log(String),
    Warn(String),
}

/// gmm-est's options (defaults as Kaldi's).
#[derive(Debug, Clone, PartialEq)]
pub struct AmEstOptions {
    pub gmm: MleDiagOptions,
    pub transitions: MleTransitionOptions,
    pub update_flags: UpdateFlags,
    /// `--mix-up` (0: none).
    pub mix_up: usize,
    /// `--mix-down` (0: none).
    pub mix_down: usize,
    /// `--perturb-factor` (0.01).
    pub perturb_factor: f32,
    /// `--power` (0.2).
    pub power: f32,
    /// `--min-count` (20).
    pub min_count: f32,
}

impl Default for AmEstOptions {
    fn default() -> Self {
        AmEstOptions {
            gmm: MleDiagOptions::default(),
            transitions: MleTransitionOptions::default(),
            update_flags: UpdateFlags::default(),
            mix_up: 0,
            mix_down: 0,
            perturb_factor: 0.01,
            power: 0.2,
            min_count: 20.0,
        }
    }
}

/// Per transition state, its transition ids in index order (Kaldi's
/// `PairToTransitionId`), plus the pdfs `--share-for-pdfs` groups by.
fn transition_layout(tm: &TransitionModel) -> Result<(Vec<Vec<usize>>, Vec<i32>, Vec<i32>)> {
    let n = tm.num_transition_states();
    let mut tids = Vec::with_capacity(n);
    for s in 1..=n as i32 {
        let k = tm
            .num_transition_indices(s)
            .ok_or_else(|| Error::Mismatch(format!("transition state {s} out of range")))?;
        let mut v = Vec::with_capacity(k as usize);
        for i in 0..k {
            let t = tm.pair_to_transition_id(s, i).ok_or_else(|| {
                Error::Mismatch(format!(
                    "transition state {s} index {i} has no transition id"
                ))
            })?;
            v.push(t as usize);
        }
        tids.push(v);
    }
    let fwd = tm.tuples().iter().map(|t| t.forward_pdf).collect();
    let sl = tm.tuples().iter().map(|t| t.self_loop_pdf).collect();
    Ok((tids, fwd, sl))
}

fn f(x: f32) -> String {
    fmt_g(x as f64)
}

/// `gmm-est`: updates `model` in place from `accs`. Returns the log lines and
/// the pdf occupancies (Kaldi's `--write-occs` vector, float).
pub fn est_am(
    model: &mut KaldiModel,
    accs: &AmAccs,
    opts: &AmEstOptions,
) -> Result<(Vec<Msg>, Vec<f32>)> {
    check_accs_fit(model, &accs.gmm)?;
    let mut msgs = Vec::new();
    if opts.update_flags.transitions {
        update_transitions(model, &accs.transition_accs, &opts.transitions, &mut msgs)?;
    }
    let dim = model.am.dim;
    let maccs = model_accs_from_am(&accs.gmm, dim);
    let mut states = update_gmms(model, &accs.gmm, &maccs, opts, &mut msgs)?;
    let pdf_occs: Vec<f32> = maccs
        .states
        .iter()
        .map(|a| crate::stats::mle_diag::kaldi_vector_sum_f64(&a.occupancy) as f32)
        .collect();
    if opts.mix_down != 0 {
        mix_down(&mut states, dim, &pdf_occs, opts, &mut msgs)?;
    }
    if opts.mix_up != 0 {
        mix_up(&mut states, dim, &pdf_occs, opts, &mut msgs)?;
    }
    model.am.pdfs = states.iter().map(|s| diag_from_state(s, dim)).collect();
    Ok((msgs, pdf_occs))
}

/// The accumulators are of `model`'s shape: as many pdfs, of its
/// dimension, each with its number of Gaussians.
fn check_accs_fit(model: &KaldiModel, gmm: &AccumAmDiagGmm) -> Result<()> {
    let npdfs = model.am.pdfs.len();
    if gmm.pdfs.len() != npdfs {
        return Err(Error::Mismatch(format!(
            "the accumulators have {} pdfs but the model has {npdfs}",
            gmm.pdfs.len()
        )));
    }
    if let Some(p) = gmm.pdfs.iter().position(|a| a.dim != model.am.dim) {
        return Err(Error::Mismatch(format!(
            "dimension of the accumulators ({}, pdf {p}) does not match the model's ({})",
            gmm.pdfs[p].dim, model.am.dim
        )));
    }
    if let Some(p) = (0..npdfs).find(|&p| gmm.pdfs[p].num_comp != model.am.pdfs[p].num_gauss()) {
        return Err(Error::Mismatch(format!(
            "pdf {p}: the accumulators have {} Gaussians but the model has {} (accumulators from a different model?)",
            gmm.pdfs[p].num_comp,
            model.am.pdfs[p].num_gauss()
        )));
    }
    Ok(())
}

/// `TransitionModel::MleUpdate` (`MleUpdateShared` with `--share-for-pdfs`) of
/// `model`'s transition probabilities, with Kaldi's log lines.
fn update_transitions(
    model: &mut KaldiModel,
    transition_accs: &[f64],
    opts: &MleTransitionOptions,
    msgs: &mut Vec<Msg>,
) -> Result<()> {
    if transition_accs.len() != model.trans.num_transition_ids() + 1 {
        return Err(Error::Mismatch(format!(
            "the transition accumulators have {} entries but the model has {} transition ids (+1)",
            transition_accs.len(),
            model.trans.num_transition_ids()
        )));
    }
    let (tids, fwd, sl) = transition_layout(&model.trans)?;
    let is_hmm = model.trans.topology().is_hmm();
    let layout = TransitionLayout {
        tstate_tids: &tids,
        forward_pdf: &fwd,
        self_loop_pdf: if is_hmm { None } else { Some(&sl) },
    };
    let r = mle_update(model.trans.log_probs_mut(), transition_accs, &layout, opts)
        .map_err(Error::Mismatch)?;
    let per_frame = r.objf_impr / r.count;
    if opts.share_for_pdfs {
        msgs.push(Msg::Log(format!(
            "Objf change is {} per frame over {} frames; {} probabilities floored, {} pdf-ids skipped due to insuffient data.",
            f(per_frame), f(r.count), r.num_floored, r.num_skipped
        )));
    } else {
        msgs.push(Msg::Log(format!(
            "TransitionModel::Update, objf change is {} per frame over {} frames. ",
            f(per_frame),
            f(r.count)
        )));
        msgs.push(Msg::Log(format!(
            "{} probabilities floored, {} out of {} transition-states skipped due to insuffient data (it is normal to have some skipped.)",
            r.num_floored, r.num_skipped, r.num_tstates
        )));
    }
    msgs.push(Msg::Log(format!(
        "Transition model update: Overall {} log-like improvement per frame over {} frames.",
        f(per_frame),
        f(r.count)
    )));
    Ok(())
}

/// `MleAmDiagGmmUpdate` of every pdf from `maccs` (the accumulators `gmm`
/// in the engine's form), with Kaldi's log lines; the updated pdfs.
fn update_gmms(
    model: &KaldiModel,
    gmm: &AccumAmDiagGmm,
    maccs: &ModelAccumulators,
    opts: &AmEstOptions,
    msgs: &mut Vec<Msg>,
) -> Result<Vec<StateGmm>> {
    let flags = UpdateFlags {
        transitions: false,
        ..opts.update_flags
    };
    check_flags(flags, maccs.flags)?;
    let dim = model.am.dim;
    let mut states: Vec<_> = model.am.pdfs.iter().map(state_from_diag).collect();
    let r = mle_am_diag_update(
        &opts.gmm,
        &maccs.states,
        maccs.flags,
        flags,
        dim,
        &mut states,
    )
    .map_err(Error::Mismatch)?;
    msgs.extend(r.warnings.iter().cloned().map(Msg::Warn));
    msgs.push(Msg::Log(format!(
        "{} variance elements floored in {} Gaussians, out of {}",
        r.floored_elements, r.floored_gaussians, r.num_gaussians
    )));
    if opts.gmm.remove_low_count_gaussians {
        msgs.push(Msg::Log(format!(
            "Removed {} Gaussians due to counts < --min-gaussian-occupancy={} and --remove-low-count-gaussians=true",
            r.removed_gaussians,
            f(opts.gmm.min_gaussian_occupancy)
        )));
    }
    msgs.push(Msg::Log(format!(
        "GMM update: Overall {} objective function improvement per frame over {} frames",
        f(r.obj_change / r.count),
        f(r.count)
    )));
    let (tot_like, tot_t) = (gmm.total_like as f32, gmm.total_frames as f32);
    msgs.push(Msg::Log(format!(
        "GMM update: Overall avg like per frame = {} over {} frames.",
        f(tot_like / tot_t),
        f(tot_t)
    )));
    Ok(states)
}

/// `--mix-down`: `AmDiagGmm::MergeByCount`, with Kaldi's log line.
fn mix_down(
    states: &mut [StateGmm],
    dim: usize,
    pdf_occs: &[f32],
    opts: &AmEstOptions,
    msgs: &mut Vec<Msg>,
) -> Result<()> {
    let rr = merge_by_count(
        states,
        dim,
        pdf_occs,
        opts.mix_down,
        opts.power,
        opts.min_count,
    )
    .map_err(Error::Mismatch)?;
    if let Some(w) = rr.warning {
        msgs.push(Msg::Warn(format!("{w}\n")));
    }
    msgs.push(Msg::Log(format!(
        "Merged {} states with target = {}, power = {} and min_count = {}, merged from {} to {}",
        states.len(),
        opts.mix_down,
        f(opts.power),
        f(opts.min_count),
        rr.gauss_before,
        rr.gauss_after
    )));
    Ok(())
}

/// `--mix-up`: `AmDiagGmm::SplitByCount` (Kaldi's random perturbation,
/// seeded as Kaldi seeds it), with Kaldi's log line.
fn mix_up(
    states: &mut [StateGmm],
    dim: usize,
    pdf_occs: &[f32],
    opts: &AmEstOptions,
    msgs: &mut Vec<Msg>,
) -> Result<()> {
    let mut rng = KaldiRng::default();
    let rr = split_by_count(
        states,
        dim,
        pdf_occs,
        opts.mix_up,
        opts.perturb_factor,
        opts.power,
        opts.min_count,
        &mut rng,
    )
    .map_err(Error::Mismatch)?;
    if let Some(w) = rr.warning {
        msgs.push(Msg::Warn(format!("{w}\n")));
    }
    msgs.push(Msg::Log(format!(
        "Split {} states with target = {}, power = {}, perturb_factor = {} and min_count = {}, split #Gauss from {} to {}",
        states.len(), opts.mix_up, f(opts.power), f(opts.perturb_factor), f(opts.min_count), rr.gauss_before, rr.gauss_after
    )));
    Ok(())
}

fn check_flags(flags: UpdateFlags, acc_flags: UpdateFlags) -> Result<()> {
    if (flags.means && !acc_flags.means) || (flags.variances && !acc_flags.variances) {
        return Err(Error::Mismatch(
            "Flags in argument do not match the active accumulators (--update-flags asks for statistics the accumulators do not have)".into(),
        ));
    }
    Ok(())
}

/// Options of gmm-global-est / fgmm-global-est beyond the MLE options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlobalEstOptions {
    pub update_flags: UpdateFlags,
    pub mix_up: usize,
    pub perturb_factor: f32,
}

impl Default for GlobalEstOptions {
    fn default() -> Self {
        GlobalEstOptions {
            update_flags: UpdateFlags {
                transitions: false,
                ..UpdateFlags::default()
            },
            mix_up: 0,
            perturb_factor: 0.01,
        }
    }
}

fn check_global_shape(dim: usize, n: usize, acc_dim: usize, acc_n: usize) -> Result<()> {
    if acc_dim != dim {
        return Err(Error::Mismatch(format!(
            "dimension of the accumulators ({acc_dim}) does not match the GMM's ({dim})"
        )));
    }
    if acc_n != n {
        return Err(Error::Mismatch(format!(
            "the accumulators have {acc_n} Gaussians but the GMM has {n}"
        )));
    }
    Ok(())
}

/// `gmm-global-est`.
pub fn est_diag(
    gmm: &mut DiagGmm,
    accs: &AccumDiagGmm,
    mle: &MleDiagOptions,
    opts: &GlobalEstOptions,
) -> Result<Vec<Msg>> {
    check_global_shape(gmm.dim, gmm.num_gauss(), accs.dim, accs.num_comp)?;
    let acc_flags = flags_from_kaldi(accs.flags);
    check_flags(opts.update_flags, acc_flags)?;
    let mut s = state_from_diag(gmm);
    let r = mle_diag_gmm_update(
        mle,
        &gmm_acc_from_diag(accs),
        acc_flags,
        opts.update_flags,
        gmm.dim,
        &mut s,
    )
    .map_err(Error::Mismatch)?;
    let mut msgs: Vec<Msg> = r.warnings.iter().cloned().map(Msg::Warn).collect();
    msgs.push(Msg::Log(format!(
        "Overall objective function improvement is {} per frame over {} frames.",
        f(r.obj_change / r.count),
        f(r.count)
    )));
    if opts.mix_up != 0 {
        if opts.mix_up < s.num_components() {
            return Err(Error::Mismatch(format!(
                "Cannot split from {} to {} components",
                s.num_components(),
                opts.mix_up
            )));
        }
        if opts.mix_up == s.num_components() {
            msgs.push(Msg::Warn(
                "Already have the target # of Gaussians. Doing nothing.".into(),
            ));
        } else {
            split_diag(
                &mut s,
                gmm.dim,
                opts.mix_up,
                opts.perturb_factor,
                &mut KaldiRng::default(),
            )
            .map_err(Error::Mismatch)?;
        }
    }
    *gmm = diag_from_state(&s, gmm.dim);
    Ok(msgs)
}

/// `fgmm-global-est`.
pub fn est_full(
    gmm: &mut FullGmm,
    accs: &AccumFullGmm,
    mle: &MleFullOptions,
    opts: &GlobalEstOptions,
) -> Result<Vec<Msg>> {
    check_global_shape(gmm.dim, gmm.num_gauss(), accs.dim, accs.num_comp)?;
    let acc_flags = flags_from_kaldi(accs.flags);
    check_flags(opts.update_flags, acc_flags)?;
    let mut s = state_from_full(gmm);
    let r = mle_full_gmm_update(
        mle,
        &gmm_acc_from_full(accs),
        acc_flags,
        opts.update_flags,
        gmm.dim,
        &mut s,
    )
    .map_err(Error::Mismatch)?;
    let mut msgs: Vec<Msg> = r.warnings.iter().cloned().map(Msg::Warn).collect();
    msgs.push(Msg::Log(format!(
        "Overall objective function improvement is {} per frame over {} frames.",
        f(r.obj_change / r.count),
        f(r.count)
    )));
    if opts.mix_up != 0 {
        let n = s.num_components();
        if opts.mix_up <= n {
            // Kaldi's `FullGmm::Split` only warns here (unlike the diagonal
            // one): after low-count removal the target may be at or below
            // what is left, and the updated GMM is written as it is.
            msgs.push(Msg::Warn(format!(
                "Cannot split from {n} to {} components",
                opts.mix_up
            )));
        } else {
            split_full(
                &mut s,
                gmm.dim,
                opts.mix_up,
                opts.perturb_factor,
                &mut KaldiRng::default(),
            )
            .map_err(Error::Mismatch)?;
        }
    }
    *gmm = full_from_state(&s, gmm.dim);
    Ok(msgs)
}
