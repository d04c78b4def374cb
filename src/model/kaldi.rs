//! Conversions between Kaldi's GMM file objects (`amtool_formats::kaldi::gmm`)
//! and the neutral [`AcousticModel`], in both directions.
//!
//! Kaldi models are used as Kaldi's `Read` leaves them: the parameters are
//! copied; the gconsts are recomputed on reading, as Kaldi recomputes them
//! (a diagonal GMM's in the formats reader, to the bit; a full GMM's by
//! [`read_full_gmm`], see there), so scoring with an `AcousticModel` made from
//! a Kaldi file uses Kaldi's own gconsts. Going back, [`diag_from_natural`] turns updated natural
//! parameters (weights, means, variances in double, as Kaldi's `DiagGmmNormal`
//! holds them) into Kaldi's stored form with the same float conversions as
//! `DiagGmmNormal::CopyToDiagGmm` and gconsts from `DiagGmm::ComputeGconsts`
//! (checked bit for bit against the gconsts in Kaldi's model files).

use amtool_formats::kaldi::gmm::{AmDiagGmm, DiagGmm, FullGmm};
use amtool_formats::kaldi::object::read_object;

use super::{AcousticModel, CovKind, StateGmm};
use crate::stats::UpdateFlags;

/// How far (relative, at least 1 absolute) a full GMM's stored gconst may
/// lie from amtool's recomputation of it and still be taken as Kaldi's own:
/// the two agree to ~1e-7 on Kaldi's files (44 of fubm.0.fubm's 64 to the
/// bit), and a gconst printed with Kaldi's 7 digits to ~1e-6.
const FULL_GCONST_AGREEMENT: f32 = 1e-4;

/// A Kaldi `FullGmm` from `bytes`, its gconsts as Kaldi's `FullGmm::Read`
/// leaves them. Kaldi recomputes them on reading, with float BLAS whose
/// order amtool does not reproduce to the bit ([`full_gconsts`]): a stored
/// gconst within [`FULL_GCONST_AGREEMENT`] of amtool's recomputation is
/// kept (the file is one Kaldi wrote; its bits are Kaldi's), one further
/// away (stale, edited) is replaced by the recomputation, as Kaldi replaces
/// it. A gconst that cannot be computed (NaN, a covariance not positive
/// definite) is an error, as in Kaldi.
///
/// [`full_gconsts`]: crate::stats::mle_full::full_gconsts
pub fn read_full_gmm(bytes: &[u8]) -> amtool_formats::Result<FullGmm> {
    let mut g: FullGmm = read_object(bytes)?;
    let computed =
        crate::stats::mle_full::full_gconsts(&g.weights, &g.means_invcovars, &g.inv_covars, g.dim)
            .map_err(|e| {
                amtool_formats::Error::format(
                    amtool_formats::error::Pos::Unknown,
                    format!("FullGmm: {e}"),
                )
            })?;
    for (stored, c) in g.gconsts.iter_mut().zip(computed) {
        let agrees = (*stored - c).abs() <= FULL_GCONST_AGREEMENT * c.abs().max(1.0);
        if !agrees && !(stored.is_infinite() && *stored == c) {
            *stored = c;
        }
    }
    Ok(g)
}

impl StateGmm {
    /// A state with a Kaldi `DiagGmm`'s parameters.
    pub fn from_diag_gmm(g: &DiagGmm) -> StateGmm {
        StateGmm {
            gconsts: g.gconsts.clone(),
            weights: g.weights.clone(),
            means_invvars: g.means_invvars.clone(),
            inv_vars: g.inv_vars.clone(),
        }
    }

    /// [`Self::from_diag_gmm`], taking the parameters over instead of copying
    /// them (a large model is hundreds of MB).
    pub fn from_diag_gmm_owned(g: DiagGmm) -> StateGmm {
        StateGmm {
            gconsts: g.gconsts,
            weights: g.weights,
            means_invvars: g.means_invvars,
            inv_vars: g.inv_vars,
        }
    }

    /// A state with a Kaldi `FullGmm`'s parameters (`inv_vars` = the packed `Σ⁻¹`).
    pub fn from_full_gmm(g: &FullGmm) -> StateGmm {
        StateGmm {
            gconsts: g.gconsts.clone(),
            weights: g.weights.clone(),
            means_invvars: g.means_invcovars.clone(),
            inv_vars: g.inv_covars.clone(),
        }
    }

    /// The Kaldi `DiagGmm` of a diagonal state of dimension `dim`.
    pub fn to_diag_gmm(&self, dim: usize) -> Result<DiagGmm, String> {
        self.check_sizes(dim, dim)?;
        Ok(DiagGmm {
            dim,
            gconsts: self.gconsts.clone(),
            weights: self.weights.clone(),
            means_invvars: self.means_invvars.clone(),
            inv_vars: self.inv_vars.clone(),
        })
    }

    /// The Kaldi `FullGmm` of a full-covariance state of dimension `dim`.
    pub fn to_full_gmm(&self, dim: usize) -> Result<FullGmm, String> {
        self.check_sizes(dim, dim * (dim + 1) / 2)?;
        Ok(FullGmm {
            dim,
            gconsts: self.gconsts.clone(),
            weights: self.weights.clone(),
            means_invcovars: self.means_invvars.clone(),
            inv_covars: self.inv_vars.clone(),
        })
    }

    fn check_sizes(&self, dim: usize, vlen: usize) -> Result<(), String> {
        let n = self.weights.len();
        if self.gconsts.len() != n
            || self.means_invvars.len() != n * dim
            || self.inv_vars.len() != n * vlen
        {
            return Err(format!(
                "inconsistent state: {n} weights, {} gconsts, {} mean values, {} variance values (dim {dim})",
                self.gconsts.len(),
                self.means_invvars.len(),
                self.inv_vars.len()
            ));
        }
        Ok(())
    }
}

impl AcousticModel {
    /// The states of a Kaldi acoustic model, one per pdf, in pdf order.
    pub fn from_am_diag_gmm(am: &AmDiagGmm) -> AcousticModel {
        AcousticModel {
            dim: am.dim,
            kind: CovKind::Diagonal,
            states: am.pdfs.iter().map(StateGmm::from_diag_gmm).collect(),
        }
    }

    /// [`Self::from_am_diag_gmm`], taking the parameters over.
    pub fn from_am_diag_gmm_owned(am: AmDiagGmm) -> AcousticModel {
        AcousticModel {
            dim: am.dim,
            kind: CovKind::Diagonal,
            states: am
                .pdfs
                .into_iter()
                .map(StateGmm::from_diag_gmm_owned)
                .collect(),
        }
    }

    /// A one-state model (a diagonal UBM).
    pub fn from_diag_gmm(g: &DiagGmm) -> AcousticModel {
        AcousticModel {
            dim: g.dim,
            kind: CovKind::Diagonal,
            states: vec![StateGmm::from_diag_gmm(g)],
        }
    }

    /// A one-state full-covariance model (a full UBM).
    pub fn from_full_gmm(g: &FullGmm) -> AcousticModel {
        AcousticModel {
            dim: g.dim,
            kind: CovKind::Full,
            states: vec![StateGmm::from_full_gmm(g)],
        }
    }

    /// Back to a Kaldi `AmDiagGmm` (diagonal models only).
    pub fn to_am_diag_gmm(&self) -> Result<AmDiagGmm, String> {
        if self.kind != CovKind::Diagonal {
            return Err("a full-covariance model cannot be written as an AmDiagGmm".into());
        }
        let pdfs = self
            .states
            .iter()
            .enumerate()
            .map(|(i, s)| s.to_diag_gmm(self.dim).map_err(|e| format!("pdf {i}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AmDiagGmm {
            dim: self.dim,
            pdfs,
        })
    }

    /// Back to a Kaldi `DiagGmm` (a one-state diagonal model).
    pub fn to_diag_gmm(&self) -> Result<DiagGmm, String> {
        match (self.kind, self.states.as_slice()) {
            (CovKind::Diagonal, [s]) => s.to_diag_gmm(self.dim),
            (CovKind::Full, _) => {
                Err("a full-covariance model cannot be written as a DiagGmm".into())
            }
            (_, s) => Err(format!(
                "a DiagGmm has one mixture; this model has {}",
                s.len()
            )),
        }
    }

    /// Back to a Kaldi `FullGmm` (a one-state full-covariance model).
    pub fn to_full_gmm(&self) -> Result<FullGmm, String> {
        match (self.kind, self.states.as_slice()) {
            (CovKind::Full, [s]) => s.to_full_gmm(self.dim),
            (CovKind::Diagonal, _) => {
                Err("a diagonal model is not a FullGmm (Kaldi: gmm-global-to-fgmm)".into())
            }
            (_, s) => Err(format!(
                "a FullGmm has one mixture; this model has {}",
                s.len()
            )),
        }
    }
}

/// Kaldi's `DiagGmm::ComputeGconsts` for a diagonal state of dimension `dim`
/// (bit-exact; see [`DiagGmm::compute_gconsts`]). Returns the number of
/// infinite gconsts (zero weights), or an error for a negative weight / NaN.
pub fn compute_diag_gconsts(state: &mut StateGmm, dim: usize) -> Result<usize, String> {
    let mut g = state.to_diag_gmm_unchecked(dim);
    let bad = g.compute_gconsts()?;
    state.gconsts = g.gconsts;
    Ok(bad)
}

impl StateGmm {
    fn to_diag_gmm_unchecked(&self, dim: usize) -> DiagGmm {
        DiagGmm {
            dim,
            gconsts: self.gconsts.clone(),
            weights: self.weights.clone(),
            means_invvars: self.means_invvars.clone(),
            inv_vars: self.inv_vars.clone(),
        }
    }
}

/// Natural parameters of a diagonal mixture, in double (Kaldi `DiagGmmNormal`).
#[derive(Debug, Clone, PartialEq)]
pub struct DiagNatural {
    pub weights: Vec<f64>,
    /// components × dim.
    pub means: Vec<f64>,
    /// components × dim (variances, not inverses).
    pub vars: Vec<f64>,
}

impl DiagNatural {
    /// Kaldi `DiagGmmNormal::CopyFromDiagGmm`: weights widened, `var = 1/(double)iv`,
    /// `mean = (double)mi · var`, all in double.
    pub fn from_state(s: &StateGmm) -> DiagNatural {
        let vars: Vec<f64> = s.inv_vars.iter().map(|&iv| 1.0 / iv as f64).collect();
        let means = s
            .means_invvars
            .iter()
            .zip(&vars)
            .map(|(&mi, &v)| mi as f64 * v)
            .collect();
        DiagNatural {
            weights: s.weights.iter().map(|&w| w as f64).collect(),
            means,
            vars,
        }
    }
}

/// Kaldi `DiagGmmNormal::CopyToDiagGmm(gmm, flags)` followed by
/// `ComputeGconsts`: the parameters selected by `flags` are taken from `nat`
/// (weights cast to float; `inv_var = 1.0f / (float)var`; `means_invvars =
/// (float)mean * inv_var` in float; with variances but not means, the old
/// means are re-multiplied by the new inverse variances), then the gconsts
/// are recomputed bit-exactly. `state` must have `nat`'s number of components.
pub fn diag_from_natural(
    state: &mut StateGmm,
    dim: usize,
    nat: &DiagNatural,
    flags: UpdateFlags,
) -> Result<usize, String> {
    let n = state.weights.len();
    if nat.weights.len() != n || nat.means.len() != n * dim || nat.vars.len() != n * dim {
        return Err(format!(
            "natural parameters have {} components, the state has {n}",
            nat.weights.len()
        ));
    }
    state.check_sizes(dim, dim)?;
    let old = DiagNatural::from_state(state);
    if flags.weights {
        state.weights = nat.weights.iter().map(|&w| w as f32).collect();
    }
    if flags.variances {
        for (iv, &v) in state.inv_vars.iter_mut().zip(&nat.vars) {
            *iv = 1.0f32 / (v as f32);
        }
        if !flags.means {
            for ((mi, &m), &iv) in state
                .means_invvars
                .iter_mut()
                .zip(&old.means)
                .zip(&state.inv_vars)
            {
                *mi = (m as f32) * iv;
            }
        }
    }
    if flags.means {
        for ((mi, &m), &iv) in state
            .means_invvars
            .iter_mut()
            .zip(&nat.means)
            .zip(&state.inv_vars)
        {
            *mi = (m as f32) * iv;
        }
    }
    compute_diag_gconsts(state, dim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amtool_formats::kaldi::model::KaldiModel;

    fn final_mdl() -> KaldiModel {
        KaldiModel::from_bytes(&std::fs::read("testdata/kaldi/final.mdl").unwrap()).unwrap()
    }

    #[test]
    fn am_roundtrips_through_the_neutral_model() {
        let m = final_mdl();
        let am = AcousticModel::from_am_diag_gmm(&m.am);
        assert_eq!(am.num_states(), 63);
        assert_eq!(am.num_gaussians(), 514);
        assert_eq!(am.dim, 39);
        assert_eq!(am.to_am_diag_gmm().unwrap(), m.am);
        assert!(am.to_diag_gmm().is_err());
        assert!(am.to_full_gmm().is_err());
    }

    #[test]
    fn gconsts_from_stored_parameters_are_kaldis() {
        let m = final_mdl();
        let mut am = AcousticModel::from_am_diag_gmm(&m.am);
        for s in &mut am.states {
            compute_diag_gconsts(s, 39).unwrap();
        }
        assert_eq!(
            am.to_am_diag_gmm().unwrap(),
            m.am,
            "recomputed gconsts differ from Kaldi's"
        );
    }

    /// Natural parameters taken from a Kaldi model and put back give the model
    /// again where the float round trip is exact, and always Kaldi's gconsts
    /// for the resulting parameters.
    #[test]
    fn natural_parameters_back_to_kaldi_form() {
        let m = final_mdl();
        let all = UpdateFlags {
            means: true,
            variances: true,
            weights: true,
            transitions: false,
        };
        let mut same = 0usize;
        let mut total = 0usize;
        for g in &m.am.pdfs {
            let mut s = StateGmm::from_diag_gmm(g);
            let nat = DiagNatural::from_state(&s);
            diag_from_natural(&mut s, 39, &nat, all).unwrap();
            assert_eq!(s.weights, g.weights);
            // 1/(1/iv) in double then to float then 1/x in float: usually exact.
            for (a, b) in s.inv_vars.iter().zip(&g.inv_vars) {
                total += 1;
                same += (a == b) as usize;
                assert!(((a - b) / b).abs() < 2e-7);
            }
            let mut t = s.clone();
            compute_diag_gconsts(&mut t, 39).unwrap();
            assert_eq!(t.gconsts, s.gconsts);
        }
        assert!(
            same * 10 > total * 9,
            "only {same} of {total} inverse variances survive the round trip"
        );
    }

    #[test]
    fn full_and_global_models_convert() {
        let g = DiagGmm::from_bytes(&std::fs::read("testdata/kaldi/ubm.0.dubm").unwrap()).unwrap();
        let am = AcousticModel::from_diag_gmm(&g);
        assert_eq!(am.to_diag_gmm().unwrap(), g);
        let mut raw = Vec::new();
        use std::io::Read;
        flate2::read::GzDecoder::new(&std::fs::read("testdata/kaldi/fubm.0.fubm.gz").unwrap()[..])
            .read_to_end(&mut raw)
            .unwrap();
        let f = FullGmm::from_bytes(&raw).unwrap();
        let fm = AcousticModel::from_full_gmm(&f);
        assert_eq!(fm.kind, CovKind::Full);
        assert_eq!(fm.inv_var_len(), 39 * 40 / 2);
        assert_eq!(fm.to_full_gmm().unwrap(), f);
        assert!(fm.to_diag_gmm().is_err());
    }

    #[test]
    fn variance_only_update_keeps_the_old_means() {
        let m = final_mdl();
        let mut s = StateGmm::from_diag_gmm(&m.am.pdfs[0]);
        let old = DiagNatural::from_state(&s);
        let mut nat = old.clone();
        for v in &mut nat.vars {
            *v *= 2.0;
        }
        let flags = UpdateFlags {
            means: false,
            variances: true,
            weights: false,
            transitions: false,
        };
        diag_from_natural(&mut s, 39, &nat, flags).unwrap();
        let back = DiagNatural::from_state(&s);
        for (a, b) in back.means.iter().zip(&old.means) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
        }
        for (a, b) in back.vars.iter().zip(&old.vars) {
            assert!((a / b - 2.0).abs() < 1e-6);
        }
    }
}
