//! One engine over several devices (`--gpus`): a [`MultiEngine`] holds one
//! engine per device (or per logical partition of one device,
//! `AMTOOL_PARTITIONS`), and its models one [`LoadedModel`] per device.
//!
//! Results do not depend on the number of devices, to the bit:
//! - Scoring (state and component log-likelihoods) cuts a call's frames
//!   into one contiguous range per device, computed at once, a thread each;
//!   every row is computed as the whole call computes it
//!   ([`LoadedModel::state_loglikes_rows`]) and lands in its place.
//! - Statistics go batch by batch: each batch to the device given the
//!   fewest frames so far, its statistics summed from zero on that device
//!   apart from every other batch's ([`LoadedModel::accumulate_apart`]),
//!   and added into the caller's f64 accumulators on the host in batch
//!   order. One device and N add the same numbers in the same order. A call
//!   of more than [`PIECE_FRAMES`] frames is cut into pieces of that many
//!   first (a constant, never derived from the device count), so that one
//!   big call also spreads over the devices. Each device has up to [`DEPTH`] batches
//!   in flight: the host prepares the next while they compute.
//!
//! The devices must be alike (one engine kind, one device model): the CUDA
//! engine's work split, and so its rounding, depends on the device's
//! multiprocessor count. A batch held is sent, on a thread of its device's,
//! as soon as its frames are in place and its device has room; its frames
//! are copied into the device's page-locked memory
//! ([`HostFrames::keep_parts`]) by a thread started when the batch is held,
//! one batch's copy at a time in batch order, while the next batches fill.
//! The devices compute concurrently.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::mpsc::{sync_channel, Receiver, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};

use super::adder::{AddLater, Adder};
use super::senders::{DeviceThreads, Senders};
use super::{Engine, FrameBatch, FrameTargets, HostFrames, LoadedModel, Selection, StateSubsets};
use crate::model::AcousticModel;
use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// Frames of the pieces a big statistics call is cut into.
pub const PIECE_FRAMES: usize = 1 << 18;

/// Batches in flight per device: one computing, two queued behind it (with
/// one queued, a device idled whenever the host was late by more than the
/// copy of a batch).
pub const DEPTH: usize = 3;

/// Batches held a device (their frames being copied in) before the host
/// waits for the oldest.
pub const HELD: usize = 2;

/// Fewest frames a device gets of a scoring call (fewer go to one device:
/// a thread and a launch cost more than they save).
pub const MIN_PART_ROWS: usize = 1024;

/// The most values of the zeros shaped like a model's accumulators that an
/// engine keeps between jobs (32 MB; a 2048-Gaussian UBM's are 166k).
const KEPT_SHAPE_VALUES: usize = 1 << 22;

/// `--gpus`: how many GPUs one process uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gpus {
    Count(usize),
    /// Every visible GPU (`CUDA_VISIBLE_DEVICES` decides which are).
    All,
}

impl Default for Gpus {
    fn default() -> Self {
        Gpus::Count(1)
    }
}

impl std::str::FromStr for Gpus {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "all" => Ok(Gpus::All),
            _ => match s.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(Gpus::Count(n)),
                _ => Err(format!(
                    "--gpus={s}: expected a number of GPUs (1 or more) or all"
                )),
            },
        }
    }
}

impl std::fmt::Display for Gpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gpus::Count(n) => write!(f, "{n}"),
            Gpus::All => f.write_str("all"),
        }
    }
}

/// `AMTOOL_PARTITIONS`: logical partitions per device, `None` when unset
/// (for the CPU: no multi-engine at all; set to 1, a multi-engine of one).
pub fn partitions_from_env() -> Result<Option<usize>> {
    match std::env::var("AMTOOL_PARTITIONS") {
        Err(_) => Ok(None),
        Ok(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => Err(Error::Usage(format!(
                "AMTOOL_PARTITIONS={v}: expected a number of partitions (1 or more)"
            ))),
        },
    }
}

/// Engines of several alike devices as one.
pub struct MultiEngine {
    parts: Vec<Box<dyn Engine>>,
    min_part_rows: usize,
    /// A thread a device, for its models' jobs.
    threads: DeviceThreads,
    /// The accumulators' shape the last model made (when small), for the
    /// next models of the same shape ([`MultiModel::shape_like`]).
    shape: Mutex<Option<Arc<ModelAccumulators>>>,
}

impl Drop for MultiEngine {
    fn drop(&mut self) {
        // A model leaked with sends queued: they use the devices' engines
        // (see `senders`), so they all run before the engines go.
        self.threads.join();
    }
}

impl MultiEngine {
    /// One engine over `parts` (one per device, in device order).
    pub fn new(parts: Vec<Box<dyn Engine>>) -> Result<Self> {
        let Some(first) = parts.first() else {
            return Err(Error::Engine("no device to compute on".into()));
        };
        if let Some(other) = parts.iter().find(|p| p.name() != first.name()) {
            return Err(Error::Engine(format!(
                "devices of one process must be of one kind, not {} and {}",
                first.name(),
                other.name()
            )));
        }
        Ok(MultiEngine {
            threads: DeviceThreads::start(parts.len())?,
            parts,
            min_part_rows: MIN_PART_ROWS,
            shape: Mutex::new(None),
        })
    }

    /// The fewest frames a device gets of a scoring call (default
    /// [`MIN_PART_ROWS`]; tests split small calls with 1).
    pub fn with_min_part_rows(mut self, rows: usize) -> Self {
        self.min_part_rows = rows.max(1);
        self
    }
}

impl Engine for MultiEngine {
    fn name(&self) -> &'static str {
        self.parts[0].name()
    }

    fn device(&self) -> String {
        let names: Vec<String> = self.parts.iter().map(|p| p.device()).collect();
        if names.iter().all(|n| *n == names[0]) {
            match names.len() {
                1 => names[0].clone(),
                n => format!("{n} × {}", names[0]),
            }
        } else {
            names.join(" + ")
        }
    }

    fn cpu_threads(&self) -> Option<usize> {
        self.parts[0].cpu_threads()
    }

    fn devices(&self) -> usize {
        self.parts.len()
    }

    fn load<'e>(&'e self, model: &AcousticModel) -> Result<Box<dyn LoadedModel + 'e>> {
        // On the devices' threads, at once: each thread's first driver
        // calls are then made before the job's (on threads started for the
        // load, 0.6–0.7 ms against 0.2 one after another, twenty-second
        // session; on the engine's threads 0.16–0.2 ms, twenty-third).
        crate::engine::batch_trace::mark("load");
        let jobs = self.parts.iter().enumerate();
        let jobs = jobs.map(|(p, e)| (p, move || e.load(model)));
        let parts = self.threads.run_each(jobs);
        let parts = parts.into_iter().collect::<Result<Vec<_>>>()?;
        crate::engine::batch_trace::mark("loaded-all");
        let senders = Senders::new(&self.threads);
        Ok(Box::new(MultiModel::new(
            parts,
            self.min_part_rows,
            senders,
            &self.shape,
        )))
    }
}

/// A batch sent to a device and not yet added into the accumulators.
struct Flight {
    part: usize,
    /// The batch's statistics, or `None` when its device keeps them;
    /// `Pending` while its device's thread sends it.
    stats: Sending,
}

/// A batch's send: on its device's thread, or done.
enum Sending {
    Pending,
    Done(Option<ModelAccumulators>),
}

/// A batch waiting for the rest of its round: its device, its frames and
/// its targets.
struct Held {
    part: usize,
    frames: Gathering,
    /// Its number of frames.
    rows: usize,
    dim: usize,
    targets: OwnedTargets,
}

/// The frames of a held batch: ready, or their kept parts
/// ([`HostFrames::keep_parts`]) being copied into place by a thread of
/// their own, started when the batch was held, so that the copy overlaps
/// the filling of the next batches and the wait for the devices. The
/// thread hands the frames back before it lets go of the parts copied
/// (see [`HostFrames::gather_apart`]).
enum Gathering {
    Ready(HostFrames),
    Copying(Receiver<HostFrames>),
    /// Kept parts handed to the gatherers, which send them to the batch's
    /// device piece by piece ([`HostFrames::send_kept`]); their maxima come
    /// back on the channel.
    Sending(HostFrames, Receiver<crate::engine::upload::Gathered>),
}

/// The turns of the batches' copies: one batch's at a time, in batch
/// order, each with every thread of the pool (started at once, the copies
/// of a job's first batches shared the host's memory bandwidth, and the
/// oldest, which a device waited for, finished with the newest).
#[derive(Default)]
struct GatherTurns {
    next: u64,
    turn: Arc<Turn>,
}

/// The ticket whose turn it is, and the signal that it changed.
type Turn = (Mutex<u64>, Condvar);

impl GatherTurns {
    /// A ticket for the next batch, and the turns it waits on.
    fn ticket(&mut self) -> (u64, Arc<Turn>) {
        self.next += 1;
        (self.next - 1, self.turn.clone())
    }
}

/// Runs `f` in the turn of `ticket`, then gives the turn to the next (also
/// when `f` panics).
fn in_turn<T>(ticket: u64, turn: &Turn, f: impl FnOnce() -> T) -> T {
    struct Pass<'a>(u64, &'a Turn);
    impl Drop for Pass<'_> {
        fn drop(&mut self) {
            let (lock, cv) = self.1;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = self.0 + 1;
            cv.notify_all();
        }
    }
    let (lock, cv) = turn;
    let mut now = lock.lock().unwrap_or_else(|e| e.into_inner());
    while *now < ticket {
        now = cv.wait(now).unwrap_or_else(|e| e.into_inner());
    }
    drop(now);
    let _pass = Pass(ticket, turn);
    f()
}

impl Gathering {
    /// `frames` (`rows` of them) copied into place in their turn.
    fn start(mut frames: HostFrames, rows: usize, turns: &mut GatherTurns) -> Result<Self> {
        if !frames.has_kept_parts() {
            return Ok(Gathering::Ready(frames));
        }
        if let Some(rx) = frames.send_kept() {
            return Ok(Gathering::Sending(frames, rx));
        }
        let (ticket, turn) = turns.ticket();
        let turn2 = turn.clone();
        let (tx, rx) = sync_channel(1);
        std::thread::Builder::new()
            .name("amtool-gather".into())
            .spawn(move || {
                let copied = in_turn(ticket, &turn, || {
                    crate::engine::batch_trace::mark_with(|| format!("gather{rows}"));
                    let copied = frames.gather_apart(false);
                    crate::engine::batch_trace::mark_with(|| format!("gathered{rows}"));
                    copied
                });
                // A closed channel: the batch was dropped (an error).
                let _ = tx.send(frames);
                drop(copied);
            })
            .map(|_| Gathering::Copying(rx))
            .map_err(|e| {
                // The batches after it must not wait for its turn.
                in_turn(ticket, &turn2, || ());
                Error::Engine(format!("cannot start a thread to copy frames: {e}"))
            })
    }

    /// Whether the frames are in place (finish will not wait).
    fn is_done(&mut self) -> bool {
        if let Gathering::Sending(_, rx) = self {
            return match rx.try_recv() {
                Ok(found) => {
                    let placeholder = Gathering::Ready(HostFrames::default());
                    if let Gathering::Sending(mut f, _) = std::mem::replace(self, placeholder) {
                        f.note_sent(found);
                        *self = Gathering::Ready(f);
                    }
                    true
                }
                Err(TryRecvError::Empty) => false,
                // A copy panicked: `finish` says so.
                Err(TryRecvError::Disconnected) => true,
            };
        }
        let Gathering::Copying(rx) = self else {
            return true;
        };
        match rx.try_recv() {
            Ok(frames) => {
                *self = Gathering::Ready(frames);
                true
            }
            Err(TryRecvError::Empty) => false,
            // Its thread panicked: `finish` says so.
            Err(TryRecvError::Disconnected) => true,
        }
    }

    fn finish(self) -> Result<HostFrames> {
        match self {
            Gathering::Ready(f) => Ok(f),
            Gathering::Sending(mut f, rx) => {
                let found = rx.recv().map_err(|_| {
                    Error::Engine("a thread copying a batch's frames panicked".into())
                })?;
                f.note_sent(found);
                Ok(f)
            }
            Gathering::Copying(rx) => rx
                .recv()
                .map_err(|_| Error::Engine("the thread copying a batch's frames panicked".into())),
        }
    }
}

/// [`FrameTargets`] with their own copy of the data.
enum OwnedTargets {
    Global,
    Aligned(Vec<u32>),
    Weighted {
        offsets: Vec<usize>,
        pairs: Vec<(u32, f32)>,
    },
    Selected {
        offsets: Vec<usize>,
        components: Vec<u32>,
        weights: Option<Vec<f32>>,
    },
}

impl OwnedTargets {
    fn of(t: &FrameTargets<'_>) -> Self {
        match *t {
            FrameTargets::Global => OwnedTargets::Global,
            FrameTargets::Aligned(s) => OwnedTargets::Aligned(s.to_vec()),
            FrameTargets::Weighted { offsets, pairs } => OwnedTargets::Weighted {
                offsets: offsets.to_vec(),
                pairs: pairs.to_vec(),
            },
            FrameTargets::Selected(sel) => OwnedTargets::Selected {
                offsets: sel.offsets.to_vec(),
                components: sel.components.to_vec(),
                weights: sel.weights.map(<[f32]>::to_vec),
            },
        }
    }

    fn as_targets(&self) -> FrameTargets<'_> {
        match self {
            OwnedTargets::Global => FrameTargets::Global,
            OwnedTargets::Aligned(s) => FrameTargets::Aligned(s),
            OwnedTargets::Weighted { offsets, pairs } => FrameTargets::Weighted { offsets, pairs },
            OwnedTargets::Selected {
                offsets,
                components,
                weights,
            } => FrameTargets::Selected(Selection {
                offsets,
                components,
                weights: weights.as_deref(),
            }),
        }
    }
}

/// The devices' models, held through pointers so that a device's thread
/// may reach its model while the host holds no reference to it
/// ([`super::senders`]).
struct Parts<'e>(Vec<*mut (dyn LoadedModel + 'e)>);

// SAFETY: the models are `Send`; each is reached by one thread at a time.
unsafe impl Send for Parts<'_> {}

impl<'e> Parts<'e> {
    fn new(parts: Vec<Box<dyn LoadedModel + 'e>>) -> Self {
        Parts(parts.into_iter().map(Box::into_raw).collect())
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn ptr(&self, p: usize) -> *mut (dyn LoadedModel + 'e) {
        self.0[p]
    }

    /// Every model, boxed again; none is left. The caller makes sure no
    /// job uses them any more.
    fn take(&mut self) -> Vec<Box<dyn LoadedModel + 'e>> {
        // SAFETY: made by `Box::into_raw`, taken once (drained).
        self.0
            .drain(..)
            .map(|p| unsafe { Box::from_raw(p) })
            .collect()
    }
}

impl Drop for Parts<'_> {
    fn drop(&mut self) {
        // Those the owner's drop did not take (it waits for every job
        // queued for them first).
        drop(self.take());
    }
}

/// A model on every device of a [`MultiEngine`].
pub struct MultiModel<'e> {
    parts: Parts<'e>,
    min_part_rows: usize,
    /// The device of the next batch: the one given the fewest frames.
    next: usize,
    /// Frames given to each device since the model was loaded.
    given: Vec<usize>,
    /// Batches held, oldest first, their frames being copied in: each is
    /// sent once its copy is done and its device has room, checked at every
    /// hold, so the host never waits on a copy while it could read on.
    held: VecDeque<Held>,
    /// The order of the held batches' copies.
    turns: GatherTurns,
    /// Batches in flight, oldest first.
    flight: VecDeque<Flight>,
    /// Σ weight × log-likelihood of the batches added since the last settle.
    like: f64,
    /// The received batches' statistics added up, in order, off the thread
    /// that sends them; into the caller's accumulators at the settle.
    adder: Adder,
    /// Whether the devices were made ready for statistics
    /// ([`LoadedModel::prepare_statistics`]).
    prepared: bool,
    /// What the last call's kernel time is taken from.
    last_call: LastCall,
    /// The devices' threads that send the batches held.
    senders: Senders<'e>,
    /// The accumulators' shape, for the sends on the devices' threads.
    shape: Option<Arc<ModelAccumulators>>,
    /// The engine's, from the models before.
    kept_shape: &'e Mutex<Option<Arc<ModelAccumulators>>>,
    /// Devices seen ready for statistics ([`LoadedModel::statistics_ready`]).
    ready: Vec<bool>,
    /// States of the model.
    states: usize,
}

/// The last call of a [`MultiModel`], for its kernel time.
#[derive(Debug, Clone, Copy)]
enum LastCall {
    /// Scoring on the first this many devices: the longest of their own
    /// last calls' times, asked for only when wanted (a CUDA device waits
    /// for its timing events then).
    Scored(usize),
    /// Statistics: the longest of the devices' kernel times (each
    /// device's summed over its batches), where every device times them.
    Settled(Option<f64>),
}

/// An error unless statistics `other` can be added into `acc`.
fn check_shape(acc: &ModelAccumulators, other: &ModelAccumulators) -> Result<()> {
    match acc.same_shape(other) {
        true => Ok(()),
        false => Err(Error::Mismatch(
            "accumulators are shaped for another model".into(),
        )),
    }
}

/// The longest of the devices' kernel times; `None` if any is.
fn longest(times: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    times.fold(Some(0f64), |l, k| Some(l?.max(k?)))
}

/// `rows` cut into at most `parts` contiguous ranges of about equal size,
/// none shorter than `min` (one range when the rows are few).
pub fn part_ranges(rows: Range<usize>, parts: usize, min: usize) -> Vec<Range<usize>> {
    let n = parts.min(rows.len() / min.max(1)).max(1);
    let step = rows.len().div_ceil(n).max(1);
    let mut out = Vec::with_capacity(n);
    let mut r0 = rows.start;
    while out.len() < n {
        let r1 = (r0 + step).min(rows.end);
        out.push(r0..r1);
        r0 = r1;
    }
    out
}

/// Runs `f` for each (device, its rows, its output) at once, on the
/// devices' threads; the first error in device order is returned.
fn each_part<'e, F>(
    threads: &DeviceThreads,
    parts: Vec<&mut (dyn LoadedModel + 'e)>,
    ranges: Vec<Range<usize>>,
    out: &mut [f32],
    row_len: usize,
    f: F,
) -> Result<()>
where
    F: Fn(&mut dyn LoadedModel, Range<usize>, &mut [f32]) -> Result<()> + Sync,
{
    let mut outs = Vec::with_capacity(ranges.len());
    let mut rest = out;
    for r in &ranges {
        let (head, tail) = rest.split_at_mut(r.len() * row_len);
        outs.push(head);
        rest = tail;
    }
    let f = &f;
    let jobs = parts
        .into_iter()
        .zip(ranges)
        .zip(outs)
        .enumerate()
        .map(|(d, ((p, r), o))| (d, move || f(p, r, o)));
    threads.run_each(jobs).into_iter().collect()
}

/// The targets of frames `rows` of a batch; a weighted batch's offsets are
/// rebased into `offsets`. Targets that do not fit the batch are an error.
fn piece_targets<'a: 'b, 'b>(
    targets: &FrameTargets<'a>,
    rows: Range<usize>,
    offsets: &'b mut Vec<usize>,
) -> Result<FrameTargets<'b>> {
    let bad = || Error::Mismatch("frame targets do not match the frames of the batch".into());
    Ok(match *targets {
        FrameTargets::Global => FrameTargets::Global,
        FrameTargets::Aligned(s) => FrameTargets::Aligned(s.get(rows).ok_or_else(bad)?),
        FrameTargets::Weighted {
            offsets: o,
            pairs: p,
        } => {
            let o = o.get(rows.start..rows.end + 1).ok_or_else(bad)?;
            let (first, last) = (o[0], o[o.len() - 1]);
            let pairs = p.get(first..last).ok_or_else(bad)?;
            offsets.clear();
            offsets.extend(o.iter().map(|&x| x.wrapping_sub(first)));
            FrameTargets::Weighted { offsets, pairs }
        }
        FrameTargets::Selected(sel) => {
            let o = sel.offsets.get(rows.start..rows.end + 1).ok_or_else(bad)?;
            let (first, last) = (o[0], o[o.len() - 1]);
            let components = sel.components.get(first..last).ok_or_else(bad)?;
            let weights = match sel.weights {
                Some(w) => Some(w.get(rows).ok_or_else(bad)?),
                None => None,
            };
            offsets.clear();
            offsets.extend(o.iter().map(|&x| x.wrapping_sub(first)));
            FrameTargets::Selected(Selection {
                offsets,
                components,
                weights,
            })
        }
    })
}

impl<'e> MultiModel<'e> {
    /// A model over `parts` (one a device, in device order).
    fn new(
        parts: Vec<Box<dyn LoadedModel + 'e>>,
        min_part_rows: usize,
        senders: Senders<'e>,
        kept_shape: &'e Mutex<Option<Arc<ModelAccumulators>>>,
    ) -> Self {
        MultiModel {
            given: vec![0; parts.len()],
            ready: vec![false; parts.len()],
            states: parts.first().map_or(0, |p| p.num_states()),
            senders,
            shape: None,
            kept_shape,
            parts: Parts::new(parts),
            min_part_rows,
            next: 0,
            held: VecDeque::new(),
            turns: GatherTurns::default(),
            flight: VecDeque::new(),
            like: 0.0,
            adder: Adder::default(),
            prepared: false,
            last_call: LastCall::Settled(None),
        }
    }

    /// At a job's first batch, while its frames are copied: every device
    /// made ready for statistics of `targets`' kind at once, a thread each
    /// (its first send would do it, the devices one after another as their
    /// first batches came).
    fn prepare_once(&mut self, targets: &FrameTargets<'_>) -> Result<()> {
        if std::mem::replace(&mut self.prepared, true) {
            return Ok(());
        }
        let threads = self.senders.threads();
        let jobs = self
            .parts_mut()?
            .into_iter()
            .enumerate()
            .map(|(p, m)| (p, move || m.prepare_statistics(targets)));
        threads.run_each(jobs).into_iter().collect()
    }

    /// Notes a scoring call on the first `used` devices and passes its
    /// result `r` on.
    fn scored_on(&mut self, used: usize, r: Result<()>) -> Result<()> {
        self.last_call = LastCall::Scored(used);
        r
    }

    /// Holds a batch for its device (`batch.part`, the next one) and sends
    /// what is ready; waits for the oldest batch held when more than
    /// [`HELD`] a device wait.
    fn hold(&mut self, batch: Held, acc: &mut ModelAccumulators) -> Result<()> {
        crate::engine::batch_trace::mark_with(|| format!("hold-dev{}", batch.part));
        self.give(batch.part, batch.rows);
        self.held.push_back(batch);
        self.send_ready(acc, false)?;
        while self.held.len() > HELD * self.parts.len() {
            self.send_ready(acc, true)?;
        }
        Ok(())
    }

    /// Counts `rows` frames given to device `part`; the next batch goes to
    /// the device given the fewest (the first of those), so that the
    /// devices finish together whatever the sizes of the batches.
    fn give(&mut self, part: usize, rows: usize) {
        self.given[part] += rows;
        self.next = (0..self.given.len())
            .min_by_key(|&p| self.given[p])
            .unwrap_or(0);
    }

    /// Sends every batch held, in order.
    fn send_held(&mut self, acc: &mut ModelAccumulators) -> Result<()> {
        while !self.held.is_empty() {
            self.send_ready(acc, true)?;
        }
        Ok(())
    }

    /// Sends the oldest batches held whose frames are in place and whose
    /// devices have room for one more of [`DEPTH`] in flight, a thread a
    /// device. With `wait`, the oldest one is sent in any case: first the
    /// oldest batches in flight are received ([`Self::receive`]) until its
    /// device has room, and its copy is waited for.
    fn send_ready(&mut self, acc: &mut ModelAccumulators, wait: bool) -> Result<()> {
        if wait {
            if let Some(part) = self.held.front().map(|h| h.part) {
                crate::engine::batch_trace::mark_with(|| format!("must-dev{part}"));
                while self.in_flight(part) >= DEPTH {
                    self.receive(acc)?;
                }
            }
        }
        let mut room: Vec<usize> = (0..self.parts.len())
            .map(|p| DEPTH.saturating_sub(self.in_flight(p)))
            .collect();
        // A device still being made ready (`statistics_ready`) gets nothing
        // unless the host must send: the host holds and copies the next
        // batches meanwhile. Once a device has a send queued, its thread
        // waits for it to be ready, and it is asked no more.
        for p in 0..self.parts.len() {
            if !self.ready[p] && self.senders.pending(p) == 0 {
                self.ready[p] = self.part(p)?.statistics_ready();
            }
        }
        let device_ready = self.ready.clone();
        let mut ready = 0;
        for (i, h) in self.held.iter_mut().enumerate() {
            let must = wait && i == 0;
            if room[h.part] == 0 || !(must || device_ready[h.part] && h.frames.is_done()) {
                break;
            }
            room[h.part] -= 1;
            ready += 1;
        }
        let batches: Vec<Held> = self.held.drain(..ready).collect();
        self.send_batches(batches, acc)
    }

    /// Batches in flight on device `part`.
    fn in_flight(&self, part: usize) -> usize {
        self.flight.iter().filter(|f| f.part == part).count()
    }

    /// Queues `batches` (in order) on their devices' threads, each
    /// device's in order; they go into `flight` in order, and their
    /// results are taken when the host next needs their devices
    /// ([`Self::fence`]).
    fn send_batches(&mut self, batches: Vec<Held>, acc: &ModelAccumulators) -> Result<()> {
        if batches.is_empty() {
            return Ok(());
        }
        let shape = self.shape_like(acc);
        self.last_call = LastCall::Settled(None);
        for h in batches {
            let p = h.part;
            let shape = shape.clone();
            let send = move |m: &mut dyn LoadedModel| {
                let mut frames = h.frames.finish()?;
                m.accumulate_frames_apart(&mut frames, h.dim, h.targets.as_targets(), &shape)
            };
            // SAFETY: the host reaches device p's model only through
            // `part` / `parts_mut`, which take its results first, and the
            // drop waits for every job queued before the models go.
            crate::engine::batch_trace::mark_with(|| format!("queue-dev{p}"));
            unsafe { self.senders.queue(p, self.parts.ptr(p), send) }?;
            self.ready[p] = true;
            self.flight.push_back(Flight {
                part: p,
                stats: Sending::Pending,
            });
        }
        Ok(())
    }

    /// Zeros shaped like `acc`, for the sends' checks: made once for the
    /// engine's models of one shape (made for each job, they took 0.13–0.17
    /// ms of the host's thread just before the job's first send, the page
    /// faults of 1.3 MB of zeros for M = 2048, D = 40). The engine keeps
    /// them between jobs only up to [`KEPT_SHAPE_VALUES`] (a large model's
    /// are hundreds of MB, and small beside its job), and lets go of those
    /// of another shape before it makes new ones.
    fn shape_like(&mut self, acc: &ModelAccumulators) -> Arc<ModelAccumulators> {
        let alike = |s: &&Arc<ModelAccumulators>| s.same_shape(acc) && s.flags == acc.flags;
        if let Some(s) = self.shape.as_ref().filter(alike) {
            return s.clone();
        }
        self.shape = None;
        let mut kept = self.kept_shape.lock().unwrap_or_else(|e| e.into_inner());
        let s = match kept.take().filter(|s| alike(&s)) {
            Some(s) => s,
            None => Arc::new(acc.zeros_like()),
        };
        let values: usize = s
            .states
            .iter()
            .map(|g| g.occupancy.len() + g.mean_acc.len() + g.var_acc.len())
            .sum();
        if values <= KEPT_SHAPE_VALUES {
            *kept = Some(s.clone());
        }
        self.shape = Some(s.clone());
        s
    }

    /// Takes the results of device `p`'s sends into their batches in
    /// flight: its model is the host's again. A batch whose send failed
    /// leaves the flight (nothing of it is kept to collect); the first
    /// send's error is returned.
    fn fence(&mut self, p: usize) -> Result<()> {
        let mut first = Ok(());
        while let Some(r) = self.senders.next_result(p) {
            let slot = self
                .flight
                .iter()
                .position(|f| f.part == p && matches!(f.stats, Sending::Pending));
            match (r, slot) {
                (Ok(stats), Some(i)) => self.flight[i].stats = Sending::Done(stats),
                (Err(e), slot) => {
                    if let Some(i) = slot {
                        self.flight.remove(i);
                    }
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
                (Ok(_), None) => {}
            }
        }
        first
    }

    /// [`Self::fence`] of every device.
    fn fence_all(&mut self) -> Result<()> {
        (0..self.parts.len()).try_for_each(|p| self.fence(p))
    }

    /// Device `p`'s model, its sends' results taken first.
    fn part(&mut self, p: usize) -> Result<&mut (dyn LoadedModel + 'e)> {
        self.fence(p)?;
        // SAFETY: no send of device p is queued (the fence), and `&mut
        // self` keeps the host's other uses away.
        Ok(unsafe { &mut *self.parts.ptr(p) })
    }

    /// Every device's model, their sends' results taken first.
    fn parts_mut(&mut self) -> Result<Vec<&mut (dyn LoadedModel + 'e)>> {
        self.fence_all()?;
        // SAFETY: as in `part`; the models are distinct.
        Ok((0..self.parts.len())
            .map(|p| unsafe { &mut *self.parts.ptr(p) })
            .collect())
    }

    /// Takes the oldest batch in flight (waiting for its device) and hands
    /// its statistics to the adder, which adds them up in batch order
    /// ([`Self::fold`] puts them into `acc`); `acc` gives their shape.
    fn receive(&mut self, acc: &mut ModelAccumulators) -> Result<()> {
        let _t = crate::timeline::Tally::start("receive");
        if let Some(p) = self.flight.front().map(|f| f.part) {
            self.fence(p)?;
            crate::engine::batch_trace::mark_with(|| format!("recv-dev{p}"));
        }
        let Some(f) = self.flight.pop_front() else {
            return Ok(());
        };
        let stats = match f.stats {
            Sending::Done(s) => s,
            Sending::Pending => return Err(Error::Engine("a batch sent has no result".into())),
        };
        let (like, add) = match stats {
            Some(s) => {
                check_shape(acc, &s)?;
                let like = s.total_like;
                let add: AddLater = Box::new(move |sum: &mut ModelAccumulators| {
                    sum.add(&s);
                    Ok(())
                });
                (like, add)
            }
            None => self.part(f.part)?.take_apart(acc)?,
        };
        self.like += like;
        crate::engine::batch_trace::mark("took");
        self.adder.add(acc, add)
    }

    /// Adds the sum of the batches received since the last fold into
    /// `acc`, once the adder has added them all.
    fn fold(&mut self, acc: &mut ModelAccumulators) -> Result<()> {
        if let Some(sum) = self.adder.take()? {
            crate::engine::batch_trace::mark("summed");
            check_shape(acc, &sum)?;
            acc.add_on(&sum, super::adder::pool());
        }
        Ok(())
    }

    /// Sends `feats` in pieces of at most [`PIECE_FRAMES`] frames, a round
    /// of one piece a device at a time, the round's pieces sent at once, a
    /// thread each: sending a piece from ordinary memory is the host's copy
    /// of it into page-locked memory, which one thread did for every device
    /// in turn (two GPUs then waited on it). The pieces go to the devices
    /// and into the accumulators in the order one thread would send them.
    fn send_pieces(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<()> {
        // Batches held go first: they came first.
        self.send_held(acc)?;
        let n = self.parts.len();
        let pieces: Vec<Range<usize>> = (0..feats.frames)
            .step_by(PIECE_FRAMES)
            .map(|r0| r0..(r0 + PIECE_FRAMES).min(feats.frames))
            .collect();
        for round in pieces.chunks(n) {
            // Room for one more batch on every device.
            while self.flight.len() > (DEPTH - 1) * n {
                self.receive(acc)?;
            }
            let mut offsets = vec![Vec::new(); round.len()];
            let mut sends = Vec::with_capacity(round.len());
            for (rows, off) in round.iter().zip(offsets.iter_mut()) {
                let t = piece_targets(&targets, rows.clone(), off)?;
                sends.push((feats.rows(rows.clone())?, t));
            }
            let rows: Vec<usize> = round.iter().map(|r| r.len()).collect();
            let stats = self.send_round(sends, acc)?;
            let first = self.next;
            for (i, (stats, rows)) in stats.into_iter().zip(rows).enumerate() {
                let part = (first + i) % n;
                self.flight.push_back(Flight {
                    part,
                    stats: Sending::Done(stats),
                });
                self.give(part, rows);
            }
        }
        Ok(())
    }

    /// `accumulate_apart` of each piece of `round` on devices `next`,
    /// `next + 1`, …, at once (one directly); their results in round order.
    fn send_round(
        &mut self,
        round: Vec<(FrameBatch<'_>, FrameTargets<'_>)>,
        shape: &ModelAccumulators,
    ) -> Result<Vec<Option<ModelAccumulators>>> {
        if let [(piece, t)] = round[..] {
            let next = self.next;
            return Ok(vec![self.part(next)?.accumulate_apart(piece, t, shape)?]);
        }
        // Device next + i takes piece i.
        let (next, threads) = (self.next, self.senders.threads());
        let mut devices: Vec<_> = self.parts_mut()?.into_iter().enumerate().collect();
        devices.rotate_left(next);
        let jobs = devices
            .into_iter()
            .zip(round)
            .map(|((p, m), (piece, t))| (p, move || m.accumulate_apart(piece, t, shape)));
        threads.run_each(jobs).into_iter().collect()
    }
}

impl Drop for MultiModel<'_> {
    fn drop(&mut self) {
        // Every send done before the models go.
        crate::engine::batch_trace::mark("drop");
        self.senders.finish();
        crate::engine::batch_trace::mark("finished");
        // The models go on their devices' threads, not waited for (their
        // device memory given back, their streams and events destroyed:
        // 0.13–0.15 ms of each job's end on 2 × H200 when waited for,
        // twenty-third session); a device's next job runs after.
        let threads = self.senders.threads();
        for (p, m) in self.parts.take().into_iter().enumerate() {
            // SAFETY: the models borrow the engine, whose drop joins its
            // threads before its devices' engines go.
            let _ = unsafe { threads.hand_over(p, move || drop(m)) };
        }
        crate::engine::batch_trace::mark("dropped");
    }
}

impl LoadedModel for MultiModel<'_> {
    fn num_states(&self) -> usize {
        self.states
    }

    fn state_loglikes(&mut self, feats: FrameBatch<'_>, out: &mut [f32]) -> Result<()> {
        self.state_loglikes_rows(feats, 0..feats.frames, out)
    }

    fn score_in_fp32(&mut self) {
        if let Ok(parts) = self.parts_mut() {
            for p in parts {
                p.score_in_fp32();
            }
        }
    }

    /// On the first device (the subset of a batch is gathered there).
    fn state_loglikes_subset(
        &mut self,
        feats: FrameBatch<'_>,
        subsets: &StateSubsets,
        out: &mut [f32],
    ) -> Result<()> {
        self.part(0)?.state_loglikes_subset(feats, subsets, out)
    }

    fn state_loglikes_rows(
        &mut self,
        feats: FrameBatch<'_>,
        rows: Range<usize>,
        out: &mut [f32],
    ) -> Result<()> {
        let ns = self.num_states();
        let ranges = part_ranges(rows.clone(), self.parts.len(), self.min_part_rows);
        if ranges.len() == 1 || out.len() != rows.len() * ns || rows.end > feats.frames {
            // One device, or a call its engine refuses with its own message.
            let r = self
                .part(0)
                .and_then(|p| p.state_loglikes_rows(feats, rows, out));
            return self.scored_on(1, r);
        }
        let (used, threads) = (ranges.len(), self.senders.threads());
        let r = self.parts_mut().and_then(|parts| {
            each_part(threads, parts, ranges, out, ns, |p, r, o| {
                p.state_loglikes_rows(feats, r, o)
            })
        });
        self.scored_on(used, r)
    }

    fn component_loglikes(
        &mut self,
        state: usize,
        feats: FrameBatch<'_>,
        out: &mut [f32],
    ) -> Result<()> {
        let ranges = part_ranges(0..feats.frames, self.parts.len(), self.min_part_rows);
        if ranges.len() == 1 || out.len() % feats.frames.max(1) != 0 {
            let r = self
                .part(0)
                .and_then(|p| p.component_loglikes(state, feats, out));
            return self.scored_on(1, r);
        }
        let (comps, used) = (out.len() / feats.frames, ranges.len());
        let threads = self.senders.threads();
        let r = self.parts_mut().and_then(|parts| {
            each_part(threads, parts, ranges, out, comps, |p, r, o| {
                p.component_loglikes(state, feats.rows(r)?, o)
            })
        });
        self.scored_on(used, r)
    }

    fn accumulate(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<f64> {
        if !self.flight.is_empty() || !self.held.is_empty() {
            return Err(Error::Engine(
                "deferred statistics must be settled before another accumulate".into(),
            ));
        }
        self.send_pieces(feats, targets, acc)?;
        self.settle(acc)
    }

    fn accumulate_deferred(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<Option<f64>> {
        self.send_pieces(feats, targets, acc)?;
        Ok(None)
    }

    fn host_frames(&mut self, floats: usize) -> Result<HostFrames> {
        let next = self.next;
        self.part(next)?.host_frames(floats)
    }

    fn prepare_statistics(&mut self, targets: &FrameTargets<'_>) -> Result<()> {
        self.prepare_once(targets)
    }

    fn statistics_ready(&self) -> bool {
        self.ready.iter().all(|&r| r)
    }

    fn send_copied(&mut self, acc: &mut ModelAccumulators) -> Result<()> {
        let copied = self.held.front_mut().is_some_and(|h| h.frames.is_done());
        match copied {
            true => self.send_ready(acc, false),
            false => Ok(()),
        }
    }

    fn accumulate_frames(
        &mut self,
        frames: &mut HostFrames,
        dim: usize,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<Option<f64>> {
        if dim == 0 || frames.len() % dim != 0 {
            return Err(Error::Mismatch(format!(
                "statistics: {} floats are not whole frames of dimension {dim}",
                frames.len()
            )));
        }
        if frames.len() > PIECE_FRAMES * dim {
            frames.gather();
            let r = self.send_pieces(FrameBatch::new(frames.as_slice(), dim), targets, acc);
            frames.clear();
            r?;
        } else {
            let rows = frames.len() / dim;
            let batch = Held {
                part: self.next,
                rows,
                frames: Gathering::start(std::mem::take(frames), rows, &mut self.turns)?,
                dim,
                targets: OwnedTargets::of(&targets),
            };
            self.hold(batch, acc)?;
            self.prepare_once(&targets)?;
        }
        // The batch's memory went with it: the caller asks for more (from
        // the device the next batch goes to) when it has another.
        Ok(None)
    }

    fn settle(&mut self, acc: &mut ModelAccumulators) -> Result<f64> {
        self.send_held(acc)?;
        crate::engine::batch_trace::mark("sent-all");
        while !self.flight.is_empty() {
            self.receive(acc)?;
        }
        crate::engine::batch_trace::mark("received-all");
        self.fold(acc)?;
        crate::engine::batch_trace::mark("folded");
        let parts = self.parts_mut()?;
        let kernels = longest(parts.into_iter().map(|p| p.take_apart_kernel_seconds()));
        self.last_call = LastCall::Settled(kernels);
        Ok(std::mem::take(&mut self.like))
    }

    /// The devices compute at once: the kernel time of a call's statistics
    /// is the longest of the devices' kernel times (each the sum of its
    /// batches' kernels, host-device copies excluded), as one device's is
    /// the sum of its kernels.
    fn last_kernel_seconds(&self) -> Option<f64> {
        match self.last_call {
            // SAFETY: a scoring call took every send's result, and a send
            // since would have made the last call `Settled`.
            LastCall::Scored(used) => {
                longest((0..used).map(|p| unsafe { &*self.parts.ptr(p) }.last_kernel_seconds()))
            }
            LastCall::Settled(k) => k,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::random::{self, Rng};
    use crate::engine::cpu::CpuEngine;
    use crate::engine::test_engines::GpuLike;
    use crate::engine::FrameSource;
    use crate::model::CovKind;
    use crate::stats::UpdateFlags;

    fn cpu_parts(n: usize) -> MultiEngine {
        let parts = (0..n)
            .map(|_| Box::new(CpuEngine::new(1).unwrap()) as Box<dyn Engine>)
            .collect();
        MultiEngine::new(parts).unwrap().with_min_part_rows(1)
    }

    fn keeping_parts(n: usize) -> MultiEngine {
        let parts = (0..n)
            .map(|_| Box::new(GpuLike::keeping()) as Box<dyn Engine>)
            .collect();
        MultiEngine::new(parts).unwrap()
    }

    /// Every form of targets over `frames` frames of `states` states.
    fn targets_of(
        rng: &mut Rng,
        frames: usize,
        states: usize,
    ) -> (Vec<u32>, Vec<usize>, Vec<(u32, f32)>) {
        let ali = (0..frames).map(|_| rng.int(0, states - 1) as u32).collect();
        let mut offsets = vec![0];
        let mut pairs = Vec::new();
        for _ in 0..frames {
            for _ in 0..rng.int(0, 3) {
                pairs.push((rng.int(0, states - 1) as u32, rng.uniform() as f32));
            }
            offsets.push(pairs.len());
        }
        (ali, offsets, pairs)
    }

    /// Statistics of one big call (cut into pieces, dealt to the devices)
    /// and of a stream of deferred batches, on 1, 2 and 3 devices, diagonal
    /// and full, every kind of targets: the same bits.
    #[test]
    fn statistics_are_the_same_bits_on_any_number_of_devices() {
        let mut rng = Rng::new(7);
        for kind in [CovKind::Diagonal, CovKind::Full] {
            let (d, states) = (3, 4);
            let global = random::model(&mut rng, &[5], d, kind);
            let am = random::model(&mut rng, &[2, 3, 1, 4], d, kind);
            let frames = 2 * PIECE_FRAMES + 1234;
            let data = random::uneven_features(&mut rng, frames, d, 2.0);
            let feats = FrameBatch::new(&data, d);
            let (ali, offsets, pairs) = targets_of(&mut rng, frames, states);
            // Gaussian selection: 1..=3 of the global GMM's 5 per frame.
            let mut sel_off = vec![0];
            let mut sel_comp = Vec::new();
            for _ in 0..frames {
                for _ in 0..rng.int(1, 3) {
                    sel_comp.push(rng.int(0, 4) as u32);
                }
                sel_off.push(sel_comp.len());
            }
            let sel_w: Vec<f32> = (0..frames).map(|t| (t % 4) as f32 * 0.5).collect();
            let cases: [(&AcousticModel, FrameTargets<'_>); 4] = [
                (
                    &global,
                    FrameTargets::Selected(Selection {
                        offsets: &sel_off,
                        components: &sel_comp,
                        weights: Some(&sel_w),
                    }),
                ),
                (&global, FrameTargets::Global),
                (&am, FrameTargets::Aligned(&ali)),
                (
                    &am,
                    FrameTargets::Weighted {
                        offsets: &offsets,
                        pairs: &pairs,
                    },
                ),
            ];
            for (model, targets) in cases {
                let run = |engine: &MultiEngine| {
                    let mut lm = engine.load(model).unwrap();
                    let mut one = ModelAccumulators::zeros(model, UpdateFlags::default());
                    let like = lm.accumulate(feats, targets, &mut one).unwrap();
                    // A stream of uneven deferred batches, settled twice.
                    let mut many = ModelAccumulators::zeros(model, UpdateFlags::default());
                    let mut like2 = 0.0;
                    let mut t0 = 0;
                    for (i, n) in [1000, 70_000, 1, 300_000, 5_000].into_iter().enumerate() {
                        let r = t0..t0 + n;
                        let mut o = Vec::new();
                        let t = piece_targets(&targets, r.clone(), &mut o).unwrap();
                        like2 += lm
                            .accumulate_deferred(feats.rows(r).unwrap(), t, &mut many)
                            .unwrap()
                            .unwrap_or(0.0);
                        if i == 2 {
                            like2 += lm.settle(&mut many).unwrap();
                        }
                        t0 += n;
                    }
                    like2 += lm.settle(&mut many).unwrap();
                    (
                        like.to_bits(),
                        one.bit_patterns(),
                        like2.to_bits(),
                        many.bit_patterns(),
                    )
                };
                let want = run(&cpu_parts(1));
                for n in [2, 3] {
                    assert!(run(&cpu_parts(n)) == want, "{kind:?}: {n} devices");
                }
                let kept = run(&keeping_parts(1));
                for n in [2, 3] {
                    assert!(
                        run(&keeping_parts(n)) == kept,
                        "{kind:?}: {n} keeping devices"
                    );
                }
                assert_eq!(kept, want, "kept and returned statistics add the same");
            }
        }
    }

    /// The dimension of [`small_model`].
    const D2: usize = 2;

    /// A three-Gaussian diagonal model of dimension [`D2`] from `seed`, and
    /// the generator after it.
    fn small_model(seed: u64) -> (Rng, AcousticModel) {
        let mut rng = Rng::new(seed);
        let model = random::model(&mut rng, &[3], D2, CovKind::Diagonal);
        (rng, model)
    }

    /// A model's drop hands its parts to their devices' threads and
    /// returns without waiting for them; the engine's drop waits for them.
    #[test]
    fn a_models_parts_are_dropped_on_their_threads_unwaited() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::Duration;
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let threads_seen = Arc::new(Mutex::new(Vec::new()));
        let timed_out = Arc::new(AtomicUsize::new(0));
        let hook: crate::engine::test_engines::DropHook = {
            let (gate, seen, timed_out) = (gate.clone(), threads_seen.clone(), timed_out.clone());
            Arc::new(move || {
                let (open, cv) = &*gate;
                let open = open.lock().unwrap();
                let (_open, w) = cv
                    .wait_timeout_while(open, Duration::from_secs(20), |o| !*o)
                    .unwrap();
                if w.timed_out() {
                    timed_out.fetch_add(1, Ordering::SeqCst);
                }
                let name = std::thread::current().name().map(String::from);
                seen.lock().unwrap().push(name);
            })
        };
        let parts: Vec<Box<dyn Engine>> = (0..2)
            .map(|_| Box::new(GpuLike::keeping_dropped_with(hook.clone())) as Box<dyn Engine>)
            .collect();
        let engine = MultiEngine::new(parts).unwrap();
        let (_, model) = small_model(7);
        let loaded = engine.load(&model).unwrap();
        // Returns while both parts' drops wait for the gate.
        drop(loaded);
        assert!(threads_seen.lock().unwrap().is_empty());
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        drop(engine);
        let mut seen = threads_seen.lock().unwrap().clone();
        seen.sort();
        let want = ["amtool-dev-0", "amtool-dev-1"].map(|n| Some(n.to_string()));
        assert_eq!(seen, want);
        assert_eq!(
            timed_out.load(Ordering::SeqCst),
            0,
            "a drop waited for its parts"
        );
    }

    /// Each of `frames` frames counted once in `acc` (its one state's
    /// occupancies sum to them).
    fn assert_counted(acc: &ModelAccumulators, frames: usize) {
        let occupancy: f64 = acc.states[0].occupancy.iter().sum();
        assert!((occupancy - frames as f64).abs() < 1e-4, "{occupancy}");
    }

    /// A model on `engines` as one (what `MultiEngine::load` makes), to
    /// look at its state.
    /// `threads` are the engine's: declared after `engines` (and before
    /// the model), their drop runs the models' drops while `engines` live.
    fn lending_model<'e>(
        engines: &'e [GpuLike],
        threads: &'e DeviceThreads,
        model: &AcousticModel,
    ) -> MultiModel<'e> {
        let parts = engines
            .iter()
            .map(|e| e.load(model))
            .collect::<Result<Vec<_>>>()
            .unwrap();
        static SHAPE: Mutex<Option<Arc<ModelAccumulators>>> = Mutex::new(None);
        MultiModel::new(parts, 1, Senders::new(threads), &SHAPE)
    }

    /// `rows` (`d` wide) as one batch of `mm`, kept to be copied in.
    fn send_rows(mm: &mut MultiModel<'_>, rows: &[f32], d: usize, acc: &mut ModelAccumulators) {
        let mut frames = mm.host_frames(rows.len()).unwrap();
        assert!(frames.keep_parts(vec![Box::new(rows.to_vec())]));
        mm.accumulate_frames(&mut frames, d, FrameTargets::Global, acc)
            .unwrap();
    }

    /// Batches of uneven sizes go to the device given the fewest frames;
    /// no more than [`HELD`] a device wait and [`DEPTH`] a device are in
    /// flight; a settle sends every batch, each counted once.
    #[test]
    fn batches_go_to_the_device_given_the_fewest_frames() {
        let (mut rng, model) = small_model(11);
        let d = D2;
        let engines = [GpuLike::lending(), GpuLike::lending()];
        let threads = DeviceThreads::start(engines.len()).unwrap();
        let mut mm = lending_model(&engines, &threads, &model);
        let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
        let sizes = [300, 100, 100, 100, 50, 250, 20, 20, 20, 20, 20, 20, 20, 20];
        let total: usize = sizes.iter().sum();
        let data = random::features(&mut rng, total, d);
        let mut nexts = Vec::new();
        let mut at = 0;
        for &n in &sizes {
            send_rows(&mut mm, &data[at * d..(at + n) * d], d, &mut acc);
            at += n;
            nexts.push(mm.next);
            assert!(mm.held.len() <= HELD * 2, "{} held", mm.held.len());
            for p in 0..2 {
                assert!(mm.in_flight(p) <= DEPTH, "device {p}: {}", mm.in_flight(p));
            }
        }
        // Given: [300, 0] → 1; [300, 100] → 1; [300, 200] → 1; [300, 300]
        // → 0; [350, 300] → 1; [350, 550] → 0; then 20s to device 0 until
        // it passes 550.
        assert_eq!(&nexts[..6], &[1, 1, 1, 0, 1, 0]);
        assert_eq!(mm.given, vec![510, 550]);
        mm.settle(&mut acc).unwrap();
        assert!(mm.held.is_empty() && mm.flight.is_empty());
        assert_counted(&acc, total);
    }

    /// The zeros that give the devices' sends the accumulators' shape are
    /// made once for an engine's models of one shape and flags (the next
    /// job's first send does not make them again), and anew for other
    /// flags; every job's frames are counted.
    #[test]
    fn models_of_one_shape_share_the_zeros_of_their_shape() {
        let (mut rng, model) = small_model(14);
        let d = D2;
        let parts: Vec<Box<dyn Engine>> =
            vec![Box::new(GpuLike::lending()), Box::new(GpuLike::lending())];
        let engine = MultiEngine::new(parts).unwrap();
        let data = random::features(&mut rng, 300, d);
        let job = |flags: UpdateFlags| {
            let mut lm = engine.load(&model).unwrap();
            let mut acc = ModelAccumulators::zeros(&model, flags);
            let mut frames = lm.host_frames(data.len()).unwrap();
            assert!(frames.keep_parts(vec![Box::new(data.clone())]));
            lm.accumulate_frames(&mut frames, d, FrameTargets::Global, &mut acc)
                .unwrap();
            lm.settle(&mut acc).unwrap();
            assert_counted(&acc, 300);
            let kept = engine.shape.lock().unwrap().clone();
            kept.expect("the shape kept by the engine")
        };
        let first = job(UpdateFlags::default());
        let second = job(UpdateFlags::default());
        assert!(Arc::ptr_eq(&first, &second), "made once");
        let flags = UpdateFlags {
            variances: false,
            ..UpdateFlags::default()
        };
        let other = job(flags);
        assert!(!Arc::ptr_eq(&first, &other), "made for other flags");
        assert_eq!(other.flags, flags);
        // Zeros of more than KEPT_SHAPE_VALUES are not kept between jobs
        // (1100 Gaussians of 2000 dimensions: 4.4M values; four frames).
        let (bd, frames_big) = (2000, 4);
        let big = random::model(&mut rng, &[1100], bd, CovKind::Diagonal);
        let big_data = random::features(&mut rng, frames_big, bd);
        let mut lm = engine.load(&big).unwrap();
        let mut acc = ModelAccumulators::zeros(&big, UpdateFlags::default());
        let mut frames = lm.host_frames(big_data.len()).unwrap();
        assert!(frames.keep_parts(vec![Box::new(big_data)]));
        lm.accumulate_frames(&mut frames, bd, FrameTargets::Global, &mut acc)
            .unwrap();
        lm.settle(&mut acc).unwrap();
        assert_counted(&acc, frames_big);
        assert!(
            engine.shape.lock().unwrap().is_none(),
            "a large shape is not kept"
        );
    }

    /// A held batch whose frames are in place goes to its device at the
    /// next hold, before the batches after it (the rounds of the sessions
    /// before held it until a whole round after it was full).
    #[test]
    fn a_batch_is_sent_as_soon_as_its_frames_are_in_place() {
        let (mut rng, model) = small_model(12);
        let d = D2;
        let engines = [GpuLike::lending(), GpuLike::lending()];
        let threads = DeviceThreads::start(engines.len()).unwrap();
        let mut mm = lending_model(&engines, &threads, &model);
        let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
        let data = random::features(&mut rng, 200, d);
        hold_copied(&mut mm, &data[..100 * d], d, &mut acc);
        // The second batch's copy cannot end before its hold looks.
        let gate = send_gated(&mut mm, &data[100 * d..], d, &mut acc);
        assert_eq!(
            mm.flight.len(),
            1,
            "the first batch went at the second's hold"
        );
        assert_eq!(mm.flight[0].part, 0);
        gate.open();
        mm.settle(&mut acc).unwrap();
        assert_counted(&acc, 200);
    }

    /// A device still being made ready (`statistics_ready` false) gets no
    /// batch from `send_copied`, even copied: the host goes on holding; once
    /// ready, its batch goes at the next `send_copied`.
    #[test]
    fn a_device_not_ready_gets_its_batches_once_ready() {
        let (mut rng, model) = small_model(15);
        let d = D2;
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let engines = [
            GpuLike::lending(),
            GpuLike::lending_ready_when(ready.clone()),
        ];
        let threads = DeviceThreads::start(engines.len()).unwrap();
        let mut mm = lending_model(&engines, &threads, &model);
        let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
        let data = random::features(&mut rng, 200, d);
        hold_copied(&mut mm, &data[..100 * d], d, &mut acc);
        mm.send_copied(&mut acc).unwrap();
        assert_eq!(
            (mm.held.len(), mm.flight.len()),
            (0, 1),
            "device 0 is ready"
        );
        hold_copied(&mut mm, &data[100 * d..], d, &mut acc);
        assert_eq!(mm.held[0].part, 1);
        mm.send_copied(&mut acc).unwrap();
        assert_eq!(
            (mm.held.len(), mm.flight.len()),
            (1, 1),
            "sent to a device not ready"
        );
        assert!(!mm.statistics_ready());
        ready.store(true, std::sync::atomic::Ordering::SeqCst);
        mm.send_copied(&mut acc).unwrap();
        assert_eq!((mm.held.len(), mm.flight.len()), (0, 2));
        mm.settle(&mut acc).unwrap();
        assert_counted(&acc, 200);
    }

    /// Waits until the copy of `mm`'s oldest held batch has ended. On a
    /// host of few cores the copies run on rayon's global pool, behind the
    /// other tests' work there: a CI run (2 cores, debug build) once waited
    /// more than 10 s, hence the minute.
    fn wait_copied(mm: &mut MultiModel<'_>) {
        let t0 = std::time::Instant::now();
        while !mm.held.front_mut().is_some_and(|h| h.frames.is_done()) {
            assert!(t0.elapsed().as_secs() < 60, "the copy never ended");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// [`send_rows`] of a batch left held and copied: its copy is gated
    /// until its hold has looked, since a copy ended by then (gatherer
    /// threads can be that fast) sends the batch there.
    fn hold_copied(mm: &mut MultiModel<'_>, rows: &[f32], d: usize, acc: &mut ModelAccumulators) {
        let held = mm.held.len();
        let gate = send_gated(mm, rows, d, acc);
        assert_eq!(mm.held.len(), held + 1, "the batch is not held");
        gate.open();
        let t0 = std::time::Instant::now();
        while !mm.held.back_mut().is_some_and(|h| h.frames.is_done()) {
            assert!(t0.elapsed().as_secs() < 60, "the copy never ended");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// A gate that frames' copies wait at until it opens.
    #[derive(Clone, Default)]
    struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>);

    impl Gate {
        fn open(&self) {
            *self.0 .0.lock().unwrap() = true;
            self.0 .1.notify_all();
        }

        fn wait(&self) {
            let (lock, cv) = &*self.0;
            let mut open = lock.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
        }
    }

    /// Frames whose copy waits at a gate.
    struct Gated {
        frames: Vec<f32>,
        gate: Gate,
    }

    impl FrameSource for Gated {
        fn floats(&self) -> usize {
            self.frames.len()
        }
        fn copy_to(&self, dst: &mut [f32]) {
            self.gate.wait();
            dst.copy_from_slice(&self.frames);
        }
    }

    /// [`send_rows`] of frames whose copy waits until the gate returned
    /// opens.
    fn send_gated(
        mm: &mut MultiModel<'_>,
        rows: &[f32],
        d: usize,
        acc: &mut ModelAccumulators,
    ) -> Gate {
        let gate = Gate::default();
        let mut frames = mm.host_frames(rows.len()).unwrap();
        let gated = Gated {
            frames: rows.to_vec(),
            gate: gate.clone(),
        };
        assert!(frames.keep_parts(vec![Box::new(gated)]));
        mm.accumulate_frames(&mut frames, d, FrameTargets::Global, acc)
            .unwrap();
        gate
    }

    /// A held batch whose copy ends while the caller fills the next batch
    /// goes out at the caller's next `send_copied` (between utterances),
    /// not only at the next batch's hold.
    #[test]
    fn a_batch_copied_goes_at_the_next_send_copied() {
        let (mut rng, model) = small_model(13);
        let d = D2;
        let engines = [GpuLike::lending(), GpuLike::lending()];
        let threads = DeviceThreads::start(engines.len()).unwrap();
        let mut mm = lending_model(&engines, &threads, &model);
        let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
        let data = random::features(&mut rng, 100, d);
        let gate = send_gated(&mut mm, &data, d, &mut acc);
        assert_eq!((mm.held.len(), mm.flight.len()), (1, 0));
        mm.send_copied(&mut acc).unwrap();
        assert_eq!((mm.held.len(), mm.flight.len()), (1, 0), "sent uncopied");
        gate.open();
        wait_copied(&mut mm);
        assert_eq!(mm.flight.len(), 0, "nothing sends by itself");
        mm.send_copied(&mut acc).unwrap();
        assert_eq!((mm.held.len(), mm.flight.len()), (0, 1));
        mm.settle(&mut acc).unwrap();
        assert_counted(&acc, 100);
    }

    /// Copies take their turns in ticket order, whatever order their
    /// threads start in, and a panicking one passes its turn on.
    #[test]
    fn copies_take_their_turns_in_batch_order() {
        let mut turns = GatherTurns::default();
        let tickets: Vec<_> = (0..4).map(|_| turns.ticket()).collect();
        let order = Arc::new(Mutex::new(Vec::new()));
        let handles: Vec<_> = tickets
            .into_iter()
            .rev()
            .map(|(ticket, turn)| {
                let order = order.clone();
                std::thread::spawn(move || {
                    in_turn(ticket, &turn, || {
                        order.lock().unwrap().push(ticket);
                        if ticket == 1 {
                            panic!("a copy that fails");
                        }
                    })
                })
            })
            .collect();
        let failed = handles.into_iter().filter_map(|h| h.join().err()).count();
        assert_eq!(failed, 1);
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    /// A part whose drop waits (up to 10 s) until the test lets it go and
    /// notes whether it was let go.
    struct SlowToDrop {
        frames: Vec<f32>,
        release: Mutex<std::sync::mpsc::Receiver<()>>,
        released: Arc<Mutex<Option<bool>>>,
    }

    impl crate::engine::host_frames::FrameSource for SlowToDrop {
        fn floats(&self) -> usize {
            self.frames.len()
        }
        fn copy_to(&self, dst: &mut [f32]) {
            dst.copy_from_slice(&self.frames);
        }
    }

    impl Drop for SlowToDrop {
        fn drop(&mut self) {
            let waited = self
                .release
                .lock()
                .unwrap()
                .recv_timeout(std::time::Duration::from_secs(10));
            *self.released.lock().unwrap() = Some(waited.is_ok());
        }
    }

    /// A batch's frames are handed on as soon as they are copied, before
    /// the parts copied are let go (letting go of a mapped archive's last
    /// part unmaps it, which held the job's last batch 3–4 ms): here the
    /// drop of the part waits for the test, which lets it go only once
    /// `finish` has returned the frames.
    #[test]
    fn copied_frames_come_back_before_their_parts_are_let_go() {
        let (tx, rx) = std::sync::mpsc::channel();
        let released = Arc::new(Mutex::new(None));
        let part = SlowToDrop {
            frames: vec![1.0, 2.0, 3.0],
            release: Mutex::new(rx),
            released: released.clone(),
        };
        let mut frames =
            HostFrames::lent(Box::new(crate::engine::test_engines::VecMem(vec![0.0; 3])));
        assert!(frames.keep_parts(vec![Box::new(part)]));
        let mut turns = GatherTurns::default();
        let gathering = Gathering::start(frames, 1, &mut turns).unwrap();
        let frames = gathering.finish().unwrap();
        assert_eq!(frames.as_slice(), &[1.0, 2.0, 3.0]);
        assert_eq!(*released.lock().unwrap(), None, "the part was let go first");
        tx.send(()).unwrap();
        let t0 = std::time::Instant::now();
        while released.lock().unwrap().is_none() && t0.elapsed().as_secs() < 20 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(*released.lock().unwrap(), Some(true));
    }

    /// The test above would see a wrong order: the same batches added in
    /// another order give other bits.
    #[test]
    fn the_order_of_the_batches_shows_in_the_bits() {
        let mut rng = Rng::new(3);
        let model = random::model(&mut rng, &[6], 4, CovKind::Diagonal);
        let data = random::uneven_features(&mut rng, 60_000, 4, 2.0);
        let engine = CpuEngine::new(1).unwrap();
        let mut lm = engine.load(&model).unwrap();
        let shape = ModelAccumulators::zeros(&model, UpdateFlags::default());
        let batches: Vec<ModelAccumulators> = data
            .chunks(4 * 5_000)
            .map(|c| {
                lm.accumulate_apart(FrameBatch::new(c, 4), FrameTargets::Global, &shape)
                    .unwrap()
                    .unwrap()
            })
            .collect();
        let sum = |order: &mut dyn Iterator<Item = &ModelAccumulators>| {
            let mut a = shape.zeros_like();
            order.for_each(|b| a.add(b));
            a.bit_patterns()
        };
        let forward = sum(&mut batches.iter());
        let dealt = sum(&mut batches
            .iter()
            .step_by(2)
            .chain(batches.iter().skip(1).step_by(2)));
        assert_ne!(forward, dealt);
    }

    /// A call's kernel time on several devices is the longest device's
    /// (its batches' kernels summed), as one device's is its kernels' sum;
    /// none where a device does not time its kernels.
    #[test]
    fn kernel_time_is_the_longest_devices() {
        use crate::engine::test_engines::SECONDS_A_FRAME;
        let mut rng = Rng::new(21);
        let model = random::model(&mut rng, &[3], 2, CovKind::Diagonal);
        let frames = 2 * PIECE_FRAMES + 1234;
        let data = random::features(&mut rng, frames, 2);
        let kernels = |engine: &MultiEngine| {
            let mut lm = engine.load(&model).unwrap();
            let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
            lm.accumulate(FrameBatch::new(&data, 2), FrameTargets::Global, &mut acc)
                .unwrap();
            let first = lm.last_kernel_seconds();
            // A second call counts its own batches only.
            let half = FrameBatch::new(&data[..2 * 1000], 2);
            lm.accumulate(half, FrameTargets::Global, &mut acc).unwrap();
            (first, lm.last_kernel_seconds())
        };
        let secs = |f: usize| Some(f as f64 * SECONDS_A_FRAME);
        assert_eq!(kernels(&keeping_parts(1)), (secs(frames), secs(1000)));
        // Pieces 0 and 2 on device 0, piece 1 on device 1.
        let longest = secs(PIECE_FRAMES + 1234);
        assert_eq!(kernels(&keeping_parts(2)), (longest, secs(1000)));
        assert_eq!(kernels(&cpu_parts(2)), (None, None));
        // Scoring: the longest of the devices' last calls, on those used.
        let scored = |engine: &MultiEngine, rows: usize| {
            let mut lm = engine.load(&model).unwrap();
            let mut out = vec![0f32; rows];
            lm.state_loglikes(FrameBatch::new(&data[..2 * rows], 2), &mut out)
                .unwrap();
            lm.last_kernel_seconds()
        };
        let two = keeping_parts(2);
        assert_eq!(scored(&two, 3001), secs(1501), "3001 rows on two devices");
        assert_eq!(scored(&two, 1500), secs(1500), "too few rows to split");
    }

    #[test]
    fn scoring_rows_land_in_place_on_any_number_of_devices() {
        let mut rng = Rng::new(11);
        for kind in [CovKind::Diagonal, CovKind::Full] {
            let model = random::model(&mut rng, &[3, 1, 4, 2, 5], 3, kind);
            let frames = 1001;
            let data = random::features(&mut rng, frames, 3);
            let feats = FrameBatch::new(&data, 3);
            let run = |engine: &dyn Engine| {
                let mut lm = engine.load(&model).unwrap();
                let mut s = vec![0f32; frames * 5];
                lm.state_loglikes(feats, &mut s).unwrap();
                let mut rows = vec![0f32; 300 * 5];
                lm.state_loglikes_rows(feats, 400..700, &mut rows).unwrap();
                let mut c = vec![0f32; frames * 4];
                lm.component_loglikes(2, feats, &mut c).unwrap();
                let b = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                (b(&s), b(&rows), b(&c))
            };
            let want = run(&CpuEngine::new(1).unwrap());
            assert_eq!(want.1, want.0[400 * 5..700 * 5]);
            for n in [1, 2, 3] {
                assert!(run(&cpu_parts(n)) == want, "{kind:?}: {n} devices");
            }
        }
    }

    /// A batch whose send fails on its device's thread gives its error
    /// and leaves nothing behind: the batches after it are counted as if
    /// it had never come.
    #[test]
    fn a_failed_send_is_an_error_and_leaves_the_flight() {
        let mut rng = Rng::new(5);
        let model = random::model(&mut rng, &[2, 2], 2, CovKind::Diagonal);
        let engine = cpu_parts(2);
        let mut lm = engine.load(&model).unwrap();
        let data = random::features(&mut rng, 6, 2);
        let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
        let send = |lm: &mut Box<dyn LoadedModel + '_>, states: &[u32], acc: &mut _| {
            let mut frames = HostFrames::with_capacity(12);
            frames.push(&data);
            lm.accumulate_frames(&mut frames, 2, FrameTargets::Aligned(states), acc)
                .and_then(|_| lm.settle(acc))
        };
        let e = send(&mut lm, &[0, 1, 9, 0, 1, 0], &mut acc).unwrap_err();
        assert!(e.to_string().contains('9'), "{e}");
        send(&mut lm, &[0, 1, 1, 0, 1, 0], &mut acc).unwrap();
        let occupancy = |s: usize| acc.states[s].occupancy.iter().sum::<f64>();
        assert!((occupancy(0) - 3.0).abs() < 1e-4 && (occupancy(1) - 3.0).abs() < 1e-4);
        assert_eq!(acc.total_frames, 6.0);
    }

    #[test]
    fn part_ranges_cover_the_rows_in_order() {
        assert_eq!(part_ranges(0..10, 3, 1), vec![0..4, 4..8, 8..10]);
        assert_eq!(part_ranges(5..9, 3, 2), vec![5..7, 7..9]);
        assert_eq!(part_ranges(0..3, 2, 1024), vec![0..3]);
        assert_eq!(part_ranges(4..4, 2, 1), vec![4..4]);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let e = MultiEngine::new(Vec::new()).err().unwrap();
        assert!(e.to_string().contains("no device"), "{e}");
        let mixed: Vec<Box<dyn Engine>> = vec![
            Box::new(CpuEngine::new(1).unwrap()),
            Box::new(GpuLike::keeping()),
        ];
        let e = MultiEngine::new(mixed).err().unwrap();
        assert!(e.to_string().contains("of one kind"), "{e}");
        let mut rng = Rng::new(1);
        let model = random::model(&mut rng, &[2, 2], 2, CovKind::Diagonal);
        let engine = cpu_parts(2);
        let mut lm = engine.load(&model).unwrap();
        let data = random::features(&mut rng, 10, 2);
        let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
        let short = [0u32; 9];
        let e = lm
            .accumulate(
                FrameBatch::new(&data, 2),
                FrameTargets::Aligned(&short),
                &mut acc,
            )
            .unwrap_err();
        assert!(e.to_string().contains("targets"), "{e}");
        let mut out = vec![0f32; 7];
        assert!(lm
            .state_loglikes(FrameBatch::new(&data, 2), &mut out)
            .is_err());
        let mut frames = HostFrames::with_capacity(8);
        frames.push(&data[..5]);
        let e = lm
            .accumulate_frames(&mut frames, 2, FrameTargets::Global, &mut acc)
            .unwrap_err();
        assert!(e.to_string().contains("whole frames"), "{e}");
        assert_eq!("all".parse::<Gpus>(), Ok(Gpus::All));
        assert_eq!("3".parse::<Gpus>(), Ok(Gpus::Count(3)));
        assert!("0".parse::<Gpus>().unwrap_err().contains("--gpus=0"));
    }
}
