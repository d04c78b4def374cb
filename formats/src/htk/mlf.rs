//! HTK master label files (HLabel.c): `#!MLF!#`, then entries, each a quoted
//! pattern (`"*/utt.lab"`) followed either by labels and a `.` line, or by
//! `-> dir` / `=> dir` (look the label file up in a directory). A label line is
//! `[start [end]] name [score] {auxname [auxscore]}` with times in 100 ns units
//! — what HVite `-f -o` prints (`0 1400000 sil[2] -564.691711 silence`); lines
//! of `///` separate alternative transcriptions.

use std::path::Path;

use super::cfmt::fmt_f;
use super::strings::{escape_word, split_words};
use crate::error::{Error, Pos, Result};

/// One label; `levels[0]` is the label, further levels are HTK's auxiliary
/// labels (e.g. the word on the first state of a word in a state alignment).
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// (name, score) per level.
    pub levels: Vec<(String, Option<f64>)>,
}

/// What an MLF entry says about the files its pattern matches.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryBody {
    /// Labels in the MLF itself; one list per alternative (`///`).
    Labels(Vec<Vec<Label>>),
    /// `-> dir`: the label file's base name is looked up in `dir`.
    SubDir(String),
    /// `=> dir`: the label file's full path is looked up in `dir`.
    FullDir(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct MlfEntry {
    pub pattern: String,
    pub body: EntryBody,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Mlf {
    pub entries: Vec<MlfEntry>,
}

fn is_number(s: &str) -> bool {
    s.parse::<f64>().is_ok()
}

fn parse_time(s: &str) -> Option<i64> {
    s.parse::<i64>()
        .ok()
        .or_else(|| s.parse::<f64>().ok().map(|x| x.round() as i64))
}

/// HTK's label-file pattern match: `*` any string, `?` any one character.
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    fn m(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => m(&p[1..], n) || (!n.is_empty() && m(p, &n[1..])),
            (Some(b'?'), Some(_)) => m(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => m(&p[1..], &n[1..]),
            _ => false,
        }
    }
    m(pattern.as_bytes(), name.as_bytes())
}

impl Mlf {
    pub fn parse(text: &str) -> Result<Self> {
        let mut lines = text.lines().enumerate().peekable();
        // header
        loop {
            match lines.next() {
                None => {
                    return Err(Error::format(
                        Pos::Line(1),
                        "empty file: #!MLF!# header expected",
                    ))
                }
                Some((_, l)) if l.trim().is_empty() => continue,
                Some((_, l)) if l.trim() == "#!MLF!#" => break,
                Some((i, l)) => {
                    return Err(Error::format(
                        Pos::Line(i + 1),
                        format!("#!MLF!# header expected, found '{l}'"),
                    ))
                }
            }
        }
        let mut entries = Vec::new();
        while let Some((i, line)) = lines.next() {
            let words = split_words(line).map_err(|m| Error::format(Pos::Line(i + 1), m))?;
            if words.is_empty() {
                continue;
            }
            let pattern = words[0].clone();
            let body = match words.get(1).map(|s| s.as_str()) {
                Some(arrow @ ("->" | "=>")) => {
                    let dir = words.get(2).cloned().ok_or_else(|| {
                        Error::format(
                            Pos::Line(i + 1),
                            format!("directory expected after '{arrow}'"),
                        )
                    })?;
                    if arrow == "->" {
                        EntryBody::SubDir(dir)
                    } else {
                        EntryBody::FullDir(dir)
                    }
                }
                Some(_) => {
                    return Err(Error::format(
                        Pos::Line(i + 1),
                        format!("after pattern {pattern}: '->', '=>' or end of line expected"),
                    ))
                }
                None => {
                    let mut alts = vec![Vec::new()];
                    let mut closed = false;
                    for (j, l) in lines.by_ref() {
                        let t = l.trim();
                        if t == "." {
                            closed = true;
                            break;
                        }
                        if t.is_empty() {
                            continue;
                        }
                        if t == "///" {
                            alts.push(Vec::new());
                            continue;
                        }
                        let label = parse_label(l)
                            .map_err(|m| Error::format(Pos::Line(j + 1), m).with_key(&pattern))?;
                        if let Some(last) = alts.last_mut() {
                            last.push(label);
                        }
                    }
                    if !closed {
                        return Err(Error::format(
                            Pos::Line(i + 1),
                            format!("entry {pattern} is not terminated by a '.' line"),
                        ));
                    }
                    EntryBody::Labels(alts)
                }
            };
            entries.push(MlfEntry { pattern, body });
        }
        Ok(Mlf { entries })
    }

    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let name = path.as_ref().display().to_string();
        let text = std::fs::read_to_string(path.as_ref()).map_err(|e| Error::io(&name, e))?;
        Self::parse(&text).map_err(|e| e.in_file(&name))
    }

    /// The first entry whose pattern matches the label file name `name`.
    pub fn find(&self, name: &str) -> Option<&MlfEntry> {
        self.entries
            .iter()
            .find(|e| pattern_matches(&e.pattern, name))
    }

    /// The MLF as HTK writes it (patterns in double quotes, scores `%f`).
    pub fn to_text(&self) -> String {
        let mut s = String::from("#!MLF!#\n");
        for e in &self.entries {
            s.push_str(&super::mmf_quote(&e.pattern));
            match &e.body {
                EntryBody::SubDir(d) => s.push_str(&format!(" -> {}\n", escape_word(d))),
                EntryBody::FullDir(d) => s.push_str(&format!(" => {}\n", escape_word(d))),
                EntryBody::Labels(alts) => {
                    s.push('\n');
                    for (k, alt) in alts.iter().enumerate() {
                        if k > 0 {
                            s.push_str("///\n");
                        }
                        for l in alt {
                            s.push_str(&label_line(l));
                            s.push('\n');
                        }
                    }
                    s.push_str(".\n");
                }
            }
        }
        s
    }
}

fn parse_label(line: &str) -> std::result::Result<Label, String> {
    let words = split_words(line)?;
    let mut i = 0;
    let mut start = None;
    let mut end = None;
    if words.len() > 1 && is_number(&words[0]) {
        start = parse_time(&words[0]);
        i = 1;
        if words.len() > 2 && is_number(&words[1]) {
            end = parse_time(&words[1]);
            i = 2;
        }
    }
    let mut levels = Vec::new();
    while i < words.len() {
        let name = words[i].clone();
        i += 1;
        let mut score = None;
        if i < words.len() && is_number(&words[i]) {
            score = words[i].parse::<f64>().ok();
            i += 1;
        }
        levels.push((name, score));
    }
    if levels.is_empty() {
        return Err(format!("label name expected in '{line}'"));
    }
    Ok(Label { start, end, levels })
}

fn label_line(l: &Label) -> String {
    let mut parts = Vec::new();
    if let Some(s) = l.start {
        parts.push(s.to_string());
    }
    if let Some(e) = l.end {
        parts.push(e.to_string());
    }
    for (name, score) in &l.levels {
        parts.push(escape_word(name));
        if let Some(sc) = score {
            parts.push(fmt_f(*sc));
        }
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_alignment_lines() {
        let m = Mlf::parse("#!MLF!#\n\"*/a.lab\"\n0 1400000 sil[2] -564.691711 silence\n1400000 1700000 sil[3] -88.503212\n.\n\"*/b.lab\" -> labs\n").unwrap();
        let EntryBody::Labels(alts) = &m.entries[0].body else {
            panic!()
        };
        assert_eq!(
            alts[0][0].levels,
            vec![
                ("sil[2]".to_string(), Some(-564.691711)),
                ("silence".to_string(), None)
            ]
        );
        assert_eq!(m.entries[1].body, EntryBody::SubDir("labs".into()));
        assert!(m.find("data/a.lab").is_some() && m.find("data/c.lab").is_none());
        assert_eq!(Mlf::parse(&m.to_text()).unwrap(), m);
    }

    #[test]
    fn errors_have_lines() {
        let e = Mlf::parse("#!MLF!#\n\"*/a.lab\"\nsil\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("not terminated"), "{e}");
        let e = Mlf::parse("nope\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("#!MLF!#"), "{e}");
    }
}
