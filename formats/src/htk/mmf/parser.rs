//! The MMF parser: HModel.c's `LoadAllMacros` / `GetHMMDef` / `GetStateInfo` /
//! `GetStream` / `GetMixPDF` ... as a recursive-descent parser over [`Lexer`]
//! tokens, building arena objects in an [`HmmSet`].

use super::lexer::{sym, Lexer, Token};
use super::*;
use crate::error::Pos;

struct Parser<'a, 'b> {
    lx: Lexer<'a>,
    tok: Token,
    set: &'b mut HmmSet,
    file: usize,
    /// Object being parsed, for messages ("~h \"aa\" state 3").
    ctx: String,
}

pub(super) fn parse_mmf(set: &mut HmmSet, bytes: &[u8], file: usize) -> Result<()> {
    let mut p = Parser {
        lx: Lexer::new(bytes),
        tok: Token::Eof,
        set,
        file,
        ctx: String::new(),
    };
    p.advance()?;
    p.load_all()
}

fn unsupported(pos: Pos, msg: impl Into<String>) -> Error {
    Error::Unsupported {
        path: String::new(),
        pos,
        msg: msg.into(),
    }
}

impl Parser<'_, '_> {
    fn advance(&mut self) -> Result<()> {
        self.tok = self.lx.next_token()?;
        Ok(())
    }

    fn err(&self, msg: impl Into<String>) -> Error {
        let e = self.lx.err(msg);
        if self.ctx.is_empty() {
            e
        } else {
            e.with_key(&self.ctx)
        }
    }

    fn unexpected(&self, wanted: &str) -> Error {
        if let Token::Sym { code, .. } = self.tok {
            if let Some(what) = unsupported_construct(code) {
                return self.unsupported(what);
            }
        }
        if let Token::Macro(t) = self.tok {
            if b"abrfgyj".contains(&t) {
                return self.unsupported(&format!("adaptation/transform macro ~{}", t as char));
            }
        }
        self.err(format!("{wanted} expected, found {}", self.tok.describe()))
    }

    fn unsupported(&self, what: &str) -> Error {
        let ctx = if self.ctx.is_empty() {
            String::new()
        } else {
            format!(" in {}", self.ctx)
        };
        unsupported(self.lx.pos_of(self.lx.tok_start), format!("{what}{ctx}"))
    }

    fn bin(&self) -> bool {
        self.tok.bin()
    }

    /// `LoadAllMacros`.
    fn load_all(&mut self) -> Result<()> {
        loop {
            let t = match self.tok {
                Token::Eof => return Ok(()),
                Token::Macro(t) => t,
                _ => return Err(self.unexpected("macro (~o, ~h, ~s ...)")),
            };
            if t == b'o' {
                self.advance()?;
                self.get_options()?;
                continue;
            }
            if b"abrfgyj".contains(&t) {
                return Err(self.unsupported(&format!("adaptation/transform macro ~{}", t as char)));
            }
            let name = self.lx.read_string()?;
            self.ctx = format!("~{} \"{}\"", t as char, name);
            if t != b'h' && self.set.options.parm_kind.is_none() && self.set.options.vec_size == 0 {
                return Err(self.err(
                    "macro before the global options (~o with <VECSIZE> and parameter kind)",
                ));
            }
            self.advance()?;
            let target = match t {
                b'h' => self.get_hmm_def()?,
                b's' => self.get_state_body()?,
                b'm' => self.get_mixpdf_body()?,
                b'u' => self.get_mean()?,
                b'v' => self.get_variance()?,
                b'i' => self.get_covar(sym::INVCOVAR, b'i')?,
                b'c' => self.get_covar(sym::LLTCOVAR, b'c')?,
                b'x' => self.get_xform()?,
                b'w' => self.get_vector_obj(sym::SWEIGHTS, b'w')?,
                b'd' => self.get_vector_obj(sym::DURATION, b'd')?,
                b't' => self.get_transp()?,
                _ => return Err(self.err(format!("macro type ~{} not allowed here", t as char))),
            };
            let file = self.file;
            if let Err(m) = self.set.add_macro(t, name, target, file) {
                return Err(self.err(m));
            }
            self.ctx.clear();
        }
    }

    /// `GetOptions` / `GetOption`: option symbols until something else.
    fn get_options(&mut self) -> Result<usize> {
        let mut nstates = 0;
        loop {
            let (code, bin) = match self.tok {
                Token::Kind(k) => {
                    self.set.options.parm_kind = Some(k);
                    self.advance()?;
                    continue;
                }
                Token::Sym { code, bin } => (code, bin),
                _ => break,
            };
            let o = &mut self.set.options;
            match code {
                sym::NUMSTATES => nstates = self.lx.read_size(bin, "<NUMSTATES>")?,
                sym::NULLD => o.dur_kind = DurKind::Null,
                sym::POISSOND => o.dur_kind = DurKind::Poisson,
                sym::GAMMAD => o.dur_kind = DurKind::Gamma,
                sym::RELD => o.dur_kind = DurKind::Rel,
                sym::GEND => o.dur_kind = DurKind::Gen,
                sym::HMMSETID => o.hmm_set_id = Some(self.lx.read_string()?),
                sym::VECSIZE => o.vec_size = self.lx.read_size(bin, "<VECSIZE>")?,
                sym::PROJSIZE => o.proj_size = self.lx.read_size(bin, "<PROJSIZE>")?,
                sym::STREAMINFO => {
                    let s = self.lx.read_size(bin, "<STREAMINFO> stream count")?;
                    if s == 0 || s >= 32 {
                        return Err(self.err(format!("stream count {s} out of range")));
                    }
                    let w = self.lx.read_shorts(s, bin, "<STREAMINFO> stream widths")?;
                    if w.iter().any(|&x| x <= 0) {
                        return Err(self.err("stream widths must be positive"));
                    }
                    self.set.options.stream_widths = w.iter().map(|&x| x as usize).collect();
                }
                sym::DIAGC => o.cov_kind = Some(CovKind::Diag),
                sym::FULLC => o.cov_kind = Some(CovKind::Full),
                sym::XFORMC => o.cov_kind = Some(CovKind::Xform),
                sym::INVDIAGC => o.cov_kind = Some(CovKind::InvDiag),
                sym::LLTC => o.cov_kind = Some(CovKind::Llt),
                109 | 91 => {
                    return Err(self.unsupported("<INPUTXFORM>/<PARENTXFORM> in global options"))
                }
                _ => break,
            }
            self.advance()?;
        }
        self.freeze_options()?;
        Ok(nstates)
    }

    /// `FreezeOptions`: the vector size and stream widths must agree.
    fn freeze_options(&mut self) -> Result<()> {
        let o = &mut self.set.options;
        let sum: usize = o.stream_widths.iter().sum();
        if o.vec_size == 0 {
            o.vec_size = sum;
        } else if !o.stream_widths.is_empty() && sum != o.vec_size {
            let msg = format!(
                "<STREAMINFO> widths sum to {sum} but <VECSIZE> is {}",
                o.vec_size
            );
            return Err(self.err(msg));
        }
        if self.set.options.stream_widths.is_empty() && self.set.options.vec_size > 0 {
            self.set.options.stream_widths = vec![self.set.options.vec_size];
        }
        Ok(())
    }

    fn streams(&self) -> usize {
        self.set.options.stream_widths.len().max(1)
    }

    /// `GetHMMDef` (current token: `<BEGINHMM>`).
    fn get_hmm_def(&mut self) -> Result<usize> {
        if !self.tok.is(sym::BEGINHMM) {
            return Err(self.unexpected("<BEGINHMM>"));
        }
        self.advance()?;
        if self.tok.is(sym::USE) {
            return Err(self.unsupported("V1 <USE> clause"));
        }
        let mut n = 0;
        while !self.tok.is(sym::STATE) {
            match self.tok {
                Token::Sym { .. } | Token::Kind(_) => {}
                _ => return Err(self.unexpected("<NUMSTATES> or <STATE>")),
            }
            let before = self.lx.pos;
            let ns = self.get_options()?;
            if ns > 0 {
                n = ns;
            }
            if self.lx.pos == before && !self.tok.is(sym::STATE) {
                return Err(self.unexpected("<STATE>"));
            }
        }
        if self.set.options.vec_size == 0 {
            return Err(self.err("<VECSIZE> not set (no ~o options before this HMM)"));
        }
        if n < 3 {
            return Err(self.err(format!("<NUMSTATES> {n}: an HMM needs at least 3 states")));
        }
        let mut states: Vec<Option<usize>> = vec![None; n - 2];
        let hctx = self.ctx.clone();
        while self.tok.is(sym::STATE) {
            let i = self.lx.read_size(self.bin(), "<STATE> index")?;
            if i < 2 || i >= n {
                return Err(self.err(format!("state index {i} out of range 2..{}", n - 1)));
            }
            self.ctx = format!("{hctx} state {i}");
            self.advance()?;
            let s = if self.tok.is_macro(b's') {
                let s = self.macro_ref(b's')?;
                self.advance()?;
                s
            } else {
                self.get_state_body()?
            };
            states[i - 2] = Some(s);
        }
        self.ctx = hctx;
        let states: Vec<usize> = match states.iter().position(|s| s.is_none()) {
            Some(missing) => return Err(self.err(format!("state {} not defined", missing + 2))),
            None => states.into_iter().flatten().collect(),
        };
        let transp = if self.tok.is(sym::TRANSP) || self.tok.is_macro(b't') {
            self.get_transp()?
        } else {
            return Err(self.unexpected("<TRANSP> (transition matrix)"));
        };
        let tn = self.set.transps[transp].n;
        if tn != n {
            return Err(self.err(format!(
                "transition matrix is {tn}x{tn} but <NUMSTATES> is {n}"
            )));
        }
        let dur = if self.tok.is(sym::DURATION) || self.tok.is_macro(b'd') {
            Some(self.get_vector_obj(sym::DURATION, b'd')?)
        } else {
            None
        };
        if !self.tok.is(sym::ENDHMM) {
            return Err(self.unexpected("<ENDHMM>"));
        }
        self.advance()?;
        self.set.hmms.push(Hmm {
            num_states: n,
            states,
            transp,
            dur,
        });
        Ok(self.set.hmms.len() - 1)
    }

    /// Name after a `~x` reference, resolved to its arena index.
    fn macro_ref(&mut self, kind: u8) -> Result<usize> {
        let at = self.lx.tok_start;
        let name = self.lx.read_string()?;
        match self.set.find_macro(kind, &name) {
            Some(m) => Ok(m.target),
            None => Err(Error::format(
                self.lx.pos_of(at),
                format!(
                    "reference to undefined macro ~{} \"{}\"",
                    kind as char, name
                ),
            )
            .with_key(&self.ctx)),
        }
    }

    /// `GetStateInfo` without the `~s` reference case.
    fn get_state_body(&mut self) -> Result<usize> {
        let s_count = self.streams();
        let mut nmix = vec![1usize; s_count];
        if self.tok.is(sym::NUMMIXES) {
            let v = self.lx.read_shorts(s_count, self.bin(), "<NUMMIXES>")?;
            if v.iter().any(|&x| x < 1) {
                return Err(self.err("<NUMMIXES> must be at least 1"));
            }
            nmix = v.iter().map(|&x| x as usize).collect();
            self.advance()?;
        }
        let sweights = if self.tok.is(sym::SWEIGHTS) || self.tok.is_macro(b'w') {
            let w = self.get_vector_obj(sym::SWEIGHTS, b'w')?;
            if self.set.sweights[w].len() != s_count {
                return Err(self.err(format!(
                    "{} stream weights for {s_count} streams",
                    self.set.sweights[w].len()
                )));
            }
            Some(w)
        } else {
            None
        };
        let mut streams: Vec<Option<Stream>> = vec![None; s_count];
        loop {
            let mut s = 1;
            if self.tok.is(sym::STREAM) {
                s = self.lx.read_size(self.bin(), "<STREAM> index")?;
                if s < 1 || s > s_count {
                    return Err(self.err(format!("stream index {s} out of range 1..{s_count}")));
                }
                self.advance()?;
            }
            let st = self.get_stream(s, nmix[s - 1])?;
            streams[s - 1] = Some(st);
            if !self.tok.is(sym::STREAM) {
                break;
            }
        }
        let streams: Vec<Stream> = match streams.iter().position(|s| s.is_none()) {
            Some(m) => return Err(self.err(format!("stream {} missing", m + 1))),
            None => streams.into_iter().flatten().collect(),
        };
        let dur = if self.tok.is(sym::DURATION) || self.tok.is_macro(b'd') {
            Some(self.get_vector_obj(sym::DURATION, b'd')?)
        } else {
            None
        };
        self.set.states.push(State {
            streams,
            sweights,
            dur,
        });
        Ok(self.set.states.len() - 1)
    }

    /// `GetStream` + `GetMixture` for stream `s` (1-based) with `m` components.
    fn get_stream(&mut self, s: usize, m: usize) -> Result<Stream> {
        if self.tok.is(sym::TMIX) {
            return Err(self.unsupported("tied-mixture <TMIX> stream"));
        }
        if self.tok.is(sym::DPROB) {
            return Err(self.unsupported("discrete <DPROB> stream"));
        }
        let width = self
            .set
            .options
            .stream_widths
            .get(s - 1)
            .copied()
            .unwrap_or(self.set.options.vec_size);
        let mut mixtures: Vec<Mixture> = Vec::new();
        loop {
            let at = self.lx.tok_start;
            let (mut idx, mut w) = (1usize, 1.0f32);
            if self.tok.is(sym::MIXTURE) {
                let bin = self.bin();
                idx = self.lx.read_size(bin, "<MIXTURE> index")?;
                if idx < 1 || idx > m {
                    return Err(self.err(format!("mixture index {idx} out of range 1..{m}")));
                }
                w = self.lx.read_float(bin, "<MIXTURE> weight")?;
                self.advance()?;
            }
            let pdf = if self.tok.is_macro(b'm') {
                let p = self.macro_ref(b'm')?;
                self.advance()?;
                p
            } else {
                self.get_mixpdf_body()?
            };
            self.check_pdf_size(pdf, width, s, idx)
                .map_err(|e| match e {
                    Error::Format { path, key, msg, .. } => Error::Format {
                        path,
                        key,
                        pos: self.lx.pos_of(at),
                        msg,
                    },
                    e => e,
                })?;
            if mixtures.iter().any(|x| x.index == idx) {
                return Err(self.err(format!("mixture {idx} defined twice")));
            }
            mixtures.push(Mixture {
                index: idx,
                weight: w,
                pdf,
            });
            if !self.tok.is(sym::MIXTURE) {
                break;
            }
        }
        let sum: f64 = mixtures.iter().map(|x| x.weight as f64).sum();
        if !(0.99..=1.01).contains(&sum) {
            return Err(self.err(format!(
                "mixture weights of stream {s} sum to {sum:e}, not 1"
            )));
        }
        Ok(Stream {
            num_mixes: m,
            mixtures,
        })
    }

    /// `CheckMix`: a Gaussian's sizes must equal its stream's width.
    fn check_pdf_size(&self, pdf: usize, width: usize, s: usize, m: usize) -> Result<()> {
        let p = &self.set.pdfs[pdf];
        let ml = self.set.means[p.mean].len();
        let cl = match p.cov {
            Covariance::Diag(v) => self.set.variances[v].len(),
            Covariance::InvCovar(c) | Covariance::LltCovar(c) => self.set.covars[c].n,
            Covariance::Xform(x) => self.set.xforms[x].cols,
        };
        if ml != width || cl != width {
            return Err(self.err(format!(
                "stream {s} mixture {m}: mean size {ml} / covariance size {cl} disagree with stream width {width} (<VECSIZE>/<STREAMINFO>)"
            )));
        }
        Ok(())
    }

    /// `GetMixPDF` without the `~m` reference case.
    fn get_mixpdf_body(&mut self) -> Result<usize> {
        let mean = if self.tok.is(sym::MEAN) || self.tok.is_macro(b'u') {
            self.get_mean()?
        } else {
            return Err(self.unexpected("<MEAN>"));
        };
        let cov = if self.tok.is(sym::VARIANCE) || self.tok.is_macro(b'v') {
            Covariance::Diag(self.get_variance()?)
        } else if self.tok.is(sym::INVCOVAR) || self.tok.is_macro(b'i') {
            Covariance::InvCovar(self.get_covar(sym::INVCOVAR, b'i')?)
        } else if self.tok.is(sym::LLTCOVAR) || self.tok.is_macro(b'c') {
            Covariance::LltCovar(self.get_covar(sym::LLTCOVAR, b'c')?)
        } else if self.tok.is(sym::XFORM) || self.tok.is_macro(b'x') {
            Covariance::Xform(self.get_xform()?)
        } else {
            return Err(self.unexpected("<VARIANCE>, <INVCOVAR>, <LLTCOVAR> or <XFORM>"));
        };
        let mut gconst = None;
        if self.tok.is(sym::GCONST) {
            gconst = Some(self.lx.read_float(self.bin(), "<GCONST>")?);
            self.advance()?;
        }
        self.set.pdfs.push(MixPdf { mean, cov, gconst });
        Ok(self.set.pdfs.len() - 1)
    }

    /// `<KEY> n` + n floats, or a `~x` reference; returns the vector (new) or
    /// `Err(index)` for a reference.
    fn vector_or_ref(
        &mut self,
        code: u8,
        kind: u8,
        what: &str,
    ) -> Result<std::result::Result<Vec<f32>, usize>> {
        if self.tok.is(code) {
            let bin = self.bin();
            let n = self.lx.read_size(bin, what)?;
            let v = self.lx.read_floats(n, bin, what)?;
            self.advance()?;
            Ok(Ok(v))
        } else if self.tok.is_macro(kind) {
            let i = self.macro_ref(kind)?;
            self.advance()?;
            Ok(Err(i))
        } else {
            Err(self.unexpected(what))
        }
    }

    fn get_mean(&mut self) -> Result<usize> {
        match self.vector_or_ref(sym::MEAN, b'u', "<MEAN>")? {
            Ok(v) => {
                self.set.means.push(v);
                Ok(self.set.means.len() - 1)
            }
            Err(i) => Ok(i),
        }
    }

    fn get_variance(&mut self) -> Result<usize> {
        let at = self.lx.tok_start;
        match self.vector_or_ref(sym::VARIANCE, b'v', "<VARIANCE>")? {
            Ok(v) => {
                if let Some(j) = v.iter().position(|x| x.is_nan() || *x < 0.0) {
                    return Err(Error::format(
                        self.lx.pos_of(at),
                        format!("negative or NaN variance {} in element {}", v[j], j + 1),
                    )
                    .with_key(&self.ctx));
                }
                self.set.variances.push(v);
                Ok(self.set.variances.len() - 1)
            }
            Err(i) => Ok(i),
        }
    }

    fn get_vector_obj(&mut self, code: u8, kind: u8) -> Result<usize> {
        let what = if code == sym::SWEIGHTS {
            "<SWEIGHTS>"
        } else {
            "<DURATION>"
        };
        match self.vector_or_ref(code, kind, what)? {
            Ok(v) => {
                let arena = if code == sym::SWEIGHTS {
                    &mut self.set.sweights
                } else {
                    &mut self.set.durations
                };
                arena.push(v);
                Ok(arena.len() - 1)
            }
            Err(i) => Ok(i),
        }
    }

    fn get_covar(&mut self, code: u8, kind: u8) -> Result<usize> {
        if self.tok.is(code) {
            let bin = self.bin();
            let what = if code == sym::INVCOVAR {
                "<INVCOVAR>"
            } else {
                "<LLTCOVAR>"
            };
            let n = self.lx.read_size(bin, what)?;
            let upper = self.lx.read_floats(n * (n + 1) / 2, bin, what)?;
            self.advance()?;
            self.set.covars.push(TriMat { n, upper });
            Ok(self.set.covars.len() - 1)
        } else if self.tok.is_macro(kind) {
            let i = self.macro_ref(kind)?;
            self.advance()?;
            Ok(i)
        } else {
            Err(self.unexpected(if code == sym::INVCOVAR {
                "<INVCOVAR>"
            } else {
                "<LLTCOVAR>"
            }))
        }
    }

    fn get_xform(&mut self) -> Result<usize> {
        if self.tok.is(sym::XFORM) {
            let bin = self.bin();
            let rows = self.lx.read_size(bin, "<XFORM> rows")?;
            let cols = self.lx.read_size(bin, "<XFORM> columns")?;
            let data = self.lx.read_floats(rows * cols, bin, "<XFORM>")?;
            self.advance()?;
            self.set.xforms.push(Matrix { rows, cols, data });
            Ok(self.set.xforms.len() - 1)
        } else if self.tok.is_macro(b'x') {
            let i = self.macro_ref(b'x')?;
            self.advance()?;
            Ok(i)
        } else {
            Err(self.unexpected("<XFORM>"))
        }
    }

    /// `GetTransMat`: rows 1..N-1 must sum to 1 (±0.01), as HTK checks.
    fn get_transp(&mut self) -> Result<usize> {
        if self.tok.is(sym::TRANSP) {
            let bin = self.bin();
            let at = self.lx.tok_start;
            let n = self.lx.read_size(bin, "<TRANSP> size")?;
            if n < 1 {
                return Err(self.err("bad transition matrix size 0"));
            }
            let probs = self.lx.read_floats(n * n, bin, "<TRANSP>")?;
            for i in 0..n - 1 {
                let sum: f32 = probs[i * n..(i + 1) * n].iter().sum();
                if !(0.99..=1.01).contains(&sum) {
                    return Err(Error::format(
                        self.lx.pos_of(at),
                        format!("transition matrix row {} sums to {sum}, not 1", i + 1),
                    )
                    .with_key(&self.ctx));
                }
            }
            self.advance()?;
            self.set.transps.push(TransP { n, probs });
            Ok(self.set.transps.len() - 1)
        } else if self.tok.is_macro(b't') {
            let i = self.macro_ref(b't')?;
            self.advance()?;
            Ok(i)
        } else {
            Err(self.unexpected("<TRANSP>"))
        }
    }
}

/// Keywords that are valid HTK but that amtool refuses.
fn unsupported_construct(code: u8) -> Option<&'static str> {
    Some(match code {
        sym::TMIX => "tied-mixture <TMIX> stream",
        sym::DPROB => "discrete <DPROB> stream",
        sym::USE => "V1 <USE> clause",
        90..=113 => "adaptation transform / regression tree keyword",
        _ => return None,
    })
}
