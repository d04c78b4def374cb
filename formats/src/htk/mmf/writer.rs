//! The MMF writer, after HModel.c's `SaveMacros` / `PutOptions` / `PutHMMDef` /
//! `PutStateInfo` / `PutMixPDF`: same tokens, same spacing (`" %d"`, `" %e"`),
//! same order (atomic macros `~u ~v ~i ~c ~w ~d ~t`, then `~m`, then `~s`, then
//! `~h`, each group in HTK's macro-hash order), text or binary.

use std::collections::HashMap;

use super::lexer::{keyword_name, sym};
use super::*;
use crate::htk::cfmt::fmt_e;

struct W<'a> {
    set: &'a HmmSet,
    out: Vec<u8>,
    bin: bool,
    /// (kind, arena index) -> macro name, for references.
    names: HashMap<(u8, usize), &'a str>,
}

pub(super) fn write(set: &HmmSet, file: Option<usize>, bin: bool) -> Vec<u8> {
    let mut names = HashMap::new();
    for m in &set.macros {
        names.insert((m.kind, m.target), m.name.as_str());
    }
    let mut w = W {
        set,
        out: Vec::new(),
        bin,
        names,
    };
    w.out.extend_from_slice(b"~o\n");
    w.put_options();
    // Macros of this file in HTK's hash-table order: by hash value, and within
    // one bucket the most recently defined first.
    let mut order: Vec<(u32, std::cmp::Reverse<usize>, &Macro)> = set
        .macros
        .iter()
        .enumerate()
        .filter(|(_, m)| file.is_none_or(|f| m.file == f))
        .map(|(i, m)| (htk_hash(&m.name), std::cmp::Reverse(i), m))
        .collect();
    order.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    for group in [&b"uvicwdtx"[..], b"m", b"s", b"h"] {
        for (_, _, m) in &order {
            if group.contains(&m.kind) {
                w.put_macro(m);
            }
        }
    }
    w.out
}

impl W<'_> {
    fn sym(&mut self, code: u8) {
        if self.bin {
            self.out.push(b':');
            self.out.push(code);
        } else {
            self.out.push(b'<');
            self.out.extend_from_slice(keyword_name(code).as_bytes());
            self.out.push(b'>');
        }
    }
    fn nl(&mut self) {
        if !self.bin {
            self.out.push(b'\n');
        }
    }
    fn short(&mut self, v: usize) {
        if self.bin {
            self.out.extend_from_slice(&(v as i16).to_be_bytes());
        } else {
            self.out.extend_from_slice(format!(" {v}").as_bytes());
        }
    }
    fn float(&mut self, v: f32) {
        if self.bin {
            self.out.extend_from_slice(&v.to_be_bytes());
        } else {
            self.out.push(b' ');
            self.out.extend_from_slice(fmt_e(v as f64).as_bytes());
        }
    }
    fn floats(&mut self, v: &[f32]) {
        for &x in v {
            self.float(x);
        }
    }
    fn macro_hdr(&mut self, kind: u8, name: &str) {
        self.out.push(b'~');
        self.out.push(kind);
        self.out.push(b' ');
        self.out.extend_from_slice(quote(name).as_bytes());
        self.nl();
    }
    /// A reference `~x "name"` if object `id` of `kind` is a macro.
    fn reference(&mut self, kind: u8, id: usize) -> bool {
        match self.names.get(&(kind, id)) {
            Some(name) => {
                let name = *name;
                self.macro_hdr(kind, name);
                true
            }
            None => false,
        }
    }

    fn put_options(&mut self) {
        let o = &self.set.options;
        if let Some(id) = &o.hmm_set_id {
            self.sym(sym::HMMSETID);
            self.out.extend_from_slice(format!(" {id}\n").as_bytes());
        }
        self.sym(sym::STREAMINFO);
        let widths = if o.stream_widths.is_empty() {
            vec![o.vec_size]
        } else {
            o.stream_widths.clone()
        };
        self.short(widths.len());
        for w in &widths {
            self.short(*w);
        }
        self.nl();
        self.sym(sym::VECSIZE);
        self.short(o.vec_size);
        if o.proj_size > 0 {
            self.sym(sym::PROJSIZE);
            self.short(o.proj_size);
        }
        self.sym(sym::NULLD + o.dur_kind as u8);
        if let Some(k) = o.parm_kind {
            self.out.extend_from_slice(format!("<{k}>").as_bytes());
        }
        if let Some(c) = o.cov_kind {
            self.out
                .extend_from_slice(format!("<{}>", c.keyword()).as_bytes());
        }
        self.nl();
    }

    fn put_macro(&mut self, m: &Macro) {
        let id = m.target;
        self.macro_hdr(m.kind, &m.name);
        match m.kind {
            b'u' => self.vector_body(sym::MEAN, &self.set.means[id]),
            b'v' => self.vector_body(sym::VARIANCE, &self.set.variances[id]),
            b'w' => self.vector_body(sym::SWEIGHTS, &self.set.sweights[id]),
            b'd' => self.vector_body(sym::DURATION, &self.set.durations[id]),
            b'i' => self.covar_body(sym::INVCOVAR, id),
            b'c' => self.covar_body(sym::LLTCOVAR, id),
            b'x' => self.xform_body(id),
            b't' => self.transp_body(id),
            b'm' => self.mixpdf_body(id),
            b's' => self.state_body(id),
            b'h' => self.hmm_body(id),
            _ => {}
        }
    }

    fn vector_body(&mut self, code: u8, v: &[f32]) {
        self.sym(code);
        self.short(v.len());
        self.nl();
        self.floats(v);
        self.nl();
    }

    fn covar_body(&mut self, code: u8, id: usize) {
        let m = &self.set.covars[id];
        self.sym(code);
        self.short(m.n);
        self.nl();
        let mut k = 0;
        for i in 0..m.n {
            let row = m.n - i;
            self.floats(&m.upper[k..k + row]);
            self.nl();
            k += row;
        }
    }

    fn xform_body(&mut self, id: usize) {
        let m = &self.set.xforms[id];
        self.sym(sym::XFORM);
        self.short(m.rows);
        self.short(m.cols);
        self.nl();
        for r in 0..m.rows {
            self.floats(&m.data[r * m.cols..(r + 1) * m.cols]);
            self.nl();
        }
    }

    /// `PutTransMat`, with the probabilities as held (see
    /// [`HmmSet::normalise_transitions_like_htk`]).
    fn transp_body(&mut self, id: usize) {
        let t = &self.set.transps[id];
        self.sym(sym::TRANSP);
        self.short(t.n);
        self.nl();
        for i in 0..t.n {
            self.floats(&t.probs[i * t.n..(i + 1) * t.n]);
            self.nl();
        }
    }

    fn mixpdf_body(&mut self, id: usize) {
        let p = &self.set.pdfs[id];
        if !self.reference(b'u', p.mean) {
            self.vector_body(sym::MEAN, &self.set.means[p.mean]);
        }
        match p.cov {
            Covariance::Diag(v) => {
                if !self.reference(b'v', v) {
                    self.vector_body(sym::VARIANCE, &self.set.variances[v]);
                }
            }
            Covariance::InvCovar(c) => {
                if !self.reference(b'i', c) {
                    self.covar_body(sym::INVCOVAR, c);
                }
            }
            Covariance::LltCovar(c) => {
                if !self.reference(b'c', c) {
                    self.covar_body(sym::LLTCOVAR, c);
                }
            }
            Covariance::Xform(x) => {
                if !self.reference(b'x', x) {
                    self.xform_body(x);
                }
            }
        }
        if let Some(g) = p.gconst {
            self.sym(sym::GCONST);
            self.float(g);
            self.nl();
        }
    }

    fn state_body(&mut self, id: usize) {
        let st = &self.set.states[id];
        if st.streams.iter().any(|s| s.num_mixes > 1) {
            self.sym(sym::NUMMIXES);
            for s in &st.streams {
                self.short(s.num_mixes);
            }
            self.nl();
        }
        if let Some(w) = st.sweights {
            if !self.reference(b'w', w) {
                self.vector_body(sym::SWEIGHTS, &self.set.sweights[w]);
            }
        }
        let nstreams = st.streams.len();
        for (si, s) in st.streams.iter().enumerate() {
            if nstreams > 1 {
                self.sym(sym::STREAM);
                self.short(si + 1);
                self.nl();
            }
            let mut mixes: Vec<&Mixture> = s.mixtures.iter().collect();
            mixes.sort_by_key(|m| m.index);
            for m in mixes {
                if m.weight > MINMIX {
                    if s.num_mixes > 1 {
                        self.sym(sym::MIXTURE);
                        self.short(m.index);
                        self.float(m.weight);
                        self.nl();
                    }
                    if !self.reference(b'm', m.pdf) {
                        self.mixpdf_body(m.pdf);
                    }
                }
            }
        }
        if self.set.options.dur_kind != DurKind::Null {
            if let Some(d) = st.dur {
                if !self.reference(b'd', d) {
                    self.vector_body(sym::DURATION, &self.set.durations[d]);
                }
            }
        }
    }

    fn hmm_body(&mut self, id: usize) {
        let h = &self.set.hmms[id];
        self.sym(sym::BEGINHMM);
        self.nl();
        self.sym(sym::NUMSTATES);
        self.short(h.num_states);
        self.nl();
        for (i, &s) in h.states.iter().enumerate() {
            self.sym(sym::STATE);
            self.short(i + 2);
            self.nl();
            if !self.reference(b's', s) {
                self.state_body(s);
            }
        }
        if !self.reference(b't', h.transp) {
            self.transp_body(h.transp);
        }
        if self.set.options.dur_kind != DurKind::Null {
            if let Some(d) = h.dur {
                if !self.reference(b'd', d) {
                    self.vector_body(sym::DURATION, &self.set.durations[d]);
                }
            }
        }
        self.sym(sym::ENDHMM);
        self.nl();
    }
}

/// HShell's `ReWriteString(s, NULL, DBL_QUOTE)`: always in double quotes, with
/// `"` and `\` escaped and unprintable bytes as octal.
pub fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for &c in s.as_bytes() {
        match c {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(c as char);
            }
            32..=126 => out.push(c as char),
            _ => out.push_str(&format!("\\{:03o}", c)),
        }
    }
    out.push('"');
    out
}
