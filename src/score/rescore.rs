//! Lattice rescoring: Kaldi's gmm-rescore-lattice (`RescoreCompactLattice`
//! of `lat/lattice-functions.cc` with a `DecodableAmDiagGmm`).
//!
//! Each transition-id on a compact lattice's arcs and final weights belongs
//! to one frame (its position in the lattice's time line). Rescoring adds the
//! new model's cost −log p(x_t | pdf(tid)) to the acoustic part of the weight
//! holding it; the graph part is untouched. Before that the old acoustic
//! costs are scaled by `old_acoustic_scale` (Kaldi's default 0 discards them).
//!
//! The order of the float additions is Kaldi's (frame by frame, in time
//! order), so the results differ from Kaldi's only by the per-frame
//! log-likelihoods the engine computes. Every mutation goes through the
//! lattice's OpenFst-property bookkeeping so the written header matches.
//!
//! Per-utterance problems (a lattice with a transition-id the model lacks,
//! lattice/feature length mismatch, cycles, an empty lattice) are returned as
//! [`Skip`] messages for the caller to warn about and count, as Kaldi does.

use amtool_formats::kaldi::lattice::{
    CompactLattice, CompactLatticeWeight, FstWeight, LatticeWeight,
};
use amtool_formats::kaldi::transition::TransitionModel;

use crate::engine::{FrameBatch, LoadedModel};
use crate::Result;

/// Why one lattice was not rescored (Kaldi warns and counts it as an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(pub String);

/// `fst::ScaleLattice(fst::AcousticLatticeScale(scale), clat)`: the acoustic
/// cost becomes `scale` × itself (graph costs kept), in double as Kaldi
/// computes it; zero weights stay zero.
pub fn scale_acoustic(clat: &mut CompactLattice, scale: f32) {
    if scale == 1.0 {
        return;
    }
    let s = scale as f64;
    let scaled = |w: &LatticeWeight| {
        if w.graph == f32::INFINITY {
            return LatticeWeight::zero();
        }
        let (g, a) = (w.graph as f64, w.acoustic as f64);
        LatticeWeight::new((1.0 * g + 0.0 * a) as f32, (0.0 * g + s * a) as f32)
    };
    for st in 0..clat.states.len() {
        for i in 0..clat.states[st].arcs.len() {
            let mut arc = clat.states[st].arcs[i].clone();
            arc.weight.weight = scaled(&arc.weight.weight);
            clat.set_arc(st, i, arc);
        }
        let fw = clat.states[st].final_weight.clone();
        if fw != CompactLatticeWeight::zero() {
            let w = CompactLatticeWeight::new(scaled(&fw.weight), fw.string);
            clat.set_final(st as i32, w);
        }
    }
}

/// Where each frame's transition-ids sit: per frame, (state, arc index or
/// `None` for the final weight, transition-id), in Kaldi's order.
#[derive(Debug, Clone, Default)]
pub struct FramePlan {
    pub utt_len: usize,
    pub time_to_state: Vec<Vec<(usize, Option<usize>, i32)>>,
}

/// Kaldi `CompactLatticeStateTimes`: the frame at which each state is
/// entered, and the utterance length (0 when no state is final).
fn state_times(clat: &CompactLattice) -> std::result::Result<(Vec<i64>, usize), Skip> {
    let n = clat.states.len();
    let mut times = vec![-1i64; n];
    times[0] = 0;
    let mut utt_len: i64 = -1;
    for s in 0..n {
        let cur = times[s];
        for a in &clat.states[s].arcs {
            let t = cur + a.weight.string.len() as i64;
            let d = a.nextstate as usize;
            if times[d] == -1 {
                times[d] = t;
            } else if times[d] != t {
                return Err(Skip(format!(
                    "state {d} is reached at frames {} and {t}: lattice paths of different lengths",
                    times[d]
                )));
            }
        }
        let fw = &clat.states[s].final_weight;
        if *fw != CompactLatticeWeight::zero() {
            let this_len = times[s] + fw.string.len() as i64;
            if utt_len == -1 {
                utt_len = this_len;
            } else if this_len != utt_len {
                crate::kaldi_warn!("Utterance does not seem to have a consistent length.");
                utt_len = utt_len.max(this_len);
            }
        }
    }
    if utt_len == -1 {
        crate::kaldi_warn!("Utterance does not have a final-state.");
        utt_len = 0;
    }
    Ok((times, utt_len.max(0) as usize))
}

/// Prepare a lattice for rescoring (Kaldi: top-sort if needed, state times,
/// the frame → arcs table) and check its transition-ids against the model.
pub fn plan(
    clat: &mut CompactLattice,
    trans: &TransitionModel,
) -> std::result::Result<FramePlan, Skip> {
    if clat.states.is_empty() {
        return Err(Skip("Rescoring empty lattice".into()));
    }
    if !clat.test_top_sorted() && !clat.top_sort() {
        return Err(Skip("Cycles detected in lattice.".into()));
    }
    if clat.start != 0 {
        return Err(Skip(format!(
            "lattice start state is {}, expected 0",
            clat.start
        )));
    }
    let (times, utt_len) = state_times(clat)?;
    let mut time_to_state = vec![Vec::new(); utt_len];
    for (s, st) in clat.states.iter().enumerate() {
        let t = times[s];
        let mut add = |arc: Option<usize>, string: &[i32]| -> std::result::Result<(), Skip> {
            for (off, &tid) in string.iter().enumerate() {
                if !trans.is_valid_transition_id(tid) {
                    return Err(Skip(format!(
                        "transition-id {tid} (state {s}) is not in the model, which has transition-ids 1..{}",
                        trans.num_transition_ids()
                    )));
                }
                if t < 0 {
                    // Unreachable states have no time; Kaldi asserts.
                    return Err(Skip(format!(
                        "state {s} is not reachable from the start state"
                    )));
                }
                let frame = t as usize + off;
                if frame >= utt_len {
                    if arc.is_some() && t as usize == utt_len {
                        continue; // Kaldi: an end state past the utterance.
                    }
                    return Err(Skip(
                        "There appears to be lattice/feature mismatch, aborting.".into(),
                    ));
                }
                time_to_state[frame].push((s, arc, tid));
            }
            Ok(())
        };
        for (i, a) in st.arcs.iter().enumerate() {
            add(Some(i), &a.weight.string)?;
        }
        if st.final_weight != CompactLatticeWeight::zero() {
            add(None, &st.final_weight.string)?;
        }
    }
    if let Some(t) = time_to_state.iter().position(|v| v.is_empty()) {
        return Err(Skip(format!(
            "frame {t} of {utt_len} has no transition-id in the lattice"
        )));
    }
    Ok(FramePlan {
        utt_len,
        time_to_state,
    })
}

/// Add −loglike to each weight of the plan, frame by frame as Kaldi does.
/// `loglikes` is `utt_len × num_pdfs`.
pub fn apply(
    clat: &mut CompactLattice,
    plan: &FramePlan,
    trans: &TransitionModel,
    loglikes: &[f32],
    num_pdfs: usize,
) {
    let id2pdf = trans.id2pdf();
    for (t, entries) in plan.time_to_state.iter().enumerate() {
        let row = &loglikes[t * num_pdfs..(t + 1) * num_pdfs];
        for &(s, arc, tid) in entries {
            let ll = row[id2pdf[tid as usize] as usize];
            match arc {
                None => {
                    let mut w = clat.states[s].final_weight.clone();
                    w.weight.acoustic = -ll + clat.states[s].final_weight.weight.acoustic;
                    clat.set_final(s as i32, w);
                }
                Some(i) => {
                    let mut a = clat.states[s].arcs[i].clone();
                    a.weight.weight.acoustic = -ll + a.weight.weight.acoustic;
                    clat.set_arc(s, i, a);
                }
            }
        }
    }
}

/// Rescore one lattice with `feats` (frames × dim): Kaldi's
/// `RescoreCompactLattice` after `ScaleLattice` by `old_acoustic_scale`.
/// `Ok(Err(skip))` when the lattice cannot be rescored (warn and count);
/// `Err` when the engine fails.
pub fn rescore_compact_lattice(
    clat: &mut CompactLattice,
    trans: &TransitionModel,
    model: &mut dyn LoadedModel,
    feats: &[f32],
    dim: usize,
    old_acoustic_scale: f32,
) -> Result<std::result::Result<(), Skip>> {
    scale_acoustic(clat, old_acoustic_scale);
    let plan = match plan(clat, trans) {
        Ok(p) => p,
        Err(s) => return Ok(Err(s)),
    };
    let rows = feats.len() / dim.max(1);
    if rows < plan.utt_len {
        return Ok(Err(Skip(format!(
            "Features are too short for lattice: utt-len is {}, {} is last frame",
            plan.utt_len,
            rows as i64 - 1
        ))));
    }
    if plan.utt_len == 0 {
        return Ok(Ok(()));
    }
    let num_pdfs = model.num_states();
    let mut loglikes = vec![0f32; plan.utt_len * num_pdfs];
    model.state_loglikes(
        FrameBatch::new(&feats[..plan.utt_len * dim], dim),
        &mut loglikes,
    )?;
    apply(clat, &plan, trans, &loglikes, num_pdfs);
    Ok(Ok(()))
}
