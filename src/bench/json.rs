//! A one-line JSON object writer for benchmark results (keys in insertion
//! order; non-finite numbers become `null`). Enough for flat records; not a
//! general JSON library.

use std::fmt::Write;

/// A flat JSON object under construction.
#[derive(Debug, Clone, Default)]
pub struct Json {
    fields: Vec<(String, String)>,
}

impl Json {
    pub fn new() -> Self {
        Json::default()
    }

    pub fn str(mut self, key: &str, v: &str) -> Self {
        self.fields.push((key.to_string(), quote(v)));
        self
    }

    pub fn int(mut self, key: &str, v: usize) -> Self {
        self.fields.push((key.to_string(), v.to_string()));
        self
    }

    pub fn num(mut self, key: &str, v: f64) -> Self {
        let s = if v.is_finite() {
            format!("{v:e}")
        } else {
            "null".to_string()
        };
        self.fields.push((key.to_string(), s));
        self
    }

    /// The value of `key` as written, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The object on one line.
    pub fn line(&self) -> String {
        let mut out = String::from("{");
        for (i, (k, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{}: {v}", quote(k));
        }
        out.push('}');
        out
    }
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_flat_object() {
        let j = Json::new()
            .str("case", "a\"b")
            .int("T", 3)
            .num("s", 0.5)
            .num("bad", f64::NAN);
        assert_eq!(
            j.line(),
            r#"{"case": "a\"b", "T": 3, "s": 5e-1, "bad": null}"#
        );
    }
}
