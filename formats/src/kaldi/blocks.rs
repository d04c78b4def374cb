//! The vector and matrix blocks inside GMM objects, accumulators and transition
//! models: Kaldi `Vector`/`Matrix`/`SpMatrix` of float or double, read into
//! plain row-major `Vec`s and written exactly as Kaldi's `Write` does.
//!
//! Kaldi reads a float block stored as double (and vice versa) by converting,
//! so the readers accept both precisions; the writers write the precision the
//! Kaldi object has in a float (`BaseFloat = float`) build.
//!
//! Binary: `FV `/`DV ` + int32 dim + raw data; `FM `/`DM ` + int32 rows + int32
//! cols + raw row-major data; `FP `/`DP ` + int32 rows + the packed lower
//! triangle (row by row). Text: vector ` [ v v ]\n`; matrix ` [\n  v v \n  v v ]\n`;
//! packed `[\nv \nv v ]\n`; empty ones ` [ ]\n`.

use std::io::{self, Write};

use crate::error::Result;
use crate::kaldi::io::{fmt_g7, fmt_g7_f32, Reader, Writer};

/// Element precision of a block as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prec {
    F32,
    F64,
}

/// Read the binary type token (`FV`, `DM`, ...) whose second letter is `kind`.
fn read_type_token(r: &mut Reader<'_>, kind: char, what: &str) -> Result<Prec> {
    let at = r.pos();
    let tok = r.read_token()?;
    let mut chars = tok.chars();
    let prec = match chars.next() {
        Some('F') => Prec::F32,
        Some('D') => Prec::F64,
        _ => {
            return Err(r.error_at(
                at,
                format!("expected a {what} (F{kind} or D{kind}), found '{tok}'"),
            ))
        }
    };
    if chars.next() != Some(kind) || chars.next().is_some() {
        return Err(r.error_at(
            at,
            format!("expected a {what} (F{kind} or D{kind}), found '{tok}'"),
        ));
    }
    Ok(prec)
}

fn read_dim(r: &mut Reader<'_>, what: &str) -> Result<usize> {
    let at = r.pos();
    let n = r.read_i32()?;
    if n < 0 {
        return Err(r.error_at(at, format!("negative {what} {n}")));
    }
    Ok(n as usize)
}

/// Read `n` raw little-endian values of precision `prec` as f64.
fn read_raw(r: &mut Reader<'_>, prec: Prec, n: usize, out: &mut Vec<f64>) -> Result<()> {
    let size = match prec {
        Prec::F32 => 4,
        Prec::F64 => 8,
    };
    let nbytes = n
        .checked_mul(size)
        .ok_or_else(|| r.error(format!("block of {n} elements is too large")))?;
    let bytes = r.read_bytes(nbytes)?;
    out.reserve(n);
    match prec {
        Prec::F32 => out.extend(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64),
        ),
        Prec::F64 => out.extend(
            bytes
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])),
        ),
    }
    Ok(())
}

/// In text mode: consume `[` (after whitespace).
fn expect_open(r: &mut Reader<'_>, what: &str) -> Result<()> {
    match r.peek() {
        Some(b'[') => {
            r.read_bytes(1)?;
            Ok(())
        }
        Some(b) => Err(r.error(format!(
            "expected '[' starting a {what}, found '{}'",
            b as char
        ))),
        None => Err(r.error(format!("expected '[' starting a {what}, found end of data"))),
    }
}

/// Text numbers up to the closing `]`; with `rows`, also counts the lines the
/// numbers are on (a text matrix has one row per line).
fn read_text_numbers(
    r: &mut Reader<'_>,
    f32_values: bool,
    what: &str,
    mut rows: Option<&mut Vec<usize>>,
) -> Result<Vec<f64>> {
    expect_open(r, what)?;
    let mut v = Vec::new();
    let mut line_start_count = 0usize;
    loop {
        // Skip whitespace ourselves so that newlines (row ends) are seen.
        let mut saw_newline = false;
        while let Some(b) = r.peek_byte() {
            if b == b'\n' {
                saw_newline = true;
            } else if !crate::kaldi::io::is_space(b) {
                break;
            }
            r.read_bytes(1)?;
        }
        if saw_newline {
            if let Some(rows) = rows.as_deref_mut() {
                if v.len() > line_start_count {
                    rows.push(v.len() - line_start_count);
                }
            }
            line_start_count = v.len();
        }
        match r.peek_byte() {
            None => {
                return Err(r.error(format!(
                    "unexpected end of data inside a {what} (no closing ']')"
                )))
            }
            Some(b']') => {
                r.read_bytes(1)?;
                if let Some(rows) = rows.as_deref_mut() {
                    if v.len() > line_start_count {
                        rows.push(v.len() - line_start_count);
                    }
                }
                return Ok(v);
            }
            Some(_) => {
                let x = if f32_values {
                    r.read_f32()? as f64
                } else {
                    r.read_f64()?
                };
                v.push(x);
            }
        }
    }
}

/// A Kaldi vector (FV/DV) as f64 values. `f32_values`: text numbers are parsed as
/// float (Kaldi `Vector<float>`) rather than double.
fn read_vector(r: &mut Reader<'_>, f32_values: bool) -> Result<Vec<f64>> {
    if r.binary() {
        let prec = read_type_token(r, 'V', "vector")?;
        let n = read_dim(r, "vector dimension")?;
        let mut v = Vec::new();
        read_raw(r, prec, n, &mut v)?;
        Ok(v)
    } else {
        read_text_numbers(r, f32_values, "vector", None)
    }
}

/// Kaldi `Vector<float>::Read`.
pub fn read_vector_f32(r: &mut Reader<'_>) -> Result<Vec<f32>> {
    Ok(read_vector(r, true)?
        .into_iter()
        .map(|x| x as f32)
        .collect())
}

/// Kaldi `Vector<double>::Read`.
pub fn read_vector_f64(r: &mut Reader<'_>) -> Result<Vec<f64>> {
    read_vector(r, false)
}

/// A matrix: `(rows, cols, row-major data)`.
pub type MatrixData<T> = (usize, usize, Vec<T>);

fn read_matrix(r: &mut Reader<'_>, f32_values: bool) -> Result<MatrixData<f64>> {
    if r.binary() {
        let prec = read_type_token(r, 'M', "matrix")?;
        let rows = read_dim(r, "matrix row count")?;
        let cols = read_dim(r, "matrix column count")?;
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| r.error(format!("matrix of {rows} x {cols} is too large")))?;
        let mut v = Vec::new();
        read_raw(r, prec, n, &mut v)?;
        Ok((rows, cols, v))
    } else {
        let start = r.pos();
        let mut row_lens = Vec::new();
        let v = read_text_numbers(r, f32_values, "matrix", Some(&mut row_lens))?;
        let cols = row_lens.first().copied().unwrap_or(0);
        if let Some((i, &len)) = row_lens.iter().enumerate().find(|(_, &l)| l != cols) {
            return Err(r.error_at(start, format!("text matrix has rows of different lengths: row 0 has {cols}, row {i} has {len}")));
        }
        Ok((row_lens.len(), cols, v))
    }
}

/// Kaldi `Matrix<float>::Read`.
pub fn read_matrix_f32(r: &mut Reader<'_>) -> Result<MatrixData<f32>> {
    let (rows, cols, v) = read_matrix(r, true)?;
    Ok((rows, cols, v.into_iter().map(|x| x as f32).collect()))
}

/// Kaldi `Matrix<double>::Read`.
pub fn read_matrix_f64(r: &mut Reader<'_>) -> Result<MatrixData<f64>> {
    read_matrix(r, false)
}

fn read_packed(r: &mut Reader<'_>, f32_values: bool) -> Result<(usize, Vec<f64>)> {
    if r.binary() {
        let prec = read_type_token(r, 'P', "packed symmetric matrix")?;
        let n = read_dim(r, "packed matrix size")?;
        let len = n
            .checked_add(1)
            .and_then(|m| m.checked_mul(n))
            .map(|m| m / 2)
            .ok_or_else(|| r.error(format!("packed matrix of size {n} is too large")))?;
        let mut v = Vec::new();
        read_raw(r, prec, len, &mut v)?;
        Ok((n, v))
    } else {
        let start = r.pos();
        let v = read_text_numbers(r, f32_values, "packed symmetric matrix", None)?;
        // n(n+1)/2 = len
        let len = v.len();
        let n = (((8 * len + 1) as f64).sqrt() as usize).saturating_sub(1) / 2;
        let n = (n.saturating_sub(1)..=n + 1).find(|&k| k * (k + 1) / 2 == len);
        match n {
            Some(n) => Ok((n, v)),
            None => Err(r.error_at(
                start,
                format!(
                    "packed symmetric matrix has {len} numbers, not a triangular count n(n+1)/2"
                ),
            )),
        }
    }
}

/// Kaldi `SpMatrix<float>::Read`: `(size, packed lower triangle)`.
pub fn read_packed_f32(r: &mut Reader<'_>) -> Result<(usize, Vec<f32>)> {
    let (n, v) = read_packed(r, true)?;
    Ok((n, v.into_iter().map(|x| x as f32).collect()))
}

/// Kaldi `SpMatrix<double>::Read`.
pub fn read_packed_f64(r: &mut Reader<'_>) -> Result<(usize, Vec<f64>)> {
    read_packed(r, false)
}

/// A value written in a block: its binary bytes and its text form.
pub trait BlockValue: Copy {
    const TYPE_LETTER: char;
    fn put_le(self, out: &mut Vec<u8>);
    fn text(self) -> String;
}

impl BlockValue for f32 {
    const TYPE_LETTER: char = 'F';
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn text(self) -> String {
        fmt_g7_f32(self)
    }
}

impl BlockValue for f64 {
    const TYPE_LETTER: char = 'D';
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn text(self) -> String {
        fmt_g7(self)
    }
}

fn write_raw<T: BlockValue, W: Write>(w: &mut Writer<W>, v: &[T]) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(v.len() * 8);
    for &x in v {
        x.put_le(&mut bytes);
    }
    w.write_raw(&bytes)
}

/// Kaldi `Vector<T>::Write`.
pub fn write_vector<T: BlockValue, W: Write>(w: &mut Writer<W>, v: &[T]) -> io::Result<()> {
    if w.binary() {
        w.write_token(&format!("{}V", T::TYPE_LETTER))?;
        w.write_i32(len_i32(v.len())?)?;
        write_raw(w, v)
    } else {
        let mut s = String::with_capacity(v.len() * 12 + 6);
        s.push_str(" [ ");
        for &x in v {
            s.push_str(&x.text());
            s.push(' ');
        }
        s.push_str("]\n");
        w.write_raw(s.as_bytes())
    }
}

/// Kaldi `Matrix<T>::Write` of a row-major `rows x cols` matrix.
pub fn write_matrix<T: BlockValue, W: Write>(
    w: &mut Writer<W>,
    rows: usize,
    cols: usize,
    v: &[T],
) -> io::Result<()> {
    debug_assert_eq!(rows * cols, v.len());
    if w.binary() {
        w.write_token(&format!("{}M", T::TYPE_LETTER))?;
        w.write_i32(len_i32(rows)?)?;
        w.write_i32(len_i32(cols)?)?;
        write_raw(w, v)
    } else if cols == 0 {
        w.write_raw(b" [ ]\n")
    } else {
        let mut s = String::with_capacity(v.len() * 12 + 8 * rows + 6);
        s.push_str(" [");
        for row in v.chunks(cols) {
            s.push_str("\n  ");
            for &x in row {
                s.push_str(&x.text());
                s.push(' ');
            }
        }
        s.push_str("]\n");
        w.write_raw(s.as_bytes())
    }
}

/// Kaldi `SpMatrix<T>::Write` (`PackedMatrix::Write`) of an `n x n` packed lower
/// triangle.
pub fn write_packed<T: BlockValue, W: Write>(
    w: &mut Writer<W>,
    n: usize,
    v: &[T],
) -> io::Result<()> {
    debug_assert_eq!(n * (n + 1) / 2, v.len());
    if w.binary() {
        w.write_token(&format!("{}P", T::TYPE_LETTER))?;
        w.write_i32(len_i32(n)?)?;
        write_raw(w, v)
    } else if n == 0 {
        w.write_raw(b" [ ]\n")
    } else {
        let mut s = String::with_capacity(v.len() * 12 + 2 * n + 4);
        s.push_str("[\n");
        let mut k = 0;
        for i in 0..n {
            for _ in 0..=i {
                s.push_str(&v[k].text());
                s.push(' ');
                k += 1;
            }
            if i + 1 == n {
                s.push(']');
            }
            s.push('\n');
        }
        w.write_raw(s.as_bytes())
    }
}

fn len_i32(n: usize) -> io::Result<i32> {
    i32::try_from(n).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("size {n} does not fit Kaldi's int32"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip<F, G, T>(binary: bool, write: F, read: G) -> T
    where
        F: FnOnce(&mut Writer<Vec<u8>>),
        G: FnOnce(&mut Reader<'_>) -> Result<T>,
    {
        let mut w = Writer::new(Vec::new(), binary);
        write(&mut w);
        let buf = w.into_inner();
        let mut r = Reader::new(&buf, binary);
        let t = read(&mut r).unwrap();
        assert!(r.at_end(), "trailing data after block");
        t
    }

    #[test]
    fn text_layouts_are_kaldis() {
        let mut w = Writer::new(Vec::new(), false);
        write_vector(&mut w, &[1.5f32, -0.0]).unwrap();
        write_matrix(&mut w, 2, 2, &[1f32, 2., 3., 4.]).unwrap();
        write_packed(&mut w, 2, &[1f32, 2., 3.]).unwrap();
        write_vector::<f32, _>(&mut w, &[]).unwrap();
        write_matrix::<f32, _>(&mut w, 0, 0, &[]).unwrap();
        let s = String::from_utf8(w.into_inner()).unwrap();
        assert_eq!(
            s,
            " [ 1.5 -0 ]\n [\n  1 2 \n  3 4 ]\n[\n1 \n2 3 ]\n [ ]\n [ ]\n"
        );
    }

    #[test]
    fn binary_and_text_roundtrips() {
        for binary in [true, false] {
            let v = roundtrip(
                binary,
                |w| write_vector(w, &[0.25f32, -3.0]).unwrap(),
                read_vector_f32,
            );
            assert_eq!(v, vec![0.25, -3.0]);
            let m = roundtrip(
                binary,
                |w| write_matrix(w, 2, 3, &[1f64, 2., 3., 4., 5., 6.]).unwrap(),
                read_matrix_f64,
            );
            assert_eq!(m, (2, 3, vec![1., 2., 3., 4., 5., 6.]));
            let p = roundtrip(
                binary,
                |w| write_packed(w, 3, &[1f32, 2., 3., 4., 5., 6.]).unwrap(),
                read_packed_f32,
            );
            assert_eq!(p, (3, vec![1., 2., 3., 4., 5., 6.]));
            let e = roundtrip(
                binary,
                |w| write_matrix::<f32, _>(w, 0, 0, &[]).unwrap(),
                read_matrix_f32,
            );
            assert_eq!(e, (0, 0, vec![]));
        }
    }

    #[test]
    fn double_block_read_as_float_and_back() {
        let v = roundtrip(
            true,
            |w| write_vector(w, &[0.1f64]).unwrap(),
            read_vector_f32,
        );
        assert_eq!(v, vec![0.1f64 as f32]);
    }

    #[test]
    fn errors_name_the_position() {
        let e = read_vector_f32(&mut Reader::new(b"FM \x04\x01\x00\x00\x00", true))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at byte 0") && e.contains("FV or DV"), "{e}");
        let e = read_vector_f32(&mut Reader::new(b"FV \x04\x03\x00\x00\x00\x00\x00", true))
            .unwrap_err()
            .to_string();
        assert!(e.contains("end of data"), "{e}");
        let e = read_vector_f32(&mut Reader::new(b"FV \x04\xff\xff\xff\xff", true))
            .unwrap_err()
            .to_string();
        assert!(e.contains("negative vector dimension"), "{e}");
        let e = read_matrix_f32(&mut Reader::new(b" [\n 1 2\n 3 ]", false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("different lengths"), "{e}");
        let e = read_packed_f32(&mut Reader::new(b"[ 1 2 ]", false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("triangular"), "{e}");
        let e = read_vector_f32(&mut Reader::new(b" [ 1 2", false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no closing"), "{e}");
    }
}
