//! Host-side work plan of the CUDA Gaussian-selection statistics
//! ([`FrameTargets::Selected`](crate::engine::FrameTargets::Selected),
//! `kernels/gselect.cu`): the (frame, component) pairs of a chunk's frames
//! of non-zero weight grouped by component (a stable counting sort, so frame
//! order within a component and one fixed order overall), cut into items of
//! one component, and the map from each frame's pairs to their entries that
//! the per-frame softmax reads. Pure Rust, tested without a GPU.

use rayon::prelude::*;

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

/// Frames per part of the parallel counting sort: a constant, so nothing
/// depends on the number of threads (the sort's result is unique anyway;
/// the Σ weight is added part by part).
const PART_FRAMES: usize = 16 * 1024;

/// One part's counts: pairs per component, its kept frames, their pairs
/// and Σ weight.
struct PartCounts {
    per_component: Vec<u32>,
    frames: usize,
    pairs: usize,
    weight: f64,
}

/// The plan of frames `[start, end)` of `sel` (validated against a GMM of
/// `gaussians` components) in items of at most `item` entries. An error
/// when the entries would not fit the kernels' 32-bit indices.
///
/// A stable counting sort, in parallel over fixed parts of the frames:
/// each part counts its pairs by component; the entries of component g
/// are then part 0's, part 1's, … in that order, so each part scatters its
/// own pairs into its own ranges.
pub fn plan(
    sel: &Selection<'_>,
    start: usize,
    end: usize,
    gaussians: usize,
    item: usize,
) -> Result<SelectionPlan> {
    let parts: Vec<(usize, usize)> = (start..end)
        .step_by(PART_FRAMES)
        .map(|t| (t, (t + PART_FRAMES).min(end)))
        .collect();
    let counts: Vec<PartCounts> = parts
        .par_iter()
        .map(|&(t0, t1)| count_part(sel, t0, t1, gaussians))
        .collect();
    let kept_pairs: usize = counts.iter().map(|c| c.pairs).sum();
    i32_index(kept_pairs)?;
    let mut p = SelectionPlan {
        frame_of: vec![0; kept_pairs],
        entry_of: vec![0; kept_pairs],
        frame_first: vec![0; counts.iter().map(|c| c.frames).sum::<usize>() + 1],
        total_weight: counts.iter().map(|c| c.weight).sum(),
        ..SelectionPlan::default()
    };
    p.frame_weight = vec![0.0; p.frame_first.len() - 1];
    // Component g's entries start at bounds[g]; part q's at first[q][g].
    let mut bounds = vec![0usize; gaussians + 1];
    let mut first = vec![vec![0usize; gaussians]; counts.len()];
    let mut at = 0;
    for g in 0..gaussians {
        bounds[g] = at;
        for (q, c) in counts.iter().enumerate() {
            first[q][g] = at;
            at += c.per_component[g] as usize;
        }
    }
    bounds[gaussians] = at;
    scatter(sel, &parts, &counts, &first, start, &mut p);
    let item = item.max(1);
    for g in 0..gaussians {
        let (b0, b1) = (bounds[g], bounds[g + 1]);
        if b1 == b0 {
            continue;
        }
        let first_item = p.items.len();
        for e in (b0..b1).step_by(item) {
            p.items
                .push([g as i32, e as i32, (b1 - e).min(item) as i32, 0]);
        }
        p.groups.push([
            first_item as i32,
            (p.items.len() - first_item) as i32,
            g as i32,
            1,
        ]);
    }
    Ok(p)
}

fn count_part(sel: &Selection<'_>, t0: usize, t1: usize, gaussians: usize) -> PartCounts {
    let mut c = PartCounts {
        per_component: vec![0; gaussians],
        frames: 0,
        pairs: 0,
        weight: 0.0,
    };
    for t in (t0..t1).filter(|&t| sel.weight(t) != 0.0) {
        for &g in sel.of(t) {
            c.per_component[g as usize] += 1;
        }
        c.frames += 1;
        c.pairs += sel.of(t).len();
        c.weight += f64::from(sel.weight(t));
    }
    c
}

/// Each part writes its pairs' frames into its ranges of `p.frame_of`
/// (`first[q][g]` on), and its own contiguous share of `p.entry_of`,
/// `p.frame_first` and `p.frame_weight`, in parallel.
fn scatter(
    sel: &Selection<'_>,
    parts: &[(usize, usize)],
    counts: &[PartCounts],
    first: &[Vec<usize>],
    start: usize,
    p: &mut SelectionPlan,
) {
    // frame_of cut into its (component, part) ranges, in entry order, and
    // dealt out to the parts.
    let gaussians = first.first().map_or(0, |f| f.len());
    let mut ranges: Vec<Vec<&mut [u32]>> = (0..parts.len())
        .map(|_| Vec::with_capacity(gaussians))
        .collect();
    let mut rest = &mut p.frame_of[..];
    for g in 0..gaussians {
        for (q, c) in counts.iter().enumerate() {
            let (a, b) = std::mem::take(&mut rest).split_at_mut(c.per_component[g] as usize);
            ranges[q].push(a);
            rest = b;
        }
    }
    let mut work = Vec::with_capacity(parts.len());
    let (mut entry_of, mut frame_first, mut frame_weight) = (
        &mut p.entry_of[..],
        &mut p.frame_first[1..],
        &mut p.frame_weight[..],
    );
    let mut pair0 = 0;
    for ((&part, c), (r, f)) in parts.iter().zip(counts).zip(ranges.into_iter().zip(first)) {
        let (e, e2) = std::mem::take(&mut entry_of).split_at_mut(c.pairs);
        let (ff, ff2) = std::mem::take(&mut frame_first).split_at_mut(c.frames);
        let (fw, fw2) = std::mem::take(&mut frame_weight).split_at_mut(c.frames);
        (entry_of, frame_first, frame_weight) = (e2, ff2, fw2);
        work.push((part, pair0, r, f, e, ff, fw));
        pair0 += c.pairs;
    }
    work.into_par_iter().for_each(
        |((t0, t1), pair0, mut r, f, entry_of, frame_first, frame_weight)| {
            let mut next = vec![0usize; f.len()];
            let (mut pair, mut frame) = (0, 0);
            for t in (t0..t1).filter(|&t| sel.weight(t) != 0.0) {
                for &g in sel.of(t) {
                    let g = g as usize;
                    r[g][next[g]] = (t - start) as u32;
                    entry_of[pair] = (f[g] + next[g]) as u32;
                    next[g] += 1;
                    pair += 1;
                }
                frame_first[frame] = (pair0 + pair) as u32;
                frame_weight[frame] = sel.weight(t);
                frame += 1;
            }
        },
    );
}

fn i32_index(n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| {
        Error::Engine(format!(
            "Gaussian selection: {n} (frame, component) pairs in one chunk are more than the kernels index"
        ))
    })
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

    /// The plain serial stable counting sort the parallel one must equal.
    fn serial(sel: &Selection<'_>, start: usize, end: usize, m: usize) -> (Vec<u32>, Vec<u32>) {
        let kept: Vec<usize> = (start..end).filter(|&t| sel.weight(t) != 0.0).collect();
        let mut pairs: Vec<(u32, u32)> = Vec::new(); // (component, frame)
        for &t in &kept {
            pairs.extend(sel.of(t).iter().map(|&g| (g, (t - start) as u32)));
        }
        let mut order: Vec<usize> = (0..pairs.len()).collect();
        order.sort_by_key(|&i| pairs[i].0); // stable
        let frame_of = order.iter().map(|&i| pairs[i].1).collect();
        let mut entry_of = vec![0u32; pairs.len()];
        for (e, &i) in order.iter().enumerate() {
            entry_of[i] = e as u32;
        }
        assert!(pairs.iter().all(|&(g, _)| (g as usize) < m));
        (frame_of, entry_of)
    }

    /// Many parts (frames past several PART_FRAMES, a sub-range starting
    /// inside a part): the serial sort's entries, frames and weights.
    #[test]
    fn the_parallel_sort_is_the_serial_one() {
        let mut rng = crate::bench::random::Rng::new(17);
        let (frames, m) = (3 * PART_FRAMES + 1234, 37);
        let mut offsets = vec![0usize];
        let mut components = Vec::new();
        let mut weights = Vec::new();
        for _ in 0..frames {
            for _ in 0..rng.int(1, 6) {
                components.push(rng.int(0, m - 1) as u32);
            }
            offsets.push(components.len());
            weights.push([0.0f32, 1.0, 0.25][rng.int(0, 2)]);
        }
        let sel = Selection {
            offsets: &offsets,
            components: &components,
            weights: Some(&weights),
        };
        sel.validate(frames, m).unwrap();
        for (start, end) in [
            (0, frames),
            (777, frames - 5),
            (PART_FRAMES, 2 * PART_FRAMES),
        ] {
            let p = plan(&sel, start, end, m, 1000).unwrap();
            let (frame_of, entry_of) = serial(&sel, start, end, m);
            assert_eq!(p.frame_of, frame_of);
            assert_eq!(p.entry_of, entry_of);
            let kept: Vec<usize> = (start..end).filter(|&t| weights[t] != 0.0).collect();
            assert_eq!(
                p.frame_weight,
                kept.iter().map(|&t| weights[t]).collect::<Vec<_>>()
            );
            let mut at = 0;
            let mut want_first = vec![0u32];
            for &t in &kept {
                at += offsets[t + 1] - offsets[t];
                want_first.push(at as u32);
            }
            assert_eq!(p.frame_first, want_first);
            let w: f64 = kept.iter().map(|&t| weights[t] as f64).sum();
            assert!((p.total_weight - w).abs() < 1e-9 * w);
            // Items cover the entries in order, one component each.
            let mut next = 0;
            for it in &p.items {
                assert_eq!(it[1] as usize, next);
                assert!(it[2] >= 1 && it[2] <= 1000);
                next += it[2] as usize;
            }
            assert_eq!(next, p.entries());
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
