//! The CPU engine's inner loops: register-blocked micro-kernels for the two
//! GEMMs of the GMM formulation, and a vectorisable `exp` for log-sum-exp and
//! softmax. Each has an AVX2+FMA version (picked at run time) and a portable one
//! with the same summation order.
//!
//! - Log-likelihoods: `L[t][g] = gconst[g] + Σ_k xe[t][k]·A[k][g]`, with the
//!   Gaussians of a state stored in panels of [`LANES`] (`[k][lane]`, the
//!   Vaněk layout with 8 lanes): per k, one load of 8 Gaussians' parameters is
//!   reused by up to 6 frames (broadcasts), 6×16 outputs stay in registers.
//!   The terms are summed from zero and the gconst added last: a Gaussian's
//!   log-likelihood is a small difference of large terms, and a sum started
//!   at the gconst (≈ −½μᵀΣ⁻¹μ) keeps large partial sums over every step
//!   (see `PackedModel::expand` for the order of the terms).
//! - Statistics: `S[g][c] = Σ_t P[t][g]·z[t][c]`, f32 products and sums
//!   over sub-blocks of frames, widened to f64 between sub-blocks; 6 Gaussians
//!   × 16 columns in registers, operands packed by the caller.
//!
//! Nothing here allocates or knows about models; callers pass raw slices whose
//! sizes they checked.

/// Gaussians per parameter panel (one AVX register of f32).
pub const LANES: usize = 8;
/// Frames per log-likelihood micro-kernel call.
pub const MR: usize = 6;

/// `unsafe fn $name::<$P>(rows, k, xe, ldx, a, bias, out, ldo)`: the rows
/// in blocks of [`MR`] through `$kernel::<MR, $P>`, the last few through
/// the kernel of their count (the AVX2 and AVX-512 kernels' row loop).
macro_rules! row_blocks {
    ($features:literal, $name:ident, $kernel:ident, $P:ident) => {
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name<const $P: usize>(
            rows: usize,
            k: usize,
            xe: *const f32,
            ldx: usize,
            a: *const f32,
            bias: *const f32,
            out: *mut f32,
            ldo: usize,
        ) {
            let mut r = 0;
            while r + MR <= rows {
                $kernel::<MR, $P>(k, xe.add(r * ldx), ldx, a, bias, out.add(r * ldo), ldo);
                r += MR;
            }
            let (x, o) = (xe.add(r * ldx), out.add(r * ldo));
            match rows - r {
                0 => {}
                1 => $kernel::<1, $P>(k, x, ldx, a, bias, o, ldo),
                2 => $kernel::<2, $P>(k, x, ldx, a, bias, o, ldo),
                3 => $kernel::<3, $P>(k, x, ldx, a, bias, o, ldo),
                4 => $kernel::<4, $P>(k, x, ldx, a, bias, o, ldo),
                _ => $kernel::<5, $P>(k, x, ldx, a, bias, o, ldo),
            }
        }
    };
}
pub(super) use row_blocks;

#[cfg(target_arch = "x86_64")]
fn has_avx2_fma() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

#[cfg(not(target_arch = "x86_64"))]
fn has_avx2_fma() -> bool {
    false
}

/// Log-likelihoods of `rows` frames against `panels` consecutive panels:
/// fused multiply-adds in k order from zero, then the gconst added.
///
/// `xe`: `rows × k` (row stride `ldx`); `a`: `panels × k × LANES`; `bias`:
/// `panels × LANES` gconsts; `out`: `rows × (panels·LANES)` (row stride `ldo`).
pub fn loglikes(
    rows: usize,
    k: usize,
    xe: &[f32],
    ldx: usize,
    a: &[f32],
    bias: &[f32],
    panels: usize,
    out: &mut [f32],
    ldo: usize,
) {
    assert!(rows == 0 || xe.len() >= (rows - 1) * ldx + k);
    assert!(a.len() >= panels * k * LANES && bias.len() >= panels * LANES);
    assert!(rows == 0 || out.len() >= (rows - 1) * ldo + panels * LANES);
    #[cfg(target_arch = "x86_64")]
    if super::avx512::available() {
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA; sizes checked above.
        unsafe {
            super::avx512::loglikes(
                rows,
                k,
                xe.as_ptr(),
                ldx,
                a.as_ptr(),
                bias.as_ptr(),
                panels,
                out.as_mut_ptr(),
                ldo,
            )
        };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; sizes checked above.
        unsafe {
            avx2::loglikes(
                rows,
                k,
                xe.as_ptr(),
                ldx,
                a.as_ptr(),
                bias.as_ptr(),
                panels,
                out.as_mut_ptr(),
                ldo,
            )
        };
        return;
    }
    portable_loglikes(rows, k, xe, ldx, a, bias, panels, out, ldo);
}

#[allow(clippy::too_many_arguments)]
fn portable_loglikes(
    rows: usize,
    k: usize,
    xe: &[f32],
    ldx: usize,
    a: &[f32],
    bias: &[f32],
    panels: usize,
    out: &mut [f32],
    ldo: usize,
) {
    for p in 0..panels {
        let ap = &a[p * k * LANES..(p + 1) * k * LANES];
        for r in 0..rows {
            let mut acc = [0f32; LANES];
            let x = &xe[r * ldx..r * ldx + k];
            for (kk, &xv) in x.iter().enumerate() {
                let av = &ap[kk * LANES..(kk + 1) * LANES];
                for l in 0..LANES {
                    acc[l] = xv.mul_add(av[l], acc[l]);
                }
            }
            for l in 0..LANES {
                out[r * ldo + p * LANES + l] = acc[l] + bias[p * LANES + l];
            }
        }
    }
}

/// Statistics micro-tile: Gaussians per packed block of posteriors (each
/// broadcast from one f32)…
pub const SG: usize = 6;
/// …and statistics columns per packed panel (two AVX registers of f32; 6 × 2
/// sums, 2 operands and a broadcast fit the 16 registers: 4 × 3 spills one).
pub const SC: usize = 16;
/// Frames summed in f32 before the sum is widened and added into the f64 tile.
///
/// Error bound: each f32 sub-block sum of `STATS_TB` products γ·z (fused
/// multiply-adds, so the products are not rounded separately) is within
/// `STATS_TB`·2⁻²⁴ ≈ 3.8e-6 of Σ|γ·z| over those frames (the usual recursive
/// summation bound, first order); the f64 additions of the sub-block sums
/// add ~2⁻⁵³ each. Relative to the Cauchy–Schwarz scale of a statistic
/// (what tests/cli_train.rs measures against Kaldi) that is ≤ 3.8e-6, well
/// inside the 1e-4 tolerances; typically it is √`STATS_TB`·2⁻²⁴ ≈ 5e-7.
/// 64 rather than 32: the widening costs ~9 % of the kernel at 32 frames
/// (micro-benchmark, 256 × 864 × 128); 128 gains only ~2 % more.
pub const STATS_TB: usize = 64;

/// Index of `(frame t, Gaussian g)` in posteriors packed for [`stats`]: blocks
/// of [`SG`] Gaussians, each `n × SG` (frame-major).
#[inline(always)]
pub fn packed_p_index(n: usize, t: usize, g: usize) -> usize {
    (g / SG) * n * SG + t * SG + g % SG
}

/// Length of the posteriors packed for [`stats`] (`gs` rounded up to [`SG`]).
pub fn packed_p_len(n: usize, gs: usize) -> usize {
    gs.div_ceil(SG) * SG * n
}

/// Length of the statistics rows packed for [`stats`]: panels of [`SC`]
/// columns, each `n × SC` (frame-major); column `c` of frame `t` lives at
/// `(c / SC)·n·SC + t·SC + c % SC`.
pub fn packed_x_len(n: usize, cols: usize) -> usize {
    cols.div_ceil(SC) * SC * n
}

/// `s[g][c] = Σ_t p[t][g]·x[t][c]` (or, with `add`, `s[g][c] + Σ…`) for
/// `g < gs`, `c < cols`, `t < n`, with `p` and `x` in f32, packed as
/// [`packed_p_index`] and [`packed_x_len`] say (the padding lanes past `gs`
/// and `cols` must be finite; zeros), and `s` in f64 (`gs` rows of stride
/// `lds` ≥ `cols`). Frames are summed in f32 in frame order in sub-blocks of
/// [`STATS_TB`] (see there for the error bound); the sub-block sums are
/// widened and added in order into an f64 sum (the first taken as it is,
/// i.e. as if it started at 0, up to the sign of a zero), and that sum
/// is stored into `s` or added to it (one f64 addition, so adding equals
/// storing into a zeroed buffer and adding that buffer later).
#[allow(clippy::too_many_arguments)]
pub fn stats(
    gs: usize,
    n: usize,
    cols: usize,
    p: &[f32],
    x: &[f32],
    s: &mut [f64],
    lds: usize,
    add: bool,
) {
    assert!(lds >= cols && p.len() >= packed_p_len(n, gs) && x.len() >= packed_x_len(n, cols));
    assert!(gs == 0 || s.len() >= (gs - 1) * lds + cols);
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; sizes checked above.
        unsafe {
            avx2::stats(
                gs,
                n,
                cols,
                p.as_ptr(),
                x.as_ptr(),
                s.as_mut_ptr(),
                lds,
                add,
            )
        };
        return;
    }
    portable_stats(gs, n, cols, p, x, s, lds, add);
}

#[allow(clippy::too_many_arguments)]
fn portable_stats(
    gs: usize,
    n: usize,
    cols: usize,
    p: &[f32],
    x: &[f32],
    s: &mut [f64],
    lds: usize,
    add: bool,
) {
    for g in 0..gs {
        for c in 0..cols {
            let xc = &x[(c / SC) * n * SC + c % SC..];
            let block = |t0: usize, t1: usize| {
                (t0..t1).fold(0f32, |acc, t| {
                    p[packed_p_index(n, t, g)].mul_add(xc[t * SC], acc)
                })
            };
            let mut t0 = n.min(STATS_TB);
            let mut sum = block(0, t0) as f64;
            while t0 < n {
                let t1 = (t0 + STATS_TB).min(n);
                sum += block(t0, t1) as f64;
                t0 = t1;
            }
            let o = &mut s[g * lds + c];
            *o = if add { *o + sum } else { sum };
        }
    }
}

/// `exp(x)` in f32 for `x ≤ 0`-ish inputs: Cephes' polynomial after range
/// reduction by ln 2, written branch-free so loops over it vectorise. Relative
/// error ≈ 2 ulp; exact 0 below −87.3 (where f32 would go subnormal).
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    let xc = x.clamp(EXP_MIN, EXP_MAX);
    let t = xc * std::f32::consts::LOG2_E + EXP_MAGIC;
    let n = t - EXP_MAGIC;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let mut p = EXP_POLY[0];
    for &c in &EXP_POLY[1..] {
        p = p * r + c;
    }
    p = p * r * r + r + 1.0;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let scale = f32::from_bits((ni.wrapping_add(127) << 23) as u32);
    if x < EXP_MIN {
        0.0
    } else {
        p * scale
    }
}

/// The constants of [`exp_f32`] and its vector versions: the clamp, the
/// rounding constant (1.5·2²³: adding it rounds to an integer), ln 2 in two
/// parts, and Cephes' polynomial, highest power first.
pub(super) const EXP_MIN: f32 = -87.3;
pub(super) const EXP_MAX: f32 = 88.3;
pub(super) const EXP_MAGIC: f32 = 12_582_912.0;
pub(super) const LN2_HI: f32 = 0.693_359_4;
pub(super) const LN2_LO: f32 = -2.121_944_4e-4;
pub(super) const EXP_POLY: [f32; 6] = [
    1.987_569_2e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    5.000_000_1e-1,
];

macro_rules! row_fns {
    ($max:ident, $lse:ident, $softmax:ident) => {
        #[inline(always)]
        fn $max(row: &[f32]) -> f32 {
            let mut m = [f32::NEG_INFINITY; LANES];
            let mut ch = row.chunks_exact(LANES);
            for c in &mut ch {
                for l in 0..LANES {
                    m[l] = if c[l] > m[l] { c[l] } else { m[l] };
                }
            }
            let mut mx = m.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            for &v in ch.remainder() {
                mx = mx.max(v);
            }
            mx
        }

        /// Σ exp(row − max) with 8 partial sums (fixed order).
        #[inline(always)]
        fn $lse(row: &[f32], mx: f32) -> f32 {
            let mut s = [0f32; LANES];
            let mut ch = row.chunks_exact(LANES);
            for c in &mut ch {
                for l in 0..LANES {
                    s[l] += exp_f32(c[l] - mx);
                }
            }
            let mut tot = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
            for &v in ch.remainder() {
                tot += exp_f32(v - mx);
            }
            tot
        }

        /// Replace `row` by exp(row − max) and return the sum (same order as the lse).
        #[inline(always)]
        fn $softmax(row: &mut [f32], mx: f32) -> f32 {
            let mut s = [0f32; LANES];
            let mut ch = row.chunks_exact_mut(LANES);
            for c in &mut ch {
                for l in 0..LANES {
                    let e = exp_f32(c[l] - mx);
                    c[l] = e;
                    s[l] += e;
                }
            }
            let mut tot = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
            for v in ch.into_remainder() {
                let e = exp_f32(*v - mx);
                *v = e;
                tot += e;
            }
            tot
        }
    };
}

row_fns!(max_portable, sumexp_portable, softmax_portable);

/// Log-likelihoods of one expanded frame `xe` (length `k`) against the
/// panels listed in `panels` (indices into `a`: `_ × k × LANES`, and `bias`:
/// `_ × LANES`), panel `i`'s lanes into `out[i·LANES..]`. Each value is
/// bit-identical to [`loglikes`]' for that frame and panel (the same fused
/// multiply-adds in the same order); several panels are in flight at once,
/// so one frame is not bound by the latency of one accumulator's chain.
pub fn gathered_loglikes(
    k: usize,
    xe: &[f32],
    a: &[f32],
    bias: &[f32],
    panels: &[u32],
    out: &mut [f32],
) {
    assert!(xe.len() >= k && out.len() >= panels.len() * LANES);
    let np = bias.len() / LANES;
    assert!(a.len() >= np * k * LANES && panels.iter().all(|&p| (p as usize) < np));
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; sizes and panel indices checked above.
        unsafe {
            avx2::gathered_loglikes(
                k,
                xe.as_ptr(),
                a.as_ptr(),
                bias.as_ptr(),
                panels,
                out.as_mut_ptr(),
            )
        };
        return;
    }
    for (i, &p) in panels.iter().enumerate() {
        let p = p as usize;
        portable_loglikes(
            1,
            k,
            xe,
            k,
            &a[p * k * LANES..(p + 1) * k * LANES],
            &bias[p * LANES..(p + 1) * LANES],
            1,
            &mut out[i * LANES..(i + 1) * LANES],
            LANES,
        );
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2_rows {
    use super::{exp_f32, EXP_MAGIC, EXP_MAX, EXP_MIN, EXP_POLY, LANES, LN2_HI, LN2_LO};
    use std::arch::x86_64::*;

    /// [`exp_f32`] on 8 lanes (same constants; FMA in the reduction).
    #[inline(always)]
    unsafe fn exp8(x: __m256) -> __m256 {
        let set = _mm256_set1_ps;
        let xc = _mm256_max_ps(_mm256_min_ps(x, set(EXP_MAX)), set(EXP_MIN));
        let t = _mm256_fmadd_ps(xc, set(std::f32::consts::LOG2_E), set(EXP_MAGIC));
        let n = _mm256_sub_ps(t, set(EXP_MAGIC));
        let r = _mm256_fnmadd_ps(n, set(LN2_HI), xc);
        let r = _mm256_fnmadd_ps(n, set(LN2_LO), r);
        let mut p = set(EXP_POLY[0]);
        for &c in &EXP_POLY[1..] {
            p = _mm256_fmadd_ps(p, r, set(c));
        }
        p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, set(1.0)));
        let ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B40_0000));
        let scale = _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_add_epi32(ni, _mm256_set1_epi32(127)),
            23,
        ));
        let under = _mm256_cmp_ps(x, set(EXP_MIN), _CMP_LT_OQ);
        _mm256_andnot_ps(under, _mm256_mul_ps(p, scale))
    }

    /// ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)), in registers.
    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        let b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let c = _mm_add_ps(b, _mm_movehdup_ps(b)); // [b0 + b1, _, b2 + b3, _]
        _mm_cvtss_f32(_mm_add_ss(c, _mm_movehl_ps(c, c)))
    }

    /// The largest of 8 lanes (exact, in any order).
    #[inline(always)]
    unsafe fn hmax(v: __m256) -> f32 {
        let b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let c = _mm_max_ps(b, _mm_movehdup_ps(b));
        _mm_cvtss_f32(_mm_max_ss(c, _mm_movehl_ps(c, c)))
    }

    #[inline(always)]
    pub unsafe fn max(row: &[f32]) -> f32 {
        let n8 = row.len() / LANES * LANES;
        let mut m = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut i = 0;
        while i < n8 {
            m = _mm256_max_ps(m, _mm256_loadu_ps(row.as_ptr().add(i)));
            i += LANES;
        }
        let mut mx = hmax(m);
        for &v in &row[n8..] {
            mx = mx.max(v);
        }
        mx
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn log_sum_exp_rows(
        v: &[f32],
        rows: usize,
        len: usize,
        out: &mut [f32],
        stride: usize,
    ) {
        for r in 0..rows {
            out[r * stride] = log_sum_exp(&v[r * len..(r + 1) * len]);
        }
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    pub unsafe fn log_sum_exp(row: &[f32]) -> f32 {
        let mx = max(row);
        if mx == f32::NEG_INFINITY {
            return mx;
        }
        let n8 = row.len() / LANES * LANES;
        let mv = _mm256_set1_ps(mx);
        let mut acc = _mm256_setzero_ps();
        let mut i = 0;
        while i < n8 {
            acc = _mm256_add_ps(
                acc,
                exp8(_mm256_sub_ps(_mm256_loadu_ps(row.as_ptr().add(i)), mv)),
            );
            i += LANES;
        }
        finish_lse(acc, row, n8, mx)
    }

    /// The end of a log-sum-exp: the lanes of `acc` (the sums of
    /// `exp(v − mx)` over the 8-lane chunks of `row[..n8]`) added as a
    /// tree, the rest of the row one by one, and the log.
    #[inline(always)]
    pub unsafe fn finish_lse(acc: __m256, row: &[f32], n8: usize, mx: f32) -> f32 {
        let mut sum = hsum(acc);
        for &v in &row[n8..] {
            sum += exp_f32(v - mx);
        }
        mx + sum.ln()
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn softmax(row: &mut [f32]) -> f32 {
        let mx = max(row);
        let n8 = row.len() / LANES * LANES;
        let mv = _mm256_set1_ps(mx);
        let mut acc = _mm256_setzero_ps();
        let ptr = row.as_mut_ptr();
        let mut i = 0;
        while i < n8 {
            let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(ptr.add(i)), mv));
            _mm256_storeu_ps(ptr.add(i), e);
            acc = _mm256_add_ps(acc, e);
            i += LANES;
        }
        let mut sum = hsum(acc);
        for v in &mut row[n8..] {
            *v = exp_f32(*v - mx);
            sum += *v;
        }
        let inv = _mm256_set1_ps(1.0 / sum);
        let mut i = 0;
        while i < n8 {
            _mm256_storeu_ps(ptr.add(i), _mm256_mul_ps(_mm256_loadu_ps(ptr.add(i)), inv));
            i += LANES;
        }
        let inv = 1.0 / sum;
        for v in &mut row[n8..] {
            *v *= inv;
        }
        mx + sum.ln()
    }
}

/// `log Σ exp(row)`, subtracting the max first; −∞ for an empty or all −∞ row.
pub fn log_sum_exp(row: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if super::avx512::available() {
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA.
        return unsafe { super::avx512::log_sum_exp(row) };
    }
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { avx2_rows::log_sum_exp(row) };
    }
    let mx = max_portable(row);
    if mx == f32::NEG_INFINITY {
        return mx;
    }
    mx + sumexp_portable(row, mx).ln()
}

/// [`log_sum_exp`] of each of `rows` rows of `len` values of `v`, into
/// `out[r · stride]`.
pub fn log_sum_exp_rows(v: &[f32], rows: usize, len: usize, out: &mut [f32], stride: usize) {
    assert!(v.len() >= rows * len && (rows == 0 || out.len() > (rows - 1) * stride));
    #[cfg(target_arch = "x86_64")]
    if super::avx512::available() {
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA; sizes checked above.
        return unsafe { super::avx512::log_sum_exp_rows(v, rows, len, out, stride) };
    }
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; sizes checked above.
        return unsafe { avx2_rows::log_sum_exp_rows(v, rows, len, out, stride) };
    }
    for r in 0..rows {
        out[r * stride] = log_sum_exp(&v[r * len..(r + 1) * len]);
    }
}

/// Replace `row` (log-likelihoods) by its softmax (posteriors); return the
/// log-sum-exp. Like Kaldi's `ApplySoftMax`: exp(x − max), scaled by 1/sum.
pub fn softmax(row: &mut [f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { avx2_rows::softmax(row) };
    }
    let mx = max_portable(row);
    let s = softmax_portable(row, mx);
    let inv = 1.0 / s;
    for v in row.iter_mut() {
        *v *= inv;
    }
    mx + s.ln()
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use super::{LANES, MR, SC, SG};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn loglikes(
        rows: usize,
        k: usize,
        xe: *const f32,
        ldx: usize,
        a: *const f32,
        bias: *const f32,
        panels: usize,
        out: *mut f32,
        ldo: usize,
    ) {
        let mut p = 0;
        // Panel pairs first: 6 frames × 16 Gaussians in 12 registers.
        while p + 2 <= panels {
            let ap = a.add(p * k * LANES);
            let bp = bias.add(p * LANES);
            let op = out.add(p * LANES);
            rows_loop::<2>(rows, k, xe, ldx, ap, bp, op, ldo);
            p += 2;
        }
        if p < panels {
            rows_loop::<1>(
                rows,
                k,
                xe,
                ldx,
                a.add(p * k * LANES),
                bias.add(p * LANES),
                out.add(p * LANES),
                ldo,
            );
        }
    }

    /// See [`super::gathered_loglikes`]: groups of 8 panels, 8 independent
    /// accumulators sharing each broadcast of the frame.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn gathered_loglikes(
        k: usize,
        xe: *const f32,
        a: *const f32,
        bias: *const f32,
        panels: &[u32],
        out: *mut f32,
    ) {
        let mut groups = panels.chunks_exact(8);
        let mut o = out;
        for g in &mut groups {
            gathered::<8>(k, xe, a, bias, g, o);
            o = o.add(8 * LANES);
        }
        let rest = groups.remainder();
        let mut i = 0;
        if rest.len() - i >= 4 {
            gathered::<4>(k, xe, a, bias, &rest[i..i + 4], o);
            o = o.add(4 * LANES);
            i += 4;
        }
        if rest.len() - i >= 2 {
            gathered::<2>(k, xe, a, bias, &rest[i..i + 2], o);
            o = o.add(2 * LANES);
            i += 2;
        }
        if rest.len() > i {
            gathered::<1>(k, xe, a, bias, &rest[i..], o);
        }
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn gathered<const N: usize>(
        k: usize,
        xe: *const f32,
        a: *const f32,
        bias: *const f32,
        panels: &[u32],
        out: *mut f32,
    ) {
        let mut ap = [a; N];
        let mut acc = [_mm256_setzero_ps(); N];
        for j in 0..N {
            ap[j] = a.add(panels[j] as usize * k * LANES);
        }
        for kk in 0..k {
            let xv = _mm256_broadcast_ss(&*xe.add(kk));
            for j in 0..N {
                acc[j] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(ap[j].add(kk * LANES)), acc[j]);
            }
        }
        // The gconst last, as `kernel` adds it.
        for (j, v) in acc.iter().enumerate() {
            let b = _mm256_loadu_ps(bias.add(panels[j] as usize * LANES));
            _mm256_storeu_ps(out.add(j * LANES), _mm256_add_ps(*v, b));
        }
    }

    super::row_blocks!("avx2,fma", rows_loop, kernel, NP);

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn kernel<const R: usize, const NP: usize>(
        k: usize,
        xe: *const f32,
        ldx: usize,
        a: *const f32,
        bias: *const f32,
        out: *mut f32,
        ldo: usize,
    ) {
        let mut acc = [[_mm256_setzero_ps(); NP]; R];
        for kk in 0..k {
            let mut av = [_mm256_setzero_ps(); NP];
            for (j, v) in av.iter_mut().enumerate() {
                *v = _mm256_loadu_ps(a.add((j * k + kk) * LANES));
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let xv = _mm256_broadcast_ss(&*xe.add(r * ldx + kk));
                for j in 0..NP {
                    row[j] = _mm256_fmadd_ps(xv, av[j], row[j]);
                }
            }
        }
        let mut b = [_mm256_setzero_ps(); NP];
        for (j, v) in b.iter_mut().enumerate() {
            *v = _mm256_loadu_ps(bias.add(j * LANES));
        }
        for (r, row) in acc.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                _mm256_storeu_ps(out.add(r * ldo + j * LANES), _mm256_add_ps(*v, b[j]));
            }
        }
    }

    /// See [`super::stats`]. Panels outer (one panel of `x`, `n × SC` f32,
    /// stays in L1 while every block of posteriors passes over it), blocks
    /// of Gaussians inner; each 6 × 16 tile keeps 12 f32 sums in registers
    /// over a sub-block of frames and an f64 tile on the stack across them.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn stats(
        gs: usize,
        n: usize,
        cols: usize,
        p: *const f32,
        x: *const f32,
        s: *mut f64,
        lds: usize,
        add: bool,
    ) {
        const NV: usize = SC / LANES;
        for q in 0..cols.div_ceil(SC) {
            let xq = x.add(q * n * SC);
            let (c0, cw) = (q * SC, (cols - q * SC).min(SC));
            for b in 0..gs.div_ceil(SG) {
                let pb = p.add(b * n * SG);
                let gw = (gs - b * SG).min(SG);
                let out = s.add(b * SG * lds + c0);
                // The first sub-block's sums widened as they are (no zeroed
                // tile: that was a memset call per tile), the others added.
                let tb = n.min(super::STATS_TB);
                let acc = tile(tb, pb, xq);
                let mut wide = [[_mm256_setzero_pd(); 2 * NV]; SG];
                for (w, a) in wide.iter_mut().zip(&acc) {
                    *w = widen(a);
                }
                let mut t0 = tb;
                while t0 < n {
                    let tb = (n - t0).min(super::STATS_TB);
                    let acc = tile(tb, pb.add(t0 * SG), xq.add(t0 * SC));
                    for (w, a) in wide.iter_mut().zip(&acc) {
                        let v = widen(a);
                        for j in 0..2 * NV {
                            w[j] = _mm256_add_pd(w[j], v[j]);
                        }
                    }
                    t0 += tb;
                }
                if cw == SC {
                    for (i, w) in wide.iter().enumerate().take(gw) {
                        for (j, v) in w.iter().enumerate() {
                            let dst = out.add(i * lds + 4 * j);
                            let v = if add {
                                _mm256_add_pd(_mm256_loadu_pd(dst), *v)
                            } else {
                                *v
                            };
                            _mm256_storeu_pd(dst, v);
                        }
                    }
                } else {
                    let mut tmp = [0f64; SC];
                    for (i, w) in wide.iter().enumerate().take(gw) {
                        for (j, v) in w.iter().enumerate() {
                            _mm256_storeu_pd(tmp.as_mut_ptr().add(4 * j), *v);
                        }
                        for (c, &v) in tmp.iter().enumerate().take(cw) {
                            let dst = out.add(i * lds + c);
                            *dst = if add { *dst + v } else { v };
                        }
                    }
                }
            }
        }
    }

    /// Eight f32 sums as f64, low half first.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn widen(a: &[__m256; SC / LANES]) -> [__m256d; 2 * SC / LANES] {
        let mut w = [_mm256_setzero_pd(); 2 * SC / LANES];
        for (j, v) in a.iter().enumerate() {
            w[2 * j] = _mm256_cvtps_pd(_mm256_castps256_ps128(*v));
            w[2 * j + 1] = _mm256_cvtps_pd(_mm256_extractf128_ps(*v, 1));
        }
        w
    }

    /// Σ over `n` frames of one packed block of posteriors (`n × SG`) times
    /// one packed panel (`n × SC`), in f32 in frame order.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn tile(n: usize, p: *const f32, x: *const f32) -> [[__m256; SC / LANES]; SG] {
        const NV: usize = SC / LANES;
        let mut acc = [[_mm256_setzero_ps(); NV]; SG];
        for t in 0..n {
            let mut xv = [_mm256_setzero_ps(); NV];
            for (j, v) in xv.iter_mut().enumerate() {
                *v = _mm256_loadu_ps(x.add(t * SC + LANES * j));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let pv = _mm256_broadcast_ss(&*p.add(t * SG + i));
                for j in 0..NV {
                    row[j] = _mm256_fmadd_ps(pv, xv[j], row[j]);
                }
            }
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_std_to_a_few_ulp() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x <= 0.0 {
            let e = exp_f32(x) as f64;
            let r = (x as f64).exp();
            worst = worst.max(((e - r) / r).abs());
            x += 0.0137;
        }
        assert!(
            worst < 4.0 * f32::EPSILON as f64,
            "worst relative error {worst}"
        );
        assert_eq!(exp_f32(-100.0), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(0.0), 1.0);
    }

    #[test]
    fn avx2_and_portable_loglikes_agree() {
        let (rows, k, panels) = (13, 11, 3);
        let xe: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.25)
            .collect();
        let a: Vec<f32> = (0..panels * k * LANES)
            .map(|i| ((i * 5 % 17) as f32 - 8.0) * 0.125)
            .collect();
        let bias: Vec<f32> = (0..panels * LANES).map(|i| -(i as f32)).collect();
        let mut o1 = vec![0f32; rows * panels * LANES];
        let mut o2 = o1.clone();
        loglikes(rows, k, &xe, k, &a, &bias, panels, &mut o1, panels * LANES);
        portable_loglikes(rows, k, &xe, k, &a, &bias, panels, &mut o2, panels * LANES);
        // Inputs are exact in a few bits, so FMA and mul+add round the same.
        assert_eq!(o1, o2);
    }

    /// The gathered kernel's values are the block kernel's bit for bit, on
    /// inputs whose sums round (so the order of the additions shows): the
    /// contract alignment's on-demand likelihoods and Gaussian selection
    /// rely on.
    #[test]
    fn gathered_loglikes_are_the_block_kernels_bit_for_bit() {
        let (k, np) = (37, 11);
        let xe: Vec<f32> = (0..k)
            .map(|i| ((i * 7919 % 1013) as f32).sin() * 3.1)
            .collect();
        let a: Vec<f32> = (0..np * k * LANES)
            .map(|i| ((i * 104_729 % 997) as f32).cos() * 1.7)
            .collect();
        let bias: Vec<f32> = (0..np * LANES)
            .map(|i| -(i as f32) * 13.37 - 55.5)
            .collect();
        let mut block = vec![0f32; np * LANES];
        loglikes(1, k, &xe, k, &a, &bias, np, &mut block, np * LANES);
        // Every group size of the gathered kernel (8, 4, 2, 1), out of order.
        let panels: Vec<u32> = vec![10, 3, 0, 7, 1, 9, 2, 4, 8, 6, 5, 3, 10, 0, 7];
        let mut got = vec![0f32; panels.len() * LANES];
        gathered_loglikes(k, &xe, &a, &bias, &panels, &mut got);
        for (i, &p) in panels.iter().enumerate() {
            let p = p as usize;
            assert_eq!(
                &got[i * LANES..(i + 1) * LANES],
                &block[p * LANES..(p + 1) * LANES],
                "panel {p}"
            );
        }
    }

    /// Packed operands of [`stats`] and the plain f64 sum they stand for.
    fn stats_case(gs: usize, n: usize, cols: usize) -> (Vec<f32>, Vec<f32>, Vec<f64>) {
        let mut p = vec![0f32; packed_p_len(n, gs)];
        let mut x = vec![0f32; packed_x_len(n, cols)];
        let mut want = vec![0f64; gs * cols];
        let pv = |t: usize, g: usize| ((t * 3 + g * 7) % 11) as f32 * 0.125;
        let xv = |t: usize, c: usize| ((t * 5 + c * 3) % 13) as f32 - 6.0;
        for t in 0..n {
            for g in 0..gs {
                p[packed_p_index(n, t, g)] = pv(t, g);
            }
            for c in 0..cols {
                x[(c / SC) * n * SC + t * SC + c % SC] = xv(t, c);
                for g in 0..gs {
                    want[g * cols + c] += pv(t, g) as f64 * xv(t, c) as f64;
                }
            }
        }
        (p, x, want)
    }

    #[test]
    fn avx2_and_portable_stats_agree_and_sum_exactly() {
        // Partial tiles in Gaussians (13 = 2·6 + 1), columns (37 = 2·16 + 5)
        // and sub-blocks of frames (2·STATS_TB + 11). Inputs are multiples of
        // 1/8 with |p·x| ≤ 7.5, so every partial sum (< 2¹² eighths) is
        // exact in f32 and all paths must equal the f64 sum bit for bit.
        let (gs, n, cols) = (13, 2 * STATS_TB + 11, 37);
        let (p, x, want) = stats_case(gs, n, cols);
        let lds = cols + 3;
        let mut s1 = vec![-1f64; gs * lds];
        let mut s2 = s1.clone();
        stats(gs, n, cols, &p, &x, &mut s1, lds, false);
        portable_stats(gs, n, cols, &p, &x, &mut s2, lds, false);
        assert_eq!(s1, s2);
        for g in 0..gs {
            assert_eq!(
                &s1[g * lds..g * lds + cols],
                &want[g * cols..(g + 1) * cols]
            );
            // The row padding past `cols` is not written.
            assert!(s1[g * lds + cols..(g + 1) * lds].iter().all(|&v| v == -1.0));
        }
        // `add` adds the same sums to what is there.
        stats(gs, n, cols, &p, &x, &mut s1, lds, true);
        portable_stats(gs, n, cols, &p, &x, &mut s2, lds, true);
        assert_eq!(s1, s2);
        for g in 0..gs {
            for c in 0..cols {
                assert_eq!(s1[g * lds + c], 2.0 * want[g * cols + c]);
            }
        }
    }

    #[test]
    fn lse_of_empty_and_minus_infinity() {
        assert_eq!(log_sum_exp(&[]), f32::NEG_INFINITY);
        assert_eq!(log_sum_exp(&[f32::NEG_INFINITY; 3]), f32::NEG_INFINITY);
        let v = [1.0f32, 2.0, 3.0, 0.5, -1.0, 7.0, 2.0, 1.0, 0.0, -3.0];
        let r = v.iter().map(|&a| (a as f64).exp()).sum::<f64>().ln();
        assert!((log_sum_exp(&v) as f64 - r).abs() < 1e-6);
    }
}
