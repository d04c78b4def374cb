//! The FP16 E-step on Hopper's warpgroup instructions (wgmma): the host half
//! of `kernels/estep_f16_wg.cu` (`gllw`, `gstw` and the operand layouts
//! they read), used in place of `gll16` and `gst16` on compute capability
//! 9.0 ([`super::compile::KernelShape::wg`]).

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, CudaView, LaunchConfig, PushKernelArg};

use super::driver_err;
use super::estep16::{kp, Scales, SF};
use crate::Result;

/// Gaussians per stage of `gllw` (MSW tiles) and its stages in flight
/// (WBUF).
const LL_STAGE: usize = 128;
const LL_BUFS: usize = 3;
/// Warpgroups of a `gstw` CTA (GWG, 64 Gaussians each) and its stages in
/// flight (GBUF).
const ST_GROUPS: usize = 2;
const ST_BUFS: usize = 3;

/// Gaussians of a `gllw` tile (GT, the wgmma's N) and warpgroups of a
/// `gllw` CTA (WGN, 64 frames each): four of 128 registers a thread fill an
/// SM. (H200, M = 2048, before gstw: 25.1 ms; three warpgroups with two
/// tiles in flight each 25.4–25.5; 64-Gaussian tiles 25.4.)
const LL_TILE: usize = 32;
const LL_GROUPS: usize = 4;

/// Frames of a `gllw` CTA.
pub const LL_FRAMES: usize = 64 * LL_GROUPS;

/// `gllw`'s tiles of `m` Gaussians (whole stages).
fn ll_tiles(m: usize) -> usize {
    m.div_ceil(LL_TILE)
        .max(1)
        .next_multiple_of(LL_STAGE / LL_TILE)
}

/// The `#define`s of the kernels' shape.
pub fn prelude() -> String {
    format!("#define WGN {LL_GROUPS}\n#define GWG {ST_GROUPS}\n")
}

/// The rows (Gaussians) the model's W' and gconsts are padded to for the
/// wgmma kernels: whole `gllw` stages (a multiple of 64: whole `gstw`
/// warpgroups too).
pub fn rows(m: usize) -> usize {
    LL_TILE * ll_tiles(m)
}

/// Dynamic shared memory of `gllw` and `gstw` in bytes: LL_BUFS stages of
/// W' (hi and lo FP16, KP values a Gaussian) and gconsts of LL_STAGE
/// Gaussians; ST_BUFS stages of SF frames of z' (hi and lo) and their L.
pub fn smem(dim: usize) -> (usize, usize) {
    let kp = kp(dim);
    let ll = LL_BUFS * LL_STAGE * (kp * 2 * 2 + 4);
    let st = ST_BUFS * (SF * kp * 2 * 2 + SF * 4);
    (ll, st)
}

/// The kernels of `kernels/estep_f16_wg.cu`.
pub(crate) struct WgKernels {
    pub wfragw: CudaFunction,
    pub zfragw: CudaFunction,
    pub gllw: CudaFunction,
    pub gstw: CudaFunction,
    pub smem_ll: usize,
    pub smem_st: usize,
}

impl WgKernels {
    pub fn load(f: &dyn Fn(&str) -> Result<CudaFunction>, dim: usize) -> Result<Self> {
        let (smem_ll, smem_st) = smem(dim);
        Ok(WgKernels {
            wfragw: f("wfragw")?,
            zfragw: f("zfragw")?,
            gllw: f("gllw")?,
            gstw: f("gstw")?,
            smem_ll,
            smem_st,
        })
    }

    /// W' (the model's rows scaled by `wmul`) in `gllw`'s tiles.
    pub fn make_w(
        &self,
        s: &CudaStream,
        w32: &CudaSlice<f32>,
        m: usize,
        kp: usize,
        wmul: &Scales,
        wb: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let tiles = ll_tiles(m) as i32;
        let threads = rows(m) * kp / 8;
        let mut lb = s.launch_builder(&self.wfragw);
        lb.arg(w32).arg(&tiles).arg(wmul).arg(wb);
        // SAFETY: argument types and counts match the kernel.
        unsafe { lb.launch(LaunchConfig::for_num_elems(threads as u32)) }
            .map_err(driver_err("wfragw"))?;
        Ok(())
    }

    /// z' of `n` frames (padded to `npad`) in `gstw`'s layout.
    pub fn make_z(
        &self,
        s: &CudaStream,
        feats: &CudaView<'_, f32>,
        n: usize,
        npad: usize,
        kp: usize,
        zmul: &Scales,
        zw: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let (ni, blocks) = (n as i32, (npad / 8) as i32);
        let threads = npad * kp / 8;
        let mut lb = s.launch_builder(&self.zfragw);
        lb.arg(feats).arg(&ni).arg(&blocks).arg(zmul).arg(zw);
        // SAFETY: as above.
        unsafe { lb.launch(LaunchConfig::for_num_elems(threads as u32)) }
            .map_err(driver_err("zfragw"))?;
        Ok(())
    }

    /// Pass 1 (`gllw`): each frame's L into `ll` and each CTA's Σ L into
    /// `wll`; returns the CTAs.
    #[allow(clippy::too_many_arguments)]
    pub fn log_likes(
        &self,
        s: &CudaStream,
        zw: &CudaSlice<u32>,
        n: usize,
        m: usize,
        wb: &CudaSlice<u32>,
        gconst: &CudaSlice<f32>,
        ll: &mut CudaSlice<f32>,
        wll: &mut CudaSlice<f64>,
    ) -> Result<usize> {
        let ctas = n.div_ceil(LL_FRAMES);
        let (ni, tiles) = (n as i32, ll_tiles(m) as i32);
        let mut lb = s.launch_builder(&self.gllw);
        lb.arg(zw)
            .arg(&ni)
            .arg(wb)
            .arg(gconst)
            .arg(&tiles)
            .arg(ll)
            .arg(wll);
        let cfg = LaunchConfig {
            grid_dim: (ctas as u32, 1, 1),
            block_dim: (128 * LL_GROUPS as u32, 1, 1),
            shared_mem_bytes: self.smem_ll as u32,
        };
        // SAFETY: as above.
        unsafe { lb.launch(cfg) }.map_err(driver_err("gllw"))?;
        Ok(ctas)
    }

    /// Pass 2 (`gstw`): the statistics of `n` frames in `ranges` ranges of
    /// `rf` into `partial` (rows [`stats_rows`]).
    #[allow(clippy::too_many_arguments)]
    pub fn stats(
        &self,
        s: &CudaStream,
        zw: &CudaSlice<u32>,
        ll: &CudaSlice<f32>,
        (n, rf, ranges): (usize, usize, usize),
        m: usize,
        wa: &CudaSlice<u32>,
        gconst: &CudaSlice<f32>,
        partial: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let t64 = m.div_ceil(64).max(1);
        let (ni, rfi, t64i, mpad) = (n as i32, rf as i32, t64 as i32, stats_rows(m) as i32);
        let mut lb = s.launch_builder(&self.gstw);
        lb.arg(zw)
            .arg(ll)
            .arg(&ni)
            .arg(&rfi)
            .arg(wa)
            .arg(gconst)
            .arg(&t64i)
            .arg(partial)
            .arg(&mpad);
        let cfg = LaunchConfig {
            grid_dim: (stats_ctas(m) as u32, ranges as u32, 1),
            block_dim: (128 * ST_GROUPS as u32, 1, 1),
            shared_mem_bytes: self.smem_st as u32,
        };
        // SAFETY: as above.
        unsafe { lb.launch(cfg) }.map_err(driver_err("gstw"))?;
        Ok(())
    }
}

/// CTAs of `gstw` over the Gaussians of one range of frames.
pub fn stats_ctas(m: usize) -> usize {
    m.div_ceil(64).max(1).div_ceil(ST_GROUPS)
}

/// Rows of `gstw`'s partial sums: whole warpgroups of 64 Gaussians.
pub fn stats_rows(m: usize) -> usize {
    64 * m.div_ceil(64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_whole_stages_and_whole_warpgroups() {
        for m in [1, 31, 32, 64, 127, 128, 129, 300, 2048] {
            let r = rows(m);
            assert!(r >= m && r % LL_STAGE == 0 && r % 64 == 0, "m = {m}: {r}");
            assert!(r >= stats_rows(m), "m = {m}");
            assert_eq!(ll_tiles(m) * LL_TILE, r);
        }
        assert_eq!(rows(2048), 2048);
        assert_eq!(stats_rows(2048), 2048);
        assert_eq!(stats_ctas(2048), 2048 / 64 / ST_GROUPS);
    }

    #[test]
    fn shared_memory_fits_an_sm() {
        // D = 40: three stages of 128 Gaussians × 80 values × 4 bytes (+
        // gconsts); three stages of 64 frames × 80 × 4 (+ L).
        assert_eq!(smem(40), (124_416, 62_208));
        // 227 KB a CTA at most on compute capability 9.0; one CTA an SM.
        for d in (1..=64).filter(|&d| super::super::estep16::fits(d)) {
            let (ll, st) = smem(d);
            assert!(ll <= 227 * 1024 && st <= 227 * 1024, "D = {d}");
        }
    }

    #[test]
    fn prelude_names_both_kernels_warpgroups() {
        let p = prelude();
        assert!(p.contains(&format!("#define WGN {LL_GROUPS}\n")));
        assert!(p.contains(&format!("#define GWG {ST_GROUPS}\n")));
    }
}
