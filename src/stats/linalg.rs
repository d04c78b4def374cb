//! The little dense linear algebra the full-covariance update needs, on
//! symmetric matrices packed as Kaldi's `SpMatrix` (lower triangle, row by
//! row: element (i, j), j ≤ i, at `i(i+1)/2 + j`), all in f64: inverse and
//! log-determinant through Cholesky, and the symmetric eigendecomposition
//! (cyclic Jacobi) used to floor covariance eigenvalues.
//!
//! Matrices here are at most a few hundred wide (feature dimensions), so
//! clarity wins over blocking.

/// Index of (i, j) in a packed lower triangle.
#[inline]
pub fn sp_index(i: usize, j: usize) -> usize {
    if j <= i {
        i * (i + 1) / 2 + j
    } else {
        j * (j + 1) / 2 + i
    }
}

/// Number of packed elements of an `n × n` symmetric matrix.
pub fn sp_len(n: usize) -> usize {
    n * (n + 1) / 2
}

/// Packed → full row-major `n × n`.
pub fn sp_to_full(p: &[f64], n: usize) -> Vec<f64> {
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let v = p[sp_index(i, j)];
            a[i * n + j] = v;
            a[j * n + i] = v;
        }
    }
    a
}

/// Full (symmetric) row-major → packed lower triangle.
pub fn full_to_sp(a: &[f64], n: usize) -> Vec<f64> {
    let mut p = Vec::with_capacity(sp_len(n));
    for i in 0..n {
        for j in 0..=i {
            p.push(a[i * n + j]);
        }
    }
    p
}

/// Cholesky factor `L` (row-major full, lower) of a packed positive-definite
/// matrix; `None` when it is not positive definite.
pub fn cholesky(p: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let mut d = p[sp_index(j, j)];
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        if d <= 0.0 || d.is_nan() {
            return None;
        }
        let djj = d.sqrt();
        l[j * n + j] = djj;
        for i in j + 1..n {
            let mut s = p[sp_index(i, j)];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / djj;
        }
    }
    Some(l)
}

/// log det of a packed positive-definite matrix (Kaldi's `LogPosDefDet`).
pub fn log_pos_def_det(p: &[f64], n: usize) -> Option<f64> {
    let l = cholesky(p, n)?;
    Some((0..n).map(|i| 2.0 * l[i * n + i].ln()).sum())
}

/// Inverse of a packed positive-definite matrix, packed.
pub fn sp_invert(p: &[f64], n: usize) -> Option<Vec<f64>> {
    let l = cholesky(p, n)?;
    // L⁻¹ by forward substitution, then A⁻¹ = L⁻ᵀ L⁻¹.
    let mut li = vec![0.0; n * n];
    for i in 0..n {
        li[i * n + i] = 1.0 / l[i * n + i];
        for j in 0..i {
            let mut s = 0.0;
            for k in j..i {
                s -= l[i * n + k] * li[k * n + j];
            }
            li[i * n + j] = s / l[i * n + i];
        }
    }
    let mut out = Vec::with_capacity(sp_len(n));
    for i in 0..n {
        for j in 0..=i {
            let mut s = 0.0;
            for k in i..n {
                s += li[k * n + i] * li[k * n + j];
            }
            out.push(s);
        }
    }
    Some(out)
}

/// `S v` for packed symmetric `S`.
pub fn sp_vec(p: &[f64], n: usize, v: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; n];
    for i in 0..n {
        for j in 0..=i {
            let s = p[sp_index(i, j)];
            out[i] += s * v[j];
            if i != j {
                out[j] += s * v[i];
            }
        }
    }
    out
}

/// tr(A B) for packed symmetric A, B (Kaldi's `TraceSpSp`).
pub fn trace_sp_sp(a: &[f64], b: &[f64], n: usize) -> f64 {
    let mut s = 0.0;
    for i in 0..n {
        for j in 0..=i {
            let k = sp_index(i, j);
            s += if i == j {
                a[k] * b[k]
            } else {
                2.0 * a[k] * b[k]
            };
        }
    }
    s
}

/// Eigenvalues and eigenvectors (columns of the row-major `n × n` matrix) of
/// a packed symmetric matrix, by cyclic Jacobi rotations.
pub fn sym_eig(p: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut a = sp_to_full(p, n);
    let mut v = vec![0.0; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    for _sweep in 0..100 {
        let mut off = 0.0;
        let mut diag = 0.0;
        for i in 0..n {
            diag += a[i * n + i] * a[i * n + i];
            for j in 0..i {
                off += a[i * n + j] * a[i * n + j];
            }
        }
        if off <= 1e-30 * diag || off == 0.0 {
            break;
        }
        for pi in 0..n {
            for q in pi + 1..n {
                let apq = a[pi * n + q];
                if apq == 0.0 {
                    continue;
                }
                let app = a[pi * n + pi];
                let aqq = a[q * n + q];
                let theta = (aqq - app) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let akp = a[k * n + pi];
                    let akq = a[k * n + q];
                    a[k * n + pi] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let apk = a[pi * n + k];
                    let aqk = a[q * n + k];
                    a[pi * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let vkp = v[k * n + pi];
                    let vkq = v[k * n + q];
                    v[k * n + pi] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

/// Kaldi's `SpMatrix::ApplyFloor(floor)`: eigenvalues below `floor` are
/// raised to it and the matrix rebuilt as `P diag(s) Pᵀ`. Returns how many
/// were floored.
pub fn apply_eig_floor(p: &mut [f64], n: usize, floor: f64) -> usize {
    let (mut s, v) = sym_eig(p, n);
    let mut floored = 0;
    for x in s.iter_mut() {
        if *x < floor {
            *x = floor;
            floored += 1;
        }
    }
    for i in 0..n {
        for j in 0..=i {
            let mut acc = 0.0;
            for k in 0..n {
                acc += v[i * n + k] * s[k] * v[j * n + k];
            }
            p[sp_index(i, j)] = acc;
        }
    }
    floored
}

/// Largest absolute eigenvalue (Kaldi's `MaxAbsEig`).
pub fn max_abs_eig(p: &[f64], n: usize) -> f64 {
    let (s, _) = sym_eig(p, n);
    s.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn random_spd(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed | 1;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 2000) as f64 / 1000.0 - 1.0
        };
        let b: Vec<f64> = (0..n * n).map(|_| next()).collect();
        let mut p = vec![0.0; sp_len(n)];
        for i in 0..n {
            for j in 0..=i {
                let mut acc = if i == j { 0.5 } else { 0.0 };
                for k in 0..n {
                    acc += b[i * n + k] * b[j * n + k];
                }
                p[sp_index(i, j)] = acc;
            }
        }
        p
    }

    proptest! {
        #[test]
        fn inverse_times_matrix_is_identity(n in 1usize..12, seed in 1u64..10_000) {
            let p = random_spd(n, seed);
            let inv = sp_invert(&p, n).unwrap();
            let a = sp_to_full(&p, n);
            let b = sp_to_full(&inv, n);
            for i in 0..n {
                for j in 0..n {
                    let s: f64 = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum();
                    let want = if i == j { 1.0 } else { 0.0 };
                    prop_assert!((s - want).abs() < 1e-8);
                }
            }
        }

        #[test]
        fn eig_reconstructs_and_logdet_agrees(n in 1usize..12, seed in 1u64..10_000) {
            let p = random_spd(n, seed);
            let (s, v) = sym_eig(&p, n);
            let mut q = p.clone();
            // Flooring at -inf changes nothing but rebuilds from the eigensystem.
            prop_assert_eq!(apply_eig_floor(&mut q, n, f64::NEG_INFINITY), 0);
            for (x, y) in p.iter().zip(&q) {
                prop_assert!((x - y).abs() < 1e-9 * (1.0 + x.abs()));
            }
            let ld: f64 = s.iter().map(|x| x.ln()).sum();
            prop_assert!((ld - log_pos_def_det(&p, n).unwrap()).abs() < 1e-8 * (1.0 + ld.abs()));
            let _ = v;
        }
    }

    #[test]
    fn floor_raises_small_eigenvalues() {
        // diag(4, 0.5): floor at 1 → diag(4, 1).
        let mut p = vec![4.0, 0.0, 0.5];
        assert_eq!(apply_eig_floor(&mut p, 2, 1.0), 1);
        assert!((p[0] - 4.0).abs() < 1e-12 && p[1].abs() < 1e-12 && (p[2] - 1.0).abs() < 1e-12);
        assert_eq!(max_abs_eig(&[-3.0, 0.0, 2.0], 2), 3.0);
        assert!(cholesky(&[1.0, 2.0, 1.0], 2).is_none());
    }
}
