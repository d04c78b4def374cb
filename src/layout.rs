//! States sorted by Gaussian count and packed into padded blocks of states
//! (64 by default, after Vaněk et al.): virtual Gaussians carry log-weight −∞,
//! an offset vector locates each block, and a map leads back to the original
//! state order. This is the one place that decides how states are sorted,
//! grouped and padded; the CUDA engine uploads what it builds.
//!
//! This is the memory layout of the papers' GPU kernels (Vaněk et al. 2012,
//! Fig. 2): one thread per state, a block of `B` threads walks the Gaussians of
//! its `B` states in lock step, so every state of a block must have the same
//! number of Gaussian slots. States are stable-sorted by Gaussian count
//! (descending, so the biggest blocks come first), cut into blocks of `B`, and
//! each block is padded to its largest count with virtual Gaussians and, in
//! the last block, virtual states. An engine gives each Gaussian a row of
//! parameters (the CUDA engine: its weight vector w, gconst last) and a row
//! for the virtual ones (gconst −∞, the rest 0: log-likelihood −∞ for every
//! frame, nothing added to a log-sum-exp); [`StateBlockLayout::pack_rows`]
//! puts the `B` states' values of one (Gaussian slot, row index) next to each
//! other, so a warp reading one parameter for its states reads consecutive
//! addresses (coalesced):
//!
//! ```text
//! packed[(slot·K + k)·B + s]      K = the row's length
//! slot = block_offsets[block] + g,      s = state within the block
//! ```
//!
//! The block size is a parameter: the CUDA engine asks for the size its
//! kernels are compiled for (`KernelShape::block_states`), `amtool bench`
//! reports the padding of every candidate and [`choose_block_states`]'s pick.
//! The CPU engine has no state blocks: it scores each state's Gaussians in
//! its own panels (`engine::cpu::PackedModel`), where sorting and padding
//! states would only cost.

use rayon::prelude::*;

use crate::model::AcousticModel;

/// The papers' block size: 64 states (threads) per block was best on most GPUs.
pub const DEFAULT_BLOCK_STATES: usize = 64;

/// Block sizes [`choose_block_states`] considers.
pub const CANDIDATE_BLOCK_STATES: [usize; 3] = [32, 64, 128];

/// The state order and padding of a model cut into blocks of `block_states`
/// states. Sorted position `p` is in block `p / block_states`, lane
/// `p % block_states`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateBlockLayout {
    /// `B`: states per block.
    pub block_states: usize,
    /// Sorted position → original state index (length: number of real states).
    pub sorted_to_original: Vec<u32>,
    /// Original state index → sorted position.
    pub original_to_sorted: Vec<u32>,
    /// Gaussian count of each state in sorted order.
    pub sorted_counts: Vec<u32>,
    /// Per block, the Gaussian slots of each of its states (its largest count).
    pub block_gaussians: Vec<u32>,
    /// Per block, the first Gaussian slot of the block; one more entry at the end
    /// holds the total number of slots. Multiply by `B` (gconsts), `B·D`
    /// (means_invvars) or `B·V` (inv_vars) for element offsets.
    pub block_offsets: Vec<usize>,
}

impl StateBlockLayout {
    /// Sort the states with these Gaussian counts and cut them into blocks of
    /// `block_states` (must be ≥ 1).
    pub fn new(counts: &[usize], block_states: usize) -> Self {
        assert!(block_states >= 1, "block size must be at least one state");
        let mut order: Vec<u32> = (0..counts.len() as u32).collect();
        // Stable: states with equal counts keep their original relative order.
        order.sort_by(|&a, &b| counts[b as usize].cmp(&counts[a as usize]));
        let mut original_to_sorted = vec![0u32; counts.len()];
        for (p, &s) in order.iter().enumerate() {
            original_to_sorted[s as usize] = p as u32;
        }
        let sorted_counts: Vec<u32> = order.iter().map(|&s| counts[s as usize] as u32).collect();
        let block_gaussians: Vec<u32> = sorted_counts
            .chunks(block_states)
            .map(|c| c.iter().copied().max().unwrap_or(0))
            .collect();
        let mut block_offsets = Vec::with_capacity(block_gaussians.len() + 1);
        let mut acc = 0usize;
        block_offsets.push(0);
        for &g in &block_gaussians {
            acc += g as usize;
            block_offsets.push(acc);
        }
        StateBlockLayout {
            block_states,
            sorted_to_original: order,
            original_to_sorted,
            sorted_counts,
            block_gaussians,
            block_offsets,
        }
    }

    /// The layout of `model` with `block_states` states per block.
    pub fn for_model(model: &AcousticModel, block_states: usize) -> Self {
        let counts: Vec<usize> = model.states.iter().map(|s| s.num_components()).collect();
        Self::new(&counts, block_states)
    }

    pub fn num_states(&self) -> usize {
        self.sorted_to_original.len()
    }

    pub fn num_blocks(&self) -> usize {
        self.block_gaussians.len()
    }

    /// States including the virtual ones that fill the last block.
    pub fn padded_states(&self) -> usize {
        self.num_blocks() * self.block_states
    }

    /// Total Gaussian slots of one lane (`block_offsets.last()`).
    pub fn total_slots(&self) -> usize {
        *self.block_offsets.last().unwrap_or(&0)
    }

    /// Real Gaussians in the model.
    pub fn real_gaussians(&self) -> usize {
        self.sorted_counts.iter().map(|&c| c as usize).sum()
    }

    /// Gaussians in the padded arrays, real and virtual.
    pub fn padded_gaussians(&self) -> usize {
        self.total_slots() * self.block_states
    }

    /// Virtual Gaussians (padding, including those of virtual states).
    pub fn virtual_gaussians(&self) -> usize {
        self.padded_gaussians() - self.real_gaussians()
    }

    /// Padding overhead: virtual / real Gaussians (0 for a model without Gaussians).
    pub fn padding_overhead(&self) -> f64 {
        let real = self.real_gaussians();
        if real == 0 {
            0.0
        } else {
            self.virtual_gaussians() as f64 / real as f64
        }
    }

    /// Reorder per-state values from sorted order (`src[p]`, `p < num_states`)
    /// into original order (`dst[original]`).
    pub fn sorted_to_original_order<T: Copy>(&self, src: &[T], dst: &mut [T]) {
        for (p, &s) in self.sorted_to_original.iter().enumerate() {
            dst[s as usize] = src[p];
        }
    }

    /// Slots of the largest block.
    pub fn max_block_gaussians(&self) -> usize {
        self.block_gaussians.iter().copied().max().unwrap_or(0) as usize
    }

    /// Per lane of every block, the original state it holds, or −1 for the
    /// virtual states that fill the last block (where a lane's result goes).
    pub fn lane_states(&self) -> Vec<i32> {
        let mut lanes = vec![-1i32; self.padded_states()];
        for (lane, &s) in lanes.iter_mut().zip(&self.sorted_to_original) {
            *lane = s as i32;
        }
        lanes
    }

    /// The padded block array of one row of `pad.len()` values per Gaussian,
    /// in the order `[slot][k][lane]` (see the module docs): `row(state, g,
    /// out)` writes the row of Gaussian `g` of (original) `state`; every
    /// virtual slot, padding Gaussians and virtual states alike, holds `pad`.
    /// Blocks are filled in parallel (each is one range of the array).
    pub fn pack_rows<F>(&self, pad: &[f32], row: F) -> Vec<f32>
    where
        F: Fn(usize, usize, &mut [f32]) + Sync,
    {
        assert!(!pad.is_empty(), "a Gaussian's row has at least one value");
        let (b, width) = (self.block_states, pad.len());
        let mut packed = vec![0f32; self.padded_gaussians() * width];
        let mut parts = Vec::with_capacity(self.num_blocks());
        let mut rest = packed.as_mut_slice();
        for &g in &self.block_gaussians {
            let (part, tail) = rest.split_at_mut(g as usize * width * b);
            parts.push(part);
            rest = tail;
        }
        parts.into_par_iter().enumerate().for_each(|(blk, block)| {
            for slot in block.chunks_mut(width * b) {
                for (k, &v) in pad.iter().enumerate() {
                    slot[k * b..(k + 1) * b].fill(v);
                }
            }
            let mut r = vec![0f32; width];
            let first = blk * b;
            let last = (first + b).min(self.num_states());
            for (lane, p) in (first..last).enumerate() {
                let state = self.sorted_to_original[p] as usize;
                for g in 0..self.sorted_counts[p] as usize {
                    row(state, g, &mut r);
                    for (k, &v) in r.iter().enumerate() {
                        block[(g * width + k) * b + lane] = v;
                    }
                }
            }
        });
        packed
    }
}

/// Pick a block size for a model with these per-state Gaussian counts, among
/// [`CANDIDATE_BLOCK_STATES`]. Cost = padded Gaussians (the work a GPU does)
/// scaled by a per-size penalty from Vaněk et al.: 32-state blocks (one warp)
/// hide memory latency poorly (+10%), 128-state blocks limit the resident
/// blocks by registers (+5%), 64 is their measured optimum. Ties keep 64.
/// A uniform model always gets 64; a skewed one may get 32 when that cuts
/// enough padding. Engines may ignore this and take the parameter from the user.
pub fn choose_block_states(counts: &[usize]) -> usize {
    let penalty = |b: usize| match b {
        32 => 1.10,
        128 => 1.05,
        _ => 1.0,
    };
    let cost = |b: usize| StateBlockLayout::new(counts, b).padded_gaussians() as f64 * penalty(b);
    let mut best = DEFAULT_BLOCK_STATES;
    let mut best_cost = cost(best);
    for &b in &CANDIDATE_BLOCK_STATES {
        let c = cost(b);
        if c < best_cost {
            best = b;
            best_cost = c;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CovKind, StateGmm};
    use proptest::prelude::*;

    fn model_from(counts: &[usize], dim: usize, kind: CovKind, seed: u64) -> AcousticModel {
        let mut r = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = move || {
            r = r
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((r >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let v = match kind {
            CovKind::Diagonal => dim,
            CovKind::Full => dim * (dim + 1) / 2,
        };
        let states = counts
            .iter()
            .map(|&m| StateGmm {
                gconsts: (0..m).map(|_| next() * 10.0 - 20.0).collect(),
                weights: vec![1.0 / m as f32; m],
                means_invvars: (0..m * dim).map(|_| next()).collect(),
                inv_vars: (0..m * v).map(|_| next().abs() + 0.5).collect(),
            })
            .collect();
        AcousticModel { dim, kind, states }
    }

    /// f64 log-likelihood of state `s` straight from the model.
    fn state_ll_model(m: &AcousticModel, s: usize, x: &[f32]) -> f64 {
        let st = &m.states[s];
        let lls: Vec<f64> = (0..st.num_components())
            .map(|g| {
                let mut ll = st.gconsts[g] as f64;
                for d in 0..m.dim {
                    let xd = x[d] as f64;
                    ll += xd * st.means_invvars[g * m.dim + d] as f64
                        - 0.5 * xd * xd * st.inv_vars[g * m.dim + d] as f64;
                }
                ll
            })
            .collect();
        lse(&lls)
    }

    /// A diagonal Gaussian's row: `[means_invvars, inv_vars, gconst]`.
    fn diag_row(m: &AcousticModel, s: usize, g: usize, out: &mut [f32]) {
        let (d, st) = (m.dim, &m.states[s]);
        out[..d].copy_from_slice(&st.means_invvars[g * d..(g + 1) * d]);
        out[d..2 * d].copy_from_slice(&st.inv_vars[g * d..(g + 1) * d]);
        out[2 * d] = st.gconsts[g];
    }

    /// The row of a virtual Gaussian: gconst −∞, the rest 0.
    fn virtual_row(width: usize) -> Vec<f32> {
        let mut pad = vec![0f32; width];
        pad[width - 1] = f32::NEG_INFINITY;
        pad
    }

    /// f64 log-likelihood of state `s` from the packed diagonal rows, walking
    /// all the slots of its block as a GPU thread would.
    fn state_ll_padded(l: &StateBlockLayout, packed: &[f32], d: usize, s: usize, x: &[f32]) -> f64 {
        let (b, w) = (l.block_states, 2 * d + 1);
        let pos = l.original_to_sorted[s] as usize;
        let (blk, lane) = (pos / b, pos % b);
        let at = |slot: usize, k: usize| packed[(slot * w + k) * b + lane] as f64;
        let lls: Vec<f64> = (l.block_offsets[blk]..l.block_offsets[blk + 1])
            .map(|slot| {
                let mut ll = at(slot, 2 * d);
                for k in 0..d {
                    let xd = x[k] as f64;
                    ll += xd * at(slot, k) - 0.5 * xd * xd * at(slot, d + k);
                }
                ll
            })
            .collect();
        lse(&lls)
    }

    fn lse(v: &[f64]) -> f64 {
        let mx = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if mx == f64::NEG_INFINITY {
            return mx;
        }
        mx + v.iter().map(|&a| (a - mx).exp()).sum::<f64>().ln()
    }

    #[test]
    fn sorts_descending_stable_and_pads() {
        let counts = [2, 5, 2, 7, 5, 1];
        let l = StateBlockLayout::new(&counts, 4);
        assert_eq!(l.sorted_to_original, vec![3, 1, 4, 0, 2, 5]);
        assert_eq!(l.block_gaussians, vec![7, 2]);
        assert_eq!(l.block_offsets, vec![0, 7, 9]);
        assert_eq!(l.real_gaussians(), 22);
        assert_eq!(l.padded_gaussians(), 36);
        assert_eq!(l.virtual_gaussians(), 14);
        assert!((l.padding_overhead() - 14.0 / 22.0).abs() < 1e-12);
    }

    #[test]
    fn uniform_model_prefers_64() {
        assert_eq!(choose_block_states(&[16; 5000]), 64);
    }

    #[test]
    fn virtual_gaussians_are_minus_infinity_and_zero() {
        let m = model_from(&[3, 1], 2, CovKind::Diagonal, 7);
        let l = StateBlockLayout::for_model(&m, 4);
        let p = l.pack_rows(&virtual_row(5), |s, g, out| diag_row(&m, s, g, out));
        // Block 0 has 3 slots × 5 values × 4 lanes; lane 1 (state 1) has only slot 0 real.
        assert_eq!(p.len(), 3 * 5 * 4);
        let gconst = |slot: usize, lane: usize| p[(slot * 5 + 4) * 4 + lane];
        assert_eq!(gconst(0, 1), m.states[1].gconsts[0]);
        assert!(gconst(1, 1) == f32::NEG_INFINITY && gconst(2, 1) == f32::NEG_INFINITY);
        assert_eq!(p[(1 * 5) * 4 + 1], 0.0);
        // Lanes 2 and 3 are virtual states.
        assert!((0..3).all(
            |slot| gconst(slot, 2) == f32::NEG_INFINITY && gconst(slot, 3) == f32::NEG_INFINITY
        ));
        assert_eq!(l.lane_states(), vec![0, 1, -1, -1]);
    }

    proptest! {
        #[test]
        fn layout_round_trips_state_order(counts in prop::collection::vec(0usize..40, 0..300), b in 1usize..130) {
            let l = StateBlockLayout::new(&counts, b);
            let n = counts.len();
            let mut seen = vec![false; n];
            for (p, &s) in l.sorted_to_original.iter().enumerate() {
                prop_assert!(!seen[s as usize]);
                seen[s as usize] = true;
                prop_assert_eq!(l.original_to_sorted[s as usize] as usize, p);
                prop_assert_eq!(l.sorted_counts[p] as usize, counts[s as usize]);
            }
            for w in l.sorted_counts.windows(2) {
                prop_assert!(w[0] >= w[1]);
            }
            // Every state fits its block.
            for (p, &c) in l.sorted_counts.iter().enumerate() {
                prop_assert!(c <= l.block_gaussians[p / b]);
            }
            let vals: Vec<u32> = l.sorted_to_original.clone();
            let mut back = vec![0u32; n];
            l.sorted_to_original_order(&vals, &mut back);
            prop_assert_eq!(back, (0..n as u32).collect::<Vec<_>>());
            prop_assert_eq!(l.padded_gaussians(), l.real_gaussians() + l.virtual_gaussians());
        }

        #[test]
        fn padding_never_changes_a_result(
            counts in prop::collection::vec(1usize..20, 1..80),
            b in 1usize..70,
            dim in 1usize..12,
            seed in any::<u64>(),
        ) {
            let m = model_from(&counts, dim, CovKind::Diagonal, seed);
            let l = StateBlockLayout::for_model(&m, b);
            let p = l.pack_rows(&virtual_row(2 * dim + 1), |s, g, out| diag_row(&m, s, g, out));
            let x: Vec<f32> = (0..dim).map(|k| (k as f32 * 0.37 + seed as f32 * 1e-20).sin()).collect();
            for s in 0..m.num_states() {
                // Same terms in the same order plus exp(−∞) = 0: bit-identical.
                prop_assert_eq!(state_ll_model(&m, s, &x), state_ll_padded(&l, &p, dim, s, &x));
            }
        }

        /// Every real Gaussian lands exactly once, in its state's lane of its
        /// state's block at its own slot; every other slot is virtual (−∞);
        /// blocks come biggest first; the lanes name the states back.
        #[test]
        fn packed_rows_hold_every_gaussian_once(
            counts in prop::collection::vec(0usize..30, 0..200),
            b in 1usize..70,
        ) {
            let l = StateBlockLayout::new(&counts, b);
            // Row of Gaussian g of state s: [s, g, 0 (gconst)], exact in f32.
            let p = l.pack_rows(&[-1.0, -1.0, f32::NEG_INFINITY], |s, g, out| {
                out.copy_from_slice(&[s as f32, g as f32, 0.0]);
            });
            prop_assert_eq!(p.len(), l.padded_gaussians() * 3);
            for w in l.block_gaussians.windows(2) {
                prop_assert!(w[0] >= w[1]);
            }
            let lanes = l.lane_states();
            prop_assert_eq!(lanes.len(), l.padded_states());
            let mut seen: Vec<Vec<bool>> = counts.iter().map(|&c| vec![false; c]).collect();
            for blk in 0..l.num_blocks() {
                for slot in l.block_offsets[blk]..l.block_offsets[blk + 1] {
                    for lane in 0..b {
                        let at = |k: usize| p[(slot * 3 + k) * b + lane];
                        if at(2) == f32::NEG_INFINITY {
                            prop_assert_eq!((at(0), at(1)), (-1.0, -1.0));
                            continue;
                        }
                        let (s, g) = (at(0) as usize, at(1) as usize);
                        prop_assert_eq!(lanes[blk * b + lane], s as i32);
                        prop_assert_eq!(l.original_to_sorted[s] as usize, blk * b + lane);
                        prop_assert_eq!(g, slot - l.block_offsets[blk]);
                        prop_assert!(!seen[s][g], "state {} Gaussian {} twice", s, g);
                        seen[s][g] = true;
                    }
                }
            }
            prop_assert!(seen.iter().flatten().all(|&x| x), "a Gaussian is missing");
            for (lane, &s) in lanes.iter().enumerate() {
                if s >= 0 {
                    prop_assert_eq!(l.sorted_to_original[lane], s as u32);
                } else {
                    prop_assert!(lane >= l.num_states());
                }
            }
        }
    }
}
