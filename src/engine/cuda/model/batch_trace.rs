//! The device's side of `AMTOOL_BATCH_TRACE=1` or `2` ([`crate::engine::batch_trace`]):
//! a line per statistics batch of a multi-device run as it is collected,
//! its kernels' events put on the host's clock.

use cudarc::driver::{CudaEvent, CudaStream};

use crate::engine::batch_trace::{keep, now_ms, on};
use crate::engine::cuda::driver_err;
use crate::Result;

/// A device's events on the host's clock: an event recorded on an idle
/// stream, and the host's time then.
pub(super) struct DeviceClock {
    zero: CudaEvent,
    at_ms: f64,
}

impl DeviceClock {
    /// A clock for `stream` when tracing is on (waits for the stream).
    pub fn start(stream: &CudaStream) -> Result<Option<Self>> {
        if !on() {
            return Ok(None);
        }
        let e = driver_err("batch trace");
        stream.synchronize().map_err(&e)?;
        let timing = cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
        let zero = stream.record_event(Some(timing)).map_err(&e)?;
        zero.synchronize().map_err(&e)?;
        Ok(Some(DeviceClock {
            zero,
            at_ms: now_ms(),
        }))
    }

    fn ms(&self, ev: &CudaEvent) -> f64 {
        self.zero
            .elapsed_ms(ev)
            .map_or(f64::NAN, |t| self.at_ms + f64::from(t))
    }
}

/// Prints a collected batch's line (its kernels have run).
pub(super) fn report(
    clock: &DeviceClock,
    device: usize,
    frames: usize,
    sent: (f64, f64),
    timers: &[(CudaEvent, CudaEvent)],
    downloaded: Option<&CudaEvent>,
) {
    let downloaded = downloaded.map_or(f64::NAN, |e| clock.ms(e));
    let kernels: Vec<String> = timers
        .iter()
        .map(|(a, b)| format!("{:.3}-{:.3}", clock.ms(a), clock.ms(b)))
        .collect();
    keep(format!(
        "LOG (amtool) batch: device={device} frames={frames} sent={:.3}-{:.3} kernels={} collected={:.3} downloaded={downloaded:.3}",
        sent.0,
        sent.1,
        kernels.join(","),
        now_ms()
    ));
}
