//! The host stages of lattice rescoring timed one at a time, each on one
//! thread over every lattice of the score_lattice case: preparing (Kaldi's
//! scaling and checks, the frame plan) and applying the scores (from one
//! scoring of all frames, done before the clock starts). With the case's
//! reading and writing times they say what each pipeline stage costs per
//! frame, apart from the engine and from the threads' overlap.

use std::collections::HashMap;
use std::time::Instant;

use amtool_formats::kaldi::lattice::CompactLattice;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::transition::TransitionModel;

use super::{time_median, Timing};
use crate::score::rescore::{apply, prepare, FramePlan};
use crate::Result;

/// What the stages are timed on: the lattices as read, each utterance's
/// first row in the scores of all frames (features in table order), and
/// those scores.
pub(super) struct StageInput<'a> {
    pub lattices: &'a [(String, CompactLattice)],
    pub features: &'a [(String, Matrix<f32>)],
    pub loglikes: &'a [f32],
    pub num_pdfs: usize,
    pub trans: &'a TransitionModel,
}

/// Median seconds of each stage over all lattices.
pub(super) struct StageSeconds {
    pub prepare: f64,
    pub apply: f64,
}

/// Each lattice with the first row of its utterance's scores and its
/// feature rows (lattices without features left out).
fn rows_of<'a>(input: &'a StageInput) -> Vec<(&'a CompactLattice, usize, usize)> {
    let mut first = HashMap::with_capacity(input.features.len());
    let mut row = 0;
    for (key, m) in input.features {
        first.entry(key.as_str()).or_insert((row, m.rows()));
        row += m.rows();
    }
    input
        .lattices
        .iter()
        .filter_map(|(key, clat)| first.get(key.as_str()).map(|&(r, n)| (clat, r, n)))
        .collect()
}

/// Fresh copies of the lattices, prepared (None: skipped).
fn prepared(
    lats: &[(&CompactLattice, usize, usize)],
    trans: &TransitionModel,
) -> Vec<(CompactLattice, Option<FramePlan>)> {
    lats.iter()
        .map(|&(clat, _, rows)| {
            let mut c = clat.clone();
            let plan = prepare(&mut c, trans, rows, 0.0).ok();
            (c, plan)
        })
        .collect()
}

/// The median of the stage's own seconds (copies made outside the clock).
fn inner(t: Timing) -> f64 {
    t.kernel.unwrap_or(t.wall)
}

pub(super) fn time_stages(input: &StageInput, reps: usize) -> Result<StageSeconds> {
    let lats = rows_of(input);
    let prepare_t = time_median(reps, || {
        let mut work: Vec<CompactLattice> = lats.iter().map(|(c, ..)| (*c).clone()).collect();
        let t = Instant::now();
        for (c, &(_, _, rows)) in work.iter_mut().zip(&lats) {
            let _ = std::hint::black_box(prepare(c, input.trans, rows, 0.0));
        }
        Ok(Some(t.elapsed().as_secs_f64()))
    })?;
    let apply_t = time_median(reps, || {
        let mut work = prepared(&lats, input.trans);
        let t = Instant::now();
        for ((c, plan), &(_, row, _)) in work.iter_mut().zip(&lats) {
            if let Some(plan) = plan {
                let ll = &input.loglikes[row * input.num_pdfs..];
                apply(c, plan, input.trans, ll, input.num_pdfs);
            }
        }
        Ok(Some(t.elapsed().as_secs_f64()))
    })?;
    Ok(StageSeconds {
        prepare: inner(prepare_t),
        apply: inner(apply_t),
    })
}
