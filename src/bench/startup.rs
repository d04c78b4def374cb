//! The `startup` case: what one training job of a recipe costs from process
//! start to exit. A `gmm-acc-stats-ali` job of the shape recipes run many
//! of (train_mono at nj = 8 on 1.7 h: ~77,000 frames, a 1,000-Gaussian
//! monophone model) is written to a temporary folder — the fixture model's
//! transitions with random Gaussians, the fixture's features and alignments
//! repeated under new keys — and `amtool acc-stats` runs on it as child
//! processes, for each `--use-gpu` value: `reps` runs one after another
//! (after one warm-up that fills the kernel cache), then `jobs` at once.
//! Each child runs with [`crate::timeline`] marks on, so the line of a
//! value carries the phases of its median run (and of the slowest of
//! those run at once) (`phase_NAME`: seconds spent
//! before mark NAME since the previous mark, summed over marks of that
//! name; `phase_exec_and_exit` is the wall time outside `main`).
//!
//! Needs the fixtures under `testdata/kaldi/` (run from the repository root).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use amtool_formats::kaldi::holder::Int32Vector;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::table::{SequentialTableReader, TableWriter};

use super::json::Json;
use super::random::{self, Rng};
use super::BenchConfig;
use crate::model::CovKind;
use crate::train::convert::am_from_model;
use crate::{Error, Result};

const FIXTURE_MODEL: &str = "testdata/kaldi/final.mdl";
const FIXTURE_FEATS: &str = "ark:testdata/kaldi/acc/feats_cmvn_deltas.ark";
const FIXTURE_ALI: &str = "ark:gunzip -c testdata/kaldi/acc/ali.ark.gz|";

/// The `--use-gpu` values timed.
const USE_GPU: [&str; 3] = ["yes", "no", "optional"];

fn err(what: &str) -> impl Fn(amtool_formats::Error) -> Error + '_ {
    move |e| Error::Usage(format!("bench startup: {what}: {e}"))
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::Usage(format!("bench startup: {what}: {e}"))
}

/// The job's files.
struct Job {
    dir: tempfile::TempDir,
    frames: usize,
    gaussians: usize,
}

impl Job {
    fn model(&self) -> PathBuf {
        self.dir.path().join("final.mdl")
    }
    fn feats(&self) -> String {
        format!("ark:{}", self.dir.path().join("feats.ark").display())
    }
    fn ali(&self) -> String {
        format!("ark:{}", self.dir.path().join("ali.ark").display())
    }
}

/// Write the job: at least `frames` frames (whole utterances), `gaussians`
/// Gaussians spread evenly over the fixture model's pdfs.
fn write_job(frames: usize, gaussians: usize, seed: u64) -> Result<Job> {
    let bytes = std::fs::read(FIXTURE_MODEL).map_err(io_err(FIXTURE_MODEL))?;
    let mut model = KaldiModel::from_bytes(&bytes).map_err(err(FIXTURE_MODEL))?;
    let pdfs = model.am.pdfs.len();
    let counts: Vec<usize> = (0..pdfs)
        .map(|p| (gaussians * (p + 1) / pdfs - gaussians * p / pdfs).max(1))
        .collect();
    let mut rng = Rng::new(seed);
    let am = random::model(&mut rng, &counts, model.am.dim, CovKind::Diagonal);
    model.am = am_from_model(&am);
    let dir = tempfile::tempdir().map_err(io_err("temporary folder"))?;
    std::fs::write(dir.path().join("final.mdl"), model.to_bytes(true))
        .map_err(io_err("writing the model"))?;

    let mut utts = Vec::new();
    let mut r =
        SequentialTableReader::<Matrix<f32>>::open(FIXTURE_FEATS).map_err(err(FIXTURE_FEATS))?;
    while let Some((key, m)) = r.next_entry().map_err(err(FIXTURE_FEATS))? {
        utts.push((key, m));
    }
    let mut alis = std::collections::HashMap::new();
    let mut r =
        SequentialTableReader::<Int32Vector>::open(FIXTURE_ALI).map_err(err(FIXTURE_ALI))?;
    while let Some((key, a)) = r.next_entry().map_err(err(FIXTURE_ALI))? {
        alis.insert(key, a);
    }
    let job = Job {
        dir,
        frames: 0,
        gaussians: counts.iter().sum(),
    };
    let mut fw = TableWriter::<Matrix<f32>>::open(&job.feats()).map_err(err("feats.ark"))?;
    let mut aw = TableWriter::<Int32Vector>::open(&job.ali()).map_err(err("ali.ark"))?;
    let mut written = 0;
    'copies: for copy in 0.. {
        let before = written;
        for (key, m) in &utts {
            if written >= frames {
                break 'copies;
            }
            let Some(a) = alis.get(key) else { continue };
            let k = format!("r{copy:04}-{key}");
            fw.write(&k, m).map_err(err("feats.ark"))?;
            aw.write(&k, a).map_err(err("ali.ark"))?;
            written += m.rows();
        }
        if written == before {
            return Err(Error::Usage(
                "bench startup: the fixture has no aligned utterances".into(),
            ));
        }
    }
    fw.close().map_err(err("feats.ark"))?;
    aw.close().map_err(err("ali.ark"))?;
    Ok(Job {
        frames: written,
        ..job
    })
}

/// One finished child: its wall time and its timeline.
struct Run {
    wall: f64,
    marks: Vec<(String, f64)>,
}

fn spawn(exe: &Path, job: &Job, use_gpu: &str, out: &Path) -> Result<std::process::Child> {
    Command::new(exe)
        .arg("acc-stats")
        .arg(format!("--use-gpu={use_gpu}"))
        .arg(job.model())
        .arg(job.feats())
        .arg(job.ali())
        .arg(out)
        .env(crate::timeline::ENV, "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err("starting amtool acc-stats"))
}

fn finish(child: std::process::Child, t0: Instant) -> Result<Run> {
    let out = child
        .wait_with_output()
        .map_err(io_err("waiting for amtool acc-stats"))?;
    let wall = t0.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(Error::Usage(format!(
            "bench startup: amtool acc-stats failed: {stderr}"
        )));
    }
    // The engine's choice (optional) is worth seeing in the bench log.
    for line in stderr
        .lines()
        .filter(|l| l.contains("engine") || l.contains("GPU"))
    {
        eprintln!("{line}");
    }
    let marks = stderr
        .lines()
        .find_map(crate::timeline::parse)
        .unwrap_or_default();
    Ok(Run { wall, marks })
}

/// Seconds spent before each mark since the one before, summed by name, in
/// first-seen order; and the wall time outside `main`.
fn phases(run: &Run) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    let mut prev = 0.0;
    for (name, t) in &run.marks {
        match out.iter_mut().find(|(n, _)| n == name) {
            Some(p) => p.1 += t - prev,
            None => out.push((name.clone(), t - prev)),
        }
        prev = *t;
    }
    out.push(("exec_and_exit".into(), run.wall - prev));
    out
}

pub fn startup(cfg: &BenchConfig, jobs: usize, emit: &mut dyn FnMut(&Json)) -> Result<()> {
    let job = write_job(
        cfg.frames.unwrap_or(76_976),
        cfg.gaussians.unwrap_or(1000),
        cfg.seed,
    )?;
    let exe = std::env::current_exe().map_err(io_err("finding the amtool binary"))?;
    let out = |i: usize| job.dir.path().join(format!("{i}.acc"));
    for use_gpu in USE_GPU {
        finish(spawn(&exe, &job, use_gpu, &out(0))?, Instant::now())?;
        let mut runs = Vec::new();
        for _ in 0..cfg.reps.max(1) {
            let t0 = Instant::now();
            runs.push(finish(spawn(&exe, &job, use_gpu, &out(0))?, t0)?);
        }
        runs.sort_by(|a, b| a.wall.total_cmp(&b.wall));
        let median = &runs[runs.len() / 2];
        let mut line = Json::new()
            .str("case", "startup")
            .str("use_gpu", use_gpu)
            .int("frames", job.frames)
            .int("gaussians", job.gaussians)
            .int("processes", 1)
            .num("seconds", median.wall)
            .num("min_seconds", runs[0].wall)
            .num("max_seconds", runs[runs.len() - 1].wall);
        for (name, s) in phases(median) {
            line = line.num(&format!("phase_{name}"), s);
        }
        emit(&line);

        let t0 = Instant::now();
        let children = (0..jobs.max(1))
            .map(|i| spawn(&exe, &job, use_gpu, &out(i)))
            .collect::<Result<Vec<_>>>()?;
        let mut slowest: Option<Run> = None;
        for c in children {
            let r = finish(c, t0)?;
            if slowest.as_ref().is_none_or(|s| r.wall > s.wall) {
                slowest = Some(r);
            }
        }
        let Some(slowest) = slowest else { continue };
        let mut line = Json::new()
            .str("case", "startup")
            .str("use_gpu", use_gpu)
            .int("frames", job.frames)
            .int("gaussians", job.gaussians)
            .int("processes", jobs.max(1))
            .num("seconds", slowest.wall)
            .num("ratio_to_one", slowest.wall / median.wall);
        // The slowest process's phases (measured from its own start).
        for (name, s) in phases(&slowest) {
            line = line.num(&format!("phase_{name}"), s);
        }
        emit(&line);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_the_gaps_between_marks_summed_by_name() {
        let run = Run {
            wall: 1.0,
            marks: vec![
                ("context".into(), 0.25),
                ("stats".into(), 0.5),
                ("stats".into(), 0.75),
                ("exit".into(), 0.875),
            ],
        };
        let p = phases(&run);
        assert_eq!(
            p,
            vec![
                ("context".to_string(), 0.25),
                ("stats".to_string(), 0.5),
                ("exit".to_string(), 0.125),
                ("exec_and_exit".to_string(), 0.125),
            ]
        );
    }

    #[test]
    fn the_job_has_the_frames_and_gaussians_asked_for() {
        let job = write_job(20_000, 1000, 1).unwrap();
        assert!(
            job.frames >= 20_000 && job.frames < 20_000 + 2_000,
            "{}",
            job.frames
        );
        assert_eq!(job.gaussians, 1000);
        let bytes = std::fs::read(job.model()).unwrap();
        let m = KaldiModel::from_bytes(&bytes).unwrap();
        let total: usize = m.am.pdfs.iter().map(|p| p.weights.len()).sum();
        assert_eq!(total, 1000);
    }
}
