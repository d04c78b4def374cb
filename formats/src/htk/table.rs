//! HTK parameter files as objects of Kaldi tables: what Kaldi's
//! `HtkMatrixHolder` reads for `copy-feats --htk-in` (an scp of `key
//! file.mfc` lines, or an archive of HTK-format entries) and writes.
//!
//! The value is the whole [`ParamFile`] (header and frames), so a caller can
//! keep the kind and sample period; [`ParamFile::to_matrix`] gives the frames
//! as Kaldi's feature matrix. Unlike Kaldi, which reads only uncompressed
//! big-endian float files, every kind HTK writes is read (`_C` compression,
//! `_K` checksums, byte-swapped files); writing is HTK's default big-endian
//! order, as Kaldi's `WriteHtk`.

use std::io::{self, Write};

use super::param::{ByteOrder, ParamFile, ParamHeader};
use crate::error::Result;
use crate::kaldi::holder::Holder;
use crate::kaldi::io::Reader;

impl Holder for ParamFile {
    fn read_holder(r: &mut Reader<'_>) -> Result<Self> {
        let rest = r.remaining();
        let order = ParamFile::detect_order(rest);
        let h = ParamHeader::parse(rest, order)
            .map_err(|_| r.error("HTK parameter file: truncated 12-byte header"))?;
        let len = h.file_len().ok_or_else(|| {
            r.error(format!(
                "HTK parameter file: impossible sizes in header (nSamples {}, sampSize {})",
                h.n_samples, h.samp_size
            ))
        })?;
        if len > rest.len() {
            return Err(r.error(format!(
                "HTK parameter file truncated: header says {len} bytes ({} samples of {} bytes), {} present",
                h.n_samples,
                h.samp_size,
                rest.len()
            )));
        }
        let f = ParamFile::parse_with_order(&rest[..len], order)
            .map_err(|e| r.error(format!("HTK parameter file: {e}")))?;
        r.set_pos(r.pos() + len);
        Ok(f)
    }

    fn write_holder<W: Write + ?Sized>(&self, w: &mut W, _binary: bool) -> io::Result<()> {
        // HTK files have no text form; Kaldi's HtkMatrixHolder refuses text
        // mode, we write the binary file in either case.
        w.write_all(&self.to_bytes(ByteOrder::Big))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::htk::parmkind::{ParmKind, HASCRCC, MFCC, USER};

    fn file(kind: ParmKind) -> ParamFile {
        ParamFile::from_f32(kind, 100000, 2, vec![1.0, 2.0, -3.5, 4.25, 0.0, 6.0])
    }

    #[test]
    fn reads_one_file_and_stops_at_its_end() {
        let mut k = file(ParmKind::new(MFCC, 0)).to_bytes(ByteOrder::Big);
        let one = k.len();
        let mut crc = file(ParmKind::new(USER, 0));
        crc.kind = crc.kind.with(HASCRCC);
        k.extend(crc.to_bytes(ByteOrder::Big));
        let mut r = Reader::new(&k, true);
        let a = ParamFile::read_holder(&mut r).unwrap();
        assert_eq!(r.pos(), one);
        assert_eq!(a.to_f32(), file(ParmKind::new(MFCC, 0)).to_f32());
        let b = ParamFile::read_holder(&mut r).unwrap();
        assert_eq!(b.kind, crc.kind);
        assert!(r.remaining().is_empty());
    }

    #[test]
    fn truncated_and_corrupt_files_are_errors() {
        let mut b = file(ParmKind::new(MFCC, 0)).to_bytes(ByteOrder::Big);
        b.pop();
        let e = ParamFile::read_holder(&mut Reader::new(&b, true)).unwrap_err();
        assert!(
            e.to_string().contains("truncated") && e.to_string().contains("at byte 0"),
            "{e}"
        );
        let e = ParamFile::read_holder(&mut Reader::new(&b[..5], true)).unwrap_err();
        assert!(e.to_string().contains("12-byte header"), "{e}");
        let mut crc = file(ParmKind::new(USER, 0));
        crc.kind = crc.kind.with(HASCRCC);
        let mut b = crc.to_bytes(ByteOrder::Big);
        b[13] ^= 1;
        let e = ParamFile::read_holder(&mut Reader::new(&b, true)).unwrap_err();
        assert!(e.to_string().contains("CRC error"), "{e}");
    }

    #[test]
    fn looks_like_needs_exact_length() {
        let b = file(ParmKind::new(MFCC, 0)).to_bytes(ByteOrder::Big);
        assert!(ParamFile::looks_like(&b));
        assert!(!ParamFile::looks_like(&b[..b.len() - 1]));
        assert!(ParamFile::looks_like(
            &file(ParmKind::new(MFCC, 0)).to_bytes(ByteOrder::Little)
        ));
        assert!(!ParamFile::looks_like(
            b"\0BFM \x04\x00\x00\x00\x00\x04\x00\x00\x00\x00"
        ));
    }
}
