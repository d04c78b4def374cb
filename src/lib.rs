//! amtool: GMM/HMM acoustic-model statistics, estimation and scoring on the GPU
//! (or the CPU), reading and writing Kaldi's and HTK's files.
//!
//! Data flows one way: `amtool_formats` parses files into syntax structs;
//! [`model`] turns them into one neutral [`model::AcousticModel`]; [`layout`]
//! packs its states into padded blocks; an [`engine::Engine`] (CPU or CUDA)
//! streams frames through it into f64 accumulators ([`stats`]); the update rules
//! in [`stats`] produce new parameters, which go back into the original file
//! structure and are written by `amtool_formats`.

pub mod align;
pub mod bench;
pub mod cli;
pub mod engine;
pub mod error;
pub mod htk_train;
pub mod layout;
pub mod model;
pub mod score;
pub mod stage_clock;
pub mod stats;
pub mod timeline;
pub mod train;

pub use amtool_formats as formats;
pub use error::{Error, Result};
