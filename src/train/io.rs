//! Whole-object input and output by Kaldi rxfilename / wxfilename: a path,
//! `-` (stdin/stdout), `cmd |` (read a command's output) or `| cmd` (write
//! into a command). Files are written atomically: to a temporary file in the
//! same folder, renamed over the target only once everything is written, so
//! a failed run never leaves a truncated model or accumulator.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use crate::{Error, Result};

fn io_err(path: &str, e: std::io::Error) -> Error {
    Error::Io {
        path: path.to_string(),
        source: e,
    }
}

/// Reads everything an rxfilename names.
pub fn read_input(rx: &str) -> Result<Vec<u8>> {
    let t = rx.trim();
    if t == "-" || t.is_empty() {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| io_err("standard input", e))?;
        return Ok(buf);
    }
    if let Some(cmd) = t.strip_suffix('|') {
        let out = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| io_err(rx, e))?;
        if !out.status.success() {
            return Err(Error::Mismatch(format!(
                "{rx}: command exited with {} (Kaldi treats a failed input pipe as an error)",
                out.status
            )));
        }
        return Ok(out.stdout);
    }
    std::fs::read(t).map_err(|e| io_err(t, e))
}

/// Writes `bytes` to a wxfilename; files atomically (temp file + rename).
pub fn write_output(wx: &str, bytes: &[u8]) -> Result<()> {
    let t = wx.trim();
    if t == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(bytes)
            .and_then(|_| out.flush())
            .map_err(|e| io_err("standard output", e))?;
        return Ok(());
    }
    if let Some(cmd) = t.strip_prefix('|') {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| io_err(wx, e))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(bytes).map_err(|e| io_err(wx, e))?;
        }
        let status = child.wait().map_err(|e| io_err(wx, e))?;
        if !status.success() {
            return Err(Error::Mismatch(format!(
                "{wx}: output command exited with {status}"
            )));
        }
        return Ok(());
    }
    amtool_formats::atomic::write(std::path::Path::new(t), bytes).map_err(|e| io_err(t, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_pipe_and_atomic_write() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.bin");
        let ps = p.to_str().unwrap();
        write_output(ps, b"hello").unwrap();
        assert_eq!(read_input(ps).unwrap(), b"hello");
        assert_eq!(read_input(&format!("cat {ps} |")).unwrap(), b"hello");
        assert!(read_input("false |").is_err());
        assert!(read_input(dir.path().join("missing").to_str().unwrap()).is_err());
        // Only x.bin is left: no temporary files.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
