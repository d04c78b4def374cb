//! Page-locked host memory, from which the device copies asynchronously.
//!
//! - [`PinnedPool`]: the engine's buffers of models dropped, kept for the
//!   next model (page-locking tens of MB takes milliseconds).
//! - [`PinnedBuf`]: one pooled buffer and the event after the last copy
//!   from it. Copies take sub-ranges of it as plain slices (the driver sees
//!   page-locked memory and copies asynchronously), so the buffer carries
//!   its own event: [`PinnedBuf::wait`] comes before the host writes it
//!   again, and before it goes back to the pool. It serves as a streaming
//!   half of a model and as the memory lent to callers for a batch of
//!   frames ([`crate::engine::HostFrames`]).

use std::any::Any;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, PinnedHostSlice};

use super::driver_err;
use crate::engine::LentMemory;
use crate::Result;

/// Buffers kept at most: two streaming halves and five batch buffers of
/// one model (`LENT_IN_FLIGHT` and the one being filled), and a job's
/// growing batches before them (16k to 128k frames, two of each size at
/// most). When it is full, the buffer given back
/// longest ago goes (a buffer just given back is the likeliest asked for
/// again: a job's growing batches, then its full-size ones, whose buffers
/// the next model of the same shape asks for in the same order).
const MAX_POOLED: usize = 16;

/// Read-back buffers kept at most (a model's batches in flight and their
/// Σ weight·L, for two models).
const MAX_POOLED_SUMS: usize = 16;

/// Page-locked buffers given back, oldest first, at most `max`.
struct Shelf<T> {
    bufs: Mutex<Vec<PinnedHostSlice<T>>>,
    max: usize,
}

impl<T> Shelf<T> {
    fn new(max: usize) -> Self {
        Shelf {
            bufs: Mutex::new(Vec::new()),
            max,
        }
    }

    /// The buffer given back latest whose length `fits`.
    fn take(&self, fits: impl Fn(usize) -> bool) -> Option<PinnedHostSlice<T>> {
        let mut bufs = self.bufs.lock().ok()?;
        let i = bufs.iter().rposition(|b| fits(b.len()))?;
        Some(bufs.remove(i))
    }

    /// Keeps `buf`; returns the buffer given back longest ago when full.
    fn give(&self, buf: PinnedHostSlice<T>) -> Option<PinnedHostSlice<T>> {
        match self.bufs.lock() {
            Ok(mut bufs) => {
                bufs.push(buf);
                (bufs.len() > self.max).then(|| bufs.remove(0))
            }
            Err(_) => Some(buf),
        }
    }
}

pub(crate) struct PinnedPool {
    ctx: Arc<CudaContext>,
    bufs: Shelf<f32>,
    /// Buffers the device copies statistics into for the host to read (not
    /// write-combined), each of one exact length.
    sums: Shelf<f64>,
}

impl PinnedPool {
    pub fn new(ctx: Arc<CudaContext>) -> Self {
        PinnedPool {
            ctx,
            bufs: Shelf::new(MAX_POOLED),
            sums: Shelf::new(MAX_POOLED_SUMS),
        }
    }

    /// A read-back buffer of exactly `len` f64: a pooled one, or a new one
    /// (page-locking took milliseconds a batch while every model of a run
    /// page-locked its own).
    pub fn take_sums(&self, len: usize) -> Result<PinnedHostSlice<f64>> {
        if let Some(b) = self.sums.take(|n| n == len.max(1)) {
            return Ok(b);
        }
        let _t = crate::timeline::Tally::start("pinned_alloc");
        // SAFETY: f64 has no invalid bit patterns, and the host reads the
        // buffer only after a copy has filled it.
        unsafe { self.ctx.alloc_pinned_with_flags::<f64>(len.max(1), 0) }
            .map_err(driver_err("allocating pinned memory"))
    }

    /// Back to the pool, once read.
    pub fn give_sums(&self, buf: PinnedHostSlice<f64>) {
        drop(self.sums.give(buf));
    }

    /// A buffer of `len` to `2 len` floats: a pooled one (the latest given
    /// back that fits), or a new one. Its contents are whatever was there.
    fn take(&self, len: usize) -> Result<PinnedHostSlice<f32>> {
        if let Some(b) = self.bufs.take(|n| n >= len && n <= 2 * len) {
            return Ok(b);
        }
        let _t = crate::timeline::Tally::start("pinned_alloc");
        // SAFETY: f32 has no invalid bit patterns; users write before they
        // read (a batch's frames, a streamed chunk).
        unsafe { self.ctx.alloc_pinned::<f32>(len.max(1)) }
            .map_err(driver_err("allocating pinned memory"))
    }

    fn give(&self, buf: PinnedHostSlice<f32>) {
        if let Some(b) = self.bufs.give(buf) {
            let _t = crate::timeline::Tally::start("pinned_free");
            drop(b);
        }
    }
}

/// A pooled page-locked buffer (see the module notes).
pub(crate) struct PinnedBuf {
    buf: Option<PinnedHostSlice<f32>>,
    ptr: *mut f32,
    len: usize,
    /// Recorded on the copy stream after the last copy from this buffer.
    copied: Option<CudaEvent>,
    pool: Arc<PinnedPool>,
}

// SAFETY: `ptr` points into `buf`, which is Send; the host touches the
// memory only through `&self` / `&mut self`.
unsafe impl Send for PinnedBuf {}

impl PinnedBuf {
    /// At least `floats` floats from `pool`.
    pub fn new(pool: &Arc<PinnedPool>, floats: usize) -> Result<Self> {
        let mut buf = pool.take(floats)?;
        let ptr = buf.as_mut_ptr().map_err(driver_err("pinned memory"))?;
        Ok(PinnedBuf {
            len: buf.len(),
            buf: Some(buf),
            ptr,
            copied: None,
            pool: pool.clone(),
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Wait until the copies from this buffer have read it.
    pub fn wait(&mut self) -> Result<()> {
        if let Some(ev) = self.copied.take() {
            ev.synchronize().map_err(driver_err("waiting for a copy"))?;
        }
        Ok(())
    }

    /// Mark the copies enqueued on `stream` so far as readers of this
    /// buffer: the host waits for them before writing it again.
    pub fn copies_enqueued(&mut self, stream: &CudaStream) -> Result<()> {
        self.copied = Some(
            stream
                .record_event(None)
                .map_err(driver_err("recording a copy"))?,
        );
        Ok(())
    }

    pub fn as_slice(&self) -> &[f32] {
        // SAFETY: `ptr` and `len` are those of `buf`, alive as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The memory for writing: waits for the copies still reading it first.
    pub fn writable(&mut self) -> Result<&mut [f32]> {
        self.wait()?;
        // SAFETY: as in `as_slice`; no copy reads it any more.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }
}

impl Drop for PinnedBuf {
    /// Back to the pool once no copy reads it (a buffer whose copy cannot
    /// be waited for is freed instead: the driver waits for it then).
    fn drop(&mut self) {
        let done = self.wait().is_ok();
        if let Some(buf) = self.buf.take() {
            if done {
                self.pool.give(buf);
            }
        }
    }
}

impl LentMemory for PinnedBuf {
    fn as_slice(&self) -> &[f32] {
        PinnedBuf::as_slice(self)
    }

    fn as_mut_slice(&mut self) -> &mut [f32] {
        // A buffer is lent only after `wait` (see `CudaModel::host_frames`),
        // so no copy reads it while the caller writes; the wait here is a
        // second guard and costs nothing when the copies are done.
        match self.writable() {
            Ok(s) => s,
            Err(_) => &mut [],
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
