//! The one error type of the crate: every failure names the file, the object
//! (archive key, macro name) where there is one, and the byte offset or line.

use std::fmt;

/// Where in a file something went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pos {
    #[default]
    Unknown,
    /// Byte offset from the start of the file (or stream).
    Byte(u64),
    /// 1-based line number of a text file.
    Line(usize),
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pos::Unknown => Ok(()),
            Pos::Byte(b) => write!(f, " at byte {b}"),
            Pos::Line(l) => write!(f, " at line {l}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused to open, read or write a file.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The bytes do not form the object that was expected.
    #[error("{path}{}{pos}: {msg}", key.as_ref().map(|k| format!(" (object '{k}')")).unwrap_or_default())]
    Format {
        path: String,
        key: Option<String>,
        pos: Pos,
        msg: String,
    },
    /// The file holds something valid that amtool does not support (yet).
    #[error("{path}{pos}: unsupported: {msg}")]
    Unsupported { path: String, pos: Pos, msg: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A format error with no file attached yet; callers that know the file use
    /// [`Error::in_file`] to name it.
    pub fn format(pos: Pos, msg: impl Into<String>) -> Self {
        Error::Format {
            path: String::new(),
            key: None,
            pos,
            msg: msg.into(),
        }
    }

    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Attach (or replace an empty) file name.
    pub fn in_file(mut self, file: &str) -> Self {
        match &mut self {
            Error::Io { path, .. }
            | Error::Format { path, .. }
            | Error::Unsupported { path, .. } => {
                if path.is_empty() {
                    *path = file.to_string();
                }
            }
        }
        self
    }

    /// Attach the archive key / object name, if none is set yet.
    pub fn with_key(mut self, k: &str) -> Self {
        if let Error::Format { key, .. } = &mut self {
            if key.is_none() {
                *key = Some(k.to_string());
            }
        }
        self
    }

    /// Shift a byte position by `base` (an object parsed from a slice that starts at
    /// `base` in the file).
    pub fn offset_by(mut self, base: u64) -> Self {
        if let Error::Format {
            pos: Pos::Byte(b), ..
        }
        | Error::Unsupported {
            pos: Pos::Byte(b), ..
        } = &mut self
        {
            *b += base;
        }
        self
    }
}
