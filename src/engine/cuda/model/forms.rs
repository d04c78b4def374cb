//! The model's forms on the device, each made on first use: the padded
//! state blocks the scoring kernels read, the per-state blocks of the
//! statistics kernels, and state 0 laid out for the tensor-core E-steps
//! (the FP16 one made on a thread of its own at a job's start).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::CudaModel;
use crate::engine::cuda::compile::{scoring_z_order, KernelShape};
use crate::engine::cuda::driver_err;
use crate::engine::cuda::estep16::Estep16;
use crate::engine::cuda::estep_full::EstepFull;
use crate::engine::cuda::operands::to_fragments;
use crate::engine::FrameTargets;
use crate::layout::StateBlockLayout;
use crate::model::{AcousticModel, CovKind};
use crate::{Error, Result};

/// The padded-block arrays the block-scoring kernels read, built on the
/// host: the model's [`StateBlockLayout`] in blocks of the kernels' size and
/// the Gaussians' weight rows packed by it.
struct BlockHost {
    layout: StateBlockLayout,
    /// Weight rows w ([`weights_row`]) in `[slot][k][lane]` order.
    w: Vec<f32>,
    /// Per block, its first slot (the kernels' `block_off`).
    off: Vec<i32>,
    /// Per block, its slots (`block_slots`).
    slots: Vec<i32>,
    /// Per lane of every block, its original state or −1 (`lane_state`).
    lane_state: Vec<i32>,
}

impl BlockHost {
    pub(super) fn new(model: &AcousticModel, shape: &KernelShape) -> Self {
        let layout = StateBlockLayout::for_model(model, shape.block_states());
        // A virtual Gaussian's row: gconst (the last element) −∞, the rest 0.
        let mut pad = vec![0f32; shape.kz()];
        pad[shape.kz() - 1] = f32::NEG_INFINITY;
        let order = scoring_z_order(model.dim, model.kind);
        let w = layout.pack_rows(&pad, |state, g, row| {
            block_weights_row(model, &order, state, g, row)
        });
        let blocks = layout.num_blocks();
        BlockHost {
            w,
            off: layout.block_offsets[..blocks]
                .iter()
                .map(|&o| o as i32)
                .collect(),
            slots: layout.block_gaussians.iter().map(|&g| g as i32).collect(),
            lane_state: layout.lane_states(),
            layout,
        }
    }
}

/// The padded-block layout on the device.
pub(super) struct BlockDev {
    pub(super) layout: StateBlockLayout,
    pub(super) w: CudaSlice<f32>,
    pub(super) off: CudaSlice<i32>,
    pub(super) slots: CudaSlice<i32>,
    pub(super) lane_state: CudaSlice<i32>,
}

/// The per-state layout on the device.
pub(super) struct StateDev {
    pub(super) w: CudaSlice<f32>,
    pub(super) gblock: CudaSlice<i32>,
    pub(super) ng: CudaSlice<i32>,
}

/// Weight vector w of Gaussian `g` of `state` (see `kernels/gmm.cu`): the
/// log-likelihood is z(x)·w.
fn weights_row(model: &AcousticModel, state: usize, g: usize, out: &mut [f32]) {
    let d = model.dim;
    let s = &model.states[state];
    out[..d].copy_from_slice(&s.means_invvars[g * d..(g + 1) * d]);
    match model.kind {
        CovKind::Diagonal => {
            for (o, &iv) in out[d..2 * d]
                .iter_mut()
                .zip(&s.inv_vars[g * d..(g + 1) * d])
            {
                *o = -0.5 * iv;
            }
        }
        CovKind::Full => {
            let v = d * (d + 1) / 2;
            let p = &s.inv_vars[g * v..(g + 1) * v];
            let mut idx = 0;
            for i in 0..d {
                for j in 0..=i {
                    out[d + idx] = if i == j { -0.5 * p[idx] } else { -p[idx] };
                    idx += 1;
                }
            }
        }
    }
    let last = out.len() - 1;
    out[last] = s.gconsts[g];
}

/// State 0 of `model` laid out for the FP16 E-step, uploaded on `stream`.
/// `wg`: for the wgmma kernels (`KernelShape::wg`).
fn make_e16(stream: &Arc<CudaStream>, model: &AcousticModel, wg: bool) -> Result<Estep16> {
    Estep16::new(
        stream,
        model.dim,
        model.states[0].gconsts.len(),
        wg,
        |g, r| weights_row(model, 0, g, r),
    )
}

/// [`weights_row`] in the block-scoring kernels' z order `order`
/// ([`scoring_z_order`]: dimension by dimension, last first,
/// the gconst last).
fn block_weights_row(
    model: &AcousticModel,
    order: &[usize],
    state: usize,
    g: usize,
    out: &mut [f32],
) {
    thread_local! {
        static NATURAL: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    NATURAL.with(|n| {
        let mut natural = n.borrow_mut();
        natural.resize(out.len(), 0.0);
        weights_row(model, state, g, &mut natural);
        for (o, &k) in out.iter_mut().zip(order) {
            *o = natural[k];
        }
    });
}

impl CudaModel<'_> {
    /// Real and padded Gaussians of the block layout (padding overhead
    /// = padded / real − 1).
    pub fn block_padding(&mut self) -> Result<(usize, usize)> {
        self.ensure_blocks()?;
        let b = self
            .blk
            .as_ref()
            .ok_or_else(|| Error::Engine("block layout missing".into()))?;
        Ok((self.total_gaussians, b.layout.padded_gaussians()))
    }

    pub(super) fn ensure_blocks(&mut self) -> Result<()> {
        if self.blk.is_some() {
            return Ok(());
        }
        let host = BlockHost::new(&self.model, &self.k.shape);
        let s = &self.eng.stream;
        let e = driver_err("uploading the model");
        // The tensor-core kernel reads the same weights in its operand order.
        let w = if self.k.shape.tcw > 0 && !self.fp32_scoring {
            to_fragments(
                &host.w,
                self.kz,
                self.k.shape.ks(),
                host.layout.block_states,
            )
        } else {
            host.w
        };
        self.blk = Some(BlockDev {
            w: s.clone_htod(&w).map_err(&e)?,
            off: s.clone_htod(&host.off).map_err(&e)?,
            slots: s.clone_htod(&host.slots).map_err(&e)?,
            lane_state: s.clone_htod(&host.lane_state).map_err(&e)?,
            layout: host.layout,
        });
        Ok(())
    }

    pub(super) fn ensure_states(&mut self) -> Result<()> {
        if self.st.is_some() {
            return Ok(());
        }
        let _t = crate::timeline::Tally::start("model_upload");
        let gb = self.k.shape.gb;
        let kz = self.kz;
        let mut gblock = Vec::with_capacity(self.state_ng.len());
        let mut total = 0usize;
        for &n in &self.state_ng {
            gblock.push(total as i32);
            total += n.div_ceil(gb);
        }
        let mut w = vec![0f32; total * kz * gb];
        let mut row = vec![0f32; kz];
        for (state, &n) in self.state_ng.iter().enumerate() {
            for g in 0..n {
                weights_row(&self.model, state, g, &mut row);
                let base = (gblock[state] as usize + g / gb) * kz * gb + g % gb;
                for (k, &v) in row.iter().enumerate() {
                    w[base + k * gb] = v;
                }
            }
        }
        let ng: Vec<i32> = self.state_ng.iter().map(|&n| n as i32).collect();
        let s = &self.eng.stream;
        let e = driver_err("uploading the model");
        self.st = Some(StateDev {
            w: s.clone_htod(&w).map_err(&e)?,
            gblock: s.clone_htod(&gblock).map_err(&e)?,
            ng: s.clone_htod(&ng).map_err(&e)?,
        });
        crate::timeline::mark("model_upload");
        Ok(())
    }

    /// Whether statistics of this model may take a tensor-core E-step, which
    /// scales each chunk by its largest |x_d| (one GMM that has one).
    pub(super) fn may_scale_chunks(&self) -> bool {
        self.e16_wanted(&FrameTargets::Global) || self.efull_wanted(&FrameTargets::Global)
    }

    /// Whether statistics for `targets` can take the FP16 E-step
    /// (global statistics of a diagonal model on a device that has it).
    pub(super) fn e16_wanted(&self, targets: &FrameTargets<'_>) -> bool {
        matches!(targets, FrameTargets::Global)
            && self.k.estep16.is_some()
            && self.state_ng[0] >= self.e16_min_gaussians
    }

    /// Whether statistics for `targets` can take the full-covariance
    /// tensor-core E-step (global statistics of a full-covariance model on a
    /// device that has it).
    pub(super) fn efull_wanted(&self, targets: &FrameTargets<'_>) -> bool {
        matches!(targets, FrameTargets::Global)
            && self.k.estep_full.is_some()
            && self.state_ng[0] >= self.efull_min_gaussians
    }

    pub(super) fn ensure_efull(&mut self) -> Result<()> {
        if self.efull.is_some() {
            return Ok(());
        }
        let order = scoring_z_order(self.model.dim, self.model.kind);
        let rows: Vec<Vec<f32>> = (0..self.state_ng[0])
            .map(|g| {
                let mut r = vec![0f32; self.kz];
                block_weights_row(&self.model, &order, 0, g, &mut r);
                r
            })
            .collect();
        self.efull = Some(EstepFull::new(&self.eng.stream, self.model.dim, &rows)?);
        Ok(())
    }

    pub(super) fn ensure_e16(&mut self) -> Result<()> {
        if self.e16.is_some() {
            return Ok(());
        }
        if let Some(making) = self.e16_making.take() {
            let dev = self.eng.ctx.ordinal();
            crate::engine::batch_trace::mark_with(|| format!("e16-join-dev{dev}"));
            let made = making.join().map_err(|_| {
                Error::Engine("the thread making the E-step's forms of the model panicked".into())
            })?;
            crate::engine::batch_trace::mark_with(|| format!("e16-joined-dev{dev}"));
            self.e16 = Some(made?);
            return Ok(());
        }
        let _t = crate::timeline::Tally::start("model_upload");
        self.e16 = Some(make_e16(&self.eng.stream, &self.model, self.k.shape.wg)?);
        Ok(())
    }

    /// Starts making the FP16 E-step's forms on a thread of their own, with
    /// buffers for chunks of `room` frames: the host's part of it (the
    /// forms built in fresh memory, page by page) and the uploads took
    /// 0.5–2 ms of the thread that makes the devices ready, which then
    /// could not hold and copy a job's first batches.
    pub(super) fn start_making_e16(&mut self, room: usize) -> Result<()> {
        let (stream, model) = (self.eng.stream.clone(), self.model.clone());
        let sms = self.eng.multiprocessors();
        let wg = self.k.shape.wg;
        let thread = std::thread::Builder::new()
            .name("amtool-e16".into())
            .spawn(move || {
                let dev = stream.context().ordinal();
                crate::engine::batch_trace::mark_with(|| format!("e16-start-dev{dev}"));
                let mut e = make_e16(&stream, &model, wg)?;
                crate::engine::batch_trace::mark_with(|| format!("e16-forms-dev{dev}"));
                e.reserve(room);
                e.make_room(&stream, sms)?;
                crate::engine::batch_trace::mark_with(|| format!("e16-made-dev{dev}"));
                Ok(e)
            })
            .map_err(|e| {
                Error::Engine(format!("cannot start a thread for the E-step's forms: {e}"))
            })?;
        self.e16_making = Some(thread);
        Ok(())
    }

    pub(super) fn state_layout(&self) -> Result<&StateDev> {
        self.st
            .as_ref()
            .ok_or_else(|| Error::Engine("state layout missing".into()))
    }

    /// The model's forms the statistics of `targets` take: the tensor-core
    /// E-step's where it takes them (the FP32 kernels' state layout is
    /// uploaded only if a chunk falls back to them, see
    /// [`Self::fma_stats_chunk`]), else the state layout.
    pub(super) fn ensure_stats_model(&mut self, targets: &FrameTargets<'_>) -> Result<()> {
        let (e16, efull) = (self.e16_wanted(targets), self.efull_wanted(targets));
        if e16 {
            self.ensure_e16()?;
        }
        if efull {
            self.ensure_efull()?;
        }
        if !(e16 || efull) {
            self.ensure_states()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::random::{self, Rng};

    /// The arrays the block-scoring kernels get are the layout's, in blocks
    /// of the size the kernels are compiled for: every real Gaussian's weight
    /// row (bit for bit) in its state's lane, every virtual slot gconst −∞
    /// and 0 elsewhere. (These arrays were checked bit-identical to the
    /// engine's own packing before `layout.rs` took it over.)
    #[test]
    fn block_arrays_are_the_layouts_in_the_kernels_block_size() {
        for (kind, dim) in [(CovKind::Diagonal, 3), (CovKind::Full, 2)] {
            let counts: Vec<usize> = (0..150).map(|s| (s * 7) % 11).collect();
            let model = random::model(&mut Rng::new(dim as u64), &counts, dim, kind);
            let shape = KernelShape::for_model(dim, kind, 10);
            assert!(shape
                .prelude()
                .contains(&format!("#define LANES {}\n", shape.block_states())));
            let host = BlockHost::new(&model, &shape);
            let l = &host.layout;
            assert_eq!(
                *l,
                StateBlockLayout::for_model(&model, shape.block_states())
            );
            assert_eq!(host.lane_state, l.lane_states());
            assert_eq!(host.slots.len(), l.num_blocks());
            let (b, kz) = (l.block_states, shape.kz());
            let mut want = vec![0f32; kz];
            for blk in 0..l.num_blocks() {
                assert_eq!(host.off[blk] as usize, l.block_offsets[blk]);
                assert_eq!(host.slots[blk] as u32, l.block_gaussians[blk]);
                for lane in 0..b {
                    let state = host.lane_state[blk * b + lane];
                    for g in 0..host.slots[blk] as usize {
                        let slot = host.off[blk] as usize + g;
                        let got: Vec<f32> = (0..kz)
                            .map(|k| host.w[(slot * kz + k) * b + lane])
                            .collect();
                        if state >= 0 && g < counts[state as usize] {
                            let order = scoring_z_order(model.dim, model.kind);
                            block_weights_row(&model, &order, state as usize, g, &mut want);
                        } else {
                            want.fill(0.0);
                            want[kz - 1] = f32::NEG_INFINITY;
                        }
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&got), bits(&want), "block {blk} lane {lane} slot {g}");
                    }
                }
            }
        }
    }

    #[test]
    fn block_rows_pair_each_dimension_last_dimension_first() {
        let model = AcousticModel {
            dim: 3,
            kind: CovKind::Diagonal,
            states: vec![crate::model::StateGmm {
                gconsts: vec![-7.0],
                weights: vec![1.0],
                means_invvars: vec![1.0, 2.0, 3.0],
                inv_vars: vec![0.5, 0.25, 0.125],
            }],
        };
        let mut row = vec![0f32; 7];
        let order = scoring_z_order(3, CovKind::Diagonal);
        block_weights_row(&model, &order, 0, 0, &mut row);
        // z = [x2, x2², x1, x1², x0, x0², 1] (zval_t<true> in gmm.cu).
        assert_eq!(row, vec![3.0, -0.0625, 2.0, -0.125, 1.0, -0.25, -7.0]);
        let mut natural = vec![0f32; 7];
        weights_row(&model, 0, 0, &mut natural);
        assert_eq!(natural, vec![1.0, 2.0, 3.0, -0.25, -0.125, -0.0625, -7.0]);
    }
}
