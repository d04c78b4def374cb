//! Sufficient statistics (f64 on the host) and the update rules that turn them
//! into new parameters: MLE (Kaldi's MleDiagGmmUpdate / MleFullGmmUpdate, HTK's
//! HERest rules), MAP, and transition updates.

pub mod accumulators;

pub use accumulators::{GmmAccumulator, ModelAccumulators, UpdateFlags};
