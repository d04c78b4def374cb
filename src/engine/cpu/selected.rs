//! Statistics with Gaussian selection on the CPU ([`FrameTargets::Selected`]:
//! Kaldi's `fgmm-global-acc-stats` / `gmm-global-acc-stats --gselect`), the
//! reference the CUDA engine is held to. For each frame: the log-likelihoods
//! of its selected components only (the gathered micro-kernel over the
//! panels holding them, so each is bit-identical to
//! [`LoadedModel::component_loglikes`](crate::engine::LoadedModel)'s), Kaldi's float softmax
//! over them (`ApplySoftMax`: max, `exp(v − max)`, sum, × 1/sum), × the
//! frame's weight in f32; then each selected component's statistics added
//! in f64, frame by frame, as Kaldi's `AccumulateForComponent` adds them.
//!
//! Frames go in blocks of [`BLOCK_FRAMES`]: scoring and softmax in parallel
//! over frames; then the block's (frame, component) entries are grouped by
//! component (stably, so in frame order) and the statistics added in
//! parallel over blocks of components, each component's rows by one thread
//! in frame order. Every sum sees its terms in Kaldi's order, whatever the
//! number of threads: the results are Kaldi's f64 sums of the engine's
//! float posteriors.
//!
//! [`FrameTargets::Selected`]: crate::engine::FrameTargets::Selected

use rayon::prelude::*;

use super::accumulate::{row_blocks, RowBlock};
use super::kernels::{self, LANES};
use super::PackedModel;
use crate::engine::{FrameBatch, Selection};
use crate::model::CovKind;
use crate::stats::ModelAccumulators;

/// Frames per block (a constant: it fixes nothing in the results, only how
/// much is scored before the statistics are added).
pub const BLOCK_FRAMES: usize = 8192;
/// Frames per scoring task.
const SCORE_FRAMES: usize = 64;
/// Components per statistics task.
const STATS_ROWS: usize = 16;

/// Statistics of `feats` for `sel` (validated by the caller) into state 0
/// of `acc`; returns Σ weight × log-likelihood.
pub(super) fn accumulate(
    pool: &rayon::ThreadPool,
    p: &PackedModel,
    feats: FrameBatch<'_>,
    sel: &Selection<'_>,
    acc: &mut ModelAccumulators,
) -> f64 {
    let mut total = 0.0;
    for b0 in (0..feats.frames).step_by(BLOCK_FRAMES) {
        let b1 = (b0 + BLOCK_FRAMES).min(feats.frames);
        let (post, likes) = pool.install(|| score_block(p, &feats, sel, b0, b1));
        for (t, &like) in (b0..b1).zip(&likes) {
            let w = sel.weight(t);
            if w != 0.0 {
                total += like;
                acc.total_like += like;
                acc.total_frames += w as f64;
            }
        }
        let (order, bounds) = group_by_component(p.counts[0], sel, b0, b1);
        let blocks = row_blocks(&mut acc.states[0], STATS_ROWS);
        pool.install(|| {
            blocks
                .into_par_iter()
                .for_each(|b| add_block_stats(p, &feats, &post, &order, &bounds, b))
        });
    }
    total
}

/// Posteriors × weight of every pair of frames `[b0, b1)` (0 for frames of
/// weight 0) and each frame's weight × log-likelihood.
fn score_block(
    p: &PackedModel,
    feats: &FrameBatch<'_>,
    sel: &Selection<'_>,
    b0: usize,
    b1: usize,
) -> (Vec<f32>, Vec<f64>) {
    let first = sel.offsets[b0];
    let mut post = vec![0f32; sel.offsets[b1] - first];
    let mut likes = vec![0f64; b1 - b0];
    // Each task's frames and their pairs' posteriors.
    let mut tasks: Vec<(usize, &mut [f32], &mut [f64])> = Vec::new();
    let (mut rest_p, mut rest_l) = (&mut post[..], &mut likes[..]);
    for t0 in (b0..b1).step_by(SCORE_FRAMES) {
        let t1 = (t0 + SCORE_FRAMES).min(b1);
        let (a, b) = std::mem::take(&mut rest_p).split_at_mut(sel.offsets[t1] - sel.offsets[t0]);
        let (c, d) = std::mem::take(&mut rest_l).split_at_mut(t1 - t0);
        (rest_p, rest_l) = (b, d);
        tasks.push((t0, a, c));
    }
    tasks.into_par_iter().for_each(|(t0, post, likes)| {
        let mut s = Scratch::default();
        let mut at = 0;
        for (i, like) in likes.iter_mut().enumerate() {
            let t = t0 + i;
            let n = sel.offsets[t + 1] - sel.offsets[t];
            *like = score_frame(
                p,
                feats.row(t),
                sel.of(t),
                sel.weight(t),
                &mut s,
                &mut post[at..at + n],
            );
            at += n;
        }
    });
    (post, likes)
}

#[derive(Default)]
struct Scratch {
    xe: Vec<f32>,
    panels: Vec<u32>,
    comp: Vec<f32>,
}

/// One frame: `post` gets its selected components' posteriors × `w`;
/// returns `w` × its log-likelihood (0 and zeros for `w` = 0).
fn score_frame(
    p: &PackedModel,
    x: &[f32],
    comps: &[u32],
    w: f32,
    s: &mut Scratch,
    post: &mut [f32],
) -> f64 {
    if w == 0.0 {
        return 0.0;
    }
    s.xe.resize(p.k, 0.0);
    p.expand(x, &mut s.xe);
    let base = p.panel_offsets[0] as u32;
    s.panels.clear();
    s.panels
        .extend(comps.iter().map(|&g| base + g / LANES as u32));
    s.panels.sort_unstable();
    s.panels.dedup();
    s.comp.resize(s.panels.len() * LANES, 0.0);
    kernels::gathered_loglikes(p.k, &s.xe, &p.a, &p.bias, &s.panels, &mut s.comp);
    for (v, &g) in post.iter_mut().zip(comps) {
        let at = s.panels.partition_point(|&q| q < base + g / LANES as u32);
        *v = s.comp[at * LANES + g as usize % LANES];
    }
    let lse = kaldi_softmax(post);
    for v in post.iter_mut() {
        *v *= w;
    }
    w as f64 * lse as f64
}

/// Kaldi's `VectorBase<float>::ApplySoftMax`: `v` becomes its softmax;
/// returns max + log Σ exp(v − max).
fn kaldi_softmax(v: &mut [f32]) -> f32 {
    let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for x in v.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    let inv = 1.0 / sum;
    for x in v.iter_mut() {
        *x *= inv;
    }
    max + sum.ln()
}

/// The pairs of frames `[b0, b1)` of non-zero weight grouped by component,
/// in frame order within a component: (pair index relative to
/// `sel.offsets[b0]`, frame), and each component's bounds (`m + 1` offsets).
fn group_by_component(
    m: usize,
    sel: &Selection<'_>,
    b0: usize,
    b1: usize,
) -> (Vec<(u32, u32)>, Vec<usize>) {
    let kept = || (b0..b1).filter(|&t| sel.weight(t) != 0.0);
    let mut bounds = vec![0usize; m + 1];
    for t in kept() {
        for &g in sel.of(t) {
            bounds[g as usize + 1] += 1;
        }
    }
    for g in 0..m {
        bounds[g + 1] += bounds[g];
    }
    let mut next = bounds.clone();
    let mut order = vec![(0u32, 0u32); bounds[m]];
    let first = sel.offsets[b0];
    for t in kept() {
        for (i, &g) in sel.of(t).iter().enumerate() {
            order[next[g as usize]] = ((sel.offsets[t] + i - first) as u32, t as u32);
            next[g as usize] += 1;
        }
    }
    (order, bounds)
}

/// The statistics of the components of `b` from their pairs (`order`,
/// `bounds`: [`group_by_component`]; `post` by pair) in frame order, in f64
/// as Kaldi's `AccumulateForComponent` adds them: occupancy += γ, means +=
/// γ·x, variances += γ·xᵢ·xⱼ (packed lower triangle) or γ·xᵢ·xᵢ.
fn add_block_stats(
    p: &PackedModel,
    feats: &FrameBatch<'_>,
    post: &[f32],
    order: &[(u32, u32)],
    bounds: &[usize],
    b: RowBlock<'_>,
) {
    let d = p.dim;
    let rows = b.occupancy.len();
    let dm = b.mean.len() / rows.max(1);
    let v = b.var.len() / rows.max(1);
    let mut xd = vec![0f64; d];
    for (i, occ) in b.occupancy.iter_mut().enumerate() {
        let g = b.first + i;
        let mean = &mut b.mean[i * dm..(i + 1) * dm];
        let var = &mut b.var[i * v..(i + 1) * v];
        for &(pair, t) in &order[bounds[g]..bounds[g + 1]] {
            let post = post[pair as usize] as f64;
            *occ += post;
            if dm == 0 {
                continue;
            }
            for (x, &f) in xd.iter_mut().zip(feats.row(t as usize)) {
                *x = f as f64;
            }
            for (a, &x) in mean.iter_mut().zip(&xd) {
                *a += post * x;
            }
            if v == 0 {
                continue;
            }
            match p.kind {
                CovKind::Diagonal => {
                    for (a, &x) in var.iter_mut().zip(&xd) {
                        *a += post * x * x;
                    }
                }
                CovKind::Full => {
                    let mut k = 0;
                    for (i, &xi) in xd.iter().enumerate() {
                        let pxi = post * xi;
                        for (a, &xj) in var[k..=k + i].iter_mut().zip(&xd) {
                            *a += pxi * xj;
                        }
                        k += i + 1;
                    }
                }
            }
        }
    }
}
