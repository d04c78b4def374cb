//! Kaldi tables (`util/kaldi-table.h`): collections of objects indexed by
//! string keys, read and written through rspecifiers and wspecifiers.
//!
//! - [`SequentialTableReader`]: every entry of an archive (`ark:`) or every
//!   line of a script (`scp:`), in order;
//! - [`RandomAccessTableReader`]: look-up by key (scp: an index of the lines;
//!   archive: read ahead, keeping what was read, stopping early when the keys
//!   are known to be sorted (`s`));
//! - [`TableWriter`]: archive (`ark:`), archive plus script with byte offsets
//!   (`ark,scp:`), or one file per key as an existing script says (`scp:`).
//!
//! An archive entry is `key` + one space (a tab is consumed too, a newline is
//! left for the object) + the object as its [`Holder`] reads it. Objects are
//! parsed straight from the memory-mapped file (or a window of a stream), and
//! [`SequentialTableReader::next_with`] lets callers look at an entry's bytes
//! without converting them (e.g. [`super::matrix::RawMatrix`]). Errors name
//! the file, the key and the byte offset.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::marker::PhantomData;
use std::sync::Arc;

use super::files::{map_file, printable_rx, read_rxfilename, ByteSource, InputData, Output};
use super::holder::Holder;
use super::io::{Reader, Writer};
use super::matrix::{write_matrix, FloatKind, Matrix, RawMatrix, Real, SharedMatrix};
use super::script::{parse_script, ScriptEntry};
use super::specifier::{RSpecifier, RxFilename, TableKind, WSpecifier, WTarget};
use crate::error::{Error, Pos, Result};

fn spec_error(e: super::specifier::SpecifierError) -> Error {
    Error::format(Pos::Unknown, e.0)
}

/// A key must be a non-empty run of printable, non-whitespace characters.
pub fn is_valid_key(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|c| c.is_ascii_graphic() || c >= 0x80)
}

/// Bytes of an entry's start that [`ArchiveReader::next_mapped_matrix`]
/// reads: a key, a space, `\0B`, `FM `, two sizes.
const HEAD_BYTES: usize = 256;

/// Reads the entries of an archive one by one.
pub struct ArchiveReader {
    src: ByteSource,
    permissive: bool,
    done: bool,
}

impl ArchiveReader {
    pub fn open(rxfilename: &str, permissive: bool) -> Result<Self> {
        Ok(ArchiveReader {
            src: ByteSource::open(rxfilename)?,
            permissive,
            done: false,
        })
    }

    pub fn from_source(src: ByteSource, permissive: bool) -> Self {
        ArchiveReader {
            src,
            permissive,
            done: false,
        }
    }

    pub fn name(&self) -> &str {
        self.src.name()
    }

    /// Parse the next entry with `f`, given the key and a reader at the start
    /// of the object. `None` at the end of the archive.
    pub fn next_with<T>(
        &mut self,
        mut f: impl FnMut(&str, &mut Reader<'_>) -> Result<T>,
    ) -> Result<Option<(String, T)>> {
        if self.done {
            return Ok(None);
        }
        let res = self.next_inner(&mut f);
        match res {
            Ok(Some(x)) => Ok(Some(x)),
            Ok(None) => {
                self.done = true;
                self.src.finish()?;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                if self.permissive {
                    eprintln!(
                        "WARNING (amtool) Error reading archive {} (ignored, permissive mode): {e}",
                        self.src.name()
                    );
                    let _ = self.src.finish();
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// The next entry when it is a binary float matrix (`FM`) of an input
    /// held whole (a mapped file): its key and the matrix as a part of the
    /// input. Its key and header are read with [`InputData::read_at`], so
    /// the map's pages are first touched by whoever copies the frames, not
    /// by the thread reading the archive, one entry after another. `None`
    /// for anything else (the end, another object, a key longer than
    /// [`HEAD_BYTES`], text, something that does not parse): `next_with`
    /// then reads it as usual, with its errors.
    pub fn next_mapped_matrix(&mut self) -> Option<(String, SharedMatrix)> {
        if self.done {
            return None;
        }
        let whole = self.src.shared_input()?;
        let (_, start, _) = self.src.window();
        let start = usize::try_from(start).ok()?;
        let mut head = [0u8; HEAD_BYTES];
        let n = whole.read_at(start, &mut head);
        let mut r = Reader::new(&head[..n], false);
        r.skip_ws();
        let key = std::str::from_utf8(r.read_word()).ok()?.to_string();
        if key.is_empty() || !matches!(r.peek_byte(), Some(b' ' | b'\t')) {
            return None;
        }
        r.set_pos(r.pos() + 1);
        if !r.read_kaldi_header().ok()? {
            return None;
        }
        let (kind, rows, cols) = RawMatrix::read_header(&mut r).ok()?;
        if kind != FloatKind::F32 {
            return None;
        }
        let m = SharedMatrix::at(&whole, start + r.pos(), rows, cols, kind)?;
        self.src.consume(r.pos() + rows * cols * kind.size());
        Some((key, m))
    }

    fn next_inner<T>(
        &mut self,
        f: &mut impl FnMut(&str, &mut Reader<'_>) -> Result<T>,
    ) -> Result<Option<(String, T)>> {
        loop {
            let (win, base, complete) = self.src.window();
            let mut r = Reader::with_base(win, false, base);
            r.skip_ws();
            if r.pos() == win.len() {
                if complete {
                    return Ok(None);
                }
                self.src.fill_more()?;
                continue;
            }
            let key_at = r.pos();
            let key_bytes = r.read_word();
            let key =
                match std::str::from_utf8(key_bytes) {
                    Ok(k) => k.to_string(),
                    Err(_) => return Err(r
                        .error_at(
                            key_at,
                            "archive key is not valid UTF-8 (corrupt archive or not an archive)",
                        )
                        .in_file(self.src.name())),
                };
            match r.peek_byte() {
                Some(b' ' | b'\t') => r.set_pos(r.pos() + 1),
                Some(b'\n') => {}
                None if !complete => {
                    self.src.fill_more()?;
                    continue;
                }
                other => {
                    let found = other
                        .map(|c| format!("{:?}", c as char))
                        .unwrap_or_else(|| "end of data".into());
                    return Err(r
                        .error(format!(
                            "invalid archive: expected space after key '{}', found {found}",
                            shorten(&key)
                        ))
                        .in_file(self.src.name()));
                }
            }
            match f(&key, &mut r) {
                Ok(v) => {
                    let used = r.pos();
                    self.src.consume(used);
                    return Ok(Some((key, v)));
                }
                Err(e) => {
                    if !complete && self.src.fill_more()? {
                        continue;
                    }
                    return Err(e.with_key(&key).in_file(self.src.name()));
                }
            }
        }
    }
}

fn shorten(s: &str) -> String {
    if s.len() > 40 {
        format!(
            "{}...",
            &s[..s.char_indices().nth(37).map(|(i, _)| i).unwrap_or(s.len())]
        )
    } else {
        s.to_string()
    }
}

/// Loads objects named by scp rxfilenames, keeping the last file mapped
/// (scp lines usually walk through one archive).
#[derive(Default)]
pub struct ObjectLoader {
    cache: Option<(String, Arc<InputData>)>,
}

impl ObjectLoader {
    /// Parse the object `rx` names with `f` (reader at the object start).
    pub fn load_with<T>(
        &mut self,
        rx: &str,
        f: impl FnOnce(&mut Reader<'_>) -> Result<T>,
    ) -> Result<T> {
        let class =
            RxFilename::classify(rx).map_err(|e| Error::format(Pos::Unknown, e.0).in_file(rx))?;
        let (data, offset, name) = match &class {
            RxFilename::File(p) | RxFilename::Offset(p, _) => {
                let data = match &self.cache {
                    Some((n, d)) if n == p => d.clone(),
                    _ => {
                        let d = map_file(p)?;
                        self.cache = Some((p.clone(), d.clone()));
                        d
                    }
                };
                let off = if let RxFilename::Offset(_, o) = class {
                    o
                } else {
                    0
                };
                (data, off, p.clone())
            }
            _ => (read_rxfilename(&class)?, 0, printable_rx(rx)),
        };
        if offset >= data.len() as u64 && !(offset == 0 && data.is_empty()) {
            return Err(Error::format(
                Pos::Byte(offset),
                format!(
                    "scp offset {offset} is past the end of the file ({} bytes)",
                    data.len()
                ),
            )
            .in_file(&name));
        }
        let mut r = Reader::with_base(&data[offset as usize..], false, offset);
        f(&mut r).map_err(|e| e.in_file(&name))
    }
}

enum SeqImpl {
    Archive(ArchiveReader),
    Script {
        name: String,
        entries: std::vec::IntoIter<ScriptEntry>,
        loader: ObjectLoader,
        permissive: bool,
    },
}

/// Reads every entry of a table in order.
pub struct SequentialTableReader<H> {
    inner: SeqImpl,
    _h: PhantomData<fn() -> H>,
}

impl<H: Holder> SequentialTableReader<H> {
    /// The whole input an archive is read from, when it is held in memory
    /// (a memory-mapped file): objects parsed from it can be kept as parts
    /// of it ([`SharedMatrix`](super::matrix::SharedMatrix)) instead of
    /// copied. `None` for scripts.
    pub fn shared_input(&self) -> Option<Arc<InputData>> {
        match &self.inner {
            SeqImpl::Archive(a) => a.src.shared_input(),
            SeqImpl::Script { .. } => None,
        }
    }

    pub fn open(rspecifier: &str) -> Result<Self> {
        let spec = RSpecifier::parse(rspecifier).map_err(spec_error)?;
        let inner = match spec.kind {
            TableKind::Archive => {
                SeqImpl::Archive(ArchiveReader::open(&spec.rxfilename, spec.opts.permissive)?)
            }
            TableKind::Script => {
                let name = printable_rx(&spec.rxfilename);
                let class = RxFilename::classify(&spec.rxfilename)
                    .map_err(|e| spec_error(e).in_file(&name))?;
                let data = read_rxfilename(&class)?;
                let entries = parse_script(&data, &name)?;
                SeqImpl::Script {
                    name,
                    entries: entries.into_iter(),
                    loader: ObjectLoader::default(),
                    permissive: spec.opts.permissive,
                }
            }
        };
        Ok(SequentialTableReader {
            inner,
            _h: PhantomData,
        })
    }

    /// [`ArchiveReader::next_mapped_matrix`] of an archive; `None` for a
    /// script.
    pub fn next_mapped_matrix(&mut self) -> Option<(String, SharedMatrix)> {
        match &mut self.inner {
            SeqImpl::Archive(a) => a.next_mapped_matrix(),
            SeqImpl::Script { .. } => None,
        }
    }

    /// Parse the next entry with `f` instead of `H` (for raw, zero-copy access).
    /// Scp ranges are not applied here (the object is whole).
    pub fn next_with<T>(
        &mut self,
        mut f: impl FnMut(&str, &mut Reader<'_>) -> Result<T>,
    ) -> Result<Option<(String, T)>> {
        match &mut self.inner {
            SeqImpl::Archive(a) => a.next_with(f),
            SeqImpl::Script {
                entries,
                loader,
                permissive,
                name,
            } => loop {
                let Some(e) = entries.next() else {
                    return Ok(None);
                };
                match loader.load_with(&e.rxfilename, |r| f(&e.key, r)) {
                    Ok(v) => return Ok(Some((e.key, v))),
                    Err(err) if *permissive => {
                        eprintln!(
                            "WARNING (amtool) {name}: skipping key {} (permissive mode): {err}",
                            e.key
                        );
                    }
                    Err(err) => return Err(err.with_key(&e.key)),
                }
            },
        }
    }

    /// The next entry read through `H` (scp ranges applied).
    pub fn next_entry(&mut self) -> Result<Option<(String, H)>> {
        match &mut self.inner {
            SeqImpl::Archive(a) => a.next_with(|_, r| H::read_holder(r)),
            SeqImpl::Script {
                entries,
                loader,
                permissive,
                name,
            } => loop {
                let Some(e) = entries.next() else {
                    return Ok(None);
                };
                let res = loader
                    .load_with(&e.rxfilename, |r| H::read_holder(r))
                    .and_then(|h| match &e.range {
                        None => Ok(h),
                        Some(range) => h
                            .extract_range(range)
                            .map_err(|m| Error::format(Pos::Unknown, m).in_file(&e.rxfilename)),
                    });
                match res {
                    Ok(v) => return Ok(Some((e.key, v))),
                    Err(err) if *permissive => {
                        eprintln!(
                            "WARNING (amtool) {name}: skipping key {} (permissive mode): {err}",
                            e.key
                        );
                    }
                    Err(err) => return Err(err.with_key(&e.key)),
                }
            },
        }
    }
}

impl<H: Holder> Iterator for SequentialTableReader<H> {
    type Item = Result<(String, H)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }
}

enum RandomImpl<H> {
    Script {
        index: HashMap<String, ScriptEntry>,
        loader: ObjectLoader,
        permissive: bool,
        last: Option<(String, H)>,
    },
    Archive {
        reader: SequentialTableReader<H>,
        seen: HashMap<String, H>,
        last_key: Option<String>,
        sorted: bool,
        /// With `s,cs`: the keys of `seen` in table order, so that those
        /// before a key asked for can be let go (keys come in order).
        release: Option<VecDeque<String>>,
        finished: bool,
    },
}

/// Kaldi's sorted archive read with `s,cs` (keys asked for in order): the
/// objects before `key` are no longer wanted, so they are dropped (memory
/// stays one object deep, as in Kaldi, instead of the whole table).
fn release_before<H>(key: &str, order: &mut VecDeque<String>, seen: &mut HashMap<String, H>) {
    while order.front().is_some_and(|k| k.as_str() < key) {
        if let Some(k) = order.pop_front() {
            seen.remove(&k);
        }
    }
}

/// Look-up of table objects by key.
pub struct RandomAccessTableReader<H> {
    inner: RandomImpl<H>,
    name: String,
}

impl<H: Holder> RandomAccessTableReader<H> {
    pub fn open(rspecifier: &str) -> Result<Self> {
        let spec = RSpecifier::parse(rspecifier).map_err(spec_error)?;
        let name = printable_rx(&spec.rxfilename);
        let inner = match spec.kind {
            TableKind::Script => {
                let class = RxFilename::classify(&spec.rxfilename)
                    .map_err(|e| spec_error(e).in_file(&name))?;
                let data = read_rxfilename(&class)?;
                let mut index = HashMap::new();
                for e in parse_script(&data, &name)? {
                    index.insert(e.key.clone(), e);
                }
                RandomImpl::Script {
                    index,
                    loader: ObjectLoader::default(),
                    permissive: spec.opts.permissive,
                    last: None,
                }
            }
            TableKind::Archive => RandomImpl::Archive {
                reader: SequentialTableReader::open(rspecifier)?,
                seen: HashMap::new(),
                last_key: None,
                sorted: spec.opts.sorted,
                release: (spec.opts.sorted && spec.opts.called_sorted).then(VecDeque::new),
                finished: false,
            },
        };
        Ok(RandomAccessTableReader { inner, name })
    }

    /// The object for `key`, or `None` when the table does not have it.
    pub fn get(&mut self, key: &str) -> Result<Option<&H>> {
        match &mut self.inner {
            RandomImpl::Script {
                index,
                loader,
                permissive,
                last,
            } => {
                let Some(e) = index.get(key) else {
                    return Ok(None);
                };
                if last.as_ref().map(|(k, _)| k.as_str()) != Some(key) {
                    let res = loader
                        .load_with(&e.rxfilename, |r| H::read_holder(r))
                        .and_then(|h| match &e.range {
                            None => Ok(h),
                            Some(range) => h
                                .extract_range(range)
                                .map_err(|m| Error::format(Pos::Unknown, m).in_file(&e.rxfilename)),
                        });
                    match res {
                        Ok(h) => *last = Some((key.to_string(), h)),
                        Err(_) if *permissive => return Ok(None),
                        Err(err) => return Err(err.with_key(key)),
                    }
                }
                Ok(last.as_ref().map(|(_, h)| h))
            }
            RandomImpl::Archive {
                reader,
                seen,
                last_key,
                sorted,
                release,
                finished,
            } => {
                if let Some(order) = release {
                    release_before(key, order, seen);
                }
                while !seen.contains_key(key) && !*finished {
                    if *sorted {
                        if let Some(k) = last_key.as_deref() {
                            if k > key {
                                break;
                            }
                        }
                    }
                    match reader.next_entry()? {
                        Some((k, h)) => {
                            *last_key = Some(k.clone());
                            if let Some(order) = release {
                                order.push_back(k.clone());
                            }
                            seen.entry(k).or_insert(h);
                        }
                        None => *finished = true,
                    }
                }
                Ok(seen.get(key))
            }
        }
    }

    pub fn has_key(&mut self, key: &str) -> Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// The object for `key`; a missing key is an error naming the table.
    pub fn value(&mut self, key: &str) -> Result<&H> {
        let name = self.name.clone();
        self.get(key)?.ok_or_else(|| {
            Error::format(Pos::Unknown, format!("no entry for key '{key}'")).in_file(&name)
        })
    }
}

enum WriterImpl {
    Archive {
        out: Output,
        scp: Option<(Output, String)>,
    },
    Script {
        index: HashMap<String, String>,
        permissive: bool,
    },
}

/// Writes objects to a table.
pub struct TableWriter<H> {
    inner: WriterImpl,
    binary: bool,
    flush: bool,
    _h: PhantomData<fn(&H)>,
}

impl<T: Real> TableWriter<Matrix<T>> {
    /// A matrix entry from rows held elsewhere: the same bytes as
    /// [`TableWriter::write`] of a [`Matrix`] holding `data` (`rows × cols`,
    /// row-major), without making one.
    pub fn write_rows(&mut self, key: &str, rows: usize, cols: usize, data: &[T]) -> Result<()> {
        self.write_entry(key, &mut |w, binary| {
            let mut kw = Writer::new(w, binary);
            kw.write_binary_marker()?;
            write_matrix(&mut kw, rows, cols, data)
        })
    }
}

impl<H: Holder> TableWriter<H> {
    pub fn open(wspecifier: &str) -> Result<Self> {
        let spec = WSpecifier::parse(wspecifier).map_err(spec_error)?;
        let inner = match &spec.target {
            WTarget::Archive(a) => WriterImpl::Archive {
                out: Output::open(a)?,
                scp: None,
            },
            WTarget::Both { archive, script } => {
                if !matches!(
                    super::specifier::WxFilename::classify(archive),
                    Ok(super::specifier::WxFilename::File(_))
                ) {
                    return Err(Error::format(
                        Pos::Unknown,
                        format!("invalid wspecifier '{wspecifier}': ark,scp needs the archive to be a regular file"),
                    ));
                }
                WriterImpl::Archive {
                    out: Output::open(archive)?,
                    scp: Some((Output::open(script)?, archive.clone())),
                }
            }
            WTarget::Script(s) => {
                let name = printable_rx(s);
                let class = RxFilename::classify(s).map_err(|e| spec_error(e).in_file(&name))?;
                let data = read_rxfilename(&class)?;
                let index = parse_script(&data, &name)?
                    .into_iter()
                    .map(|e| (e.key, e.rxfilename))
                    .collect();
                WriterImpl::Script {
                    index,
                    permissive: spec.opts.permissive,
                }
            }
        };
        Ok(TableWriter {
            inner,
            binary: spec.opts.binary,
            flush: spec.opts.flush.unwrap_or(false),
            _h: PhantomData,
        })
    }

    pub fn binary(&self) -> bool {
        self.binary
    }

    pub fn write(&mut self, key: &str, obj: &H) -> Result<()> {
        self.write_entry(key, &mut |w, binary| obj.write_holder(w, binary))
    }

    /// Writes one entry whose object bytes (binary marker included) `object`
    /// produces, in the table's binary or text form.
    fn write_entry(
        &mut self,
        key: &str,
        object: &mut dyn FnMut(&mut dyn Write, bool) -> io::Result<()>,
    ) -> Result<()> {
        if !is_valid_key(key) {
            let path = match &self.inner {
                WriterImpl::Archive { out, .. } => out.name().to_string(),
                WriterImpl::Script { .. } => "table".to_string(),
            };
            return Err(Error::Format {
                path,
                key: None,
                pos: Pos::Unknown,
                msg: format!(
                    "cannot write key \"{}\": a table key is one or more printable \
                     characters, no whitespace or control characters (from the input's keys)",
                    key.escape_debug()
                ),
            });
        }
        match &mut self.inner {
            WriterImpl::Archive { out, scp } => {
                let w = out.writer();
                let res = w.write_all(key.as_bytes()).and_then(|_| w.write_all(b" "));
                res.map_err(|e| out.err(e))?;
                let offset = out.position();
                let res = object(out.writer(), self.binary);
                res.map_err(|e| out.err(e).with_key(key))?;
                if let Some((s, ark)) = scp {
                    let line = format!("{key} {ark}:{offset}\n");
                    let res = s.writer().write_all(line.as_bytes());
                    res.map_err(|e| s.err(e))?;
                    if self.flush {
                        s.flush()?;
                    }
                }
                if self.flush {
                    out.flush()?;
                }
                Ok(())
            }
            WriterImpl::Script { index, permissive } => {
                let Some(wx) = index.get(key) else {
                    if *permissive {
                        return Ok(());
                    }
                    return Err(Error::format(
                        Pos::Unknown,
                        format!("key '{key}' is not in the output script"),
                    ));
                };
                let mut out = Output::open(wx)?;
                let res = object(out.writer(), self.binary);
                res.map_err(|e| out.err(e).with_key(key))?;
                out.close()
            }
        }
    }

    /// Finish writing: flush, rename files into place, wait for pipes.
    pub fn close(self) -> Result<()> {
        match self.inner {
            WriterImpl::Archive { out, scp } => {
                out.close()?;
                if let Some((s, _)) = scp {
                    s.close()?;
                }
                Ok(())
            }
            WriterImpl::Script { .. } => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kaldi::holder::{Basic, Int32Vector};
    use crate::kaldi::matrix::Matrix;

    fn mat(r: usize, c: usize, v: f32) -> Matrix<f32> {
        Matrix::from_vec(r, c, vec![v; r * c]).unwrap()
    }

    #[test]
    fn ark_scp_roundtrip_and_random_access() {
        let dir = tempfile::tempdir().unwrap();
        let ark = dir.path().join("a.ark");
        let scp = dir.path().join("a.scp");
        let ws = format!("ark,scp:{},{}", ark.display(), scp.display());
        let mut w = TableWriter::<Matrix<f32>>::open(&ws).unwrap();
        w.write("u1", &mat(2, 3, 1.0)).unwrap();
        w.write("u2", &mat(1, 3, 2.0)).unwrap();
        assert!(w.write("bad key", &mat(1, 1, 0.0)).is_err());
        w.close().unwrap();
        let scp_text = std::fs::read_to_string(&scp).unwrap();
        assert_eq!(scp_text, format!("u1 {0}:3\nu2 {0}:45\n", ark.display()));
        for rs in [
            format!("ark:{}", ark.display()),
            format!("scp:{}", scp.display()),
        ] {
            let all: Vec<_> = SequentialTableReader::<Matrix<f32>>::open(&rs)
                .unwrap()
                .collect::<Result<_>>()
                .unwrap();
            assert_eq!(all.len(), 2);
            assert_eq!(all[1].0, "u2");
            assert_eq!(all[1].1, mat(1, 3, 2.0));
            let mut ra = RandomAccessTableReader::<Matrix<f32>>::open(&rs).unwrap();
            assert_eq!(ra.value("u2").unwrap(), &mat(1, 3, 2.0));
            assert_eq!(ra.value("u1").unwrap(), &mat(2, 3, 1.0));
            assert!(!ra.has_key("u3").unwrap());
            assert!(ra
                .value("u3")
                .unwrap_err()
                .to_string()
                .contains("no entry for key 'u3'"));
        }
        // Ranges through scp.
        let rscp = dir.path().join("r.scp");
        std::fs::write(&rscp, format!("x {}:3[1:1,0:1]\n", ark.display())).unwrap();
        let all: Vec<_> =
            SequentialTableReader::<Matrix<f32>>::open(&format!("scp:{}", rscp.display()))
                .unwrap()
                .collect::<Result<_>>()
                .unwrap();
        assert_eq!(all[0].1, mat(1, 2, 1.0));
    }

    /// `ark,s,cs:` keys asked for in order: the same objects, repeated keys
    /// too, and the ones before a key asked for are dropped.
    #[test]
    fn sorted_called_sorted_archive_lets_go_of_earlier_objects() {
        let dir = tempfile::tempdir().unwrap();
        let ark = dir.path().join("s.ark");
        let mut w = TableWriter::<Matrix<f32>>::open(&format!("ark:{}", ark.display())).unwrap();
        for (i, k) in ["a", "b", "c", "d"].iter().enumerate() {
            w.write(k, &mat(1, 2, i as f32)).unwrap();
        }
        w.close().unwrap();
        let mut ra =
            RandomAccessTableReader::<Matrix<f32>>::open(&format!("ark,s,cs:{}", ark.display()))
                .unwrap();
        assert_eq!(ra.value("b").unwrap(), &mat(1, 2, 1.0));
        assert_eq!(ra.value("b").unwrap(), &mat(1, 2, 1.0));
        assert!(!ra.has_key("bb").unwrap());
        assert_eq!(ra.value("d").unwrap(), &mat(1, 2, 3.0));
        let RandomImpl::Archive { seen, .. } = &ra.inner else {
            panic!("an archive")
        };
        assert_eq!(seen.keys().collect::<Vec<_>>(), vec!["d"]);
    }

    /// Matrices of a mapped archive kept as parts of the map: the same
    /// values as decoded, usable after the reader is gone; scripts offer no
    /// shared input.
    #[test]
    fn shared_matrices_of_a_mapped_archive() {
        use crate::kaldi::matrix::{RawMatrix, SharedMatrix};
        let dir = tempfile::tempdir().unwrap();
        let ark = dir.path().join("a.ark");
        let scp = dir.path().join("a.scp");
        let ws = format!("ark,scp:{},{}", ark.display(), scp.display());
        let mut w = TableWriter::<Matrix<f32>>::open(&ws).unwrap();
        let m1 = Matrix::from_vec(2, 3, vec![1.0, -2.0, 3.5, 4.0, 5.0, 6.25]).unwrap();
        w.write("u1", &m1).unwrap();
        w.write("u2", &mat(1, 3, 2.0)).unwrap();
        w.close().unwrap();
        let mut r =
            SequentialTableReader::<Matrix<f32>>::open(&format!("ark:{}", ark.display())).unwrap();
        let whole = r.shared_input().expect("a mapped archive");
        let mut kept = Vec::new();
        while let Some((k, m)) = r
            .next_with(|_, rd| {
                assert!(rd.read_kaldi_header()?, "binary");
                let raw = RawMatrix::read(rd)?;
                Ok(SharedMatrix::new(&whole, &raw).expect("inside the map"))
            })
            .unwrap()
        {
            kept.push((k, m));
        }
        drop(r);
        assert_eq!(kept.len(), 2);
        assert_eq!((kept[0].1.rows(), kept[0].1.cols()), (2, 3));
        assert_eq!(kept[0].1.raw().to_matrix::<f32>().unwrap(), m1);
        assert_eq!(kept[1].1.raw().to_matrix::<f32>().unwrap(), mat(1, 3, 2.0));
        // Bytes from elsewhere are not a part of the input.
        let other = [0u8; 12];
        let raw = RawMatrix {
            rows: 1,
            cols: 3,
            kind: crate::kaldi::matrix::FloatKind::F32,
            data: &other,
        };
        assert!(SharedMatrix::new(&whole, &raw).is_none());
        let s =
            SequentialTableReader::<Matrix<f32>>::open(&format!("scp:{}", scp.display())).unwrap();
        assert!(s.shared_input().is_none());
    }

    #[test]
    fn text_archive_and_pipes() {
        let dir = tempfile::tempdir().unwrap();
        let gz = dir.path().join("ali.gz");
        let mut w =
            TableWriter::<Int32Vector>::open(&format!("ark,t:| gzip -c > {}", gz.display()))
                .unwrap();
        w.write("a", &Int32Vector(vec![1, 2, 3])).unwrap();
        w.write("b", &Int32Vector(vec![])).unwrap();
        w.close().unwrap();
        let got: Vec<_> = SequentialTableReader::<Int32Vector>::open(&format!(
            "ark:gunzip -c {} |",
            gz.display()
        ))
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
        assert_eq!(
            got,
            vec![
                ("a".to_string(), Int32Vector(vec![1, 2, 3])),
                ("b".to_string(), Int32Vector(vec![]))
            ]
        );
        // A failing input pipe is an error even when its output parsed.
        let mut r =
            SequentialTableReader::<Basic<f32>>::open("ark:echo 'a 1.5'; exit 1 |").unwrap();
        assert_eq!(r.next_entry().unwrap().unwrap().1, Basic(1.5));
        let e = r.next_entry().unwrap_err().to_string();
        assert!(e.contains("failed"), "{e}");
    }

    #[test]
    fn archive_errors_name_file_key_offset() {
        let dir = tempfile::tempdir().unwrap();
        let ark = dir.path().join("t.ark");
        let mut w = TableWriter::<Matrix<f32>>::open(&format!("ark:{}", ark.display())).unwrap();
        w.write("u1", &mat(2, 2, 1.0)).unwrap();
        w.write("u2", &mat(2, 2, 1.0)).unwrap();
        w.close().unwrap();
        let mut b = std::fs::read(&ark).unwrap();
        b.truncate(b.len() - 3);
        std::fs::write(&ark, &b).unwrap();
        let rs = format!("ark:{}", ark.display());
        let mut r = SequentialTableReader::<Matrix<f32>>::open(&rs).unwrap();
        assert!(r.next_entry().unwrap().is_some());
        let e = r.next_entry().unwrap_err().to_string();
        assert!(
            e.contains("t.ark")
                && e.contains("'u2'")
                && e.contains("at byte 52")
                && e.contains("truncated"),
            "{e}"
        );
        // Permissive: the corrupt tail is ignored.
        let n = SequentialTableReader::<Matrix<f32>>::open(&format!("ark,p:{}", ark.display()))
            .unwrap()
            .count();
        assert_eq!(n, 1);
    }

    /// Entries read the fast way where they can be (binary FM, a short
    /// key), the usual way otherwise, are the entries the usual reader
    /// gives, in order; a truncated last matrix gives the usual error.
    #[test]
    fn mapped_matrices_read_by_their_headers_are_the_entries() {
        let dir = tempfile::tempdir().unwrap();
        let part = |name: &str, spec: &str, write: &dyn Fn(&str)| {
            let p = dir.path().join(name);
            write(&format!("{spec}:{}", p.display()));
            std::fs::read(p).unwrap()
        };
        let f32s = |ws: &str| {
            let mut w = TableWriter::<Matrix<f32>>::open(ws).unwrap();
            w.write("a1", &mat(3, 2, 1.5)).unwrap();
            w.write(&"k".repeat(300), &mat(1, 2, 2.5)).unwrap();
            w.write("a3", &mat(0, 0, 0.0)).unwrap();
            w.close().unwrap();
        };
        let f64s = |ws: &str| {
            let mut w = TableWriter::<Matrix<f64>>::open(ws).unwrap();
            w.write("d1", &Matrix::from_vec(1, 2, vec![0.25, -1.0]).unwrap())
                .unwrap();
            w.close().unwrap();
        };
        let mut bytes = part("a.ark", "ark", &f32s);
        bytes.extend(part("t.ark", "ark,t", &f32s));
        bytes.extend(part("d.ark", "ark", &f64s));
        bytes.extend(part("b.ark", "ark", &f32s));
        let ark = dir.path().join("all.ark");
        std::fs::write(&ark, &bytes).unwrap();
        let rs = format!("ark:{}", ark.display());
        let want: Vec<_> = SequentialTableReader::<Matrix<f32>>::open(&rs)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(want.len(), 10);
        let mut r = SequentialTableReader::<Matrix<f32>>::open(&rs).unwrap();
        let (mut got, mut fast) = (Vec::new(), 0);
        loop {
            if let Some((k, m)) = r.next_mapped_matrix() {
                got.push((k, m.raw().to_matrix::<f32>().unwrap()));
                fast += 1;
            } else if let Some(e) = r.next_entry().unwrap() {
                got.push(e);
            } else {
                break;
            }
        }
        assert_eq!(got, want);
        // a1, a3 of each binary part: not the long key, text or DM.
        assert_eq!(fast, 4);
        // The last matrix cut short: not taken the fast way, the usual error.
        std::fs::write(&ark, &bytes[..bytes.len() - 3]).unwrap();
        let usual = SequentialTableReader::<Matrix<f32>>::open(&rs)
            .unwrap()
            .collect::<Result<Vec<_>>>()
            .unwrap_err()
            .to_string();
        let mut r = SequentialTableReader::<Matrix<f32>>::open(&rs).unwrap();
        let mut err = None;
        for _ in 0..10 {
            if r.next_mapped_matrix().is_none() {
                if let Err(e) = r.next_entry() {
                    err = Some(e.to_string());
                    break;
                }
            }
        }
        let err = err.expect("the truncated entry is an error");
        assert_eq!(err, usual);
        assert!(err.contains("'a3'"), "{err}");
    }
}
