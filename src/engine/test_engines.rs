//! CPU engines that take a GPU engine's paths, for the tests of the code
//! above the engines (no GPU needed): one whose models keep each batch's
//! statistics until they are collected, as a GPU still computing does; one
//! that lends its own memory for batches, as the CUDA engine lends
//! page-locked memory (a batch's utterances then wait as kept parts until
//! the thread that sends it gathers them, each part's maxima noted).

use std::any::Any;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::cpu::CpuEngine;
use super::host_frames::LentMemory;
use super::upload::Upload;
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

/// Memory lent for a batch with a pretend device copy that an
/// [`Upload`] fills as the batch is gathered (NaN where nothing was sent):
/// the kept parts go only there, never into the lent memory.
pub struct UploadMem {
    host: Vec<f32>,
    twin: Arc<Twin>,
}

/// The pretend device copy, and what the uploads did.
pub struct Twin {
    host: *const f32,
    /// Frames of the chunks the pieces must not straddle.
    chunk: usize,
    /// The copy, the floats sent, and the lengths `finished` was told.
    copy: Mutex<(Vec<f32>, usize, Vec<usize>)>,
}

// SAFETY: `host` points into the vector of the `UploadMem` that owns the
// twin; `send_lent` reads ranges written before the gathering.
unsafe impl Send for Twin {}
unsafe impl Sync for Twin {}

impl UploadMem {
    /// Room for `floats`, sent in pieces inside chunks of `chunk` frames.
    pub fn new(floats: usize, chunk: usize) -> Self {
        let host = vec![f32::NAN; floats];
        let twin = Arc::new(Twin {
            host: host.as_ptr(),
            chunk,
            copy: Mutex::new((vec![f32::NAN; floats], 0, Vec::new())),
        });
        UploadMem { host, twin }
    }

    /// The device copy of the first `len` floats, when the uploads sent
    /// exactly those and said so once; `None` when nothing was sent.
    pub fn uploaded(&self, len: usize) -> Option<Vec<f32>> {
        let c = self.twin.copy.lock().unwrap_or_else(|e| e.into_inner());
        if c.1 == 0 && c.2.is_empty() {
            return None;
        }
        assert_eq!(
            (c.1, &c.2[..]),
            (len, &[len][..]),
            "the batch sent whole, once"
        );
        Some(c.0[..len].to_vec())
    }
}

impl Twin {
    fn put(&self, at: usize, src: &[f32]) {
        let mut c = self.copy.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            c.0[at..at + src.len()].iter().all(|x| x.is_nan()),
            "floats {at}.. sent twice"
        );
        c.0[at..at + src.len()].copy_from_slice(src);
        c.1 += src.len();
    }
}

impl Upload for Twin {
    fn chunk_frames(&self, _frames: usize) -> usize {
        self.chunk
    }
    fn send(&self, at: usize, n: usize, fill: &mut dyn FnMut(&mut [f32])) {
        assert!(n <= super::upload::PIECE_FLOATS);
        let mut piece = vec![f32::NAN; n];
        fill(&mut piece);
        self.put(at, &piece);
    }
    fn send_lent(&self, floats: Range<usize>) {
        // SAFETY: see `Twin`; the range is inside the vector (the copy has
        // its length, and `put` checks it).
        let src = unsafe { std::slice::from_raw_parts(self.host.add(floats.start), floats.len()) };
        self.put(floats.start, src);
    }
    fn finished(&self, len: usize) {
        self.copy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .2
            .push(len);
    }
}

impl LentMemory for UploadMem {
    fn as_slice(&self) -> &[f32] {
        &self.host
    }
    fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.host
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn uploader(&self) -> Option<Arc<dyn Upload>> {
        Some(self.twin.clone())
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
    /// Called when one of its models is dropped.
    on_drop: Option<DropHook>,
}

/// What a [`GpuLike`] calls as one of its models is dropped.
pub type DropHook = Arc<dyn Fn() + Send + Sync>;

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

    /// [`keeping`](Self::keeping), calling `hook` as each of its models
    /// is dropped.
    pub fn keeping_dropped_with(hook: DropHook) -> Self {
        GpuLike {
            on_drop: Some(hook),
            ..Self::new(Path::Keeping)
        }
    }

    fn new(path: Path) -> Self {
        GpuLike {
            cpu: CpuEngine::new(1).expect("a one-thread CPU engine"),
            path,
            ready: None,
            on_drop: None,
        }
    }
}

struct GpuLikeModel<'e> {
    inner: Box<dyn LoadedModel + 'e>,
    path: Path,
    ready: Option<Arc<AtomicBool>>,
    on_drop: Option<DropHook>,
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
            on_drop: self.on_drop.clone(),
            dim: model.dim,
            kept: VecDeque::new(),
            collected: 0,
            scored: 0,
        }))
    }
}

impl Drop for GpuLikeModel<'_> {
    fn drop(&mut self) {
        if let Some(hook) = &self.on_drop {
            hook();
        }
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
        let mut f = HostFrames::lent(Box::new(UploadMem::new(floats, LENDING_CHUNK_FRAMES)));
        f.track_abs_max(self.dim);
        Ok(f)
    }
    fn accumulate_frames(
        &mut self,
        frames: &mut HostFrames,
        dim: usize,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<Option<f64>> {
        let feats = sent_frames(frames);
        self.inner
            .accumulate_deferred(FrameBatch::new(&feats, dim), targets, acc)
    }
    fn accumulate_frames_apart(
        &mut self,
        frames: &mut HostFrames,
        dim: usize,
        targets: FrameTargets<'_>,
        shape: &ModelAccumulators,
    ) -> Result<Option<ModelAccumulators>> {
        let feats = sent_frames(frames);
        self.accumulate_apart(FrameBatch::new(&feats, dim), targets, shape)
    }
}

/// Frames of the lending path's chunks: the pieces of a batch gathered
/// never straddle one.
pub const LENDING_CHUNK_FRAMES: usize = 5_000;

/// The frames of a batch as its device would have them: the uploads' copy
/// where the gathering sent it, else the memory (all pushed), leaving
/// `frames` empty.
fn sent_frames(frames: &mut HostFrames) -> Vec<f32> {
    let Some(lent) = frames.take_lent_sent() else {
        let v = frames.as_slice().to_vec();
        frames.clear();
        return v;
    };
    match lent.mem.into_any().downcast::<UploadMem>() {
        Ok(m) => m
            .uploaded(lent.len)
            .unwrap_or_else(|| m.as_slice()[..lent.len].to_vec()),
        Err(_) => panic!("the lending engine's models lend UploadMem"),
    }
}
