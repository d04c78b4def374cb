//! Readers and writers for the files of Kaldi and HTK acoustic-model recipes.
//!
//! This crate is syntax only: each file object becomes one typed struct, and each
//! struct writes back exactly as the original tool wrote it. It does no model
//! arithmetic and knows nothing about engines or GPUs, so anyone who only wants to
//! read a Kaldi archive or an HTK MMF from Rust can depend on it alone.
//!
//! - [`kaldi`]: Kaldi's binary/text serialisation, matrices (incl. compressed),
//!   tables (rspecifiers/wspecifiers, ark, scp, pipes), GMMs, transition models,
//!   accumulators, posteriors and alignments.
//! - [`htk`]: HTK MMFs (text and binary), parameter files, MLFs and script files.

pub mod atomic;
pub mod error;
pub mod htk;
pub mod kaldi;

pub use error::{Error, Pos, Result};
