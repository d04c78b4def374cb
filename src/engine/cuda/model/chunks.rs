//! How a call's frames are cut into chunks and the device buffers they
//! stream through: the chunk size (fixed by the call and the device, so
//! the same inputs give the same bits), the streaming buffers, and each
//! chunk's copy to the device with its largest |x_d|.

use cudarc::driver::CudaSlice;

use super::{CudaModel, Source, CHUNK_FRAMES, ITEM_ENTRIES};
use crate::engine::cuda::driver_err;
use crate::engine::cuda::estep16::Estep16;
use crate::engine::cuda::gselect::Gselect;
use crate::engine::cuda::pinned::PinnedBuf;
use crate::engine::row_max;
use crate::engine::{FrameBatch, FrameTargets};
use crate::{Error, Result};

/// Frames the streaming and E-step buffers are made for at least, for a
/// call of [`FLOOR_FROM_FRAMES`] or more: the halves of a tool's full batch
/// (`train::acc_stats::BATCH_FRAMES`). Made at each size of a job's growing
/// batches, they took 1–2 ms a run on each device.
const STREAM_FLOOR_FRAMES: usize = 1 << 17;

/// Calls of fewer frames get buffers of their own size (a small job
/// allocates little).
const FLOOR_FROM_FRAMES: usize = 1 << 13;

/// Streaming buffers: two device buffers of `frames` frames, and two
/// page-locked halves for frames that come in ordinary memory (made on first
/// use).
pub(super) struct Stream {
    pub(super) frames: usize,
    pub(super) pinned: Option<[PinnedBuf; 2]>,
    pub(super) dev: [CudaSlice<f32>; 2],
}

/// Frames per chunk of a call of `frames` when chunks may take `cap`: a
/// call of fewer than two chunks' frames (a tool's batch of utterances) is
/// still cut in two, so the copy of the second half overlaps the kernels of
/// the first.
pub(in crate::engine::cuda) fn chunk_of(frames: usize, cap: usize) -> usize {
    let nf = match frames < 2 * cap && frames > 2 * ITEM_ENTRIES {
        true => frames.div_ceil(2).next_multiple_of(ITEM_ENTRIES),
        false => cap,
    };
    nf.min(frames.max(1))
}

impl CudaModel<'_> {
    /// Entries per statistics item for a chunk of `frames` frames:
    /// `ITEM_ENTRIES`, or fewer when the chunk's (state, Gaussian block)
    /// groups are too few to give every SM several items (one small GMM over
    /// all frames). A multiple of the tile; fixed by the chunk and the
    /// device, so results stay the same run after run.
    pub(super) fn item_entries(&self, frames: usize) -> usize {
        let gb = self.k.shape.gb;
        let gblocks: usize = self.state_ng.iter().map(|n| n.div_ceil(gb)).sum();
        let want = (frames * gblocks).div_ceil(8 * self.eng.multiprocessors());
        let tf = self.k.shape.tf;
        want.clamp(256, ITEM_ENTRIES).div_ceil(tf) * tf
    }

    /// `CHUNK_FRAMES`, halved while the buffers a chunk needs would take
    /// more than half the free device memory.
    fn chunk_cap(&self, bytes_per_frame: usize) -> Result<usize> {
        let (free, _) = self.eng.memory()?;
        let mut nf = CHUNK_FRAMES;
        while nf > ITEM_ENTRIES && nf * bytes_per_frame > free / 2 {
            nf /= 2;
        }
        Ok(nf)
    }

    /// Frames per chunk of a call of `frames`: [`Self::chunk_cap`], or two
    /// halves of a smaller call.
    pub(super) fn chunk_frames(&self, frames: usize, bytes_per_frame: usize) -> Result<usize> {
        Ok(chunk_of(frames, self.chunk_cap(bytes_per_frame)?))
    }

    fn ensure_streaming(&mut self, frames: usize) -> Result<()> {
        if self.streaming.as_ref().is_some_and(|s| s.frames >= frames) {
            return Ok(());
        }
        let _t = crate::timeline::Tally::start("device_alloc");
        self.streaming = None;
        let n = frames * self.model.dim;
        let e = driver_err("allocating streaming buffers");
        let dev = [
            self.eng.stream.alloc_zeros::<f32>(n).map_err(&e)?,
            self.eng.stream.alloc_zeros::<f32>(n).map_err(&e)?,
        ];
        self.streaming = Some(Stream {
            frames,
            pinned: None,
            dev,
        });
        crate::timeline::mark("device_alloc");
        Ok(())
    }

    /// Copy frames `[c0, c1)` into streaming buffer `b` (on the copy stream):
    /// from where they are when `src` is memory this model lent, else through
    /// page-locked half `b`. With `want_max`, also returns the largest |x_d|
    /// of those frames (taken while the copy runs, or while staging).
    pub(super) fn stage(
        &mut self,
        feats: &FrameBatch<'_>,
        c0: usize,
        c1: usize,
        b: usize,
        src: Source<'_>,
        want_max: bool,
    ) -> Result<Option<Vec<f32>>> {
        let d = feats.dim;
        let eng = self.eng;
        let st = self
            .streaming
            .as_mut()
            .ok_or_else(|| Error::Engine("streaming buffers missing".into()))?;
        let rows = &feats.data[c0 * d..c1 * d];
        let mut dst = st.dev[b].slice_mut(0..rows.len());
        let e = driver_err("copying features");
        let maxima = match src {
            Source::Plain => None,
            Source::Lent(maxima) => {
                eng.copy_stream.memcpy_htod(rows, &mut dst).map_err(&e)?;
                Some(maxima)
            }
            Source::Uploaded(_, maxima) => {
                // The frames of kept parts are not in host memory: the
                // maxima noted as the parts were sent (a chunk cut through
                // a part noted whole takes the part's, a bound).
                return match (want_max, maxima) {
                    (false, _) => Ok(None),
                    (true, Some(m)) if m.dim() == d => Ok(Some(m.noted_abs_max(c0..c1))),
                    (true, _) => Err(Error::Engine(
                        "the largest |x| of frames sent while gathered were not noted".into(),
                    )),
                };
            }
        };
        if let Some(maxima) = maxima {
            return Ok(want_max.then(|| {
                crate::timeline::tally("abs_max", || match maxima {
                    Some(m) if m.dim() == d => m.abs_max(feats.data, c0..c1),
                    _ => row_max::abs_max(rows, d),
                })
            }));
        }
        // Page-locked halves the size of the chunks streamed (not of the
        // device buffers, which may be made larger).
        if st.pinned.as_ref().is_none_or(|p| p[b].len() < rows.len()) {
            let n = rows.len();
            st.pinned = None;
            st.pinned = Some([
                PinnedBuf::new(&eng.pinned, n)?,
                PinnedBuf::new(&eng.pinned, n)?,
            ]);
        }
        let Some(half) = st.pinned.as_mut().map(|p| &mut p[b]) else {
            return Err(Error::Engine("streaming buffers missing".into()));
        };
        let host = &mut half.writable()?[..rows.len()];
        let xmax = if want_max {
            Some(row_max::copy_abs_max(rows, host, d))
        } else {
            host.copy_from_slice(rows);
            None
        };
        let copy = eng
            .copy_stream
            .memcpy_htod(&half.as_slice()[..rows.len()], &mut dst);
        // Recorded even after a failed copy: what was enqueued is waited for.
        half.copies_enqueued(&eng.copy_stream)?;
        copy.map_err(&e)?;
        Ok(xmax)
    }

    /// Frames per chunk of a statistics call of `frames` frames for
    /// `targets`, and the frames its buffers are made for: a job's batches
    /// grow from 16k frames to 256k, and its buffers are made once, for the
    /// chunks of a full batch.
    pub(super) fn stats_chunks(
        &self,
        frames: usize,
        targets: &FrameTargets<'_>,
    ) -> Result<(usize, usize)> {
        self.stats_chunks_with(frames, targets, self.e16_frame_bytes())
    }

    /// Device bytes a chunk's frame takes in the FP16 E-step's buffers (made
    /// or being made; none without them).
    fn e16_frame_bytes(&self) -> usize {
        match (&self.e16, &self.e16_making) {
            (Some(e), _) => e.bytes_per_frame(),
            (None, Some(_)) => Estep16::frame_bytes(self.model.dim, self.state_ng[0]),
            (None, None) => 0,
        }
    }

    /// The largest chunk of global statistics now (how the pieces of a
    /// batch sent while it is gathered are cut, see
    /// [`crate::engine::upload`]).
    pub(super) fn global_chunk_cap(&self) -> Result<usize> {
        self.stats_chunk_cap(&FrameTargets::Global, self.e16_frame_bytes())
    }

    /// [`stats_chunks`](Self::stats_chunks) with `e16_bytes` a frame for
    /// the FP16 E-step's buffers.
    fn stats_chunks_with(
        &self,
        frames: usize,
        targets: &FrameTargets<'_>,
        e16_bytes: usize,
    ) -> Result<(usize, usize)> {
        let cap = self.stats_chunk_cap(targets, e16_bytes)?;
        let nf = chunk_of(frames, cap);
        let room = match frames >= FLOOR_FROM_FRAMES {
            true => nf.max(STREAM_FLOOR_FRAMES.min(cap)),
            false => nf,
        };
        Ok((nf, room))
    }

    /// The largest chunk of statistics of `targets` the device's free
    /// memory takes, with `e16_bytes` a frame for the FP16 E-step's buffers.
    fn stats_chunk_cap(&self, targets: &FrameTargets<'_>, e16_bytes: usize) -> Result<usize> {
        let d = self.model.dim;
        // Two feature buffers, entries, and the partial sums of the items.
        let per_frame = 8 * d
            + 12
            + (self.k.shape.gb * self.kz * 4 * self.state_ng.len().min(64)).div_ceil(ITEM_ENTRIES)
            + e16_bytes
            + self.efull.as_ref().map_or(0, |e| e.bytes_per_frame())
            + match targets {
                FrameTargets::Selected(sel) => {
                    let selected = sel.offsets.len().saturating_sub(1).max(1);
                    let pairs = sel.components.len() as f64 / selected as f64;
                    Gselect::bytes_per_frame(pairs, self.kz)
                }
                _ => 0,
            };
        crate::timeline::tally("chunk_cap", || self.chunk_cap(per_frame))
    }

    /// The streaming buffers (and the E-step's) made for chunks of `room`
    /// frames.
    pub(super) fn reserve_stats(&mut self, room: usize) -> Result<()> {
        if let Some(e) = &mut self.e16 {
            e.reserve(room);
        }
        self.ensure_streaming(room)
    }

    /// At a job's start, makes the model's forms and the device memory its
    /// batches of `targets` take (the streaming and E-step buffers for a
    /// full batch's chunks, and the accumulators): `prepare_statistics` runs
    /// on every device at once, where each device's first send made it, one
    /// device after another on the sending thread. The FP16 E-step's forms
    /// and buffers are made by a thread of their own
    /// ([`Self::start_making_e16`]).
    pub(super) fn reserve_first_batch(&mut self, targets: &FrameTargets<'_>) -> Result<()> {
        let frames = match targets {
            FrameTargets::Selected(sel) => sel.offsets.len().saturating_sub(1),
            _ => STREAM_FLOOR_FRAMES,
        };
        // The FP16 E-step's forms are made in the background when they are
        // what the batches take (the other forms here, as each send would).
        let in_background = self.e16.is_none()
            && self.e16_making.is_none()
            && self.e16_wanted(targets)
            && !self.efull_wanted(targets);
        if !in_background {
            self.ensure_stats_model(targets)?;
        }
        let e16_bytes = match in_background {
            true => Estep16::frame_bytes(self.model.dim, self.state_ng[0]),
            false => self.e16_frame_bytes(),
        };
        let (_, room) =
            self.stats_chunks_with(frames.max(FLOOR_FROM_FRAMES), targets, e16_bytes)?;
        self.reserve_stats(room)?;
        if in_background {
            self.start_making_e16(room)?;
        }
        if let Some(e) = &mut self.e16 {
            e.make_room(&self.eng.stream, self.eng.multiprocessors())?;
        }
        if self.acc64.is_none() {
            let n = (self.total_gaussians * self.kz).max(1);
            let a = self.eng.stream.alloc_zeros::<f64>(n);
            self.acc64 = Some(a.map_err(driver_err("allocating accumulators"))?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool's batch goes in two halves (the second's copy overlaps the
    /// first's kernels); a long call in chunks of the cap; a small one
    /// whole.
    #[test]
    fn chunks_of_a_call() {
        assert_eq!(chunk_of(262_000, CHUNK_FRAMES), 131_072);
        assert_eq!(chunk_of(3_125_506, CHUNK_FRAMES), CHUNK_FRAMES);
        assert_eq!(chunk_of(3_125_506, 1 << 18), 1 << 18);
        assert_eq!(chunk_of(5_000, CHUNK_FRAMES), 5_000);
        assert_eq!(chunk_of(0, CHUNK_FRAMES), 1);
    }
}
