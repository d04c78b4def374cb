//! Kaldi GMM model files and single-object files: `final.mdl` (a
//! `TransitionModel` followed by an `AmDiagGmm`), and the helpers that read or
//! write one object with its `\0B` binary marker. Also [`ObjectKind`]: what a
//! Kaldi file holds, judged from its first token, so that `amtool copy` can
//! pick the right reader and say clearly when a file is a tree or an nnet.

use std::io::{self, Write};

use crate::error::{Error, Pos, Result};
use crate::kaldi::gmm::{context, AmDiagGmm};
use crate::kaldi::io::{read_binary_header, Reader, Writer};
use crate::kaldi::object::KaldiObject;
use crate::kaldi::transition::TransitionModel;

/// Read one object from a whole file's bytes: the binary marker decides the
/// mode. Like Kaldi, data after the object is ignored.
pub(crate) fn read_single<T>(
    buf: &[u8],
    what: &str,
    read: impl FnOnce(&mut Reader<'_>) -> Result<T>,
) -> Result<T> {
    let (binary, hdr) = read_binary_header(buf)?;
    let mut r = Reader::with_base(&buf[hdr..], binary, hdr as u64);
    read(&mut r).map_err(|e| {
        let e = context(e, format!("reading {what}"));
        match kind_hint(buf) {
            Some(hint) => context(e, hint),
            None => e,
        }
    })
}

/// If the file is of a kind that is not a GMM object at all, say so (used to
/// explain a failed read).
fn kind_hint(buf: &[u8]) -> Option<String> {
    match ObjectKind::detect(buf) {
        ObjectKind::Other(k) => Some(k.to_string()),
        _ => None,
    }
}

/// The bytes of one object as Kaldi writes it to a file (marker included).
pub(crate) fn write_single(
    binary: bool,
    write: impl FnOnce(&mut Writer<Vec<u8>>) -> io::Result<()>,
) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), binary);
    // Writing to a Vec only fails for invalid tokens, which the objects never
    // write; an error would leave the output short, so it is surfaced by the
    // callers' round-trip tests rather than hidden.
    let _ = w.write_binary_marker();
    let _ = write(&mut w);
    w.into_inner()
}

/// A Kaldi GMM model file: what `gmm-init-mono`, `gmm-est` and `gmm-copy` write.
#[derive(Debug, Clone, PartialEq)]
pub struct KaldiModel {
    pub trans: TransitionModel,
    pub am: AmDiagGmm,
}

impl KaldiModel {
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        let trans = TransitionModel::read(r)?;
        let at = r.pos();
        if r.at_end() {
            return Err(r.error_at(
                at,
                "the file holds a TransitionModel only, with no AmDiagGmm after it (an nnet1 transition model?), not a GMM model",
            ));
        }
        if let Ok(tok) = r.peek_token() {
            if tok.starts_with("<Nnet") || tok.starts_with("<AmNnet") {
                return Err(r.error_at(at, format!("this file holds an nnet model ({tok} after the TransitionModel), not a GMM model")));
            }
        }
        let am =
            AmDiagGmm::read(r).map_err(|e| context(e, "AmDiagGmm after the TransitionModel"))?;
        if am.num_pdfs() != trans.num_pdfs() {
            return Err(r.error_at(
                at,
                format!(
                    "wrong dims: the AmDiagGmm has {} pdfs, the TransitionModel uses {}",
                    am.num_pdfs(),
                    trans.num_pdfs()
                ),
            ));
        }
        Ok(KaldiModel { trans, am })
    }

    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        self.trans.write(w)?;
        self.am.write(w)
    }

    /// Read a whole model file.
    pub fn from_bytes(buf: &[u8]) -> Result<Self> {
        read_single(
            buf,
            "GMM model (TransitionModel + AmDiagGmm)",
            KaldiModel::read,
        )
    }

    /// The whole model file as `gmm-copy --binary=...` writes it.
    pub fn to_bytes(&self, binary: bool) -> Vec<u8> {
        write_single(binary, |w| self.write(w))
    }
}

/// What a Kaldi object file holds, judged from its first token (and, for
/// accumulators and vectors, the token after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// `TransitionModel` + `AmDiagGmm` (gmm-copy).
    Model,
    /// `<DiagGMM>` (gmm-global-copy).
    DiagGmm,
    /// `<FullGMM>` (fgmm-global-copy).
    FullGmm,
    /// `<DIMENSION>`: an AmDiagGmm alone.
    AmDiagGmm,
    /// `<Topology>`.
    Topology,
    /// gmm-acc-stats-ali / gmm-acc-stats output: transition accs then `<NUMPDFS>`.
    AmAccs,
    /// `<GMMACCS>` with `<DIAGVARACCS>` (gmm-global-acc-stats).
    DiagAccs,
    /// `<GMMACCS>` with `<FULLVARACCS>` or no variance block (fgmm-global-acc-stats).
    FullAccs,
    /// A Kaldi vector (`FV`/`DV`, or text ` [ ... ]`), e.g. `final.occs`.
    Vector,
    /// A Kaldi matrix (`FM`/`DM`/`CM*`).
    Matrix,
    /// Something amtool recognises but does not handle here; the text says what.
    Other(&'static str),
    /// Not recognised.
    Unknown,
}

impl ObjectKind {
    /// Look at the start of a file. Files that are no Kaldi object at all
    /// (archives, script files, symbol tables, FSTs, gzip files) are
    /// [`ObjectKind::Other`] with a text that says what they are.
    pub fn detect(buf: &[u8]) -> ObjectKind {
        match Self::detect_object(buf) {
            ObjectKind::Unknown => {
                not_an_object(buf).map_or(ObjectKind::Unknown, ObjectKind::Other)
            }
            k => k,
        }
    }

    fn detect_object(buf: &[u8]) -> ObjectKind {
        let Ok((binary, hdr)) = read_binary_header(buf) else {
            return ObjectKind::Unknown;
        };
        let mut r = Reader::new(&buf[hdr..], binary);
        if !binary && r.peek() == Some(b'[') {
            // A text vector or matrix; a vector followed by <NUMPDFS> is an acc file.
            return match crate::kaldi::blocks::read_vector_f64(&mut r) {
                Ok(_) if r.peek_token().ok() == Some("<NUMPDFS>") => ObjectKind::AmAccs,
                _ => {
                    let mut r = Reader::new(&buf[hdr..], false);
                    r.skip_ws();
                    if buf[hdr..]
                        .get(r.pos() + 1..r.pos() + 3)
                        .is_some_and(|s| s.starts_with(b"\n") || s.starts_with(b"\r"))
                    {
                        ObjectKind::Matrix
                    } else {
                        ObjectKind::Vector
                    }
                }
            };
        }
        let Ok(tok) = r.peek_token() else {
            return ObjectKind::Unknown;
        };
        match tok {
            "<TransitionModel>" => ObjectKind::Model,
            "<DiagGMM>" | "<DiagGMMBegin>" => ObjectKind::DiagGmm,
            "<FullGMM>" | "<FullGMMBegin>" => ObjectKind::FullGmm,
            "<DIMENSION>" => ObjectKind::AmDiagGmm,
            "<Topology>" => ObjectKind::Topology,
            "<GMMACCS>" => {
                let rest = &buf[hdr..];
                if contains(rest, b"<DIAGVARACCS>") {
                    ObjectKind::DiagAccs
                } else {
                    ObjectKind::FullAccs
                }
            }
            "FV" | "DV" => {
                let _ = crate::kaldi::blocks::read_vector_f64(&mut r);
                if r.peek_token().ok() == Some("<NUMPDFS>") {
                    ObjectKind::AmAccs
                } else {
                    ObjectKind::Vector
                }
            }
            "FM" | "DM" | "CM" | "CM2" | "CM3" => ObjectKind::Matrix,
            "ContextDependency" => {
                ObjectKind::Other("this file holds a Kaldi ContextDependency tree (decision tree), which amtool does not read")
            }
            "<Questions>" => {
                ObjectKind::Other("this file holds Kaldi tree-building Questions, which amtool does not read")
            }
            "<Nnet>" | "<Nnet3>" | "<AmNnet>" | "<NnetProto>" => {
                ObjectKind::Other("this file holds an nnet model, not a GMM model")
            }
            t if t.starts_with("<Nnet") => {
                ObjectKind::Other("this file holds an nnet model, not a GMM model")
            }
            "<SGMM>" | "<AmSgmm>" | "<AmSgmm2>" => {
                ObjectKind::Other("this file holds an SGMM, not a GMM model")
            }
            _ => ObjectKind::Unknown,
        }
    }

    /// An error for a file of this kind where `wanted` was expected.
    pub fn mismatch_error(self, path: &str, wanted: &str) -> Error {
        let msg = match self {
            ObjectKind::Other(s) => format!("{s}; expected {wanted}"),
            ObjectKind::Unknown => {
                format!("not a Kaldi object amtool recognises; expected {wanted}")
            }
            k => format!("this file holds {}, not {wanted}", k.describe()),
        };
        Error::Format {
            path: path.to_string(),
            key: None,
            pos: Pos::Byte(0),
            msg,
        }
    }

    /// A short description for messages.
    pub fn describe(self) -> &'static str {
        match self {
            ObjectKind::Model => "a GMM model (TransitionModel + AmDiagGmm)",
            ObjectKind::DiagGmm => "a DiagGmm",
            ObjectKind::FullGmm => "a FullGmm",
            ObjectKind::AmDiagGmm => "an AmDiagGmm",
            ObjectKind::Topology => "an HMM topology",
            ObjectKind::AmAccs => "GMM accumulators (gmm-acc-stats-ali)",
            ObjectKind::DiagAccs => "diagonal GMM accumulators (gmm-global-acc-stats)",
            ObjectKind::FullAccs => "full-covariance GMM accumulators (fgmm-global-acc-stats)",
            ObjectKind::Vector => "a vector",
            ObjectKind::Matrix => "a matrix",
            ObjectKind::Other(s) => s,
            ObjectKind::Unknown => "an unrecognised object",
        }
    }
}

/// What a file that is not one Kaldi object holds, judged from its start.
fn not_an_object(buf: &[u8]) -> Option<&'static str> {
    if buf.starts_with(&[0x1f, 0x8b]) {
        return Some("this file is gzip-compressed; read it through a pipe (\"gunzip -c FILE |\", or \"ark:gunzip -c FILE|\" for an archive)");
    }
    if buf.starts_with(&0x7eb2fdd6u32.to_le_bytes()) {
        return Some(
            "this file holds an OpenFst FST (a decoding graph), which amtool does not read",
        );
    }
    // Text: the first word, then what follows it on its line.
    let word_end = buf.iter().position(|c| c.is_ascii_whitespace())?;
    if word_end == 0 || buf[..word_end].iter().any(|&c| !c.is_ascii_graphic()) {
        return None;
    }
    let after = &buf[word_end + 1..];
    if after.starts_with(&0x7eb2fdd6u32.to_le_bytes()) {
        return Some("this file is a Kaldi archive of OpenFst FSTs (e.g. training graphs or lattices), which amtool copy does not read");
    }
    if after.starts_with(b"\0B") {
        return Some("this file is a Kaldi archive (KEY object ...), not a single object; give it as ark:FILE");
    }
    let first_line = buf.split(|&c| c == b'\n').next().unwrap_or(&[]);
    let line_text = String::from_utf8_lossy(first_line);
    let fields: Vec<&str> = line_text.split_whitespace().collect();
    if fields.get(1) == Some(&"[")
        || fields
            .get(1)
            .is_some_and(|f| f.starts_with('<') && f.ends_with('>'))
    {
        return Some("this file is a Kaldi text archive (KEY object entries), not a single object; give it as ark:FILE");
    }
    let lines: Vec<String> = buf
        .split(|&c| c == b'\n')
        .take(50)
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .filter(|l| !l.trim().is_empty())
        .collect();
    let two_fields = |l: &String| l.split_whitespace().count() == 2;
    if !lines.is_empty() && lines.iter().all(two_fields) {
        let second = |l: &String| l.split_whitespace().nth(1).unwrap_or("").to_string();
        if lines.iter().all(|l| second(l).parse::<i64>().is_ok()) {
            return Some("this file is a symbol table (symbol and integer per line, like words.txt or phones.txt), not a Kaldi object");
        }
        if lines.iter().all(|l| second(l).parse::<f64>().is_ok()) {
            return Some("this file is a Kaldi text archive (KEY value per line), not a single object; give it as ark:FILE");
        }
        return Some(
            "this file is a Kaldi script file (KEY location per line); give it as scp:FILE",
        );
    }
    if fields.len() > 1
        && fields[1..]
            .iter()
            .all(|f| f.parse::<i64>().is_ok() || *f == ";")
    {
        return Some("this file is a Kaldi text archive of integer vectors (KEY 1 2 3 ... per line); give it as ark:FILE");
    }
    None
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

impl KaldiObject for KaldiModel {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        KaldiModel::read(r)
    }
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        KaldiModel::write(self, w)
    }
}
