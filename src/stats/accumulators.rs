//! EM accumulators: per state and component, the occupancy Σγ, the first-order
//! sum Σγx and the second-order sum Σγx² (diagonal) or Σγxxᵀ (full, packed lower
//! triangle as in `model`). Always f64, whatever the engine computed in.

use crate::model::{AcousticModel, CovKind};

/// Which statistics to gather and which parameters to update (Kaldi's
/// `--update-flags` letters m, v, w, t; HTK's `-u`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateFlags {
    pub means: bool,
    pub variances: bool,
    pub weights: bool,
    pub transitions: bool,
}

impl Default for UpdateFlags {
    fn default() -> Self {
        UpdateFlags {
            means: true,
            variances: true,
            weights: true,
            transitions: true,
        }
    }
}

/// Statistics for one state's mixture.
#[derive(Debug, Clone, PartialEq)]
pub struct GmmAccumulator {
    /// Per component.
    pub occupancy: Vec<f64>,
    /// components × dim (empty when means are not accumulated).
    pub mean_acc: Vec<f64>,
    /// components × dim (diagonal) or components × dim(dim+1)/2 (full); empty when
    /// variances are not accumulated.
    pub var_acc: Vec<f64>,
}

/// Statistics for a whole model: one [`GmmAccumulator`] per state, plus the
/// weighted total log-likelihood and frame count Kaldi keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelAccumulators {
    pub dim: usize,
    pub kind: CovKind,
    pub flags: UpdateFlags,
    pub states: Vec<GmmAccumulator>,
    /// Σ over frames of weight × log-likelihood of the frame's state.
    pub total_like: f64,
    /// Σ over frames of weight.
    pub total_frames: f64,
}

impl ModelAccumulators {
    /// Zeroed accumulators shaped like `model`.
    pub fn zeros(model: &AcousticModel, flags: UpdateFlags) -> Self {
        let vlen = model.inv_var_len();
        let states = model
            .states
            .iter()
            .map(|s| {
                let m = s.num_components();
                GmmAccumulator {
                    occupancy: vec![0.0; m],
                    mean_acc: if flags.means {
                        vec![0.0; m * model.dim]
                    } else {
                        Vec::new()
                    },
                    var_acc: if flags.means && flags.variances {
                        vec![0.0; m * vlen]
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect();
        ModelAccumulators {
            dim: model.dim,
            kind: model.kind,
            flags,
            states,
            total_like: 0.0,
            total_frames: 0.0,
        }
    }

    /// Zeroed accumulators of the same shape and flags.
    pub fn zeros_like(&self) -> Self {
        let zeros = |v: &Vec<f64>| vec![0.0; v.len()];
        ModelAccumulators {
            states: self
                .states
                .iter()
                .map(|s| GmmAccumulator {
                    occupancy: zeros(&s.occupancy),
                    mean_acc: zeros(&s.mean_acc),
                    var_acc: zeros(&s.var_acc),
                })
                .collect(),
            total_like: 0.0,
            total_frames: 0.0,
            ..*self
        }
    }

    /// The bits of every number (totals first, then each state's
    /// occupancies and sums), for comparisons to the bit.
    pub fn bit_patterns(&self) -> Vec<u64> {
        let mut v = vec![self.total_like.to_bits(), self.total_frames.to_bits()];
        for s in &self.states {
            let all = s.occupancy.iter().chain(&s.mean_acc).chain(&s.var_acc);
            v.extend(all.map(|x| x.to_bits()));
        }
        v
    }

    /// Whether `other` has the states, components and statistics of `self`
    /// (what [`add`](Self::add) needs).
    pub fn same_shape(&self, other: &ModelAccumulators) -> bool {
        self.dim == other.dim
            && self.kind == other.kind
            && self.states.len() == other.states.len()
            && self.states.iter().zip(&other.states).all(|(a, b)| {
                a.occupancy.len() == b.occupancy.len()
                    && a.mean_acc.len() == b.mean_acc.len()
                    && a.var_acc.len() == b.var_acc.len()
            })
    }

    /// Add `other` (same shape) into `self`: statistics are additive.
    pub fn add(&mut self, other: &ModelAccumulators) {
        self.add_on(other, None);
    }

    /// [`Self::add`] on `pool`'s threads, a run of sums each, or on the
    /// calling thread (`None`): each sum is added once, so the same bits.
    pub fn add_on(&mut self, other: &ModelAccumulators, pool: Option<&rayon::ThreadPool>) {
        use rayon::prelude::*;
        assert_eq!(
            self.states.len(),
            other.states.len(),
            "accumulator shapes differ"
        );
        const RUN: usize = 1 << 13;
        let mut runs: Vec<(&mut [f64], &[f64])> = Vec::new();
        for (a, b) in self.states.iter_mut().zip(&other.states) {
            for (x, y) in [
                (&mut a.occupancy, &b.occupancy),
                (&mut a.mean_acc, &b.mean_acc),
                (&mut a.var_acc, &b.var_acc),
            ] {
                let n = x.len().min(y.len());
                runs.extend(x[..n].chunks_mut(RUN).zip(y[..n].chunks(RUN)));
            }
        }
        let add_run = |(x, y): (&mut [f64], &[f64])| {
            for (x, y) in x.iter_mut().zip(y) {
                *x += y;
            }
        };
        match pool {
            Some(p) => p.install(|| runs.into_par_iter().for_each(add_run)),
            None => runs.into_iter().for_each(add_run),
        }
        self.total_like += other.total_like;
        self.total_frames += other.total_frames;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accs(seed: f64, states: &[usize], dim: usize, means: bool) -> ModelAccumulators {
        let v = |n: usize, k: f64| (0..n).map(|i| (i as f64 + k).sin() * 1e3).collect();
        ModelAccumulators {
            dim,
            kind: CovKind::Diagonal,
            flags: UpdateFlags::default(),
            states: states
                .iter()
                .enumerate()
                .map(|(s, &g)| GmmAccumulator {
                    occupancy: v(g, seed + s as f64),
                    mean_acc: if means {
                        v(g * dim, seed * 2.0)
                    } else {
                        Vec::new()
                    },
                    var_acc: v(g * dim, seed * 3.0),
                })
                .collect(),
            total_like: seed,
            total_frames: 2.0 * seed,
        }
    }

    /// Added on a pool, the sums are those added on one thread, to the bit
    /// (runs longer than a pool's run, and empty means).
    #[test]
    fn sums_added_on_a_pool_are_the_same_bits() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for (states, means) in [(&[3usize, 9000][..], true), (&[2048][..], false)] {
            let mut one = accs(0.5, states, 40, means);
            let mut on_pool = one.clone();
            let other = accs(1.25, states, 40, means);
            one.add(&other);
            on_pool.add_on(&other, Some(&pool));
            assert_eq!(format!("{one:?}"), format!("{on_pool:?}"));
            on_pool.add_on(&other, None);
            one.add(&other);
            assert_eq!(format!("{one:?}"), format!("{on_pool:?}"));
        }
    }
}
