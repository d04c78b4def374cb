//! Lattice weights (`fstext/lattice-weight.h`): [`LatticeWeight`], a (graph
//! cost, acoustic cost) float pair, and [`CompactLatticeWeight`], that pair
//! plus the transition-id string of a compact-lattice arc; their binary and
//! text forms as OpenFst/Kaldi write them.

use crate::error::Result;
use crate::kaldi::io::{fmt_g_into, Reader};

/// What an FST weight must provide to be read and written as Kaldi does.
pub trait FstWeight: Clone + PartialEq + std::fmt::Debug {
    /// OpenFst arc type of the float form (`lattice4`, `compactlattice44`).
    const ARC_TYPE: &'static str;
    /// The double form Kaldi also reads (`lattice8`, `compactlattice84`).
    const ARC_TYPE_DOUBLE: &'static str;
    /// Fewest bytes the binary (float) form takes (bounds counts read from a header).
    const MIN_BYTES: usize = 8;
    /// The semiring zero (no path).
    fn zero() -> Self;
    /// The semiring one (cost 0).
    fn one() -> Self;
    /// Binary form (floats, or doubles converted to float when `double`).
    fn read_binary(r: &mut Reader<'_>, double: bool) -> Result<Self>;
    fn write_binary(&self, out: &mut Vec<u8>);
    /// Text form (`operator<<`).
    fn fmt_text(&self, out: &mut String);
    /// Text form (`operator>>`); `None` when malformed.
    fn parse_text(s: &str) -> Option<Self>;
    /// Neither zero nor one (OpenFst's test for the `kWeighted` property).
    fn is_weighted(&self) -> bool {
        *self != Self::zero() && *self != Self::one()
    }
}

/// Kaldi `LatticeWeightTpl<float>`: `value1` is the graph cost (LM +
/// transition + pronunciation), `value2` the acoustic cost. Equality is float
/// equality of both, as in Kaldi.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatticeWeight {
    pub graph: f32,
    pub acoustic: f32,
}

impl LatticeWeight {
    pub fn new(graph: f32, acoustic: f32) -> Self {
        LatticeWeight { graph, acoustic }
    }
}

/// `WriteFloatType` of `lattice-weight.h`: `Infinity`, `-Infinity`,
/// `BadNumber`, else `os << f` (precision 6, `%g`).
fn fmt_cost(out: &mut String, f: f32) {
    if f.is_nan() {
        out.push_str("BadNumber");
    } else if f == f32::INFINITY {
        out.push_str("Infinity");
    } else if f == f32::NEG_INFINITY {
        out.push_str("-Infinity");
    } else {
        fmt_g_into(out, f as f64, 6);
    }
}

/// `ReadFloatType`: the three names, else `strtod` of the whole field
/// (rounded to float, as Kaldi assigns the double to a float).
pub(crate) fn parse_cost(s: &str) -> Option<f32> {
    match s {
        "Infinity" => Some(f32::INFINITY),
        "-Infinity" => Some(f32::NEG_INFINITY),
        "BadNumber" => Some(f32::NAN),
        _ => {
            let body = s.strip_prefix(['-', '+']).unwrap_or(s);
            if !body
                .bytes()
                .next()
                .is_some_and(|c| c.is_ascii_digit() || c == b'.')
            {
                return None;
            }
            s.parse::<f64>().ok().map(|v| v as f32)
        }
    }
}

fn read_cost(r: &mut Reader<'_>, double: bool) -> Result<f32> {
    if double {
        let b = r.read_bytes(8)?;
        Ok(f64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f32)
    } else {
        let b = r.read_bytes(4)?;
        Ok(f32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
    }
}

impl FstWeight for LatticeWeight {
    const ARC_TYPE: &'static str = "lattice4";
    const ARC_TYPE_DOUBLE: &'static str = "lattice8";

    fn zero() -> Self {
        LatticeWeight::new(f32::INFINITY, f32::INFINITY)
    }

    fn one() -> Self {
        LatticeWeight::new(0.0, 0.0)
    }

    fn read_binary(r: &mut Reader<'_>, double: bool) -> Result<Self> {
        let graph = read_cost(r, double)?;
        let acoustic = read_cost(r, double)?;
        Ok(LatticeWeight { graph, acoustic })
    }

    fn write_binary(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.graph.to_le_bytes());
        out.extend_from_slice(&self.acoustic.to_le_bytes());
    }

    fn fmt_text(&self, out: &mut String) {
        fmt_cost(out, self.graph);
        out.push(',');
        fmt_cost(out, self.acoustic);
    }

    fn parse_text(s: &str) -> Option<Self> {
        // Kaldi splits at the first separator.
        let (a, b) = s.split_once(',')?;
        Some(LatticeWeight::new(parse_cost(a)?, parse_cost(b)?))
    }
}

/// Kaldi `CompactLatticeWeightTpl<LatticeWeight, int32>`: a lattice weight and
/// the transition-ids (one per frame) of the arc or final state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompactLatticeWeight {
    pub weight: LatticeWeight,
    pub string: Vec<i32>,
}

impl CompactLatticeWeight {
    pub fn new(weight: LatticeWeight, string: Vec<i32>) -> Self {
        CompactLatticeWeight { weight, string }
    }
}

impl FstWeight for CompactLatticeWeight {
    const ARC_TYPE: &'static str = "compactlattice44";
    const ARC_TYPE_DOUBLE: &'static str = "compactlattice84";

    fn zero() -> Self {
        CompactLatticeWeight::new(LatticeWeight::zero(), Vec::new())
    }

    fn one() -> Self {
        CompactLatticeWeight::new(LatticeWeight::one(), Vec::new())
    }

    fn read_binary(r: &mut Reader<'_>, double: bool) -> Result<Self> {
        let weight = LatticeWeight::read_binary(r, double)?;
        let at = r.pos();
        let b = r.read_bytes(4)?;
        let n = i32::from_le_bytes(b.try_into().unwrap_or([0; 4]));
        if n < 0 || (n as usize).saturating_mul(4) > r.remaining().len() {
            return Err(r.error_at(
                at,
                format!(
                    "bad compact-lattice weight: transition-id string length {n} with {} bytes left",
                    r.remaining().len()
                ),
            ));
        }
        let bytes = r.read_bytes(n as usize * 4)?;
        let string = bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(CompactLatticeWeight { weight, string })
    }

    fn write_binary(&self, out: &mut Vec<u8>) {
        self.weight.write_binary(out);
        out.extend_from_slice(&(self.string.len() as i32).to_le_bytes());
        for t in &self.string {
            out.extend_from_slice(&t.to_le_bytes());
        }
    }

    fn fmt_text(&self, out: &mut String) {
        use std::fmt::Write as _;
        self.weight.fmt_text(out);
        out.push(',');
        for (i, t) in self.string.iter().enumerate() {
            if i > 0 {
                out.push('_');
            }
            let _ = write!(out, "{t}");
        }
    }

    fn parse_text(s: &str) -> Option<Self> {
        // The string part follows the last separator.
        let (w, ids) = s.rsplit_once(',')?;
        let weight = LatticeWeight::parse_text(w)?;
        let string = if ids.is_empty() {
            Vec::new()
        } else {
            ids.split('_')
                .map(|x| x.parse::<i32>().ok())
                .collect::<Option<Vec<_>>>()?
        };
        Some(CompactLatticeWeight { weight, string })
    }
}

/// OpenFst `TropicalWeight` (the weight of `StdArc`): a float cost, zero =
/// +∞, one = 0. Text form as OpenFst's `operator<<` (`Infinity`,
/// `-Infinity`, `BadNumber`, else 6 significant digits).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TropicalWeight(pub f32);

impl FstWeight for TropicalWeight {
    const ARC_TYPE: &'static str = "standard";
    /// `ArcTpl<TropicalWeightTpl<double>>`; Kaldi's `VectorFstHolder` does not
    /// read it (see [`crate::kaldi::fst`]), it is named only to be refused.
    const ARC_TYPE_DOUBLE: &'static str = "tropical64";
    const MIN_BYTES: usize = 4;

    fn zero() -> Self {
        TropicalWeight(f32::INFINITY)
    }

    fn one() -> Self {
        TropicalWeight(0.0)
    }

    fn read_binary(r: &mut Reader<'_>, double: bool) -> Result<Self> {
        Ok(TropicalWeight(read_cost(r, double)?))
    }

    fn write_binary(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
    }

    fn fmt_text(&self, out: &mut String) {
        fmt_cost(out, self.0);
    }

    fn parse_text(s: &str) -> Option<Self> {
        parse_cost(s).map(TropicalWeight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_as_kaldi_prints_them() {
        let mut s = String::new();
        CompactLatticeWeight::new(LatticeWeight::new(9.541_78, 6173.26), vec![2, 1, 1])
            .fmt_text(&mut s);
        assert_eq!(s, "9.54178,6173.26,2_1_1");
        s.clear();
        CompactLatticeWeight::new(LatticeWeight::new(2.35755, 0.0), vec![]).fmt_text(&mut s);
        assert_eq!(s, "2.35755,0,");
        s.clear();
        CompactLatticeWeight::zero().fmt_text(&mut s);
        assert_eq!(s, "Infinity,Infinity,");
        s.clear();
        LatticeWeight::new(-0.0, 1e-7).fmt_text(&mut s);
        assert_eq!(s, "-0,1e-07");
    }

    #[test]
    fn text_parse() {
        let w = CompactLatticeWeight::parse_text("0.693359,61.9853,2_1").unwrap();
        assert_eq!(w.string, vec![2, 1]);
        assert_eq!(w.weight.graph, 0.693359);
        assert_eq!(
            CompactLatticeWeight::parse_text("1,2,").unwrap().string,
            Vec::<i32>::new()
        );
        assert_eq!(
            LatticeWeight::parse_text("Infinity,-Infinity").unwrap(),
            LatticeWeight::new(f32::INFINITY, f32::NEG_INFINITY)
        );
        assert!(LatticeWeight::parse_text("1").is_none());
        assert!(LatticeWeight::parse_text("1,x").is_none());
        assert!(CompactLatticeWeight::parse_text("1,2,3_a").is_none());
    }
}
