//! Kaldi's float and double vectors and matrices (`FV`, `DV`, `FM`, `DM`) and
//! packed symmetric/triangular matrices (`FP`, `DP`), in binary and text form,
//! exactly as `matrix/kaldi-vector.cc`, `kaldi-matrix.cc` and
//! `packed-matrix.cc` read and write them.
//!
//! Reading follows Kaldi: a float object may be read where a double one is
//! stored and vice versa (converted), and a compressed matrix (`CM`, `CM2`,
//! `CM3`) is decompressed where a matrix is read. Text forms:
//! - vector: ` [ 1 2 3 ]` + newline;
//! - matrix: ` [` then per row newline + two spaces + `v ` per value, then `]` +
//!   newline; no columns: ` [ ]` + newline;
//! - packed: `[` newline, row i holds i+1 values (`v `), rows end with newline,
//!   the last with `]` + newline.
//!
//! [`RawMatrix`] borrows a binary matrix's bytes straight from a memory-mapped
//! file, so feature streaming never copies the float data twice.

use std::fmt::Debug;
use std::io::{self, Write};
use std::sync::Arc;

use super::files::InputData;
use super::io::{fmt_g_into, is_space, Reader, Writer};
use super::object::KaldiObject;
use crate::error::Result;

/// The element types Kaldi's matrices come in: `f32` (BaseFloat) and `f64`.
pub trait Real: Copy + Default + PartialEq + Debug + Send + Sync + 'static {
    /// `FM` / `DM`.
    const MAT_TOKEN: &'static str;
    /// `FV` / `DV`.
    const VEC_TOKEN: &'static str;
    /// `FP` / `DP`.
    const PACKED_TOKEN: &'static str;
    /// First byte of this type's tokens (`F` or `D`).
    const TYPE_CHAR: u8;
    /// First byte of the other precision's tokens.
    const OTHER_CHAR: u8;
    const SIZE: usize;
    fn from_f64(v: f64) -> Self;
    fn from_f32(v: f32) -> Self;
    fn to_f64(self) -> f64;
    /// A text number, correctly rounded to this type (as C++ `is >> r`).
    fn read_text(r: &mut Reader<'_>) -> Result<Self>;
    /// Kaldi `ReadBasicType<Real>`.
    fn read_basic(r: &mut Reader<'_>) -> Result<Self>;
    /// Kaldi `WriteBasicType<Real>`.
    fn write_basic<W: Write>(w: &mut Writer<W>, v: Self) -> io::Result<()>;
    /// Append the little-endian values in `bytes` (a multiple of SIZE long).
    fn extend_from_le(out: &mut Vec<Self>, bytes: &[u8]);
    fn extend_le_bytes(out: &mut Vec<u8>, data: &[Self]);
}

impl Real for f32 {
    const MAT_TOKEN: &'static str = "FM";
    const VEC_TOKEN: &'static str = "FV";
    const PACKED_TOKEN: &'static str = "FP";
    const TYPE_CHAR: u8 = b'F';
    const OTHER_CHAR: u8 = b'D';
    const SIZE: usize = 4;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn read_text(r: &mut Reader<'_>) -> Result<Self> {
        debug_assert!(!r.binary());
        r.read_f32()
    }
    fn read_basic(r: &mut Reader<'_>) -> Result<Self> {
        r.read_f32()
    }
    fn write_basic<W: Write>(w: &mut Writer<W>, v: Self) -> io::Result<()> {
        w.write_f32(v)
    }
    fn extend_from_le(out: &mut Vec<Self>, bytes: &[u8]) {
        out.extend(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
    }
    fn extend_le_bytes(out: &mut Vec<u8>, data: &[Self]) {
        // Resize, then fill in place: a loop the compiler turns into wide
        // copies (a push of 4 bytes per value is several times slower).
        let at = out.len();
        out.resize(at + data.len() * 4, 0);
        for (dst, v) in out[at..].chunks_exact_mut(4).zip(data) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
}

impl Real for f64 {
    const MAT_TOKEN: &'static str = "DM";
    const VEC_TOKEN: &'static str = "DV";
    const PACKED_TOKEN: &'static str = "DP";
    const TYPE_CHAR: u8 = b'D';
    const OTHER_CHAR: u8 = b'F';
    const SIZE: usize = 8;
    fn from_f64(v: f64) -> Self {
        v
    }
    fn from_f32(v: f32) -> Self {
        v as f64
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn read_text(r: &mut Reader<'_>) -> Result<Self> {
        debug_assert!(!r.binary());
        r.read_f64()
    }
    fn read_basic(r: &mut Reader<'_>) -> Result<Self> {
        r.read_f64()
    }
    fn write_basic<W: Write>(w: &mut Writer<W>, v: Self) -> io::Result<()> {
        w.write_f64(v)
    }
    fn extend_from_le(out: &mut Vec<Self>, bytes: &[u8]) {
        out.extend(bytes.chunks_exact(8).map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            f64::from_le_bytes(a)
        }));
    }
    fn extend_le_bytes(out: &mut Vec<u8>, data: &[Self]) {
        // Resize, then fill in place: a loop the compiler turns into wide
        // copies (a push of 8 bytes per value is several times slower).
        let at = out.len();
        out.resize(at + data.len() * 8, 0);
        for (dst, v) in out[at..].chunks_exact_mut(8).zip(data) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// A dense vector (`Vector<float>` / `Vector<double>`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Vector<T: Real> {
    pub data: Vec<T>,
}

/// A dense row-major matrix (`Matrix<float>` / `Matrix<double>`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Matrix<T: Real> {
    rows: usize,
    cols: usize,
    data: Vec<T>,
}

/// A packed lower triangle (`SpMatrix` / `TpMatrix`): row i holds i+1 values,
/// rows concatenated.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PackedMatrix<T: Real> {
    n: usize,
    data: Vec<T>,
}

/// Symmetric matrix stored as its lower triangle (Kaldi `SpMatrix`).
pub type SpMatrix<T> = PackedMatrix<T>;
/// Lower-triangular matrix (Kaldi `TpMatrix`); same file form as `SpMatrix`.
pub type TpMatrix<T> = PackedMatrix<T>;

impl<T: Real> Vector<T> {
    pub fn new(data: Vec<T>) -> Self {
        Vector { data }
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn convert<U: Real>(&self) -> Vector<U> {
        Vector {
            data: self.data.iter().map(|&v| U::from_f64(v.to_f64())).collect(),
        }
    }
}

impl<T: Real> Matrix<T> {
    /// A matrix from row-major data; `None` when `data.len() != rows * cols`.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<T>) -> Option<Self> {
        (rows.checked_mul(cols)? == data.len()).then_some(Matrix { rows, cols, data })
    }
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Matrix {
            rows,
            cols,
            data: vec![T::default(); rows * cols],
        }
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Row-major data.
    pub fn data(&self) -> &[T] {
        &self.data
    }
    pub fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
    pub fn into_data(self) -> Vec<T> {
        self.data
    }
    pub fn row(&self, i: usize) -> &[T] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
    pub fn convert<U: Real>(&self) -> Matrix<U> {
        Matrix {
            rows: self.rows,
            cols: self.cols,
            data: self.data.iter().map(|&v| U::from_f64(v.to_f64())).collect(),
        }
    }
    /// Rows `r0..r1` and columns `c0..c1` (half-open), as scp ranges select them.
    pub fn sub_matrix(&self, r0: usize, r1: usize, c0: usize, c1: usize) -> Option<Self> {
        if r0 > r1 || r1 > self.rows || c0 > c1 || c1 > self.cols {
            return None;
        }
        let mut data = Vec::with_capacity((r1 - r0) * (c1 - c0));
        for i in r0..r1 {
            data.extend_from_slice(&self.row(i)[c0..c1]);
        }
        Some(Matrix {
            rows: r1 - r0,
            cols: c1 - c0,
            data,
        })
    }
}

impl<T: Real> PackedMatrix<T> {
    /// A packed n x n lower triangle; `None` when `data.len() != n(n+1)/2`.
    pub fn from_vec(n: usize, data: Vec<T>) -> Option<Self> {
        (n.checked_mul(n + 1)? / 2 == data.len()).then_some(PackedMatrix { n, data })
    }
    pub fn zeros(n: usize) -> Self {
        PackedMatrix {
            n,
            data: vec![T::default(); n * (n + 1) / 2],
        }
    }
    pub fn n(&self) -> usize {
        self.n
    }
    pub fn data(&self) -> &[T] {
        &self.data
    }
    pub fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
    /// Element (i, j) of the lower triangle (j <= i); symmetric access for j > i.
    pub fn get(&self, i: usize, j: usize) -> T {
        let (i, j) = if j > i { (j, i) } else { (i, j) };
        self.data[i * (i + 1) / 2 + j]
    }
    pub fn convert<U: Real>(&self) -> PackedMatrix<U> {
        PackedMatrix {
            n: self.n,
            data: self.data.iter().map(|&v| U::from_f64(v.to_f64())).collect(),
        }
    }
}

/// Read a non-negative int32 dimension.
fn read_dim(r: &mut Reader<'_>, what: &str) -> Result<usize> {
    let at = r.pos();
    let v = r.read_i32()?;
    usize::try_from(v).map_err(|_| r.error_at(at, format!("negative {what} {v}")))
}

/// `n` elements of `size` bytes, or a "truncated" error naming what was read.
fn read_elems<'a>(r: &mut Reader<'a>, n: usize, size: usize, what: &str) -> Result<&'a [u8]> {
    let bytes = n
        .checked_mul(size)
        .ok_or_else(|| r.error(format!("{what} too large")))?;
    if bytes > r.remaining().len() {
        return Err(r.error(format!(
            "truncated data: {what} needs {bytes} bytes, only {} left",
            r.remaining().len()
        )));
    }
    r.read_bytes(bytes)
}

/// Kaldi's text parsing of values that are not plain numbers: `inf`,
/// `infinity`, `nan` (case-insensitive); also `-inf`/`-nan`, which Kaldi writes
/// but its own readers refuse (we accept what we can write).
fn read_special<T: Real>(r: &mut Reader<'_>, what: &str) -> Result<T> {
    let at = r.pos();
    let word = r.read_word();
    let s = std::str::from_utf8(word).unwrap_or("");
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let v = if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        f64::INFINITY
    } else if body.eq_ignore_ascii_case("nan") {
        f64::NAN
    } else {
        let shown: String = String::from_utf8_lossy(&word[..word.len().min(20)]).into_owned();
        return Err(r.error_at(at, format!("expecting numeric {what} data, got '{shown}'")));
    };
    Ok(T::from_f64(if neg { -v } else { v }))
}

/// Read a number that starts with a digit, '-' or '+' (C++ `is >> r`), falling
/// back to the inf/nan words.
fn read_number<T: Real>(r: &mut Reader<'_>, what: &str) -> Result<T> {
    match r.peek_byte() {
        Some(b'0'..=b'9' | b'.' | b'+') => T::read_text(r),
        Some(b'-') => {
            if matches!(r.remaining().get(1), Some(b'0'..=b'9' | b'.')) {
                T::read_text(r)
            } else {
                read_special(r, what)
            }
        }
        _ => read_special(r, what),
    }
}

/// After a closing `]`: eat `\n` or `\r\n` (what Kaldi wrote).
fn eat_newline(r: &mut Reader<'_>) {
    match r.peek_byte() {
        Some(b'\r') => {
            r.set_pos(r.pos() + 2);
        }
        Some(b'\n') => r.set_pos(r.pos() + 1),
        _ => {}
    }
}

/// Text opening of a vector/matrix: the word `[` (or `[]` for empty).
/// Returns false for `[]`.
fn read_open_bracket(r: &mut Reader<'_>, what: &str) -> Result<bool> {
    let at = {
        r.skip_ws();
        r.pos()
    };
    let word = r.read_word();
    match word {
        b"[" => Ok(true),
        b"[]" => Ok(false),
        b"" => Err(r.error_at(
            at,
            format!("expected '[' to start a {what}, found end of data"),
        )),
        w => Err(r.error_at(
            at,
            format!(
                "expected '[' to start a {what}, found '{}'",
                String::from_utf8_lossy(&w[..w.len().min(20)])
            ),
        )),
    }
}

impl<T: Real> KaldiObject for Vector<T> {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        if r.binary() {
            let start = r.pos();
            if r.peek_byte() == Some(T::OTHER_CHAR) {
                return Ok(if T::SIZE == 4 {
                    Vector::<f64>::read(r)?.convert()
                } else {
                    Vector::<f32>::read(r)?.convert()
                });
            }
            let tok = r.read_token()?;
            if tok != T::VEC_TOKEN {
                return Err(r.error_at(
                    start,
                    format!("expected token {}, found {tok}", T::VEC_TOKEN),
                ));
            }
            let n = read_dim(r, "vector size")?;
            let bytes = read_elems(r, n, T::SIZE, "vector")?;
            let mut data = Vec::with_capacity(n);
            T::extend_from_le(&mut data, bytes);
            Ok(Vector { data })
        } else {
            if !read_open_bracket(r, "vector")? {
                return Ok(Vector::default());
            }
            let mut data = Vec::new();
            loop {
                match r.peek_byte() {
                    Some(b'-' | b'0'..=b'9') => {
                        data.push(read_number::<T>(r, "vector")?);
                        match r.peek_byte() {
                            Some(c) if is_space(c) || c == b']' => {}
                            _ => return Err(r.error("expected whitespace after number in vector")),
                        }
                    }
                    Some(b' ' | b'\t') => r.set_pos(r.pos() + 1),
                    Some(b']') => {
                        r.set_pos(r.pos() + 1);
                        eat_newline(r);
                        return Ok(Vector { data });
                    }
                    None => return Err(r.error("end of data while reading vector")),
                    Some(b'\n' | b'\r') => {
                        return Err(
                            r.error("newline found while reading vector (maybe it is a matrix?)")
                        )
                    }
                    Some(_) => data.push(read_special(r, "vector")?),
                }
            }
        }
    }

    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        if w.binary() {
            w.write_token(T::VEC_TOKEN)?;
            w.write_i32(dim_i32(self.data.len())?)?;
            let mut buf = Vec::new();
            T::extend_le_bytes(&mut buf, &self.data);
            w.write_raw(&buf)
        } else {
            let mut s = String::with_capacity(4 + self.data.len() * 12);
            s.push_str(" [ ");
            for &v in &self.data {
                fmt_g_into(&mut s, v.to_f64(), 7);
                s.push(' ');
            }
            s.push_str("]\n");
            w.write_raw(s.as_bytes())
        }
    }
}

fn dim_i32(n: usize) -> io::Result<i32> {
    i32::try_from(n)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "dimension exceeds int32"))
}

/// Kaldi's text matrix body after `[`.
fn read_text_matrix<T: Real>(r: &mut Reader<'_>) -> Result<Matrix<T>> {
    let start = r.pos();
    let mut data: Vec<T> = Vec::new();
    let mut cols: Option<usize> = None;
    let mut rows = 0usize;
    let mut cur = 0usize; // values in the current row
    let mut end_row = |cur: &mut usize, rows: &mut usize, r: &Reader<'_>| -> Result<()> {
        if *cur == 0 {
            return Ok(());
        }
        match cols {
            None => cols = Some(*cur),
            Some(c) if c != *cur => {
                return Err(r.error(format!(
                    "matrix has inconsistent number of columns: {c} vs. {} (row {})",
                    *cur, *rows
                )))
            }
            _ => {}
        }
        *rows += 1;
        *cur = 0;
        Ok(())
    };
    loop {
        match r.peek_byte() {
            None => return Err(r.error_at(start, "end of data while reading matrix (missing ']')")),
            Some(b']') => {
                r.set_pos(r.pos() + 1);
                end_row(&mut cur, &mut rows, r)?;
                eat_newline(r);
                let c = cols.unwrap_or(0);
                return Ok(Matrix {
                    rows: if c == 0 { 0 } else { rows },
                    cols: c,
                    data,
                });
            }
            Some(b'\n' | b';') => {
                r.set_pos(r.pos() + 1);
                end_row(&mut cur, &mut rows, r)?;
            }
            Some(b'0'..=b'9' | b'-') => {
                data.push(read_number::<T>(r, "matrix")?);
                cur += 1;
            }
            Some(c) if is_space(c) => r.set_pos(r.pos() + 1),
            Some(_) => {
                data.push(read_special::<T>(r, "matrix")?);
                cur += 1;
            }
        }
    }
}

impl<T: Real> KaldiObject for Matrix<T> {
    fn extract_range(self, range: &str) -> std::result::Result<Self, String> {
        let g = super::script::parse_matrix_range(range, self.rows, self.cols)?;
        self.sub_matrix(g.row0, g.row1 + 1, g.col0, g.col1 + 1)
            .ok_or_else(|| format!("range [{range}] outside the matrix"))
    }

    fn read(r: &mut Reader<'_>) -> Result<Self> {
        if r.binary() {
            match r.peek_byte() {
                // Decode straight from the (memory-mapped) bytes, no owned copy.
                Some(b'C') => {
                    return Ok(super::compressed::CompressedRef::read(r)?.to_matrix::<T>())
                }
                Some(c) if c == T::OTHER_CHAR => {
                    return Ok(if T::SIZE == 4 {
                        Matrix::<f64>::read(r)?.convert()
                    } else {
                        Matrix::<f32>::read(r)?.convert()
                    })
                }
                _ => {}
            }
            RawMatrix::read(r)?.to_matrix()
        } else {
            if !read_open_bracket(r, "matrix")? {
                return Ok(Matrix::default());
            }
            read_text_matrix(r)
        }
    }

    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        write_matrix(w, self.rows, self.cols, &self.data)
    }
}

/// Kaldi's `Matrix::Write` of a `rows × cols` row-major matrix held
/// anywhere (the bytes of a [`Matrix`] holding `data`). Binary data is
/// converted in 1 MB pieces, so no copy of the whole matrix is made.
pub fn write_matrix<T: Real, W: Write>(
    w: &mut Writer<W>,
    rows: usize,
    cols: usize,
    data: &[T],
) -> io::Result<()> {
    if rows.checked_mul(cols) != Some(data.len()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("matrix of {rows} × {cols} given {} values", data.len()),
        ));
    }
    if !w.binary() {
        return write_text_matrix(w, rows, cols, data);
    }
    w.write_token(T::MAT_TOKEN)?;
    w.write_i32(dim_i32(rows)?)?;
    w.write_i32(dim_i32(cols)?)?;
    // 1 MB pieces: as large as the output's buffer, so each goes straight
    // through it to the file.
    let mut buf = Vec::with_capacity(1 << 20);
    for piece in data.chunks((1 << 20) / T::SIZE) {
        buf.clear();
        T::extend_le_bytes(&mut buf, piece);
        w.write_raw(&buf)?;
    }
    Ok(())
}

/// Kaldi's text matrix form (`MatrixBase::Write`, text mode).
pub fn write_text_matrix<T: Real, W: Write>(
    w: &mut Writer<W>,
    rows: usize,
    cols: usize,
    data: &[T],
) -> io::Result<()> {
    if cols == 0 {
        return w.write_raw(b" [ ]\n");
    }
    let mut s = String::with_capacity(cols * 12 + 8);
    w.write_raw(b" [")?;
    for i in 0..rows {
        s.clear();
        s.push_str("\n  ");
        for &v in &data[i * cols..(i + 1) * cols] {
            fmt_g_into(&mut s, v.to_f64(), 7);
            s.push(' ');
        }
        w.write_raw(s.as_bytes())?;
    }
    w.write_raw(b"]\n")
}

impl<T: Real> KaldiObject for PackedMatrix<T> {
    fn read(r: &mut Reader<'_>) -> Result<Self> {
        let start = {
            if !r.binary() {
                r.skip_ws();
            }
            r.pos()
        };
        if r.peek_byte() == Some(T::OTHER_CHAR) {
            return Ok(if T::SIZE == 4 {
                PackedMatrix::<f64>::read(r)?.convert()
            } else {
                PackedMatrix::<f32>::read(r)?.convert()
            });
        }
        let tok = r.read_token()?;
        if tok == T::PACKED_TOKEN {
            let n = read_dim(r, "packed matrix size")?;
            let count = n
                .checked_mul(n + 1)
                .map(|x| x / 2)
                .ok_or_else(|| r.error("packed matrix too large"))?;
            if r.binary() {
                let bytes = read_elems(r, count, T::SIZE, "packed matrix")?;
                let mut data = Vec::with_capacity(count);
                T::extend_from_le(&mut data, bytes);
                Ok(PackedMatrix { n, data })
            } else {
                let mut data = Vec::with_capacity(count.min(1 << 20));
                for _ in 0..count {
                    data.push(T::read_basic(r)?);
                }
                Ok(PackedMatrix { n, data })
            }
        } else if tok == "[" && !r.binary() {
            let mut data = Vec::new();
            loop {
                match r.peek_byte() {
                    None => {
                        return Err(r.error_at(
                            start,
                            "end of data while reading packed matrix (missing ']')",
                        ))
                    }
                    Some(b']') => {
                        r.set_pos(r.pos() + 1);
                        eat_newline(r);
                        let mut n = ((data.len() * 2) as f64).sqrt() as usize;
                        while n * (n + 1) / 2 > data.len() {
                            n -= 1;
                        }
                        if n * (n + 1) / 2 != data.len() {
                            return Err(r.error_at(
                                start,
                                format!(
                                    "packed matrix has {} values, not a triangle number",
                                    data.len()
                                ),
                            ));
                        }
                        return Ok(PackedMatrix { n, data });
                    }
                    Some(b'0'..=b'9' | b'-') => data.push(read_number::<T>(r, "packed matrix")?),
                    Some(c) if is_space(c) => r.set_pos(r.pos() + 1),
                    Some(_) => data.push(read_special::<T>(r, "packed matrix")?),
                }
            }
        } else {
            Err(r.error_at(
                start,
                format!(
                    "expected token {} (packed matrix), found {tok}",
                    T::PACKED_TOKEN
                ),
            ))
        }
    }

    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        if w.binary() {
            w.write_token(T::PACKED_TOKEN)?;
            w.write_i32(dim_i32(self.n)?)?;
            let mut buf = Vec::new();
            T::extend_le_bytes(&mut buf, &self.data);
            w.write_raw(&buf)
        } else if self.n == 0 {
            w.write_raw(b"[ ]\n")
        } else {
            let mut s = String::from("[\n");
            let mut k = 0;
            for i in 0..self.n {
                for _ in 0..=i {
                    fmt_g_into(&mut s, self.data[k].to_f64(), 7);
                    s.push(' ');
                    k += 1;
                }
                s.push_str(if i + 1 == self.n { "]\n" } else { "\n" });
            }
            w.write_raw(s.as_bytes())
        }
    }
}

/// Element type of a stored binary matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatKind {
    F32,
    F64,
}

impl FloatKind {
    /// Bytes a value.
    pub fn size(self) -> usize {
        match self {
            FloatKind::F32 => 4,
            FloatKind::F64 => 8,
        }
    }
}

/// A binary `FM`/`DM` matrix borrowing its little-endian data from the input
/// buffer (a memory-mapped archive): reading one costs no copy.
#[derive(Debug, Clone, Copy)]
pub struct RawMatrix<'a> {
    pub rows: usize,
    pub cols: usize,
    pub kind: FloatKind,
    /// rows * cols little-endian values of `kind`.
    pub data: &'a [u8],
}

impl<'a> RawMatrix<'a> {
    /// Read a binary `FM` or `DM` matrix header and borrow its data.
    pub fn read(r: &mut Reader<'a>) -> Result<Self> {
        let (kind, rows, cols) = Self::read_header(r)?;
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| r.error("matrix too large"))?;
        let data = read_elems(r, n, kind.size(), &format!("matrix of {rows} x {cols}"))?;
        Ok(RawMatrix {
            rows,
            cols,
            kind,
            data,
        })
    }

    /// A binary `FM` or `DM` matrix's header: its kind, rows and columns
    /// (the reader is left at its data).
    pub fn read_header(r: &mut Reader<'_>) -> Result<(FloatKind, usize, usize)> {
        let start = r.pos();
        let tok = r.read_token()?;
        let kind = match tok {
            "FM" => FloatKind::F32,
            "DM" => FloatKind::F64,
            t => {
                return Err(r.error_at(
                    start,
                    format!("expected token FM or DM (matrix), found {t}"),
                ))
            }
        };
        let rows = read_dim(r, "number of rows")?;
        let cols = read_dim(r, "number of columns")?;
        Ok((kind, rows, cols))
    }

    /// The data as an `f32` slice without copying, when it is `f32`, suitably
    /// aligned in memory, and the machine is little-endian.
    pub fn as_f32(&self) -> Option<&'a [f32]> {
        if self.kind != FloatKind::F32 || cfg!(target_endian = "big") {
            return None;
        }
        // SAFETY: every bit pattern is a valid f32; align_to only yields the
        // middle part when it is correctly aligned.
        let (pre, mid, post) = unsafe { self.data.align_to::<f32>() };
        (pre.is_empty() && post.is_empty()).then_some(mid)
    }

    /// Copy (converting) the values into `out` (rows * cols long).
    pub fn copy_to_f32(&self, out: &mut [f32]) {
        match self.kind {
            FloatKind::F32 => {
                for (o, c) in out.iter_mut().zip(self.data.chunks_exact(4)) {
                    *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            FloatKind::F64 => {
                for (o, c) in out.iter_mut().zip(self.data.chunks_exact(8)) {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(c);
                    *o = f64::from_le_bytes(a) as f32;
                }
            }
        }
    }

    pub fn to_matrix<T: Real>(&self) -> Result<Matrix<T>> {
        let mut data = Vec::with_capacity(self.rows * self.cols);
        match (self.kind, T::SIZE) {
            (FloatKind::F32, 4) | (FloatKind::F64, 8) => T::extend_from_le(&mut data, self.data),
            (FloatKind::F32, _) => {
                let mut tmp = Vec::with_capacity(self.rows * self.cols);
                f32::extend_from_le(&mut tmp, self.data);
                data.extend(tmp.into_iter().map(T::from_f32));
            }
            (FloatKind::F64, _) => {
                let mut tmp = Vec::with_capacity(self.rows * self.cols);
                f64::extend_from_le(&mut tmp, self.data);
                data.extend(tmp.into_iter().map(T::from_f64));
            }
        }
        Ok(Matrix {
            rows: self.rows,
            cols: self.cols,
            data,
        })
    }
}

/// A binary `FM`/`DM` matrix kept inside its shared input (a memory-mapped
/// archive) without copying: the handle keeps the bytes alive, so the
/// matrix can be passed between threads and copied out later, once, where
/// it is needed.
#[derive(Clone)]
pub struct SharedMatrix {
    input: Arc<InputData>,
    start: usize,
    rows: usize,
    cols: usize,
    kind: FloatKind,
}

impl SharedMatrix {
    /// `raw` as a part of `input`, or `None` when its bytes lie elsewhere.
    pub fn new(input: &Arc<InputData>, raw: &RawMatrix<'_>) -> Option<Self> {
        let base = input.as_ptr() as usize;
        let at = raw.data.as_ptr() as usize;
        let start = at.checked_sub(base)?;
        Self::at(input, start, raw.rows, raw.cols, raw.kind)
    }

    /// The `rows` × `cols` values of `kind` from byte `start` of `input`, or
    /// `None` when they run past its end.
    pub fn at(
        input: &Arc<InputData>,
        start: usize,
        rows: usize,
        cols: usize,
        kind: FloatKind,
    ) -> Option<Self> {
        let bytes = rows.checked_mul(cols)?.checked_mul(kind.size())?;
        (start.checked_add(bytes)? <= input.len()).then(|| SharedMatrix {
            input: input.clone(),
            start,
            rows,
            cols,
            kind,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Rows of this matrix's width that the rest of its input, after the
    /// matrix, would hold: about the frames left to read in an archive of
    /// such matrices (headers and other objects counted as frames too).
    pub fn rows_after(&self) -> usize {
        let size = self.kind.size();
        let end = self.start + self.rows * self.cols * size;
        self.input.len().saturating_sub(end) / (self.cols * size).max(1)
    }

    /// Values `floats` of an `f32` matrix (counted over its rows) read
    /// from its file into `dst` with `pread` ([`InputData::read_at`]),
    /// without touching the map: the first touch of a fresh map's pages
    /// costs a page fault each few of them, taken one after another by the
    /// threads that copy, and the kernel's copy from the page cache was
    /// faster (docs/performance.md, twenty-second session). False, with
    /// `dst` unspecified, where that cannot be done (an `f64` matrix, a
    /// big-endian host, input in memory, a short read): then read
    /// [`Self::raw`].
    pub fn read_f32_at(&self, floats: std::ops::Range<usize>, dst: &mut [f32]) -> bool {
        let whole = self.rows * self.cols;
        if self.kind != FloatKind::F32
            || cfg!(target_endian = "big")
            || !matches!(*self.input, InputData::Mapped(..))
            || floats.start > floats.end
            || floats.end > whole
            || dst.len() != floats.len()
        {
            return false;
        }
        // SAFETY: any bytes are a valid f32; `dst` is borrowed mutably.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), 4 * dst.len()) };
        let at = self.start + 4 * floats.start;
        self.input.read_at(at, bytes) == bytes.len()
    }

    /// The matrix as a view of its bytes.
    pub fn raw(&self) -> RawMatrix<'_> {
        let size = self.kind.size();
        RawMatrix {
            rows: self.rows,
            cols: self.cols,
            kind: self.kind,
            data: &self.input[self.start..self.start + self.rows * self.cols * size],
        }
    }
}

impl Debug for SharedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SharedMatrix({} x {} {:?} at byte {})",
            self.rows, self.cols, self.kind, self.start
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kaldi::object::{object_to_bytes, read_object};
    use proptest::prelude::*;

    /// A mapped `f32` matrix's range read with `pread` is that range of its
    /// values, at any offset; `f64` values, input in memory and ranges out
    /// of the matrix are refused.
    #[test]
    fn f32_ranges_read_from_the_file_are_the_matrix_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.bin");
        let vals: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
        let mut bytes = b"key ".to_vec();
        bytes.extend(object_to_bytes(
            &Matrix::from_vec(4, 3, vals.clone()).unwrap(),
            true,
        ));
        std::fs::write(&path, &bytes).unwrap();
        let input = crate::kaldi::files::map_file(path.to_str().unwrap()).unwrap();
        // The values follow "key ", the binary marker and the header.
        let start = bytes.len() - 4 * vals.len();
        let m = SharedMatrix::at(&input, start, 4, 3, FloatKind::F32).unwrap();
        for range in [0..12, 3..9, 5..6, 7..7] {
            let mut got = vec![f32::NAN; range.len()];
            assert!(m.read_f32_at(range.clone(), &mut got), "{range:?}");
            assert_eq!(got, vals[range]);
        }
        let mut out = vec![0f32; 4];
        assert!(!m.read_f32_at(10..14, &mut out));
        assert!(!m.read_f32_at(0..3, &mut out));
        let f64s = SharedMatrix::at(&input, start, 2, 3, FloatKind::F64).unwrap();
        assert!(!f64s.read_f32_at(0..4, &mut out));
        let owned = Arc::new(InputData::Owned(bytes));
        let in_memory = SharedMatrix::at(&owned, start, 4, 3, FloatKind::F32).unwrap();
        assert!(!in_memory.read_f32_at(0..4, &mut out));
    }

    #[test]
    fn text_forms_are_kaldis() {
        let m = Matrix::<f32>::from_vec(2, 2, vec![1.0, -0.5, 1e-5, 3.0]).unwrap();
        assert_eq!(object_to_bytes(&m, false), b" [\n  1 -0.5 \n  1e-05 3 ]\n");
        assert_eq!(object_to_bytes(&Matrix::<f32>::default(), false), b" [ ]\n");
        let v = Vector::<f64>::new(vec![0.25, 2.0]);
        assert_eq!(object_to_bytes(&v, false), b" [ 0.25 2 ]\n");
        assert_eq!(object_to_bytes(&Vector::<f64>::default(), false), b" [ ]\n");
        let p = SpMatrix::<f32>::from_vec(2, vec![1.0, 2.0, 3.0]).unwrap();
        assert_eq!(object_to_bytes(&p, false), b"[\n1 \n2 3 ]\n");
        assert_eq!(
            object_to_bytes(&SpMatrix::<f32>::default(), false),
            b"[ ]\n"
        );
    }

    #[test]
    fn binary_forms_are_kaldis() {
        let m = Matrix::<f32>::from_vec(1, 2, vec![1.0, 2.0]).unwrap();
        let b = object_to_bytes(&m, true);
        let mut want = b"\0BFM \x04\x01\x00\x00\x00\x04\x02\x00\x00\x00".to_vec();
        want.extend_from_slice(&1f32.to_le_bytes());
        want.extend_from_slice(&2f32.to_le_bytes());
        assert_eq!(b, want);
        let p = SpMatrix::<f64>::from_vec(1, vec![1.0]).unwrap();
        let b = object_to_bytes(&p, true);
        assert_eq!(&b[..10], b"\0BDP \x04\x01\x00\x00\x00");
    }

    #[test]
    fn cross_precision_reads() {
        let m = Matrix::<f64>::from_vec(1, 2, vec![0.1, 2.0]).unwrap();
        let b = object_to_bytes(&m, true);
        let f: Matrix<f32> = read_object(&b).unwrap();
        assert_eq!(f.data(), &[0.1f64 as f32, 2.0]);
        let v = Vector::<f32>::new(vec![0.1]);
        let d: Vector<f64> = read_object(&object_to_bytes(&v, true)).unwrap();
        assert_eq!(d.data, vec![0.1f32 as f64]);
        let p = SpMatrix::<f32>::from_vec(1, vec![0.1]).unwrap();
        let d: SpMatrix<f64> = read_object(&object_to_bytes(&p, true)).unwrap();
        assert_eq!(d.data(), &[0.1f32 as f64]);
    }

    #[test]
    fn text_variants_kaldi_accepts() {
        let m: Matrix<f32> = read_object(b"[ 1 2 ; 3 4 ]").unwrap();
        assert_eq!(
            (m.rows(), m.cols(), m.data()),
            (2, 2, &[1.0, 2.0, 3.0, 4.0][..])
        );
        let m: Matrix<f32> = read_object(b"  []").unwrap();
        assert_eq!(m.rows(), 0);
        let m: Matrix<f32> = read_object(b"[ inf NaN\n -inf 1 ]\n").unwrap();
        assert!(
            m.data()[0].is_infinite() && m.data()[1].is_nan() && m.data()[2] == f32::NEG_INFINITY
        );
        let v: Vector<f32> = read_object(b" [ 1\t2 ]\r\n").unwrap();
        assert_eq!(v.data, vec![1.0, 2.0]);
        let p: SpMatrix<f64> = read_object(b"DP 2 1 2 3 ").unwrap();
        assert_eq!(p.get(0, 1), 2.0);
    }

    #[test]
    fn errors_are_clear() {
        let e = read_object::<Matrix<f32>>(b"[ 1 2\n 3 ]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("inconsistent number of columns"), "{e}");
        let e = read_object::<Matrix<f32>>(b"[ 1 2\n 3")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing ']'"), "{e}");
        let e = read_object::<Matrix<f32>>(b"[ 1 x ]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expecting numeric matrix data, got 'x'"), "{e}");
        let e = read_object::<Vector<f32>>(b"[ 1\n 2 ]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("newline"), "{e}");
        let e = read_object::<Matrix<f32>>(b"\0BXM \x04\x01\x00\x00\x00")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected token FM or DM") && e.contains("at byte 2"),
            "{e}"
        );
        let mut b = object_to_bytes(&Matrix::<f32>::from_vec(2, 2, vec![1.0; 4]).unwrap(), true);
        b.truncate(b.len() - 1);
        let e = read_object::<Matrix<f32>>(&b).unwrap_err().to_string();
        assert!(
            e.contains("truncated data: matrix of 2 x 2 needs 16 bytes, only 15 left"),
            "{e}"
        );
        let e = read_object::<Matrix<f32>>(b"\0BFM \x04\xff\xff\xff\xff\x04\x01\x00\x00\x00")
            .unwrap_err()
            .to_string();
        assert!(e.contains("negative number of rows"), "{e}");
        let e = read_object::<SpMatrix<f32>>(b"[ 1 2 ]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("triangle"), "{e}");
    }

    #[test]
    fn raw_matrix_zero_copy() {
        // Put the data at a 4-aligned offset of an aligned buffer.
        let m = Matrix::<f32>::from_vec(2, 3, (0..6).map(|i| i as f32).collect()).unwrap();
        let b = object_to_bytes(&m, true);
        let mut aligned: Vec<u32> = vec![0; (b.len() + 2 + 3) / 4];
        let bytes: &mut [u8] = unsafe {
            std::slice::from_raw_parts_mut(aligned.as_mut_ptr() as *mut u8, aligned.len() * 4)
        };
        // Header "\0BFM " + 10 bytes of dims = 15; shift by 1 so data starts at 16.
        bytes[1..1 + b.len()].copy_from_slice(&b);
        let mut r = Reader::new(&bytes[1..1 + b.len()], true);
        r.set_pos(2);
        let raw = RawMatrix::read(&mut r).unwrap();
        let s = raw.as_f32().expect("aligned f32 data is borrowed");
        assert_eq!(s, m.data());
        let mut out = vec![0f32; 6];
        raw.copy_to_f32(&mut out);
        assert_eq!(out, m.data());
    }

    fn finite_f32() -> impl Strategy<Value = f32> {
        any::<f32>().prop_filter("finite", |v| v.is_finite())
    }

    proptest! {
        #[test]
        fn matrix_roundtrip(rows in 0usize..5, cols in 1usize..5, seed in proptest::collection::vec(any::<f32>(), 25)) {
            let data: Vec<f32> = seed.into_iter().take(rows * cols).collect();
            // Kaldi has no 0 x N matrices: an empty one is 0 x 0.
            let cols = if rows == 0 { 0 } else { cols };
            let m = Matrix::from_vec(rows, cols, data).unwrap();
            let b = object_to_bytes(&m, true);
            let back: Matrix<f32> = read_object(&b).unwrap();
            prop_assert_eq!(back.rows(), m.rows());
            prop_assert_eq!(object_to_bytes(&back, true), b);
            // Text: re-reading and re-writing gives the same text.
            let t = object_to_bytes(&m, false);
            let back: Matrix<f32> = read_object(&t).unwrap();
            prop_assert_eq!(object_to_bytes(&back, false), t);
        }

        #[test]
        fn matrix_f64_roundtrip(rows in 1usize..4, cols in 1usize..4, seed in proptest::collection::vec(any::<f64>(), 16)) {
            let m = Matrix::from_vec(rows, cols, seed.into_iter().take(rows * cols).collect()).unwrap();
            let b = object_to_bytes(&m, true);
            prop_assert_eq!(object_to_bytes(&read_object::<Matrix<f64>>(&b).unwrap(), true), b);
            let t = object_to_bytes(&m, false);
            prop_assert_eq!(object_to_bytes(&read_object::<Matrix<f64>>(&t).unwrap(), false), t);
        }

        #[test]
        fn vector_roundtrip(data in proptest::collection::vec(finite_f32(), 0..20)) {
            let v = Vector::new(data);
            let b = object_to_bytes(&v, true);
            prop_assert_eq!(read_object::<Vector<f32>>(&b).unwrap(), v.clone());
            let t = object_to_bytes(&v, false);
            prop_assert_eq!(object_to_bytes(&read_object::<Vector<f32>>(&t).unwrap(), false), t);
        }

        #[test]
        fn packed_roundtrip(n in 0usize..6, seed in proptest::collection::vec(finite_f32(), 21)) {
            let p = SpMatrix::from_vec(n, seed.into_iter().take(n * (n + 1) / 2).collect()).unwrap();
            let b = object_to_bytes(&p, true);
            prop_assert_eq!(read_object::<SpMatrix<f32>>(&b).unwrap(), p.clone());
            let t = object_to_bytes(&p, false);
            prop_assert_eq!(object_to_bytes(&read_object::<SpMatrix<f32>>(&t).unwrap(), false), t);
        }

        #[test]
        fn readers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = read_object::<Matrix<f32>>(&data);
            let _ = read_object::<Vector<f64>>(&data);
            let _ = read_object::<SpMatrix<f32>>(&data);
            let mut d = b"\0B".to_vec();
            d.extend_from_slice(&data);
            let _ = read_object::<Matrix<f32>>(&d);
            let _ = read_object::<Vector<f64>>(&d);
            let _ = read_object::<SpMatrix<f32>>(&d);
        }
    }
}
