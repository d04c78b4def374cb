//! HERest's accumulator files (`HER<N>.acc`, written by `-p N`, merged by
//! `-p 0`), as HTrain.c's `DumpAccs`/`LoadAccs` lay them out: for each
//! physical HMM in scan order its quoted name and a newline, the number of
//! examples, then per state the weight
//! accumulator (one value per mixture, then the occupancy; a shared state once), and for every
//! mean and variance not written before its accumulator (values, then the
//! occupancy; full covariances as the upper triangle row by row); the
//! transition accumulator of each matrix not written before (N×N counts, then
//! N occupancies); a marker 123456. The file ends with the total log
//! probability (float) and the number of frames (int). Binary files
//! (`BINARYACCFORMAT = T`, the default) hold the same tokens as big-endian
//! 32-bit values; text files write them with `%e`/`%d` as HTK does.

use amtool_formats::htk::cfmt::fmt_e;
use amtool_formats::htk::mmf::{Covariance, HmmSet};

use super::accs::{HerestAccs, HtkUpdate};
use super::update::scan_order;
use crate::{Error, Result};

const MARKER: i32 = 123456;

/// Walks the set in DumpAccs order, calling `f` on each accumulator slot.
enum Slot {
    Name(String),
    NumEgs(usize),
    Weight(usize),
    Mean(usize),
    Var(usize),
    Covar(usize),
    Trans(usize),
    /// A component listed in `<NUMMIXES>` but not in the file (weight 0):
    /// HTK gives it a Gaussian of its own, so its (zero) mean and variance
    /// accumulators are written too.
    Placeholder,
    Marker,
}

/// The entries of a state's `mixtures` by 1-based component index (None
/// where HTK has a zero-weight placeholder).
fn by_index(set: &HmmSet, s: usize) -> Vec<Option<usize>> {
    let st = &set.states[s].streams[0];
    let n = st
        .num_mixes
        .max(st.mixtures.iter().map(|m| m.index).max().unwrap_or(0));
    let mut v = vec![None; n];
    for (k, m) in st.mixtures.iter().enumerate() {
        if m.index >= 1 && m.index <= n {
            v[m.index - 1] = Some(k);
        }
    }
    v
}

fn layout(set: &HmmSet, u: HtkUpdate) -> Vec<Slot> {
    let mut out = Vec::new();
    let mut seen_mean = vec![false; set.means.len()];
    let mut seen_var = vec![false; set.variances.len()];
    let mut seen_cov = vec![false; set.covars.len()];
    let mut seen_tr = vec![false; set.transps.len()];
    let mut seen_state = vec![false; set.states.len()];
    for (h, name) in scan_order(set) {
        out.push(Slot::Name(name));
        out.push(Slot::NumEgs(h));
        let hmm = &set.hmms[h];
        for &s in &hmm.states {
            // A shared state is written once, with its first HMM.
            if std::mem::replace(&mut seen_state[s], true) {
                continue;
            }
            out.push(Slot::Weight(s));
            for k in by_index(set, s) {
                let Some(k) = k else {
                    if u.means || u.vars {
                        out.push(Slot::Placeholder);
                    }
                    continue;
                };
                let mx = &set.states[s].streams[0].mixtures[k];
                let p = &set.pdfs[mx.pdf];
                if u.means && !std::mem::replace(&mut seen_mean[p.mean], true) {
                    out.push(Slot::Mean(p.mean));
                }
                if u.vars {
                    match p.cov {
                        Covariance::Diag(v) if !std::mem::replace(&mut seen_var[v], true) => {
                            out.push(Slot::Var(v))
                        }
                        Covariance::InvCovar(c) if !std::mem::replace(&mut seen_cov[c], true) => {
                            out.push(Slot::Covar(c))
                        }
                        _ => {}
                    }
                }
            }
        }
        if !std::mem::replace(&mut seen_tr[hmm.transp], true) {
            out.push(Slot::Trans(hmm.transp));
        }
        out.push(Slot::Marker);
    }
    out
}

struct Writer {
    buf: Vec<u8>,
    binary: bool,
}

impl Writer {
    fn f(&mut self, x: f64) {
        let x = x as f32;
        if self.binary {
            self.buf.extend_from_slice(&x.to_be_bytes());
        } else {
            self.buf
                .extend_from_slice(format!(" {}", fmt_e(x as f64)).as_bytes());
        }
    }
    fn i(&mut self, x: i32) {
        if self.binary {
            self.buf.extend_from_slice(&x.to_be_bytes());
        } else {
            self.buf.extend_from_slice(format!(" {x}").as_bytes());
        }
    }
    fn nl(&mut self) {
        if !self.binary {
            self.buf.push(b'\n');
        }
    }
    fn vec(&mut self, v: &[f64]) {
        for &x in v {
            self.f(x);
        }
        self.nl();
    }
}

/// The accumulator file of `accs` (HERest `-p N`), text or binary.
pub fn write(set: &HmmSet, accs: &HerestAccs, u: HtkUpdate, binary: bool) -> Vec<u8> {
    let mut w = Writer {
        buf: Vec::new(),
        binary,
    };
    for slot in layout(set, u) {
        match slot {
            Slot::Name(n) => {
                w.buf
                    .extend_from_slice(amtool_formats::htk::mmf::quote(&n).as_bytes());
                w.buf.push(b'\n');
            }
            Slot::NumEgs(h) => w.i(accs.num_egs[h] as i32),
            Slot::Weight(s) => {
                let wa = &accs.weight[s];
                let c: Vec<f64> = by_index(set, s)
                    .into_iter()
                    .map(|k| k.map_or(0.0, |k| wa.c[k]))
                    .collect();
                w.vec(&c);
                w.f(wa.occ);
                w.nl();
            }
            Slot::Placeholder => {
                let n = accs.dim;
                let full = set
                    .pdfs
                    .iter()
                    .any(|p| matches!(p.cov, Covariance::InvCovar(_)));
                if u.means {
                    w.vec(&vec![0.0; n]);
                    w.f(0.0);
                    w.nl();
                }
                if u.vars {
                    if full {
                        for i in 0..n {
                            w.vec(&vec![0.0; i + 1]);
                        }
                    } else {
                        w.vec(&vec![0.0; n]);
                    }
                    w.f(0.0);
                    w.nl();
                }
            }
            Slot::Mean(m) => {
                w.vec(&accs.mean[m].sum);
                w.f(accs.mean[m].occ);
                w.nl();
            }
            Slot::Var(v) => {
                w.vec(&accs.var[v].sum);
                w.f(accs.var[v].occ);
                w.nl();
            }
            Slot::Covar(c) => {
                // The file holds the upper triangle row by row: (i, i..n).
                let a = &accs.covar[c];
                let n = accs.dim;
                for i in 0..n {
                    let row: Vec<f64> = (i..n).map(|j| a.sum[j * (j + 1) / 2 + i]).collect();
                    w.vec(&row);
                }
                w.f(a.occ);
                w.nl();
            }
            Slot::Trans(t) => {
                let ta = &accs.trans[t];
                let n = set.transps[t].n;
                for i in 1..=n {
                    w.vec(&ta.tran[i * (n + 1) + 1..(i + 1) * (n + 1)]);
                }
                w.vec(&ta.occ[1..=n]);
                w.nl();
            }
            Slot::Marker => {
                w.i(MARKER);
                w.nl();
            }
        }
    }
    w.f(accs.total_pr);
    w.i(accs.total_frames as i32);
    w.nl();
    w.buf
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
    binary: bool,
    name: &'a str,
}

impl Reader<'_> {
    fn err(&self, msg: impl Into<String>) -> Error {
        Error::Mismatch(format!("{}: byte {}: {}", self.name, self.pos, msg.into()))
    }
    fn skip_ws(&mut self) {
        while self.pos < self.b.len() && self.b[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    fn word(&mut self) -> Result<&str> {
        self.skip_ws();
        let start = self.pos;
        while self.pos < self.b.len() && !self.b[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.err("unexpected end of file"));
        }
        std::str::from_utf8(&self.b[start..self.pos]).map_err(|_| self.err("not text"))
    }
    fn f(&mut self) -> Result<f64> {
        if self.binary {
            let s = self
                .b
                .get(self.pos..self.pos + 4)
                .ok_or_else(|| self.err("unexpected end of file"))?;
            self.pos += 4;
            Ok(f32::from_be_bytes([s[0], s[1], s[2], s[3]]) as f64)
        } else {
            let w = self.word()?.to_string();
            w.parse::<f32>()
                .map(|x| x as f64)
                .map_err(|_| self.err(format!("expected a number, found '{w}'")))
        }
    }
    fn i(&mut self) -> Result<i64> {
        if self.binary {
            let s = self
                .b
                .get(self.pos..self.pos + 4)
                .ok_or_else(|| self.err("unexpected end of file"))?;
            self.pos += 4;
            Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]) as i64)
        } else {
            let w = self.word()?.to_string();
            w.parse::<i64>()
                .map_err(|_| self.err(format!("expected an integer, found '{w}'")))
        }
    }
    fn name(&mut self) -> Result<String> {
        self.skip_ws();
        if self.b.get(self.pos) != Some(&b'"') {
            return Err(self.err("expected a quoted HMM name"));
        }
        let start = self.pos + 1;
        let mut p = start;
        while p < self.b.len() && self.b[p] != b'"' {
            if self.b[p] == b'\\' {
                p += 1;
            }
            p += 1;
        }
        if p >= self.b.len() {
            return Err(self.err("unterminated HMM name"));
        }
        let n = String::from_utf8_lossy(&self.b[start..p]).replace("\\\"", "\"");
        self.pos = p + 1;
        if self.b.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
        }
        Ok(n)
    }
    fn add(&mut self, v: &mut [f64]) -> Result<()> {
        for x in v.iter_mut() {
            let y = self.f()?;
            if !y.is_finite() {
                return Err(self.err("infinite accumulator value"));
            }
            *x += y;
        }
        Ok(())
    }
}

/// Add the statistics of accumulator file `bytes` (called `name` in errors)
/// into `accs`; returns (total log probability, frames) stored in the file.
pub fn read_into(
    set: &HmmSet,
    accs: &mut HerestAccs,
    u: HtkUpdate,
    bytes: &[u8],
    binary: bool,
    name: &str,
) -> Result<(f64, u64)> {
    let mut r = Reader {
        b: bytes,
        pos: 0,
        binary,
        name,
    };
    for slot in layout(set, u) {
        match slot {
            Slot::Name(n) => {
                let got = r.name()?;
                if got != n {
                    return Err(r.err(format!(
                        "accumulators of HMM '{got}' where '{n}' was expected (made with a different HMM set or -u?)"
                    )));
                }
            }
            Slot::NumEgs(h) => accs.num_egs[h] += r.i()?.max(0) as u64,
            Slot::Weight(s) => {
                let idx = by_index(set, s);
                let wa = &mut accs.weight[s];
                for k in idx {
                    let y = r.f()?;
                    if let Some(k) = k {
                        wa.c[k] += y;
                    }
                }
                wa.occ += r.f()?;
            }
            Slot::Placeholder => {
                let n = accs.dim;
                let full = set
                    .pdfs
                    .iter()
                    .any(|p| matches!(p.cov, Covariance::InvCovar(_)));
                let vlen = if full { n * (n + 1) / 2 } else { n };
                let per = if u.means { n + 1 } else { 0 } + if u.vars { vlen + 1 } else { 0 };
                for _ in 0..per {
                    r.f()?;
                }
            }
            Slot::Mean(m) => {
                r.add(&mut accs.mean[m].sum)?;
                accs.mean[m].occ += r.f()?;
            }
            Slot::Var(v) => {
                r.add(&mut accs.var[v].sum)?;
                accs.var[v].occ += r.f()?;
            }
            Slot::Covar(c) => {
                let n = accs.dim;
                let a = &mut accs.covar[c];
                for i in 0..n {
                    for j in i..n {
                        let y = r.f()?;
                        if !y.is_finite() {
                            return Err(r.err("infinite accumulator value"));
                        }
                        a.sum[j * (j + 1) / 2 + i] += y;
                    }
                }
                a.occ += r.f()?;
            }
            Slot::Trans(t) => {
                let n = set.transps[t].n;
                let ta = &mut accs.trans[t];
                for i in 1..=n {
                    r.add(&mut ta.tran[i * (n + 1) + 1..(i + 1) * (n + 1)])?;
                }
                r.add(&mut ta.occ[1..=n])?;
            }
            Slot::Marker => {
                let m = r.i()?;
                if m != MARKER as i64 {
                    return Err(r.err(format!("accumulator marker 123456 expected, found {m}")));
                }
            }
        }
    }
    let pr = r.f()?;
    let t = r.i()?;
    Ok((pr, t.max(0) as u64))
}
