//! Batches sent to their devices piece by piece while the host copies
//! them, for several devices at once.
//!
//! An engine that lends page-locked memory for a batch
//! ([`super::LentMemory`]) may also give an [`Upload`]. Then the batch's
//! kept parts are not copied into the lent memory: they are cut into
//! pieces of at most [`PIECE_FLOATS`], and a thread of the gatherers copies
//! each into a small buffer of the engine's, with plain stores, and has it
//! sent to the device at once ([`Upload::send`]). The engine reuses a
//! thread's few pieces, so they stay in the core's cache while the device
//! reads them: the host's memory carries the archive once instead of three
//! times (read, written into the batch, read by the device).
//!
//! The gatherers are threads of their own that take pieces from the batches
//! handed to them ([`submit`]) as they come, the two oldest batches' in
//! turn (one a device, in the order the devices take them), so that both
//! devices' copy engines work at once and no thread waits at the end of a
//! batch for the others. In a test program on 2 × H200 the 0.5 GB of
//! acc_stats_ark reached two devices in 7.5–8.4 ms this way, in 11.4–12.4 ms
//! when each pair of batches was a job of its own that the next waited for,
//! and in 12.4–13.9 ms gathered batch by batch into the lent memory and
//! sent whole (docs/performance.md, twentieth session).
//!
//! Frames pushed into the lent memory before the gathering are sent from
//! there ([`Upload::send_lent`]). A piece never straddles one of the chunks
//! the engine cuts the batch into ([`Upload::chunk_frames`]), so each
//! chunk's largest |x_d| are those noted for its pieces, and the engine
//! never needs the frames in host memory.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

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

/// The most floats a piece holds (2 MB; in the test program 1 MB pieces
/// were as fast, 512 KB ones slower, 256 KB ones twice as slow: each copy
/// to a device costs ~17 µs of its copy engine besides its bytes, and in
/// amtool 1 MB pieces' driver calls waited for each other, ~90 µs a call).
pub const PIECE_FLOATS: usize = 1 << 19;

/// Batches whose pieces the gatherers take in turn (the devices a process
/// feeds at once are usually two; more batches in turn would delay the
/// oldest, which its device waits for).
const IN_TURN: usize = 2;

/// A kept part: where it goes in the batch, and its frames.
pub type KeptPart = (usize, Box<dyn FrameSource + Send>);

/// A part's maxima: where its rows went (floats), how many floats, the
/// largest |x_d| of each column.
pub type Found = (usize, usize, Vec<f32>);

/// What the gatherers send back for a batch: the maxima of its rows copied
/// (the channel closes instead when a copy panicked).
pub type Gathered = Vec<Found>;

/// One piece of work: rows of parts into one piece, or a range of the lent
/// memory as it is.
enum Task {
    /// Floats from `at`: floats `floats` of part `part`, one after another.
    Copy {
        at: usize,
        segs: Vec<(usize, Range<usize>)>,
    },
    Lent(Range<usize>),
}

/// The tasks of a batch of `len` floats (rows `dim` wide) whose kept parts
/// are `parts`: cut into pieces of at most `piece` floats that do not
/// straddle a chunk of `chunk` floats, and the floats between the parts
/// (pushed) as they are.
fn tasks(parts: &[KeptPart], len: usize, dim: usize, piece: usize, chunk: usize) -> Vec<Task> {
    let d = dim.max(1);
    let piece = (piece / d).max(1) * d;
    let chunk = chunk.max(d);
    let mut out = Vec::new();
    // The piece being filled: its start and its segments.
    let mut open: Option<(usize, Vec<(usize, Range<usize>)>)> = None;
    let close = |open: &mut Option<(usize, Vec<(usize, Range<usize>)>)>, out: &mut Vec<Task>| {
        if let Some((at, segs)) = open.take() {
            out.push(Task::Copy { at, segs });
        }
    };
    let mut pos = 0;
    for (i, (at, part)) in parts.iter().enumerate() {
        if *at > pos {
            close(&mut open, &mut out);
            out.push(Task::Lent(pos..*at));
        }
        pos = *at;
        let floats = part.floats();
        let mut f = 0;
        while f < floats {
            let start = open.as_ref().map_or(pos, |o| o.0);
            let room = (piece - (pos - start)).min(chunk - pos % chunk);
            let take = room.min(floats - f);
            open.get_or_insert((start, Vec::new()))
                .1
                .push((i, f..f + take));
            f += take;
            pos += take;
            if pos - start >= piece || pos % chunk == 0 {
                close(&mut open, &mut out);
            }
        }
    }
    close(&mut open, &mut out);
    if len > pos {
        out.push(Task::Lent(pos..len));
    }
    out
}

/// `AMTOOL_BATCH_TRACE`: marks the end of a batch's (frames) task (index)
/// when dropped, as its start is marked (`p`/`P` frames.index).
struct TaskMark(usize, usize);

impl Drop for TaskMark {
    fn drop(&mut self) {
        crate::engine::batch_trace::thread_mark(format_args!("P{}.{}", self.0, self.1));
    }
}

/// A batch handed to the gatherers.
struct Job {
    parts: Vec<KeptPart>,
    len: usize,
    dim: usize,
    up: Arc<dyn Upload>,
    tasks: Vec<Task>,
    /// The next task to hand out (taken under the queue's lock).
    next: AtomicUsize,
    /// Tasks not done.
    left: AtomicUsize,
    found: Mutex<Vec<Found>>,
    /// Where the maxima go once the last task is done (taken then, or by a
    /// gatherer that panicked, which closes the channel).
    done: Mutex<Option<SyncSender<Gathered>>>,
}

impl Job {
    fn has_tasks(&self) -> bool {
        self.next.load(Ordering::Relaxed) < self.tasks.len()
    }

    /// Does task `i`, its segments' maxima noted.
    fn run(&self, i: usize) {
        let d = self.dim.max(1);
        crate::engine::batch_trace::thread_mark(format_args!("p{}.{i}", self.len / d));
        let _end = TaskMark(self.len / d, i);
        match &self.tasks[i] {
            Task::Lent(r) => self.up.send_lent(r.clone()),
            Task::Copy { at, segs } => {
                let n: usize = segs.iter().map(|(_, r)| r.len()).sum();
                let mut found = Vec::with_capacity(segs.len());
                self.up.send(*at, n, &mut |piece: &mut [f32]| {
                    let mut o = 0;
                    for (p, floats) in segs {
                        let (part_at, part) = &self.parts[*p];
                        let dst = &mut piece[o..o + floats.len()];
                        let max = part.copy_range_abs_max(floats.clone(), dst, d);
                        found.push((part_at + floats.start, floats.len(), max));
                        o += floats.len();
                    }
                });
                self.found
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(found);
            }
        }
    }

    /// After task `i` is done (or panicked): the batch finished and its
    /// maxima sent when it was the last.
    fn done_one(&self, ok: bool) {
        if !ok {
            // The receiver sees the channel closed.
            self.done.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.up.finished(self.len);
            let found = std::mem::take(&mut *self.found.lock().unwrap_or_else(|e| e.into_inner()));
            if let Some(tx) = self.done.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = tx.send(found);
            }
        }
    }
}

/// The batches whose pieces wait, oldest first, and whose turn it is.
#[derive(Default)]
struct Queue {
    jobs: VecDeque<Arc<Job>>,
    turn: usize,
}

/// The gatherers' queue and the signal that it grew; how many there are.
#[derive(Default)]
struct Gatherers {
    queue: Mutex<Queue>,
    more: Condvar,
    threads: AtomicUsize,
}

impl Gatherers {
    /// The next piece of work: a task of the oldest [`IN_TURN`] batches with
    /// tasks left, in turn; waits for one.
    fn take(&self) -> (Arc<Job>, usize) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            q.jobs.retain(|j| j.has_tasks());
            if !q.jobs.is_empty() {
                let k = q.jobs.len().min(IN_TURN);
                let job = q.jobs[q.turn % k].clone();
                q.turn = q.turn.wrapping_add(1);
                let i = job.next.fetch_add(1, Ordering::Relaxed);
                return (job, i);
            }
            let t = std::time::Instant::now();
            q = self.more.wait(q).unwrap_or_else(|e| e.into_inner());
            crate::timeline::add("piece_idle", t.elapsed().as_secs_f64());
        }
    }

    /// A gatherer: takes tasks until the process ends.
    fn work(&self) {
        loop {
            let (job, i) = self.take();
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(i))).is_ok();
            job.done_one(ok);
        }
    }
}

/// The fewest gatherers: a copy that waits (a part read from a slow
/// source; the tests' gated parts) holds one, and the others go on.
const MIN_GATHERERS: usize = 4;

/// The process's gatherers, started at the first batch:
/// [`super::host_frames::gather_threads`] of them, at least
/// [`MIN_GATHERERS`].
fn gatherers() -> &'static Arc<Gatherers> {
    static G: OnceLock<Arc<Gatherers>> = OnceLock::new();
    G.get_or_init(|| {
        let g = Arc::new(Gatherers::default());
        for i in 0..super::host_frames::gather_threads().max(MIN_GATHERERS) {
            let worker = g.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("amtool-gather-{i}"))
                .spawn(move || worker.work());
            match spawned {
                Ok(_) => g.threads.fetch_add(1, Ordering::Relaxed),
                Err(_) => break,
            };
        }
        g
    })
}

/// Hands a batch to the gatherers: its kept `parts`, its length `len` in
/// floats, its rows' width `dim`, where it goes. The maxima of its rows
/// come on the channel returned once every piece is sent.
pub fn submit(
    parts: Vec<KeptPart>,
    len: usize,
    dim: usize,
    up: Arc<dyn Upload>,
) -> Receiver<Gathered> {
    let frames = len / dim.max(1);
    let chunk = up.chunk_frames(frames).max(1) * dim.max(1);
    let tasks = tasks(&parts, len, dim, PIECE_FLOATS, chunk);
    let (tx, rx) = sync_channel(1);
    let n = tasks.len();
    let job = Arc::new(Job {
        parts,
        len,
        dim,
        up,
        tasks,
        next: AtomicUsize::new(0),
        left: AtomicUsize::new(n),
        found: Mutex::new(Vec::new()),
        done: Mutex::new(Some(tx)),
    });
    if n == 0 {
        job.up.finished(len);
        if let Some(tx) = job.done.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(Vec::new());
        }
        return rx;
    }
    let g = gatherers();
    if g.threads.load(Ordering::Relaxed) == 0 {
        // No thread could be started: the caller's does the work.
        for i in 0..n {
            job.next.fetch_add(1, Ordering::Relaxed);
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(i))).is_ok();
            job.done_one(ok);
        }
        return rx;
    }
    let mut q = g.queue.lock().unwrap_or_else(|e| e.into_inner());
    q.jobs.push_back(job);
    drop(q);
    g.more.notify_all();
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Several batches at once, of one part to hundreds, parts longer than a
    /// piece, chunks shorter: each reaches its device whole, each float
    /// once, no piece across a chunk, `finished` once; every row's maxima
    /// noted once.
    #[test]
    fn batches_reach_their_devices_whole_in_pieces_inside_chunks() {
        let d = 3;
        let mut rng = crate::bench::random::Rng::new(9);
        let shapes = [
            (1, 5, 7),
            (50, 400_000, 100_000),
            (400, 3_000, 12_345),
            (0, 1, 10),
        ];
        let mut runs = Vec::new();
        for (n_parts, most_rows, chunk) in shapes {
            let parts: Vec<Vec<f32>> = (0..n_parts)
                .map(|_| {
                    let rows = 1 + (rng.uniform() * most_rows as f64) as usize;
                    (0..rows * d).map(|_| rng.normal() as f32).collect()
                })
                .collect();
            // 2 rows pushed before the first part.
            let pushed = vec![7.0f32; 2 * d];
            let want: Vec<f32> = pushed
                .iter()
                .chain(parts.iter().flatten())
                .copied()
                .collect();
            let mut lent = vec![f32::NAN; want.len() + d];
            lent[..pushed.len()].copy_from_slice(&pushed);
            let dev = Arc::new(Dev {
                mem: Mutex::new(vec![f32::NAN; lent.len()]),
                lent,
                chunk,
                log: Mutex::new((Vec::new(), Vec::new())),
            });
            let mut at = 2 * d;
            let kept: Vec<KeptPart> = parts
                .into_iter()
                .map(|p| {
                    at += p.len();
                    (at - p.len(), Box::new(p) as Box<dyn FrameSource + Send>)
                })
                .collect();
            let rx = submit(kept, want.len(), d, dev.clone());
            runs.push((rx, dev, want, chunk));
        }
        for (rx, dev, want, chunk) in runs {
            let found = rx.recv().expect("sent back");
            let len = want.len();
            assert_eq!(&dev.mem.lock().unwrap()[..len], &want[..]);
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
            let mut rows: Vec<(usize, usize)> = Vec::new();
            for (at, n, max) in &found {
                let block = &want[*at..at + n];
                assert_eq!(max, &crate::engine::row_max::block_abs_max(block, d));
                rows.push((*at, at + n));
            }
            rows.sort();
            let covered: usize = rows.iter().map(|r| r.1 - r.0).sum();
            assert_eq!(covered, len - 2 * d);
            assert!(rows.windows(2).all(|w| w[0].1 == w[1].0));
        }
    }

    /// A part whose copy panics: the batch's channel closes (no hang), and
    /// the gatherers go on with the next batch.
    #[test]
    fn a_panicking_copy_closes_its_batch_and_the_gatherers_go_on() {
        struct Bad;
        impl FrameSource for Bad {
            fn floats(&self) -> usize {
                4
            }
            fn copy_to(&self, _dst: &mut [f32]) {
                panic!("a part that cannot be read");
            }
        }
        let dev = |n| {
            Arc::new(Dev {
                mem: Mutex::new(vec![f32::NAN; n]),
                lent: vec![0.0; n],
                chunk: 100,
                log: Mutex::new((Vec::new(), Vec::new())),
            })
        };
        let rx = submit(vec![(0, Box::new(Bad))], 4, 1, dev(4));
        assert!(rx.recv().is_err(), "closed");
        let good: Vec<KeptPart> = vec![(0, Box::new(vec![1.0f32, -2.0]))];
        let d2 = dev(2);
        let rx = submit(good, 2, 1, d2.clone());
        assert!(rx.recv().is_ok(), "sent");
        assert_eq!(*d2.mem.lock().unwrap(), vec![1.0, -2.0]);
    }
}
