//! HTK's string conventions (HShell `ReadString`/`ReWriteString`): words are
//! separated by white space and may be quoted with `"` or `'`; `\` escapes the
//! next character, and `\ooo` is an octal byte.

/// Split a line into HTK words.
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    let b = line.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let q = if b[i] == b'"' || b[i] == b'\'' {
            i += 1;
            Some(b[i - 1])
        } else {
            None
        };
        let mut w = Vec::new();
        let mut closed = q.is_none();
        while i < b.len() {
            let c = b[i];
            if q.is_none() && c.is_ascii_whitespace() {
                break;
            }
            i += 1;
            if Some(c) == q {
                closed = true;
                break;
            }
            if c == b'\\' && i < b.len() {
                if i + 3 <= b.len() && b[i..i + 3].iter().all(|x| (b'0'..=b'7').contains(x)) {
                    w.push(((b[i] - b'0') << 6) | ((b[i + 1] - b'0') << 3) | (b[i + 2] - b'0'));
                    i += 3;
                } else {
                    w.push(b[i]);
                    i += 1;
                }
                continue;
            }
            w.push(c);
        }
        if !closed {
            return Err("unterminated quoted string".into());
        }
        words.push(String::from_utf8_lossy(&w).into_owned());
    }
    Ok(words)
}

/// Write a word so that [`split_words`] reads it back: quoted when it contains
/// white space or starts with a quote, `"`/`\` escaped.
pub fn escape_word(w: &str) -> String {
    let needs_quotes =
        w.is_empty() || w.bytes().any(|c| c.is_ascii_whitespace()) || w.starts_with('\'');
    let mut out = String::new();
    if needs_quotes {
        out.push('"');
    }
    for c in w.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    if needs_quotes {
        out.push('"');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_quotes() {
        assert_eq!(
            split_words(r#"a "b c" 'd' e\"f \101"#).unwrap(),
            vec!["a", "b c", "d", "e\"f", "A"]
        );
        assert!(split_words("\"open").is_err());
        for w in ["plain", "with space", "q\"uote", "back\\slash", "'lead"] {
            assert_eq!(split_words(&escape_word(w)).unwrap(), vec![w.to_string()]);
        }
    }
}
