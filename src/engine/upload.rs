//! A batch's kept parts taken to the device as they are gathered, through
//! small staging buffers the engine reuses while they are still in the
//! host's cache ([`Upload`]), instead of copied into the batch's own
//! page-locked buffer and read from there by the device at the send.
//!
//! Why: copied into the batch buffer, every byte crossed the host's memory
//! three times (read from the page cache, written to the buffer, read by the
//! DMA); on two GPUs that copy took longer than the devices' kernels
//! (docs/performance.md, sixteenth session: 0.5 GB in 13.6 ms against 8.9 ms
//! through a ring of 1 MB cacheable buffers). Through a staging buffer that
//! is still cached, only the first crossing is left.
//!
//! The batch's host memory then holds only the frames pushed into it (not
//! kept): those go to the device from where they are
//! ([`Upload::in_place`]). The FP16 scales' maxima of the staged rows are
//! noted per [`MAX_ROWS`]-row block of the batch (aligned to the batch's
//! rows), so that a chunk whose boundaries are multiples of it never reads
//! the batch's host memory for them (`RowMaxima::abs_max` reads only rows
//! of no note).

use std::ops::Range;

use rayon::prelude::*;

use super::host_frames::FrameSource;
use super::row_max::{block_abs_max, RowMaxima};

/// Rows of the blocks the staged rows' maxima are noted by: the chunks an
/// engine cuts a batch into must start at multiples of it.
pub const MAX_ROWS: usize = 64;

/// An engine's way to its device for one batch.
pub trait Upload: Send + Sync {
    /// Floats a staging buffer holds (a part longer than that is staged
    /// alone, in a buffer of its length).
    fn piece_floats(&self) -> usize;
    /// Stages `n` floats that `fill` writes and sends them to floats
    /// `[at, at + n)` of the batch's device copy; false on a driver error.
    fn staged(&self, at: usize, n: usize, fill: &mut dyn FnMut(&mut [f32])) -> bool;
    /// Sends floats `[at, at + n)` of the batch's host memory (written
    /// before the gather) to the same place of its device copy.
    fn in_place(&self, at: usize, n: usize) -> bool;
}

/// The pieces of a batch of `len` floats whose kept parts start at `ats`
/// (in order, with `floats` each): runs of parts of at most `limit` floats
/// (a longer part alone), and the ranges between them (frames pushed), which
/// go from where they are. Every float of `[0, len)` is in one piece.
#[derive(Debug, PartialEq)]
pub struct Pieces {
    /// Each run: its range in the batch and its parts (indices).
    pub runs: Vec<(Range<usize>, Range<usize>)>,
    pub gaps: Vec<Range<usize>>,
}

pub fn pieces(parts: &[(usize, usize)], len: usize, limit: usize) -> Pieces {
    let mut runs: Vec<(Range<usize>, Range<usize>)> = Vec::new();
    let mut gaps = Vec::new();
    let mut at = 0;
    for (i, &(p0, n)) in parts.iter().enumerate() {
        if p0 > at {
            gaps.push(at..p0);
        }
        let p1 = p0 + n;
        match runs.last_mut() {
            Some((r, idx)) if r.end == p0 && p1 - r.start <= limit => {
                r.end = p1;
                idx.end = i + 1;
            }
            _ => runs.push((p0..p1, i..i + 1)),
        }
        at = p1;
    }
    if len > at {
        gaps.push(at..len);
    }
    Pieces { runs, gaps }
}

/// The kept `parts` (each at its float offset) of a batch of `len` floats
/// sent through `up`, their maxima noted into `maxima` by blocks of
/// [`MAX_ROWS`] rows; the frames between them sent from the batch's host
/// memory. False when a piece could not be sent (the device copy is then
/// not whole).
pub fn upload_parts(
    parts: &[(usize, &dyn FrameSource)],
    len: usize,
    up: &dyn Upload,
    maxima: &mut Option<RowMaxima>,
) -> bool {
    let spans: Vec<(usize, usize)> = parts.iter().map(|(at, p)| (*at, p.floats())).collect();
    let plan = pieces(&spans, len, up.piece_floats().max(1));
    let dim = maxima.as_ref().map(|m| m.dim().max(1));
    let runs: Vec<(bool, Vec<(Range<usize>, Vec<f32>)>)> = plan
        .runs
        .par_iter()
        .map(|(range, idx)| {
            let mut notes = Vec::new();
            let ok = up.staged(range.start, range.len(), &mut |slot| {
                for (at, p) in &parts[idx.clone()] {
                    p.copy_to(&mut slot[at - range.start..at - range.start + p.floats()]);
                }
                if let Some(d) = dim {
                    notes = block_notes(slot, range.start, d);
                }
            });
            (ok, notes)
        })
        .collect();
    let mut ok = plan.gaps.iter().all(|g| up.in_place(g.start, g.len()));
    for (sent, notes) in runs {
        ok &= sent;
        if let Some(rm) = maxima.as_mut() {
            for (rows, max) in notes {
                rm.note(rows, max);
            }
        }
    }
    ok
}

/// The maxima of the rows of `slot` (which starts at float `at` of the
/// batch), by blocks of [`MAX_ROWS`] batch rows: (rows, maxima) in order.
fn block_notes(slot: &[f32], at: usize, dim: usize) -> Vec<(Range<usize>, Vec<f32>)> {
    let (r0, r1) = (at / dim, (at + slot.len()) / dim);
    let mut notes = Vec::new();
    let mut r = r0;
    while r < r1 {
        let end = ((r / MAX_ROWS + 1) * MAX_ROWS).min(r1);
        let rows = &slot[(r - r0) * dim..(end - r0) * dim];
        notes.push((r..end, block_abs_max(rows, dim)));
        r = end;
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn pieces_cover_the_batch_in_runs_and_gaps() {
        // Parts of 4, 4, 4 floats at 0, 4, 8; a gap 12..14; parts at 14
        // (10 floats) and 24 (2); a gap to 30.
        let parts = [(0, 4), (4, 4), (8, 4), (14, 10), (24, 2)];
        let p = pieces(&parts, 30, 8);
        assert_eq!(p.runs, vec![(0..8, 0..2), (8..12, 2..3), (14..24, 3..4), (24..26, 4..5)]);
        assert_eq!(p.gaps, vec![12..14, 26..30]);
        let none = pieces(&[], 5, 8);
        assert_eq!((none.runs, none.gaps), (vec![], vec![0..5]));
    }

    /// A device copy on the host: what was staged and sent in place lands
    /// at its floats; `fail_at` makes the piece starting there fail.
    struct Copy {
        dev: Mutex<Vec<f32>>,
        host: Vec<f32>,
        limit: usize,
        fail_at: Option<usize>,
    }

    impl Upload for Copy {
        fn piece_floats(&self) -> usize {
            self.limit
        }
        fn staged(&self, at: usize, n: usize, fill: &mut dyn FnMut(&mut [f32])) -> bool {
            // A reused buffer: stale values a fill that missed one would leave.
            let mut slot = vec![f32::NAN; n];
            fill(&mut slot);
            self.dev.lock().unwrap()[at..at + n].copy_from_slice(&slot);
            self.fail_at != Some(at)
        }
        fn in_place(&self, at: usize, n: usize) -> bool {
            self.dev.lock().unwrap()[at..at + n].copy_from_slice(&self.host[at..at + n]);
            true
        }
    }

    /// Every float reaches the device copy (parts staged, pushed frames in
    /// place), and the noted maxima give, over chunks starting at multiples
    /// of MAX_ROWS, the maxima of the rows themselves without reading the
    /// host memory of the staged rows.
    #[test]
    fn every_float_reaches_the_device_and_maxima_cover_aligned_chunks() {
        let d = 3;
        let rows = 300;
        let data: Vec<f32> = (0..rows * d)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * if i % 7 == 0 { 3.0 } else { 1.0 })
            .collect();
        // Parts of 50, 70, 1 rows; 9 rows pushed; then 100 and 70 rows.
        let sizes = [(0, 50), (50, 70), (120, 1), (130, 100), (230, 70)];
        let owned: Vec<Vec<f32>> = sizes
            .iter()
            .map(|&(r, n)| data[r * d..(r + n) * d].to_vec())
            .collect();
        let parts: Vec<(usize, &dyn FrameSource)> = sizes
            .iter()
            .zip(&owned)
            .map(|(&(r, _), v)| (r * d, v as &dyn FrameSource))
            .collect();
        // The host memory holds only the pushed rows (121..130); the rest
        // is what a reused buffer holds.
        let mut host = vec![-1e9f32; rows * d];
        host[121 * d..130 * d].copy_from_slice(&data[121 * d..130 * d]);
        let up = Copy {
            dev: Mutex::new(vec![f32::NAN; rows * d]),
            host: host.clone(),
            limit: 64 * d,
            fail_at: None,
        };
        let mut maxima = Some(RowMaxima::new(d));
        assert!(upload_parts(&parts, rows * d, &up, &mut maxima));
        let dev = up.dev.lock().unwrap().clone();
        assert_eq!(dev, data, "the device copy");
        let rm = maxima.unwrap();
        for (c0, c1) in [(0, 128), (128, 256), (256, 300), (0, 300), (64, 192)] {
            assert_eq!(
                rm.abs_max(&host, c0..c1),
                crate::engine::row_max::abs_max(&data[c0 * d..c1 * d], d),
                "rows {c0}..{c1}"
            );
        }
        // A failed piece says so.
        let bad = Copy {
            fail_at: Some(130 * d),
            ..up
        };
        assert!(!upload_parts(&parts, rows * d, &bad, &mut None));
    }
}
