//! Round trips (binary exact, text stable), conversion, sorting and bad input.

use proptest::prelude::*;

use super::*;
use crate::kaldi::table::SequentialTableReader;

fn to_bytes<H: Holder>(h: &H, binary: bool) -> Vec<u8> {
    let mut v = Vec::new();
    h.write_holder(&mut v, binary).unwrap();
    v
}

fn from_bytes<H: Holder>(b: &[u8]) -> Result<H> {
    let mut r = Reader::new(b, false);
    H::read_holder(&mut r)
}

/// A small top-sorted compact lattice: 0 -(5)-> 1 -(7)-> 2, final 2.
fn small_clat() -> CompactLattice {
    let mut c = CompactLattice::new();
    for _ in 0..3 {
        c.add_state();
    }
    c.set_start(0);
    let w = |g, a, s: Vec<i32>| CompactLatticeWeight::new(LatticeWeight::new(g, a), s);
    c.add_arc(
        0,
        Arc {
            ilabel: 5,
            olabel: 5,
            weight: w(1.5, 20.25, vec![2, 1, 1]),
            nextstate: 1,
        },
    );
    c.add_arc(
        1,
        Arc {
            ilabel: 7,
            olabel: 7,
            weight: w(0.5, 10.0, vec![4, 3]),
            nextstate: 2,
        },
    );
    c.set_final(2, w(2.0, 0.0, vec![6]));
    c
}

fn arb_clat() -> impl Strategy<Value = CompactLattice> {
    (1usize..6).prop_flat_map(|n| {
        let arc = (
            0..n,
            0..n,
            0i32..50,
            -10f32..1e4,
            -10f32..1e4,
            proptest::collection::vec(1i32..500, 0..6),
        );
        let fin = proptest::option::of((
            -5f32..50.0,
            -5f32..50.0,
            proptest::collection::vec(1i32..500, 0..3),
        ));
        (
            Just(n),
            proptest::collection::vec(arc, 0..10),
            proptest::collection::vec(fin, n),
        )
            .prop_map(|(n, arcs, finals)| {
                let mut c = CompactLattice::new();
                for _ in 0..n {
                    c.add_state();
                }
                c.set_start(0);
                for (s, d, l, g, a, str_) in arcs {
                    let w = CompactLatticeWeight::new(LatticeWeight::new(g, a), str_);
                    if w != CompactLatticeWeight::zero() {
                        c.add_arc(
                            s as i32,
                            Arc {
                                ilabel: l,
                                olabel: l,
                                weight: w,
                                nextstate: d as i32,
                            },
                        );
                    }
                }
                for (s, f) in finals.into_iter().enumerate() {
                    if let Some((g, a, str_)) = f {
                        c.set_final(
                            s as i32,
                            CompactLatticeWeight::new(LatticeWeight::new(g, a), str_),
                        );
                    }
                }
                c
            })
    })
}

proptest! {
    #[test]
    fn compact_binary_round_trip_is_exact(c in arb_clat()) {
        let b = to_bytes(&c, true);
        let back: CompactLattice = from_bytes(&b).unwrap();
        prop_assert_eq!(&back, &c);
        prop_assert_eq!(to_bytes(&back, true), b);
    }

    #[test]
    fn compact_text_is_stable(c in arb_clat()) {
        // Text keeps 6 digits: the first write rounds, re-writing is stable.
        let t = to_bytes(&c, false);
        let back: CompactLattice = from_bytes(&t).unwrap();
        prop_assert_eq!(to_bytes(&back, false), t.clone());
        prop_assert_eq!(back.num_arcs(), c.num_arcs());
        // Through the non-compact form and back to text of a Lattice.
        let l = c.to_lattice();
        let lt = to_bytes(&l, false);
        let lback: Lattice = from_bytes(&lt).unwrap();
        prop_assert_eq!(to_bytes(&lback, false), lt);
    }

    #[test]
    fn lattice_binary_round_trip_is_exact(c in arb_clat()) {
        let l = c.to_lattice();
        let b = to_bytes(&l, true);
        let back: Lattice = from_bytes(&b).unwrap();
        prop_assert_eq!(&back, &l);
        prop_assert_eq!(to_bytes(&back, true), b);
    }

    #[test]
    fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = from_bytes::<CompactLattice>(&data);
        let _ = from_bytes::<Lattice>(&data);
        let mut b = to_bytes(&small_clat(), true);
        let n = data.len().min(b.len());
        for (i, x) in data.iter().take(n).enumerate() {
            let at = (i * 7) % b.len();
            b[at] ^= *x;
        }
        let _ = from_bytes::<CompactLattice>(&b);
        let _ = from_bytes::<Lattice>(&b);
        let _ = detect_lattice(&data);
    }
}

#[test]
fn text_form_and_conversion() {
    let c = small_clat();
    let t = String::from_utf8(to_bytes(&c, false)).unwrap();
    assert_eq!(
        t,
        "\n0\t1\t5\t1.5,20.25,2_1_1\n1\t2\t7\t0.5,10,4_3\n2\t2,0,6\n\n"
    );
    let l = c.to_lattice();
    let lt = String::from_utf8(to_bytes(&l, false)).unwrap();
    // Kaldi's ConvertLattice: chains of new states, word on the first arc.
    assert_eq!(
        lt,
        "\n0\t3\t2\t5\t1.5,20.25\n1\t5\t4\t7\t0.5,10\n2\t6\t6\t0\t2,0\n3\t4\t1\t0\n4\t1\t1\t0\n5\t2\t3\t0\n6\n\n"
    );
    // A compact text read as a Lattice is converted the same way.
    let l2: Lattice = from_bytes(t.as_bytes()).unwrap();
    assert_eq!(l2, l);
    assert_eq!(detect_lattice(t.as_bytes()), Some(LatticeKind::Compact));
    assert_eq!(detect_lattice(lt.as_bytes()), Some(LatticeKind::Lattice));
    assert_eq!(
        detect_lattice(&to_bytes(&l, true)),
        Some(LatticeKind::Lattice)
    );
    assert_eq!(
        detect_lattice(&to_bytes(&c, true)),
        Some(LatticeKind::Compact)
    );
    // Alignments in text (space-separated, no tabs) are not lattices.
    assert_eq!(detect_lattice(b"\nutt2 1 2 3\n"), None);
    assert_eq!(detect_lattice(b"1 2 3\n"), None);
}

#[test]
fn empty_and_non_final_states_print_as_openfst_does() {
    let mut c = CompactLattice::new();
    c.add_state();
    c.add_state();
    c.set_start(1);
    c.add_arc(
        1,
        Arc {
            ilabel: 3,
            olabel: 3,
            weight: CompactLatticeWeight::one(),
            nextstate: 0,
        },
    );
    // Start state first; a state with no arcs and no final weight prints the zero weight.
    assert_eq!(
        String::from_utf8(to_bytes(&c, false)).unwrap(),
        "\n1\t0\t3\n0\tInfinity,Infinity,\n\n"
    );
    assert_eq!(
        String::from_utf8(to_bytes(&CompactLattice::new(), false)).unwrap(),
        "\n\n"
    );
    let back: CompactLattice = from_bytes(b"\n\n").unwrap();
    assert_eq!(back.num_states(), 0);
}

#[test]
fn top_sort_renumbers_as_openfst() {
    // 0 -> 2 -> 1 (final): DFS finish order 1, 2, 0 → new ids 0→0, 2→1, 1→2.
    let mut c = CompactLattice::new();
    for _ in 0..3 {
        c.add_state();
    }
    c.set_start(0);
    let w = CompactLatticeWeight::new(LatticeWeight::new(1.0, 2.0), vec![1]);
    c.add_arc(
        0,
        Arc {
            ilabel: 1,
            olabel: 1,
            weight: w.clone(),
            nextstate: 2,
        },
    );
    c.add_arc(
        2,
        Arc {
            ilabel: 2,
            olabel: 2,
            weight: w.clone(),
            nextstate: 1,
        },
    );
    c.set_final(1, CompactLatticeWeight::one());
    assert!(!c.is_top_sorted());
    assert!(c.top_sort());
    assert!(c.is_top_sorted());
    assert_eq!(c.states[0].arcs[0].nextstate, 1);
    assert_eq!(c.states[1].arcs[0].ilabel, 2);
    assert_eq!(c.states[2].final_weight, CompactLatticeWeight::one());
    // A cycle cannot be sorted.
    c.add_arc(
        2,
        Arc {
            ilabel: 3,
            olabel: 3,
            weight: w,
            nextstate: 0,
        },
    );
    assert!(!c.top_sort());
}

fn err_of<H: Holder + std::fmt::Debug>(b: &[u8]) -> String {
    from_bytes::<H>(b).unwrap_err().to_string()
}

#[test]
fn bad_binary_input_names_the_byte() {
    let good = to_bytes(&small_clat(), true);
    // Truncated in the middle of the arcs.
    let e = err_of::<CompactLattice>(&good[..good.len() - 10]);
    assert!(e.contains("at byte"), "{e}");
    // Wrong fst type.
    let mut b = good.clone();
    b[8..14].copy_from_slice(b"const ");
    let e = err_of::<CompactLattice>(&b);
    assert!(
        e.contains("unsupported FST type 'const '") && e.contains("at byte 0"),
        "{e}"
    );
    // Wrong arc type.
    let mut b = good.clone();
    b[18..21].copy_from_slice(b"std");
    let e = err_of::<CompactLattice>(&b);
    assert!(e.contains("arc type 'stdpactlattice44'"), "{e}");
    // An arc to a state that does not exist: first arc's nextstate.
    let hdr = 4 + 4 + 6 + 4 + 16 + 4 + 4 + 8 + 24;
    let arc0 = hdr + 12 + 8; // state 0: final weight (zero, empty string), arc count
    let next_at = arc0 + 8 + 12 + 3 * 4;
    let mut b = good.clone();
    b[next_at..next_at + 4].copy_from_slice(&9i32.to_le_bytes());
    let e = err_of::<CompactLattice>(&b);
    assert!(
        e.contains(&format!("at byte {arc0}")) && e.contains("next state 9 of 3"),
        "{e}"
    );
    // Not an FST at all.
    let e = err_of::<CompactLattice>(b"\0B[ 1 2 ]");
    assert!(e.contains("does not appear to be an FST"), "{e}");
    // A non-compact lattice read as compact is converted (Kaldi's
    // ConvertLattice). The final weight's string [6] of state 2 joins the arc
    // into it, as in Kaldi: state 2 has one arc in and one out once converted.
    let c: CompactLattice = from_bytes(&to_bytes(&small_clat().to_lattice(), true)).unwrap();
    assert_eq!(c.num_states(), 3);
    assert_eq!(c.states[1].arcs[0].weight.string, vec![4, 3, 6]);
    assert_eq!(
        c.states[1].arcs[0].weight.weight,
        LatticeWeight::new(2.5, 10.0)
    );
    assert_eq!(c.states[2].final_weight, CompactLatticeWeight::one());
}

#[test]
fn bad_text_input_names_the_line() {
    let e = err_of::<CompactLattice>(b"\n0\t1\t5\t1,2,3\n1\tx\n\n");
    assert!(
        e.contains("bad line in lattice text format: '1\tx'") && e.contains("at byte 13"),
        "{e}"
    );
    let e = err_of::<Lattice>(b"\n0\t1\t2\t3\t4\t5\t6\n\n");
    assert!(e.contains("bad line"), "{e}");
    let e = err_of::<Lattice>(b"  x\n");
    assert!(e.contains("spaces but no newline"), "{e}");
}

#[test]
fn archive_errors_name_file_key_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("l.ark");
    let mut ark = b"utt1 ".to_vec();
    ark.extend(to_bytes(&small_clat(), true));
    let second = ark.len();
    ark.extend(b"utt2 ");
    let good = to_bytes(&small_clat(), true);
    ark.extend(&good[..good.len() - 5]);
    std::fs::write(&p, &ark).unwrap();
    let mut r =
        SequentialTableReader::<CompactLattice>::open(&format!("ark:{}", p.display())).unwrap();
    assert!(r.next_entry().unwrap().is_some());
    let e = r.next_entry().unwrap_err().to_string();
    assert!(
        e.contains("l.ark") && e.contains("'utt2'") && e.contains("at byte"),
        "{e}"
    );
    let at: u64 = e
        .split("at byte ")
        .nth(1)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(at as usize > second, "{e}");
}

/// Header field offsets of a compactlattice44 FST.
const VERSION_AT: usize = 4 + 4 + 6 + 4 + 16;
const FLAGS_AT: usize = VERSION_AT + 4;
const NSTATES_AT: usize = FLAGS_AT + 4 + 8 + 8;

#[test]
fn bad_headers_are_refused() {
    let good = to_bytes(&small_clat(), true);
    let with = |at: usize, bytes: &[u8]| {
        let mut b = good.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        err_of::<CompactLattice>(&b)
    };
    let e = with(FLAGS_AT, &1i32.to_le_bytes());
    assert!(e.contains("unsupported") && e.contains("flags 1"), "{e}");
    let e = with(VERSION_AT, &1i32.to_le_bytes());
    assert!(e.contains("file version 1"), "{e}");
    let e = with(NSTATES_AT, &(-5i64).to_le_bytes());
    assert!(e.contains("-5 states"), "{e}");
    let e = with(NSTATES_AT, &(1i64 << 40).to_le_bytes());
    assert!(e.contains("truncated FST"), "{e}");
    let e = with(4, &(-3i32).to_le_bytes());
    assert!(e.contains("fst type has length -3"), "{e}");
    let e = with(NSTATES_AT - 8, &7i64.to_le_bytes());
    assert!(e.contains("start state 7 of 3"), "{e}");
    let e = err_of::<CompactLattice>(b"");
    assert!(e.contains("end of data reading compact lattice"), "{e}");
    let e = err_of::<Lattice>(&good[..3]);
    assert!(e.contains("at byte 0"), "{e}");
}

#[test]
fn double_precision_lattices_are_read() {
    // The same lattice as compactlattice84: costs as f64.
    let c = small_clat();
    let mut b = Vec::new();
    b.extend_from_slice(&FST_MAGIC.to_le_bytes());
    for s in ["vector", "compactlattice84"] {
        b.extend_from_slice(&(s.len() as i32).to_le_bytes());
        b.extend_from_slice(s.as_bytes());
    }
    b.extend_from_slice(&2i32.to_le_bytes());
    b.extend_from_slice(&0i32.to_le_bytes());
    b.extend_from_slice(&c.properties.to_le_bytes());
    b.extend_from_slice(&0i64.to_le_bytes());
    b.extend_from_slice(&3i64.to_le_bytes());
    b.extend_from_slice(&0i64.to_le_bytes());
    let put = |b: &mut Vec<u8>, w: &CompactLatticeWeight| {
        b.extend_from_slice(&(w.weight.graph as f64).to_le_bytes());
        b.extend_from_slice(&(w.weight.acoustic as f64).to_le_bytes());
        b.extend_from_slice(&(w.string.len() as i32).to_le_bytes());
        for t in &w.string {
            b.extend_from_slice(&t.to_le_bytes());
        }
    };
    for st in &c.states {
        put(&mut b, &st.final_weight);
        b.extend_from_slice(&(st.arcs.len() as i64).to_le_bytes());
        for a in &st.arcs {
            b.extend_from_slice(&a.ilabel.to_le_bytes());
            b.extend_from_slice(&a.olabel.to_le_bytes());
            put(&mut b, &a.weight);
            b.extend_from_slice(&a.nextstate.to_le_bytes());
        }
    }
    let back: CompactLattice = from_bytes(&b).unwrap();
    assert_eq!(back, c);
    // Written back in Kaldi's float form.
    assert_eq!(to_bytes(&back, true), to_bytes(&c, true));
    let l: Lattice = from_bytes(&b).unwrap();
    assert_eq!(l, c.to_lattice());
}
