//! HTK master macro files (MMFs), text and binary, as HModel.c reads and writes
//! them.
//!
//! An [`HmmSet`] keeps every object in an arena (`means`, `variances`, `pdfs`,
//! `states`, ...) and refers to it by index, so a `~s` state that ten HMMs
//! share is one `State`, and a shared `~v`/`~t`/`~m`/`~u` is one object too.
//! [`HmmSet::macros`] names the objects that were macros, in the order they
//! were defined, and remembers which MMF each came from so that a set loaded
//! with `-H macros -H hmmdefs` is written back to the same two files.
//!
//! What amtool does not support (tied-mixture `<TMIX>`, discrete `<DPROB>`,
//! adaptation transforms `~a ~b ~r ~f ~g ~y ~j`, `<INPUTXFORM>`) is refused
//! with [`Error::Unsupported`] naming the file, line and construct.

pub mod hmmlist;
pub mod lexer;
mod parser;
mod writer;
pub use writer::quote;

use std::collections::HashMap;
use std::path::Path;

pub use hmmlist::HmmList;

use crate::error::{Error, Result};
use crate::htk::parmkind::ParmKind;

/// `MINMIX`: mixture components with a weight at or below this are not written.
pub const MINMIX: f32 = 1.0e-5;

/// Global covariance kind (`<DIAGC>` ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CovKind {
    Diag,
    InvDiag,
    Full,
    Llt,
    Xform,
}

impl CovKind {
    pub fn keyword(self) -> &'static str {
        match self {
            CovKind::Diag => "DIAGC",
            CovKind::InvDiag => "INVDIAGC",
            CovKind::Full => "FULLC",
            CovKind::Llt => "LLTC",
            CovKind::Xform => "XFORMC",
        }
    }
}

/// Duration kind (`<NULLD>` ...); codes follow `<NULLD>` = 7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DurKind {
    #[default]
    Null,
    Poisson,
    Gamma,
    Rel,
    Gen,
}

/// The `~o` global options.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Options {
    pub hmm_set_id: Option<String>,
    /// Stream widths (`<STREAMINFO>`); filled from `<VECSIZE>` when absent.
    pub stream_widths: Vec<usize>,
    pub vec_size: usize,
    pub proj_size: usize,
    pub parm_kind: Option<ParmKind>,
    pub dur_kind: DurKind,
    pub cov_kind: Option<CovKind>,
}

/// A symmetric matrix as `<INVCOVAR>`/`<LLTCOVAR>` store it: the upper
/// triangle, row by row (n + (n-1) + ... + 1 values).
#[derive(Debug, Clone, PartialEq)]
pub struct TriMat {
    pub n: usize,
    pub upper: Vec<f32>,
}

impl TriMat {
    /// Element (i, j) of the full symmetric matrix.
    pub fn get(&self, i: usize, j: usize) -> f32 {
        let (i, j) = if i <= j { (i, j) } else { (j, i) };
        // rows 0..i hold n + (n-1) + ... + (n-i+1) values
        let start = i * (2 * self.n - i + 1) / 2;
        self.upper[start + (j - i)]
    }
}

/// A dense row-major matrix (`<XFORM>`).
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

/// A transition matrix as written (probabilities, row-major, n×n).
#[derive(Debug, Clone, PartialEq)]
pub struct TransP {
    pub n: usize,
    pub probs: Vec<f32>,
}

/// The covariance of a Gaussian, by arena index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Covariance {
    /// `<VARIANCE>` (index into `variances`).
    Diag(usize),
    /// `<INVCOVAR>` (index into `covars`).
    InvCovar(usize),
    /// `<LLTCOVAR>` (index into `covars`).
    LltCovar(usize),
    /// `<XFORM>` (index into `xforms`).
    Xform(usize),
}

/// One Gaussian (`MixPDF`).
#[derive(Debug, Clone, PartialEq)]
pub struct MixPdf {
    pub mean: usize,
    pub cov: Covariance,
    /// `<GCONST>` = D log 2π + log|Σ| (HTK computes it when the file has none).
    pub gconst: Option<f32>,
}

/// One listed `<MIXTURE> m w` of a stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mixture {
    /// 1-based component index.
    pub index: usize,
    pub weight: f32,
    pub pdf: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    /// `<NUMMIXES>` for this stream (components not listed have weight 0).
    pub num_mixes: usize,
    pub mixtures: Vec<Mixture>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub streams: Vec<Stream>,
    /// `<SWEIGHTS>` (index into `sweights`).
    pub sweights: Option<usize>,
    /// `<DURATION>` (index into `durations`).
    pub dur: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Hmm {
    /// `<NUMSTATES>` including the non-emitting entry and exit states.
    pub num_states: usize,
    /// Emitting states 2..N-1, as indices into `states`.
    pub states: Vec<usize>,
    pub transp: usize,
    pub dur: Option<usize>,
}

/// What a macro names: the arena index of an object of the macro's type.
#[derive(Debug, Clone, PartialEq)]
pub struct Macro {
    /// `s m u v i c x t w d h`.
    pub kind: u8,
    pub name: String,
    pub target: usize,
    /// Index into [`HmmSet::files`] of the MMF that defined it.
    pub file: usize,
}

/// A set of HMMs with its shared structures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HmmSet {
    pub options: Options,
    pub means: Vec<Vec<f32>>,
    pub variances: Vec<Vec<f32>>,
    pub covars: Vec<TriMat>,
    pub xforms: Vec<Matrix>,
    pub sweights: Vec<Vec<f32>>,
    pub durations: Vec<Vec<f32>>,
    pub transps: Vec<TransP>,
    pub pdfs: Vec<MixPdf>,
    pub states: Vec<State>,
    pub hmms: Vec<Hmm>,
    /// Macros in definition order (physical HMMs are `~h` macros).
    pub macros: Vec<Macro>,
    /// The MMFs the set was read from (names as given).
    pub files: Vec<String>,
    index: HashMap<(u8, String), usize>,
}

/// HModel.c's macro hash (`Hash`): the order HTK writes macros in is the order
/// of this value (mod `MACHASHSIZE` = 250007), so our writer uses it too.
pub fn htk_hash(name: &str) -> u32 {
    let mut h: u32 = 0;
    for &c in name.as_bytes() {
        // `*name` is a (signed) char on the platforms HTK runs on.
        h = (c as i8 as i32 as u32).wrapping_add(h.wrapping_mul(31));
    }
    h % 250007
}

impl HmmSet {
    /// Read one or more MMFs in order (like `-H a -H b`).
    pub fn load<P: AsRef<Path>>(paths: &[P]) -> Result<Self> {
        let mut set = HmmSet::default();
        for p in paths {
            let p = p.as_ref();
            let name = p.display().to_string();
            let bytes = std::fs::read(p).map_err(|e| Error::io(&name, e))?;
            set.add_mmf(&bytes, &name)?;
        }
        set.finish().map_err(|e| {
            e.in_file(
                &paths
                    .last()
                    .map(|p| p.as_ref().display().to_string())
                    .unwrap_or_default(),
            )
        })?;
        Ok(set)
    }

    /// Parse one MMF held in memory (`name` is used in messages and as the file name).
    pub fn parse(bytes: &[u8], name: &str) -> Result<Self> {
        let mut set = HmmSet::default();
        set.add_mmf(bytes, name)?;
        set.finish().map_err(|e| e.in_file(name))?;
        Ok(set)
    }

    /// Add the macros and HMMs of one more MMF.
    pub fn add_mmf(&mut self, bytes: &[u8], name: &str) -> Result<()> {
        self.files.push(name.to_string());
        let file = self.files.len() - 1;
        parser::parse_mmf(self, bytes, file).map_err(|e| e.in_file(name))
    }

    /// Fill in what HTK derives after loading: stream widths, the global
    /// covariance kind, missing `<GCONST>`s.
    pub fn finish(&mut self) -> Result<()> {
        if self.options.stream_widths.is_empty() && self.options.vec_size > 0 {
            self.options.stream_widths = vec![self.options.vec_size];
        }
        if self.options.cov_kind.is_none() {
            let mut kinds = self.pdfs.iter().map(|p| match p.cov {
                Covariance::Diag(_) => CovKind::Diag,
                Covariance::InvCovar(_) => CovKind::Full,
                Covariance::LltCovar(_) => CovKind::Llt,
                Covariance::Xform(_) => CovKind::Xform,
            });
            if let Some(first) = kinds.next() {
                if kinds.all(|k| k == first) {
                    self.options.cov_kind = Some(first);
                }
            }
        }
        // GetStateInfo: with several streams a state always has weights.
        let nstreams = self.options.stream_widths.len();
        if nstreams > 1 {
            for i in 0..self.states.len() {
                if self.states[i].sweights.is_none() {
                    self.sweights.push(vec![1.0; nstreams]);
                    self.states[i].sweights = Some(self.sweights.len() - 1);
                }
            }
        }
        for i in 0..self.pdfs.len() {
            if self.pdfs[i].gconst.is_none() {
                self.pdfs[i].gconst = self.compute_gconst(i);
            }
        }
        Ok(())
    }

    /// `<GCONST>` as HModel.c's `FixDiagGConst`/`FixFullGConst` compute it
    /// (float arithmetic, as HTK does): D log 2π + log|Σ|.
    pub fn compute_gconst(&self, pdf: usize) -> Option<f32> {
        const TPI: f64 = 6.28318530717959;
        match self.pdfs[pdf].cov {
            Covariance::Diag(v) => {
                let v = &self.variances[v];
                let mut sum = (v.len() as f64 * TPI.ln()) as f32;
                for &x in v {
                    let z = if (x as f64) <= 2.45e-308 {
                        -1.0e10f32
                    } else {
                        (x as f64).ln() as f32
                    };
                    sum += z;
                }
                Some(sum)
            }
            Covariance::InvCovar(c) => {
                let m = &self.covars[c];
                // CovDet returns a (float) LogFloat; FixFullGConst adds it in double.
                let ldet = -cholesky_logdet(m)?;
                Some((m.n as f64 * TPI.ln() + ldet as f64) as f32)
            }
            Covariance::LltCovar(_) => Some(0.0),
            Covariance::Xform(_) => None,
        }
    }

    /// Change the transition matrices the way loading and saving them in HTK
    /// does: HModel keeps log probabilities, so `PutTransMat` writes
    /// exp(log p) renormalised per row (float arithmetic) and a zero last row.
    /// The result can differ from the input in the last printed digit, and the
    /// operation is not idempotent — which is why the writers do not apply it
    /// on their own (a file read and written by amtool stays byte-identical).
    /// Apply it to reproduce what an HTK tool that read this model would write.
    pub fn normalise_transitions_like_htk(&mut self) {
        for t in &mut self.transps {
            let n = t.n;
            for i in 0..n {
                let row = &mut t.probs[i * n..(i + 1) * n];
                if i + 1 == n {
                    row.iter_mut().for_each(|r| *r = 0.0);
                    continue;
                }
                let mut sum = 0f32;
                for r in row.iter_mut() {
                    let l = if (*r as f64) <= 2.45e-308 {
                        -1.0e10f32
                    } else {
                        (*r as f64).ln() as f32
                    };
                    *r = if l < -0.5e10 {
                        0.0
                    } else {
                        (l as f64).exp() as f32
                    };
                    sum += *r;
                }
                if sum != 0.0 {
                    row.iter_mut().for_each(|r| *r /= sum);
                }
            }
        }
    }

    /// Recompute every `<GCONST>` from the covariance (HModel's `FixAllGConsts`,
    /// which HHEd runs before saving).
    pub fn recompute_gconsts(&mut self) {
        for i in 0..self.pdfs.len() {
            if let Some(g) = self.compute_gconst(i) {
                self.pdfs[i].gconst = Some(g);
            }
        }
    }

    /// The macro index of `(kind, name)`.
    pub fn find_macro(&self, kind: u8, name: &str) -> Option<&Macro> {
        self.index
            .get(&(kind, name.to_string()))
            .map(|&i| &self.macros[i])
    }

    /// The physical HMM called `name`.
    pub fn hmm(&self, name: &str) -> Option<&Hmm> {
        self.find_macro(b'h', name).map(|m| &self.hmms[m.target])
    }

    /// Names of the physical HMMs in definition order.
    pub fn hmm_names(&self) -> impl Iterator<Item = &str> {
        self.macros
            .iter()
            .filter(|m| m.kind == b'h')
            .map(|m| m.name.as_str())
    }

    /// Name object `target` (an index into the arena of `kind`) as a macro
    /// defined in file `file`; errors if `(kind, name)` exists.
    pub fn add_macro(
        &mut self,
        kind: u8,
        name: String,
        target: usize,
        file: usize,
    ) -> Result<(), String> {
        let key = (kind, name.clone());
        if self.index.contains_key(&key) {
            return Err(format!(
                "macro ~{} \"{}\" already defined",
                kind as char, name
            ));
        }
        self.index.insert(key, self.macros.len());
        self.macros.push(Macro {
            kind,
            name,
            target,
            file,
        });
        Ok(())
    }

    /// Text MMF of the macros of file `file` (or of all files with `None`),
    /// laid out exactly as HModel.c's `SaveMacros` writes it.
    pub fn to_text(&self, file: Option<usize>) -> Vec<u8> {
        writer::write(self, file, false)
    }

    /// Binary MMF (HTK `-B`), as `SaveMacros` writes it.
    pub fn to_binary(&self, file: Option<usize>) -> Vec<u8> {
        writer::write(self, file, true)
    }

    /// Write each loaded MMF back under its own base name in `dir` (what
    /// HERest/HHEd `-M dir` do through `SaveHMMSet`); returns the paths written.
    pub fn save_to_dir(
        &self,
        dir: impl AsRef<Path>,
        binary: bool,
    ) -> Result<Vec<std::path::PathBuf>> {
        let mut written = Vec::new();
        for (i, f) in self.files.iter().enumerate() {
            let base = Path::new(f).file_name().ok_or_else(|| Error::Format {
                path: f.clone(),
                key: None,
                pos: crate::error::Pos::Unknown,
                msg: "MMF name has no file name part".into(),
            })?;
            let out = dir.as_ref().join(base);
            self.save_file(i, &out, binary)?;
            written.push(out);
        }
        Ok(written)
    }

    /// Write the macros loaded from file `file` (text or binary) to `path`, atomically.
    pub fn save_file(&self, file: usize, path: &Path, binary: bool) -> Result<()> {
        let bytes = if binary {
            self.to_binary(Some(file))
        } else {
            self.to_text(Some(file))
        };
        crate::htk::atomic_write(path, &bytes)
    }

    /// Write all macros into one MMF (HHEd `-w`), text or binary, atomically.
    pub fn save(&self, path: impl AsRef<Path>, binary: bool) -> Result<()> {
        let bytes = if binary {
            self.to_binary(None)
        } else {
            self.to_text(None)
        };
        crate::htk::atomic_write(path.as_ref(), &bytes)
    }
}

/// log det of a symmetric positive-definite matrix as HMath's `CovDet` gets
/// it: Cholesky factor in double, the log diagonal summed into a float;
/// `None` if it is not positive definite.
fn cholesky_logdet(m: &TriMat) -> Option<f32> {
    let n = m.n;
    let mut l = vec![0f64; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = m.get(j, i) as f64;
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            if i == j {
                if s <= 0.0 {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    let mut ldet = 0f32;
    for j in 0..n {
        ldet = (ldet as f64 + l[j * n + j].ln()) as f32;
    }
    Some((2.0 * ldet as f64) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimat_indexing() {
        let t = TriMat {
            n: 3,
            upper: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        };
        assert_eq!(t.get(0, 0), 1.0);
        assert_eq!(t.get(0, 2), 3.0);
        assert_eq!(t.get(2, 0), 3.0);
        assert_eq!(t.get(1, 1), 4.0);
        assert_eq!(t.get(1, 2), 5.0);
        assert_eq!(t.get(2, 2), 6.0);
    }

    #[test]
    fn hash_matches_htk_order() {
        assert!(htk_hash("f") < htk_hash("ah"));
        assert_eq!(htk_hash("trP_vowel"), 5922);
        assert_eq!(htk_hash("varFloor1"), 178359);
    }
}
