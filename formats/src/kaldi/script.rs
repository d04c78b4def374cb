//! Kaldi script (`.scp`) files: one `key rxfilename` per line, where the
//! rxfilename may carry a byte offset (`foo.ark:1234`) and a range
//! (`foo.ark:1234[0:9]` rows, `[0:9,2:5]` rows and columns, `[:,2:5]`; both
//! ends inclusive), as `util/kaldi-table.cc` and `ExtractRangeSpecifier` read
//! them.

use crate::error::{Error, Pos, Result};

/// One line of an scp file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptEntry {
    pub key: String,
    /// The rxfilename without the range.
    pub rxfilename: String,
    /// The text between `[` and `]`, if any.
    pub range: Option<String>,
}

/// Parse an scp file's bytes. Blank lines are errors, as in Kaldi.
pub fn parse_script(data: &[u8], name: &str) -> Result<Vec<ScriptEntry>> {
    let text = std::str::from_utf8(data).map_err(|e| {
        Error::format(
            Pos::Byte(e.valid_up_to() as u64),
            "script file is not valid UTF-8 text",
        )
        .in_file(name)
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = |msg: String| Error::format(Pos::Line(i + 1), msg).in_file(name);
        let line = line.trim_matches(|c: char| c.is_ascii_whitespace());
        let (key, rest) = match line.split_once(|c: char| c.is_ascii_whitespace()) {
            Some((k, r)) => (k, r.trim_matches(|c: char| c.is_ascii_whitespace())),
            None => (line, ""),
        };
        if key.is_empty() || rest.is_empty() {
            return Err(bad(format!(
                "invalid line in script file: '{line}' (expected 'key rxfilename')"
            )));
        }
        let (rx, range) = split_range(rest).map_err(bad)?;
        out.push(ScriptEntry {
            key: key.to_string(),
            rxfilename: rx.to_string(),
            range: range.map(str::to_string),
        });
    }
    Ok(out)
}

/// Kaldi `ExtractRangeSpecifier`: `foo[range]` -> (`foo`, `range`).
fn split_range(s: &str) -> std::result::Result<(&str, Option<&str>), String> {
    if !s.ends_with(']') || s.ends_with('|') {
        return Ok((s, None));
    }
    let open = s
        .rfind('[')
        .ok_or_else(|| format!("unmatched ']' in '{s}'"))?;
    let range = &s[open + 1..s.len() - 1];
    if open == 0 || range.is_empty() {
        return Err(format!("invalid range specifier in '{s}'"));
    }
    Ok((&s[..open], Some(range)))
}

/// A matrix range: inclusive row and column intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixRange {
    pub row0: usize,
    pub row1: usize,
    pub col0: usize,
    pub col1: usize,
}

/// Kaldi `ParseMatrixRangeSpecifier`: `r0:r1` or `r0:r1,c0:c1` (`:` means all)
/// for a matrix of `rows` x `cols`. Like Kaldi, the row end may exceed the
/// matrix by up to 2 rows (it is clipped); anything else out of range is an error.
pub fn parse_matrix_range(
    range: &str,
    rows: usize,
    cols: usize,
) -> std::result::Result<MatrixRange, String> {
    let bad = || format!("invalid range specifier [{range}] for a matrix of {rows} x {cols}");
    let parts: Vec<&str> = range.split(',').collect();
    if parts.is_empty() || parts.len() > 2 || parts.iter().any(|p| p.is_empty()) {
        return Err(bad());
    }
    let parse = |p: &str, n: usize| -> std::result::Result<(i64, i64), String> {
        if p == ":" {
            return Ok((0, n as i64 - 1));
        }
        let (a, b) = p.split_once(':').ok_or_else(bad)?;
        let a: i64 = a.trim().parse().map_err(|_| bad())?;
        let b: i64 = b.trim().parse().map_err(|_| bad())?;
        Ok((a, b))
    };
    let (r0, r1) = parse(parts[0], rows)?;
    let (c0, c1) = if parts.len() == 2 {
        parse(parts[1], cols)?
    } else {
        (0, cols as i64 - 1)
    };
    let length_tolerance = 3;
    if !(r0 >= 0
        && r0 <= r1
        && r1 < rows as i64 + length_tolerance
        && c0 >= 0
        && c0 <= c1
        && c1 < cols as i64)
    {
        return Err(bad());
    }
    let r1 = r1.min(rows as i64 - 1);
    if r1 < r0 {
        return Err(bad());
    }
    Ok(MatrixRange {
        row0: r0 as usize,
        row1: r1 as usize,
        col0: c0 as usize,
        col1: c1 as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scp_lines() {
        let s = b"a foo.ark:12\nb  gunzip -c x.gz |\nc foo.ark:34[0:9,1:2]\n";
        let e = parse_script(s, "x.scp").unwrap();
        assert_eq!(
            e[0],
            ScriptEntry {
                key: "a".into(),
                rxfilename: "foo.ark:12".into(),
                range: None
            }
        );
        assert_eq!(e[1].rxfilename, "gunzip -c x.gz |");
        assert_eq!(e[2].rxfilename, "foo.ark:34");
        assert_eq!(e[2].range.as_deref(), Some("0:9,1:2"));
        let err = parse_script(b"a x\nb\n", "x.scp").unwrap_err().to_string();
        assert!(err.contains("x.scp at line 2"), "{err}");
    }

    #[test]
    fn ranges() {
        assert_eq!(
            parse_matrix_range("0:9", 20, 13).unwrap(),
            MatrixRange {
                row0: 0,
                row1: 9,
                col0: 0,
                col1: 12
            }
        );
        assert_eq!(
            parse_matrix_range(":,2:5", 20, 13).unwrap(),
            MatrixRange {
                row0: 0,
                row1: 19,
                col0: 2,
                col1: 5
            }
        );
        assert_eq!(parse_matrix_range("5:21", 20, 13).unwrap().row1, 19);
        for bad in [
            "5:23",
            "3:2",
            "0:1,0:13",
            "x",
            "0:1,",
            "-1:3",
            "1:2,3:4,5:6",
        ] {
            assert!(parse_matrix_range(bad, 20, 13).is_err(), "{bad}");
        }
    }
}
