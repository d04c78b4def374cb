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
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    result, sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtrMut, PinnedHostSlice,
};

use super::driver_err;
use crate::engine::upload::{Upload, PIECE_FLOATS};
use crate::engine::LentMemory;
use crate::{Error, Result};

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
struct Shelf<B> {
    bufs: Mutex<Vec<B>>,
    max: usize,
}

/// A pooled batch buffer: page-locked memory and, where it had one, its
/// device copy ([`PinnedBuf::with_twin`]: allocating it took ~0.3 ms of the
/// host's thread a batch buffer, each job).
struct Pooled {
    host: PinnedHostSlice<f32>,
    twin: Option<CudaSlice<f32>>,
}

/// Floats a pooled thing holds.
trait Floats {
    fn floats(&self) -> usize;
}

impl<T> Floats for PinnedHostSlice<T> {
    fn floats(&self) -> usize {
        self.len()
    }
}

impl Floats for Pooled {
    fn floats(&self) -> usize {
        self.host.len()
    }
}

impl<B: Floats> Shelf<B> {
    fn new(max: usize) -> Self {
        Shelf {
            bufs: Mutex::new(Vec::new()),
            max,
        }
    }

    /// The buffer given back latest whose length `fits`.
    fn take(&self, fits: impl Fn(usize) -> bool) -> Option<B> {
        let mut bufs = self.bufs.lock().ok()?;
        let i = bufs.iter().rposition(|b| fits(b.floats()))?;
        Some(bufs.remove(i))
    }

    /// Keeps `buf`; returns the buffer given back longest ago when full.
    fn give(&self, buf: B) -> Option<B> {
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
    bufs: Shelf<Pooled>,
    /// Buffers the device copies statistics into for the host to read (not
    /// write-combined), each of one exact length.
    sums: Shelf<PinnedHostSlice<f64>>,
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
    fn take(&self, len: usize) -> Result<Pooled> {
        if let Some(b) = self.bufs.take(|n| n >= len && n <= 2 * len) {
            return Ok(b);
        }
        let _t = crate::timeline::Tally::start("pinned_alloc");
        // SAFETY: f32 has no invalid bit patterns; users write before they
        // read (a batch's frames, a streamed chunk).
        let host = unsafe { self.ctx.alloc_pinned::<f32>(len.max(1)) }
            .map_err(driver_err("allocating pinned memory"))?;
        Ok(Pooled { host, twin: None })
    }

    fn give(&self, buf: Pooled) {
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
    /// Recorded on the copy stream after the last copy from this buffer,
    /// and the flag that those copies have landed, set once it is waited
    /// for (where the copies were a batch's uploads).
    copied: Option<(CudaEvent, Option<Arc<AtomicBool>>)>,
    /// Its device copy, sent while the host fills it (`with_twin`).
    twin: Option<Twin>,
    /// A device copy that came with the buffer from the pool, not yet
    /// given uploads.
    spare_twin: Option<CudaSlice<f32>>,
    pool: Arc<PinnedPool>,
}

/// A batch buffer's device copy and the uploads filling it
/// ([`crate::engine::upload`]).
struct Twin {
    dev: CudaSlice<f32>,
    uploads: Arc<Uploads>,
}

/// The uploads of a batch buffer into its twin, enqueued on the copy
/// stream by the threads that gather it ([`crate::engine::upload`]).
struct Uploads {
    stream: Arc<CudaStream>,
    host: *const f32,
    dev: sys::CUdeviceptr,
    len: usize,
    /// The model's largest chunk of statistics when it lent the buffer.
    chunk_cap: usize,
    /// Floats enqueued.
    sent: AtomicUsize,
    /// Recorded after the last, once every float is enqueued.
    done: Mutex<Option<CudaEvent>>,
    /// The first failure.
    failed: Mutex<Option<String>>,
    /// Set once `done` was waited for: every copy of these uploads has
    /// read its piece, so a thread reuses those pieces without asking the
    /// driver ([`Piece::last`]).
    landed: Arc<AtomicBool>,
}

// SAFETY: `host` points into the page-locked buffer that owns these
// uploads, which waits for their event before it is written, lent again
// or freed; the driver calls are thread-safe.
unsafe impl Send for Uploads {}
unsafe impl Sync for Uploads {}

/// A piece a copying thread fills and a device reads ([`crate::engine::upload`]),
/// page-locked and portable (any device's copy reads it), with the event
/// after the copy that read it last.
struct Piece {
    _mem: PinnedHostSlice<f32>,
    ptr: *mut f32,
    /// An event of each device's context it went to.
    events: Vec<CudaEvent>,
    /// Which of them follows the copy that read it last, and the flag of
    /// that copy's uploads ([`Uploads::landed`]): once set, the piece is
    /// free without waiting for the event. At a job's start every piece's
    /// last batch has been waited for, and the copying threads ask the
    /// driver nothing before they fill: their event waits had queued behind
    /// the driver calls that made the devices ready (0.25–0.87 ms of the
    /// first batches' pieces).
    last: Option<(usize, Arc<AtomicBool>)>,
}

/// Pieces a thread fills in turn: while the device reads one, the thread
/// fills the other.
const PIECES_A_THREAD: usize = 2;

/// Pieces reused without waiting for their events (their batches had
/// landed), in this process.
static REUSED_UNWAITED: AtomicUsize = AtomicUsize::new(0);

/// How many times a copying thread reused a piece without asking the
/// driver whether its last copy was done (its batch had landed), in this
/// process (for tests).
pub fn pieces_reused_unwaited() -> usize {
    REUSED_UNWAITED.load(Ordering::Relaxed)
}

thread_local! {
    /// This thread's pieces, and the next to fill.
    static PIECES: std::cell::RefCell<(Vec<Piece>, usize)> =
        const { std::cell::RefCell::new((Vec::new(), 0)) };
}

impl Uploads {
    fn fail(&self, what: String) {
        let mut f = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        f.get_or_insert(what);
    }

    /// Enqueues the copy of `src` to floats from `at` of the twin.
    fn copy(&self, at: usize, src: &[f32]) -> std::result::Result<(), String> {
        if at + src.len() > self.len {
            return Err(format!("floats {at}..{} of {}", at + src.len(), self.len));
        }
        let dst = self.dev + (at * std::mem::size_of::<f32>()) as u64;
        self.stream
            .context()
            .bind_to_thread()
            .and_then(|()| {
                // SAFETY: `dst` lies in the twin (checked), which outlives the
                // copy; `src` is page-locked and not written before the
                // copy's event.
                unsafe { result::memcpy_htod_async(dst, src, self.stream.cu_stream()) }
            })
            .map_err(|e| e.to_string())?;
        self.sent.fetch_add(src.len(), Ordering::Relaxed);
        Ok(())
    }

    /// Fills one of this thread's pieces with `n` floats and sends them to
    /// floats from `at` of the twin.
    fn send_piece(
        &self,
        at: usize,
        n: usize,
        fill: &mut dyn FnMut(&mut [f32]),
    ) -> std::result::Result<(), String> {
        if n > PIECE_FLOATS {
            return Err(format!("a piece of {n} floats"));
        }
        PIECES.with(|cell| {
            let mut pieces = cell.borrow_mut();
            let piece = Piece::next(&mut pieces, self.stream.context())?;
            piece.free()?;
            // SAFETY: the piece holds PIECE_FLOATS ≥ n floats, and no copy
            // reads it any more.
            let buf = unsafe { std::slice::from_raw_parts_mut(piece.ptr, n) };
            crate::engine::batch_trace::thread_mark("w");
            crate::timeline::tally("piece_fill", || fill(buf));
            crate::engine::batch_trace::thread_mark("f");
            crate::timeline::tally("piece_copy", || self.copy(at, buf))?;
            crate::engine::batch_trace::thread_mark("c");
            piece.read_by(&self.stream, &self.landed)
        })
    }
}

impl Piece {
    /// The thread's next piece in turn (made while it has fewer than
    /// [`PIECES_A_THREAD`]).
    fn next<'p>(
        pieces: &'p mut (Vec<Piece>, usize),
        ctx: &Arc<CudaContext>,
    ) -> std::result::Result<&'p mut Piece, String> {
        if pieces.0.len() < PIECES_A_THREAD {
            // SAFETY: f32 has no invalid bit patterns; a piece is written
            // before it is read.
            let mut mem = unsafe {
                ctx.alloc_pinned_with_flags::<f32>(PIECE_FLOATS, sys::CU_MEMHOSTALLOC_PORTABLE)
            }
            .map_err(|e| e.to_string())?;
            let ptr = mem.as_mut_ptr().map_err(|e| e.to_string())?;
            pieces.0.push(Piece {
                _mem: mem,
                ptr,
                events: Vec::new(),
                last: None,
            });
        }
        let i = pieces.1 % pieces.0.len();
        pieces.1 += 1;
        Ok(&mut pieces.0[i])
    }

    /// Returns once no copy reads the piece: at once when its last copy's
    /// batch has landed, else after that copy's event.
    fn free(&mut self) -> std::result::Result<(), String> {
        let Some((e, landed)) = self.last.take() else {
            return Ok(());
        };
        if landed.load(Ordering::Acquire) {
            REUSED_UNWAITED.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let ev = &self.events[e];
        crate::timeline::tally("piece_wait", || ev.synchronize()).map_err(|e| e.to_string())
    }

    /// Notes the copy just enqueued on `stream` as the piece's last reader:
    /// its event (one a device context) recorded after it, and the flag of
    /// its batch's landing.
    fn read_by(
        &mut self,
        stream: &CudaStream,
        landed: &Arc<AtomicBool>,
    ) -> std::result::Result<(), String> {
        let ctx = stream.context();
        let e = match self
            .events
            .iter()
            .position(|e| Arc::ptr_eq(e.context(), ctx))
        {
            Some(e) => e,
            None => {
                let ev = ctx.new_event(None).map_err(|e| e.to_string())?;
                self.events.push(ev);
                self.events.len() - 1
            }
        };
        self.events[e].record(stream).map_err(|e| e.to_string())?;
        self.last = Some((e, landed.clone()));
        Ok(())
    }
}

impl Upload for Uploads {
    fn chunk_frames(&self, frames: usize) -> usize {
        super::model::chunk_of(frames, self.chunk_cap)
    }

    fn send(&self, at: usize, n: usize, fill: &mut dyn FnMut(&mut [f32])) {
        if let Err(e) = self.send_piece(at, n, fill) {
            self.fail(format!("sending frames to the device: {e}"));
        }
    }

    fn send_lent(&self, floats: Range<usize>) {
        if floats.end > self.len {
            return self.fail(format!("sending floats {floats:?} of {}", self.len));
        }
        // SAFETY: the range is inside the buffer (checked), written before
        // the gathering, and kept until the copy's event.
        let src = unsafe { std::slice::from_raw_parts(self.host.add(floats.start), floats.len()) };
        if let Err(e) = self.copy(floats.start, src) {
            self.fail(format!("sending frames to the device: {e}"));
        }
    }

    fn finished(&self, len: usize) {
        let sent = self.sent.load(Ordering::Relaxed);
        if sent != len {
            return self.fail(format!(
                "{sent} floats of a batch of {len} sent to the device"
            ));
        }
        match self.stream.record_event(None) {
            Ok(ev) => *self.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(ev),
            Err(e) => self.fail(format!("recording a batch's copy: {e}")),
        }
    }
}

// SAFETY: `ptr` points into `buf`, which is Send; the host touches the
// memory only through `&self` / `&mut self`.
unsafe impl Send for PinnedBuf {}

impl PinnedBuf {
    /// At least `floats` floats from `pool`.
    pub fn new(pool: &Arc<PinnedPool>, floats: usize) -> Result<Self> {
        let Pooled {
            host: mut buf,
            twin,
        } = pool.take(floats)?;
        let ptr = buf.as_mut_ptr().map_err(driver_err("pinned memory"))?;
        Ok(PinnedBuf {
            len: buf.len(),
            buf: Some(buf),
            ptr,
            copied: None,
            twin: None,
            spare_twin: twin,
            pool: pool.clone(),
        })
    }

    /// Gives the buffer a device copy filled on `stream` while the host
    /// writes it (made the first time, on `stream`), once the kernels
    /// that read it last are done; its uploads start afresh.
    pub fn with_twin(&mut self, stream: &Arc<CudaStream>, chunk_cap: usize) -> Result<()> {
        let e = driver_err("a batch buffer's device copy");
        let mut dev = match self.twin.take().map(|t| t.dev).or(self.spare_twin.take()) {
            Some(dev) => dev,
            // SAFETY: f32 has no invalid bit patterns; the uploads fill what
            // the kernels read.
            None => unsafe { stream.alloc::<f32>(self.len.max(1)) }.map_err(&e)?,
        };
        // `stream` waits for the twin's last readers.
        let (ptr, _written) = dev.device_ptr_mut(stream);
        let uploads = Arc::new(Uploads {
            stream: stream.clone(),
            host: self.ptr,
            dev: ptr,
            len: self.len,
            chunk_cap,
            sent: AtomicUsize::new(0),
            done: Mutex::new(None),
            failed: Mutex::new(None),
            landed: Arc::new(AtomicBool::new(false)),
        });
        drop(_written);
        self.twin = Some(Twin { dev, uploads });
        Ok(())
    }

    /// Whether the uploads sent the first `floats` floats to the device
    /// copy ([`Self::twin`]): then `stream` waits for them, and so does
    /// the host before it writes the buffer again. False: nothing was sent
    /// (no kept parts: the frames are all in the buffer), and the caller
    /// copies the batch. An error: the uploads failed or sent part of it.
    pub fn uploaded(&mut self, floats: usize, stream: &CudaStream) -> Result<bool> {
        let Some(t) = &self.twin else {
            return Ok(false);
        };
        if let Some(f) = t
            .uploads
            .failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            return Err(Error::Engine(f));
        }
        let sent = t.uploads.sent.load(Ordering::Relaxed);
        if sent == 0 {
            return Ok(false);
        }
        let done = t
            .uploads
            .done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(done) = done.filter(|_| sent == floats) else {
            return Err(Error::Engine(format!(
                "{sent} floats of a batch of {floats} were sent to the device"
            )));
        };
        stream
            .wait(&done)
            .map_err(driver_err("waiting for a batch's copy"))?;
        self.copied = Some((done, Some(t.uploads.landed.clone())));
        Ok(true)
    }

    /// The device copy ([`Self::with_twin`]).
    pub fn twin(&self) -> Option<&CudaSlice<f32>> {
        self.twin.as_ref().map(|t| &t.dev)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Wait until the copies from this buffer have read it.
    pub fn wait(&mut self) -> Result<()> {
        if let Some((ev, landed)) = self.copied.take() {
            ev.synchronize().map_err(driver_err("waiting for a copy"))?;
            if let Some(l) = landed {
                l.store(true, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Mark the copies enqueued on `stream` so far as readers of this
    /// buffer: the host waits for them before writing it again.
    pub fn copies_enqueued(&mut self, stream: &CudaStream) -> Result<()> {
        self.copied = Some((
            stream
                .record_event(None)
                .map_err(driver_err("recording a copy"))?,
            None,
        ));
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
        // Uploads of a batch that was never sent (no event after them)
        // may still read it.
        let unsent = self
            .twin
            .as_ref()
            .filter(|t| self.copied.is_none() && t.uploads.sent.load(Ordering::Relaxed) > 0);
        let mut done = unsent.is_none_or(|t| t.uploads.stream.synchronize().is_ok());
        done &= self.wait().is_ok();
        let twin = self.twin.take().map(|t| t.dev).or(self.spare_twin.take());
        if let Some(host) = self.buf.take() {
            if done {
                self.pool.give(Pooled { host, twin });
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

    fn uploader(&self) -> Option<Arc<dyn Upload>> {
        self.twin
            .as_ref()
            .map(|t| t.uploads.clone() as Arc<dyn Upload>)
    }
}
