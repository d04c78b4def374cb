//! The neutral acoustic model every engine computes with: emitting states, each
//! a mixture of diagonal or full-covariance Gaussians with its own number of
//! components, in Kaldi's parameterisation (so Kaldi models are used exactly as
//! stored, with no float round trip).
//!
//! Per component `m` of a state, with weight `w`, mean `μ` and covariance `Σ`:
//! - diagonal: `gconst = log w − ½(D log 2π + Σ log σ² + Σ μ²/σ²)`,
//!   `means_invvars = μ/σ²`, `inv_vars = 1/σ²`, and
//!   `loglike(x) = gconst + x·means_invvars − ½ x²·inv_vars`;
//! - full: `means_invvars = Σ⁻¹μ`, `inv_vars` = `Σ⁻¹` packed as Kaldi's
//!   `SpMatrix` (lower triangle, row by row: D(D+1)/2 values), and
//!   `loglike(x) = gconst + x·Σ⁻¹μ − ½ xᵀΣ⁻¹x`.

pub mod htk;
pub mod kaldi;

/// Which covariance every Gaussian of a model has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CovKind {
    Diagonal,
    Full,
}

/// One emitting state: a mixture of `num_components()` Gaussians.
#[derive(Debug, Clone, PartialEq)]
pub struct StateGmm {
    /// Per component; includes the log weight.
    pub gconsts: Vec<f32>,
    /// Per component; kept for updates (the likelihood uses `gconsts`).
    pub weights: Vec<f32>,
    /// components × dim, row-major.
    pub means_invvars: Vec<f32>,
    /// Diagonal: components × dim. Full: components × dim(dim+1)/2 (packed lower triangle).
    pub inv_vars: Vec<f32>,
}

impl StateGmm {
    pub fn num_components(&self) -> usize {
        self.gconsts.len()
    }
}

/// The neutral model: what engines score and accumulate against.
#[derive(Debug, Clone, PartialEq)]
pub struct AcousticModel {
    pub dim: usize,
    pub kind: CovKind,
    pub states: Vec<StateGmm>,
}

impl AcousticModel {
    pub fn num_states(&self) -> usize {
        self.states.len()
    }

    pub fn num_gaussians(&self) -> usize {
        self.states.iter().map(|s| s.num_components()).sum()
    }

    /// Values per component in `inv_vars`.
    pub fn inv_var_len(&self) -> usize {
        match self.kind {
            CovKind::Diagonal => self.dim,
            CovKind::Full => self.dim * (self.dim + 1) / 2,
        }
    }
}
