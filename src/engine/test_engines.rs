//! CPU engines that take a GPU engine's paths, for the tests of the code
//! above the engines (no GPU needed): one whose models keep each batch's
//! statistics until they are collected, as a GPU still computing does; one
//! that lends its own memory for batches, as the CUDA engine lends
//! page-locked memory (a batch's utterances then wait as kept parts until
//! the thread that sends it gathers them, each part's maxima noted).

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::cpu::CpuEngine;
use super::host_frames::LentMemory;
use super::{Engine, FrameBatch, FrameTargets, HostFrames, LoadedModel};
use crate::model::AcousticModel;
use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// Memory lent for a batch: a plain vector.
pub struct VecMem(pub Vec<f32>);

impl LentMemory for VecMem {
    fn as_slice(&self) -> &[f32] {
        &self.0
    }
    fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.0
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Which of a GPU engine's paths the CPU engine takes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Path {
    /// Batches' statistics kept until collected.
    Keeping,
    /// Batch memory lent.
    Lending,
}

/// A one-thread CPU engine on one of a GPU engine's paths.
pub struct GpuLike {
    cpu: CpuEngine,
    path: Path,
    /// While false, its models' `statistics_ready` says no (a device still
    /// being made ready); none: always ready.
    ready: Option<Arc<AtomicBool>>,
}

impl GpuLike {
    pub fn keeping() -> Self {
        Self::new(Path::Keeping)
    }

    pub fn lending() -> Self {
        Self::new(Path::Lending)
    }

    /// [`lending`](Self::lending), ready for statistics while `ready` is true.
    pub fn lending_ready_when(ready: Arc<AtomicBool>) -> Self {
        GpuLike {
            ready: Some(ready),
            ..Self::new(Path::Lending)
        }
    }

    fn new(path: Path) -> Self {
        GpuLike {
            cpu: CpuEngine::new(1).expect("a one-thread CPU engine"),
            path,
            ready: None,
        }
    }
}

struct GpuLikeModel<'e> {
    inner: Box<dyn LoadedModel + 'e>,
    path: Path,
    ready: Option<Arc<AtomicBool>>,
    dim: usize,
    /// Batches kept, and their frames.
    kept: VecDeque<(ModelAccumulators, usize)>,
    /// Frames of the batches collected since the kernel time was last taken.
    collected: usize,
    /// Frames of the last scoring call.
    scored: usize,
}

/// The keeping path's pretend kernel time: a microsecond a frame.
pub const SECONDS_A_FRAME: f64 = 1e-6;

impl Engine for GpuLike {
    fn name(&self) -> &'static str {
        match self.path {
            Path::Keeping => "keeping",
            Path::Lending => "lending",
        }
    }
    fn device(&self) -> String {
        format!("a CPU on a GPU's path ({})", self.name())
    }
    fn load<'e>(&'e self, model: &AcousticModel) -> Result<Box<dyn LoadedModel + 'e>> {
        Ok(Box::new(GpuLikeModel {
            inner: self.cpu.load(model)?,
            path: self.path,
            ready: self.ready.clone(),
            dim: model.dim,
            kept: VecDeque::new(),
            collected: 0,
            scored: 0,
        }))
    }
}

impl LoadedModel for GpuLikeModel<'_> {
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }
    fn statistics_ready(&self) -> bool {
        self.ready.as_ref().is_none_or(|r| r.load(Ordering::SeqCst))
    }
    fn state_loglikes(&mut self, feats: FrameBatch<'_>, out: &mut [f32]) -> Result<()> {
        self.scored = feats.frames;
        self.inner.state_loglikes(feats, out)
    }
    /// The keeping path's pretend time of the last call that scored.
    fn last_kernel_seconds(&self) -> Option<f64> {
        (self.path == Path::Keeping).then_some(self.scored as f64 * SECONDS_A_FRAME)
    }
    fn component_loglikes(
        &mut self,
        state: usize,
        feats: FrameBatch<'_>,
        out: &mut [f32],
    ) -> Result<()> {
        self.inner.component_loglikes(state, feats, out)
    }
    fn accumulate(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<f64> {
        self.inner.accumulate(feats, targets, acc)
    }
    fn accumulate_apart(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        shape: &ModelAccumulators,
    ) -> Result<Option<ModelAccumulators>> {
        let s = self.inner.accumulate_apart(feats, targets, shape)?;
        if self.path != Path::Keeping {
            return Ok(s);
        }
        self.kept.extend(s.map(|s| (s, feats.frames)));
        Ok(None)
    }
    fn collect_apart(&mut self, acc: &mut ModelAccumulators) -> Result<f64> {
        let (s, frames) = self
            .kept
            .pop_front()
            .ok_or_else(|| Error::Engine("none kept".into()))?;
        acc.add(&s);
        self.collected += frames;
        Ok(s.total_like)
    }
    fn take_apart_kernel_seconds(&mut self) -> Option<f64> {
        let frames = std::mem::take(&mut self.collected);
        (self.path == Path::Keeping).then_some(frames as f64 * SECONDS_A_FRAME)
    }
    fn host_frames(&mut self, floats: usize) -> Result<HostFrames> {
        if self.path != Path::Lending {
            return self.inner.host_frames(floats);
        }
        // NaN: a float the batch's gathering missed shows in the statistics.
        let mut f = HostFrames::lent(Box::new(VecMem(vec![f32::NAN; floats])));
        f.track_abs_max(self.dim);
        Ok(f)
    }
}
