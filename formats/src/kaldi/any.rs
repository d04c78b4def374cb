//! Which Kaldi object a table entry holds, judged from its bytes, and a holder
//! ([`AnyObject`]) that reads whatever was detected — for tools like
//! `amtool copy` that accept any table.
//!
//! Kaldi tools know their object type; a generic copy must guess it. The
//! rules (in [`detect_entry`]):
//! - binary: the type token (`FM DM CM CM2 CM3 FV DV FP DP`); otherwise the
//!   size-prefixed integer forms are parsed as alignment, Gaussian selection
//!   and posterior in turn and the first that ends exactly at an entry
//!   boundary (end of data, or `key ` + `\0B`) wins; a lone `\x08` double or a
//!   lone `\x04` value is a basic value;
//! - GMM objects (archives of per-speaker models, as gmm-adapt-map writes):
//!   the first token `<DIMENSION>` (AmDiagGmm), `<DiagGMM>`, `<FullGMM>`;
//! - text: ` [` + newline is a matrix, ` [ ...` a vector (Kaldi objects start
//!   with a space), `[ ` a posterior, a line ending in `;` a vector of vectors,
//!   a line with `;` a pair vector, one number with a point or exponent a
//!   float, else a line of integers an alignment.
//!
//! - lattices (either form) come first: binary by the OpenFst magic number
//!   and arc type, text by a newline after the key followed by tab-separated
//!   printer lines ([`super::lattice::detect_lattice`]).
//!
//! - FSTs with `StdArc`s (training graphs) after lattices: binary by the arc
//!   type `standard`, text by printer lines with plain costs (a text FST
//!   without any cost also reads as a lattice, and is taken for one).
//!
//! Detection uses the first entry; the caller keeps that type for the whole
//! table (an empty alignment, posterior and selection look the same and are
//! written the same).

use std::io::{self, Write};

use super::compressed::CompressedMatrix;
use super::fst::{detect_std_fst, StdVectorFst};
use super::gmm::{AmDiagGmm, DiagGmm, FullGmm};
use super::holder::{Basic, Holder, Int32PairVector, Int32Vector, Int32VectorVector, Posterior};
use super::io::{is_space, Reader};
use super::lattice::{detect_lattice, CompactLattice, Lattice, LatticeKind};
use super::matrix::{Matrix, PackedMatrix, Vector};
use crate::error::Result;

/// The object types tables hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectType {
    FloatMatrix,
    DoubleMatrix,
    CompressedMatrix,
    FloatVector,
    DoubleVector,
    FloatPacked,
    DoublePacked,
    Int32Vector,
    Int32VectorVector,
    Int32PairVector,
    Posterior,
    Float,
    Double,
    /// Per-speaker or per-utterance models (gmm-adapt-map writes these).
    AmDiagGmm,
    DiagGmm,
    FullGmm,
    Lattice,
    CompactLattice,
    /// OpenFst `VectorFst<StdArc>` (training graphs).
    Fst,
}

impl ObjectType {
    /// Human-readable name, e.g. for log lines ("Copied 40 feature matrices").
    pub fn describe(self) -> &'static str {
        match self {
            ObjectType::FloatMatrix => "float matrix",
            ObjectType::DoubleMatrix => "double matrix",
            ObjectType::CompressedMatrix => "compressed matrix",
            ObjectType::FloatVector => "float vector",
            ObjectType::DoubleVector => "double vector",
            ObjectType::FloatPacked => "float packed matrix",
            ObjectType::DoublePacked => "double packed matrix",
            ObjectType::Int32Vector => "int32 vector",
            ObjectType::Int32VectorVector => "vector of int32 vectors",
            ObjectType::Int32PairVector => "int32 pair vector",
            ObjectType::Posterior => "posterior",
            ObjectType::Float => "float",
            ObjectType::Double => "double",
            ObjectType::AmDiagGmm => "AmDiagGmm",
            ObjectType::DiagGmm => "DiagGmm",
            ObjectType::FullGmm => "FullGmm",
            ObjectType::Lattice => "lattice",
            ObjectType::CompactLattice => "compact lattice",
            ObjectType::Fst => "FST",
        }
    }

    pub fn is_matrix(self) -> bool {
        matches!(
            self,
            ObjectType::FloatMatrix | ObjectType::DoubleMatrix | ObjectType::CompressedMatrix
        )
    }
}

/// Does `rest` start at an entry boundary: only whitespace, or `key ` and a
/// binary marker?
fn at_boundary(rest: &[u8]) -> bool {
    let mut i = 0;
    while i < rest.len() && is_space(rest[i]) {
        i += 1;
    }
    if i == rest.len() {
        return true;
    }
    let start = i;
    while i < rest.len() && !is_space(rest[i]) {
        // Keys are printable; binary data running into a key is not a boundary.
        if !(rest[i].is_ascii_graphic() || rest[i] >= 0x80) {
            return false;
        }
        i += 1;
    }
    i > start && rest.get(i) == Some(&b' ') && rest[i + 1..].starts_with(b"\0B")
}

fn parses_to_boundary<H: Holder>(buf: &[u8]) -> bool {
    let mut r = Reader::new(buf, true);
    H::read_holder(&mut r).is_ok() && at_boundary(r.remaining())
}

/// Detect the object at the start of `buf` (a table entry, from its binary
/// marker on). `None` when it is none of the table types.
pub fn detect_entry(buf: &[u8]) -> Option<ObjectType> {
    match detect_lattice(buf) {
        Some(LatticeKind::Lattice) => return Some(ObjectType::Lattice),
        Some(LatticeKind::Compact) => return Some(ObjectType::CompactLattice),
        None => {}
    }
    if detect_std_fst(buf) {
        return Some(ObjectType::Fst);
    }
    if let [0, b'B', rest @ ..] = buf {
        let tok_end = rest.iter().position(|&c| c == b' ').unwrap_or(rest.len());
        match &rest[..tok_end] {
            b"FM" => return Some(ObjectType::FloatMatrix),
            b"DM" => return Some(ObjectType::DoubleMatrix),
            b"CM" | b"CM2" | b"CM3" => return Some(ObjectType::CompressedMatrix),
            b"FV" => return Some(ObjectType::FloatVector),
            b"DV" => return Some(ObjectType::DoubleVector),
            b"FP" => return Some(ObjectType::FloatPacked),
            b"DP" => return Some(ObjectType::DoublePacked),
            b"<DIMENSION>" => return Some(ObjectType::AmDiagGmm),
            b"<DiagGMM>" | b"<DiagGMMBegin>" => return Some(ObjectType::DiagGmm),
            b"<FullGMM>" | b"<FullGMMBegin>" => return Some(ObjectType::FullGmm),
            _ => {}
        }
        if rest.first() == Some(&8) && rest.len() >= 9 && at_boundary(&rest[9..]) {
            return Some(ObjectType::Double);
        }
        if parses_to_boundary::<Int32Vector>(buf) {
            return Some(ObjectType::Int32Vector);
        }
        if parses_to_boundary::<Int32VectorVector>(buf) {
            return Some(ObjectType::Int32VectorVector);
        }
        if parses_to_boundary::<Posterior>(buf) {
            return Some(ObjectType::Posterior);
        }
        if rest.first() == Some(&4) && rest.len() >= 5 && at_boundary(&rest[5..]) {
            return Some(ObjectType::Float);
        }
        return None;
    }
    // Text.
    let line_end = buf.iter().position(|&c| c == b'\n').unwrap_or(buf.len());
    let line = &buf[..line_end];
    if line.starts_with(b" [")
        || line.starts_with(b"[\n")
        || (line.starts_with(b"[") && line.len() == 1)
    {
        let after = &buf[buf.iter().position(|&c| c == b'[').unwrap_or(0) + 1..];
        let first = after.iter().find(|&&c| c != b' ' && c != b'\t').copied();
        return Some(if first == Some(b'\n') || first == Some(b'\r') {
            ObjectType::FloatMatrix
        } else {
            ObjectType::FloatVector
        });
    }
    let trimmed: Vec<&[u8]> = line
        .split(|&c| is_space(c))
        .filter(|w| !w.is_empty())
        .collect();
    match trimmed.first().copied() {
        Some(b"<DIMENSION>") => return Some(ObjectType::AmDiagGmm),
        Some(b"<DiagGMM>") | Some(b"<DiagGMMBegin>") => return Some(ObjectType::DiagGmm),
        Some(b"<FullGMM>") | Some(b"<FullGMMBegin>") => return Some(ObjectType::FullGmm),
        _ => {}
    }
    if line.starts_with(b"[") {
        return Some(ObjectType::Posterior);
    }
    if trimmed.last() == Some(&&b";"[..]) {
        return Some(ObjectType::Int32VectorVector);
    }
    if trimmed.contains(&&b";"[..]) {
        return Some(ObjectType::Int32PairVector);
    }
    let is_int = |w: &&[u8]| {
        let w = w
            .strip_prefix(b"-")
            .or_else(|| w.strip_prefix(b"+"))
            .unwrap_or(w);
        !w.is_empty() && w.iter().all(u8::is_ascii_digit)
    };
    if trimmed.iter().all(is_int) {
        return Some(ObjectType::Int32Vector);
    }
    if trimmed.len() == 1
        && super::io::parse_float_text(std::str::from_utf8(trimmed[0]).ok()?).is_some()
    {
        return Some(ObjectType::Float);
    }
    None
}

/// Any table object, read as the type it was detected (or told) to be.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyObject {
    FloatMatrix(Matrix<f32>),
    DoubleMatrix(Matrix<f64>),
    CompressedMatrix(CompressedMatrix),
    FloatVector(Vector<f32>),
    DoubleVector(Vector<f64>),
    FloatPacked(PackedMatrix<f32>),
    DoublePacked(PackedMatrix<f64>),
    Int32Vector(Int32Vector),
    Int32VectorVector(Int32VectorVector),
    Int32PairVector(Int32PairVector),
    Posterior(Posterior),
    Float(Basic<f32>),
    Double(Basic<f64>),
    AmDiagGmm(AmDiagGmm),
    DiagGmm(DiagGmm),
    FullGmm(FullGmm),
    Lattice(Lattice),
    CompactLattice(CompactLattice),
    Fst(StdVectorFst),
}

impl AnyObject {
    /// Read an object of type `t` (reader at its binary marker or text).
    pub fn read_as(t: ObjectType, r: &mut Reader<'_>) -> Result<Self> {
        Ok(match t {
            ObjectType::FloatMatrix => AnyObject::FloatMatrix(Holder::read_holder(r)?),
            ObjectType::DoubleMatrix => AnyObject::DoubleMatrix(Holder::read_holder(r)?),
            ObjectType::CompressedMatrix => AnyObject::CompressedMatrix(Holder::read_holder(r)?),
            ObjectType::FloatVector => AnyObject::FloatVector(Holder::read_holder(r)?),
            ObjectType::DoubleVector => AnyObject::DoubleVector(Holder::read_holder(r)?),
            ObjectType::FloatPacked => AnyObject::FloatPacked(Holder::read_holder(r)?),
            ObjectType::DoublePacked => AnyObject::DoublePacked(Holder::read_holder(r)?),
            ObjectType::Int32Vector => AnyObject::Int32Vector(Holder::read_holder(r)?),
            ObjectType::Int32VectorVector => AnyObject::Int32VectorVector(Holder::read_holder(r)?),
            ObjectType::Int32PairVector => AnyObject::Int32PairVector(Holder::read_holder(r)?),
            ObjectType::Posterior => AnyObject::Posterior(Holder::read_holder(r)?),
            ObjectType::Float => AnyObject::Float(Holder::read_holder(r)?),
            ObjectType::Double => AnyObject::Double(Holder::read_holder(r)?),
            ObjectType::AmDiagGmm => AnyObject::AmDiagGmm(Holder::read_holder(r)?),
            ObjectType::DiagGmm => AnyObject::DiagGmm(Holder::read_holder(r)?),
            ObjectType::FullGmm => AnyObject::FullGmm(Holder::read_holder(r)?),
            ObjectType::Lattice => AnyObject::Lattice(Holder::read_holder(r)?),
            ObjectType::CompactLattice => AnyObject::CompactLattice(Holder::read_holder(r)?),
            ObjectType::Fst => AnyObject::Fst(Holder::read_holder(r)?),
        })
    }

    pub fn object_type(&self) -> ObjectType {
        match self {
            AnyObject::FloatMatrix(_) => ObjectType::FloatMatrix,
            AnyObject::DoubleMatrix(_) => ObjectType::DoubleMatrix,
            AnyObject::CompressedMatrix(_) => ObjectType::CompressedMatrix,
            AnyObject::FloatVector(_) => ObjectType::FloatVector,
            AnyObject::DoubleVector(_) => ObjectType::DoubleVector,
            AnyObject::FloatPacked(_) => ObjectType::FloatPacked,
            AnyObject::DoublePacked(_) => ObjectType::DoublePacked,
            AnyObject::Int32Vector(_) => ObjectType::Int32Vector,
            AnyObject::Int32VectorVector(_) => ObjectType::Int32VectorVector,
            AnyObject::Int32PairVector(_) => ObjectType::Int32PairVector,
            AnyObject::Posterior(_) => ObjectType::Posterior,
            AnyObject::Float(_) => ObjectType::Float,
            AnyObject::Double(_) => ObjectType::Double,
            AnyObject::AmDiagGmm(_) => ObjectType::AmDiagGmm,
            AnyObject::DiagGmm(_) => ObjectType::DiagGmm,
            AnyObject::FullGmm(_) => ObjectType::FullGmm,
            AnyObject::Lattice(_) => ObjectType::Lattice,
            AnyObject::CompactLattice(_) => ObjectType::CompactLattice,
            AnyObject::Fst(_) => ObjectType::Fst,
        }
    }

    /// The matrix as float, whatever its stored form (compressed ones are
    /// decompressed); `None` for non-matrices.
    pub fn to_float_matrix(&self) -> Option<Matrix<f32>> {
        match self {
            AnyObject::FloatMatrix(m) => Some(m.clone()),
            AnyObject::DoubleMatrix(m) => Some(m.convert()),
            AnyObject::CompressedMatrix(c) => Some(c.to_matrix()),
            _ => None,
        }
    }
}

impl Holder for AnyObject {
    /// Detects the type of this entry alone (tools that read whole tables
    /// should detect once and use [`AnyObject::read_as`]).
    fn read_holder(r: &mut Reader<'_>) -> Result<Self> {
        let t = detect_entry(r.remaining())
            .ok_or_else(|| r.error("cannot tell which Kaldi object this is"))?;
        AnyObject::read_as(t, r)
    }

    fn write_holder<W: Write + ?Sized>(&self, w: &mut W, binary: bool) -> io::Result<()> {
        match self {
            AnyObject::FloatMatrix(x) => x.write_holder(w, binary),
            AnyObject::DoubleMatrix(x) => x.write_holder(w, binary),
            AnyObject::CompressedMatrix(x) => x.write_holder(w, binary),
            AnyObject::FloatVector(x) => x.write_holder(w, binary),
            AnyObject::DoubleVector(x) => x.write_holder(w, binary),
            AnyObject::FloatPacked(x) => x.write_holder(w, binary),
            AnyObject::DoublePacked(x) => x.write_holder(w, binary),
            AnyObject::Int32Vector(x) => x.write_holder(w, binary),
            AnyObject::Int32VectorVector(x) => x.write_holder(w, binary),
            AnyObject::Int32PairVector(x) => x.write_holder(w, binary),
            AnyObject::Posterior(x) => x.write_holder(w, binary),
            AnyObject::Float(x) => x.write_holder(w, binary),
            AnyObject::Double(x) => x.write_holder(w, binary),
            AnyObject::AmDiagGmm(x) => x.write_holder(w, binary),
            AnyObject::DiagGmm(x) => x.write_holder(w, binary),
            AnyObject::FullGmm(x) => x.write_holder(w, binary),
            AnyObject::Lattice(x) => x.write_holder(w, binary),
            AnyObject::CompactLattice(x) => x.write_holder(w, binary),
            AnyObject::Fst(x) => x.write_holder(w, binary),
        }
    }

    fn extract_range(self, range: &str) -> std::result::Result<Self, String> {
        match self {
            AnyObject::FloatMatrix(m) => m.extract_range(range).map(AnyObject::FloatMatrix),
            AnyObject::DoubleMatrix(m) => m.extract_range(range).map(AnyObject::DoubleMatrix),
            AnyObject::CompressedMatrix(c) => c
                .to_matrix::<f32>()
                .extract_range(range)
                .map(AnyObject::FloatMatrix),
            other => Err(format!(
                "range [{range}] is not supported for a {}",
                other.object_type().describe()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<H: Holder>(h: &H, binary: bool) -> Vec<u8> {
        let mut v = Vec::new();
        h.write_holder(&mut v, binary).unwrap();
        v
    }

    fn clat() -> CompactLattice {
        use crate::kaldi::lattice::{Arc, CompactLatticeWeight, FstWeight, LatticeWeight};
        let mut c = CompactLattice::new();
        c.add_state();
        c.add_state();
        c.set_start(0);
        let w = CompactLatticeWeight::new(LatticeWeight::new(1.0, 2.0), vec![3, 4]);
        c.add_arc(
            0,
            Arc {
                ilabel: 7,
                olabel: 7,
                weight: w,
                nextstate: 1,
            },
        );
        c.set_final(1, CompactLatticeWeight::one());
        c
    }

    #[test]
    fn detects_every_type_in_both_modes() {
        let cases: Vec<(AnyObject, ObjectType)> = vec![
            (
                AnyObject::FloatMatrix(Matrix::from_vec(2, 2, vec![1.0; 4]).unwrap()),
                ObjectType::FloatMatrix,
            ),
            (
                AnyObject::FloatVector(Vector::new(vec![1.0, 2.0])),
                ObjectType::FloatVector,
            ),
            (
                AnyObject::Int32Vector(Int32Vector(vec![3, 1, 4, 1, 5])),
                ObjectType::Int32Vector,
            ),
            (
                AnyObject::Int32VectorVector(Int32VectorVector(vec![vec![1, 2], vec![3]])),
                ObjectType::Int32VectorVector,
            ),
            (
                AnyObject::Posterior(Posterior(vec![vec![(1, 0.5), (2, 0.5)], vec![(3, 1.0)]])),
                ObjectType::Posterior,
            ),
            (AnyObject::Float(Basic(-79.5)), ObjectType::Float),
            (
                AnyObject::CompactLattice(clat()),
                ObjectType::CompactLattice,
            ),
            (AnyObject::Lattice(clat().to_lattice()), ObjectType::Lattice),
        ];
        for (obj, t) in &cases {
            for binary in [true, false] {
                let mut b = bytes(obj, binary);
                b.extend_from_slice(if binary { b"next \0B" } else { b"next 1\n" });
                assert_eq!(detect_entry(&b), Some(*t), "{t:?} binary={binary}");
                let mut r = Reader::new(&b, false);
                assert_eq!(&AnyObject::read_as(*t, &mut r).unwrap(), obj);
            }
        }
        let d = bytes(&AnyObject::Double(Basic(2.5)), true);
        assert_eq!(detect_entry(&d), Some(ObjectType::Double));
        let c = CompressedMatrix::compress(
            &Matrix::from_vec(9, 1, vec![1.0f32; 9]).unwrap(),
            crate::kaldi::compressed::CompressionMethod::Automatic,
        )
        .unwrap();
        assert_eq!(
            detect_entry(&bytes(&c, true)),
            Some(ObjectType::CompressedMatrix)
        );
        assert_eq!(
            detect_entry(b"1 2 ; 3 4 \n"),
            Some(ObjectType::Int32PairVector)
        );
        assert_eq!(detect_entry(b"\0B<DiagGMM> "), Some(ObjectType::DiagGmm));
        assert_eq!(
            detect_entry(b"\0B<DIMENSION> "),
            Some(ObjectType::AmDiagGmm)
        );
        assert_eq!(
            detect_entry(b"<FullGMM> <GCONSTS>"),
            Some(ObjectType::FullGmm)
        );
        assert_eq!(detect_entry(b"\0B<Foo> "), None);
        assert_eq!(detect_entry(b"hello world\n"), None);
    }
}
