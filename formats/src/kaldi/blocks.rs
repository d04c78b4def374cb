//! Adapters between the GMM objects' plain row-major `Vec` fields and the
//! `Vector` / `Matrix` / `SpMatrix` blocks of [`crate::kaldi::matrix`], which
//! do the actual reading and writing (float or double, binary or text, exactly
//! as Kaldi). Kept separate so the GMM structs stay simple `Vec`s that a trainer
//! can fill directly.

use std::io::{self, Write};

use crate::error::Result;
use crate::kaldi::io::{Reader, Writer};
use crate::kaldi::matrix::{Matrix, PackedMatrix, Real, Vector};
use crate::kaldi::object::KaldiObject;

/// Kaldi `Vector<float>::Read` (a stored double vector is converted).
pub fn read_vector_f32(r: &mut Reader<'_>) -> Result<Vec<f32>> {
    Ok(Vector::<f32>::read(r)?.data)
}

/// Kaldi `Vector<double>::Read`.
pub fn read_vector_f64(r: &mut Reader<'_>) -> Result<Vec<f64>> {
    Ok(Vector::<f64>::read(r)?.data)
}

/// A matrix: `(rows, cols, row-major data)`.
pub type MatrixData<T> = (usize, usize, Vec<T>);

fn read_matrix<T: Real>(r: &mut Reader<'_>) -> Result<MatrixData<T>> {
    let m = Matrix::<T>::read(r)?;
    Ok((m.rows(), m.cols(), m.into_data()))
}

/// Kaldi `Matrix<float>::Read`.
pub fn read_matrix_f32(r: &mut Reader<'_>) -> Result<MatrixData<f32>> {
    read_matrix(r)
}

/// Kaldi `Matrix<double>::Read`.
pub fn read_matrix_f64(r: &mut Reader<'_>) -> Result<MatrixData<f64>> {
    read_matrix(r)
}

fn read_packed<T: Real>(r: &mut Reader<'_>) -> Result<(usize, Vec<T>)> {
    let p = PackedMatrix::<T>::read(r)?;
    Ok((p.n(), p.data().to_vec()))
}

/// Kaldi `SpMatrix<float>::Read`: `(size, packed lower triangle)`.
pub fn read_packed_f32(r: &mut Reader<'_>) -> Result<(usize, Vec<f32>)> {
    read_packed(r)
}

/// Kaldi `SpMatrix<double>::Read`.
pub fn read_packed_f64(r: &mut Reader<'_>) -> Result<(usize, Vec<f64>)> {
    read_packed(r)
}

fn bad_dims(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}: data length does not match its dimensions"),
    )
}

/// Kaldi `Vector<T>::Write`.
pub fn write_vector<T: Real, W: Write>(w: &mut Writer<W>, v: &[T]) -> io::Result<()> {
    Vector::new(v.to_vec()).write(w)
}

/// Kaldi `Matrix<T>::Write` of a row-major `rows x cols` matrix.
pub fn write_matrix<T: Real, W: Write>(
    w: &mut Writer<W>,
    rows: usize,
    cols: usize,
    v: &[T],
) -> io::Result<()> {
    Matrix::from_vec(rows, cols, v.to_vec())
        .ok_or_else(|| bad_dims("matrix"))?
        .write(w)
}

/// Kaldi `SpMatrix<T>::Write` of an `n x n` packed lower triangle.
pub fn write_packed<T: Real, W: Write>(w: &mut Writer<W>, n: usize, v: &[T]) -> io::Result<()> {
    PackedMatrix::from_vec(n, v.to_vec())
        .ok_or_else(|| bad_dims("packed matrix"))?
        .write(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_layouts_are_kaldis() {
        let mut w = Writer::new(Vec::new(), false);
        write_vector(&mut w, &[1.5f32, -0.0]).unwrap();
        write_matrix(&mut w, 2, 2, &[1f32, 2., 3., 4.]).unwrap();
        write_packed(&mut w, 2, &[1f32, 2., 3.]).unwrap();
        let s = String::from_utf8(w.into_inner()).unwrap();
        assert_eq!(s, " [ 1.5 -0 ]\n [\n  1 2 \n  3 4 ]\n[\n1 \n2 3 ]\n");
        let mut r = Reader::new(s.as_bytes(), false);
        assert_eq!(read_vector_f32(&mut r).unwrap(), vec![1.5, -0.0]);
        assert_eq!(
            read_matrix_f64(&mut r).unwrap(),
            (2, 2, vec![1., 2., 3., 4.])
        );
        assert_eq!(read_packed_f32(&mut r).unwrap(), (2, vec![1., 2., 3.]));
    }

    #[test]
    fn wrong_lengths_are_errors_not_panics() {
        let mut w = Writer::new(Vec::new(), true);
        assert!(write_matrix(&mut w, 2, 2, &[1f32]).is_err());
        assert!(write_packed(&mut w, 2, &[1f32]).is_err());
    }
}
