//! HTK parameter files (HParm.c / HWave.c): the 12-byte header (`nSamples`,
//! `sampPeriod` in 100 ns, `sampSize` in bytes, `parmKind`), float frames,
//! short frames (WAVEFORM, DISCRETE, IREFC), `_C` compression (an A and a B float
//! row, then shorts; value = (short + B) / A in float arithmetic, as HParm's
//! `GetParm` decodes it) and the `_K` checksum (a short appended after the data).
//!
//! HTK writes big-endian unless `NATURALWRITEORDER = T`; [`ByteOrder::Little`]
//! reads and writes that variant. This module only moves bytes: it does not add
//! deltas or convert between kinds the way HParm's `TARGETKIND` does.

use std::path::Path;

use super::parmkind::*;
use crate::error::{Error, Pos, Result};

/// Byte order of a parameter file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// HTK's default ("SUN" order).
    Big,
    /// `NATURALWRITEORDER = T` on a little-endian machine.
    Little,
}

/// The sample data of a parameter file, as stored.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamData {
    /// Plain float frames, `ncols` per frame.
    Float(Vec<f32>),
    /// 16-bit samples: WAVEFORM samples, DISCRETE VQ indices, IREFC (value/32767).
    Short(Vec<i16>),
    /// `_C`: per-column scale `a` and offset `b`, then the shorts.
    Compressed {
        a: Vec<f32>,
        b: Vec<f32>,
        values: Vec<i16>,
    },
}

/// One HTK parameter file.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamFile {
    /// The kind as in the header (including `_C` and `_K`).
    pub kind: ParmKind,
    /// Sample period in 100 ns units.
    pub samp_period: i32,
    /// Values per frame.
    pub ncols: usize,
    pub data: ParamData,
}

/// The CRC HTK appends with `_K` (`UpdateCRCC`): over the file's 16-bit words in
/// file order, `crc = (crc * 65536 + word) % 36897`, starting at 0.
pub fn htk_crc(words: impl Iterator<Item = u16>) -> u16 {
    let mut crc: u32 = 0;
    for w in words {
        crc = (crc * 65536 + w as u32) % 36897;
    }
    crc as u16
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
    order: ByteOrder,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.b.len() - self.pos < n {
            return Err(Error::format(
                Pos::Byte(self.pos as u64),
                format!(
                    "file truncated: {what} needs {n} bytes, {} left",
                    self.b.len() - self.pos
                ),
            ));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u16(&mut self, what: &str) -> Result<u16> {
        let s = self.take(2, what)?;
        Ok(match self.order {
            ByteOrder::Big => u16::from_be_bytes([s[0], s[1]]),
            ByteOrder::Little => u16::from_le_bytes([s[0], s[1]]),
        })
    }
    fn i32(&mut self, what: &str) -> Result<i32> {
        let s = self.take(4, what)?;
        let a = [s[0], s[1], s[2], s[3]];
        Ok(match self.order {
            ByteOrder::Big => i32::from_be_bytes(a),
            ByteOrder::Little => i32::from_le_bytes(a),
        })
    }
    fn f32s(&mut self, n: usize, what: &str) -> Result<Vec<f32>> {
        let s = self.take(n.checked_mul(4).ok_or_else(|| too_big(self.pos))?, what)?;
        Ok(s.chunks_exact(4)
            .map(|c| {
                let a = [c[0], c[1], c[2], c[3]];
                match self.order {
                    ByteOrder::Big => f32::from_be_bytes(a),
                    ByteOrder::Little => f32::from_le_bytes(a),
                }
            })
            .collect())
    }
    fn i16s(&mut self, n: usize, what: &str) -> Result<Vec<i16>> {
        let s = self.take(n.checked_mul(2).ok_or_else(|| too_big(self.pos))?, what)?;
        Ok(s.chunks_exact(2)
            .map(|c| match self.order {
                ByteOrder::Big => i16::from_be_bytes([c[0], c[1]]),
                ByteOrder::Little => i16::from_le_bytes([c[0], c[1]]),
            })
            .collect())
    }
}

fn too_big(pos: usize) -> Error {
    Error::format(Pos::Byte(pos as u64), "sizes in header overflow")
}

/// The raw header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamHeader {
    pub n_samples: i32,
    pub samp_period: i32,
    pub samp_size: u16,
    pub kind: ParmKind,
}

impl ParamHeader {
    /// Parse the 12-byte header in the given order.
    pub fn parse(bytes: &[u8], order: ByteOrder) -> Result<Self> {
        let mut r = Reader {
            b: bytes,
            pos: 0,
            order,
        };
        let n_samples = r.i32("header nSamples")?;
        let samp_period = r.i32("header sampPeriod")?;
        let samp_size = r.u16("header sampSize")?;
        let kind = ParmKind(r.u16("header parmKind")?);
        Ok(ParamHeader {
            n_samples,
            samp_period,
            samp_size,
            kind,
        })
    }

    /// The plausibility test of HWave's `ReadHTKHeader`-style guessing: used to
    /// tell big- from little-endian files.
    pub fn plausible(&self) -> bool {
        self.n_samples >= 0
            && self.samp_period > 0
            && self.samp_size > 0
            && self.samp_size <= 20000
            && self.kind.is_valid()
            && self.kind.base() != ANON
    }
}

impl ParamFile {
    /// Number of frames (for `_C`, without the 4 "samples" the A/B rows take).
    pub fn n_frames(&self) -> usize {
        if self.ncols == 0 {
            return 0;
        }
        match &self.data {
            ParamData::Float(v) => v.len() / self.ncols,
            ParamData::Short(v) => v.len() / self.ncols,
            ParamData::Compressed { values, .. } => values.len() / self.ncols,
        }
    }

    /// Bytes per sample as the header states it.
    pub fn samp_size(&self) -> usize {
        match self.data {
            ParamData::Float(_) => self.ncols * 4,
            _ => self.ncols * 2,
        }
    }

    /// Read a parameter file through a memory map; the byte order is taken from
    /// the header (big-endian unless only the little-endian reading is plausible).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let f = std::fs::File::open(path).map_err(|e| Error::io(&name, e))?;
        // SAFETY: the map is read-only and dropped before we return; a file
        // changed underneath us gives wrong numbers, not undefined behaviour we rely on.
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| Error::io(&name, e))?;
        Self::parse(&map).map_err(|e| e.in_file(&name))
    }

    /// Read with the byte order guessed from the header.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        Self::parse_with_order(bytes, Self::detect_order(bytes))
    }

    /// Big-endian unless the big-endian header is implausible and the
    /// little-endian one is not.
    pub fn detect_order(bytes: &[u8]) -> ByteOrder {
        let be = ParamHeader::parse(bytes, ByteOrder::Big);
        let le = ParamHeader::parse(bytes, ByteOrder::Little);
        match (be, le) {
            (Ok(b), Ok(l)) if !b.plausible() && l.plausible() => ByteOrder::Little,
            _ => ByteOrder::Big,
        }
    }

    /// Read a parameter file in the given byte order (what HTK does with
    /// `NATURALREADORDER` set or not).
    pub fn parse_with_order(bytes: &[u8], order: ByteOrder) -> Result<Self> {
        let h = ParamHeader::parse(bytes, order)?;
        let mut r = Reader {
            b: bytes,
            pos: 12,
            order,
        };
        if !h.kind.is_valid() {
            return Err(Error::format(
                Pos::Byte(10),
                format!("unknown parameter kind code {:#06x}", h.kind.0),
            ));
        }
        if h.n_samples < 0 {
            return Err(Error::format(
                Pos::Byte(0),
                format!("negative nSamples {}", h.n_samples),
            ));
        }
        let mut n = h.n_samples as usize;
        let base = h.kind.base();
        let shorts = h.kind.has(HASCOMPX) || base == IREFC || base == DISCRETE || base == WAVEFORM;
        let width = if shorts { 2 } else { 4 };
        if h.samp_size == 0 || h.samp_size as usize % width != 0 {
            return Err(Error::format(
                Pos::Byte(8),
                format!(
                    "sampSize {} is not a multiple of {width} for kind {}",
                    h.samp_size, h.kind
                ),
            ));
        }
        let ncols = h.samp_size as usize / width;
        let data_start = r.pos;
        let data = if h.kind.has(HASCOMPX) && base != IREFC && base != DISCRETE && base != WAVEFORM
        {
            if n < 4 {
                return Err(Error::format(
                    Pos::Byte(0),
                    format!("compressed file has nSamples {n} < 4 (the A/B rows count as 4)"),
                ));
            }
            n -= 4;
            let a = r.f32s(ncols, "compression scale row A")?;
            let b = r.f32s(ncols, "compression offset row B")?;
            let values = r.i16s(n * ncols, "compressed frames")?;
            ParamData::Compressed { a, b, values }
        } else if shorts {
            ParamData::Short(r.i16s(n * ncols, "16-bit samples")?)
        } else {
            ParamData::Float(r.f32s(n * ncols, "float frames")?)
        };
        if h.kind.has(HASCRCC) {
            let data_end = r.pos;
            let stored = r.u16("_K checksum")?;
            let words = bytes[data_start..data_end]
                .chunks_exact(2)
                .map(|c| match order {
                    ByteOrder::Big => u16::from_be_bytes([c[0], c[1]]),
                    ByteOrder::Little => u16::from_le_bytes([c[0], c[1]]),
                });
            let computed = htk_crc(words);
            if computed != stored {
                return Err(Error::format(
                    Pos::Byte(data_end as u64),
                    format!("CRC error: file says {stored}, data gives {computed}"),
                ));
            }
        }
        Ok(ParamFile {
            kind: h.kind,
            samp_period: h.samp_period,
            ncols,
            data,
        })
    }

    /// The frames as floats, decoded as HTK does (for WAVEFORM/DISCRETE the
    /// sample values, for IREFC value/32767).
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            ParamData::Float(v) => v.clone(),
            ParamData::Short(v) => {
                if self.kind.base() == IREFC {
                    v.iter().map(|&s| s as f32 / 32767.0f32).collect()
                } else {
                    v.iter().map(|&s| s as f32).collect()
                }
            }
            ParamData::Compressed { a, b, values } => values
                .iter()
                .enumerate()
                .map(|(i, &s)| {
                    let j = i % self.ncols;
                    (s as f32 + b[j]) / a[j]
                })
                .collect(),
        }
    }

    /// A plain float file of the given kind (`_C`/`_K` dropped from `kind`).
    pub fn from_f32(kind: ParmKind, samp_period: i32, ncols: usize, values: Vec<f32>) -> Self {
        ParamFile {
            kind: kind.without(HASCOMPX | HASCRCC),
            samp_period,
            ncols,
            data: ParamData::Float(values),
        }
    }

    /// The frames as a Kaldi matrix (frames × values), decoded as
    /// [`ParamFile::to_f32`] does — what `copy-feats --htk-in` reads.
    pub fn to_matrix(&self) -> crate::kaldi::matrix::Matrix<f32> {
        let rows = self.n_frames();
        let mut v = self.to_f32();
        v.truncate(rows * self.ncols);
        crate::kaldi::matrix::Matrix::from_vec(rows, self.ncols, v)
            .unwrap_or_else(|| crate::kaldi::matrix::Matrix::zeros(0, 0))
    }

    /// A float parameter file from a Kaldi matrix, as `copy-feats-to-htk`
    /// writes it (its defaults: `sample_period` 100000, kind USER).
    pub fn from_matrix(
        m: &crate::kaldi::matrix::Matrix<f32>,
        kind: ParmKind,
        samp_period: i32,
    ) -> Self {
        Self::from_f32(kind, samp_period, m.cols(), m.data().to_vec())
    }

    /// Compress float frames as HParm's `CalcCompress`/`CompressPBlock` do
    /// (`SAVECOMPRESSED = T`). Errors if a value falls outside the short range,
    /// as HTK does.
    pub fn compressed(&self) -> Result<Self> {
        let ParamData::Float(v) = &self.data else {
            return Ok(self.clone());
        };
        let nc = self.ncols;
        let nrows = self.n_frames();
        let mut min = vec![0f32; nc];
        let mut max = vec![0f32; nc];
        if nrows > 0 {
            min.copy_from_slice(&v[..nc]);
            max.copy_from_slice(&v[..nc]);
        }
        for row in v.chunks_exact(nc.max(1)) {
            for (j, &x) in row.iter().enumerate() {
                if x > max[j] {
                    max[j] = x;
                }
                if x < min[j] {
                    min[j] = x;
                }
            }
        }
        let mut a = vec![0f32; nc];
        let mut b = vec![0f32; nc];
        for j in 0..nc {
            let range = max[j] - min[j];
            if range == 0.0 {
                a[j] = 1.0;
                b[j] = max[j];
            } else {
                a[j] = (2.0 * 32767.0 / range as f64) as f32;
                b[j] = ((max[j] + min[j]) as f64 * 32767.0 / range as f64) as f32;
            }
        }
        let mut values = Vec::with_capacity(v.len());
        for (i, &x0) in v.iter().enumerate() {
            let j = i % nc;
            let x = x0 * a[j] - b[j];
            let xd = x as f64;
            let ix = (if xd < 0.0 { xd - 0.5 } else { xd + 0.5 }) as i64;
            if !(-32767..=32767).contains(&ix) {
                return Err(Error::format(
                    Pos::Unknown,
                    format!(
                        "compression: short out of range {ix} (frame {}, column {j})",
                        i / nc
                    ),
                ));
            }
            values.push(ix as i16);
        }
        Ok(ParamFile {
            kind: self.kind.with(HASCOMPX),
            samp_period: self.samp_period,
            ncols: nc,
            data: ParamData::Compressed { a, b, values },
        })
    }

    /// The file's bytes, in the given order; with `_K` in `kind` the checksum is
    /// computed and appended.
    pub fn to_bytes(&self, order: ByteOrder) -> Vec<u8> {
        let mut out = Vec::new();
        let n_samples = self.n_frames()
            + if matches!(self.data, ParamData::Compressed { .. }) {
                4
            } else {
                0
            };
        let put16 = |out: &mut Vec<u8>, v: u16| match order {
            ByteOrder::Big => out.extend_from_slice(&v.to_be_bytes()),
            ByteOrder::Little => out.extend_from_slice(&v.to_le_bytes()),
        };
        let put32 = |out: &mut Vec<u8>, v: u32| match order {
            ByteOrder::Big => out.extend_from_slice(&v.to_be_bytes()),
            ByteOrder::Little => out.extend_from_slice(&v.to_le_bytes()),
        };
        put32(&mut out, n_samples as u32);
        put32(&mut out, self.samp_period as u32);
        put16(&mut out, self.samp_size() as u16);
        put16(&mut out, self.kind.0);
        let start = out.len();
        match &self.data {
            ParamData::Float(v) => v.iter().for_each(|x| put32(&mut out, x.to_bits())),
            ParamData::Short(v) => v.iter().for_each(|&x| put16(&mut out, x as u16)),
            ParamData::Compressed { a, b, values } => {
                a.iter().chain(b).for_each(|x| put32(&mut out, x.to_bits()));
                values.iter().for_each(|&x| put16(&mut out, x as u16));
            }
        }
        if self.kind.has(HASCRCC) {
            let words = out[start..].chunks_exact(2).map(|c| match order {
                ByteOrder::Big => u16::from_be_bytes([c[0], c[1]]),
                ByteOrder::Little => u16::from_le_bytes([c[0], c[1]]),
            });
            let crc = htk_crc(words);
            put16(&mut out, crc);
        }
        out
    }

    /// Write atomically (temp file in the same folder, then rename).
    pub fn write(&self, path: impl AsRef<Path>, order: ByteOrder) -> Result<()> {
        super::atomic_write(path.as_ref(), &self.to_bytes(order))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ParamFile {
        ParamFile::from_f32(
            ParmKind::new(MFCC, HASZEROC),
            100000,
            3,
            vec![1.0, -2.5, 3.25, 0.5, 7.0, -1.0, 2.0, 2.0, 2.0],
        )
    }

    #[test]
    fn crc_variant_round_trips_and_detects_corruption() {
        let mut f = sample();
        f.kind = f.kind.with(HASCRCC);
        let mut bytes = f.to_bytes(ByteOrder::Big);
        assert_eq!(ParamFile::parse(&bytes).unwrap(), f);
        bytes[14] ^= 1;
        let e = ParamFile::parse(&bytes).unwrap_err().to_string();
        assert!(e.contains("CRC error") && e.contains("at byte 48"), "{e}");
    }

    #[test]
    fn truncated_file_names_offset() {
        let bytes = sample().to_bytes(ByteOrder::Big);
        let e = ParamFile::parse(&bytes[..30]).unwrap_err().to_string();
        assert!(e.contains("truncated") && e.contains("at byte 12"), "{e}");
    }

    #[test]
    fn kaldi_matrix_both_ways() {
        let f = sample();
        let m = f.to_matrix();
        assert_eq!((m.rows(), m.cols()), (3, 3));
        assert_eq!(ParamFile::from_matrix(&m, f.kind, f.samp_period), f);
    }

    #[test]
    fn little_endian_is_detected() {
        let f = sample();
        let bytes = f.to_bytes(ByteOrder::Little);
        assert_eq!(ParamFile::detect_order(&bytes), ByteOrder::Little);
        assert_eq!(ParamFile::parse(&bytes).unwrap(), f);
    }

    #[test]
    fn compression_decodes_close_to_input() {
        let f = sample();
        let c = f.compressed().unwrap();
        let back = ParamFile::parse(&c.to_bytes(ByteOrder::Big)).unwrap();
        for (x, y) in f.to_f32().iter().zip(back.to_f32()) {
            assert!((x - y).abs() < 1e-3, "{x} vs {y}");
        }
    }
}
