//! Host-side work plan of the CUDA Gaussian-selection statistics
//! ([`FrameTargets::Selected`](crate::engine::FrameTargets::Selected),
//! `kernels/gselect.cu`): the (frame, component) pairs of a chunk's frames
//! of non-zero weight grouped by component (a stable counting sort, so frame
//! order within a component and one fixed order overall), cut into items of
//! one component, and the map from each frame's pairs to their entries that
//! the per-frame softmax reads. Pure Rust, tested without a GPU.

use super::plan::{Group, Item};
use crate::engine::Selection;
use crate::{Error, Result};

/// The plan of frames `[start, end)` of a batch.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SelectionPlan {
    /// Per entry (the pairs grouped by component): its frame, relative to
    /// `start`.
    pub frame_of: Vec<u32>,
    /// Per kept pair (the pairs of frames of non-zero weight, in frame and
    /// selection order): its entry.
    pub entry_of: Vec<u32>,
    /// Per kept frame: its first kept pair; one more holds the total.
    pub frame_first: Vec<u32>,
    /// Per kept frame: its weight.
    pub frame_weight: Vec<f32>,
    /// (component, first entry, count ≤ the item size, 0), in entry order.
    pub items: Vec<Item>,
    /// (first item, item count, component, 1) per component with entries.
    pub groups: Vec<Group>,
    /// Σ weight of the kept frames, in frame order.
    pub total_weight: f64,
}

impl SelectionPlan {
    pub fn entries(&self) -> usize {
        self.frame_of.len()
    }

    pub fn frames(&self) -> usize {
        self.frame_weight.len()
    }
}

/// The plan of frames `[start, end)` of `sel` (validated against a GMM of
/// `gaussians` components) in items of at most `item` entries. An error
/// when the entries would not fit the kernels' 32-bit indices.
pub fn plan(
    sel: &Selection<'_>,
    start: usize,
    end: usize,
    gaussians: usize,
    item: usize,
) -> Result<SelectionPlan> {
    let kept = || (start..end).filter(|&t| sel.weight(t) != 0.0);
    let mut p = SelectionPlan::default();
    let mut bounds = vec![0usize; gaussians + 1];
    p.frame_first.push(0);
    for t in kept() {
        let comps = sel.of(t);
        for &g in comps {
            bounds[g as usize + 1] += 1;
        }
        let last = p.frame_first[p.frame_first.len() - 1] as usize;
        p.frame_first.push(u32_index(last + comps.len())?);
        p.frame_weight.push(sel.weight(t));
        p.total_weight += f64::from(sel.weight(t));
    }
    for g in 0..gaussians {
        bounds[g + 1] += bounds[g];
    }
    let entries = bounds[gaussians];
    i32_index(entries)?;
    let mut next = bounds.clone();
    p.frame_of = vec![0; entries];
    p.entry_of = Vec::with_capacity(entries);
    for t in kept() {
        for &g in sel.of(t) {
            let e = next[g as usize];
            next[g as usize] += 1;
            p.frame_of[e] = (t - start) as u32;
            p.entry_of.push(e as u32);
        }
    }
    let item = item.max(1);
    for g in 0..gaussians {
        let (b0, b1) = (bounds[g], bounds[g + 1]);
        if b1 == b0 {
            continue;
        }
        let first = p.items.len();
        for e in (b0..b1).step_by(item) {
            p.items
                .push([g as i32, e as i32, (b1 - e).min(item) as i32, 0]);
        }
        p.groups
            .push([first as i32, (p.items.len() - first) as i32, g as i32, 1]);
    }
    Ok(p)
}

fn u32_index(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| too_many(n))
}

fn i32_index(n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| too_many(n))
}

fn too_many(n: usize) -> Error {
    Error::Engine(format!(
        "Gaussian selection: {n} (frame, component) pairs in one chunk are more than the kernels index"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_grouped_by_component_in_frame_order() {
        // Frames: {2, 0}, {1} (weight 0: skipped), {0, 2, 0}, {2}.
        let offsets = [0usize, 2, 3, 6, 7];
        let components = [2u32, 0, 1, 0, 2, 0, 2];
        let weights = [1.0f32, 0.0, 0.5, 2.0];
        let sel = Selection {
            offsets: &offsets,
            components: &components,
            weights: Some(&weights),
        };
        sel.validate(4, 3).unwrap();
        let p = plan(&sel, 0, 4, 3, 2).unwrap();
        // Component 0: frame 0, frame 2 (twice); component 2: frames 0, 2, 3.
        assert_eq!(p.frame_of, vec![0, 2, 2, 0, 2, 3]);
        // Kept pairs in order: f0 (2, 0), f2 (0, 2, 0), f3 (2).
        assert_eq!(p.entry_of, vec![3, 0, 1, 4, 2, 5]);
        assert_eq!(p.frame_first, vec![0, 2, 5, 6]);
        assert_eq!(p.frame_weight, vec![1.0, 0.5, 2.0]);
        assert_eq!(p.total_weight, 3.5);
        // Items of at most 2 entries; component 1 has none.
        assert_eq!(
            p.items,
            vec![[0, 0, 2, 0], [0, 2, 1, 0], [2, 3, 2, 0], [2, 5, 1, 0]]
        );
        assert_eq!(p.groups, vec![[0, 2, 0, 1], [2, 2, 2, 1]]);
        // Every kept pair's entry holds its component and frame.
        let kept_frames = [0u32, 2, 3];
        for (f, &t) in kept_frames.iter().enumerate() {
            let (a, b) = (p.frame_first[f] as usize, p.frame_first[f + 1] as usize);
            let comps = sel.of(t as usize);
            for (i, &e) in p.entry_of[a..b].iter().enumerate() {
                let e = e as usize;
                assert_eq!(p.frame_of[e], t);
                let item = p
                    .items
                    .iter()
                    .find(|it| (it[1] as usize..(it[1] + it[2]) as usize).contains(&e));
                assert_eq!(item.map(|it| it[0] as u32), Some(comps[i]));
            }
        }
    }

    #[test]
    fn a_sub_range_plans_its_own_frames_relative_to_its_start() {
        let offsets = [0usize, 1, 2, 4];
        let components = [1u32, 1, 0, 1];
        let sel = Selection {
            offsets: &offsets,
            components: &components,
            weights: None,
        };
        let p = plan(&sel, 1, 3, 2, 4096).unwrap();
        assert_eq!(p.frame_of, vec![1, 0, 1]);
        assert_eq!(p.entry_of, vec![1, 0, 2]);
        assert_eq!(p.frame_first, vec![0, 1, 3]);
        assert_eq!(p.frame_weight, vec![1.0, 1.0]);
        assert_eq!(p.items, vec![[0, 0, 1, 0], [1, 1, 2, 0]]);
        // No frame of non-zero weight: an empty plan.
        let zero = [0.0f32; 3];
        let sel = Selection {
            weights: Some(&zero),
            ..sel
        };
        let p = plan(&sel, 0, 3, 2, 4096).unwrap();
        assert_eq!((p.entries(), p.frames(), p.items.len()), (0, 0, 0));
        assert_eq!(p.frame_first, vec![0]);
    }
}
