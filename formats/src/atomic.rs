//! Atomic output files: everything is written to a temporary file in the
//! target's folder, which is renamed over the target only once complete, so a
//! failed run never leaves a truncated file and never touches what was there.
//! The temporary file is created with mode 0666 less the umask, as a plain
//! `File::create` would be, so outputs get the permissions users expect
//! (0644 under the usual umask) rather than a temporary file's 0600.

use std::io::{self, Write};
use std::path::Path;

use tempfile::NamedTempFile;

/// A temporary file beside `path` (`.NAME.XXXXXX.tmp` in the same folder).
pub fn temp_beside(path: &Path) -> io::Result<NamedTempFile> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let base = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{base}.");
    let mut b = tempfile::Builder::new();
    b.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o666));
    }
    b.tempfile_in(dir)
}

/// Writes `bytes` to `path` atomically.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = temp_beside(path)?;
    tmp.write_all(bytes)?;
    tmp.flush()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_keeps_plain_file_permissions() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.bin");
        std::fs::write(&p, b"old contents").unwrap();
        write(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // The same mode a plain create gets under this process's umask.
            let plain = d.path().join("plain");
            std::fs::File::create(&plain).unwrap();
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&p), mode(&plain));
        }
        // Nothing left behind but the two files.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2);
    }
}
