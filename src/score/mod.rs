//! Scoring features against a model and what is built on the scores:
//! per-frame log-likelihoods ([`likes`]), Gaussian selection and top-n
//! posteriors for UBM pipelines ([`gselect`]), and MAP adaptation
//! ([`map`]), and lattice rescoring ([`rescore`]). Each function reproduces
//! one Kaldi library routine (named in its docs) on rows of log-likelihoods
//! an engine computed; nothing here reads or writes files except
//! [`model_file`], which loads the model a scoring tool was given.

pub mod gselect;
pub mod likes;
pub mod map;
pub mod model_file;
pub mod rescore;
