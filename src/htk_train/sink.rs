//! The forward-backward sink that turns HFB's occupation probabilities into
//! HERest's statistics (`UpMixParms`, `UpTranParms`): per component
//! Lr = exp(x) when x > −`min_forward_prob`, added to the accumulators of the
//! shared objects; transition counts and state occupancies per matrix.

use std::collections::HashMap;

use amtool_formats::htk::mmf::HmmSet;

use super::accs::{HerestAccs, HtkUpdate};
use super::fb::FbSink;
use super::sentence::Sentence;
use crate::model::htk::HtkModel;

/// Sink that gathers one utterance's statistics into a [`HerestAccs`].
pub struct AccSink<'a> {
    pub set: &'a HmmSet,
    pub model: &'a HtkModel,
    pub sent: &'a Sentence<'a>,
    pub u: HtkUpdate,
    pub min_fp: f64,
    pub feats: &'a [f32],
    pub dim: usize,
    pub comp_ll: &'a HashMap<usize, Vec<f32>>,
    pub acc: &'a mut HerestAccs,
    /// Beams the beta pass was retried with (HERest's "Retrying Beta pass").
    pub retries: Vec<f64>,
    /// With an engine doing the mixture statistics: (frame, model state,
    /// occupancy) for every state occupied above e^−`min_forward_prob`,
    /// frames in order; the mixture accumulators are then left alone.
    pub occupancies: Option<Vec<(u32, u32, f32)>>,
}

impl FbSink for AccSink<'_> {
    fn retry(&mut self, beam: f64) {
        self.retries.push(beam);
    }

    fn state_occ(&mut self, q: usize, _t: usize, occ: &[f64]) {
        if self.u.trans {
            let tp = self.sent.models[q].transp;
            let ta = &mut self.acc.trans[tp];
            for i in 1..occ.len() - 1 {
                ta.occ[i] += occ[i];
            }
        }
    }

    fn mix_occ(&mut self, q: usize, j: usize, t: usize, log_occ: f64, initx: f64) {
        if !(self.u.means || self.u.vars || self.u.weights) {
            return;
        }
        let ms = self.sent.models[q].states[j];
        if let Some(v) = self.occupancies.as_mut() {
            if -log_occ < self.min_fp {
                v.push(((t - 1) as u32, ms as u32, log_occ.exp() as f32));
            }
            return;
        }
        let s = self.model.set_state[ms];
        let stream = &self.set.states[s].streams[0];
        let mmix = stream.num_mixes > 1;
        let x_t = &self.feats[(t - 1) * self.dim..t * self.dim];
        let comps = &self.model.mixture_of[ms];
        let mut sum = 0.0;
        for (c, &mi) in comps.iter().enumerate() {
            let x = if mmix {
                let ll = &self.comp_ll[&ms];
                initx + ll[(t - 1) * comps.len() + c] as f64
            } else {
                log_occ
            };
            if -x < self.min_fp {
                let lr = x.exp();
                sum += lr;
                let pdf = stream.mixtures[mi].pdf;
                self.acc.add_frame(self.set, pdf, x_t, lr, self.u);
                if self.u.weights {
                    self.acc.weight[s].c[mi] += lr;
                }
            }
        }
        self.acc.weight[s].occ += sum;
    }

    fn trans(&mut self, q: usize, i: usize, j: usize, value: f64) {
        if self.u.trans {
            let m = self.sent.models[q];
            self.acc.trans[m.transp].tran[i * (m.n + 1) + j] += value;
        }
    }
}
