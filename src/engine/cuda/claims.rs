//! Which devices other amtool processes of this host are using, so that
//! processes started together (a recipe's `--nj` jobs) spread over the
//! GPUs. Free memory cannot tell: a new context shows no memory used until
//! it allocates, so every job of a recipe saw the same figures and took
//! the first device. Each process holds a claim, an empty file
//! `<device uuid>.<pid>` in `amtool-gpu-claims/` of the temporary folder
//! (one per host, as the devices are), from choosing a device until the
//! engine is dropped; claims of processes that are gone (killed before
//! removing them) are removed by the next process that counts. The choice
//! itself is made under [`SelectionLock`](super::select::SelectionLock), so
//! a process counts the claims of every process that chose before it.
//!
//! Nothing here is needed for correctness: without a usable temporary
//! folder there are no claims and selection is Kaldi's.

use std::path::{Path, PathBuf};

/// The claims folder of this host.
pub fn claims_dir() -> PathBuf {
    std::env::temp_dir().join("amtool-gpu-claims")
}

/// Live claims on device `uuid` in `dir` by processes other than this one.
/// Claims of processes that no longer run are removed.
pub fn count_others(dir: &Path, uuid: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let me = std::process::id();
    let mut n = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((dev, pid)) = parse_claim(&name) else {
            continue;
        };
        if !process_runs(pid) {
            let _ = std::fs::remove_file(entry.path());
        } else if dev == uuid && pid != me {
            n += 1;
        }
    }
    n
}

fn parse_claim(name: &str) -> Option<(&str, u32)> {
    let (dev, pid) = name.rsplit_once('.')?;
    Some((dev, pid.parse().ok()?))
}

fn process_runs(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// This process's claim on a device; removed when dropped.
#[derive(Debug)]
pub struct Claim(Option<PathBuf>);

impl Claim {
    /// Claims device `uuid` in `dir` (made if missing); a claim that cannot
    /// be written is no claim.
    pub fn make(dir: &Path, uuid: &str) -> Claim {
        let path = dir.join(format!("{uuid}.{}", std::process::id()));
        let made = std::fs::create_dir_all(dir).is_ok() && std::fs::write(&path, b"").is_ok();
        Claim(made.then_some(path))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_of_other_live_processes_count_and_dead_ones_are_removed() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("claims");
        assert_eq!(count_others(&dir, "GPU-a"), 0, "no folder yet");
        let mine = Claim::make(&dir, "GPU-a");
        assert_eq!(count_others(&dir, "GPU-a"), 0, "this process's own claim");
        // pid 1 always runs; a pid beyond pid_max never does.
        std::fs::write(dir.join("GPU-a.1"), b"").unwrap();
        std::fs::write(dir.join("GPU-b.1"), b"").unwrap();
        std::fs::write(dir.join("GPU-a.4294967295"), b"").unwrap();
        std::fs::write(dir.join("not a claim"), b"").unwrap();
        assert_eq!(count_others(&dir, "GPU-a"), 1);
        assert_eq!(count_others(&dir, "GPU-b"), 1);
        assert!(
            !dir.join("GPU-a.4294967295").exists(),
            "a dead claim is removed"
        );
        let path = dir.join(format!("GPU-a.{}", std::process::id()));
        assert!(path.exists());
        drop(mine);
        assert!(!path.exists(), "dropping the claim removes it");
    }

    #[test]
    fn a_claim_that_cannot_be_written_is_none() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, b"").unwrap();
        let c = Claim::make(&file.join("sub"), "GPU-a");
        assert!(c.0.is_none());
    }
}
