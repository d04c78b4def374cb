//! Decoding graphs for alignment: a training graph (`VectorFst<StdArc>`,
//! input labels transition-ids) with the transition model's log-probabilities
//! added as Kaldi's `AddTransitionProbs` does (`hmm/hmm-utils.cc`), optionally
//! made "careful" (`ModifyGraphForCarefulAlignment`), then packed into flat
//! arrays the decoder walks.

use amtool_formats::kaldi::fst::{StdVectorFst, TropicalWeight};
use amtool_formats::kaldi::lattice::{Arc, FstWeight};
use amtool_formats::kaldi::transition::TransitionModel;

/// Per transition-id, the cost Kaldi adds to an arc labelled with it:
/// `−GetScaledTransitionLogProb(tid, transition_scale, self_loop_scale)`,
/// in float as Kaldi computes it (entry 0 unused).
pub fn transition_costs(
    tm: &TransitionModel,
    transition_scale: f32,
    self_loop_scale: f32,
) -> Vec<f32> {
    let lp = tm.log_probs();
    let n = tm.num_transition_ids();
    // TransitionModel::ComputeDerivedOfProbs: log(1 − P(self-loop)) per
    // transition-state; the subtraction is in double (1.0 is a double literal).
    let non_self_loop: Vec<f32> = (0..=tm.num_transition_states() as i32)
        .map(|ts| {
            let sl = if ts == 0 { 0 } else { tm.self_loop_of(ts) };
            if sl == 0 {
                return 0.0;
            }
            let p = lp[sl as usize].exp();
            let mut q = (1.0f64 - p as f64) as f32;
            if q <= 0.0 {
                q = 1.0e-10;
            }
            q.ln()
        })
        .collect();
    let mut costs = vec![0f32; n + 1];
    for tid in 1..=n as i32 {
        let l = lp[tid as usize];
        let scaled = if transition_scale == self_loop_scale {
            l * transition_scale
        } else if tm.is_self_loop(tid) {
            self_loop_scale * l
        } else {
            let ts = tm.id2state()[tid as usize];
            let nsl = non_self_loop[ts as usize];
            // GetTransitionLogProbIgnoringSelfLoops: log p − log(1 − p_loop)
            // when the state has a self-loop.
            let ignoring = if tm.self_loop_of(ts) == 0 { l } else { l - nsl };
            self_loop_scale * nsl + transition_scale * ignoring
        };
        costs[tid as usize] = -scaled;
    }
    costs
}

/// Kaldi `AddTransitionProbs` with no disambiguation symbols: each arc whose
/// input label is a transition-id gets its cost from [`transition_costs`];
/// another non-zero input label is an error naming it.
pub fn add_transition_probs(fst: &mut StdVectorFst, costs: &[f32]) -> Result<(), String> {
    let max = costs.len() as i32 - 1;
    for s in 0..fst.states.len() {
        for i in 0..fst.states[s].arcs.len() {
            let mut arc = fst.states[s].arcs[i].clone();
            let l = arc.ilabel;
            if l >= 1 && l <= max {
                arc.weight = TropicalWeight(times(arc.weight.0, costs[l as usize]));
                fst.set_arc(s, i, arc);
            } else if l != 0 {
                return Err(format!(
                    "AddTransitionProbs: invalid symbol {l} on graph input side."
                ));
            }
        }
    }
    Ok(())
}

/// Tropical `Times` in float (∞ absorbs; −∞ with +∞ gives +∞... as OpenFst).
fn times(a: f32, b: f32) -> f32 {
    if a == f32::INFINITY || b == f32::INFINITY {
        f32::INFINITY
    } else {
        a + b
    }
}

/// Kaldi `ModifyGraphForCarefulAlignment`: the graph concatenated with a copy
/// of itself (final costs removed) entered through a new pre-initial state,
/// so a path must reach a final state before it may loop back to the start.
/// Follows OpenFst `Concat`: the copy's states are appended, and each final
/// state of the original loses its cost to an ε-arc (appended to its arcs)
/// into the copy's pre-initial state.
pub fn make_careful(fst: &mut StdVectorFst) {
    let n = fst.states.len();
    if n == 0 || fst.start < 0 {
        return;
    }
    let zero = TropicalWeight::zero();
    let one = TropicalWeight::one();
    // The right-hand side: a copy without finals plus a pre-initial state
    // (final with cost 0) with an ε-arc to the copy's start.
    let rhs_states = fst.states.clone();
    let rhs_start = fst.start;
    for st in &rhs_states {
        let s = fst.add_state();
        for a in &st.arcs {
            let mut a = a.clone();
            a.nextstate += n as i32;
            fst.add_arc(s, a);
        }
    }
    let pre = fst.add_state();
    fst.set_final(pre, one);
    fst.add_arc(
        pre,
        Arc {
            ilabel: 0,
            olabel: 0,
            weight: one,
            nextstate: rhs_start + n as i32,
        },
    );
    for s in 0..n {
        let w = fst.states[s].final_weight;
        if w != zero {
            fst.set_final(s as i32, zero);
            fst.add_arc(
                s as i32,
                Arc {
                    ilabel: 0,
                    olabel: 0,
                    weight: w,
                    nextstate: pre as i32,
                },
            );
        }
    }
}

/// One arc of a packed graph: input label, cost, destination, and where
/// the search finds an emitting arc's acoustic cost.
#[derive(Debug, Clone, Copy)]
pub struct GraphArc {
    pub ilabel: i32,
    pub weight: f32,
    pub next: u32,
    /// Emitting arcs: the pdf of the transition-id
    /// ([`DecodingGraph::set_pdfs`]), or its column among the pdfs the
    /// graph reaches ([`DecodingGraph::compact_columns`]); ε-arcs: 0.
    pub column: u32,
}

/// A graph packed for decoding. The arcs of state `s` are
/// `arcs[first[s]..first[s + 1]]`: its emitting arcs, then from
/// `eps[s]` its ε-arcs, each kind in the FST's order (the search walks the
/// two kinds apart, each in that order, so this changes nothing it does).
#[derive(Debug, Clone)]
pub struct DecodingGraph {
    pub start: u32,
    pub first: Vec<u32>,
    pub eps: Vec<u32>,
    pub arcs: Vec<GraphArc>,
    /// Final cost per state (+∞: not final).
    pub finals: Vec<f32>,
}

impl DecodingGraph {
    /// `None` for an FST without a start state (Kaldi: "Empty decoding graph").
    pub fn pack(fst: &StdVectorFst) -> Option<Self> {
        if fst.start < 0 || fst.states.is_empty() {
            return None;
        }
        let n = fst.states.len();
        let mut first = Vec::with_capacity(n + 1);
        let mut eps = Vec::with_capacity(n);
        let mut arcs = Vec::with_capacity(fst.num_arcs());
        let packed = |a: &Arc<TropicalWeight>| GraphArc {
            ilabel: a.ilabel,
            weight: a.weight.0,
            next: a.nextstate as u32,
            column: 0,
        };
        for st in &fst.states {
            first.push(arcs.len() as u32);
            arcs.extend(st.arcs.iter().filter(|a| a.ilabel != 0).map(packed));
            eps.push(arcs.len() as u32);
            arcs.extend(st.arcs.iter().filter(|a| a.ilabel == 0).map(packed));
        }
        first.push(arcs.len() as u32);
        Some(DecodingGraph {
            start: fst.start as u32,
            first,
            eps,
            arcs,
            finals: fst.states.iter().map(|s| s.final_weight.0).collect(),
        })
    }

    pub fn num_states(&self) -> usize {
        self.finals.len()
    }

    /// The emitting arcs of `s`.
    #[inline]
    pub fn emitting_arcs(&self, s: u32) -> &[GraphArc] {
        &self.arcs[self.first[s as usize] as usize..self.eps[s as usize] as usize]
    }

    /// The ε-arcs of `s`.
    #[inline]
    pub fn epsilon_arcs(&self, s: u32) -> &[GraphArc] {
        &self.arcs[self.eps[s as usize] as usize..self.first[s as usize + 1] as usize]
    }

    /// Whether `s` has ε-arcs.
    #[inline]
    pub fn has_epsilons(&self, s: u32) -> bool {
        self.eps[s as usize] != self.first[s as usize + 1]
    }

    /// Each emitting arc's column set to the pdf of its transition-id
    /// (`id2pdf`); an error names a label outside the table or a pdf of
    /// `num_pdfs` or more.
    pub fn set_pdfs(&mut self, id2pdf: &[i32], num_pdfs: usize) -> Result<(), String> {
        for a in self.arcs.iter_mut().filter(|a| a.ilabel != 0) {
            let pdf = usize::try_from(a.ilabel)
                .ok()
                .and_then(|t| id2pdf.get(t))
                .and_then(|&p| usize::try_from(p).ok())
                .filter(|&p| p < num_pdfs)
                .ok_or_else(|| {
                    format!(
                        "transition-id {} has no pdf among the model's {num_pdfs}",
                        a.ilabel
                    )
                })?;
            a.column = pdf as u32;
        }
        Ok(())
    }

    /// The pdfs the emitting arcs reach (after [`Self::set_pdfs`]),
    /// ascending; each arc's column becomes its pdf's place among them.
    pub fn compact_columns(&mut self) -> Vec<u32> {
        let emitting = |a: &&mut GraphArc| a.ilabel != 0;
        let mut pdfs: Vec<u32> = self
            .arcs
            .iter()
            .filter(|a| a.ilabel != 0)
            .map(|a| a.column)
            .collect();
        pdfs.sort_unstable();
        pdfs.dedup();
        for a in self.arcs.iter_mut().filter(emitting) {
            // Present: every column was collected above.
            a.column = pdfs.binary_search(&a.column).unwrap_or(0) as u32;
        }
        pdfs
    }
}
