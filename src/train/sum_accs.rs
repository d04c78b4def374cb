//! Summing accumulator files, as Kaldi's `gmm-sum-accs`,
//! `gmm-global-sum-accs` and `fgmm-global-sum-accs` do: every file is added
//! into zeroed accumulators in f64 (so a sum of one file is that file, and
//! `-0` statistics become `0`, as Kaldi writes them). Full-covariance files
//! store centred second-order statistics; they are uncentred before adding
//! and centred again for writing, as Kaldi's `AccumFullGmm` read/write do.

use amtool_formats::kaldi::accs::{AccumAmDiagGmm, AccumDiagGmm, AccumFullGmm, AmAccs};

use crate::stats::GmmAccumulator;
use crate::train::convert::{flags_from_kaldi, full_from_gmm_acc, gmm_acc_from_full};
use crate::{Error, Result};

fn add_into(dst: &mut [f64], src: &[f64]) {
    for (a, b) in dst.iter_mut().zip(src) {
        *a += b;
    }
}

fn zeros_like_diag(a: &AccumDiagGmm) -> AccumDiagGmm {
    AccumDiagGmm {
        dim: a.dim,
        num_comp: a.num_comp,
        flags: a.flags,
        occupancy: vec![0.0; a.occupancy.len()],
        mean_accs: vec![0.0; a.mean_accs.len()],
        var_accs: vec![0.0; a.var_accs.len()],
    }
}

fn add_diag(sum: &mut AccumDiagGmm, a: &AccumDiagGmm, what: &str) -> Result<()> {
    if a.dim != sum.dim
        || a.num_comp != sum.num_comp
        || a.flags != sum.flags
        || a.mean_accs.len() != sum.mean_accs.len()
        || a.var_accs.len() != sum.var_accs.len()
    {
        return Err(Error::Mismatch(format!(
            "{what}: accumulators of {} Gaussians, dimension {}, flags {} do not match the first file's ({} Gaussians, dimension {}, flags {})",
            a.num_comp, a.dim, a.flags, sum.num_comp, sum.dim, sum.flags
        )));
    }
    add_into(&mut sum.occupancy, &a.occupancy);
    add_into(&mut sum.mean_accs, &a.mean_accs);
    add_into(&mut sum.var_accs, &a.var_accs);
    Ok(())
}

/// `gmm-sum-accs`: `accs` with their names (for errors).
pub fn sum_am(accs: &[(String, AmAccs)]) -> Result<AmAccs> {
    let Some((_, first)) = accs.first() else {
        return Err(Error::Usage("no accumulators to sum".into()));
    };
    let mut sum = AmAccs {
        transition_accs: vec![0.0; first.transition_accs.len()],
        gmm: AccumAmDiagGmm {
            pdfs: first.gmm.pdfs.iter().map(zeros_like_diag).collect(),
            total_like: 0.0,
            total_frames: 0.0,
        },
    };
    for (name, a) in accs {
        if a.transition_accs.len() != sum.transition_accs.len() {
            return Err(Error::Mismatch(format!(
                "{name}: {} transition accumulators, but the first file has {}",
                a.transition_accs.len(),
                sum.transition_accs.len()
            )));
        }
        if a.gmm.pdfs.len() != sum.gmm.pdfs.len() {
            return Err(Error::Mismatch(format!(
                "{name}: accumulators for {} pdfs, but the first file has {}",
                a.gmm.pdfs.len(),
                sum.gmm.pdfs.len()
            )));
        }
        add_into(&mut sum.transition_accs, &a.transition_accs);
        for (p, (s, x)) in sum.gmm.pdfs.iter_mut().zip(&a.gmm.pdfs).enumerate() {
            add_diag(s, x, &format!("{name}, pdf {p}"))?;
        }
        sum.gmm.total_like += a.gmm.total_like;
        sum.gmm.total_frames += a.gmm.total_frames;
    }
    Ok(sum)
}

/// Σ of all occupancies (Kaldi's `AccumAmDiagGmm::TotStatsCount`).
pub fn total_stats_count(a: &AccumAmDiagGmm) -> f64 {
    a.pdfs.iter().flat_map(|p| p.occupancy.iter()).sum()
}

/// `gmm-global-sum-accs`.
pub fn sum_diag(accs: &[(String, AccumDiagGmm)]) -> Result<AccumDiagGmm> {
    let Some((_, first)) = accs.first() else {
        return Err(Error::Usage("no accumulators to sum".into()));
    };
    let mut sum = zeros_like_diag(first);
    for (name, a) in accs {
        add_diag(&mut sum, a, name)?;
    }
    Ok(sum)
}

/// `fgmm-global-sum-accs`.
pub fn sum_full(accs: &[(String, AccumFullGmm)]) -> Result<AccumFullGmm> {
    let Some((_, first)) = accs.first() else {
        return Err(Error::Usage("no accumulators to sum".into()));
    };
    let mut sum: Option<GmmAccumulator> = None;
    for (name, a) in accs {
        if a.dim != first.dim || a.num_comp != first.num_comp || a.flags != first.flags {
            return Err(Error::Mismatch(format!(
                "{name}: accumulators of {} Gaussians, dimension {}, flags {} do not match the first file's ({} Gaussians, dimension {}, flags {})",
                a.num_comp, a.dim, a.flags, first.num_comp, first.dim, first.flags
            )));
        }
        let g = gmm_acc_from_full(a);
        match &mut sum {
            None => {
                let mut z = GmmAccumulator {
                    occupancy: vec![0.0; g.occupancy.len()],
                    mean_acc: vec![0.0; g.mean_acc.len()],
                    var_acc: vec![0.0; g.var_acc.len()],
                };
                add_into(&mut z.occupancy, &g.occupancy);
                add_into(&mut z.mean_acc, &g.mean_acc);
                add_into(&mut z.var_acc, &g.var_acc);
                sum = Some(z);
            }
            Some(s) => {
                add_into(&mut s.occupancy, &g.occupancy);
                add_into(&mut s.mean_acc, &g.mean_acc);
                add_into(&mut s.var_acc, &g.var_acc);
            }
        }
    }
    let s = sum.expect("at least one input");
    full_from_gmm_acc(&s, first.dim, flags_from_kaldi(first.flags))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(occ: Vec<f64>) -> AccumDiagGmm {
        let n = occ.len();
        AccumDiagGmm {
            dim: 1,
            num_comp: n,
            flags: 7,
            occupancy: occ,
            mean_accs: vec![-0.0; n],
            var_accs: vec![1.0; n],
        }
    }

    #[test]
    fn sums_from_zero_and_checks_shapes() {
        let s = sum_diag(&[
            ("a".into(), acc(vec![1.0, 2.0])),
            ("b".into(), acc(vec![0.5, 0.25])),
        ])
        .unwrap();
        assert_eq!(s.occupancy, [1.5, 2.25]);
        assert_eq!(s.var_accs, [2.0, 2.0]);
        // A sum starts from +0, so Kaldi's -0 statistics come out as 0.
        let one = sum_diag(&[("a".into(), acc(vec![1.0]))]).unwrap();
        assert!(one.mean_accs[0] == 0.0 && one.mean_accs[0].is_sign_positive());
        let e = sum_diag(&[
            ("a".into(), acc(vec![1.0])),
            ("b".into(), acc(vec![1.0, 1.0])),
        ])
        .unwrap_err();
        assert!(e.to_string().starts_with("b: "), "{e}");
        assert!(sum_diag(&[]).is_err());
    }
}
