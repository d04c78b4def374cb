//! A model laid out on the GPU, and the [`LoadedModel`] functions.
//!
//! Two device layouts, each built on first use:
//! - the padded state blocks of Vaněk et al. for `state_loglikes`, as
//!   [`StateBlockLayout`] sorts, groups and pads them, in blocks of the size
//!   the kernels are compiled for ([`KernelShape::block_states`], 64): weights
//!   in the papers' Fig. 2 order `[slot][k][lane]`, virtual Gaussians with
//!   gconst −∞;
//! - per state, Gaussians in blocks of `GB` as `[block][k][GB]`, for the
//!   statistics and per-component log-likelihoods, where the frames of one
//!   state are scored against that state only.
//!
//! Features stream through two device buffers: the copy of chunk i+1 (on its
//! own stream) overlaps the kernels of chunk i. The copies read page-locked
//! memory: a batch the caller wrote into memory this model lent
//! ([`LoadedModel::host_frames`]) is copied from there; frames in ordinary
//! memory are first copied into two page-locked halves of the model's own.
//! Statistics: per chunk, the kernels write per-item partial sums that a
//! reduction adds in item order, in f64, into device accumulators; the host
//! adds those into the caller's [`ModelAccumulators`] at the end. The chunk
//! size is fixed (`CHUNK_FRAMES`, halved only when device memory is short;
//! a call of fewer frames is cut in two halves), so the same inputs give the
//! same bits run after run.

mod add_sums;
mod apart;
mod batch_trace;

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::thread::JoinHandle;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaView, LaunchConfig, PushKernelArg};

use super::compile::KernelShape;
use super::estep16::{self, Estep16};
use super::estep_full::{self, EstepFull};
use super::gselect::Gselect;
use super::operands::to_fragments;
use super::pinned::PinnedBuf;
use super::plan::{self, PlanShape};
use super::{driver_err, CudaEngine, Kernels};
use crate::engine::host_frames::LentFrames;
use crate::engine::row_max::{self, RowMaxima};
use crate::engine::{FrameBatch, FrameTargets, HostFrames, LoadedModel, StateSubsets};
use crate::layout::StateBlockLayout;
use crate::model::{AcousticModel, CovKind};
use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// Frames per streamed chunk (a multiple of every tile and item size).
pub const CHUNK_FRAMES: usize = 1 << 20;
/// Frames the streaming and E-step buffers are made for at least, for a
/// call of [`FLOOR_FROM_FRAMES`] or more: the halves of a tool's full batch
/// (`train::acc_stats::BATCH_FRAMES`). Made at each size of a job's growing
/// batches, they took 1–2 ms a run on each device.
const STREAM_FLOOR_FRAMES: usize = 1 << 17;
/// Calls of fewer frames get buffers of their own size (a small job
/// allocates little).
const FLOOR_FROM_FRAMES: usize = 1 << 13;
/// Entries per statistics work item.
pub const ITEM_ENTRIES: usize = 4096;

/// The padded-block arrays the block-scoring kernels read, built on the
/// host: the model's [`StateBlockLayout`] in blocks of the kernels' size and
/// the Gaussians' weight rows packed by it.
struct BlockHost {
    layout: StateBlockLayout,
    /// Weight rows w ([`weights_row`]) in `[slot][k][lane]` order.
    w: Vec<f32>,
    /// Per block, its first slot (the kernels' `block_off`).
    off: Vec<i32>,
    /// Per block, its slots (`block_slots`).
    slots: Vec<i32>,
    /// Per lane of every block, its original state or −1 (`lane_state`).
    lane_state: Vec<i32>,
}

impl BlockHost {
    fn new(model: &AcousticModel, shape: &KernelShape) -> Self {
        let layout = StateBlockLayout::for_model(model, shape.block_states());
        // A virtual Gaussian's row: gconst (the last element) −∞, the rest 0.
        let mut pad = vec![0f32; shape.kz()];
        pad[shape.kz() - 1] = f32::NEG_INFINITY;
        let order = super::compile::scoring_z_order(model.dim, model.kind);
        let w = layout.pack_rows(&pad, |state, g, row| {
            block_weights_row(model, &order, state, g, row)
        });
        let blocks = layout.num_blocks();
        BlockHost {
            w,
            off: layout.block_offsets[..blocks]
                .iter()
                .map(|&o| o as i32)
                .collect(),
            slots: layout.block_gaussians.iter().map(|&g| g as i32).collect(),
            lane_state: layout.lane_states(),
            layout,
        }
    }
}

/// The padded-block layout on the device.
struct BlockDev {
    layout: StateBlockLayout,
    w: CudaSlice<f32>,
    off: CudaSlice<i32>,
    slots: CudaSlice<i32>,
    lane_state: CudaSlice<i32>,
}

/// The per-state layout on the device.
struct StateDev {
    w: CudaSlice<f32>,
    gblock: CudaSlice<i32>,
    ng: CudaSlice<i32>,
}

/// Streaming buffers: two device buffers of `frames` frames, and two
/// page-locked halves for frames that come in ordinary memory (made on first
/// use).
struct Stream {
    frames: usize,
    pinned: Option<[PinnedBuf; 2]>,
    dev: [CudaSlice<f32>; 2],
}

/// Batch buffers lent to callers whose copies may still be reading them: the
/// caller fills one while these are copied, and the oldest is lent again.
/// A batch's copy waits for the streaming buffer of the batch before it, so
/// with [`multi::DEPTH`](crate::engine::multi::DEPTH) batches queued the
/// copy of the oldest buffer lent is done only once a batch is: one buffer
/// more than the batches in flight lets the caller fill the next batch
/// without waiting for the device (with two, it waited 2.5 ms a run).
const LENT_IN_FLIGHT: usize = crate::engine::multi::DEPTH + 1;

/// Whether batch buffers lent are sent to the device while the host
/// fills them ([`crate::engine::upload`]); `AMTOOL_EARLY_UPLOAD=0` sends
/// each when it is full, as before (for comparing the two).
fn early_uploads() -> bool {
    static EARLY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *EARLY.get_or_init(|| std::env::var("AMTOOL_EARLY_UPLOAD").as_deref() != Ok("0"))
}

/// Where the frames of a statistics call are.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// Ordinary memory: staged through the model's page-locked halves.
    Plain,
    /// Page-locked memory this model lent: copied from where it is; with
    /// the largest |x_d| of each part copied into it, where they were noted.
    Lent(Option<&'a RowMaxima>),
    /// Page-locked memory this model lent whose frames are already on the
    /// device (sent while the host filled it, [`crate::engine::upload`]),
    /// and their maxima as for `Lent`.
    Uploaded(&'a CudaSlice<f32>, Option<&'a RowMaxima>),
}

/// A model on the GPU.
pub struct CudaModel<'e> {
    eng: &'e CudaEngine,
    k: Arc<Kernels>,
    /// Shared with a thread making the E-step's forms.
    model: Arc<AcousticModel>,
    kz: usize,
    state_ng: Vec<usize>,
    state_first: Vec<usize>,
    total_gaussians: usize,
    blk: Option<BlockDev>,
    st: Option<StateDev>,
    acc64: Option<CudaSlice<f64>>,
    /// Accumulators of the batch sent apart before the last
    /// ([`apart`]: taken in turn with [`Self::acc64`]).
    acc64_spare: Option<CudaSlice<f64>>,
    streaming: Option<Stream>,
    /// Event pairs around the kernels of the last call.
    timers: Vec<(CudaEvent, CudaEvent)>,
    /// Partial (max, sum) pairs of split tensor-core scoring.
    split_part: Option<CudaSlice<f32>>,
    /// The z operand of the K-chunked scoring kernel (shape.kc > 0).
    zq: Option<CudaSlice<f32>>,
    /// Statistics of `accumulate_deferred` calls not yet settled.
    pending: Option<Pending>,
    /// Batch buffers given back by `accumulate_frames`, oldest first.
    lent: VecDeque<PinnedBuf>,
    /// Batches sent by `accumulate_apart`, not yet collected, oldest first.
    apart: VecDeque<apart::ApartBatch>,
    /// The end of the kernels of the batch collected last, while more are
    /// in flight (for the idle time `amtool bench` reports).
    apart_end: Option<CudaEvent>,
    /// Kernel seconds of the batches collected apart since
    /// `take_apart_kernel_seconds` last took them.
    apart_kernels: f64,
    /// The device's clock for `AMTOOL_BATCH_TRACE` (made on first use).
    batch_clock: Option<batch_trace::DeviceClock>,
    /// State 0 laid out for the FP16 E-step (global statistics).
    e16: Option<Estep16>,
    /// [`Self::e16`] being made by a thread of its own, started by
    /// `prepare_statistics`, taken by the first call that needs it.
    e16_making: Option<JoinHandle<Result<Estep16>>>,
    /// Chunks of the current (or last) statistics call that took the FP16 E-step.
    e16_chunks: usize,
    /// The fewest Gaussians for which global statistics take the FP16 E-step.
    e16_min_gaussians: usize,
    /// State 0 laid out for the full-covariance tensor-core E-step.
    efull: Option<EstepFull>,
    /// Chunks of the current (or last) statistics call that took it.
    efull_chunks: usize,
    /// State log-likelihoods on the FP32 kernels, not the tensor cores
    /// ([`LoadedModel::score_in_fp32`]).
    fp32_scoring: bool,
    /// The fewest Gaussians for which global statistics take it.
    efull_min_gaussians: usize,
    /// State 0 laid out for Gaussian selection.
    gsel: Option<Gselect>,
    /// Batches whose frames were on the device when sent
    /// ([`Source::Uploaded`]).
    uploaded_batches: usize,
}

/// Device statistics kept across deferred calls: the f64 accumulators, the
/// Σ weight × log-likelihood, and the Σ weight known on the host.
struct Pending {
    acc64: CudaSlice<f64>,
    total: CudaSlice<f64>,
    weight: f64,
}

/// Weight vector w of Gaussian `g` of `state` (see `kernels/gmm.cu`): the
/// log-likelihood is z(x)·w.
fn weights_row(model: &AcousticModel, state: usize, g: usize, out: &mut [f32]) {
    let d = model.dim;
    let s = &model.states[state];
    out[..d].copy_from_slice(&s.means_invvars[g * d..(g + 1) * d]);
    match model.kind {
        CovKind::Diagonal => {
            for (o, &iv) in out[d..2 * d]
                .iter_mut()
                .zip(&s.inv_vars[g * d..(g + 1) * d])
            {
                *o = -0.5 * iv;
            }
        }
        CovKind::Full => {
            let v = d * (d + 1) / 2;
            let p = &s.inv_vars[g * v..(g + 1) * v];
            let mut idx = 0;
            for i in 0..d {
                for j in 0..=i {
                    out[d + idx] = if i == j { -0.5 * p[idx] } else { -p[idx] };
                    idx += 1;
                }
            }
        }
    }
    let last = out.len() - 1;
    out[last] = s.gconsts[g];
}

/// State 0 of `model` laid out for the FP16 E-step, uploaded on `stream`.
/// `wg`: for the wgmma kernels (`KernelShape::wg`).
fn make_e16(stream: &Arc<CudaStream>, model: &AcousticModel, wg: bool) -> Result<Estep16> {
    Estep16::new(
        stream,
        model.dim,
        model.states[0].gconsts.len(),
        wg,
        |g, r| weights_row(model, 0, g, r),
    )
}

/// [`weights_row`] in the block-scoring kernels' z order `order`
/// ([`super::compile::scoring_z_order`]: dimension by dimension, last first,
/// the gconst last).
fn block_weights_row(
    model: &AcousticModel,
    order: &[usize],
    state: usize,
    g: usize,
    out: &mut [f32],
) {
    thread_local! {
        static NATURAL: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    NATURAL.with(|n| {
        let mut natural = n.borrow_mut();
        natural.resize(out.len(), 0.0);
        weights_row(model, state, g, &mut natural);
        for (o, &k) in out.iter_mut().zip(order) {
            *o = natural[k];
        }
    });
}

fn check_dim(what: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(Error::Mismatch(format!(
            "{what}: features have dimension {got}, the model {want}"
        )));
    }
    Ok(())
}

impl<'e> CudaModel<'e> {
    pub fn new(eng: &'e CudaEngine, model: &AcousticModel) -> Result<Self> {
        if model.dim == 0 || model.dim > super::compile::MAX_DIM {
            return Err(Error::Engine(format!(
                "the CUDA engine takes dimensions 1..={}, the model has {}",
                super::compile::MAX_DIM,
                model.dim
            )));
        }
        let vlen = model.inv_var_len();
        for (s, st) in model.states.iter().enumerate() {
            let m = st.num_components();
            if st.means_invvars.len() != m * model.dim
                || st.inv_vars.len() != m * vlen
                || st.weights.len() != m
            {
                return Err(Error::Mismatch(format!(
                    "state {s}: parameter arrays do not match {m} components"
                )));
            }
        }
        let state_ng: Vec<usize> = model.states.iter().map(|s| s.num_components()).collect();
        let max_g = state_ng.iter().copied().max().unwrap_or(0);
        let shape = eng.shape_for(model.dim, model.kind, max_g);
        let k = eng.kernels(shape)?;
        let mut state_first = Vec::with_capacity(state_ng.len());
        let mut total = 0;
        for &n in &state_ng {
            state_first.push(total);
            total += n;
        }
        Ok(CudaModel {
            eng,
            k,
            model: Arc::new(model.clone()),
            kz: shape.kz(),
            state_ng,
            state_first,
            total_gaussians: total,
            blk: None,
            st: None,
            acc64: None,
            acc64_spare: None,
            streaming: None,
            timers: Vec::new(),
            split_part: None,
            zq: None,
            pending: None,
            lent: VecDeque::new(),
            apart: VecDeque::new(),
            apart_end: None,
            apart_kernels: 0.0,
            batch_clock: None,
            e16: None,
            e16_making: None,
            e16_chunks: 0,
            e16_min_gaussians: estep16::MIN_GAUSSIANS,
            efull: None,
            efull_chunks: 0,
            fp32_scoring: false,
            efull_min_gaussians: estep_full::MIN_GAUSSIANS,
            gsel: None,
            uploaded_batches: 0,
        })
    }

    pub fn shape(&self) -> KernelShape {
        self.k.shape
    }

    /// Chunks of the last statistics call (all calls since the last settle,
    /// for deferred ones) that took the FP16 tensor-core E-step; the others
    /// took the FP32 kernels.
    pub fn fp16_estep_chunks(&self) -> usize {
        self.e16_chunks
    }

    /// Batches of lent memory sent to the device while the host filled
    /// them ([`crate::engine::upload`]), since the model was made.
    pub fn uploaded_batches(&self) -> usize {
        self.uploaded_batches
    }

    /// Take the FP16 E-step from `n` Gaussians on (default
    /// [`estep16::MIN_GAUSSIANS`]; tests use 1 to cover small GMMs).
    pub fn set_fp16_estep_min_gaussians(&mut self, n: usize) {
        self.e16_min_gaussians = n;
    }

    /// Chunks of the last statistics call (all calls since the last settle,
    /// for deferred ones) that took the full-covariance tensor-core E-step.
    pub fn fullcov_estep_chunks(&self) -> usize {
        self.efull_chunks
    }

    /// Take the full-covariance tensor-core E-step from `n` Gaussians on
    /// (default [`estep_full::MIN_GAUSSIANS`]; tests use 1).
    pub fn set_fullcov_estep_min_gaussians(&mut self, n: usize) {
        self.efull_min_gaussians = n;
    }

    /// Registers, local memory (spills) and shared memory of each kernel, as
    /// the driver reports them: `name regs=R local=L smem=S` lines.
    pub fn kernel_report(&self) -> String {
        let sh = self.k.shape;
        let mut out = format!("{sh:?}\n");
        for (name, f, smem, threads) in [
            (
                "block_score",
                &self.k.block_score,
                sh.smem_score(),
                sh.threads(),
            ),
            (
                "entry_loglike",
                &self.k.entry_loglike,
                sh.smem_score(),
                sh.threads(),
            ),
            (
                "accum_stats",
                &self.k.accum_stats,
                sh.smem_stats(),
                sh.threads_stats(),
            ),
        ] {
            let regs = f.num_regs().unwrap_or(-1);
            let local = f.local_size_bytes().unwrap_or(-1);
            out.push_str(&format!(
                "{name} regs={regs} local={local} smem_dynamic={smem} threads={threads}\n"
            ));
        }
        out
    }

    /// Real and padded Gaussians of the block layout (padding overhead
    /// = padded / real − 1).
    pub fn block_padding(&mut self) -> Result<(usize, usize)> {
        self.ensure_blocks()?;
        let b = self
            .blk
            .as_ref()
            .ok_or_else(|| Error::Engine("block layout missing".into()))?;
        Ok((self.total_gaussians, b.layout.padded_gaussians()))
    }

    fn ensure_blocks(&mut self) -> Result<()> {
        if self.blk.is_some() {
            return Ok(());
        }
        let host = BlockHost::new(&self.model, &self.k.shape);
        let s = &self.eng.stream;
        let e = driver_err("uploading the model");
        // The tensor-core kernel reads the same weights in its operand order.
        let w = if self.k.shape.tcw > 0 && !self.fp32_scoring {
            to_fragments(
                &host.w,
                self.kz,
                self.k.shape.ks(),
                host.layout.block_states,
            )
        } else {
            host.w
        };
        self.blk = Some(BlockDev {
            w: s.clone_htod(&w).map_err(&e)?,
            off: s.clone_htod(&host.off).map_err(&e)?,
            slots: s.clone_htod(&host.slots).map_err(&e)?,
            lane_state: s.clone_htod(&host.lane_state).map_err(&e)?,
            layout: host.layout,
        });
        Ok(())
    }

    fn ensure_states(&mut self) -> Result<()> {
        if self.st.is_some() {
            return Ok(());
        }
        let _t = crate::timeline::Tally::start("model_upload");
        let gb = self.k.shape.gb;
        let kz = self.kz;
        let mut gblock = Vec::with_capacity(self.state_ng.len());
        let mut total = 0usize;
        for &n in &self.state_ng {
            gblock.push(total as i32);
            total += n.div_ceil(gb);
        }
        let mut w = vec![0f32; total * kz * gb];
        let mut row = vec![0f32; kz];
        for (state, &n) in self.state_ng.iter().enumerate() {
            for g in 0..n {
                weights_row(&self.model, state, g, &mut row);
                let base = (gblock[state] as usize + g / gb) * kz * gb + g % gb;
                for (k, &v) in row.iter().enumerate() {
                    w[base + k * gb] = v;
                }
            }
        }
        let ng: Vec<i32> = self.state_ng.iter().map(|&n| n as i32).collect();
        let s = &self.eng.stream;
        let e = driver_err("uploading the model");
        self.st = Some(StateDev {
            w: s.clone_htod(&w).map_err(&e)?,
            gblock: s.clone_htod(&gblock).map_err(&e)?,
            ng: s.clone_htod(&ng).map_err(&e)?,
        });
        crate::timeline::mark("model_upload");
        Ok(())
    }

    /// Entries per statistics item for a chunk of `frames` frames:
    /// `ITEM_ENTRIES`, or fewer when the chunk's (state, Gaussian block)
    /// groups are too few to give every SM several items (one small GMM over
    /// all frames). A multiple of the tile; fixed by the chunk and the
    /// device, so results stay the same run after run.
    fn item_entries(&self, frames: usize) -> usize {
        let gb = self.k.shape.gb;
        let gblocks: usize = self.state_ng.iter().map(|n| n.div_ceil(gb)).sum();
        let want = (frames * gblocks).div_ceil(8 * self.eng.multiprocessors());
        let tf = self.k.shape.tf;
        want.clamp(256, ITEM_ENTRIES).div_ceil(tf) * tf
    }

    /// `CHUNK_FRAMES`, halved while the buffers a chunk needs would take
    /// more than half the free device memory.
    fn chunk_cap(&self, bytes_per_frame: usize) -> Result<usize> {
        let (free, _) = self.eng.memory()?;
        let mut nf = CHUNK_FRAMES;
        while nf > ITEM_ENTRIES && nf * bytes_per_frame > free / 2 {
            nf /= 2;
        }
        Ok(nf)
    }

    /// Frames per chunk of a call of `frames`: [`Self::chunk_cap`], or two
    /// halves of a smaller call.
    fn chunk_frames(&self, frames: usize, bytes_per_frame: usize) -> Result<usize> {
        Ok(chunk_of(frames, self.chunk_cap(bytes_per_frame)?))
    }

    fn ensure_streaming(&mut self, frames: usize) -> Result<()> {
        if self.streaming.as_ref().is_some_and(|s| s.frames >= frames) {
            return Ok(());
        }
        let _t = crate::timeline::Tally::start("device_alloc");
        self.streaming = None;
        let n = frames * self.model.dim;
        let e = driver_err("allocating streaming buffers");
        let dev = [
            self.eng.stream.alloc_zeros::<f32>(n).map_err(&e)?,
            self.eng.stream.alloc_zeros::<f32>(n).map_err(&e)?,
        ];
        self.streaming = Some(Stream {
            frames,
            pinned: None,
            dev,
        });
        crate::timeline::mark("device_alloc");
        Ok(())
    }

    /// Copy frames `[c0, c1)` into streaming buffer `b` (on the copy stream):
    /// from where they are when `src` is memory this model lent, else through
    /// page-locked half `b`. With `want_max`, also returns the largest |x_d|
    /// of those frames (taken while the copy runs, or while staging).
    fn stage(
        &mut self,
        feats: &FrameBatch<'_>,
        c0: usize,
        c1: usize,
        b: usize,
        src: Source<'_>,
        want_max: bool,
    ) -> Result<Option<Vec<f32>>> {
        let d = feats.dim;
        let eng = self.eng;
        let st = self
            .streaming
            .as_mut()
            .ok_or_else(|| Error::Engine("streaming buffers missing".into()))?;
        let rows = &feats.data[c0 * d..c1 * d];
        let mut dst = st.dev[b].slice_mut(0..rows.len());
        let e = driver_err("copying features");
        let maxima = match src {
            Source::Plain => None,
            Source::Lent(maxima) => {
                eng.copy_stream.memcpy_htod(rows, &mut dst).map_err(&e)?;
                Some(maxima)
            }
            Source::Uploaded(_, maxima) => {
                // The frames of kept parts are not in host memory: the
                // maxima noted as the parts were sent (a chunk cut through
                // a part noted whole takes the part's, a bound).
                return match (want_max, maxima) {
                    (false, _) => Ok(None),
                    (true, Some(m)) if m.dim() == d => Ok(Some(m.noted_abs_max(c0..c1))),
                    (true, _) => Err(Error::Engine(
                        "the largest |x| of frames sent while gathered were not noted".into(),
                    )),
                };
            }
        };
        if let Some(maxima) = maxima {
            return Ok(want_max.then(|| {
                crate::timeline::tally("abs_max", || match maxima {
                    Some(m) if m.dim() == d => m.abs_max(feats.data, c0..c1),
                    _ => row_max::abs_max(rows, d),
                })
            }));
        }
        // Page-locked halves the size of the chunks streamed (not of the
        // device buffers, which may be made larger).
        if st.pinned.as_ref().is_none_or(|p| p[b].len() < rows.len()) {
            let n = rows.len();
            st.pinned = None;
            st.pinned = Some([
                PinnedBuf::new(&eng.pinned, n)?,
                PinnedBuf::new(&eng.pinned, n)?,
            ]);
        }
        let Some(half) = st.pinned.as_mut().map(|p| &mut p[b]) else {
            return Err(Error::Engine("streaming buffers missing".into()));
        };
        let host = &mut half.writable()?[..rows.len()];
        let xmax = if want_max {
            Some(row_max::copy_abs_max(rows, host, d))
        } else {
            host.copy_from_slice(rows);
            None
        };
        let copy = eng
            .copy_stream
            .memcpy_htod(&half.as_slice()[..rows.len()], &mut dst);
        // Recorded even after a failed copy: what was enqueued is waited for.
        half.copies_enqueued(&eng.copy_stream)?;
        copy.map_err(&e)?;
        Ok(xmax)
    }

    /// Whether statistics of this model may take a tensor-core E-step, which
    /// scales each chunk by its largest |x_d| (one GMM that has one).
    fn may_scale_chunks(&self) -> bool {
        self.e16_wanted(&FrameTargets::Global) || self.efull_wanted(&FrameTargets::Global)
    }

    /// Whether statistics for `targets` can take the FP16 E-step
    /// (global statistics of a diagonal model on a device that has it).
    fn e16_wanted(&self, targets: &FrameTargets<'_>) -> bool {
        matches!(targets, FrameTargets::Global)
            && self.k.estep16.is_some()
            && self.state_ng[0] >= self.e16_min_gaussians
    }

    /// Whether statistics for `targets` can take the full-covariance
    /// tensor-core E-step (global statistics of a full-covariance model on a
    /// device that has it).
    fn efull_wanted(&self, targets: &FrameTargets<'_>) -> bool {
        matches!(targets, FrameTargets::Global)
            && self.k.estep_full.is_some()
            && self.state_ng[0] >= self.efull_min_gaussians
    }

    fn ensure_efull(&mut self) -> Result<()> {
        if self.efull.is_some() {
            return Ok(());
        }
        let order = super::compile::scoring_z_order(self.model.dim, self.model.kind);
        let rows: Vec<Vec<f32>> = (0..self.state_ng[0])
            .map(|g| {
                let mut r = vec![0f32; self.kz];
                block_weights_row(&self.model, &order, 0, g, &mut r);
                r
            })
            .collect();
        self.efull = Some(EstepFull::new(&self.eng.stream, self.model.dim, &rows)?);
        Ok(())
    }

    fn ensure_e16(&mut self) -> Result<()> {
        if self.e16.is_some() {
            return Ok(());
        }
        if let Some(making) = self.e16_making.take() {
            let dev = self.eng.ctx.ordinal();
            crate::engine::batch_trace::mark_with(|| format!("e16-join-dev{dev}"));
            let made = making.join().map_err(|_| {
                Error::Engine("the thread making the E-step's forms of the model panicked".into())
            })?;
            crate::engine::batch_trace::mark_with(|| format!("e16-joined-dev{dev}"));
            self.e16 = Some(made?);
            return Ok(());
        }
        let _t = crate::timeline::Tally::start("model_upload");
        self.e16 = Some(make_e16(&self.eng.stream, &self.model, self.k.shape.wg)?);
        Ok(())
    }

    /// Starts making the FP16 E-step's forms on a thread of their own, with
    /// buffers for chunks of `room` frames: the host's part of it (the
    /// forms built in fresh memory, page by page) and the uploads took
    /// 0.5–2 ms of the thread that makes the devices ready, which then
    /// could not hold and copy a job's first batches.
    fn start_making_e16(&mut self, room: usize) -> Result<()> {
        let (stream, model) = (self.eng.stream.clone(), self.model.clone());
        let sms = self.eng.multiprocessors();
        let wg = self.k.shape.wg;
        let thread = std::thread::Builder::new()
            .name("amtool-e16".into())
            .spawn(move || {
                let dev = stream.context().ordinal();
                crate::engine::batch_trace::mark_with(|| format!("e16-start-dev{dev}"));
                let mut e = make_e16(&stream, &model, wg)?;
                crate::engine::batch_trace::mark_with(|| format!("e16-forms-dev{dev}"));
                e.reserve(room);
                e.make_room(&stream, sms)?;
                crate::engine::batch_trace::mark_with(|| format!("e16-made-dev{dev}"));
                Ok(e)
            })
            .map_err(|e| {
                Error::Engine(format!("cannot start a thread for the E-step's forms: {e}"))
            })?;
        self.e16_making = Some(thread);
        Ok(())
    }

    /// Splits of the tensor-core scoring: enough CTAs for about four waves
    /// when `n` frames alone would leave SMs idle, each split still walking
    /// at least 16 slots of its block.
    /// (The K-chunked kernel walks a slot in many stages: one slot a split
    /// is enough there.)
    fn score_splits(&self, n: usize, blk: &BlockDev) -> usize {
        let tiles = n.div_ceil(self.k.shape.score_tile()) * blk.layout.num_blocks();
        let want = (4 * self.eng.multiprocessors()).div_ceil(tiles.max(1));
        let min_slots = if self.k.shape.kc > 0 { 1 } else { 16 };
        want.min(blk.layout.max_block_gaussians() / min_slots)
            .max(1)
    }

    /// Enqueue block scoring for `n` frames on the device; `out` gets n × S.
    /// The work is split as for a chunk of `chunk` frames (≥ n): the frames
    /// are part of such a chunk, and every row gets the bits the whole
    /// chunk gives it.
    fn launch_block_score(
        &mut self,
        feats: &CudaView<'_, f32>,
        n: usize,
        chunk: usize,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let blk = self
            .blk
            .as_ref()
            .ok_or_else(|| Error::Engine("block layout missing".into()))?;
        let sh = self.k.shape;
        let (t, s) = (n as i32, self.state_ng.len() as i32);
        let stream = &self.eng.stream;
        let tc = self
            .k
            .block_score_tc
            .as_ref()
            .filter(|_| !self.fp32_scoring);
        let Some(func) = tc else {
            let cfg = LaunchConfig {
                grid_dim: (n.div_ceil(sh.tf) as u32, blk.layout.num_blocks() as u32, 1),
                block_dim: (sh.threads() as u32, 1, 1),
                shared_mem_bytes: sh.smem_score() as u32,
            };
            let mut lb = stream.launch_builder(&self.k.block_score);
            lb.arg(feats)
                .arg(&t)
                .arg(&blk.w)
                .arg(&blk.off)
                .arg(&blk.slots)
                .arg(&blk.lane_state)
                .arg(out)
                .arg(&s);
            // SAFETY: argument types and counts match the kernel; sizes were checked.
            unsafe { lb.launch(cfg) }.map_err(driver_err("block_score"))?;
            return Ok(());
        };
        let splits = self.score_splits(chunk.max(n), blk);
        let need = 2 * splits * n * self.state_ng.len();
        // Every pair a merge reads is written by the scoring first.
        let mut part = scratch(stream, self.split_part.take(), need.max(2), "split scratch")?;
        let tiles = n.div_ceil(sh.score_tile());
        let cfg = LaunchConfig {
            grid_dim: (tiles as u32, blk.layout.num_blocks() as u32, splits as u32),
            block_dim: (32 * sh.tcw as u32, 1, 1),
            shared_mem_bytes: sh.smem_tc() as u32,
        };
        let mut zq = None;
        if let Some(zfrag) = &self.k.zfrag_plain {
            // z of every 16-frame group the CTAs read, in operand order.
            let groups = tiles * sh.tcw;
            let need = groups * sh.ks() * 128;
            // zfrag_plain writes all `need` floats before the scoring reads them.
            let mut buf = scratch(stream, self.zq.take(), need, "the z operand")?;
            let zcfg = LaunchConfig {
                grid_dim: (groups as u32, sh.ks() as u32, 1),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut lb = stream.launch_builder(zfrag);
            lb.arg(feats).arg(&t).arg(&mut buf);
            // SAFETY: argument types and counts match the kernel; `buf` holds
            // groups × KS × 128 floats.
            unsafe { lb.launch(zcfg) }.map_err(driver_err("zfrag_plain"))?;
            zq = Some(buf);
        }
        let mut lb = stream.launch_builder(func);
        match &zq {
            Some(z) => lb.arg(z),
            None => lb.arg(feats),
        };
        lb.arg(&t)
            .arg(&blk.w)
            .arg(&blk.off)
            .arg(&blk.slots)
            .arg(&blk.lane_state)
            .arg(&mut *out)
            .arg(&s)
            .arg(&mut part);
        // SAFETY: argument types and counts match the kernel; `part` holds
        // splits × n × S pairs.
        unsafe { lb.launch(cfg) }.map_err(driver_err("block_score_tc"))?;
        if zq.is_some() {
            self.zq = zq;
        }
        if splits > 1 {
            let merge = self
                .k
                .merge_splits
                .as_ref()
                .ok_or_else(|| Error::Engine("merge_splits missing".into()))?;
            let elems = (n * self.state_ng.len()) as u64;
            let (sp, cfg) = (
                splits as i32,
                LaunchConfig {
                    grid_dim: (elems.div_ceil(256) as u32, 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                },
            );
            let mut lb = stream.launch_builder(merge);
            lb.arg(&part).arg(&sp).arg(&elems).arg(out);
            // SAFETY: as above.
            unsafe { lb.launch(cfg) }.map_err(driver_err("merge_splits"))?;
        }
        self.split_part = Some(part);
        Ok(())
    }

    /// Zeroed statistics for a first batch, the timers of the last call
    /// cleared.
    fn begin_pending(&mut self) -> Result<Pending> {
        self.timers.clear();
        self.e16_chunks = 0;
        self.efull_chunks = 0;
        Ok(Pending {
            acc64: self.begin_stats()?,
            total: self
                .eng
                .stream
                .alloc_zeros::<f64>(1)
                .map_err(driver_err("allocating"))?,
            weight: 0.0,
        })
    }

    /// Score rows `rows` of `feats` against every state, chunk by chunk:
    /// the chunks are those of the whole of `feats`, and each chunk's rows
    /// are scored with the work split of the whole chunk, so any rows get
    /// the bits the whole call gives them. Into a device buffer of
    /// `chunk frames × states` values; after each chunk's kernels,
    /// `take(stream, scores, r0, r1)` enqueues what takes rows `[r0, r1)`
    /// (row r0 at the buffer's start) out of it. Synchronises before it
    /// returns.
    fn score_chunks(
        &mut self,
        feats: &FrameBatch<'_>,
        rows: Range<usize>,
        mut take: impl FnMut(&Arc<CudaStream>, &CudaSlice<f32>, usize, usize) -> Result<()>,
    ) -> Result<()> {
        self.timers.clear();
        self.ensure_blocks()?;
        let (d, s_count) = (feats.dim, self.state_ng.len());
        let nf = self.chunk_frames(feats.frames, 4 * (d + s_count))?;
        let s = self.eng.stream.clone();
        let e = driver_err("state log-likelihoods");
        let mut scores = s
            .alloc_zeros::<f32>(nf.min(rows.len()) * s_count)
            .map_err(&e)?;
        for c0 in (0..feats.frames).step_by(nf) {
            let c1 = (c0 + nf).min(feats.frames);
            let (r0, r1) = (c0.max(rows.start), c1.min(rows.end));
            if r0 >= r1 {
                continue;
            }
            let dev = s.clone_htod(&feats.data[r0 * d..r1 * d]).map_err(&e)?;
            let ev = timed(self.eng, &s, || {
                self.launch_block_score(&dev.as_view(), r1 - r0, c1 - c0, &mut scores)
            })?;
            self.timers.push(ev);
            take(&s, &scores, r0, r1)?;
        }
        s.synchronize().map_err(&e)?;
        Ok(())
    }

    /// Zero the device accumulators.
    fn begin_stats(&mut self) -> Result<CudaSlice<f64>> {
        let n = self.total_gaussians * self.kz;
        let s = &self.eng.stream;
        match self.acc64.take() {
            Some(mut a) if a.len() == n => {
                s.memset_zeros(&mut a)
                    .map_err(driver_err("zeroing accumulators"))?;
                Ok(a)
            }
            _ => s
                .alloc_zeros::<f64>(n.max(1))
                .map_err(driver_err("allocating accumulators")),
        }
    }

    /// Enqueue the statistics of frames `[c0, c1)` of the batch, whose rows
    /// are in `feats` (row 0 = frame c0). Returns Σ weight of the entries.
    /// `xmax`: the largest |x_d| of those frames, where the caller took it
    /// for the FP16 E-step.
    #[allow(clippy::too_many_arguments)]
    fn stats_chunk(
        &mut self,
        feats: &CudaView<'_, f32>,
        targets: &FrameTargets<'_>,
        c0: usize,
        c1: usize,
        xmax: Option<&[f32]>,
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<(f64, Option<(CudaEvent, CudaEvent)>)> {
        if let FrameTargets::Selected(sel) = targets {
            return self.selected_chunk(feats, sel, c0, c1, acc64, total);
        }
        if let Some(xm) = xmax {
            if let Some(ev) = self.tensor_estep_chunk(feats, targets, c1 - c0, xm, acc64, total)? {
                return Ok(((c1 - c0) as f64, Some(ev)));
            }
        }
        self.fma_stats_chunk(feats, targets, c0, c1, acc64, total)
    }

    /// The tensor-core E-step of a chunk of `n` frames (FP16, diagonal or
    /// full covariances) where it takes these targets and the chunk's
    /// scales fit; `None`: the FP32 kernels take it.
    fn tensor_estep_chunk(
        &mut self,
        feats: &CudaView<'_, f32>,
        targets: &FrameTargets<'_>,
        n: usize,
        xmax: &[f32],
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<Option<(CudaEvent, CudaEvent)>> {
        let missing = || Error::Engine("E-step layout missing".into());
        if self.e16_wanted(targets) {
            self.ensure_e16()?;
            let e16 = self.e16.as_mut().ok_or_else(missing)?;
            if let Some(exps) = e16.exponents(xmax) {
                let (eng, k) = (self.eng, &self.k);
                let ev = timed(eng, &eng.stream, || {
                    e16.chunk(eng, k, feats, n, exps, acc64, total)
                })?;
                self.e16_chunks += 1;
                return Ok(Some(ev));
            }
        }
        if self.efull_wanted(targets) {
            self.ensure_efull()?;
            let ef = self.efull.as_mut().ok_or_else(missing)?;
            if let Some(exps) = ef.exponents(xmax) {
                let (eng, k) = (self.eng, &self.k);
                let ev = timed(eng, &eng.stream, || {
                    ef.chunk(eng, k, feats, n, exps, acc64, total)
                })?;
                self.efull_chunks += 1;
                return Ok(Some(ev));
            }
        }
        Ok(None)
    }

    /// The FP32 kernels' statistics of frames `[c0, c1)`: the host plan and
    /// its upload, then, between the timing events, the log-likelihood pass
    /// (where a state's Gaussians take more than one block), the statistics
    /// and their reduction, and Σ weight × log-likelihood.
    fn fma_stats_chunk(
        &mut self,
        feats: &CudaView<'_, f32>,
        targets: &FrameTargets<'_>,
        c0: usize,
        c1: usize,
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<(f64, Option<(CudaEvent, CudaEvent)>)> {
        self.ensure_states()?;
        let sh = self.k.shape;
        let p = plan::plan(
            targets,
            c0,
            c1,
            &PlanShape {
                tile: sh.tf,
                chunk: self.item_entries(c1 - c0),
                gblock: sh.gb,
                state_gaussians: &self.state_ng,
                state_first_gaussian: &self.state_first,
            },
        );
        if p.entries == 0 || p.ll_items.is_empty() {
            return Ok((p.total_weight, None));
        }
        // One pass when every state's Gaussians fit in one block: the
        // statistics kernel takes each entry's log-likelihood from its own
        // scores, so there is no entry_loglike pass.
        let one_pass = self.state_ng.iter().all(|&g| g <= sh.gb);
        let mut w = self.upload_plan(&p, one_pass)?;
        let s = &self.eng.stream;
        let ev = (new_timing_event(self.eng)?, new_timing_event(self.eng)?);
        ev.0.record(s)
            .map_err(driver_err("uploading the work plan"))?;
        let entry_ll = if one_pass {
            None
        } else {
            Some(self.entry_loglike_pass(feats, &p, &mut w)?)
        };
        if !p.acc_items.is_empty() {
            self.accum_stats_pass(feats, &p, &mut w, entry_ll.as_ref(), acc64)?;
        }
        let n_items = w.wll_items as i32;
        let mut lb = s.launch_builder(&self.k.sum_f64);
        lb.arg(&w.item_wll).arg(&n_items).arg(&mut *total);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: argument types and counts match the kernel.
        unsafe { lb.launch(cfg) }.map_err(driver_err("sum_f64"))?;
        ev.1.record(s).map_err(driver_err("timing"))?;
        Ok((p.total_weight, Some(ev)))
    }

    /// A chunk's work plan on the device, with the buffers its kernels fill.
    fn upload_plan(&self, p: &plan::EntryPlan, one_pass: bool) -> Result<PlanOnDevice> {
        let s = &self.eng.stream;
        let e = driver_err("uploading the work plan");
        let wll_items = if one_pass {
            p.acc_items.len()
        } else {
            p.ll_items.len()
        };
        Ok(PlanOnDevice {
            frame_of: p
                .frame_of
                .as_ref()
                .map(|v| s.clone_htod(v))
                .transpose()
                .map_err(&e)?,
            weight_of: p
                .weight_of
                .as_ref()
                .map(|v| s.clone_htod(v))
                .transpose()
                .map_err(&e)?,
            item_wll: s.alloc_zeros::<f64>(wll_items.max(1)).map_err(&e)?,
            wll_items,
            acc_items: s.clone_htod(&plan::flat_items(&p.acc_items)).map_err(&e)?,
            groups: s.clone_htod(&plan::flat_items(&p.groups)).map_err(&e)?,
            partial: s
                .alloc_zeros::<f32>((p.acc_items.len() * self.k.shape.gb * self.kz).max(1))
                .map_err(&e)?,
        })
    }

    /// Pass 1 of two: every entry's log-likelihood over all its state's
    /// Gaussians (and each item's Σ weight·L).
    fn entry_loglike_pass(
        &self,
        feats: &CudaView<'_, f32>,
        p: &plan::EntryPlan,
        w: &mut PlanOnDevice,
    ) -> Result<CudaSlice<f32>> {
        let (s, sh, st) = (&self.eng.stream, self.k.shape, self.state_layout()?);
        let e = driver_err("uploading the work plan");
        let ll_items = s.clone_htod(&plan::flat_items(&p.ll_items)).map_err(&e)?;
        let mut entry_ll = s.alloc_zeros::<f32>(p.entries).map_err(&e)?;
        let null = 0u64;
        let cfg = LaunchConfig {
            grid_dim: (p.ll_items.len() as u32, 1, 1),
            block_dim: (sh.threads() as u32, 1, 1),
            shared_mem_bytes: sh.smem_score() as u32,
        };
        let mut lb = s.launch_builder(&self.k.entry_loglike);
        entry_args(&mut lb, feats, (&w.frame_of, &w.weight_of), &null);
        lb.arg(&ll_items)
            .arg(&st.w)
            .arg(&st.gblock)
            .arg(&st.ng)
            .arg(&mut entry_ll)
            .arg(&mut w.item_wll);
        // SAFETY: argument types and counts match the kernel.
        unsafe { lb.launch(cfg) }.map_err(driver_err("entry_loglike"))?;
        Ok(entry_ll)
    }

    /// The statistics of every item (`accum_stats`; in one pass, with each
    /// item's Σ weight·L) and their sum per (state, Gaussian block) into
    /// `acc64` (`reduce_partials`).
    fn accum_stats_pass(
        &self,
        feats: &CudaView<'_, f32>,
        p: &plan::EntryPlan,
        w: &mut PlanOnDevice,
        entry_ll: Option<&CudaSlice<f32>>,
        acc64: &mut CudaSlice<f64>,
    ) -> Result<()> {
        let (s, sh, st) = (&self.eng.stream, self.k.shape, self.state_layout()?);
        let null = 0u64;
        let mut lb = s.launch_builder(&self.k.accum_stats);
        entry_args(&mut lb, feats, (&w.frame_of, &w.weight_of), &null);
        match entry_ll {
            Some(l) => lb.arg(l),
            None => lb.arg(&null),
        };
        lb.arg(&w.acc_items)
            .arg(&st.w)
            .arg(&st.gblock)
            .arg(&st.ng)
            .arg(&mut w.partial);
        if entry_ll.is_none() {
            lb.arg(&mut w.item_wll);
        } else {
            lb.arg(&null);
        }
        let cfg = LaunchConfig {
            grid_dim: (p.acc_items.len() as u32, 1, 1),
            block_dim: (sh.threads_stats() as u32, 1, 1),
            shared_mem_bytes: sh.smem_stats() as u32,
        };
        // SAFETY: argument types and counts match the kernel.
        unsafe { lb.launch(cfg) }.map_err(driver_err("accum_stats"))?;

        let mut lb = s.launch_builder(&self.k.reduce_partials);
        lb.arg(&w.partial).arg(&w.groups).arg(&mut *acc64);
        let (cols, runs) = reduce_block(&p.groups);
        let cfg = LaunchConfig {
            grid_dim: (
                p.groups.len() as u32,
                (sh.gb * self.kz).div_ceil(cols) as u32,
                1,
            ),
            block_dim: (cols as u32, runs as u32, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: as above.
        unsafe { lb.launch(cfg) }.map_err(driver_err("reduce_partials"))?;
        Ok(())
    }

    fn state_layout(&self) -> Result<&StateDev> {
        self.st
            .as_ref()
            .ok_or_else(|| Error::Engine("state layout missing".into()))
    }

    /// [`Self::stats_chunk`] of a Gaussian selection: the host plan and its
    /// upload, then the kernels between the timing events.
    #[allow(clippy::too_many_arguments)]
    fn selected_chunk(
        &mut self,
        feats: &CudaView<'_, f32>,
        sel: &crate::engine::Selection<'_>,
        c0: usize,
        c1: usize,
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<(f64, Option<(CudaEvent, CudaEvent)>)> {
        if self.gsel.is_none() {
            self.gsel = Some(Gselect::new(&self.eng.stream, &self.model)?);
        }
        let gs = self
            .gsel
            .as_ref()
            .ok_or_else(|| Error::Engine("Gaussian selection layout missing".into()))?;
        let s = &self.eng.stream;
        let Some(mut work) = gs.upload(s, sel, c0, c1)? else {
            return Ok((0.0, None));
        };
        let ev = (new_timing_event(self.eng)?, new_timing_event(self.eng)?);
        let e = driver_err("timing");
        ev.0.record(s).map_err(&e)?;
        gs.launch(self.eng, &self.k, feats, &mut work, acc64, total)?;
        ev.1.record(s).map_err(&e)?;
        Ok((work.weight(), Some(ev)))
    }

    /// Download the device accumulators and add them into `acc`.
    fn finish_stats(
        &mut self,
        acc64: CudaSlice<f64>,
        total: &CudaSlice<f64>,
        weight: f64,
        acc: &mut ModelAccumulators,
    ) -> Result<f64> {
        let s = &self.eng.stream;
        let sums = s
            .clone_dtoh(&acc64)
            .map_err(driver_err("downloading statistics"))?;
        let tot = s
            .clone_dtoh(total)
            .map_err(driver_err("downloading statistics"))?[0];
        self.acc64 = Some(acc64);
        self.add_sums(&sums, tot, weight, acc);
        Ok(tot)
    }

    /// Adds the device accumulators `sums` (Gaussians × kz), their Σ weight
    /// × log-likelihood `tot` and Σ weight into `acc`, element by element.
    fn add_sums(&self, sums: &[f64], tot: f64, weight: f64, acc: &mut ModelAccumulators) {
        add_sums::add_batch(
            acc,
            sums,
            (tot, weight),
            &self.state_first,
            self.row_shape(),
            None,
        );
    }

    /// The layout of the device accumulators' rows.
    fn row_shape(&self) -> add_sums::RowShape {
        add_sums::RowShape {
            dim: self.model.dim,
            vlen: self.model.inv_var_len(),
            kz: self.kz,
        }
    }

    fn check_acc(&self, acc: &ModelAccumulators) -> Result<()> {
        let ok = acc.dim == self.model.dim
            && acc.kind == self.model.kind
            && acc.states.len() == self.state_ng.len()
            && acc
                .states
                .iter()
                .zip(&self.state_ng)
                .all(|(a, &n)| a.occupancy.len() == n);
        if !ok {
            return Err(Error::Mismatch(
                "accumulators are shaped for another model".into(),
            ));
        }
        Ok(())
    }

    /// Kernel time of `state_loglikes` with the features already on the
    /// device: the median of `reps` runs (after one warm-up), timed with
    /// device events; also returns the output of the last run.
    pub fn time_state_loglikes(
        &mut self,
        feats: FrameBatch<'_>,
        reps: usize,
    ) -> Result<(f64, Vec<f32>)> {
        check_dim("state log-likelihoods", feats.dim, self.model.dim)?;
        self.ensure_blocks()?;
        let s = self.eng.stream.clone();
        let e = driver_err("timing state_loglikes");
        let dev = s.clone_htod(feats.data).map_err(&e)?;
        let mut out = s
            .alloc_zeros::<f32>(feats.frames * self.state_ng.len())
            .map_err(&e)?;
        let mut times = Vec::new();
        for r in 0..=reps {
            let a = self
                .eng
                .ctx
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(&e)?;
            let b = self
                .eng
                .ctx
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(&e)?;
            a.record(&s).map_err(&e)?;
            self.launch_block_score(&dev.as_view(), feats.frames, feats.frames, &mut out)?;
            b.record(&s).map_err(&e)?;
            b.synchronize().map_err(&e)?;
            if r > 0 {
                times.push(f64::from(a.elapsed_ms(&b).map_err(&e)?) / 1e3);
            }
        }
        let host = s.clone_dtoh(&out).map_err(&e)?;
        Ok((median(&mut times), host))
    }

    /// Time of `accumulate` with the features already on the device (host
    /// planning, plan uploads, kernels and the download of the statistics
    /// included; wall clock around a synchronised stream): the median of
    /// `reps` runs after one warm-up. `acc` receives the statistics of the
    /// last run.
    pub fn time_accumulate(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        reps: usize,
        acc: &mut ModelAccumulators,
    ) -> Result<f64> {
        check_dim("statistics", feats.dim, self.model.dim)?;
        self.check_acc(acc)?;
        plan::validate(&targets, feats.frames, &self.state_ng)?;
        self.ensure_states()?;
        let s = self.eng.stream.clone();
        let e = driver_err("timing accumulate");
        let dev = s.clone_htod(feats.data).map_err(&e)?;
        s.synchronize().map_err(&e)?;
        let mut times = Vec::new();
        let d = feats.dim;
        for r in 0..=reps {
            self.e16_chunks = 0;
            self.efull_chunks = 0;
            let fresh = ModelAccumulators::zeros(&self.model, acc.flags);
            let mut run_acc = fresh;
            let t0 = std::time::Instant::now();
            let mut acc64 = self.begin_stats()?;
            let mut total = s.alloc_zeros::<f64>(1).map_err(&e)?;
            let mut weight = 0.0;
            for c0 in (0..feats.frames).step_by(CHUNK_FRAMES) {
                let c1 = (c0 + CHUNK_FRAMES).min(feats.frames);
                let xmax = (self.e16_wanted(&targets) || self.efull_wanted(&targets))
                    .then(|| row_max::abs_max(&feats.data[c0 * d..c1 * d], d));
                weight += self
                    .stats_chunk(
                        &dev.slice(c0 * d..c1 * d),
                        &targets,
                        c0,
                        c1,
                        xmax.as_deref(),
                        &mut acc64,
                        &mut total,
                    )?
                    .0;
            }
            self.finish_stats(acc64, &total, weight, &mut run_acc)?;
            if r > 0 {
                times.push(t0.elapsed().as_secs_f64());
            }
            if r == reps {
                acc.add(&run_acc);
            }
        }
        Ok(median(&mut times))
    }
}

/// An event that records time (cudarc's default disables timing).
/// The per-frame tables of `gather_columns` for a batch's state subsets.
struct SubsetTables {
    /// Per frame, where its output row starts (one more entry: the total).
    row_out: Vec<u64>,
    /// Per frame, its utterance's first entry in `states` and its count.
    cols: Vec<i32>,
    /// Every utterance's states, one after another (never empty: a lone 0
    /// when none, which no frame reads).
    states: Vec<u32>,
}

impl SubsetTables {
    fn new(subsets: &StateSubsets) -> Self {
        let frames = subsets.total_frames();
        let mut t = SubsetTables {
            row_out: Vec::with_capacity(frames + 1),
            cols: Vec::with_capacity(2 * frames),
            states: Vec::new(),
        };
        let mut at = 0u64;
        for u in 0..subsets.len() {
            let st = subsets.states(u);
            let first = t.states.len() as i32;
            t.states.extend_from_slice(st);
            for _ in 0..subsets.frames(u) {
                t.row_out.push(at);
                t.cols.extend([first, st.len() as i32]);
                at += st.len() as u64;
            }
        }
        t.row_out.push(at);
        if t.states.is_empty() {
            t.states.push(0);
        }
        t
    }
}

/// A device scratch buffer of at least `need` floats: `kept` when it is
/// large enough, else a new one. Its contents are not initialised: callers
/// write every value a kernel reads.
fn scratch(
    stream: &Arc<CudaStream>,
    kept: Option<CudaSlice<f32>>,
    need: usize,
    what: &str,
) -> Result<CudaSlice<f32>> {
    match kept {
        Some(b) if b.len() >= need => Ok(b),
        // SAFETY: see above; the callers write before they read.
        _ => unsafe { stream.alloc::<f32>(need) }
            .map_err(|e| Error::Engine(format!("CUDA: allocating {what}: {e}"))),
    }
}

fn new_timing_event(eng: &CudaEngine) -> Result<CudaEvent> {
    eng.ctx
        .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver_err("timing event"))
}

/// Events recorded on `stream` before and after what `enqueue` enqueues
/// there (the kernel timers of a call).
/// A chunk's work plan on the device (`CudaModel::upload_plan`), with the
/// buffers its kernels fill: the items' statistics and Σ weight·L.
struct PlanOnDevice {
    frame_of: Option<CudaSlice<u32>>,
    weight_of: Option<CudaSlice<f32>>,
    acc_items: CudaSlice<i32>,
    groups: CudaSlice<i32>,
    partial: CudaSlice<f32>,
    item_wll: CudaSlice<f64>,
    /// Items with a Σ weight·L in `item_wll`.
    wll_items: usize,
}

/// The leading arguments of both statistics passes: the frames, and each
/// entry's frame and weight (null: entry e is frame e, weight 1).
fn entry_args<'a>(
    lb: &mut cudarc::driver::LaunchArgs<'a>,
    feats: &'a CudaView<'_, f32>,
    (frame_of, weight_of): (&'a Option<CudaSlice<u32>>, &'a Option<CudaSlice<f32>>),
    null: &'a u64,
) {
    lb.arg(feats);
    match frame_of {
        Some(f) => lb.arg(f),
        None => lb.arg(null),
    };
    match weight_of {
        Some(x) => lb.arg(x),
        None => lb.arg(null),
    };
}

/// `reduce_partials`' block: (element columns, runs of items a column sums
/// at once). A group of many items (one GMM over a chunk: ~1000) is summed
/// in 8 runs; groups of few items (many states) in one, as before.
fn reduce_block(groups: &[[i32; 4]]) -> (usize, usize) {
    let most = groups.iter().map(|g| g[1]).max().unwrap_or(0);
    if groups.len() <= 64 && most >= 64 {
        (32, 8)
    } else {
        (256, 1)
    }
}

fn timed(
    eng: &CudaEngine,
    stream: &CudaStream,
    enqueue: impl FnOnce() -> Result<()>,
) -> Result<(CudaEvent, CudaEvent)> {
    let ev = (new_timing_event(eng)?, new_timing_event(eng)?);
    let e = driver_err("timing");
    ev.0.record(stream).map_err(&e)?;
    enqueue()?;
    ev.1.record(stream).map_err(&e)?;
    Ok(ev)
}

/// Frames per chunk of a call of `frames` when chunks may take `cap`: a
/// call of fewer than two chunks' frames (a tool's batch of utterances) is
/// still cut in two, so the copy of the second half overlaps the kernels of
/// the first.
pub(super) fn chunk_of(frames: usize, cap: usize) -> usize {
    let nf = match frames < 2 * cap && frames > 2 * ITEM_ENTRIES {
        true => frames.div_ceil(2).next_multiple_of(ITEM_ENTRIES),
        false => cap,
    };
    nf.min(frames.max(1))
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

impl LoadedModel for CudaModel<'_> {
    fn num_states(&self) -> usize {
        self.state_ng.len()
    }

    fn last_kernel_seconds(&self) -> Option<f64> {
        let mut total = 0.0;
        for (a, b) in &self.timers {
            b.synchronize().ok()?;
            total += f64::from(a.elapsed_ms(b).ok()?) / 1e3;
        }
        Some(total)
    }

    fn state_loglikes(&mut self, feats: FrameBatch<'_>, out: &mut [f32]) -> Result<()> {
        self.state_loglikes_rows(feats, 0..feats.frames, out)
    }

    fn score_in_fp32(&mut self) {
        if !self.fp32_scoring && self.k.block_score_tc.is_some() {
            self.fp32_scoring = true;
            // The block weights are laid out for the kernel that reads them.
            self.blk = None;
        }
    }

    /// The call's chunks are those of the whole of `feats`; of each, the
    /// rows asked for are scored with the work split of the whole chunk.
    fn state_loglikes_rows(
        &mut self,
        feats: FrameBatch<'_>,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        check_dim("state log-likelihoods", feats.dim, self.model.dim)?;
        let s_count = self.state_ng.len();
        if rows.start > rows.end || rows.end > feats.frames {
            return Err(Error::Mismatch(format!(
                "rows {}..{} of a call of {} frames",
                rows.start, rows.end, feats.frames
            )));
        }
        if out.len() != rows.len() * s_count {
            return Err(Error::Mismatch(format!(
                "output has {} values, expected {} frames × {} states",
                out.len(),
                rows.len(),
                s_count
            )));
        }
        if rows.is_empty() || s_count == 0 {
            return Ok(());
        }
        let e = driver_err("state log-likelihoods");
        let start = rows.start;
        self.score_chunks(&feats, rows, |s, scores, r0, r1| {
            let o = (r0 - start) * s_count..(r1 - start) * s_count;
            s.memcpy_dtoh(&scores.slice(0..o.len()), &mut out[o])
                .map_err(&e)
        })
    }

    /// Every state scored on the device, as `state_loglikes`, chunk by
    /// chunk; after each chunk, `gather_columns` picks each frame's
    /// utterance's columns into a compact device buffer and only those are
    /// copied back (forced alignment: an utterance's graph reaches a few
    /// pdfs of thousands).
    fn state_loglikes_subset(
        &mut self,
        feats: FrameBatch<'_>,
        subsets: &StateSubsets,
        out: &mut [f32],
    ) -> Result<()> {
        check_dim("state log-likelihoods", feats.dim, self.model.dim)?;
        let s_count = self.state_ng.len();
        subsets.check(feats.frames, s_count, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        let tables = SubsetTables::new(subsets);
        let s = self.eng.stream.clone();
        let e = driver_err("state log-likelihood subsets");
        let row_out = s.clone_htod(&tables.row_out).map_err(&e)?;
        let cols = s.clone_htod(&tables.cols).map_err(&e)?;
        let states = s.clone_htod(&tables.states).map_err(&e)?;
        // gather_columns writes every value that is copied back.
        let mut compact = scratch(&s, None, out.len(), "state log-likelihood subsets")?;
        let gather = self.k.gather_columns.clone();
        let (sc, host_rows) = (s_count as i32, &tables.row_out);
        self.score_chunks(&feats, 0..feats.frames, |s, all, c0, c1| {
            let n = (c1 - c0) as i32;
            let cfg = LaunchConfig {
                grid_dim: ((c1 - c0).div_ceil(8) as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let t0 = c0 as i32;
            let mut lb = s.launch_builder(&gather);
            lb.arg(all)
                .arg(&sc)
                .arg(&t0)
                .arg(&n)
                .arg(&row_out)
                .arg(&cols)
                .arg(&states)
                .arg(&mut compact);
            // SAFETY: argument types and counts match the kernel; the tables
            // cover every frame and `compact` every output value (checked
            // against the subsets above).
            unsafe { lb.launch(cfg) }.map_err(driver_err("gather_columns"))?;
            let (r0, r1) = (host_rows[c0] as usize, host_rows[c1] as usize);
            if r1 > r0 {
                s.memcpy_dtoh(&compact.slice(r0..r1), &mut out[r0..r1])
                    .map_err(&e)?;
            }
            Ok(())
        })
    }

    fn component_loglikes(
        &mut self,
        state: usize,
        feats: FrameBatch<'_>,
        out: &mut [f32],
    ) -> Result<()> {
        check_dim("component log-likelihoods", feats.dim, self.model.dim)?;
        let g = *self.state_ng.get(state).ok_or_else(|| {
            Error::Mismatch(format!(
                "state {state} is out of range (the model has {})",
                self.state_ng.len()
            ))
        })?;
        if out.len() != feats.frames * g {
            return Err(Error::Mismatch(format!(
                "output has {} values, expected {} frames × {} components",
                out.len(),
                feats.frames,
                g
            )));
        }
        if feats.frames == 0 || g == 0 {
            return Ok(());
        }
        self.timers.clear();
        self.ensure_states()?;
        let sh = self.k.shape;
        let d = feats.dim;
        let nf = self.chunk_frames(feats.frames, 4 * (d + g))?;
        let s = self.eng.stream.clone();
        let e = driver_err("component log-likelihoods");
        let st = self
            .st
            .as_ref()
            .ok_or_else(|| Error::Engine("state layout missing".into()))?;
        let mut dev_out = s.alloc_zeros::<f32>(nf * g).map_err(&e)?;
        for c0 in (0..feats.frames).step_by(nf) {
            let c1 = (c0 + nf).min(feats.frames);
            let n = c1 - c0;
            let dev = s.clone_htod(&feats.data[c0 * d..c1 * d]).map_err(&e)?;
            let mut items = Vec::new();
            for e0 in (0..n).step_by(sh.tf) {
                for gb in 0..g.div_ceil(sh.gb) {
                    items.extend_from_slice(&[
                        state as i32,
                        e0 as i32,
                        (n - e0).min(sh.tf) as i32,
                        gb as i32,
                    ]);
                }
            }
            let items_dev = s.clone_htod(&items).map_err(&e)?;
            let mut lb = s.launch_builder(&self.k.component_ll);
            lb.arg(&dev)
                .arg(&items_dev)
                .arg(&st.w)
                .arg(&st.gblock)
                .arg(&st.ng)
                .arg(&mut dev_out);
            let cfg = LaunchConfig {
                grid_dim: ((items.len() / 4) as u32, 1, 1),
                block_dim: (sh.threads() as u32, 1, 1),
                shared_mem_bytes: sh.smem_score() as u32,
            };
            // SAFETY: argument types and counts match the kernel.
            unsafe { lb.launch(cfg) }.map_err(driver_err("component_ll"))?;
            s.memcpy_dtoh(&dev_out.slice(0..n * g), &mut out[c0 * g..c1 * g])
                .map_err(&e)?;
        }
        s.synchronize().map_err(&e)?;
        Ok(())
    }

    fn accumulate(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<f64> {
        if self.pending.is_some() {
            return Err(Error::Engine(
                "deferred statistics must be settled before another accumulate".into(),
            ));
        }
        let r = self.accumulate_deferred(feats, targets, acc);
        let like = self.settle(acc);
        r?;
        like
    }

    fn accumulate_deferred(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<Option<f64>> {
        self.deferred(feats, targets, acc, Source::Plain)
    }

    fn host_frames(&mut self, floats: usize) -> Result<HostFrames> {
        // The oldest buffer given back is lent again once enough are in
        // flight (a smaller one goes back to the engine's pool).
        let old = if self.lent.len() >= LENT_IN_FLIGHT {
            self.lent.pop_front().filter(|b| b.len() >= floats)
        } else {
            None
        };
        let mut buf = match old {
            Some(b) => b,
            None => {
                let b = PinnedBuf::new(&self.eng.pinned, floats)?;
                crate::timeline::mark("pinned_alloc");
                b
            }
        };
        crate::timeline::tally("buffer_wait", || buf.wait())?;
        if early_uploads() && self.eng.uploads() {
            let cap = self.global_chunk_cap()?;
            crate::timeline::tally("twin", || buf.with_twin(&self.eng.copy_stream, cap))?;
        }
        let mut frames = HostFrames::lent(Box::new(buf));
        if self.may_scale_chunks() {
            frames.track_abs_max(self.model.dim);
        }
        Ok(frames)
    }

    fn accumulate_frames(
        &mut self,
        frames: &mut HostFrames,
        dim: usize,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<Option<f64>> {
        self.send_frames(frames, dim, |m, batch, src| {
            m.deferred(batch, targets, acc, src)
        })
    }

    fn accumulate_apart(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        shape: &ModelAccumulators,
    ) -> Result<Option<ModelAccumulators>> {
        self.send_apart(&feats, &targets, shape, Source::Plain)?;
        Ok(None)
    }

    fn prepare_statistics(&mut self, targets: &FrameTargets<'_>) -> Result<()> {
        let dev = self.eng.ctx.ordinal();
        let mark =
            |what: &str| crate::engine::batch_trace::mark_with(|| format!("{what}-dev{dev}"));
        mark("prepare");
        let r = self.reserve_first_batch(targets);
        let r = r.and_then(|()| self.start_batch_clock());
        mark("prepared");
        r
    }

    fn statistics_ready(&self) -> bool {
        self.e16_making.as_ref().is_none_or(|t| t.is_finished())
    }

    fn accumulate_frames_apart(
        &mut self,
        frames: &mut HostFrames,
        dim: usize,
        targets: FrameTargets<'_>,
        shape: &ModelAccumulators,
    ) -> Result<Option<ModelAccumulators>> {
        self.send_frames(frames, dim, |m, batch, src| {
            m.send_apart(&batch, &targets, shape, src)
        })?;
        Ok(None)
    }

    fn collect_apart(&mut self, acc: &mut ModelAccumulators) -> Result<f64> {
        self.collect_apart_sums(acc)
    }

    fn take_apart(
        &mut self,
        shape: &ModelAccumulators,
    ) -> Result<(f64, crate::engine::adder::AddLater)> {
        self.take_apart_sums(shape)
    }

    fn take_apart_kernel_seconds(&mut self) -> Option<f64> {
        Some(std::mem::take(&mut self.apart_kernels))
    }

    fn settle(&mut self, acc: &mut ModelAccumulators) -> Result<f64> {
        match self.pending.take() {
            None => Ok(0.0),
            Some(p) => self.finish_stats(p.acc64, &p.total, p.weight, acc),
        }
    }
}

impl CudaModel<'_> {
    /// `send(self, batch, src)` of the `dim`-wide frames in `frames`, which
    /// is left empty: plain memory is kept; memory this model lent goes to
    /// the buffers in flight (lent again once its copies are done), leaving
    /// `frames` with no room.
    fn send_frames<R>(
        &mut self,
        frames: &mut HostFrames,
        dim: usize,
        send: impl FnOnce(&mut Self, FrameBatch<'_>, Source<'_>) -> Result<R>,
    ) -> Result<R> {
        let len = frames.len();
        if dim == 0 || len % dim != 0 {
            return Err(Error::Mismatch(format!(
                "statistics: {len} floats are not whole frames of dimension {dim}"
            )));
        }
        let Some(LentFrames { mem, len, maxima }) = frames.take_lent_sent() else {
            let r = send(self, FrameBatch::new(frames.as_slice(), dim), Source::Plain);
            frames.clear();
            return r;
        };
        let Ok(buf) = mem.into_any().downcast::<PinnedBuf>() else {
            return Err(Error::Engine(
                "a batch buffer lent by another engine was passed to the CUDA engine".into(),
            ));
        };
        let mut buf = *buf;
        if len > buf.len() {
            return Err(Error::Engine(format!(
                "batch of {len} floats in a buffer of {}",
                buf.len()
            )));
        }
        let r = match buf.uploaded(len, &self.eng.stream) {
            Ok(true) => {
                self.uploaded_batches += 1;
                let (data, dev) = (&buf.as_slice()[..len], buf.twin());
                let r = match dev {
                    Some(dev) => send(
                        self,
                        FrameBatch::new(data, dim),
                        Source::Uploaded(dev, maxima.as_ref()),
                    ),
                    None => Err(Error::Engine("a batch's device copy is missing".into())),
                };
                self.lent.push_back(buf);
                return r;
            }
            Ok(false) => send(
                self,
                FrameBatch::new(&buf.as_slice()[..len], dim),
                Source::Lent(maxima.as_ref()),
            ),
            Err(e) => Err(e),
        };
        // Whatever was enqueued before an error is waited for as well.
        let mark = buf.copies_enqueued(&self.eng.copy_stream);
        self.lent.push_back(buf);
        mark?;
        r
    }

    /// `accumulate_deferred` of frames in `src` memory.
    fn deferred(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
        src: Source<'_>,
    ) -> Result<Option<f64>> {
        check_dim("statistics", feats.dim, self.model.dim)?;
        self.check_acc(acc)?;
        plan::validate(&targets, feats.frames, &self.state_ng)?;
        if feats.frames == 0 {
            return Ok(Some(0.0));
        }
        let mut pend = match self.pending.take() {
            Some(p) => p,
            None => self.begin_pending()?,
        };
        let r = self.enqueue_stats(&feats, &targets, src, &mut pend);
        // Kept even after an error: what was enqueued before it is settled
        // (or dropped) with the rest.
        self.pending = Some(pend);
        r.map(|()| None)
    }

    /// The model's forms the statistics of `targets` take: the tensor-core
    /// E-step's where it takes them (the FP32 kernels' state layout is
    /// uploaded only if a chunk falls back to them, see
    /// [`Self::fma_stats_chunk`]), else the state layout.
    fn ensure_stats_model(&mut self, targets: &FrameTargets<'_>) -> Result<()> {
        let (e16, efull) = (self.e16_wanted(targets), self.efull_wanted(targets));
        if e16 {
            self.ensure_e16()?;
        }
        if efull {
            self.ensure_efull()?;
        }
        if !(e16 || efull) {
            self.ensure_states()?;
        }
        Ok(())
    }

    /// Frames per chunk of a statistics call of `frames` frames for
    /// `targets`, and the frames its buffers are made for: a job's batches
    /// grow from 16k frames to 256k, and its buffers are made once, for the
    /// chunks of a full batch.
    fn stats_chunks(&self, frames: usize, targets: &FrameTargets<'_>) -> Result<(usize, usize)> {
        self.stats_chunks_with(frames, targets, self.e16_frame_bytes())
    }

    /// Device bytes a chunk's frame takes in the FP16 E-step's buffers (made
    /// or being made; none without them).
    fn e16_frame_bytes(&self) -> usize {
        match (&self.e16, &self.e16_making) {
            (Some(e), _) => e.bytes_per_frame(),
            (None, Some(_)) => Estep16::frame_bytes(self.model.dim, self.state_ng[0]),
            (None, None) => 0,
        }
    }

    /// The largest chunk of global statistics now (how the pieces of a
    /// batch sent while it is gathered are cut, see
    /// [`crate::engine::upload`]).
    fn global_chunk_cap(&self) -> Result<usize> {
        self.stats_chunk_cap(&FrameTargets::Global, self.e16_frame_bytes())
    }

    /// [`stats_chunks`](Self::stats_chunks) with `e16_bytes` a frame for
    /// the FP16 E-step's buffers.
    fn stats_chunks_with(
        &self,
        frames: usize,
        targets: &FrameTargets<'_>,
        e16_bytes: usize,
    ) -> Result<(usize, usize)> {
        let cap = self.stats_chunk_cap(targets, e16_bytes)?;
        let nf = chunk_of(frames, cap);
        let room = match frames >= FLOOR_FROM_FRAMES {
            true => nf.max(STREAM_FLOOR_FRAMES.min(cap)),
            false => nf,
        };
        Ok((nf, room))
    }

    /// The largest chunk of statistics of `targets` the device's free
    /// memory takes, with `e16_bytes` a frame for the FP16 E-step's buffers.
    fn stats_chunk_cap(&self, targets: &FrameTargets<'_>, e16_bytes: usize) -> Result<usize> {
        let d = self.model.dim;
        // Two feature buffers, entries, and the partial sums of the items.
        let per_frame = 8 * d
            + 12
            + (self.k.shape.gb * self.kz * 4 * self.state_ng.len().min(64)).div_ceil(ITEM_ENTRIES)
            + e16_bytes
            + self.efull.as_ref().map_or(0, |e| e.bytes_per_frame())
            + match targets {
                FrameTargets::Selected(sel) => {
                    let selected = sel.offsets.len().saturating_sub(1).max(1);
                    let pairs = sel.components.len() as f64 / selected as f64;
                    Gselect::bytes_per_frame(pairs, self.kz)
                }
                _ => 0,
            };
        crate::timeline::tally("chunk_cap", || self.chunk_cap(per_frame))
    }

    /// The streaming buffers (and the E-step's) made for chunks of `room`
    /// frames.
    fn reserve_stats(&mut self, room: usize) -> Result<()> {
        if let Some(e) = &mut self.e16 {
            e.reserve(room);
        }
        self.ensure_streaming(room)
    }

    /// At a job's start, makes the model's forms and the device memory its
    /// batches of `targets` take (the streaming and E-step buffers for a
    /// full batch's chunks, and the accumulators): `prepare_statistics` runs
    /// on every device at once, where each device's first send made it, one
    /// device after another on the sending thread. The FP16 E-step's forms
    /// and buffers are made by a thread of their own
    /// ([`Self::start_making_e16`]).
    fn reserve_first_batch(&mut self, targets: &FrameTargets<'_>) -> Result<()> {
        let frames = match targets {
            FrameTargets::Selected(sel) => sel.offsets.len().saturating_sub(1),
            _ => STREAM_FLOOR_FRAMES,
        };
        // The FP16 E-step's forms are made in the background when they are
        // what the batches take (the other forms here, as each send would).
        let in_background = self.e16.is_none()
            && self.e16_making.is_none()
            && self.e16_wanted(targets)
            && !self.efull_wanted(targets);
        if !in_background {
            self.ensure_stats_model(targets)?;
        }
        let e16_bytes = match in_background {
            true => Estep16::frame_bytes(self.model.dim, self.state_ng[0]),
            false => self.e16_frame_bytes(),
        };
        let (_, room) =
            self.stats_chunks_with(frames.max(FLOOR_FROM_FRAMES), targets, e16_bytes)?;
        self.reserve_stats(room)?;
        if in_background {
            self.start_making_e16(room)?;
        }
        if let Some(e) = &mut self.e16 {
            e.make_room(&self.eng.stream, self.eng.multiprocessors())?;
        }
        if self.acc64.is_none() {
            let n = (self.total_gaussians * self.kz).max(1);
            let a = self.eng.stream.alloc_zeros::<f64>(n);
            self.acc64 = Some(a.map_err(driver_err("allocating accumulators"))?);
        }
        Ok(())
    }

    /// Enqueue the statistics of a batch into `pend`, chunk by chunk through
    /// the streaming buffers.
    fn enqueue_stats(
        &mut self,
        feats: &FrameBatch<'_>,
        targets: &FrameTargets<'_>,
        src: Source<'_>,
        pend: &mut Pending,
    ) -> Result<()> {
        self.ensure_stats_model(targets)?;
        let d = feats.dim;
        let want_max = self.e16_wanted(targets) || self.efull_wanted(targets);
        let (nf, room) = self.stats_chunks(feats.frames, targets)?;
        crate::timeline::tally("stats_buffers", || self.reserve_stats(room))?;
        for (ci, c0) in (0..feats.frames).step_by(nf).enumerate() {
            let c1 = (c0 + nf).min(feats.frames);
            let b = ci % 2;
            let xmax =
                crate::timeline::tally("stage", || self.stage(feats, c0, c1, b, src, want_max))?;
            // The kernels of this chunk wait for its copy here, before their
            // timing event, so the kernel time excludes the copy (which
            // overlaps the previous chunk's kernels). Frames already on the
            // device were waited for when the batch was sent.
            if !matches!(src, Source::Uploaded(..)) {
                self.eng
                    .stream
                    .join(&self.eng.copy_stream)
                    .map_err(driver_err("waiting for the copy"))?;
            }
            let st = self
                .streaming
                .take()
                .ok_or_else(|| Error::Engine("streaming buffers missing".into()))?;
            let rows = match src {
                Source::Uploaded(dev, _) => dev.slice(c0 * d..c1 * d),
                _ => st.dev[b].slice(0..(c1 - c0) * d),
            };
            let r = crate::timeline::tally("stats_chunk", || {
                self.stats_chunk(
                    &rows,
                    targets,
                    c0,
                    c1,
                    xmax.as_deref(),
                    &mut pend.acc64,
                    &mut pend.total,
                )
            });
            self.streaming = Some(st);
            let (w, ev) = r?;
            pend.weight += w;
            self.timers.extend(ev);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::random::{self, Rng};

    /// A tool's batch goes in two halves (the second's copy overlaps the
    /// first's kernels); a long call in chunks of the cap; a small one
    /// whole.
    #[test]
    fn chunks_of_a_call() {
        assert_eq!(chunk_of(262_000, CHUNK_FRAMES), 131_072);
        assert_eq!(chunk_of(3_125_506, CHUNK_FRAMES), CHUNK_FRAMES);
        assert_eq!(chunk_of(3_125_506, 1 << 18), 1 << 18);
        assert_eq!(chunk_of(5_000, CHUNK_FRAMES), 5_000);
        assert_eq!(chunk_of(0, CHUNK_FRAMES), 1);
    }

    /// One GMM's thousand items are summed in 8 runs; many states' few
    /// items a column each, in the plain order; never more than the 256
    /// threads the kernel's shared array holds.
    #[test]
    fn reduction_runs_only_for_groups_of_many_items() {
        let group = |items| [0, items, 0, 32];
        assert_eq!(reduce_block(&[group(1024)]), (32, 8));
        assert_eq!(reduce_block(&[group(64), group(3)]), (32, 8));
        assert_eq!(reduce_block(&[group(63)]), (256, 1));
        assert_eq!(reduce_block(&vec![group(100); 65]), (256, 1));
        assert_eq!(reduce_block(&[]), (256, 1));
        for g in [vec![group(1024)], vec![group(2)]] {
            let (cols, runs) = reduce_block(&g);
            assert!(cols * runs <= 256);
        }
    }

    /// The arrays the block-scoring kernels get are the layout's, in blocks
    /// of the size the kernels are compiled for: every real Gaussian's weight
    /// row (bit for bit) in its state's lane, every virtual slot gconst −∞
    /// and 0 elsewhere. (These arrays were checked bit-identical to the
    /// engine's own packing before `layout.rs` took it over.)
    #[test]
    fn block_arrays_are_the_layouts_in_the_kernels_block_size() {
        for (kind, dim) in [(CovKind::Diagonal, 3), (CovKind::Full, 2)] {
            let counts: Vec<usize> = (0..150).map(|s| (s * 7) % 11).collect();
            let model = random::model(&mut Rng::new(dim as u64), &counts, dim, kind);
            let shape = KernelShape::for_model(dim, kind, 10);
            assert!(shape
                .prelude()
                .contains(&format!("#define LANES {}\n", shape.block_states())));
            let host = BlockHost::new(&model, &shape);
            let l = &host.layout;
            assert_eq!(
                *l,
                StateBlockLayout::for_model(&model, shape.block_states())
            );
            assert_eq!(host.lane_state, l.lane_states());
            assert_eq!(host.slots.len(), l.num_blocks());
            let (b, kz) = (l.block_states, shape.kz());
            let mut want = vec![0f32; kz];
            for blk in 0..l.num_blocks() {
                assert_eq!(host.off[blk] as usize, l.block_offsets[blk]);
                assert_eq!(host.slots[blk] as u32, l.block_gaussians[blk]);
                for lane in 0..b {
                    let state = host.lane_state[blk * b + lane];
                    for g in 0..host.slots[blk] as usize {
                        let slot = host.off[blk] as usize + g;
                        let got: Vec<f32> = (0..kz)
                            .map(|k| host.w[(slot * kz + k) * b + lane])
                            .collect();
                        if state >= 0 && g < counts[state as usize] {
                            let order =
                                super::super::compile::scoring_z_order(model.dim, model.kind);
                            block_weights_row(&model, &order, state as usize, g, &mut want);
                        } else {
                            want.fill(0.0);
                            want[kz - 1] = f32::NEG_INFINITY;
                        }
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&got), bits(&want), "block {blk} lane {lane} slot {g}");
                    }
                }
            }
        }
    }

    #[test]
    fn block_rows_pair_each_dimension_last_dimension_first() {
        let model = AcousticModel {
            dim: 3,
            kind: CovKind::Diagonal,
            states: vec![crate::model::StateGmm {
                gconsts: vec![-7.0],
                weights: vec![1.0],
                means_invvars: vec![1.0, 2.0, 3.0],
                inv_vars: vec![0.5, 0.25, 0.125],
            }],
        };
        let mut row = vec![0f32; 7];
        let order = super::super::compile::scoring_z_order(3, CovKind::Diagonal);
        block_weights_row(&model, &order, 0, 0, &mut row);
        // z = [x2, x2², x1, x1², x0, x0², 1] (zval_t<true> in gmm.cu).
        assert_eq!(row, vec![3.0, -0.0625, 2.0, -0.125, 1.0, -0.25, -7.0]);
        let mut natural = vec![0f32; 7];
        weights_row(&model, 0, 0, &mut natural);
        assert_eq!(natural, vec![1.0, 2.0, 3.0, -0.25, -0.125, -0.0625, -7.0]);
    }
}
