//! `amtool bench`: the benchmark cases of ../shared/bench/README.md on random
//! inputs from a fixed seed, run through any [`Engine`] (so the CUDA engine
//! uses the same program), one JSON object per line.
//!
//! Each case times only the engine calls (the model is loaded and the inputs
//! made beforehand): one warm-up run, then the median of `reps` timed runs.
//! `seconds` is the engine's kernel time where it measures one (CUDA: device
//! events around the kernels, host-device copies excluded, as the PyTorch peer
//! times), else the wall time of the calls; `wall_seconds` is always the wall
//! time and `timing` says which `seconds` is. Its
//! `rel_err_vs_f64` is the largest ‖out − ref‖/‖ref‖ over its outputs (each
//! statistic, the log-likelihoods) against [`crate::engine::reference`] on the
//! first frames of the input — as many as keep the f64 reference cheap, at
//! most `check_frames`; the per-output figures go to stderr.

pub mod align;
pub mod e2e;
pub mod gselect;
pub mod json;
pub mod lattice;
mod lattice_stages;
pub mod random;
pub mod read;
mod replicate;
pub mod startup;

use std::time::Instant;

use crate::engine::{reference, Engine, FrameBatch, FrameTargets, LoadedModel};
use crate::layout::{StateBlockLayout, DEFAULT_BLOCK_STATES};
use crate::model::{AcousticModel, CovKind};
use crate::stats::{ModelAccumulators, UpdateFlags};
use crate::{Error, Result};
use json::Json;
use random::Rng;

/// The cases, in the README's order.
pub const CASES: [&str; 11] = [
    "estep_seed000",
    "score_seed002",
    "score_seed002_var",
    "fullcov_score_seed001",
    "acc_ali",
    "acc_stats_ark",
    "score_ark",
    "estep_fullcov",
    "estep_fullcov_gselect",
    "score_lattice",
    "align_ark",
];

/// Sizes and run options; `None` keeps the papers' size.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub frames: Option<usize>,
    pub gaussians: Option<usize>,
    pub states: Option<usize>,
    pub gauss_per_state: Option<usize>,
    pub dim: Option<usize>,
    /// Timed runs after the warm-up (the median is reported).
    pub reps: usize,
    /// Most frames the f64 reference checks.
    pub check_frames: usize,
    pub seed: u64,
    /// Folder for the read cases' temporary archives (default: the system's).
    pub path: Option<std::path::PathBuf>,
    /// Processes run at once by the `startup` case.
    pub jobs: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            frames: None,
            gaussians: None,
            states: None,
            gauss_per_state: None,
            dim: None,
            reps: 3,
            check_frames: 20_000,
            seed: 1,
            path: None,
            jobs: 8,
        }
    }
}

/// Run case `name` on `engine`, handing each JSON line to `emit`.
pub fn run_case(
    engine: &dyn Engine,
    name: &str,
    cfg: &BenchConfig,
    emit: &mut dyn FnMut(&Json),
) -> Result<()> {
    match name {
        "estep_seed000" => estep(engine, cfg, emit),
        "score_seed002" => score(engine, cfg, false, emit),
        "score_seed002_var" => score(engine, cfg, true, emit),
        "fullcov_score_seed001" => fullcov(engine, cfg, emit),
        "acc_ali" => acc_ali(engine, cfg, emit),
        "acc_stats_ark" => e2e::acc_stats_ark(engine, cfg, emit),
        "score_ark" => e2e::score_ark(engine, cfg, emit),
        "estep_fullcov" => estep_kind(engine, cfg, CovKind::Full, emit),
        "estep_fullcov_gselect" => gselect::estep_fullcov_gselect(engine, cfg, emit),
        "score_lattice" => lattice::score_lattice(engine, cfg, emit),
        "align_ark" => align::align_ark(engine, cfg, emit),
        "read_ark" | "read_ark_compressed" => read::run(name, cfg, emit),
        "startup" => startup::startup(cfg, cfg.jobs, emit),
        _ => Err(Error::Usage(format!(
            "unknown benchmark case {name:?} (cases: {}, and {}, startup)",
            CASES.join(", "),
            read::READ_CASES.join(", ")
        ))),
    }
}

/// CPU seconds this process has used (user + system, all threads), from
/// /proc/self/stat; `None` where that is unavailable.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at state.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (u, s): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
    Some((u + s) / 100.0) // USER_HZ is 100 on Linux
}

/// Median wall time and, where the engine reports one, median kernel time.
#[derive(Debug, Clone, Copy)]
struct Timing {
    wall: f64,
    kernel: Option<f64>,
}

impl Timing {
    /// The figure for `seconds`.
    fn seconds(&self) -> f64 {
        self.kernel.unwrap_or(self.wall)
    }

    /// `seconds`, `wall_seconds` and `timing` keys.
    fn keys(&self, j: Json) -> Json {
        j.num("seconds", self.seconds())
            .num("wall_seconds", self.wall)
            .str(
                "timing",
                if self.kernel.is_some() {
                    "device kernels (events), host-device copies excluded"
                } else {
                    "wall clock of the engine calls"
                },
            )
    }
}

/// Warm up once, then the median wall time of `reps` (≥ 1) runs, and the
/// median of the kernel times `f` returns. Logs the median CPU time too: on a
/// shared machine wall time overstates the cost.
fn time_median(reps: usize, mut f: impl FnMut() -> Result<Option<f64>>) -> Result<Timing> {
    f()?;
    let mut ts = Vec::with_capacity(reps.max(1));
    let mut ks = Vec::with_capacity(reps.max(1));
    let mut cpu = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let c0 = process_cpu_seconds();
        let t = Instant::now();
        let k = f()?;
        ts.push(t.elapsed().as_secs_f64());
        ks.extend(k);
        if let (Some(a), Some(b)) = (c0, process_cpu_seconds()) {
            cpu.push(b - a);
        }
    }
    ts.sort_by(f64::total_cmp);
    ks.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    let wall = ts[ts.len() / 2];
    let kernel = (ks.len() == ts.len()).then(|| ks[ks.len() / 2]);
    if !cpu.is_empty() {
        eprintln!(
            "LOG (amtool bench) wall {wall:.4} s, cpu (all threads) {:.2} s (median of {})",
            cpu[cpu.len() / 2],
            ts.len()
        );
    }
    Ok(Timing { wall, kernel })
}

/// Frames the f64 reference checks: at most `check_frames`, and few enough
/// that the reference does ~4·10⁹ multiply-adds.
fn check_frames(cfg: &BenchConfig, frames: usize, gaussians: usize, k: usize) -> usize {
    let budget = 4e9 / (gaussians.max(1) * k.max(1)) as f64;
    frames
        .min(cfg.check_frames)
        .min(budget.max(1.0) as usize)
        .max(1)
        .min(frames)
}

fn k_of(dim: usize, kind: CovKind) -> usize {
    match kind {
        CovKind::Diagonal => 2 * dim,
        CovKind::Full => dim + dim * (dim + 1) / 2,
    }
}

fn report_errs(case: &str, errs: &[(&str, f64)]) -> f64 {
    let parts: Vec<String> = errs.iter().map(|(n, e)| format!("{n}={e:.3e}")).collect();
    eprintln!(
        "LOG (amtool bench) {case}: rel_err_vs_f64 {}",
        parts.join(" ")
    );
    errs.iter().map(|e| e.1).fold(0.0, f64::max)
}

fn acc_errs(out: &ModelAccumulators, r: &ModelAccumulators) -> Vec<(&'static str, f64)> {
    let flat = |a: &ModelAccumulators,
                f: &dyn Fn(&crate::stats::GmmAccumulator) -> Vec<f64>|
     -> Vec<f64> { a.states.iter().flat_map(f).collect() };
    let occ = |s: &crate::stats::GmmAccumulator| s.occupancy.clone();
    let mean = |s: &crate::stats::GmmAccumulator| s.mean_acc.clone();
    let var = |s: &crate::stats::GmmAccumulator| s.var_acc.clone();
    vec![
        (
            "occupancy",
            reference::rel_err(&flat(out, &occ), &flat(r, &occ)),
        ),
        (
            "sum_x",
            reference::rel_err(&flat(out, &mean), &flat(r, &mean)),
        ),
        (
            "sum_x2",
            reference::rel_err(&flat(out, &var), &flat(r, &var)),
        ),
        (
            "total_loglike",
            reference::rel_err(&[out.total_like], &[r.total_like]),
        ),
    ]
}

fn accumulate_once(
    lm: &mut dyn LoadedModel,
    model: &AcousticModel,
    feats: FrameBatch<'_>,
    t: FrameTargets<'_>,
) -> Result<ModelAccumulators> {
    let mut acc = ModelAccumulators::zeros(model, UpdateFlags::default());
    lm.accumulate(feats, t, &mut acc)?;
    Ok(acc)
}

fn estep(engine: &dyn Engine, cfg: &BenchConfig, emit: &mut dyn FnMut(&Json)) -> Result<()> {
    estep_kind(engine, cfg, CovKind::Diagonal, emit)
}

/// One EM pass of statistics for one GMM: `estep_seed000` (diagonal), or
/// `estep_fullcov` (full covariances, fgmm-global-acc-stats' work; default
/// 256 Gaussians, op count 4·K + 23 per frame and Gaussian, K = D + D(D+1)/2).
fn estep_kind(
    engine: &dyn Engine,
    cfg: &BenchConfig,
    kind: CovKind,
    emit: &mut dyn FnMut(&Json),
) -> Result<()> {
    let case = match kind {
        CovKind::Diagonal => "estep_seed000",
        CovKind::Full => "estep_fullcov",
    };
    let (t, d) = (cfg.frames.unwrap_or(3_125_506), cfg.dim.unwrap_or(40));
    let ms = cfg
        .gaussians
        .map(|m| vec![m])
        .unwrap_or_else(|| match kind {
            CovKind::Diagonal => vec![32, 256, 2048],
            CovKind::Full => vec![256],
        });
    let mut rng = Rng::new(cfg.seed);
    let data = random::features(&mut rng, t, d);
    let feats = FrameBatch::new(&data, d);
    for m in ms {
        let model = random::model(&mut rng, &[m], d, kind);
        let mut lm = engine.load(&model)?;
        let timing = time_median(cfg.reps, || {
            accumulate_once(lm.as_mut(), &model, feats, FrameTargets::Global)?;
            Ok(lm.last_kernel_seconds())
        })?;
        let n = check_frames(cfg, t, m, 2 * d);
        let sub = FrameBatch::new(&data[..n * d], d);
        let out = accumulate_once(lm.as_mut(), &model, sub, FrameTargets::Global)?;
        let r = reference::accumulate(&model, sub, FrameTargets::Global, UpdateFlags::default());
        let err = report_errs(case, &acc_errs(&out, &r));
        let ops = estep_ops(d, kind) * t as f64 * m as f64;
        let shape = Json::new()
            .str("case", case)
            .int("T", t)
            .int("D", d)
            .int("M", m);
        emit(&estep_line(engine, &timing, shape, ops, t, err));
    }
    Ok(())
}

/// The paper's operation count of one (frame, Gaussian) of an E-step:
/// 8D + 23 diagonal, 4K + 23 full (K = D + D(D+1)/2).
fn estep_ops(d: usize, kind: CovKind) -> f64 {
    match kind {
        CovKind::Diagonal => (8 * d + 23) as f64,
        CovKind::Full => (4 * k_of(d, kind) + 23) as f64,
    }
}

/// An E-step case's line: its `shape` keys, the timing, and the rates of
/// `ops` operations over `t` frames, the error and the engine.
fn estep_line(
    engine: &dyn Engine,
    timing: &Timing,
    shape: Json,
    ops: f64,
    t: usize,
    err: f64,
) -> Json {
    let secs = timing.seconds();
    timing
        .keys(shape)
        .num("gflops_paper_count", ops / secs / 1e9)
        .num("frames_per_second", t as f64 / secs)
        .num("rel_err_vs_f64", err)
        .str("engine", engine.name())
        .str("device", &engine.device())
}

/// State log-likelihoods of `feats` in windows of `window` frames.
fn score_windows(
    lm: &mut dyn LoadedModel,
    feats: FrameBatch<'_>,
    window: usize,
    out: &mut [f32],
) -> Result<Option<f64>> {
    let (d, ns) = (feats.dim, lm.num_states());
    let mut kernel = Some(0.0);
    for (w, o) in out.chunks_mut(window * ns).enumerate() {
        let rows = o.len() / ns;
        lm.state_loglikes(
            FrameBatch::new(&feats.data[w * window * d..(w * window + rows) * d], d),
            o,
        )?;
        kernel = kernel.zip(lm.last_kernel_seconds()).map(|(a, b)| a + b);
    }
    Ok(kernel)
}

/// Time scoring and check it; returns (timing, rel_err).
fn time_and_check_scoring(
    engine: &dyn Engine,
    cfg: &BenchConfig,
    case: &str,
    model: &AcousticModel,
    data: &[f32],
    window: usize,
) -> Result<(Timing, f64)> {
    let (d, ns) = (model.dim, model.num_states());
    let frames = data.len() / d;
    let feats = FrameBatch::new(data, d);
    let mut lm = engine.load(model)?;
    let mut out = vec![0f32; frames * ns];
    let timing = time_median(cfg.reps, || {
        score_windows(lm.as_mut(), feats, window, &mut out)
    })?;
    let n = check_frames(cfg, frames, model.num_gaussians(), k_of(d, model.kind));
    let r = reference::state_loglikes(model, FrameBatch::new(&data[..n * d], d));
    let err = report_errs(
        case,
        &[("state_loglikes", reference::rel_err(&out[..n * ns], &r))],
    );
    Ok((timing, err))
}

fn score(
    engine: &dyn Engine,
    cfg: &BenchConfig,
    variable: bool,
    emit: &mut dyn FnMut(&Json),
) -> Result<()> {
    let case = if variable {
        "score_seed002_var"
    } else {
        "score_seed002"
    };
    let s = cfg.states.unwrap_or(5000);
    let d = cfg.dim.unwrap_or(36);
    let frames = cfg.frames.unwrap_or(2560);
    let window = 256.min(frames.max(1));
    let mut rng = Rng::new(cfg.seed.wrapping_add(2));
    let counts = if variable {
        let mean = cfg.gauss_per_state.unwrap_or(16);
        random::skewed_counts(&mut rng, s, mean as f64, 4 * mean)
    } else {
        vec![cfg.gauss_per_state.unwrap_or(256); s]
    };
    let model = random::model(&mut rng, &counts, d, CovKind::Diagonal);
    let data = random::features(&mut rng, frames, d);
    let (timing, err) = time_and_check_scoring(engine, cfg, case, &model, &data, window)?;
    let secs = timing.seconds();
    let g = model.num_gaussians();
    let ops = frames as f64 * g as f64 * (4 * d + 9) as f64;
    let mut j = Json::new().str("case", case).int("states", s);
    j = if variable {
        j.num("gauss_per_state", g as f64 / s as f64)
    } else {
        j.int("gauss_per_state", g / s.max(1))
    };
    j = j.int("D", d).int("frames", frames).int("window", window);
    if variable {
        let layout = StateBlockLayout::new(&counts, DEFAULT_BLOCK_STATES);
        j = j
            .int("block_states", DEFAULT_BLOCK_STATES)
            .num("padding_overhead", layout.padding_overhead());
        // The block size is a parameter: the overhead each candidate would
        // have, and the one `layout::choose_block_states` picks for this model.
        for &b in &crate::layout::CANDIDATE_BLOCK_STATES {
            let o = StateBlockLayout::new(&counts, b).padding_overhead();
            j = j.num(&format!("padding_overhead_b{b}"), o);
        }
        j = j.int(
            "chosen_block_states",
            crate::layout::choose_block_states(&counts),
        );
    }
    emit(
        &timing
            .keys(j)
            .num("gflops_paper_count", ops / secs / 1e9)
            .num("rel_err_vs_f64", err)
            .num("inv_rtf_100fps", frames as f64 / 100.0 / secs)
            .str("engine", engine.name())
            .str("device", &engine.device()),
    );
    Ok(())
}

fn fullcov(engine: &dyn Engine, cfg: &BenchConfig, emit: &mut dyn FnMut(&Json)) -> Result<()> {
    let case = "fullcov_score_seed001";
    let s = cfg.states.unwrap_or(5000);
    let gps = cfg.gauss_per_state.unwrap_or(16);
    let d = cfg.dim.unwrap_or(36);
    let frames = cfg.frames.unwrap_or(2560);
    let window = 256.min(frames.max(1));
    let mut rng = Rng::new(cfg.seed.wrapping_add(1));
    let model = random::model(&mut rng, &vec![gps; s], d, CovKind::Full);
    let data = random::features(&mut rng, frames, d);
    let (timing, err) = time_and_check_scoring(engine, cfg, case, &model, &data, window)?;
    let secs = timing.seconds();
    let n = s * gps;
    let ops = frames as f64 * n as f64 * (5 * d * (d.saturating_sub(1)) / 2 + 4 * d + 9) as f64;
    emit(
        &timing
            .keys(
                Json::new()
                    .str("case", case)
                    .int("gaussians", n)
                    .int("D", d)
                    .int("frames", frames),
            )
            .num("gflops_paper_count", ops / secs / 1e9)
            .num("rel_err_vs_f64", err)
            .num("inv_rtf_100fps", frames as f64 / 100.0 / secs)
            .str("engine", engine.name())
            .str("device", &engine.device()),
    );
    Ok(())
}

/// An alignment: runs of one pdf, 1–10 frames long (HMM states last a few
/// frames), pdfs uniform.
pub fn random_alignment(rng: &mut Rng, frames: usize, pdfs: usize) -> Vec<u32> {
    let mut ali = Vec::with_capacity(frames);
    while ali.len() < frames {
        let pdf = rng.int(0, pdfs - 1) as u32;
        let len = rng.int(1, 10).min(frames - ali.len());
        ali.extend(std::iter::repeat_n(pdf, len));
    }
    ali
}

fn acc_ali(engine: &dyn Engine, cfg: &BenchConfig, emit: &mut dyn FnMut(&Json)) -> Result<()> {
    let case = "acc_ali";
    let pdfs = cfg.states.unwrap_or(2000);
    let mean = cfg.gauss_per_state.unwrap_or(16);
    let d = cfg.dim.unwrap_or(40);
    let frames = cfg.frames.unwrap_or(1_000_000);
    let mut rng = Rng::new(cfg.seed.wrapping_add(4));
    let counts = random::skewed_counts(&mut rng, pdfs, mean as f64, (2.5 * mean as f64) as usize);
    let model = random::model(&mut rng, &counts, d, CovKind::Diagonal);
    let data = random::features(&mut rng, frames, d);
    let ali = random_alignment(&mut rng, frames, pdfs);
    let feats = FrameBatch::new(&data, d);
    let mut lm = engine.load(&model)?;
    let timing = time_median(cfg.reps, || {
        accumulate_once(lm.as_mut(), &model, feats, FrameTargets::Aligned(&ali))?;
        Ok(lm.last_kernel_seconds())
    })?;
    let secs = timing.seconds();
    let n = frames.min(cfg.check_frames);
    let sub = FrameBatch::new(&data[..n * d], d);
    let out = accumulate_once(lm.as_mut(), &model, sub, FrameTargets::Aligned(&ali[..n]))?;
    let r = reference::accumulate(
        &model,
        sub,
        FrameTargets::Aligned(&ali[..n]),
        UpdateFlags::default(),
    );
    let err = report_errs(case, &acc_errs(&out, &r));
    let gauss_frames: f64 = ali.iter().map(|&p| counts[p as usize] as f64).sum();
    let ops = (8 * d + 23) as f64 * gauss_frames;
    emit(
        &timing
            .keys(
                Json::new()
                    .str("case", case)
                    .int("pdfs", pdfs)
                    .int("gaussians", model.num_gaussians())
                    .int("D", d)
                    .int("frames", frames),
            )
            .num("gflops_paper_count", ops / secs / 1e9)
            .num("rel_err_vs_f64", err)
            .str("engine", engine.name())
            .str("device", &engine.device()),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuEngine;

    #[test]
    fn every_case_prints_the_readme_keys_on_small_inputs() {
        let engine = CpuEngine::new(1).unwrap();
        let cfg = BenchConfig {
            frames: Some(300),
            gaussians: Some(9),
            states: Some(7),
            gauss_per_state: Some(5),
            dim: Some(3),
            reps: 1,
            ..BenchConfig::default()
        };
        let keys: [(&str, &[&str]); 6] = [
            ("estep_seed000", &["T", "D", "M"]),
            ("estep_fullcov_gselect", &["T", "D", "M", "selected"]),
            (
                "score_seed002",
                &[
                    "states",
                    "gauss_per_state",
                    "D",
                    "frames",
                    "window",
                    "inv_rtf_100fps",
                ],
            ),
            (
                "score_seed002_var",
                &[
                    "states",
                    "gauss_per_state",
                    "D",
                    "frames",
                    "window",
                    "inv_rtf_100fps",
                    "padding_overhead",
                ],
            ),
            (
                "fullcov_score_seed001",
                &["gaussians", "D", "frames", "inv_rtf_100fps"],
            ),
            ("acc_ali", &["pdfs", "gaussians", "D", "frames"]),
        ];
        for (case, shape) in keys {
            let mut lines = Vec::new();
            run_case(&engine, case, &cfg, &mut |j| lines.push(j.clone())).unwrap();
            assert_eq!(lines.len(), 1, "{case}");
            let j = &lines[0];
            assert_eq!(j.get("case"), Some(format!("\"{case}\"").as_str()));
            for k in shape.iter().chain(&[
                "seconds",
                "gflops_paper_count",
                "rel_err_vs_f64",
                "engine",
                "device",
            ]) {
                assert!(j.get(k).is_some(), "{case}: no key {k}");
            }
            let err: f64 = j.get("rel_err_vs_f64").unwrap().parse().unwrap();
            assert!(err < 1e-4, "{case}: rel_err_vs_f64 {err}");
        }
        assert!(run_case(&engine, "nope", &cfg, &mut |_| ()).is_err());
    }
}
