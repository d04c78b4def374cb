//! Scoring with acoustic models: lattice rescoring.

pub mod rescore;
