//! HTK's own output probabilities (HModel's `IDOutP`/`FOutP`, HFB's
//! `ShStrP`): per Gaussian −½(gconst + (x−μ)ᵀΣ⁻¹(x−μ)) summed in float in
//! HTK's order, mixtures combined with `LAdd`, results stored as float.
//!
//! The engines compute the same quantity in the expanded form
//! gconst′ + x·Σ⁻¹μ − ½xᵀΣ⁻¹x, which for un-normalised HTK features (c0 near
//! 70) cancels large terms in float and moves HERest's printed average log
//! probability in its 5th significant digit; this scorer reproduces it.

use amtool_formats::htk::mmf::{Covariance, HmmSet, MINMIX};

use super::fb::{ladd, LZERO};
use crate::model::htk::HtkModel;

/// The log mixture weights HERest scores with, per `states` entry and
/// mixture. HModel's `ConvLogWt` (3.4.1) walks the mixtures with
/// `GoNextMix(.., FALSE)`, which visits a shared Gaussian (`~m`) only once:
/// the weight of its second and later uses is left as a linear value and then
/// used as a log weight. HERest's numbers carry that, so we reproduce it.
pub fn log_weights(set: &HmmSet) -> Vec<Vec<f32>> {
    let mut lw: Vec<Vec<f32>> = set
        .states
        .iter()
        .map(|s| vec![LZERO as f32; s.streams[0].mixtures.len()])
        .collect();
    let mut state_seen = vec![false; set.states.len()];
    let mut pdf_seen = vec![false; set.pdfs.len()];
    for (h, _) in super::update::scan_order(set) {
        for &s in &set.hmms[h].states {
            if std::mem::replace(&mut state_seen[s], true) {
                continue;
            }
            for (mi, mx) in set.states[s].streams[0].mixtures.iter().enumerate() {
                lw[s][mi] = if std::mem::replace(&mut pdf_seen[mx.pdf], true) {
                    mx.weight
                } else if mx.weight < MINMIX {
                    LZERO as f32
                } else {
                    (mx.weight as f64).ln() as f32
                };
            }
        }
    }
    lw
}

/// One Gaussian's log density as HTK computes it (float).
fn gauss(set: &HmmSet, pdf: usize, x: &[f32], inv_var: &[Vec<f32>]) -> f32 {
    let p = &set.pdfs[pdf];
    let mean = &set.means[p.mean];
    let g = p.gconst.unwrap_or(0.0);
    match p.cov {
        Covariance::Diag(v) => {
            let iv = &inv_var[v];
            let mut sum = g;
            for k in 0..mean.len() {
                let xmm = x[k] - mean[k];
                sum += xmm * xmm * iv[k];
            }
            (-0.5 * sum as f64) as f32
        }
        Covariance::InvCovar(c) => {
            let m = &set.covars[c];
            let n = mean.len();
            let xmm: Vec<f32> = (0..n).map(|k| x[k] - mean[k]).collect();
            let mut sum = 0f32;
            for i in 1..n {
                for j in 0..i {
                    sum += xmm[i] * xmm[j] * m.get(i, j);
                }
            }
            sum *= 2.0;
            for i in 0..n {
                sum += xmm[i] * xmm[i] * m.get(i, i);
            }
            (-0.5 * (g + sum) as f64) as f32
        }
        _ => LZERO as f32,
    }
}

/// Precomputed inverse variances (HERest's `ConvDiagC`), per `variances` entry.
pub fn inverse_variances(set: &HmmSet) -> Vec<Vec<f32>> {
    set.variances
        .iter()
        .map(|v| v.iter().map(|&x| 1.0f32 / x).collect())
        .collect()
}

/// State log-likelihoods of the model states `states` (`frames × states.len()`,
/// column k for `states[k]`) and, for multi-mixture states, component log-likelihoods with the log weight included
/// (`frames × components`), for the model states of `model`.
pub fn score(
    set: &HmmSet,
    model: &HtkModel,
    inv_var: &[Vec<f32>],
    log_wt: &[Vec<f32>],
    feats: &[f32],
    dim: usize,
    states: &[usize],
    state_ll: &mut [f32],
    comp_ll: &mut std::collections::HashMap<usize, Vec<f32>>,
) {
    let ns = states.len();
    let frames = feats.len() / dim;
    for (col, &ms) in states.iter().enumerate() {
        let s = model.set_state[ms];
        let st = &set.states[s].streams[0];
        let comps = &model.mixture_of[ms];
        let mut cl = if st.num_mixes > 1 {
            Some(vec![0f32; frames * comps.len()])
        } else {
            None
        };
        for t in 0..frames {
            let x = &feats[t * dim..(t + 1) * dim];
            let mut tot = LZERO;
            for (c, &mi) in comps.iter().enumerate() {
                let mx = st.mixtures[mi];
                let l = gauss(set, mx.pdf, x, inv_var);
                let w = log_wt[s][mi];
                if comps.len() == 1 && st.num_mixes == 1 {
                    tot = l as f64;
                } else {
                    tot = ladd(tot, w as f64 + l as f64);
                }
                if let Some(cl) = cl.as_mut() {
                    cl[t * comps.len() + c] = (w as f64 + l as f64) as f32;
                }
            }
            state_ll[t * ns + col] = tot as f32;
        }
        if let Some(cl) = cl {
            comp_ll.insert(ms, cl);
        }
    }
}
