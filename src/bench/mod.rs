//! `amtool bench`: the benchmark cases of ../shared/bench/README.md on random
//! inputs, run through any [`crate::engine::Engine`].

pub mod random;
