//! Gaussian selection (`FrameTargets::Selected`: fgmm-global-acc-stats /
//! gmm-global-acc-stats --gselect) on the CUDA engine ≡ the CPU engine (the
//! reference: Kaldi's float posteriors and f64 sums) on random models,
//! selections and weights: diagonal and full covariances, dimensions 1–80,
//! 1–300 components, 1–24 selected a frame (repeats included), weights with
//! zeros, frame counts that leave partial tiles and components with several
//! items; and through the training tool's batches (`GlobalAccStats`, lent
//! page-locked memory).
//!
//! Tolerances, as tests/cuda_engine.rs: each engine within ‖out − ref‖/‖ref‖
//! ≤ 1e-5 of the f64 reference for every statistic and the total
//! log-likelihood (full covariances: `tol_full_stats`, growing with the
//! dimension: the f32 log-likelihoods of either engine are sums of K
//! products of either sign). The two engines sum in different orders (the
//! GPU's log-likelihoods as x·(b + Ax), its statistics in f32 over tiles of
//! 64 pairs; the CPU Kaldi's f64 frame by frame), so they are held to each
//! other at twice that.
//!
//! Without a GPU every test prints `skipped: no CUDA device` and passes;
//! with `AMTOOL_REQUIRE_GPU=1` a missing GPU fails them.

use std::sync::OnceLock;

use amtool::engine::cpu::CpuEngine;
use amtool::engine::cuda::{engine_for_tests, CudaEngine};
use amtool::engine::reference::acc_rel_err;
use amtool::engine::{Engine, FrameBatch, FrameTargets, Selection};
use amtool::model::{AcousticModel, CovKind};
use amtool::stats::{ModelAccumulators, UpdateFlags};
use amtool::train::acc_stats::{GlobalAccStats, UttOutcome};
use proptest::prelude::*;

mod gmm_ref;
use gmm_ref::Rng;
use gmm_ref::*;

fn engine() -> Option<&'static CudaEngine> {
    static E: OnceLock<Option<CudaEngine>> = OnceLock::new();
    E.get_or_init(engine_for_tests).as_ref()
}

fn cpu() -> &'static CpuEngine {
    static E: OnceLock<CpuEngine> = OnceLock::new();
    E.get_or_init(|| CpuEngine::new(2).expect("CPU engine"))
}

#[derive(Debug, Clone)]
struct Case {
    dim: usize,
    kind: CovKind,
    gaussians: usize,
    frames: usize,
    /// Most components selected a frame.
    most: usize,
    seed: u64,
}

fn case(kind: CovKind, max_dim: usize, max_frames: usize) -> impl Strategy<Value = Case> {
    (
        1usize..=max_dim,
        1usize..=300,
        1usize..=max_frames,
        1usize..=24,
        any::<u64>(),
    )
        .prop_map(move |(dim, gaussians, frames, most, seed)| Case {
            dim,
            kind,
            gaussians,
            frames,
            most,
            seed,
        })
}

/// A random selection: 1–`most` components a frame (repeats allowed),
/// weights 1, 0.5, 2.25 or (one in eight) 0.
struct RandomSelection {
    offsets: Vec<usize>,
    components: Vec<u32>,
    weights: Vec<f32>,
}

impl RandomSelection {
    fn new(rng: &mut Rng, gaussians: usize, frames: usize, most: usize) -> Self {
        let mut s = RandomSelection {
            offsets: vec![0],
            components: Vec::new(),
            weights: Vec::new(),
        };
        for _ in 0..frames {
            for _ in 0..1 + rng.below(most) {
                s.components.push(rng.below(gaussians) as u32);
            }
            s.offsets.push(s.components.len());
            s.weights
                .push([1.0, 0.5, 2.25, 1.0, 1.0, 0.5, 1.0, 0.0][rng.below(8)]);
        }
        s
    }

    fn targets(&self, weighted: bool) -> FrameTargets<'_> {
        FrameTargets::Selected(Selection {
            offsets: &self.offsets,
            components: &self.components,
            weights: weighted.then_some(&self.weights[..]),
        })
    }
}

fn accumulate(
    e: &dyn Engine,
    m: &AcousticModel,
    feats: &[f32],
    t: FrameTargets<'_>,
) -> Result<(ModelAccumulators, f64), String> {
    let mut lm = e.load(m).map_err(|e| e.to_string())?;
    let mut acc = ModelAccumulators::zeros(m, UpdateFlags::default());
    let like = lm
        .accumulate(FrameBatch::new(feats, m.dim), t, &mut acc)
        .map_err(|e| e.to_string())?;
    Ok((acc, like))
}

fn tol(m: &AcousticModel) -> f64 {
    match m.kind {
        CovKind::Diagonal => TOL,
        CovKind::Full => tol_full_stats(m.dim),
    }
}

/// GPU and CPU statistics of one case, each against f64 and against each
/// other; the GPU's twice (the same bits).
fn check(e: &dyn Engine, c: &Case) -> Result<(), String> {
    let mut rng = Rng(c.seed);
    let m = random_model(&mut rng, c.dim, c.kind, &[c.gaussians]);
    let feats = random_feats(&mut rng, c.frames, c.dim);
    let sel = RandomSelection::new(&mut rng, c.gaussians, c.frames, c.most);
    for weighted in [true, false] {
        let t = sel.targets(weighted);
        let (g, gl) = accumulate(e, &m, &feats, t)?;
        let (h, _) = accumulate(cpu(), &m, &feats, t)?;
        let want = ref_accumulate(&m, &feats, t);
        let what = if weighted { "weighted" } else { "unweighted" };
        compare_acc(&g, &want).map_err(|e| format!("{what}, cuda vs f64: {e}"))?;
        compare_acc(&h, &want).map_err(|e| format!("{what}, cpu vs f64: {e}"))?;
        let apart = acc_rel_err(&g, &h);
        if apart > 2.0 * tol(&m) {
            return Err(format!("{what}: cuda vs cpu rel err {apart:.3e}"));
        }
        if (gl - g.total_like).abs() > 1e-9 * gl.abs().max(1.0) {
            return Err(format!(
                "{what}: returned {gl}, accumulated {}",
                g.total_like
            ));
        }
        let (again, _) = accumulate(e, &m, &feats, t)?;
        if again != g {
            return Err(format!("{what}: two identical runs differ"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: gmm_ref::cases(24), max_shrink_iters: 20, ..ProptestConfig::default() })]

    #[test]
    fn cuda_diag_gselect_matches_cpu_engine(c in case(CovKind::Diagonal, 80, 3000)) {
        let Some(e) = engine() else { return Ok(()) };
        check(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
    }

    #[test]
    fn cuda_full_gselect_matches_cpu_engine(c in case(CovKind::Full, 64, 1500)) {
        let Some(e) = engine() else { return Ok(()) };
        check(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
    }
}

/// Fixed edge cases: dimension 1 and one component; a component with
/// several items (more than 4096 pairs); the benchmark's shape in small
/// (D = 60, 20 of 256 components a frame; diagonal 20 of 2048); a
/// dimension whose A is streamed in chunks (full D = 200).
fn edge_cases() -> Vec<Case> {
    [
        (1, CovKind::Diagonal, 1, 7, 1),
        (1, CovKind::Full, 1, 7, 3),
        (13, CovKind::Diagonal, 2, 5000, 4),
        (9, CovKind::Full, 3, 6000, 5),
        (60, CovKind::Full, 256, 3000, 20),
        (39, CovKind::Diagonal, 2048, 4000, 20),
        (200, CovKind::Full, 5, 70, 3),
        (200, CovKind::Diagonal, 5, 70, 3),
    ]
    .iter()
    .enumerate()
    .map(|(i, &(dim, kind, gaussians, frames, most))| Case {
        dim,
        kind,
        gaussians,
        frames,
        most,
        seed: 100 + i as u64,
    })
    .collect()
}

#[test]
fn cuda_gselect_edge_cases() {
    let Some(e) = engine() else { return };
    for c in edge_cases() {
        check(e, &c).unwrap_or_else(|m| panic!("{c:?}: {m}"));
    }
    // Every weight 0: nothing accumulated.
    let mut rng = Rng(5);
    let m = random_model(&mut rng, 6, CovKind::Full, &[4]);
    let feats = random_feats(&mut rng, 9, 6);
    let mut sel = RandomSelection::new(&mut rng, 4, 9, 3);
    sel.weights.fill(0.0);
    let (g, like) = accumulate(e, &m, &feats, sel.targets(true)).unwrap();
    assert_eq!(g, ModelAccumulators::zeros(&m, UpdateFlags::default()));
    assert_eq!(like, 0.0);
}

/// The reference side of these checks, without a GPU: the CPU engine on
/// the edge cases is within the tolerances of f64 (so a failure above is
/// the GPU's).
#[test]
fn cpu_engine_meets_the_gselect_tolerances() {
    for c in edge_cases() {
        check(cpu(), &c).unwrap_or_else(|m| panic!("{c:?}: {m}"));
    }
}

/// Bad selections are errors naming the frame, never panics or silent
/// zeros.
#[test]
fn cuda_gselect_refuses_bad_selections() {
    let Some(e) = engine() else { return };
    let mut rng = Rng(9);
    let m = random_model(&mut rng, 4, CovKind::Diagonal, &[3]);
    let feats = random_feats(&mut rng, 3, 4);
    let cases: [(&[usize], &[u32], &str); 3] = [
        (&[0, 1, 1, 2], &[0, 1], "frame 1"),
        (&[0, 1, 2, 3], &[0, 3, 1], "frame 1"),
        (&[0, 1, 2], &[0, 1], "offsets"),
    ];
    for (offsets, components, want) in cases {
        let t = FrameTargets::Selected(Selection {
            offsets,
            components,
            weights: None,
        });
        let err = accumulate(e, &m, &feats, t).unwrap_err();
        assert!(err.contains(want), "{err}");
    }
}

/// The training tool's batches (`GlobalAccStats` with `--gselect` and
/// `--weights`: lent page-locked memory, deferred batches) on the GPU give
/// the CPU engine's statistics, within the tolerances above; the
/// utterances' weights and log-likelihood too.
#[test]
fn cuda_gselect_through_global_acc_stats() {
    let Some(e) = engine() else { return };
    for (kind, dim, gaussians) in [(CovKind::Diagonal, 39, 64), (CovKind::Full, 20, 32)] {
        let mut rng = Rng(21 + dim as u64);
        let m = random_model(&mut rng, dim, kind, &[gaussians]);
        let utts: Vec<(Vec<f32>, Vec<f32>, Vec<Vec<i32>>)> = [300usize, 1, 70_000, 25, 300_000]
            .iter()
            .map(|&n| {
                let feats = random_feats(&mut rng, n, dim);
                let weights = (0..n).map(|_| [0.0, 1.0, 0.75][rng.below(3)]).collect();
                let gselect = (0..n)
                    .map(|_| {
                        (0..1 + rng.below(5))
                            .map(|_| rng.below(gaussians) as i32)
                            .collect()
                    })
                    .collect();
                (feats, weights, gselect)
            })
            .collect();
        let run = |engine: &dyn Engine| {
            let mut acc = GlobalAccStats::new(engine, &m, UpdateFlags::default()).unwrap();
            let mut weight = 0.0;
            for (u, (f, w, g)) in utts.iter().enumerate() {
                let out = acc
                    .add_utterance(&format!("u{u}"), f.clone(), g.len(), dim, Some(w), Some(g))
                    .unwrap();
                let UttOutcome::Done { weight: uw } = out else {
                    panic!("{out:?}")
                };
                weight += uw;
            }
            let like = acc.take_like().unwrap();
            // Occupancies, first- and (uncentred) second-order sums.
            let stats = match kind {
                CovKind::Diagonal => {
                    let a = acc.into_diag().unwrap();
                    [a.occupancy, a.mean_accs, a.var_accs]
                }
                CovKind::Full => {
                    let a = acc.into_full().unwrap();
                    let second = a.uncentered_covar_accs();
                    [a.occupancy, a.mean_accs, second]
                }
            };
            (stats, like, weight)
        };
        let (gs, gl, gw) = run(e);
        let (cs, cl, cw) = run(cpu());
        assert_eq!(gw, cw);
        let t = tol(&m);
        for (g, c) in gs.iter().zip(&cs) {
            let err = rel_err(g.iter().copied(), c.iter().copied());
            assert!(err < 2.0 * t, "{kind:?}: statistics rel err {err:.3e}");
        }
        assert!(
            (gl - cl).abs() < 2.0 * t * cl.abs(),
            "{kind:?}: like {gl} vs {cl}"
        );
    }
}
