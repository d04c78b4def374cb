//! Kaldi's GMM accumulator files:
//! - [`AccumDiagGmm`] (`<GMMACCS> ... <DIAGVARACCS> </GMMACCS>`), written by
//!   `gmm-global-acc-stats`;
//! - [`AccumFullGmm`] (`<GMMACCS> ... <FULLVARACCS> </GMMACCS>`), written by
//!   `fgmm-global-acc-stats`;
//! - [`AmAccs`]: `gmm-acc-stats-ali` / `gmm-acc-stats` output: the transition
//!   accumulators as a bare double vector (`DV`), then `AccumAmDiagGmm`
//!   (`<NUMPDFS>`, one `<GMMACCS>` per pdf, `<total_like>`, `<total_frames>`).
//!
//! Kaldi accumulates in double but writes the GMM statistics as float (`FV`,
//! `FM`, `FP`); the structs hold f64 (what a trainer sums) and the writers
//! round to f32 exactly as Kaldi's `CopyFromVec` does, so a Kaldi file read
//! and written back is byte-identical.
//!
//! About `-0`: the writers print the sign of zero they are given. Kaldi's
//! `gmm-acc-stats-ali --binary=false` prints `-0` for statistics that are
//! negative zero, while `gmm-sum-accs` prints `0` for the same values, because
//! its sum starts from +0 (`0 + -0 = +0`). A copy of an existing file keeps the
//! zeros as they are (like the tool that wrote it); a sum computed by adding
//! into zeroed accumulators reproduces `gmm-sum-accs`.

use std::io::{self, Write};

use crate::error::Result;
use crate::kaldi::blocks::{
    read_matrix_f64, read_packed_f64, read_vector_f64, write_matrix, write_packed, write_vector,
};
use crate::kaldi::gmm::context;
use crate::kaldi::io::{Reader, Writer};
use crate::kaldi::model::{read_single, write_single};
use crate::kaldi::object::KaldiObject;

/// Kaldi `GmmFlagsType` bits.
pub const GMM_MEANS: u16 = 1;
pub const GMM_VARIANCES: u16 = 2;
pub const GMM_WEIGHTS: u16 = 4;
pub const GMM_TRANSITIONS: u16 = 8;
pub const GMM_ALL: u16 = 15;

/// Kaldi `AugmentGmmFlags`: variances imply means, means imply weights, and
/// weights are always there.
pub fn augment_flags(flags: u16) -> u16 {
    let mut f = flags;
    if f & GMM_VARIANCES != 0 {
        f |= GMM_MEANS;
    }
    if f & GMM_MEANS != 0 {
        f |= GMM_WEIGHTS;
    }
    f | GMM_WEIGHTS
}

/// The `<GMMACCS>` header: `<VECSIZE>`, `<NUMCOMPONENTS>`, `<FLAGS>`.
fn read_header(r: &mut Reader<'_>) -> Result<(usize, usize, u16)> {
    r.expect_token("<GMMACCS>")?;
    r.expect_token("<VECSIZE>")?;
    let at = r.pos();
    let dim = r.read_i32()?;
    if dim <= 0 {
        return Err(r.error_at(at, format!("<VECSIZE> must be positive, found {dim}")));
    }
    r.expect_token("<NUMCOMPONENTS>")?;
    let at = r.pos();
    let n = r.read_i32()?;
    if n <= 0 {
        return Err(r.error_at(at, format!("<NUMCOMPONENTS> must be positive, found {n}")));
    }
    r.expect_token("<FLAGS>")?;
    let at = r.pos();
    let flags = r.read_int::<u16>()?;
    if flags & !GMM_ALL != 0 {
        return Err(r.error_at(at, format!("invalid <FLAGS> {flags} (valid bits: 1 means, 2 variances, 4 weights, 8 transitions)")));
    }
    Ok((dim as usize, n as usize, augment_flags(flags)))
}

fn write_header<W: Write>(w: &mut Writer<W>, dim: usize, n: usize, flags: u16) -> io::Result<()> {
    w.write_token("<GMMACCS>")?;
    w.write_token("<VECSIZE>")?;
    w.write_i32(dim as i32)?;
    w.write_token("<NUMCOMPONENTS>")?;
    w.write_i32(n as i32)?;
    w.write_token("<FLAGS>")?;
    w.write_int::<u16>(flags)
}

fn to_f32(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

/// Statistics of a diagonal GMM (Kaldi `AccumDiagGmm`).
#[derive(Debug, Clone, PartialEq)]
pub struct AccumDiagGmm {
    pub dim: usize,
    pub num_comp: usize,
    /// Augmented flags (Kaldi stores them augmented).
    pub flags: u16,
    /// Per component.
    pub occupancy: Vec<f64>,
    /// num_comp × dim (Σ γx) when `flags` has means, else empty.
    pub mean_accs: Vec<f64>,
    /// num_comp × dim (Σ γx²) when `flags` has variances, else empty.
    pub var_accs: Vec<f64>,
}

impl AccumDiagGmm {
    /// Zeroed statistics sized as Kaldi's `Resize` sizes them.
    pub fn new(num_comp: usize, dim: usize, flags: u16) -> Self {
        let flags = augment_flags(flags);
        let m = if flags & GMM_MEANS != 0 {
            num_comp * dim
        } else {
            0
        };
        let v = if flags & GMM_VARIANCES != 0 {
            num_comp * dim
        } else {
            0
        };
        AccumDiagGmm {
            dim,
            num_comp,
            flags,
            occupancy: vec![0.0; num_comp],
            mean_accs: vec![0.0; m],
            var_accs: vec![0.0; v],
        }
    }

    /// Kaldi `AccumDiagGmm::Read` (sections in any order until `</GMMACCS>`,
    /// each checked against the header's sizes).
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        let (dim, n, flags) = read_header(r)?;
        let mut acc = AccumDiagGmm::new(n, dim, flags);
        loop {
            let at = r.pos();
            let tok = r.read_token()?;
            match tok {
                "</GMMACCS>" => break,
                "<OCCUPANCY>" => {
                    let v = read_vector_f64(r).map_err(|e| context(e, "<OCCUPANCY>"))?;
                    if v.len() != n {
                        return Err(r.error_at(
                            at,
                            format!(
                                "wrong dims: <OCCUPANCY> has {} entries, <NUMCOMPONENTS> is {n}",
                                v.len()
                            ),
                        ));
                    }
                    acc.occupancy = v;
                }
                "<MEANACCS>" | "<DIAGVARACCS>" => {
                    let (rows, cols, m) = read_matrix_f64(r).map_err(|e| context(e, tok))?;
                    let (want, slot) = if tok == "<MEANACCS>" {
                        (flags & GMM_MEANS != 0, &mut acc.mean_accs)
                    } else {
                        (flags & GMM_VARIANCES != 0, &mut acc.var_accs)
                    };
                    let (wr, wc) = if want { (n, dim) } else { (0, 0) };
                    if (rows, cols) != (wr, wc) && !(rows * cols == 0 && !want) {
                        return Err(r.error_at(at, format!("wrong dims: {tok} is {rows} x {cols}, expected {wr} x {wc} (from the header and <FLAGS> {flags})")));
                    }
                    if want {
                        *slot = m;
                    }
                }
                other => {
                    return Err(r.error_at(at, format!("unexpected token '{other}' in <GMMACCS>")))
                }
            }
        }
        Ok(acc)
    }

    /// Kaldi `AccumDiagGmm::Write` (statistics rounded to float).
    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        write_header(w, self.dim, self.num_comp, self.flags)?;
        w.write_token("<OCCUPANCY>")?;
        write_vector(w, &to_f32(&self.occupancy))?;
        let (mr, mc) = if self.mean_accs.is_empty() {
            (0, 0)
        } else {
            (self.num_comp, self.dim)
        };
        w.write_token("<MEANACCS>")?;
        write_matrix(w, mr, mc, &to_f32(&self.mean_accs))?;
        let (vr, vc) = if self.var_accs.is_empty() {
            (0, 0)
        } else {
            (self.num_comp, self.dim)
        };
        w.write_token("<DIAGVARACCS>")?;
        write_matrix(w, vr, vc, &to_f32(&self.var_accs))?;
        w.write_token("</GMMACCS>")
    }

    /// Read a whole `gmm-global-acc-stats` file.
    pub fn from_bytes(buf: &[u8]) -> Result<Self> {
        read_single(buf, "AccumDiagGmm", AccumDiagGmm::read)
    }

    pub fn to_bytes(&self, binary: bool) -> Vec<u8> {
        write_single(binary, |w| self.write(w))
    }
}

/// Statistics of a full-covariance GMM (Kaldi `AccumFullGmm`), as stored in the
/// file.
#[derive(Debug, Clone, PartialEq)]
pub struct AccumFullGmm {
    pub dim: usize,
    pub num_comp: usize,
    pub flags: u16,
    pub occupancy: Vec<f64>,
    /// num_comp × dim (Σ γx).
    pub mean_accs: Vec<f64>,
    /// Per component, the packed lower triangle (dim(dim+1)/2 values) of the
    /// *centred* second-order statistics `Σ γxxᵀ − (Σ γx)(Σ γx)ᵀ/γ` (for γ ≠ 0):
    /// Kaldi subtracts the mean term before writing (to keep precision in float)
    /// and adds it back on reading. Empty without the variance flag.
    pub centered_covar_accs: Vec<f64>,
}

impl AccumFullGmm {
    pub fn packed_len(&self) -> usize {
        self.dim * (self.dim + 1) / 2
    }

    /// The second-order statistics `Σ γxxᵀ` per component (packed lower
    /// triangles), as Kaldi holds them in memory after `Read`: the stored
    /// centred block plus `(Σ γx)(Σ γx)ᵀ/γ` for components with γ ≠ 0, added
    /// as `a_ij += (α x_i) x_j` with `α = 1/γ` (the reference-BLAS `dspr`
    /// order; an optimised BLAS may fuse the multiply-add, so Kaldi's own
    /// values can differ from these in the last bit).
    /// Empty without the variance flag.
    pub fn uncentered_covar_accs(&self) -> Vec<f64> {
        let mut out = self.centered_covar_accs.clone();
        if out.is_empty() || self.mean_accs.is_empty() {
            return out;
        }
        self.add_mean_term(&mut out, 1.0);
        out
    }

    /// Set the second-order statistics from `Σ γxxᵀ` (packed, per component),
    /// centring them as Kaldi's `Write` does (in double; the writer rounds to
    /// float). `occupancy` and `mean_accs` must already be set.
    pub fn set_uncentered_covar_accs(
        &mut self,
        uncentered: &[f64],
    ) -> std::result::Result<(), String> {
        let want = self.num_comp * self.packed_len();
        if uncentered.len() != want {
            return Err(format!(
                "expected {want} second-order values, got {}",
                uncentered.len()
            ));
        }
        let mut c = uncentered.to_vec();
        if !self.mean_accs.is_empty() {
            self.add_mean_term(&mut c, -1.0);
        }
        self.centered_covar_accs = c;
        self.flags |= GMM_VARIANCES | GMM_MEANS | GMM_WEIGHTS;
        Ok(())
    }

    /// `p_i += sign/γ_i · m_i m_iᵀ` for every component with γ_i ≠ 0.
    fn add_mean_term(&self, packed: &mut [f64], sign: f64) {
        let (dim, plen) = (self.dim, self.packed_len());
        for (i, &occ) in self.occupancy.iter().enumerate() {
            if occ == 0.0 {
                continue;
            }
            let alpha = sign / occ;
            let m = &self.mean_accs[i * dim..(i + 1) * dim];
            let p = &mut packed[i * plen..(i + 1) * plen];
            let mut k = 0;
            for r in 0..dim {
                let t = alpha * m[r];
                for c in 0..=r {
                    p[k] += t * m[c];
                    k += 1;
                }
            }
        }
    }

    /// Kaldi `AccumFullGmm::Read`, keeping the variance block as stored.
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        let (dim, n, flags) = read_header(r)?;
        let plen = dim * (dim + 1) / 2;
        let mut acc = AccumFullGmm {
            dim,
            num_comp: n,
            flags,
            occupancy: vec![0.0; n],
            mean_accs: vec![0.0; if flags & GMM_MEANS != 0 { n * dim } else { 0 }],
            centered_covar_accs: vec![
                0.0;
                if flags & GMM_VARIANCES != 0 {
                    n * plen
                } else {
                    0
                }
            ],
        };
        loop {
            let at = r.pos();
            let tok = r.read_token()?;
            match tok {
                "</GMMACCS>" => break,
                "<OCCUPANCY>" => {
                    let v = read_vector_f64(r).map_err(|e| context(e, "<OCCUPANCY>"))?;
                    if v.len() != n {
                        return Err(r.error_at(
                            at,
                            format!(
                                "wrong dims: <OCCUPANCY> has {} entries, <NUMCOMPONENTS> is {n}",
                                v.len()
                            ),
                        ));
                    }
                    acc.occupancy = v;
                }
                "<MEANACCS>" => {
                    let (rows, cols, m) = read_matrix_f64(r).map_err(|e| context(e, tok))?;
                    let want = flags & GMM_MEANS != 0;
                    if want && (rows, cols) != (n, dim) || !want && rows * cols != 0 {
                        return Err(r.error_at(
                            at,
                            format!(
                                "wrong dims: <MEANACCS> is {rows} x {cols}, expected {n} x {dim}"
                            ),
                        ));
                    }
                    acc.mean_accs = m;
                }
                "<FULLVARACCS>" => {
                    if flags & GMM_VARIANCES == 0 {
                        return Err(r.error_at(
                            at,
                            format!("<FULLVARACCS> present but <FLAGS> {flags} has no variances"),
                        ));
                    }
                    let mut all = Vec::with_capacity(n * plen);
                    for i in 0..n {
                        let at = r.pos();
                        let (size, p) = read_packed_f64(r)
                            .map_err(|e| context(e, format!("<FULLVARACCS> of component {i}")))?;
                        if size != dim {
                            return Err(r.error_at(at, format!("wrong dims: <FULLVARACCS> {i} is {size} x {size}, <VECSIZE> is {dim}")));
                        }
                        all.extend_from_slice(&p);
                    }
                    acc.centered_covar_accs = all;
                }
                other => {
                    return Err(r.error_at(at, format!("unexpected token '{other}' in <GMMACCS>")))
                }
            }
        }
        Ok(acc)
    }

    /// Kaldi `AccumFullGmm::Write` (statistics rounded to float).
    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        write_header(w, self.dim, self.num_comp, self.flags)?;
        w.write_token("<OCCUPANCY>")?;
        write_vector(w, &to_f32(&self.occupancy))?;
        let (mr, mc) = if self.mean_accs.is_empty() {
            (0, 0)
        } else {
            (self.num_comp, self.dim)
        };
        w.write_token("<MEANACCS>")?;
        write_matrix(w, mr, mc, &to_f32(&self.mean_accs))?;
        if !self.centered_covar_accs.is_empty() {
            w.write_token("<FULLVARACCS>")?;
            for p in self.centered_covar_accs.chunks(self.packed_len().max(1)) {
                write_packed(w, self.dim, &to_f32(p))?;
            }
        }
        w.write_token("</GMMACCS>")
    }

    /// Read a whole `fgmm-global-acc-stats` file.
    pub fn from_bytes(buf: &[u8]) -> Result<Self> {
        read_single(buf, "AccumFullGmm", AccumFullGmm::read)
    }

    pub fn to_bytes(&self, binary: bool) -> Vec<u8> {
        write_single(binary, |w| self.write(w))
    }
}

/// Kaldi `AccumAmDiagGmm`: one `AccumDiagGmm` per pdf plus the totals.
#[derive(Debug, Clone, PartialEq)]
pub struct AccumAmDiagGmm {
    pub pdfs: Vec<AccumDiagGmm>,
    /// Σ log-likelihood (`<total_like>`; 0 in old files that lack it).
    pub total_like: f64,
    /// Σ frame weight (`<total_frames>`).
    pub total_frames: f64,
}

impl AccumAmDiagGmm {
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        r.expect_token("<NUMPDFS>")?;
        let at = r.pos();
        let n = r.read_i32()?;
        if n < 0 {
            return Err(r.error_at(at, format!("negative <NUMPDFS> {n}")));
        }
        let mut pdfs = Vec::with_capacity((n as usize).min(1 << 16));
        for i in 0..n {
            pdfs.push(
                AccumDiagGmm::read(r)
                    .map_err(|e| context(e, format!("accumulators of pdf {i} of {n}")))?,
            );
        }
        // Older files end here (Kaldi peeks for EOF).
        let (mut total_like, mut total_frames) = (0.0, 0.0);
        if !r.at_end() {
            r.expect_token("<total_like>")?;
            total_like = r.read_f64()?;
            r.expect_token("<total_frames>")?;
            total_frames = r.read_f64()?;
        }
        Ok(AccumAmDiagGmm {
            pdfs,
            total_like,
            total_frames,
        })
    }

    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        w.write_token("<NUMPDFS>")?;
        w.write_i32(self.pdfs.len() as i32)?;
        for p in &self.pdfs {
            p.write(w)?;
        }
        w.write_token("<total_like>")?;
        w.write_f64(self.total_like)?;
        w.write_token("<total_frames>")?;
        w.write_f64(self.total_frames)
    }
}

/// A `gmm-acc-stats-ali` / `gmm-acc-stats` / `gmm-sum-accs` file.
#[derive(Debug, Clone, PartialEq)]
pub struct AmAccs {
    /// Transition-id counts, indexed by transition-id (entry 0 unused); written
    /// as a double vector.
    pub transition_accs: Vec<f64>,
    pub gmm: AccumAmDiagGmm,
}

impl AmAccs {
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        let transition_accs = read_vector_f64(r)
            .map_err(|e| context(e, "transition accumulators (a double vector)"))?;
        let gmm = AccumAmDiagGmm::read(r)?;
        Ok(AmAccs {
            transition_accs,
            gmm,
        })
    }

    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        write_vector(w, &self.transition_accs)?;
        self.gmm.write(w)
    }

    pub fn from_bytes(buf: &[u8]) -> Result<Self> {
        read_single(
            buf,
            "GMM accumulators (transition accs + AccumAmDiagGmm)",
            AmAccs::read,
        )
    }

    pub fn to_bytes(&self, binary: bool) -> Vec<u8> {
        write_single(binary, |w| self.write(w))
    }
}

impl KaldiObject for AccumDiagGmm {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        AccumDiagGmm::read(r)
    }
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        AccumDiagGmm::write(self, w)
    }
}

impl KaldiObject for AccumFullGmm {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        AccumFullGmm::read(r)
    }
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        AccumFullGmm::write(self, w)
    }
}

impl KaldiObject for AccumAmDiagGmm {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        AccumAmDiagGmm::read(r)
    }
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        AccumAmDiagGmm::write(self, w)
    }
}

impl KaldiObject for AmAccs {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        AmAccs::read(r)
    }
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        AmAccs::write(self, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_augmented_like_kaldi() {
        assert_eq!(augment_flags(0), 4);
        assert_eq!(augment_flags(1), 5);
        assert_eq!(augment_flags(2), 7);
        assert_eq!(augment_flags(8), 12);
        assert_eq!(AccumDiagGmm::new(3, 2, GMM_MEANS).var_accs.len(), 0);
    }

    #[test]
    fn full_accs_centering_inverts() {
        let mut a = AccumFullGmm {
            dim: 2,
            num_comp: 2,
            flags: 7,
            occupancy: vec![2.0, 0.0],
            mean_accs: vec![2.0, 4.0, 0.0, 0.0],
            centered_covar_accs: vec![0.0; 6],
        };
        // Σγxxᵀ of two points (0,1) and (2,3): [[4,6],[6,10]] -> packed 4 6 10.
        a.set_uncentered_covar_accs(&[4.0, 6.0, 10.0, 0.0, 0.0, 0.0])
            .unwrap();
        // Centred: Σγxxᵀ - mmᵀ/γ = [[4-2, 6-4],[., 10-8]].
        assert_eq!(a.centered_covar_accs, vec![2.0, 2.0, 2.0, 0.0, 0.0, 0.0]);
        assert_eq!(
            a.uncentered_covar_accs(),
            vec![4.0, 6.0, 10.0, 0.0, 0.0, 0.0]
        );
        assert!(a.set_uncentered_covar_accs(&[1.0]).is_err());
    }

    #[test]
    fn diag_accs_without_variances_roundtrip() {
        let mut a = AccumDiagGmm::new(2, 3, GMM_MEANS);
        a.occupancy = vec![1.0, 2.0];
        a.mean_accs = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        for binary in [true, false] {
            let b = AccumDiagGmm::from_bytes(&a.to_bytes(binary)).unwrap();
            assert_eq!(b, a);
        }
    }
}
