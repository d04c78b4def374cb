//! Host memory for a batch of frames that a caller fills utterance by
//! utterance and hands to
//! [`LoadedModel::accumulate_frames`](crate::engine::LoadedModel::accumulate_frames).
//! An engine may lend its own memory for it
//! ([`LoadedModel::host_frames`](crate::engine::LoadedModel::host_frames)): the CUDA engine lends page-locked memory,
//! so the caller's copy of each frame is the only copy on the host and the
//! device reads the batch from there. Otherwise it is a plain vector.

use std::any::Any;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use super::row_max::{block_abs_max, RowMaxima};
use super::upload::{self, Found, Upload};

/// Memory an engine lends for a batch (for example page-locked memory that
/// a GPU copies from directly). Its whole length is room for frames.
pub trait LentMemory: Send + 'static {
    fn as_slice(&self) -> &[f32];
    fn as_mut_slice(&mut self) -> &mut [f32];
    /// For the engine that lent it, to get its own type back.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    /// Where the engine sends the batch on while its kept parts are
    /// gathered ([`super::upload`]); `None`: it copies the batch when it is
    /// sent.
    fn uploader(&self) -> Option<Arc<dyn Upload>> {
        None
    }
}

/// Frames a caller keeps (an utterance it owns, or a part of a mapped
/// archive) until they are copied into a batch with
/// [`HostFrames::push_parts`].
pub trait FrameSource: Sync {
    /// Floats it holds.
    fn floats(&self) -> usize;
    /// Write them to `dst` (`floats()` long).
    fn copy_to(&self, dst: &mut [f32]);
    /// [`copy_to`](Self::copy_to), returning the largest |x_d| of each of
    /// the `dim` columns of the rows written (NaN as infinite).
    fn copy_abs_max(&self, dst: &mut [f32], dim: usize) -> Vec<f32> {
        self.copy_to(dst);
        block_abs_max(dst, dim)
    }
    /// Floats `floats` of it (whole rows of `dim`) written to `dst` with
    /// plain stores (into a small piece that stays in the cache, see
    /// [`super::upload`]), returning their rows' largest |x_d|. The default
    /// copies the whole part first.
    fn copy_range_abs_max(&self, floats: Range<usize>, dst: &mut [f32], dim: usize) -> Vec<f32> {
        let mut all = vec![0f32; self.floats()];
        self.copy_to(&mut all);
        dst.copy_from_slice(&all[floats]);
        block_abs_max(dst, dim)
    }
}

impl<T: FrameSource + ?Sized> FrameSource for Box<T> {
    fn floats(&self) -> usize {
        (**self).floats()
    }
    fn copy_to(&self, dst: &mut [f32]) {
        (**self).copy_to(dst)
    }
    fn copy_abs_max(&self, dst: &mut [f32], dim: usize) -> Vec<f32> {
        (**self).copy_abs_max(dst, dim)
    }
    fn copy_range_abs_max(&self, floats: Range<usize>, dst: &mut [f32], dim: usize) -> Vec<f32> {
        (**self).copy_range_abs_max(floats, dst, dim)
    }
}

impl FrameSource for Vec<f32> {
    fn floats(&self) -> usize {
        self.len()
    }
    fn copy_to(&self, dst: &mut [f32]) {
        dst.copy_from_slice(self);
    }
    fn copy_range_abs_max(&self, floats: Range<usize>, dst: &mut [f32], dim: usize) -> Vec<f32> {
        dst.copy_from_slice(&self[floats]);
        block_abs_max(dst, dim)
    }
}

enum Mem {
    Plain(Vec<f32>),
    Lent(Box<dyn LentMemory>),
}

/// A part kept to be copied later, and where it goes (floats from the start).
type Kept = (usize, Box<dyn FrameSource + Send>);

/// Parts copied into a batch by [`HostFrames::gather_apart`], to be let
/// go of when it costs nothing.
pub struct CopiedParts(#[allow(dead_code)] Vec<Kept>);

/// A batch of frames in host memory: `len()` floats pushed (or kept, to be
/// copied by [`gather`](Self::gather)), room for `capacity()`.
pub struct HostFrames {
    mem: Mem,
    len: usize,
    /// Parts whose room is taken but which are not copied yet.
    kept: Vec<Kept>,
    /// The largest |x_d| of each part copied, when the engine that lent the
    /// memory asked for them ([`track_abs_max`](Self::track_abs_max)).
    maxima: Option<RowMaxima>,
}

/// Lent memory taken back by its engine: the floats written, and the
/// parts' maxima where they were tracked.
pub struct LentFrames {
    pub mem: Box<dyn LentMemory>,
    pub len: usize,
    pub maxima: Option<RowMaxima>,
}

impl Default for HostFrames {
    /// No room yet (a caller asks its engine for a buffer before the first
    /// batch).
    fn default() -> Self {
        HostFrames::with_capacity(0)
    }
}

impl HostFrames {
    /// A plain vector with room for `floats`.
    pub fn with_capacity(floats: usize) -> Self {
        HostFrames {
            mem: Mem::Plain(Vec::with_capacity(floats)),
            len: 0,
            kept: Vec::new(),
            maxima: None,
        }
    }

    /// Memory lent by an engine, empty.
    pub fn lent(mem: Box<dyn LentMemory>) -> Self {
        HostFrames {
            mem: Mem::Lent(mem),
            len: 0,
            kept: Vec::new(),
            maxima: None,
        }
    }

    /// From now on, note the largest |x_d| of each part pushed, for an
    /// engine that scales chunks of `dim`-wide frames by them: taken while
    /// the part is copied, they spare the engine a pass over the batch.
    pub fn track_abs_max(&mut self, dim: usize) {
        self.maxima = Some(RowMaxima::new(dim));
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Floats it holds without growing (a lent buffer never grows).
    pub fn capacity(&self) -> usize {
        match &self.mem {
            Mem::Plain(v) => v.capacity(),
            Mem::Lent(m) => m.as_slice().len(),
        }
    }

    /// Whether `floats` more fit without growing.
    pub fn has_room(&self, floats: usize) -> bool {
        self.len + floats <= self.capacity()
    }

    /// Notes the maxima of the part at floats `at..at + part.len()`.
    fn note_max(maxima: &mut Option<RowMaxima>, at: usize, part: &[f32]) {
        if let Some(rm) = maxima {
            let d = rm.dim().max(1);
            rm.note(at / d..(at + part.len()) / d, block_abs_max(part, d));
        }
    }

    /// Append `src`. A plain vector grows when it must; lent memory that has
    /// no room returns false and is left as it was.
    pub fn push(&mut self, src: &[f32]) -> bool {
        let at = self.len;
        match &mut self.mem {
            Mem::Plain(v) => v.extend_from_slice(src),
            Mem::Lent(m) => {
                let Some(dst) = m.as_mut_slice().get_mut(at..at + src.len()) else {
                    return false;
                };
                dst.copy_from_slice(src);
            }
        }
        Self::note_max(&mut self.maxima, at, src);
        self.len += src.len();
        true
    }

    /// Append `parts` back to back; into lent memory the parts are copied in
    /// parallel (a batch of utterances queued by the caller). False, and
    /// nothing written, when lent memory has no room for them all.
    pub fn push_parts<P: FrameSource>(&mut self, parts: &[P]) -> bool {
        let total: usize = parts.iter().map(P::floats).sum();
        let at = self.len;
        match &mut self.mem {
            Mem::Plain(v) => {
                for p in parts {
                    let n = v.len();
                    v.resize(n + p.floats(), 0.0);
                    p.copy_to(&mut v[n..]);
                    Self::note_max(&mut self.maxima, n, &v[n..]);
                }
            }
            Mem::Lent(m) => {
                let Some(room) = m.as_mut_slice().get_mut(at..at + total) else {
                    return false;
                };
                let places = split_places(room, at, parts.iter().map(P::floats));
                let parts: Vec<&dyn FrameSource> = parts.iter().map(|p| p as _).collect();
                copy_parts(places, &parts, &mut self.maxima);
            }
        }
        self.len += total;
        true
    }

    /// Take room for `parts` back to back, to be copied by
    /// [`gather`](Self::gather) (on whichever thread sends the batch) rather
    /// than now; plain memory copies them now. False, and nothing taken,
    /// when lent memory has no room for them all.
    pub fn keep_parts(&mut self, parts: Vec<Box<dyn FrameSource + Send>>) -> bool {
        if !self.is_lent() {
            return self.push_parts(&parts);
        }
        let total: usize = parts.iter().map(|p| p.floats()).sum();
        if !self.has_room(total) {
            return false;
        }
        for p in parts {
            let n = p.floats();
            self.kept.push((self.len, p));
            self.len += n;
        }
        true
    }

    /// Whether parts kept by [`keep_parts`](Self::keep_parts) wait to be
    /// copied.
    pub fn has_kept_parts(&self) -> bool {
        !self.kept.is_empty()
    }

    /// Copy the parts kept by [`keep_parts`](Self::keep_parts) to their
    /// places, in parallel.
    pub fn gather(&mut self) {
        drop(self.gather_apart(false));
    }

    /// [`gather`](Self::gather), the parts copied handed back rather than
    /// let go: letting go of a mapped archive's last part unmaps the
    /// archive, which a caller does after it has handed the batch on (it
    /// costs little since parts are read with `pread`, leaving the map's
    /// pages unmapped; 3–4 ms for 0.5 GB whose pages a copy from the map
    /// mapped, an `f64` archive's). With `send`, and memory whose engine gives an
    /// [`Upload`], the parts go to the engine's device as they are copied
    /// and not into the memory ([`super::upload`]): only that engine may
    /// read the batch then, as it sends it.
    pub fn gather_apart(&mut self, send: bool) -> CopiedParts {
        if send {
            if let Some(rx) = self.send_kept() {
                let _t = crate::timeline::Tally::start("gather");
                match rx.recv() {
                    Ok(found) => self.note_sent(found),
                    // A copy panicked: the engine finds the batch not sent.
                    Err(_) => self.maxima = None,
                }
                return CopiedParts(Vec::new());
            }
        }
        let kept = std::mem::take(&mut self.kept);
        if kept.is_empty() {
            return CopiedParts(kept);
        }
        let _t = crate::timeline::Tally::start("gather");
        if let Mem::Lent(m) = &mut self.mem {
            let places = split_kept(m.as_mut_slice(), &kept);
            let parts: Vec<&dyn FrameSource> = kept.iter().map(|(_, p)| &**p as _).collect();
            copy_parts(places, &parts, &mut self.maxima);
        }
        CopiedParts(kept)
    }

    /// Hands the kept parts to the gatherers, to go to the engine's device
    /// as they are copied ([`super::upload`]), where the memory's engine
    /// gives an [`Upload`]; the maxima of the rows come on the channel
    /// (for [`note_sent`](Self::note_sent)). `None`: nothing to send that
    /// way. Only the engine that lent the memory may read the batch then.
    pub fn send_kept(&mut self) -> Option<std::sync::mpsc::Receiver<upload::Gathered>> {
        let Mem::Lent(m) = &self.mem else {
            return None;
        };
        let up = m.uploader().filter(|_| !self.kept.is_empty())?;
        let dim = self.maxima.as_ref().map_or(1, |m| m.dim().max(1));
        let kept = std::mem::take(&mut self.kept);
        Some(upload::submit(kept, self.len, dim, up))
    }

    /// Notes the maxima of parts sent by [`send_kept`](Self::send_kept).
    pub fn note_sent(&mut self, found: Vec<Found>) {
        note_found(&mut self.maxima, found);
    }

    /// The floats written (after [`gather`](Self::gather) where parts were kept).
    pub fn as_slice(&self) -> &[f32] {
        match &self.mem {
            Mem::Plain(v) => v,
            Mem::Lent(m) => &m.as_slice()[..self.len],
        }
    }

    /// Empty again, keeping the memory (and whether maxima are noted).
    pub fn clear(&mut self) {
        if let Mem::Plain(v) = &mut self.mem {
            v.clear();
        }
        self.len = 0;
        self.kept.clear();
        if let Some(rm) = &mut self.maxima {
            rm.clear();
        }
    }

    /// Whether this is memory an engine lent.
    pub fn is_lent(&self) -> bool {
        matches!(self.mem, Mem::Lent(_))
    }

    /// For engines: the lent memory with every kept part gathered, the
    /// floats written and the parts' maxima, leaving `self` an empty plain
    /// buffer; `None` (and `self` untouched) for a plain one.
    pub fn take_lent(&mut self) -> Option<LentFrames> {
        self.take_lent_gathered(false)
    }

    /// [`take_lent`](Self::take_lent) for the engine that lent the memory,
    /// as it sends the batch: kept parts go to its device as they are
    /// gathered where it gives an [`Upload`] (`gather_apart(true)`).
    pub fn take_lent_sent(&mut self) -> Option<LentFrames> {
        self.take_lent_gathered(true)
    }

    fn take_lent_gathered(&mut self, send: bool) -> Option<LentFrames> {
        if !self.is_lent() {
            return None;
        }
        drop(self.gather_apart(send));
        let len = std::mem::take(&mut self.len);
        let maxima = self.maxima.take();
        match std::mem::replace(&mut self.mem, Mem::Plain(Vec::new())) {
            Mem::Lent(mem) => Some(LentFrames { mem, len, maxima }),
            Mem::Plain(_) => None,
        }
    }
}

/// `room` (which starts at float `at` of the batch) cut into places of
/// `sizes` back to back; each place with its offset in the batch.
fn split_places(
    mut room: &mut [f32],
    mut at: usize,
    sizes: impl Iterator<Item = usize>,
) -> Vec<(usize, &mut [f32])> {
    let mut places = Vec::new();
    for n in sizes {
        let (head, tail) = std::mem::take(&mut room).split_at_mut(n);
        places.push((at, head));
        room = tail;
        at += n;
    }
    places
}

/// The places of the kept parts (in order; frames pushed in between lie
/// between them).
fn split_kept<'m>(mut mem: &'m mut [f32], kept: &[Kept]) -> Vec<(usize, &'m mut [f32])> {
    let mut places = Vec::with_capacity(kept.len());
    let mut pos = 0;
    for (at, p) in kept {
        let rest = std::mem::take(&mut mem).split_at_mut(at - pos).1;
        let (head, tail) = rest.split_at_mut(p.floats());
        places.push((*at, head));
        mem = tail;
        pos = at + p.floats();
    }
    places
}

/// The variable that sets the threads of the copies of kept parts: N, a
/// pool of N threads of their own; 0, rayon's global pool (a thread a
/// core). Unset: [`default_gather_threads`].
pub const GATHER_THREADS_ENV: &str = "AMTOOL_GATHER_THREADS";

/// The copies' threads when [`GATHER_THREADS_ENV`] is unset: three in four
/// of the host's `cores` (on 8 or more). A batch copied with every core left
/// the threads that read the input, hold the next batches and send them
/// waiting for one: on 2 × H100 (32 cores) acc_stats_ark took 34–36 ms with
/// the copies on every core and 21.3–21.6 ms on 24 threads in the same call
/// (16: 23.7–25.6; 8: 32–35).
pub fn default_gather_threads(cores: usize) -> Option<usize> {
    (cores >= 8).then(|| cores - cores / 4)
}

/// A pool for the copies: of the threads `threads` (the variable's value)
/// asks for, or else of the default for `cores`; `None`, the global pool
/// (a value of 0, or a host of few cores). An unreadable value is the
/// default.
fn gather_pool(threads: Option<&str>, cores: usize) -> Option<rayon::ThreadPool> {
    let asked: Option<usize> = threads.and_then(|t| t.trim().parse().ok());
    let n = match asked {
        Some(n) => Some(n).filter(|&n| n > 0),
        None => default_gather_threads(cores),
    }?;
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("amtool-copy-{i}"))
        .build()
        .ok()
}

/// The copies' threads ([`GATHER_THREADS_ENV`], else
/// [`default_gather_threads`], else every core).
pub(super) fn gather_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let asked: Option<usize> = std::env::var(GATHER_THREADS_ENV)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .filter(|&n| n > 0);
    asked.or(default_gather_threads(cores)).unwrap_or(cores)
}

/// Runs `f` in the copies' pool ([`GATHER_THREADS_ENV`]).
fn in_gather_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        gather_pool(std::env::var(GATHER_THREADS_ENV).ok().as_deref(), cores)
    });
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// Each part copied to its place, in parallel, with its maxima noted when
/// `maxima` tracks them.
fn copy_parts(
    places: Vec<(usize, &mut [f32])>,
    parts: &[&dyn FrameSource],
    maxima: &mut Option<RowMaxima>,
) {
    let dim = maxima.as_ref().map(|m| m.dim().max(1));
    let found: Vec<Option<(usize, usize, Vec<f32>)>> = in_gather_pool(|| {
        places
            .into_par_iter()
            .zip(parts.par_iter())
            .map(|((at, dst), p)| match dim {
                Some(d) => Some((at, dst.len(), p.copy_abs_max(dst, d))),
                None => {
                    p.copy_to(dst);
                    None
                }
            })
            .collect()
    });
    note_found(maxima, found.into_iter().flatten().collect());
}

/// Notes the maxima `found` of parts copied (where they went, their floats).
fn note_found(maxima: &mut Option<RowMaxima>, found: Vec<(usize, usize, Vec<f32>)>) {
    if let Some(rm) = maxima {
        let d = rm.dim().max(1);
        for (at, n, max) in found {
            rm.note(at / d..(at + n) / d, max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::test_engines::{UploadMem, VecMem};

    /// AMTOOL_GATHER_THREADS=N gives the copies a pool of N threads, 0 the
    /// global pool; unset or unreadable, three in four of 8 or more cores.
    #[test]
    fn the_copies_pool_has_the_threads_asked_for() {
        let threads =
            |v: Option<&str>, cores| gather_pool(v, cores).map(|p| p.current_num_threads());
        assert_eq!(threads(Some("3"), 32), Some(3));
        assert_eq!(threads(Some(" 16 "), 2), Some(16));
        assert_eq!(threads(Some("0"), 32), None);
        for v in [None, Some("all"), Some("")] {
            assert_eq!(threads(v, 32), Some(24), "{v:?}");
            assert_eq!(threads(v, 16), Some(12), "{v:?}");
            assert_eq!(threads(v, 2), None, "{v:?}");
        }
    }

    #[test]
    fn plain_grows_and_clears() {
        let mut f = HostFrames::with_capacity(4);
        assert!(f.has_room(4) && !f.has_room(5));
        assert!(f.push(&[1.0, 2.0, 3.0]));
        assert!(f.push(&[4.0, 5.0]));
        assert_eq!(f.as_slice(), &[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert!(f.take_lent().is_none());
        assert_eq!(f.len(), 5);
        f.clear();
        assert!(f.is_empty() && f.capacity() >= 5);
    }

    #[test]
    fn lent_memory_is_filled_in_place_and_never_grows() {
        let mut f = HostFrames::lent(Box::new(VecMem(vec![0.0; 4])));
        assert!(f.is_lent() && f.capacity() == 4);
        assert!(f.push(&[1.0, 2.0, 3.0]));
        assert!(!f.push(&[4.0, 5.0]), "no room: refused");
        assert_eq!(f.as_slice(), &[1.0, 2.0, 3.0]);
        let LentFrames {
            mem: m,
            len,
            maxima,
        } = f.take_lent().expect("lent");
        assert_eq!((len, maxima), (3, None));
        assert!(!f.is_lent() && f.is_empty() && f.capacity() == 0);
        let back = m.into_any().downcast::<VecMem>().expect("own type");
        assert_eq!(back.0, vec![1.0, 2.0, 3.0, 0.0]);
    }

    #[test]
    fn parts_go_back_to_back() {
        let parts = vec![vec![1.0, 2.0], vec![], vec![3.0], vec![4.0, 5.0, 6.0]];
        let mut lent = HostFrames::lent(Box::new(VecMem(vec![0.0; 8])));
        assert!(lent.push(&[9.0]));
        assert!(lent.push_parts(&parts));
        assert_eq!(lent.as_slice(), &[9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert!(!lent.push_parts(&parts), "no room: refused");
        assert_eq!(lent.len(), 7, "nothing written");
        let mut plain = HostFrames::default();
        assert!(plain.push_parts(&parts));
        assert_eq!(plain.as_slice(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    fn boxed(parts: &[Vec<f32>]) -> Vec<Box<dyn FrameSource + Send>> {
        parts.iter().map(|p| Box::new(p.clone()) as _).collect()
    }

    #[test]
    fn kept_parts_take_their_room_now_and_are_copied_when_gathered() {
        let parts = vec![vec![1.0, -2.0], vec![], vec![3.0, 0.5], vec![-4.0, 5.0]];
        let mut lent = HostFrames::lent(Box::new(VecMem(vec![0.0; 12])));
        lent.track_abs_max(2);
        assert!(lent.keep_parts(boxed(&parts[..2])));
        assert!(lent.push(&[9.0, -9.5]), "copied now, after the kept room");
        assert!(lent.keep_parts(boxed(&parts[2..])));
        assert_eq!(lent.len(), 8);
        assert!(!lent.keep_parts(boxed(&[vec![0.0; 5]])), "no room: refused");
        assert_eq!(lent.len(), 8, "nothing taken");
        let LentFrames { mem, len, maxima } = lent.take_lent().expect("lent");
        let data = &mem.as_slice()[..len];
        assert_eq!(data, &[1.0, -2.0, 9.0, -9.5, 3.0, 0.5, -4.0, 5.0]);
        let maxima = maxima.expect("tracked");
        assert_eq!(maxima.abs_max(data, 0..4), vec![9.0, 9.5]);
        assert_eq!(maxima.abs_max(data, 2..4), vec![4.0, 5.0]);
        assert_eq!(maxima.abs_max(data, 0..1), vec![1.0, 2.0]);
        // Plain memory copies them at once.
        let mut plain = HostFrames::default();
        assert!(plain.keep_parts(boxed(&parts)));
        assert_eq!(plain.as_slice(), &[1.0, -2.0, 3.0, 0.5, -4.0, 5.0]);
    }

    /// Memory with an uploader: the kept parts and the frames pushed
    /// between them reach the device copy whole (the kept parts never the
    /// lent memory), and the maxima noted cover every row, in pieces no
    /// chunk cuts: each chunk's maxima come from the notes alone.
    #[test]
    fn gathering_sends_the_whole_batch_on() {
        let mut rng = crate::bench::random::Rng::new(3);
        let (d, chunk) = (4, 3_000);
        let parts: Vec<Vec<f32>> = (0..200)
            .map(|i| {
                (0..d * (1 + i * 37 % 9000))
                    .map(|_| rng.normal() as f32)
                    .collect()
            })
            .collect();
        let total: usize = parts.iter().map(Vec::len).sum::<usize>() + d;
        let mut lent = HostFrames::lent(Box::new(UploadMem::new(total + 8, chunk)));
        lent.track_abs_max(d);
        assert!(lent.keep_parts(boxed(&parts[..120])));
        assert!(lent.push(&[1.0, -2.0, 3.0, 4.0]));
        assert!(lent.keep_parts(boxed(&parts[120..])));
        let LentFrames { mem, len, maxima } = lent.take_lent_sent().expect("lent");
        assert_eq!(len, total);
        let mem = mem.into_any().downcast::<UploadMem>().expect("own type");
        let want: Vec<f32> = parts[..120]
            .iter()
            .flatten()
            .chain(&[1.0, -2.0, 3.0, 4.0])
            .chain(parts[120..].iter().flatten())
            .copied()
            .collect();
        assert_eq!(mem.uploaded(len).expect("sent"), want);
        assert!(mem.as_slice()[..len].iter().filter(|x| x.is_nan()).count() == len - d);
        let maxima = maxima.expect("tracked");
        for c0 in (0..len / d).step_by(chunk) {
            let rows = c0..(c0 + chunk).min(len / d);
            let exact = block_abs_max(&want[rows.start * d..rows.end * d], d);
            assert_eq!(maxima.noted_abs_max(rows.clone()), exact, "chunk {rows:?}");
        }
    }

    #[test]
    fn clearing_forgets_kept_parts_and_maxima() {
        let mut lent = HostFrames::lent(Box::new(VecMem(vec![7.0; 4])));
        lent.track_abs_max(1);
        assert!(lent.keep_parts(boxed(&[vec![1.0, 2.0]])));
        lent.clear();
        assert!(lent.push(&[-3.0]));
        let LentFrames { mem, len, maxima } = lent.take_lent().expect("lent");
        assert_eq!(&mem.as_slice()[..len], &[-3.0]);
        assert_eq!(maxima.expect("tracked").abs_max(&[-3.0], 0..1), vec![3.0]);
    }
}
