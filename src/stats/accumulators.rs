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
        assert_eq!(
            self.states.len(),
            other.states.len(),
            "accumulator shapes differ"
        );
        for (a, b) in self.states.iter_mut().zip(&other.states) {
            for (x, y) in a.occupancy.iter_mut().zip(&b.occupancy) {
                *x += y;
            }
            for (x, y) in a.mean_acc.iter_mut().zip(&b.mean_acc) {
                *x += y;
            }
            for (x, y) in a.var_acc.iter_mut().zip(&b.var_acc) {
                *x += y;
            }
        }
        self.total_like += other.total_like;
        self.total_frames += other.total_frames;
    }
}
