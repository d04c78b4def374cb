//! The compute contract both engines fulfil: score frames against a model and
//! gather EM statistics. [`cpu`] is the reference and the fallback; [`cuda`]
//! runs the same functions on an NVIDIA GPU. Nothing here knows file formats.
//!
//! Summation order is fixed inside each engine, so a result never depends on the
//! number of threads or on the chunking of frames; CPU and GPU agree to float
//! rounding (see the property tests).

pub mod adder;
pub mod batch_trace;
pub mod choice;
pub mod copy_max;
pub mod cpu;
pub mod cuda;
pub mod host_frames;
pub mod multi;
pub mod reference;
pub mod row_max;
pub mod senders;
pub mod subsets;
#[cfg(test)]
pub(crate) mod test_engines;
pub mod upload;

pub use host_frames::{FrameSource, HostFrames, LentMemory};
pub use multi::{Gpus, MultiEngine};

use std::ops::Range;
pub use subsets::StateSubsets;

use crate::model::AcousticModel;
use crate::stats::ModelAccumulators;
use crate::Result;

/// A batch of feature frames: `frames × dim`, row-major, contiguous.
#[derive(Debug, Clone, Copy)]
pub struct FrameBatch<'a> {
    pub data: &'a [f32],
    pub frames: usize,
    pub dim: usize,
}

impl<'a> FrameBatch<'a> {
    pub fn new(data: &'a [f32], dim: usize) -> Self {
        assert!(
            dim > 0 && data.len() % dim == 0,
            "frame data is not a whole number of rows"
        );
        FrameBatch {
            data,
            frames: data.len() / dim,
            dim,
        }
    }

    pub fn row(&self, t: usize) -> &'a [f32] {
        &self.data[t * self.dim..(t + 1) * self.dim]
    }

    /// Frames `rows` as a batch of their own, or an error when the range
    /// is not within the batch.
    pub fn rows(&self, rows: Range<usize>) -> Result<FrameBatch<'a>> {
        let data = (rows.start <= rows.end)
            .then(|| self.data.get(rows.start * self.dim..rows.end * self.dim))
            .flatten()
            .ok_or_else(|| {
                crate::Error::Mismatch(format!(
                    "frames {}..{} of a batch of {}",
                    rows.start, rows.end, self.frames
                ))
            })?;
        Ok(FrameBatch {
            data,
            frames: rows.len(),
            dim: self.dim,
        })
    }
}

/// Which state(s) each frame's statistics go to.
#[derive(Debug, Clone, Copy)]
pub enum FrameTargets<'a> {
    /// Every frame to state 0 with weight 1: one global GMM (a UBM).
    Global,
    /// One state per frame, weight 1 (an alignment mapped to pdf ids).
    Aligned(&'a [u32]),
    /// Several (state, weight) pairs per frame (Kaldi posteriors over pdfs,
    /// Baum-Welch state occupancies): frame `t` owns
    /// `pairs[offsets[t]..offsets[t + 1]]`; `offsets.len() == frames + 1`.
    Weighted {
        offsets: &'a [usize],
        pairs: &'a [(u32, f32)],
    },
    /// Gaussian selection in one global GMM (state 0; Kaldi's `--gselect`):
    /// frame `t` is scored against its selected components
    /// `components[offsets[t]..offsets[t + 1]]` only (at least one; one
    /// listed twice counts twice, as in Kaldi), and its posteriors are the float softmax over those, × its weight
    /// (`weights[t]`, Kaldi's `--weights`; `None`: 1). Frames of weight 0
    /// are skipped, as Kaldi skips them. The semantics of
    /// `fgmm-global-acc-stats` / `gmm-global-acc-stats --gselect`
    /// (`LogLikelihoodsPreselect`, `ApplySoftMax`, `AccumulateForComponent`).
    Selected(Selection<'a>),
}

/// The selected components of each frame of a batch (see
/// [`FrameTargets::Selected`]); `offsets.len() == frames + 1`.
#[derive(Debug, Clone, Copy)]
pub struct Selection<'a> {
    pub offsets: &'a [usize],
    pub components: &'a [u32],
    pub weights: Option<&'a [f32]>,
}

impl Selection<'_> {
    /// Frame `t`'s weight (1 without weights).
    pub fn weight(&self, t: usize) -> f32 {
        self.weights.map_or(1.0, |w| w[t])
    }

    /// Frame `t`'s selected components.
    pub fn of(&self, t: usize) -> &[u32] {
        &self.components[self.offsets[t]..self.offsets[t + 1]]
    }

    /// Check against a batch of `frames` frames and a GMM of `gaussians`
    /// components: offsets from 0 to the end, increasing, every frame with
    /// a component, every component in the GMM, a weight per frame. Errors
    /// name the frame (of the batch).
    pub fn validate(&self, frames: usize, gaussians: usize) -> crate::Result<()> {
        use crate::Error;
        if self.offsets.len() != frames + 1
            || self.offsets[0] != 0
            || self.offsets[frames] != self.components.len()
        {
            return Err(Error::Mismatch(format!(
                "Gaussian selection: {} offsets for {frames} frames of {} components (expected frames + 1, from 0 to the number of components)",
                self.offsets.len(),
                self.components.len()
            )));
        }
        if let Some(w) = self.weights {
            if w.len() != frames {
                return Err(Error::Mismatch(format!(
                    "Gaussian selection: {} weights for {frames} frames",
                    w.len()
                )));
            }
        }
        for t in 0..frames {
            if self.offsets[t + 1] <= self.offsets[t] {
                return Err(Error::Mismatch(format!(
                    "frame {t}: empty Gaussian selection (or offsets decrease)"
                )));
            }
            if let Some(&g) = self.of(t).iter().find(|&&g| g as usize >= gaussians) {
                return Err(Error::Mismatch(format!(
                    "frame {t}: selected Gaussian {g} is not in the model (it has {gaussians})"
                )));
            }
        }
        Ok(())
    }
}

/// A compute engine: holds its device (if any) and loads models onto it.
pub trait Engine: Send + Sync {
    /// `"cpu"` or `"cuda"`.
    fn name(&self) -> &'static str;
    /// A human description of the device, e.g. "NVIDIA H100 80GB HBM3" or "2 CPU threads".
    fn device(&self) -> String;
    /// Lay the model out for this engine (and copy it to the device).
    fn load<'e>(&'e self, model: &AcousticModel) -> Result<Box<dyn LoadedModel + 'e>>;
    /// The CPU engine's thread count (`None` for a device): callers that
    /// run the CPU kernels themselves (alignment's on-demand likelihoods)
    /// use as many threads.
    fn cpu_threads(&self) -> Option<usize> {
        None
    }
    /// Devices it computes on (a [`MultiEngine`]: one per device, or per
    /// logical partition of one).
    fn devices(&self) -> usize {
        1
    }
}

/// `model` loaded on `engine` for a tool whose output is log-likelihoods
/// (gmm-compute-likes, the frame-likes tools, gmm-rescore-lattice, HTK state
/// likelihoods, forced alignment): scored at least as accurately as Kaldi
/// ([`LoadedModel::score_in_fp32`]). The tensor cores' split-TF32 scoring
/// keeps 22 bits of each operand, 1.4× Kaldi's error on a diagonal model
/// (docs/performance.md), and these tools are bounded by writing their
/// output or by the host's table work, not by the kernels; statistics keep
/// the tensor cores.
pub fn load_for_loglikes<'e>(
    engine: &'e dyn Engine,
    model: &AcousticModel,
) -> Result<Box<dyn LoadedModel + 'e>> {
    let mut loaded = engine.load(model)?;
    loaded.score_in_fp32();
    Ok(loaded)
}

/// A model laid out on an engine. All outputs are in the model's original state
/// order, whatever order the engine's layout uses internally.
pub trait LoadedModel: Send {
    fn num_states(&self) -> usize;

    /// Per-frame per-state log-likelihoods: `out` is `frames × num_states`,
    /// row-major.
    fn state_loglikes(&mut self, feats: FrameBatch<'_>, out: &mut [f32]) -> Result<()>;

    /// Compute [`state_loglikes`](Self::state_loglikes) (and its row and
    /// subset forms) with FP32 arithmetic at least as accurate as Kaldi's
    /// from now on, where the engine would otherwise take a faster, less
    /// accurate path (the CUDA engine's tensor-core scoring of diagonal
    /// models; see docs/performance.md). Forced alignment asks for it, so
    /// that its log-likelihood totals print Kaldi's digits. Default: nothing
    /// to change.
    fn score_in_fp32(&mut self) {}

    /// Rows `rows` of [`state_loglikes`](Self::state_loglikes) of `feats`
    /// into `out` (`rows.len() × num_states`): to the bit what the whole
    /// call gives those rows (the CUDA engine chooses how it splits its
    /// work from the call's frames). [`multi`] cuts a call across devices
    /// with it. Default: the rows scored alone, for engines whose rows never
    /// depend on the rest of the call.
    fn state_loglikes_rows(
        &mut self,
        feats: FrameBatch<'_>,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        self.state_loglikes(feats.rows(rows)?, out)
    }

    /// [`state_loglikes`](Self::state_loglikes) of only the states each
    /// utterance of the batch needs (`subsets`; its frames are the batch's
    /// rows in order): `out` gets, utterance after utterance, its `frames ×
    /// columns` values, row-major, each the bits `state_loglikes` gives for
    /// that frame and state. Default: every state, then the columns gathered
    /// on the host.
    fn state_loglikes_subset(
        &mut self,
        feats: FrameBatch<'_>,
        subsets: &StateSubsets,
        out: &mut [f32],
    ) -> Result<()> {
        let ns = self.num_states();
        subsets.check(feats.frames, ns, out.len())?;
        let mut all = vec![0f32; feats.frames * ns];
        self.state_loglikes(feats, &mut all)?;
        subsets.gather(&all, ns, out);
        Ok(())
    }

    /// Per-frame log-likelihoods of each component of `state` (log weight
    /// included): `out` is `frames × components(state)`. Posteriors within a
    /// state are the softmax of a row.
    fn component_loglikes(
        &mut self,
        state: usize,
        feats: FrameBatch<'_>,
        out: &mut [f32],
    ) -> Result<()>;

    /// EM statistics: for each frame and each (state, weight) target, add
    /// weight × γ (component posteriors within the state) to the occupancies and
    /// the first- and second-order sums in `acc`, add weight × the state's
    /// log-likelihood to `acc.total_like` and weight to `acc.total_frames`.
    /// Returns the Σ weight × log-likelihood of this batch.
    fn accumulate(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<f64>;

    /// [`accumulate`](Self::accumulate), but the engine may keep this batch's
    /// statistics on its side (a GPU still computing them) so that the caller
    /// prepares the next batch meanwhile. They land in `acc` — the same
    /// accumulators on every call until [`settle`](Self::settle) — at the
    /// latest when `settle` is called. Returns the batch's Σ weight ×
    /// log-likelihood when it is known now, `None` when `settle` will count it.
    fn accumulate_deferred(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<Option<f64>> {
        self.accumulate(feats, targets, acc).map(Some)
    }

    /// Makes ready what statistics of `targets`' kind need (the CUDA engine
    /// uploads the model's forms for them, the FP16 E-step's on a thread of
    /// their own: see [`statistics_ready`](Self::statistics_ready)), so that
    /// a job's first batch does not wait for it. Default: nothing.
    fn prepare_statistics(&mut self, _targets: &FrameTargets<'_>) -> Result<()> {
        Ok(())
    }

    /// Whether statistics sent now would go out without waiting for what
    /// [`prepare_statistics`](Self::prepare_statistics) started (the CUDA
    /// engine makes a model's forms on a thread of their own). Default: yes.
    fn statistics_ready(&self) -> bool {
        true
    }

    /// Sends the batches given to
    /// [`accumulate_frames`](Self::accumulate_frames) whose frames are in
    /// place by now, for an engine that holds batches while their frames
    /// are copied; a caller filling a batch calls it between utterances, so
    /// that a batch copied goes out then, not at the next batch's hold.
    /// `acc` is the accumulators they will be added into. Default: nothing.
    fn send_copied(&mut self, _acc: &mut ModelAccumulators) -> Result<()> {
        Ok(())
    }

    /// Room for a batch of at least `floats` floats that
    /// [`accumulate_frames`](Self::accumulate_frames) sends without another
    /// copy on the host (the CUDA engine lends page-locked memory). Default:
    /// a plain vector.
    fn host_frames(&mut self, floats: usize) -> Result<HostFrames> {
        Ok(HostFrames::with_capacity(floats))
    }

    /// [`accumulate_deferred`](Self::accumulate_deferred) of the `dim`-wide
    /// frames in `frames`. Afterwards `frames` is empty and ready for the
    /// next batch: an engine still reading the memory keeps it and puts
    /// another buffer in its place.
    fn accumulate_frames(
        &mut self,
        frames: &mut HostFrames,
        dim: usize,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<Option<f64>> {
        frames.gather();
        let r = self.accumulate_deferred(FrameBatch::new(frames.as_slice(), dim), targets, acc);
        frames.clear();
        r
    }

    /// Adds the statistics kept back by
    /// [`accumulate_deferred`](Self::accumulate_deferred) into `acc` and
    /// returns their Σ weight × log-likelihood (0 when none are pending).
    fn settle(&mut self, _acc: &mut ModelAccumulators) -> Result<f64> {
        Ok(0.0)
    }

    /// Statistics of one batch kept apart from every other batch's, for a
    /// caller that adds batches up in an order of its own ([`multi`]: the
    /// batches of several devices, in batch order): the batch's statistics
    /// summed from zero, shaped like `shape`. Returns them now (`Some`), or
    /// `None` when the engine keeps them (a GPU still computing) for
    /// [`collect_apart`](Self::collect_apart). Default: [`accumulate`](Self::accumulate)
    /// into zeroed accumulators.
    fn accumulate_apart(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        shape: &ModelAccumulators,
    ) -> Result<Option<ModelAccumulators>> {
        let mut acc = shape.zeros_like();
        self.accumulate(feats, targets, &mut acc)?;
        Ok(Some(acc))
    }

    /// [`accumulate_apart`](Self::accumulate_apart) of the `dim`-wide frames
    /// in `frames`. Afterwards `frames` is empty; its memory may have gone
    /// with the batch (an engine still reading it keeps it), leaving no
    /// room: the caller asks [`host_frames`](Self::host_frames) for more.
    fn accumulate_frames_apart(
        &mut self,
        frames: &mut HostFrames,
        dim: usize,
        targets: FrameTargets<'_>,
        shape: &ModelAccumulators,
    ) -> Result<Option<ModelAccumulators>> {
        frames.gather();
        let r = self.accumulate_apart(FrameBatch::new(frames.as_slice(), dim), targets, shape);
        frames.clear();
        r
    }

    /// Adds the oldest batch that [`accumulate_apart`](Self::accumulate_apart)
    /// kept (and that was not collected yet) into `acc`, element by
    /// element, and returns its Σ weight × log-likelihood.
    fn collect_apart(&mut self, _acc: &mut ModelAccumulators) -> Result<f64> {
        Err(crate::Error::Engine(
            "no batch statistics are kept to collect".into(),
        ))
    }

    /// [`collect_apart`](Self::collect_apart) of the oldest batch kept, but
    /// its statistics handed back to be added later (on another thread:
    /// [`adder`]), with its Σ weight × log-likelihood; `shape` is the
    /// accumulators they will be added into. Default: collected now into
    /// zeros shaped like `shape` (the same bits once added: 0 + x = x).
    fn take_apart(&mut self, shape: &ModelAccumulators) -> Result<(f64, adder::AddLater)> {
        let mut stats = shape.zeros_like();
        let like = self.collect_apart(&mut stats)?;
        let add: adder::AddLater = Box::new(move |acc: &mut ModelAccumulators| {
            acc.add(&stats);
            Ok(())
        });
        Ok((like, add))
    }

    /// Device time of the kernels of the last call (CUDA: events around each
    /// launch, host-device copies excluded, as a GPU peer measures), or `None`
    /// for engines that compute on the host.
    fn last_kernel_seconds(&self) -> Option<f64> {
        None
    }

    /// Device time of the kernels of the batches collected apart
    /// ([`collect_apart`](Self::collect_apart)) since the last call of this,
    /// which starts the count again; `None` where
    /// [`last_kernel_seconds`](Self::last_kernel_seconds) is.
    fn take_apart_kernel_seconds(&mut self) -> Option<f64> {
        None
    }
}

/// Kaldi's `--use-gpu` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UseGpu {
    /// Use a GPU if one is usable, else the CPU with one log line.
    #[default]
    Optional,
    /// A GPU or a clear error.
    Yes,
    /// Never touch CUDA.
    No,
}

/// An engine for Kaldi's `--use-gpu` option: `No` → the CPU engine with
/// `threads` threads (0: one per CPU); `Yes` → the CUDA engine or an error;
/// `Optional` → the CUDA engine if usable, else the CPU with one log line.
pub fn select(use_gpu: UseGpu, threads: usize) -> Result<Box<dyn Engine>> {
    match use_gpu {
        UseGpu::No => Ok(Box::new(cpu::CpuEngine::new(threads)?)),
        UseGpu::Yes => cuda_engine(),
        UseGpu::Optional => match cuda_engine() {
            Ok(e) => Ok(e),
            Err(e) => {
                eprintln!("LOG (amtool) no usable GPU ({e}); computing on the CPU");
                Ok(Box::new(cpu::CpuEngine::new(threads)?))
            }
        },
    }
}

/// [`select`] for a job whose size is known before it starts: with
/// `Optional`, the CPU engine (and one log line saying why) when it
/// finishes the job before the GPU would have started
/// ([`choice::choose`]); otherwise as [`select`].
pub fn select_for(
    use_gpu: UseGpu,
    threads: usize,
    job: Option<&choice::JobSize>,
) -> Result<Box<dyn Engine>> {
    match cpu_by_choice(use_gpu, threads, job)? {
        Some(cpu) => Ok(cpu),
        None => select(use_gpu, threads),
    }
}

/// With `Optional` and a job the CPU finishes first, the CPU engine (with
/// one log line saying why); else `None`.
fn cpu_by_choice(
    use_gpu: UseGpu,
    threads: usize,
    job: Option<&choice::JobSize>,
) -> Result<Option<Box<dyn Engine>>> {
    let (UseGpu::Optional, Some(job)) = (use_gpu, job) else {
        return Ok(None);
    };
    let available = available_threads(threads);
    let est = choice::choose(job, available, &choice::MEASURED);
    if est.choice != choice::Choice::Cpu {
        return Ok(None);
    }
    let n = match threads {
        0 => choice::threads_for(job, available, &choice::MEASURED),
        n => n,
    };
    let est = choice::choose(job, n, &choice::MEASURED);
    eprintln!("LOG (amtool) {}", choice::cpu_choice_line(job, n, &est));
    Ok(Some(Box::new(cpu::CpuEngine::new(n)?)))
}

fn available_threads(threads: usize) -> usize {
    match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// [`select_for`] over the GPUs `gpus` asks for (`--gpus`): a GPU engine
/// is a [`MultiEngine`] over them, over one as well, so that the results
/// are the same for any count (see [`multi`]). The CPU takes no `--gpus`
/// (one log line when it asked for more than one). `AMTOOL_PARTITIONS=P`
/// uses each device, or the CPU, as P logical partitions: P engines whose
/// work is split as over P devices (for testing the splitting without the
/// devices; the CPU's threads are shared out among its partitions; unset,
/// the CPU engine is used alone, set to 1 through a multi-engine).
pub fn select_gpus(
    use_gpu: UseGpu,
    threads: usize,
    gpus: Gpus,
    job: Option<&choice::JobSize>,
) -> Result<Box<dyn Engine>> {
    let partitions = multi::partitions_from_env()?;
    let cpu = match use_gpu {
        UseGpu::No => None,
        _ => cpu_by_choice(use_gpu, threads, job)?,
    };
    if cpu.is_some() || use_gpu == UseGpu::No {
        if gpus != Gpus::Count(1) {
            eprintln!("LOG (amtool) computing on the CPU: --gpus={gpus} ignored");
        }
        return match partitions {
            None => cpu.map_or_else(|| select(UseGpu::No, threads), Ok),
            Some(p) => cpu_partitions(threads, p),
        };
    }
    match cuda::CudaEngine::open_devices(gpus, partitions.unwrap_or(1)) {
        Ok(engines) => {
            let parts = engines
                .into_iter()
                .map(|e| Box::new(e) as Box<dyn Engine>)
                .collect();
            Ok(Box::new(MultiEngine::new(parts)?))
        }
        Err(e @ crate::Error::Usage(_)) => Err(e),
        Err(e) if use_gpu == UseGpu::Optional => {
            eprintln!("LOG (amtool) no usable GPU ({e}); computing on the CPU");
            match partitions {
                None => select(UseGpu::No, threads),
                Some(p) => cpu_partitions(threads, p),
            }
        }
        Err(e) => Err(e),
    }
}

/// The CPU as `p` logical partitions, its threads shared out among them.
fn cpu_partitions(threads: usize, p: usize) -> Result<Box<dyn Engine>> {
    let each = (available_threads(threads) / p).max(1);
    if p > 1 {
        eprintln!(
            "LOG (amtool) the CPU as {p} logical partitions of {each} threads (AMTOOL_PARTITIONS)"
        );
    }
    let parts = (0..p)
        .map(|_| Ok(Box::new(cpu::CpuEngine::new(each)?) as Box<dyn Engine>))
        .collect::<Result<Vec<_>>>()?;
    Ok(Box::new(MultiEngine::new(parts)?))
}

/// An engine by name (`"cpu"` or `"cuda"`), as `amtool bench --engine` takes it.
pub fn by_name(name: &str, threads: usize) -> Result<Box<dyn Engine>> {
    match name {
        "cpu" => select(UseGpu::No, threads),
        "cuda" => select(UseGpu::Yes, threads),
        _ => Err(crate::Error::Usage(format!(
            "unknown engine {name:?} (expected cpu or cuda)"
        ))),
    }
}

/// [`by_name`] over the GPUs `gpus` asks for (`amtool bench --gpus`):
/// always a [`MultiEngine`], as [`select_gpus`] makes it.
pub fn by_name_gpus(name: &str, threads: usize, gpus: Gpus) -> Result<Box<dyn Engine>> {
    match name {
        // The CPU as a multi-engine of its partitions (one by default).
        "cpu" => cpu_partitions(threads, multi::partitions_from_env()?.unwrap_or(1)),
        "cuda" => select_gpus(UseGpu::Yes, threads, gpus, None),
        _ => by_name(name, threads),
    }
}

/// The CUDA engine (libcuda and NVRTC are loaded at run time).
fn cuda_engine() -> Result<Box<dyn Engine>> {
    Ok(Box::new(cuda::CudaEngine::new()?))
}
