//! The largest |x_d| of each dimension over rows of frames: what the
//! tensor-core E-steps scale each chunk of frames by (`cuda/estep16.rs`,
//! `cuda/estep_full.rs`). Taken in parallel over blocks of rows, while
//! copying where there is a copy (in the same pass, `engine/copy_max.rs`,
//! for a mapped archive's parts; else from the rows just written), and
//! kept per copied part of a batch ([`RowMaxima`]) so that a batch gathered
//! in one place needs no second pass over its frames for any chunk of it.
//! NaN counts as infinite, so a chunk holding one is refused by the scales.

use std::ops::Range;

use rayon::prelude::*;

/// Rows per block of the parallel max (and copy) below.
const MAX_BLOCK_ROWS: usize = 4096;

/// Largest |x_d| over the rows of one block, serially.
pub fn block_abs_max(data: &[f32], dim: usize) -> Vec<f32> {
    let mut m = vec![0f32; dim];
    for row in data.chunks_exact(dim) {
        for (a, &x) in m.iter_mut().zip(row) {
            *a = a.max(if x.is_nan() { f32::INFINITY } else { x.abs() });
        }
    }
    m
}

/// The elementwise max of two blocks' maxima, into `a`.
pub fn merge_into(a: &mut [f32], b: &[f32]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.max(*y);
    }
}

fn max_merge(mut a: Vec<f32>, b: Vec<f32>) -> Vec<f32> {
    merge_into(&mut a, &b);
    a
}

/// Largest |x_d| of each dimension over the rows of `data`.
pub fn abs_max(data: &[f32], dim: usize) -> Vec<f32> {
    data.par_chunks(MAX_BLOCK_ROWS * dim.max(1))
        .map(|c| block_abs_max(c, dim))
        .reduce(|| vec![0f32; dim], max_merge)
}

/// [`abs_max`] of `src` while copying it into `dst`: each block's max is
/// taken right after its copy, while it is still in the cache.
pub fn copy_abs_max(src: &[f32], dst: &mut [f32], dim: usize) -> Vec<f32> {
    let rows = MAX_BLOCK_ROWS * dim.max(1);
    dst[..src.len()]
        .par_chunks_mut(rows)
        .zip(src.par_chunks(rows))
        .map(|(o, i)| {
            o.copy_from_slice(i);
            block_abs_max(i, dim)
        })
        .reduce(|| vec![0f32; dim], max_merge)
}

/// The maxima of the parts of a batch, each over its own rows, in row order
/// (parts that were pushed while they were kept).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowMaxima {
    dim: usize,
    parts: Vec<(Range<usize>, Vec<f32>)>,
}

impl RowMaxima {
    pub fn new(dim: usize) -> Self {
        RowMaxima {
            dim,
            parts: Vec::new(),
        }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Notes that rows `rows` (no part noted before) have maxima `max`;
    /// parts are kept in row order, whatever the order they are noted in.
    pub fn note(&mut self, rows: Range<usize>, max: Vec<f32>) {
        let i = self.parts.partition_point(|(r, _)| r.start < rows.start);
        self.parts.insert(i, (rows, max));
    }

    pub fn clear(&mut self) {
        self.parts.clear();
    }

    /// Largest |x_d| of the parts noted that meet rows `rows` (whole: a
    /// part cut by the range's ends gives its maxima, a bound on those of
    /// its rows inside), for frames no longer at hand; 0 for rows of no
    /// part.
    pub fn noted_abs_max(&self, rows: Range<usize>) -> Vec<f32> {
        let mut m = vec![0f32; self.dim];
        for (part, max) in &self.parts {
            if part.end > rows.start && part.start < rows.end {
                merge_into(&mut m, max);
            }
        }
        m
    }

    /// Largest |x_d| over rows `rows` of `data` (the batch these maxima are
    /// of): the noted parts inside `rows` as noted, the rest (parts cut by
    /// the range's ends, rows of no part) from `data`. The same values as
    /// [`abs_max`] of those rows: a max does not depend on grouping.
    pub fn abs_max(&self, data: &[f32], rows: Range<usize>) -> Vec<f32> {
        let d = self.dim;
        let mut m = vec![0f32; d];
        let direct = |r: Range<usize>, m: &mut Vec<f32>| {
            if !r.is_empty() {
                merge_into(m, &abs_max(&data[r.start * d..r.end * d], d));
            }
        };
        let mut at = rows.start;
        for (part, max) in &self.parts {
            if part.end <= at || part.start >= rows.end {
                continue;
            }
            if part.start > at {
                direct(at..part.start, &mut m);
                at = part.start;
            }
            if part.end <= rows.end && part.start >= rows.start {
                merge_into(&mut m, max);
                at = part.end;
            } else {
                let end = part.end.min(rows.end);
                direct(at..end, &mut m);
                at = end;
            }
        }
        direct(at..rows.end.max(at), &mut m);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rows: usize, dim: usize) -> Vec<f32> {
        (0..rows * dim)
            .map(|i| ((i % 7) as f32 - 3.0) * (i as f32).sin() * (1 + i % 13) as f32)
            .collect()
    }

    #[test]
    fn abs_max_takes_every_row_and_nan_as_infinite() {
        let data: Vec<f32> = (0..3 * 10_000)
            .map(|i| ((i % 3) as f32 - 1.0) * (i as f32))
            .collect();
        let m = abs_max(&data, 3);
        let want: Vec<f32> = (0..3)
            .map(|c| {
                data.iter()
                    .skip(c)
                    .step_by(3)
                    .fold(0f32, |a, &x| a.max(x.abs()))
            })
            .collect();
        assert_eq!(m, want);
        let mut dst = vec![0f32; data.len() + 5];
        assert_eq!(copy_abs_max(&data, &mut dst, 3), want);
        assert_eq!(&dst[..data.len()], &data[..]);
        assert_eq!(abs_max(&[1.0, f32::NAN], 2), vec![1.0, f32::INFINITY]);
    }

    #[test]
    fn any_range_of_noted_parts_is_the_direct_max() {
        let (rows, dim) = (500, 3);
        let data = sample(rows, dim);
        // Parts of 37 rows, with rows 100..120 and the last 20 in no part.
        let mut rm = RowMaxima::new(dim);
        let mut r0 = 0;
        while r0 + 37 <= rows - 20 {
            let r1 = r0 + 37;
            if !(100..120).contains(&r0) {
                rm.note(r0..r1, block_abs_max(&data[r0 * dim..r1 * dim], dim));
            }
            r0 = r1;
        }
        for (a, b) in [
            (0, rows),
            (0, 1),
            (5, 80),
            (36, 38),
            (37, 74),
            (90, 130),
            (450, 500),
            (499, 500),
            (7, 7),
        ] {
            assert_eq!(
                rm.abs_max(&data, a..b),
                abs_max(&data[a * dim..b * dim], dim),
                "rows {a}..{b}"
            );
        }
    }
}
