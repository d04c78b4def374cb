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
//! The threads are the engine's ([`DeviceThreads`]), started with it and
//! kept for as long as it lives: a thread started for each job (and its
//! first CUDA call on that thread) cost 0.1–0.3 ms at each end of every
//! job on 2 × H200 (docs/performance.md, twenty-third session). The same
//! threads load the model on every device and make the devices ready, at
//! once ([`DeviceThreads::run_each`]), and drop the models
//! ([`DeviceThreads::hand_over`]).
//!
//! The models borrow their engine (`'e`), and a thread that outlives a
//! call cannot hold a borrow, so the jobs are handed over with their
//! lifetime erased. That is sound because nothing a job uses can go away
//! while it runs:
//! - [`DeviceThreads::run_each`] returns only once each of its jobs has
//!   run or been dropped unrun;
//! - the model a send goes to is not touched by anyone else (above), and
//!   is dropped only after every job queued for it has finished
//!   ([`Senders::finish`], called by the owner's drop), on its device's
//!   thread, by a job the owner's drop hands over and does not wait for
//!   ([`DeviceThreads::hand_over`]: the drop borrows the engine, whose
//!   drop joins the threads first);
//! - a model leaked with jobs queued is never dropped, and its engine,
//!   which a job also uses, joins the threads, every job run, before it
//!   goes ([`DeviceThreads::join`], called by the engine's drop).

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use super::LoadedModel;
use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// What a send gives back: the batch's statistics, or `None` when its
/// device keeps them ([`LoadedModel::accumulate_frames_apart`]).
pub type Sent = Result<Option<ModelAccumulators>>;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// `job` with its lifetime erased, for a device's thread.
///
/// # Safety
/// Nothing `job` borrows goes away before it has run or been dropped.
unsafe fn erased<'a>(job: impl FnOnce() + Send + 'a) -> Job {
    let job: Box<dyn FnOnce() + Send + 'a> = Box::new(job);
    // SAFETY: only the lifetime changes; the caller's promise.
    unsafe { std::mem::transmute(job) }
}

fn stopped() -> Error {
    Error::Engine("a device's thread stopped".into())
}

/// A thread for each device of an engine, for as long as the engine
/// lives; each runs the jobs queued for its device in order.
pub struct DeviceThreads {
    jobs: Vec<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl DeviceThreads {
    /// A thread for each of `devices` devices.
    pub fn start(devices: usize) -> Result<Self> {
        let mut t = DeviceThreads {
            jobs: Vec::with_capacity(devices),
            threads: Vec::with_capacity(devices),
        };
        for p in 0..devices {
            let (tx, rx) = channel::<Job>();
            let thread = std::thread::Builder::new()
                .name(format!("amtool-dev-{p}"))
                .spawn(move || rx.into_iter().for_each(|job| job()))
                .map_err(|e| Error::Engine(format!("cannot start a device's thread: {e}")))?;
            t.jobs.push(tx);
            t.threads.push(thread);
        }
        Ok(t)
    }

    /// Queues `job` (which must not panic) on device `p`'s thread.
    fn queue(&self, p: usize, job: Job) -> Result<()> {
        let jobs = self.jobs.get(p).ok_or_else(stopped)?;
        jobs.send(job).map_err(|_| stopped())
    }

    /// Runs each `(device, job)` on its device's thread, at once, and
    /// waits for them all; their results in job order (a panicking job's
    /// as an error).
    pub fn run_each<'a, T, F>(&self, jobs: impl IntoIterator<Item = (usize, F)>) -> Vec<Result<T>>
    where
        T: Send + 'a,
        F: FnOnce() -> Result<T> + Send + 'a,
    {
        // Made first, so that nothing runs while the caller's code does.
        let jobs: Vec<(usize, F)> = jobs.into_iter().collect();
        let (tx, rx) = channel::<(usize, Result<T>)>();
        let mut out: Vec<Option<Result<T>>> = (0..jobs.len()).map(|_| None).collect();
        for (i, (p, f)) in jobs.into_iter().enumerate() {
            let tx = tx.clone();
            // SAFETY: every job has run, or was dropped unrun, when the
            // loop below ends (each holds a sender of the channel, and the
            // channel ends when the last goes).
            let job = unsafe {
                erased(move || {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                        .unwrap_or_else(|_| Err(Error::Engine("a device's job panicked".into())));
                    let _ = tx.send((i, r));
                })
            };
            if let Err(e) = self.queue(p, job) {
                out[i] = Some(Err(e));
            }
        }
        drop(tx);
        for (i, r) in rx {
            out[i] = Some(r);
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(stopped())))
            .collect()
    }

    /// Queues `job` on device `p`'s thread and returns at once: a model's
    /// drop (its device memory given back, its streams and events
    /// destroyed: ~0.1 ms a device) is waited for by no one but the
    /// device's next job and the engine's drop. A job that panics is
    /// dropped; the thread goes on.
    ///
    /// # Safety
    /// What `job` borrows must outlive the engine's threads: the engine's
    /// drop joins them ([`Self::join`]) before its devices' engines go.
    pub unsafe fn hand_over<'a>(&self, p: usize, job: impl FnOnce() + Send + 'a) -> Result<()> {
        // SAFETY: the caller's promise.
        let job = unsafe {
            erased(move || {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            })
        };
        self.queue(p, job)
    }

    /// Waits for every job queued, ends the threads.
    pub fn join(&mut self) {
        self.jobs.clear();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for DeviceThreads {
    fn drop(&mut self) {
        self.join();
    }
}

/// One device's results.
struct Results {
    tx: Sender<Sent>,
    rx: Receiver<Sent>,
    pending: usize,
}

/// The model of a device, as its thread reaches it.
struct ModelPtr<'e>(*mut (dyn LoadedModel + 'e));

// SAFETY: the model is `Send`; the pointer is used by one thread at a time
// (the module's note).
unsafe impl Send for ModelPtr<'_> {}

/// A model's sends on its engine's device threads; see the module's note.
pub struct Senders<'e> {
    threads: &'e DeviceThreads,
    results: Vec<Results>,
}

impl<'e> Senders<'e> {
    /// For a model on the devices of `threads`.
    pub fn new(threads: &'e DeviceThreads) -> Self {
        let results = (0..threads.jobs.len())
            .map(|_| {
                let (tx, rx) = channel();
                Results { tx, rx, pending: 0 }
            })
            .collect();
        Senders { threads, results }
    }

    /// The engine's device threads.
    pub fn threads(&self) -> &'e DeviceThreads {
        self.threads
    }

    /// Sends queued for device `p` whose results were not taken.
    pub fn pending(&self, p: usize) -> usize {
        self.results[p].pending
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
        let model = ModelPtr(model);
        let results = self.results[p].tx.clone();
        // SAFETY: the module's note says why nothing the job uses goes away
        // while it runs.
        let job = unsafe {
            erased(move || {
                let model = model;
                // SAFETY: the caller's promise.
                let m = &mut *model.0;
                let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| send(m)))
                    .unwrap_or_else(|_| Err(Error::Engine("a device's send panicked".into())));
                // Sent last: once the result is taken, the job is done with
                // everything it borrowed.
                let _ = results.send(sent);
            })
        };
        self.threads.queue(p, job)?;
        self.results[p].pending += 1;
        Ok(())
    }

    /// The result of device `p`'s oldest send not yet taken (waits for
    /// it); `None` when there is none.
    pub fn next_result(&mut self, p: usize) -> Option<Sent> {
        let r = &mut self.results[p];
        if r.pending == 0 {
            return None;
        }
        r.pending -= 1;
        Some(r.rx.recv().unwrap_or_else(|_| Err(stopped())))
    }

    /// Waits for every job queued (each sends its result last: a thread
    /// runs every job queued on it, even as the engine joins it), and
    /// drops their results.
    pub fn finish(&mut self) {
        for p in 0..self.results.len() {
            while self.next_result(p).is_some() {}
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
    use std::sync::Arc;
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
        let threads = DeviceThreads::start(2).unwrap();
        let mut s = Senders::new(&threads);
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

    /// A job queued for a model is finished when the model's senders
    /// finish, and when the engine joins its threads even if the senders
    /// were leaked.
    #[test]
    fn finish_and_join_wait_for_every_job() {
        let engine = CpuEngine::new(1).unwrap();
        let mut model = model_of(&engine);
        let ptr: *mut (dyn LoadedModel + '_) = &mut *model;
        let mut threads = DeviceThreads::start(1).unwrap();
        for leak in [false, true] {
            let done = Arc::new(AtomicBool::new(false));
            let mut s = Senders::new(&threads);
            let flag = done.clone();
            // SAFETY: the waits below outlast the job; the model is not
            // touched meanwhile.
            unsafe {
                s.queue(0, ptr, move |_| {
                    std::thread::sleep(Duration::from_millis(50));
                    flag.store(true, Ordering::SeqCst);
                    Ok(None)
                })
                .unwrap();
            }
            match leak {
                false => s.finish(),
                true => {
                    std::mem::forget(s);
                    threads.join();
                }
            }
            assert!(done.load(Ordering::SeqCst), "leaked: {leak}");
        }
        // Joined, the threads take no more jobs.
        let r = threads.run_each([(0, || Ok(1))]);
        assert!(r[0].as_ref().unwrap_err().to_string().contains("stopped"));
    }

    /// Each job runs on its device's thread, borrowing the caller's data;
    /// the results come in job order, a panic as an error, a device with
    /// no thread as an error.
    #[test]
    fn run_each_runs_on_the_devices_threads_in_order() {
        let threads = DeviceThreads::start(2).unwrap();
        let data = vec![10usize, 20, 30];
        let name = || std::thread::current().name().map(String::from);
        let r = threads.run_each((0..4).map(|i| {
            let data = &data;
            (i % 2, move || match i {
                3 => panic!("a job that fails"),
                _ => Ok((data[i], name())),
            })
        }));
        assert_eq!(r.len(), 4);
        for (i, r) in r.iter().take(3).enumerate() {
            let (v, thread) = r.as_ref().unwrap();
            assert_eq!(*v, data[i]);
            assert_eq!(
                thread.as_deref(),
                Some(format!("amtool-dev-{}", i % 2).as_str())
            );
        }
        assert!(r[3].as_ref().unwrap_err().to_string().contains("panicked"));
        let r = threads.run_each([(2, || Ok(()))]);
        assert!(r[0].is_err());
    }
}
