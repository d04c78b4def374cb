//! The library's error type. Format errors carry file/object/position from
//! `amtool_formats`; the rest name what was being done when it failed.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Format(#[from] amtool_formats::Error),
    /// Wrong use of the command line (Kaldi prints usage and exits 1).
    #[error("{0}")]
    Usage(String),
    /// Inputs that do not fit together (dimension mismatches and the like).
    #[error("{0}")]
    Mismatch(String),
    /// A compute engine failed (CUDA driver/NVRTC errors, no device with --use-gpu=yes).
    #[error("{0}")]
    Engine(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
