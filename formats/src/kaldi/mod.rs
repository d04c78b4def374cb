//! Kaldi's file formats: the `\0B` binary and the text serialisations of
//! `io-funcs`, matrices and vectors (incl. `CompressedMatrix`), tables
//! (rspecifiers/wspecifiers, ark, scp, pipes), GMMs, transition models and
//! accumulators — each written back exactly as Kaldi writes it.

pub mod accs;
pub mod any;
mod blocks;
pub mod compressed;
pub mod files;
pub mod fst;
pub mod gmm;
pub mod holder;
pub mod io;
pub mod lattice;
pub mod matrix;
pub mod model;
pub mod object;
pub mod script;
pub mod specifier;
pub mod sphinx;
pub mod table;
pub mod transition;
