//! The compute contract both engines fulfil: score frames against a model and
//! gather EM statistics. [`cpu`] is the reference and the fallback; [`cuda`]
//! runs the same functions on an NVIDIA GPU. Nothing here knows file formats.
//!
//! Summation order is fixed inside each engine, so a result never depends on the
//! number of threads or on the chunking of frames; CPU and GPU agree to float
//! rounding (see the property tests).

pub mod choice;
pub mod cpu;
pub mod cuda;
pub mod host_frames;
pub mod reference;
pub mod subsets;

pub use host_frames::{FrameSource, HostFrames, LentMemory};
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
}

/// A model laid out on an engine. All outputs are in the model's original state
/// order, whatever order the engine's layout uses internally.
pub trait LoadedModel {
    fn num_states(&self) -> usize;

    /// Per-frame per-state log-likelihoods: `out` is `frames × num_states`,
    /// row-major.
    fn state_loglikes(&mut self, feats: FrameBatch<'_>, out: &mut [f32]) -> Result<()>;

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

    /// Device time of the kernels of the last call (CUDA: events around each
    /// launch, host-device copies excluded, as a GPU peer measures), or `None`
    /// for engines that compute on the host.
    fn last_kernel_seconds(&self) -> Option<f64> {
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
    if let (UseGpu::Optional, Some(job)) = (use_gpu, job) {
        let available = match threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let est = choice::choose(job, available, &choice::MEASURED);
        if est.choice == choice::Choice::Cpu {
            let n = match threads {
                0 => choice::threads_for(job, available, &choice::MEASURED),
                n => n,
            };
            let est = choice::choose(job, n, &choice::MEASURED);
            eprintln!("LOG (amtool) {}", choice::cpu_choice_line(job, n, &est));
            return Ok(Box::new(cpu::CpuEngine::new(n)?));
        }
    }
    select(use_gpu, threads)
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

/// The CUDA engine (libcuda and NVRTC are loaded at run time).
fn cuda_engine() -> Result<Box<dyn Engine>> {
    Ok(Box::new(cuda::CudaEngine::new()?))
}
