//! A part of a batch copied into its place and its largest |x_d| taken in
//! the same pass over the source ([`copy_abs_max`]): the copies of a
//! mapped archive's frames into page-locked memory are most of the host's
//! work on two GPUs, and copying, then reading the copy back for the
//! maxima ([`block_abs_max`]), went over the frames twice. The source is a
//! matrix of the archive: `f32` data at any alignment (it follows a header
//! of any length) takes the one pass, `f64` is converted as before. The
//! maxima are those of [`block_abs_max`], bit for bit (NaN counts as
//! infinite).
//!
//! On x86-64 the pass takes eight floats at a time where the CPU has AVX2
//! (four with SSE2 otherwise): with four, a copying thread of a two-GPU
//! job filled its pieces at ~2.3 GB/s, about half the rate of a plain
//! copy on the same host, and the two devices waited for the host at a
//! job's start (docs/performance.md, twenty-fifth session).
//!
//! On x86-64 the copy's stores may be non-temporal (they go to memory
//! without reading the destination's lines first, and leave the cache to
//! the source): `AMTOOL_FRAME_STORES=cached` turns them off, for
//! comparison.

use std::ops::Range;
use std::sync::OnceLock;

use amtool_formats::kaldi::matrix::{FloatKind, RawMatrix};

use super::row_max::block_abs_max;

/// Whether the copies store around the cache (the default on x86-64).
fn streaming_stores() -> bool {
    static STREAM: OnceLock<bool> = OnceLock::new();
    *STREAM.get_or_init(|| std::env::var("AMTOOL_FRAME_STORES").as_deref() != Ok("cached"))
}

/// `src`'s values (`dst.len()` of them) copied into `dst`, and the largest
/// |x_d| of each of the `dim` columns of its rows.
pub fn copy_abs_max(src: &RawMatrix<'_>, dst: &mut [f32], dim: usize) -> Vec<f32> {
    copy_abs_max_stores(src, dst, dim, streaming_stores())
}

/// Floats `floats` of `src` (counted over its rows, which start at float
/// 0) copied into `dst` as [`copy_abs_max`] does, but with plain stores:
/// `dst` is a small piece a device reads while it is in the cache
/// ([`crate::engine::upload`]). The maxima are of `dim`-wide rows from the
/// range's start.
pub fn copy_range_abs_max(
    src: &RawMatrix<'_>,
    floats: Range<usize>,
    dst: &mut [f32],
    dim: usize,
) -> Vec<f32> {
    let width = src.kind.size();
    let part = RawMatrix {
        rows: 1,
        cols: floats.len(),
        kind: src.kind,
        data: &src.data[floats.start * width..floats.end * width],
    };
    copy_abs_max_stores(&part, dst, dim, false)
}

/// The largest |x_d| of each of the `dim` columns of `rows` (whole rows),
/// as [`copy_abs_max`] takes them: for frames read into place some other
/// way ([`amtool_formats::kaldi::matrix::SharedMatrix::read_f32_at`]).
pub fn abs_max(rows: &[f32], dim: usize) -> Vec<f32> {
    #[cfg(target_arch = "x86_64")]
    if dim > 0 && rows.len() % dim == 0 {
        // SAFETY: the length is whole rows (checked); SSE2 is part of x86-64.
        return unsafe { x86::abs_max(rows, dim) };
    }
    block_abs_max(rows, dim.max(1))
}

/// Floats read a block at a time: bytes a block, about half a core's L2
/// cache, so that each block's maxima are taken while it is still there.
const READ_BLOCK_BYTES: usize = 256 << 10;

/// `dst` filled by `read(floats, into)` a block of whole rows at a time
/// (rows `dim` wide), and the largest |x_d| of its columns taken from each
/// block while it is in the cache, as [`copy_abs_max`] takes them; `None`
/// when a read fails (`dst` is then unspecified). For a mapped archive's
/// parts read with `pread`
/// ([`amtool_formats::kaldi::matrix::SharedMatrix::read_f32_at`]): copied
/// from the map, every page of it gets mapped in the process, and letting
/// go of the map then unmaps them all, ~6.5 ms a GB on the GPU host, with
/// the process's page faults held up meanwhile; one GPU's job on a 5 GB
/// archive lost 32 ms to it at its end (docs/performance.md,
/// twenty-seventh session).
pub fn read_abs_max(
    mut read: impl FnMut(Range<usize>, &mut [f32]) -> bool,
    dst: &mut [f32],
    dim: usize,
) -> Option<Vec<f32>> {
    let d = dim.max(1);
    let block = (READ_BLOCK_BYTES / 4 / d).max(1) * d;
    let mut max = vec![0f32; d];
    for (i, part) in dst.chunks_mut(block).enumerate() {
        let at = i * block;
        if !read(at..at + part.len(), part) {
            return None;
        }
        super::row_max::merge_into(&mut max, &abs_max(part, d));
    }
    Some(max)
}

fn copy_abs_max_stores(src: &RawMatrix<'_>, dst: &mut [f32], dim: usize, stream: bool) -> Vec<f32> {
    assert_eq!(
        src.rows * src.cols,
        dst.len(),
        "copy_abs_max: source and destination differ"
    );
    #[cfg(target_arch = "x86_64")]
    if src.kind == FloatKind::F32 && dim > 0 && dst.len() % dim == 0 {
        // SAFETY: lengths checked above; SSE2 is part of x86-64.
        return unsafe { x86::copy_abs_max(src.data, dst, dim, stream) };
    }
    src.copy_to_f32(dst);
    block_abs_max(dst, dim.max(1))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// NaN as +inf, else |x|, four lanes.
    #[inline(always)]
    unsafe fn abs_or_inf(x: __m128) -> __m128 {
        let abs = _mm_andnot_ps(_mm_set1_ps(-0.0), x);
        let nan = _mm_cmpunord_ps(x, x);
        _mm_or_ps(
            _mm_andnot_ps(nan, abs),
            _mm_and_ps(nan, _mm_set1_ps(f32::INFINITY)),
        )
    }

    /// Blocks of four rows are `dim` vectors of four floats; vector j of
    /// every block holds the same columns ((4j + l) mod dim, lane l), so
    /// `dim` running maxima cover them and fold into the columns at the
    /// end. The rows after the last whole block are done one float at a
    /// time.
    ///
    /// # Safety
    /// `src.len() == 4 * dst.len()`, `dst.len()` a multiple of `dim` > 0.
    pub unsafe fn copy_abs_max(src: &[u8], dst: &mut [f32], dim: usize, stream: bool) -> Vec<f32> {
        let n = dst.len();
        let d = dst.as_mut_ptr();
        let s = src.as_ptr();
        let m = match (avx2::available(), (d as usize) % 32 == 0, stream) {
            (true, true, true) => avx2::scan::<STREAM>(s, d, n, dim),
            (true, _, false) => avx2::scan::<UNALIGNED>(s, d, n, dim),
            _ => match ((d as usize) % 16 == 0, stream) {
                (true, true) => scan::<STREAM>(s, d, n, dim),
                (true, false) => scan::<ALIGNED>(s, d, n, dim),
                (false, _) => scan::<UNALIGNED>(s, d, n, dim),
            },
        };
        if stream {
            // The streamed stores are seen by every reader (and the DMA that
            // reads the batch) before anything after this.
            _mm_sfence();
        }
        m
    }

    /// The maxima of [`copy_abs_max`] of `src` itself, nothing stored.
    ///
    /// # Safety
    /// `src.len()` a multiple of `dim` > 0.
    pub unsafe fn abs_max(src: &[f32], dim: usize) -> Vec<f32> {
        if avx2::available() {
            return avx2::scan::<NO_STORE>(
                src.as_ptr().cast(),
                std::ptr::null_mut(),
                src.len(),
                dim,
            );
        }
        scan::<NO_STORE>(src.as_ptr().cast(), std::ptr::null_mut(), src.len(), dim)
    }

    /// The same scan eight floats at a time (AVX2), the maxima taken as
    /// integers: |x|'s bits order as its value does, and a NaN's (its sign
    /// cleared) lie above +inf's, so one AND and one integer max a vector
    /// keep what [`abs_or_inf`] and a float max keep, and a maximum above
    /// +inf's bits is a NaN's, +inf at the fold. Its blocks are of
    /// `dim / gcd(dim, 8)` vectors (five for 40 columns), the period of
    /// their columns.
    pub(super) mod avx2 {
        use super::*;

        pub fn available() -> bool {
            use std::sync::OnceLock;
            static HAS: OnceLock<bool> = OnceLock::new();
            *HAS.get_or_init(|| is_x86_feature_detected!("avx2"))
        }

        /// # Safety
        /// As [`super::scan`]; the CPU has AVX2 ([`available`]); with
        /// `STREAM`, `d` is 32-byte aligned.
        #[target_feature(enable = "avx2")]
        pub unsafe fn scan<const STORE: u8>(
            s: *const u8,
            d: *mut f32,
            n: usize,
            dim: usize,
        ) -> Vec<f32> {
            let period = dim / gcd(dim, 8);
            let block = 8 * period;
            let whole = n / block * block;
            let clear_sign = _mm256_set1_epi32(i32::MAX);
            let mut acc = vec![_mm256_setzero_si256(); period];
            let mut i = 0;
            while i < whole {
                for a in acc.iter_mut() {
                    let x = _mm256_loadu_si256(s.add(4 * i).cast());
                    *a = _mm256_max_epi32(*a, _mm256_and_si256(x, clear_sign));
                    match STORE {
                        STREAM => _mm256_stream_si256(d.add(i).cast(), x),
                        NO_STORE => {}
                        _ => _mm256_storeu_si256(d.add(i).cast(), x),
                    }
                    i += 8;
                }
            }
            let mut m = vec![0u32; dim];
            for (j, a) in acc.iter().enumerate() {
                let mut lanes = [0u32; 8];
                _mm256_storeu_si256(lanes.as_mut_ptr().cast(), *a);
                for (l, v) in lanes.iter().enumerate() {
                    let c = (8 * j + l) % dim;
                    m[c] = m[c].max(*v);
                }
            }
            let mut m: Vec<f32> = m
                .into_iter()
                .map(|b| match b > f32::INFINITY.to_bits() {
                    true => f32::INFINITY,
                    false => f32::from_bits(b),
                })
                .collect();
            rest::<STORE>(s, d, whole..n, dim, &mut m);
            m
        }

        fn gcd(a: usize, b: usize) -> usize {
            match b {
                0 => a,
                _ => gcd(b, a % b),
            }
        }
    }

    /// How [`scan`] stores what it reads.
    pub(super) const NO_STORE: u8 = 0;
    pub(super) const UNALIGNED: u8 = 1;
    const ALIGNED: u8 = 2;
    const STREAM: u8 = 3;

    /// The maxima of the `n` floats at `s` (bytes of little-endian f32s,
    /// any alignment), each stored at `d` as `STORE` says.
    #[inline(always)]
    pub(super) unsafe fn scan<const STORE: u8>(
        s: *const u8,
        d: *mut f32,
        n: usize,
        dim: usize,
    ) -> Vec<f32> {
        let block = 4 * dim;
        let whole = n / block * block;
        let mut acc = vec![_mm_setzero_ps(); dim];
        let mut i = 0;
        while i < whole {
            for a in acc.iter_mut() {
                let x = _mm_loadu_ps(s.add(4 * i).cast::<f32>());
                *a = _mm_max_ps(*a, abs_or_inf(x));
                match STORE {
                    STREAM => _mm_stream_ps(d.add(i), x),
                    ALIGNED => _mm_store_ps(d.add(i), x),
                    UNALIGNED => _mm_storeu_ps(d.add(i), x),
                    _ => {}
                }
                i += 4;
            }
        }
        let mut m = vec![0f32; dim];
        for (j, a) in acc.iter().enumerate() {
            let mut lanes = [0f32; 4];
            _mm_storeu_ps(lanes.as_mut_ptr(), *a);
            for (l, v) in lanes.iter().enumerate() {
                let c = (4 * j + l) % dim;
                m[c] = m[c].max(*v);
            }
        }
        rest::<STORE>(s, d, whole..n, dim, &mut m);
        m
    }

    /// Floats `floats` of a scan (those after its last whole block), one
    /// at a time, into the maxima `m` of their columns.
    #[inline(always)]
    unsafe fn rest<const STORE: u8>(
        s: *const u8,
        d: *mut f32,
        floats: std::ops::Range<usize>,
        dim: usize,
        m: &mut [f32],
    ) {
        for k in floats {
            let x = f32::from_le_bytes(*s.add(4 * k).cast::<[u8; 4]>());
            if STORE != NO_STORE {
                *d.add(k) = x;
            }
            let c = k % dim;
            m[c] = m[c].max(if x.is_nan() { f32::INFINITY } else { x.abs() });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::random::Rng;

    /// Read a block at a time, a part's floats and maxima are those of
    /// one pass over it (blocks of whole rows; a part not a multiple of a
    /// block; a NaN as infinite); a failed read gives `None`.
    #[test]
    fn reading_by_blocks_gives_the_whole_parts_maxima() {
        let mut rng = Rng::new(3);
        for (d, rows) in [(40, 5000), (3, 30_001), (1, 10), (7, 0)] {
            let mut src: Vec<f32> = (0..rows * d).map(|_| rng.normal() as f32).collect();
            if rows > 100 {
                src[99 * d] = f32::NAN;
                src[rows * d - 1] = -1e4;
            }
            let mut dst = vec![0f32; src.len()];
            let mut reads = Vec::new();
            let read = |r: Range<usize>, into: &mut [f32]| {
                assert_eq!(r.start % d, 0, "whole rows");
                into.copy_from_slice(&src[r.clone()]);
                reads.push(r);
                true
            };
            let max = read_abs_max(read, &mut dst, d).unwrap();
            assert_eq!(max, block_abs_max(&src, d));
            assert!(dst
                .iter()
                .zip(&src)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            assert!(rows * d < 70_000 || reads.len() > 1, "read in blocks");
        }
        let fail = |_: Range<usize>, _: &mut [f32]| false;
        assert!(read_abs_max(fail, &mut [0.0; 8], 2).is_none());
    }

    fn bytes_of(v: &[f32], offset: usize) -> Vec<u8> {
        let mut b = vec![0u8; offset];
        b.extend(v.iter().flat_map(|x| x.to_le_bytes()));
        b
    }

    fn raw(data: &[u8], rows: usize, cols: usize) -> RawMatrix<'_> {
        RawMatrix {
            rows,
            cols,
            kind: FloatKind::F32,
            data,
        }
    }

    /// Copies and maxima (also `abs_max` of the copy) are those of a plain
    /// copy and `block_abs_max`, to the bit, for any width, any number of
    /// rows, source offset and destination alignment, with NaN, infinities
    /// and signed zeros.
    #[test]
    fn the_copy_and_maxima_are_a_plain_copys() {
        let mut rng = Rng::new(7);
        let specials = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            -1e-40,
        ];
        for dim in [1usize, 2, 3, 4, 13, 39, 40, 60] {
            for rows in [0usize, 1, 3, 4, 5, 17, 64] {
                let mut v: Vec<f32> = (0..rows * dim)
                    .map(|_| (rng.normal() * 100.0) as f32)
                    .collect();
                for (i, s) in specials.iter().enumerate() {
                    if i * 7 < v.len() && rng.uniform() < 0.5 {
                        v[i * 7] = *s;
                    }
                }
                let want = block_abs_max(&v, dim);
                for offset in [0usize, 1, 3] {
                    let src = bytes_of(&v, offset);
                    for skip in [0usize, 1] {
                        let mut out = vec![0f32; rows * dim + skip];
                        let got =
                            copy_abs_max(&raw(&src[offset..], rows, dim), &mut out[skip..], dim);
                        let same = |a: &[f32], b: &[f32]| {
                            a.iter()
                                .map(|x| x.to_bits())
                                .eq(b.iter().map(|x| x.to_bits()))
                        };
                        assert!(same(&out[skip..], &v), "copy, dim {dim} rows {rows}");
                        assert!(same(&got, &want), "maxima, dim {dim} rows {rows}");
                        let read = abs_max(&out[skip..], dim);
                        assert!(same(&read, &want), "maxima read, dim {dim} rows {rows}");
                    }
                }
            }
        }
    }

    /// A range, with plain stores: the same bits as that range copied
    /// alone, whole rows or not.
    #[test]
    fn a_range_copied_is_that_range_of_a_plain_copy() {
        let mut rng = Rng::new(8);
        let (dim, rows) = (13, 50);
        let v: Vec<f32> = (0..rows * dim).map(|_| rng.normal() as f32).collect();
        let src = bytes_of(&v, 3);
        for (r, d) in [
            (0..0, dim),
            (0..650, dim),
            (91..104, dim),
            (39..533, dim),
            (5..617, 1),
        ] {
            let mut out = vec![0f32; r.len()];
            let got = copy_range_abs_max(&raw(&src[3..], rows, dim), r.clone(), &mut out, d);
            assert_eq!(out, &v[r.clone()], "floats {r:?}");
            assert_eq!(got, block_abs_max(&v[r.clone()], d), "floats {r:?}");
        }
    }

    /// The SSE2 scan (CPUs without AVX2) and the AVX2 one give the same
    /// copies and maxima, storing or not, for widths with every remainder
    /// against eight lanes.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_sse2_and_avx2_scans_agree() {
        if !x86::avx2::available() {
            return eprintln!("skipped: no AVX2");
        }
        let mut rng = Rng::new(9);
        for dim in [1usize, 3, 8, 12, 13, 39, 40, 41] {
            let rows = 3 + (rng.uniform() * 90.0) as usize;
            let mut v: Vec<f32> = (0..rows * dim).map(|_| rng.normal() as f32).collect();
            v[rows * dim / 2] = f32::NAN;
            v[rows * dim / 3] = f32::NEG_INFINITY;
            let src = bytes_of(&v, 2);
            let (mut a, mut b) = (vec![0f32; v.len()], vec![0f32; v.len()]);
            // SAFETY: lengths as the scans require; the CPU has AVX2.
            let (ma, mb, na, nb) = unsafe {
                (
                    x86::scan::<{ x86::UNALIGNED }>(
                        src[2..].as_ptr(),
                        a.as_mut_ptr(),
                        v.len(),
                        dim,
                    ),
                    x86::avx2::scan::<{ x86::UNALIGNED }>(
                        src[2..].as_ptr(),
                        b.as_mut_ptr(),
                        v.len(),
                        dim,
                    ),
                    x86::scan::<{ x86::NO_STORE }>(
                        src[2..].as_ptr(),
                        std::ptr::null_mut(),
                        v.len(),
                        dim,
                    ),
                    x86::avx2::scan::<{ x86::NO_STORE }>(
                        src[2..].as_ptr(),
                        std::ptr::null_mut(),
                        v.len(),
                        dim,
                    ),
                )
            };
            let bits = |x: &[f32]| x.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&v), "SSE2 copy, dim {dim}");
            assert_eq!(bits(&b), bits(&v), "AVX2 copy, dim {dim}");
            assert_eq!(
                bits(&ma),
                bits(&block_abs_max(&v, dim)),
                "SSE2 maxima, dim {dim}"
            );
            assert_eq!(bits(&mb), bits(&ma), "AVX2 maxima, dim {dim}");
            assert_eq!(
                (bits(&na), bits(&nb)),
                (bits(&ma), bits(&ma)),
                "no store, dim {dim}"
            );
        }
    }

    #[test]
    #[should_panic(expected = "source and destination differ")]
    fn lengths_that_differ_are_refused() {
        copy_abs_max(&raw(&[0u8; 8], 2, 1), &mut [0f32; 1], 1);
    }
}
