//! The CUDA engine: NVRTC-compiled kernels from `kernels/*.cu` on padded
//! 64-state blocks, loaded at run time through cudarc's dynamic loading, so the
//! same binary runs on machines without CUDA.
