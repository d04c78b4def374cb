//! MAP adaptation of diagonal mixtures: Kaldi's `MapDiagGmmUpdate` and
//! `MapAmDiagGmmUpdate` (`gmm/mle-diag-gmm.cc`, `gmm/mle-am-diag-gmm.cc`),
//! as gmm-adapt-map runs them per speaker or per utterance.
//!
//! Per Gaussian i with occupancy γᵢ (Σγ over the state = γ), in double on the
//! natural parameters (`DiagGmmNormal`):
//! - weight: `(γᵢ + wᵢ τ_w) / (γ + τ_w)` (always computed; written only with `w`);
//! - mean (γᵢ > 0, `m`): `(Σγx + τ_m μ_old) / (γᵢ + τ_m)`;
//! - variance (γᵢ > 0, `v`): `E[x²] + μ² − 2μE[x]` around the new mean,
//!   interpolated with the old variance by `γᵢ/(τ_v + γᵢ)`;
//! then back to Kaldi's stored form (float) with new gconsts, and the
//! objective change is `MlObjective` after minus before, in float.

use crate::model::kaldi::{compute_diag_gconsts, diag_from_natural, DiagNatural};
use crate::model::StateGmm;
use crate::stats::mle_diag::diag_objective;
use crate::stats::{GmmAccumulator, UpdateFlags};

/// Kaldi's `MapDiagGmmOptions` (defaults as Kaldi's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MapOptions {
    /// `--mean-tau` (10).
    pub mean_tau: f32,
    /// `--variance-tau` (50).
    pub variance_tau: f32,
    /// `--weight-tau` (10).
    pub weight_tau: f32,
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions {
            mean_tau: 10.0,
            variance_tau: 50.0,
            weight_tau: 10.0,
        }
    }
}

/// `MapDiagGmmUpdate`: updates `gmm` (dimension `dim`) from `acc` (which must
/// hold the statistics `flags` needs: means for `m`, means and variances for
/// `v`). Returns (objective change, occupancy), both float as Kaldi's.
pub fn map_diag_update(
    opts: &MapOptions,
    acc: &GmmAccumulator,
    flags: UpdateFlags,
    gmm: &mut StateGmm,
    dim: usize,
) -> Result<(f32, f32), String> {
    let n = gmm.num_components();
    if acc.occupancy.len() != n
        || (flags.means && acc.mean_acc.len() != n * dim)
        || (flags.variances && acc.var_acc.len() != n * dim)
    {
        return Err(format!(
            "MAP update: the statistics ({} Gaussians) do not match the model ({n} Gaussians) or lack what --update-flags needs",
            acc.occupancy.len()
        ));
    }
    let occ_sum: f64 = acc.occupancy.iter().sum();
    compute_diag_gconsts(gmm, dim)?;
    let obj_old = diag_objective(gmm, acc, dim);
    let mut nat = DiagNatural::from_state(gmm);
    let (mt, vt, wt) = (
        opts.mean_tau as f64,
        opts.variance_tau as f64,
        opts.weight_tau as f64,
    );
    for i in 0..n {
        let occ = acc.occupancy[i];
        nat.weights[i] = (occ + nat.weights[i] * wt) / (occ_sum + wt);
        let row = i * dim..(i + 1) * dim;
        if occ > 0.0 && flags.means {
            for (m, &a) in nat.means[row.clone()]
                .iter_mut()
                .zip(&acc.mean_acc[row.clone()])
            {
                // Kaldi: mean = acc · (1/(occ+τ)) + (τ/(occ+τ)) · old.
                *m = a * (1.0 / (occ + mt)) + (mt / (occ + mt)) * *m;
            }
        }
        if occ > 0.0 && flags.variances {
            for d in row {
                let mu = nat.means[d];
                let mut var = acc.var_acc[d] * (1.0 / occ);
                var += mu * mu;
                var += (-2.0 / occ) * acc.mean_acc[d] * mu;
                var *= occ / (vt + occ);
                var += (vt / (vt + occ)) * nat.vars[d];
                nat.vars[d] = var;
            }
        }
    }
    diag_from_natural(gmm, dim, &nat, flags)?;
    let obj_new = diag_objective(gmm, acc, dim);
    Ok((obj_new - obj_old, occ_sum as f32))
}

/// `MapAmDiagGmmUpdate`: [`map_diag_update`] for every state; the objective
/// changes and occupancies are summed in float, as Kaldi does.
pub fn map_am_update(
    opts: &MapOptions,
    accs: &[GmmAccumulator],
    flags: UpdateFlags,
    states: &mut [StateGmm],
    dim: usize,
) -> Result<(f32, f32), String> {
    if accs.len() != states.len() {
        return Err(format!(
            "MAP update: {} accumulators for {} pdfs",
            accs.len(),
            states.len()
        ));
    }
    let (mut obj, mut count) = (0f32, 0f32);
    for (pdf, (acc, st)) in accs.iter().zip(states.iter_mut()).enumerate() {
        let (o, c) =
            map_diag_update(opts, acc, flags, st, dim).map_err(|e| format!("pdf {pdf}: {e}"))?;
        obj += o;
        count += c;
    }
    Ok((obj, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> UpdateFlags {
        UpdateFlags {
            means: s.contains('m'),
            variances: s.contains('v'),
            weights: s.contains('w'),
            transitions: false,
        }
    }

    /// One Gaussian in 1-D with mean 0, variance 1: the MAP mean of stats
    /// (γ = 10, Σx = 20) with τ = 10 is 20/20 = 1, halfway to the data mean 2.
    #[test]
    fn map_mean_is_the_tau_weighted_interpolation() {
        let mut g = StateGmm {
            gconsts: vec![0.0],
            weights: vec![1.0],
            means_invvars: vec![0.0],
            inv_vars: vec![1.0],
        };
        let acc = GmmAccumulator {
            occupancy: vec![10.0],
            mean_acc: vec![20.0],
            var_acc: vec![50.0],
        };
        let (obj, count) =
            map_diag_update(&MapOptions::default(), &acc, flags("mvw"), &mut g, 1).unwrap();
        assert_eq!(count, 10.0);
        let var = 1.0 / g.inv_vars[0] as f64;
        assert!((g.means_invvars[0] as f64 * var - 1.0).abs() < 1e-6);
        // E[x²] + μ² − 2μE[x] = 5 + 1 − 4 = 2, then (10·2 + 50·1)/60.
        assert!((var - 70.0 / 60.0).abs() < 1e-6, "{var}");
        assert!(obj > 0.0);
        assert_eq!(g.weights, [1.0]);
    }

    #[test]
    fn statistics_must_fit_the_model() {
        let mut g = StateGmm {
            gconsts: vec![0.0],
            weights: vec![1.0],
            means_invvars: vec![0.0],
            inv_vars: vec![1.0],
        };
        let acc = GmmAccumulator {
            occupancy: vec![1.0, 2.0],
            mean_acc: vec![],
            var_acc: vec![],
        };
        assert!(map_diag_update(&MapOptions::default(), &acc, flags("mw"), &mut g, 1).is_err());
    }
}

/// Relevance MAP of a GMM-UBM (Reynolds, Quatieri & Dunn 2000, "Speaker
/// verification using adapted Gaussian mixture models", eqs. 11–14), the
/// GMM-UBM speaker-recognition adaptation. With `nᵢ` the occupancy of
/// Gaussian i over the `frames` frames, `αᵢ = nᵢ / (nᵢ + r)`:
/// - weight: `ŵᵢ = γ [αᵢ nᵢ / T + (1 − αᵢ) wᵢ]`, γ making them sum to one;
/// - mean: `μ̂ᵢ = αᵢ Eᵢ[x] + (1 − αᵢ) μᵢ` (= Kaldi's MAP mean with τ = r);
/// - variance: `σ̂²ᵢ = αᵢ Eᵢ[x²] + (1 − αᵢ)(σ²ᵢ + μ²ᵢ) − μ̂²ᵢ`.
///
/// Only the parameters in `flags` change (the variance needs mean
/// statistics, the mean update uses the new mean); a Gaussian with no
/// occupancy keeps its parameters, and a variance that rounding makes
/// non-positive keeps the UBM's. `gmm` gets Kaldi's stored form and gconsts.
pub fn relevance_map(
    gmm: &mut StateGmm,
    dim: usize,
    acc: &GmmAccumulator,
    frames: f64,
    relevance: f64,
    flags: UpdateFlags,
) -> Result<(), String> {
    let n = gmm.num_components();
    if acc.occupancy.len() != n
        || ((flags.means || flags.variances) && acc.mean_acc.len() != n * dim)
        || (flags.variances && acc.var_acc.len() != n * dim)
    {
        return Err(format!(
            "relevance MAP: the statistics ({} Gaussians) do not match the model ({n} Gaussians) or lack what --update-flags needs",
            acc.occupancy.len()
        ));
    }
    if relevance < 0.0 {
        return Err(format!("relevance factor {relevance} must not be negative"));
    }
    let old = DiagNatural::from_state(gmm);
    let mut nat = old.clone();
    let mut wsum = 0f64;
    for i in 0..n {
        let ni = acc.occupancy[i];
        let alpha = if ni > 0.0 { ni / (ni + relevance) } else { 0.0 };
        if frames > 0.0 {
            nat.weights[i] = alpha * ni / frames + (1.0 - alpha) * old.weights[i];
        }
        wsum += nat.weights[i];
        if ni <= 0.0 {
            continue;
        }
        for d in i * dim..(i + 1) * dim {
            let ex = acc.mean_acc.get(d).map_or(0.0, |&s| s / ni);
            let mu = alpha * ex + (1.0 - alpha) * old.means[d];
            if flags.variances {
                let ex2 = acc.var_acc[d] / ni;
                let v = alpha * ex2 + (1.0 - alpha) * (old.vars[d] + old.means[d] * old.means[d])
                    - mu * mu;
                // Exactly ≥ 0; rounding with r ≈ 0 and one frame can make it
                // 0 or negative: keep the UBM's variance there.
                if v > 0.0 && v.is_finite() {
                    nat.vars[d] = v;
                }
            }
            if flags.means {
                nat.means[d] = mu;
            }
        }
    }
    if wsum > 0.0 {
        for w in &mut nat.weights {
            *w /= wsum;
        }
    }
    diag_from_natural(gmm, dim, &nat, flags)?;
    Ok(())
}

#[cfg(test)]
mod relevance_tests {
    use super::*;
    use crate::engine::{reference, FrameBatch, FrameTargets};
    use crate::model::AcousticModel;
    use amtool_formats::kaldi::gmm::DiagGmm;
    use amtool_formats::kaldi::matrix::Matrix;
    use amtool_formats::kaldi::table::SequentialTableReader;

    fn ubm_and_stats() -> (AcousticModel, crate::stats::ModelAccumulators) {
        let g = DiagGmm::from_bytes(&std::fs::read("testdata/kaldi/train/ubm.1.dubm").unwrap())
            .unwrap();
        let m = AcousticModel::from_diag_gmm(&g);
        let (_, feats): (String, Matrix<f32>) =
            SequentialTableReader::open("ark:testdata/kaldi/feats/feats_cmvn_deltas.first3.ark")
                .unwrap()
                .next()
                .unwrap()
                .unwrap();
        let all = UpdateFlags::default();
        let acc = reference::accumulate(
            &m,
            FrameBatch::new(feats.data(), m.dim),
            FrameTargets::Global,
            all,
        );
        (m, acc)
    }

    fn flags(s: &str) -> UpdateFlags {
        UpdateFlags {
            means: s.contains('m'),
            variances: s.contains('v'),
            weights: s.contains('w'),
            transitions: false,
        }
    }

    /// r → 0 gives the maximum-likelihood estimates of the data; a huge r
    /// leaves the UBM as it was; in between, the mean is αE[x] + (1−α)μ.
    #[test]
    fn relevance_factor_interpolates_between_data_and_ubm() {
        let (m, acc) = ubm_and_stats();
        let d = m.dim;
        let a = &acc.states[0];
        let ubm = DiagNatural::from_state(&m.states[0]);
        let mut ml = m.states[0].clone();
        relevance_map(&mut ml, d, a, acc.total_frames, 1e-9, flags("mvw")).unwrap();
        let ml = DiagNatural::from_state(&ml);
        let mut same = m.states[0].clone();
        relevance_map(&mut same, d, a, acc.total_frames, 1e12, flags("mvw")).unwrap();
        let same = DiagNatural::from_state(&same);
        let mut mid = m.states[0].clone();
        relevance_map(&mut mid, d, a, acc.total_frames, 16.0, flags("m")).unwrap();
        let mid = DiagNatural::from_state(&mid);
        for i in 0..m.states[0].num_components() {
            let n = a.occupancy[i];
            assert!((same.weights[i] - ubm.weights[i]).abs() < 1e-6);
            assert_eq!(mid.weights[i], ubm.weights[i], "weights not in flags");
            if n < 1.0 {
                continue;
            }
            let alpha = n / (n + 16.0);
            for k in i * d..(i + 1) * d {
                let ex = a.mean_acc[k] / n;
                let var = a.var_acc[k] / n - ex * ex;
                // Float storage of μ/σ² and 1/σ²: ~1e-6 relative.
                let tol = |x: f64| 1e-4 * x.abs().max(1.0);
                assert!(
                    (ml.means[k] - ex).abs() <= tol(ex),
                    "{} vs {ex}",
                    ml.means[k]
                );
                assert!(
                    (ml.vars[k] - var).abs() <= tol(var),
                    "{} vs {var}",
                    ml.vars[k]
                );
                assert!((same.means[k] - ubm.means[k]).abs() <= tol(ubm.means[k]));
                assert!((same.vars[k] - ubm.vars[k]).abs() <= tol(ubm.vars[k]));
                let want = alpha * ex + (1.0 - alpha) * ubm.means[k];
                assert!((mid.means[k] - want).abs() <= tol(want));
                assert!((mid.vars[k] - ubm.vars[k]).abs() <= tol(ubm.vars[k]));
            }
        }
        // Weights with r = 16: αn/T + (1 − α)w, renormalised.
        let mut w16 = m.states[0].clone();
        relevance_map(&mut w16, d, a, acc.total_frames, 16.0, flags("w")).unwrap();
        let raw: Vec<f64> = (0..a.occupancy.len())
            .map(|i| {
                let n = a.occupancy[i];
                let al = n / (n + 16.0);
                al * n / acc.total_frames + (1.0 - al) * ubm.weights[i]
            })
            .collect();
        let g: f64 = raw.iter().sum();
        for (w, r) in w16.weights.iter().zip(&raw) {
            assert!((*w as f64 - r / g).abs() < 1e-6, "{w} vs {}", r / g);
        }
        assert_eq!(w16.means_invvars, m.states[0].means_invvars);
        let s: f64 = ml.weights.iter().sum();
        assert!((s - 1.0).abs() < 1e-6);
    }

    #[test]
    fn negative_relevance_and_missing_statistics_are_errors() {
        let (m, acc) = ubm_and_stats();
        let mut g = m.states[0].clone();
        let a = &acc.states[0];
        assert!(relevance_map(&mut g, m.dim, a, 1.0, -1.0, flags("m")).is_err());
        let no_vars = GmmAccumulator {
            var_acc: Vec::new(),
            ..a.clone()
        };
        assert!(relevance_map(&mut g, m.dim, &no_vars, 1.0, 16.0, flags("mv")).is_err());
    }
}
