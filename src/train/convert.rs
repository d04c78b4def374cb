//! Between Kaldi's file structures (`amtool_formats::kaldi`) and the neutral
//! model and accumulators the engines and update rules work on: GMMs (the
//! parameterisation is the same, so these are copies), accumulators
//! (Kaldi's full-covariance files store centred second-order statistics; the
//! neutral accumulators are uncentred), and `--update-flags` strings.

use amtool_formats::kaldi::accs::{
    AccumAmDiagGmm, AccumDiagGmm, AccumFullGmm, GMM_MEANS, GMM_TRANSITIONS, GMM_VARIANCES,
    GMM_WEIGHTS,
};
use amtool_formats::kaldi::gmm::{AmDiagGmm, DiagGmm, FullGmm};

use crate::model::{AcousticModel, CovKind, StateGmm};
use crate::stats::{GmmAccumulator, ModelAccumulators, UpdateFlags};
use crate::{Error, Result};

/// Kaldi's `StringToGmmFlags`: a subset of `mvwt` (`allowed` narrows it, e.g.
/// "mvw" for global GMMs).
pub fn parse_update_flags(s: &str, allowed: &str) -> Result<UpdateFlags> {
    let mut f = UpdateFlags {
        means: false,
        variances: false,
        weights: false,
        transitions: false,
    };
    for c in s.chars() {
        if !allowed.contains(c) {
            return Err(Error::Usage(format!(
                "Invalid element {c} of GmmFlagsType option string {s} (expected a subset of {allowed})"
            )));
        }
        match c {
            'm' => f.means = true,
            'v' => f.variances = true,
            'w' => f.weights = true,
            't' => f.transitions = true,
            _ => unreachable!("checked against allowed"),
        }
    }
    Ok(f)
}

/// Kaldi's flag bits of `f`.
pub fn flags_to_kaldi(f: UpdateFlags) -> u16 {
    (if f.means { GMM_MEANS } else { 0 })
        | (if f.variances { GMM_VARIANCES } else { 0 })
        | (if f.weights { GMM_WEIGHTS } else { 0 })
        | (if f.transitions { GMM_TRANSITIONS } else { 0 })
}

/// Kaldi's flag bits as [`UpdateFlags`].
pub fn flags_from_kaldi(f: u16) -> UpdateFlags {
    UpdateFlags {
        means: f & GMM_MEANS != 0,
        variances: f & GMM_VARIANCES != 0,
        weights: f & GMM_WEIGHTS != 0,
        transitions: f & GMM_TRANSITIONS != 0,
    }
}

/// Kaldi's `AugmentGmmFlags` on [`UpdateFlags`]: what an accumulator holds.
pub fn augment(f: UpdateFlags) -> UpdateFlags {
    UpdateFlags {
        means: f.means || f.variances,
        variances: f.variances,
        weights: true,
        transitions: f.transitions,
    }
}

pub fn state_from_diag(g: &DiagGmm) -> StateGmm {
    StateGmm {
        gconsts: g.gconsts.clone(),
        weights: g.weights.clone(),
        means_invvars: g.means_invvars.clone(),
        inv_vars: g.inv_vars.clone(),
    }
}

pub fn diag_from_state(s: &StateGmm, dim: usize) -> DiagGmm {
    DiagGmm {
        dim,
        gconsts: s.gconsts.clone(),
        weights: s.weights.clone(),
        means_invvars: s.means_invvars.clone(),
        inv_vars: s.inv_vars.clone(),
    }
}

pub fn state_from_full(g: &FullGmm) -> StateGmm {
    StateGmm {
        gconsts: g.gconsts.clone(),
        weights: g.weights.clone(),
        means_invvars: g.means_invcovars.clone(),
        inv_vars: g.inv_covars.clone(),
    }
}

pub fn full_from_state(s: &StateGmm, dim: usize) -> FullGmm {
    FullGmm {
        dim,
        gconsts: s.gconsts.clone(),
        weights: s.weights.clone(),
        means_invcovars: s.means_invvars.clone(),
        inv_covars: s.inv_vars.clone(),
    }
}

/// An acoustic model's pdfs as the neutral model.
pub fn model_from_am(am: &AmDiagGmm) -> AcousticModel {
    AcousticModel {
        dim: am.dim,
        kind: CovKind::Diagonal,
        states: am.pdfs.iter().map(state_from_diag).collect(),
    }
}

/// The neutral model's states back into an `AmDiagGmm`.
pub fn am_from_model(m: &AcousticModel) -> AmDiagGmm {
    AmDiagGmm {
        dim: m.dim,
        pdfs: m.states.iter().map(|s| diag_from_state(s, m.dim)).collect(),
    }
}

/// A global GMM as a one-state neutral model.
pub fn model_from_diag(g: &DiagGmm) -> AcousticModel {
    AcousticModel {
        dim: g.dim,
        kind: CovKind::Diagonal,
        states: vec![state_from_diag(g)],
    }
}

pub fn model_from_full(g: &FullGmm) -> AcousticModel {
    AcousticModel {
        dim: g.dim,
        kind: CovKind::Full,
        states: vec![state_from_full(g)],
    }
}

/// One `AccumDiagGmm` as a neutral accumulator.
pub fn gmm_acc_from_diag(a: &AccumDiagGmm) -> GmmAccumulator {
    GmmAccumulator {
        occupancy: a.occupancy.clone(),
        mean_acc: a.mean_accs.clone(),
        var_acc: a.var_accs.clone(),
    }
}

pub fn diag_from_gmm_acc(g: &GmmAccumulator, dim: usize, flags: UpdateFlags) -> AccumDiagGmm {
    let f = augment(flags);
    let kept = |v: &Vec<f64>, keep: bool| if keep { v.clone() } else { Vec::new() };
    let g = GmmAccumulator {
        occupancy: g.occupancy.clone(),
        mean_acc: kept(&g.mean_acc, f.means),
        var_acc: kept(&g.var_acc, f.variances),
    };
    diag_from_gmm_acc_owned(g, dim, flags)
}

/// [`diag_from_gmm_acc`] taking the sums over instead of copying them (a
/// UBM's 1.3 MB copied into fresh pages took 0.1–0.3 ms of every
/// `gmm-global-acc-stats` job's end).
pub fn diag_from_gmm_acc_owned(g: GmmAccumulator, dim: usize, flags: UpdateFlags) -> AccumDiagGmm {
    let f = augment(flags);
    AccumDiagGmm {
        dim,
        num_comp: g.occupancy.len(),
        flags: flags_to_kaldi(f),
        occupancy: g.occupancy,
        mean_accs: if f.means { g.mean_acc } else { Vec::new() },
        var_accs: if f.variances { g.var_acc } else { Vec::new() },
    }
}

/// `AccumFullGmm` (file form, centred) as a neutral accumulator (uncentred,
/// as Kaldi's `Read` leaves it in memory).
pub fn gmm_acc_from_full(a: &AccumFullGmm) -> GmmAccumulator {
    GmmAccumulator {
        occupancy: a.occupancy.clone(),
        mean_acc: a.mean_accs.clone(),
        var_acc: a.uncentered_covar_accs(),
    }
}

/// A neutral full-covariance accumulator in Kaldi's file form (centred as
/// Kaldi's `Write` does).
pub fn full_from_gmm_acc(
    g: &GmmAccumulator,
    dim: usize,
    flags: UpdateFlags,
) -> Result<AccumFullGmm> {
    let f = augment(flags);
    let n = g.occupancy.len();
    let mut a = AccumFullGmm {
        dim,
        num_comp: n,
        flags: flags_to_kaldi(f),
        occupancy: g.occupancy.clone(),
        mean_accs: if f.means {
            g.mean_acc.clone()
        } else {
            vec![0.0; n * dim]
        },
        centered_covar_accs: Vec::new(),
    };
    if f.variances {
        a.set_uncentered_covar_accs(&g.var_acc)
            .map_err(Error::Mismatch)?;
    }
    Ok(a)
}

/// gmm-acc-stats accumulators as neutral accumulators over the pdfs.
pub fn model_accs_from_am(a: &AccumAmDiagGmm, dim: usize) -> ModelAccumulators {
    let flags = a
        .pdfs
        .first()
        .map(|p| flags_from_kaldi(p.flags))
        .unwrap_or_default();
    ModelAccumulators {
        dim,
        kind: CovKind::Diagonal,
        flags,
        states: a.pdfs.iter().map(gmm_acc_from_diag).collect(),
        total_like: a.total_like,
        total_frames: a.total_frames,
    }
}

pub fn am_from_model_accs(m: &ModelAccumulators) -> AccumAmDiagGmm {
    AccumAmDiagGmm {
        pdfs: m
            .states
            .iter()
            .map(|s| diag_from_gmm_acc(s, m.dim, m.flags))
            .collect(),
        total_like: m.total_like,
        total_frames: m.total_frames,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_flags_strings() {
        let f = parse_update_flags("mvwt", "mvwt").unwrap();
        assert_eq!(flags_to_kaldi(f), 15);
        assert_eq!(flags_to_kaldi(parse_update_flags("mw", "mvw").unwrap()), 5);
        assert!(parse_update_flags("mvt", "mvw").is_err());
        assert_eq!(
            flags_to_kaldi(augment(parse_update_flags("v", "mvw").unwrap())),
            7
        );
    }

    #[test]
    fn full_accs_centre_and_uncentre_are_inverse() {
        let g = GmmAccumulator {
            occupancy: vec![4.0, 0.0],
            mean_acc: vec![2.0, 4.0, 0.0, 0.0],
            var_acc: vec![3.0, 5.0, 9.0, 0.0, 0.0, 0.0],
        };
        let f = full_from_gmm_acc(&g, 2, UpdateFlags::default()).unwrap();
        assert_eq!(f.centered_covar_accs[..3], [2.0, 3.0, 5.0]);
        assert_eq!(gmm_acc_from_full(&f), g);
    }
}
