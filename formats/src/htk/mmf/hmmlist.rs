//! HMM list files (the positional `hmmList` argument of HERest/HVite/HHEd):
//! one logical HMM name per line, optionally followed by the physical HMM it
//! maps to (`logical physical`), as HModel.c's `InitHMMSet` reads them.

use crate::error::{Error, Pos, Result};

#[derive(Debug, Clone, PartialEq, Default)]
pub struct HmmList {
    /// (logical, physical) in file order; physical == logical when not given.
    pub entries: Vec<(String, String)>,
}

impl HmmList {
    pub fn parse(text: &str) -> Result<Self> {
        let mut entries: Vec<(String, String)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, line) in text.lines().enumerate() {
            let words = super::super::strings::split_words(line)
                .map_err(|m| Error::format(Pos::Line(i + 1), m))?;
            match words.len() {
                0 => continue,
                1 | 2 => {
                    let logical = words[0].clone();
                    let physical = words.get(1).cloned().unwrap_or_else(|| logical.clone());
                    if !seen.insert(logical.clone()) {
                        return Err(Error::format(
                            Pos::Line(i + 1),
                            format!("logical HMM name {logical} used twice"),
                        ));
                    }
                    entries.push((logical, physical));
                }
                _ => {
                    return Err(Error::format(
                        Pos::Line(i + 1),
                        "expected 'logical [physical]' (newline after the physical name)",
                    ))
                }
            }
        }
        Ok(HmmList { entries })
    }

    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let name = path.as_ref().display().to_string();
        let text = std::fs::read_to_string(path.as_ref()).map_err(|e| Error::io(&name, e))?;
        Self::parse(&text).map_err(|e| e.in_file(&name))
    }

    /// The physical name of a logical HMM.
    pub fn physical(&self, logical: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(l, _)| l == logical)
            .map(|(_, p)| p.as_str())
    }

    /// As `SaveHMMList`: `logical` or `logical physical` per line.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (l, p) in &self.entries {
            s.push_str(&super::super::strings::escape_word(l));
            if l != p {
                s.push(' ');
                s.push_str(&super::super::strings::escape_word(p));
            }
            s.push('\n');
        }
        s
    }

    /// Check that every physical HMM named is defined in `set`.
    pub fn check_against(&self, set: &super::HmmSet, list_name: &str) -> Result<()> {
        for (l, p) in &self.entries {
            if set.hmm(p).is_none() {
                return Err(Error::Format {
                    path: list_name.to_string(),
                    key: Some(l.clone()),
                    pos: Pos::Unknown,
                    msg: format!("physical HMM {p} is not defined in any loaded MMF"),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_to_physical() {
        let l = HmmList::parse("sil\na-b+c b\n\"q r\" x\n").unwrap();
        assert_eq!(l.physical("a-b+c"), Some("b"));
        assert_eq!(l.physical("sil"), Some("sil"));
        assert_eq!(l.physical("q r"), Some("x"));
        assert_eq!(HmmList::parse(&l.to_text()).unwrap(), l);
        let e = HmmList::parse("a\na b c\n").unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        let e = HmmList::parse("a\na\n").unwrap_err().to_string();
        assert!(e.contains("used twice") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn list_checked_against_set() {
        let set = super::super::HmmSet::parse(
            b"~o <VECSIZE> 1 <USER>\n~h \"b\"\n<BEGINHMM> <NUMSTATES> 3 <STATE> 2 <MEAN> 1 0 <VARIANCE> 1 1\n<TRANSP> 3 0 1 0 0 0.5 0.5 0 0 0 <ENDHMM>\n",
            "m",
        )
        .unwrap();
        let ok = HmmList::parse("a-b+c b\nb\n").unwrap();
        ok.check_against(&set, "list").unwrap();
        let bad = HmmList::parse("x y\n").unwrap();
        let e = bad.check_against(&set, "list").unwrap_err().to_string();
        assert!(
            e.contains("list") && e.contains("'x'") && e.contains("physical HMM y"),
            "{e}"
        );
    }
}
