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

mod gathering;
mod targets;

use gathering::{GatherTurns, Gathering};
use targets::{piece_targets, OwnedTargets};

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use super::adder::{AddLater, Adder};
use super::senders::{DeviceThreads, Senders};
use super::{Engine, FrameBatch, FrameTargets, HostFrames, LoadedModel, StateSubsets};
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
mod tests;
