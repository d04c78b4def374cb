//! The batches' statistics added up on a thread of their own, in the order
//! they are handed over ([`Adder::add`]), and handed back at once
//! ([`Adder::take`]).
//!
//! Several devices' batches ([`super::multi`]) are collected on the thread
//! that reads the input and sends the batches; adding a UBM batch's
//! 2048 × 81 sums there took 0.3–1 ms of that thread (up to 2.5 ms on the
//! global pool, whose threads waited for the cores the copies held): a
//! third of its time on two GPUs, which waited for it (2 × H100 and
//! 2 × H200, docs/performance.md, twenty-first session). Here the thread
//! only hands the sums over.
//!
//! The sum starts from zero and takes every batch in order, so it is the
//! same bits whatever the number of devices; added into accumulators that
//! were zero it is the same bits as adding each batch into them.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::OnceLock;
use std::thread::JoinHandle;

use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// Threads of [`pool`]: the last batches of a job come within a fraction
/// of a millisecond of each other, and added one after another on one
/// thread (~0.3 ms each for a UBM's 2048 × 81 sums) they kept every job
/// waiting ~0.45 ms after its devices were done (2 × H200,
/// docs/performance.md, twenty-second session).
const ADD_THREADS: usize = 8;

/// The threads on which a batch's sums are added, a group of rows each
/// (every sum still added once, in batch order: the same bits); `None`
/// where they cannot be started.
pub fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(ADD_THREADS)
            .thread_name(|i| format!("amtool-add-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// A batch's statistics, to be added into a running sum (on the adder's
/// thread).
pub type AddLater = Box<dyn FnOnce(&mut ModelAccumulators) -> Result<()> + Send>;

enum Job {
    /// Begin a sum from these zeros.
    Start(ModelAccumulators),
    Add(AddLater),
    /// Send the sum back (`None` when none was begun) and begin none.
    Take,
}

/// The thread adding batches, and the sums it sends back.
#[derive(Default)]
pub struct Adder {
    running: Option<Running>,
    /// Whether a sum is begun.
    begun: bool,
}

struct Running {
    /// `None` once dropped: the thread then ends.
    jobs: Option<Sender<Job>>,
    sums: Receiver<Result<Option<ModelAccumulators>>>,
    thread: Option<JoinHandle<()>>,
}

impl Adder {
    /// Adds a batch's statistics (after those handed over before) into
    /// the sum, begun from zeros shaped like `shape` if none is.
    pub fn add(&mut self, shape: &ModelAccumulators, batch: AddLater) -> Result<()> {
        if self.running.is_none() {
            self.running = Some(Running::start()?);
        }
        let r = self.running.as_ref().expect("started above");
        if !std::mem::replace(&mut self.begun, true) {
            r.send(Job::Start(shape.zeros_like()))?;
        }
        r.send(Job::Add(batch))
    }

    /// The sum of the batches added since the last take, once every one is
    /// added; `None` when none was. The first error of an add, if any.
    pub fn take(&mut self) -> Result<Option<ModelAccumulators>> {
        if !std::mem::replace(&mut self.begun, false) {
            return Ok(None);
        }
        let r = self.running.as_ref().expect("a begun sum has its thread");
        r.send(Job::Take)?;
        r.sums.recv().map_err(|_| died())?
    }
}

fn died() -> Error {
    Error::Engine("the thread adding the batches' statistics stopped (a panic)".into())
}

impl Running {
    fn start() -> Result<Self> {
        let (jobs, rx) = channel();
        let (tx, sums) = channel();
        let thread = std::thread::Builder::new()
            .name("amtool-add".into())
            .spawn(move || work(rx, tx))
            .map_err(|e| {
                Error::Engine(format!("cannot start the thread adding statistics: {e}"))
            })?;
        Ok(Running {
            jobs: Some(jobs),
            sums,
            thread: Some(thread),
        })
    }

    fn send(&self, job: Job) -> Result<()> {
        let jobs = self.jobs.as_ref().ok_or_else(died)?;
        jobs.send(job).map_err(|_| died())
    }
}

/// The adder's thread: jobs in order until the adder is dropped.
fn work(jobs: Receiver<Job>, sums: Sender<Result<Option<ModelAccumulators>>>) {
    let mut sum: Option<Result<ModelAccumulators>> = None;
    for job in jobs {
        match job {
            Job::Start(zeros) => sum = Some(Ok(zeros)),
            Job::Add(batch) => {
                if let Some(Ok(s)) = sum.as_mut() {
                    if let Err(e) = batch(s) {
                        sum = Some(Err(e));
                    }
                }
            }
            Job::Take => {
                if sums.send(sum.take().transpose()).is_err() {
                    return;
                }
            }
        }
    }
}

impl Drop for Adder {
    fn drop(&mut self) {
        // With no sum begun the thread holds nothing: it ends on its own
        // once its channel closes, and nothing waits for it (joining it
        // took up to 0.26 ms of every job's end).
        if !self.begun {
            if let Some(r) = self.running.as_mut() {
                drop(r.thread.take());
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // The thread ends with its channel; what it holds (a device's
        // page-locked sums) goes before the devices do.
        drop(self.jobs.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::random::{self, Rng};
    use crate::model::CovKind;
    use crate::stats::UpdateFlags;

    fn shape() -> ModelAccumulators {
        let mut rng = Rng::new(3);
        let model = random::model(&mut rng, &[3, 1, 4], 2, CovKind::Diagonal);
        ModelAccumulators::zeros(&model, UpdateFlags::default())
    }

    /// A batch of values `k`, `k + 1`, … in every sum.
    fn batch(shape: &ModelAccumulators, k: f64) -> ModelAccumulators {
        let mut b = shape.zeros_like();
        let mut v = k;
        for s in &mut b.states {
            for x in s
                .occupancy
                .iter_mut()
                .chain(&mut s.mean_acc)
                .chain(&mut s.var_acc)
            {
                *x = v;
                v = v * 1.37 + 0.1;
            }
        }
        b.total_like = -k;
        b.total_frames = k / 3.0;
        b
    }

    /// The adder's sum is the same bits as adding each batch in turn into
    /// zeros, period after period; a period with no batch gives `None`.
    #[test]
    fn the_sum_is_the_batches_added_in_order() {
        let s = shape();
        let mut adder = Adder::default();
        assert!(adder.take().unwrap().is_none());
        for period in 0..3 {
            let mut want = s.zeros_like();
            for i in 0..20 {
                let b = batch(&s, 1e-3 * (i as f64) + period as f64 + 0.3);
                want.add(&b);
                adder
                    .add(
                        &s,
                        Box::new(move |acc: &mut ModelAccumulators| {
                            acc.add(&b);
                            Ok(())
                        }),
                    )
                    .unwrap();
            }
            let got = adder.take().unwrap().expect("a sum");
            assert_eq!(format!("{got:?}"), format!("{want:?}"));
            assert!(adder.take().unwrap().is_none());
        }
    }

    /// An add's error comes back at the take, and the next period starts
    /// clean; an add that panics is an error, not a hang.
    #[test]
    fn errors_and_panics_come_back_at_the_take() {
        let s = shape();
        let mut adder = Adder::default();
        let fail: AddLater = Box::new(|_| Err(Error::Engine("a bad batch".into())));
        adder.add(&s, fail).unwrap();
        adder.add(&s, Box::new(|_| Ok(()))).unwrap();
        let e = adder.take().unwrap_err().to_string();
        assert!(e.contains("a bad batch"), "{e}");
        adder.add(&s, Box::new(|_| Ok(()))).unwrap();
        assert!(adder.take().unwrap().is_some());
        adder.add(&s, Box::new(|_| panic!("boom"))).unwrap();
        let e = adder.take().unwrap_err().to_string();
        assert!(e.contains("stopped"), "{e}");
    }
}
