//! A model laid out on the GPU, and the [`LoadedModel`] functions.
//!
//! Two device layouts, each built on first use:
//! - the padded state blocks of Vaněk et al. for `state_loglikes`, as
//!   [`StateBlockLayout`](crate::layout::StateBlockLayout) sorts, groups and pads them, in blocks of the size
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
//!
//! The parts: the model's device forms (`forms`), the chunks and the
//! buffers they stream through (`chunks`), a chunk's statistics
//! (`estep`), state scoring (`scoring`), batches summed apart for
//! several devices (`apart`, `add_sums`) and their trace
//! (`batch_trace`); here, the model's state, the [`LoadedModel`]
//! functions and the sending of a batch.

mod add_sums;
mod apart;
mod batch_trace;
mod chunks;
mod estep;
mod forms;
mod scoring;

pub(super) use chunks::chunk_of;
use chunks::Stream;
use forms::{BlockDev, StateDev};
use scoring::{scratch, SubsetTables};

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::thread::JoinHandle;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::compile::KernelShape;
use super::estep16::{self, Estep16};
use super::estep_full::{self, EstepFull};
use super::gselect::Gselect;
use super::pinned::PinnedBuf;
use super::plan;
use super::{driver_err, CudaEngine, Kernels};
use crate::engine::host_frames::LentFrames;
use crate::engine::row_max::{self, RowMaxima};
use crate::engine::{FrameBatch, FrameTargets, HostFrames, LoadedModel, StateSubsets};
use crate::model::AcousticModel;
use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// Frames per streamed chunk (a multiple of every tile and item size).
pub const CHUNK_FRAMES: usize = 1 << 20;
/// Entries per statistics work item.
pub const ITEM_ENTRIES: usize = 4096;

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
fn new_timing_event(eng: &CudaEngine) -> Result<CudaEvent> {
    eng.ctx
        .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(driver_err("timing event"))
}

/// Events recorded on `stream` before and after what `enqueue` enqueues
/// there (the kernel timers of a call).
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
