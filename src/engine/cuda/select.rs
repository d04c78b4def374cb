//! Which GPU a process takes, as Kaldi's `CuDevice::SelectGpuId` chooses
//! and in its log lines: among the devices `CUDA_VISIBLE_DEVICES` leaves
//! visible (the driver numbers only those), the one with the largest
//! share of free memory. A device that refuses a context (exclusive-process
//! mode and taken, out of memory, broken) is logged and passed over; only
//! when every device refuses does selection fail (and `--use-gpu` decides
//! between the CPU and an error). With one visible device nothing is
//! probed: its context is the one the engine keeps.
//!
//! Probing a device means opening a context on it (free memory is known
//! only inside one). The devices are probed at once, a thread each (Kaldi
//! probes them one after another, ~0.1 s each); the chosen device's
//! context is the one the engine keeps, the others are let go.
//!
//! Processes started together (a recipe's `--nj` jobs) all see the same
//! free memory (a new context shows none used until it allocates) and
//! would take the same device (Kaldi leaves this to the devices'
//! exclusive-process mode). So each other amtool process on a device
//! ([`super::claims`]) counts as [`OTHERS_WEIGHT`] of its memory in use,
//! and the choice among several devices is made under an exclusive lock
//! on a file shared by the processes of this host ([`SelectionLock`]):
//! each process counts the claims of those that chose before it.

/// An exclusive lock held while a process chooses among several devices
/// (see the module's docs), on `amtool-gpu-select.lock` in the temporary
/// folder (`TMPDIR`, else `/tmp`: one per host, as the devices are).
/// Released when dropped. Without a lock file that can be opened and locked
/// (a read-only folder), selection goes on unlocked.
pub struct SelectionLock(Option<std::fs::File>);

impl SelectionLock {
    pub fn acquire() -> Self {
        Self::at(&std::env::temp_dir().join("amtool-gpu-select.lock"))
    }

    pub fn at(path: &std::path::Path) -> Self {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .ok()
            .filter(|f| f.lock().is_ok());
        SelectionLock(file)
    }

    /// Whether the lock is held (false: selection runs unlocked).
    pub fn held(&self) -> bool {
        self.0.is_some()
    }
}

/// The share of a device's memory each other amtool process on it counts
/// as, when devices are compared: devices with the same free memory go to
/// the one with the fewest amtool processes; a device with a share of
/// free memory larger by more than this per process still wins.
pub const OTHERS_WEIGHT: f64 = 0.02;

/// What a probe of one device found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeviceFigures {
    pub name: String,
    pub free: usize,
    pub total: usize,
    /// The device's UUID (names this process's claim on it).
    pub uuid: String,
    /// Other amtool processes of this host using the device.
    pub others: usize,
}

impl DeviceFigures {
    /// What devices are compared by: the share of free memory, less
    /// [`OTHERS_WEIGHT`] for each other amtool process on the device.
    pub fn score(&self) -> f64 {
        self.ratio() - OTHERS_WEIGHT * self.others as f64
    }

    /// Free / total, Kaldi's `mem_ratio`.
    pub fn ratio(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.free as f64 / self.total as f64
        }
    }

    /// Kaldi's `GetFreeMemory` text: `free:XM, used:YM, total:ZM, free/total:R`.
    pub fn memory_text(&self) -> String {
        const MB: usize = 1 << 20;
        format!(
            "free:{}M, used:{}M, total:{}M, free/total:{}",
            self.free / MB,
            self.total.saturating_sub(self.free) / MB,
            self.total / MB,
            self.ratio() as f32
        )
    }
}

/// The device chosen among `count`, its context and figures.
pub struct Selected<C> {
    pub index: usize,
    pub context: C,
    pub figures: DeviceFigures,
}

/// Select among `count` devices: `open(n)` opens a context on device `n`
/// and returns it with the device's figures (or why it refused); `log`
/// takes each log line (Kaldi's words); the devices probed and not chosen
/// go into `passed_over` (for [`let_go`]). With one device it is opened
/// without the selection lines.
pub fn select_device<C: Send>(
    count: usize,
    open: impl Fn(usize) -> Result<(C, DeviceFigures), String> + Sync,
    mut log: impl FnMut(String),
    passed_over: &mut Vec<Selected<C>>,
) -> Result<Selected<C>, String> {
    if count == 1 {
        let (context, figures) = open(0).map_err(|e| format!("cannot open device 0: {e}"))?;
        return Ok(Selected {
            index: 0,
            context,
            figures,
        });
    }
    log(format!("Selecting from {count} GPUs"));
    let mut best: Option<Selected<C>> = None;
    let mut refusals = Vec::new();
    for (n, opened) in open_each(count, open).into_iter().enumerate() {
        let Some(found) = probe(n, opened, &mut log, &mut refusals) else {
            continue;
        };
        // Strictly larger: ties go to the lower index, as in Kaldi.
        if best
            .as_ref()
            .is_none_or(|b| found.figures.score() > b.figures.score())
        {
            passed_over.extend(best.replace(found));
        } else {
            passed_over.push(found);
        }
    }
    let Some(best) = best else {
        return Err(format!(
            "every GPU refused a context ({})",
            refusals.join("; ")
        ));
    };
    log_chosen(&best, &mut log);
    Ok(best)
}

/// `open(n)` of every one of `count` devices at once, a thread each, the
/// results in device order. Kaldi's selection creates the contexts one
/// after another (~0.1 s each, docs/performance.md, issue 19), with the
/// other processes of a recipe waiting on the selection lock meanwhile;
/// the driver still does much of that work a device at a time (two at once
/// took 0.21–0.24 s, one after the other 0.22–0.28 s, twenty-eighth
/// session), so most of what a job saves is [`let_go`]'s.
fn open_each<C: Send>(
    count: usize,
    open: impl Fn(usize) -> Result<(C, DeviceFigures), String> + Sync,
) -> Vec<Result<(C, DeviceFigures), String>> {
    let open = &open;
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..count)
            .map(|n| {
                std::thread::Builder::new()
                    .name(format!("amtool-open-{n}"))
                    .spawn_scoped(s, move || open(n))
            })
            .collect();
        threads
            .into_iter()
            .enumerate()
            .map(|(n, t)| match t {
                // No thread to spare: this one opens it.
                Err(_) => open(n),
                Ok(t) => t
                    .join()
                    .unwrap_or_else(|_| Err("opening the device panicked".to_string())),
            })
            .collect()
    })
}

/// The contexts of devices probed and not chosen, and the selection's
/// lock, let go of on a thread of their own that nothing waits for: a
/// context's teardown is the driver's work, and a job on one GPU of two
/// started ~0.1 s sooner without waiting for it (2 × H200, twenty-eighth
/// session). The lock goes after the contexts: the next process to choose
/// (a recipe's jobs started together) probes devices this one no longer
/// holds, which in exclusive-process mode it could not open. Without a
/// thread to spare they go here, in that order.
pub fn let_go<C: Send + 'static>(passed_over: Vec<Selected<C>>, lock: Option<SelectionLock>) {
    // A tuple drops its fields in order: the contexts, then the lock.
    let gone = (passed_over, lock);
    if gone.0.is_empty() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("amtool-let-go".into())
        .spawn(move || drop(gone));
}

/// Logs device `n`'s figures once `opened` (Kaldi's `cudaSetDevice` line),
/// or logs and records why it refused.
fn probe<C>(
    n: usize,
    opened: Result<(C, DeviceFigures), String>,
    log: &mut impl FnMut(String),
    refusals: &mut Vec<String>,
) -> Option<Selected<C>> {
    match opened {
        Ok((context, figures)) => {
            log(format!(
                "cudaSetDevice({n}): {}\t{}",
                figures.name,
                figures.memory_text()
            ));
            if figures.others > 0 {
                log(format!(
                    "GPU [{n}] is in use by {} other amtool process{}",
                    figures.others,
                    if figures.others == 1 { "" } else { "es" }
                ));
            }
            Some(Selected {
                index: n,
                context,
                figures,
            })
        }
        Err(e) => {
            log(format!(
                "cudaSetDevice({n}): Cannot select this device: {e}"
            ));
            refusals.push(format!("device {n}: {e}"));
            None
        }
    }
}

/// Kaldi's lines for a device chosen.
fn log_chosen<C>(chosen: &Selected<C>, log: &mut impl FnMut(String)) {
    let r = chosen.figures.ratio() as f32;
    log(format!(
        "Trying to select device: {} (automatically), mem_ratio: {r}",
        chosen.index
    ));
    log(format!(
        "Success selecting device {} free mem ratio: {r}",
        chosen.index
    ));
}

/// Select `want` of `count` devices (`None`: every one that opens), in
/// device order: those with the largest share of free memory, ties to the
/// lower index, each chosen device logged in Kaldi's words. The devices
/// probed and not chosen go into `passed_over` (for [`let_go`]). With one
/// device wanted,
/// [`select_device`].
pub fn select_devices<C: Send>(
    count: usize,
    want: Option<usize>,
    open: impl Fn(usize) -> Result<(C, DeviceFigures), String> + Sync,
    mut log: impl FnMut(String),
    passed_over: &mut Vec<Selected<C>>,
) -> Result<Vec<Selected<C>>, String> {
    match want {
        Some(n) if n > count => return Err(format!("{n} GPUs wanted, {count} visible")),
        Some(0 | 1) => return select_device(count, open, log, passed_over).map(|s| vec![s]),
        None if count <= 1 => return select_device(count, open, log, passed_over).map(|s| vec![s]),
        _ => {}
    }
    log(format!("Selecting from {count} GPUs"));
    let mut refusals = Vec::new();
    let mut opened: Vec<Selected<C>> = open_each(count, open)
        .into_iter()
        .enumerate()
        .filter_map(|(n, o)| probe(n, o, &mut log, &mut refusals))
        .collect();
    let wanted = want.unwrap_or(1).max(1);
    if opened.len() < wanted {
        return Err(format!(
            "{wanted} GPU{} wanted, {} of {count} opened ({})",
            if wanted == 1 { "" } else { "s" },
            opened.len(),
            refusals.join("; ")
        ));
    }
    // Stable: equal ratios keep the lower index first.
    opened.sort_by(|a, b| b.figures.score().total_cmp(&a.figures.score()));
    passed_over.extend(opened.split_off(want.unwrap_or(count).min(opened.len())));
    opened.sort_by_key(|s| s.index);
    for s in &opened {
        log_chosen(s, &mut log);
    }
    Ok(opened)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: usize = 1 << 30;

    fn figs(free_gb: usize) -> DeviceFigures {
        DeviceFigures {
            name: "GPU".into(),
            free: free_gb * GB,
            total: 80 * GB,
            ..Default::default()
        }
    }

    /// Devices with these free figures (None: refuses a context); returns
    /// the selection, the devices opened and the log.
    fn run(free: &[Option<usize>]) -> (Result<usize, String>, Vec<usize>, Vec<String>) {
        let opened = std::sync::Mutex::new(Vec::new());
        let mut lines = Vec::new();
        let mut passed = Vec::new();
        let r = select_device(
            free.len(),
            |n| {
                opened.lock().unwrap().push(n);
                free[n]
                    .map(|f| (n, figs(f)))
                    .ok_or_else(|| "exclusive-process mode, in use".to_string())
            },
            |l| lines.push(l),
            &mut passed,
        );
        let r = r.map(|s| {
            assert_eq!(
                s.context, s.index,
                "the context kept is the chosen device's"
            );
            s.index
        });
        let mut opened = opened.into_inner().unwrap();
        opened.sort();
        // Every device that opened and was not chosen is handed back.
        let mut handed: Vec<usize> = passed.iter().map(|p| p.context).collect();
        handed.sort();
        let expect: Vec<usize> = (0..free.len())
            .filter(|&n| free[n].is_some() && r.as_ref().ok() != Some(&n))
            .filter(|_| free.len() > 1)
            .collect();
        assert_eq!(handed, expect, "the devices passed over");
        (r, opened, lines)
    }

    #[test]
    fn the_device_with_the_most_free_memory_is_chosen() {
        let (r, opened, lines) = run(&[Some(10), Some(70), Some(40)]);
        assert_eq!(r, Ok(1));
        assert_eq!(opened, vec![0, 1, 2]);
        assert_eq!(lines[0], "Selecting from 3 GPUs");
        assert_eq!(
            lines[2],
            "cudaSetDevice(1): GPU\tfree:71680M, used:10240M, total:81920M, free/total:0.875"
        );
        assert_eq!(
            lines[4],
            "Trying to select device: 1 (automatically), mem_ratio: 0.875"
        );
        assert_eq!(lines[5], "Success selecting device 1 free mem ratio: 0.875");
    }

    #[test]
    fn the_selection_lock_excludes_a_second_holder_until_dropped() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("select.lock");
        let first = SelectionLock::at(&p);
        assert!(first.held());
        let other = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        assert!(matches!(
            other.try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        drop(first);
        assert!(other.try_lock().is_ok());
        drop(other);
        assert!(!SelectionLock::at(&d.path().join("no/such/dir/x.lock")).held());
    }

    #[test]
    fn ties_go_to_the_lower_index() {
        assert_eq!(run(&[Some(50), Some(50)]).0, Ok(0));
    }

    /// Devices of equal free memory, `others[n]` other amtool processes on
    /// device n: the selection of `want` of them, and the log.
    fn with_others(others: &[usize], want: usize) -> (Vec<usize>, Vec<String>) {
        let mut lines = Vec::new();
        let chosen = select_devices(
            others.len(),
            Some(want),
            |n| {
                Ok((
                    n,
                    DeviceFigures {
                        others: others[n],
                        ..figs(70)
                    },
                ))
            },
            |l| lines.push(l),
            &mut Vec::new(),
        )
        .unwrap();
        (chosen.iter().map(|s| s.index).collect(), lines)
    }

    #[test]
    fn equal_devices_go_to_the_one_with_fewest_amtool_processes() {
        let (chosen, lines) = with_others(&[1, 0], 1);
        assert_eq!(chosen, vec![1]);
        assert!(
            lines.contains(&"GPU [0] is in use by 1 other amtool process".to_string()),
            "{lines:?}"
        );
        assert_eq!(with_others(&[2, 1, 1, 3], 1).0, vec![1]);
        assert_eq!(with_others(&[2, 1, 0, 3], 2).0, vec![1, 2]);
        // Much more free memory still wins over fewer processes: device 0
        // has 70 GB free and one other process, device 1 20 GB and none.
        let busy_but_free = select_device(
            2,
            |n| {
                let f = [
                    DeviceFigures {
                        others: 1,
                        ..figs(70)
                    },
                    figs(20),
                ];
                Ok((n, f[n].clone()))
            },
            |_| {},
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(busy_but_free.index, 0);
    }

    #[test]
    fn a_refusing_device_is_passed_over() {
        let (r, _, lines) = run(&[None, Some(5), None, Some(3)]);
        assert_eq!(r, Ok(1));
        assert!(
            lines.contains(
                &"cudaSetDevice(0): Cannot select this device: exclusive-process mode, in use"
                    .to_string()
            ),
            "{lines:?}"
        );
    }

    #[test]
    fn every_device_refusing_is_an_error_naming_each() {
        let (r, _, _) = run(&[None, None]);
        let e = r.unwrap_err();
        assert!(e.starts_with("every GPU refused a context"), "{e}");
        assert!(e.contains("device 0:") && e.contains("device 1:"), "{e}");
    }

    /// Devices with these free figures (None: refuses), `want` of them.
    fn run_many(
        free: &[Option<usize>],
        want: Option<usize>,
    ) -> (Result<Vec<usize>, String>, Vec<String>) {
        let mut lines = Vec::new();
        let mut passed = Vec::new();
        let r = select_devices(
            free.len(),
            want,
            |n| {
                free[n]
                    .map(|f| (n, figs(f)))
                    .ok_or_else(|| "in use".to_string())
            },
            |l| lines.push(l),
            &mut passed,
        );
        if let Ok(chosen) = &r {
            let opened = free.iter().filter(|f| f.is_some()).count();
            assert_eq!(
                chosen.len() + passed.len(),
                if free.len() > 1 { opened } else { chosen.len() },
                "every device opened is chosen or passed over"
            );
        }
        let r = r.map(|v| {
            v.iter()
                .map(|s| {
                    assert_eq!(s.context, s.index);
                    s.index
                })
                .collect()
        });
        (r, lines)
    }

    #[test]
    fn several_devices_are_the_freest_in_device_order() {
        let (r, lines) = run_many(&[Some(10), Some(70), Some(40), Some(70)], Some(2));
        assert_eq!(r, Ok(vec![1, 3]));
        assert!(lines.contains(&"Success selecting device 3 free mem ratio: 0.875".to_string()));
        let (r, _) = run_many(&[Some(50), Some(50), Some(50)], Some(2));
        assert_eq!(r, Ok(vec![0, 1]), "ties go to the lower indices");
        let (r, _) = run_many(&[Some(5), None, Some(3)], None);
        assert_eq!(r, Ok(vec![0, 2]), "all: every device that opens");
        let (r, _) = run_many(&[None, None], None);
        assert!(r.unwrap_err().starts_with("1 GPU wanted, 0 of 2 opened"));
        let (r, _) = run_many(&[Some(5), Some(3)], Some(3));
        assert_eq!(r.unwrap_err(), "3 GPUs wanted, 2 visible");
        let (r, _) = run_many(&[None, Some(3), None], Some(2));
        let e = r.unwrap_err();
        assert!(
            e.contains("2 GPUs wanted, 1 of 3 opened") && e.contains("device 0: in use"),
            "{e}"
        );
        let (r, lines) = run_many(&[Some(5), Some(9)], Some(1));
        assert_eq!(r, Ok(vec![1]));
        assert_eq!(lines[0], "Selecting from 2 GPUs");
    }

    #[test]
    fn one_device_is_opened_without_probing_or_selection_lines() {
        let (r, opened, lines) = run(&[Some(1)]);
        assert_eq!(r, Ok(0));
        assert_eq!(opened, vec![0]);
        assert!(lines.is_empty(), "{lines:?}");
        let (r, _, _) = run(&[None]);
        assert!(r.unwrap_err().starts_with("cannot open device 0"));
    }

    /// Every device's `open` waits until all of them have started (or 10 s
    /// have passed), and says whether they all had.
    fn opened_together(count: usize) -> Vec<bool> {
        use std::sync::{Condvar, Mutex};
        use std::time::{Duration, Instant};
        let started = (Mutex::new(0usize), Condvar::new());
        let results = open_each(count, |n| {
            let (lock, cv) = &started;
            let mut k = lock.lock().unwrap();
            *k += 1;
            cv.notify_all();
            let deadline = Instant::now() + Duration::from_secs(10);
            while *k < count && Instant::now() < deadline {
                k = cv.wait_timeout(k, Duration::from_millis(50)).unwrap().0;
            }
            Ok((n, figs(1 + *k / count)))
        });
        results
            .into_iter()
            .enumerate()
            .map(|(n, r)| {
                let (c, f) = r.unwrap();
                assert_eq!(c, n, "results in device order");
                f.free == 2 * GB
            })
            .collect()
    }

    #[test]
    fn the_devices_are_opened_at_once() {
        // One after another, the first open would wait out its 10 s alone.
        assert_eq!(opened_together(4), vec![true; 4]);
        let (r, lines) = run_many(&[Some(5), Some(9), Some(7)], Some(2));
        assert_eq!(r, Ok(vec![1, 2]));
        let probes: Vec<_> = lines
            .iter()
            .filter(|l| l.starts_with("cudaSetDevice("))
            .collect();
        assert!(
            probes[0].starts_with("cudaSetDevice(0)") && probes[2].starts_with("cudaSetDevice(2)"),
            "the log in device order: {lines:?}"
        );
    }

    /// A context let go of only once the test says so (at most 5 s), then
    /// slowly; it notes whether it was told.
    struct Noted {
        n: usize,
        go: std::sync::Arc<std::sync::Mutex<std::sync::mpsc::Receiver<()>>>,
        gone: std::sync::Arc<std::sync::Mutex<Vec<(usize, bool)>>>,
    }

    impl Drop for Noted {
        fn drop(&mut self) {
            let told = self
                .go
                .lock()
                .unwrap()
                .recv_timeout(std::time::Duration::from_secs(5));
            std::thread::sleep(std::time::Duration::from_millis(50));
            self.gone.lock().unwrap().push((self.n, told.is_ok()));
        }
    }

    #[test]
    fn the_lock_is_let_go_of_after_the_contexts_passed_over() {
        use std::sync::{Arc, Mutex};
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("select.lock");
        let lock = SelectionLock::at(&path);
        assert!(lock.held());
        let (tell, go) = std::sync::mpsc::channel();
        let go = Arc::new(Mutex::new(go));
        let gone = Arc::new(Mutex::new(Vec::new()));
        let passed: Vec<_> = (1..3)
            .map(|n| Selected {
                index: n,
                context: Noted {
                    n,
                    go: go.clone(),
                    gone: gone.clone(),
                },
                figures: figs(1),
            })
            .collect();
        // Let go of on a thread of their own: told only after this returns.
        let_go(passed, Some(lock));
        tell.send(()).unwrap();
        tell.send(()).unwrap();
        // The next process gets the lock only once both contexts are gone.
        let next = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        next.lock().unwrap();
        assert_eq!(*gone.lock().unwrap(), vec![(1, true), (2, true)]);
    }
}
