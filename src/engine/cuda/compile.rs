//! Run-time compilation of `kernels/gmm.cu` with NVRTC, specialised per model
//! shape (dimension, covariance kind: loop bounds and register tiles become
//! compile-time constants) straight to the device's machine code (CUBIN), and
//! a cache of those on disk so a shape compiles once per machine:
//! `$AMTOOL_CACHE_DIR`, else `$XDG_CACHE_HOME/amtool`, else `~/.cache/amtool`,
//! one file per key (the architecture, and a hash of the source with its
//! shape and the architecture). A cache that cannot be read or written is
//! skipped silently: it only saves time.

use std::path::PathBuf;

use cudarc::nvrtc::Ptx;

use crate::model::CovKind;
use crate::{Error, Result};

/// The kernel source, embedded in the binary (no nvcc at build time).
pub const GMM_SOURCE: &str = include_str!("../../../kernels/gmm.cu");
/// The FP16 E-step kernels, appended to [`GMM_SOURCE`] (they use its helpers).
pub const ESTEP_F16_SOURCE: &str = include_str!("../../../kernels/estep_f16.cu");
/// The FP16 E-step's first pass on Hopper's warpgroup instructions (`gllw`),
/// appended after [`ESTEP_F16_SOURCE`]; compiled where [`KernelShape::wg`].
pub const ESTEP_F16_WG_SOURCE: &str = include_str!("../../../kernels/estep_f16_wg.cu");
/// The full-covariance tensor-core E-step kernels, appended after [`ESTEP_F16_SOURCE`]
/// (they use the FP16 helpers there and those of [`GMM_SOURCE`]).
pub const ESTEP_FULL_SOURCE: &str = include_str!("../../../kernels/estep_fullcov.cu");

/// The compile-time constants of one kernel specialisation (see the macros at
/// the top of `kernels/gmm.cu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelShape {
    pub dim: usize,
    pub kind: CovKind,
    /// Frames per tile; threads per CTA are `4 * tf`.
    pub tf: usize,
    /// Gaussians per tile in the per-state kernels.
    pub gb: usize,
    /// Rows of z held in shared memory at once.
    pub kch: usize,
    /// Rows of W per stage of the cp.async pipeline.
    pub kw: usize,
    /// Whether `accum_stats` keeps its W block in shared memory.
    pub wres: bool,
    /// Warps per CTA of the lane statistics kernel (`accum_stats` compiled
    /// with `LSTATS`: one warp a stream of entries, lane g = Gaussian g),
    /// 0 where the tiled kernel runs. Decided here only ([`Self::new`]):
    /// diagonal models with 32-wide Gaussian blocks and
    /// D <= [`LANE_STATS_MAX_DIM`].
    pub sw: usize,
    /// Frames the lane statistics kernel takes per step (independent
    /// chains): 4, or 2 where 4 would spill (D > 46); 0 with `sw`.
    pub lq: usize,
    /// Warps per CTA of the tensor-core scoring kernel (`block_score_tc`;
    /// 16 frames each), 0 where it is not used.
    pub tcw: usize,
    /// k-steps per chunk of the K-chunked tensor-core kernel
    /// (`block_score_tck`, for z too long to keep in shared memory), 0 where
    /// the resident kernel runs instead.
    pub kc: usize,
    /// Whether the FP16 tensor-core E-step kernels (`kernels/estep_f16.cu`)
    /// are compiled: diagonal models with 2D <= 96 on tensor-core devices.
    pub e16: bool,
    /// Whether the FP16 E-step's first pass runs on wgmma (`gllw` in
    /// `kernels/estep_f16_wg.cu`): `e16` on compute capability 9.0 exactly
    /// (the kernels are then compiled for `sm_90a`), unless
    /// `AMTOOL_CUDA_TC=nowg`.
    pub wg: bool,
    /// Whether the full-covariance tensor-core E-step kernels
    /// (`kernels/estep_fullcov.cu`) are compiled: full covariances with
    /// D <= 96 on tensor-core devices.
    pub fc16: bool,
}

impl std::hash::Hash for KernelShape {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (
            self.dim,
            self.kind == CovKind::Full,
            self.tf,
            self.gb,
            self.kch,
            self.sw,
            self.lq,
            self.tcw,
            self.kc,
            self.e16,
            self.wg,
            self.fc16,
        )
            .hash(h);
    }
}

/// Dynamic shared memory of the tensor-core kernel (H100: 227 KB a block).
const TC_SMEM_BUDGET: usize = 220 * 1024;

/// The largest dimension the lane statistics kernel takes: a lane keeps
/// 2·KZ floats (its Gaussian's weights and statistics) in registers, and at
/// D = 48 (KZ = 97) ptxas still fits them without spilling.
pub const LANE_STATS_MAX_DIM: usize = 48;

/// Warps per CTA of the lane statistics kernel (`AMTOOL_CUDA_SW` for
/// measuring: 0 takes the tiled kernel, 1..=8 warps; from 5 the registers
/// are capped so two CTAs fit an SM, see [`KernelShape::lane_reg_cap`]).
/// At 4 ptxas gives D = 40 242 registers: two CTAs (8 warps) an SM.
const LANE_STATS_WARPS: usize = 4;

/// Shared memory a kernel may take (H100/A100 allow 227/163 KB per block;
/// staying under 200 KB leaves room for the static arrays).
const SMEM_BUDGET: usize = 200 * 1024;

impl KernelShape {
    /// The default tiling for a model whose largest state has
    /// `max_gaussians` Gaussians: 64-frame tiles (256 threads) for diagonal
    /// models; full covariances have a long z (D + D(D+1)/2 + 1), so 32-frame
    /// tiles keep the z tile in shared memory. Diagonal Gaussian blocks are
    /// 32 wide when every state fits in 32 (small GMMs and monophone models
    /// compute no padding Gaussians, and the statistics take one pass),
    /// else 64.
    pub fn for_model(dim: usize, kind: CovKind, max_gaussians: usize) -> Self {
        let tf_env = std::env::var("AMTOOL_CUDA_TF")
            .ok()
            .and_then(|v| v.parse::<usize>().ok());
        let tf = match (tf_env, kind) {
            (Some(t), _) if t == 32 || t == 64 => t,
            (_, CovKind::Diagonal) => 64,
            (_, CovKind::Full) => 32,
        };
        let gb = match kind {
            CovKind::Diagonal if max_gaussians <= 32 => 32,
            CovKind::Diagonal => 64,
            CovKind::Full => 16,
        };
        KernelShape::new(dim, kind, tf, gb)
    }

    /// A shape with the z chunk chosen to fit [`SMEM_BUDGET`].
    pub fn new(dim: usize, kind: CovKind, tf: usize, gb: usize) -> Self {
        let kzv = kz(dim, kind);
        let max_rows = (SMEM_BUDGET / 4 - tf * (gb + 4)) / (2 * tf + 4);
        let chunks = kzv.div_ceil(max_rows);
        let kch = kzv.div_ceil(chunks);
        // A small z tile leaves room for whole W slots (up to 96 rows a
        // stage); a large one (full covariance) gets 16-row stages so two
        // CTAs still fit on an SM.
        let kw = if kch * (tf + 4) * 4 <= 48 * 1024 {
            kzv.div_ceil(kzv.div_ceil(96))
        } else {
            16.min(kzv)
        };
        let mut shape = KernelShape {
            dim,
            kind,
            tf,
            gb,
            kch,
            kw,
            wres: false,
            sw: 0,
            lq: 0,
            tcw: 0,
            kc: 0,
            e16: false,
            wg: false,
            fc16: false,
        };
        shape.wres = shape.smem_stats() + kzv * gb * 4 <= SMEM_BUDGET;
        if kind == CovKind::Diagonal && gb == 32 && dim <= LANE_STATS_MAX_DIM {
            shape.sw = std::env::var("AMTOOL_CUDA_SW")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|&w| w <= 8)
                .unwrap_or(LANE_STATS_WARPS);
        }
        if shape.sw > 0 {
            shape.wres = false;
            // ptxas (12.9, sm_90): 4 frames a step spill from D = 47 (254
            // registers there, 255 and 20 bytes at 48); 2 do not.
            shape.lq = std::env::var("AMTOOL_CUDA_LQ")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|q| [1, 2, 4].contains(q))
                .unwrap_or(if dim <= 46 { 4 } else { 2 });
        }
        shape
    }

    /// This shape with the tensor-core scoring kernel switched on where the device
    /// has them (compute capability 8.0 or later: `mma.sync` in TF32): the
    /// resident kernel where its operands fit in shared memory (8 warps, 128
    /// frames a CTA, when that fits, else 4 or 2), else the K-chunked one
    /// for long z (full covariances from D = 18; 8 warps, chunks of 8
    /// k-steps). `tc` is the value of `AMTOOL_CUDA_TC` (read once by the
    /// engine): "0" keeps the FP32 kernels, "nof16" keeps the FP32
    /// statistics kernels for one GMM (no FP16 E-step, diagonal or full)
    /// but scores on the tensor cores, "nowg" keeps the FP16 E-step on
    /// mma.sync where it would take wgmma (compute capability 9.0).
    pub fn for_device(mut self, cc: (i32, i32), tc: &str) -> Self {
        self.tcw = 0;
        self.kc = 0;
        self.e16 = false;
        self.wg = false;
        self.fc16 = false;
        if tc == "0" || cc.0 < 8 {
            return self;
        }
        self.e16 =
            self.kind == CovKind::Diagonal && super::estep16::fits(self.dim) && tc != "nof16";
        self.wg = self.e16 && cc == (9, 0) && tc != "nowg";
        self.fc16 =
            self.kind == CovKind::Full && super::estep_full::fits(self.dim) && tc != "nof16";
        for w in [8, 4, 2] {
            let s = KernelShape { tcw: w, ..self };
            if s.smem_tc() <= TC_SMEM_BUDGET {
                return s;
            }
        }
        KernelShape {
            tcw: 8,
            kc: 8.min(self.ks()),
            ..self
        }
    }

    /// k-steps of 8 of the tensor-core kernels (z zero-padded to a multiple of 8).
    pub fn ks(&self) -> usize {
        self.kz().div_ceil(8)
    }

    /// Frames a scoring CTA takes (the tile of whichever block-scoring kernel runs).
    pub fn score_tile(&self) -> usize {
        if self.tcw > 0 {
            16 * self.tcw
        } else {
            self.tf
        }
    }

    /// Dynamic shared memory of the tensor-core kernel: resident, the z
    /// fragments of 16·tcw frames (hi and lo) and two W slots; K-chunked, two
    /// stages of a chunk of z (16·tcw frames, plain f32) and of one slot
    /// (hi and lo).
    pub fn smem_tc(&self) -> usize {
        if self.kc > 0 {
            2 * (self.tcw * self.kc * 128 + self.kc * 1024) * 4
        } else {
            (self.tcw * self.ks() * 256 + 2 * self.ks() * 1024) * 4
        }
    }

    /// Chunks of z per dot product.
    pub fn chunks(&self) -> usize {
        self.kz().div_ceil(self.kch)
    }

    /// Length of the expanded feature z(x), the constant 1 included.
    pub fn kz(&self) -> usize {
        kz(self.dim, self.kind)
    }

    pub fn threads(&self) -> usize {
        4 * self.tf
    }

    /// The register cap of the lane statistics kernel (`LMR`): with more
    /// than 4 warps a CTA, the most that lets two CTAs share an SM's 64 K
    /// registers (8-register steps); 0, none (4 warps: 255 still fits two).
    pub fn lane_reg_cap(&self) -> usize {
        if self.sw <= 4 {
            return 0;
        }
        (65536 / (2 * 32 * self.sw)) / 8 * 8
    }

    /// Threads per CTA of `accum_stats`: 32 a warp of the lane kernel, else
    /// [`Self::threads`].
    pub fn threads_stats(&self) -> usize {
        if self.sw > 0 {
            32 * self.sw
        } else {
            self.threads()
        }
    }

    /// States per block of the padded layout the block-scoring kernels are
    /// compiled for (`LANES`, which [`Self::prelude`] defines): the layout's
    /// default, the papers' 64, the only size the kernels are written for
    /// (16 threads × 4 states a row; the mma fragments cover 8 × 8 columns).
    /// The engine asks [`StateBlockLayout`](crate::layout::StateBlockLayout)
    /// for blocks of this size.
    pub fn block_states(&self) -> usize {
        crate::layout::DEFAULT_BLOCK_STATES
    }

    /// Dynamic shared memory of `block_score`, `component_ll` and `entry_loglike`.
    pub fn smem_score(&self) -> usize {
        (self.kch * (self.tf + 4) + 2 * self.kw * self.block_states()) * 4
    }

    /// Dynamic shared memory of `accum_stats`. The lane kernel: per warp a
    /// tile of 32 rows `[x, x²]` (stride 2D rounded up to a float4), the
    /// same space holding the warps' 32·KZ accumulators at the end, and a
    /// staging area of 32 rows `x` (the next tile's, copied in while this
    /// one is computed).
    pub fn smem_stats(&self) -> usize {
        if self.sw > 0 {
            let zr = (2 * self.dim).next_multiple_of(4);
            return self.sw * 32 * (zr.max(self.kz()) + self.dim) * 4;
        }
        let w = if self.wres { self.kz() * self.gb } else { 0 };
        (self.kch * (self.tf + 4) + self.tf * self.kch + self.tf * (self.gb + 4) + w) * 4
    }

    /// The `#define`s (and, for full covariances, the pair table) put in front
    /// of the source.
    pub fn prelude(&self) -> String {
        let mut s = format!(
            "#define D {}\n#define KZ {}\n#define FULL {}\n#define TF {}\n#define NT {}\n#define LANES {}\n#define GB {}\n#define KCH {}\n#define KW {}\n#define WRES {}\n#define LSTATS {}\n#define SW {}\n#define LQ {}\n#define LMR {}\n#define TCW {}\n#define KS {}\n#define KC {}\n",
            self.dim,
            self.kz(),
            u8::from(self.kind == CovKind::Full),
            self.tf,
            self.threads(),
            self.block_states(),
            self.gb,
            self.kch,
            self.kw,
            u8::from(self.wres),
            u8::from(self.sw > 0),
            self.sw,
            self.lq,
            self.lane_reg_cap(),
            self.tcw,
            self.ks(),
            self.kc
        );
        s.push_str(&format!("#define TKC {TC_CHUNK_STEPS}\n"));
        s.push_str(&format!(
            "#define E16 {}\n#define WG {}\n{}#define KP {}\n#define FC16 {}\n",
            u8::from(self.e16),
            u8::from(self.wg),
            super::estep16_wg::prelude(),
            super::estep16::kp(self.dim),
            u8::from(self.fc16)
        ));
        if self.kind == CovKind::Full {
            s.push_str("__device__ const unsigned short PAIRS[] = {");
            for i in 0..self.dim {
                for j in 0..=i {
                    s.push_str(&format!("{},", (i << 8) | j));
                }
            }
            s.push_str("};\n");
        }
        s.push_str(&super::gselect::GselectShape::new(self.dim, self.kind).prelude());
        s.push_str("__device__ const unsigned short ZORD[] = {");
        for k in scoring_z_order(self.dim, self.kind) {
            s.push_str(&format!("{k},"));
        }
        s.push_str("};\n");
        s
    }
}

/// The block-scoring kernels' z order (`ZORD` in kernels/gmm.cu): for each
/// position, the index of its term in the natural z. Dimension by dimension,
/// last dimension first — diagonal `xᵢ, xᵢ²`, full `xᵢ, xᵢx₀ … xᵢxᵢ` — and
/// the constant last: the CPU engine's order, in which each dimension's
/// large cancelling terms meet before they are added to the rest (as
/// accurate as Kaldi: tests/likes_accuracy). The host orders the block
/// weight rows by it (cuda/model.rs, `block_weights_row`).
pub fn scoring_z_order(dim: usize, kind: CovKind) -> Vec<usize> {
    let mut order = Vec::with_capacity(kz(dim, kind));
    for i in (0..dim).rev() {
        order.push(i);
        match kind {
            CovKind::Diagonal => order.push(dim + i),
            CovKind::Full => order.extend((0..=i).map(|j| dim + i * (i + 1) / 2 + j)),
        }
    }
    order.push(kz(dim, kind) - 1);
    order
}

/// k-steps (of 8) the tensor-core block scoring sums from zero before adding
/// into its running FP32 total (`TKC` in kernels/gmm.cu): the tensor cores
/// truncate as they accumulate. Measured on the H100 (final.mdl, |error|
/// against f64, mean/worst; Kaldi 1.18e-5/1.06e-3): one accumulator for all
/// k 8.3e-5/5.6e-3 at 10.6 ms (score_seed002); chunks of 1: 1.53e-5/1.24e-3,
/// 12.8 ms; of 2: 1.69e-5/1.48e-3, 11.6 ms; of 4: 1.85e-5/1.48e-3, 11.6 ms.
pub const TC_CHUNK_STEPS: usize = 2;

/// Length of z(x): diagonal `[x, x², 1]`, full `[x, x_i x_j (i ≥ j), 1]`.
pub fn kz(dim: usize, kind: CovKind) -> usize {
    match kind {
        CovKind::Diagonal => 2 * dim + 1,
        CovKind::Full => dim + dim * (dim + 1) / 2 + 1,
    }
}

/// The largest dimension the kernels take (the pair table packs indices in a byte).
pub const MAX_DIM: usize = 255;

/// FNV-1a, 64 bits: a stable hash for cache keys (std's hasher may change
/// between Rust releases).
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("AMTOOL_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("amtool"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("amtool"))
}

/// The cache file of a kernel image: the architecture in its name (so
/// [`cached_for`] finds images for a device without knowing a shape), the
/// hash of the source and the architecture after it.
fn image_path(src: &str, arch: &str) -> Option<PathBuf> {
    let key = fnv1a(&[src.as_bytes(), arch.as_bytes()]);
    cache_dir().map(|d| d.join(format!("gmm-{arch}-{key:016x}.cubin")))
}

/// Whether the disk cache holds a kernel image for devices of compute
/// capability `cc` (then a model of a cached shape needs no NVRTC).
pub fn cached_for(cc: (i32, i32)) -> bool {
    let prefixes = [
        format!("gmm-sm_{}{}-", cc.0, cc.1),
        format!("gmm-sm_{}{}a-", cc.0, cc.1),
    ];
    cache_dir()
        .and_then(|d| std::fs::read_dir(d).ok())
        .is_some_and(|mut entries| {
            entries.any(|e| {
                e.is_ok_and(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    prefixes.iter().any(|p| name.starts_with(p.as_str()))
                })
            })
        })
}

/// The device code for `shape` on a device of compute capability `cc`: a
/// CUBIN from the disk cache, or compiled now by NVRTC (and cached). A
/// CUBIN loads without the driver's PTX compiler (1.7 s for these kernels
/// on an H100 when the driver's own cache misses) and without loading
/// NVRTC at all.
pub fn image_for(shape: &KernelShape, cc: (i32, i32)) -> Result<Ptx> {
    let src = source_for(shape);
    let arch = arch_for(shape, cc);
    let path = image_path(&src, &arch);
    if let Some(bin) = path.as_ref().and_then(|p| std::fs::read(p).ok()) {
        // An ELF image (a torn write never lands: files are renamed in).
        if bin.starts_with(b"\x7fELF") {
            return Ok(Ptx::from_binary(bin));
        }
    }
    let bin = compile_cubin(&src, &arch)?;
    if let Some(p) = &path {
        store(p, &bin);
    }
    Ok(Ptx::from_binary(bin))
}

/// The NVRTC architecture of a shape's kernels: `sm_XY`, or `sm_90a` (the
/// architecture-specific features wgmma needs) where the shape has `wg`.
fn arch_for(shape: &KernelShape, cc: (i32, i32)) -> String {
    let suffix = if shape.wg { "a" } else { "" };
    format!("sm_{}{}{suffix}", cc.0, cc.1)
}

/// The whole kernel source of one shape: its `#define`s, then the kernel
/// files.
fn source_for(shape: &KernelShape) -> String {
    format!(
        "{}{}{}{}{}{}",
        shape.prelude(),
        GMM_SOURCE,
        ESTEP_F16_SOURCE,
        ESTEP_F16_WG_SOURCE,
        ESTEP_FULL_SOURCE,
        super::gselect::GSELECT_SOURCE
    )
}

/// NVRTC: `src` to a CUBIN for `arch` (`sm_XY`).
fn compile_cubin(src: &str, arch: &str) -> Result<Vec<u8>> {
    // AMTOOL_NVRTC_VERBOSE=1 prints ptxas's registers, spills and shared
    // memory of every kernel (no device needed: see the NVRTC compile test).
    let verbose = nvrtc_verbose();
    let (bin, log) = compile_with_log(src, arch, verbose)?;
    if verbose {
        eprintln!("{log}");
    }
    Ok(bin)
}

/// `AMTOOL_NVRTC_VERBOSE=1`: print ptxas's report of every kernel.
fn nvrtc_verbose() -> bool {
    std::env::var("AMTOOL_NVRTC_VERBOSE").is_ok_and(|v| v == "1")
}

/// NVRTC: `src` to a CUBIN for `arch`, and the compiler's log (with
/// ptxas's report of every kernel where `ptxas_info`).
fn compile_with_log(src: &str, arch: &str, ptxas_info: bool) -> Result<(Vec<u8>, String)> {
    use cudarc::nvrtc::{result, sys};
    // SAFETY: only tries to dlopen the library.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::Engine(
            "no NVRTC library (libnvrtc.so) found to compile the kernels; install the CUDA toolkit's NVRTC".into(),
        ));
    }
    let fail = |what: &str, e: &dyn std::fmt::Debug| {
        Error::Engine(format!(
            "NVRTC failed to compile kernels/gmm.cu for {arch}: {what}: {e:?}"
        ))
    };
    let csrc = std::ffi::CString::new(src).map_err(|e| fail("source", &e))?;
    let prog = result::create_program(&csrc, None).map_err(|e| fail("create", &e))?;
    let mut opts = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
    ];
    if ptxas_info {
        opts.push("--ptxas-options=-v".to_string());
    }
    // SAFETY: `prog` is alive until destroyed at the end; the out-buffers
    // are sized by the size calls.
    let out = unsafe {
        let compiled = result::compile_program(prog, &opts);
        let log = result::get_program_log(prog)
            .map(|l| {
                std::ffi::CStr::from_ptr(l.as_ptr())
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap_or_default();
        let r = match compiled {
            Err(e) => Err(fail("compile", &format!("{e:?}\n{log}"))),
            Ok(()) => {
                let mut size = 0usize;
                let r = sys::nvrtcGetCUBINSize(prog, &mut size);
                if r != sys::nvrtcResult::NVRTC_SUCCESS {
                    Err(fail("CUBIN size", &r))
                } else {
                    let mut bin = vec![0u8; size];
                    let r = sys::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast());
                    if r == sys::nvrtcResult::NVRTC_SUCCESS {
                        Ok((bin, log))
                    } else {
                        Err(fail("CUBIN", &r))
                    }
                }
            }
        };
        let _ = result::destroy_program(prog);
        r
    };
    out
}

/// Write the cache file atomically (temp file + rename); errors are ignored.
fn store(path: &std::path::Path, bytes: &[u8]) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) {
        use std::io::Write;
        if tmp.write_all(bytes).is_ok() {
            let _ = tmp.persist(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel compiles with NVRTC for model shapes of both kinds,
    /// with and without the tensor cores, no device needed: run with
    /// `--ignored` where NVRTC is found (e.g. `LD_LIBRARY_PATH` naming a
    /// folder with libnvrtc.so); skipped where it is not.
    #[test]
    #[ignore = "needs NVRTC; no GPU"]
    fn every_kernel_compiles_with_nvrtc() {
        // SAFETY: only tries to dlopen the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("skipped: no NVRTC library");
            return;
        }
        for (d, kind, cc, tc, g) in [
            (60, CovKind::Full, (9, 0), "", 64),
            (60, CovKind::Full, (7, 5), "0", 64),
            (39, CovKind::Diagonal, (9, 0), "", 64),
            (40, CovKind::Diagonal, (9, 0), "", 32),
            // The FP16 E-step on wgmma (sm_90a) at its smallest and largest
            // z, and on mma.sync (nowg) at the benchmark's.
            (1, CovKind::Diagonal, (9, 0), "", 2048),
            (48, CovKind::Diagonal, (9, 0), "", 2048),
            (40, CovKind::Diagonal, (9, 0), "nowg", 2048),
            // The lane statistics kernel (GB = 32, D <= LANE_STATS_MAX_DIM):
            // the smallest z, the benchmark's, the largest it takes, and
            // the first D that keeps the tiled kernel at GB = 32.
            (1, CovKind::Diagonal, (9, 0), "", 32),
            (13, CovKind::Diagonal, (9, 0), "", 32),
            (39, CovKind::Diagonal, (9, 0), "", 32),
            (48, CovKind::Diagonal, (9, 0), "", 32),
            (49, CovKind::Diagonal, (9, 0), "", 32),
            (40, CovKind::Diagonal, (7, 5), "0", 32),
            (13, CovKind::Full, (8, 0), "", 64),
            (1, CovKind::Full, (7, 5), "0", 64),
            (1, CovKind::Diagonal, (9, 0), "", 64),
            (200, CovKind::Full, (9, 0), "", 64),
            (200, CovKind::Diagonal, (9, 0), "", 64),
        ] {
            let shape = KernelShape::for_model(d, kind, g).for_device(cc, tc);
            compile_shape(&shape, cc);
        }
        // The lane statistics kernel with 5 warps (AMTOOL_CUDA_SW=5, 2 frames
        // a step): its registers capped to 200 (two CTAs an SM).
        let s = KernelShape::for_model(40, CovKind::Diagonal, 32).for_device((9, 0), "");
        compile_shape(&KernelShape { sw: 5, lq: 2, ..s }, (9, 0));

        fn compile_shape(shape: &KernelShape, cc: (i32, i32)) {
            let (d, kind) = (shape.dim, shape.kind);
            let src = source_for(shape);
            let arch = arch_for(shape, cc);
            let t = std::time::Instant::now();
            let (bin, log) =
                compile_with_log(&src, &arch, true).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
            // ptxas serialises wgmmas it cannot keep in flight (too few
            // registers, accumulators read inside the async window): the
            // kernels then run at mma.sync's pace or slower.
            assert!(
                !log.contains("serialized"),
                "{shape:?} {arch}: wgmma serialised:\n{log}"
            );
            if nvrtc_verbose() {
                eprintln!("{log}");
            }
            eprintln!(
                "D={d} {kind:?} GB={} SW={} LQ={} {arch}: {} bytes in {:.1} s",
                shape.gb,
                shape.sw,
                shape.lq,
                bin.len(),
                t.elapsed().as_secs_f64()
            );
        }
    }

    #[test]
    fn kz_counts_the_constant() {
        assert_eq!(kz(40, CovKind::Diagonal), 81);
        assert_eq!(kz(36, CovKind::Full), 36 + 666 + 1);
    }

    #[test]
    fn prelude_lists_every_pair_in_packed_order() {
        let s = KernelShape::new(3, CovKind::Full, 32, 16);
        let p = s.prelude();
        // (0,0) (1,0) (1,1) (2,0) (2,1) (2,2)
        assert!(p.contains("PAIRS[] = {0,256,257,512,513,514,};"), "{p}");
        assert!(p.contains("#define KZ 10\n"));
        assert!(p.contains("#define NT 128\n"));
        assert!(p.contains("#define LANES 64\n"));
    }

    #[test]
    fn scoring_order_pairs_each_dimension_last_first() {
        // natural z: x0 x1 | x0² x1² | 1
        assert_eq!(scoring_z_order(2, CovKind::Diagonal), vec![1, 3, 0, 2, 4]);
        // natural z: x0 x1 | (0,0) (1,0) (1,1) | 1
        assert_eq!(scoring_z_order(2, CovKind::Full), vec![1, 3, 4, 0, 2, 5]);
        for (d, kind) in [(39, CovKind::Diagonal), (36, CovKind::Full)] {
            let mut o = scoring_z_order(d, kind);
            o.sort_unstable();
            assert_eq!(o, (0..kz(d, kind)).collect::<Vec<_>>(), "a permutation");
        }
    }

    #[test]
    fn cache_key_changes_with_any_part() {
        let a = fnv1a(&[b"src", b"compute_90"]);
        assert_ne!(a, fnv1a(&[b"src", b"compute_80"]));
        assert_ne!(a, fnv1a(&[b"sr", b"ccompute_90"]));
        assert_eq!(a, fnv1a(&[b"src", b"compute_90"]));
    }

    #[test]
    fn shared_memory_fits_an_h100_for_the_benchmark_shapes() {
        for d in 1..=80 {
            for kind in [CovKind::Diagonal, CovKind::Full] {
                for g in [32, 64] {
                    let s = KernelShape::for_model(d, kind, g);
                    assert!(s.smem_stats() <= SMEM_BUDGET, "{s:?}: {}", s.smem_stats());
                    assert!(
                        s.smem_score() <= 227 * 1024 - 1024,
                        "{s:?}: {}",
                        s.smem_score()
                    );
                    assert!(s.kch * s.chunks() >= s.kz() && s.kch <= s.kz());
                }
            }
        }
        // Diagonal Gaussian blocks: 32 wide while every state fits, else 64;
        // full covariances always 16.
        let gb = |kind, g| KernelShape::for_model(40, kind, g).gb;
        assert_eq!(
            (gb(CovKind::Diagonal, 1), gb(CovKind::Diagonal, 32)),
            (32, 32)
        );
        assert_eq!(
            (gb(CovKind::Diagonal, 33), gb(CovKind::Diagonal, 2048)),
            (64, 64)
        );
        assert_eq!((gb(CovKind::Full, 8), gb(CovKind::Full, 256)), (16, 16));
        // The benchmark shapes keep z in one chunk.
        assert_eq!(
            KernelShape::for_model(40, CovKind::Diagonal, 64).chunks(),
            1
        );
        let f = KernelShape::for_model(36, CovKind::Full, 64);
        assert_eq!(f.chunks(), 1);
        // Two full-covariance scoring CTAs fit on an H100 SM (228 KB, 1 KB each reserved).
        assert!(
            2 * (f.smem_score() + 1024) <= 228 * 1024,
            "{}",
            f.smem_score()
        );
        let d = KernelShape::for_model(40, CovKind::Diagonal, 64);
        assert!(d.wres && d.kw == 81, "{d:?}");
    }

    #[test]
    fn lane_statistics_kernel_for_small_diagonal_blocks_only() {
        // Diagonal, every state within 32 Gaussians, D <= 48: the lane
        // kernel (4 warps), on any device; else the tiled one.
        for d in 1..=80 {
            for (kind, g) in [
                (CovKind::Diagonal, 32),
                (CovKind::Diagonal, 33),
                (CovKind::Full, 8),
            ] {
                for cc in [(9, 0), (7, 5)] {
                    let s = KernelShape::for_model(d, kind, g).for_device(cc, "");
                    let lane = kind == CovKind::Diagonal && g <= 32 && d <= LANE_STATS_MAX_DIM;
                    assert_eq!(s.sw > 0, lane, "{s:?}");
                    let p = s.prelude();
                    assert!(p.contains(&format!("#define LSTATS {}\n", u8::from(lane))));
                    assert!(p.contains(&format!("#define SW {}\n", s.sw)));
                    if lane {
                        assert_eq!(s.threads_stats(), 32 * LANE_STATS_WARPS);
                        assert_eq!(s.lq, if d <= 46 { 4 } else { 2 });
                        assert_eq!(s.lane_reg_cap(), 0);
                        assert!(!s.wres);
                        // Room for the warps' accumulators or z tiles, and
                        // their staging areas.
                        let floats = s.smem_stats() / 4 - s.sw * 32 * d;
                        assert!(floats >= s.sw * 32 * s.kz() && floats >= s.sw * 32 * 2 * d);
                        // 74,240 B at D = 48: shared memory is no limit on
                        // the two CTAs an SM the registers allow.
                        assert!(2 * (s.smem_stats() + 1024) <= 228 * 1024, "{s:?}");
                    } else {
                        assert_eq!(s.threads_stats(), s.threads());
                    }
                }
            }
        }
        // The benchmark's E-step shape (M = 32, D = 40): 128 threads,
        // 4 tiles of 32 × 80 floats (or 4 × 32 × 81 accumulators) and 4
        // staging areas of 32 × 40.
        let s = KernelShape::for_model(40, CovKind::Diagonal, 32);
        assert_eq!(
            (s.threads_stats(), s.smem_stats()),
            (128, 4 * 32 * (81 + 40) * 4)
        );
    }

    #[test]
    fn tensor_core_kernels_only_where_they_fit() {
        // The benchmark's diagonal shapes get 8 warps (128-frame tiles).
        for d in [36, 40] {
            let s = KernelShape::for_model(d, CovKind::Diagonal, 64).for_device((9, 0), "");
            assert_eq!((s.tcw, s.score_tile()), (8, 128), "{s:?}");
            assert!(s.smem_tc() <= TC_SMEM_BUDGET);
        }
        // No mma.sync before sm_80, nor with AMTOOL_CUDA_TC=0.
        let old = KernelShape::for_model(40, CovKind::Diagonal, 64).for_device((7, 5), "");
        assert_eq!((old.tcw, old.kc), (0, 0));
        let off = KernelShape::for_model(36, CovKind::Full, 64).for_device((9, 0), "0");
        assert_eq!((off.tcw, off.kc), (0, 0));
        // Long z (full covariance, D=36: 703 rows) takes the K-chunked kernel.
        let c = KernelShape::for_model(36, CovKind::Full, 64).for_device((9, 0), "");
        assert_eq!((c.tcw, c.kc, c.ks()), (8, 8, 88), "{c:?}");
        // Short z the resident one; D = 18 is the first full covariance too long.
        let f = KernelShape::for_model(17, CovKind::Full, 64).for_device((9, 0), "");
        assert!(f.tcw > 0 && f.kc == 0, "{f:?}");
        let f = KernelShape::for_model(18, CovKind::Full, 64).for_device((9, 0), "");
        assert!(f.tcw > 0 && f.kc > 0, "{f:?}");
        // The full-covariance E-step: full covariances up to D = 96 on
        // tensor-core devices, not with "nof16" (nor "0", nor before sm_80).
        let fc = |d, kind, cc, tc| KernelShape::for_model(d, kind, 64).for_device(cc, tc).fc16;
        assert!(fc(40, CovKind::Full, (9, 0), ""));
        assert!(fc(96, CovKind::Full, (8, 0), "") && !fc(97, CovKind::Full, (9, 0), ""));
        assert!(!fc(40, CovKind::Diagonal, (9, 0), ""));
        assert!(!fc(40, CovKind::Full, (9, 0), "nof16") && !fc(40, CovKind::Full, (9, 0), "0"));
        assert!(!fc(40, CovKind::Full, (7, 5), ""));
        let s = KernelShape::for_model(40, CovKind::Full, 64).for_device((9, 0), "");
        assert!(s.prelude().contains("#define FC16 1\n"));
        for d in 1..=80 {
            for kind in [CovKind::Diagonal, CovKind::Full] {
                let s = KernelShape::for_model(d, kind, 64).for_device((9, 0), "");
                assert!(s.tcw > 0 && s.smem_tc() <= TC_SMEM_BUDGET, "{s:?}");
                assert!(s.kc <= s.ks());
                assert!(s.prelude().contains(&format!("#define TCW {}\n", s.tcw)));
                assert!(s.prelude().contains(&format!("#define KC {}\n", s.kc)));
            }
        }
    }
}
