//! EM statistics over feature tables, one utterance at a time, as Kaldi's
//! `gmm-acc-stats-ali` / `gmm-acc-stats` ([`AmAccStats`]: transition counts
//! and per-pdf GMM statistics of a `TransitionModel` + `AmDiagGmm`) and
//! `gmm-global-acc-stats` / `fgmm-global-acc-stats` ([`GlobalAccStats`]: one
//! diagonal or full GMM, optional per-frame weights and Gaussian selection).
//!
//! Utterances are queued and sent to the engine [`BATCH_FRAMES`] frames at a
//! time (one call per batch keeps a GPU busy; statistics are additive, so
//! only the f64 summation order depends on the batching). The engine does
//! the arithmetic (log-likelihoods and posteriors in f32, statistics in f64,
//! as Kaldi), `--gselect` included (`FrameTargets::Selected`: each frame
//! scored against its selected components only). Problems with one utterance
//! (no alignment, wrong length) come back as [`UttOutcome::Skipped`] with
//! Kaldi's warning text, so the caller warns, counts and goes on; problems
//! that make every result wrong (feature dimension, transition ids outside
//! the model) are errors. Nothing here prints.

use amtool_formats::kaldi::accs::{AccumDiagGmm, AccumFullGmm, AmAccs};
use amtool_formats::kaldi::matrix::SharedMatrix;
use amtool_formats::kaldi::model::KaldiModel;

use crate::engine::{Engine, FrameTargets, LoadedModel};
use crate::model::{AcousticModel, CovKind};
use crate::stats::{ModelAccumulators, UpdateFlags};
use crate::train::convert::{
    am_from_model_accs, augment, diag_from_gmm_acc_owned, full_from_gmm_acc, model_from_am,
};
use crate::train::prefetch::Features;
use crate::{Error, Result};

mod batch;

pub use batch::{batch_limit, BATCH_FRAMES, FIRST_BATCH_FRAMES};
use batch::{check_len, Batch, Mode};

/// What happened to one utterance.
#[derive(Debug, Clone, PartialEq)]
pub enum UttOutcome {
    /// Queued for accumulation: Σ weight over its frames. Its log-likelihood
    /// is counted in the next [`AmAccStats::take_like`] /
    /// [`GlobalAccStats::take_like`].
    Done { weight: f64 },
    /// Not accumulated; Kaldi's warning text.
    Skipped(String),
}

/// An utterance's features as the `add_*` functions take them. Borrowed
/// frames are copied into the batch at once; owned ones, and parts of a
/// mapped archive, wait and are copied in together, in parallel, when the
/// batch is sent.
pub enum UttFeats<'a> {
    Borrowed(&'a [f32]),
    Owned(Vec<f32>),
    Shared(SharedMatrix),
}

impl<'a> From<&'a [f32]> for UttFeats<'a> {
    fn from(f: &'a [f32]) -> Self {
        UttFeats::Borrowed(f)
    }
}

impl<'a> From<&'a Vec<f32>> for UttFeats<'a> {
    fn from(f: &'a Vec<f32>) -> Self {
        UttFeats::Borrowed(f)
    }
}

impl From<Vec<f32>> for UttFeats<'_> {
    fn from(f: Vec<f32>) -> Self {
        UttFeats::Owned(f)
    }
}

impl From<Features> for UttFeats<'_> {
    fn from(f: Features) -> Self {
        match f {
            Features::Matrix(m) => UttFeats::Owned(m.into_data()),
            Features::Shared(m) => UttFeats::Shared(m),
        }
    }
}

impl UttFeats<'_> {
    fn floats(&self) -> usize {
        match self {
            UttFeats::Borrowed(f) => f.len(),
            UttFeats::Owned(f) => f.len(),
            UttFeats::Shared(m) => m.rows() * m.cols(),
        }
    }

    /// Frames of the input left from this utterance on, where known (a
    /// part of a mapped archive).
    fn frames_left(&self, rows: usize) -> Option<usize> {
        match self {
            UttFeats::Shared(m) => Some(rows + m.rows_after()),
            _ => None,
        }
    }
}

/// Every frame selects at least one component, and only components of the
/// model (`m` of them).
fn check_selection(key: &str, gselect: &[Vec<i32>], m: usize) -> Result<()> {
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
    Ok(())
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
    batch: Batch,
    /// Σ weight × log-likelihood of the batches sent since the last `take_like`.
    like: f64,
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
            batch: Batch::default(),
            like: 0.0,
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
    /// `feats` borrowed is copied now; owned, it is moved into the batch and
    /// copied when the batch is sent, with the others in parallel.
    pub fn add_alignment<'f>(
        &mut self,
        key: &str,
        feats: impl Into<UttFeats<'f>>,
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
        let pdfs = ali
            .iter()
            .enumerate()
            .map(|(t, &tid)| self.pdf_of(key, t, tid))
            .collect::<Result<Vec<u32>>>()?;
        for &tid in ali {
            self.transition_accs[tid as usize] += 1.0;
        }
        let feats = feats.into();
        self.like += self.batch.prepare(
            Mode::Aligned,
            rows,
            &feats,
            self.dim,
            self.loaded.as_mut(),
            &mut self.accs,
        )?;
        self.batch.states.extend_from_slice(&pdfs);
        self.batch.push_feats(key, feats, rows, self.dim)?;
        Ok(UttOutcome::Done {
            weight: rows as f64,
        })
    }

    /// One utterance with posteriors over transition-ids (`feats` as in
    /// [`add_alignment`](Self::add_alignment)).
    pub fn add_posterior<'f>(
        &mut self,
        key: &str,
        feats: impl Into<UttFeats<'f>>,
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
        let mut pairs = Vec::with_capacity(rows);
        for (t, frame) in post.iter().enumerate() {
            for &(tid, w) in frame {
                pairs.push((self.pdf_of(key, t, tid)?, w));
            }
        }
        let mut weight = 0f64;
        for frame in post {
            for &(tid, w) in frame {
                self.transition_accs[tid as usize] += w as f64;
                weight += w as f64;
            }
        }
        let feats = feats.into();
        self.like += self.batch.prepare(
            Mode::Weighted,
            rows,
            &feats,
            self.dim,
            self.loaded.as_mut(),
            &mut self.accs,
        )?;
        let b = &mut self.batch;
        let mut k = 0;
        for frame in post {
            b.pairs.extend_from_slice(&pairs[k..k + frame.len()]);
            k += frame.len();
            b.offsets.push(b.pairs.len());
        }
        b.push_feats(key, feats, rows, self.dim)?;
        Ok(UttOutcome::Done { weight })
    }

    /// Sends what is queued; returns Σ weight × log-likelihood of every
    /// utterance queued since the last call (Kaldi's total like).
    pub fn take_like(&mut self) -> Result<f64> {
        let l = self
            .batch
            .settle(self.dim, self.loaded.as_mut(), &mut self.accs)?;
        Ok(std::mem::take(&mut self.like) + l)
    }

    /// The accumulators in Kaldi's file structure (transition accs +
    /// AccumAmDiagGmm); sends what is queued first.
    pub fn into_accs(mut self) -> Result<AmAccs> {
        self.take_like()?;
        Ok(AmAccs {
            transition_accs: self.transition_accs,
            gmm: am_from_model_accs(&self.accs),
        })
    }
}

/// `gmm-global-acc-stats` / `fgmm-global-acc-stats`: statistics for one GMM.
pub struct GlobalAccStats<'e> {
    loaded: Box<dyn LoadedModel + 'e>,
    dim: usize,
    kind: CovKind,
    num_comp: usize,
    accs: ModelAccumulators,
    batch: Batch,
    like: f64,
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
            batch: Batch::default(),
            like: 0.0,
        })
    }

    /// Makes the engine ready for utterances without weights or selections
    /// (a GPU engine uploads its forms of the model), so that a caller who
    /// opened its features first has the reader read ahead meanwhile,
    /// instead of the first batch's hold waiting for it with the batches
    /// after it not yet held.
    pub fn prepare_plain(&mut self) -> Result<()> {
        self.loaded.prepare_statistics(&FrameTargets::Global)
    }

    /// One utterance; `weights` (one per frame) and `gselect` (the
    /// components to use on each frame) as Kaldi's `--weights` / `--gselect`.
    /// `feats` borrowed is copied now; owned, it is moved into the batch and
    /// copied when the batch is sent, with the others in parallel.
    pub fn add_utterance<'f>(
        &mut self,
        key: &str,
        feats: impl Into<UttFeats<'f>>,
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
        if let Some(g) = gselect {
            return self.add_selected(key, feats.into(), rows, weights, g);
        }
        let mode = if weights.is_some() {
            Mode::Weighted
        } else {
            Mode::Global
        };
        let feats = feats.into();
        self.make_room(mode, rows, &feats)?;
        let weight = match weights {
            None => rows as f64,
            Some(w) => {
                let b = &mut self.batch;
                for &x in w {
                    // Kaldi skips frames of weight 0.
                    if x != 0.0 {
                        b.pairs.push((0, x));
                    }
                    b.offsets.push(b.pairs.len());
                }
                w.iter().map(|&x| x as f64).sum()
            }
        };
        self.batch.push_feats(key, feats, rows, self.dim)?;
        Ok(UttOutcome::Done { weight })
    }

    /// Sends what is queued; returns Σ weight × log-likelihood of every
    /// utterance added since the last call.
    pub fn take_like(&mut self) -> Result<f64> {
        let l = self
            .batch
            .settle(self.dim, self.loaded.as_mut(), &mut self.accs)?;
        Ok(std::mem::take(&mut self.like) + l)
    }

    /// [`Batch::prepare`] for an utterance of `rows` frames (the likelihood
    /// of a batch it sends counted).
    fn make_room(&mut self, mode: Mode, rows: usize, feats: &UttFeats<'_>) -> Result<()> {
        self.like += self.batch.prepare(
            mode,
            rows,
            feats,
            self.dim,
            self.loaded.as_mut(),
            &mut self.accs,
        )?;
        Ok(())
    }

    /// Queue an utterance with its Gaussian selection (`gselect[t]`: the
    /// components of frame t, checked here so errors name the utterance).
    fn add_selected(
        &mut self,
        key: &str,
        feats: UttFeats<'_>,
        rows: usize,
        weights: Option<&[f32]>,
        gselect: &[Vec<i32>],
    ) -> Result<UttOutcome> {
        check_len(key, &feats, rows, self.dim)?;
        check_selection(key, gselect, self.num_comp)?;
        self.make_room(Mode::Selected, rows, &feats)?;
        let b = &mut self.batch;
        for (t, sel) in gselect.iter().enumerate() {
            b.components.extend(sel.iter().map(|&g| g as u32));
            b.offsets.push(b.components.len());
            b.weights.push(weights.map_or(1.0, |w| w[t]));
        }
        self.batch.push_feats(key, feats, rows, self.dim)?;
        let weight = match weights {
            None => rows as f64,
            Some(w) => w.iter().map(|&x| x as f64).sum(),
        };
        Ok(UttOutcome::Done { weight })
    }

    /// `gmm-global-acc-stats` output (sends what is queued first).
    pub fn into_diag(mut self) -> Result<AccumDiagGmm> {
        self.take_like()?;
        if self.kind != CovKind::Diagonal {
            return Err(Error::Mismatch(
                "full-covariance statistics cannot be written as diagonal accumulators".into(),
            ));
        }
        let sums = self.accs.states.swap_remove(0);
        let out = diag_from_gmm_acc_owned(sums, self.dim, self.accs.flags);
        crate::engine::batch_trace::mark("converted");
        Ok(out)
    }

    /// `fgmm-global-acc-stats` output (centred as Kaldi writes it; sends
    /// what is queued first).
    pub fn into_full(mut self) -> Result<AccumFullGmm> {
        self.take_like()?;
        if self.kind != CovKind::Full {
            return Err(Error::Mismatch(
                "diagonal statistics cannot be written as full-covariance accumulators".into(),
            ));
        }
        full_from_gmm_acc(&self.accs.states[0], self.dim, self.accs.flags)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::cpu::CpuEngine;
    use crate::engine::FrameBatch;
    use crate::model::StateGmm;
    use crate::stats::GmmAccumulator;

    /// A 2-dimensional, 3-component diagonal GMM (gconsts consistent with
    /// the parameters are not needed for these comparisons).
    fn gmm() -> AcousticModel {
        AcousticModel {
            dim: 2,
            kind: CovKind::Diagonal,
            states: vec![StateGmm {
                gconsts: vec![-3.0, -2.5, -4.0],
                weights: vec![0.3, 0.5, 0.2],
                means_invvars: vec![0.5, -1.0, 0.0, 0.2, -0.4, 0.8],
                inv_vars: vec![1.0, 0.5, 2.0, 1.5, 0.7, 1.1],
            }],
        }
    }

    fn frames(n: usize, seed: f32) -> Vec<f32> {
        (0..n * 2)
            .map(|i| ((i as f32 + seed) * 0.37).sin() * 2.0)
            .collect()
    }

    fn close(a: &[f64], b: &[f64], tol: f64) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= tol * y.abs().max(1.0), "{x} vs {y}");
        }
    }

    #[test]
    fn batches_weights_and_gselect_agree() {
        let engine = CpuEngine::new(1).unwrap();
        let flags = UpdateFlags::default();
        let (a, b) = (frames(7, 0.0), frames(5, 3.0));
        // Two utterances queued together vs one engine call each.
        let mut together = GlobalAccStats::new(&engine, &gmm(), flags).unwrap();
        together.add_utterance("a", &a, 7, 2, None, None).unwrap();
        together.add_utterance("b", &b, 5, 2, None, None).unwrap();
        let l1 = together.take_like().unwrap();
        let mut apart = GlobalAccStats::new(&engine, &gmm(), flags).unwrap();
        apart.add_utterance("a", &a, 7, 2, None, None).unwrap();
        let mut l2 = apart.take_like().unwrap();
        apart.add_utterance("b", &b, 5, 2, None, None).unwrap();
        l2 += apart.take_like().unwrap();
        assert!((l1 - l2).abs() < 1e-9 * l2.abs());
        let (t, p) = (together.into_diag().unwrap(), apart.into_diag().unwrap());
        // The engine sums statistics in f32 over sub-blocks of up to
        // `kernels::STATS_TB` (64) frames of one call, so 12 frames in one
        // call and 7 + 5 in two round differently: within (64 + 1)·2⁻²⁴ ≈
        // 3.9e-6 of the value for these sums of non-negative terms (observed
        // 4.3e-8). A lost or doubled frame would differ by ~1/12.
        close(&t.occupancy, &p.occupancy, 4e-6);
        close(&t.var_accs, &p.var_accs, 4e-6);

        // Weights of 1 and 0 = only the weighted frames; a selection of all
        // components = no selection.
        let w = [1.0, 0.0, 1.0, 1.0, 0.0];
        let kept: Vec<f32> = (0..5)
            .filter(|&t| w[t] != 0.0)
            .flat_map(|t| b[t * 2..t * 2 + 2].to_vec())
            .collect();
        let all: Vec<Vec<i32>> = vec![vec![2, 0, 1]; 5];
        let mut weighted = GlobalAccStats::new(&engine, &gmm(), flags).unwrap();
        let out = weighted
            .add_utterance("b", &b, 5, 2, Some(&w), None)
            .unwrap();
        assert_eq!(out, UttOutcome::Done { weight: 3.0 });
        let mut selected = GlobalAccStats::new(&engine, &gmm(), flags).unwrap();
        selected
            .add_utterance("b", &b, 5, 2, Some(&w), Some(&all))
            .unwrap();
        let mut plain = GlobalAccStats::new(&engine, &gmm(), flags).unwrap();
        plain.add_utterance("b", &kept, 3, 2, None, None).unwrap();
        let (lw, ls, lp) = (
            weighted.take_like().unwrap(),
            selected.take_like().unwrap(),
            plain.take_like().unwrap(),
        );
        assert!((lw - lp).abs() < 1e-9 * lp.abs() && (ls - lp).abs() < 1e-4 * lp.abs());
        let (w, s, p) = (
            weighted.into_diag().unwrap(),
            selected.into_diag().unwrap(),
            plain.into_diag().unwrap(),
        );
        // Zero-weight frames add exact zeros to the same f32 sums.
        close(&w.occupancy, &p.occupancy, 1e-12);
        close(&w.mean_accs, &p.mean_accs, 1e-12);
        // The host path (float softmax of the engine's log-likelihoods) vs the
        // engine's own: float rounding of the posteriors.
        for (x, y) in s.occupancy.iter().zip(&p.occupancy) {
            assert!((x - y).abs() < 1e-5, "{x} vs {y}");
        }
    }

    /// Utterances that overflow a batch, and one longer than a batch (it
    /// gets a buffer of its own size): every frame counted once.
    #[test]
    fn batches_split_and_long_utterances() {
        let engine = CpuEngine::new(2).unwrap();
        let flags = UpdateFlags::default();
        let lens = [BATCH_FRAMES - 3, 5, BATCH_FRAMES + 7, 2];
        let total: usize = lens.iter().sum();
        let data = frames(total, 1.0);
        let mut acc = GlobalAccStats::new(&engine, &gmm(), flags).unwrap();
        let mut t = 0;
        for (u, &n) in lens.iter().enumerate() {
            let out = acc
                .add_utterance(
                    &format!("u{u}"),
                    &data[2 * t..2 * (t + n)],
                    n,
                    2,
                    None,
                    None,
                )
                .unwrap();
            assert_eq!(out, UttOutcome::Done { weight: n as f64 });
            t += n;
        }
        let like = acc.take_like().unwrap();
        let got = acc.into_diag().unwrap();
        let mut one = ModelAccumulators::zeros(&gmm(), augment(flags));
        let mut lm = engine.load(&gmm()).unwrap();
        let want = lm
            .accumulate(FrameBatch::new(&data, 2), FrameTargets::Global, &mut one)
            .unwrap();
        // f32 sub-block sums round differently at batch edges (see above).
        assert!((like - want).abs() < 1e-6 * want.abs(), "{like} vs {want}");
        let occ: f64 = got.occupancy.iter().sum();
        assert!(
            (occ - total as f64).abs() < 1e-6 * total as f64,
            "{occ} of {total}"
        );
        close(&got.occupancy, &one.states[0].occupancy, 4e-6);
        close(&got.mean_accs, &one.states[0].mean_acc, 4e-6);
    }

    /// Owned utterances wait and are copied in together; a borrowed one
    /// after them must still come after them. Per-frame weights make the
    /// statistics depend on the frame order, so mixing owned and borrowed
    /// inputs must give the bits of all borrowed.
    #[test]
    fn owned_and_borrowed_utterances_keep_their_order() {
        let engine = CpuEngine::new(2).unwrap();
        let flags = UpdateFlags::default();
        let lens = [3usize, 40, 1, 17, 9, 250];
        let run = |owned: &dyn Fn(usize) -> bool| {
            let mut acc = GlobalAccStats::new(&engine, &gmm(), flags).unwrap();
            for (u, &n) in lens.iter().enumerate() {
                let f = frames(n, u as f32);
                let w: Vec<f32> = (0..n).map(|t| ((t * 7 + u) % 5) as f32 * 0.25).collect();
                let feats = if owned(u) {
                    UttFeats::Owned(f.clone())
                } else {
                    UttFeats::Borrowed(&f)
                };
                acc.add_utterance("u", feats, n, 2, Some(&w), None).unwrap();
            }
            let like = acc.take_like().unwrap();
            (like, acc.into_diag().unwrap())
        };
        let borrowed = run(&|_| false);
        let patterns: [&dyn Fn(usize) -> bool; 3] = [&|u| u % 2 == 0, &|u| u != 3, &|_| true];
        for pattern in patterns {
            let mixed = run(pattern);
            assert_eq!(mixed.0.to_bits(), borrowed.0.to_bits());
            assert_eq!(mixed.1.mean_accs, borrowed.1.mean_accs);
            assert_eq!(mixed.1.var_accs, borrowed.1.var_accs);
        }
        // The frame order matters here: reversed utterances differ.
        let mut acc = GlobalAccStats::new(&engine, &gmm(), flags).unwrap();
        for (u, &n) in lens.iter().enumerate().rev() {
            let w: Vec<f32> = (0..n).map(|t| ((t * 7 + u) % 5) as f32 * 0.25).collect();
            let f = frames(n, (lens.len() - 1 - u) as f32);
            acc.add_utterance("u", f, n, 2, Some(&w), None).unwrap();
        }
        acc.take_like().unwrap();
        assert_ne!(acc.into_diag().unwrap().mean_accs, borrowed.1.mean_accs);
    }

    /// Global statistics (diagonal, full, with per-frame weights) of
    /// utterances filling several batches, one longer than a batch, some
    /// parts of a mapped archive (whose last batches shrink,
    /// [`batch_limit`]): on 1, 2 and 3 devices (CPU partitions of a
    /// multi-engine) the same bits.
    #[test]
    fn statistics_are_the_same_bits_on_any_number_of_devices() {
        use crate::bench::random::{self, Rng};
        use crate::engine::test_engines::GpuLike;
        use crate::engine::MultiEngine;
        let parts = |n: usize, lend: bool| {
            let p = (0..n)
                .map(|_| {
                    if lend {
                        Box::new(GpuLike::lending()) as Box<dyn Engine>
                    } else {
                        Box::new(CpuEngine::new(1).unwrap()) as Box<dyn Engine>
                    }
                })
                .collect();
            MultiEngine::new(p).unwrap()
        };
        let mut rng = Rng::new(5);
        let mut lens: Vec<usize> = (0..300).map(|_| rng.int(1, 2_000)).collect();
        lens.insert(100, BATCH_FRAMES + 999);
        let total: usize = lens.iter().sum();
        let d = 2;
        let data = random::uneven_features(&mut rng, total, d, 2.0);
        let weights: Vec<f32> = (0..total).map(|t| ((t * 7) % 5) as f32 * 0.25).collect();
        let (_dir, shared) = mapped_archive(&data, &lens, d);
        for kind in [CovKind::Diagonal, CovKind::Full] {
            let model = random::model(&mut rng, &[4], d, kind);
            for weighted in [false, true] {
                let run = |engine: &dyn Engine| {
                    let flags = UpdateFlags::default();
                    let mut acc = GlobalAccStats::new(engine, &model, flags).unwrap();
                    let mut t = 0;
                    let mut like = 0.0;
                    for (u, &n) in lens.iter().enumerate() {
                        let rows = &data[t * d..(t + n) * d];
                        let w = weighted.then(|| &weights[t..t + n]);
                        // Owned utterances and parts of the archive wait
                        // to be gathered; every third is borrowed, copied
                        // at once between them.
                        let f: UttFeats<'_> = match u % 3 {
                            0 => rows.into(),
                            1 => rows.to_vec().into(),
                            _ => shared[u].clone().into(),
                        };
                        acc.add_utterance(&format!("u{u}"), f, n, d, w, None)
                            .unwrap();
                        t += n;
                        // A settle between batches (a tool's per-speaker
                        // likelihood, HERest's per-file one).
                        if u == 150 {
                            like += acc.take_like().unwrap();
                        }
                    }
                    let end = acc.take_like().unwrap();
                    let like = (like + end).to_bits();
                    let s = acc.accs.states[0].clone();
                    let b = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    (like, b(&s.occupancy), b(&s.mean_acc), b(&s.var_acc))
                };
                let want = run(&parts(1, false));
                for (n, lend) in [(2, false), (3, false), (1, true), (2, true), (3, true)] {
                    assert!(
                        run(&parts(n, lend)) == want,
                        "{kind:?} weighted={weighted}: {n} devices, lending {lend}"
                    );
                }
            }
        }
    }

    /// `lens`-frame utterances of `data` written as a binary archive and
    /// read back as parts of its map (the folder keeps the file).
    pub(crate) fn mapped_archive(
        data: &[f32],
        lens: &[usize],
        d: usize,
    ) -> (tempfile::TempDir, Vec<crate::train::prefetch::Features>) {
        use amtool_formats::kaldi::matrix::Matrix;
        use amtool_formats::kaldi::table::TableWriter;
        let dir = tempfile::tempdir().unwrap();
        let spec = format!("ark:{}", dir.path().join("f.ark").display());
        let mut w = TableWriter::<Matrix<f32>>::open(&spec).unwrap();
        let mut t = 0;
        for (u, &n) in lens.iter().enumerate() {
            let m = Matrix::from_vec(n, d, data[t * d..(t + n) * d].to_vec()).unwrap();
            w.write(&format!("u{u}"), &m).unwrap();
            t += n;
        }
        w.close().unwrap();
        let mut r = crate::train::prefetch::SharedFeats::open(&spec).unwrap();
        let mut feats = Vec::new();
        while let Some((_, f)) = r.next_entry().unwrap() {
            assert!(matches!(f, crate::train::prefetch::Features::Shared(_)));
            feats.push(f);
        }
        (dir, feats)
    }

    /// What `--gselect` computed on the host before the engines took it
    /// over (Kaldi's loop): every component's log-likelihoods from the
    /// engine, Kaldi's float softmax over the selected ones, × weight, and
    /// `AccumulateForComponent` in f64, frame by frame. Returns the
    /// accumulators and Σ of the utterances' float likelihoods.
    fn host_gselect(
        engine: &CpuEngine,
        model: &AcousticModel,
        utts: &[(Vec<f32>, Vec<f32>, Vec<Vec<i32>>)],
    ) -> (GmmAccumulator, f64) {
        let (d, m) = (model.dim, model.states[0].num_components());
        let mut lm = engine.load(model).unwrap();
        let mut acc = ModelAccumulators::zeros(model, UpdateFlags::default()).states[0].clone();
        let v = acc.var_acc.len() / m;
        let mut like = 0f64;
        for (feats, weights, gselect) in utts {
            let frames = gselect.len();
            let mut ll = vec![0f32; frames * m];
            lm.component_loglikes(0, FrameBatch::new(feats, d), &mut ll)
                .unwrap();
            let mut file_like = 0f32;
            for (t, sel) in gselect.iter().enumerate() {
                let w = weights[t];
                if w == 0.0 {
                    continue;
                }
                let mut p: Vec<f32> = sel.iter().map(|&g| ll[t * m + g as usize]).collect();
                let max = p.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0f32;
                for x in p.iter_mut() {
                    *x = (*x - max).exp();
                    sum += *x;
                }
                for x in p.iter_mut() {
                    *x *= 1.0 / sum;
                }
                file_like += w * (max + sum.ln());
                let xd: Vec<f64> = feats[t * d..(t + 1) * d]
                    .iter()
                    .map(|&x| x as f64)
                    .collect();
                for (&g, &pg) in sel.iter().zip(&p) {
                    let (g, post) = (g as usize, (pg * w) as f64);
                    acc.occupancy[g] += post;
                    for (a, &x) in acc.mean_acc[g * d..(g + 1) * d].iter_mut().zip(&xd) {
                        *a += post * x;
                    }
                    let var = &mut acc.var_acc[g * v..(g + 1) * v];
                    match model.kind {
                        CovKind::Diagonal => {
                            for (a, &x) in var.iter_mut().zip(&xd) {
                                *a += post * x * x;
                            }
                        }
                        CovKind::Full => {
                            let mut k = 0;
                            for i in 0..d {
                                for j in 0..=i {
                                    var[k] += post * xd[i] * xd[j];
                                    k += 1;
                                }
                            }
                        }
                    }
                }
            }
            like += file_like as f64;
        }
        (acc, like)
    }

    /// The engines' Gaussian selection (`FrameTargets::Selected`, batches
    /// of many utterances) gives the host loop's statistics bit for bit on
    /// the CPU engine: the same float log-likelihoods and posteriors, and
    /// each statistic's f64 terms added in the same (frame) order.
    /// Selections of 1–6 components, repeats included; weights with zeros.
    #[test]
    fn gselect_statistics_are_the_host_loops_bit_for_bit() {
        use crate::bench::random::{self, Rng};
        for (kind, d, m) in [(CovKind::Diagonal, 5, 13), (CovKind::Full, 4, 9)] {
            let mut rng = Rng::new(7 + d as u64);
            let model = random::model(&mut rng, &[m], d, kind);
            let utts: Vec<(Vec<f32>, Vec<f32>, Vec<Vec<i32>>)> = [40usize, 1, 300, 9000, 17]
                .iter()
                .map(|&n| {
                    let feats = random::features(&mut rng, n, d);
                    let weights = (0..n)
                        .map(|_| [0.0, 1.0, 0.5, 2.25][rng.int(0, 3)])
                        .collect();
                    let gselect = (0..n)
                        .map(|_| {
                            (0..rng.int(1, 6))
                                .map(|_| rng.int(0, m - 1) as i32)
                                .collect()
                        })
                        .collect();
                    (feats, weights, gselect)
                })
                .collect();
            for threads in [1, 3] {
                let engine = CpuEngine::new(threads).unwrap();
                let (want, want_like) = host_gselect(&engine, &model, &utts);
                let mut acc = GlobalAccStats::new(&engine, &model, UpdateFlags::default()).unwrap();
                let mut weight = 0.0;
                for (u, (f, w, g)) in utts.iter().enumerate() {
                    let out = acc
                        .add_utterance(&format!("u{u}"), f, g.len(), d, Some(w), Some(g))
                        .unwrap();
                    let UttOutcome::Done { weight: uw } = out else {
                        panic!("{out:?}")
                    };
                    weight += uw;
                }
                let like = acc.take_like().unwrap();
                assert_eq!(acc.accs.states[0], want, "{kind:?}, {threads} threads");
                assert_eq!(acc.accs.total_frames, weight);
                // Kaldi sums each utterance's likelihood in float; the
                // engine sums frames in f64.
                assert!(
                    (like - want_like).abs() < 1e-5 * want_like.abs(),
                    "{like} vs {want_like}"
                );
            }
        }
    }

    #[test]
    fn per_utterance_problems_and_fatal_errors() {
        let engine = CpuEngine::new(1).unwrap();
        let mut g = GlobalAccStats::new(&engine, &gmm(), UpdateFlags::default()).unwrap();
        let f = frames(3, 0.0);
        assert!(matches!(
            g.add_utterance("u", &f, 3, 2, Some(&[1.0]), None).unwrap(),
            UttOutcome::Skipped(_)
        ));
        let bad = vec![vec![0], vec![3], vec![1]];
        let e = g
            .add_utterance("u", &f, 3, 2, None, Some(&bad))
            .unwrap_err();
        assert!(
            e.to_string().contains("frame 1") && e.to_string().contains("Gaussian 3"),
            "{e}"
        );
        let e = g.add_utterance("u", &f[..3], 1, 3, None, None).unwrap_err();
        assert!(e.to_string().contains("dimension 3"), "{e}");
        // Values that are not rows × cols: an error naming the utterance,
        // for queued (owned) and gselect inputs alike.
        let e = g
            .add_utterance("v", f[..5].to_vec(), 3, 2, None, None)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("utterance v: 5 feature values for 3 frames"),
            "{e}"
        );
        let all = vec![vec![0, 1, 2]; 3];
        let e = g
            .add_utterance("w", &f[..4], 3, 2, None, Some(&all))
            .unwrap_err();
        assert!(
            e.to_string().contains("utterance w: 4 feature values"),
            "{e}"
        );
    }
}
