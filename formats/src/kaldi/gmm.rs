//! Kaldi's Gaussian mixture objects: `DiagGmm` (`<DiagGMM>`), `FullGmm`
//! (`<FullGMM>`) and `AmDiagGmm` (`<DIMENSION> <NUMPDFS>` then one `<DiagGMM>`
//! per pdf), in the parameterisation Kaldi stores: per component `gconst`,
//! `weight`, `mean·Σ⁻¹` and `Σ⁻¹` (diagonal, or the packed lower triangle).
//!
//! Readers accept what Kaldi's `Read` accepts (the older `<DiagGMMBegin>` /
//! `<DiagGMMEnd>` markers, files without `<GCONSTS>`, blocks stored as double);
//! writers write what Kaldi's `Write` writes. The one piece of arithmetic here is
//! [`DiagGmm::compute_gconsts`], because Kaldi recomputes the gconsts on every
//! read (`gmm-copy` of a text model writes gconsts computed from the text
//! values), so mimicking Kaldi's output needs it bit for bit.

use std::io::{self, Write};

use crate::error::{Error, Result};
use crate::kaldi::blocks::{
    read_matrix_f32, read_packed_f32, read_vector_f32, write_matrix, write_packed, write_vector,
};
use crate::kaldi::io::{Reader, Writer};
use crate::kaldi::object::KaldiObject;

/// `log(2π)` as Kaldi's `M_LOG_2PI`.
const M_LOG_2PI: f64 = 1.8378770664093454835606594728112;

/// Prefix a format error's message with what was being read.
pub(crate) fn context(e: Error, what: impl std::fmt::Display) -> Error {
    match e {
        Error::Format {
            path,
            key,
            pos,
            msg,
        } => Error::Format {
            path,
            key,
            pos,
            msg: format!("{what}: {msg}"),
        },
        other => other,
    }
}

/// A diagonal-covariance GMM (Kaldi `DiagGmm`).
#[derive(Debug, Clone, PartialEq)]
pub struct DiagGmm {
    /// Feature dimension (columns of the two matrices).
    pub dim: usize,
    /// Per component: `log w − ½(D log 2π + Σ log σ² + Σ μ²/σ²)`.
    pub gconsts: Vec<f32>,
    pub weights: Vec<f32>,
    /// components × dim, row-major: `μ/σ²`.
    pub means_invvars: Vec<f32>,
    /// components × dim, row-major: `1/σ²`.
    pub inv_vars: Vec<f32>,
}

impl DiagGmm {
    pub fn num_gauss(&self) -> usize {
        self.weights.len()
    }

    /// Kaldi `DiagGmm::Read`: `<DiagGMM>` (or `<DiagGMMBegin>`), optional
    /// `<GCONSTS>`, `<WEIGHTS>`, `<MEANS_INVVARS>`, `<INV_VARS>`, `</DiagGMM>` (or
    /// `<DiagGMMEnd>`). The gconsts are then computed from the parameters
    /// whether the file stored them or not, as Kaldi's `Read` does ("safer
    /// than trusting the read gconsts"): a model whose stored gconsts are
    /// stale or edited scores as Kaldi scores it. For a file Kaldi wrote they
    /// are the stored values to the bit.
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        let start = r.pos();
        let mut gmm = DiagGmm::read_parameters(r)?;
        gmm.compute_gconsts().map_err(|e| r.error_at(start, e))?;
        Ok(gmm)
    }

    /// [`read`](Self::read) without the gconsts' computation (`gconsts`
    /// is left as stored, possibly empty or of another length).
    fn read_parameters(r: &mut Reader<'_>) -> Result<Self> {
        let start = r.pos();
        let tok = r.read_token()?;
        if tok != "<DiagGMM>" && tok != "<DiagGMMBegin>" {
            return Err(r.error_at(start, format!("expected <DiagGMM>, found '{tok}'")));
        }
        let at = r.pos();
        let mut tok = r.read_token()?;
        let mut gconsts = None;
        if tok == "<GCONSTS>" {
            gconsts = Some(read_vector_f32(r).map_err(|e| context(e, "<GCONSTS>"))?);
            let at = r.pos();
            tok = r.read_token()?;
            if tok != "<WEIGHTS>" {
                return Err(r.error_at(at, format!("DiagGMM: expected <WEIGHTS>, found '{tok}'")));
            }
        } else if tok != "<WEIGHTS>" {
            return Err(r.error_at(
                at,
                format!("DiagGMM: expected <WEIGHTS> or <GCONSTS>, found '{tok}'"),
            ));
        }
        let weights = read_vector_f32(r).map_err(|e| context(e, "<WEIGHTS>"))?;
        r.expect_token("<MEANS_INVVARS>")?;
        let m_at = r.pos();
        let (mrows, mcols, means_invvars) =
            read_matrix_f32(r).map_err(|e| context(e, "<MEANS_INVVARS>"))?;
        r.expect_token("<INV_VARS>")?;
        let v_at = r.pos();
        let (vrows, vcols, inv_vars) = read_matrix_f32(r).map_err(|e| context(e, "<INV_VARS>"))?;
        let at = r.pos();
        let tok = r.read_token()?;
        if tok != "</DiagGMM>" && tok != "<DiagGMMEnd>" {
            return Err(r.error_at(at, format!("expected </DiagGMM>, found '{tok}'")));
        }
        let n = weights.len();
        if mrows != n {
            return Err(r.error_at(
                m_at,
                format!("wrong dims: <MEANS_INVVARS> has {mrows} rows but there are {n} weights"),
            ));
        }
        if vrows != n || vcols != mcols {
            return Err(r.error_at(
                v_at,
                format!("wrong dims: <INV_VARS> is {vrows} x {vcols} but <MEANS_INVVARS> is {mrows} x {mcols}"),
            ));
        }
        Ok(DiagGmm {
            dim: mcols,
            gconsts: gconsts.unwrap_or_default(),
            weights,
            means_invvars,
            inv_vars,
        })
    }

    /// Kaldi `DiagGmm::Write`.
    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        w.write_token("<DiagGMM>")?;
        w.newline()?;
        w.write_token("<GCONSTS>")?;
        write_vector(w, &self.gconsts)?;
        w.write_token("<WEIGHTS>")?;
        write_vector(w, &self.weights)?;
        w.write_token("<MEANS_INVVARS>")?;
        write_matrix(w, self.num_gauss(), self.dim, &self.means_invvars)?;
        w.write_token("<INV_VARS>")?;
        write_matrix(w, self.num_gauss(), self.dim, &self.inv_vars)?;
        w.write_token("</DiagGMM>")?;
        w.newline()
    }

    /// Kaldi `DiagGmm::ComputeGconsts`, operation for operation: the constant
    /// `-½ D log 2π` is computed in double and stored as float; each component
    /// starts from `logf(w) + offset` in float, and each dimension adds
    /// `½ log(iv) − ½ mi·mi/iv` evaluated in double (Kaldi's `0.5 *` promotes)
    /// to the float accumulator. A `+inf` result becomes `-inf`, as in Kaldi.
    /// Returns the number of infinite gconsts; an error for a negative weight or
    /// a NaN gconst (Kaldi aborts there).
    pub fn compute_gconsts(&mut self) -> std::result::Result<usize, String> {
        let dim = self.dim;
        let offset = (-0.5 * M_LOG_2PI * dim as f64) as f32;
        let mut num_bad = 0;
        let n = self.num_gauss();
        self.gconsts.resize(n, 0.0);
        for mix in 0..n {
            let w = self.weights[mix];
            if w < 0.0 {
                return Err(format!("component {mix} has negative weight {w}"));
            }
            let mut gc: f32 = w.ln() + offset;
            let iv = &self.inv_vars[mix * dim..(mix + 1) * dim];
            let mi = &self.means_invvars[mix * dim..(mix + 1) * dim];
            for d in 0..dim {
                let term = 0.5 * (iv[d].ln() as f64)
                    - 0.5 * (mi[d] as f64) * (mi[d] as f64) / (iv[d] as f64);
                gc = (gc as f64 + term) as f32;
            }
            if gc.is_nan() {
                return Err(format!(
                    "at component {mix}, not a number in gconst computation"
                ));
            }
            if gc.is_infinite() {
                num_bad += 1;
                if gc > 0.0 {
                    gc = -gc;
                }
            }
            self.gconsts[mix] = gc;
        }
        Ok(num_bad)
    }

    /// Read a whole file holding one DiagGmm (`gmm-global-copy` input).
    pub fn from_bytes(buf: &[u8]) -> Result<Self> {
        crate::kaldi::model::read_single(buf, "DiagGmm", DiagGmm::read)
    }

    /// The whole file as Kaldi writes it (binary marker included).
    pub fn to_bytes(&self, binary: bool) -> Vec<u8> {
        crate::kaldi::model::write_single(binary, |w| self.write(w))
    }
}

/// A full-covariance GMM (Kaldi `FullGmm`).
#[derive(Debug, Clone, PartialEq)]
pub struct FullGmm {
    pub dim: usize,
    pub gconsts: Vec<f32>,
    pub weights: Vec<f32>,
    /// components × dim, row-major: `Σ⁻¹μ`.
    pub means_invcovars: Vec<f32>,
    /// components × dim(dim+1)/2: each `Σ⁻¹` as Kaldi's packed lower triangle,
    /// row by row.
    pub inv_covars: Vec<f32>,
}

impl FullGmm {
    pub fn num_gauss(&self) -> usize {
        self.weights.len()
    }

    /// Values per component in `inv_covars`.
    pub fn packed_len(&self) -> usize {
        self.dim * (self.dim + 1) / 2
    }

    /// Kaldi `FullGmm::Read`. Files without `<GCONSTS>` are refused: Kaldi
    /// recomputes them with a Cholesky factorisation amtool does not reproduce
    /// bit for bit.
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        let start = r.pos();
        let tok = r.read_token()?;
        if tok != "<FullGMM>" && tok != "<FullGMMBegin>" {
            return Err(r.error_at(start, format!("expected <FullGMM>, found '{tok}'")));
        }
        let at = r.pos();
        let tok = r.read_token()?;
        if tok == "<WEIGHTS>" {
            return Err(Error::Unsupported {
                path: String::new(),
                pos: crate::error::Pos::Byte(at as u64),
                msg: "FullGMM without <GCONSTS> (an old file): its gconsts would have to be recomputed".into(),
            });
        }
        if tok != "<GCONSTS>" {
            return Err(r.error_at(
                at,
                format!("FullGMM: expected <GCONSTS> or <WEIGHTS>, found '{tok}'"),
            ));
        }
        let gconsts = read_vector_f32(r).map_err(|e| context(e, "<GCONSTS>"))?;
        r.expect_token("<WEIGHTS>")?;
        let weights = read_vector_f32(r).map_err(|e| context(e, "<WEIGHTS>"))?;
        r.expect_token("<MEANS_INVCOVARS>")?;
        let m_at = r.pos();
        let (mrows, dim, means_invcovars) =
            read_matrix_f32(r).map_err(|e| context(e, "<MEANS_INVCOVARS>"))?;
        r.expect_token("<INV_COVARS>")?;
        let n = weights.len();
        if gconsts.len() != n {
            return Err(r.error_at(
                start,
                format!("wrong dims: {} gconsts but {n} weights", gconsts.len()),
            ));
        }
        if mrows != n {
            return Err(r.error_at(
                m_at,
                format!("wrong dims: <MEANS_INVCOVARS> has {mrows} rows but there are {n} weights"),
            ));
        }
        let mut inv_covars = Vec::with_capacity(n * dim * (dim + 1) / 2);
        for i in 0..n {
            let at = r.pos();
            let (size, p) = read_packed_f32(r)
                .map_err(|e| context(e, format!("<INV_COVARS> of component {i}")))?;
            if size != dim {
                return Err(r.error_at(at, format!("wrong dims: inverse covariance {i} is {size} x {size}, the means have dimension {dim}")));
            }
            inv_covars.extend_from_slice(&p);
        }
        let at = r.pos();
        let tok = r.read_token()?;
        if tok != "</FullGMM>" && tok != "<FullGMMEnd>" {
            return Err(r.error_at(at, format!("expected </FullGMM>, found '{tok}'")));
        }
        Ok(FullGmm {
            dim,
            gconsts,
            weights,
            means_invcovars,
            inv_covars,
        })
    }

    /// Kaldi `FullGmm::Write`.
    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        w.write_token("<FullGMM>")?;
        w.newline()?;
        w.write_token("<GCONSTS>")?;
        write_vector(w, &self.gconsts)?;
        w.write_token("<WEIGHTS>")?;
        write_vector(w, &self.weights)?;
        w.write_token("<MEANS_INVCOVARS>")?;
        write_matrix(w, self.num_gauss(), self.dim, &self.means_invcovars)?;
        w.write_token("<INV_COVARS>")?;
        let len = self.packed_len();
        if len > 0 {
            for p in self.inv_covars.chunks(len) {
                write_packed(w, self.dim, p)?;
            }
        } else {
            for _ in 0..self.num_gauss() {
                write_packed::<f32, _>(w, 0, &[])?;
            }
        }
        w.write_token("</FullGMM>")?;
        w.newline()
    }

    /// Read a whole file holding one FullGmm (`fgmm-global-copy` input).
    pub fn from_bytes(buf: &[u8]) -> Result<Self> {
        crate::kaldi::model::read_single(buf, "FullGmm", FullGmm::read)
    }

    pub fn to_bytes(&self, binary: bool) -> Vec<u8> {
        crate::kaldi::model::write_single(binary, |w| self.write(w))
    }
}

/// The acoustic model of a Kaldi GMM system: one `DiagGmm` per pdf (Kaldi
/// `AmDiagGmm`).
#[derive(Debug, Clone, PartialEq)]
pub struct AmDiagGmm {
    /// As written after `<DIMENSION>`; every pdf has this dimension.
    pub dim: usize,
    pub pdfs: Vec<DiagGmm>,
}

impl AmDiagGmm {
    pub fn num_pdfs(&self) -> usize {
        self.pdfs.len()
    }

    pub fn num_gauss(&self) -> usize {
        self.pdfs.iter().map(|p| p.num_gauss()).sum()
    }

    /// Kaldi `AmDiagGmm::Read`.
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.expect_token("<DIMENSION>")?;
        let at = r.pos();
        let dim = r.read_i32()?;
        if dim < 0 {
            return Err(r.error_at(at, format!("negative <DIMENSION> {dim}")));
        }
        r.expect_token("<NUMPDFS>")?;
        let at = r.pos();
        let num_pdfs = r.read_i32()?;
        if num_pdfs <= 0 {
            return Err(r.error_at(at, format!("<NUMPDFS> must be positive, found {num_pdfs}")));
        }
        let mut pdfs = Vec::with_capacity((num_pdfs as usize).min(1 << 16));
        let mut starts = Vec::with_capacity(pdfs.capacity());
        for i in 0..num_pdfs as usize {
            let at = r.pos();
            starts.push(at);
            let gmm = DiagGmm::read_parameters(r)
                .map_err(|e| context(e, format!("pdf {i} of {num_pdfs}")))?;
            if gmm.dim != dim as usize {
                return Err(r.error_at(
                    at,
                    format!(
                        "wrong dims: pdf {i} has dimension {}, <DIMENSION> is {dim}",
                        gmm.dim
                    ),
                ));
            }
            pdfs.push(gmm);
        }
        if let Err((i, e)) = compute_all_gconsts(&mut pdfs) {
            return Err(r.error_at(starts[i], format!("pdf {i} of {num_pdfs}: {e}")));
        }
        Ok(AmDiagGmm {
            dim: dim as usize,
            pdfs,
        })
    }

    /// Kaldi `AmDiagGmm::Write`.
    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        w.write_token("<DIMENSION>")?;
        w.write_i32(self.pdfs.first().map_or(0, |p| p.dim) as i32)?;
        w.write_token("<NUMPDFS>")?;
        w.write_i32(self.pdfs.len() as i32)?;
        for p in &self.pdfs {
            p.write(w)?;
        }
        Ok(())
    }
}

/// Every GMM's gconsts computed ([`DiagGmm::compute_gconsts`]), the GMMs
/// shared out over the host's cores in contiguous runs (a model of a
/// million Gaussians takes a fraction of a second on one). Each GMM's
/// arithmetic is the same whatever the split. The first GMM that fails, by
/// index, and its error.
fn compute_all_gconsts(gmms: &mut [DiagGmm]) -> std::result::Result<(), (usize, String)> {
    const GAUSSIANS_A_THREAD: usize = 1 << 15;
    let total: usize = gmms.iter().map(|g| g.num_gauss()).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = (total / GAUSSIANS_A_THREAD).clamp(1, cores);
    let run = |first: usize, part: &mut [DiagGmm]| {
        for (k, g) in part.iter_mut().enumerate() {
            g.compute_gconsts().map_err(|e| (first + k, e))?;
        }
        Ok(())
    };
    if threads == 1 {
        return run(0, gmms);
    }
    let per = gmms.len().div_ceil(threads);
    let results: Vec<std::result::Result<(), (usize, String)>> = std::thread::scope(|s| {
        let handles: Vec<_> = gmms
            .chunks_mut(per)
            .enumerate()
            .map(|(c, part)| s.spawn(move || run(c * per, part)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err((0, "gconst computation failed".into())))
            })
            .collect()
    });
    results.into_iter().collect()
}

impl KaldiObject for DiagGmm {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        DiagGmm::read(r)
    }
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        DiagGmm::write(self, w)
    }
}

impl KaldiObject for FullGmm {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        FullGmm::read(r)
    }
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        FullGmm::write(self, w)
    }
}

impl KaldiObject for AmDiagGmm {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        AmDiagGmm::read(r)
    }
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        AmDiagGmm::write(self, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn tiny_diag() -> DiagGmm {
        let mut g = DiagGmm {
            dim: 2,
            gconsts: vec![],
            weights: vec![0.25, 0.75],
            means_invvars: vec![0.5, -1.0, 2.0, 0.0],
            inv_vars: vec![1.0, 2.0, 0.5, 4.0],
        };
        g.compute_gconsts().unwrap();
        g
    }

    #[test]
    fn gconsts_match_the_formula() {
        let g = tiny_diag();
        // log w - ½(D log 2π + Σ log σ² + Σ μ²/σ²), with μ = mi/iv, σ² = 1/iv.
        for m in 0..2 {
            let mut want = (g.weights[m] as f64).ln() - 0.5 * 2.0 * M_LOG_2PI;
            for d in 0..2 {
                let iv = g.inv_vars[m * 2 + d] as f64;
                let mu = g.means_invvars[m * 2 + d] as f64 / iv;
                want -= 0.5 * ((1.0 / iv).ln() + mu * mu * iv);
            }
            assert!(
                (g.gconsts[m] as f64 - want).abs() < 1e-5,
                "{} vs {want}",
                g.gconsts[m]
            );
        }
    }

    #[test]
    fn zero_weight_gives_minus_inf_and_negative_weight_is_an_error() {
        let mut g = tiny_diag();
        g.weights[0] = 0.0;
        assert_eq!(g.compute_gconsts().unwrap(), 1);
        assert_eq!(g.gconsts[0], f32::NEG_INFINITY);
        g.weights[0] = -0.1;
        assert!(g.compute_gconsts().unwrap_err().contains("negative weight"));
    }

    #[test]
    fn missing_gconsts_are_computed_and_old_markers_accepted() {
        let g = tiny_diag();
        let mut buf = g.to_bytes(false);
        let text = String::from_utf8(buf.clone()).unwrap();
        let start = text.find("<GCONSTS>").unwrap();
        let end = text.find("<WEIGHTS>").unwrap();
        let old = format!("{}{}", &text[..start], &text[end..])
            .replace("<DiagGMM>", "<DiagGMMBegin>")
            .replace("</DiagGMM>", "<DiagGMMEnd>");
        let back = DiagGmm::from_bytes(old.as_bytes()).unwrap();
        assert_eq!(back.gconsts.len(), 2);
        buf.truncate(buf.len() - 5);
        assert!(DiagGmm::from_bytes(&buf).is_err());
    }
}
