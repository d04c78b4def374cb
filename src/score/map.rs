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
