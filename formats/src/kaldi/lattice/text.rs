//! The text form of lattices (`LatticeReader::ReadText` of
//! `lat/kaldi-lattice.cc`): OpenFst printer lines up to an empty line, read
//! as a `Lattice` and as a `CompactLattice` at once until one of the two
//! readings fails, as Kaldi does.

use super::{
    Arc, CompactLattice, CompactLatticeWeight, FstWeight, Lattice, LatticeKind, LatticeWeight,
};
use crate::error::Result;
use crate::kaldi::io::Reader;

/// The readings of one text lattice that succeeded.
pub struct TextFst {
    pub lattice: Option<Lattice>,
    pub compact: Option<CompactLattice>,
}

pub(crate) fn fields(line: &[u8]) -> Vec<&str> {
    line.split(|&c| matches!(c, b'\t' | b' ' | b'\r'))
        .filter(|f| !f.is_empty())
        .map(|f| std::str::from_utf8(f).unwrap_or("\u{fffd}"))
        .collect()
}

pub(crate) fn int(s: &str) -> Option<i32> {
    s.parse::<i32>().ok()
}

pub(crate) fn grow<W: FstWeight>(f: &mut super::Fst<W>, s: i32) {
    while s as usize >= f.states.len() {
        f.add_state();
    }
}

/// One line into the `Lattice` reading; false when the line does not fit.
fn lattice_line(f: &mut Lattice, s: i32, col: &[&str]) -> bool {
    let mut d = s;
    let ok = match col.len() {
        1 => {
            f.set_final(s, LatticeWeight::one());
            true
        }
        2 => match LatticeWeight::parse_text(col[1]) {
            Some(w) => {
                f.set_final(s, w);
                true
            }
            None => false,
        },
        4 | 5 => {
            let w = if col.len() == 5 {
                LatticeWeight::parse_text(col[4]).filter(|w| *w != LatticeWeight::zero())
            } else {
                Some(LatticeWeight::one())
            };
            match (int(col[1]), int(col[2]), int(col[3]), w) {
                (Some(n), Some(i), Some(o), Some(w)) if n >= 0 => {
                    d = n;
                    f.add_arc(
                        s,
                        Arc {
                            ilabel: i,
                            olabel: o,
                            weight: w,
                            nextstate: n,
                        },
                    );
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

/// One line into the `CompactLattice` reading.
fn compact_line(f: &mut CompactLattice, s: i32, col: &[&str]) -> bool {
    let mut d = s;
    let ok = match col.len() {
        1 => {
            f.set_final(s, CompactLatticeWeight::one());
            true
        }
        2 => match CompactLatticeWeight::parse_text(col[1]) {
            Some(w) => {
                f.set_final(s, w);
                true
            }
            None => false,
        },
        3 | 4 => {
            let w = if col.len() == 4 {
                CompactLatticeWeight::parse_text(col[3])
                    .filter(|w| *w != CompactLatticeWeight::zero())
            } else {
                Some(CompactLatticeWeight::one())
            };
            match (int(col[1]), int(col[2]), w) {
                (Some(n), Some(l), Some(w)) if n >= 0 => {
                    d = n;
                    f.add_arc(
                        s,
                        Arc {
                            ilabel: l,
                            olabel: l,
                            weight: w,
                            nextstate: n,
                        },
                    );
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

/// Read lines (reader just after the newline that follows the key) up to and
/// including the empty line that ends the lattice.
pub fn read_text(r: &mut Reader<'_>) -> Result<TextFst> {
    let mut lat = Some(Lattice::new());
    let mut clat = Some(CompactLattice::new());
    let mut first = true;
    loop {
        let rest = r.remaining();
        if rest.is_empty() {
            // Kaldi's writer always ends a lattice with an empty line; without
            // it the data was cut (or a stream window ended: read more).
            return Err(r.error("end of data inside a text lattice (no empty line after it)"));
        }
        let line_at = r.pos();
        let (line, used) = match rest.iter().position(|&c| c == b'\n') {
            Some(i) => (&rest[..i], i + 1),
            None => (rest, rest.len()),
        };
        r.set_pos(line_at + used);
        let col = fields(line);
        if col.is_empty() {
            break;
        }
        let bad = || {
            r.error_at(
                line_at,
                format!(
                    "bad line in lattice text format: '{}'",
                    String::from_utf8_lossy(&line[..line.len().min(80)])
                ),
            )
        };
        let s = match int(col[0]) {
            Some(s) if col.len() <= 5 && s >= 0 => s,
            _ => return Err(bad()),
        };
        for f in lat.iter_mut() {
            grow(f, s);
            if first {
                f.set_start(s);
            }
        }
        for f in clat.iter_mut() {
            grow(f, s);
            if first {
                f.set_start(s);
            }
        }
        first = false;
        if let Some(f) = lat.as_mut() {
            if !lattice_line(f, s, &col) {
                lat = None;
            }
        }
        if let Some(f) = clat.as_mut() {
            if !compact_line(f, s, &col) {
                clat = None;
            }
        }
        if lat.is_none() && clat.is_none() {
            return Err(bad());
        }
    }
    Ok(TextFst {
        lattice: lat,
        compact: clat,
    })
}

/// Is `buf` (a table entry from after its key) a text lattice, and which?
/// Needs the newline after the key, then at least one printer line, whose
/// fields are tab-separated (the OpenFst printer's separator).
pub fn detect_text(buf: &[u8]) -> Option<LatticeKind> {
    let nl = buf.iter().position(|&c| c == b'\n')?;
    if !buf[..nl]
        .iter()
        .all(|&c| c == b' ' || c == b'\t' || c == b'\r')
    {
        return None;
    }
    let body = &buf[nl + 1..];
    let first_line = body.split(|&c| c == b'\n').next()?;
    let cols = fields(first_line);
    if cols.is_empty() || (cols.len() > 1 && !first_line.contains(&b'\t')) {
        return None;
    }
    let mut r = Reader::new(body, false);
    let t = read_text(&mut r).ok()?;
    if t.compact.is_some() {
        Some(LatticeKind::Compact)
    } else if t.lattice.is_some() {
        Some(LatticeKind::Lattice)
    } else {
        None
    }
}
