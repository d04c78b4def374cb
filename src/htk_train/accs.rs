//! HERest's accumulators, attached (as HTK attaches them with hooks) to the
//! objects of the HMM set, so that a shared mean, variance, state or
//! transition matrix gathers the statistics of all its users once:
//! means and variances per vector (`MuAcc`/`VaAcc`: occupancy, Σγ(x−μ) and
//! Σγ(x−μ)² or the lower triangle of Σγ(x−μ)(x−μ)ᵀ, centred on the current
//! mean as HFB does), mixture weights per state (`WtAcc`), transitions per
//! matrix (`TrAcc`), and the number of examples per HMM. f64 throughout.

use amtool_formats::htk::mmf::{Covariance, HmmSet};

/// Which parameters to gather statistics for and update (`-u tmvwp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HtkUpdate {
    pub trans: bool,
    pub means: bool,
    pub vars: bool,
    pub weights: bool,
    pub map: bool,
}

impl Default for HtkUpdate {
    fn default() -> Self {
        HtkUpdate {
            trans: true,
            means: true,
            vars: true,
            weights: true,
            map: false,
        }
    }
}

impl HtkUpdate {
    /// HERest's `-u` letters.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut u = HtkUpdate {
            trans: false,
            means: false,
            vars: false,
            weights: false,
            map: false,
        };
        for c in s.chars() {
            match c {
                't' => u.trans = true,
                'm' => u.means = true,
                'v' => u.vars = true,
                'w' => u.weights = true,
                'p' => u.map = true,
                'a' | 's' => {
                    return Err(format!(
                        "-u {c}: adaptation/semi-tied transforms are not supported"
                    ))
                }
                _ => return Err(format!("unknown update flag {c} in -u {s}")),
            }
        }
        Ok(u)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct VecAcc {
    pub occ: f64,
    pub sum: Vec<f64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct WtAcc {
    pub occ: f64,
    /// Per entry of the stream's `mixtures`.
    pub c: Vec<f64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrAcc {
    /// 1-based states, n+1 entries.
    pub occ: Vec<f64>,
    /// (n+1)², 1-based.
    pub tran: Vec<f64>,
}

/// All the statistics of one HERest pass (or of one utterance).
#[derive(Debug, Clone, PartialEq)]
pub struct HerestAccs {
    pub dim: usize,
    /// Per `HmmSet::means` entry.
    pub mean: Vec<VecAcc>,
    /// Per `HmmSet::variances` entry (diagonal).
    pub var: Vec<VecAcc>,
    /// Per `HmmSet::covars` entry: lower triangle of the covariance statistics.
    pub covar: Vec<VecAcc>,
    /// Per `HmmSet::states` entry.
    pub weight: Vec<WtAcc>,
    /// Per `HmmSet::transps` entry.
    pub trans: Vec<TrAcc>,
    /// Per `HmmSet::hmms` entry: utterances it appeared in.
    pub num_egs: Vec<u64>,
    pub total_pr: f64,
    pub total_frames: u64,
}

impl HerestAccs {
    pub fn zeros(set: &HmmSet) -> Self {
        let dim = set.options.vec_size;
        let tri = dim * (dim + 1) / 2;
        HerestAccs {
            dim,
            mean: set
                .means
                .iter()
                .map(|m| VecAcc {
                    occ: 0.0,
                    sum: vec![0.0; m.len()],
                })
                .collect(),
            var: set
                .variances
                .iter()
                .map(|v| VecAcc {
                    occ: 0.0,
                    sum: vec![0.0; v.len()],
                })
                .collect(),
            covar: set
                .covars
                .iter()
                .map(|_| VecAcc {
                    occ: 0.0,
                    sum: vec![0.0; tri],
                })
                .collect(),
            weight: set
                .states
                .iter()
                .map(|s| WtAcc {
                    occ: 0.0,
                    c: vec![0.0; s.streams.first().map_or(0, |st| st.mixtures.len())],
                })
                .collect(),
            trans: set
                .transps
                .iter()
                .map(|t| TrAcc {
                    occ: vec![0.0; t.n + 1],
                    tran: vec![0.0; (t.n + 1) * (t.n + 1)],
                })
                .collect(),
            num_egs: vec![0; set.hmms.len()],
            total_pr: 0.0,
            total_frames: 0,
        }
    }

    /// Add `o` (same shape) into `self`: statistics are additive.
    pub fn add(&mut self, o: &HerestAccs) {
        fn addv(a: &mut [f64], b: &[f64]) {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        }
        for (a, b) in self.mean.iter_mut().zip(&o.mean) {
            a.occ += b.occ;
            addv(&mut a.sum, &b.sum);
        }
        for (a, b) in self.var.iter_mut().zip(&o.var) {
            a.occ += b.occ;
            addv(&mut a.sum, &b.sum);
        }
        for (a, b) in self.covar.iter_mut().zip(&o.covar) {
            a.occ += b.occ;
            addv(&mut a.sum, &b.sum);
        }
        for (a, b) in self.weight.iter_mut().zip(&o.weight) {
            a.occ += b.occ;
            addv(&mut a.c, &b.c);
        }
        for (a, b) in self.trans.iter_mut().zip(&o.trans) {
            addv(&mut a.occ, &b.occ);
            addv(&mut a.tran, &b.tran);
        }
        addv_u(&mut self.num_egs, &o.num_egs);
        self.total_pr += o.total_pr;
        self.total_frames += o.total_frames;
    }

    /// Gather Lr × the statistics of frame `x` for Gaussian `pdf` of `set`
    /// (centred on the pdf's current mean).
    pub fn add_frame(&mut self, set: &HmmSet, pdf: usize, x: &[f32], lr: f64, u: HtkUpdate) {
        let p = &set.pdfs[pdf];
        let mean = &set.means[p.mean];
        if !(u.means || u.vars) {
            return;
        }
        // HFB computes the centred value and its product with Lr in float.
        let lr32 = lr as f32;
        if u.means {
            let ma = &mut self.mean[p.mean];
            ma.occ += lr;
            for k in 0..mean.len() {
                let z = x[k] - mean[k];
                ma.sum[k] += (z * lr32) as f64;
            }
        }
        if u.vars {
            match p.cov {
                Covariance::Diag(v) => {
                    let va = &mut self.var[v];
                    va.occ += lr;
                    for k in 0..mean.len() {
                        let z = x[k] - mean[k];
                        va.sum[k] += (z * (z * lr32)) as f64;
                    }
                }
                Covariance::InvCovar(c) => {
                    let va = &mut self.covar[c];
                    va.occ += lr;
                    let mut idx = 0;
                    for k in 0..mean.len() {
                        let zk = (x[k] - mean[k]) * lr32;
                        for l in 0..=k {
                            va.sum[idx] += ((x[l] - mean[l]) * zk) as f64;
                            idx += 1;
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

fn addv_u(a: &mut [u64], b: &[u64]) {
    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
}
