//! EM statistics over feature tables, one utterance at a time, as Kaldi's
//! `gmm-acc-stats-ali` / `gmm-acc-stats` ([`AmAccStats`]: transition counts
//! and per-pdf GMM statistics of a `TransitionModel` + `AmDiagGmm`) and
//! `gmm-global-acc-stats` / `fgmm-global-acc-stats` ([`GlobalAccStats`]: one
//! diagonal or full GMM, optional per-frame weights and Gaussian selection).
//!
//! The engine does the arithmetic (log-likelihoods and posteriors in f32,
//! statistics in f64, as Kaldi); with `--gselect` the preselected
//! components' log-likelihoods come from the engine and the statistics of
//! those few components are added on the host. Problems with one utterance
//! (no alignment, wrong length) come back as [`UttOutcome::Skipped`] with
//! Kaldi's warning text, so the caller warns, counts and goes on; problems
//! that make every result wrong (feature dimension, transition ids outside
//! the model) are errors. Nothing here prints.

use amtool_formats::kaldi::accs::{AccumDiagGmm, AccumFullGmm, AmAccs};
use amtool_formats::kaldi::model::KaldiModel;

use crate::engine::{Engine, FrameBatch, FrameTargets, LoadedModel};
use crate::model::{AcousticModel, CovKind};
use crate::stats::{ModelAccumulators, UpdateFlags};
use crate::train::convert::{
    am_from_model_accs, augment, diag_from_gmm_acc, full_from_gmm_acc, model_from_am,
};
use crate::{Error, Result};

/// What happened to one utterance.
#[derive(Debug, Clone, PartialEq)]
pub enum UttOutcome {
    /// Accumulated: Σ weight × log-likelihood and Σ weight over its frames.
    Done { like: f64, weight: f64 },
    /// Not accumulated; Kaldi's warning text.
    Skipped(String),
}

fn check_dim(key: &str, cols: usize, dim: usize) -> Result<()> {
    if cols != dim {
        return Err(Error::Mismatch(format!(
            "utterance {key}: features have dimension {cols} but the model has {dim}"
        )));
    }
    Ok(())
}

/// `gmm-acc-stats-ali` / `gmm-acc-stats`: statistics for a Kaldi model.
pub struct AmAccStats<'e> {
    loaded: Box<dyn LoadedModel + 'e>,
    dim: usize,
    id2pdf: Vec<i32>,
    accs: ModelAccumulators,
    transition_accs: Vec<f64>,
    /// Scratch for the weighted targets of one utterance.
    offsets: Vec<usize>,
    pairs: Vec<(u32, f32)>,
    states: Vec<u32>,
}

impl<'e> AmAccStats<'e> {
    /// Accumulators for `model` (Kaldi's `gmm-acc-stats-ali` uses all of
    /// `mvwt`; `gmm-acc-stats` takes `--update-flags`).
    pub fn new(engine: &'e dyn Engine, model: &KaldiModel, flags: UpdateFlags) -> Result<Self> {
        let am: AcousticModel = model_from_am(&model.am);
        let loaded = engine.load(&am)?;
        let accs = ModelAccumulators::zeros(&am, augment(flags));
        Ok(AmAccStats {
            loaded,
            dim: am.dim,
            id2pdf: model.trans.id2pdf().to_vec(),
            accs,
            transition_accs: vec![0.0; model.trans.num_transition_ids() + 1],
            offsets: Vec::new(),
            pairs: Vec::new(),
            states: Vec::new(),
        })
    }

    fn pdf_of(&self, key: &str, frame: usize, tid: i32) -> Result<u32> {
        if tid < 1 || tid as usize >= self.id2pdf.len() {
            return Err(Error::Mismatch(format!(
                "utterance {key}, frame {frame}: transition-id {tid} is not in the model (it has {} transition-ids; alignment from another model?)",
                self.id2pdf.len().saturating_sub(1)
            )));
        }
        Ok(self.id2pdf[tid as usize] as u32)
    }

    /// One utterance with an alignment (transition-ids, one per frame).
    pub fn add_alignment(
        &mut self,
        key: &str,
        feats: &[f32],
        rows: usize,
        cols: usize,
        ali: &[i32],
    ) -> Result<UttOutcome> {
        if ali.len() != rows {
            return Ok(UttOutcome::Skipped(format!(
                "Alignments has wrong size {} vs. {rows}",
                ali.len()
            )));
        }
        check_dim(key, cols, self.dim)?;
        let mut states = std::mem::take(&mut self.states);
        states.clear();
        for (t, &tid) in ali.iter().enumerate() {
            states.push(self.pdf_of(key, t, tid)?);
        }
        for &tid in ali {
            self.transition_accs[tid as usize] += 1.0;
        }
        let like = self.loaded.accumulate(
            FrameBatch::new(feats, cols),
            FrameTargets::Aligned(&states),
            &mut self.accs,
        )?;
        self.states = states;
        Ok(UttOutcome::Done {
            like,
            weight: rows as f64,
        })
    }

    /// One utterance with posteriors over transition-ids.
    pub fn add_posterior(
        &mut self,
        key: &str,
        feats: &[f32],
        rows: usize,
        cols: usize,
        post: &[Vec<(i32, f32)>],
    ) -> Result<UttOutcome> {
        if post.len() != rows {
            return Ok(UttOutcome::Skipped(format!(
                "Posterior vector has wrong size {} vs. {rows}",
                post.len()
            )));
        }
        check_dim(key, cols, self.dim)?;
        let mut offsets = std::mem::take(&mut self.offsets);
        let mut pairs = std::mem::take(&mut self.pairs);
        offsets.clear();
        pairs.clear();
        offsets.push(0);
        let mut weight = 0f64;
        for (t, frame) in post.iter().enumerate() {
            for &(tid, w) in frame {
                let pdf = self.pdf_of(key, t, tid)?;
                pairs.push((pdf, w));
                weight += w as f64;
            }
            offsets.push(pairs.len());
        }
        for frame in post {
            for &(tid, w) in frame {
                self.transition_accs[tid as usize] += w as f64;
            }
        }
        let like = self.loaded.accumulate(
            FrameBatch::new(feats, cols),
            FrameTargets::Weighted {
                offsets: &offsets,
                pairs: &pairs,
            },
            &mut self.accs,
        )?;
        self.offsets = offsets;
        self.pairs = pairs;
        Ok(UttOutcome::Done { like, weight })
    }

    /// The accumulators in Kaldi's file structure (transition accs + AccumAmDiagGmm).
    pub fn into_accs(self) -> AmAccs {
        AmAccs {
            transition_accs: self.transition_accs,
            gmm: am_from_model_accs(&self.accs),
        }
    }
}

/// `gmm-global-acc-stats` / `fgmm-global-acc-stats`: statistics for one GMM.
pub struct GlobalAccStats<'e> {
    loaded: Box<dyn LoadedModel + 'e>,
    dim: usize,
    kind: CovKind,
    num_comp: usize,
    accs: ModelAccumulators,
    offsets: Vec<usize>,
    pairs: Vec<(u32, f32)>,
    loglikes: Vec<f32>,
}

impl<'e> GlobalAccStats<'e> {
    /// `gmm` is a one-state model (see `train::convert::model_from_diag` /
    /// `model_from_full`); `flags` as Kaldi's `--update-flags` (augmented as
    /// Kaldi's `Resize` does).
    pub fn new(engine: &'e dyn Engine, gmm: &AcousticModel, flags: UpdateFlags) -> Result<Self> {
        if gmm.states.len() != 1 {
            return Err(Error::Mismatch(format!(
                "a global GMM has one mixture, this model has {}",
                gmm.states.len()
            )));
        }
        let flags = UpdateFlags {
            transitions: false,
            ..augment(flags)
        };
        Ok(GlobalAccStats {
            loaded: engine.load(gmm)?,
            dim: gmm.dim,
            kind: gmm.kind,
            num_comp: gmm.states[0].num_components(),
            accs: ModelAccumulators::zeros(gmm, flags),
            offsets: Vec::new(),
            pairs: Vec::new(),
            loglikes: Vec::new(),
        })
    }

    /// One utterance; `weights` (one per frame) and `gselect` (the
    /// components to use on each frame) as Kaldi's `--weights` / `--gselect`.
    pub fn add_utterance(
        &mut self,
        key: &str,
        feats: &[f32],
        rows: usize,
        cols: usize,
        weights: Option<&[f32]>,
        gselect: Option<&[Vec<i32>]>,
    ) -> Result<UttOutcome> {
        if let Some(w) = weights {
            if w.len() != rows {
                return Ok(UttOutcome::Skipped(format!(
                    "Weights for utterance {key} have wrong dim {} vs. {rows}",
                    w.len()
                )));
            }
        }
        if let Some(g) = gselect {
            if g.len() != rows {
                return Ok(UttOutcome::Skipped(format!(
                    "gselect information for utterance {key} has wrong size {} vs. {rows}",
                    g.len()
                )));
            }
        }
        check_dim(key, cols, self.dim)?;
        let batch = FrameBatch::new(feats, cols);
        match gselect {
            Some(g) => self.add_gselect(key, batch, weights, g),
            None => {
                let weight: f64 = match weights {
                    Some(w) => w.iter().map(|&x| x as f64).sum(),
                    None => rows as f64,
                };
                let like = match weights {
                    None => self
                        .loaded
                        .accumulate(batch, FrameTargets::Global, &mut self.accs)?,
                    Some(w) => {
                        let mut offsets = std::mem::take(&mut self.offsets);
                        let mut pairs = std::mem::take(&mut self.pairs);
                        offsets.clear();
                        pairs.clear();
                        offsets.push(0);
                        for &x in w {
                            // Kaldi skips frames of weight 0.
                            if x != 0.0 {
                                pairs.push((0, x));
                            }
                            offsets.push(pairs.len());
                        }
                        let like = self.loaded.accumulate(
                            batch,
                            FrameTargets::Weighted {
                                offsets: &offsets,
                                pairs: &pairs,
                            },
                            &mut self.accs,
                        )?;
                        self.offsets = offsets;
                        self.pairs = pairs;
                        like
                    }
                };
                Ok(UttOutcome::Done { like, weight })
            }
        }
    }

    /// Gaussian selection: Kaldi's `LogLikelihoodsPreselect`, a float
    /// softmax over the selected components, then `AccumulateForComponent`
    /// in f64 for each.
    fn add_gselect(
        &mut self,
        key: &str,
        batch: FrameBatch<'_>,
        weights: Option<&[f32]>,
        gselect: &[Vec<i32>],
    ) -> Result<UttOutcome> {
        let m = self.num_comp;
        for (t, sel) in gselect.iter().enumerate() {
            if sel.is_empty() {
                return Err(Error::Mismatch(format!(
                    "utterance {key}, frame {t}: empty Gaussian selection"
                )));
            }
            if let Some(&g) = sel.iter().find(|&&g| g < 0 || g as usize >= m) {
                return Err(Error::Mismatch(format!(
                    "utterance {key}, frame {t}: selected Gaussian {g} is not in the model (it has {m})"
                )));
            }
        }
        let mut ll = std::mem::take(&mut self.loglikes);
        ll.resize(batch.frames * m, 0.0);
        self.loaded.component_loglikes(0, batch, &mut ll)?;
        let d = self.dim;
        let vlen = match self.kind {
            CovKind::Diagonal => d,
            CovKind::Full => d * (d + 1) / 2,
        };
        let acc = &mut self.accs.states[0];
        let (mut file_like, mut file_weight) = (0f32, 0f32);
        let mut sel_ll: Vec<f32> = Vec::new();
        let mut xd = vec![0f64; d];
        for (t, sel) in gselect.iter().enumerate() {
            let w = weights.map_or(1.0, |w| w[t]);
            if w == 0.0 {
                continue;
            }
            file_weight += w;
            sel_ll.clear();
            sel_ll.extend(sel.iter().map(|&g| ll[t * m + g as usize]));
            // Kaldi's Vector<float>::ApplySoftMax.
            let max = sel_ll.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for v in sel_ll.iter_mut() {
                *v = (*v - max).exp();
                sum += *v;
            }
            for v in sel_ll.iter_mut() {
                *v *= 1.0 / sum;
            }
            file_like += w * (max + sum.ln());
            for (x, &f) in xd.iter_mut().zip(batch.row(t)) {
                *x = f as f64;
            }
            for (&g, &p) in sel.iter().zip(&sel_ll) {
                let post = (p * w) as f64;
                let g = g as usize;
                acc.occupancy[g] += post;
                if !acc.mean_acc.is_empty() {
                    for (a, &x) in acc.mean_acc[g * d..(g + 1) * d].iter_mut().zip(&xd) {
                        *a += post * x;
                    }
                }
                if !acc.var_acc.is_empty() {
                    let v = &mut acc.var_acc[g * vlen..(g + 1) * vlen];
                    match self.kind {
                        CovKind::Diagonal => {
                            for (a, &x) in v.iter_mut().zip(&xd) {
                                *a += post * x * x;
                            }
                        }
                        CovKind::Full => {
                            let mut k = 0;
                            for i in 0..d {
                                for j in 0..=i {
                                    v[k] += post * xd[i] * xd[j];
                                    k += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        self.loglikes = ll;
        Ok(UttOutcome::Done {
            like: file_like as f64,
            weight: file_weight as f64,
        })
    }

    /// `gmm-global-acc-stats` output.
    pub fn into_diag(self) -> Result<AccumDiagGmm> {
        if self.kind != CovKind::Diagonal {
            return Err(Error::Mismatch(
                "full-covariance statistics cannot be written as diagonal accumulators".into(),
            ));
        }
        Ok(diag_from_gmm_acc(
            &self.accs.states[0],
            self.dim,
            self.accs.flags,
        ))
    }

    /// `fgmm-global-acc-stats` output (centred as Kaldi writes it).
    pub fn into_full(self) -> Result<AccumFullGmm> {
        if self.kind != CovKind::Full {
            return Err(Error::Mismatch(
                "diagonal statistics cannot be written as full-covariance accumulators".into(),
            ));
        }
        full_from_gmm_acc(&self.accs.states[0], self.dim, self.accs.flags)
    }
}
