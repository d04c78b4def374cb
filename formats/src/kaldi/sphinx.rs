//! CMU Sphinx feature files as objects of Kaldi tables: what Kaldi's
//! `SphinxMatrixHolder<13>` reads for `copy-feats --sphinx-in`. A file is a
//! big-endian 32-bit count of floats, then that many big-endian 32-bit floats,
//! 13 to a frame (SphinxBase's `feat_s2mfc_read` layout; Kaldi assumes 13
//! dimensions and big-endian files, as Sphinx's `wave2feat` writes them).

use std::io::{self, Write};

use crate::error::Result;
use crate::kaldi::holder::Holder;
use crate::kaldi::io::Reader;
use crate::kaldi::matrix::Matrix;

/// Features per frame in a Sphinx file (Kaldi's `kFeatDim`).
pub const SPHINX_DIM: usize = 13;

/// The frames of one Sphinx feature file.
#[derive(Debug, Clone, PartialEq)]
pub struct SphinxFeatures(pub Matrix<f32>);

impl Holder for SphinxFeatures {
    fn read_holder(r: &mut Reader<'_>) -> Result<Self> {
        let rest = r.remaining();
        let Some(head) = rest.get(..4) else {
            return Err(r.error("Sphinx feature file: missing the 4-byte count"));
        };
        let count = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if count < 0 || count as usize % SPHINX_DIM != 0 {
            return Err(r.error(format!(
                "Sphinx feature count {count} is inconsistent with vector length {SPHINX_DIM}"
            )));
        }
        let n = count as usize;
        let Some(body) = rest.get(4..4 + 4 * n) else {
            return Err(r.error(format!(
                "Sphinx feature file truncated: {n} floats announced, {} bytes present",
                rest.len() - 4
            )));
        };
        let data = body
            .chunks_exact(4)
            .map(|b| f32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let m = Matrix::from_vec(n / SPHINX_DIM, SPHINX_DIM, data)
            .ok_or_else(|| r.error("Sphinx feature file: bad sizes"))?;
        r.set_pos(r.pos() + 4 + 4 * n);
        Ok(SphinxFeatures(m))
    }

    fn write_holder<W: Write + ?Sized>(&self, w: &mut W, _binary: bool) -> io::Result<()> {
        // Sphinx files have no text form (Kaldi's holder refuses text mode).
        let n = i32::try_from(self.0.data().len())
            .map_err(|_| io::Error::other("Sphinx feature file too large"))?;
        w.write_all(&n.to_be_bytes())?;
        for x in self.0.data() {
            w.write_all(&x.to_be_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kaldi::table::SequentialTableReader;

    fn file(rows: usize) -> (Vec<u8>, Vec<f32>) {
        let vals: Vec<f32> = (0..rows * SPHINX_DIM)
            .map(|i| i as f32 * 0.25 - 3.0)
            .collect();
        let mut b = ((rows * SPHINX_DIM) as i32).to_be_bytes().to_vec();
        vals.iter().for_each(|v| b.extend(v.to_be_bytes()));
        (b, vals)
    }

    #[test]
    fn reads_a_script_of_files_and_writes_them_back() {
        let d = tempfile::tempdir().unwrap();
        let (a, va) = file(3);
        let (b, vb) = file(1);
        std::fs::write(d.path().join("a.sph"), &a).unwrap();
        std::fs::write(d.path().join("b.sph"), &b).unwrap();
        let scp = d.path().join("x.scp");
        let line = |k: &str| format!("{k} {}\n", d.path().join(format!("{k}.sph")).display());
        std::fs::write(&scp, line("a") + &line("b")).unwrap();
        let got: Vec<_> =
            SequentialTableReader::<SphinxFeatures>::open(&format!("scp:{}", scp.display()))
                .unwrap()
                .map(|e| e.unwrap())
                .collect();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].1 .0.rows(), got[0].1 .0.cols()), (3, SPHINX_DIM));
        assert_eq!(got[0].1 .0.data(), &va[..]);
        assert_eq!(got[1].1 .0.data(), &vb[..]);
        let mut back = Vec::new();
        got[0].1.write_holder(&mut back, true).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn count_not_a_multiple_of_13_or_truncated_is_an_error() {
        let mut bad = 14i32.to_be_bytes().to_vec();
        bad.extend([0u8; 56]);
        let mut r = Reader::new(&bad, true);
        let e = SphinxFeatures::read_holder(&mut r).unwrap_err().to_string();
        assert!(e.contains("14") && e.contains("inconsistent"), "{e}");
        let (mut short, _) = file(2);
        short.truncate(50);
        let mut r = Reader::new(&short, true);
        let e = SphinxFeatures::read_holder(&mut r).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
    }
}
