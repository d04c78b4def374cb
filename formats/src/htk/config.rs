//! HTK configuration files (`-C file`), as HShell's `ReadConfigFile` reads
//! them: `[MODULE:] NAME = value` per line, `#` comments (also after a
//! value), names upper-cased, values optionally quoted, booleans `T`/`F`/
//! `TRUE`/`FALSE`. A parameter without a module applies to every module; a
//! module-qualified one (`HPARM: TARGETKIND`) only to that module.

use std::path::Path;

use super::strings::split_words;
use crate::error::{Error, Pos, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct ConfigEntry {
    /// Upper-case module name (`HPARM`), if the line had one.
    pub module: Option<String>,
    /// Upper-case parameter name.
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// Entries in file order (later ones override earlier ones).
    pub entries: Vec<ConfigEntry>,
}

impl Config {
    pub fn parse(text: &str) -> Result<Self> {
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |m: String| Error::format(Pos::Line(i + 1), m);
            let (lhs, rhs) = line
                .split_once('=')
                .ok_or_else(|| err(format!("'NAME = value' expected, found '{line}'")))?;
            let (module, name) = match lhs.split_once(':') {
                Some((m, n)) => (
                    Some(m.trim().to_ascii_uppercase()),
                    n.trim().to_ascii_uppercase(),
                ),
                None => (None, lhs.trim().to_ascii_uppercase()),
            };
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(err(format!("bad parameter name '{}'", lhs.trim())));
            }
            let words = split_words(rhs).map_err(err)?;
            let value = match words.first() {
                Some(v) => v.clone(),
                None => return Err(err(format!("no value for {name}"))),
            };
            // anything after the value must be a comment
            if let Some(extra) = words.get(1) {
                if !extra.starts_with('#') {
                    return Err(err(format!(
                        "unexpected '{extra}' after the value of {name}"
                    )));
                }
            }
            entries.push(ConfigEntry {
                module,
                name,
                value,
            });
        }
        Ok(Config { entries })
    }

    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let name = path.as_ref().display().to_string();
        let text = std::fs::read_to_string(path.as_ref()).map_err(|e| Error::io(&name, e))?;
        Self::parse(&text).map_err(|e| e.in_file(&name))
    }

    /// Append the entries of another file (`-C a -C b`).
    pub fn extend(&mut self, other: Config) {
        self.entries.extend(other.entries);
    }

    /// The value of `name` as module `module` sees it: the last entry that is
    /// either unqualified or qualified with that module.
    pub fn get(&self, module: &str, name: &str) -> Option<&str> {
        let (module, name) = (module.to_ascii_uppercase(), name.to_ascii_uppercase());
        self.entries
            .iter()
            .rev()
            .find(|e| e.name == name && e.module.as_deref().is_none_or(|m| m == module))
            .map(|e| e.value.as_str())
    }

    /// A boolean parameter (`T`, `TRUE`, `F`, `FALSE`, any case).
    pub fn get_bool(&self, module: &str, name: &str) -> Option<std::result::Result<bool, String>> {
        self.get(module, name)
            .map(|v| match v.to_ascii_uppercase().as_str() {
                "T" | "TRUE" => Ok(true),
                "F" | "FALSE" => Ok(false),
                _ => Err(format!("{name} = {v} is not a boolean")),
            })
    }

    pub fn get_f64(&self, module: &str, name: &str) -> Option<std::result::Result<f64, String>> {
        self.get(module, name).map(|v| {
            v.parse()
                .map_err(|_| format!("{name} = {v} is not a number"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_comments_quotes() {
        let c = Config::parse(
            "# c\nTARGETKIND = MFCC_0_D_A\nHPARM: VARSCALEMASK = '*.%%%'\nHSHELL:NONUMESCAPES = TRUE\nHMAP: MAPTAU = 10.0   # tau\nsourceformat =HTK\n",
        )
        .unwrap();
        assert_eq!(c.get("HPARM", "targetkind"), Some("MFCC_0_D_A"));
        assert_eq!(c.get("HPARM", "VARSCALEMASK"), Some("*.%%%"));
        assert_eq!(c.get("HFB", "VARSCALEMASK"), None);
        assert_eq!(c.get_bool("HSHELL", "NONUMESCAPES"), Some(Ok(true)));
        assert_eq!(c.get_f64("HMAP", "MAPTAU"), Some(Ok(10.0)));
        assert_eq!(c.get("HWAVE", "SOURCEFORMAT"), Some("HTK"));
        let e = Config::parse("A = 1\nB 2\n").unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
    }
}
