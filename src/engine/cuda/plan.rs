//! Host-side work plans for the CUDA statistics kernels: the (frame, state,
//! weight) entries of a batch grouped by state (a stable counting sort, so the
//! order is fixed), cut into work items, and the groups that say which items
//! the fixed-order f64 reduction sums. Pure Rust, tested without a GPU.

use crate::engine::FrameTargets;
use crate::{Error, Result};

/// One work item, laid out as the kernels' `Item` (four i32).
pub type Item = [i32; 4];
/// One reduction group, laid out as the kernels' `Group` (four i32).
pub type Group = [i32; 4];

/// Entries of frames `[start, end)` of a batch grouped by state.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct EntryPlan {
    /// Frame of each entry, relative to `start`; `None`: entry e is frame e.
    pub frame_of: Option<Vec<u32>>,
    /// Weight of each entry; `None`: all 1.
    pub weight_of: Option<Vec<f32>>,
    /// Number of entries.
    pub entries: usize,
    /// (state, first entry, count ≤ tile, 0): one per tile of a state's entries.
    pub ll_items: Vec<Item>,
    /// (state, first entry, count ≤ chunk, Gaussian block), ordered by
    /// (state, Gaussian block, entries).
    pub acc_items: Vec<Item>,
    /// (first item, item count, first Gaussian, Gaussian count) per (state,
    /// Gaussian block) that has entries.
    pub groups: Vec<Group>,
    /// Σ weight of the entries, in entry order.
    pub total_weight: f64,
}

/// Items or groups as the kernels read them: four i32 each, back to back.
pub fn flat_items(v: &[[i32; 4]]) -> Vec<i32> {
    v.iter().flatten().copied().collect()
}

/// Sizes the plan is cut by.
#[derive(Debug, Clone, Copy)]
pub struct PlanShape<'a> {
    /// Entries per log-likelihood item (the kernels' TF).
    pub tile: usize,
    /// Entries per statistics item.
    pub chunk: usize,
    /// Gaussians per statistics item (the kernels' GB).
    pub gblock: usize,
    /// Gaussians of each state.
    pub state_gaussians: &'a [usize],
    /// First Gaussian of each state in state-major order (the accumulator rows).
    pub state_first_gaussian: &'a [usize],
}

/// Check `targets` against a batch of `frames` frames and a model whose
/// states have `state_gaussians` Gaussians.
pub fn validate(
    targets: &FrameTargets<'_>,
    frames: usize,
    state_gaussians: &[usize],
) -> Result<()> {
    let states = state_gaussians.len();
    match *targets {
        FrameTargets::Global => {
            if states == 0 {
                return Err(Error::Mismatch(
                    "global statistics need a model with at least one state".into(),
                ));
            }
        }
        FrameTargets::Aligned(ali) => {
            if ali.len() != frames {
                return Err(Error::Mismatch(format!(
                    "alignment has {} entries but the features have {} frames",
                    ali.len(),
                    frames
                )));
            }
            if let Some((t, &s)) = ali.iter().enumerate().find(|(_, &s)| s as usize >= states) {
                return Err(Error::Mismatch(format!(
                    "frame {t} is aligned to state {s}, but the model has {states} states"
                )));
            }
        }
        FrameTargets::Weighted { offsets, pairs } => {
            if offsets.len() != frames + 1 {
                return Err(Error::Mismatch(format!(
                    "posteriors have {} offsets for {} frames (expected frames + 1)",
                    offsets.len(),
                    frames
                )));
            }
            if offsets[0] != 0
                || offsets.windows(2).any(|w| w[0] > w[1])
                || offsets[frames] != pairs.len()
            {
                return Err(Error::Mismatch(
                    "posterior offsets are not increasing from 0 to the number of pairs".into(),
                ));
            }
            if let Some((i, &(s, _))) = pairs
                .iter()
                .enumerate()
                .find(|(_, &(s, _))| s as usize >= states)
            {
                return Err(Error::Mismatch(format!(
                    "posterior pair {i} names state {s}, but the model has {states} states"
                )));
            }
        }
        FrameTargets::Selected(sel) => match state_gaussians.first() {
            Some(&m) => sel.validate(frames, m)?,
            None => {
                return Err(Error::Mismatch(
                    "Gaussian selection needs a model with at least one state".into(),
                ))
            }
        },
    }
    Ok(())
}

/// The plan for frames `[start, end)` (targets already validated).
pub fn plan(
    targets: &FrameTargets<'_>,
    start: usize,
    end: usize,
    shape: &PlanShape<'_>,
) -> EntryPlan {
    let n = end - start;
    let mut p = EntryPlan::default();
    // (state, entries) runs in entry order.
    let mut runs: Vec<(usize, usize, usize)> = Vec::new(); // (state, first, count)
    match *targets {
        FrameTargets::Global => {
            p.entries = n;
            p.total_weight = n as f64;
            if n > 0 {
                runs.push((0, 0, n));
            }
        }
        FrameTargets::Aligned(ali) => {
            let states = shape.state_gaussians.len();
            let ali = &ali[start..end];
            let (frame_of, bounds) = counting_sort(states, ali.iter().map(|&s| s as usize), n);
            p.entries = n;
            p.total_weight = n as f64;
            p.frame_of = Some(frame_of);
            push_runs(&bounds, &mut runs);
        }
        FrameTargets::Weighted { offsets, pairs } => {
            let states = shape.state_gaussians.len();
            let (a, b) = (offsets[start], offsets[end]);
            let slice = &pairs[a..b];
            // Frame of each pair, relative to `start`.
            let mut pair_frame = Vec::with_capacity(slice.len());
            for t in start..end {
                for _ in offsets[t]..offsets[t + 1] {
                    pair_frame.push((t - start) as u32);
                }
            }
            let (order, bounds) =
                counting_sort(states, slice.iter().map(|&(s, _)| s as usize), slice.len());
            let frame_of: Vec<u32> = order.iter().map(|&i| pair_frame[i as usize]).collect();
            let weight_of: Vec<f32> = order.iter().map(|&i| slice[i as usize].1).collect();
            p.total_weight = slice.iter().map(|&(_, w)| f64::from(w)).sum();
            p.entries = slice.len();
            p.frame_of = Some(frame_of);
            p.weight_of = Some(weight_of);
            push_runs(&bounds, &mut runs);
        }
        // Planned by `gselect_plan` (its own kernels).
        FrameTargets::Selected(_) => {}
    }
    for &(state, first, count) in &runs {
        let g = shape.state_gaussians[state];
        for e in (first..first + count).step_by(shape.tile) {
            p.ll_items.push([
                state as i32,
                e as i32,
                (first + count - e).min(shape.tile) as i32,
                0,
            ]);
        }
        for gb in 0..g.div_ceil(shape.gblock) {
            let item_first = p.acc_items.len();
            for e in (first..first + count).step_by(shape.chunk) {
                p.acc_items.push([
                    state as i32,
                    e as i32,
                    (first + count - e).min(shape.chunk) as i32,
                    gb as i32,
                ]);
            }
            let g0 = gb * shape.gblock;
            p.groups.push([
                item_first as i32,
                (p.acc_items.len() - item_first) as i32,
                (shape.state_first_gaussian[state] + g0) as i32,
                (g - g0).min(shape.gblock) as i32,
            ]);
        }
    }
    p
}

/// Stable counting sort of `n` keys < `buckets`: the permutation (positions
/// in the input, grouped by key, input order within a key) and the bucket
/// bounds (`buckets + 1` offsets).
fn counting_sort(
    buckets: usize,
    keys: impl Iterator<Item = usize> + Clone,
    n: usize,
) -> (Vec<u32>, Vec<usize>) {
    let mut bounds = vec![0usize; buckets + 1];
    for k in keys.clone() {
        bounds[k + 1] += 1;
    }
    for i in 0..buckets {
        bounds[i + 1] += bounds[i];
    }
    let mut next = bounds.clone();
    let mut order = vec![0u32; n];
    for (i, k) in keys.enumerate() {
        order[next[k]] = i as u32;
        next[k] += 1;
    }
    (order, bounds)
}

fn push_runs(bounds: &[usize], runs: &mut Vec<(usize, usize, usize)>) {
    for s in 0..bounds.len() - 1 {
        if bounds[s + 1] > bounds[s] {
            runs.push((s, bounds[s], bounds[s + 1] - bounds[s]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape<'a>(g: &'a [usize], first: &'a [usize]) -> PlanShape<'a> {
        PlanShape {
            tile: 4,
            chunk: 8,
            gblock: 2,
            state_gaussians: g,
            state_first_gaussian: first,
        }
    }

    #[test]
    fn aligned_frames_are_grouped_by_state_in_frame_order() {
        let g = [3, 1, 2];
        let first = [0, 3, 4];
        let ali = [2u32, 0, 2, 0, 0, 1];
        let p = plan(&FrameTargets::Aligned(&ali), 0, 6, &shape(&g, &first));
        assert_eq!(p.frame_of.as_deref(), Some(&[1u32, 3, 4, 5, 0, 2][..]));
        assert_eq!(p.ll_items, vec![[0, 0, 3, 0], [1, 3, 1, 0], [2, 4, 2, 0]]);
        // state 0 has 3 Gaussians: blocks of 2 -> two groups.
        assert_eq!(
            p.acc_items,
            vec![[0, 0, 3, 0], [0, 0, 3, 1], [1, 3, 1, 0], [2, 4, 2, 0]]
        );
        assert_eq!(
            p.groups,
            vec![[0, 1, 0, 2], [1, 1, 2, 1], [2, 1, 3, 1], [3, 1, 4, 2]]
        );
        assert_eq!(p.total_weight, 6.0);
    }

    #[test]
    fn global_entries_are_the_frames_cut_into_tiles_and_chunks() {
        let g = [5];
        let first = [0];
        let p = plan(&FrameTargets::Global, 10, 27, &shape(&g, &first));
        assert_eq!(p.frame_of, None);
        assert_eq!(p.entries, 17);
        assert_eq!(p.ll_items.len(), 5);
        assert_eq!(p.ll_items[4], [0, 16, 1, 0]);
        // 3 Gaussian blocks × 3 chunks (8, 8, 1).
        assert_eq!(p.acc_items.len(), 9);
        assert_eq!(p.acc_items[2], [0, 16, 1, 0]);
        assert_eq!(p.groups[2], [6, 3, 4, 1]);
    }

    #[test]
    fn weighted_pairs_keep_their_frames_and_weights() {
        let g = [1, 1];
        let first = [0, 1];
        let offsets = [0usize, 2, 2, 3];
        let pairs = [(1u32, 0.25f32), (0, 0.75), (1, 1.0)];
        let t = FrameTargets::Weighted {
            offsets: &offsets,
            pairs: &pairs,
        };
        validate(&t, 3, &[1, 1]).unwrap();
        let p = plan(&t, 0, 3, &shape(&g, &first));
        assert_eq!(p.frame_of.as_deref(), Some(&[0u32, 0, 2][..]));
        assert_eq!(p.weight_of.as_deref(), Some(&[0.75f32, 0.25, 1.0][..]));
        assert_eq!(p.total_weight, 2.0);
        // A sub-range plans only its own pairs, with frames relative to it.
        let q = plan(&t, 2, 3, &shape(&g, &first));
        assert_eq!(q.frame_of.as_deref(), Some(&[0u32][..]));
        assert_eq!(q.ll_items, vec![[1, 0, 1, 0]]);
    }

    #[test]
    fn bad_targets_are_refused_with_the_position() {
        let e = validate(&FrameTargets::Aligned(&[0, 5]), 2, &[1; 3])
            .unwrap_err()
            .to_string();
        assert!(e.contains("frame 1") && e.contains("state 5"), "{e}");
        let e = validate(&FrameTargets::Aligned(&[0]), 2, &[1; 3])
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 entries") && e.contains("2 frames"), "{e}");
        let offsets = [0usize, 2, 1];
        let pairs = [(0u32, 1.0f32), (0, 1.0)];
        assert!(validate(
            &FrameTargets::Weighted {
                offsets: &offsets,
                pairs: &pairs
            },
            2,
            &[1]
        )
        .is_err());
    }
}
