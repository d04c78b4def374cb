//! The tensor-core E-step of one diagonal GMM over all frames
//! (`FrameTargets::Global`: `gmm-global-acc-stats`, the `estep` benchmark):
//! the host half of `kernels/estep_f16.cu`.
//!
//! The kernels multiply FP16 halves of each operand (hi + lo, three products,
//! FP32 accumulation). FP16's exponent range is narrow, so row k of z and of
//! W is scaled by 2^e_k and 2^−e_k: [`scales`] picks e_k per chunk from the
//! largest |x_d| of the chunk (taken on the host while the chunk is copied)
//! and the largest |w_k| of the model, so that both largest magnitudes end
//! up equal and below 2^14.5. A chunk whose values are not finite or whose
//! products could not fit (|x|·|w| > 2^28 in one term) takes the FP32
//! kernels instead ([`Estep16::chunk`] returns false).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};

use super::estep16_wg as wgk;
use super::{driver_err, CudaEngine, Kernels};
use crate::{Error, Result};

/// The fewest Gaussians for which the FP16 E-step is used by default: below
/// 8 tiles of 16, `gst16`'s CTAs have few warps for the fragments they load
/// (H100, estep T = 3,125,506: M = 32 took 12.3 ms here against 5.0 ms on the
/// FP32 kernels; M = 256 15.0 ms against 16.3).
pub const MIN_GAUSSIANS: usize = 128;

/// Frames per stage of `gst16` and `gstw` (their SF): chunks are padded to
/// a multiple.
pub(crate) const SF: usize = 64;
/// Frames a `gll16` CTA takes (W1 warps of 32 frames).
const LL_FRAMES: usize = 128;
/// Warps of a `gst16` CTA at most (the kernel's GSTW, its launch bound).
const GST_WARPS: usize = 6;
/// Largest range of frames one `gst16` or `gstw` CTA sums.
const MAX_RANGE: usize = 8192;
/// log2 of the posterior scale GSC of the kernels.
const GSC_LOG2: i32 = 12;
/// The largest |z_k|·|w_k| the FP16 operands take (both then below 2^14.5).
const MAX_PRODUCT_LOG2: f64 = 28.0;

/// `2D` rounded up to 16: the padded length of z = [x, x²] in the kernels.
pub fn kp(dim: usize) -> usize {
    (2 * dim).div_ceil(16) * 16
}

/// Gaussian tiles of 16 per stage of `gll16` (its MS).
const LL_STAGE_TILES: usize = 4;

/// Dynamic shared memory of `gll16` and `gst16` in bytes: two stages of
/// LL_STAGE_TILES tiles of W' fragments (and their gconsts); two stages of
/// SF frames of the zb and zs fragments (and their L).
pub fn smem(dim: usize) -> (usize, usize) {
    let kp = kp(dim);
    let uint4 = 16;
    let ll = 2 * LL_STAGE_TILES * (kp / 16 * 64 + 4) * uint4;
    let st = 2 * (SF * kp / 4 + SF * kp / 4 + SF / 4) * uint4;
    (ll, st)
}

/// Whether the kernels exist for this dimension (their registers hold
/// `KP/16` k-steps of W and `KP/8` column tiles of statistics).
pub fn fits(dim: usize) -> bool {
    kp(dim) <= 96
}

/// The per-row exponents e_k (k < 2D) for a chunk whose largest |x_d| are
/// `xmax` against a model whose largest |w_k| are `wmax`; `None` when some
/// value is not finite or a product would not fit FP16.
pub fn scales(xmax: &[f32], wmax: &[f32]) -> Option<Vec<i32>> {
    let d = xmax.len();
    if wmax.len() != 2 * d {
        return None;
    }
    let mut e = Vec::with_capacity(2 * d);
    for (k, &w) in wmax.iter().enumerate() {
        let x = f64::from(xmax[k % d]);
        let z = if k < d { x } else { x * x };
        let w = f64::from(w);
        if !z.is_finite() || !w.is_finite() {
            return None;
        }
        let ek = match (z > 0.0, w > 0.0) {
            (false, false) => 0.0,
            (false, true) => w.log2().round(),
            (true, false) => -z.log2().round(),
            (true, true) => {
                if z.log2() + w.log2() > MAX_PRODUCT_LOG2 {
                    return None;
                }
                (0.5 * (w.log2() - z.log2())).round()
            }
        };
        if ek.abs() > 100.0 {
            return None;
        }
        e.push(ek as i32);
    }
    Some(e)
}

/// Per-row multipliers passed to the kernels by value (the kernels' `Scales`),
/// so a chunk's scales need no upload (a copy from pageable memory would
/// make the host wait for the stream).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Scales([f32; 104]);
// SAFETY: plain floats, laid out as the kernels' struct.
unsafe impl DeviceRepr for Scales {}

/// Buffers of one chunk size.
struct Bufs {
    frames: usize,
    zb: CudaSlice<u32>,
    zs: CudaSlice<u32>,
    ll: CudaSlice<f32>,
    wll: CudaSlice<f64>,
    partial: CudaSlice<f32>,
}

/// State 0 of a diagonal model, ready for the FP16 E-step.
pub struct Estep16 {
    dim: usize,
    kz: usize,
    m: usize,
    /// Tiles of 16 Gaussians with W' fragments (`wa`): gst16's, or the
    /// 16-Gaussian quarters of gstw's warpgroups.
    tiles: usize,
    /// W (k < 2D, zero-padded to KP) row-major per padded Gaussian.
    w32: CudaSlice<f32>,
    /// gconst per padded Gaussian (−1e30 for padding: exp gives 0).
    gconst: CudaSlice<f32>,
    /// Largest |w_k| over the Gaussians, k < 2D.
    wmax: Vec<f32>,
    /// W' fragments and the exponents they were made with.
    wa: CudaSlice<u32>,
    /// W' in `gllw`'s tiles: present where the wgmma kernels run this
    /// model ([`super::estep16_wg`]).
    wb: Option<CudaSlice<u32>>,
    wa_exp: Option<Vec<i32>>,
    bufs: Option<Bufs>,
    /// Frames a chunk's buffers are made for at least ([`Self::reserve`]).
    reserve: usize,
}

impl Estep16 {
    /// The forms of `m` Gaussians of dimension `d`, uploaded on `stream`;
    /// `row(g, r)` writes Gaussian g's z-weights `[μ/σ², −½/σ², gconst]`
    /// (2d + 1 floats) into `r`; `wg`: for the wgmma kernels. Built in
    /// place: building 2048 rows apart first, then copying them, took
    /// 0.4–0.7 ms of host time.
    pub fn new(
        stream: &Arc<CudaStream>,
        d: usize,
        m: usize,
        wg: bool,
        mut row: impl FnMut(usize, &mut [f32]),
    ) -> Result<Self> {
        let kp = kp(d);
        let mpad = if wg {
            wgk::rows(m)
        } else {
            16 * m.div_ceil(16).max(1)
        };
        let tiles = mpad / 16;
        let mut w32 = vec![0f32; mpad * kp];
        let mut gconst = vec![-1e30f32; mpad];
        let mut wmax = vec![0f32; 2 * d];
        let mut r = vec![0f32; 2 * d + 1];
        for g in 0..m {
            row(g, &mut r);
            w32[g * kp..g * kp + 2 * d].copy_from_slice(&r[..2 * d]);
            gconst[g] = r[2 * d];
            for (a, &v) in wmax.iter_mut().zip(&r[..2 * d]) {
                *a = a.max(v.abs());
            }
        }
        let dev = stream.context().ordinal();
        crate::engine::batch_trace::mark_with(|| format!("e16-host-dev{dev}"));
        let e = driver_err("uploading the model");
        let w32 = stream.clone_htod(&w32).map_err(&e)?;
        let gconst = stream.clone_htod(&gconst).map_err(&e)?;
        crate::engine::batch_trace::mark_with(|| format!("e16-up-dev{dev}"));
        Ok(Estep16 {
            dim: d,
            kz: 2 * d + 1,
            m,
            tiles,
            w32,
            gconst,
            wmax,
            wa: stream
                .alloc_zeros::<u32>(tiles * (kp / 16) * 64 * 4)
                .map_err(&e)?,
            wb: if wg {
                Some(stream.alloc_zeros::<u32>(mpad * kp).map_err(&e)?)
            } else {
                None
            },
            wa_exp: None,
            bufs: None,
            reserve: 0,
        })
    }

    /// Make the buffers, when they are made, for chunks of `frames` at
    /// least (a job's growing batches then allocate them once).
    pub fn reserve(&mut self, frames: usize) {
        self.reserve = frames;
    }

    /// The buffers of chunks of the frames [`reserve`](Self::reserve)d
    /// made now (a chunk of that size or fewer then makes none).
    pub fn make_room(&mut self, stream: &Arc<CudaStream>, sms: usize) -> Result<()> {
        let (npad, _, ranges) = self.split(sms, self.reserve.max(1));
        self.ensure_bufs(stream, npad, ranges * self.stats_rows() * self.kz)
    }

    /// Whether the wgmma kernels run this model.
    fn wg(&self) -> bool {
        self.wb.is_some()
    }

    /// CTAs of the statistics pass over the Gaussians of one range.
    fn stats_ctas(&self) -> usize {
        if self.wg() {
            wgk::stats_ctas(self.m)
        } else {
            self.tiles.div_ceil(self.tiles.min(GST_WARPS))
        }
    }

    /// Rows of the statistics pass's partial sums.
    fn stats_rows(&self) -> usize {
        if self.wg() {
            wgk::stats_rows(self.m)
        } else {
            16 * self.tiles
        }
    }

    /// The padded frames of a chunk of `n` and the frame ranges its
    /// statistics are split into.
    fn split(&self, sms: usize, n: usize) -> (usize, usize, usize) {
        let npad = n.div_ceil(SF) * SF;
        let want = n
            .div_ceil(MAX_RANGE)
            .max((4 * sms).div_ceil(self.stats_ctas()));
        let rf = n.div_ceil(want).div_ceil(SF) * SF;
        (npad, rf, n.div_ceil(rf))
    }

    /// Device bytes a frame of a chunk takes (zb, zs, ll and its share of the partials).
    pub fn bytes_per_frame(&self) -> usize {
        Self::frame_bytes(self.dim, self.m)
    }

    /// [`bytes_per_frame`](Self::bytes_per_frame) of the forms of `m`
    /// Gaussians of dimension `d`, before they are made.
    pub fn frame_bytes(d: usize, m: usize) -> usize {
        let tiles = m.div_ceil(16).max(1);
        4 * kp(d) * 2 + 4 + (16 * tiles * (2 * d + 1) * 4).div_ceil(MAX_RANGE)
    }

    fn ensure_bufs(&mut self, stream: &Arc<CudaStream>, npad: usize, partial: usize) -> Result<()> {
        if self
            .bufs
            .as_ref()
            .is_some_and(|b| b.frames >= npad && b.partial.len() >= partial)
        {
            return Ok(());
        }
        let _t = crate::timeline::Tally::start("device_alloc");
        self.bufs = None;
        let kp = kp(self.dim);
        let e = driver_err("allocating the E-step buffers");
        // zb and zs hold KP u32 a frame each: KP values, hi and lo, FP16
        // (see zfrag16's indices). The wgmma passes read z' from zs alone
        // (zfragw's layout), so zb is then not made.
        let zb_len = if self.wg() { 1 } else { npad * kp };
        // SAFETY (all four): every value a kernel reads is written first by
        // zfrag16 / zfragw / gll16 / gllw / gst16 of the same chunk (see the
        // kernels).
        let zb = unsafe { stream.alloc::<u32>(zb_len) }.map_err(&e)?;
        let zs = unsafe { stream.alloc::<u32>(npad * kp) }.map_err(&e)?;
        // Room for the CTAs of either first pass (gll16 or gllw).
        let ll_frames = LL_FRAMES.max(wgk::LL_FRAMES);
        let ll = stream.alloc_zeros::<f32>(npad + ll_frames).map_err(&e)?;
        let wll = unsafe { stream.alloc::<f64>(npad.div_ceil(64)) }.map_err(&e)?;
        let partial = unsafe { stream.alloc::<f32>(partial.max(1)) }.map_err(&e)?;
        self.bufs = Some(Bufs {
            frames: npad,
            zb,
            zs,
            ll,
            wll,
            partial,
        });
        Ok(())
    }

    /// The per-row exponents for a chunk whose largest |x_d| are `xmax`
    /// ([`scales`] against this model); `None`: the chunk takes the FP32 kernels.
    pub fn exponents(&self, xmax: &[f32]) -> Option<Vec<i32>> {
        scales(xmax, &self.wmax)
    }

    /// Enqueue the statistics of the `n` frames in `feats`, with the row
    /// exponents `exps` ([`exponents`](Self::exponents)), into `acc64` (rows
    /// of this GMM first) and Σ L into `total`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn chunk(
        &mut self,
        eng: &CudaEngine,
        k: &Kernels,
        feats: &CudaView<'_, f32>,
        n: usize,
        exps: Vec<i32>,
        acc64: &mut CudaSlice<f64>,
        total: &mut CudaSlice<f64>,
    ) -> Result<()> {
        let kf = k
            .estep16
            .as_ref()
            .ok_or_else(|| Error::Engine("no FP16 E-step kernels for this model".into()))?;
        let wg = match (self.wg(), &kf.wg) {
            (false, _) => None,
            (true, Some(w)) => Some(w),
            (true, None) => {
                return Err(Error::Engine(
                    "no wgmma E-step kernels for a model laid out for them".into(),
                ))
            }
        };
        if n == 0 {
            return Ok(());
        }
        let s = &eng.stream;
        let sms = eng.multiprocessors();
        let (npad, rf, ranges) = self.split(sms, n);
        let (room, _, room_ranges) = self.split(sms, n.max(self.reserve));
        let rows = self.stats_rows();
        self.ensure_bufs(s, room.max(npad), room_ranges.max(ranges) * rows * self.kz)?;
        let m = Multipliers::new(&exps);
        if self.wa_exp.as_ref() != Some(&exps) {
            self.make_w(s, kf, wg, &m.w)?;
            self.wa_exp = Some(exps);
        }
        let b = self
            .bufs
            .as_mut()
            .ok_or_else(|| Error::Engine("E-step buffers missing".into()))?;
        let ll_ctas = match (wg, &self.wb) {
            // Both wgmma passes read z' in gstw's layout (zs holds it).
            (Some(w), Some(wb)) => {
                let kp = kp(self.dim);
                w.make_z(s, feats, n, npad, kp, &m.z, &mut b.zs)?;
                w.log_likes(s, &b.zs, n, self.m, wb, &self.gconst, &mut b.ll, &mut b.wll)?
            }
            _ => {
                make_zb(s, kf, feats, n, npad, self.dim, &m.z, b)?;
                gll16(s, kf, b, n, &self.wa, &self.gconst, self.tiles)?
            }
        };
        sum_lls(s, k, &b.wll, ll_ctas, total)?;
        match wg {
            Some(w) => w.stats(
                s,
                &b.zs,
                &b.ll,
                (n, rf, ranges),
                self.m,
                &self.wa,
                &self.gconst,
                &mut b.partial,
            )?,
            None => gst16(
                s,
                kf,
                b,
                (n, rf, ranges),
                &self.wa,
                &self.gconst,
                self.tiles,
            )?,
        }
        let (rg, mi, rows) = (ranges as i32, self.m as i32, rows as i32);
        let mut lb = s.launch_builder(&kf.reduce16);
        lb.arg(&b.partial)
            .arg(&rg)
            .arg(&mi)
            .arg(&rows)
            .arg(&m.k)
            .arg(&mut *acc64);
        // SAFETY: argument types and counts match the kernel.
        unsafe { lb.launch(LaunchConfig::for_num_elems((self.m * self.kz) as u32)) }
            .map_err(driver_err("reduce16"))?;
        Ok(())
    }

    /// W' of the chunk's exponents: gst16's (and gstw's) A fragments, and
    /// with `wg` gllw's tiles.
    fn make_w(
        &mut self,
        s: &Arc<CudaStream>,
        kf: &super::Estep16Kernels,
        wg: Option<&wgk::WgKernels>,
        wmul: &Scales,
    ) -> Result<()> {
        let kp = kp(self.dim);
        let threads = self.tiles * (kp / 16) * 32;
        let tiles = self.tiles as i32;
        let mut lb = s.launch_builder(&kf.wfrag16);
        lb.arg(&self.w32).arg(&tiles).arg(wmul).arg(&mut self.wa);
        // SAFETY: argument types and counts match the kernel.
        unsafe { lb.launch(LaunchConfig::for_num_elems(threads as u32)) }
            .map_err(driver_err("wfrag16"))?;
        if let (Some(w), Some(wb)) = (wg, self.wb.as_mut()) {
            w.make_w(s, &self.w32, self.m, kp, wmul, wb)?;
        }
        Ok(())
    }
}

/// A chunk's per-row multipliers: z'_k = 2^e_k z_k, w'_k = 2^−e_k w_k, and
/// the statistics' 2^−(e_k + 12) (exact powers of two: |e| <= 100 keeps
/// them normal floats).
struct Multipliers {
    z: Scales,
    w: Scales,
    k: Scales,
}

impl Multipliers {
    fn new(exps: &[i32]) -> Self {
        let pow = |x: i32| 2f64.powi(x) as f32;
        let mut m = Multipliers {
            z: Scales([0.0; 104]),
            w: Scales([0.0; 104]),
            k: Scales([1.0; 104]),
        };
        for (i, &x) in exps.iter().enumerate() {
            m.z.0[i] = pow(x);
            m.w.0[i] = pow(-x);
            m.k.0[i] = pow(-x - GSC_LOG2);
        }
        m
    }
}

/// zfrag16: the chunk's z' fragments in `zb` (gll16's and gllw's), and in
/// `zs` (gst16's) where `zs` is asked for.
#[allow(clippy::too_many_arguments)]
fn make_zb(
    s: &CudaStream,
    kf: &super::Estep16Kernels,
    feats: &CudaView<'_, f32>,
    n: usize,
    npad: usize,
    dim: usize,
    zmul: &Scales,
    b: &mut Bufs,
) -> Result<()> {
    let kp = kp(dim);
    let (ks16, nj) = (kp / 16, kp / 8);
    let ni = n as i32;
    let mut lb = s.launch_builder(&kf.zfrag16);
    lb.arg(feats)
        .arg(&ni)
        .arg(zmul)
        .arg(&mut b.zb)
        .arg(&mut b.zs);
    // Warps 0..2·KS16 write zb, the rest zs.
    let warps = 2 * ks16 + nj;
    let cfg = LaunchConfig {
        grid_dim: ((npad / 16) as u32, 1, 1),
        block_dim: ((32 * warps) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: argument types and counts match the kernel.
    unsafe { lb.launch(cfg) }.map_err(driver_err("zfrag16"))?;
    Ok(())
}

/// Pass 1 on mma.sync (gll16); returns its CTAs.
fn gll16(
    s: &CudaStream,
    kf: &super::Estep16Kernels,
    b: &mut Bufs,
    n: usize,
    wa: &CudaSlice<u32>,
    gconst: &CudaSlice<f32>,
    tiles: usize,
) -> Result<usize> {
    let ctas = n.div_ceil(LL_FRAMES);
    let (ni, tiles) = (n as i32, tiles as i32);
    let mut lb = s.launch_builder(&kf.gll16);
    lb.arg(&b.zb)
        .arg(&ni)
        .arg(wa)
        .arg(gconst)
        .arg(&tiles)
        .arg(&mut b.ll)
        .arg(&mut b.wll);
    let cfg = LaunchConfig {
        grid_dim: (ctas as u32, 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: kf.smem_ll as u32,
    };
    // SAFETY: argument types and counts match the kernel.
    unsafe { lb.launch(cfg) }.map_err(driver_err("gll16"))?;
    Ok(ctas)
}

/// Σ L of the chunk: the first pass's per-CTA sums added to `total`.
fn sum_lls(
    s: &CudaStream,
    k: &Kernels,
    wll: &CudaSlice<f64>,
    ctas: usize,
    total: &mut CudaSlice<f64>,
) -> Result<()> {
    let nl = ctas as i32;
    let mut lb = s.launch_builder(&k.sum_f64);
    lb.arg(wll).arg(&nl).arg(total);
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: argument types and counts match the kernel.
    unsafe { lb.launch(cfg) }.map_err(driver_err("sum_f64"))?;
    Ok(())
}

/// Pass 2 on mma.sync (gst16) into `b.partial`.
fn gst16(
    s: &CudaStream,
    kf: &super::Estep16Kernels,
    b: &mut Bufs,
    (n, rf, ranges): (usize, usize, usize),
    wa: &CudaSlice<u32>,
    gconst: &CudaSlice<f32>,
    tiles: usize,
) -> Result<()> {
    let nw = tiles.min(GST_WARPS);
    let ctas_x = tiles.div_ceil(nw);
    let (ni, rfi, ti, mpad) = (n as i32, rf as i32, tiles as i32, (16 * tiles) as i32);
    let mut lb = s.launch_builder(&kf.gst16);
    lb.arg(&b.zb)
        .arg(&b.zs)
        .arg(&b.ll)
        .arg(&ni)
        .arg(&rfi)
        .arg(wa)
        .arg(gconst)
        .arg(&ti)
        .arg(&mut b.partial)
        .arg(&mpad);
    let cfg = LaunchConfig {
        grid_dim: (ctas_x as u32, ranges as u32, 1),
        block_dim: ((32 * nw) as u32, 1, 1),
        shared_mem_bytes: kf.smem_st as u32,
    };
    // SAFETY: argument types and counts match the kernel.
    unsafe { lb.launch(cfg) }.map_err(driver_err("gst16"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_balance_the_two_largest_magnitudes() {
        // x up to 8 (x² up to 64); w up to 2 for x and 0.5 for x².
        let e = scales(&[8.0], &[2.0, 0.5]).unwrap();
        // z'·w' keeps the product; each side near sqrt(z·w).
        assert_eq!(e, vec![-1, -4]); // −3.5 rounds away from zero
        let zx = 8.0 * 2f32.powi(e[0]);
        let wx = 2.0 * 2f32.powi(-e[0]);
        assert!(zx <= 2f32.powf(14.5) && wx <= 2f32.powf(14.5));
        assert_eq!(zx * wx, 16.0);
    }

    #[test]
    fn scales_refuse_what_fp16_cannot_hold() {
        assert!(scales(&[f32::INFINITY], &[1.0, 1.0]).is_none());
        assert!(scales(&[1e5], &[1.0, 1.0]).is_none()); // x² · w = 1e10 > 2^28
        assert!(scales(&[1.0], &[1.0]).is_none()); // wrong length
        assert!(scales(&[1e3], &[1.0, 1.0]).is_some()); // 1e6 fits
    }

    #[test]
    fn zero_rows_scale_the_other_side_to_one() {
        let e = scales(&[0.0, 1024.0], &[4.0, 0.0, 1.0, 0.0]).unwrap();
        assert_eq!(e[0], 2); // w' = 4 · 2^-2 = 1
        assert_eq!(e[1], -10); // z' = 1024 · 2^-10 = 1
    }

    #[test]
    fn shared_memory_leaves_two_gst16_ctas_an_sm() {
        // D = 40: four tiles of 5 KB of W' (+ gconsts) twice; 64 frames of
        // 2 × 320 B of fragments (+ L) twice.
        assert_eq!(smem(40), (41_472, 82_432));
        // The launch bound asks for 2 gst16 CTAs an SM: 228 KB an H100 SM,
        // 1 KB of it reserved per CTA.
        for d in (1..=64).filter(|&d| fits(d)) {
            let (ll, st) = smem(d);
            assert!(2 * (st + 1024) <= 228 * 1024 && ll <= 227 * 1024, "D = {d}");
        }
    }

    #[test]
    fn padded_length_and_fit() {
        assert_eq!(kp(40), 80);
        assert_eq!(kp(13), 32);
        assert!(fits(48) && !fits(49));
    }
}
