//! The neutral [`AcousticModel`] of an HTK HMM set: one model state per
//! distinct emitting state after tying (a `~s` state shared by several HMMs
//! is one state), components in the order of their `<MIXTURE>` indices, and
//! the map back into the [`HmmSet`] arenas so that updated parameters can be
//! written into the original structure (macros and sharing kept).
//!
//! Components whose weight is at or below HTK's `MINMIX` are left out of the
//! model, as HTK skips them when scoring. Multi-stream states, `<LLTCOVAR>`
//! and `<XFORM>` covariances are refused with an error naming the HMM set.

use amtool_formats::htk::mmf::{Covariance, HmmSet, TriMat, MINMIX};

use super::{AcousticModel, CovKind, StateGmm};
use crate::{Error, Result};

/// An [`AcousticModel`] built from an [`HmmSet`], with the way back.
#[derive(Debug, Clone)]
pub struct HtkModel {
    pub model: AcousticModel,
    /// Model state → index into `HmmSet::states`.
    pub set_state: Vec<usize>,
    /// `HmmSet::states` index → model state (None: not used by any HMM).
    pub model_state: Vec<Option<usize>>,
    /// Per model state, per model component: index into the state's
    /// `streams[0].mixtures`.
    pub mixture_of: Vec<Vec<usize>>,
}

impl HtkModel {
    /// The model of `set`'s distinct emitting states, in the order the HMMs
    /// (in definition order) first use them.
    pub fn from_hmm_set(set: &HmmSet, name: &str) -> Result<Self> {
        if set.options.stream_widths.len() > 1 {
            return Err(Error::Mismatch(format!(
                "{name}: multi-stream HMM sets ({} streams) are not supported; \
                 join the streams into one (HHEd) or use HTK",
                set.options.stream_widths.len()
            )));
        }
        let dim = set.options.vec_size;
        let mut kind = None;
        let mut model_state = vec![None; set.states.len()];
        let mut set_state = Vec::new();
        let mut states = Vec::new();
        let mut mixture_of = Vec::new();
        for (hname, m) in set
            .macros
            .iter()
            .filter(|m| m.kind == b'h')
            .map(|m| (&m.name, m))
        {
            let hmm = &set.hmms[m.target];
            for (si, &s) in hmm.states.iter().enumerate() {
                if model_state[s].is_some() {
                    continue;
                }
                let st = &set.states[s];
                let stream = &st.streams[0];
                let mut g = StateGmm {
                    gconsts: Vec::new(),
                    weights: Vec::new(),
                    means_invvars: Vec::new(),
                    inv_vars: Vec::new(),
                };
                let mut mix_idx = Vec::new();
                for (mi, mx) in stream.mixtures.iter().enumerate() {
                    if mx.weight <= MINMIX {
                        continue;
                    }
                    let pdf = &set.pdfs[mx.pdf];
                    let mean = &set.means[pdf.mean];
                    if mean.len() != dim {
                        return Err(Error::Mismatch(format!(
                            "{name}: HMM {hname} state {}: mean of size {} in a set of vector size {dim}",
                            si + 2,
                            mean.len()
                        )));
                    }
                    let hg = pdf.gconst.unwrap_or(0.0) as f64;
                    let (k, quad) = match pdf.cov {
                        Covariance::Diag(v) => {
                            let var = &set.variances[v];
                            let mut quad = 0f64;
                            for d in 0..dim {
                                let iv = (1.0 / var[d] as f64) as f32;
                                g.inv_vars.push(iv);
                                g.means_invvars.push((mean[d] as f64 * iv as f64) as f32);
                                quad += mean[d] as f64 * mean[d] as f64 / var[d] as f64;
                            }
                            (CovKind::Diagonal, quad)
                        }
                        Covariance::InvCovar(c) => {
                            let inv = &set.covars[c];
                            let mut quad = 0f64;
                            for i in 0..dim {
                                let mut row = 0f64;
                                for j in 0..dim {
                                    row += inv.get(i, j) as f64 * mean[j] as f64;
                                }
                                g.means_invvars.push(row as f32);
                                quad += row * mean[i] as f64;
                                for j in 0..=i {
                                    g.inv_vars.push(inv.get(i, j));
                                }
                            }
                            (CovKind::Full, quad)
                        }
                        Covariance::LltCovar(_) | Covariance::Xform(_) => {
                            return Err(Error::Mismatch(format!(
                                "{name}: HMM {hname} state {}: <LLTCOVAR>/<XFORM> covariances are not supported",
                                si + 2
                            )))
                        }
                    };
                    if *kind.get_or_insert(k) != k {
                        return Err(Error::Mismatch(format!(
                            "{name}: HMM {hname} state {}: diagonal and full covariances mixed in one set",
                            si + 2
                        )));
                    }
                    g.weights.push(mx.weight);
                    g.gconsts
                        .push(((mx.weight as f64).ln() - 0.5 * (hg + quad)) as f32);
                    mix_idx.push(mi);
                }
                if g.gconsts.is_empty() {
                    return Err(Error::Mismatch(format!(
                        "{name}: HMM {hname} state {}: no mixture component has a weight above MINMIX",
                        si + 2
                    )));
                }
                model_state[s] = Some(states.len());
                set_state.push(s);
                states.push(g);
                mixture_of.push(mix_idx);
            }
        }
        Ok(HtkModel {
            model: AcousticModel {
                dim,
                kind: kind.unwrap_or(CovKind::Diagonal),
                states,
            },
            set_state,
            model_state,
            mixture_of,
        })
    }

    /// Put the parameters of `model` (same shape as `self.model`) back into
    /// `set`: weights, means and covariances of every component, `<GCONST>`s
    /// recomputed. A mean/variance shared by several components takes the
    /// value of the last component written.
    pub fn write_back(&self, model: &AcousticModel, set: &mut HmmSet) {
        let dim = model.dim;
        let vlen = model.inv_var_len();
        for (ms, g) in model.states.iter().enumerate() {
            let s = self.set_state[ms];
            for (c, &mi) in self.mixture_of[ms].iter().enumerate() {
                let mx = set.states[s].streams[0].mixtures[mi];
                set.states[s].streams[0].mixtures[mi].weight = g.weights[c];
                let pdf = set.pdfs[mx.pdf].clone();
                let iv = &g.inv_vars[c * vlen..(c + 1) * vlen];
                let mi_v = &g.means_invvars[c * dim..(c + 1) * dim];
                match pdf.cov {
                    Covariance::Diag(v) => {
                        for d in 0..dim {
                            set.variances[v][d] = (1.0 / iv[d] as f64) as f32;
                            set.means[pdf.mean][d] = (mi_v[d] as f64 / iv[d] as f64) as f32;
                        }
                    }
                    Covariance::InvCovar(cv) => {
                        let mut upper = Vec::with_capacity(dim * (dim + 1) / 2);
                        let at = |i: usize, j: usize| {
                            let (i, j) = if i >= j { (i, j) } else { (j, i) };
                            iv[i * (i + 1) / 2 + j] as f64
                        };
                        for i in 0..dim {
                            for j in i..dim {
                                upper.push(at(i, j) as f32);
                            }
                        }
                        let packed: Vec<f64> = iv.iter().map(|&x| x as f64).collect();
                        if let Some(cov) = crate::stats::linalg::sp_invert(&packed, dim) {
                            let b: Vec<f64> = mi_v.iter().map(|&x| x as f64).collect();
                            let mean = crate::stats::linalg::sp_vec(&cov, dim, &b);
                            for d in 0..dim {
                                set.means[pdf.mean][d] = mean[d] as f32;
                            }
                        }
                        set.covars[cv] = TriMat { n: dim, upper };
                    }
                    _ => {}
                }
            }
        }
        set.recompute_gconsts();
    }
}
