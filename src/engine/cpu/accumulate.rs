//! EM accumulation on the CPU, with a summation order that does not depend on
//! the number of threads.
//!
//! Frames are cut into fixed chunks of [`CHUNK_FRAMES`]. Within a chunk the
//! (state, frame, weight) targets are grouped by state (stable, so frame order
//! is kept); for each state: log-likelihoods by the f32 micro-kernel, Kaldi's
//! float posteriors (softmax, then × weight in f32), then the statistics as one
//! GEMM `Pᵀ · [1, x, x² | xxᵀ packed]` with f32 products summed in f32 over
//! sub-blocks of [`kernels::STATS_TB`] frames and in f64 across them (Kaldi
//! adds each frame in f64; the difference is bounded at `kernels::STATS_TB`).
//! Each chunk yields f64 sums for the states it touched (the Machlica et al.
//! scheme: statistics are additive, never more than a chunk of posteriors
//! exists). Chunks form fixed groups of [`GROUP_CHUNKS`]: within a group, on
//! one thread, the kernel adds each chunk's sums into the group's buffers in
//! chunk order; groups run in parallel, and their buffers are added into the
//! accumulators in group order (in parallel over states and blocks of
//! components).

use std::sync::Mutex;

use rayon::prelude::*;

use super::kernels;
use super::PackedModel;
use crate::engine::{FrameBatch, FrameTargets};
use crate::model::CovKind;
use crate::stats::{GmmAccumulator, ModelAccumulators};
use crate::{Error, Result};

/// Frames per chunk: fixes the summation order (a constant, never derived
/// from the thread count).
pub const CHUNK_FRAMES: usize = 128;

/// Chunks per group: a group's chunks run in order on one thread, their sums
/// added into one buffer per touched state (the first chunk stores, later
/// ones add); groups run in parallel and their buffers are added into the
/// accumulators in group order. A constant, so the additions never depend on
/// the thread count; 8 chunks keep the memory traffic of the merge at 1/8 of
/// the kernel's.
pub const GROUP_CHUNKS: usize = 8;

/// One group's results: per chunk in order `(Σ w·log-likelihood, Σ w)`, and
/// per touched state `components × cols` rows of `[occupancy, Σγx (if
/// means), Σγx² or Σγxxᵀ (if variances), 0 padding]`.
struct Partial {
    likes: Vec<(f64, f64)>,
    states: Vec<(u32, Vec<f64>)>,
}

/// Which columns the statistics GEMM produces.
#[derive(Clone, Copy)]
struct Cols {
    means: bool,
    vars: bool,
    /// Padded to a multiple of 4.
    total: usize,
}

pub(super) fn accumulate(
    pool: &rayon::ThreadPool,
    threads: usize,
    p: &PackedModel,
    feats: FrameBatch<'_>,
    targets: FrameTargets<'_>,
    acc: &mut ModelAccumulators,
) -> Result<f64> {
    check_acc(p, acc)?;
    check_targets(p, feats.frames, &targets)?;
    if let FrameTargets::Selected(sel) = &targets {
        return Ok(super::selected::accumulate(pool, p, feats, sel, acc));
    }
    let means = acc.flags.means;
    let vars = acc.flags.means && acc.flags.variances;
    let v = match p.kind {
        CovKind::Diagonal => p.dim,
        CovKind::Full => p.dim * (p.dim + 1) / 2,
    };
    let raw = 1 + if means { p.dim } else { 0 } + if vars { v } else { 0 };
    let cols = Cols {
        means,
        vars,
        total: raw.next_multiple_of(4),
    };

    let chunks = feats.frames.div_ceil(CHUNK_FRAMES);
    let groups = chunks.div_ceil(GROUP_CHUNKS);
    let mut total = 0f64;
    // Groups per wave; results do not depend on this.
    let wave = if threads <= 1 { 1 } else { threads * 2 };
    let bufs = Mutex::new(Vec::new());
    let mut g0 = 0;
    while g0 < groups {
        let g1 = (g0 + wave).min(groups);
        let partials: Vec<Partial> = pool.install(|| {
            (g0..g1)
                .into_par_iter()
                .map(|g| {
                    let c1 = ((g + 1) * GROUP_CHUNKS).min(chunks);
                    group_partial(p, &feats, g * GROUP_CHUNKS..c1, &targets, cols, &bufs)
                })
                .collect()
        });
        let mut sources: Vec<Vec<Vec<f64>>> = vec![Vec::new(); p.num_states()];
        for part in partials {
            for &(like, weight) in &part.likes {
                total += like;
                acc.total_like += like;
                acc.total_frames += weight;
            }
            for (s, st) in part.states {
                sources[s as usize].push(st);
            }
        }
        merge_in_order(pool, p.dim, cols, &mut acc.states, &sources);
        // Recycle the buffers (fresh pages fault every group).
        if let Ok(mut b) = bufs.lock() {
            b.extend(sources.into_iter().flatten());
        }
        g0 = g1;
    }
    Ok(total)
}

/// Components of one state merged per task.
const MERGE_ROWS: usize = 32;

/// `states[s] += each of sources[s]` (rows of `[occupancy, Σγx, Σγx² or
/// Σγxxᵀ, 0…]`), in the order given, element by element: in parallel over
/// states and blocks of components, each element still seeing its sources in
/// group order, so the result does not depend on the number of threads.
fn merge_in_order(
    pool: &rayon::ThreadPool,
    d: usize,
    cols: Cols,
    states: &mut [GmmAccumulator],
    sources: &[Vec<Vec<f64>>],
) {
    let dm = if cols.means { d } else { 0 };
    let mut work: Vec<(RowBlock<'_>, &[Vec<f64>])> = Vec::new();
    let mut dv = 0;
    for (a, src) in states.iter_mut().zip(sources) {
        if src.is_empty() {
            continue;
        }
        let m = a.occupancy.len();
        dv = if cols.vars {
            a.var_acc.len() / m.max(1)
        } else {
            0
        };
        work.extend(
            row_blocks(a, MERGE_ROWS)
                .into_iter()
                .map(|b| (b, src.as_slice())),
        );
    }
    let (ct, v) = (cols.total, dv);
    pool.install(|| {
        work.into_par_iter().for_each(|(b, src)| {
            for part in src {
                for (i, o) in b.occupancy.iter_mut().enumerate() {
                    let row = &part[(b.first + i) * ct..(b.first + i + 1) * ct];
                    *o += row[0];
                    for (a, x) in b.mean[i * dm..(i + 1) * dm].iter_mut().zip(&row[1..]) {
                        *a += x;
                    }
                    for (a, x) in b.var[i * v..(i + 1) * v].iter_mut().zip(&row[1 + dm..]) {
                        *a += x;
                    }
                }
            }
        })
    });
}

/// Consecutive components of one state's accumulator: disjoint slices of
/// its rows, to fill in parallel.
pub(super) struct RowBlock<'a> {
    /// The block's first component.
    pub first: usize,
    pub occupancy: &'a mut [f64],
    /// Mean rows (empty when means are not accumulated).
    pub mean: &'a mut [f64],
    /// Variance rows (empty when variances are not accumulated).
    pub var: &'a mut [f64],
}

/// `a`'s components in blocks of `rows` (the last may be shorter).
pub(super) fn row_blocks(a: &mut GmmAccumulator, rows: usize) -> Vec<RowBlock<'_>> {
    let m = a.occupancy.len();
    let dm = a.mean_acc.len() / m.max(1);
    let v = a.var_acc.len() / m.max(1);
    let (mut occ, mut mean, mut var) = (
        &mut a.occupancy[..],
        &mut a.mean_acc[..],
        &mut a.var_acc[..],
    );
    let mut blocks = Vec::with_capacity(m.div_ceil(rows.max(1)));
    let mut g0 = 0;
    while g0 < m {
        let r = (m - g0).min(rows.max(1));
        let (o1, o2) = std::mem::take(&mut occ).split_at_mut(r);
        let (m1, m2) = std::mem::take(&mut mean).split_at_mut(r * dm);
        let (v1, v2) = std::mem::take(&mut var).split_at_mut(r * v);
        (occ, mean, var) = (o2, m2, v2);
        blocks.push(RowBlock {
            first: g0,
            occupancy: o1,
            mean: m1,
            var: v1,
        });
        g0 += r;
    }
    blocks
}

fn check_acc(p: &PackedModel, acc: &ModelAccumulators) -> Result<()> {
    if acc.dim != p.dim || acc.kind != p.kind || acc.states.len() != p.num_states() {
        return Err(Error::Mismatch(format!(
            "accumulators ({} states, dim {}, {:?}) do not match the model ({} states, dim {}, {:?})",
            acc.states.len(),
            acc.dim,
            acc.kind,
            p.num_states(),
            p.dim,
            p.kind
        )));
    }
    let v = match p.kind {
        CovKind::Diagonal => p.dim,
        CovKind::Full => p.dim * (p.dim + 1) / 2,
    };
    for (s, (st, &m)) in acc.states.iter().zip(&p.counts).enumerate() {
        let means_ok = st.mean_acc.len() == if acc.flags.means { m * p.dim } else { 0 };
        let vars_ok = st.var_acc.len()
            == if acc.flags.means && acc.flags.variances {
                m * v
            } else {
                0
            };
        if st.occupancy.len() != m || !means_ok || !vars_ok {
            return Err(Error::Mismatch(format!(
                "accumulator of state {s} is not shaped for its {m} components"
            )));
        }
    }
    Ok(())
}

fn check_targets(p: &PackedModel, frames: usize, targets: &FrameTargets<'_>) -> Result<()> {
    let ns = p.num_states();
    match *targets {
        FrameTargets::Global => {
            if ns == 0 {
                return Err(Error::Mismatch(
                    "global accumulation needs a model with a state".into(),
                ));
            }
        }
        FrameTargets::Aligned(ali) => {
            if ali.len() != frames {
                return Err(Error::Mismatch(format!(
                    "alignment has {} frames, features {}",
                    ali.len(),
                    frames
                )));
            }
            if let Some((t, &s)) = ali.iter().enumerate().find(|(_, &s)| s as usize >= ns) {
                return Err(Error::Mismatch(format!(
                    "frame {t}: state {s} out of range (model has {ns})"
                )));
            }
        }
        FrameTargets::Weighted { offsets, pairs } => {
            if offsets.len() != frames + 1
                || offsets.first() != Some(&0)
                || offsets.last() != Some(&pairs.len())
            {
                return Err(Error::Mismatch(format!(
                    "posterior offsets ({} entries) do not describe {} frames of {} pairs",
                    offsets.len(),
                    frames,
                    pairs.len()
                )));
            }
            if let Some(t) = offsets.windows(2).position(|w| w[0] > w[1]) {
                return Err(Error::Mismatch(format!(
                    "posterior offsets decrease at frame {t}"
                )));
            }
            if let Some(i) = pairs.iter().position(|&(s, _)| s as usize >= ns) {
                return Err(Error::Mismatch(format!(
                    "posterior pair {i}: state {} out of range (model has {ns})",
                    pairs[i].0
                )));
            }
        }
        FrameTargets::Selected(sel) => {
            let Some(&m) = p.counts.first() else {
                return Err(Error::Mismatch(
                    "Gaussian selection needs a model with a state".into(),
                ));
            };
            sel.validate(frames, m)?;
        }
    }
    Ok(())
}

fn group_partial(
    p: &PackedModel,
    feats: &FrameBatch<'_>,
    chunks: std::ops::Range<usize>,
    targets: &FrameTargets<'_>,
    cols: Cols,
    bufs: &Mutex<Vec<Vec<f64>>>,
) -> Partial {
    let mut part = Partial {
        likes: Vec::with_capacity(chunks.len()),
        states: Vec::new(),
    };
    // State → its entry in `part.states` (usize::MAX: none yet).
    let mut index = vec![usize::MAX; p.num_states()];
    for c in chunks {
        let (t0, t1) = (c * CHUNK_FRAMES, ((c + 1) * CHUNK_FRAMES).min(feats.frames));
        let like = chunk_into(p, feats, t0, t1, targets, cols, bufs, &mut part, &mut index);
        part.likes.push(like);
    }
    part
}

/// One chunk's statistics into `part` (`index`: state → its entry there);
/// returns the chunk's `(Σ w·log-likelihood, Σ w)`.
#[allow(clippy::too_many_arguments)]
fn chunk_into(
    p: &PackedModel,
    feats: &FrameBatch<'_>,
    t0: usize,
    t1: usize,
    targets: &FrameTargets<'_>,
    cols: Cols,
    bufs: &Mutex<Vec<Vec<f64>>>,
    part: &mut Partial,
    index: &mut [usize],
) -> (f64, f64) {
    // (state, frame, weight) entries, stably grouped by state.
    let mut entries: Vec<(u32, u32, f32)> = Vec::new();
    match *targets {
        FrameTargets::Global => entries.extend((t0..t1).map(|t| (0, t as u32, 1.0))),
        FrameTargets::Aligned(ali) => entries.extend((t0..t1).map(|t| (ali[t], t as u32, 1.0))),
        // Taken by `selected::accumulate` before any chunk.
        FrameTargets::Selected(_) => {}
        FrameTargets::Weighted { offsets, pairs } => {
            for t in t0..t1 {
                entries.extend(
                    pairs[offsets[t]..offsets[t + 1]]
                        .iter()
                        .map(|&(s, w)| (s, t as u32, w)),
                );
            }
        }
    }
    entries.sort_by_key(|e| e.0);

    let (d, k) = (p.dim, p.k);
    let (mut like, mut weight) = (0f64, 0f64);
    SCRATCH.with(|cell| {
        let mut guard = cell.borrow_mut();
        let Scratch {
            xe,
            l,
            post,
            zs,
            zrow,
        } = &mut *guard;
        let mut i = 0;
        while i < entries.len() {
            let s = entries[i].0;
            let j = i + entries[i..]
                .iter()
                .position(|e| e.0 != s)
                .unwrap_or(entries.len() - i);
            let group = &entries[i..j];
            let n = group.len();
            let m = p.counts[s as usize];

            grow(xe, n * k);
            for (r, &(_, t, _)) in group.iter().enumerate() {
                let t = t as usize;
                p.expand(&feats.data[t * d..(t + 1) * d], &mut xe[r * k..(r + 1) * k]);
            }
            let ldo = p.component_block(s as usize, n, xe, l);

            // Posteriors: softmax over the padded row (virtual lanes are −∞ and
            // get 0), × weight in f32 as Kaldi, packed for the statistics kernel
            // (blocks of Gaussians; lanes past `m` are 0).
            let plen = kernels::packed_p_len(n, m);
            grow(post, plen);
            post[kernels::packed_p_index(n, 0, m / kernels::SG * kernels::SG)..plen].fill(0.0);
            for (r, &(_, _, w)) in group.iter().enumerate() {
                let row = &mut l[r * ldo..(r + 1) * ldo];
                let ll = kernels::softmax(row);
                like += w as f64 * ll as f64;
                weight += w as f64;
                for (g, &pg) in row[..m].iter().enumerate() {
                    post[kernels::packed_p_index(n, r, g)] = pg * w;
                }
            }

            // [1, x, x² | packed xxᵀ] in f32, packed in column panels.
            grow(zs, kernels::packed_x_len(n, cols.total));
            for (r, &(_, t, _)) in group.iter().enumerate() {
                let x = &feats.data[t as usize * d..(t as usize + 1) * d];
                expand_stats(x, p.kind, cols, n, r, zrow, zs);
            }
            let len = m * cols.total;
            let (e, add) = match index[s as usize] {
                e if e != usize::MAX => (e, true),
                _ => {
                    let mut st = bufs
                        .lock()
                        .map(|mut b| b.pop().unwrap_or_default())
                        .unwrap_or_default();
                    // The kernel stores every element: no clearing.
                    grow(&mut st, len);
                    st.truncate(len);
                    index[s as usize] = part.states.len();
                    part.states.push((s, st));
                    (part.states.len() - 1, false)
                }
            };
            let st = &mut part.states[e].1;
            kernels::stats(m, n, cols.total, post, zs, st, cols.total, add);
            i = j;
        }
    });
    (like, weight)
}

/// Make `v` at least `n` long; contents are overwritten by the caller, so
/// nothing is cleared (a memset per chunk is measurable).
fn grow<T: Copy + Default>(v: &mut Vec<T>, n: usize) {
    if v.len() < n {
        v.resize(n, T::default());
    }
}

/// Per-thread buffers reused across chunks (large ones would otherwise be
/// fresh pages, i.e. page faults, every chunk).
#[derive(Default)]
struct Scratch {
    xe: Vec<f32>,
    l: Vec<f32>,
    post: Vec<f32>,
    zs: Vec<f32>,
    zrow: Vec<f32>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Row `r` of the statistics GEMM's right-hand side, `[1, x (if means), x² or
/// packed xxᵀ (if variances), 0…]` (f32 products), built in `row` (any
/// length) and copied into the panels of `zs` (`n` rows; layout of
/// [`kernels::packed_x_len`]), padding included.
fn expand_stats(
    x: &[f32],
    kind: CovKind,
    cols: Cols,
    n: usize,
    r: usize,
    row: &mut Vec<f32>,
    zs: &mut [f32],
) {
    let sc = kernels::SC;
    let width = cols.total.next_multiple_of(sc);
    row.clear();
    row.push(1.0);
    if cols.means {
        row.extend_from_slice(x);
    }
    if cols.vars {
        match kind {
            CovKind::Diagonal => row.extend(x.iter().map(|&xv| xv * xv)),
            CovKind::Full => {
                for (a, &xa) in x.iter().enumerate() {
                    row.extend(x[..=a].iter().map(|&xb| xa * xb));
                }
            }
        }
    }
    row.resize(width, 0.0);
    for (q, src) in row.chunks_exact(sc).enumerate() {
        let o = q * n * sc + r * sc;
        zs[o..o + sc].copy_from_slice(src);
    }
}
