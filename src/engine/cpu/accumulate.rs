//! EM accumulation on the CPU, with a summation order that does not depend on
//! the number of threads.
//!
//! Frames are cut into fixed chunks of [`CHUNK_FRAMES`]. Within a chunk the
//! (state, frame, weight) targets are grouped by state (stable, so frame order
//! is kept); for each state: log-likelihoods by the f32 micro-kernel, Kaldi's
//! float posteriors (softmax, then × weight in f32), then the statistics as one
//! f64 GEMM `Pᵀ · [1, x, x² | xxᵀ packed]` (the products of f32 values are
//! exact in f64, as in Kaldi's `AccumulateFromPosteriors`). Each chunk yields
//! partial f64 sums for the states it touched (the Machlica et al. scheme:
//! statistics are additive, never more than a chunk of posteriors exists);
//! chunks run in parallel and their partials are added into the accumulators
//! strictly in chunk order.

use rayon::prelude::*;

use super::kernels;
use super::PackedModel;
use crate::engine::{FrameBatch, FrameTargets};
use crate::model::CovKind;
use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// Frames per chunk: fixes the summation order (a constant, never derived
/// from the thread count).
pub const CHUNK_FRAMES: usize = 128;

/// One chunk's statistics: per touched state, `components × cols` rows of
/// `[occupancy, Σγx (if means), Σγx² or Σγxxᵀ (if variances), 0 padding]`.
struct Partial {
    like: f64,
    weight: f64,
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
    // Several chunks per thread per wave; results do not depend on this.
    let wave = (threads * 4).max(1);
    let mut total = 0f64;
    let mut c0 = 0;
    while c0 < chunks {
        let c1 = (c0 + wave).min(chunks);
        let partials: Vec<Partial> = pool.install(|| {
            (c0..c1)
                .into_par_iter()
                .map(|c| {
                    let t0 = c * CHUNK_FRAMES;
                    let t1 = (t0 + CHUNK_FRAMES).min(feats.frames);
                    chunk_partial(p, &feats, t0, t1, &targets, cols)
                })
                .collect()
        });
        for part in &partials {
            merge(p, acc, part, cols);
            total += part.like;
        }
        c0 = c1;
    }
    Ok(total)
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
    }
    Ok(())
}

fn chunk_partial(
    p: &PackedModel,
    feats: &FrameBatch<'_>,
    t0: usize,
    t1: usize,
    targets: &FrameTargets<'_>,
    cols: Cols,
) -> Partial {
    // (state, frame, weight) entries, stably grouped by state.
    let mut entries: Vec<(u32, u32, f32)> = Vec::new();
    match *targets {
        FrameTargets::Global => entries.extend((t0..t1).map(|t| (0, t as u32, 1.0))),
        FrameTargets::Aligned(ali) => entries.extend((t0..t1).map(|t| (ali[t], t as u32, 1.0))),
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
    let mut part = Partial {
        like: 0.0,
        weight: 0.0,
        states: Vec::new(),
    };
    let (mut xe, mut l, mut pt, mut x64) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
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

        xe.clear();
        xe.resize(n * k, 0f32);
        for (r, &(_, t, _)) in group.iter().enumerate() {
            let t = t as usize;
            p.expand(&feats.data[t * d..(t + 1) * d], &mut xe[r * k..(r + 1) * k]);
        }
        let ldo = p.component_block(s as usize, n, &xe, &mut l);

        // Posteriors (f32, × weight in f32 as Kaldi), transposed into f64.
        pt.clear();
        pt.resize(m * n, 0f64);
        for (r, &(_, _, w)) in group.iter().enumerate() {
            let row = &mut l[r * ldo..r * ldo + m];
            let ll = kernels::softmax(row);
            part.like += w as f64 * ll as f64;
            part.weight += w as f64;
            for (g, &post) in row.iter().enumerate() {
                pt[g * n + r] = (post * w) as f64;
            }
        }

        // [1, x, x² | packed xxᵀ] in f64 (exact products of f32 values).
        x64.clear();
        x64.resize(n * cols.total, 0f64);
        for (r, &(_, t, _)) in group.iter().enumerate() {
            let x = &feats.data[t as usize * d..(t as usize + 1) * d];
            let row = &mut x64[r * cols.total..(r + 1) * cols.total];
            row[0] = 1.0;
            let mut c = 1;
            if cols.means {
                for &xv in x {
                    row[c] = xv as f64;
                    c += 1;
                }
            }
            if cols.vars {
                match p.kind {
                    CovKind::Diagonal => {
                        for &xv in x {
                            row[c] = xv as f64 * xv as f64;
                            c += 1;
                        }
                    }
                    CovKind::Full => {
                        for a in 0..d {
                            for b in 0..=a {
                                row[c] = x[a] as f64 * x[b] as f64;
                                c += 1;
                            }
                        }
                    }
                }
            }
        }
        let mut st = vec![0f64; m * cols.total];
        kernels::stats(m, n, cols.total, &pt, &x64, &mut st);
        part.states.push((s, st));
        i = j;
    }
    part
}

fn merge(p: &PackedModel, acc: &mut ModelAccumulators, part: &Partial, cols: Cols) {
    let d = p.dim;
    for (s, st) in &part.states {
        let a = &mut acc.states[*s as usize];
        let m = a.occupancy.len();
        let v = if cols.vars {
            a.var_acc.len() / m.max(1)
        } else {
            0
        };
        for g in 0..m {
            let row = &st[g * cols.total..(g + 1) * cols.total];
            a.occupancy[g] += row[0];
            let mut c = 1;
            if cols.means {
                for (dst, src) in a.mean_acc[g * d..(g + 1) * d]
                    .iter_mut()
                    .zip(&row[c..c + d])
                {
                    *dst += src;
                }
                c += d;
            }
            if cols.vars {
                for (dst, src) in a.var_acc[g * v..(g + 1) * v].iter_mut().zip(&row[c..c + v]) {
                    *dst += src;
                }
            }
        }
    }
    acc.total_like += part.like;
    acc.total_frames += part.weight;
}
