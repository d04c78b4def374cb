//! State log-likelihoods on the padded blocks: the block-scoring kernels'
//! launch, a call scored chunk by chunk, and the tables of a batch scored
//! against subsets of the states.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, LaunchConfig, PushKernelArg};

use super::forms::BlockDev;
use super::{timed, CudaModel};
use crate::engine::cuda::driver_err;
use crate::engine::{FrameBatch, StateSubsets};
use crate::{Error, Result};

/// The per-frame tables of `gather_columns` for a batch's state subsets.
pub(super) struct SubsetTables {
    /// Per frame, where its output row starts (one more entry: the total).
    pub(super) row_out: Vec<u64>,
    /// Per frame, its utterance's first entry in `states` and its count.
    pub(super) cols: Vec<i32>,
    /// Every utterance's states, one after another (never empty: a lone 0
    /// when none, which no frame reads).
    pub(super) states: Vec<u32>,
}

impl SubsetTables {
    pub(super) fn new(subsets: &StateSubsets) -> Self {
        let frames = subsets.total_frames();
        let mut t = SubsetTables {
            row_out: Vec::with_capacity(frames + 1),
            cols: Vec::with_capacity(2 * frames),
            states: Vec::new(),
        };
        let mut at = 0u64;
        for u in 0..subsets.len() {
            let st = subsets.states(u);
            let first = t.states.len() as i32;
            t.states.extend_from_slice(st);
            for _ in 0..subsets.frames(u) {
                t.row_out.push(at);
                t.cols.extend([first, st.len() as i32]);
                at += st.len() as u64;
            }
        }
        t.row_out.push(at);
        if t.states.is_empty() {
            t.states.push(0);
        }
        t
    }
}

/// A device scratch buffer of at least `need` floats: `kept` when it is
/// large enough, else a new one. Its contents are not initialised: callers
/// write every value a kernel reads.
pub(super) fn scratch(
    stream: &Arc<CudaStream>,
    kept: Option<CudaSlice<f32>>,
    need: usize,
    what: &str,
) -> Result<CudaSlice<f32>> {
    match kept {
        Some(b) if b.len() >= need => Ok(b),
        // SAFETY: see above; the callers write before they read.
        _ => unsafe { stream.alloc::<f32>(need) }
            .map_err(|e| Error::Engine(format!("CUDA: allocating {what}: {e}"))),
    }
}

impl CudaModel<'_> {
    /// Splits of the tensor-core scoring: enough CTAs for about four waves
    /// when `n` frames alone would leave SMs idle, each split still walking
    /// at least 16 slots of its block.
    /// (The K-chunked kernel walks a slot in many stages: one slot a split
    /// is enough there.)
    fn score_splits(&self, n: usize, blk: &BlockDev) -> usize {
        let tiles = n.div_ceil(self.k.shape.score_tile()) * blk.layout.num_blocks();
        let want = (4 * self.eng.multiprocessors()).div_ceil(tiles.max(1));
        let min_slots = if self.k.shape.kc > 0 { 1 } else { 16 };
        want.min(blk.layout.max_block_gaussians() / min_slots)
            .max(1)
    }

    /// Enqueue block scoring for `n` frames on the device; `out` gets n × S.
    /// The work is split as for a chunk of `chunk` frames (≥ n): the frames
    /// are part of such a chunk, and every row gets the bits the whole
    /// chunk gives it.
    pub(super) fn launch_block_score(
        &mut self,
        feats: &CudaView<'_, f32>,
        n: usize,
        chunk: usize,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let blk = self
            .blk
            .as_ref()
            .ok_or_else(|| Error::Engine("block layout missing".into()))?;
        let sh = self.k.shape;
        let (t, s) = (n as i32, self.state_ng.len() as i32);
        let stream = &self.eng.stream;
        let tc = self
            .k
            .block_score_tc
            .as_ref()
            .filter(|_| !self.fp32_scoring);
        let Some(func) = tc else {
            let cfg = LaunchConfig {
                grid_dim: (n.div_ceil(sh.tf) as u32, blk.layout.num_blocks() as u32, 1),
                block_dim: (sh.threads() as u32, 1, 1),
                shared_mem_bytes: sh.smem_score() as u32,
            };
            let mut lb = stream.launch_builder(&self.k.block_score);
            lb.arg(feats)
                .arg(&t)
                .arg(&blk.w)
                .arg(&blk.off)
                .arg(&blk.slots)
                .arg(&blk.lane_state)
                .arg(out)
                .arg(&s);
            // SAFETY: argument types and counts match the kernel; sizes were checked.
            unsafe { lb.launch(cfg) }.map_err(driver_err("block_score"))?;
            return Ok(());
        };
        let splits = self.score_splits(chunk.max(n), blk);
        let need = 2 * splits * n * self.state_ng.len();
        // Every pair a merge reads is written by the scoring first.
        let mut part = scratch(stream, self.split_part.take(), need.max(2), "split scratch")?;
        let tiles = n.div_ceil(sh.score_tile());
        let cfg = LaunchConfig {
            grid_dim: (tiles as u32, blk.layout.num_blocks() as u32, splits as u32),
            block_dim: (32 * sh.tcw as u32, 1, 1),
            shared_mem_bytes: sh.smem_tc() as u32,
        };
        let mut zq = None;
        if let Some(zfrag) = &self.k.zfrag_plain {
            // z of every 16-frame group the CTAs read, in operand order.
            let groups = tiles * sh.tcw;
            let need = groups * sh.ks() * 128;
            // zfrag_plain writes all `need` floats before the scoring reads them.
            let mut buf = scratch(stream, self.zq.take(), need, "the z operand")?;
            let zcfg = LaunchConfig {
                grid_dim: (groups as u32, sh.ks() as u32, 1),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut lb = stream.launch_builder(zfrag);
            lb.arg(feats).arg(&t).arg(&mut buf);
            // SAFETY: argument types and counts match the kernel; `buf` holds
            // groups × KS × 128 floats.
            unsafe { lb.launch(zcfg) }.map_err(driver_err("zfrag_plain"))?;
            zq = Some(buf);
        }
        let mut lb = stream.launch_builder(func);
        match &zq {
            Some(z) => lb.arg(z),
            None => lb.arg(feats),
        };
        lb.arg(&t)
            .arg(&blk.w)
            .arg(&blk.off)
            .arg(&blk.slots)
            .arg(&blk.lane_state)
            .arg(&mut *out)
            .arg(&s)
            .arg(&mut part);
        // SAFETY: argument types and counts match the kernel; `part` holds
        // splits × n × S pairs.
        unsafe { lb.launch(cfg) }.map_err(driver_err("block_score_tc"))?;
        if zq.is_some() {
            self.zq = zq;
        }
        if splits > 1 {
            let merge = self
                .k
                .merge_splits
                .as_ref()
                .ok_or_else(|| Error::Engine("merge_splits missing".into()))?;
            let elems = (n * self.state_ng.len()) as u64;
            let (sp, cfg) = (
                splits as i32,
                LaunchConfig {
                    grid_dim: (elems.div_ceil(256) as u32, 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                },
            );
            let mut lb = stream.launch_builder(merge);
            lb.arg(&part).arg(&sp).arg(&elems).arg(out);
            // SAFETY: as above.
            unsafe { lb.launch(cfg) }.map_err(driver_err("merge_splits"))?;
        }
        self.split_part = Some(part);
        Ok(())
    }

    /// Score rows `rows` of `feats` against every state, chunk by chunk:
    /// the chunks are those of the whole of `feats`, and each chunk's rows
    /// are scored with the work split of the whole chunk, so any rows get
    /// the bits the whole call gives them. Into a device buffer of
    /// `chunk frames × states` values; after each chunk's kernels,
    /// `take(stream, scores, r0, r1)` enqueues what takes rows `[r0, r1)`
    /// (row r0 at the buffer's start) out of it. Synchronises before it
    /// returns.
    pub(super) fn score_chunks(
        &mut self,
        feats: &FrameBatch<'_>,
        rows: Range<usize>,
        mut take: impl FnMut(&Arc<CudaStream>, &CudaSlice<f32>, usize, usize) -> Result<()>,
    ) -> Result<()> {
        self.timers.clear();
        self.ensure_blocks()?;
        let (d, s_count) = (feats.dim, self.state_ng.len());
        let nf = self.chunk_frames(feats.frames, 4 * (d + s_count))?;
        let s = self.eng.stream.clone();
        let e = driver_err("state log-likelihoods");
        let mut scores = s
            .alloc_zeros::<f32>(nf.min(rows.len()) * s_count)
            .map_err(&e)?;
        for c0 in (0..feats.frames).step_by(nf) {
            let c1 = (c0 + nf).min(feats.frames);
            let (r0, r1) = (c0.max(rows.start), c1.min(rows.end));
            if r0 >= r1 {
                continue;
            }
            let dev = s.clone_htod(&feats.data[r0 * d..r1 * d]).map_err(&e)?;
            let ev = timed(self.eng, &s, || {
                self.launch_block_score(&dev.as_view(), r1 - r0, c1 - c0, &mut scores)
            })?;
            self.timers.push(ev);
            take(&s, &scores, r0, r1)?;
        }
        s.synchronize().map_err(&e)?;
        Ok(())
    }
}
