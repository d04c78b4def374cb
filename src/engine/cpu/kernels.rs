//! The CPU engine's inner loops: register-blocked micro-kernels for the two
//! GEMMs of the GMM formulation, and a vectorisable `exp` for log-sum-exp and
//! softmax. Each has an AVX2+FMA version (picked at run time) and a portable one
//! with the same summation order.
//!
//! - Log-likelihoods: `L[t][g] = gconst[g] + Σ_k xe[t][k]·A[k][g]`, with the
//!   Gaussians of a state stored in panels of [`LANES`] (`[k][lane]`, the
//!   Vaněk layout with 8 lanes): per k, one load of 8 Gaussians' parameters is
//!   reused by up to 6 frames (broadcasts), 6×16 outputs stay in registers.
//! - Statistics: `S[g][c] += Σ_t P[g][t]·xe[t][c]` in f64, 4 Gaussians × 12
//!   columns in registers, summed over the frames of a chunk in frame order.
//!
//! Nothing here allocates or knows about models; callers pass raw slices whose
//! sizes they checked.

/// Gaussians per parameter panel (one AVX register of f32).
pub const LANES: usize = 8;
/// Frames per log-likelihood micro-kernel call.
pub const MR: usize = 6;

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

/// Log-likelihoods of `rows` frames against `panels` consecutive panels.
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
            acc.copy_from_slice(&bias[p * LANES..(p + 1) * LANES]);
            let x = &xe[r * ldx..r * ldx + k];
            for (kk, &xv) in x.iter().enumerate() {
                let av = &ap[kk * LANES..(kk + 1) * LANES];
                for l in 0..LANES {
                    acc[l] += xv * av[l];
                }
            }
            out[r * ldo + p * LANES..r * ldo + (p + 1) * LANES].copy_from_slice(&acc);
        }
    }
}

/// Frames summed in registers before adding into `s` (keeps a block of `xe`
/// in L1 while all Gaussians pass over it).
pub const STATS_TB: usize = 32;

/// `s[g][c] += Σ_t p[t][g]·xe[t][c]` for `g < gs`, `c < cols` (a multiple of
/// 4), `t < n`; `p` is `n × gs` (row stride `ldp` ≥ `gs`; make it odd so a
/// block of rows does not fall into one L1 set), `xe` is `n × cols` (stride
/// `cols`), `s` is `gs × cols` (stride `cols`). Frames are summed in order in
/// blocks of [`STATS_TB`], each block's sum added into `s` in block order.
pub fn stats(gs: usize, n: usize, cols: usize, p: &[f64], ldp: usize, xe: &[f64], s: &mut [f64]) {
    assert!(cols % 4 == 0 && ldp >= gs);
    assert!(n == 0 || p.len() >= (n - 1) * ldp + gs);
    assert!(xe.len() >= n * cols && s.len() >= gs * cols);
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; sizes checked above.
        unsafe { avx2::stats(gs, n, cols, p.as_ptr(), ldp, xe.as_ptr(), s.as_mut_ptr()) };
        return;
    }
    let mut t0 = 0;
    while t0 < n {
        let t1 = (t0 + STATS_TB).min(n);
        for g in 0..gs {
            for c in 0..cols {
                let mut acc = 0f64;
                for t in t0..t1 {
                    acc += p[t * ldp + g] * xe[t * cols + c];
                }
                s[g * cols + c] += acc;
            }
        }
        t0 = t1;
    }
}

/// `exp(x)` in f32 for `x ≤ 0`-ish inputs: Cephes' polynomial after range
/// reduction by ln 2, written branch-free so loops over it vectorise. Relative
/// error ≈ 2 ulp; exact 0 below −87.3 (where f32 would go subnormal).
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0; // 1.5·2^23: adding it rounds to an integer
    let xc = x.clamp(-87.3, 88.3);
    let t = xc * LOG2E + MAGIC;
    let n = t - MAGIC;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_2e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    p = p * r * r + r + 1.0;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let scale = f32::from_bits((ni.wrapping_add(127) << 23) as u32);
    if x < -87.3 {
        0.0
    } else {
        p * scale
    }
}

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

#[cfg(target_arch = "x86_64")]
mod avx2_rows {
    use super::{exp_f32, LANES};
    use std::arch::x86_64::*;

    /// [`exp_f32`] on 8 lanes (same constants; FMA in the reduction).
    #[inline(always)]
    unsafe fn exp8(x: __m256) -> __m256 {
        let set = _mm256_set1_ps;
        let xc = _mm256_max_ps(_mm256_min_ps(x, set(88.3)), set(-87.3));
        let t = _mm256_fmadd_ps(xc, set(std::f32::consts::LOG2_E), set(12_582_912.0));
        let n = _mm256_sub_ps(t, set(12_582_912.0));
        let r = _mm256_fnmadd_ps(n, set(0.693_359_4), xc);
        let r = _mm256_fnmadd_ps(n, set(-2.121_944_4e-4), r);
        let mut p = set(1.987_569_2e-4);
        p = _mm256_fmadd_ps(p, r, set(1.398_199_9e-3));
        p = _mm256_fmadd_ps(p, r, set(8.333_452e-3));
        p = _mm256_fmadd_ps(p, r, set(4.166_579_6e-2));
        p = _mm256_fmadd_ps(p, r, set(1.666_666_5e-1));
        p = _mm256_fmadd_ps(p, r, set(5.000_000_1e-1));
        p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, set(1.0)));
        let ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B40_0000));
        let scale = _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_add_epi32(ni, _mm256_set1_epi32(127)),
            23,
        ));
        let under = _mm256_cmp_ps(x, set(-87.3), _CMP_LT_OQ);
        _mm256_andnot_ps(under, _mm256_mul_ps(p, scale))
    }

    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        let mut a = [0f32; LANES];
        _mm256_storeu_ps(a.as_mut_ptr(), v);
        ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
    }

    #[inline(always)]
    unsafe fn max(row: &[f32]) -> f32 {
        let n8 = row.len() / LANES * LANES;
        let mut m = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut i = 0;
        while i < n8 {
            m = _mm256_max_ps(m, _mm256_loadu_ps(row.as_ptr().add(i)));
            i += LANES;
        }
        let mut a = [0f32; LANES];
        _mm256_storeu_ps(a.as_mut_ptr(), m);
        let mut mx = a.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for &v in &row[n8..] {
            mx = mx.max(v);
        }
        mx
    }

    #[target_feature(enable = "avx2,fma")]
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
mod avx2 {
    use super::{LANES, MR};
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

    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn rows_loop<const NP: usize>(
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
            kernel::<MR, NP>(k, xe.add(r * ldx), ldx, a, bias, out.add(r * ldo), ldo);
            r += MR;
        }
        let left = rows - r;
        let (x, o) = (xe.add(r * ldx), out.add(r * ldo));
        match left {
            0 => {}
            1 => kernel::<1, NP>(k, x, ldx, a, bias, o, ldo),
            2 => kernel::<2, NP>(k, x, ldx, a, bias, o, ldo),
            3 => kernel::<3, NP>(k, x, ldx, a, bias, o, ldo),
            4 => kernel::<4, NP>(k, x, ldx, a, bias, o, ldo),
            _ => kernel::<5, NP>(k, x, ldx, a, bias, o, ldo),
        }
    }

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
        for j in 0..NP {
            let b = _mm256_loadu_ps(bias.add(j * LANES));
            for row in acc.iter_mut() {
                row[j] = b;
            }
        }
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
        for (r, row) in acc.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                _mm256_storeu_ps(out.add(r * ldo + j * LANES), *v);
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn stats(
        gs: usize,
        n: usize,
        cols: usize,
        p: *const f64,
        ldp: usize,
        xe: *const f64,
        s: *mut f64,
    ) {
        let mut t0 = 0;
        while t0 < n {
            let tb = (n - t0).min(super::STATS_TB);
            let (pb, xb) = (p.add(t0 * ldp), xe.add(t0 * cols));
            let mut g = 0;
            while g < gs {
                let mg = (gs - g).min(4);
                let mut c = 0;
                while c < cols {
                    let nv = ((cols - c) / 4).min(2);
                    let (pp, x, o) = (pb.add(g), xb.add(c), s.add(g * cols + c));
                    match (mg, nv) {
                        (4, 3) => st::<4, 3>(tb, pp, ldp, x, cols, o, cols),
                        (4, 2) => st::<4, 2>(tb, pp, ldp, x, cols, o, cols),
                        (4, _) => st::<4, 1>(tb, pp, ldp, x, cols, o, cols),
                        (3, 3) => st::<3, 3>(tb, pp, ldp, x, cols, o, cols),
                        (3, 2) => st::<3, 2>(tb, pp, ldp, x, cols, o, cols),
                        (3, _) => st::<3, 1>(tb, pp, ldp, x, cols, o, cols),
                        (2, 3) => st::<2, 3>(tb, pp, ldp, x, cols, o, cols),
                        (2, 2) => st::<2, 2>(tb, pp, ldp, x, cols, o, cols),
                        (2, _) => st::<2, 1>(tb, pp, ldp, x, cols, o, cols),
                        (_, 3) => st::<1, 3>(tb, pp, ldp, x, cols, o, cols),
                        (_, 2) => st::<1, 2>(tb, pp, ldp, x, cols, o, cols),
                        (_, _) => st::<1, 1>(tb, pp, ldp, x, cols, o, cols),
                    }
                    c += nv * 4;
                }
                g += mg;
            }
            t0 += tb;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn st<const MG: usize, const NV: usize>(
        n: usize,
        p: *const f64,
        ldp: usize,
        xe: *const f64,
        ldx: usize,
        s: *mut f64,
        lds: usize,
    ) {
        let mut acc = [[_mm256_setzero_pd(); NV]; MG];
        for t in 0..n {
            let mut xv = [_mm256_setzero_pd(); NV];
            for (j, v) in xv.iter_mut().enumerate() {
                *v = _mm256_loadu_pd(xe.add(t * ldx + 4 * j));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let pv = _mm256_broadcast_sd(&*p.add(t * ldp + i));
                for j in 0..NV {
                    row[j] = _mm256_fmadd_pd(pv, xv[j], row[j]);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                let dst = s.add(i * lds + 4 * j);
                _mm256_storeu_pd(dst, _mm256_add_pd(_mm256_loadu_pd(dst), *v));
            }
        }
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

    #[test]
    fn lse_of_empty_and_minus_infinity() {
        assert_eq!(log_sum_exp(&[]), f32::NEG_INFINITY);
        assert_eq!(log_sum_exp(&[f32::NEG_INFINITY; 3]), f32::NEG_INFINITY);
        let v = [1.0f32, 2.0, 3.0, 0.5, -1.0, 7.0, 2.0, 1.0, 0.0, -3.0];
        let r = v.iter().map(|&a| (a as f64).exp()).sum::<f64>().ln();
        assert!((log_sum_exp(&v) as f64 - r).abs() < 1e-6);
    }
}
