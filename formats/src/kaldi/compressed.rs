//! Kaldi's `CompressedMatrix` (`matrix/compressed-matrix.cc`): the three stored
//! formats and the seven compression methods of `copy-feats --compress=true
//! --compression-method=N`, decoded and encoded bit-identically to Kaldi.
//!
//! Stored form (binary only; text mode writes the decompressed matrix):
//! token `CM` (one byte per value with per-column headers), `CM2` (two bytes
//! per value) or `CM3` (one byte per value), then the global header `float
//! min_value, float range, int32 num_rows, int32 num_cols` (raw, no size
//! bytes), then
//! - `CM`: per column 4 x uint16 percentiles (0, 25, 75, 100), then the bytes
//!   column by column;
//! - `CM2`: rows x cols uint16, row-major; `CM3`: rows x cols uint8, row-major.
//!
//! Bit-identity depends on doing each operation in the precision the C++ code
//! does (float vs double temporaries, truncating int casts with x86 semantics);
//! the helpers below spell each one out.

use std::io::{self, Write};

use super::io::{Reader, Writer};
use super::matrix::{write_text_matrix, Matrix, Real};
use super::object::KaldiObject;
use crate::error::Result;

/// Kaldi `DataFormat` of a compressed matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressedFormat {
    /// `CM`: one byte per value, per-column percentile headers (format 1).
    OneByteWithColHeaders,
    /// `CM2`: uint16 per value (format 2).
    TwoByte,
    /// `CM3`: uint8 per value (format 3).
    OneByte,
}

impl CompressedFormat {
    pub fn token(self) -> &'static str {
        match self {
            CompressedFormat::OneByteWithColHeaders => "CM",
            CompressedFormat::TwoByte => "CM2",
            CompressedFormat::OneByte => "CM3",
        }
    }

    /// Bytes after the 16-byte header for a rows x cols matrix.
    fn data_len(self, rows: usize, cols: usize) -> Option<usize> {
        match self {
            CompressedFormat::OneByteWithColHeaders => cols.checked_mul(rows.checked_add(8)?),
            CompressedFormat::TwoByte => rows.checked_mul(cols)?.checked_mul(2),
            CompressedFormat::OneByte => rows.checked_mul(cols),
        }
    }
}

/// Kaldi `CompressionMethod` (the `--compression-method` numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionMethod {
    /// 1: `SpeechFeature` when more than 8 rows, else `TwoByteAuto`.
    Automatic = 1,
    /// 2: `CM` with data-derived range.
    SpeechFeature = 2,
    /// 3: `CM2` with data-derived range.
    TwoByteAuto = 3,
    /// 4: `CM2` with range [-32768, 32767] (integers).
    TwoByteSignedInteger = 4,
    /// 5: `CM3` with data-derived range.
    OneByteAuto = 5,
    /// 6: `CM3` with range [0, 255] (integers).
    OneByteUnsignedInteger = 6,
    /// 7: `CM3` with range [0, 1].
    OneByteZeroOne = 7,
}

impl CompressionMethod {
    pub fn from_i32(n: i32) -> Option<Self> {
        use CompressionMethod::*;
        Some(match n {
            1 => Automatic,
            2 => SpeechFeature,
            3 => TwoByteAuto,
            4 => TwoByteSignedInteger,
            5 => OneByteAuto,
            6 => OneByteUnsignedInteger,
            7 => OneByteZeroOne,
            _ => return None,
        })
    }
}

/// A compressed matrix: header fields plus the stored bytes after the header.
#[derive(Debug, Clone, PartialEq)]
pub struct CompressedMatrix {
    pub format: CompressedFormat,
    pub min_value: f32,
    pub range: f32,
    pub rows: usize,
    pub cols: usize,
    /// Everything after the 16-byte global header (per-column headers + bytes
    /// for `CM`; values for `CM2`/`CM3`).
    pub data: Vec<u8>,
}

/// A compressed matrix borrowing its bytes from the input (memory-mapped file).
#[derive(Debug, Clone, Copy)]
pub struct CompressedRef<'a> {
    pub format: CompressedFormat,
    pub min_value: f32,
    pub range: f32,
    pub rows: usize,
    pub cols: usize,
    pub data: &'a [u8],
}

/// C++ `static_cast<int>(double)` as x86-64 executes it (`cvttsd2si`): values
/// out of range and NaN give INT_MIN.
#[inline]
fn cvt_i32(x: f64) -> i32 {
    if x.is_nan() || !(-2147483648.0..2147483648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
    }
}

/// `Uint16ToFloat`: `min + range * 1.52590218966964e-05F * value`, all in float.
#[inline]
fn uint16_to_float(min: f32, range: f32, v: u16) -> f32 {
    min + range * 1.525_902_2e-5_f32 * (v as f32)
}

/// `FloatToUint16`: `(int)(f * 65535 + 0.499)` with `f` clamped to [0, 1].
#[inline]
fn float_to_uint16(min: f32, range: f32, value: f32) -> u16 {
    let mut f = (value - min) / range;
    if f > 1.0 {
        f = 1.0;
    }
    if f < 0.0 {
        f = 0.0;
    }
    cvt_i32((f * 65535.0) as f64 + 0.499) as u16
}

/// `FloatToUint8`: `(int)(f * 255 + 0.499)` with `f` clamped to [0, 1].
#[inline]
fn float_to_uint8(min: f32, range: f32, value: f32) -> u8 {
    let mut f = (value - min) / range;
    if f > 1.0 {
        f = 1.0;
    }
    if f < 0.0 {
        f = 0.0;
    }
    cvt_i32((f * 255.0) as f64 + 0.499) as u8
}

/// `CharToFloat`: float products, double scale factor and sum, rounded to float.
#[inline]
fn char_to_float(p0: f32, p25: f32, p75: f32, p100: f32, v: u8) -> f32 {
    if v <= 64 {
        (p0 as f64 + ((p25 - p0) * v as f32) as f64 * (1.0 / 64.0)) as f32
    } else if v <= 192 {
        (p25 as f64 + ((p75 - p25) * (v as i32 - 64) as f32) as f64 * (1.0 / 128.0)) as f32
    } else {
        (p75 as f64 + ((p100 - p75) * (v as i32 - 192) as f32) as f64 * (1.0 / 63.0)) as f32
    }
}

/// `FloatToChar`.
#[inline]
fn float_to_char(p0: f32, p25: f32, p75: f32, p100: f32, value: f32) -> u8 {
    if value < p25 {
        let f = (value - p0) / (p25 - p0);
        cvt_i32((f * 64.0) as f64 + 0.5).clamp(0, 64) as u8
    } else if value < p75 {
        let f = (value - p25) / (p75 - p25);
        (64i32.wrapping_add(cvt_i32((f * 128.0) as f64 + 0.5))).clamp(64, 192) as u8
    } else {
        let f = (value - p75) / (p100 - p75);
        (192i32.wrapping_add(cvt_i32((f * 63.0) as f64 + 0.5))).clamp(192, 255) as u8
    }
}

impl<'a> CompressedRef<'a> {
    /// Read a binary `CM`/`CM2`/`CM3` object, borrowing its data.
    pub fn read(r: &mut Reader<'a>) -> Result<Self> {
        let start = r.pos();
        let tok = r.read_token()?;
        let format = match tok {
            "CM" => CompressedFormat::OneByteWithColHeaders,
            "CM2" => CompressedFormat::TwoByte,
            "CM3" => CompressedFormat::OneByte,
            t => {
                return Err(r.error_at(
                    start,
                    format!("unexpected token {t}, expecting CM, CM2 or CM3"),
                ))
            }
        };
        let hdr_at = r.pos();
        let h = r.read_bytes(16).map_err(|_| {
            r.error_at(
                hdr_at,
                "truncated compressed-matrix header (needs 16 bytes)",
            )
        })?;
        let min_value = f32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let range = f32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        let rows = i32::from_le_bytes([h[8], h[9], h[10], h[11]]);
        let cols = i32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        if cols == 0 {
            // Kaldi's empty compressed matrix.
            return Ok(CompressedRef {
                format,
                min_value,
                range,
                rows: 0,
                cols: 0,
                data: &[],
            });
        }
        if rows < 0 || cols < 0 {
            return Err(r.error_at(
                hdr_at,
                format!("invalid compressed-matrix dimensions {rows} x {cols}"),
            ));
        }
        let (rows, cols) = (rows as usize, cols as usize);
        let len = format
            .data_len(rows, cols)
            .ok_or_else(|| r.error_at(hdr_at, "compressed matrix too large"))?;
        if len > r.remaining().len() {
            return Err(r.error(format!(
                "truncated data: compressed matrix ({}) of {rows} x {cols} needs {len} bytes, only {} left",
                format.token(),
                r.remaining().len()
            )));
        }
        let data = r.read_bytes(len)?;
        Ok(CompressedRef {
            format,
            min_value,
            range,
            rows,
            cols,
            data,
        })
    }

    pub fn to_owned(&self) -> CompressedMatrix {
        CompressedMatrix {
            format: self.format,
            min_value: self.min_value,
            range: self.range,
            rows: self.rows,
            cols: self.cols,
            data: self.data.to_vec(),
        }
    }

    /// Decompress into `out` (rows * cols, row-major), exactly as Kaldi's
    /// `CopyToMat` computes each float.
    pub fn decompress_into(&self, out: &mut [f32]) {
        let (rows, cols) = (self.rows, self.cols);
        let out = &mut out[..rows * cols];
        match self.format {
            CompressedFormat::OneByteWithColHeaders => {
                let (headers, bytes) = self.data.split_at(cols * 8);
                // A 256-entry table per column: the same CharToFloat results, computed once.
                let mut lut = vec![0f32; 256 * cols];
                for c in 0..cols {
                    let h = &headers[c * 8..c * 8 + 8];
                    let p = |k: usize| {
                        uint16_to_float(
                            self.min_value,
                            self.range,
                            u16::from_le_bytes([h[2 * k], h[2 * k + 1]]),
                        )
                    };
                    let (p0, p25, p75, p100) = (p(0), p(1), p(2), p(3));
                    for (v, slot) in lut[c * 256..(c + 1) * 256].iter_mut().enumerate() {
                        *slot = char_to_float(p0, p25, p75, p100, v as u8);
                    }
                }
                // Column-major bytes to row-major floats, a block of rows at a time
                // so the column streams stay in cache.
                const BLOCK: usize = 64;
                let mut r0 = 0;
                while r0 < rows {
                    let r1 = (r0 + BLOCK).min(rows);
                    for c in 0..cols {
                        let col = &bytes[c * rows + r0..c * rows + r1];
                        let t = &lut[c * 256..(c + 1) * 256];
                        for (k, &b) in col.iter().enumerate() {
                            out[(r0 + k) * cols + c] = t[b as usize];
                        }
                    }
                    r0 = r1;
                }
            }
            CompressedFormat::TwoByte => {
                let inc = (self.range as f64 * (1.0 / 65535.0)) as f32;
                for (o, b) in out.iter_mut().zip(self.data.chunks_exact(2)) {
                    *o = self.min_value + (u16::from_le_bytes([b[0], b[1]]) as f32) * inc;
                }
            }
            CompressedFormat::OneByte => {
                let inc = (self.range as f64 * (1.0 / 255.0)) as f32;
                for (o, &b) in out.iter_mut().zip(self.data.iter()) {
                    *o = self.min_value + (b as f32) * inc;
                }
            }
        }
    }

    pub fn to_matrix<T: Real>(&self) -> Matrix<T> {
        let mut out = vec![0f32; self.rows * self.cols];
        self.decompress_into(&mut out);
        let data = out.into_iter().map(T::from_f32).collect();
        Matrix::from_vec(self.rows, self.cols, data).unwrap_or_default()
    }
}

/// Error from compressing a matrix Kaldi cannot compress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressError(pub String);

impl std::fmt::Display for CompressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for CompressError {}

impl CompressedMatrix {
    /// Read a binary compressed matrix (copies its bytes).
    pub fn read(r: &mut Reader<'_>) -> Result<Self> {
        Ok(CompressedRef::read(r)?.to_owned())
    }

    pub fn as_ref(&self) -> CompressedRef<'_> {
        CompressedRef {
            format: self.format,
            min_value: self.min_value,
            range: self.range,
            rows: self.rows,
            cols: self.cols,
            data: &self.data,
        }
    }

    pub fn to_matrix<T: Real>(&self) -> Matrix<T> {
        self.as_ref().to_matrix()
    }

    /// Kaldi `CompressedMatrix(mat, method)`. Values are taken as float (Kaldi
    /// converts a double matrix element-wise to float in every step that
    /// matters, so converting first gives identical bytes). Fails, as Kaldi
    /// does, on NaN or infinite values.
    pub fn compress<T: Real>(
        mat: &Matrix<T>,
        method: CompressionMethod,
    ) -> std::result::Result<Self, CompressError> {
        let (rows, cols) = (mat.rows(), mat.cols());
        let vals: Vec<f32> = mat.data().iter().map(|&v| v.to_f64() as f32).collect();
        use CompressionMethod::*;
        let method = match method {
            Automatic if rows > 8 => SpeechFeature,
            Automatic => TwoByteAuto,
            m => m,
        };
        let format = match method {
            SpeechFeature => CompressedFormat::OneByteWithColHeaders,
            TwoByteAuto | TwoByteSignedInteger => CompressedFormat::TwoByte,
            _ => CompressedFormat::OneByte,
        };
        if rows == 0 || cols == 0 {
            return Ok(CompressedMatrix {
                format: CompressedFormat::OneByteWithColHeaders,
                min_value: 0.0,
                range: 0.0,
                rows: 0,
                cols: 0,
                data: Vec::new(),
            });
        }
        let (min_value, range) = match method {
            TwoByteSignedInteger => (-32768.0f32, 65535.0f32),
            OneByteUnsignedInteger => (0.0, 255.0),
            OneByteZeroOne => (0.0, 1.0),
            _ => {
                if vals.iter().any(|v| !v.is_finite()) {
                    return Err(CompressError(
                        "cannot compress a matrix with NaN or Inf values".into(),
                    ));
                }
                let min = vals.iter().copied().fold(f32::INFINITY, f32::min);
                let mut max = vals.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                if max == min {
                    max = (min as f64 + (1.0 + (min as f64).abs())) as f32;
                }
                let range = max - min;
                if !(range > 0.0) || !range.is_finite() {
                    return Err(CompressError(format!(
                        "cannot compress: value range {min}..{max} is not representable"
                    )));
                }
                (min, range)
            }
        };
        let mut data = Vec::with_capacity(format.data_len(rows, cols).unwrap_or(0));
        match format {
            CompressedFormat::OneByteWithColHeaders => {
                let mut col = vec![0f32; rows];
                let mut bytes = Vec::with_capacity(rows * cols);
                for c in 0..cols {
                    for (r, slot) in col.iter_mut().enumerate() {
                        *slot = vals[r * cols + c];
                    }
                    let hdr = col_header(min_value, range, &col);
                    for p in hdr {
                        data.extend_from_slice(&p.to_le_bytes());
                    }
                    let p = hdr.map(|v| uint16_to_float(min_value, range, v));
                    for r in 0..rows {
                        bytes.push(float_to_char(p[0], p[1], p[2], p[3], vals[r * cols + c]));
                    }
                }
                data.extend_from_slice(&bytes);
            }
            CompressedFormat::TwoByte => {
                for &v in &vals {
                    data.extend_from_slice(&float_to_uint16(min_value, range, v).to_le_bytes());
                }
            }
            CompressedFormat::OneByte => {
                data.extend(vals.iter().map(|&v| float_to_uint8(min_value, range, v)));
            }
        }
        Ok(CompressedMatrix {
            format,
            min_value,
            range,
            rows,
            cols,
            data,
        })
    }
}

/// Kaldi `ComputeColHeader`: the order statistics at 0, n/4, 3n/4 and n-1
/// (what its `nth_element` calls select), as uint16, kept strictly increasing.
fn col_header(min: f32, range: f32, col: &[f32]) -> [u16; 4] {
    let n = col.len();
    let mut s = col.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let q = |v: f32| float_to_uint16(min, range, v);
    if n >= 5 {
        let qn = n / 4;
        let p0 = q(s[0]).min(65532);
        let p25 = q(s[qn]).max(p0 + 1).min(65533);
        let p75 = q(s[3 * qn]).max(p25 + 1).min(65534);
        let p100 = q(s[n - 1]).max(p75 + 1);
        [p0, p25, p75, p100]
    } else {
        let p0 = q(s[0]).min(65532);
        let p25 = if n > 1 {
            q(s[1]).max(p0 + 1).min(65533)
        } else {
            p0 + 1
        };
        let p75 = if n > 2 {
            q(s[2]).max(p25 + 1).min(65534)
        } else {
            p25 + 1
        };
        let p100 = if n > 3 { q(s[3]).max(p75 + 1) } else { p75 + 1 };
        [p0, p25, p75, p100]
    }
}

impl KaldiObject for CompressedMatrix {
    /// Binary: the compressed form. Text (and a binary `FM`/`DM` where a
    /// compressed matrix is expected): Kaldi reads a matrix and compresses it
    /// with the automatic method.
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        if r.binary() && r.peek_byte() == Some(b'C') {
            return CompressedMatrix::read(r);
        }
        let at = r.pos();
        let m = Matrix::<f32>::read(r)?;
        CompressedMatrix::compress(&m, CompressionMethod::Automatic)
            .map_err(|e| r.error_at(at, e.0))
    }

    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        if w.binary() {
            w.write_token(self.format.token())?;
            let mut h = Vec::with_capacity(16 + self.data.len());
            if self.cols == 0 || self.rows == 0 {
                // Kaldi writes its whole 20-byte GlobalHeader for an empty
                // matrix (format field included); we write it zeroed.
                h.extend_from_slice(&[0u8; 20]);
                return w.write_raw(&h);
            }
            h.extend_from_slice(&self.min_value.to_le_bytes());
            h.extend_from_slice(&self.range.to_le_bytes());
            h.extend_from_slice(&(self.rows as i32).to_le_bytes());
            h.extend_from_slice(&(self.cols as i32).to_le_bytes());
            w.write_raw(&h)?;
            w.write_raw(&self.data)
        } else {
            let m = self.to_matrix::<f32>();
            write_text_matrix(w, m.rows(), m.cols(), m.data())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kaldi::object::{object_to_bytes, read_object};
    use proptest::prelude::*;

    #[test]
    fn cvt_matches_x86() {
        assert_eq!(cvt_i32(f64::NAN), i32::MIN);
        assert_eq!(cvt_i32(f64::INFINITY), i32::MIN);
        assert_eq!(cvt_i32(-1.7), -1);
        assert_eq!(cvt_i32(64.49), 64);
    }

    #[test]
    fn methods_choose_formats() {
        let m = Matrix::<f32>::from_vec(9, 2, (0..18).map(|i| i as f32).collect()).unwrap();
        let small = Matrix::<f32>::from_vec(8, 2, (0..16).map(|i| i as f32).collect()).unwrap();
        let f = |m: &Matrix<f32>, k| {
            CompressedMatrix::compress(m, CompressionMethod::from_i32(k).unwrap())
                .unwrap()
                .format
        };
        assert_eq!(f(&m, 1), CompressedFormat::OneByteWithColHeaders);
        assert_eq!(f(&small, 1), CompressedFormat::TwoByte);
        assert_eq!(f(&m, 4), CompressedFormat::TwoByte);
        assert_eq!(f(&m, 7), CompressedFormat::OneByte);
        assert!(CompressionMethod::from_i32(8).is_none());
    }

    #[test]
    fn nan_is_an_error() {
        let m = Matrix::<f32>::from_vec(1, 2, vec![f32::NAN, 1.0]).unwrap();
        assert!(CompressedMatrix::compress(&m, CompressionMethod::SpeechFeature).is_err());
    }

    #[test]
    fn truncated_is_an_error() {
        let m = Matrix::<f32>::from_vec(9, 2, (0..18).map(|i| i as f32).collect()).unwrap();
        let c = CompressedMatrix::compress(&m, CompressionMethod::SpeechFeature).unwrap();
        let mut b = object_to_bytes(&c, true);
        b.pop();
        let e = read_object::<Matrix<f32>>(&b).unwrap_err().to_string();
        assert!(
            e.contains(
                "truncated data: compressed matrix (CM) of 9 x 2 needs 34 bytes, only 33 left"
            ),
            "{e}"
        );
        let e = read_object::<Matrix<f32>>(b"\0BCM4 ")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expecting CM, CM2 or CM3"), "{e}");
    }

    proptest! {
        #[test]
        fn roundtrip_and_accuracy(rows in 1usize..20, cols in 1usize..5, method in 1i32..8,
                                  seed in proptest::collection::vec(-100f32..100f32, 100)) {
            let m = Matrix::from_vec(rows, cols, seed.into_iter().take(rows * cols).collect()).unwrap();
            let c = CompressedMatrix::compress(&m, CompressionMethod::from_i32(method).unwrap()).unwrap();
            let b = object_to_bytes(&c, true);
            let back: CompressedMatrix = read_object(&b).unwrap();
            prop_assert_eq!(&back, &c);
            prop_assert_eq!(object_to_bytes(&back, true), b);
            let d = c.to_matrix::<f32>();
            prop_assert_eq!((d.rows(), d.cols()), (rows, cols));
            if method == 3 || (method == 1 && rows <= 8) {
                // Two bytes over the data's own range: error at most range/65535.
                for (x, y) in d.data().iter().zip(m.data()) {
                    prop_assert!((x - y).abs() <= 200.0 / 65535.0 * 1.01 + 1e-4);
                }
            }
        }
    }
}
