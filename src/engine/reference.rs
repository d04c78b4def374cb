//! A naive float64 reference for what every engine computes: the plain
//! formulas, one frame and one Gaussian at a time, no tiling, no f32 anywhere
//! after reading the f32 parameters and features. Tests and `amtool bench`
//! measure engines against it; nothing else should use it (it is slow).

use super::{FrameBatch, FrameTargets};
use crate::model::{AcousticModel, CovKind, StateGmm};
use crate::stats::{ModelAccumulators, UpdateFlags};

/// f64 log-likelihood of each component of `st` (log weight included) at `x`.
pub fn component_loglikes(model: &AcousticModel, st: &StateGmm, x: &[f32]) -> Vec<f64> {
    (0..st.num_components())
        .map(|g| component_loglike(model, st, g, x))
        .collect()
}

/// f64 log-likelihood of component `g` of `st` (log weight included) at `x`.
pub fn component_loglike(model: &AcousticModel, st: &StateGmm, g: usize, x: &[f32]) -> f64 {
    let d = model.dim;
    let v = model.inv_var_len();
    let mut ll = st.gconsts[g] as f64;
    let mi = &st.means_invvars[g * d..(g + 1) * d];
    let iv = &st.inv_vars[g * v..(g + 1) * v];
    for i in 0..d {
        ll += x[i] as f64 * mi[i] as f64;
    }
    match model.kind {
        CovKind::Diagonal => {
            for i in 0..d {
                ll -= 0.5 * x[i] as f64 * x[i] as f64 * iv[i] as f64;
            }
        }
        CovKind::Full => {
            for i in 0..d {
                for j in 0..=i {
                    let pij = iv[i * (i + 1) / 2 + j] as f64;
                    let f = if i == j { 0.5 } else { 1.0 };
                    ll -= f * x[i] as f64 * x[j] as f64 * pij;
                }
            }
        }
    }
    ll
}

/// log Σ exp, subtracting the max; −∞ for no terms.
pub fn log_sum_exp(v: &[f64]) -> f64 {
    let mx = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if mx == f64::NEG_INFINITY {
        return mx;
    }
    mx + v.iter().map(|&a| (a - mx).exp()).sum::<f64>().ln()
}

/// `frames × states` log-likelihoods.
pub fn state_loglikes(model: &AcousticModel, feats: FrameBatch<'_>) -> Vec<f64> {
    let mut out = Vec::with_capacity(feats.frames * model.num_states());
    for t in 0..feats.frames {
        let x = feats.row(t);
        for st in &model.states {
            out.push(log_sum_exp(&component_loglikes(model, st, x)));
        }
    }
    out
}

/// EM statistics of `feats` for `targets`, in f64 throughout. Returns the
/// accumulators (total_like and total_frames filled in).
pub fn accumulate(
    model: &AcousticModel,
    feats: FrameBatch<'_>,
    targets: FrameTargets<'_>,
    flags: UpdateFlags,
) -> ModelAccumulators {
    let mut acc = ModelAccumulators::zeros(model, flags);
    for t in 0..feats.frames {
        let x = feats.row(t);
        // (state, weight, the components the softmax runs over).
        let every = |s: u32| (0..model.states[s as usize].num_components() as u32).collect();
        let targets: Vec<(u32, f32, Vec<u32>)> = match targets {
            FrameTargets::Global => vec![(0, 1.0, every(0))],
            FrameTargets::Aligned(ali) => vec![(ali[t], 1.0, every(ali[t]))],
            FrameTargets::Weighted { offsets, pairs } => pairs[offsets[t]..offsets[t + 1]]
                .iter()
                .map(|&(s, w)| (s, w, every(s)))
                .collect(),
            FrameTargets::Selected(sel) if sel.weight(t) != 0.0 => {
                vec![(0, sel.weight(t), sel.of(t).to_vec())]
            }
            FrameTargets::Selected(_) => Vec::new(),
        };
        for (s, w, comps) in targets {
            let w = w as f64;
            let st = &model.states[s as usize];
            let lls: Vec<f64> = comps
                .iter()
                .map(|&g| component_loglike(model, st, g as usize, x))
                .collect();
            let tot = log_sum_exp(&lls);
            acc.total_like += w * tot;
            acc.total_frames += w;
            let a = &mut acc.states[s as usize];
            for (&g, &ll) in comps.iter().zip(&lls) {
                add_component_stats(model, a, g as usize, w * (ll - tot).exp(), x);
            }
        }
    }
    acc
}

/// `post` × [1, x, x² or xxᵀ] of frame `x` into component `g` of `a`, in f64.
fn add_component_stats(
    model: &AcousticModel,
    a: &mut crate::stats::GmmAccumulator,
    g: usize,
    post: f64,
    x: &[f32],
) {
    let d = model.dim;
    a.occupancy[g] += post;
    if a.mean_acc.is_empty() {
        return;
    }
    for i in 0..d {
        a.mean_acc[g * d + i] += post * x[i] as f64;
    }
    if a.var_acc.is_empty() {
        return;
    }
    match model.kind {
        CovKind::Diagonal => {
            for i in 0..d {
                a.var_acc[g * d + i] += post * x[i] as f64 * x[i] as f64;
            }
        }
        CovKind::Full => {
            let v = d * (d + 1) / 2;
            for i in 0..d {
                for j in 0..=i {
                    a.var_acc[g * v + i * (i + 1) / 2 + j] += post * x[i] as f64 * x[j] as f64;
                }
            }
        }
    }
}

/// ‖out − ref‖ / ‖ref‖ (0 when both are empty or `ref` is all zeros and
/// `out` equals it; ∞ when an output is not finite, so no bound passes it).
pub fn rel_err<A: Copy + Into<f64>>(out: &[A], reference: &[f64]) -> f64 {
    assert_eq!(out.len(), reference.len(), "rel_err: lengths differ");
    let (mut num, mut den) = (0f64, 0f64);
    for (&o, &r) in out.iter().zip(reference) {
        let o: f64 = o.into();
        if !o.is_finite() {
            return f64::INFINITY;
        }
        num += (o - r) * (o - r);
        den += r * r;
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// The largest [`rel_err`] over every statistic (occupancies, means sums,
/// variance sums, each over all states) and the total log-likelihood.
pub fn acc_rel_err(out: &ModelAccumulators, reference: &ModelAccumulators) -> f64 {
    let flat = |a: &ModelAccumulators,
                f: fn(&crate::stats::GmmAccumulator) -> &Vec<f64>|
     -> Vec<f64> { a.states.iter().flat_map(|s| f(s).iter().copied()).collect() };
    let mut worst = 0f64;
    for f in [
        (|s: &crate::stats::GmmAccumulator| &s.occupancy)
            as fn(&crate::stats::GmmAccumulator) -> &Vec<f64>,
        |s| &s.mean_acc,
        |s| &s.var_acc,
    ] {
        worst = worst.max(rel_err(&flat(out, f), &flat(reference, f)));
    }
    worst = worst.max(rel_err(&[out.total_like], &[reference.total_like]));
    worst.max(rel_err(&[out.total_frames], &[reference.total_frames]))
}
