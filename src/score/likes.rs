//! Log-likelihood arithmetic as Kaldi's `matrix/` and `gmm/` code does it in
//! float: `LogAdd`, `VectorBase::LogSumExp` (terms more than log(FLT_EPSILON)
//! below the maximum are dropped), `ApplySoftMax`, and the log-likelihoods of
//! a chosen subset of a mixture's Gaussians (`LogLikelihoodsPreselect`), which
//! the engines do not compute (they score whole mixtures).

use amtool_formats::kaldi::matrix::Matrix;

use crate::engine::{FrameBatch, LoadedModel, StateSubsets};
use crate::model::{AcousticModel, CovKind};
use crate::stats::mle_diag::blas_sdot;
use crate::{Error, Result};

/// Kaldi's `kMinLogDiffFloat` = log(FLT_EPSILON).
pub const MIN_LOG_DIFF_FLOAT: f32 = -15.942_385;

/// Kaldi's float `LogAdd(x, y)`.
pub fn log_add(x: f32, y: f32) -> f32 {
    let (big, diff) = if x < y { (y, x - y) } else { (x, y - x) };
    if diff >= MIN_LOG_DIFF_FLOAT {
        big + diff.exp().ln_1p()
    } else {
        big
    }
}

/// Kaldi's float `VectorBase::LogSumExp()`: the maximum plus the log of a
/// double sum of `exp(x − max)` over the terms within log(FLT_EPSILON) of it.
pub fn log_sum_exp(v: &[f32]) -> f32 {
    let mx = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if mx == f32::NEG_INFINITY {
        return mx;
    }
    let cutoff = mx + MIN_LOG_DIFF_FLOAT;
    let s: f64 = v
        .iter()
        .filter(|&&f| f >= cutoff)
        .map(|&f| (f - mx).exp() as f64)
        .sum();
    mx + (s.ln() as f32)
}

/// Kaldi's float `VectorBase::ApplySoftMax()`: turns `v` into posteriors
/// (float running sum, scaled by the float of `1.0 / sum`) and returns the
/// log of the sum of `exp(v)`.
pub fn apply_softmax(v: &mut [f32]) -> f32 {
    let mx = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for x in v.iter_mut() {
        *x = (*x - mx).exp();
        sum += *x;
    }
    let scale = (1.0 / sum as f64) as f32;
    for x in v.iter_mut() {
        *x *= scale;
    }
    mx + sum.ln()
}

/// Log-likelihoods (log weight included) of the Gaussians `ids` of state
/// `state` at frame `x`, in the order of `ids`: Kaldi's
/// `DiagGmm::LogLikelihoodsPreselect` and `FullGmm::LogLikelihoodsPreselect`
/// in Kaldi's float arithmetic (OpenBLAS `sdot` order, see
/// [`blas_sdot`]), so the results are Kaldi's to the bit on the fixtures:
/// - diagonal: `gconst + μΣ⁻¹·x − 0.5 (Σ⁻¹·x²)` (the last product in double);
/// - full: `gconst + μΣ⁻¹·x − tr(Σ⁻¹ · xxᵀ/2)` over the packed lower
///   triangles (off-diagonal terms once, diagonal halved).
///
/// An index outside the mixture is an error naming it.
pub fn preselect_loglikes(
    model: &AcousticModel,
    state: usize,
    x: &[f32],
    ids: &[i32],
) -> Result<Vec<f32>> {
    let st = &model.states[state];
    let d = model.dim;
    let v = model.inv_var_len();
    let n = st.num_components();
    // x² (diagonal) or xxᵀ with a halved diagonal (full), as Kaldi forms it.
    let sq: Vec<f32> = match model.kind {
        CovKind::Diagonal => x.iter().map(|&a| a * a).collect(),
        CovKind::Full => {
            let mut sq = Vec::with_capacity(v);
            for i in 0..d {
                for j in 0..=i {
                    let p = x[i] * x[j];
                    sq.push(if i == j { 0.5 * p } else { p });
                }
            }
            sq
        }
    };
    ids.iter()
        .map(|&g| {
            let gi = usize::try_from(g)
                .ok()
                .filter(|&gi| gi < n)
                .ok_or_else(|| {
                    Error::Mismatch(format!(
                        "Gaussian index {g} out of range (the model has {n} Gaussians)"
                    ))
                })?;
            let mi = &st.means_invvars[gi * d..(gi + 1) * d];
            let iv = &st.inv_vars[gi * v..(gi + 1) * v];
            let lin = st.gconsts[gi] + blas_sdot(mi, x);
            Ok(match model.kind {
                CovKind::Diagonal => (lin as f64 - 0.5 * blas_sdot(iv, &sq) as f64) as f32,
                CovKind::Full => lin - blas_sdot(&sq, iv),
            })
        })
        .collect()
}

/// `frames × states` log-likelihoods of one utterance (`frames × dim`
/// features, row-major) through an engine: gmm-compute-likes' matrix, or for
/// a one-state model the per-frame likelihoods of gmm-global-get-frame-likes.
pub fn state_loglikes(loaded: &mut dyn LoadedModel, feats: &[f32], dim: usize) -> Result<Vec<f32>> {
    check_dim(feats, dim)?;
    let frames = feats.len() / dim;
    let mut out = vec![0f32; frames * loaded.num_states()];
    loaded.state_loglikes(FrameBatch::new(feats, dim), &mut out)?;
    Ok(out)
}

/// State log-likelihoods of the frames of `utts` (each `frames × dim`,
/// row-major) in one engine call, into `out`: the utterances' rows follow
/// one another. `gathered` holds the frames for the call; both buffers are
/// resized and kept by the caller from batch to batch (a batch's output is
/// up to [`BATCH_VALUES`] floats, and new pages cost more than the copy).
pub fn state_loglikes_into<'a>(
    loaded: &mut dyn LoadedModel,
    utts: impl Iterator<Item = &'a [f32]>,
    dim: usize,
    gathered: &mut Vec<f32>,
    out: &mut Vec<f32>,
) -> Result<()> {
    gather_frames(utts, gathered);
    let n = gathered.len() / dim.max(1) * loaded.num_states();
    resize_kept(out, n);
    if n > 0 {
        loaded.state_loglikes(FrameBatch::new(gathered, dim), out)?;
    }
    Ok(())
}

/// [`state_loglikes_into`] of only each utterance's own states
/// (`subsets`, one entry per utterance of `utts`, in order): `out` gets
/// what [`LoadedModel::state_loglikes_subset`] gives.
pub fn state_subsets_into<'a>(
    loaded: &mut dyn LoadedModel,
    utts: impl Iterator<Item = &'a [f32]>,
    dim: usize,
    subsets: &StateSubsets,
    gathered: &mut Vec<f32>,
    out: &mut Vec<f32>,
) -> Result<()> {
    gather_frames(utts, gathered);
    check_dim(gathered, dim)?;
    resize_kept(out, subsets.output_len());
    loaded.state_loglikes_subset(FrameBatch::new(gathered, dim), subsets, out)
}

/// The frames of `utts` one after another in `into`.
fn gather_frames<'a>(utts: impl Iterator<Item = &'a [f32]>, into: &mut Vec<f32>) {
    into.clear();
    for u in utts {
        into.extend_from_slice(u);
    }
}

/// `v` resized to `n` values; its memory kept (a batch's output is up to
/// [`BATCH_VALUES`] floats, and new pages cost more than a copy).
fn resize_kept(v: &mut Vec<f32>, n: usize) {
    v.truncate(n);
    v.resize(n, 0.0);
}

/// `buf` cut into consecutive pieces of `rows × width` values, one for
/// each entry of `rows` (an utterance's rows of a batch's output).
pub fn split_rows(buf: &[f32], rows: impl Iterator<Item = usize>, width: usize) -> Vec<&[f32]> {
    let mut rest = buf;
    rows.map(|r| {
        let (this, next) = rest.split_at(r * width);
        rest = next;
        this
    })
    .collect()
}

/// Frames per engine call when scoring whole archives: utterances are queued
/// into batches of about this many frames (one call keeps a GPU busy).
pub const BATCH_FRAMES: usize = 32768;
/// Upper bound on `frames × states` log-likelihoods held for one batch (256 MB).
pub const BATCH_VALUES: usize = 1 << 26;

/// [`state_loglikes`] of several utterances (each `frames × dim`, row-major)
/// in one engine call; returns each utterance's `frames × states` block.
pub fn state_loglikes_batch(
    loaded: &mut dyn LoadedModel,
    utts: &[&[f32]],
    dim: usize,
) -> Result<Vec<Vec<f32>>> {
    let ns = loaded.num_states();
    let total: usize = utts.iter().map(|u| u.len()).sum();
    let mut all = Vec::with_capacity(total);
    for u in utts {
        check_dim(u, dim)?;
        all.extend_from_slice(u);
    }
    let ll = if total == 0 {
        Vec::new()
    } else {
        state_loglikes(loaded, &all, dim)?
    };
    let mut out = Vec::with_capacity(utts.len());
    let mut at = 0;
    for u in utts {
        let n = u.len() / dim * ns;
        out.push(ll[at..at + n].to_vec());
        at += n;
    }
    Ok(out)
}

/// Utterances waiting for one engine call: the scoring tools queue
/// utterances so that a GPU gets a batch, not one utterance, per call. Each
/// row is computed from its own frame alone, so batching changes no value.
#[derive(Default)]
pub struct UtteranceQueue {
    utts: Vec<(String, Matrix<f32>)>,
    frames: usize,
    /// The queued frames gathered for one engine call (kept for reuse).
    gathered: Vec<f32>,
}

impl UtteranceQueue {
    pub fn push(&mut self, key: String, feats: Matrix<f32>) {
        self.frames += feats.rows();
        self.utts.push((key, feats));
    }

    /// Whether the queue holds a batch's worth for `columns` values a frame.
    pub fn full(&self, columns: usize) -> bool {
        self.frames >= BATCH_FRAMES || self.frames * columns.max(1) >= BATCH_VALUES
    }

    pub fn is_empty(&self) -> bool {
        self.utts.is_empty()
    }

    /// State log-likelihoods of every queued utterance in one call (see
    /// [`state_loglikes_batch`]); empties the queue: each utterance with its
    /// `frames × states` rows, in queue order. Errors name the utterances.
    pub fn score_states(
        &mut self,
        loaded: &mut dyn LoadedModel,
        dim: usize,
    ) -> Result<Vec<(String, Matrix<f32>, Vec<f32>)>> {
        let utts = std::mem::take(&mut self.utts);
        self.frames = 0;
        let data: Vec<&[f32]> = utts.iter().map(|(_, f)| f.data()).collect();
        let ll = state_loglikes_batch(loaded, &data, dim).map_err(|e| in_utts(&utts, e))?;
        Ok(utts
            .into_iter()
            .zip(ll)
            .map(|((k, m), l)| (k, m, l))
            .collect())
    }

    /// [`Self::score_states`] into `out` (resized; its memory reused from
    /// batch to batch, so a large output is not paged in anew each time):
    /// empties the queue and returns each utterance's key and frame count,
    /// in queue order; its rows follow one another in `out`.
    pub fn score_states_into(
        &mut self,
        loaded: &mut dyn LoadedModel,
        dim: usize,
        out: &mut Vec<f32>,
    ) -> Result<Vec<(String, usize)>> {
        let utts = std::mem::take(&mut self.utts);
        self.frames = 0;
        for (_, m) in &utts {
            check_dim(m.data(), dim).map_err(|e| in_utts(&utts, e))?;
        }
        let frames = utts.iter().map(|(_, m)| m.data());
        state_loglikes_into(loaded, frames, dim, &mut self.gathered, out)
            .map_err(|e| in_utts(&utts, e))?;
        Ok(utts.into_iter().map(|(k, m)| (k, m.rows())).collect())
    }

    /// Component log-likelihoods of `state` (a global GMM's Gaussians) for
    /// every queued utterance in one call; empties the queue: each utterance
    /// with its `frames × components` rows, in queue order.
    pub fn score_components(
        &mut self,
        loaded: &mut dyn LoadedModel,
        model: &AcousticModel,
        state: usize,
    ) -> Result<Vec<(String, Matrix<f32>, Vec<f32>)>> {
        let utts = std::mem::take(&mut self.utts);
        self.frames = 0;
        let mut all = Vec::new();
        for (_, m) in &utts {
            all.extend_from_slice(m.data());
        }
        let ll = if all.is_empty() {
            Vec::new()
        } else {
            component_loglikes(loaded, model, state, &all, model.dim)
                .map_err(|e| in_utts(&utts, e))?
        };
        let g = model.states[state].num_components();
        let mut at = 0;
        Ok(utts
            .into_iter()
            .map(|(k, m)| {
                let n = m.rows() * g;
                let rows = ll[at..at + n].to_vec();
                at += n;
                (k, m, rows)
            })
            .collect())
    }
}

/// An engine error of a batch, naming its first and last utterance.
fn in_utts(utts: &[(String, Matrix<f32>)], e: Error) -> Error {
    let first = utts.first().map_or("", |u| u.0.as_str());
    let last = utts.last().map_or("", |u| u.0.as_str());
    Error::Mismatch(format!("utterances {first} .. {last}: {e}"))
}

/// `frames × components` log-likelihoods of the Gaussians of `state`.
pub fn component_loglikes(
    loaded: &mut dyn LoadedModel,
    model: &AcousticModel,
    state: usize,
    feats: &[f32],
    dim: usize,
) -> Result<Vec<f32>> {
    check_dim(feats, dim)?;
    let frames = feats.len() / dim;
    let mut out = vec![0f32; frames * model.states[state].num_components()];
    loaded.component_loglikes(state, FrameBatch::new(feats, dim), &mut out)?;
    Ok(out)
}

/// `FrameBatch::new` insists on whole rows of a non-zero dimension.
fn check_dim(feats: &[f32], dim: usize) -> Result<()> {
    if dim == 0 || feats.len() % dim != 0 {
        return Err(Error::Mismatch(format!(
            "{} feature values are not whole frames of dimension {dim}",
            feats.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::reference;

    #[test]
    fn log_add_and_log_sum_exp_agree_with_f64() {
        let v = [-3.0f32, -1.5, -40.0, 0.25];
        let r = reference::log_sum_exp(&v.map(|x| x as f64));
        assert!((log_sum_exp(&v) as f64 - r).abs() < 1e-6);
        let mut acc = f32::NEG_INFINITY;
        for &x in &v {
            acc = log_add(acc, x);
        }
        assert!((acc as f64 - r).abs() < 1e-6);
        assert_eq!(log_sum_exp(&[]), f32::NEG_INFINITY);
        let mut p = v;
        let tot = apply_softmax(&mut p);
        assert!((tot as f64 - r).abs() < 1e-6);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn batches_score_as_single_utterances() {
        let g = amtool_formats::kaldi::gmm::DiagGmm::from_bytes(
            &std::fs::read("testdata/kaldi/ubm.0.dubm").unwrap(),
        )
        .unwrap();
        let m = AcousticModel::from_diag_gmm(&g);
        let e = crate::engine::select(crate::engine::UseGpu::No, 1).unwrap();
        let mut l = e.load(&m).unwrap();
        let x: Vec<f32> = (0..m.dim * 7).map(|i| (i as f32 * 0.11).cos()).collect();
        let (a, b) = x.split_at(m.dim * 3);
        let batch = state_loglikes_batch(l.as_mut(), &[a, &[], b], m.dim).unwrap();
        assert_eq!(batch[0], state_loglikes(l.as_mut(), a, m.dim).unwrap());
        assert!(batch[1].is_empty());
        assert_eq!(batch[2], state_loglikes(l.as_mut(), b, m.dim).unwrap());
    }

    #[test]
    fn preselect_matches_the_reference_and_checks_indices() {
        let g = amtool_formats::kaldi::gmm::DiagGmm::from_bytes(
            &std::fs::read("testdata/kaldi/ubm.0.dubm").unwrap(),
        )
        .unwrap();
        let m = AcousticModel::from_diag_gmm(&g);
        let x: Vec<f32> = (0..m.dim).map(|i| (i as f32 * 0.37).sin()).collect();
        let all = reference::component_loglikes(&m, &m.states[0], &x);
        let got = preselect_loglikes(&m, 0, &x, &[5, 0, 63]).unwrap();
        for (g, i) in got.iter().zip([5usize, 0, 63]) {
            // Float arithmetic as Kaldi's: within float rounding of sums of ~80 terms.
            assert!((*g as f64 - all[i]).abs() <= 1e-5 * all[i].abs().max(1.0));
        }
        let e = preselect_loglikes(&m, 0, &x, &[64])
            .unwrap_err()
            .to_string();
        assert!(e.contains("64") && e.contains("out of range"), "{e}");
    }
}
