//! OpenFst's stored FST properties (`fst/properties.h`), as far as Kaldi's
//! lattice tools change them: the 64-bit word written in every binary FST
//! header. A binary lattice written back must carry the same word Kaldi would
//! write, so the mutations Kaldi performs (adding states and arcs, replacing
//! arc weights, setting final weights) update it by OpenFst's rules here.

#![allow(missing_docs)]

pub const EXPANDED: u64 = 1 << 0;
pub const MUTABLE: u64 = 1 << 1;
pub const ERROR: u64 = 1 << 2;
pub const ACCEPTOR: u64 = 1 << 16;
pub const NOT_ACCEPTOR: u64 = 1 << 17;
pub const I_DETERMINISTIC: u64 = 1 << 18;
pub const NON_I_DETERMINISTIC: u64 = 1 << 19;
pub const O_DETERMINISTIC: u64 = 1 << 20;
pub const NON_O_DETERMINISTIC: u64 = 1 << 21;
pub const EPSILONS: u64 = 1 << 22;
pub const NO_EPSILONS: u64 = 1 << 23;
pub const I_EPSILONS: u64 = 1 << 24;
pub const NO_I_EPSILONS: u64 = 1 << 25;
pub const O_EPSILONS: u64 = 1 << 26;
pub const NO_O_EPSILONS: u64 = 1 << 27;
pub const I_LABEL_SORTED: u64 = 1 << 28;
pub const NOT_I_LABEL_SORTED: u64 = 1 << 29;
pub const O_LABEL_SORTED: u64 = 1 << 30;
pub const NOT_O_LABEL_SORTED: u64 = 1 << 31;
pub const WEIGHTED: u64 = 1 << 32;
pub const UNWEIGHTED: u64 = 1 << 33;
pub const CYCLIC: u64 = 1 << 34;
pub const ACYCLIC: u64 = 1 << 35;
pub const INITIAL_CYCLIC: u64 = 1 << 36;
pub const INITIAL_ACYCLIC: u64 = 1 << 37;
pub const TOP_SORTED: u64 = 1 << 38;
pub const NOT_TOP_SORTED: u64 = 1 << 39;
pub const ACCESSIBLE: u64 = 1 << 40;
pub const NOT_ACCESSIBLE: u64 = 1 << 41;
pub const CO_ACCESSIBLE: u64 = 1 << 42;
pub const NOT_CO_ACCESSIBLE: u64 = 1 << 43;
pub const STRING: u64 = 1 << 44;
pub const NOT_STRING: u64 = 1 << 45;
pub const WEIGHTED_CYCLES: u64 = 1 << 46;
pub const UNWEIGHTED_CYCLES: u64 = 1 << 47;

/// `kStaticProperties` of a VectorFst.
pub const STATIC: u64 = EXPANDED | MUTABLE;
/// `kBinaryProperties`.
pub const BINARY: u64 = 0x7;
/// `kTrinaryProperties`.
pub const TRINARY: u64 = 0x0000_ffff_ffff_0000;
/// `kCopyProperties`: what `VectorFst::Write` keeps of the stored word.
pub const COPY: u64 = ERROR | TRINARY;

/// `kNullProperties`: a new, empty FST.
pub const NULL: u64 = ACCEPTOR
    | I_DETERMINISTIC
    | O_DETERMINISTIC
    | NO_EPSILONS
    | NO_I_EPSILONS
    | NO_O_EPSILONS
    | I_LABEL_SORTED
    | O_LABEL_SORTED
    | UNWEIGHTED
    | ACYCLIC
    | INITIAL_ACYCLIC
    | TOP_SORTED
    | ACCESSIBLE
    | CO_ACCESSIBLE
    | STRING
    | UNWEIGHTED_CYCLES;

/// `kSetStartProperties`.
const SET_START: u64 = EXPANDED
    | MUTABLE
    | ERROR
    | ACCEPTOR
    | NOT_ACCEPTOR
    | I_DETERMINISTIC
    | NON_I_DETERMINISTIC
    | O_DETERMINISTIC
    | NON_O_DETERMINISTIC
    | EPSILONS
    | NO_EPSILONS
    | I_EPSILONS
    | NO_I_EPSILONS
    | O_EPSILONS
    | NO_O_EPSILONS
    | I_LABEL_SORTED
    | NOT_I_LABEL_SORTED
    | O_LABEL_SORTED
    | NOT_O_LABEL_SORTED
    | WEIGHTED
    | UNWEIGHTED
    | CYCLIC
    | ACYCLIC
    | TOP_SORTED
    | NOT_TOP_SORTED
    | CO_ACCESSIBLE
    | NOT_CO_ACCESSIBLE
    | WEIGHTED_CYCLES
    | UNWEIGHTED_CYCLES;

/// `kSetFinalProperties`.
const SET_FINAL: u64 = EXPANDED
    | MUTABLE
    | ERROR
    | ACCEPTOR
    | NOT_ACCEPTOR
    | I_DETERMINISTIC
    | NON_I_DETERMINISTIC
    | O_DETERMINISTIC
    | NON_O_DETERMINISTIC
    | EPSILONS
    | NO_EPSILONS
    | I_EPSILONS
    | NO_I_EPSILONS
    | O_EPSILONS
    | NO_O_EPSILONS
    | I_LABEL_SORTED
    | NOT_I_LABEL_SORTED
    | O_LABEL_SORTED
    | NOT_O_LABEL_SORTED
    | CYCLIC
    | ACYCLIC
    | INITIAL_CYCLIC
    | INITIAL_ACYCLIC
    | TOP_SORTED
    | NOT_TOP_SORTED
    | ACCESSIBLE
    | NOT_ACCESSIBLE
    | WEIGHTED_CYCLES
    | UNWEIGHTED_CYCLES;

/// `kAddStateProperties`.
const ADD_STATE: u64 = EXPANDED
    | MUTABLE
    | ERROR
    | ACCEPTOR
    | NOT_ACCEPTOR
    | I_DETERMINISTIC
    | NON_I_DETERMINISTIC
    | O_DETERMINISTIC
    | NON_O_DETERMINISTIC
    | EPSILONS
    | NO_EPSILONS
    | I_EPSILONS
    | NO_I_EPSILONS
    | O_EPSILONS
    | NO_O_EPSILONS
    | I_LABEL_SORTED
    | NOT_I_LABEL_SORTED
    | O_LABEL_SORTED
    | NOT_O_LABEL_SORTED
    | WEIGHTED
    | UNWEIGHTED
    | CYCLIC
    | ACYCLIC
    | INITIAL_CYCLIC
    | INITIAL_ACYCLIC
    | TOP_SORTED
    | NOT_TOP_SORTED
    | NOT_ACCESSIBLE
    | NOT_CO_ACCESSIBLE
    | NOT_STRING
    | WEIGHTED_CYCLES
    | UNWEIGHTED_CYCLES;

/// `kAddArcProperties`.
const ADD_ARC: u64 = EXPANDED
    | MUTABLE
    | ERROR
    | NOT_ACCEPTOR
    | NON_I_DETERMINISTIC
    | NON_O_DETERMINISTIC
    | EPSILONS
    | I_EPSILONS
    | O_EPSILONS
    | NOT_I_LABEL_SORTED
    | NOT_O_LABEL_SORTED
    | WEIGHTED
    | CYCLIC
    | INITIAL_CYCLIC
    | NOT_TOP_SORTED
    | ACCESSIBLE
    | CO_ACCESSIBLE
    | WEIGHTED_CYCLES;

/// `kStateSortProperties`: what renumbering the states keeps.
pub const STATE_SORT: u64 =
    ADD_STATE & !(NOT_STRING | NOT_TOP_SORTED | TOP_SORTED) | ACCESSIBLE | CO_ACCESSIBLE;

/// `kSetArcProperties`.
const SET_ARC: u64 = EXPANDED | MUTABLE | ERROR;

/// The labels and weight class of an arc, which is all the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct ArcInfo {
    pub ilabel: i32,
    pub olabel: i32,
    pub nextstate: i32,
    /// Weight neither zero nor one.
    pub weighted: bool,
}

/// The word a new VectorFst starts with.
pub fn new_fst() -> u64 {
    NULL | STATIC
}

/// `AddStateProperties`.
pub fn add_state(p: u64) -> u64 {
    p & ADD_STATE
}

/// `SetStartProperties`.
pub fn set_start(p: u64) -> u64 {
    let mut out = p & SET_START;
    if p & ACYCLIC != 0 {
        out |= INITIAL_ACYCLIC;
    }
    out
}

/// `SetFinalProperties` (`old`/`new`: whether the weights are neither zero nor one).
pub fn set_final(p: u64, old_weighted: bool, new_weighted: bool) -> u64 {
    let mut out = p;
    if old_weighted {
        out &= !WEIGHTED;
    }
    if new_weighted {
        out |= WEIGHTED;
        out &= !UNWEIGHTED;
    }
    out & (SET_FINAL | WEIGHTED | UNWEIGHTED)
}

/// `AddArcProperties` for `arc` leaving state `s`, after `prev` (the state's
/// last arc before it, if any).
pub fn add_arc(p: u64, s: i32, arc: ArcInfo, prev: Option<ArcInfo>) -> u64 {
    let mut out = p;
    if arc.ilabel != arc.olabel {
        out |= NOT_ACCEPTOR;
        out &= !ACCEPTOR;
    }
    if arc.ilabel == 0 {
        out |= I_EPSILONS;
        out &= !NO_I_EPSILONS;
        if arc.olabel == 0 {
            out |= EPSILONS;
            out &= !NO_EPSILONS;
        }
    }
    if arc.olabel == 0 {
        out |= O_EPSILONS;
        out &= !NO_O_EPSILONS;
    }
    if let Some(prev) = prev {
        if prev.ilabel > arc.ilabel {
            out |= NOT_I_LABEL_SORTED;
            out &= !I_LABEL_SORTED;
        }
        if prev.olabel > arc.olabel {
            out |= NOT_O_LABEL_SORTED;
            out &= !O_LABEL_SORTED;
        }
    }
    if arc.weighted {
        out |= WEIGHTED;
        out &= !UNWEIGHTED;
    }
    if arc.nextstate <= s {
        out |= NOT_TOP_SORTED;
        out &= !TOP_SORTED;
    }
    out &= ADD_ARC
        | ACCEPTOR
        | NO_EPSILONS
        | NO_I_EPSILONS
        | NO_O_EPSILONS
        | I_LABEL_SORTED
        | O_LABEL_SORTED
        | UNWEIGHTED
        | TOP_SORTED;
    if out & TOP_SORTED != 0 {
        out |= ACYCLIC | INITIAL_ACYCLIC;
    }
    out
}

/// `MutableArcIterator::SetValue` replacing `old` by `new`.
pub fn set_arc(p: u64, old: ArcInfo, new: ArcInfo) -> u64 {
    let mut out = p;
    if old.ilabel != old.olabel {
        out &= !NOT_ACCEPTOR;
    }
    if old.ilabel == 0 {
        out &= !I_EPSILONS;
        if old.olabel == 0 {
            out &= !EPSILONS;
        }
    }
    if old.olabel == 0 {
        out &= !O_EPSILONS;
    }
    if old.weighted {
        out &= !WEIGHTED;
    }
    if new.ilabel != new.olabel {
        out |= NOT_ACCEPTOR;
        out &= !ACCEPTOR;
    }
    if new.ilabel == 0 {
        out |= I_EPSILONS;
        out &= !NO_I_EPSILONS;
        if new.olabel == 0 {
            out |= EPSILONS;
            out &= !NO_EPSILONS;
        }
    }
    if new.olabel == 0 {
        out |= O_EPSILONS;
        out &= !NO_O_EPSILONS;
    }
    if new.weighted {
        out |= WEIGHTED;
        out &= !UNWEIGHTED;
    }
    out & (SET_ARC
        | ACCEPTOR
        | NOT_ACCEPTOR
        | EPSILONS
        | NO_EPSILONS
        | I_EPSILONS
        | NO_I_EPSILONS
        | O_EPSILONS
        | NO_O_EPSILONS
        | WEIGHTED
        | UNWEIGHTED)
}

/// The (positive, negative) pairs of trinary properties.
const PAIRS: u64 = TRINARY;

/// OpenFst `KnownProperties`: the binary bits and both bits of every pair
/// one of whose bits is set.
pub fn known(p: u64) -> u64 {
    let pos = p & PAIRS & 0x5555_5555_5555_5555;
    let neg = p & PAIRS & 0xaaaa_aaaa_aaaa_aaaa;
    BINARY | (p & PAIRS) | (pos << 1) | (neg >> 1)
}

/// Store `computed` over `stored` for every pair it knows.
pub fn merge_known(stored: u64, computed: u64) -> u64 {
    let k = known(computed) & PAIRS;
    (stored & !k) | (computed & k)
}

/// OpenFst `ComputeProperties` for the properties a pass over states and
/// arcs finds (the mask of `Properties(kTopSorted, true)`): acceptor,
/// epsilons, label sortedness, weighted, top-sorted, string. Each state is
/// (is final, final weight neither zero nor one, its arcs).
pub fn compute_arc_properties(
    start: i32,
    states: impl Iterator<Item = (bool, bool, Vec<ArcInfo>)>,
) -> u64 {
    let mut p = ACCEPTOR
        | NO_EPSILONS
        | NO_I_EPSILONS
        | NO_O_EPSILONS
        | I_LABEL_SORTED
        | O_LABEL_SORTED
        | UNWEIGHTED
        | TOP_SORTED
        | STRING;
    let set = |p: &mut u64, yes: u64, no: u64| {
        *p |= yes;
        *p &= !no;
    };
    let mut nfinal = 0;
    for (s, (is_final, final_weighted, arcs)) in states.enumerate() {
        let s = s as i32;
        for (i, a) in arcs.iter().enumerate() {
            if a.ilabel != a.olabel {
                set(&mut p, NOT_ACCEPTOR, ACCEPTOR);
            }
            if a.ilabel == 0 && a.olabel == 0 {
                set(&mut p, EPSILONS, NO_EPSILONS);
            }
            if a.ilabel == 0 {
                set(&mut p, I_EPSILONS, NO_I_EPSILONS);
            }
            if a.olabel == 0 {
                set(&mut p, O_EPSILONS, NO_O_EPSILONS);
            }
            if i > 0 {
                if a.ilabel < arcs[i - 1].ilabel {
                    set(&mut p, NOT_I_LABEL_SORTED, I_LABEL_SORTED);
                }
                if a.olabel < arcs[i - 1].olabel {
                    set(&mut p, NOT_O_LABEL_SORTED, O_LABEL_SORTED);
                }
            }
            if a.weighted {
                set(&mut p, WEIGHTED, UNWEIGHTED);
            }
            if a.nextstate <= s {
                set(&mut p, NOT_TOP_SORTED, TOP_SORTED);
            }
            if a.nextstate != s + 1 {
                set(&mut p, NOT_STRING, STRING);
            }
        }
        if nfinal > 0 {
            set(&mut p, NOT_STRING, STRING);
        }
        if is_final {
            if final_weighted {
                set(&mut p, WEIGHTED, UNWEIGHTED);
            }
            nfinal += 1;
        } else if arcs.len() != 1 {
            set(&mut p, NOT_STRING, STRING);
        }
    }
    if start != -1 && start != 0 {
        set(&mut p, NOT_STRING, STRING);
    }
    p
}

/// What `VectorFst::Write` puts in the header for a stored word `p`.
pub fn for_write(p: u64) -> u64 {
    (p & COPY) | STATIC
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_words_decode_as_expected() {
        // lat.ark (CompactLattice after determinization and scaling).
        assert_eq!(
            0x1_0a81_0003u64,
            STATIC | ACCEPTOR | NO_EPSILONS | NO_I_EPSILONS | NO_O_EPSILONS | WEIGHTED
        );
        // lat_raw_first3.ark (raw Lattice).
        assert_eq!(
            0x1_0542_0003u64,
            STATIC | NOT_ACCEPTOR | EPSILONS | I_EPSILONS | O_EPSILONS | WEIGHTED
        );
    }

    #[test]
    fn set_arc_keeps_only_arc_properties() {
        let a = ArcInfo {
            ilabel: 3,
            olabel: 3,
            nextstate: 1,
            weighted: true,
        };
        let p = STATIC | ACCEPTOR | NO_EPSILONS | WEIGHTED | TOP_SORTED | ACYCLIC;
        assert_eq!(set_arc(p, a, a), STATIC | ACCEPTOR | NO_EPSILONS | WEIGHTED);
    }
}
