//! Adding a batch's device sums into the host's f64 accumulators. One
//! addition an element, so any split of the work gives the same bits: a big
//! model's rows are added on the global thread pool, the states at once and
//! a big state's Gaussians in groups.

use rayon::prelude::*;

use crate::stats::accumulators::GmmAccumulator;

/// Fewer sums than this (8 MB) are added on the calling thread. A UBM
/// batch's 2048 × 81 took 0.3 ms on one thread, and 0.3–2.5 ms on the
/// global pool while 24 threads copied frames: its threads waited for
/// cores (2 × H100, docs/performance.md, twenty-first session). Several
/// devices' batches are added on a thread of their own ([`crate::engine::adder`]).
const PARALLEL_FROM: usize = 1 << 20;
/// Gaussians of a group of a big state.
const GROUP: usize = 128;

/// The rows' layout: `kz` a Gaussian, Σγx in the first `dim`, the second
/// order sums in the next `vlen`, Σγ last.
#[derive(Clone, Copy)]
pub(super) struct RowShape {
    pub dim: usize,
    pub vlen: usize,
    pub kz: usize,
}

/// The device sums of a batch (`sums`, rows as `shape` says, state s's
/// from row `first[s]`) and its Σ weight × log-likelihood and Σ weight
/// (`totals`) added into `acc`.
/// `pool`: the threads that add them, or `None` for the calling thread
/// (or the global pool, for many sums).
pub(super) fn add_batch(
    acc: &mut crate::stats::ModelAccumulators,
    sums: &[f64],
    totals: (f64, f64),
    first: &[usize],
    shape: RowShape,
    pool: Option<&rayon::ThreadPool>,
) {
    add_rows(&mut acc.states, sums, first, shape, pool);
    acc.total_like += totals.0;
    acc.total_frames += totals.1;
}

/// `acc[s] += rows of state s`, state s's rows at `first[s]` (Gaussians).
pub(super) fn add_rows(
    states: &mut [GmmAccumulator],
    sums: &[f64],
    first: &[usize],
    shape: RowShape,
    pool: Option<&rayon::ThreadPool>,
) {
    let kz = shape.kz;
    let groups = states.iter_mut().enumerate().flat_map(|(s, a)| {
        let ng = a.occupancy.len();
        group_parts(a, &sums[first[s] * kz..][..ng * kz], shape)
    });
    if let Some(p) = pool {
        let groups: Vec<Group<'_>> = groups.collect();
        p.install(|| groups.into_par_iter().for_each(|g| g.add(shape)));
    } else if sums.len() < PARALLEL_FROM {
        groups.for_each(|g| g.add(shape));
    } else {
        groups
            .collect::<Vec<_>>()
            .into_par_iter()
            .for_each(|g| g.add(shape));
    }
}

/// The accumulators of some Gaussians of one state and their rows.
struct Group<'a> {
    occupancy: &'a mut [f64],
    mean: &'a mut [f64],
    var: &'a mut [f64],
    rows: &'a [f64],
}

impl Group<'_> {
    fn add(self, shape: RowShape) {
        let RowShape { dim, vlen, kz } = shape;
        for (g, row) in self.rows.chunks_exact(kz).enumerate() {
            self.occupancy[g] += row[kz - 1];
            if !self.mean.is_empty() {
                add_into(&mut self.mean[g * dim..(g + 1) * dim], &row[..dim]);
            }
            if !self.var.is_empty() {
                add_into(
                    &mut self.var[g * vlen..(g + 1) * vlen],
                    &row[dim..dim + vlen],
                );
            }
        }
    }
}

fn add_into(dst: &mut [f64], src: &[f64]) {
    for (x, y) in dst.iter_mut().zip(src) {
        *x += y;
    }
}

/// State `a`'s Gaussians in groups of [`GROUP`], with their rows.
fn group_parts<'a>(a: &'a mut GmmAccumulator, rows: &'a [f64], shape: RowShape) -> Vec<Group<'a>> {
    let n = a.occupancy.len().div_ceil(GROUP).max(1);
    let occ = a.occupancy.chunks_mut(GROUP);
    let mean = chunks_or_empty(&mut a.mean_acc, GROUP * shape.dim, n);
    let var = chunks_or_empty(&mut a.var_acc, GROUP * shape.vlen, n);
    let rows = rows.chunks(GROUP * shape.kz);
    occ.zip(mean)
        .zip(var)
        .zip(rows)
        .map(|(((occupancy, mean), var), rows)| Group {
            occupancy,
            mean,
            var,
            rows,
        })
        .collect()
}

/// `v` in chunks of `len`, or `n` empty slices when `v` is empty (sums not
/// accumulated).
fn chunks_or_empty(v: &mut [f64], len: usize, n: usize) -> Vec<&mut [f64]> {
    match v.is_empty() {
        true => (0..n).map(|_| <&mut [f64]>::default()).collect(),
        false => v.chunks_mut(len.max(1)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(ng: usize, dim: usize, vlen: usize, means: bool, vars: bool) -> GmmAccumulator {
        let fill = |n: usize, k: f64| (0..n).map(|i| k + i as f64 * 0.25).collect::<Vec<f64>>();
        GmmAccumulator {
            occupancy: fill(ng, 1.0),
            mean_acc: if means {
                fill(ng * dim, 2.0)
            } else {
                Vec::new()
            },
            var_acc: if vars {
                fill(ng * vlen, 3.0)
            } else {
                Vec::new()
            },
        }
    }

    /// Every element gets its row's value once, whether the sums are
    /// few (one thread) or many (groups on the pool), or added on a pool
    /// of the caller's, with means or variances not accumulated.
    #[test]
    fn each_sum_is_added_once_into_its_place() {
        let (dim, vlen) = (3, 3);
        let kz = 2 * dim + 1;
        let own = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for (&(ngs, means, vars), pool) in [
            (&[2usize, 5][..], true, true),
            (&[300, 150_000, 1][..], true, true),
            (&[300, 7000][..], false, true),
            (&[300, 7000][..], true, false),
        ]
        .iter()
        .flat_map(|case| [(case, None), (case, Some(&own))])
        {
            let mut states: Vec<_> = ngs
                .iter()
                .map(|&n| state(n, dim, vlen, means, vars))
                .collect();
            let before = states.clone();
            let total: usize = ngs.iter().sum();
            let sums: Vec<f64> = (0..total * kz).map(|i| (i as f64).sqrt()).collect();
            let first: Vec<usize> = ngs
                .iter()
                .scan(0, |a, &n| {
                    *a += n;
                    Some(*a - n)
                })
                .collect();
            add_rows(&mut states, &sums, &first, RowShape { dim, vlen, kz }, pool);
            for (s, (a, b)) in states.iter().zip(&before).enumerate() {
                for g in 0..ngs[s] {
                    let row = &sums[(first[s] + g) * kz..][..kz];
                    assert_eq!(a.occupancy[g], b.occupancy[g] + row[kz - 1]);
                    for k in 0..dim {
                        if means {
                            assert_eq!(a.mean_acc[g * dim + k], b.mean_acc[g * dim + k] + row[k]);
                        }
                        if vars {
                            assert_eq!(
                                a.var_acc[g * vlen + k],
                                b.var_acc[g * vlen + k] + row[dim + k]
                            );
                        }
                    }
                }
                assert_eq!(a.mean_acc.len(), b.mean_acc.len());
                assert_eq!(a.var_acc.len(), b.var_acc.len());
            }
        }
    }
}
