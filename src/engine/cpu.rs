//! The CPU engine: the reference for correctness and the fallback without a GPU.
