//! Maximum-likelihood update of diagonal-covariance mixtures: Kaldi's
//! `MleDiagGmmUpdate` (gmm/mle-diag-gmm.cc) and `MleAmDiagGmmUpdate`
//! (gmm/mle-am-diag-gmm.cc), on the neutral [`StateGmm`].
//!
//! Kaldi keeps the model in float and does the update in double; the
//! conversions between the two happen at the same places here, in the same
//! order (e.g. `inv_var = 1.0f / float(var)`, `means_invvars = float(mean) *
//! inv_var` in float, gconsts accumulated in float from double terms), so the
//! updated parameters are Kaldi's to the last bit (checked on the fixtures:
//! means, variances and gconsts of `gmm-est` output identical, weights within
//! one float ulp where many components are removed). The objective function
//! is computed in float with OpenBLAS's summation order ([`blas_sdot`]), so
//! the printed improvements are Kaldi's digits.
//!
//! This module does not print: warnings Kaldi would print are returned in the
//! report for the caller to log.

use crate::model::StateGmm;
use crate::stats::{GmmAccumulator, UpdateFlags};

/// `MleDiagGmmOptions`: Kaldi's option names are in the field docs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MleDiagOptions {
    /// `--min-gaussian-weight` (default 1e-5).
    pub min_gaussian_weight: f32,
    /// `--min-gaussian-occupancy` (default 10).
    pub min_gaussian_occupancy: f32,
    /// `--min-variance` (default 0.001).
    pub min_variance: f32,
    /// `--remove-low-count-gaussians` (default true).
    pub remove_low_count_gaussians: bool,
}

impl Default for MleDiagOptions {
    fn default() -> Self {
        MleDiagOptions {
            min_gaussian_weight: 1.0e-5,
            min_gaussian_occupancy: 10.0,
            min_variance: 0.001,
            remove_low_count_gaussians: true,
        }
    }
}

/// What one mixture's update did (Kaldi's out-parameters and warnings).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GmmUpdateReport {
    /// New minus old auxiliary function (Kaldi: `obj_change_out`, a float).
    pub obj_change: f32,
    /// Total occupancy of the mixture (Kaldi: `count_out`, a float).
    pub count: f32,
    /// Variance elements raised to the floor.
    pub floored_elements: usize,
    /// Gaussians with at least one floored element.
    pub floored_gaussians: usize,
    /// Components removed for too little data (indices before removal).
    pub removed: Vec<usize>,
    /// Messages Kaldi prints as WARNING lines, in Kaldi's order and words.
    pub warnings: Vec<String>,
}

/// How both updates treat a mixture's Gaussians of too little data: the
/// minimum occupancy and weight of one that is updated, whether the others
/// are removed, and the words of Kaldi's warning.
pub(crate) struct LowCount {
    pub remove: bool,
    pub min_occupancy: f32,
    pub min_weight: f32,
    pub dim: usize,
    /// What Kaldi calls the index where removal is off: `g` in the diagonal
    /// update, `i` in the full one.
    pub index_word: &'static str,
}

impl LowCount {
    pub(crate) fn new(
        remove: bool,
        min_occupancy: f32,
        min_weight: f32,
        dim: usize,
        index_word: &'static str,
    ) -> Self {
        LowCount {
            remove,
            min_occupancy,
            min_weight,
            dim,
            index_word,
        }
    }

    /// The loop of both updates over a mixture's Gaussians: each one's new
    /// weight is its share of the occupancy (1/n where there is none);
    /// those with occupancy and weight above the minima are updated by
    /// `update`, the others go to [`GmmUpdateReport::too_little_data`].
    /// `weights` get the new weights; `occ_sum` is the occupancies' sum.
    pub(crate) fn each_gaussian(
        &self,
        occupancy: &[f64],
        occ_sum: f64,
        weights: &mut [f64],
        report: &mut GmmUpdateReport,
        mut update: impl FnMut(usize, &mut GmmUpdateReport),
    ) {
        let n = occupancy.len();
        for (i, &occ) in occupancy.iter().enumerate() {
            let prob = if occ_sum > 0.0 {
                occ / occ_sum
            } else {
                1.0 / n as f64
            };
            if occ > self.min_occupancy as f64 && prob > self.min_weight as f64 {
                weights[i] = prob;
                update(i, report);
            } else if let Some(w) = report.too_little_data(self, n, i, prob, occ) {
                weights[i] = w;
            }
        }
    }
}

impl GmmUpdateReport {
    /// Notes a Gaussian's `floored` variance elements (none: nothing).
    pub(crate) fn note_floored(&mut self, floored: usize) {
        if floored != 0 {
            self.floored_elements += floored;
            self.floored_gaussians += 1;
        }
    }

    /// Gaussian `i` of `num_gauss`, of weight `prob` and occupancy `occ`,
    /// has too little data: it is removed (noted here) unless removal is
    /// off or it would be the last; then it is kept, and its floored
    /// weight returned. Kaldi's warning either way.
    pub(crate) fn too_little_data(
        &mut self,
        lc: &LowCount,
        num_gauss: usize,
        i: usize,
        prob: f64,
        occ: f64,
    ) -> Option<f64> {
        if lc.remove && self.removed.len() < num_gauss - 1 {
            self.warnings.push(format!(
                "Too little data - removing Gaussian (weight {:.6}, occupation count {:.6}, vector size {})",
                prob, occ, lc.dim
            ));
            self.removed.push(i);
            return None;
        }
        let because = match lc.remove {
            true => " it is the last Gaussian: i = ".to_string(),
            false => format!(" remove-low-count-gaussians == false: {} = ", lc.index_word),
        };
        self.warnings.push(format!(
            "Gaussian has too little data but not removing it because{because}{i}, occ = {}, weight = {}",
            crate::stats::fmt_g(occ),
            crate::stats::fmt_g(prob)
        ));
        Some(prob.max(lc.min_weight as f64))
    }
}

/// Totals over all mixtures of an acoustic model (`MleAmDiagGmmUpdate`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AmUpdateReport {
    /// Σ obj_change, accumulated in float as Kaldi does.
    pub obj_change: f32,
    /// Σ count, accumulated in float as Kaldi does.
    pub count: f32,
    pub floored_elements: usize,
    pub floored_gaussians: usize,
    pub removed_gaussians: usize,
    /// Gaussians in the model after the update.
    pub num_gaussians: usize,
    pub warnings: Vec<String>,
}

/// Kaldi's `DiagGmm::ComputeGconsts`: `gc = logf(w) − ½D log 2π` in float, then per
/// dimension `gc += ½ logf(iv) − ½ miv²/iv`, the terms in double, `gc` a float.
/// Returns an error for a NaN (Kaldi: "not a number in gconst computation");
/// +inf becomes −inf as in Kaldi.
pub fn diag_gconsts(
    weights: &[f32],
    means_invvars: &[f32],
    inv_vars: &[f32],
    dim: usize,
) -> Result<Vec<f32>, String> {
    let offset = (-0.5 * LOG_2PI * dim as f64) as f32;
    let mut out = Vec::with_capacity(weights.len());
    for (m, &w) in weights.iter().enumerate() {
        if w < 0.0 {
            return Err(format!("component {m} has negative weight {w}"));
        }
        // logf in float, as the fixtures show (Kaldi's `log` of a float resolves
        // to the float overload): bit-identical to Kaldi's stored gconsts.
        let mut gc = w.ln() + offset;
        let mi = &means_invvars[m * dim..(m + 1) * dim];
        let iv = &inv_vars[m * dim..(m + 1) * dim];
        for d in 0..dim {
            let (a, b) = (mi[d] as f64, iv[d] as f64);
            gc = (gc as f64 + (0.5 * (iv[d].ln() as f64) - 0.5 * a * a / b)) as f32;
        }
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

/// `M_LOG_2PI` as Kaldi defines it.
pub const LOG_2PI: f64 = 1.837_877_066_409_345_5;

/// Kaldi's `MlObjective(DiagGmm, AccumDiagGmm)` in float as Kaldi computes
/// it: statistics rounded to float, `occ·gconsts + tr(M Mᵀ) − ½ tr(S IVᵀ)`
/// with [`blas_sdot`] per row and float running sums.
pub fn diag_objective(gmm: &StateGmm, acc: &GmmAccumulator, dim: usize) -> f32 {
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
        let va = to32(&acc.var_acc);
        let mut t = 0.0f32;
        for r in 0..occ.len() {
            t += blas_sdot(
                &va[r * dim..(r + 1) * dim],
                &gmm.inv_vars[r * dim..(r + 1) * dim],
            );
        }
        obj = (obj as f64 - 0.5 * t as f64) as f32;
    }
    obj
}

/// Kaldi's `VectorBase<float>::Sum()`. Kaldi takes it as a BLAS dot
/// product with a one-element array of 1.0 at stride 0
/// (`cblas_sdot(n, v, 1, one, 0)`), so OpenBLAS's x86-64 `sdot` sums it on
/// its strided path: two elements at a time added in float, each pair
/// added into a double, then an odd last element; the total rounded to
/// float. (The products by 1.0 are exact, so no multiply-add changes it.)
pub fn kaldi_vector_sum(v: &[f32]) -> f32 {
    let pairs = v.chunks_exact(2);
    let odd = pairs.remainder();
    let mut sum = 0.0f64;
    for p in pairs {
        sum += (p[0] + p[1]) as f64;
    }
    for &x in odd {
        sum += x as f64;
    }
    sum as f32
}

/// Kaldi's `VectorBase<double>::Sum()`, as [`kaldi_vector_sum`] a dot
/// product at stride 0 (`cblas_ddot`), which OpenBLAS's x86-64 `ddot` sums
/// on its strided path: by blocks of four, elements 0 + 2 into one running
/// sum and 1 + 3 into another, the tail into the first, the two added last.
pub fn kaldi_vector_sum_f64(v: &[f64]) -> f64 {
    let quads = v.chunks_exact(4);
    let tail = quads.remainder();
    let (mut even, mut odd) = (0.0f64, 0.0f64);
    for q in quads {
        even += q[0] + q[2];
        odd += q[1] + q[3];
    }
    for &x in tail {
        even += x;
    }
    even + odd
}

/// A float dot product summed as OpenBLAS's x86-64 `sdot` kernel (the one
/// Kaldi's float `VecVec`/`TraceMatMat` call) sums it: blocks of 32 in four
/// 8-lane fused multiply-add accumulators, folded 256→128 bits, added
/// pairwise and horizontally; the tail's float products summed in double. Kaldi
/// computes its objective-function values this way; reproducing the order
/// makes the printed improvements agree to the last printed digit.
pub fn blas_sdot(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let n1 = n & !31;
    let mut dot = 0.0f32;
    if n1 > 0 {
        let mut acc = [[0.0f32; 8]; 4];
        let mut i = 0;
        while i < n1 {
            for (a, lanes) in acc.iter_mut().enumerate() {
                for (l, v) in lanes.iter_mut().enumerate() {
                    let k = i + a * 8 + l;
                    *v = x[k].mul_add(y[k], *v);
                }
            }
            i += 32;
        }
        let mut f = [[0.0f32; 4]; 4];
        for a in 0..4 {
            for l in 0..4 {
                f[a][l] = acc[a][l] + acc[a][l + 4];
            }
        }
        let mut s = [0.0f32; 4];
        for l in 0..4 {
            s[l] = (f[0][l] + f[1][l]) + (f[2][l] + f[3][l]);
        }
        dot = (s[0] + s[1]) + (s[2] + s[3]);
    }
    let mut tail = 0.0f64;
    for i in n1..n {
        tail += (y[i] * x[i]) as f64;
    }
    (tail + dot as f64) as f32
}

/// Removes components `sorted` (ascending) one at a time, renormalising the
/// weights after each as Kaldi's `DiagGmm::RemoveComponents(.., true)` does.
pub fn remove_components(gmm: &mut StateGmm, sorted: &[usize], vlen: usize, dim: usize) {
    for (k, &g0) in sorted.iter().enumerate() {
        let g = g0 - k;
        gmm.weights.remove(g);
        gmm.gconsts.remove(g);
        gmm.means_invvars.drain(g * dim..(g + 1) * dim);
        gmm.inv_vars.drain(g * vlen..(g + 1) * vlen);
        let sum = kaldi_vector_sum(&gmm.weights);
        let scale = (1.0 / sum as f64) as f32;
        for w in &mut gmm.weights {
            *w *= scale;
        }
    }
}

/// One mixture's MLE update (`MleDiagGmmUpdate`). `acc_flags` says which
/// statistics `acc` holds; `flags` which parameters to update (must be a
/// subset). On return `gmm` has the new parameters and fresh gconsts.
pub fn mle_diag_gmm_update(
    opts: &MleDiagOptions,
    acc: &GmmAccumulator,
    acc_flags: UpdateFlags,
    flags: UpdateFlags,
    dim: usize,
    gmm: &mut StateGmm,
) -> Result<GmmUpdateReport, String> {
    check_shapes(acc, acc_flags, flags, dim, dim, gmm)?;
    let occ_sum = kaldi_vector_sum_f64(&acc.occupancy);
    gmm.gconsts = diag_gconsts(&gmm.weights, &gmm.means_invvars, &gmm.inv_vars, dim)?;
    let obj_old = diag_objective(gmm, acc, dim);
    let mut normal = DiagNormal::of(gmm, dim);
    let old_means = normal.means.clone();
    let mut report = GmmUpdateReport::default();
    let low_count = LowCount::new(
        opts.remove_low_count_gaussians,
        opts.min_gaussian_occupancy,
        opts.min_gaussian_weight,
        dim,
        "g",
    );
    let mut weights = std::mem::take(&mut normal.weights);
    low_count.each_gaussian(
        &acc.occupancy,
        occ_sum,
        &mut weights,
        &mut report,
        |i, report| {
            let floored = normal.update(i, acc, acc_flags, flags, &old_means, opts.min_variance);
            report.note_floored(floored);
        },
    );
    normal.weights = weights;
    normal.copy_to(gmm, &old_means, flags);
    gmm.gconsts = diag_gconsts(&gmm.weights, &gmm.means_invvars, &gmm.inv_vars, dim)?;
    let obj_new = diag_objective(gmm, acc, dim);
    report.obj_change = obj_new - obj_old;
    report.count = occ_sum as f32;
    if !report.removed.is_empty() {
        remove_components(gmm, &report.removed, dim, dim);
        gmm.gconsts = diag_gconsts(&gmm.weights, &gmm.means_invvars, &gmm.inv_vars, dim)?;
    }
    Ok(report)
}

/// The flags asked for are among the accumulators', and the accumulators
/// and the GMM have the same Gaussians of dimension `dim`, with `vlen`
/// second-order values each (`dim` diagonal, `dim(dim+1)/2` full).
pub(crate) fn check_shapes(
    acc: &GmmAccumulator,
    acc_flags: UpdateFlags,
    flags: UpdateFlags,
    dim: usize,
    vlen: usize,
    gmm: &StateGmm,
) -> Result<(), String> {
    if (flags.means && !acc_flags.means) || (flags.variances && !acc_flags.variances) {
        return Err("flags in argument do not match the active accumulators".into());
    }
    let num_gauss = gmm.num_components();
    if acc.occupancy.len() != num_gauss {
        return Err(format!(
            "accumulator has {} components but the GMM has {num_gauss}",
            acc.occupancy.len()
        ));
    }
    if (acc_flags.means && acc.mean_acc.len() != num_gauss * dim)
        || (acc_flags.variances && acc.var_acc.len() != num_gauss * vlen)
        || gmm.means_invvars.len() != num_gauss * dim
        || gmm.inv_vars.len() != num_gauss * vlen
    {
        return Err(format!(
            "accumulator or GMM dimension does not match {dim} (Kaldi: dimension mismatch)"
        ));
    }
    Ok(())
}

/// Kaldi's `DiagGmmNormal`: weights, means and variances in double (the
/// means and variances `dim` a Gaussian, back to back).
struct DiagNormal {
    weights: Vec<f64>,
    means: Vec<f64>,
    vars: Vec<f64>,
    dim: usize,
}

impl DiagNormal {
    /// `DiagGmmNormal::CopyFromDiagGmm`.
    fn of(gmm: &StateGmm, dim: usize) -> Self {
        let vars: Vec<f64> = gmm.inv_vars.iter().map(|&v| 1.0 / v as f64).collect();
        let means = gmm
            .means_invvars
            .iter()
            .zip(&vars)
            .map(|(&m, &v)| m as f64 * v)
            .collect();
        DiagNormal {
            weights: gmm.weights.iter().map(|&w| w as f64).collect(),
            means,
            vars,
            dim,
        }
    }

    /// Gaussian `i`'s mean from Σγx and variance from Σγx² around it
    /// (around the old mean too where means are not updated), floored at
    /// `min_variance`; the number of elements floored.
    fn update(
        &mut self,
        i: usize,
        acc: &GmmAccumulator,
        acc_flags: UpdateFlags,
        flags: UpdateFlags,
        old_means: &[f64],
        min_variance: f32,
    ) -> usize {
        let dim = self.dim;
        let occ = acc.occupancy[i];
        let r = i * dim..(i + 1) * dim;
        if acc_flags.means || acc_flags.variances {
            let inv = 1.0 / occ;
            for (m, &x) in self.means[r.clone()]
                .iter_mut()
                .zip(&acc.mean_acc[r.clone()])
            {
                *m = x * inv;
            }
        }
        if !acc_flags.variances {
            return 0;
        }
        let inv = 1.0 / occ;
        let floor = min_variance as f64;
        let mut floored = 0;
        for k in r {
            let mut var = acc.var_acc[k] * inv;
            var += -1.0 * self.means[k] * self.means[k];
            if !flags.means {
                let diff = old_means[k] + -1.0 * self.means[k];
                var += 1.0 * diff * diff;
            }
            if var < floor {
                var = floor;
                floored += 1;
            }
            self.vars[k] = var;
        }
        floored
    }

    /// `DiagGmmNormal::CopyToDiagGmm(gmm, flags)`, float conversions as
    /// Kaldi; `old_means` are the means before the update.
    fn copy_to(&self, gmm: &mut StateGmm, old_means: &[f64], flags: UpdateFlags) {
        if flags.weights {
            for (w, &nw) in gmm.weights.iter_mut().zip(&self.weights) {
                *w = nw as f32;
            }
        }
        if flags.variances {
            for (iv, &v) in gmm.inv_vars.iter_mut().zip(&self.vars) {
                *iv = 1.0f32 / (v as f32);
            }
        }
        let means = match (flags.means, flags.variances) {
            (true, _) => &self.means,
            (false, true) => old_means,
            (false, false) => return,
        };
        for ((mi, &m), &iv) in gmm.means_invvars.iter_mut().zip(means).zip(&gmm.inv_vars) {
            *mi = (m as f32) * iv;
        }
    }
}

/// `MleAmDiagGmmUpdate` over every state of a model; the per-mixture values
/// are summed in float as Kaldi does.
pub fn mle_am_diag_update(
    opts: &MleDiagOptions,
    accs: &[GmmAccumulator],
    acc_flags: UpdateFlags,
    flags: UpdateFlags,
    dim: usize,
    states: &mut [StateGmm],
) -> Result<AmUpdateReport, String> {
    if accs.len() != states.len() {
        return Err(format!(
            "accumulators have {} pdfs but the model has {}",
            accs.len(),
            states.len()
        ));
    }
    let mut tot = AmUpdateReport::default();
    for (pdf, (acc, gmm)) in accs.iter().zip(states.iter_mut()).enumerate() {
        let r = mle_diag_gmm_update(opts, acc, acc_flags, flags, dim, gmm)
            .map_err(|e| format!("pdf {pdf}: {e}"))?;
        tot.obj_change += r.obj_change;
        tot.count += r.count;
        tot.floored_elements += r.floored_elements;
        tot.floored_gaussians += r.floored_gaussians;
        tot.removed_gaussians += r.removed.len();
        tot.warnings.extend(r.warnings);
    }
    tot.num_gaussians = states.iter().map(|s| s.num_components()).sum();
    Ok(tot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Kaldi's float `Sum()` adds pairs in float before the double sum:
    /// 1 + 1e-8 and −1 + 1e-8 both round to ±1 in float, so the pairs
    /// cancel exactly (a sequential double sum keeps 2e-8), and an odd last
    /// element is added to the double sum on its own.
    #[test]
    fn float_sum_adds_pairs_in_float_as_openblas_strided_sdot() {
        assert_eq!(kaldi_vector_sum(&[1.0, 1e-8, -1.0, 1e-8]), 0.0);
        assert_eq!(kaldi_vector_sum(&[1.0, 1e-8, -1.0]), 0.0);
        assert_eq!(kaldi_vector_sum(&[1e-8, 1e-8, 1.0]), 1.0);
        assert_eq!(kaldi_vector_sum(&[]), 0.0);
        let v: Vec<f32> = (0..9).map(|i| 0.1 * i as f32).collect();
        let pairs: f64 = v.chunks(2).map(|p| p.iter().sum::<f32>() as f64).sum();
        assert_eq!(kaldi_vector_sum(&v), pairs as f32);
    }

    /// Kaldi's double `Sum()` keeps two running sums (elements 0, 2 and
    /// 1, 3 of each block of four; the tail in the first): 1e16 and −1e16
    /// meet in one sum and cancel, leaving both ones (a sequential sum
    /// loses the first one to rounding).
    #[test]
    fn double_sum_keeps_two_running_sums_as_openblas_strided_ddot() {
        let v = [1e16, 1.0, -1e16, 1.0];
        assert_eq!(kaldi_vector_sum_f64(&v), 2.0);
        assert_eq!(v.iter().fold(0.0, |a, b| a + b), 1.0);
        assert_eq!(kaldi_vector_sum_f64(&[1e16, 1.0, -1e16, 1.0, 0.5]), 2.5);
        assert_eq!(kaldi_vector_sum_f64(&[]), 0.0);
    }

    /// A one-component, one-dimensional model from mean/var/weight.
    fn gmm_from(weights: &[f32], means: &[f32], vars: &[f32], dim: usize) -> StateGmm {
        let inv_vars: Vec<f32> = vars.iter().map(|v| 1.0 / v).collect();
        let means_invvars: Vec<f32> = means.iter().zip(&inv_vars).map(|(m, i)| m * i).collect();
        let gconsts = diag_gconsts(weights, &means_invvars, &inv_vars, dim).unwrap();
        StateGmm {
            gconsts,
            weights: weights.to_vec(),
            means_invvars,
            inv_vars,
        }
    }

    fn acc_from_frames(frames: &[(usize, f64, Vec<f64>)], m: usize, dim: usize) -> GmmAccumulator {
        let mut a = GmmAccumulator {
            occupancy: vec![0.0; m],
            mean_acc: vec![0.0; m * dim],
            var_acc: vec![0.0; m * dim],
        };
        for (c, w, x) in frames {
            a.occupancy[*c] += w;
            for d in 0..dim {
                a.mean_acc[c * dim + d] += w * x[d];
                a.var_acc[c * dim + d] += w * x[d] * x[d];
            }
        }
        a
    }

    #[test]
    fn gconst_of_standard_normal() {
        let g = gmm_from(&[1.0], &[0.0], &[1.0], 1);
        assert!((g.gconsts[0] as f64 + 0.5 * LOG_2PI).abs() < 1e-6);
    }

    #[test]
    fn update_gives_sample_mean_and_variance() {
        // 20 frames at 1.0 and 20 at 3.0 in one component: mean 2, variance 1.
        let mut frames = Vec::new();
        for _ in 0..20 {
            frames.push((0, 1.0, vec![1.0]));
            frames.push((0, 1.0, vec![3.0]));
        }
        let acc = acc_from_frames(&frames, 1, 1);
        let mut g = gmm_from(&[1.0], &[0.0], &[4.0], 1);
        let r = mle_diag_gmm_update(
            &MleDiagOptions::default(),
            &acc,
            UpdateFlags::default(),
            UpdateFlags::default(),
            1,
            &mut g,
        )
        .unwrap();
        assert_eq!(g.inv_vars, vec![1.0]);
        assert_eq!(g.means_invvars, vec![2.0]);
        assert_eq!(r.count, 40.0);
        assert!(r.obj_change > 0.0);
    }

    #[test]
    fn low_count_component_removed_and_weights_renormalised() {
        let mut frames = Vec::new();
        for t in 0..30 {
            frames.push((0, 1.0, vec![t as f64 / 10.0]));
        }
        frames.push((1, 1.0, vec![5.0]));
        let acc = acc_from_frames(&frames, 2, 1);
        let mut g = gmm_from(&[0.5, 0.5], &[1.0, 5.0], &[1.0, 1.0], 1);
        let r = mle_diag_gmm_update(
            &MleDiagOptions::default(),
            &acc,
            UpdateFlags::default(),
            UpdateFlags::default(),
            1,
            &mut g,
        )
        .unwrap();
        assert_eq!(r.removed, vec![1]);
        assert_eq!(g.num_components(), 1);
        assert_eq!(g.weights, vec![1.0]);
        assert!(r.warnings[0].starts_with("Too little data - removing Gaussian (weight 0.032258"));
    }

    #[test]
    fn last_gaussian_is_kept() {
        let acc = acc_from_frames(&[(0, 1.0, vec![0.5])], 1, 1);
        let mut g = gmm_from(&[1.0], &[0.0], &[1.0], 1);
        let r = mle_diag_gmm_update(
            &MleDiagOptions::default(),
            &acc,
            UpdateFlags::default(),
            UpdateFlags::default(),
            1,
            &mut g,
        )
        .unwrap();
        assert!(r.removed.is_empty());
        assert_eq!(
            r.warnings,
            vec!["Gaussian has too little data but not removing it because it is the last Gaussian: i = 0, occ = 1, weight = 1"]
        );
        // Parameters untouched.
        assert_eq!(g.means_invvars, vec![0.0]);
    }

    /// Accumulators of another shape than the GMM (Gaussians, dimension,
    /// or flags they lack) are errors saying which, never a panic.
    #[test]
    fn mismatched_accumulators_are_errors() {
        let acc = acc_from_frames(&[(0, 1.0, vec![0.5, 1.0])], 1, 2);
        let upd = |g: &mut StateGmm, acc_flags: UpdateFlags| {
            mle_diag_gmm_update(
                &MleDiagOptions::default(),
                &acc,
                acc_flags,
                UpdateFlags::default(),
                2,
                g,
            )
        };
        let two = gmm_from(&[0.5, 0.5], &[0.0, 0.0, 1.0, 1.0], &[1.0; 4], 2);
        let err = upd(&mut two.clone(), UpdateFlags::default()).unwrap_err();
        assert!(err.contains("1 components but the GMM has 2"), "{err}");
        let wide = gmm_from(&[1.0], &[0.0; 3], &[1.0; 3], 3);
        let err = upd(&mut wide.clone(), UpdateFlags::default()).unwrap_err();
        assert!(err.contains("dimension does not match 2"), "{err}");
        let one = gmm_from(&[1.0], &[0.0; 2], &[1.0; 2], 2);
        let no_vars = UpdateFlags {
            variances: false,
            ..UpdateFlags::default()
        };
        let err = upd(&mut one.clone(), no_vars).unwrap_err();
        assert!(
            err.contains("do not match the active accumulators"),
            "{err}"
        );
    }

    /// With removal off, a Gaussian of too little data is kept with its
    /// weight floored, in Kaldi's words (the diagonal update names the
    /// index `g`, the full one `i`); with it on, all but the last go.
    #[test]
    fn too_little_data_keeps_or_removes_in_kaldis_words() {
        let lc = |remove, index_word| LowCount::new(remove, 10.0, 1e-5, 3, index_word);
        let mut r = GmmUpdateReport::default();
        assert_eq!(
            r.too_little_data(&lc(false, "g"), 2, 1, 1e-7, 0.5),
            Some(1e-5f32 as f64)
        );
        assert_eq!(
            r.too_little_data(&lc(false, "i"), 2, 0, 0.25, 2.0),
            Some(0.25)
        );
        assert_eq!(
            r.warnings,
            vec![
                "Gaussian has too little data but not removing it because remove-low-count-gaussians == false: g = 1, occ = 0.5, weight = 1e-07",
                "Gaussian has too little data but not removing it because remove-low-count-gaussians == false: i = 0, occ = 2, weight = 0.25",
            ]
        );
        let mut r = GmmUpdateReport::default();
        assert_eq!(r.too_little_data(&lc(true, "g"), 2, 0, 0.125, 1.5), None);
        assert_eq!(
            r.too_little_data(&lc(true, "g"), 2, 1, 0.125, 1.5),
            Some(0.125)
        );
        assert_eq!(r.removed, vec![0]);
        assert_eq!(
            r.warnings,
            vec![
                "Too little data - removing Gaussian (weight 0.125000, occupation count 1.500000, vector size 3)",
                "Gaussian has too little data but not removing it because it is the last Gaussian: i = 1, occ = 1.5, weight = 0.125",
            ]
        );
    }

    #[test]
    fn variance_floor_counts_elements() {
        let mut frames = Vec::new();
        for _ in 0..20 {
            frames.push((0, 1.0, vec![1.0, 1.0]));
            frames.push((0, 1.0, vec![1.0, 3.0]));
        }
        let acc = acc_from_frames(&frames, 1, 2);
        let mut g = gmm_from(&[1.0], &[0.0, 0.0], &[1.0, 1.0], 2);
        let r = mle_diag_gmm_update(
            &MleDiagOptions::default(),
            &acc,
            UpdateFlags::default(),
            UpdateFlags::default(),
            2,
            &mut g,
        )
        .unwrap();
        assert_eq!((r.floored_elements, r.floored_gaussians), (1, 1));
        assert_eq!(g.inv_vars[0], 1.0f32 / 0.001f32);
    }

    #[test]
    fn means_only_keeps_variances() {
        let mut frames = Vec::new();
        for _ in 0..20 {
            frames.push((0, 1.0, vec![1.0]));
            frames.push((0, 1.0, vec![3.0]));
        }
        let acc = acc_from_frames(&frames, 1, 1);
        let mut g = gmm_from(&[1.0], &[0.0], &[4.0], 1);
        let flags = UpdateFlags {
            means: true,
            variances: false,
            weights: false,
            transitions: false,
        };
        mle_diag_gmm_update(
            &MleDiagOptions::default(),
            &acc,
            UpdateFlags::default(),
            flags,
            1,
            &mut g,
        )
        .unwrap();
        assert_eq!(g.inv_vars, vec![0.25]);
        assert_eq!(g.means_invvars, vec![0.5]);
    }

    #[test]
    fn flags_beyond_accumulators_are_an_error() {
        let acc = GmmAccumulator {
            occupancy: vec![1.0],
            mean_acc: vec![],
            var_acc: vec![],
        };
        let mut g = gmm_from(&[1.0], &[0.0], &[1.0], 1);
        let acc_flags = UpdateFlags {
            means: false,
            variances: false,
            weights: true,
            transitions: false,
        };
        assert!(mle_diag_gmm_update(
            &MleDiagOptions::default(),
            &acc,
            acc_flags,
            UpdateFlags::default(),
            1,
            &mut g
        )
        .is_err());
    }

    proptest! {
        /// Statistics generated from a known GMM (expected values, i.e. exact
        /// sufficient statistics) are mapped back to that GMM, and the
        /// auxiliary function never decreases.
        #[test]
        fn update_recovers_generating_gmm(
            m in 1usize..5, dim in 1usize..6, seed in 0u64..1000, n in 50.0f64..5000.0
        ) {
            let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut next = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); ((s >> 11) as f64) / ((1u64 << 53) as f64) };
            let raw: Vec<f64> = (0..m).map(|_| 0.2 + next()).collect();
            let tot: f64 = raw.iter().sum();
            let w: Vec<f64> = raw.iter().map(|r| r / tot).collect();
            let mu: Vec<f64> = (0..m * dim).map(|_| 4.0 * next() - 2.0).collect();
            let var: Vec<f64> = (0..m * dim).map(|_| 0.1 + 2.0 * next()).collect();
            let acc = GmmAccumulator {
                occupancy: w.iter().map(|w| w * n).collect(),
                mean_acc: (0..m * dim).map(|k| w[k / dim] * n * mu[k]).collect(),
                var_acc: (0..m * dim).map(|k| w[k / dim] * n * (var[k] + mu[k] * mu[k])).collect(),
            };
            let mut g = gmm_from(&vec![1.0 / m as f32; m], &vec![0.0; m * dim], &vec![1.0; m * dim], dim);
            let opts = MleDiagOptions { min_gaussian_occupancy: 0.0, ..Default::default() };
            let r = mle_diag_gmm_update(&opts, &acc, UpdateFlags::default(), UpdateFlags::default(), dim, &mut g).unwrap();
            prop_assert!(r.obj_change >= -1e-3 * n as f32 * 1e-3);
            for c in 0..m {
                prop_assert!((g.weights[c] as f64 - w[c]).abs() < 1e-6);
                for d in 0..dim {
                    let k = c * dim + d;
                    let v = 1.0 / g.inv_vars[k] as f64;
                    prop_assert!((v - var[k]).abs() < 1e-5 * var[k].max(1.0));
                    prop_assert!((g.means_invvars[k] as f64 * v - mu[k]).abs() < 1e-5);
                }
            }
            // A second update on the same stats changes nothing material.
            let r2 = mle_diag_gmm_update(&opts, &acc, UpdateFlags::default(), UpdateFlags::default(), dim, &mut g).unwrap();
            prop_assert!(r2.obj_change.abs() <= 1e-5 * n as f32 * dim as f32);
        }
    }
}
