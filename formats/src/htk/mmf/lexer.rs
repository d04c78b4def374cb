//! The MMF scanner, after HModel.c's `GetToken`: `<KEYWORD>` (case-insensitive),
//! `:` + one byte (the binary form of a keyword), `~x` macro headers, a
//! parameter kind such as `<MFCC_0_D_A>`, and the numbers and strings that
//! follow them — as text (`%d`, `%e`) or, after a binary keyword, as big-endian
//! shorts and floats.

use crate::error::{Error, Pos, Result};
use crate::htk::parmkind::ParmKind;

/// Keyword codes: HModel.c's `Symbol` enum, which is also the byte that follows
/// `:` in a binary MMF.
#[allow(missing_docs)]
pub mod sym {
    pub const BEGINHMM: u8 = 0;
    pub const USE: u8 = 1;
    pub const ENDHMM: u8 = 2;
    pub const NUMMIXES: u8 = 3;
    pub const NUMSTATES: u8 = 4;
    pub const STREAMINFO: u8 = 5;
    pub const VECSIZE: u8 = 6;
    pub const NULLD: u8 = 7;
    pub const POISSOND: u8 = 8;
    pub const GAMMAD: u8 = 9;
    pub const RELD: u8 = 10;
    pub const GEND: u8 = 11;
    pub const DIAGC: u8 = 12;
    pub const FULLC: u8 = 13;
    pub const XFORMC: u8 = 14;
    pub const STATE: u8 = 15;
    pub const TMIX: u8 = 16;
    pub const MIXTURE: u8 = 17;
    pub const STREAM: u8 = 18;
    pub const SWEIGHTS: u8 = 19;
    pub const MEAN: u8 = 20;
    pub const VARIANCE: u8 = 21;
    pub const INVCOVAR: u8 = 22;
    pub const XFORM: u8 = 23;
    pub const GCONST: u8 = 24;
    pub const DURATION: u8 = 25;
    pub const INVDIAGC: u8 = 26;
    pub const TRANSP: u8 = 27;
    pub const DPROB: u8 = 28;
    pub const LLTC: u8 = 29;
    pub const LLTCOVAR: u8 = 30;
    pub const PROJSIZE: u8 = 31;
    pub const HMMSETID: u8 = 119;
}

/// Every keyword HModel.c knows, with its code (adaptation-transform keywords
/// are recognised so that they can be refused by name).
pub const KEYWORDS: &[(&str, u8)] = &[
    ("BEGINHMM", 0),
    ("USE", 1),
    ("ENDHMM", 2),
    ("NUMMIXES", 3),
    ("NUMSTATES", 4),
    ("STREAMINFO", 5),
    ("VECSIZE", 6),
    ("NULLD", 7),
    ("POISSOND", 8),
    ("GAMMAD", 9),
    ("RELD", 10),
    ("GEND", 11),
    ("DIAGC", 12),
    ("FULLC", 13),
    ("XFORMC", 14),
    ("STATE", 15),
    ("TMIX", 16),
    ("MIXTURE", 17),
    ("STREAM", 18),
    ("SWEIGHTS", 19),
    ("MEAN", 20),
    ("VARIANCE", 21),
    ("INVCOVAR", 22),
    ("XFORM", 23),
    ("GCONST", 24),
    ("DURATION", 25),
    ("INVDIAGC", 26),
    ("TRANSP", 27),
    ("DPROB", 28),
    ("LLTC", 29),
    ("LLTCOVAR", 30),
    ("PROJSIZE", 31),
    ("XFORMKIND", 90),
    ("PARENTXFORM", 91),
    ("NUMXFORMS", 92),
    ("XFORMSET", 93),
    ("LINXFORM", 94),
    ("OFFSET", 95),
    ("BIAS", 96),
    ("LOGDET", 97),
    ("BLOCKINFO", 98),
    ("BLOCK", 99),
    ("BASECLASS", 100),
    ("CLASS", 101),
    ("XFORMWGTSET", 102),
    ("CLASSXFORM", 103),
    ("MMFIDMASK", 104),
    ("PARAMETERS", 105),
    ("NUMCLASSES", 106),
    ("ADAPTKIND", 107),
    ("PREQUAL", 108),
    ("INPUTXFORM", 109),
    ("RCLASS", 110),
    ("REGTREE", 111),
    ("NODE", 112),
    ("TNODE", 113),
    ("HMMSETID", 119),
];

/// The name of a keyword code (for messages and the text writer).
pub fn keyword_name(code: u8) -> &'static str {
    KEYWORDS
        .iter()
        .find(|(_, c)| *c == code)
        .map(|(n, _)| *n)
        .unwrap_or("?")
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Token {
    /// `~x`: a macro header of type `x` (lower case); `.`/`#!MMF!#` give `~h`.
    Macro(u8),
    /// A keyword; `bin` when written as `:` + code (then numbers are binary).
    Sym {
        code: u8,
        bin: bool,
    },
    /// `<MFCC_0_D_A>` and the like.
    Kind(ParmKind),
    Eof,
}

impl Token {
    pub fn is(&self, code: u8) -> bool {
        matches!(self, Token::Sym { code: c, .. } if *c == code)
    }
    pub fn is_macro(&self, t: u8) -> bool {
        matches!(self, Token::Macro(m) if *m == t)
    }
    pub fn bin(&self) -> bool {
        matches!(self, Token::Sym { bin: true, .. })
    }
    pub fn describe(&self) -> String {
        match self {
            Token::Macro(t) => format!("~{}", *t as char),
            Token::Sym { code, .. } => format!("<{}>", keyword_name(*code)),
            Token::Kind(k) => format!("<{k}>"),
            Token::Eof => "end of file".into(),
        }
    }
}

pub struct Lexer<'a> {
    b: &'a [u8],
    pub pos: usize,
    /// Set once a binary keyword was seen: errors then give byte offsets.
    pub binary: bool,
    /// Byte offset where the current token started (for error positions).
    pub tok_start: usize,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

impl<'a> Lexer<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Lexer {
            b,
            pos: 0,
            binary: false,
            tok_start: 0,
        }
    }

    /// Line (text) or byte offset (binary) of byte `at`.
    pub fn pos_of(&self, at: usize) -> Pos {
        let at = at.min(self.b.len());
        if self.binary {
            Pos::Byte(at as u64)
        } else {
            Pos::Line(1 + self.b[..at].iter().filter(|&&c| c == b'\n').count())
        }
    }

    pub fn err(&self, msg: impl Into<String>) -> Error {
        Error::format(self.pos_of(self.tok_start), msg)
    }

    pub fn err_here(&self, msg: impl Into<String>) -> Error {
        Error::format(self.pos_of(self.pos), msg)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while let Some(c) = self.peek() {
            if !is_space(c) {
                break;
            }
            self.pos += 1;
        }
    }

    pub fn next_token(&mut self) -> Result<Token> {
        self.skip_space();
        self.tok_start = self.pos;
        let Some(c) = self.peek() else {
            return Ok(Token::Eof);
        };
        self.pos += 1;
        match c {
            b'~' => {
                let t = self.peek().map(|c| c.to_ascii_lowercase());
                self.pos += 1;
                match t {
                    Some(t) if b"smuxdcrabgfyjvitwho".contains(&t) => Ok(Token::Macro(t)),
                    Some(t) if t.is_ascii_graphic() => Err(self.err(format!(
                        "unknown macro type ~{} (HTK's are ~s ~m ~u ~x ~d ~c ~r ~a ~b ~g ~f ~y ~j ~v ~i ~t ~w ~h ~o)",
                        t as char
                    ))),
                    _ => Err(self.err("illegal macro type after '~'")),
                }
            }
            b'#' => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c != b'#') {
                    self.pos += 1;
                }
                let word = &self.b[start..self.pos];
                self.pos += 1;
                if word == b"!MMF!" {
                    Ok(Token::Macro(b'h'))
                } else {
                    Err(self.err("expecting V1 style MMF header #!MMF!#"))
                }
            }
            b'.' => {
                self.skip_space();
                if self.peek().is_none() {
                    Ok(Token::Eof)
                } else {
                    Ok(Token::Macro(b'h'))
                }
            }
            b'<' => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c != b'>') && self.pos - start < 64 {
                    self.pos += 1;
                }
                if self.peek() != Some(b'>') {
                    return Err(self.err("'>' missing in symbol"));
                }
                let word = String::from_utf8_lossy(&self.b[start..self.pos]).to_ascii_uppercase();
                self.pos += 1;
                if let Some((_, code)) = KEYWORDS.iter().find(|(n, _)| *n == word) {
                    return Ok(Token::Sym {
                        code: *code,
                        bin: false,
                    });
                }
                match word.parse::<ParmKind>() {
                    Ok(k) => Ok(Token::Kind(k)),
                    Err(_) => Err(self.err(format!("unknown symbol <{word}>"))),
                }
            }
            b':' => {
                self.binary = true;
                match self.peek() {
                    Some(code) if code < 120 => {
                        self.pos += 1;
                        Ok(Token::Sym { code, bin: true })
                    }
                    Some(code) => Err(self.err(format!("unknown binary symbol code {code}"))),
                    None => Err(self.err("file ends after ':'")),
                }
            }
            _ => Err(self.err(format!(
                "symbol expected, found '{}'",
                (c as char).escape_default()
            ))),
        }
    }

    /// HShell's `ReadString`: a word, or a `"..."`/`'...'` string with `\`
    /// escapes (`\\`, `\"`, octal `\ooo`).
    pub fn read_string(&mut self) -> Result<String> {
        self.skip_space();
        let start = self.pos;
        let mut out = Vec::new();
        let q = match self.peek() {
            None => return Err(self.err_here("string expected, found end of file")),
            Some(c @ (b'"' | b'\'')) => {
                self.pos += 1;
                Some(c)
            }
            _ => None,
        };
        loop {
            let Some(c) = self.peek() else {
                if q.is_some() {
                    return Err(Error::format(
                        self.pos_of(start),
                        "unterminated quoted string",
                    ));
                }
                break;
            };
            if q.is_none() && is_space(c) {
                break;
            }
            self.pos += 1;
            if Some(c) == q {
                break;
            }
            if c == b'\\' {
                let d: Vec<u8> = self.b[self.pos..].iter().take(3).copied().collect();
                if d.len() == 3 && d.iter().all(|x| (b'0'..=b'7').contains(x)) {
                    out.push(((d[0] - b'0') << 6) | ((d[1] - b'0') << 3) | (d[2] - b'0'));
                    self.pos += 3;
                } else if let Some(&e) = d.first() {
                    out.push(e);
                    self.pos += 1;
                }
                continue;
            }
            out.push(c);
        }
        if out.is_empty() && q.is_none() {
            return Err(Error::format(self.pos_of(start), "string expected"));
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn text_word(&mut self) -> &'a [u8] {
        self.skip_space();
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| !is_space(c) && c != b'<' && c != b'~' && c != b':')
        {
            self.pos += 1;
        }
        &self.b[start..self.pos]
    }

    pub fn read_shorts(&mut self, n: usize, bin: bool, what: &str) -> Result<Vec<i16>> {
        let mut v = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            if bin {
                let Some(s) = self.b.get(self.pos..self.pos + 2) else {
                    return Err(self.err_here(format!("file truncated in {what}")));
                };
                v.push(i16::from_be_bytes([s[0], s[1]]));
                self.pos += 2;
            } else {
                let at = self.pos;
                let w = self.text_word();
                match std::str::from_utf8(w)
                    .ok()
                    .and_then(|s| s.parse::<i16>().ok())
                {
                    Some(x) => v.push(x),
                    None => {
                        self.pos = at;
                        self.skip_space();
                        return Err(self.err_here(format!(
                            "{what}: integer expected, found '{}'",
                            String::from_utf8_lossy(w)
                        )));
                    }
                }
            }
        }
        Ok(v)
    }

    pub fn read_short(&mut self, bin: bool, what: &str) -> Result<i16> {
        Ok(self.read_shorts(1, bin, what)?[0])
    }

    /// A non-negative size (vector length, state count).
    pub fn read_size(&mut self, bin: bool, what: &str) -> Result<usize> {
        let at = self.pos;
        let v = self.read_short(bin, what)?;
        if v < 0 {
            self.pos = at;
            return Err(self.err_here(format!("{what}: negative value {v}")));
        }
        Ok(v as usize)
    }

    pub fn read_floats(&mut self, n: usize, bin: bool, what: &str) -> Result<Vec<f32>> {
        let mut v = Vec::with_capacity(n.min(1 << 20));
        for _ in 0..n {
            if bin {
                let Some(s) = self.b.get(self.pos..self.pos + 4) else {
                    return Err(self.err_here(format!("file truncated in {what}")));
                };
                v.push(f32::from_be_bytes([s[0], s[1], s[2], s[3]]));
                self.pos += 4;
            } else {
                let at = self.pos;
                let w = self.text_word();
                match std::str::from_utf8(w).ok().and_then(parse_c_float) {
                    Some(x) => v.push(x),
                    None => {
                        self.pos = at;
                        self.skip_space();
                        return Err(self.err_here(format!(
                            "{what}: number expected, found '{}'",
                            String::from_utf8_lossy(w)
                                .chars()
                                .take(20)
                                .collect::<String>()
                        )));
                    }
                }
            }
        }
        Ok(v)
    }

    pub fn read_float(&mut self, bin: bool, what: &str) -> Result<f32> {
        Ok(self.read_floats(1, bin, what)?[0])
    }
}

/// `scanf("%e")` on a whole word: decimal floats, `inf`, `nan` (any case).
fn parse_c_float(s: &str) -> Option<f32> {
    if s.is_empty() {
        return None;
    }
    s.parse::<f32>().ok()
}
