//! The tensor-core E-step of one full-covariance GMM over all frames
//! (`FrameTargets::Global`: `fgmm-global-acc-stats`, the `estep_fullcov`
//! benchmark): the host half of `kernels/estep_fullcov.cu`.
//!
//! Scores L = Z·W and statistics S = Γᵀ·Z are two GEMMs on the tensor
//! cores, every operand split into two FP16 numbers (three products, FP32
//! accumulation, as the diagonal E-step in `estep16.rs`). FP16's exponent
//! range is narrow, so feature dimension d is scaled by an exact power of
//! two 2^e_d per chunk ([`exponents`]: from the largest |x_d| of the chunk,
//! taken on the host while it is copied, and the largest |w_k| of the model),
//! and the model's row for z_k = x_a x_b by 2^−(e_a+e_b): the products are
//! unchanged. A chunk whose values are not finite, or whose scaled operands
//! would not fit FP16, takes the FP32 kernels instead.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};

use super::{driver_err, CudaEngine, Kernels};
use crate::{Error, Result};

/// The fewest Gaussians for which the tensor-core E-step is used by
/// default: its tiles are 128 Gaussians wide (fewer are padded).
pub const MIN_GAUSSIANS: usize = 64;
/// The largest dimension the kernels are compiled for (their `FCMAXD`).
pub const MAX_DIM: usize = 96;
/// Frames, Gaussians and statistics columns of a CTA tile (`FCB`).
const TILE: usize = 128;
/// Threads of `fc_score` and `fc_stats` (`FT`: 16 warps, 32 × 32 each).
const GEMM_THREADS: u32 = 512;
/// Frames per stage of `fc_stats` (`FSF`): its ranges are multiples.
const STATS_STAGE: usize = 64;
/// The longest range of frames one `fc_stats` CTA sums in FP32.
const MAX_RANGE: usize = 4096;
/// The largest |z'| and |w'| after scaling (FP16 holds up to 65504).
const MAX_SCALED_LOG2: f64 = 15.0;

/// Length of z without its constant: D + D(D+1)/2.
fn terms(dim: usize) -> usize {
    dim + dim * (dim + 1) / 2
}

/// k-steps of 16 of the scores (`FKS`).
fn score_steps(dim: usize) -> usize {
    terms(dim).div_ceil(16)
}

/// Statistics columns, padded to the tile (`FCP`).
fn stats_cols(dim: usize) -> usize {
    (terms(dim) + 1).div_ceil(TILE) * TILE
}

/// Row stride of an x tile in the kernels (`XS`).
fn x_stride(dim: usize) -> usize {
    (dim + 2) | 1
}

/// Dynamic shared memory of `fc_score` and `fc_stats` in bytes (the layouts
/// at the top of those kernels).
pub fn smem(dim: usize) -> (usize, usize) {
    let uint4 = 16;
    let score = 2 * (2 * 8 * 64 + 2 * 16 * 32) * uint4
        + TILE * x_stride(dim) * 4
        + MAX_DIM * 4
        + 16 * score_steps(dim) * 2;
    let stats = 2 * (4 * 8 * 64 + 4 * 16 * 32) * uint4
        + 2 * STATS_STAGE * x_stride(dim) * 4
        + MAX_DIM * 4
        + TILE * 2;
    (score, stats)
}

/// Whether the kernels exist for this dimension.
pub fn fits(dim: usize) -> bool {
    (1..=MAX_DIM).contains(&dim)
}

/// The dimensions (a, b) of scoring position k (z_k = x_a x_b; index `dim`
/// stands for the constant 1): the block-scoring order without the constant
/// ([`super::compile::scoring_z_order`]).
pub fn score_pairs(dim: usize) -> Vec<(usize, usize)> {
    let mut natural = Vec::with_capacity(terms(dim));
    natural.extend((0..dim).map(|i| (i, dim)));
    for i in 0..dim {
        natural.extend((0..=i).map(|j| (i, j)));
    }
    let order = super::compile::scoring_z_order(dim, crate::model::CovKind::Full);
    order[..terms(dim)].iter().map(|&k| natural[k]).collect()
}

/// The per-dimension exponents e_d for a chunk whose largest |x_d| are
/// `xmax`, against a model whose largest |w_k| per scoring position are
/// `wmax` (positions' dimensions `pairs`, [`score_pairs`]); `None` when a
/// value is not finite or the scaled operands would not fit FP16.
///
/// Each dimension goes to [2^−½, 2^½) of its largest magnitude, then all by
/// a common 2^c that puts a pair's |z'| near the square root of the largest
/// product |z_k w_k| (and so its |w'| as well): the absolute error of the
/// split operands is then smallest.
pub fn exponents(xmax: &[f32], wmax: &[f32], pairs: &[(usize, usize)]) -> Option<Vec<i32>> {
    let d = xmax.len();
    if wmax.len() != pairs.len()
        || xmax.iter().chain(wmax).any(|v| !v.is_finite())
        || pairs.iter().any(|&(a, b)| a > d || b > d)
    {
        return None;
    }
    let xm = |i: usize| if i < d { f64::from(xmax[i]) } else { 1.0 };
    let largest = pairs
        .iter()
        .zip(wmax)
        .map(|(&(a, b), &w)| xm(a) * xm(b) * f64::from(w))
        .fold(0.0, f64::max);
    if largest > (2.0 * MAX_SCALED_LOG2).exp2() {
        return None;
    }
    let shift = if largest > 0.0 {
        (0.25 * largest.log2()).round()
    } else {
        0.0
    };
    let mut e = Vec::with_capacity(d);
    for &x in xmax {
        let base = if x > 0.0 {
            -f64::from(x).log2().round()
        } else {
            0.0
        };
        let v = base + shift;
        if v.abs() > 100.0 {
            return None;
        }
        e.push(v as i32);
    }
    let ex = |i: usize| if i < d { e[i] } else { 0 };
    let limit = MAX_SCALED_LOG2.exp2();
    for (&(a, b), &w) in pairs.iter().zip(wmax) {
        let s = f64::from(ex(a) + ex(b)).exp2();
        if xm(a) * xm(b) * s > limit || f64::from(w) / s > limit {
            return None;
        }
    }
    Some(e)
}

/// Per-dimension multipliers 2^e_d passed to the kernels by value (their
/// `XScales`), so nothing is uploaded between chunks.
#[repr(C)]
#[derive(Clone, Copy)]
struct XScales([f32; MAX_DIM]);
// SAFETY: plain floats, laid out as the kernels' struct.
unsafe impl DeviceRepr for XScales {}

/// Buffers of one chunk size.
struct Bufs {
    frames: usize,
    /// Scores, `frames` × mpad.
    l: CudaSlice<f32>,
    /// γ' fragments, hi and lo halves: one u32 per frame and Gaussian.
    gam: CudaSlice<u32>,
    /// Σ log-likelihood per 16 frames.
    wll: CudaSlice<f64>,
    partial: CudaSlice<f32>,
}

/// State 0 of a full-covariance model, ready for the tensor-core E-step.
pub struct EstepFull {
    dim: usize,
    kz: usize,
    m: usize,
    mpad: usize,
    /// W (scoring order, constant left out, zero-padded to 16·FKS) per padded Gaussian.
    w32: CudaSlice<f32>,
    /// gconst per padded Gaussian (−1e30 for padding).
    gconst: CudaSlice<f32>,
    /// Largest |w_k| per scoring position, and the position's dimensions.
    wmax: Vec<f32>,
    pairs: Vec<(usize, usize)>,
    /// W' fragments and the exponents they were made with.
    wf: CudaSlice<u32>,
    wf_exp: Option<Vec<i32>>,
    bufs: Option<Bufs>,
}

impl EstepFull {
    /// `rows[g]` = Gaussian g's weights in the block-scoring order
    /// ([`super::compile::scoring_z_order`]), gconst last.
    pub fn new(stream: &Arc<CudaStream>, dim: usize, rows: &[Vec<f32>]) -> Result<Self> {
        let (t, m) = (terms(dim), rows.len());
        let kp = 16 * score_steps(dim);
        let mpad = m.div_ceil(TILE).max(1) * TILE;
        let mut w32 = vec![0f32; mpad * kp];
        let mut gconst = vec![-1e30f32; mpad];
        let mut wmax = vec![0f32; t];
        for (g, r) in rows.iter().enumerate() {
            w32[g * kp..g * kp + t].copy_from_slice(&r[..t]);
            gconst[g] = r[t];
            for (a, &v) in wmax.iter_mut().zip(&r[..t]) {
                *a = a.max(v.abs());
            }
        }
        let e = driver_err("uploading the model");
        Ok(EstepFull {
            dim,
            kz: t + 1,
            m,
            mpad,
            w32: stream.clone_htod(&w32).map_err(&e)?,
            gconst: stream.clone_htod(&gconst).map_err(&e)?,
            wmax,
            pairs: score_pairs(dim),
            wf: stream
                .alloc_zeros::<u32>(score_steps(dim) * mpad / 8 * 32 * 4)
                .map_err(&e)?,
            wf_exp: None,
            bufs: None,
        })
    }

    /// Device bytes a frame of a chunk takes (scores, posteriors, and its
    /// share of the log-likelihoods and partial sums).
    pub fn bytes_per_frame(&self) -> usize {
        8 * self.mpad + 1 + (4 * self.mpad * stats_cols(self.dim)).div_ceil(MAX_RANGE)
    }

    /// The exponents for a chunk whose largest |x_d| are `xmax`
    /// ([`exponents`] against this model); `None`: the FP32 kernels.
    pub fn exponents(&self, xmax: &[f32]) -> Option<Vec<i32>> {
        exponents(xmax, &self.wmax, &self.pairs)
    }

    fn ensure_bufs(&mut self, stream: &Arc<CudaStream>, npad: usize, partial: usize) -> Result<()> {
        if self
            .bufs
            .as_ref()
            .is_some_and(|b| b.frames >= npad && b.partial.len() >= partial)
        {
            return Ok(());
        }
        self.bufs = None;
        let e = driver_err("allocating the E-step buffers");
        // SAFETY (all four): every value a kernel reads is written first by
        // an earlier kernel of the same chunk (fc_score writes all npad rows
        // of L, fc_post all of gam and wll, fc_stats every partial element
        // fc_reduce reads).
        let l = unsafe { stream.alloc::<f32>(npad * self.mpad) }.map_err(&e)?;
        let gam = unsafe { stream.alloc::<u32>(npad * self.mpad) }.map_err(&e)?;
        let wll = unsafe { stream.alloc::<f64>(npad / 16) }.map_err(&e)?;
        let partial = unsafe { stream.alloc::<f32>(partial) }.map_err(&e)?;
        self.bufs = Some(Bufs {
            frames: npad,
            l,
            gam,
            wll,
            partial,
        });
        Ok(())
    }

    /// Enqueue the statistics of the `n` frames in `feats`, with exponents
    /// `exps` ([`exponents`](Self::exponents)), into `acc64` (this GMM's rows
    /// first) and Σ log-likelihood into `total`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn chunk(
        &mut self,
        eng: &CudaEngine,
        k: &Kernels,
        feats: &CudaView<'_, f32>,
        n: usize,
        exps: Vec<i32>,
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<()> {
        let kf = k.estep_full.as_ref().ok_or_else(|| {
            Error::Engine("no full-covariance E-step kernels for this model".into())
        })?;
        if n == 0 {
            return Ok(());
        }
        let s = &eng.stream;
        let (mpad, cols) = (self.mpad, stats_cols(self.dim));
        let npad = n.div_ceil(TILE) * TILE;
        let tiles = (cols / TILE) * (mpad / TILE);
        let want = n
            .div_ceil(MAX_RANGE)
            .max((2 * eng.multiprocessors()).div_ceil(tiles));
        let rf = npad.div_ceil(want).div_ceil(STATS_STAGE) * STATS_STAGE;
        let ranges = npad.div_ceil(rf);
        self.ensure_bufs(s, npad, ranges * mpad * cols)?;
        let mut xs = XScales([1.0; MAX_DIM]);
        for (v, &x) in xs.0.iter_mut().zip(&exps) {
            // Exact powers of two (|e| <= 100 keeps them normal floats).
            *v = 2f64.powi(x) as f32;
        }
        let (ni, npi, mpi, mi) = (n as i32, npad as i32, mpad as i32, self.m as i32);
        if self.wf_exp.as_ref() != Some(&exps) {
            let threads = score_steps(self.dim) * mpad / 8 * 32;
            let mut lb = s.launch_builder(&kf.wfrag);
            lb.arg(&self.w32).arg(&mpi).arg(&xs).arg(&mut self.wf);
            // SAFETY: argument types and counts match the kernel.
            unsafe { lb.launch(LaunchConfig::for_num_elems(threads as u32)) }
                .map_err(driver_err("fc_wfrag"))?;
            self.wf_exp = Some(exps);
        }
        let b = self
            .bufs
            .as_mut()
            .ok_or_else(|| Error::Engine("E-step buffers missing".into()))?;
        let block = (256, 1, 1);

        let mut lb = s.launch_builder(&kf.score);
        lb.arg(feats)
            .arg(&ni)
            .arg(&xs)
            .arg(&self.wf)
            .arg(&self.gconst)
            .arg(&mpi)
            .arg(&mut b.l);
        let cfg = LaunchConfig {
            grid_dim: ((mpad / TILE) as u32, (npad / TILE) as u32, 1),
            block_dim: (GEMM_THREADS, 1, 1),
            shared_mem_bytes: kf.smem_score as u32,
        };
        // SAFETY: as above; L holds npad × mpad floats.
        unsafe { lb.launch(cfg) }.map_err(driver_err("fc_score"))?;

        let mut lb = s.launch_builder(&kf.post);
        lb.arg(&b.l)
            .arg(&ni)
            .arg(&mi)
            .arg(&mpi)
            .arg(&mut b.gam)
            .arg(&mut b.wll);
        let cfg = LaunchConfig {
            grid_dim: ((npad / 16) as u32, 1, 1),
            block_dim: block,
            shared_mem_bytes: 0,
        };
        // SAFETY: as above.
        unsafe { lb.launch(cfg) }.map_err(driver_err("fc_post"))?;

        let nl = (npad / 16) as i32;
        let mut lb = s.launch_builder(&k.sum_f64);
        lb.arg(&b.wll).arg(&nl).arg(&mut *total);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: block,
            shared_mem_bytes: 0,
        };
        // SAFETY: as above.
        unsafe { lb.launch(cfg) }.map_err(driver_err("sum_f64"))?;

        let rfi = rf as i32;
        let mut lb = s.launch_builder(&kf.stats);
        lb.arg(feats)
            .arg(&ni)
            .arg(&npi)
            .arg(&rfi)
            .arg(&xs)
            .arg(&b.gam)
            .arg(&mpi)
            .arg(&mut b.partial);
        let cfg = LaunchConfig {
            grid_dim: ((cols / TILE) as u32, (mpad / TILE) as u32, ranges as u32),
            block_dim: (GEMM_THREADS, 1, 1),
            shared_mem_bytes: kf.smem_stats as u32,
        };
        // SAFETY: as above; partial holds ranges × mpad × cols floats.
        unsafe { lb.launch(cfg) }.map_err(driver_err("fc_stats"))?;

        let rg = ranges as i32;
        let mut lb = s.launch_builder(&kf.reduce);
        lb.arg(&b.partial)
            .arg(&rg)
            .arg(&mi)
            .arg(&mpi)
            .arg(&xs)
            .arg(&mut *acc64);
        // SAFETY: as above.
        unsafe { lb.launch(LaunchConfig::for_num_elems((self.m * self.kz) as u32)) }
            .map_err(driver_err("fc_reduce"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_follow_the_scoring_order() {
        // D = 2: natural z = [x0, x1, x0x0, x1x0, x1x1, 1]; scoring order
        // x1, x1x0, x1x1, x0, x0x0 (then the constant, left out here).
        assert_eq!(score_pairs(2), vec![(1, 2), (1, 0), (1, 1), (0, 2), (0, 0)]);
        assert_eq!(score_pairs(40).len(), 860);
    }

    #[test]
    fn exponents_put_both_operands_near_the_root_of_the_largest_product() {
        // x up to 8 in both dimensions; w of the pairs up to 2, linear 1.
        let pairs = score_pairs(2);
        let wmax = [1.0, 2.0, 2.0, 1.0, 2.0];
        let e = exponents(&[8.0, 8.0], &wmax, &pairs).unwrap();
        // Largest product 2 · 64 = 128: shift round(7/4) = 2, base −3.
        assert_eq!(e, vec![-1, -1]);
        for (&(a, b), &w) in pairs.iter().zip(&wmax) {
            let ex = |i: usize| if i < 2 { e[i] } else { 0 };
            let xa = if a < 2 { 8.0 } else { 1.0 };
            let xb = if b < 2 { 8.0 } else { 1.0 };
            let s = f64::from(ex(a) + ex(b)).exp2();
            assert!(xa * xb * s <= 16.0 && f64::from(w) / s <= 16.0, "{a} {b}");
        }
    }

    #[test]
    fn exponents_refuse_what_fp16_cannot_hold() {
        let pairs = score_pairs(1);
        assert!(exponents(&[f32::NAN], &[1.0, 1.0], &pairs).is_none());
        assert!(exponents(&[1.0], &[f32::INFINITY, 1.0], &pairs).is_none());
        // One product of 1e12 (> 2^30).
        assert!(exponents(&[1e6], &[1.0, 1.0], &pairs).is_none());
        assert!(exponents(&[1e3], &[1.0, 1.0], &pairs).is_some());
        // A zero dimension is left alone.
        assert_eq!(exponents(&[0.0], &[0.0, 0.0], &pairs), Some(vec![0]));
    }

    #[test]
    fn shared_memory_fits_an_h100_sm() {
        for d in 1..=MAX_DIM {
            let (score, stats) = smem(d);
            assert!(score <= 227 * 1024 && stats <= 227 * 1024, "D = {d}");
        }
        // D = 40: 64 KB of stages + 128 rows of 43 floats + scales + 864 pairs.
        assert_eq!(smem(40).0, 65_536 + 22_016 + 384 + 1_728);
        assert_eq!(stats_cols(40), 896);
        assert_eq!(score_steps(40), 54);
    }
}
