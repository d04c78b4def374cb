//! Kaldi's HMM topology (`<Topology>`, `hmm/hmm-topology.cc`) and transition
//! model (`<TransitionModel>`, `hmm/transition-model.cc`), with the derived
//! tables a trainer needs (transition-id → pdf / transition-state / index,
//! the (state, index) → transition-id map, the number of pdfs), computed
//! exactly as Kaldi's `ComputeDerived` does so that transition-ids in
//! alignments mean the same thing here as in Kaldi.
//!
//! Both transition-model forms are read: `<Triples>` (phone, HMM state, pdf;
//! written when every state's forward and self-loop pdf classes agree) and
//! `<Tuples>` (phone, HMM state, forward pdf, self-loop pdf). The writer picks
//! the form the way Kaldi does, from the topology.

use std::io::{self, Write};

use crate::error::Result;
use crate::kaldi::blocks::{read_vector_f32, write_vector};
use crate::kaldi::gmm::context;
use crate::kaldi::io::{Reader, Writer};
use crate::kaldi::object::KaldiObject;

/// Kaldi's `kNoPdf`: a non-emitting state.
pub const NO_PDF: i32 = -1;

/// One state of a phone's HMM.
#[derive(Debug, Clone, PartialEq)]
pub struct HmmState {
    /// Pdf class on transitions out of this state other than the self-loop
    /// (`NO_PDF` for the final, non-emitting state).
    pub forward_pdf_class: i32,
    /// Pdf class of the self-loop; equal to `forward_pdf_class` in ordinary HMMs.
    pub self_loop_pdf_class: i32,
    /// (destination state, probability).
    pub transitions: Vec<(i32, f32)>,
}

/// Kaldi `HmmTopology`: which HMM each phone uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// Sorted phone ids covered.
    pub phones: Vec<i32>,
    /// Phone id → index into `entries` (`-1` where not covered).
    pub phone2idx: Vec<i32>,
    /// One HMM (list of states, the last one final and non-emitting) per entry.
    pub entries: Vec<Vec<HmmState>>,
}

impl Topology {
    /// The HMM of `phone`, if covered.
    pub fn entry_for_phone(&self, phone: i32) -> Option<&[HmmState]> {
        let idx = *self.phone2idx.get(usize::try_from(phone).ok()?)?;
        self.entries
            .get(usize::try_from(idx).ok()?)
            .map(|e| e.as_slice())
    }

    /// Kaldi `NumPdfClasses`: one more than the largest pdf class of the phone.
    pub fn num_pdf_classes(&self, phone: i32) -> Option<i32> {
        let e = self.entry_for_phone(phone)?;
        Some(
            e.iter()
                .map(|s| s.forward_pdf_class.max(s.self_loop_pdf_class))
                .max()
                .unwrap_or(0)
                .max(0)
                + 1,
        )
    }

    /// Kaldi `IsHmm`: every state's forward and self-loop pdf classes agree.
    pub fn is_hmm(&self) -> bool {
        self.phones.iter().all(|&p| {
            self.entry_for_phone(p).is_none_or(|e| {
                e.iter()
                    .all(|s| s.forward_pdf_class == s.self_loop_pdf_class)
            })
        })
    }

    /// Kaldi `HmmTopology::Read`, binary or text (the human-readable
    /// `<TopologyEntry>` form), followed by Kaldi's `Check`.
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        let start = r.pos();
        r.expect_token("<Topology>")?;
        let topo = if r.binary() {
            Self::read_binary(r)?
        } else {
            Self::read_text(r)?
        };
        topo.check()
            .map_err(|m| r.error_at(start, format!("invalid topology: {m}")))?;
        Ok(topo)
    }

    fn read_binary(r: &mut Reader<'_>) -> Result<Self> {
        let phones = r
            .read_int_vector::<i32>()
            .map_err(|e| context(e, "topology phone list"))?;
        let phone2idx = r
            .read_int_vector::<i32>()
            .map_err(|e| context(e, "topology phone-to-entry map"))?;
        let mut at = r.pos();
        let mut n = r.read_i32()?;
        // -1 announces the extended form with a self-loop pdf class per state.
        let is_hmm = n != -1;
        if !is_hmm {
            at = r.pos();
            n = r.read_i32()?;
        }
        if n < 0 {
            return Err(r.error_at(at, format!("negative topology entry count {n}")));
        }
        let mut entries = Vec::new();
        for _ in 0..n {
            let at = r.pos();
            let ns = r.read_i32()?;
            if ns < 0 {
                return Err(r.error_at(at, format!("negative state count {ns}")));
            }
            let mut states = Vec::new();
            for _ in 0..ns {
                let forward_pdf_class = r.read_i32()?;
                let self_loop_pdf_class = if is_hmm {
                    forward_pdf_class
                } else {
                    r.read_i32()?
                };
                let at = r.pos();
                let nt = r.read_i32()?;
                if nt < 0 {
                    return Err(r.error_at(at, format!("negative transition count {nt}")));
                }
                let mut transitions = Vec::new();
                for _ in 0..nt {
                    let dst = r.read_i32()?;
                    let p = r.read_f32()?;
                    transitions.push((dst, p));
                }
                states.push(HmmState {
                    forward_pdf_class,
                    self_loop_pdf_class,
                    transitions,
                });
            }
            entries.push(states);
        }
        r.expect_token("</Topology>")?;
        Ok(Topology {
            phones,
            phone2idx,
            entries,
        })
    }

    fn read_text(r: &mut Reader<'_>) -> Result<Self> {
        let mut phones = Vec::new();
        let mut phone2idx: Vec<i32> = Vec::new();
        let mut entries = Vec::new();
        loop {
            let at = r.pos();
            let tok = r.read_token()?;
            if tok == "</Topology>" {
                break;
            }
            if tok != "<TopologyEntry>" {
                return Err(r.error_at(
                    at,
                    format!("expected </Topology> or <TopologyEntry>, found '{tok}'"),
                ));
            }
            r.expect_token("<ForPhones>")?;
            let mut entry_phones = Vec::new();
            loop {
                let at = r.pos();
                let w = r.read_token()?;
                if w == "</ForPhones>" {
                    break;
                }
                match w.parse::<i32>() {
                    Ok(p) if p > 0 => entry_phones.push((p, at)),
                    _ => {
                        return Err(r.error_at(
                            at,
                            format!(
                            "expected a phone id (positive integer) or </ForPhones>, found '{w}'"
                        ),
                        ))
                    }
                }
            }
            let mut states: Vec<HmmState> = Vec::new();
            let at = r.pos();
            let mut tok = r.read_token()?;
            let _ = at;
            while tok != "</TopologyEntry>" {
                if tok != "<State>" {
                    return Err(r.error_at(
                        r.pos(),
                        format!("expected </TopologyEntry> or <State>, found '{tok}'"),
                    ));
                }
                let at = r.pos();
                let s = r.read_i32()?;
                if s != states.len() as i32 {
                    return Err(r.error_at(
                        at,
                        format!(
                            "states must be numbered in order from zero: expected {}, found {s}",
                            states.len()
                        ),
                    ));
                }
                let at = r.pos();
                tok = r.read_token()?;
                let (mut fwd, mut sl) = (NO_PDF, NO_PDF);
                if tok == "<PdfClass>" {
                    fwd = r.read_i32()?;
                    sl = fwd;
                    let at2 = r.pos();
                    tok = r.read_token()?;
                    if tok == "<SelfLoopPdfClass>" {
                        return Err(r.error_at(at2, "pdf classes are given by <PdfClass> or by a <ForwardPdfClass>/<SelfLoopPdfClass> pair, not both"));
                    }
                } else if tok == "<ForwardPdfClass>" {
                    fwd = r.read_i32()?;
                    r.expect_token("<SelfLoopPdfClass>")?;
                    sl = r.read_i32()?;
                    tok = r.read_token()?;
                }
                let _ = at;
                let mut transitions = Vec::new();
                while tok == "<Transition>" {
                    let dst = r.read_i32()?;
                    let p = r.read_f32()?;
                    transitions.push((dst, p));
                    tok = r.read_token()?;
                }
                if tok == "<Final>" {
                    return Err(r.error_at(
                        r.pos(),
                        "old-format topology (<Final>) is not supported by Kaldi either",
                    ));
                }
                if tok != "</State>" {
                    return Err(r.error_at(
                        r.pos(),
                        format!("expected <Transition> or </State>, found '{tok}'"),
                    ));
                }
                states.push(HmmState {
                    forward_pdf_class: fwd,
                    self_loop_pdf_class: sl,
                    transitions,
                });
                tok = r.read_token()?;
            }
            let my_index = entries.len() as i32;
            entries.push(states);
            for (p, at) in entry_phones {
                let pi = p as usize;
                if phone2idx.len() <= pi {
                    phone2idx.resize(pi + 1, -1);
                }
                if phone2idx[pi] != -1 {
                    return Err(r.error_at(
                        at,
                        format!("phone {p} appears in more than one topology entry"),
                    ));
                }
                phone2idx[pi] = my_index;
                phones.push(p);
            }
        }
        phones.sort_unstable();
        Ok(Topology {
            phones,
            phone2idx,
            entries,
        })
    }

    /// Kaldi `HmmTopology::Check`, returning the problem instead of aborting.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.entries.is_empty() || self.phones.is_empty() || self.phone2idx.is_empty() {
            return Err("empty topology".into());
        }
        if self.phones.windows(2).any(|w| w[0] >= w[1]) {
            return Err("phone list is not sorted and unique".into());
        }
        let mut seen = vec![false; self.entries.len()];
        for &p in &self.phones {
            let idx = usize::try_from(p)
                .ok()
                .and_then(|p| self.phone2idx.get(p))
                .copied()
                .unwrap_or(-1);
            match usize::try_from(idx)
                .ok()
                .filter(|&i| i < self.entries.len())
            {
                Some(i) => seen[i] = true,
                None => return Err(format!("phone {p} has no valid topology entry")),
            }
        }
        for (i, e) in self.entries.iter().enumerate() {
            if !seen[i] {
                return Err(format!("entry {i} has no phones"));
            }
            let n = e.len();
            if n <= 1 {
                return Err(format!("entry {i} has {n} states; it needs at least one emitting state and a final state"));
            }
            let last = &e[n - 1];
            if !last.transitions.is_empty() || last.forward_pdf_class != NO_PDF {
                return Err(format!(
                    "entry {i}: the last state must be final: non-emitting, no transitions"
                ));
            }
            let mut has_in = vec![false; n];
            let mut classes = Vec::new();
            for (j, s) in e.iter().enumerate() {
                if s.forward_pdf_class != NO_PDF {
                    classes.push(s.forward_pdf_class);
                    classes.push(s.self_loop_pdf_class);
                }
                let mut dsts = Vec::new();
                let mut tot = 0f32;
                for &(dst, p) in &s.transitions {
                    tot += p;
                    if p <= 0.0 {
                        return Err(format!(
                            "entry {i} state {j}: transition probability {p} is not positive"
                        ));
                    }
                    if dst < 0 || dst as usize >= n {
                        return Err(format!(
                            "entry {i} state {j}: invalid destination state {dst}"
                        ));
                    }
                    if dst as usize == n - 1 && s.forward_pdf_class == NO_PDF {
                        return Err(format!("entry {i} state {j}: a non-emitting state may not go to the final state"));
                    }
                    if dsts.contains(&dst) {
                        return Err(format!(
                            "entry {i} state {j}: duplicate transition to {dst}"
                        ));
                    }
                    dsts.push(dst);
                    has_in[dst as usize] = true;
                }
                if j + 1 < n && tot <= 0.0 {
                    return Err(format!(
                        "entry {i} state {j}: a non-final state needs transitions out"
                    ));
                }
            }
            if let Some(j) = (1..n).find(|&j| !has_in[j]) {
                return Err(format!("entry {i}: state {j} has no input transitions"));
            }
            classes.sort_unstable();
            classes.dedup();
            if classes.first() != Some(&0) || classes.last() != Some(&(classes.len() as i32 - 1)) {
                return Err(format!(
                    "entry {i}: pdf classes must be contiguous from zero"
                ));
            }
        }
        Ok(())
    }

    /// Kaldi `HmmTopology::Write`.
    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        let is_hmm = self.is_hmm();
        w.write_token("<Topology>")?;
        if w.binary() {
            w.write_int_vector(&self.phones)?;
            w.write_int_vector(&self.phone2idx)?;
            if !is_hmm {
                w.write_i32(-1)?;
            }
            w.write_i32(self.entries.len() as i32)?;
            for e in &self.entries {
                w.write_i32(e.len() as i32)?;
                for s in e {
                    w.write_i32(s.forward_pdf_class)?;
                    if !is_hmm {
                        w.write_i32(s.self_loop_pdf_class)?;
                    }
                    w.write_i32(s.transitions.len() as i32)?;
                    for &(d, p) in &s.transitions {
                        w.write_i32(d)?;
                        w.write_f32(p)?;
                    }
                }
            }
        } else {
            w.newline()?;
            for (i, e) in self.entries.iter().enumerate() {
                w.write_token("<TopologyEntry>")?;
                w.newline()?;
                w.write_token("<ForPhones>")?;
                w.newline()?;
                let mut line = String::new();
                for (p, &idx) in self.phone2idx.iter().enumerate() {
                    if idx == i as i32 {
                        line.push_str(&format!("{p} "));
                    }
                }
                line.push('\n');
                w.write_raw(line.as_bytes())?;
                w.write_token("</ForPhones>")?;
                w.newline()?;
                for (j, s) in e.iter().enumerate() {
                    w.write_token("<State>")?;
                    w.write_i32(j as i32)?;
                    if s.forward_pdf_class != NO_PDF {
                        if is_hmm {
                            w.write_token("<PdfClass>")?;
                            w.write_i32(s.forward_pdf_class)?;
                        } else {
                            w.write_token("<ForwardPdfClass>")?;
                            w.write_i32(s.forward_pdf_class)?;
                            w.write_token("<SelfLoopPdfClass>")?;
                            w.write_i32(s.self_loop_pdf_class)?;
                        }
                    }
                    for &(d, p) in &s.transitions {
                        w.write_token("<Transition>")?;
                        w.write_i32(d)?;
                        w.write_f32(p)?;
                    }
                    w.write_token("</State>")?;
                    w.newline()?;
                }
                w.write_token("</TopologyEntry>")?;
                w.newline()?;
            }
        }
        w.write_token("</Topology>")?;
        w.newline()
    }

    /// Read a whole topology file (e.g. `lang/topo`).
    pub fn from_bytes(buf: &[u8]) -> Result<Self> {
        crate::kaldi::model::read_single(buf, "Topology", Topology::read)
    }

    pub fn to_bytes(&self, binary: bool) -> Vec<u8> {
        crate::kaldi::model::write_single(binary, |w| self.write(w))
    }
}

/// One transition-state: a (phone, HMM state, forward pdf, self-loop pdf).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tuple {
    pub phone: i32,
    pub hmm_state: i32,
    pub forward_pdf: i32,
    pub self_loop_pdf: i32,
}

/// Kaldi `TransitionModel`. Transition-states are numbered from 1 (tuple `i` is
/// transition-state `i + 1`); transition-ids from 1; index 0 of the per-id
/// tables is unused, as in Kaldi.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionModel {
    topo: Topology,
    tuples: Vec<Tuple>,
    /// Indexed by transition-id; `log_probs[0]` is unused (0 in Kaldi's files).
    log_probs: Vec<f32>,
    /// Indexed by transition-state (1-based) and one past the end: the first
    /// transition-id of each state.
    state2id: Vec<i32>,
    id2state: Vec<i32>,
    id2pdf: Vec<i32>,
    num_pdfs: i32,
}

impl TransitionModel {
    /// Build from parts, computing the derived tables (Kaldi `ComputeDerived`)
    /// and checking them (Kaldi `Check`). `log_probs` has one entry per
    /// transition-id plus the unused entry 0.
    pub fn new(
        topo: Topology,
        tuples: Vec<Tuple>,
        log_probs: Vec<f32>,
    ) -> std::result::Result<Self, String> {
        let mut tm = TransitionModel {
            topo,
            tuples,
            log_probs,
            state2id: vec![],
            id2state: vec![],
            id2pdf: vec![],
            num_pdfs: 0,
        };
        tm.compute_derived()?;
        let want = tm.id2state.len();
        if tm.log_probs.len() != want {
            return Err(format!(
                "wrong dims: <LogProbs> has {} entries, the topology and tuples give {} transition-ids (+1)",
                tm.log_probs.len(),
                want - 1
            ));
        }
        for tid in 1..want {
            let lp = tm.log_probs[tid];
            if !(lp <= 0.0) || !lp.is_finite() {
                return Err(format!(
                    "log-probability of transition-id {tid} is {lp}; it must be finite and <= 0"
                ));
            }
        }
        Ok(tm)
    }

    fn compute_derived(&mut self) -> std::result::Result<(), String> {
        let n = self.tuples.len();
        self.state2id = vec![0; n + 2];
        let mut cur = 1i32;
        self.num_pdfs = 0;
        for tstate in 1..=n + 1 {
            self.state2id[tstate] = cur;
            if tstate <= n {
                let t = self.tuples[tstate - 1];
                self.num_pdfs = self
                    .num_pdfs
                    .max(1 + t.forward_pdf)
                    .max(1 + t.self_loop_pdf);
                let state = self.hmm_state_of(&t).ok_or_else(|| {
                    format!(
                        "transition-state {tstate} (phone {}, HMM state {}) is not in the topology",
                        t.phone, t.hmm_state
                    )
                })?;
                if t.forward_pdf < 0 || t.self_loop_pdf < 0 {
                    return Err(format!("transition-state {tstate} has a negative pdf-id"));
                }
                cur += state.transitions.len() as i32;
            }
        }
        let num_ids = cur as usize; // #transition-ids + 1
        self.id2state = vec![0; num_ids];
        self.id2pdf = vec![0; num_ids];
        for tstate in 1..=n {
            for tid in self.state2id[tstate]..self.state2id[tstate + 1] {
                self.id2state[tid as usize] = tstate as i32;
                let t = self.tuples[tstate - 1];
                self.id2pdf[tid as usize] = if self.is_self_loop(tid) {
                    t.self_loop_pdf
                } else {
                    t.forward_pdf
                };
            }
        }
        Ok(())
    }

    fn hmm_state_of(&self, t: &Tuple) -> Option<&HmmState> {
        self.topo
            .entry_for_phone(t.phone)?
            .get(usize::try_from(t.hmm_state).ok()?)
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    pub fn tuples(&self) -> &[Tuple] {
        &self.tuples
    }

    /// Indexed by transition-id (entry 0 unused).
    pub fn log_probs(&self) -> &[f32] {
        &self.log_probs
    }

    /// For transition updates; the length (the model's structure) is fixed.
    pub fn log_probs_mut(&mut self) -> &mut [f32] {
        &mut self.log_probs
    }

    pub fn num_pdfs(&self) -> usize {
        self.num_pdfs as usize
    }

    pub fn num_transition_ids(&self) -> usize {
        self.id2state.len() - 1
    }

    pub fn num_transition_states(&self) -> usize {
        self.tuples.len()
    }

    pub fn is_valid_transition_id(&self, tid: i32) -> bool {
        tid >= 1 && (tid as usize) < self.id2state.len()
    }

    /// Kaldi `TransitionIdToPdf` (None for an id out of range).
    pub fn transition_id_to_pdf(&self, tid: i32) -> Option<i32> {
        self.is_valid_transition_id(tid)
            .then(|| self.id2pdf[tid as usize])
    }

    /// The whole transition-id → pdf table (entry 0 unused), for fast lookups.
    pub fn id2pdf(&self) -> &[i32] {
        &self.id2pdf
    }

    /// The whole transition-id → transition-state table (entry 0 unused).
    pub fn id2state(&self) -> &[i32] {
        &self.id2state
    }

    pub fn transition_id_to_transition_state(&self, tid: i32) -> Option<i32> {
        self.is_valid_transition_id(tid)
            .then(|| self.id2state[tid as usize])
    }

    pub fn transition_id_to_transition_index(&self, tid: i32) -> Option<i32> {
        let s = self.transition_id_to_transition_state(tid)?;
        Some(tid - self.state2id[s as usize])
    }

    /// Number of transitions out of a transition-state.
    pub fn num_transition_indices(&self, tstate: i32) -> Option<i32> {
        let s = usize::try_from(tstate)
            .ok()
            .filter(|&s| s >= 1 && s <= self.tuples.len())?;
        Some(self.state2id[s + 1] - self.state2id[s])
    }

    /// Kaldi `PairToTransitionId`.
    pub fn pair_to_transition_id(&self, tstate: i32, index: i32) -> Option<i32> {
        let n = self.num_transition_indices(tstate)?;
        (index >= 0 && index < n).then(|| self.state2id[tstate as usize] + index)
    }

    pub fn transition_state_to_tuple(&self, tstate: i32) -> Option<Tuple> {
        let s = usize::try_from(tstate).ok().filter(|&s| s >= 1)?;
        self.tuples.get(s - 1).copied()
    }

    /// Kaldi `TupleToTransitionState` (tuples are sorted).
    pub fn tuple_to_transition_state(&self, t: &Tuple) -> Option<i32> {
        self.tuples.binary_search(t).ok().map(|i| i as i32 + 1)
    }

    pub fn transition_id_to_phone(&self, tid: i32) -> Option<i32> {
        Some(
            self.transition_state_to_tuple(self.transition_id_to_transition_state(tid)?)?
                .phone,
        )
    }

    pub fn transition_id_to_hmm_state(&self, tid: i32) -> Option<i32> {
        Some(
            self.transition_state_to_tuple(self.transition_id_to_transition_state(tid)?)?
                .hmm_state,
        )
    }

    /// The (destination state, probability) of the topology behind a transition-id.
    fn topo_transition(&self, tid: i32) -> Option<(i32, &Tuple, &[HmmState])> {
        let s = self.transition_id_to_transition_state(tid)?;
        let index = tid - self.state2id[s as usize];
        let t = self.tuples.get(s as usize - 1)?;
        let entry = self.topo.entry_for_phone(t.phone)?;
        let dst = entry
            .get(t.hmm_state as usize)?
            .transitions
            .get(index as usize)?
            .0;
        Some((dst, t, entry))
    }

    /// Kaldi `IsSelfLoop`.
    pub fn is_self_loop(&self, tid: i32) -> bool {
        self.topo_transition(tid)
            .is_some_and(|(dst, t, _)| dst == t.hmm_state)
    }

    /// Kaldi `IsFinal`: the transition enters the final state of the phone's HMM.
    pub fn is_final(&self, tid: i32) -> bool {
        self.topo_transition(tid)
            .is_some_and(|(dst, _, e)| dst as usize + 1 == e.len())
    }

    /// Kaldi `SelfLoopOf`: the self-loop transition-id of a transition-state, or 0.
    pub fn self_loop_of(&self, tstate: i32) -> i32 {
        let Some(t) = self.transition_state_to_tuple(tstate) else {
            return 0;
        };
        let Some(state) = self.hmm_state_of(&t) else {
            return 0;
        };
        state
            .transitions
            .iter()
            .position(|&(d, _)| d == t.hmm_state)
            .map_or(0, |i| self.state2id[tstate as usize] + i as i32)
    }

    /// Kaldi `TransitionModel::Read`.
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        let start = r.pos();
        r.expect_token("<TransitionModel>")?;
        let topo = Topology::read(r).map_err(|e| context(e, "TransitionModel topology"))?;
        let at = r.pos();
        let form = r.read_token()?;
        let four = match form {
            "<Tuples>" => true,
            "<Triples>" => false,
            other => {
                return Err(r.error_at(
                    at,
                    format!("expected <Triples> or <Tuples>, found '{other}'"),
                ))
            }
        };
        let at = r.pos();
        let n = r.read_i32()?;
        if n < 0 {
            return Err(r.error_at(at, format!("negative {form} count {n}")));
        }
        let tuples_at = r.pos();
        let mut tuples = Vec::with_capacity((n as usize).min(1 << 20));
        for _ in 0..n {
            let phone = r.read_i32()?;
            let hmm_state = r.read_i32()?;
            let forward_pdf = r.read_i32()?;
            let self_loop_pdf = if four { r.read_i32()? } else { forward_pdf };
            tuples.push(Tuple {
                phone,
                hmm_state,
                forward_pdf,
                self_loop_pdf,
            });
        }
        let at = r.pos();
        let end = r.read_token()?;
        if end != "</Triples>" && end != "</Tuples>" {
            return Err(r.error_at(
                at,
                format!("expected </Triples> or </Tuples>, found '{end}'"),
            ));
        }
        if tuples.windows(2).any(|w| w[0] >= w[1]) {
            return Err(r.error_at(
                tuples_at,
                format!("{form} are not sorted and unique, as Kaldi writes them"),
            ));
        }
        r.expect_token("<LogProbs>")?;
        let lp_at = r.pos();
        let log_probs = read_vector_f32(r).map_err(|e| context(e, "<LogProbs>"))?;
        r.expect_token("</LogProbs>")?;
        r.expect_token("</TransitionModel>")?;
        TransitionModel::new(topo, tuples, log_probs).map_err(|m| {
            r.error_at(
                if m.starts_with("wrong dims") {
                    lp_at
                } else {
                    start
                },
                format!("TransitionModel: {m}"),
            )
        })
    }

    /// Read a file holding a TransitionModel alone (e.g. an nnet1 `final.mdl`).
    pub fn from_bytes(buf: &[u8]) -> Result<Self> {
        crate::kaldi::model::read_single(buf, "TransitionModel", TransitionModel::read)
    }

    pub fn to_bytes(&self, binary: bool) -> Vec<u8> {
        crate::kaldi::model::write_single(binary, |w| self.write(w))
    }

    /// Kaldi `TransitionModel::Write`.
    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        let is_hmm = self.topo.is_hmm();
        w.write_token("<TransitionModel>")?;
        w.newline()?;
        self.topo.write(w)?;
        w.write_token(if is_hmm { "<Triples>" } else { "<Tuples>" })?;
        w.write_i32(self.tuples.len() as i32)?;
        w.newline()?;
        for t in &self.tuples {
            w.write_i32(t.phone)?;
            w.write_i32(t.hmm_state)?;
            w.write_i32(t.forward_pdf)?;
            if !is_hmm {
                w.write_i32(t.self_loop_pdf)?;
            }
            w.newline()?;
        }
        w.write_token(if is_hmm { "</Triples>" } else { "</Tuples>" })?;
        w.newline()?;
        w.write_token("<LogProbs>")?;
        w.newline()?;
        write_vector(w, &self.log_probs)?;
        w.write_token("</LogProbs>")?;
        w.newline()?;
        w.write_token("</TransitionModel>")?;
        w.newline()
    }
}

impl KaldiObject for Topology {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        Topology::read(r)
    }
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        Topology::write(self, w)
    }
}

impl KaldiObject for TransitionModel {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        TransitionModel::read(r)
    }
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        TransitionModel::write(self, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3-state left-to-right topology for phones 1 and 2.
    pub(crate) fn tiny_topo() -> Topology {
        let st = |c: i32, t: Vec<(i32, f32)>| HmmState {
            forward_pdf_class: c,
            self_loop_pdf_class: c,
            transitions: t,
        };
        Topology {
            phones: vec![1, 2],
            phone2idx: vec![-1, 0, 0],
            entries: vec![vec![
                st(0, vec![(0, 0.75), (1, 0.25)]),
                st(1, vec![(1, 0.75), (2, 0.25)]),
                st(NO_PDF, vec![]),
            ]],
        }
    }

    #[test]
    fn derived_tables_follow_kaldi() {
        let topo = tiny_topo();
        let tuples = vec![
            Tuple {
                phone: 1,
                hmm_state: 0,
                forward_pdf: 0,
                self_loop_pdf: 0,
            },
            Tuple {
                phone: 1,
                hmm_state: 1,
                forward_pdf: 1,
                self_loop_pdf: 1,
            },
            Tuple {
                phone: 2,
                hmm_state: 0,
                forward_pdf: 2,
                self_loop_pdf: 2,
            },
            Tuple {
                phone: 2,
                hmm_state: 1,
                forward_pdf: 1,
                self_loop_pdf: 1,
            },
        ];
        let lp = vec![0.0, -0.1, -2.0, -0.1, -2.0, -0.1, -2.0, -0.1, -2.0];
        let tm = TransitionModel::new(topo, tuples, lp).unwrap();
        assert_eq!(tm.num_transition_ids(), 8);
        assert_eq!(tm.num_pdfs(), 3);
        assert_eq!(tm.id2pdf(), &[0, 0, 0, 1, 1, 2, 2, 1, 1]);
        assert_eq!(tm.id2state(), &[0, 1, 1, 2, 2, 3, 3, 4, 4]);
        assert!(tm.is_self_loop(1) && !tm.is_self_loop(2));
        assert!(tm.is_final(4) && !tm.is_final(3));
        assert_eq!(tm.self_loop_of(3), 5);
        assert_eq!(tm.pair_to_transition_id(4, 1), Some(8));
        assert_eq!(tm.pair_to_transition_id(4, 2), None);
        assert_eq!(tm.transition_id_to_transition_index(8), Some(1));
        assert_eq!(tm.transition_id_to_pdf(9), None);
        assert_eq!(tm.transition_id_to_phone(6), Some(2));
        assert_eq!(tm.tuple_to_transition_state(&tm.tuples()[2]), Some(3));
    }

    #[test]
    fn inconsistent_parts_are_errors() {
        let t = vec![Tuple {
            phone: 3,
            hmm_state: 0,
            forward_pdf: 0,
            self_loop_pdf: 0,
        }];
        assert!(TransitionModel::new(tiny_topo(), t, vec![0.0, -1.0])
            .unwrap_err()
            .contains("not in the topology"));
        let t = vec![Tuple {
            phone: 1,
            hmm_state: 0,
            forward_pdf: 0,
            self_loop_pdf: 0,
        }];
        assert!(TransitionModel::new(tiny_topo(), t.clone(), vec![0.0])
            .unwrap_err()
            .contains("wrong dims"));
        assert!(TransitionModel::new(tiny_topo(), t, vec![0.0, 0.5, -1.0])
            .unwrap_err()
            .contains("must be finite and <= 0"));
        let mut topo = tiny_topo();
        topo.entries[0][2].forward_pdf_class = 2;
        assert!(topo.check().unwrap_err().contains("last state"));
    }
}
