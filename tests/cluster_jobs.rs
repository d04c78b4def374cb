//! The distributed engine of this field is the recipe's own job splitting:
//! `utils/split_scp.pl` cuts the data into N lists, `run.pl` / `queue.pl` /
//! `slurm.pl` run one command per list with `JOB` replaced by 1..N (on one
//! host or many), and `gmm-sum-accs` (HTK: `HERest -p 0`) adds the
//! statistics. These tests do that by hand — the splits as split_scp.pl
//! makes them, the JOB substitution as run.pl does it, the jobs at once in
//! separate processes through the shims — and hold the sum of N jobs against
//! one job over all the data.

mod common;

use common::{path, read, tmp};

use std::path::Path;
use std::process::Command;

use amtool_formats::kaldi::accs::AmAccs;

const FEATS_SCP: &str = "testdata/kaldi/acc/feats_cmvn_deltas.scp";
const ALI: &str = "ark:gunzip -c testdata/kaldi/acc/ali.ark.gz |";
const MDL: &str = "testdata/kaldi/final.mdl";
const HTK: &str = "testdata/htk/herest";

/// `utils/split_scp.pl` without `--utt2spk`: N contiguous pieces, the first
/// `len % n` of them one line longer.
fn split_scp(lines: &[String], n: usize) -> Vec<Vec<String>> {
    let (per, extra) = (lines.len() / n, lines.len() % n);
    let mut out = Vec::new();
    let mut at = 0;
    for j in 0..n {
        let take = per + usize::from(j < extra);
        out.push(lines[at..at + take].to_vec());
        at += take;
    }
    out
}

fn lines(p: impl AsRef<Path>) -> Vec<String> {
    std::fs::read_to_string(p.as_ref())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Runs `template` once per job with `JOB` replaced by 1..=n, all at once,
/// each through `sh -c` in `dir` with `bin` first on PATH (as run.pl runs a
/// recipe's command line); panics naming the job that failed.
fn run_jobs(template: &str, n: usize, bin: &Path, dir: &Path) {
    let path_var = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let children: Vec<_> = (1..=n)
        .map(|job| {
            let cmd = template.replace("JOB", &job.to_string());
            let child = Command::new("sh")
                .arg("-c")
                .arg(&cmd)
                .current_dir(dir)
                .env("PATH", &path_var)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (cmd, child)
        })
        .collect();
    for (cmd, child) in children {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "job `{cmd}` failed:\n{err}");
    }
}

/// Worst |a − b| over a vector, relative to the largest |b| in it (sums of
/// centred-looking statistics cancel, so elementwise relative error is no
/// measure near zero).
fn vec_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / scale)
        .fold(0.0, f64::max)
}

#[test]
fn kaldi_split_jobs_summed_equal_one_job() {
    let d = tmp();
    let root = std::env::current_dir().unwrap();
    let bin = d.path().join("bin");
    common::ok(&["shims", bin.to_str().unwrap()]);

    // split_scp.pl data/train/feats.scp data/train/split3/{1,2,3}/feats.scp
    let n = 3;
    let all: Vec<String> = lines(FEATS_SCP)
        .into_iter()
        .map(|l| l.replacen(" testdata/", &format!(" {}/testdata/", root.display()), 1))
        .collect();
    for (j, part) in split_scp(&all, n).iter().enumerate() {
        let dir = d.path().join(format!("split{n}/{}", j + 1));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("feats.scp"), part.join("\n") + "\n").unwrap();
    }
    std::fs::write(d.path().join("feats.scp"), all.join("\n") + "\n").unwrap();

    // What steps/train_mono.sh hands to `$cmd JOB=1:$nj`, then gmm-sum-accs.
    let mdl = root.join(MDL);
    let ali = ALI.replace("testdata/", &format!("{}/testdata/", root.display()));
    let acc = format!(
        "gmm-acc-stats-ali --use-gpu=no {} scp:split{n}/JOB/feats.scp '{ali}' JOB.acc",
        mdl.display()
    );
    run_jobs(&acc, n, &bin, d.path());
    run_jobs(
        &format!(
            "gmm-sum-accs sum.acc {}",
            (1..=n).map(|j| format!("{j}.acc ")).collect::<String>()
        ),
        1,
        &bin,
        d.path(),
    );
    // One job over everything.
    run_jobs(
        &acc.replace("split3/JOB/feats.scp", "feats.scp")
            .replace("JOB.acc", "one.acc"),
        1,
        &bin,
        d.path(),
    );

    let read_accs = |name: &str| AmAccs::from_bytes(&read(&path(&d, name))).unwrap();
    let (sum, one) = (read_accs("sum.acc"), read_accs("one.acc"));
    // Transition counts are sums of 1.0 per frame and the frame totals whole
    // numbers: exact. The Gaussian statistics are f64 sums of the same f32
    // posteriors and features, grouped differently (the CPU engine sums
    // 64-frame sub-blocks in f32 within a batch, and batches end where the
    // jobs do): 4e-6 of the largest term, the bound stated for batching in
    // train::acc_stats.
    assert_eq!(sum.transition_accs, one.transition_accs);
    assert_eq!(sum.gmm.total_frames, one.gmm.total_frames);
    let like = (sum.gmm.total_like - one.gmm.total_like).abs() / one.gmm.total_like.abs();
    assert!(
        like < 1e-9,
        "total like {} vs {}",
        sum.gmm.total_like,
        one.gmm.total_like
    );
    let mut worst = 0.0f64;
    for (a, b) in sum.gmm.pdfs.iter().zip(&one.gmm.pdfs) {
        worst = worst
            .max(vec_diff(&a.occupancy, &b.occupancy))
            .max(vec_diff(&a.mean_accs, &b.mean_accs))
            .max(vec_diff(&a.var_accs, &b.var_accs));
    }
    eprintln!("3 jobs summed vs one job: worst statistic difference {worst:e}");
    assert!(worst < 4e-6, "{worst}");
}

/// HERest's own parallel mode: `-p JOB` on each split writes HERJOB.acc,
/// `-p 0` merges them and updates. The merge must give the single pass's
/// model within the float32 rounding of HTK's accumulator files.
#[test]
fn herest_split_jobs_merged_equal_one_pass() {
    let d = tmp();
    let root = std::env::current_dir().unwrap();
    let bin = d.path().join("bin");
    common::ok(&["shims", bin.to_str().unwrap()]);
    let mmf = d.path().join("mono1.mmf");
    std::fs::write(&mmf, common::gunzip(format!("{HTK}/models/mono1.mmf.gz"))).unwrap();
    let n = 3;
    for (j, part) in split_scp(&lines(format!("{HTK}/train.scp")), n)
        .iter()
        .enumerate()
    {
        std::fs::write(
            d.path().join(format!("train.{}.scp", j + 1)),
            part.join("\n") + "\n",
        )
        .unwrap();
    }
    for o in ["acc", "merged", "single"] {
        std::fs::create_dir(d.path().join(o)).unwrap();
    }
    let htk = root.join(HTK);
    let common_args = format!(
        "-C {h}/train.cfg -I {h}/aligned.mlf -H {m}",
        h = htk.display(),
        m = mmf.display()
    );
    // Relative paths in the fixture's scp and MLF are relative to its folder.
    let in_htk = |template: &str, jobs: usize| run_jobs(template, jobs, &bin, &htk);
    let dir = d.path().display();
    in_htk(
        &format!(
            "HERest {common_args} -S {dir}/train.JOB.scp -M {dir}/acc -p JOB {h}/monophones1",
            h = htk.display()
        ),
        n,
    );
    in_htk(
        &format!(
            "HERest {common_args} -M {dir}/merged -p 0 {h}/monophones1 {dir}/acc/HER1.acc {dir}/acc/HER2.acc {dir}/acc/HER3.acc",
            h = htk.display()
        ),
        1,
    );
    in_htk(
        &format!(
            "HERest {common_args} -S {h}/train.scp -M {dir}/single {h}/monophones1",
            h = htk.display()
        ),
        1,
    );
    let text = |sub: &str| std::fs::read_to_string(d.path().join(sub).join("mono1.mmf")).unwrap();
    let (merged, single) = (text("merged"), text("single"));
    let tokens = |t: &str| t.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let (a, b) = (tokens(&merged), tokens(&single));
    assert_eq!(a.len(), b.len(), "different MMF structure");
    let mut worst = 0.0f64;
    for (x, y) in a.iter().zip(&b) {
        match (x.parse::<f64>(), y.parse::<f64>()) {
            (Ok(u), Ok(v)) => worst = worst.max((u - v).abs() / (v.abs() + 1e-2)),
            _ => assert_eq!(x, y, "MMF structure differs"),
        }
    }
    // The job accumulators are float32 in HTK's .acc format (as HERest writes
    // them); the single pass keeps f64. Float32 rounding of the sums, carried
    // through the variance update (a difference of two sums): 1e-5 relative.
    eprintln!("HERest -p 1..3 + -p 0 vs one pass: worst parameter difference {worst:e}");
    assert!(worst < 1e-5, "{worst}");
}
