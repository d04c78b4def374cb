//! The CUDA engine's side of [`crate::engine::upload`]: a lent batch buffer's
//! copy on its device ([`Mirror`]), filled while the batch is gathered
//! through a ring of small page-locked staging buffers of the device's
//! ([`SlotRing`]), cacheable so that the DMA reads each while the host's
//! cache still holds it; the engine then copies a batch's chunks from the
//! mirror on the device. `AMTOOL_FRAME_UPLOAD=batch` keeps the old way (the
//! parts copied into the batch's write-combined buffer, the chunks copied
//! from there at the send), for comparison.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, PinnedHostSlice};

use super::driver_err;
use crate::engine::upload::Upload;
use crate::{Error, Result};

/// Floats of a staging buffer: 1 MB (the ring of 512 KB and 2 MB buffers
/// was slower, docs/performance.md, sixteenth session).
pub const SLOT_FLOATS: usize = 1 << 18;

/// Staging buffers a device keeps at most before a piece waits for the
/// oldest one's copy (the gather's threads use about one each).
const MAX_SLOTS: usize = 64;

/// Events that only order copies.
const NO_TIMING: sys::CUevent_flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;

/// Whether lent batch buffers get a device copy filled as they are
/// gathered (the default) or the old way (`AMTOOL_FRAME_UPLOAD=batch`).
pub fn uploading() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("AMTOOL_FRAME_UPLOAD").as_deref() != Ok("batch"))
}

/// A staging buffer and the event after the last copy from it.
struct Slot {
    buf: PinnedHostSlice<f32>,
    ptr: *mut f32,
    done: Option<CudaEvent>,
}

// SAFETY: `ptr` points into `buf`; a slot is used by one thread at a time.
unsafe impl Send for Slot {}

impl Slot {
    fn len(&self) -> usize {
        self.buf.len()
    }

    fn free(&self) -> bool {
        self.done.as_ref().is_none_or(|e| e.is_complete())
    }
}

impl Drop for Slot {
    /// The driver does not know of the raw copies from it: wait for them.
    fn drop(&mut self) {
        if let Some(e) = self.done.take() {
            let _ = e.synchronize();
        }
    }
}

/// A device's staging buffers, oldest given back first.
pub(crate) struct SlotRing {
    ctx: Arc<CudaContext>,
    slots: Mutex<VecDeque<Slot>>,
    made: AtomicUsize,
}

impl SlotRing {
    pub fn new(ctx: Arc<CudaContext>) -> Self {
        SlotRing {
            ctx,
            slots: Mutex::new(VecDeque::new()),
            made: AtomicUsize::new(0),
        }
    }

    /// A buffer of at least `n` floats whose copies are done: the oldest
    /// one free, a new one while fewer than [`MAX_SLOTS`] were made, else
    /// the oldest one (waited for).
    fn take(&self, n: usize) -> Result<Slot> {
        let found = {
            let mut slots = self.slots.lock().map_err(|_| lock_err())?;
            let full = self.made.load(Ordering::Relaxed) >= MAX_SLOTS;
            let i = slots
                .iter()
                .position(|s| s.len() >= n && s.free())
                .or_else(|| full.then(|| slots.iter().position(|s| s.len() >= n)).flatten());
            i.and_then(|i| slots.remove(i))
        };
        if let Some(mut s) = found {
            if let Some(e) = s.done.take() {
                e.synchronize().map_err(driver_err("waiting for a staging copy"))?;
            }
            return Ok(s);
        }
        self.made.fetch_add(1, Ordering::Relaxed);
        // SAFETY: f32 has no invalid bit patterns; a slot is written before
        // it is read. Flags 0: cacheable (not write-combined).
        let mut buf = unsafe { self.ctx.alloc_pinned_with_flags::<f32>(n.max(SLOT_FLOATS), 0) }
            .map_err(driver_err("allocating a staging buffer"))?;
        let ptr = buf.as_mut_ptr().map_err(driver_err("staging buffer"))?;
        Ok(Slot {
            buf,
            ptr,
            done: None,
        })
    }

    fn give(&self, slot: Slot) {
        if let Ok(mut slots) = self.slots.lock() {
            slots.push_back(slot);
        }
    }
}

fn lock_err() -> Error {
    Error::Engine("the staging buffers' lock was poisoned".into())
}

/// What a lent buffer's device copy holds.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Held {
    /// Nothing sent: the buffer's host memory is the batch.
    Nothing,
    /// Floats `[0, n)`.
    Whole(usize),
    /// A piece failed to go: the batch cannot be sent.
    Broken,
}

/// A lent batch buffer's copy on its device.
pub(crate) struct Mirror {
    dev: CudaSlice<f32>,
    ptr: sys::CUdeviceptr,
    /// Recorded on the upload stream after a gather's last piece.
    ready: Option<CudaEvent>,
    held: Held,
}

impl Mirror {
    /// A device buffer of `floats` floats on `stream`'s device.
    pub fn new(stream: &Arc<CudaStream>, floats: usize) -> Result<Self> {
        // SAFETY: only the floats a gather sent are ever read.
        let dev = unsafe { stream.alloc::<f32>(floats.max(1)) }
            .map_err(driver_err("allocating a batch's device copy"))?;
        let ptr = dev.device_ptr(stream).0;
        Ok(Mirror {
            ptr,
            dev,
            ready: None,
            held: Held::Nothing,
        })
    }

    /// Waits until no piece is on its way into it.
    pub fn wait(&mut self) -> Result<()> {
        if let Some(e) = self.ready.take() {
            e.synchronize().map_err(driver_err("waiting for a batch's upload"))?;
        }
        Ok(())
    }

    /// Lent again: it holds nothing (after [`wait`](Self::wait)).
    pub fn clear(&mut self) {
        self.held = Held::Nothing;
    }

    /// The way for a gather's pieces from `host` (the buffer's memory).
    pub fn upload(
        &self,
        stream: &Arc<CudaStream>,
        slots: &Arc<SlotRing>,
        host: &[f32],
    ) -> Arc<dyn Upload> {
        Arc::new(DeviceUpload {
            stream: stream.clone(),
            slots: slots.clone(),
            dev: self.ptr,
            dev_len: self.dev.len(),
            host: host.as_ptr() as usize,
            host_len: host.len(),
        })
    }

    /// After a gather: `[0, floats)` sent (`whole`) or not; the event the
    /// batch's copies from here wait for.
    pub fn uploaded(&mut self, stream: &CudaStream, floats: usize, whole: bool) {
        self.ready = stream.record_event(Some(NO_TIMING)).ok();
        self.held = match (whole, &self.ready) {
            (true, Some(_)) => Held::Whole(floats),
            _ => Held::Broken,
        };
    }

    /// The device copy of a batch of `floats` and the event its copies wait
    /// for; `None` when nothing was sent (the host memory is the batch).
    pub fn holding(&self, floats: usize) -> Result<Option<(&CudaSlice<f32>, &CudaEvent)>> {
        match (self.held, &self.ready) {
            (Held::Nothing, _) => Ok(None),
            (Held::Whole(n), Some(e)) if n == floats => Ok(Some((&self.dev, e))),
            _ => Err(Error::Engine(
                "a batch's frames did not reach the device (a copy failed)".into(),
            )),
        }
    }

    pub fn len(&self) -> usize {
        self.dev.len()
    }
}

/// [`Upload`] of one batch: pieces staged in a [`SlotRing`], or sent from
/// the batch's page-locked memory, to its [`Mirror`], on the engine's
/// upload stream, by whichever thread gathers them.
struct DeviceUpload {
    stream: Arc<CudaStream>,
    slots: Arc<SlotRing>,
    dev: sys::CUdeviceptr,
    dev_len: usize,
    host: usize,
    host_len: usize,
}

impl DeviceUpload {
    /// Sends `n` floats at `src` to float `at` of the mirror.
    fn send(&self, src: *const f32, at: usize, n: usize) -> bool {
        if at + n > self.dev_len || self.stream.context().bind_to_thread().is_err() {
            return false;
        }
        let dst = self.dev + (at * 4) as u64;
        // SAFETY: `src` holds `n` floats of page-locked memory that stays
        // untouched until the copy's event (a slot's `done`, the mirror's
        // `ready`) is waited for; the mirror has room for `[at, at + n)`.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), n * 4, self.stream.cu_stream())
                .result()
                .is_ok()
        }
    }
}

impl Upload for DeviceUpload {
    fn piece_floats(&self) -> usize {
        SLOT_FLOATS
    }

    fn staged(&self, at: usize, n: usize, fill: &mut dyn FnMut(&mut [f32])) -> bool {
        let Ok(mut slot) = self.slots.take(n) else {
            return false;
        };
        // SAFETY: `ptr` and `len` are the slot's, whose copies are done.
        let dst = unsafe { std::slice::from_raw_parts_mut(slot.ptr, n) };
        fill(dst);
        let sent = self.send(slot.ptr, at, n);
        slot.done = self.stream.record_event(Some(NO_TIMING)).ok();
        let ok = sent && slot.done.is_some();
        self.slots.give(slot);
        ok
    }

    fn in_place(&self, at: usize, n: usize) -> bool {
        at + n <= self.host_len && self.send((self.host as *const f32).wrapping_add(at), at, n)
    }
}

// SAFETY: the raw addresses are of page-locked host memory and a device
// buffer that outlive the gather (the lent buffer owns them).
unsafe impl Send for DeviceUpload {}
unsafe impl Sync for DeviceUpload {}
