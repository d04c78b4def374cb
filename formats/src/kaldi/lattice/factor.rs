//! Kaldi's `ConvertLattice(Lattice → CompactLattice)` (`fstext/lattice-utils-inl.h`):
//! `Factor` (`fstext/factor-inl.h`) collapses each chain of states with one
//! arc in and one arc out into a single arc whose input labels become a
//! transition-id string, the result is top-sorted, and a compact lattice is
//! built from it state by state. Each step follows Kaldi's visiting order so
//! state numbers and arc order come out as Kaldi's.

use std::collections::HashMap;

use super::{dfs, Arc, CompactLattice, CompactLatticeWeight, FstWeight, Lattice, LatticeWeight};

const ARCS_IN: u8 = 0x4;
const MULTIPLE_ARCS_IN: u8 = 0x8;
const ARCS_OUT: u8 = 0x10;
const MULTIPLE_ARCS_OUT: u8 = 0x20;
const OLABELS_OUT: u8 = 0x40;
const ILABELS_OUT: u8 = 0x80;
const FINAL: u8 = 0x1;
const INITIAL: u8 = 0x2;

/// Kaldi `Times` of lattice weights: costs add (zero absorbs).
fn times(a: LatticeWeight, b: LatticeWeight) -> LatticeWeight {
    if a == LatticeWeight::zero() || b == LatticeWeight::zero() {
        return LatticeWeight::zero();
    }
    LatticeWeight::new(a.graph + b.graph, a.acoustic + b.acoustic)
}

/// `GetStateProperties` of `factor-inl.h`.
fn state_properties(l: &Lattice) -> Vec<u8> {
    let n = l.states.len();
    let mut p = vec![0u8; n];
    if l.start >= 0 && (l.start as usize) < n {
        p[l.start as usize] |= INITIAL;
    }
    for s in 0..n {
        for a in &l.states[s].arcs {
            let mut info = p[s];
            if a.ilabel != 0 {
                info |= ILABELS_OUT;
            }
            if a.olabel != 0 {
                info |= OLABELS_OUT;
            }
            if info & ARCS_OUT != 0 {
                info |= MULTIPLE_ARCS_OUT;
            }
            info |= ARCS_OUT;
            p[s] = info;
            let d = a.nextstate as usize;
            if p[d] & ARCS_IN != 0 {
                p[d] |= MULTIPLE_ARCS_IN;
            }
            p[d] |= ARCS_IN;
        }
        if l.states[s].final_weight != LatticeWeight::zero() {
            p[s] |= FINAL;
        }
    }
    p
}

/// Kaldi `Factor`: the factored FST (input labels are indices into the
/// returned label sequences; index 0 is the empty sequence). A removable
/// state has one arc in and one out and no word on it, so chains end (a
/// cycle of removable states cannot be entered) and carry at most the word
/// of their first arc.
fn factor(l: &Lattice) -> (Lattice, Vec<Vec<i32>>) {
    let mut out = Lattice::new();
    let mut seqs: Vec<Vec<i32>> = vec![Vec::new()];
    if l.start < 0 {
        return (out, seqs);
    }
    let (order, _, _) = dfs(l, false);
    let props = state_properties(l);
    let remove: Vec<bool> = props
        .iter()
        .map(|&p| p == ARCS_IN | ARCS_OUT || p == ARCS_IN | ARCS_OUT | ILABELS_OUT)
        .collect();
    let mut mapping = vec![-1i32; l.states.len()];
    let mut ids: HashMap<Vec<i32>, i32> = HashMap::new();
    ids.insert(Vec::new(), 0);
    let map_state = |out: &mut Lattice, s: usize, mapping: &mut Vec<i32>| {
        if mapping[s] == -1 {
            mapping[s] = out.add_state();
        }
        mapping[s]
    };
    for &s in &order {
        if remove[s] {
            continue;
        }
        let new_s = map_state(&mut out, s, &mut mapping);
        for a in &l.states[s].arcs {
            let mut arc = a.clone();
            let mut sym: Vec<i32> = if arc.ilabel == 0 {
                Vec::new()
            } else {
                vec![arc.ilabel]
            };
            while remove[arc.nextstate as usize] {
                let next = &l.states[arc.nextstate as usize].arcs[0];
                arc.weight = times(arc.weight, next.weight);
                if next.olabel != 0 {
                    arc.olabel = next.olabel;
                }
                if next.ilabel != 0 {
                    sym.push(next.ilabel);
                }
                arc.nextstate = next.nextstate;
            }
            arc.nextstate = map_state(&mut out, arc.nextstate as usize, &mut mapping);
            let n = ids.len() as i32;
            arc.ilabel = *ids.entry(sym.clone()).or_insert_with(|| {
                seqs.push(sym);
                n
            });
            out.add_arc(new_s, arc);
        }
        let fw = l.states[s].final_weight;
        if fw != LatticeWeight::zero() {
            out.set_final(new_s, fw);
        }
    }
    let start = mapping[l.start as usize];
    out.set_start(start);
    (out, seqs)
}

impl Lattice {
    /// Kaldi `ConvertLattice(Lattice → CompactLattice)` (invert = true: the
    /// input labels, transition-ids, become the strings; words the labels).
    /// As in Kaldi, a factored lattice with a cycle is left in its order.
    pub fn to_compact(&self) -> CompactLattice {
        let (mut f, seqs) = factor(self);
        // Kaldi ignores TopSort's result (false: a cycle, order unchanged).
        let _ = f.top_sort();
        let mut out = CompactLattice::new();
        for _ in 0..f.states.len() {
            out.add_state();
        }
        out.set_start(f.start);
        for (s, st) in f.states.iter().enumerate() {
            let s = s as i32;
            if st.final_weight != LatticeWeight::zero() {
                out.set_final(s, CompactLatticeWeight::new(st.final_weight, Vec::new()));
            }
            for a in &st.arcs {
                out.add_arc(
                    s,
                    Arc {
                        ilabel: a.olabel,
                        olabel: a.olabel,
                        weight: CompactLatticeWeight::new(
                            a.weight,
                            seqs[a.ilabel as usize].clone(),
                        ),
                        nextstate: a.nextstate,
                    },
                );
            }
        }
        out
    }
}
