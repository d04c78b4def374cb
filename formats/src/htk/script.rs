//! HTK script files (`-S file`): file names separated by white space, one or
//! more per line (HCopy takes `source target` pairs), each possibly an
//! extended name `logical=physical[s,e]` (HShell's `GetFileNameExt`): the
//! utterance is known as `logical`, read from `physical`, frames `s..=e` only.

use std::path::Path;

use super::strings::{escape_word, split_words};
use crate::error::{Error, Pos, Result};

/// One name of a script file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptEntry {
    /// The name labels and outputs are found by.
    pub logical: String,
    /// The file actually read.
    pub physical: String,
    /// `[s,e]`: first and last frame (inclusive); `None` = whole file.
    pub range: Option<(i64, i64)>,
}

impl ScriptEntry {
    /// Parse one (already unquoted) script word.
    pub fn parse(word: &str) -> std::result::Result<Self, String> {
        let mut rest = word;
        let mut range = None;
        if rest.ends_with(']') {
            if let Some(open) = rest.rfind('[') {
                let inner = &rest[open + 1..rest.len() - 1];
                let (s, e) = inner
                    .split_once(',')
                    .ok_or_else(|| format!("segment '[{inner}]' in '{word}' is not [start,end]"))?;
                let s: i64 = s
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad segment start in '{word}'"))?;
                let e: i64 = e
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad segment end in '{word}'"))?;
                if s < 0 || e < s {
                    return Err(format!(
                        "segment [{s},{e}] in '{word}' is empty or negative"
                    ));
                }
                range = Some((s, e));
                rest = &rest[..open];
            }
        }
        let (logical, physical) = match rest.split_once('=') {
            Some((l, p)) => (l.to_string(), p.to_string()),
            None => (rest.to_string(), rest.to_string()),
        };
        if logical.is_empty() || physical.is_empty() {
            return Err(format!("empty file name in '{word}'"));
        }
        Ok(ScriptEntry {
            logical,
            physical,
            range,
        })
    }

    /// The word as HTK writes it.
    pub fn to_word(&self) -> String {
        let mut s = if self.logical == self.physical {
            self.logical.clone()
        } else {
            format!("{}={}", self.logical, self.physical)
        };
        if let Some((a, b)) = self.range {
            s.push_str(&format!("[{a},{b}]"));
        }
        escape_word(&s)
    }
}

/// A script file, line by line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScriptFile {
    pub lines: Vec<Vec<ScriptEntry>>,
}

impl ScriptFile {
    pub fn parse(text: &str) -> Result<Self> {
        let mut lines = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let words = split_words(line).map_err(|m| Error::format(Pos::Line(i + 1), m))?;
            if words.is_empty() {
                continue;
            }
            let entries = words
                .iter()
                .map(|w| ScriptEntry::parse(w))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|m| Error::format(Pos::Line(i + 1), m))?;
            lines.push(entries);
        }
        Ok(ScriptFile { lines })
    }

    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let name = path.as_ref().display().to_string();
        let text = std::fs::read_to_string(path.as_ref()).map_err(|e| Error::io(&name, e))?;
        Self::parse(&text).map_err(|e| e.in_file(&name))
    }

    /// All entries in order (HTK reads a script as one stream of arguments).
    pub fn entries(&self) -> impl Iterator<Item = &ScriptEntry> {
        self.lines.iter().flatten()
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for line in &self.lines {
            let words: Vec<String> = line.iter().map(|e| e.to_word()).collect();
            s.push_str(&words.join(" "));
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_names() {
        let e = ScriptEntry::parse("utt1=feat/a.mfc[10,99]").unwrap();
        assert_eq!(
            (e.logical.as_str(), e.physical.as_str(), e.range),
            ("utt1", "feat/a.mfc", Some((10, 99)))
        );
        assert_eq!(e.to_word(), "utt1=feat/a.mfc[10,99]");
        let e = ScriptEntry::parse("feat/a.mfc").unwrap();
        assert_eq!((e.logical.as_str(), e.range), ("feat/a.mfc", None));
        assert!(ScriptEntry::parse("a.mfc[5,2]").is_err());
        assert!(ScriptEntry::parse("a.mfc[x,2]").is_err());
    }

    #[test]
    fn bad_line_is_reported() {
        let e = ScriptFile::parse("a.mfc\nb=c[1]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("not [start,end]"), "{e}");
    }
}
