//! Outputs that are not regular files (issue 15, part 1): FIFOs, symlinks and
//! character devices made in a temporary folder, written by whole-object
//! copies (`amtool copy --binary=false X.mdl PATH`) and by `ark:` and
//! `ark,scp:` tables, with runs that succeed and runs that fail midway. A
//! FIFO or device must still be one afterwards and a link still a link
//! (the old temp-file-and-rename write replaced each with a regular file).
//!
//! No test can hang on a FIFO: its read end is opened by a thread before the
//! writer starts, amtool runs under a time limit, and a reader still waiting
//! for a writer that never came is released by opening the write end.
#![cfg(unix)]

mod common;

use std::fs;
use std::io::Read;
use std::os::unix::fs::{symlink, FileTypeExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{amtool, gunzip, read_table};

const FEATS: &str = "testdata/kaldi/feats/feats.first3.ark";
const MODEL: &str = "testdata/kaldi/final.mdl";
const MODEL_TEXT: &str = "testdata/kaldi/final.mdl.txt.gz";

/// Runs `cmd` (a system tool: mkfifo, mknod, id) and checks it succeeded.
fn system(cmd: &mut Command) {
    let st = cmd.status().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(st.success(), "{cmd:?}: {st}");
}

fn mkfifo(p: &Path) {
    system(Command::new("mkfifo").arg(p));
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// A character device node `major, minor` at `p` (1,3 is /dev/null's, 1,7 /dev/full's).
fn mknod_char(p: &Path, major: u32, minor: u32) {
    system(
        Command::new("mknod")
            .arg(p)
            .arg("c")
            .arg(major.to_string())
            .arg(minor.to_string()),
    );
}

fn is_fifo(p: &Path) -> bool {
    fs::symlink_metadata(p).unwrap().file_type().is_fifo()
}

fn is_char_device(p: &Path) -> bool {
    fs::symlink_metadata(p)
        .unwrap()
        .file_type()
        .is_char_device()
}

fn is_symlink(p: &Path) -> bool {
    fs::symlink_metadata(p).unwrap().file_type().is_symlink()
}

/// The read end of a FIFO, opened (and read to its end) by a thread.
struct FifoReader {
    path: PathBuf,
    got: mpsc::Receiver<Vec<u8>>,
}

impl FifoReader {
    fn start(path: &Path) -> FifoReader {
        let (tx, got) = mpsc::channel();
        let p = path.to_path_buf();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            // Blocks until a writer opens the FIFO.
            if let Ok(mut f) = fs::File::open(&p) {
                let _ = f.read_to_end(&mut v);
            }
            let _ = tx.send(v);
        });
        FifoReader {
            path: path.to_path_buf(),
            got,
        }
    }

    /// What the writer sent, once it has exited. A reader still waiting for
    /// a writer (the writer never opened the FIFO) is released by opening
    /// the write end from another thread, and gets nothing.
    fn finish(self) -> Vec<u8> {
        if let Ok(v) = self.got.recv_timeout(Duration::from_secs(10)) {
            return v;
        }
        let p = self.path.clone();
        std::thread::spawn(move || drop(fs::OpenOptions::new().write(true).open(p)));
        self.got
            .recv_timeout(Duration::from_secs(10))
            .expect("FIFO reader did not finish")
    }
}

/// Runs amtool with `args` under a time limit; returns (exit code, stderr).
fn run_limited(args: &[&str]) -> (i32, String) {
    let mut child = amtool()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("amtool {args:?} ran past 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code().unwrap_or(-1), err.join().unwrap())
}

/// Runs amtool writing into the FIFO at `fifo`; returns (exit code, stderr,
/// the bytes the FIFO carried).
fn run_into_fifo(fifo: &Path, args: &[&str]) -> (i32, String, Vec<u8>) {
    let reader = FifoReader::start(fifo);
    let (code, err) = run_limited(args);
    (code, err, reader.finish())
}

/// The first two entries of the feature archive whole, then half of the third.
fn truncated_archive(dir: &Path) -> (String, usize) {
    let whole = fs::read(FEATS).unwrap();
    let entries =
        read_table::<amtool::formats::kaldi::matrix::Matrix<f32>>(&format!("ark:{FEATS}"));
    assert_eq!(entries.len(), 3);
    // Offset of the third key: each binary float-matrix entry is
    // "key \0BFM " + rows, cols (5 bytes each) + rows*cols*4.
    let entry_len = |k: &str, m: &amtool::formats::kaldi::matrix::Matrix<f32>| {
        k.len() + 1 + 2 + 3 + 10 + m.rows() * m.cols() * 4
    };
    let third = entry_len(&entries[0].0, &entries[0].1) + entry_len(&entries[1].0, &entries[1].1);
    assert!(whole[third..].starts_with(entries[2].0.as_bytes()));
    let cut = third + (whole.len() - third) / 2;
    let p = dir.join("truncated.ark");
    fs::write(&p, &whole[..cut]).unwrap();
    (p.display().to_string(), third)
}

#[test]
fn whole_object_into_a_fifo() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("model.fifo");
    mkfifo(&fifo);
    let f = fifo.display().to_string();
    let (code, err, got) = run_into_fifo(&fifo, &["copy", "--binary=false", MODEL, &f]);
    assert_eq!(code, 0, "{err}");
    assert!(got == gunzip(MODEL_TEXT), "the FIFO carried something else");
    assert!(is_fifo(&fifo), "the FIFO was replaced");
    assert_eq!(
        fs::read_dir(d.path()).unwrap().count(),
        1,
        "left files behind"
    );
}

#[test]
fn tables_into_fifos() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("feats.fifo");
    mkfifo(&fifo);
    let f = fifo.display().to_string();
    let (code, err, got) = run_into_fifo(
        &fifo,
        &["copy", &format!("ark:{FEATS}"), &format!("ark:{f}")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        got == fs::read(FEATS).unwrap(),
        "the FIFO carried something else"
    );
    assert!(is_fifo(&fifo));
    // ark,scp: the archive into a FIFO, the script into a regular file.
    let scp = d.path().join("feats.scp");
    let (code, err, got) = run_into_fifo(
        &fifo,
        &[
            "copy",
            &format!("ark:{FEATS}"),
            &format!("ark,scp:{f},{}", scp.display()),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(got == fs::read(FEATS).unwrap());
    assert!(is_fifo(&fifo));
    let script = fs::read_to_string(&scp).unwrap();
    assert_eq!(script.lines().count(), 3);
    assert!(script.starts_with(&format!("s01-001 {f}:8\n")), "{script}");
}

#[test]
fn table_failing_midway_into_a_fifo_leaves_the_fifo() {
    let d = tempfile::tempdir().unwrap();
    let (bad, third) = truncated_archive(d.path());
    let fifo = d.path().join("out.fifo");
    mkfifo(&fifo);
    let f = fifo.display().to_string();
    let (code, err, got) =
        run_into_fifo(&fifo, &["copy", &format!("ark:{bad}"), &format!("ark:{f}")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("truncated.ark"), "{err}");
    // What was copied before the error went through, as Kaldi's writer sends it.
    assert!(got.len() <= third && fs::read(FEATS).unwrap().starts_with(&got));
    assert!(is_fifo(&fifo), "the FIFO was replaced");
}

#[test]
fn symlinked_outputs_stay_links() {
    let d = tempfile::tempdir().unwrap();
    let real = d.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = |name: &str| {
        let l = d.path().join(name);
        symlink(real.join(name), &l).unwrap();
        l
    };
    // A whole object through a link to an existing file.
    let mdl = link("final.mdl");
    fs::write(real.join("final.mdl"), b"old").unwrap();
    let (code, err) = run_limited(&["copy", "--binary=false", MODEL, &mdl.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(is_symlink(&mdl));
    assert!(fs::read(real.join("final.mdl")).unwrap() == gunzip(MODEL_TEXT));
    // ark,scp through two dangling links: their targets are created.
    let (ark, scp) = (link("feats.ark"), link("feats.scp"));
    let wspec = format!("ark,scp:{},{}", ark.display(), scp.display());
    let (code, err) = run_limited(&["copy", &format!("ark:{FEATS}"), &wspec]);
    assert_eq!(code, 0, "{err}");
    assert!(is_symlink(&ark) && is_symlink(&scp));
    assert!(fs::read(real.join("feats.ark")).unwrap() == fs::read(FEATS).unwrap());
    let script = fs::read_to_string(real.join("feats.scp")).unwrap();
    assert!(
        script.starts_with(&format!("s01-001 {}:8\n", ark.display())),
        "{script}"
    );
    // A failed run leaves the link and the old target.
    let (bad, _) = truncated_archive(d.path());
    let (code, err) = run_limited(&["copy", &format!("ark:{bad}"), &wspec]);
    assert_eq!(code, 1, "{err}");
    assert!(is_symlink(&ark) && is_symlink(&scp));
    assert!(fs::read(real.join("feats.ark")).unwrap() == fs::read(FEATS).unwrap());
    assert_eq!(fs::read_to_string(real.join("feats.scp")).unwrap(), script);
    assert_eq!(fs::read_dir(&real).unwrap().count(), 3, "left files behind");
}

#[test]
fn standard_output_by_name() {
    let out = amtool()
        .args(["copy", "--binary=false", MODEL, "/dev/stdout"])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout == gunzip(MODEL_TEXT));
}

/// Character devices (mknod needs root, as in CI's containers): `null`
/// (1,3) takes everything, `full` (1,7) fails every write with ENOSPC, so
/// every output fails midway. Both must stay devices.
#[test]
fn character_devices() {
    if !is_root() {
        eprintln!("skipped: mknod needs root");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let null = d.path().join("null");
    let full = d.path().join("full");
    mknod_char(&null, 1, 3);
    mknod_char(&full, 1, 7);
    let (n, f) = (null.display().to_string(), full.display().to_string());
    let scp = d.path().join("x.scp").display().to_string();
    let ok_runs: [&[&str]; 3] = [
        &["copy", "--binary=false", MODEL, &n],
        &["copy", &format!("ark:{FEATS}"), &format!("ark:{n}")],
        &[
            "copy",
            &format!("ark:{FEATS}"),
            &format!("ark,scp:{n},{scp}"),
        ],
    ];
    for args in ok_runs {
        let (code, err) = run_limited(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(is_char_device(&null), "{args:?} replaced the device");
    }
    let failing: [&[&str]; 3] = [
        &["copy", "--binary=false", MODEL, &f],
        &["copy", &format!("ark:{FEATS}"), &format!("ark,t:{f}")],
        &["copy", &format!("ark:{FEATS}"), &format!("ark,scp:{n},{f}")],
    ];
    for args in failing {
        let (code, err) = run_limited(args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains(&f) && err.contains("No space left"),
            "{args:?}: {err}"
        );
        assert!(is_char_device(&full), "{args:?} replaced the device");
    }
    assert_eq!(
        fs::read_dir(d.path()).unwrap().count(),
        3,
        "left files behind"
    );
}
