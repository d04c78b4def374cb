//! The contract every Kaldi object type implements: Kaldi's
//! `Read(std::istream&, bool binary)` / `Write(std::ostream&, bool binary)` pair.
//!
//! A type implementing [`KaldiObject`] can be read from and written to a single
//! object file (`\0B` marker + object) and, through the table layer, to
//! archives and scripts. GMMs, transition models and accumulators implement it
//! the same way as matrices.

use std::io::{self, Write};

use super::io::{read_binary_header, Reader, Writer};
use crate::error::Result;

/// A Kaldi object with the `Read`/`Write(binary)` pair.
pub trait KaldiObject: Sized {
    /// Read the object at the reader's position (the binary marker is already
    /// consumed; `r.binary()` says which form follows).
    fn read(r: &mut Reader<'_>) -> Result<Self>;

    /// Write the object (without the binary marker) in `w.binary()` form.
    fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()>;

    /// Kaldi `ExtractObjectRange`: the part of the object an scp range selects
    /// (`[0:9]` rows, `[0:9,2:5]` rows and columns). Only matrices have it.
    fn extract_range(self, range: &str) -> std::result::Result<Self, String> {
        Err(format!(
            "range [{range}] is not supported for this type of object"
        ))
    }
}

/// Read one object from a whole buffer (a file's bytes): binary marker, then the
/// object. Trailing whitespace is allowed; other trailing bytes are an error, as
/// they mean the file holds something else (or more) than expected.
pub fn read_object<T: KaldiObject>(buf: &[u8]) -> Result<T> {
    let (binary, hdr) = read_binary_header(buf)?;
    let mut r = Reader::new(buf, binary);
    r.set_pos(hdr);
    let obj = T::read(&mut r)?;
    Ok(obj)
}

/// Write one object as a whole file: binary marker (when binary), then the object.
pub fn write_object<T: KaldiObject, W: Write>(obj: &T, out: W, binary: bool) -> io::Result<W> {
    let mut w = Writer::new(out, binary);
    w.write_binary_marker()?;
    obj.write(&mut w)?;
    Ok(w.into_inner())
}

/// An object serialised to bytes (marker included), e.g. for tests.
pub fn object_to_bytes<T: KaldiObject>(obj: &T, binary: bool) -> Vec<u8> {
    // Writing to a Vec cannot fail except through invalid tokens, which our own
    // writers never produce.
    write_object(obj, Vec::new(), binary).unwrap_or_default()
}
