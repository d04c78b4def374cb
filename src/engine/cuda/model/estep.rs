//! The statistics of one chunk: the tensor-core E-steps where the model
//! and the chunk's scales take them, else the FP32 kernels' plan, passes
//! and reduction into the f64 accumulators.

use cudarc::driver::{CudaEvent, CudaSlice, CudaView, LaunchConfig, PushKernelArg};

use super::{new_timing_event, timed, CudaModel};
use crate::engine::cuda::driver_err;
use crate::engine::cuda::gselect::Gselect;
use crate::engine::cuda::plan::{self, PlanShape};
use crate::engine::FrameTargets;
use crate::stats::ModelAccumulators;
use crate::{Error, Result};

/// A chunk's work plan on the device (`CudaModel::upload_plan`), with the
/// buffers its kernels fill: the items' statistics and Σ weight·L.
struct PlanOnDevice {
    frame_of: Option<CudaSlice<u32>>,
    weight_of: Option<CudaSlice<f32>>,
    acc_items: CudaSlice<i32>,
    groups: CudaSlice<i32>,
    partial: CudaSlice<f32>,
    item_wll: CudaSlice<f64>,
    /// Items with a Σ weight·L in `item_wll`.
    wll_items: usize,
}

/// The leading arguments of both statistics passes: the frames, and each
/// entry's frame and weight (null: entry e is frame e, weight 1).
fn entry_args<'a>(
    lb: &mut cudarc::driver::LaunchArgs<'a>,
    feats: &'a CudaView<'_, f32>,
    (frame_of, weight_of): (&'a Option<CudaSlice<u32>>, &'a Option<CudaSlice<f32>>),
    null: &'a u64,
) {
    lb.arg(feats);
    match frame_of {
        Some(f) => lb.arg(f),
        None => lb.arg(null),
    };
    match weight_of {
        Some(x) => lb.arg(x),
        None => lb.arg(null),
    };
}

/// `reduce_partials`' block: (element columns, runs of items a column sums
/// at once). A group of many items (one GMM over a chunk: ~1000) is summed
/// in 8 runs; groups of few items (many states) in one, as before.
fn reduce_block(groups: &[[i32; 4]]) -> (usize, usize) {
    let most = groups.iter().map(|g| g[1]).max().unwrap_or(0);
    if groups.len() <= 64 && most >= 64 {
        (32, 8)
    } else {
        (256, 1)
    }
}

impl CudaModel<'_> {
    /// Zero the device accumulators.
    pub(super) fn begin_stats(&mut self) -> Result<CudaSlice<f64>> {
        let n = self.total_gaussians * self.kz;
        let s = &self.eng.stream;
        match self.acc64.take() {
            Some(mut a) if a.len() == n => {
                s.memset_zeros(&mut a)
                    .map_err(driver_err("zeroing accumulators"))?;
                Ok(a)
            }
            _ => s
                .alloc_zeros::<f64>(n.max(1))
                .map_err(driver_err("allocating accumulators")),
        }
    }

    /// Enqueue the statistics of frames `[c0, c1)` of the batch, whose rows
    /// are in `feats` (row 0 = frame c0). Returns Σ weight of the entries.
    /// `xmax`: the largest |x_d| of those frames, where the caller took it
    /// for the FP16 E-step.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stats_chunk(
        &mut self,
        feats: &CudaView<'_, f32>,
        targets: &FrameTargets<'_>,
        c0: usize,
        c1: usize,
        xmax: Option<&[f32]>,
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<(f64, Option<(CudaEvent, CudaEvent)>)> {
        if let FrameTargets::Selected(sel) = targets {
            return self.selected_chunk(feats, sel, c0, c1, acc64, total);
        }
        if let Some(xm) = xmax {
            if let Some(ev) = self.tensor_estep_chunk(feats, targets, c1 - c0, xm, acc64, total)? {
                return Ok(((c1 - c0) as f64, Some(ev)));
            }
        }
        self.fma_stats_chunk(feats, targets, c0, c1, acc64, total)
    }

    /// The tensor-core E-step of a chunk of `n` frames (FP16, diagonal or
    /// full covariances) where it takes these targets and the chunk's
    /// scales fit; `None`: the FP32 kernels take it.
    fn tensor_estep_chunk(
        &mut self,
        feats: &CudaView<'_, f32>,
        targets: &FrameTargets<'_>,
        n: usize,
        xmax: &[f32],
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<Option<(CudaEvent, CudaEvent)>> {
        let missing = || Error::Engine("E-step layout missing".into());
        if self.e16_wanted(targets) {
            self.ensure_e16()?;
            let e16 = self.e16.as_mut().ok_or_else(missing)?;
            if let Some(exps) = e16.exponents(xmax) {
                let (eng, k) = (self.eng, &self.k);
                let ev = timed(eng, &eng.stream, || {
                    e16.chunk(eng, k, feats, n, exps, acc64, total)
                })?;
                self.e16_chunks += 1;
                return Ok(Some(ev));
            }
        }
        if self.efull_wanted(targets) {
            self.ensure_efull()?;
            let ef = self.efull.as_mut().ok_or_else(missing)?;
            if let Some(exps) = ef.exponents(xmax) {
                let (eng, k) = (self.eng, &self.k);
                let ev = timed(eng, &eng.stream, || {
                    ef.chunk(eng, k, feats, n, exps, acc64, total)
                })?;
                self.efull_chunks += 1;
                return Ok(Some(ev));
            }
        }
        Ok(None)
    }

    /// The FP32 kernels' statistics of frames `[c0, c1)`: the host plan and
    /// its upload, then, between the timing events, the log-likelihood pass
    /// (where a state's Gaussians take more than one block), the statistics
    /// and their reduction, and Σ weight × log-likelihood.
    pub(super) fn fma_stats_chunk(
        &mut self,
        feats: &CudaView<'_, f32>,
        targets: &FrameTargets<'_>,
        c0: usize,
        c1: usize,
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<(f64, Option<(CudaEvent, CudaEvent)>)> {
        self.ensure_states()?;
        let sh = self.k.shape;
        let p = plan::plan(
            targets,
            c0,
            c1,
            &PlanShape {
                tile: sh.tf,
                chunk: self.item_entries(c1 - c0),
                gblock: sh.gb,
                state_gaussians: &self.state_ng,
                state_first_gaussian: &self.state_first,
            },
        );
        if p.entries == 0 || p.ll_items.is_empty() {
            return Ok((p.total_weight, None));
        }
        // One pass when every state's Gaussians fit in one block: the
        // statistics kernel takes each entry's log-likelihood from its own
        // scores, so there is no entry_loglike pass.
        let one_pass = self.state_ng.iter().all(|&g| g <= sh.gb);
        let mut w = self.upload_plan(&p, one_pass)?;
        let s = &self.eng.stream;
        let ev = (new_timing_event(self.eng)?, new_timing_event(self.eng)?);
        ev.0.record(s)
            .map_err(driver_err("uploading the work plan"))?;
        let entry_ll = if one_pass {
            None
        } else {
            Some(self.entry_loglike_pass(feats, &p, &mut w)?)
        };
        if !p.acc_items.is_empty() {
            self.accum_stats_pass(feats, &p, &mut w, entry_ll.as_ref(), acc64)?;
        }
        let n_items = w.wll_items as i32;
        let mut lb = s.launch_builder(&self.k.sum_f64);
        lb.arg(&w.item_wll).arg(&n_items).arg(&mut *total);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: argument types and counts match the kernel.
        unsafe { lb.launch(cfg) }.map_err(driver_err("sum_f64"))?;
        ev.1.record(s).map_err(driver_err("timing"))?;
        Ok((p.total_weight, Some(ev)))
    }

    /// A chunk's work plan on the device, with the buffers its kernels fill.
    fn upload_plan(&self, p: &plan::EntryPlan, one_pass: bool) -> Result<PlanOnDevice> {
        let s = &self.eng.stream;
        let e = driver_err("uploading the work plan");
        let wll_items = if one_pass {
            p.acc_items.len()
        } else {
            p.ll_items.len()
        };
        Ok(PlanOnDevice {
            frame_of: p
                .frame_of
                .as_ref()
                .map(|v| s.clone_htod(v))
                .transpose()
                .map_err(&e)?,
            weight_of: p
                .weight_of
                .as_ref()
                .map(|v| s.clone_htod(v))
                .transpose()
                .map_err(&e)?,
            item_wll: s.alloc_zeros::<f64>(wll_items.max(1)).map_err(&e)?,
            wll_items,
            acc_items: s.clone_htod(&plan::flat_items(&p.acc_items)).map_err(&e)?,
            groups: s.clone_htod(&plan::flat_items(&p.groups)).map_err(&e)?,
            partial: s
                .alloc_zeros::<f32>((p.acc_items.len() * self.k.shape.gb * self.kz).max(1))
                .map_err(&e)?,
        })
    }

    /// Pass 1 of two: every entry's log-likelihood over all its state's
    /// Gaussians (and each item's Σ weight·L).
    fn entry_loglike_pass(
        &self,
        feats: &CudaView<'_, f32>,
        p: &plan::EntryPlan,
        w: &mut PlanOnDevice,
    ) -> Result<CudaSlice<f32>> {
        let (s, sh, st) = (&self.eng.stream, self.k.shape, self.state_layout()?);
        let e = driver_err("uploading the work plan");
        let ll_items = s.clone_htod(&plan::flat_items(&p.ll_items)).map_err(&e)?;
        let mut entry_ll = s.alloc_zeros::<f32>(p.entries).map_err(&e)?;
        let null = 0u64;
        let cfg = LaunchConfig {
            grid_dim: (p.ll_items.len() as u32, 1, 1),
            block_dim: (sh.threads() as u32, 1, 1),
            shared_mem_bytes: sh.smem_score() as u32,
        };
        let mut lb = s.launch_builder(&self.k.entry_loglike);
        entry_args(&mut lb, feats, (&w.frame_of, &w.weight_of), &null);
        lb.arg(&ll_items)
            .arg(&st.w)
            .arg(&st.gblock)
            .arg(&st.ng)
            .arg(&mut entry_ll)
            .arg(&mut w.item_wll);
        // SAFETY: argument types and counts match the kernel.
        unsafe { lb.launch(cfg) }.map_err(driver_err("entry_loglike"))?;
        Ok(entry_ll)
    }

    /// The statistics of every item (`accum_stats`; in one pass, with each
    /// item's Σ weight·L) and their sum per (state, Gaussian block) into
    /// `acc64` (`reduce_partials`).
    fn accum_stats_pass(
        &self,
        feats: &CudaView<'_, f32>,
        p: &plan::EntryPlan,
        w: &mut PlanOnDevice,
        entry_ll: Option<&CudaSlice<f32>>,
        acc64: &mut CudaSlice<f64>,
    ) -> Result<()> {
        let (s, sh, st) = (&self.eng.stream, self.k.shape, self.state_layout()?);
        let null = 0u64;
        let mut lb = s.launch_builder(&self.k.accum_stats);
        entry_args(&mut lb, feats, (&w.frame_of, &w.weight_of), &null);
        match entry_ll {
            Some(l) => lb.arg(l),
            None => lb.arg(&null),
        };
        lb.arg(&w.acc_items)
            .arg(&st.w)
            .arg(&st.gblock)
            .arg(&st.ng)
            .arg(&mut w.partial);
        if entry_ll.is_none() {
            lb.arg(&mut w.item_wll);
        } else {
            lb.arg(&null);
        }
        let cfg = LaunchConfig {
            grid_dim: (p.acc_items.len() as u32, 1, 1),
            block_dim: (sh.threads_stats() as u32, 1, 1),
            shared_mem_bytes: sh.smem_stats() as u32,
        };
        // SAFETY: argument types and counts match the kernel.
        unsafe { lb.launch(cfg) }.map_err(driver_err("accum_stats"))?;

        let mut lb = s.launch_builder(&self.k.reduce_partials);
        lb.arg(&w.partial).arg(&w.groups).arg(&mut *acc64);
        let (cols, runs) = reduce_block(&p.groups);
        let cfg = LaunchConfig {
            grid_dim: (
                p.groups.len() as u32,
                (sh.gb * self.kz).div_ceil(cols) as u32,
                1,
            ),
            block_dim: (cols as u32, runs as u32, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: as above.
        unsafe { lb.launch(cfg) }.map_err(driver_err("reduce_partials"))?;
        Ok(())
    }

    /// [`Self::stats_chunk`] of a Gaussian selection: the host plan and its
    /// upload, then the kernels between the timing events.
    #[allow(clippy::too_many_arguments)]
    fn selected_chunk(
        &mut self,
        feats: &CudaView<'_, f32>,
        sel: &crate::engine::Selection<'_>,
        c0: usize,
        c1: usize,
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<(f64, Option<(CudaEvent, CudaEvent)>)> {
        if self.gsel.is_none() {
            self.gsel = Some(Gselect::new(&self.eng.stream, &self.model)?);
        }
        let gs = self
            .gsel
            .as_ref()
            .ok_or_else(|| Error::Engine("Gaussian selection layout missing".into()))?;
        let s = &self.eng.stream;
        let Some(mut work) = gs.upload(s, sel, c0, c1)? else {
            return Ok((0.0, None));
        };
        let ev = (new_timing_event(self.eng)?, new_timing_event(self.eng)?);
        let e = driver_err("timing");
        ev.0.record(s).map_err(&e)?;
        gs.launch(self.eng, &self.k, feats, &mut work, acc64, total)?;
        ev.1.record(s).map_err(&e)?;
        Ok((work.weight(), Some(ev)))
    }

    /// Download the device accumulators and add them into `acc`.
    pub(super) fn finish_stats(
        &mut self,
        acc64: CudaSlice<f64>,
        total: &CudaSlice<f64>,
        weight: f64,
        acc: &mut ModelAccumulators,
    ) -> Result<f64> {
        let s = &self.eng.stream;
        let sums = s
            .clone_dtoh(&acc64)
            .map_err(driver_err("downloading statistics"))?;
        let tot = s
            .clone_dtoh(total)
            .map_err(driver_err("downloading statistics"))?[0];
        self.acc64 = Some(acc64);
        self.add_sums(&sums, tot, weight, acc);
        Ok(tot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One GMM's thousand items are summed in 8 runs; many states' few
    /// items a column each, in the plain order; never more than the 256
    /// threads the kernel's shared array holds.
    #[test]
    fn reduction_runs_only_for_groups_of_many_items() {
        let group = |items| [0, items, 0, 32];
        assert_eq!(reduce_block(&[group(1024)]), (32, 8));
        assert_eq!(reduce_block(&[group(64), group(3)]), (32, 8));
        assert_eq!(reduce_block(&[group(63)]), (256, 1));
        assert_eq!(reduce_block(&vec![group(100); 65]), (256, 1));
        assert_eq!(reduce_block(&[]), (256, 1));
        for g in [vec![group(1024)], vec![group(2)]] {
            let (cols, runs) = reduce_block(&g);
            assert!(cols * runs <= 256);
        }
    }
}
