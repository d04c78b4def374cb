//! Statistics of one batch kept apart from every other batch's
//! ([`LoadedModel::accumulate_apart`](crate::engine::LoadedModel::accumulate_apart),
//! for [`crate::engine::multi`]): each batch is summed from zero in device
//! accumulators of its own (two, taken in turn), and after its kernels the
//! sums are copied into page-locked host memory of the batch's own on the
//! engine's download stream. The next batch zeroes and fills the other
//! accumulators meanwhile (on the kernels' stream the copy of 2048 × 81
//! sums had left each device ~55 µs idle between batches); the batch after
//! it waits for the copy before it zeroes the first (the slices' events).
//! Nothing waits on the host until [`CudaModel::collect_apart_sums`] reads
//! the oldest batch's copy.

use cudarc::driver::{CudaEvent, CudaSlice, PinnedHostSlice};

use super::batch_trace::{self, DeviceClock};
use super::{add_sums, CudaModel, Source};
use crate::engine::adder::{self, AddLater};
use crate::engine::batch_trace::{send_span, send_start};
use crate::engine::cuda::{driver_err, plan};
use crate::engine::{FrameBatch, FrameTargets};
use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// A batch's sums on their way to the host (`None`: a batch of no frames).
pub(super) struct ApartBatch {
    copy: Option<ApartSums>,
    /// The timing events of its kernels.
    timers: Vec<(CudaEvent, CudaEvent)>,
    /// Its frames, and when the host sent it (`AMTOOL_BATCH_TRACE`).
    frames: usize,
    sent: Option<(f64, f64)>,
}

struct ApartSums {
    /// The device accumulators (Gaussians × kz).
    sums: PinnedHostSlice<f64>,
    /// Σ weight × log-likelihood.
    total: PinnedHostSlice<f64>,
    /// Its device copy, let go of once collected: freeing it at the send
    /// made the kernels' stream wait for the download stream's copies (the
    /// slice's read event), ~55 µs between batches.
    _device_total: CudaSlice<f64>,
    /// Σ weight, known on the host.
    weight: f64,
    /// When the download was done (`AMTOOL_BATCH_TRACE` only).
    downloaded: Option<CudaEvent>,
}

impl CudaModel<'_> {
    /// Enqueues the statistics of `feats` (frames in `src` memory) as a
    /// batch of their own; `shape` is checked as the accumulators they will
    /// be added into.
    pub(super) fn send_apart(
        &mut self,
        feats: &FrameBatch<'_>,
        targets: &FrameTargets<'_>,
        shape: &ModelAccumulators,
        src: Source<'_>,
    ) -> Result<()> {
        super::check_dim("statistics", feats.dim, self.model.dim)?;
        self.check_acc(shape)?;
        plan::validate(targets, feats.frames, &self.state_ng)?;
        if feats.frames == 0 {
            self.apart.push_back(ApartBatch {
                copy: None,
                timers: Vec::new(),
                frames: 0,
                sent: None,
            });
            return Ok(());
        }
        self.start_batch_clock()?;
        let start = send_start();
        // Where a send's host time goes (`amtool bench`'s `host_*` keys,
        // summed over the devices' threads; the chunks' own steps are
        // `stage` and `stats_chunk`).
        let _t = crate::timeline::Tally::start("send_apart");
        let mut pend = crate::timeline::tally("begin_pending", || self.begin_pending())?;
        let r = self.enqueue_stats(feats, targets, src, &mut pend);
        let copy = crate::timeline::tally("sums_download", || {
            r.and_then(|()| {
                let mut sums = self.eng.pinned.take_sums(pend.acc64.len())?;
                let mut total = self.eng.pinned.take_sums(1)?;
                let s = &self.eng.download_stream;
                let e = driver_err("downloading statistics");
                s.memcpy_dtoh(&pend.acc64, &mut sums).map_err(&e)?;
                s.memcpy_dtoh(&pend.total, &mut total).map_err(&e)?;
                let timing = cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
                let downloaded = match self.batch_clock.is_some() {
                    true => Some(s.record_event(Some(timing)).map_err(&e)?),
                    false => None,
                };
                Ok((sums, total, downloaded))
            })
        });
        let copy = copy.map(|(sums, total, downloaded)| ApartSums {
            sums,
            total,
            _device_total: pend.total,
            weight: pend.weight,
            downloaded,
        });
        // The next batch takes the other accumulators (made then, the
        // first time); the one after it zeroes these, after the copies.
        self.acc64 = self.acc64_spare.take();
        self.acc64_spare = Some(pend.acc64);
        self.apart.push_back(ApartBatch {
            copy: Some(copy?),
            timers: std::mem::take(&mut self.timers),
            frames: feats.frames,
            sent: send_span(start),
        });
        Ok(())
    }

    /// The batch trace's clock of this device, started once, when tracing
    /// is on (it waits for the stream: `prepare_statistics` starts it, so
    /// that no send waits for it).
    pub(super) fn start_batch_clock(&mut self) -> Result<()> {
        if self.batch_clock.is_none() {
            self.batch_clock = DeviceClock::start(&self.eng.stream)?;
        }
        Ok(())
    }

    /// Adds the oldest batch sent apart into `acc`; returns its Σ weight ×
    /// log-likelihood.
    pub(super) fn collect_apart_sums(&mut self, acc: &mut ModelAccumulators) -> Result<f64> {
        let (tot, add) = self.take_apart_sums(acc)?;
        add(acc)?;
        Ok(tot)
    }

    /// The oldest batch sent apart: its Σ weight × log-likelihood, and its
    /// sums to be added into accumulators shaped like `shape` (on any
    /// thread; the page-locked copy goes back to the pool then).
    pub(super) fn take_apart_sums(&mut self, shape: &ModelAccumulators) -> Result<(f64, AddLater)> {
        self.check_acc(shape)?;
        let batch = self
            .apart
            .pop_front()
            .ok_or_else(|| Error::Engine("no batch statistics are kept to collect".into()))?;
        let Some(c) = batch.copy else {
            return Ok((0.0, Box::new(|_: &mut ModelAccumulators| Ok(()))));
        };
        let e = driver_err("downloading statistics");
        // The copy of the total follows the sums': both are in place.
        let tot = c.total.as_slice().map_err(&e)?[0];
        if let (Some(clock), Some(sent)) = (&self.batch_clock, batch.sent) {
            let device = self.eng.ctx.ordinal();
            let (frames, timers) = (batch.frames, &batch.timers);
            batch_trace::report(clock, device, frames, sent, timers, c.downloaded.as_ref());
        }
        self.tally_device_time(batch.timers);
        let rows = self.row_shape();
        let first = self.state_first.clone();
        let pool = self.eng.pinned.clone();
        let add: AddLater = Box::new(move |acc: &mut ModelAccumulators| {
            let sums = c.sums.as_slice().map_err(&e)?;
            add_sums::add_batch(acc, sums, (tot, c.weight), &first, rows, adder::pool());
            pool.give_sums(c.sums);
            pool.give_sums(c.total);
            Ok(())
        });
        Ok((tot, add))
    }
}

impl CudaModel<'_> {
    /// Adds a collected batch's kernel time to `apart_kernels` and, while
    /// tallies are on (`amtool bench`), to `gpu_kernels`, and the time its device was idle since
    /// the kernels of the batch collected before it to `gpu_idle` (not the
    /// idle time before a run's first batch: the gap is taken only while
    /// batches follow one another).
    fn tally_device_time(&mut self, timers: Vec<(CudaEvent, CudaEvent)>) {
        let ms = |a: &CudaEvent, b: &CudaEvent| a.elapsed_ms(b).map(|t| f64::from(t) / 1e3);
        let Some(first) = timers.first() else {
            return;
        };
        if let Some(prev) = &self.apart_end {
            if let Ok(gap) = ms(prev, &first.0) {
                crate::timeline::add("gpu_idle", gap.max(0.0));
            }
        }
        let kernels: f64 = timers.iter().filter_map(|(a, b)| ms(a, b).ok()).sum();
        crate::timeline::add("gpu_kernels", kernels);
        self.apart_kernels += kernels;
        self.apart_end = match self.apart.is_empty() {
            true => None,
            false => timers.into_iter().last().map(|(_, b)| b),
        };
    }
}
