//! Statistics of one GMM with Gaussian selection on the GPU
//! ([`FrameTargets::Selected`](crate::engine::FrameTargets::Selected):
//! `fgmm-global-acc-stats` / `gmm-global-acc-stats --gselect`): the host
//! half of `kernels/gselect.cu`. Only the selected (frame, component) pairs
//! are scored and accumulated: the host groups them by component
//! ([`gselect_plan`](super::gselect_plan)), the kernels score each pair
//! against its component (full covariances as a small GEMM per tile of one
//! component's pairs), take Kaldi's float softmax per frame, and sum each
//! component's statistics in f32 over tiles of [`TILE_ENTRIES`] pairs and
//! in f64 across them, items reduced in a fixed order (the same bits run
//! after run).
//!
//! The CPU engine is the reference (`engine/cpu/selected.rs`, Kaldi's f64
//! sums); the kernels sum in another order (tests/cuda_gselect.rs holds them
//! to the CPU engine and to f64).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, CudaView, LaunchConfig, PushKernelArg};

use super::gselect_plan::{self, SelectionPlan};
use super::{driver_err, CudaEngine, Kernels};
use crate::engine::Selection;
use crate::model::{AcousticModel, CovKind};
use crate::{Error, Result};

/// The kernel source, appended to `kernels/gmm.cu` (it uses its helpers).
pub const GSELECT_SOURCE: &str = include_str!("../../../kernels/gselect.cu");

/// Pairs per sub-tile of the kernels (`GS_TE`): the f32 sums of the
/// statistics run over at most this many pairs before they are widened to
/// f64 (the CPU engine's `STATS_TB`).
pub const TILE_ENTRIES: usize = 64;
/// Pairs per work item (one component's; a CTA of the scoring and the
/// statistics each): a constant, so results never depend on the device.
pub const ITEM_ENTRIES: usize = 4096;
/// Frames (threads) per `gsel_softmax` CTA (`GS_SMF`).
const SOFTMAX_FRAMES: usize = 256;
/// Floats of A (full covariances) kept in shared memory at once: 48 KB.
const A_SMEM_FLOATS: usize = 12 * 1024;
/// Most threads of a `gsel_stats` CTA.
const MAX_STATS_THREADS: usize = 256;

/// The compile-time constants of the kernels for one model shape (the
/// `GS_*` macros; see the top of `kernels/gselect.cu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GselectShape {
    pub dim: usize,
    pub kind: CovKind,
}

impl GselectShape {
    pub fn new(dim: usize, kind: CovKind) -> Self {
        GselectShape { dim, kind }
    }

    fn full(&self) -> bool {
        self.kind == CovKind::Full
    }

    /// D rounded up to 4 (`GS_DP`): columns of A and of the score tile.
    pub fn dp(&self) -> usize {
        self.dim.div_ceil(4) * 4
    }

    /// Column threads of the score tile (`GS_CT`).
    pub fn ct(&self) -> usize {
        self.dp() / 4
    }

    /// Rows of A in shared memory at once (`GS_JC`).
    pub fn jc(&self) -> usize {
        self.dim.min(A_SMEM_FLOATS / self.dp()).max(1)
    }

    /// Row stride of the k-major x tile (`GS_XS`; float4-aligned).
    pub fn xs(&self) -> usize {
        TILE_ENTRIES + 4
    }

    /// D + 1 rounded up to 4 (`GS_DA`): the length of [x, 1, 0…].
    pub fn da(&self) -> usize {
        (self.dim + 1).div_ceil(4) * 4
    }

    /// 4×4 tiles of the lower triangle of the (D+1)×(D+1) statistics.
    pub fn tiles(&self) -> usize {
        let nb = self.da() / 4;
        nb * (nb + 1) / 2
    }

    /// Length of z (the accumulators' row): [x, x² or x_i x_j, 1].
    pub fn kz(&self) -> usize {
        super::compile::kz(self.dim, self.kind)
    }

    /// Threads of `gsel_loglike` (`GS_NTL`).
    pub fn threads_loglike(&self) -> usize {
        if self.full() {
            self.ct() * TILE_ENTRIES / 4
        } else {
            TILE_ENTRIES
        }
    }

    /// Threads of `gsel_stats` (`GS_NTS`): a tile (full) or an element of z
    /// (diagonal) each, in whole warps, at most [`MAX_STATS_THREADS`].
    pub fn threads_stats(&self) -> usize {
        let work = if self.full() { self.tiles() } else { self.kz() };
        work.next_multiple_of(32).min(MAX_STATS_THREADS)
    }

    /// Passes of `gsel_stats` over its tiles or elements (`GS_PASSES`).
    pub fn passes(&self) -> usize {
        let work = if self.full() { self.tiles() } else { self.kz() };
        work.div_ceil(self.threads_stats())
    }

    /// Floats of one component's parameters (`GS_PL`; full: a multiple of 4).
    pub fn param_len(&self) -> usize {
        if self.full() {
            self.dim * self.dp() + self.dp() + 4
        } else {
            2 * self.dim + 1
        }
    }

    /// Dynamic shared memory of `gsel_loglike` in bytes.
    pub fn smem_loglike(&self) -> usize {
        let floats = if self.full() {
            self.jc() * self.dp() + self.dim * self.xs() + TILE_ENTRIES * self.ct()
        } else {
            self.param_len()
        };
        4 * floats
    }

    /// Dynamic shared memory of `gsel_stats` in bytes.
    pub fn smem_stats(&self) -> usize {
        let floats = if self.full() {
            2 * TILE_ENTRIES * self.da()
        } else {
            TILE_ENTRIES * self.dim
        };
        4 * floats
    }

    /// The `#define`s the kernels read.
    pub fn prelude(&self) -> String {
        format!(
            "#define GS_TE {}\n#define GS_DP {}\n#define GS_CT {}\n#define GS_JC {}\n#define GS_NJC {}\n#define GS_XS {}\n#define GS_DA {}\n#define GS_TILES {}\n#define GS_NTL {}\n#define GS_NTS {}\n#define GS_PASSES {}\n#define GS_PL {}\n#define GS_SMF {}\n",
            TILE_ENTRIES,
            self.dp(),
            self.ct(),
            self.jc(),
            self.dim.div_ceil(self.jc()),
            self.xs(),
            self.da(),
            self.tiles(),
            self.threads_loglike(),
            self.threads_stats(),
            self.passes(),
            self.param_len(),
            SOFTMAX_FRAMES,
        )
    }

    /// The parameters of every component of state 0 of `model`, rows of
    /// [`param_len`](Self::param_len) (see `kernels/gselect.cu`).
    pub fn params(&self, model: &AcousticModel) -> Vec<f32> {
        let (d, pl, dp) = (self.dim, self.param_len(), self.dp());
        let Some(st) = model.states.first() else {
            return Vec::new();
        };
        let m = st.num_components();
        let mut out = vec![0f32; m * pl];
        for (g, row) in out.chunks_exact_mut(pl).enumerate() {
            let b = &st.means_invvars[g * d..(g + 1) * d];
            if self.full() {
                let v = d * (d + 1) / 2;
                let p = &st.inv_vars[g * v..(g + 1) * v];
                for i in 0..d {
                    for j in 0..=i {
                        // −½ is exact: A is −½Σ⁻¹ to the bit.
                        let a = -0.5 * p[i * (i + 1) / 2 + j];
                        row[i * dp + j] = a;
                        row[j * dp + i] = a;
                    }
                }
                row[d * dp..d * dp + d].copy_from_slice(b);
                row[d * dp + dp] = st.gconsts[g];
            } else {
                row[..d].copy_from_slice(b);
                for (c, &iv) in row[d..2 * d]
                    .iter_mut()
                    .zip(&st.inv_vars[g * d..(g + 1) * d])
                {
                    *c = -0.5 * iv;
                }
                row[2 * d] = st.gconsts[g];
            }
        }
        out
    }
}

/// The kernels, loaded from the model's module.
pub(crate) struct GselectKernels {
    pub loglike: CudaFunction,
    pub softmax: CudaFunction,
    pub stats: CudaFunction,
    pub reduce: CudaFunction,
    pub shape: GselectShape,
}

impl GselectKernels {
    /// The functions by name (`f`), with their dynamic shared memory allowed.
    pub fn load(
        f: impl Fn(&str) -> Result<CudaFunction>,
        dim: usize,
        kind: CovKind,
    ) -> Result<Self> {
        use cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as MAX_DYN;
        let shape = GselectShape::new(dim, kind);
        let k = GselectKernels {
            loglike: f("gsel_loglike")?,
            softmax: f("gsel_softmax")?,
            stats: f("gsel_stats")?,
            reduce: f("gsel_reduce")?,
            shape,
        };
        for (func, bytes) in [
            (&k.loglike, shape.smem_loglike()),
            (&k.stats, shape.smem_stats()),
        ] {
            func.set_attribute(MAX_DYN, bytes as i32)
                .map_err(driver_err("shared memory size"))?;
        }
        Ok(k)
    }
}

/// State 0 of a model on the device, ready for Gaussian selection.
pub struct Gselect {
    shape: GselectShape,
    gaussians: usize,
    params: CudaSlice<f32>,
}

/// A chunk's plan on the device, with the buffers its kernels write.
pub struct ChunkWork {
    plan: SelectionPlan,
    frame_of: CudaSlice<u32>,
    entry_of: CudaSlice<u32>,
    frame_first: CudaSlice<u32>,
    frame_weight: CudaSlice<f32>,
    items: CudaSlice<i32>,
    groups: CudaSlice<i32>,
    val: CudaSlice<f32>,
    partial: CudaSlice<f64>,
    cta_like: CudaSlice<f64>,
}

impl ChunkWork {
    /// Σ weight of the chunk's frames.
    pub fn weight(&self) -> f64 {
        self.plan.total_weight
    }
}

impl Gselect {
    pub fn new(stream: &Arc<CudaStream>, model: &AcousticModel) -> Result<Self> {
        let shape = GselectShape::new(model.dim, model.kind);
        let params = shape.params(model);
        Ok(Gselect {
            shape,
            gaussians: model.states.first().map_or(0, |s| s.num_components()),
            params: stream
                .clone_htod(&params)
                .map_err(driver_err("uploading the model"))?,
        })
    }

    /// Device bytes a frame of a chunk takes with `pairs` selected
    /// components a frame on average: its pairs' frame, entry and value,
    /// its own offset, weight and share of the softmax sums, and the pairs'
    /// share of the items' f64 statistics.
    pub fn bytes_per_frame(pairs: f64, kz: usize) -> usize {
        let per_pair = 12.0 + (8 * kz) as f64 / ITEM_ENTRIES as f64;
        (pairs * per_pair).ceil() as usize + 9
    }

    /// Plan frames `[c0, c1)` of `sel` and upload the plan; `None` when
    /// they have no pair to accumulate (every weight 0).
    pub fn upload(
        &self,
        stream: &Arc<CudaStream>,
        sel: &Selection<'_>,
        c0: usize,
        c1: usize,
    ) -> Result<Option<ChunkWork>> {
        let plan = gselect_plan::plan(sel, c0, c1, self.gaussians, ITEM_ENTRIES)?;
        if plan.entries() == 0 {
            return Ok(None);
        }
        let e = driver_err("uploading the Gaussian selection");
        let kz = self.shape.kz();
        Ok(Some(ChunkWork {
            frame_of: stream.clone_htod(&plan.frame_of).map_err(&e)?,
            entry_of: stream.clone_htod(&plan.entry_of).map_err(&e)?,
            frame_first: stream.clone_htod(&plan.frame_first).map_err(&e)?,
            frame_weight: stream.clone_htod(&plan.frame_weight).map_err(&e)?,
            items: stream
                .clone_htod(&super::plan::flat_items(&plan.items))
                .map_err(&e)?,
            groups: stream
                .clone_htod(&super::plan::flat_items(&plan.groups))
                .map_err(&e)?,
            val: stream.alloc_zeros::<f32>(plan.entries()).map_err(&e)?,
            partial: stream
                .alloc_zeros::<f64>(plan.items.len() * kz)
                .map_err(&e)?,
            cta_like: stream
                .alloc_zeros::<f64>(plan.frames().div_ceil(SOFTMAX_FRAMES))
                .map_err(&e)?,
            plan,
        }))
    }

    /// Enqueue the kernels of an uploaded chunk whose rows are in `feats`
    /// (row 0 = the chunk's first frame): statistics into `acc64` (rows of
    /// state 0's components first), Σ weight × log-likelihood into `total`.
    pub(crate) fn launch(
        &self,
        eng: &CudaEngine,
        k: &Kernels,
        feats: &CudaView<'_, f32>,
        w: &mut ChunkWork,
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<()> {
        let gk = &k.gselect;
        if gk.shape != self.shape {
            return Err(Error::Engine(
                "Gaussian selection kernels compiled for another model shape".into(),
            ));
        }
        let s = &eng.stream;
        let sh = self.shape;
        let items = w.plan.items.len() as u32;
        let cfg = |grid: (u32, u32), threads: usize, smem: usize| LaunchConfig {
            grid_dim: (grid.0, grid.1, 1),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: smem as u32,
        };

        let mut lb = s.launch_builder(&gk.loglike);
        lb.arg(feats)
            .arg(&w.frame_of)
            .arg(&w.items)
            .arg(&self.params)
            .arg(&mut w.val);
        // SAFETY: argument types and counts match the kernel; every index
        // the plan holds is inside the buffers it was uploaded with.
        unsafe { lb.launch(cfg((items, 1), sh.threads_loglike(), sh.smem_loglike())) }
            .map_err(driver_err("gsel_loglike"))?;

        let frames = w.plan.frames() as i32;
        let ctas = w.plan.frames().div_ceil(SOFTMAX_FRAMES);
        let mut lb = s.launch_builder(&gk.softmax);
        lb.arg(&mut w.val)
            .arg(&w.entry_of)
            .arg(&w.frame_first)
            .arg(&w.frame_weight)
            .arg(&frames)
            .arg(&mut w.cta_like);
        // SAFETY: as above.
        unsafe { lb.launch(cfg((ctas as u32, 1), SOFTMAX_FRAMES, 0)) }
            .map_err(driver_err("gsel_softmax"))?;

        let n = ctas as i32;
        let mut lb = s.launch_builder(&k.sum_f64);
        lb.arg(&w.cta_like).arg(&n).arg(&mut *total);
        // SAFETY: as above.
        unsafe { lb.launch(cfg((1, 1), 256, 0)) }.map_err(driver_err("sum_f64"))?;

        let mut lb = s.launch_builder(&gk.stats);
        lb.arg(feats)
            .arg(&w.frame_of)
            .arg(&w.val)
            .arg(&w.items)
            .arg(&mut w.partial);
        // SAFETY: as above.
        unsafe { lb.launch(cfg((items, 1), sh.threads_stats(), sh.smem_stats())) }
            .map_err(driver_err("gsel_stats"))?;

        let groups = w.plan.groups.len() as u32;
        let mut lb = s.launch_builder(&gk.reduce);
        lb.arg(&w.partial).arg(&w.groups).arg(&mut *acc64);
        // SAFETY: as above.
        unsafe { lb.launch(cfg((groups, sh.kz().div_ceil(256) as u32), 256, 0)) }
            .map_err(driver_err("gsel_reduce"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::random::{self, Rng};

    #[test]
    fn shapes_of_the_benchmark_and_the_extremes() {
        // The i-vector UBM: D = 60, full covariances.
        let s = GselectShape::new(60, CovKind::Full);
        assert_eq!(
            (s.dp(), s.ct(), s.jc(), s.da(), s.tiles()),
            (60, 15, 60, 64, 136)
        );
        assert_eq!(
            (s.threads_loglike(), s.threads_stats(), s.passes()),
            (240, 160, 1)
        );
        assert_eq!(s.kz(), 60 + 1830 + 1);
        // A tile per thread covers the lower triangle of the (D+1)² sums:
        // KZ elements, each once.
        let nb = s.da() / 4;
        let mut seen = vec![0u32; s.kz()];
        for t in 0..s.tiles() {
            let bi = (0..nb).find(|&b| (b + 1) * (b + 2) / 2 > t).unwrap();
            let bj = t - bi * (bi + 1) / 2;
            for r in 0..4 {
                for c in 0..4 {
                    let (i, j) = (4 * bi + r, 4 * bj + c);
                    if i > s.dim || j > i {
                        continue;
                    }
                    let k = if i == s.dim {
                        if j == s.dim {
                            s.kz() - 1
                        } else {
                            j
                        }
                    } else {
                        s.dim + i * (i + 1) / 2 + j
                    };
                    seen[k] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        // Every shape the engine takes fits an A100's 163 KB of shared
        // memory and 1024 threads.
        for d in 1..=super::super::compile::MAX_DIM {
            for kind in [CovKind::Diagonal, CovKind::Full] {
                let s = GselectShape::new(d, kind);
                assert!(s.smem_loglike() <= 160 * 1024, "{s:?}");
                assert!(s.smem_stats() + 8 * TILE_ENTRIES <= 160 * 1024, "{s:?}");
                assert!(s.threads_loglike() <= 1024 && s.threads_stats() <= 256);
                assert!(
                    s.passes() * s.threads_stats() >= if s.full() { s.tiles() } else { s.kz() }
                );
                assert!(s.jc() * s.dim.div_ceil(s.jc()) >= s.dim);
                if kind == CovKind::Full {
                    assert_eq!(s.param_len() % 4, 0);
                }
            }
        }
    }

    /// The parameter rows give the log-likelihood as the kernels evaluate
    /// it (in f64 here): gconst + Σ x_i (b_i + (Ax)_i), against the f64
    /// reference.
    #[test]
    fn parameter_rows_give_the_log_likelihood() {
        for (kind, d) in [(CovKind::Full, 7), (CovKind::Diagonal, 5)] {
            let mut rng = Rng::new(3);
            let model = random::model(&mut rng, &[4], d, kind);
            let x = random::features(&mut rng, 1, d);
            let s = GselectShape::new(d, kind);
            let p = s.params(&model);
            for g in 0..4 {
                let row = &p[g * s.param_len()..(g + 1) * s.param_len()];
                let mut ll = 0f64;
                for i in 0..d {
                    let xi = x[i] as f64;
                    let y = match kind {
                        CovKind::Full => {
                            row[d * s.dp() + i] as f64
                                + (0..d)
                                    .map(|j| row[i * s.dp() + j] as f64 * x[j] as f64)
                                    .sum::<f64>()
                        }
                        CovKind::Diagonal => row[i] as f64 + row[d + i] as f64 * xi,
                    };
                    ll += xi * y;
                }
                let gconst = match kind {
                    CovKind::Full => row[d * s.dp() + s.dp()],
                    CovKind::Diagonal => row[2 * d],
                };
                ll += gconst as f64;
                let want =
                    crate::engine::reference::component_loglike(&model, &model.states[0], g, &x);
                assert!(
                    (ll - want).abs() < 1e-9 * want.abs().max(1.0),
                    "{ll} vs {want}"
                );
            }
        }
    }
}
