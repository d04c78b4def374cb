//! Helpers shared by the integration tests (`mod common;` in each test file):
//! locating and running the amtool binary (also through links named like the
//! Kaldi/HTK tools), reading whole test files (gzipped or not) and paths in
//! temporary folders. Each test file uses only some of them.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The amtool binary the tests run. Cargo's build of it where that exists;
/// otherwise (test executables run from a copy without the target folder,
/// as on the GPU machine) `$AMTOOL_BIN` if set, else `.device/bin/amtool`
/// under the package root the tests run from; else Cargo's path, so that
/// the error names it. Relative paths are made absolute, since some tests
/// run amtool in another folder.
pub fn amtool_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let built = PathBuf::from(env!("CARGO_BIN_EXE_amtool"));
        if built.exists() {
            return built;
        }
        if let Some(p) = std::env::var_os("AMTOOL_BIN") {
            return absolute(PathBuf::from(p));
        }
        let device = PathBuf::from(".device/bin/amtool");
        if device.exists() {
            return absolute(device);
        }
        built
    })
}

fn absolute(p: PathBuf) -> PathBuf {
    if p.is_absolute() {
        p
    } else {
        std::env::current_dir().unwrap().join(p)
    }
}

/// A command running the amtool binary.
pub fn amtool() -> Command {
    Command::new(amtool_bin())
}

/// Runs `cmd`; returns (exit code, stderr).
pub fn run_cmd(cmd: &mut Command) -> (i32, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", cmd.get_program().to_string_lossy()));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs amtool (or a shim path) with `args`; returns (exit code, stderr).
pub fn run_exe(exe: &Path, args: &[&str]) -> (i32, String) {
    run_cmd(Command::new(exe).args(args))
}

/// Runs amtool with `args`; returns (exit code, stderr).
pub fn run(args: &[&str]) -> (i32, String) {
    run_cmd(amtool().args(args))
}

/// Runs amtool with `args`, which must succeed; returns its stderr.
pub fn ok(args: &[&str]) -> String {
    let (code, err) = run(args);
    assert_eq!(code, 0, "amtool {args:?} failed:\n{err}");
    err
}

/// The decompressed bytes of the gzipped file `p`.
pub fn gunzip(p: impl AsRef<Path>) -> Vec<u8> {
    let p = p.as_ref();
    let f = std::fs::File::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut v = Vec::new();
    flate2::read::GzDecoder::new(f)
        .read_to_end(&mut v)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    v
}

/// The bytes of file `p`, decompressed if its name ends in `.gz`.
pub fn read(p: impl AsRef<Path>) -> Vec<u8> {
    let p = p.as_ref();
    if p.extension().is_some_and(|e| e == "gz") {
        gunzip(p)
    } else {
        std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }
}

/// The text of file `p`, decompressed if its name ends in `.gz`.
pub fn text(p: impl AsRef<Path>) -> String {
    String::from_utf8(read(p)).unwrap()
}

/// A temporary folder.
pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// The path of `name` in temporary folder `dir`, as a string.
pub fn path(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).display().to_string()
}

/// Every entry of the table `rspec`, in order.
pub fn read_table<H: amtool::formats::kaldi::holder::Holder>(rspec: &str) -> Vec<(String, H)> {
    amtool::formats::kaldi::table::SequentialTableReader::<H>::open(rspec)
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
}

/// A link named `tool` (a Kaldi tool's name) to the amtool binary, in `dir`.
#[cfg(unix)]
pub fn shim(dir: &Path, tool: &str) -> PathBuf {
    let link = dir.join(tool);
    std::os::unix::fs::symlink(amtool_bin(), &link).unwrap();
    link
}
