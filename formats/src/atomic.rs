//! Output files that never leave a truncated file behind and never replace
//! what is not a regular file. The one place amtool opens an output path.
//!
//! A regular file (or a path that does not exist yet) is written to a
//! temporary file in the target's folder, which is renamed over the target
//! only once complete: a failed run leaves what was there. The temporary file
//! is created with mode 0666 less the umask, as a plain `File::create` would
//! be, or with the mode of the file it replaces, as Kaldi's truncating open
//! keeps it. A symlink is followed first, so the temporary file sits beside
//! the real target and the link stays a link.
//!
//! Anything else is written in place, as Kaldi writes it: character and block
//! devices (`/dev/null`), FIFOs, the standard streams (`/dev/stdout`,
//! `/dev/fd/N`, `/proc/self/fd/N`); a socket or a folder cannot be opened for
//! writing and gives an error. Renaming over those would replace the node with
//! a regular file (as root, `/dev/null` itself).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// An open output file; [`OutputFile::commit`] finishes it.
#[derive(Debug)]
pub enum OutputFile {
    /// A regular file or a new path: written to `tmp`, renamed over `target`
    /// (the symlink-resolved path) by `commit`. Dropped without `commit`, the
    /// temporary file is removed and the target is untouched.
    Replace { tmp: NamedTempFile, target: PathBuf },
    /// A device, FIFO or standard stream, written directly.
    Direct(File),
}

impl OutputFile {
    /// Open `path` for writing, as the kind of node it is decides.
    pub fn create(path: &Path) -> io::Result<OutputFile> {
        if is_fd_path(path) {
            return open_direct(path);
        }
        let target = resolve_links(path)?;
        if is_fd_path(&target) {
            return open_direct(path);
        }
        match fs::metadata(&target) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => replace(target, None),
            Err(e) => Err(e),
            Ok(m) if m.is_file() => replace(target, Some(m.permissions())),
            Ok(_) => open_direct(&target),
        }
    }

    /// The file to write to (the temporary file when replacing).
    pub fn file(&self) -> &File {
        match self {
            OutputFile::Replace { tmp, .. } => tmp.as_file(),
            OutputFile::Direct(f) => f,
        }
    }

    /// Whether this output replaces a regular file (rather than writing a
    /// device, FIFO or stream in place).
    pub fn is_replacing(&self) -> bool {
        matches!(self, OutputFile::Replace { .. })
    }

    /// Finish: rename the temporary file into place (regular files); flush
    /// (direct outputs).
    pub fn commit(self) -> io::Result<()> {
        match self {
            OutputFile::Replace { tmp, target } => {
                tmp.persist(target).map(|_| ()).map_err(|e| e.error)
            }
            OutputFile::Direct(mut f) => f.flush(),
        }
    }
}

/// `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`,
/// `/proc/PID/fd/N`: links to an open descriptor, written through, never
/// resolved and replaced (a shell's `>> log` must stay an append).
fn is_fd_path(p: &Path) -> bool {
    let s = p.as_os_str().to_string_lossy();
    matches!(s.as_ref(), "/dev/stdin" | "/dev/stdout" | "/dev/stderr")
        || s.starts_with("/dev/fd/")
        || (s.starts_with("/proc/") && s.contains("/fd/"))
}

/// Follows symlinks (also dangling ones: the path they name is created)
/// until a path that is not a link; relative targets are relative to the
/// link's folder.
fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    // Linux's own limit on links followed in one lookup.
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                if is_fd_path(&p) {
                    return Ok(p);
                }
                let t = fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if t.is_relative() => dir.join(t),
                    _ => t,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(io::Error::other(format!(
        "{}: too many levels of symbolic links",
        path.display()
    )))
}

fn open_direct(path: &Path) -> io::Result<OutputFile> {
    // Truncating is what Kaldi's ofstream does; devices and FIFOs ignore it.
    let f = OpenOptions::new().write(true).truncate(true).open(path)?;
    Ok(OutputFile::Direct(f))
}

fn replace(target: PathBuf, keep: Option<fs::Permissions>) -> io::Result<OutputFile> {
    let tmp = temp_beside(&target)?;
    if let Some(p) = keep {
        fs::set_permissions(tmp.path(), p)?;
    }
    Ok(OutputFile::Replace { tmp, target })
}

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

/// Writes `bytes` to `path`: atomically when it is a regular file or new,
/// in place when it is a device, FIFO or stream (see the module docs).
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let out = OutputFile::create(path)?;
    let mut f: &File = out.file();
    f.write_all(bytes)?;
    out.commit()
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

    #[cfg(unix)]
    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[cfg(unix)]
    #[test]
    fn symlink_stays_and_its_target_is_replaced_beside_itself() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let d = tempfile::tempdir().unwrap();
        let real_dir = d.path().join("real");
        let link_dir = d.path().join("links");
        fs::create_dir_all(&real_dir).unwrap();
        fs::create_dir_all(&link_dir).unwrap();
        let target = real_dir.join("model.mdl");
        fs::write(&target, b"old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
        // A relative link, resolved against the link's own folder.
        let link = link_dir.join("model.mdl");
        symlink("../real/model.mdl", &link).unwrap();
        let out = OutputFile::create(&link).unwrap();
        assert!(out.is_replacing());
        // The temporary file is beside the real target, not beside the link.
        assert_eq!(fs::read_dir(&real_dir).unwrap().count(), 2);
        assert_eq!(fs::read_dir(&link_dir).unwrap().count(), 1);
        let mut f: &File = out.file();
        f.write_all(b"new").unwrap();
        out.commit().unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(mode(&target), 0o640, "the replaced file keeps its mode");
        assert_eq!(fs::read_dir(&real_dir).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn dangling_symlink_creates_its_target() {
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("out.ark");
        std::os::unix::fs::symlink(d.path().join("new.ark"), &link).unwrap();
        write(&link, b"abc").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(d.path().join("new.ark")).unwrap(), b"abc");
    }

    #[cfg(unix)]
    #[test]
    fn symlink_loop_is_an_error_naming_the_path() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let e = write(&a, b"x").unwrap_err().to_string();
        assert!(e.contains("too many levels") && e.contains("/a"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn socket_and_folder_are_errors_and_stay_what_they_were() {
        let d = tempfile::tempdir().unwrap();
        let sock = d.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(write(&sock, b"x").is_err());
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::symlink_metadata(&sock).unwrap().file_type().is_socket());
        let sub = d.path().join("sub");
        fs::create_dir(&sub).unwrap();
        assert!(write(&sub, b"x").is_err());
        assert!(fs::symlink_metadata(&sub).unwrap().is_dir());
        // No temporary files left behind.
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 2);
    }

    #[test]
    fn standard_streams_are_written_in_place() {
        for p in ["/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/2"] {
            assert!(is_fd_path(Path::new(p)), "{p}");
        }
        assert!(!is_fd_path(Path::new("/dev/null")));
        assert!(!is_fd_path(Path::new("/tmp/fd/x")));
    }
}
