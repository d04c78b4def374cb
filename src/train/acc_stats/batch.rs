//! The batches of [`super`]: utterances queued for one engine call, how
//! big each may grow ([`batch_limit`]), and the frames they wait with.

use std::ops::Range;

use amtool_formats::kaldi::matrix::SharedMatrix;

use super::UttFeats;
use crate::engine::{FrameSource, FrameTargets, HostFrames, LoadedModel, Selection};
use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// Frames queued before one engine call (about 5 MB of 39-dim features).
pub const BATCH_FRAMES: usize = 1 << 18;
/// Room of the first batch buffer (doubled each time a batch fills, up to
/// [`BATCH_FRAMES`]).
pub const FIRST_BATCH_FRAMES: usize = 1 << 14;

/// The most frames of a batch that starts where `left` frames of the input
/// are left (its first utterance's and those after it; `None`: not known):
/// [`BATCH_FRAMES`], but near the end of a mapped archive half of what is
/// left (not below a quarter batch: smaller ones cost the kernels more a
/// frame than they save), so that the last batches
/// shrink and the devices, given batches by the frames each has, finish
/// together instead of one computing a full last batch alone. What such a
/// batch would leave behind, when less than a quarter of it, goes with it:
/// a batch costs the GPU's kernels ~0.12 ms beyond what its frames take
/// (docs/performance.md, thirty-first session), and a job's last one, its
/// leftover utterances, was often a few hundred frames. It depends on the
/// input only, never on the devices: the statistics' bits depend on where
/// batches are cut.
pub fn batch_limit(left: Option<usize>) -> usize {
    match left {
        Some(n) => {
            let limit = (n / 2).clamp(BATCH_FRAMES / 4, BATCH_FRAMES);
            match n.saturating_sub(limit) < limit / 4 {
                true => n.max(limit),
                false => limit,
            }
        }
        None => BATCH_FRAMES,
    }
}

/// An utterance waiting in a batch to be copied in.
pub(super) enum Part {
    Owned(Vec<f32>),
    Shared(SharedMatrix),
}

impl FrameSource for Part {
    fn floats(&self) -> usize {
        match self {
            Part::Owned(v) => v.len(),
            Part::Shared(m) => m.rows() * m.cols(),
        }
    }

    fn copy_to(&self, dst: &mut [f32]) {
        match self {
            Part::Owned(v) => dst.copy_from_slice(v),
            // Read, not copied from the map (see `copy_max::read_abs_max`).
            Part::Shared(m) => {
                if !m.read_f32_at(0..dst.len(), dst) {
                    m.raw().copy_to_f32(dst)
                }
            }
        }
    }

    fn copy_abs_max(&self, dst: &mut [f32], dim: usize) -> Vec<f32> {
        match self {
            Part::Owned(v) => v.copy_abs_max(dst, dim),
            Part::Shared(m) => {
                let read = |floats, into: &mut [f32]| m.read_f32_at(floats, into);
                crate::engine::copy_max::read_abs_max(read, dst, dim)
                    .unwrap_or_else(|| crate::engine::copy_max::copy_abs_max(&m.raw(), dst, dim))
            }
        }
    }

    fn copy_range_abs_max(&self, floats: Range<usize>, dst: &mut [f32], dim: usize) -> Vec<f32> {
        match self {
            Part::Owned(v) => v.copy_range_abs_max(floats, dst, dim),
            Part::Shared(m) => {
                if m.read_f32_at(floats.clone(), dst) {
                    return crate::engine::copy_max::abs_max(dst, dim);
                }
                crate::engine::copy_max::copy_range_abs_max(&m.raw(), floats, dst, dim)
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Mode {
    Global,
    Aligned,
    Weighted,
    Selected,
}

/// Utterances queued for one engine call: their frames back to back (in
/// memory the engine lent, so each frame is copied once on the host) and
/// their targets in one of the engine's forms. Utterances handed over as
/// owned vectors or parts of a mapped archive wait in `parts`; `feats`
/// takes them when the batch is sent (or before a borrowed one, to keep the
/// order) and copies them in together, in parallel, by the time the engine
/// reads them (see [`HostFrames::keep_parts`]).
#[derive(Default)]
pub(super) struct Batch {
    mode: Option<Mode>,
    feats: HostFrames,
    /// Frames a batch holds before it is sent: the room asked of the
    /// engine, not the room it gave (a pooled buffer may be larger), so
    /// the batches are the same whatever the engine and its devices.
    room: usize,
    /// The most frames of this batch ([`batch_limit`], set by its first
    /// utterance).
    limit: usize,
    parts: Vec<Part>,
    /// Frames queued, in `feats` and `parts`.
    frames: usize,
    pub(super) states: Vec<u32>,
    pub(super) offsets: Vec<usize>,
    pub(super) pairs: Vec<(u32, f32)>,
    /// Gaussian selection: the components of each frame (bounds in
    /// `offsets`) and each frame's weight.
    pub(super) components: Vec<u32>,
    pub(super) weights: Vec<f32>,
}

impl Batch {
    /// Make room for an utterance of `mode` (`rows` frames, `feats`): sends
    /// what is queued first when the mode changes or the batch is full (its
    /// room, or its [`batch_limit`] from what `feats` tells of the input
    /// left). Returns the like of a send.
    pub(super) fn prepare(
        &mut self,
        mode: Mode,
        rows: usize,
        feats: &UttFeats<'_>,
        dim: usize,
        loaded: &mut dyn LoadedModel,
        accs: &mut ModelAccumulators,
    ) -> Result<f64> {
        let mut like = 0.0;
        let room = self.room;
        let over_batch = self.frames + rows > BATCH_FRAMES;
        let over_room = self.frames + rows > room;
        // The limit (at most a batch) of a batch begun.
        let over_limit = self.frames + rows > self.limit;
        if self.mode.is_some_and(|m| m != mode) || ((over_room || over_limit) && self.frames > 0) {
            like = self.flush(dim, loaded, accs)?;
        }
        if self.frames == 0 {
            self.limit = batch_limit(feats.frames_left(rows));
        }
        // Room grows as batches fill (page-locked memory costs time to get
        // and to give back: a small job never takes a whole batch's); an
        // utterance longer than a batch gets a buffer of its own size.
        if rows > room || (over_room && !over_batch && room < BATCH_FRAMES) {
            let want = (2 * room).clamp(FIRST_BATCH_FRAMES, BATCH_FRAMES).max(rows);
            self.feats = loaded.host_frames(want * dim)?;
            self.room = want;
        } else if self.feats.capacity() < self.room * dim {
            // The last batch's memory went with it (an engine lent it):
            // more is asked for when an utterance comes, not at its send
            // (a job's last send took a buffer it never used).
            self.feats = loaded.host_frames(self.room * dim)?;
        }
        if self.mode.is_none() {
            self.mode = Some(mode);
            if matches!(mode, Mode::Weighted | Mode::Selected) {
                self.offsets.push(0);
            }
        }
        loaded.send_copied(accs)?;
        Ok(like)
    }

    /// Queue an utterance's frames (after [`prepare`](Self::prepare) made room).
    pub(super) fn push_feats(
        &mut self,
        key: &str,
        feats: UttFeats<'_>,
        rows: usize,
        dim: usize,
    ) -> Result<()> {
        check_len(key, &feats, rows, dim)?;
        let part = match feats {
            UttFeats::Owned(v) => Part::Owned(v),
            UttFeats::Shared(m) => Part::Shared(m),
            UttFeats::Borrowed(f) => {
                // Copied now, after the room of the parts queued before it.
                self.keep()?;
                if !self.feats.push(f) {
                    return Err(no_room());
                }
                self.frames += rows;
                return Ok(());
            }
        };
        self.parts.push(part);
        self.frames += rows;
        Ok(())
    }

    /// Hand the utterances waiting in `parts` to `feats`, which takes
    /// their room now and copies them when the batch is sent (lent memory:
    /// on the thread that sends it, for several devices at once) or now.
    fn keep(&mut self) -> Result<()> {
        if !self.parts.is_empty() {
            let parts = self
                .parts
                .drain(..)
                .map(|p| Box::new(p) as Box<dyn FrameSource + Send>)
                .collect();
            if !self.feats.keep_parts(parts) {
                return Err(no_room());
            }
        }
        Ok(())
    }

    /// One engine call for everything queued; returns Σ weight ×
    /// log-likelihood where the engine knows it already (a GPU engine may
    /// still be computing: its statistics and likelihood come with
    /// [`Batch::settle`]).
    fn flush(
        &mut self,
        dim: usize,
        loaded: &mut dyn LoadedModel,
        accs: &mut ModelAccumulators,
    ) -> Result<f64> {
        let Some(mode) = self.mode else {
            return Ok(0.0);
        };
        self.keep()?;
        let like = if self.frames == 0 {
            0.0
        } else {
            let targets = match mode {
                Mode::Global => FrameTargets::Global,
                Mode::Aligned => FrameTargets::Aligned(&self.states),
                Mode::Weighted => FrameTargets::Weighted {
                    offsets: &self.offsets,
                    pairs: &self.pairs,
                },
                Mode::Selected => FrameTargets::Selected(Selection {
                    offsets: &self.offsets,
                    components: &self.components,
                    weights: Some(&self.weights),
                }),
            };
            crate::timeline::tally("send", || {
                loaded.accumulate_frames(&mut self.feats, dim, targets, accs)
            })?
            .unwrap_or(0.0)
        };
        self.mode = None;
        self.feats.clear();
        self.frames = 0;
        self.states.clear();
        self.offsets.clear();
        self.pairs.clear();
        self.components.clear();
        self.weights.clear();
        Ok(like)
    }

    /// Sends what is queued and waits for every batch sent: the statistics
    /// are all in `accs`; returns Σ weight × log-likelihood not yet counted.
    pub(super) fn settle(
        &mut self,
        dim: usize,
        loaded: &mut dyn LoadedModel,
        accs: &mut ModelAccumulators,
    ) -> Result<f64> {
        let like = self.flush(dim, loaded, accs)?;
        Ok(like + loaded.settle(accs)?)
    }
}

pub(super) fn check_len(key: &str, feats: &UttFeats<'_>, rows: usize, cols: usize) -> Result<()> {
    if feats.floats() != rows * cols {
        return Err(Error::Mismatch(format!(
            "utterance {key}: {} feature values for {rows} frames of dimension {cols}",
            feats.floats()
        )));
    }
    Ok(())
}

fn no_room() -> Error {
    Error::Engine("batch buffer has no room for an utterance".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::acc_stats::tests::mapped_archive;

    /// Resident pages of the process's mappings of `path` (Linux: the
    /// `Rss` lines of `/proc/self/smaps` under that file's mappings);
    /// `None` when it has none.
    #[cfg(target_os = "linux")]
    fn mapped_rss_kb(path: &std::path::Path) -> Option<usize> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let name = path.display().to_string();
        let mut inside = false;
        let mut kb = None;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                inside = line.trim_end().ends_with(&name);
            } else if inside && first == "Rss:" {
                let n: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
                kb = Some(kb.unwrap_or(0) + n);
            }
        }
        kb
    }

    /// A mapped archive's parts copied into a batch (with and without
    /// their maxima) are read, not copied from the map: the same floats
    /// and maxima, and no page of the map mapped, so that letting go of it
    /// costs nothing (unmapping a map whose pages were touched took ~6.5 ms
    /// a GB, at one GPU's job's end).
    #[test]
    #[cfg(target_os = "linux")]
    fn mapped_parts_are_read_without_touching_the_map() {
        let (d, lens) = (3, [70_000, 1, 33_333]);
        let mut rng = crate::bench::random::Rng::new(5);
        let frames: usize = lens.iter().sum();
        let mut data = crate::bench::random::features(&mut rng, frames, d);
        data[7 * d + 1] = -50.0;
        let (dir, feats) = mapped_archive(&data, &lens, d);
        let parts: Vec<Part> = feats
            .into_iter()
            .map(|f| match f {
                crate::train::prefetch::Features::Shared(m) => Part::Shared(m),
                _ => panic!("not a part of the map"),
            })
            .collect();
        let mut t = 0;
        for (part, n) in parts.iter().zip(lens) {
            let want = &data[t * d..(t + n) * d];
            let mut got = vec![f32::NAN; n * d];
            let max = part.copy_abs_max(&mut got, d);
            assert_eq!(got, want);
            assert_eq!(max, crate::engine::row_max::block_abs_max(want, d));
            let mut plain = vec![f32::NAN; n * d];
            part.copy_to(&mut plain);
            assert_eq!(plain, want);
            t += n;
        }
        assert_eq!(t, frames);
        // The parts hold the map.
        assert_eq!(mapped_rss_kb(&dir.path().join("f.ark")), Some(0));
        drop(parts);
    }

    /// Batches are full but near the end of what is known to be left, and
    /// the last one takes a small leftover along.
    #[test]
    fn batches_shrink_near_the_end_of_an_archive() {
        assert_eq!(batch_limit(None), BATCH_FRAMES);
        assert_eq!(batch_limit(Some(10 * BATCH_FRAMES)), BATCH_FRAMES);
        assert_eq!(batch_limit(Some(300_000)), 150_000);
        assert_eq!(batch_limit(Some(1000)), BATCH_FRAMES / 4);
        // A quarter batch and a few frames more: the last batch takes them.
        assert_eq!(
            batch_limit(Some(BATCH_FRAMES / 4 + 1506)),
            BATCH_FRAMES / 4 + 1506
        );
        let most = BATCH_FRAMES / 4 + BATCH_FRAMES / 16;
        assert_eq!(batch_limit(Some(most - 1)), most - 1);
        assert_eq!(batch_limit(Some(most)), BATCH_FRAMES / 4);
        assert_eq!(batch_limit(Some(90_000)), BATCH_FRAMES / 4);
        let mut rng = crate::bench::random::Rng::new(2);
        let lens = [3000, 5000, 1000];
        let data = crate::bench::random::features(&mut rng, 9000, 2);
        let (_dir, shared) = mapped_archive(&data, &lens, 2);
        let left: Vec<usize> = shared
            .iter()
            .zip(lens)
            .map(|(f, n)| UttFeats::from(f.clone()).frames_left(n).unwrap())
            .collect();
        // The headers between the matrices count as a few frames more.
        for (got, want) in left.iter().zip([9000, 6000, 1000]) {
            assert!(
                (want..want + 8).contains(got),
                "{got} frames left, {want} in the archive"
            );
        }
    }
}
