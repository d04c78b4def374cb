//! HTK's file formats: MMFs (text and binary), parameter files, MLFs and
//! script files, read and written as HTK 3.4.1 does.
//!
//! - [`mmf`]: master macro files (`HmmSet`, shared structures, HMM lists)
//! - [`param`]: parameter files (all kinds and qualifiers, `_C`, `_K`)
//! - [`mlf`], [`script`], [`config`]: label, script and configuration files
//! - [`table`]: parameter files as Kaldi table objects (`copy-feats --htk-in`)
//! - [`parmkind`], [`strings`], [`cfmt`]: the small shared conventions

pub mod cfmt;
pub mod config;
pub mod mlf;
pub mod mmf;
pub mod param;
pub mod parmkind;
pub mod script;
pub mod strings;
pub mod table;

use std::path::Path;

use crate::error::{Error, Result};

/// Write `bytes` to `path` through a temporary file in the same folder and a
/// rename, so a failed write never leaves a truncated file.
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::atomic::write(path, bytes).map_err(|e| Error::io(path.display().to_string(), e))
}

/// A name in double quotes as HTK writes macro names and MLF patterns.
pub(crate) fn mmf_quote(s: &str) -> String {
    mmf::quote(s)
}
