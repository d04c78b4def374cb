//! OpenFst graphs as Kaldi stores them in tables (`fstext/kaldi-fst-io`,
//! `VectorFstHolder`): [`StdVectorFst`], a `VectorFst<StdArc>` (int32
//! labels, a float tropical cost per arc and final state) — the training
//! graphs of `compile-train-graphs` (`ark:graphs.fsts.ark`, `fsts.JOB.gz`).
//!
//! - Binary: OpenFst's `VectorFst` file (header with magic, fst type
//!   `vector`, arc type `standard`, version 2, flags, properties, start,
//!   counts; then per state its final cost, arc count and arcs), written back
//!   byte for byte (the stored properties word is kept; see
//!   [`super::lattice`] for the shared `VectorFst` code).
//! - Text: a newline, the OpenFst printer's lines (`src\tdst\tilabel\tolabel
//!   [\tcost]`, finals `state[\tcost]`, start state first), an empty line —
//!   Kaldi's `ReadFstKaldi`/`WriteFstKaldi` text form.
//!
//! Other arc types (`log`, `tropical64`, lattices) are refused with the type
//! named, as Kaldi's holder refuses them; so is a `const` FST in a table.

use std::io::{self, Write};

use super::holder::Holder;
use super::io::Reader;
use super::lattice::text::{fields, grow, int};
pub use super::lattice::TropicalWeight;
use super::lattice::{holder_form, read_states, write_fst, Arc, Form, Fst, FstHeader, FstWeight};
use crate::error::Result;

/// OpenFst `VectorFst<StdArc>`.
pub type StdVectorFst = Fst<TropicalWeight>;

impl Holder for StdVectorFst {
    fn read_holder(r: &mut Reader<'_>) -> Result<Self> {
        match holder_form(r, "FST")? {
            Form::Text => read_text(r),
            Form::Binary => read_binary_std(r),
        }
    }

    fn write_holder<W: Write + ?Sized>(&self, w: &mut W, binary: bool) -> io::Result<()> {
        write_fst(self, w, binary)
    }
}

/// The binary form at the reader's position (at the magic number); only the
/// `standard` arc type.
pub fn read_binary_std(r: &mut Reader<'_>) -> Result<StdVectorFst> {
    let at = r.pos();
    let hdr = FstHeader::read(r)?;
    if hdr.arc_type != TropicalWeight::ARC_TYPE {
        return Err(r.error_at(
            at,
            format!(
                "FST with arc type '{}' cannot be read as a VectorFst<StdArc> (expected 'standard')",
                hdr.arc_type
            ),
        ));
    }
    read_states::<TropicalWeight>(r, &hdr, false)
}

/// One printer line into `f`; false when it does not fit the format.
fn std_line(f: &mut StdVectorFst, s: i32, col: &[&str]) -> bool {
    let mut d = s;
    let ok = match col.len() {
        1 => {
            f.set_final(s, TropicalWeight::one());
            true
        }
        2 => match TropicalWeight::parse_text(col[1]) {
            Some(w) => {
                f.set_final(s, w);
                true
            }
            None => false,
        },
        4 | 5 => {
            let w = if col.len() == 5 {
                TropicalWeight::parse_text(col[4])
            } else {
                Some(TropicalWeight::one())
            };
            match (int(col[1]), int(col[2]), int(col[3]), w) {
                (Some(n), Some(i), Some(o), Some(weight)) if n >= 0 => {
                    d = n;
                    let arc = Arc {
                        ilabel: i,
                        olabel: o,
                        weight,
                        nextstate: n,
                    };
                    f.add_arc(s, arc);
                    true
                }
                _ => false,
            }
        }
        _ => false,
    };
    if ok {
        grow(f, d);
    }
    ok
}

/// Kaldi's `ReadFstKaldi` text form: lines (reader just after the newline
/// that follows the key) up to and including the empty line that ends the FST.
pub fn read_text(r: &mut Reader<'_>) -> Result<StdVectorFst> {
    let mut f = StdVectorFst::new();
    let mut first = true;
    loop {
        let rest = r.remaining();
        if rest.is_empty() {
            return Err(r.error("end of data inside a text FST (no empty line after it)"));
        }
        let line_at = r.pos();
        let (line, used) = match rest.iter().position(|&c| c == b'\n') {
            Some(i) => (&rest[..i], i + 1),
            None => (rest, rest.len()),
        };
        r.set_pos(line_at + used);
        let col = fields(line);
        if col.is_empty() {
            return Ok(f);
        }
        let bad = || {
            r.error_at(
                line_at,
                format!(
                    "bad line in FST text format: '{}'",
                    String::from_utf8_lossy(&line[..line.len().min(80)])
                ),
            )
        };
        let s = match int(col[0]) {
            Some(s) if col.len() <= 5 && s >= 0 => s,
            _ => return Err(bad()),
        };
        grow(&mut f, s);
        if first {
            f.set_start(s);
            first = false;
        }
        if !std_line(&mut f, s, &col) {
            return Err(bad());
        }
    }
}

/// Is `buf` (a table entry from after its key) an FST with `StdArc`s:
/// binary with arc type `standard`, or text that reads as one (the caller
/// asks after the lattice forms, which win when both readings succeed).
pub fn detect_std_fst(buf: &[u8]) -> bool {
    if buf.len() >= 4
        && u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) == super::lattice::FST_MAGIC
    {
        let mut r = Reader::new(buf, true);
        return FstHeader::read(&mut r).is_ok_and(|h| h.arc_type == TropicalWeight::ARC_TYPE);
    }
    let Some(nl) = buf.iter().position(|&c| c == b'\n') else {
        return false;
    };
    if !buf[..nl].iter().all(|&c| matches!(c, b' ' | b'\t' | b'\r')) {
        return false;
    }
    let body = &buf[nl + 1..];
    let first_line = body.split(|&c| c == b'\n').next().unwrap_or(&[]);
    let cols = fields(first_line);
    if cols.is_empty() || (cols.len() > 1 && !first_line.contains(&b'\t')) {
        return false;
    }
    read_text(&mut Reader::new(body, false)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kaldi::table::SequentialTableReader;

    const GRAPHS: &str = "../testdata/kaldi/ali/graphs.fsts.ark";

    fn to_bytes(f: &StdVectorFst, binary: bool) -> Vec<u8> {
        let mut v = Vec::new();
        f.write_holder(&mut v, binary).unwrap();
        v
    }

    #[test]
    fn fixture_graphs_round_trip_byte_for_byte() {
        let raw = std::fs::read(GRAPHS).unwrap();
        let mut reader =
            SequentialTableReader::<StdVectorFst>::open(&format!("ark:{GRAPHS}")).unwrap();
        let mut out = Vec::new();
        let mut n = 0;
        while let Some((key, f)) = reader.next_entry().unwrap() {
            assert!(f.num_states() > 0 && f.start == 0, "{key}");
            out.extend_from_slice(key.as_bytes());
            out.push(b' ');
            out.extend_from_slice(&to_bytes(&f, true));
            n += 1;
        }
        assert_eq!(n, 40);
        assert_eq!(out, raw);
    }

    #[test]
    fn text_round_trip_keeps_the_graph() {
        let mut reader =
            SequentialTableReader::<StdVectorFst>::open(&format!("ark:{GRAPHS}")).unwrap();
        let (_, f) = reader.next_entry().unwrap().unwrap();
        let text = to_bytes(&f, false);
        let s = String::from_utf8(text.clone()).unwrap();
        assert!(s.starts_with("\n0\t"), "{}", &s[..40]);
        assert!(s.contains("\t0.693359\n"), "costs print with 6 digits");
        let mut r = Reader::new(&text, false);
        let back = StdVectorFst::read_holder(&mut r).unwrap();
        assert_eq!(back.states.len(), f.states.len());
        for (a, b) in back.states.iter().zip(&f.states) {
            assert_eq!(a.arcs.len(), b.arcs.len());
            for (x, y) in a.arcs.iter().zip(&b.arcs) {
                assert_eq!(
                    (x.ilabel, x.olabel, x.nextstate),
                    (y.ilabel, y.olabel, y.nextstate)
                );
                assert!((x.weight.0 - y.weight.0).abs() <= 1e-6 * y.weight.0.abs().max(1.0));
            }
            assert_eq!(
                a.final_weight == TropicalWeight::zero(),
                b.final_weight == TropicalWeight::zero()
            );
        }
        assert!(r.remaining().is_empty());
        assert!(detect_std_fst(&text));
    }

    #[test]
    fn other_arc_types_and_bad_text_are_refused() {
        let mut f = StdVectorFst::new();
        f.add_state();
        f.set_start(0);
        f.set_final(0, TropicalWeight(1.5));
        let mut b = to_bytes(&f, true);
        // "standard" → "standarX": an unknown arc type.
        let at = b.windows(8).position(|w| w == b"standard").unwrap();
        b[at + 7] = b'X';
        let e = StdVectorFst::read_holder(&mut Reader::new(&b, true)).unwrap_err();
        assert!(e.to_string().contains("arc type 'standarX'"), "{e}");
        let e = StdVectorFst::read_holder(&mut Reader::new(b"\n0\t1\t2\n\n", false)).unwrap_err();
        assert!(
            e.to_string()
                .contains("bad line in FST text format: '0\t1\t2'"),
            "{e}"
        );
        let e = StdVectorFst::read_holder(&mut Reader::new(b"\n0\t1\t2\t3\n", false)).unwrap_err();
        assert!(e.to_string().contains("no empty line"), "{e}");
    }

    #[test]
    fn text_form_as_kaldi_prints_it() {
        let mut f = StdVectorFst::new();
        for _ in 0..3 {
            f.add_state();
        }
        f.set_start(1);
        let arc = |i, o, w, n| Arc {
            ilabel: i,
            olabel: o,
            weight: TropicalWeight(w),
            nextstate: n,
        };
        f.add_arc(1, arc(3, 4, 0.0, 0));
        f.add_arc(0, arc(5, 0, 2.5, 2));
        f.set_final(2, TropicalWeight(0.25));
        f.set_final(1, TropicalWeight::one());
        let s = String::from_utf8(to_bytes(&f, false)).unwrap();
        assert_eq!(s, "\n1\t0\t3\t4\n1\n0\t2\t5\t0\t2.5\n2\t0.25\n\n");
        let back = StdVectorFst::read_holder(&mut Reader::new(s.as_bytes(), false)).unwrap();
        assert_eq!(back.start, 1);
        assert_eq!(to_bytes(&back, false), s.as_bytes());
    }
}
