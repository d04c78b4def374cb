//! Opening Kaldi's rxfilenames and wxfilenames (`util/kaldi-io.cc`):
//! regular files (memory-mapped for reading; written atomically through a
//! temporary file in the same folder that is renamed on success; devices,
//! FIFOs and `/dev/stdout` written in place, see [`crate::atomic`]), `-`
//! (stdin/stdout), input pipes `cmd |` and output pipes `| cmd` (run with
//! `sh -c`; a non-zero exit status is an error, as Kaldi treats it).
//!
//! Readers get bytes, not `io::Read`: a file is its whole memory map, a stream
//! ([`ByteSource`]) is read into a growing window so the parsers can work on
//! slices and report byte offsets.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::ops::Deref;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;

use super::specifier::{RxFilename, WxFilename};
use crate::error::{Error, Result};

/// The bytes of a whole input: a memory map of a file, or bytes read from a stream.
pub enum InputData {
    /// A file's map, and the file (read past the map by [`InputData::read_at`]).
    Mapped(memmap2::Mmap, File),
    Owned(Vec<u8>),
}

impl Deref for InputData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            InputData::Mapped(m, _) => m,
            InputData::Owned(v) => v,
        }
    }
}

impl InputData {
    /// Up to `buf.len()` bytes from byte `at` into `buf`; how many. A mapped
    /// file is read with `pread`, leaving the map's pages untouched: a
    /// first touch of a page of a fresh map costs a page fault that maps
    /// its neighbours too (~3 µs on the GPU host), which the thread that
    /// reads an archive's headers paid for every utterance, one after
    /// another, while the threads that copy the frames take them in
    /// parallel anyway (docs/performance.md, twenty-first session).
    pub fn read_at(&self, at: usize, buf: &mut [u8]) -> usize {
        let len = self.len();
        if at >= len {
            return 0;
        }
        let n = buf.len().min(len - at);
        match self {
            #[cfg(unix)]
            InputData::Mapped(_, f) => {
                use std::os::unix::fs::FileExt;
                let mut got = 0;
                while got < n {
                    match f.read_at(&mut buf[got..n], (at + got) as u64) {
                        Ok(0) | Err(_) => break,
                        Ok(k) => got += k,
                    }
                }
                got
            }
            _ => {
                buf[..n].copy_from_slice(&self[at..at + n]);
                n
            }
        }
    }
}

/// Memory-map a whole file (empty files become an empty buffer: they cannot be mapped).
pub fn map_file(path: &str) -> Result<Arc<InputData>> {
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        return Ok(Arc::new(InputData::Owned(Vec::new())));
    }
    // SAFETY: the map is read-only; like every reader of Kaldi archives we
    // assume the file is not truncated by another process while we read it.
    let m = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| Error::io(path, e))?;
    #[cfg(unix)]
    let _ = m.advise(memmap2::Advice::Sequential);
    Ok(Arc::new(InputData::Mapped(m, f)))
}

/// Start `sh -c cmd` with its stdout piped to us.
fn spawn_input_pipe(cmd: &str) -> Result<Child> {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::io(format!("{cmd}|"), e))
}

/// Wait for a pipe command; a non-zero exit status is an error.
fn wait_child(mut child: Child, name: &str) -> Result<()> {
    let status = child.wait().map_err(|e| Error::io(name, e))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::io(
            name,
            io::Error::other(format!("pipe command failed ({status})")),
        ))
    }
}

/// Read a whole rxfilename into memory (files are memory-mapped; `file:offset`
/// returns the whole file, the caller seeks). Pipes are waited for and their
/// exit status checked.
pub fn read_rxfilename(rx: &RxFilename) -> Result<Arc<InputData>> {
    match rx {
        RxFilename::File(f) | RxFilename::Offset(f, _) => map_file(f),
        RxFilename::Stdin => {
            let mut v = Vec::new();
            io::stdin()
                .lock()
                .read_to_end(&mut v)
                .map_err(|e| Error::io("standard input", e))?;
            Ok(Arc::new(InputData::Owned(v)))
        }
        RxFilename::Pipe(cmd) => {
            let name = format!("{cmd}|");
            let mut child = spawn_input_pipe(cmd)?;
            let mut v = Vec::new();
            if let Some(mut out) = child.stdout.take() {
                out.read_to_end(&mut v).map_err(|e| Error::io(&name, e))?;
            }
            wait_child(child, &name)?;
            Ok(Arc::new(InputData::Owned(v)))
        }
    }
}

/// Printable name of an rxfilename, as Kaldi's `PrintableRxfilename`.
pub fn printable_rx(rx: &str) -> String {
    if rx.is_empty() || rx == "-" {
        "standard input".to_string()
    } else {
        rx.to_string()
    }
}

/// Printable name of a wxfilename.
pub fn printable_wx(wx: &str) -> String {
    if wx.is_empty() || wx == "-" {
        "standard output".to_string()
    } else {
        wx.to_string()
    }
}

/// Bytes of an input that parsers look at through a window: a whole file at
/// once, or a stream read incrementally (the window grows until an object
/// parses or the stream ends).
pub struct ByteSource {
    name: String,
    whole: Option<Arc<InputData>>,
    stream: Option<Box<dyn Read + Send>>,
    child: Option<Child>,
    buf: Vec<u8>,
    /// First unconsumed byte (of `whole` or of `buf`).
    start: usize,
    /// Stream offset of `buf[0]`.
    buf_base: u64,
    eof: bool,
}

const CHUNK: usize = 1 << 20;

impl ByteSource {
    /// Open an rxfilename for sequential reading.
    pub fn open(rx: &str) -> Result<Self> {
        let name = printable_rx(rx);
        let class =
            RxFilename::classify(rx).map_err(|e| Error::io(&name, io::Error::other(e.0)))?;
        let mut s = ByteSource {
            name,
            whole: None,
            stream: None,
            child: None,
            buf: Vec::new(),
            start: 0,
            buf_base: 0,
            eof: false,
        };
        match class {
            RxFilename::File(f) => s.whole = Some(map_file(&f)?),
            RxFilename::Offset(f, o) => {
                let data = map_file(&f)?;
                if o > data.len() as u64 {
                    return Err(Error::format(
                        crate::error::Pos::Byte(o),
                        format!(
                            "offset {o} is past the end of the file ({} bytes)",
                            data.len()
                        ),
                    )
                    .in_file(&f));
                }
                s.start = o as usize;
                s.whole = Some(data);
            }
            RxFilename::Stdin => s.stream = Some(Box::new(io::stdin())),
            RxFilename::Pipe(cmd) => {
                let mut child = spawn_input_pipe(&cmd)?;
                s.stream = child
                    .stdout
                    .take()
                    .map(|o| Box::new(o) as Box<dyn Read + Send>);
                s.child = Some(child);
            }
        }
        Ok(s)
    }

    /// A source over bytes already in memory.
    pub fn from_bytes(name: &str, data: Vec<u8>) -> Self {
        ByteSource {
            name: name.to_string(),
            whole: Some(Arc::new(InputData::Owned(data))),
            stream: None,
            child: None,
            buf: Vec::new(),
            start: 0,
            buf_base: 0,
            eof: true,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole input, when it is held in memory at once (a mapped file or
    /// a stream read to its end).
    pub fn shared_input(&self) -> Option<Arc<InputData>> {
        self.whole.clone()
    }

    /// The unconsumed bytes visible now, their offset in the input, and
    /// whether they run to the end of the input. A stream's window ends after
    /// its last newline until the stream is exhausted, so line-based text
    /// parsers never see half a line.
    pub fn window(&self) -> (&[u8], u64, bool) {
        if let Some(w) = &self.whole {
            return (&w[self.start..], self.start as u64, true);
        }
        let data = &self.buf[self.start..];
        let off = self.buf_base + self.start as u64;
        if self.eof {
            (data, off, true)
        } else {
            match data.iter().rposition(|&c| c == b'\n') {
                Some(i) => (&data[..=i], off, false),
                None => (&data[..0], off, false),
            }
        }
    }

    /// Mark `n` bytes of the window as consumed.
    pub fn consume(&mut self, n: usize) {
        self.start += n;
        if self.whole.is_none() && self.start > CHUNK && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.buf_base += self.start as u64;
            self.start = 0;
        }
    }

    /// Read more of a stream (at least doubling what is buffered). Returns
    /// false when there is nothing more to read.
    pub fn fill_more(&mut self) -> Result<bool> {
        let Some(stream) = self.stream.as_mut() else {
            return Ok(false);
        };
        if self.eof {
            return Ok(false);
        }
        let want = (self.buf.len() - self.start).max(CHUNK);
        let old = self.buf.len();
        self.buf.resize(old + want, 0);
        let mut got = 0;
        while got < want {
            match stream.read(&mut self.buf[old + got..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(old + got);
                    return Err(Error::io(&self.name, e));
                }
            }
        }
        self.buf.truncate(old + got);
        Ok(true)
    }

    /// Finish reading: for a pipe, wait for the command and fail on a
    /// non-zero exit status.
    pub fn finish(&mut self) -> Result<()> {
        self.stream = None;
        if let Some(child) = self.child.take() {
            wait_child(child, &self.name)?;
        }
        Ok(())
    }
}

impl Drop for ByteSource {
    fn drop(&mut self) {
        // An abandoned pipe: close its stdout so it ends, and reap it.
        self.stream = None;
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}

/// Counts bytes written (for scp offsets).
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

enum Sink {
    File(crate::atomic::OutputFile),
    Stdout,
    Pipe { child: Child },
}

/// An opened wxfilename. Regular files are written to a temporary file beside
/// the target and renamed over it by [`Output::close`]; dropping an `Output`
/// without closing it (an error happened) removes the temporary file, so a
/// failed run never leaves a truncated output. Devices, FIFOs and standard
/// streams are written in place ([`crate::atomic::OutputFile`]).
pub struct Output {
    name: String,
    sink: Sink,
    w: Counting<Box<dyn Write + Send>>,
}

impl Output {
    pub fn open(wx: &str) -> Result<Output> {
        let name = printable_wx(wx);
        let class =
            WxFilename::classify(wx).map_err(|e| Error::io(&name, io::Error::other(e.0)))?;
        let (sink, w): (Sink, Box<dyn Write + Send>) = match class {
            WxFilename::File(f) => {
                let out = crate::atomic::OutputFile::create(Path::new(&f))
                    .map_err(|e| Error::io(&f, e))?;
                let file = out.file().try_clone().map_err(|e| Error::io(&f, e))?;
                (
                    Sink::File(out),
                    Box::new(BufWriter::with_capacity(1 << 20, file)),
                )
            }
            WxFilename::Stdout => (
                Sink::Stdout,
                Box::new(BufWriter::with_capacity(1 << 16, io::stdout())),
            ),
            WxFilename::Pipe(cmd) => {
                let mut child = Command::new("sh")
                    .arg("-c")
                    .arg(&cmd)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::inherit())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .map_err(|e| Error::io(&name, e))?;
                let stdin: ChildStdin = child
                    .stdin
                    .take()
                    .ok_or_else(|| Error::io(&name, io::Error::other("no stdin for pipe")))?;
                (
                    Sink::Pipe { child },
                    Box::new(BufWriter::with_capacity(1 << 16, stdin)),
                )
            }
        };
        Ok(Output {
            name,
            sink,
            w: Counting {
                inner: w,
                written: 0,
            },
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes written so far.
    pub fn position(&self) -> u64 {
        self.w.written
    }

    /// The writer, to be used for `io::Write` calls.
    pub fn writer(&mut self) -> &mut dyn Write {
        &mut self.w
    }

    /// An I/O error on this output, as a crate error naming it.
    pub fn err(&self, e: io::Error) -> Error {
        Error::io(&self.name, e)
    }

    pub fn flush(&mut self) -> Result<()> {
        self.w.flush().map_err(|e| Error::io(&self.name, e))
    }

    /// Flush, then rename the temporary file into place / wait for the pipe.
    pub fn close(self) -> Result<()> {
        let Output { name, sink, mut w } = self;
        w.flush().map_err(|e| Error::io(&name, e))?;
        drop(w);
        match sink {
            Sink::File(out) => out.commit().map_err(|e| Error::io(&name, e)),
            Sink::Stdout => Ok(()),
            Sink::Pipe { child } => wait_child(child, &name),
        }
    }
}

/// Write a whole file atomically from a closure.
pub fn write_wxfilename(wx: &str, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let mut out = Output::open(wx)?;
    let res = f(out.writer());
    res.map_err(|e| out.err(e))?;
    out.close()
}

/// Does `path` exist as a file (used by tests and the CLI for messages)?
pub fn exists(path: &str) -> bool {
    Path::new(path).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_file_output() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.txt");
        let ps = p.to_str().unwrap();
        {
            let mut o = Output::open(ps).unwrap();
            o.writer().write_all(b"partial").unwrap();
            // Dropped without close: nothing is left behind.
        }
        assert!(!p.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let mut o = Output::open(ps).unwrap();
        o.writer().write_all(b"hello").unwrap();
        assert_eq!(o.position(), 5);
        o.close().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"hello");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn pipes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.gz");
        let mut o = Output::open(&format!("| gzip -c > {}", p.display())).unwrap();
        o.writer().write_all(b"abc\n").unwrap();
        o.close().unwrap();
        let mut s = ByteSource::open(&format!("gunzip -c {} |", p.display())).unwrap();
        while s.fill_more().unwrap() {}
        assert_eq!(s.window().0, b"abc\n");
        s.finish().unwrap();
        let mut s = ByteSource::open("exit 3 |").unwrap();
        while s.fill_more().unwrap() {}
        let e = s.finish().unwrap_err().to_string();
        assert!(e.contains("exit 3 |") && e.contains("failed"), "{e}");
        let o = Output::open("| exit 2").unwrap();
        assert!(o.close().is_err());
    }

    #[test]
    fn stream_window_ends_at_newline() {
        let mut s = ByteSource::open("printf 'a b\\nc' |").unwrap();
        s.fill_more().unwrap();
        let (w, off, complete) = s.window();
        // The pipe may or may not be exhausted after one read.
        if complete {
            assert_eq!(w, b"a b\nc");
        } else {
            assert_eq!(w, b"a b\n");
        }
        assert_eq!(off, 0);
        while s.fill_more().unwrap() {}
        assert_eq!(s.window().0, b"a b\nc");
        s.finish().unwrap();
    }

    #[test]
    fn offset_past_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"abc").unwrap();
        let e = ByteSource::open(&format!("{}:10", p.display()))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("past the end") && e.contains("at byte 10"),
            "{e}"
        );
    }
}
