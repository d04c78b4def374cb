//! The per-object options of Kaldi's copy tools, done as those tools do them
//! (in float arithmetic, in the same order): copy-matrix's `--scale`,
//! `--apply-log`, `--apply-exp`, `--apply-softmax-per-row` and
//! `--apply-power` (`src/bin/copy-matrix.cc`), copy-vector's `--change_dim`
//! and `--scale` (`copy-vector.cc`), copy-post's `--scale` (`copy-post.cc`),
//! and gmm-copy's `--copy-tm`/`--copy-am` (`src/gmmbin/gmm-copy.cc`).

use amtool_formats::kaldi::any::AnyObject;
use amtool_formats::kaldi::gmm::AmDiagGmm;
use amtool_formats::kaldi::holder::Posterior;
use amtool_formats::kaldi::io::{read_binary_header, Reader, Writer};
use amtool_formats::kaldi::matrix::{Matrix, Real, Vector};
use amtool_formats::kaldi::transition::TransitionModel;
use amtool_formats::Error as FormatError;

use super::copy::CopyArgs;
use crate::stats::fmt_g;

/// What the options ask to change in each object; the identity by default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Edits {
    pub scale: f32,
    pub apply_log: bool,
    pub apply_exp: bool,
    pub apply_softmax_per_row: bool,
    pub apply_power: f32,
    pub change_dim: i32,
}

/// Whether an object is one entry of a table or a whole file: copy-vector
/// scales table entries only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Table,
    File,
}

impl Edits {
    /// The options of `args`, checked as copy-matrix checks them.
    pub fn from_args(a: &CopyArgs) -> Result<Edits, String> {
        let e = Edits {
            scale: a.scale,
            apply_log: a.apply_log,
            apply_exp: a.apply_exp,
            apply_softmax_per_row: a.apply_softmax_per_row,
            apply_power: a.apply_power,
            change_dim: a.change_dim,
        };
        let exclusive = [e.apply_log, e.apply_exp, e.apply_softmax_per_row];
        if exclusive.iter().filter(|&&b| b).count() > 1 {
            return Err(
                "Only one of apply-log, apply-exp and apply-softmax-per-row can be given".into(),
            );
        }
        Ok(e)
    }

    fn matrix_ops(&self) -> bool {
        self.apply_log || self.apply_exp || self.apply_softmax_per_row || self.apply_power != 1.0
    }

    fn changes_dim(&self) -> bool {
        self.change_dim >= 0
    }

    pub fn is_identity(&self) -> bool {
        self.scale == 1.0 && !self.matrix_ops() && !self.changes_dim()
    }

    /// copy-vector's summary after a table: ", setting dim to D scaled by S"
    /// when either option was given.
    pub fn vector_log_suffix(&self) -> String {
        if self.changes_dim() || self.scale != 1.0 {
            format!(
                ", setting dim to {} scaled by {}",
                self.change_dim,
                fmt_g(self.scale as f64)
            )
        } else {
            String::new()
        }
    }

    /// Applies the options to one object. Matrices become float matrices
    /// (copy-matrix reads `Matrix<BaseFloat>`); an option that does not apply
    /// to the object's type is an error naming both.
    pub fn apply(&self, obj: AnyObject, place: Place) -> Result<AnyObject, String> {
        if self.is_identity() {
            return Ok(obj);
        }
        let not_for = |what: &str| {
            format!(
                "{what} does not apply to a {}",
                obj.object_type().describe()
            )
        };
        match obj {
            AnyObject::FloatMatrix(_) | AnyObject::DoubleMatrix(_) | AnyObject::CompressedMatrix(_) => {
                if self.changes_dim() {
                    return Err(not_for("--change-dim"));
                }
                let mut m = obj.to_float_matrix().unwrap_or_default();
                self.edit_matrix(&mut m);
                Ok(AnyObject::FloatMatrix(m))
            }
            AnyObject::FloatVector(v) if !self.matrix_ops() => {
                Ok(AnyObject::FloatVector(self.edit_vector(v, place)))
            }
            AnyObject::DoubleVector(v) if !self.matrix_ops() => {
                Ok(AnyObject::DoubleVector(self.edit_vector(v, place)))
            }
            AnyObject::Posterior(p) if !self.matrix_ops() && !self.changes_dim() => {
                Ok(AnyObject::Posterior(scale_posterior(p, self.scale)))
            }
            _ => Err(not_for(
                "--scale, --apply-log, --apply-exp, --apply-power, --apply-softmax-per-row or --change-dim",
            )),
        }
    }

    /// copy-matrix: scale, then log (floored at 1e-20), exp or softmax, then power.
    fn edit_matrix(&self, m: &mut Matrix<f32>) {
        let cols = m.cols().max(1);
        let data = m.data_mut();
        if self.scale != 1.0 {
            data.iter_mut().for_each(|x| *x *= self.scale);
        }
        if self.apply_log {
            data.iter_mut().for_each(|x| *x = x.max(1.0e-20).ln());
        }
        if self.apply_exp {
            data.iter_mut().for_each(|x| *x = x.exp());
        }
        if self.apply_softmax_per_row {
            data.chunks_mut(cols).for_each(softmax);
        }
        if self.apply_power != 1.0 {
            data.iter_mut().for_each(|x| *x = pow(*x, self.apply_power));
        }
    }

    /// copy-vector: resize (zero-padding), then scale; a whole file is
    /// resized but not scaled, as Kaldi's copy-vector does.
    fn edit_vector<T: Real>(&self, mut v: Vector<T>, place: Place) -> Vector<T> {
        if self.changes_dim() {
            v.data.resize(self.change_dim as usize, T::from_f64(0.0));
        }
        if self.scale != 1.0 && place == Place::Table {
            // The product of two floats is exact in double, so this rounds as
            // a float multiply does.
            let s = self.scale as f64;
            v.data
                .iter_mut()
                .for_each(|x| *x = T::from_f64(x.to_f64() * s));
        }
        v
    }
}

/// Kaldi's `VectorBase::ApplySoftMax`: exp(x − max) summed in float, then
/// scaled by the float nearest 1/sum.
fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for x in row.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    let alpha = (1.0 / sum as f64) as f32;
    row.iter_mut().for_each(|x| *x *= alpha);
}

/// Kaldi's `VectorBase::ApplyPow`: squares and square roots exactly, other
/// powers by `powf` (negative bases give NaN, as there).
fn pow(x: f32, p: f32) -> f32 {
    if p == 2.0 {
        x * x
    } else if p == 0.5 {
        x.sqrt()
    } else {
        x.powf(p)
    }
}

/// Kaldi's `ScalePosterior`.
fn scale_posterior(mut p: Posterior, scale: f32) -> Posterior {
    for frame in &mut p.0 {
        frame.iter_mut().for_each(|(_, w)| *w *= scale);
    }
    p
}

/// gmm-copy with `--copy-tm=false` or `--copy-am=false`: reads the parts
/// asked for from the start of the file (the transition model, then the
/// AmDiagGmm) and writes those parts alone; with neither, an empty model
/// file (just the binary marker in binary mode), as Kaldi writes it.
pub fn gmm_copy_parts(
    buf: &[u8],
    binary: bool,
    copy_tm: bool,
    copy_am: bool,
) -> Result<Vec<u8>, FormatError> {
    let (in_binary, header) = read_binary_header(buf)?;
    let mut r = Reader::new(buf, in_binary);
    r.set_pos(header);
    let tm = copy_tm.then(|| TransitionModel::read(&mut r)).transpose()?;
    let am = copy_am.then(|| AmDiagGmm::read(&mut r)).transpose()?;
    let write = || -> std::io::Result<Vec<u8>> {
        let mut w = Writer::new(Vec::new(), binary);
        w.write_binary_marker()?;
        if let Some(tm) = &tm {
            tm.write(&mut w)?;
        }
        if let Some(am) = &am {
            am.write(&mut w)?;
        }
        Ok(w.into_inner())
    };
    write().map_err(|e| FormatError::io("the model", e))
}
