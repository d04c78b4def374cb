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
    // In place (an arc's transition-id string is not copied), with the
    // property updates of Kaldi's SetValue and SetFinal in their order.
    for st in 0..clat.states.len() {
        for i in 0..clat.states[st].arcs.len() {
            clat.update_arc(st, i, |arc| arc.weight.weight = scaled(&arc.weight.weight));
        }
        if clat.states[st].final_weight != CompactLatticeWeight::zero() {
            clat.update_final(st, |w| w.weight = scaled(&w.weight));
        }
    }
}

/// What rescoring needs of a checked lattice: the utterance length and the
/// frame at which each state is entered (Kaldi's state times); a
/// transition-id at position `k` of a string leaving state `s` belongs to
/// frame `times[s] + k`.
#[derive(Debug, Clone, Default)]
pub struct FramePlan {
    pub utt_len: usize,
    pub times: Vec<i64>,
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

/// Prepare a lattice for rescoring (Kaldi: top-sort if needed, state times)
/// and check its transition-ids against the model and its time line.
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
    for (s, st) in clat.states.iter().enumerate() {
        let t = times[s];
        if t < 0 {
            // Kaldi asserts every state has a time.
            return Err(Skip(format!(
                "state {s} is not reachable from the start state"
            )));
        }
        let check =
            |arc: bool, string: &[i32]| check_string(trans, s, t as usize, utt_len, arc, string);
        for a in &st.arcs {
            check(true, &a.weight.string)?;
        }
        if st.final_weight != CompactLatticeWeight::zero() {
            check(false, &st.final_weight.string)?;
        }
    }
    // Every frame before utt_len lies on the path to the final state that
    // defines utt_len, so no frame is left without a transition-id (Kaldi
    // asserts it).
    Ok(FramePlan { utt_len, times })
}

/// Check the transition-ids of one arc's (or, `arc` false, a final
/// weight's) string leaving state `s` at frame `t`: each in the model and
/// each at a frame before `utt_len`, except on an arc that starts at
/// `utt_len` (Kaldi: an end state past the utterance; such an arc is not
/// rescored).
fn check_string(
    trans: &TransitionModel,
    s: usize,
    t: usize,
    utt_len: usize,
    arc: bool,
    string: &[i32],
) -> std::result::Result<(), Skip> {
    for (off, &tid) in string.iter().enumerate() {
        if !trans.is_valid_transition_id(tid) {
            return Err(Skip(format!(
                "transition-id {tid} (state {s}) is not in the model, which has transition-ids 1..{}",
                trans.num_transition_ids()
            )));
        }
        if t + off >= utt_len && !(arc && t == utt_len) {
            return Err(Skip(
                "There appears to be lattice/feature mismatch, aborting.".into(),
            ));
        }
    }
    Ok(())
}

/// Add −loglike to each weight holding a transition-id, as Kaldi does
/// (one float add per transition-id, in time order within each weight).
/// `loglikes` is `utt_len × num_pdfs`.
///
/// Kaldi goes frame by frame and calls `SetValue`/`SetFinal` once per
/// transition-id; this goes weight by weight and updates the properties
/// once per changed weight. The floats are the same (each weight's adds
/// come in the same order), and so is the properties word: a weight that
/// holds a transition-id has a non-empty string, so it is "weighted" before
/// and after every add, and OpenFst's property update for such a change
/// only sets the same bits (and masks), whatever the order or repetition.
pub fn apply(
    clat: &mut CompactLattice,
    plan: &FramePlan,
    trans: &TransitionModel,
    loglikes: &[f32],
    num_pdfs: usize,
) {
    let add = Costs {
        id2pdf: trans.id2pdf(),
        loglikes,
        num_pdfs,
        utt_len: plan.utt_len,
    };
    for (s, &t) in plan.times.iter().enumerate().take(clat.states.len()) {
        let t = t.max(0) as usize;
        for i in 0..clat.states[s].arcs.len() {
            if add.applies(t, &clat.states[s].arcs[i].weight.string) {
                clat.update_arc(s, i, |a| add.to(&mut a.weight, t));
            }
        }
        if add.applies(t, &clat.states[s].final_weight.string) {
            clat.update_final(s, |w| add.to(w, t));
        }
    }
}

/// The new acoustic costs of an utterance's frames, per transition-id.
struct Costs<'a> {
    id2pdf: &'a [i32],
    loglikes: &'a [f32],
    num_pdfs: usize,
    utt_len: usize,
}

impl Costs<'_> {
    /// Whether a string starting at frame `t` has a frame to rescore.
    fn applies(&self, t: usize, string: &[i32]) -> bool {
        !string.is_empty() && t < self.utt_len
    }

    /// Kaldi's `SetValue2(-log_like + Value2())` for each transition-id of
    /// `w`'s string (frames from `t`), one float add each, in order.
    fn to(&self, w: &mut CompactLatticeWeight, t: usize) {
        let mut acoustic = w.weight.acoustic;
        for (off, &tid) in w.string.iter().enumerate() {
            let frame = t + off;
            if frame >= self.utt_len {
                break;
            }
            let pdf = self.id2pdf[tid as usize] as usize;
            acoustic += -self.loglikes[frame * self.num_pdfs + pdf];
        }
        w.weight.acoustic = acoustic;
    }
}

/// Scale the old acoustic costs, plan the lattice and check the features
/// are long enough: everything of Kaldi's `RescoreCompactLattice` but the
/// scoring. `rows` is the number of feature frames.
pub fn prepare(
    clat: &mut CompactLattice,
    trans: &TransitionModel,
    rows: usize,
    old_acoustic_scale: f32,
) -> std::result::Result<FramePlan, Skip> {
    scale_acoustic(clat, old_acoustic_scale);
    let plan = plan(clat, trans)?;
    if rows < plan.utt_len {
        return Err(Skip(format!(
            "Features are too short for lattice: utt-len is {}, {} is last frame",
            plan.utt_len,
            rows as i64 - 1
        )));
    }
    Ok(plan)
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
    let plan = match prepare(clat, trans, feats.len() / dim.max(1), old_acoustic_scale) {
        Ok(p) => p,
        Err(s) => return Ok(Err(s)),
    };
    let mut batch = LatticeBatch::new(dim);
    batch.push(String::new(), std::mem::take(clat), plan, feats);
    if let Some((_, done)) = batch.score(trans, model)?.pop() {
        *clat = done;
    }
    Ok(Ok(()))
}

/// Prepared lattices whose frames are scored together in one engine call
/// (on a GPU, one launch for many utterances), then rescored in order. A
/// batch goes through [`push`](Self::push), [`score_only`](Self::score_only)
/// and [`apply`](Self::apply), which leaves it empty with its buffers kept,
/// so a pipeline can hand the same batches round (no new pages per batch).
pub struct LatticeBatch {
    dim: usize,
    frames: Vec<f32>,
    /// The batch's log-likelihoods once scored (`num_pdfs` per frame).
    loglikes: Vec<f32>,
    num_pdfs: usize,
    items: Vec<(String, CompactLattice, FramePlan)>,
    /// Feature rows of the pushed utterances (Kaldi counts these).
    feature_rows: usize,
}

impl LatticeBatch {
    pub fn new(dim: usize) -> Self {
        LatticeBatch {
            dim,
            frames: Vec::new(),
            loglikes: Vec::new(),
            num_pdfs: 0,
            items: Vec::new(),
            feature_rows: 0,
        }
    }

    /// An empty batch with room for `frames` frames (so filling it never
    /// moves it).
    pub fn with_capacity(dim: usize, frames: usize) -> Self {
        let mut b = Self::new(dim);
        b.frames.reserve_exact(frames * dim);
        b
    }

    /// Size the scores buffer for the frames held and `num_pdfs` pdfs (its
    /// new pages written here, by the thread that filled the batch, not by
    /// the one that scores it).
    pub fn make_room_for_scores(&mut self, num_pdfs: usize) {
        let len = self.num_frames() * num_pdfs;
        self.loglikes.truncate(len);
        self.loglikes.resize(len, 0.0);
    }

    /// The frames' dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Frames held so far.
    pub fn num_frames(&self) -> usize {
        self.frames.len() / self.dim.max(1)
    }

    /// Feature rows of the lattices pushed so far (at least their frames).
    pub fn feature_rows(&self) -> usize {
        self.feature_rows
    }

    /// Lattices held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Add a prepared lattice and its features (at least `plan.utt_len` rows).
    pub fn push(&mut self, key: String, clat: CompactLattice, plan: FramePlan, feats: &[f32]) {
        self.frames
            .extend_from_slice(&feats[..plan.utt_len * self.dim]);
        self.feature_rows += feats.len() / self.dim.max(1);
        self.items.push((key, clat, plan));
    }

    /// Score every frame of the batch and rescore its lattices; returns
    /// them in the order they were pushed and leaves the batch empty.
    pub fn score(
        &mut self,
        trans: &TransitionModel,
        model: &mut dyn LoadedModel,
    ) -> Result<Vec<(String, CompactLattice)>> {
        self.score_only(model)?;
        Ok(self.apply(trans).collect())
    }

    /// Score every frame of the batch (nothing else: this is what a
    /// pipeline's scoring thread does); [`apply`](Self::apply) then
    /// rescores the lattices, possibly on another thread.
    pub fn score_only(&mut self, model: &mut dyn LoadedModel) -> Result<()> {
        self.num_pdfs = model.num_states();
        self.make_room_for_scores(self.num_pdfs);
        crate::timeline::mark("lat_batch");
        if !self.loglikes.is_empty() {
            model.state_loglikes(FrameBatch::new(&self.frames, self.dim), &mut self.loglikes)?;
        }
        crate::timeline::mark("lat_loglikes");
        Ok(())
    }

    /// Rescore each lattice of a scored batch from its own rows, in push
    /// order, handing each out as it is done; the batch is left empty (its
    /// buffers kept). One thread: the work is a float add per
    /// transition-id, and fanning it out cost more than it took on a
    /// 16-core host (12 ms against 3 ms a 32,768-frame batch on the H100
    /// machine).
    pub fn apply<'a>(
        &'a mut self,
        trans: &'a TransitionModel,
    ) -> impl Iterator<Item = (String, CompactLattice)> + 'a {
        self.frames.clear();
        self.feature_rows = 0;
        let (loglikes, num_pdfs) = (&self.loglikes[..], self.num_pdfs);
        let mut row = 0;
        self.items.drain(..).map(move |(key, mut clat, plan)| {
            let ll = &loglikes[row * num_pdfs..(row + plan.utt_len) * num_pdfs];
            row += plan.utt_len;
            apply(&mut clat, &plan, trans, ll, num_pdfs);
            (key, clat)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amtool_formats::kaldi::lattice::Arc;

    fn trans() -> TransitionModel {
        let bytes = std::fs::read("testdata/kaldi/final.mdl").unwrap();
        amtool_formats::kaldi::model::KaldiModel::from_bytes(&bytes)
            .unwrap()
            .trans
    }

    fn w(g: f32, a: f32, s: &[i32]) -> CompactLatticeWeight {
        CompactLatticeWeight::new(LatticeWeight::new(g, a), s.to_vec())
    }

    /// States 0..n, start `start`, arcs (src, dst, tids), finals (state, tids).
    fn lat(
        n: usize,
        start: i32,
        arcs: &[(i32, i32, &[i32])],
        finals: &[(i32, &[i32])],
    ) -> CompactLattice {
        let mut c = CompactLattice::new();
        for _ in 0..n {
            c.add_state();
        }
        c.set_start(start);
        for &(s, d, tids) in arcs {
            c.add_arc(
                s,
                Arc {
                    ilabel: 1,
                    olabel: 1,
                    weight: w(1.0, 5.0, tids),
                    nextstate: d,
                },
            );
        }
        for &(s, tids) in finals {
            c.set_final(s, w(0.5, 2.0, tids));
        }
        c
    }

    fn skip(mut c: CompactLattice) -> String {
        plan(&mut c, &trans()).unwrap_err().0
    }

    #[test]
    fn plan_follows_kaldi_time_line() {
        // 0 -[1 1]-> 1 -[2]-> 2, final 2 with [3]: frames 0,0,1,2 -> 4 entries over 4 frames.
        let mut c = lat(3, 0, &[(0, 1, &[1, 1]), (1, 2, &[2])], &[(2, &[3])]);
        let p = plan(&mut c, &trans()).unwrap();
        assert_eq!(p.utt_len, 4);
        assert_eq!(p.times, vec![0, 2, 3]);
        // No final state: length 0, nothing to score (Kaldi writes it as is).
        let mut c = lat(2, 0, &[(0, 1, &[1])], &[]);
        assert_eq!(plan(&mut c, &trans()).unwrap().utt_len, 0);
        // Finals at different times: warned, the longer one counts.
        let mut c = lat(2, 0, &[(0, 1, &[1])], &[(0, &[1]), (1, &[1])]);
        assert_eq!(plan(&mut c, &trans()).unwrap().utt_len, 2);
    }

    #[test]
    fn bad_lattices_are_skipped_with_kaldi_messages() {
        assert_eq!(skip(CompactLattice::new()), "Rescoring empty lattice");
        let cyclic = lat(2, 0, &[(0, 1, &[1]), (1, 0, &[1])], &[(1, &[])]);
        assert_eq!(skip(cyclic), "Cycles detected in lattice.");
        let start1 = lat(2, 1, &[(0, 1, &[1])], &[(1, &[1])]);
        assert!(skip(start1).contains("start state is 1"));
        let unequal = lat(
            3,
            0,
            &[(0, 1, &[1]), (0, 2, &[1]), (1, 2, &[1])],
            &[(2, &[])],
        );
        assert!(skip(unequal).contains("paths of different lengths"));
        let unreachable = lat(3, 0, &[(0, 1, &[1])], &[(1, &[]), (2, &[])]);
        assert!(skip(unreachable).contains("state 2 is not reachable"));
        // A dead-end branch longer than the utterance.
        let mismatch = lat(
            4,
            0,
            &[(0, 1, &[1, 1, 1]), (1, 2, &[1]), (0, 3, &[1])],
            &[(3, &[])],
        );
        assert_eq!(
            skip(mismatch),
            "There appears to be lattice/feature mismatch, aborting."
        );
        let bad_tid = lat(2, 0, &[(0, 1, &[1, 0])], &[(1, &[])]);
        assert!(skip(bad_tid).contains("transition-id 0 (state 0) is not in the model"));
    }

    #[test]
    fn scaling_keeps_graph_costs_and_zero_weights() {
        let mut c = lat(2, 0, &[(0, 1, &[1])], &[(1, &[])]);
        scale_acoustic(&mut c, 0.5);
        assert_eq!(
            c.states[0].arcs[0].weight.weight,
            LatticeWeight::new(1.0, 2.5)
        );
        assert_eq!(
            c.states[1].final_weight.weight,
            LatticeWeight::new(0.5, 1.0)
        );
        assert_eq!(c.states[0].final_weight, CompactLatticeWeight::zero());
        scale_acoustic(&mut c, 0.0);
        assert_eq!(
            c.states[0].arcs[0].weight.weight,
            LatticeWeight::new(1.0, 0.0)
        );
    }

    #[test]
    fn batched_equals_one_by_one() {
        use amtool_formats::kaldi::matrix::Matrix;
        use amtool_formats::kaldi::table::SequentialTableReader;
        use std::io::Read;
        let model = amtool_formats::kaldi::model::KaldiModel::from_bytes(
            &std::fs::read("testdata/kaldi/final.mdl").unwrap(),
        )
        .unwrap();
        let engine = crate::engine::select(crate::engine::UseGpu::No, 1).unwrap();
        let mut loaded = engine
            .load(&crate::model::AcousticModel::from_am_diag_gmm(&model.am))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let lat = dir.path().join("lat.ark");
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(
            std::fs::File::open("testdata/kaldi/lattice/lat.ark.gz").unwrap(),
        )
        .read_to_end(&mut raw)
        .unwrap();
        std::fs::write(&lat, raw).unwrap();
        let lats: Vec<(String, CompactLattice)> =
            SequentialTableReader::open(&format!("ark:{}", lat.display()))
                .unwrap()
                .take(3)
                .map(|x| x.unwrap())
                .collect();
        let feats: Vec<(String, Matrix<f32>)> =
            SequentialTableReader::open("ark:testdata/kaldi/feats/feats_cmvn_deltas.first3.ark")
                .unwrap()
                .map(|x| x.unwrap())
                .collect();
        let mut batch = LatticeBatch::new(39);
        let mut single = Vec::new();
        for ((k, l), (_, f)) in lats.iter().zip(&feats) {
            let mut one = l.clone();
            rescore_compact_lattice(&mut one, &model.trans, loaded.as_mut(), f.data(), 39, 0.0)
                .unwrap()
                .unwrap();
            single.push(one);
            let mut c = l.clone();
            let p = prepare(&mut c, &model.trans, f.rows(), 0.0).unwrap();
            batch.push(k.clone(), c, p, f.data());
        }
        let batched = batch.score(&model.trans, loaded.as_mut()).unwrap();
        assert!(batch.is_empty());
        assert_eq!(batched.len(), 3);
        // The engines' results do not depend on how frames are batched.
        for ((_, b), s) in batched.iter().zip(&single) {
            assert_eq!(b, s);
        }
        assert_ne!(batched[0].1, lats[0].1);
    }
}
