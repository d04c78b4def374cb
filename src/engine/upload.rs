//! Batches sent to their devices piece by piece while the host copies
//! them, for several devices at once.
//!
//! An engine that lends page-locked memory for a batch
//! ([`super::LentMemory`]) may also give an [`Upload`]. Then the batch's
//! kept parts are not copied into the lent memory: they are cut into
//! pieces of at most [`PIECE_FLOATS`] (1 MB), and each copying thread
//! copies a piece into a small buffer of the engine's, with plain stores,
//! and has it sent to the device at once ([`Upload::send`]). The engine
//! reuses a thread's few pieces, so they stay in the core's cache while the
//! device reads them: the host's memory is read once (the archive) instead
//! of three times (the archive, the batch written, the batch read by the
//! device). The pieces of the batches gathered together (one a device)
//! are handed out in turn, so that every device's copy engine works at
//! once: on 2 × H200 the same 0.5 GB reached the two devices in 7.5–8.4 ms
//! this way, against 13.2–13.9 ms gathered batch by batch into the lent
//! memory and sent whole (docs/performance.md).
//!
//! Frames pushed into the lent memory before the gathering are sent from
//! there ([`Upload::send_lent`]). A piece never straddles one of the
//! chunks the engine will cut the batch into ([`Upload::chunk_frames`]),
//! so each chunk's largest |x_d| are those noted for its pieces, and the
//! engine never needs the frames in host memory.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rayon::prelude::*;

use super::FrameSource;

/// Where an engine sends a batch buffer it lent, piece by piece.
pub trait Upload: Send + Sync {
    /// Frames of the chunks the engine cuts a batch of `frames` into (all
    /// but the last).
    fn chunk_frames(&self, frames: usize) -> usize;
    /// Floats `at..at + n` of the batch (`n` ≤ [`PIECE_FLOATS`]): `fill`
    /// writes them into a piece of the engine's memory, which then goes to
    /// the device.
    fn send(&self, at: usize, n: usize, fill: &mut dyn FnMut(&mut [f32]));
    /// Floats `floats` of the lent memory, written before the gathering,
    /// sent as they are.
    fn send_lent(&self, floats: Range<usize>);
    /// Every float of the batch (`len` of them) was sent: called once,
    /// after the last `send` or `send_lent` of the batch returned.
    fn finished(&self, len: usize);
}

/// The most floats a piece holds (2 MB; in a test program 1 MB pieces
/// were as fast, 512 KB ones slower, 256 KB ones twice as slow: each copy
/// to a device costs ~17 µs of its copy engine besides its bytes, and in
/// amtool the copies' driver calls, one a piece, wait for each other).
pub const PIECE_FLOATS: usize = 1 << 19;

/// A batch to gather: its kept parts (where each goes, its frames), its
/// length in floats, its rows' width, and where it goes.
pub(super) struct Batch<'a> {
    pub parts: Vec<(usize, &'a dyn FrameSource)>,
    pub len: usize,
    pub dim: usize,
    pub up: Arc<dyn Upload>,
}

/// A part's maxima: where its rows went (floats), how many floats, the
/// largest |x_d| of each column.
pub(super) type Found = (usize, usize, Vec<f32>);

/// One piece of work: rows of parts into one piece, or a range of the lent
/// memory as it is.
enum Task {
    /// Floats from `at`: rows `rows` of part `part`, one after another.
    Copy {
        at: usize,
        segs: Vec<(usize, Range<usize>)>,
    },
    Lent(Range<usize>),
}

/// The tasks of `b`: its kept parts cut into pieces of at most `piece`
/// floats that do not straddle a chunk of `chunk` floats, and the floats
/// between the parts (pushed) as they are.
fn tasks(b: &Batch<'_>, piece: usize, chunk: usize) -> Vec<Task> {
    let d = b.dim.max(1);
    let piece = (piece / d).max(1) * d;
    let chunk = chunk.max(d);
    let mut out = Vec::new();
    // The piece being filled: its start and its segments; its end.
    let mut open: Option<(usize, Vec<(usize, Range<usize>)>)> = None;
    let mut pos = 0;
    let close = |open: &mut Option<(usize, Vec<(usize, Range<usize>)>)>, out: &mut Vec<Task>| {
        if let Some((at, segs)) = open.take() {
            out.push(Task::Copy { at, segs });
        }
    };
    for (i, &(at, part)) in b.parts.iter().enumerate() {
        if at > pos {
            close(&mut open, &mut out);
            out.push(Task::Lent(pos..at));
        }
        pos = at;
        let rows = part.floats() / d;
        let mut r = 0;
        while r < rows {
            let (start, filled) = match &open {
                Some((s, _)) => (*s, pos - *s),
                None => (pos, 0),
            };
            let room = (piece - filled).min(chunk - pos % chunk) / d;
            let take = room.min(rows - r).max(1);
            open.get_or_insert((start, Vec::new()))
                .1
                .push((i, r..r + take));
            r += take;
            pos += take * d;
            if pos - start >= piece || pos % chunk == 0 {
                close(&mut open, &mut out);
            }
        }
    }
    close(&mut open, &mut out);
    if b.len > pos {
        out.push(Task::Lent(pos..b.len));
    }
    out
}

/// The batches' tasks in turn: the first of each, then the second of
/// each, and so on.
fn in_turn(per_batch: Vec<Vec<Task>>) -> Vec<(usize, Task)> {
    let most = per_batch.iter().map(Vec::len).max().unwrap_or(0);
    let mut iters: Vec<_> = per_batch.into_iter().map(Vec::into_iter).collect();
    let mut out = Vec::new();
    for _ in 0..most {
        for (b, it) in iters.iter_mut().enumerate() {
            if let Some(t) = it.next() {
                out.push((b, t));
            }
        }
    }
    out
}

/// `batches` gathered together by the threads of the current pool and
/// sent on to their devices (see the module notes); each batch's maxima
/// of the rows copied (of its `dim`-wide rows). `all_taken` is called once
/// the last task is taken.
pub(super) fn gather_uploading(
    batches: &[Batch<'_>],
    all_taken: &(dyn Fn() + Sync),
) -> Vec<Vec<Found>> {
    let per_batch: Vec<Vec<Task>> = batches
        .iter()
        .map(|b| {
            let frames = b.len / b.dim.max(1);
            let chunk = b.up.chunk_frames(frames).max(1) * b.dim.max(1);
            tasks(b, PIECE_FLOATS, chunk)
        })
        .collect();
    let left: Vec<AtomicUsize> = per_batch
        .iter()
        .map(|t| AtomicUsize::new(t.len()))
        .collect();
    for (b, t) in batches.iter().zip(&per_batch) {
        if t.is_empty() {
            b.up.finished(b.len);
        }
    }
    let work = in_turn(per_batch);
    let next = AtomicUsize::new(0);
    let workers = rayon::current_num_threads().min(work.len()).max(1);
    let found: Vec<Vec<(usize, Found)>> = (0..workers)
        .into_par_iter()
        .map(|_| {
            let mut found = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i + 1 == work.len() {
                    all_taken();
                }
                let Some((b, task)) = work.get(i) else {
                    break;
                };
                let batch = &batches[*b];
                run_task(batch, task, |f| found.push((*b, f)));
                if left[*b].fetch_sub(1, Ordering::AcqRel) == 1 {
                    batch.up.finished(batch.len);
                }
            }
            found
        })
        .collect();
    let mut out: Vec<Vec<Found>> = batches.iter().map(|_| Vec::new()).collect();
    for (b, f) in found.into_iter().flatten() {
        out[b].push(f);
    }
    out
}

/// Does `task` of `batch`, each segment's maxima to `found`.
fn run_task(batch: &Batch<'_>, task: &Task, mut found: impl FnMut(Found)) {
    let d = batch.dim.max(1);
    match task {
        Task::Lent(r) => batch.up.send_lent(r.clone()),
        Task::Copy { at, segs } => {
            let n: usize = segs.iter().map(|(_, r)| r.len() * d).sum();
            batch.up.send(*at, n, &mut |piece: &mut [f32]| {
                let mut o = 0;
                for (p, rows) in segs {
                    let (part_at, part) = batch.parts[*p];
                    let m = rows.len() * d;
                    let floats = rows.start * d..rows.end * d;
                    let max = part.copy_range_abs_max(floats.clone(), &mut piece[o..o + m], d);
                    found((part_at + floats.start, m, max));
                    o += m;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A pretend device: what was sent where, and what `finished` said.
    struct Dev {
        mem: Mutex<Vec<f32>>,
        lent: Vec<f32>,
        chunk: usize,
        log: Mutex<(Vec<Range<usize>>, Vec<usize>)>,
    }

    impl Upload for Dev {
        fn chunk_frames(&self, _frames: usize) -> usize {
            self.chunk
        }
        fn send(&self, at: usize, n: usize, fill: &mut dyn FnMut(&mut [f32])) {
            assert!(n <= PIECE_FLOATS);
            let mut piece = vec![f32::NAN; n];
            fill(&mut piece);
            self.mem.lock().unwrap()[at..at + n].copy_from_slice(&piece);
            self.log.lock().unwrap().0.push(at..at + n);
        }
        fn send_lent(&self, floats: Range<usize>) {
            self.mem.lock().unwrap()[floats.clone()].copy_from_slice(&self.lent[floats.clone()]);
            self.log.lock().unwrap().0.push(floats);
        }
        fn finished(&self, len: usize) {
            self.log.lock().unwrap().1.push(len);
        }
    }

    #[test]
    fn batches_reach_their_devices_whole_in_pieces_inside_chunks() {
        let d = 3;
        let mut rng = crate::bench::random::Rng::new(9);
        for (n_parts, most_rows, chunk) in [(1, 5, 7), (50, 40_000, 100_000), (400, 3_000, 12_345)]
        {
            // Two batches; 6 floats pushed before the first part of each.
            let mut batches = Vec::new();
            let mut wants = Vec::new();
            let mut devs = Vec::new();
            let mut all_parts = Vec::new();
            for _ in 0..2 {
                let parts: Vec<Vec<f32>> = (0..n_parts)
                    .map(|_| {
                        let rows = 1 + (rng.uniform() * most_rows as f64) as usize;
                        (0..rows * d).map(|_| rng.normal() as f32).collect()
                    })
                    .collect();
                let pushed = vec![7.0f32; 2 * d];
                let want: Vec<f32> = pushed
                    .iter()
                    .chain(parts.iter().flatten())
                    .copied()
                    .collect();
                let mut lent = vec![f32::NAN; want.len() + d];
                lent[..pushed.len()].copy_from_slice(&pushed);
                devs.push(Arc::new(Dev {
                    mem: Mutex::new(vec![f32::NAN; lent.len()]),
                    lent,
                    chunk,
                    log: Mutex::new((Vec::new(), Vec::new())),
                }));
                wants.push(want);
                all_parts.push(parts);
            }
            for (i, parts) in all_parts.iter().enumerate() {
                let mut at = 2 * d;
                let places = parts
                    .iter()
                    .map(|p| {
                        at += p.len();
                        (at - p.len(), p as &dyn FrameSource)
                    })
                    .collect();
                batches.push(Batch {
                    parts: places,
                    len: wants[i].len(),
                    dim: d,
                    up: devs[i].clone(),
                });
            }
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(4)
                .build()
                .unwrap();
            let found = pool.install(|| gather_uploading(&batches, &|| ()));
            for (i, dev) in devs.iter().enumerate() {
                let len = wants[i].len();
                let mem = dev.mem.lock().unwrap();
                assert_eq!(&mem[..len], &wants[i][..], "batch {i}");
                let (mut sent, fin) = std::mem::take(&mut *dev.log.lock().unwrap());
                assert_eq!(fin, vec![len], "finished once, with the length");
                sent.sort_by_key(|r| r.start);
                let mut at = 0;
                for r in &sent {
                    assert_eq!(r.start, at, "back to back, once");
                    at = r.end;
                    let (first, last) = (r.start / d / chunk, (r.end / d - 1) / chunk);
                    assert!(r.start < 2 * d || first == last, "{r:?} straddles a chunk");
                }
                assert_eq!(at, len);
                // Every copied row's maxima noted once, as the rows are.
                let mut rows: Vec<(usize, usize)> = Vec::new();
                for (at, n, max) in &found[i] {
                    let block = &wants[i][*at..at + n];
                    assert_eq!(max, &crate::engine::row_max::block_abs_max(block, d));
                    rows.push((*at, at + n));
                }
                rows.sort();
                let covered: usize = rows.iter().map(|r| r.1 - r.0).sum();
                assert_eq!(covered, len - 2 * d);
                assert!(rows.windows(2).all(|w| w[0].1 == w[1].0));
            }
        }
    }
}
