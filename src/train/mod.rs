//! Kaldi-compatible training jobs as library calls, used by the `acc-stats`,
//! `sum-accs` and `est` subcommands: conversions between Kaldi's file
//! structures and the neutral model ([`convert`]), whole-object I/O by
//! rx/wxfilename ([`io`]), statistics accumulation over feature tables
//! ([`acc_stats`]), tables read ahead ([`prefetch`]) and written behind
//! ([`write_behind`]), summing ([`sum_accs`]) and re-estimation ([`est`]).
//! The arithmetic itself lives in [`crate::stats`]; nothing here prints.

pub mod acc_stats;
pub mod boost_silence;
pub mod convert;
pub mod est;
pub mod io;
pub mod job_frames;
pub mod prefetch;
pub mod sum_accs;
pub mod write_behind;
