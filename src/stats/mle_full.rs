//! Maximum-likelihood update of full-covariance mixtures: Kaldi's
//! `MleFullGmmUpdate` (gmm/mle-full-gmm.cc) on the neutral [`StateGmm`]
//! (`means_invvars` = Σ⁻¹μ, `inv_vars` = Σ⁻¹ packed), including the
//! eigenvalue floor on each covariance
//! (`max(--variance-floor, max|eig| / --max-condition)`).
//!
//! Accumulators hold the uncentred Σγxxᵀ (Kaldi's in-memory form; its
//! *files* store the centred form, which the file conversion undoes).
//! Arithmetic is f64 with Kaldi's float conversions at the same places;
//! Kaldi inverts through LU and diagonalises with its own QL code, so
//! parameters agree with Kaldi's to float rounding, not bit for bit.

use crate::model::StateGmm;
use crate::stats::linalg::{apply_eig_floor, log_pos_def_det, max_abs_eig, sp_invert, sp_len};
use crate::stats::mle_diag::{
    blas_sdot, check_shapes, kaldi_vector_sum_f64, remove_components, GmmUpdateReport, LowCount,
    LOG_2PI,
};
use crate::stats::{GmmAccumulator, UpdateFlags};

/// `MleFullGmmOptions`: Kaldi's option names are in the field docs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MleFullOptions {
    /// `--min-gaussian-weight` (default 1e-5).
    pub min_gaussian_weight: f32,
    /// `--min-gaussian-occupancy` (default 100).
    pub min_gaussian_occupancy: f32,
    /// `--variance-floor`: minimum eigenvalue of a covariance (default 0.001).
    pub variance_floor: f32,
    /// `--max-condition` (default 1e4).
    pub max_condition: f32,
    /// `--remove-low-count-gaussians` (default true).
    pub remove_low_count_gaussians: bool,
}

impl Default for MleFullOptions {
    fn default() -> Self {
        MleFullOptions {
            min_gaussian_weight: 1.0e-5,
            min_gaussian_occupancy: 100.0,
            variance_floor: 0.001,
            max_condition: 1.0e4,
            remove_low_count_gaussians: true,
        }
    }
}

fn f32s_to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// Kaldi's `FullGmm::ComputeGconsts`:
/// `gc = log w − ½D log 2π − ½(log det Σ + (Σ⁻¹μ)ᵀ Σ (Σ⁻¹μ))`, with Σ the
/// float inverse of the stored Σ⁻¹.
pub fn full_gconsts(
    weights: &[f32],
    means_invvars: &[f32],
    inv_vars: &[f32],
    dim: usize,
) -> Result<Vec<f32>, String> {
    let offset = (-0.5 * LOG_2PI * dim as f64) as f32;
    let vlen = sp_len(dim);
    let mut out = Vec::with_capacity(weights.len());
    for (m, &w) in weights.iter().enumerate() {
        if w < 0.0 {
            return Err(format!("component {m} has negative weight {w}"));
        }
        let gc = w.ln() + offset;
        let icov = f32s_to_f64(&inv_vars[m * vlen..(m + 1) * vlen]);
        let cov: Vec<f64> = sp_invert(&icov, dim)
            .ok_or_else(|| format!("component {m}: inverse covariance is not positive definite"))?
            .iter()
            .map(|&x| (x as f32) as f64)
            .collect();
        let logdet = log_pos_def_det(&cov, dim)
            .ok_or_else(|| format!("component {m}: covariance is not positive definite"))?;
        let mi = f32s_to_f64(&means_invvars[m * dim..(m + 1) * dim]);
        let smi = crate::stats::linalg::sp_vec(&cov, dim, &mi);
        let vsv: f64 = smi.iter().zip(&mi).map(|(a, b)| a * b).sum();
        let mut gc = (gc as f64 - 0.5 * (logdet as f32 as f64 + vsv as f32 as f64)) as f32;
        if gc.is_nan() {
            return Err(format!(
                "at component {m}, not a number in gconst computation"
            ));
        }
        if gc.is_infinite() && gc > 0.0 {
            gc = -gc;
        }
        out.push(gc);
    }
    Ok(out)
}

/// Kaldi's `MlObjective(FullGmm, AccumFullGmm)` in float as Kaldi computes
/// it: `occ·gconsts` and `tr(M Mᵀ)` with OpenBLAS's `sdot` order, then per
/// component `obj −= ½ TraceSpSp(S, Σ⁻¹)` with Kaldi's loop (off-diagonal
/// terms `2.0 * a * b` in double, accumulated in float).
pub fn full_objective(gmm: &StateGmm, acc: &GmmAccumulator, dim: usize) -> f32 {
    let vlen = sp_len(dim);
    let to32 = |v: &[f64]| -> Vec<f32> { v.iter().map(|&x| x as f32).collect() };
    let occ = to32(&acc.occupancy);
    let mut obj = blas_sdot(&occ, &gmm.gconsts);
    if !acc.mean_acc.is_empty() {
        let ma = to32(&acc.mean_acc);
        let mut t = 0.0f32;
        for r in 0..occ.len() {
            t += blas_sdot(
                &ma[r * dim..(r + 1) * dim],
                &gmm.means_invvars[r * dim..(r + 1) * dim],
            );
        }
        obj += t;
    }
    if !acc.var_acc.is_empty() {
        for m in 0..occ.len() {
            let a = to32(&acc.var_acc[m * vlen..(m + 1) * vlen]);
            let b = &gmm.inv_vars[m * vlen..(m + 1) * vlen];
            let mut ans = 0.0f32;
            let mut k = 0;
            for row in 0..dim {
                for _col in 0..row {
                    ans = (ans as f64 + 2.0 * a[k] as f64 * b[k] as f64) as f32;
                    k += 1;
                }
                ans += a[k] * b[k];
                k += 1;
            }
            obj = (obj as f64 - 0.5 * ans as f64) as f32;
        }
    }
    obj
}

/// One full-covariance mixture's MLE update (`MleFullGmmUpdate`).
pub fn mle_full_gmm_update(
    opts: &MleFullOptions,
    acc: &GmmAccumulator,
    acc_flags: UpdateFlags,
    flags: UpdateFlags,
    dim: usize,
    gmm: &mut StateGmm,
) -> Result<GmmUpdateReport, String> {
    check_shapes(acc, acc_flags, flags, dim, sp_len(dim), gmm)?;
    let vlen = sp_len(dim);
    gmm.gconsts = full_gconsts(&gmm.weights, &gmm.means_invvars, &gmm.inv_vars, dim)?;
    let obj_old = full_objective(gmm, acc, dim);
    let occ_sum = kaldi_vector_sum_f64(&acc.occupancy);
    let mut normal = FullNormal::of(gmm, dim)?;
    let old_means = normal.means.clone();
    let mut report = GmmUpdateReport::default();
    let low_count = LowCount::new(
        opts.remove_low_count_gaussians,
        opts.min_gaussian_occupancy,
        opts.min_gaussian_weight,
        dim,
        "i",
    );
    let mut weights = std::mem::take(&mut normal.weights);
    low_count.each_gaussian(
        &acc.occupancy,
        occ_sum,
        &mut weights,
        &mut report,
        |i, report| {
            report.note_floored(normal.update(i, acc, acc_flags, flags, opts));
        },
    );
    normal.weights = weights;
    normal.copy_to(gmm, &old_means, flags, dim)?;
    gmm.gconsts = full_gconsts(&gmm.weights, &gmm.means_invvars, &gmm.inv_vars, dim)?;
    let obj_new = full_objective(gmm, acc, dim);
    report.obj_change = obj_new - obj_old;
    report.count = occ_sum as f32;
    if !report.removed.is_empty() {
        remove_components(gmm, &report.removed, vlen, dim);
        gmm.gconsts = full_gconsts(&gmm.weights, &gmm.means_invvars, &gmm.inv_vars, dim)?;
    }
    if report.floored_elements > 0 {
        report.warnings.push(format!(
            "{} variances floored in {} Gaussians.",
            report.floored_elements, report.floored_gaussians
        ));
    }
    Ok(report)
}

/// Kaldi's `FullGmmNormal`: weights, means and covariances in double.
struct FullNormal {
    weights: Vec<f64>,
    means: Vec<Vec<f64>>,
    /// Packed lower-triangular covariances.
    vars: Vec<Vec<f64>>,
}

impl FullNormal {
    /// `FullGmmNormal::CopyFromFullGmm`.
    fn of(gmm: &StateGmm, dim: usize) -> Result<Self, String> {
        let vlen = sp_len(dim);
        let num_gauss = gmm.num_components();
        let mut vars = Vec::with_capacity(num_gauss);
        let mut means = Vec::with_capacity(num_gauss);
        for m in 0..num_gauss {
            let icov = f32s_to_f64(&gmm.inv_vars[m * vlen..(m + 1) * vlen]);
            let cov = sp_invert(&icov, dim).ok_or_else(|| {
                format!("component {m}: inverse covariance is not positive definite")
            })?;
            let mi = f32s_to_f64(&gmm.means_invvars[m * dim..(m + 1) * dim]);
            means.push(crate::stats::linalg::sp_vec(&cov, dim, &mi));
            vars.push(cov);
        }
        Ok(FullNormal {
            weights: f32s_to_f64(&gmm.weights),
            means,
            vars,
        })
    }

    /// `FullGmmNormal::CopyToFullGmm(gmm, flags)`; `old_means` are the
    /// means before the update (kept where only variances are updated).
    fn copy_to(
        &self,
        gmm: &mut StateGmm,
        old_means: &[Vec<f64>],
        flags: UpdateFlags,
        dim: usize,
    ) -> Result<(), String> {
        let vlen = sp_len(dim);
        if flags.weights {
            for (w, &nw) in gmm.weights.iter_mut().zip(&self.weights) {
                *w = nw as f32;
            }
        }
        for i in 0..self.weights.len() {
            if flags.variances {
                // Kaldi copies the double covariance into the float inverse
                // covariance first, then inverts that in double (`InvertDouble`).
                let cov32: Vec<f64> = self.vars[i].iter().map(|&x| (x as f32) as f64).collect();
                let icov = sp_invert(&cov32, dim).ok_or_else(|| {
                    format!("component {i}: updated covariance is not positive definite")
                })?;
                for (dst, &x) in gmm.inv_vars[i * vlen..(i + 1) * vlen].iter_mut().zip(&icov) {
                    *dst = x as f32;
                }
                if !flags.means {
                    set_means_invvars(gmm, i, dim, &old_means[i]);
                }
            }
            if flags.means {
                set_means_invvars(gmm, i, dim, &self.means[i]);
            }
        }
        Ok(())
    }

    /// Gaussian `i`'s mean from Σγx and covariance from Σγxxᵀ around it
    /// (around the old mean too where means are not updated), its
    /// eigenvalues floored (`MleFullGmmUpdate`'s loop body); the number of
    /// eigenvalues floored.
    fn update(
        &mut self,
        i: usize,
        acc: &GmmAccumulator,
        acc_flags: UpdateFlags,
        flags: UpdateFlags,
        opts: &MleFullOptions,
    ) -> usize {
        let dim = self.means[i].len();
        let vlen = sp_len(dim);
        let occ = acc.occupancy[i];
        let mut oldmean = self.means[i].clone();
        if acc_flags.means {
            let inv = 1.0 / occ;
            for d in 0..dim {
                self.means[i][d] = acc.mean_acc[i * dim + d] * inv;
            }
        }
        if !acc_flags.variances {
            return 0;
        }
        let inv = 1.0 / occ;
        let mean = &self.means[i];
        let mut covar: Vec<f64> = acc.var_acc[i * vlen..(i + 1) * vlen]
            .iter()
            .map(|&x| x * inv)
            .collect();
        let mut k = 0;
        for a in 0..dim {
            for b in 0..=a {
                covar[k] += -1.0 * mean[a] * mean[b];
                k += 1;
            }
        }
        if !flags.means {
            for d in 0..dim {
                oldmean[d] += -1.0 * mean[d];
            }
            let mut k = 0;
            for a in 0..dim {
                for b in 0..=a {
                    covar[k] += oldmean[a] * oldmean[b];
                    k += 1;
                }
            }
        }
        let floor = (opts.variance_floor as f64)
            .max(max_abs_eig(&covar, dim) / opts.max_condition as f64) as f32;
        let floored = apply_eig_floor(&mut covar, dim, floor as f64);
        self.vars[i] = covar;
        floored
    }
}

/// `means_invvars[i] = float(Σ⁻¹_float · float(mean))`.
fn set_means_invvars(gmm: &mut StateGmm, i: usize, dim: usize, mean: &[f64]) {
    let vlen = sp_len(dim);
    let icov = f32s_to_f64(&gmm.inv_vars[i * vlen..(i + 1) * vlen]);
    let mean32: Vec<f64> = mean.iter().map(|&x| (x as f32) as f64).collect();
    let v = crate::stats::linalg::sp_vec(&icov, dim, &mean32);
    for (dst, x) in gmm.means_invvars[i * dim..(i + 1) * dim].iter_mut().zip(v) {
        *dst = x as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::linalg::{sp_index, sp_invert};
    use proptest::prelude::*;

    fn full_gmm(weights: &[f64], means: &[Vec<f64>], covs: &[Vec<f64>], dim: usize) -> StateGmm {
        let mut g = StateGmm {
            gconsts: vec![],
            weights: weights.iter().map(|&w| w as f32).collect(),
            means_invvars: vec![],
            inv_vars: vec![],
        };
        for (m, c) in means.iter().zip(covs) {
            let ic = sp_invert(c, dim).unwrap();
            let mi = crate::stats::linalg::sp_vec(&ic, dim, m);
            g.inv_vars.extend(ic.iter().map(|&x| x as f32));
            g.means_invvars.extend(mi.iter().map(|&x| x as f32));
        }
        g.gconsts = full_gconsts(&g.weights, &g.means_invvars, &g.inv_vars, dim).unwrap();
        g
    }

    #[test]
    fn gconst_matches_diagonal_formula() {
        // A diagonal full-covariance Gaussian has the diagonal gconst.
        let g = full_gmm(&[0.5], &[vec![1.0, -2.0]], &[vec![2.0, 0.0, 0.5]], 2);
        let d = crate::stats::mle_diag::diag_gconsts(&[0.5], &[0.5, -4.0], &[0.5, 2.0], 2).unwrap();
        assert!((g.gconsts[0] - d[0]).abs() < 1e-5);
    }

    proptest! {
        /// Exact statistics of a known full-covariance GMM give it back.
        #[test]
        fn update_recovers_generating_gmm(m in 1usize..4, dim in 1usize..5, seed in 1u64..1000) {
            let mut s = seed;
            let mut next = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); ((s >> 11) as f64) / ((1u64 << 53) as f64) };
            let n = 1000.0;
            let vlen = sp_len(dim);
            let raw: Vec<f64> = (0..m).map(|_| 0.2 + next()).collect();
            let tot: f64 = raw.iter().sum();
            let w: Vec<f64> = raw.iter().map(|r| r / tot).collect();
            let mut means = vec![]; let mut covs = vec![];
            let mut acc = GmmAccumulator { occupancy: vec![], mean_acc: vec![], var_acc: vec![] };
            for c in 0..m {
                let mu: Vec<f64> = (0..dim).map(|_| 4.0 * next() - 2.0).collect();
                let b: Vec<f64> = (0..dim * dim).map(|_| next() - 0.5).collect();
                let mut cov = vec![0.0; vlen];
                for i in 0..dim { for j in 0..=i {
                    let mut a = if i == j { 0.3 } else { 0.0 };
                    for k in 0..dim { a += b[i * dim + k] * b[j * dim + k]; }
                    cov[sp_index(i, j)] = a;
                }}
                let occ = w[c] * n;
                acc.occupancy.push(occ);
                acc.mean_acc.extend(mu.iter().map(|x| x * occ));
                for i in 0..dim { for j in 0..=i {
                    acc.var_acc.push(occ * (cov[sp_index(i, j)] + mu[i] * mu[j]));
                }}
                means.push(mu); covs.push(cov);
            }
            let unit: Vec<f64> = (0..vlen).map(|k| { let i = ((8 * k + 1) as f64).sqrt() as usize; let i = (i - 1) / 2; if sp_index(i, i) == k { 1.0 } else { 0.0 } }).collect();
            let mut g = full_gmm(&vec![1.0 / m as f64; m], &vec![vec![0.0; dim]; m], &vec![unit; m], dim);
            let opts = MleFullOptions { min_gaussian_occupancy: 0.0, ..Default::default() };
            let r = mle_full_gmm_update(&opts, &acc, UpdateFlags::default(), UpdateFlags::default(), dim, &mut g).unwrap();
            prop_assert!(r.obj_change > -1e-2);
            let truth = full_gmm(&w, &means, &covs, dim);
            for (a, b) in g.inv_vars.iter().zip(&truth.inv_vars) {
                prop_assert!((a - b).abs() <= 1e-3 * b.abs().max(1.0), "{} vs {}", a, b);
            }
            for (a, b) in g.means_invvars.iter().zip(&truth.means_invvars) {
                prop_assert!((a - b).abs() <= 1e-3 * b.abs().max(1.0));
            }
            for (a, b) in g.gconsts.iter().zip(&truth.gconsts) {
                prop_assert!((a - b).abs() <= 1e-3 * b.abs().max(1.0));
            }
        }
    }

    #[test]
    fn eigenvalue_floor_applies_max_condition() {
        // All data on a line: the covariance is singular; the floor makes it
        // invertible and is reported.
        let dim = 2;
        let mut acc = GmmAccumulator {
            occupancy: vec![0.0],
            mean_acc: vec![0.0; 2],
            var_acc: vec![0.0; 3],
        };
        for t in 0..200 {
            let x = [t as f64 / 100.0, t as f64 / 100.0];
            acc.occupancy[0] += 1.0;
            acc.mean_acc[0] += x[0];
            acc.mean_acc[1] += x[1];
            acc.var_acc[0] += x[0] * x[0];
            acc.var_acc[1] += x[1] * x[0];
            acc.var_acc[2] += x[1] * x[1];
        }
        let mut g = full_gmm(&[1.0], &[vec![0.0, 0.0]], &[vec![1.0, 0.0, 1.0]], dim);
        let r = mle_full_gmm_update(
            &MleFullOptions::default(),
            &acc,
            UpdateFlags::default(),
            UpdateFlags::default(),
            dim,
            &mut g,
        )
        .unwrap();
        assert_eq!((r.floored_elements, r.floored_gaussians), (1, 1));
        assert_eq!(r.warnings, vec!["1 variances floored in 1 Gaussians."]);
        assert!(g.gconsts[0].is_finite());
    }
}
