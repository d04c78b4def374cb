//! The weights of the padded state blocks in the operand order of the
//! tensor-core scoring kernels (`kernels/gmm.cu`): slots of `lanes` columns
//! (the layout's block size, 64 for these kernels), each `[k][lanes]` (k < kz),
//! rearranged so that every lane's mma fragment is one
//! 16-byte load. Rows past kz are zero; −∞ (a virtual Gaussian's gconst)
//! becomes −1e30, since 0·−∞ would be NaN in the split products.

use rayon::prelude::*;

/// `x` rounded to TF32 (10 mantissa bits) as `cvt.rna.tf32.f32` does: to
/// nearest, ties away from zero (adding half an ulp to the magnitude bits).
pub(crate) fn tf32_round(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    f32::from_bits(x.to_bits().wrapping_add(0x1000) & 0xffff_e000)
}

/// Slots of `lanes` columns (a multiple of 8), each `[k][lanes]` (k < kz),
/// rearranged into the operand order of the tensor-core kernels (see
/// `kernels/gmm.cu`): per slot, per k-step of 8 and per 8 columns, 32 lanes × (b0 hi, b1 hi, b0 lo, b1 lo),
/// where lane = 4g + t holds rows 8s+t and 8s+t+4 of column 8j+g, each split
/// into a TF32 part and its TF32 remainder. Rows past kz are zero; −∞ (a
/// virtual Gaussian's gconst) becomes −1e30, since 0·−∞ would be NaN.
pub(crate) fn to_fragments(plain: &[f32], kz: usize, ks: usize, lanes: usize) -> Vec<f32> {
    assert!(lanes % 8 == 0, "fragments cover columns 8 at a time");
    let slots = plain.len() / (kz * lanes);
    let (groups, slot_len) = (lanes / 8, ks * 16 * lanes);
    let mut out = vec![0f32; slots * slot_len];
    // Slots are independent: in parallel (a large model has ~1e9 values).
    out.par_chunks_mut(slot_len)
        .enumerate()
        .for_each(|(slot, out)| {
            for st in 0..ks {
                for j in 0..groups {
                    for lane in 0..32 {
                        let (g, t) = (lane >> 2, lane & 3);
                        let n = 8 * j + g;
                        let o = ((st * groups + j) * 32 + lane) * 4;
                        for (q, k) in [8 * st + t, 8 * st + t + 4].into_iter().enumerate() {
                            let v = weight_at(plain, kz, lanes, slot, k, n);
                            let hi = tf32_round(v);
                            out[o + q] = hi;
                            out[o + 2 + q] = tf32_round(v - hi);
                        }
                    }
                }
            }
        });
    out
}

fn weight_at(plain: &[f32], kz: usize, lanes: usize, slot: usize, k: usize, n: usize) -> f32 {
    if k >= kz {
        return 0.0;
    }
    let v = plain[(slot * kz + k) * lanes + n];
    if v == f32::NEG_INFINITY {
        -1e30
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf32_round_keeps_ten_mantissa_bits_ties_away() {
        assert_eq!(tf32_round(1.0), 1.0);
        let ulp = 2f32.powi(-10);
        // 1 + ulp/2 is a tie: away from zero, in both signs.
        assert_eq!(tf32_round(1.0 + ulp / 2.0), 1.0 + ulp);
        assert_eq!(tf32_round(-(1.0 + ulp / 2.0)), -(1.0 + ulp));
        assert_eq!(tf32_round(1.0 + ulp / 4.0), 1.0);
        assert_eq!(tf32_round(f32::NEG_INFINITY), f32::NEG_INFINITY);
        let x = 123.456_79f32;
        let hi = tf32_round(x);
        assert_eq!(hi.to_bits() & 0x1fff, 0);
        let lo = tf32_round(x - hi);
        assert!(
            ((hi + lo) - x).abs() <= x.abs() * 2f32.powi(-20),
            "{hi} {lo}"
        );
    }

    #[test]
    fn fragments_put_each_weight_where_the_mma_reads_it() {
        let (kz, ks, lanes) = (11, 2, 64);
        let slots = 2;
        let plain: Vec<f32> = (0..slots * kz * lanes)
            .map(|i| {
                if i == 5 {
                    f32::NEG_INFINITY
                } else {
                    1.0 + i as f32 / 7.0
                }
            })
            .collect();
        let f = to_fragments(&plain, kz, ks, lanes);
        assert_eq!(f.len(), slots * ks * 1024);
        for slot in 0..slots {
            for k in 0..8 * ks {
                for n in 0..lanes {
                    let (st, kk) = (k / 8, k % 8);
                    let (t, q) = (kk % 4, kk / 4);
                    let (j, g) = (n / 8, n % 8);
                    let o = slot * ks * 1024 + ((st * 8 + j) * 32 + 4 * g + t) * 4;
                    let got = f[o + q] + f[o + 2 + q];
                    let want = if k >= kz {
                        0.0
                    } else {
                        let v = plain[(slot * kz + k) * lanes + n];
                        if v.is_finite() {
                            v
                        } else {
                            -1e30
                        }
                    };
                    assert!(
                        (got - want).abs() <= want.abs() * 1e-6,
                        "{slot} {k} {n}: {got} vs {want}"
                    );
                }
            }
        }
    }
}
