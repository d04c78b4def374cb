//! AVX-512 versions of the log-likelihood kernel and of log-sum-exp: 16
//! lanes an instruction where the AVX2 versions ([`super::kernels`]) take
//! 8, each lane's arithmetic the same operations in the same order, so the
//! results are the same bits (a fused multiply-add is exactly rounded
//! whatever the vector width). Picked at run time where the CPU has
//! AVX-512F; on a core with 512-bit units (Zen 5, Intel server parts) they
//! do twice the work an instruction.
//!
//! - Log-likelihoods: two 8-lane panels of the AVX2 layout side by side in
//!   one register (panels `p` and `p + 1` of a state are adjacent in the
//!   output row too), 6 frames × 2 pairs in registers.
//! - Log-sum-exp: `exp` of two 8-lane chunks at once, added into the 8-lane
//!   sum one chunk after the other, as the AVX2 version adds them.

use std::arch::x86_64::*;

use super::kernels::avx2_rows;
use super::kernels::{avx2, LANES, MR};
use super::kernels::{EXP_MAGIC, EXP_MAX, EXP_MIN, EXP_POLY, LN2_HI, LN2_LO};

/// Whether the CPU has AVX-512F (and AVX2 and FMA, which the tails use).
pub fn available() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
    })
}

/// See [`super::kernels::loglikes`]: panel pairs in zmm registers, an odd
/// last panel through the AVX2 kernel.
///
/// # Safety
/// The CPU has AVX-512F, AVX2 and FMA ([`available`]); the pointers cover
/// the sizes `kernels::loglikes` checks.
#[target_feature(enable = "avx512f,avx2,fma")]
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
    // Two pairs (6 frames × 32 Gaussians in 12 registers), then one pair,
    // then an odd last panel.
    let at = |p: usize| {
        (
            a.add(p * k * LANES),
            bias.add(p * LANES),
            out.add(p * LANES),
        )
    };
    let mut p = 0;
    while p + 4 <= panels {
        let (ap, bp, op) = at(p);
        rows_loop::<2>(rows, k, xe, ldx, ap, bp, op, ldo);
        p += 4;
    }
    if p + 2 <= panels {
        let (ap, bp, op) = at(p);
        rows_loop::<1>(rows, k, xe, ldx, ap, bp, op, ldo);
        p += 2;
    }
    if p < panels {
        let (ap, bp, op) = at(p);
        avx2::loglikes(rows, k, xe, ldx, ap, bp, panels - p, op, ldo);
    }
}

super::kernels::row_blocks!("avx512f,avx2,fma", rows_loop, kernel, NZ);

/// Panels `2j` and `2j + 1` at `kk` in one register.
#[inline(always)]
unsafe fn panel_pair(a: *const f32, k: usize, j: usize, kk: usize) -> __m512 {
    let lo = _mm256_loadu_ps(a.add((2 * j * k + kk) * LANES));
    let hi = _mm256_loadu_ps(a.add(((2 * j + 1) * k + kk) * LANES));
    _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castps_pd(_mm512_castps256_ps512(lo)),
        _mm256_castps_pd(hi),
        1,
    ))
}

#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn kernel<const R: usize, const NZ: usize>(
    k: usize,
    xe: *const f32,
    ldx: usize,
    a: *const f32,
    bias: *const f32,
    out: *mut f32,
    ldo: usize,
) {
    let mut acc = [[_mm512_setzero_ps(); NZ]; R];
    for kk in 0..k {
        let mut av = [_mm512_setzero_ps(); NZ];
        for (j, v) in av.iter_mut().enumerate() {
            *v = panel_pair(a, k, j, kk);
        }
        for (r, row) in acc.iter_mut().enumerate() {
            let xv = _mm512_set1_ps(*xe.add(r * ldx + kk));
            for j in 0..NZ {
                row[j] = _mm512_fmadd_ps(xv, av[j], row[j]);
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            let b = _mm512_loadu_ps(bias.add(2 * j * LANES));
            _mm512_storeu_ps(out.add(r * ldo + 2 * j * LANES), _mm512_add_ps(*v, b));
        }
    }
}

/// `super::kernels`' 8-lane `exp` on 16 lanes (the same operations).
#[inline(always)]
unsafe fn exp16(x: __m512) -> __m512 {
    let set = _mm512_set1_ps;
    let xc = _mm512_max_ps(_mm512_min_ps(x, set(EXP_MAX)), set(EXP_MIN));
    let t = _mm512_fmadd_ps(xc, set(std::f32::consts::LOG2_E), set(EXP_MAGIC));
    let n = _mm512_sub_ps(t, set(EXP_MAGIC));
    let r = _mm512_fnmadd_ps(n, set(LN2_HI), xc);
    let r = _mm512_fnmadd_ps(n, set(LN2_LO), r);
    let mut p = set(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = _mm512_fmadd_ps(p, r, set(c));
    }
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, set(1.0)));
    let ni = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B40_0000));
    let scale = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(
        ni,
        _mm512_set1_epi32(127),
    )));
    let under = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, set(EXP_MIN));
    _mm512_maskz_mov_ps(!under, _mm512_mul_ps(p, scale))
}

/// The lower and upper 8 lanes.
#[inline(always)]
unsafe fn halves(v: __m512) -> (__m256, __m256) {
    (
        _mm512_castps512_ps256(v),
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)),
    )
}

/// See [`super::kernels::log_sum_exp`]: the same max, the same 8-lane sum
/// of `exp(v − max)` chunk by chunk (two chunks' `exp` at once), the same
/// tree over the lanes.
///
/// # Safety
/// The CPU has AVX-512F, AVX2 and FMA ([`available`]).
#[target_feature(enable = "avx512f,avx2,fma")]
pub unsafe fn log_sum_exp(row: &[f32]) -> f32 {
    let mx = avx2_rows::max(row);
    if mx == f32::NEG_INFINITY {
        return mx;
    }
    let n8 = row.len() / LANES * LANES;
    let (mv, mv16) = (_mm256_set1_ps(mx), _mm512_set1_ps(mx));
    let mut acc = _mm256_setzero_ps();
    let mut i = 0;
    while i + 2 * LANES <= n8 {
        let e = exp16(_mm512_sub_ps(_mm512_loadu_ps(row.as_ptr().add(i)), mv16));
        let (lo, hi) = halves(e);
        acc = _mm256_add_ps(_mm256_add_ps(acc, lo), hi);
        i += 2 * LANES;
    }
    if i < n8 {
        let x = _mm256_sub_ps(_mm256_loadu_ps(row.as_ptr().add(i)), mv);
        let e = halves(exp16(_mm512_castps256_ps512(x))).0;
        acc = _mm256_add_ps(acc, e);
    }
    avx2_rows::finish_lse(acc, row, n8, mx)
}

/// [`log_sum_exp`] of each of `rows` rows of `len` values of `v`, into
/// `out[r · stride]`.
///
/// # Safety
/// As [`log_sum_exp`]; `v` and `out` hold the rows.
#[target_feature(enable = "avx512f,avx2,fma")]
pub unsafe fn log_sum_exp_rows(v: &[f32], rows: usize, len: usize, out: &mut [f32], stride: usize) {
    for r in 0..rows {
        out[r * stride] = log_sum_exp(&v[r * len..(r + 1) * len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::random::Rng;

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The AVX-512 kernel and log-sum-exp give the AVX2 versions' bits, on
    /// random inputs of every panel and row count up to a few tiles, with
    /// virtual (−∞) lanes.
    #[test]
    fn same_bits_as_avx2() {
        if !available() {
            println!("skipped: no AVX-512F");
            return;
        }
        let mut rng = Rng::new(7);
        let k = 78;
        for panels in 1..=7 {
            for rows in 1..=13 {
                let mut v = |n: usize| {
                    (0..n)
                        .map(|_| rng.normal() as f32 * 3.0)
                        .collect::<Vec<f32>>()
                };
                let xe = v(rows * k);
                let a = v(panels * k * LANES);
                let mut bias = v(panels * LANES);
                bias[panels * LANES - 1] = f32::NEG_INFINITY;
                let ldo = panels * LANES + 3;
                let (mut o1, mut o2) = (vec![0f32; rows * ldo], vec![0f32; rows * ldo]);
                // SAFETY: available() above; sizes as kernels::loglikes checks.
                unsafe {
                    loglikes(
                        rows,
                        k,
                        xe.as_ptr(),
                        k,
                        a.as_ptr(),
                        bias.as_ptr(),
                        panels,
                        o1.as_mut_ptr(),
                        ldo,
                    );
                    avx2::loglikes(
                        rows,
                        k,
                        xe.as_ptr(),
                        k,
                        a.as_ptr(),
                        bias.as_ptr(),
                        panels,
                        o2.as_mut_ptr(),
                        ldo,
                    );
                }
                assert_eq!(bits(&o1), bits(&o2), "{panels} panels, {rows} rows");
                for r in 0..rows {
                    for len in [panels * LANES, panels * LANES - 3] {
                        let row = &o1[r * ldo..r * ldo + len];
                        // SAFETY: available() above.
                        let (x, y) = unsafe { (log_sum_exp(row), avx2_rows::log_sum_exp(row)) };
                        assert_eq!(x.to_bits(), y.to_bits(), "lse of {len}");
                    }
                }
            }
        }
        // SAFETY: available() above.
        unsafe {
            assert_eq!(log_sum_exp(&[]), f32::NEG_INFINITY);
            assert_eq!(log_sum_exp(&[f32::NEG_INFINITY; 16]), f32::NEG_INFINITY);
        }
    }
}
