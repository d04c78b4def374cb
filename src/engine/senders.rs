//! A thread for each device of a [`super::MultiModel`] that sends its
//! statistics batches, so that the host's thread only reads the input and
//! holds the batches.
//!
//! Sending a batch to a CUDA device is 0.2–0.6 ms of host work (its plan,
//! its launches, the download of its sums queued). Done on the host's
//! thread (a scoped thread a device, joined), it took half of that
//! thread's time on two GPUs, and the threads copying the frames waited
//! for it to hold the next batch: 27 GB/s moved in the first 9 ms of
//! acc_stats_ark where the copying threads alone move 60–77 GB/s
//! (docs/performance.md, twenty-second session).
//!
//! A device's batches are sent in the order they are queued; each send's
//! result comes back in that order ([`Senders::next_result`]). While sends
//! are queued for a device its model belongs to its thread: the caller
//! touches it only when [`Senders::pending`] is zero (after taking every
//! result).
//!
//! The models borrow their engine (`'e`), and a thread that outlives a
//! call cannot hold a borrow, so the jobs are handed over with their
//! lifetime erased. That is sound because nothing a job uses can go away
//! while it runs:
//! - the model it sends to is not touched by anyone else (above), and is
//!   dropped only after its thread has finished every job
//!   ([`Senders::finish`], called by the owner's drop);
//! - a model leaked with jobs queued is never dropped, and its engine,
//!   which a job also uses, waits for every job of every model it lent
//!   ([`InFlight::wait_idle`], called by the engine's drop).

use std::marker::PhantomData;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::LoadedModel;
use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// What a send gives back: the batch's statistics, or `None` when its
/// device keeps them ([`LoadedModel::accumulate_frames_apart`]).
pub type Sent = Result<Option<ModelAccumulators>>;

/// The jobs of an engine's models not yet finished.
#[derive(Default)]
pub struct InFlight {
    jobs: Mutex<usize>,
    idle: Condvar,
}

impl InFlight {
    /// Waits until no job is queued or running.
    pub fn wait_idle(&self) {
        let mut n = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        while *n > 0 {
            n = self.idle.wait(n).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn begin(self: &Arc<Self>) -> JobToken {
        *self.jobs.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        JobToken(self.clone())
    }
}

/// A job counted in its engine's [`InFlight`] until dropped.
struct JobToken(Arc<InFlight>);

impl Drop for JobToken {
    fn drop(&mut self) {
        let mut n = self.0.jobs.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        if *n == 0 {
            self.0.idle.notify_all();
        }
    }
}

type Job = Box<dyn FnOnce() + Send + 'static>;

/// One device's thread (started at its first job) and its results.
struct DeviceThread {
    jobs: Option<Sender<Job>>,
    results_tx: Sender<Sent>,
    results: Receiver<Sent>,
    pending: usize,
    thread: Option<JoinHandle<()>>,
}

/// The model of a device, as its thread reaches it.
struct ModelPtr<'e>(*mut (dyn LoadedModel + 'e));

// SAFETY: the model is `Send`; the pointer is used by one thread at a time
// (the module's note).
unsafe impl Send for ModelPtr<'_> {}

/// A thread a device; see the module's note.
pub struct Senders<'e> {
    threads: Vec<DeviceThread>,
    in_flight: Arc<InFlight>,
    _models: PhantomData<&'e ()>,
}

impl<'e> Senders<'e> {
    /// For `devices` devices of an engine whose jobs `in_flight` counts.
    pub fn new(devices: usize, in_flight: Arc<InFlight>) -> Self {
        let threads = (0..devices)
            .map(|_| {
                let (results_tx, results) = channel();
                DeviceThread {
                    jobs: None,
                    results_tx,
                    results,
                    pending: 0,
                    thread: None,
                }
            })
            .collect();
        Senders {
            threads,
            in_flight,
            _models: PhantomData,
        }
    }

    /// Sends queued for device `p` whose results were not taken.
    pub fn pending(&self, p: usize) -> usize {
        self.threads[p].pending
    }

    /// Queues `send` of device `p`'s model `model` on its thread.
    ///
    /// # Safety
    /// `model` stays valid, and nothing else touches it, until every
    /// result of device `p` is taken ([`Self::next_result`]) or
    /// [`Self::finish`] returns.
    pub unsafe fn queue(
        &mut self,
        p: usize,
        model: *mut (dyn LoadedModel + 'e),
        send: impl FnOnce(&mut dyn LoadedModel) -> Sent + Send + 'e,
    ) -> Result<()> {
        let t = &mut self.threads[p];
        if t.jobs.is_none() {
            let (tx, rx) = channel::<Job>();
            let thread = std::thread::Builder::new()
                .name(format!("amtool-send-{p}"))
                .spawn(move || rx.into_iter().for_each(|job| job()))
                .map_err(|e| Error::Engine(format!("cannot start a device's thread: {e}")))?;
            t.jobs = Some(tx);
            t.thread = Some(thread);
        }
        let model = ModelPtr(model);
        let results = t.results_tx.clone();
        let token = self.in_flight.begin();
        let job: Box<dyn FnOnce() + Send + 'e> = Box::new(move || {
            let model = model;
            // SAFETY: the caller's promise.
            let m = unsafe { &mut *model.0 };
            let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| send(m)))
                .unwrap_or_else(|_| Err(Error::Engine("a device's send panicked".into())));
            let _ = results.send(sent);
            drop(token);
        });
        // SAFETY: only the lifetime changes; the module's note says why
        // nothing the job uses goes away while it runs.
        let job: Job = unsafe { std::mem::transmute(job) };
        let jobs = t.jobs.as_ref().expect("started above");
        jobs.send(job)
            .map_err(|_| Error::Engine("a device's thread stopped".into()))?;
        t.pending += 1;
        Ok(())
    }

    /// The result of device `p`'s oldest send not yet taken (waits for
    /// it); `None` when there is none.
    pub fn next_result(&mut self, p: usize) -> Option<Sent> {
        let t = &mut self.threads[p];
        if t.pending == 0 {
            return None;
        }
        t.pending -= 1;
        Some(
            t.results
                .recv()
                .unwrap_or_else(|_| Err(Error::Engine("a device's thread stopped".into()))),
        )
    }

    /// Waits for every job, ends the threads.
    pub fn finish(&mut self) {
        for t in &mut self.threads {
            drop(t.jobs.take());
            if let Some(h) = t.thread.take() {
                let _ = h.join();
            }
            while t.results.try_recv().is_ok() {}
            t.pending = 0;
        }
    }
}

impl Drop for Senders<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::random::{self, Rng};
    use crate::engine::cpu::CpuEngine;
    use crate::engine::Engine;
    use crate::model::CovKind;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn model_of(engine: &CpuEngine) -> Box<dyn LoadedModel + '_> {
        let mut rng = Rng::new(3);
        let m = random::model(&mut rng, &[2, 3], 4, CovKind::Diagonal);
        engine.load(&m).unwrap()
    }

    /// A device's results come back in the order its sends were queued,
    /// a panic as an error, and each send reaches the device's model.
    #[test]
    fn results_come_back_in_order_and_panics_as_errors() {
        let engine = CpuEngine::new(1).unwrap();
        let mut model = model_of(&engine);
        let ptr: *mut (dyn LoadedModel + '_) = &mut *model;
        let mut s = Senders::new(2, Arc::default());
        // SAFETY: the model outlives the senders' jobs (the results are
        // all taken below) and is not touched meanwhile.
        unsafe {
            s.queue(1, ptr, |m| match m.num_states() {
                2 => Ok(None),
                n => Err(Error::Engine(format!("{n} states"))),
            })
            .unwrap();
            s.queue(1, ptr, |_| panic!("a send that fails")).unwrap();
            s.queue(1, ptr, |_| Err(Error::Engine("third".into())))
                .unwrap();
        }
        assert_eq!((s.pending(0), s.pending(1)), (0, 3));
        assert!(matches!(s.next_result(1), Some(Ok(None))));
        let second = s.next_result(1).unwrap().unwrap_err().to_string();
        assert!(second.contains("panicked"), "{second}");
        let third = s.next_result(1).unwrap().unwrap_err().to_string();
        assert!(third.contains("third"), "{third}");
        assert!(s.next_result(1).is_none() && s.next_result(0).is_none());
        assert_eq!(s.pending(1), 0);
    }

    /// An engine's wait returns only once a job it counts has finished,
    /// whether or not its senders are still there.
    #[test]
    fn the_engine_waits_for_every_job() {
        let engine = CpuEngine::new(1).unwrap();
        let mut model = model_of(&engine);
        let ptr: *mut (dyn LoadedModel + '_) = &mut *model;
        let in_flight = Arc::new(InFlight::default());
        let done = Arc::new(AtomicBool::new(false));
        let mut s = Senders::new(1, in_flight.clone());
        let flag = done.clone();
        // SAFETY: the wait below outlasts the job; the model is not
        // touched meanwhile.
        unsafe {
            s.queue(0, ptr, move |_| {
                std::thread::sleep(Duration::from_millis(50));
                flag.store(true, Ordering::SeqCst);
                Ok(None)
            })
            .unwrap();
        }
        in_flight.wait_idle();
        assert!(done.load(Ordering::SeqCst));
        assert!(matches!(s.next_result(0), Some(Ok(None))));
        drop(s);
        in_flight.wait_idle();
    }
}
