//! One process over several devices (`--gpus`, issue 18): the work split
//! across devices gives the same bytes as one device. Without several
//! devices the splitting runs over logical partitions of one
//! (`AMTOOL_PARTITIONS=P`: P engines on one device, or on the CPU, each
//! with its share of the work): acc-stats (aligned, posteriors, global
//! diagonal and full), score and gselect on 1, 2 and 3 partitions write the
//! same bytes. The archives repeat the fixture's 40 utterances so that the
//! statistics go in several batches (acc-stats sends what is queued every
//! 50 utterances; a global GMM's batches grow from 2^14 to 2^18 frames).
//! Kaldi's accumulator files hold floats, which hide the last bits of the
//! f64 sums: their order of addition is tested on the f64 accumulators
//! (src/engine/multi.rs, src/train/acc_stats.rs, tests/cuda_multi.rs).
//!
//! The GPU tests do the same with `--use-gpu=yes` on partitions of one GPU
//! (and on every visible GPU with `--gpus=all`); without a GPU they print
//! `skipped: no CUDA device` and pass (AMTOOL_REQUIRE_GPU=1 makes them fail).

mod common;

use common::{amtool, path, run, run_cmd, tmp};

const ARK: &str = "testdata/kaldi/acc/feats_cmvn_deltas.ark";
const ALI: &str = "ark:gunzip -c testdata/kaldi/acc/ali.ark.gz |";
const POST: &str = "ark:gunzip -c testdata/kaldi/acc/post.ark.gz |";
const MDL: &str = "testdata/kaldi/final.mdl";
const UBM: &str = "testdata/kaldi/ubm.0.dubm";
const FUBM: &str = "gunzip -c testdata/kaldi/fubm.0.fubm.gz |";

/// Copies of the fixture's 8445 frames that make five global batches.
const GLOBAL_COPIES: usize = 33;

/// The fixture archive `copies` times over (the same keys again: alignments
/// are looked up by key).
fn repeated_ark(dir: &tempfile::TempDir, copies: usize) -> String {
    let one = std::fs::read(ARK).unwrap();
    let p = path(dir, &format!("feats{copies}.ark"));
    std::fs::write(&p, one.repeat(copies)).unwrap();
    format!("ark:{p}")
}

/// Runs amtool with `AMTOOL_PARTITIONS=partitions` and `args`, the last
/// naming the output file; returns the output's bytes and the stderr.
fn output_on(partitions: usize, args: &[&str]) -> (Vec<u8>, String) {
    let (code, err) = run_cmd(
        amtool()
            .env("AMTOOL_PARTITIONS", partitions.to_string())
            .args(args),
    );
    assert_eq!(
        code, 0,
        "AMTOOL_PARTITIONS={partitions} amtool {args:?}:\n{err}"
    );
    let out = args.last().unwrap();
    let file = out.rsplit(':').next().unwrap();
    (std::fs::read(file).unwrap(), err)
}

/// `args` on 2 and 3 partitions against 1: the same output bytes.
fn same_on_any_partitions(args: &[&str], what: &str) {
    let (one, err) = output_on(1, args);
    assert!(!one.is_empty(), "{what}: no output\n{err}");
    for p in [2, 3] {
        let (got, err) = output_on(p, args);
        assert!(got == one, "{what}: {p} partitions differ from 1\n{err}");
    }
}

#[test]
fn acc_stats_are_the_same_bytes_on_any_number_of_partitions() {
    let d = tmp();
    let feats = repeated_ark(&d, 4);
    let out = path(&d, "ali.acc");
    same_on_any_partitions(
        &["acc-stats", "--use-gpu=no", MDL, &feats, ALI, &out],
        "aligned",
    );
    let out = path(&d, "post.acc");
    same_on_any_partitions(
        &["acc-stats", "--use-gpu=no", MDL, &feats, POST, &out],
        "posteriors",
    );
    // Global GMMs: 33 × 8445 frames, five batches.
    let feats = repeated_ark(&d, GLOBAL_COPIES);
    let out = path(&d, "ubm.acc");
    same_on_any_partitions(
        &["acc-stats", "--use-gpu=no", UBM, &feats, &out],
        "diagonal UBM",
    );
    let out = path(&d, "fubm.acc");
    let (one, _) = output_on(1, &["acc-stats", "--use-gpu=no", FUBM, &feats, &out]);
    let (three, err) = output_on(3, &["acc-stats", "--use-gpu=no", FUBM, &feats, &out]);
    assert!(three == one, "full UBM: 3 partitions differ from 1\n{err}");
    assert!(
        err.contains("the CPU as 3 logical partitions"),
        "partitions are logged: {err}"
    );
}

#[test]
fn scores_and_selections_are_the_same_bytes_on_any_number_of_partitions() {
    let d = tmp();
    let feats = format!("ark:{ARK}");
    for (model, what) in [(MDL, "model"), (UBM, "diagonal UBM"), (FUBM, "full UBM")] {
        let out = path(&d, "likes.ark");
        let target = format!("ark:{out}");
        same_on_any_partitions(&["score", "--use-gpu=no", model, &feats, &target], what);
    }
    for model in [UBM, FUBM] {
        let out = path(&d, "gselect.ark");
        let target = format!("ark:{out}");
        same_on_any_partitions(
            &["gselect", "--n=5", "--use-gpu=no", model, &feats, &target],
            "gselect",
        );
    }
}

#[test]
fn gpus_option_is_checked_and_ignored_on_the_cpu() {
    let d = tmp();
    let out = path(&d, "x.acc");
    let feats = format!("ark:{ARK}");
    let (code, err) = run(&["acc-stats", "--use-gpu=no", "--gpus=0", UBM, &feats, &out]);
    assert_ne!(code, 0);
    assert!(err.contains("--gpus=0"), "{err}");
    let (code, err) = run(&["acc-stats", "--use-gpu=no", "--gpus=two", UBM, &feats, &out]);
    assert_ne!(code, 0);
    assert!(err.contains("--gpus=two"), "{err}");
    let (code, err) = run(&["acc-stats", "--use-gpu=no", "--gpus=2", UBM, &feats, &out]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("computing on the CPU: --gpus=2 ignored"),
        "{err}"
    );
    let (code, err) = run_cmd(amtool().env("AMTOOL_PARTITIONS", "0").args([
        "score",
        "--use-gpu=no",
        UBM,
        &feats,
        &format!("ark:{out}"),
    ]));
    assert_ne!(code, 0);
    assert!(err.contains("AMTOOL_PARTITIONS=0"), "{err}");
    if amtool::engine::cuda::CudaEngine::new().is_err() {
        // No GPU: --use-gpu=yes fails whatever --gpus says.
        let (code, err) = run(&["acc-stats", "--use-gpu=yes", "--gpus=2", UBM, &feats, &out]);
        assert_ne!(code, 0, "{err}");
    }
}

/// The GPU tests of this file one at a time: a job's choice of GPU reads
/// the devices' free memory, which the other test's jobs move.
static GPU_JOBS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A GPU test's turn: `None` without a CUDA device (the test passes, or
/// fails under `AMTOOL_REQUIRE_GPU=1`), else held until the test ends.
fn gpu_turn() -> Option<std::sync::MutexGuard<'static, ()>> {
    amtool::engine::cuda::engine_for_tests()?;
    Some(GPU_JOBS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The same outputs on 1 and 2 partitions of one GPU (and, where the
/// machine has several, on all of them against one).
#[test]
fn gpu_outputs_are_the_same_bytes_on_any_number_of_partitions() {
    let Some(_turn) = gpu_turn() else {
        return;
    };
    let d = tmp();
    let few = repeated_ark(&d, 4);
    let many = repeated_ark(&d, GLOBAL_COPIES);
    let plain = format!("ark:{ARK}");
    let acc = path(&d, "out.acc");
    let likes = format!("ark:{}", path(&d, "likes.ark"));
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("aligned", vec!["acc-stats", MDL, &few, ALI, &acc]),
        ("posteriors", vec!["acc-stats", MDL, &few, POST, &acc]),
        ("diagonal UBM", vec!["acc-stats", UBM, &many, &acc]),
        ("full UBM", vec!["acc-stats", FUBM, &many, &acc]),
        ("score model", vec!["score", MDL, &plain, &likes]),
        ("score UBM", vec!["score", UBM, &plain, &likes]),
        ("score full UBM", vec!["score", FUBM, &plain, &likes]),
        ("gselect", vec!["gselect", "--n=5", UBM, &plain, &likes]),
    ];
    for (what, args) in runs {
        let mut args = args;
        args.insert(1, "--use-gpu=yes");
        let (one, _) = output_on(1, &args);
        for p in [2, 3] {
            let (got, err) = output_on(p, &args);
            assert!(
                got == one,
                "GPU {what}: {p} partitions differ from 1\n{err}"
            );
        }
        let mut all = args.clone();
        all.insert(1, "--gpus=all");
        let (every, err) = output_on(1, &all);
        assert!(
            every == one,
            "GPU {what}: every GPU differs from one\n{err}"
        );
    }
}

/// The GPU a job chose, from its log ("The active GPU is [n]: ...").
fn active_gpu(log: &str) -> Option<usize> {
    let at = log.find("The active GPU is [")? + "The active GPU is [".len();
    log[at..].split(']').next()?.parse().ok()
}

/// Jobs started together take different GPUs (issue 18), as a recipe's
/// `--nj 2` jobs on a host of two: two `acc-stats --use-gpu=yes` whose
/// features come through a pipe that waits a second first (so each job
/// outlasts the other's choice, as jobs on real archives do) log different
/// "The active GPU is [n]" lines, and the one that chose second says the
/// other's GPU is in use. Their claims and the selection's lock are in a
/// folder of their own (`TMPDIR`), apart from any other amtool process.
/// Needs two visible GPUs: with one it says so and passes.
#[test]
fn jobs_started_together_take_different_gpus() {
    let Some(_turn) = gpu_turn() else {
        return;
    };
    let d = tmp();
    let claims = d.path().join("tmp");
    std::fs::create_dir_all(&claims).unwrap();
    let feats = format!("ark:sleep 1; cat {ARK} |");
    let jobs: Vec<_> = (0..2)
        .map(|i| {
            amtool()
                .env("TMPDIR", &claims)
                .args(["acc-stats", "--use-gpu=yes", UBM, &feats])
                .arg(path(&d, &format!("job{i}.acc")))
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("amtool starts")
        })
        .collect();
    let logs: Vec<String> = jobs
        .into_iter()
        .map(|j| {
            let out = j.wait_with_output().expect("amtool ends");
            let log = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{log}");
            log
        })
        .collect();
    // One visible GPU: no choice to make, so no "Selecting from" line.
    if !logs[0].contains("Selecting from") {
        println!("skipped: fewer than two visible GPUs");
        return;
    }
    let chosen: Vec<Option<usize>> = logs.iter().map(|l| active_gpu(l)).collect();
    assert!(
        chosen[0].is_some() && chosen[0] != chosen[1],
        "both jobs on GPU {:?}\n{}\n{}",
        chosen[0],
        logs[0],
        logs[1]
    );
    assert!(
        logs.iter()
            .any(|l| l.contains("is in use by 1 other amtool process")),
        "neither job saw the other's claim\n{}\n{}",
        logs[0],
        logs[1]
    );
    let bytes = |i: usize| std::fs::read(path(&d, &format!("job{i}.acc"))).unwrap();
    assert_eq!(bytes(0), bytes(1), "the same statistics on either GPU");
}
