//! CUDA engine ≡ a float64 reference, on random models: every kernel
//! (state log-likelihoods on the padded blocks, component log-likelihoods,
//! statistics for one GMM, for aligned frames and for weighted (state, weight)
//! targets; diagonal and full covariances), with 1–100 Gaussians per state,
//! dimensions 1–80 and frame counts that leave partial tiles.
//!
//! Tolerance: ‖out − ref‖ / ‖ref‖ ≤ 1e-5 for each output (the bound the
//! benchmarks are held to), except full-covariance statistics (a bound
//! growing with the dimension, see
//! `tol_full_stats`); float32 log-likelihoods land near 1e-7.
//!
//! Without a GPU every test prints `skipped: no CUDA device` and passes;
//! with `AMTOOL_REQUIRE_GPU=1` a missing GPU fails them.

use std::sync::OnceLock;

use amtool::engine::cuda::{engine_for_tests, CudaEngine};
use amtool::engine::reference::acc_rel_err;
use amtool::engine::{Engine, FrameBatch, FrameTargets};
use amtool::model::{AcousticModel, CovKind};
use amtool::stats::{ModelAccumulators, UpdateFlags};
use proptest::prelude::*;

mod gmm_ref;
use gmm_ref::*;

fn engine() -> Option<&'static CudaEngine> {
    static E: OnceLock<Option<CudaEngine>> = OnceLock::new();
    E.get_or_init(engine_for_tests).as_ref()
}

/// The engine with the tensor cores off (`AMTOOL_CUDA_TC=0`): the FP32
/// scoring kernels that devices before sm_80 run.
fn engine_fp32() -> Option<&'static CudaEngine> {
    static E: OnceLock<Option<CudaEngine>> = OnceLock::new();
    E.get_or_init(|| {
        engine_for_tests()?;
        Some(CudaEngine::with_tensor_cores("0").expect("a CUDA engine opened a moment ago"))
    })
    .as_ref()
}

#[derive(Debug, Clone)]
struct Case {
    dim: usize,
    kind: CovKind,
    counts: Vec<usize>,
    frames: usize,
    seed: u64,
}

fn case(
    kind: CovKind,
    max_states: usize,
    max_g: usize,
    max_frames: usize,
) -> impl Strategy<Value = Case> {
    (
        1usize..=80,
        prop::collection::vec(1usize..=max_g, 1..=max_states),
        1usize..=max_frames,
        any::<u64>(),
    )
        .prop_map(move |(dim, counts, frames, seed)| Case {
            dim,
            kind,
            counts,
            frames,
            seed,
        })
}

fn check_state_loglikes(e: &CudaEngine, c: &Case) -> Result<(), String> {
    let mut rng = Rng(c.seed);
    let m = random_model(&mut rng, c.dim, c.kind, &c.counts);
    let feats = random_feats(&mut rng, c.frames, c.dim);
    let mut lm = e.load(&m).map_err(|e| e.to_string())?;
    let s = m.num_states();
    let mut out = vec![f32::NAN; c.frames * s]; // poison: every value must be written
    lm.state_loglikes(FrameBatch::new(&feats, c.dim), &mut out)
        .map_err(|e| e.to_string())?;
    let mut reference = Vec::with_capacity(out.len());
    for t in 0..c.frames {
        let x = &feats[t * c.dim..(t + 1) * c.dim];
        for st in 0..s {
            reference.push(log_sum_exp(&comp_lls(&m, st, x)));
        }
    }
    let err = rel_err(out.iter().map(|&v| f64::from(v)), reference.iter().copied());
    if err > TOL {
        return Err(format!("state_loglikes rel err {err:.3e}"));
    }
    // Component log-likelihoods of the last state.
    let st = s - 1;
    let g = c.counts[st];
    let mut comp = vec![f32::NAN; c.frames * g];
    lm.component_loglikes(st, FrameBatch::new(&feats, c.dim), &mut comp)
        .map_err(|e| e.to_string())?;
    let reference: Vec<f64> = (0..c.frames)
        .flat_map(|t| comp_lls(&m, st, &feats[t * c.dim..(t + 1) * c.dim]))
        .collect();
    let err = rel_err(
        comp.iter().map(|&v| f64::from(v)),
        reference.iter().copied(),
    );
    if err > TOL {
        return Err(format!("component_loglikes rel err {err:.3e}"));
    }
    Ok(())
}

/// Statistics for all three target kinds.
fn check_accumulate(e: &CudaEngine, c: &Case) -> Result<(), String> {
    let mut rng = Rng(c.seed);
    let m = random_model(&mut rng, c.dim, c.kind, &c.counts);
    let feats = random_feats(&mut rng, c.frames, c.dim);
    let s = m.num_states();
    let mut lm = e.load(&m).map_err(|e| e.to_string())?;
    let batch = FrameBatch::new(&feats, c.dim);

    // Global: the first state as a UBM.
    let gm = AcousticModel {
        dim: m.dim,
        kind: m.kind,
        states: vec![m.states[0].clone()],
    };
    let mut glm = e.load(&gm).map_err(|e| e.to_string())?;
    let mut acc = ModelAccumulators::zeros(&gm, UpdateFlags::default());
    let ret = glm
        .accumulate(batch, FrameTargets::Global, &mut acc)
        .map_err(|e| e.to_string())?;
    let want = ref_accumulate(&gm, &feats, FrameTargets::Global);
    compare_acc(&acc, &want).map_err(|e| format!("global: {e}"))?;
    if (ret - acc.total_like).abs() > 1e-9 * ret.abs().max(1.0) {
        return Err(format!(
            "global: returned {ret}, accumulated {}",
            acc.total_like
        ));
    }

    // Aligned.
    let ali: Vec<u32> = (0..c.frames).map(|_| rng.below(s) as u32).collect();
    let mut acc = ModelAccumulators::zeros(&m, UpdateFlags::default());
    lm.accumulate(batch, FrameTargets::Aligned(&ali), &mut acc)
        .map_err(|e| e.to_string())?;
    let want = ref_accumulate(&m, &feats, FrameTargets::Aligned(&ali));
    compare_acc(&acc, &want).map_err(|e| format!("aligned: {e}"))?;

    // Weighted: 0–3 pairs per frame.
    let mut offsets = vec![0usize];
    let mut pairs = Vec::new();
    for _ in 0..c.frames {
        for _ in 0..rng.below(4) {
            pairs.push((rng.below(s) as u32, (0.05 + rng.uniform()) as f32));
        }
        offsets.push(pairs.len());
    }
    let mut acc = ModelAccumulators::zeros(&m, UpdateFlags::default());
    lm.accumulate(
        batch,
        FrameTargets::Weighted {
            offsets: &offsets,
            pairs: &pairs,
        },
        &mut acc,
    )
    .map_err(|e| e.to_string())?;
    let want = ref_accumulate(
        &m,
        &feats,
        FrameTargets::Weighted {
            offsets: &offsets,
            pairs: &pairs,
        },
    );
    compare_acc(&acc, &want).map_err(|e| format!("weighted: {e}"))?;

    // Determinism: the same inputs give the same bits.
    let mut again = ModelAccumulators::zeros(&m, UpdateFlags::default());
    lm.accumulate(
        batch,
        FrameTargets::Weighted {
            offsets: &offsets,
            pairs: &pairs,
        },
        &mut again,
    )
    .map_err(|e| e.to_string())?;
    if again != acc {
        return Err("weighted statistics differ between two identical runs".into());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: gmm_ref::cases(24), max_shrink_iters: 20, ..ProptestConfig::default() })]

    #[test]
    fn cuda_diag_state_and_component_loglikes_match_f64(c in case(CovKind::Diagonal, 150, 100, 3000)) {
        let Some(e) = engine() else { return Ok(()) };
        check_state_loglikes(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
    }

    #[test]
    fn cuda_full_state_and_component_loglikes_match_f64(c in case(CovKind::Full, 70, 20, 600)) {
        let Some(e) = engine() else { return Ok(()) };
        check_state_loglikes(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
    }

    /// The FP32 scoring kernels (tensor cores off) on the same random models.
    #[test]
    fn cuda_fp32_full_loglikes_match_f64(c in case(CovKind::Full, 70, 20, 600)) {
        let Some(e) = engine_fp32() else { return Ok(()) };
        check_state_loglikes(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
    }

    #[test]
    fn cuda_diag_statistics_match_f64(c in case(CovKind::Diagonal, 40, 100, 5000)) {
        let Some(e) = engine() else { return Ok(()) };
        check_accumulate(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
    }

    #[test]
    fn cuda_full_statistics_match_f64(c in case(CovKind::Full, 6, 20, 1500)) {
        let Some(e) = engine() else { return Ok(()) };
        check_accumulate(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
    }
}

/// Small diagonal GMMs: every state within 32 Gaussians, so the statistics
/// take one pass through the lane kernel (`accum_stats` with LSTATS: one warp
/// a stream of entries, lane g = Gaussian g) up to D = 48, and through the
/// tiled kernel at GB = 32 above it.
fn small_gmm_case() -> impl Strategy<Value = Case> {
    (
        1usize..=60,
        prop::collection::vec(1usize..=32, 1..=40),
        1usize..=3000,
        any::<u64>(),
    )
        .prop_map(|(dim, counts, frames, seed)| Case {
            dim,
            kind: CovKind::Diagonal,
            counts,
            frames,
            seed,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: gmm_ref::cases(24), max_shrink_iters: 20, ..ProptestConfig::default() })]

    #[test]
    fn cuda_small_gmm_statistics_match_f64_and_cpu(c in small_gmm_case()) {
        let Some(e) = engine() else { return Ok(()) };
        check_accumulate(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
        check_against_cpu(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
    }
}

/// The lane statistics kernel's edges: one frame; item counts that are not
/// multiples of its 32-entry tiles (33: a warp with one entry and warps
/// with none; 4097: a last item of one entry); states of exactly 1 and
/// exactly 32 Gaussians (the global model is the first state: 1 or 32);
/// D = 1, the benchmark's 40, the largest the kernel takes (48) and the
/// first it leaves to the tiled kernel (49).
#[test]
fn cuda_lane_statistics_edge_cases_match_f64() {
    let Some(e) = engine() else { return };
    let diag = |dim, counts: Vec<usize>, frames, seed| Case {
        dim,
        kind: CovKind::Diagonal,
        counts,
        frames,
        seed,
    };
    let cases = [
        diag(40, vec![1, 32], 1, 31),
        diag(40, vec![32, 1], 1, 32),
        diag(40, vec![32, 1], 33, 33),
        diag(13, vec![1, 32, 17], 4097, 34),
        diag(48, vec![32, 1, 5], 1000, 35),
        diag(49, vec![32, 1], 97, 36),
        diag(1, vec![32, 1], 65, 37),
        diag(39, vec![31, 32, 1, 2], 2047, 38),
        // Over 64 statistics items a group (256 entries an item): the
        // reduction sums them in 8 runs at once (`reduce_block`).
        diag(13, vec![32, 3], 40_000, 39),
    ];
    for c in &cases {
        check_accumulate(e, c).unwrap_or_else(|m| panic!("{c:?}: {m}"));
        check_against_cpu(e, c).unwrap_or_else(|m| panic!("{c:?}: {m}"));
    }
    let Some(f) = engine_fp32() else { return };
    for c in &cases {
        check_accumulate(f, c).unwrap_or_else(|m| panic!("FP32 {c:?}: {m}"));
    }
}

/// Fixed edge cases: one frame, one Gaussian, dimension 1; a tile boundary
/// plus one; a block of exactly 64 states and one more; the largest sizes.
#[test]
fn cuda_edge_cases_match_f64() {
    let Some(e) = engine() else { return };
    let cases = [
        Case {
            dim: 1,
            kind: CovKind::Diagonal,
            counts: vec![1],
            frames: 1,
            seed: 1,
        },
        Case {
            dim: 1,
            kind: CovKind::Full,
            counts: vec![1],
            frames: 1,
            seed: 2,
        },
        Case {
            dim: 39,
            kind: CovKind::Diagonal,
            counts: vec![3; 65],
            frames: 65,
            seed: 3,
        },
        Case {
            dim: 80,
            kind: CovKind::Diagonal,
            counts: (1..=100).collect(),
            frames: 5000,
            seed: 4,
        },
        Case {
            dim: 80,
            kind: CovKind::Full,
            counts: vec![2, 1, 3],
            frames: 97,
            seed: 5,
        },
        Case {
            dim: 40,
            kind: CovKind::Diagonal,
            counts: vec![100, 1],
            frames: 4097,
            seed: 6,
        },
    ];
    for c in &cases {
        check_state_loglikes(e, c).unwrap_or_else(|m| panic!("{c:?}: {m}"));
        check_accumulate(e, c).unwrap_or_else(|m| panic!("{c:?}: {m}"));
    }
    // The FP32 kernels (tensor cores off: statistics and scoring as devices
    // before sm_80 run them).
    let Some(f) = engine_fp32() else { return };
    for c in &cases {
        check_state_loglikes(f, c).unwrap_or_else(|m| panic!("FP32 {c:?}: {m}"));
        check_accumulate(f, c).unwrap_or_else(|m| panic!("FP32 {c:?}: {m}"));
    }
}

/// Long z: the fullcov_score shape in small (z of 703 rows; three blocks,
/// splits, a partial tile) and the first dimension whose z is too long for
/// the resident tensor-core kernel, through the K-chunked kernel and
/// through the FP32 one.
#[test]
fn cuda_long_z_edge_cases_match_f64() {
    let (Some(e), Some(f)) = (engine(), engine_fp32()) else {
        return;
    };
    for c in [
        Case {
            dim: 36,
            kind: CovKind::Full,
            counts: (0..150).map(|s| 1 + s % 17).collect(),
            frames: 300,
            seed: 7,
        },
        Case {
            dim: 18,
            kind: CovKind::Full,
            counts: vec![5, 1, 9],
            frames: 129,
            seed: 8,
        },
    ] {
        check_state_loglikes(e, &c).unwrap_or_else(|m| panic!("{c:?}: {m}"));
        check_state_loglikes(f, &c).unwrap_or_else(|m| panic!("FP32 {c:?}: {m}"));
    }
}

/// Deferred statistics (the GPU computes batch n while the host prepares
/// batch n+1): batches of aligned frames sent with `accumulate_deferred` and
/// settled once equal the f64 reference over all frames; a plain
/// `accumulate` while some are pending is an error, not a mix-up.
#[test]
fn cuda_deferred_statistics_match_f64() {
    let Some(e) = engine() else { return };
    let mut rng = Rng(11);
    let (d, frames) = (13, 5000);
    let m = random_model(&mut rng, d, CovKind::Diagonal, &[3, 40, 1, 17]);
    let feats = random_feats(&mut rng, frames, d);
    let ali: Vec<u32> = (0..frames).map(|_| rng.below(4) as u32).collect();
    let mut lm = e.load(&m).unwrap();
    let mut acc = ModelAccumulators::zeros(&m, UpdateFlags::default());
    let mut like = 0.0;
    for (t0, t1) in [(0, 1700), (1700, 1701), (1701, frames)] {
        let batch = FrameBatch::new(&feats[t0 * d..t1 * d], d);
        like += lm
            .accumulate_deferred(batch, FrameTargets::Aligned(&ali[t0..t1]), &mut acc)
            .unwrap()
            .unwrap_or(0.0);
    }
    let mut other = ModelAccumulators::zeros(&m, UpdateFlags::default());
    let err = lm
        .accumulate(
            FrameBatch::new(&feats, d),
            FrameTargets::Aligned(&ali),
            &mut other,
        )
        .unwrap_err();
    assert!(err.to_string().contains("settled"), "{err}");
    like += lm.settle(&mut acc).unwrap();
    assert_eq!(lm.settle(&mut acc).unwrap(), 0.0, "settled twice");
    let want = ref_accumulate(&m, &feats, FrameTargets::Aligned(&ali));
    compare_acc(&acc, &want).unwrap();
    assert!(
        (like - want.total_like).abs() <= 1e-5 * want.total_like.abs(),
        "{like} vs {}",
        want.total_like
    );
    // After settling, plain calls work again.
    lm.accumulate(
        FrameBatch::new(&feats, d),
        FrameTargets::Aligned(&ali),
        &mut other,
    )
    .unwrap();
    compare_acc(&other, &want).unwrap();
}

/// `state_loglikes_subset` on the GPU (every state scored, each frame's
/// utterance's columns gathered on the device, only those copied back) is
/// `state_loglikes`' columns bit for bit: 10,000 frames, so the call is cut
/// into two chunks (8,192 + 1,808) with utterances across the cut; 300
/// states (5 blocks); tensor cores and FP32 kernels; the fixture's model
/// too. Bad subsets are errors.
#[test]
fn cuda_state_subsets_are_the_full_scores_columns() {
    use amtool::bench::random as br;
    let (Some(tc), Some(fp32)) = (engine(), engine_fp32()) else {
        return;
    };
    let mut rng = br::Rng::new(21);
    let counts = br::skewed_counts(&mut rng, 300, 8.0, 60);
    let random = br::model(&mut rng, &counts, 39, CovKind::Diagonal);
    let bytes = std::fs::read("testdata/kaldi/final.mdl").unwrap();
    let kaldi = amtool_formats::kaldi::model::KaldiModel::from_bytes(&bytes).unwrap();
    let fixture = AcousticModel::from_am_diag_gmm(&kaldi.am);
    let frames = 10_000;
    let data = br::features(&mut rng, frames, 39);
    let feats = FrameBatch::new(&data, 39);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (name, e) in [("tensor cores", tc), ("FP32", fp32)] {
        for m in [&random, &fixture] {
            let ns = m.num_states();
            let subsets = br::state_subsets(&mut rng, frames, ns, 700);
            let mut lm = e.load(m).unwrap();
            let mut all = vec![0f32; frames * ns];
            lm.state_loglikes(feats, &mut all).unwrap();
            let mut want = vec![0f32; subsets.output_len()];
            subsets.gather(&all, ns, &mut want);
            let mut got = vec![f32::NAN; want.len()];
            lm.state_loglikes_subset(feats, &subsets, &mut got).unwrap();
            assert_eq!(bits(&got), bits(&want), "{name}, {ns} states");
            assert!(lm
                .state_loglikes_subset(feats, &subsets, &mut got[1..])
                .is_err());
        }
    }
}

/// Bad inputs are errors, never panics.
#[test]
fn cuda_refuses_bad_inputs() {
    let Some(e) = engine() else { return };
    let mut rng = Rng(9);
    let m = random_model(&mut rng, 4, CovKind::Diagonal, &[2, 3]);
    let mut lm = e.load(&m).unwrap();
    let feats = random_feats(&mut rng, 3, 5);
    let mut out = vec![0f32; 6];
    assert!(lm
        .state_loglikes(FrameBatch::new(&feats, 5), &mut out)
        .is_err());
    let feats = random_feats(&mut rng, 3, 4);
    let mut acc = ModelAccumulators::zeros(&m, UpdateFlags::default());
    let err = lm
        .accumulate(
            FrameBatch::new(&feats, 4),
            FrameTargets::Aligned(&[0, 1, 7]),
            &mut acc,
        )
        .unwrap_err();
    assert!(err.to_string().contains("state 7"), "{err}");
    assert!(lm
        .component_loglikes(2, FrameBatch::new(&feats, 4), &mut out)
        .is_err());
}

/// The benchmark shapes of ../shared/bench/README.md on the GPU, timed with
/// the features already on the device (run with `--ignored --nocapture`).
/// `amtool bench --engine cuda` prints the same cases; this probe exists so
/// kernel work can be measured without the CLI.
#[test]
#[ignore]
fn cuda_bench_probe() {
    let Some(e) = engine() else { return };
    let only = std::env::var("AMTOOL_PROBE").unwrap_or_default();
    let want = |name: &str| only.is_empty() || only.split(',').any(|o| o == name);
    let mut rng = Rng(2026);
    if want("estep") {
        let (t, d) = (3_125_506usize, 40usize);
        let feats = random_feats(&mut rng, t, d);
        for mm in [32usize, 256, 2048] {
            let m = random_model(&mut rng, d, CovKind::Diagonal, &[mm]);
            let mut lm = amtool::engine::cuda::model::CudaModel::new(e, &m).unwrap();
            if mm == 32 {
                eprint!("{}", lm.kernel_report());
            }
            let mut acc = ModelAccumulators::zeros(&m, UpdateFlags::default());
            let secs = lm
                .time_accumulate(
                    FrameBatch::new(&feats, d),
                    FrameTargets::Global,
                    3,
                    &mut acc,
                )
                .unwrap();
            // Accuracy on the first 20,000 frames.
            let sub = 20_000;
            let mut sacc = ModelAccumulators::zeros(&m, UpdateFlags::default());
            use amtool::engine::LoadedModel;
            lm.accumulate(
                FrameBatch::new(&feats[..sub * d], d),
                FrameTargets::Global,
                &mut sacc,
            )
            .unwrap();
            let want = ref_accumulate(&m, &feats[..sub * d], FrameTargets::Global);
            let err = acc_rel_err(&sacc, &want);
            let ops = (8 * d + 23) as f64 * t as f64 * mm as f64;
            println!(
                "{{\"case\":\"estep_seed000\",\"T\":{t},\"D\":{d},\"M\":{mm},\"seconds\":{secs},\"gflops_paper_count\":{},\"rel_err_vs_f64\":{err:e},\"engine\":\"cuda\",\"device\":\"{}\"}}",
                ops / secs / 1e9,
                e.device()
            );
        }
    }
    for (name, kind, g_of) in [
        ("score_seed002", CovKind::Diagonal, 0usize),
        ("score_seed002_var", CovKind::Diagonal, 1),
        ("fullcov_score_seed001", CovKind::Full, 2),
    ] {
        if !want(name) {
            continue;
        }
        let (s, d, frames) = (5000usize, 36usize, 2560usize);
        let counts: Vec<usize> = match g_of {
            0 => vec![256; s],
            1 => (0..s)
                .map(|_| (1.0 + 63.0 * rng.uniform().powi(3)).round() as usize)
                .collect(),
            _ => vec![16; s],
        };
        let m = random_model(&mut rng, d, kind, &counts);
        let feats = random_feats(&mut rng, frames, d);
        let mut lm = amtool::engine::cuda::model::CudaModel::new(e, &m).unwrap();
        let (secs, out) = lm
            .time_state_loglikes(FrameBatch::new(&feats, d), 5)
            .unwrap();
        let (real, padded) = lm.block_padding().unwrap();
        let check_frames = 8;
        let mut got = Vec::new();
        let mut reference = Vec::new();
        for t in 0..check_frames {
            let x = &feats[t * d..(t + 1) * d];
            for st in 0..s {
                reference.push(log_sum_exp(&comp_lls(&m, st, x)));
                got.push(f64::from(out[t * s + st]));
            }
        }
        let err = rel_err(got.into_iter(), reference.into_iter());
        let per = match kind {
            CovKind::Diagonal => 4 * d + 9,
            CovKind::Full => 5 * d * (d - 1) / 2 + 4 * d + 9,
        };
        let ops = frames as f64 * real as f64 * per as f64;
        println!(
            "{{\"case\":\"{name}\",\"states\":{s},\"gauss_per_state\":{},\"D\":{d},\"frames\":{frames},\"window\":{frames},\"seconds\":{secs},\"gflops_paper_count\":{},\"inv_rtf_100fps\":{},\"padding_overhead\":{},\"rel_err_vs_f64\":{err:e},\"engine\":\"cuda\",\"device\":\"{}\"}}",
            real as f64 / s as f64,
            ops / secs / 1e9,
            frames as f64 / 100.0 / secs,
            padded as f64 / real as f64 - 1.0,
            e.device()
        );
    }
    if want("acc_ali") {
        let (pdfs, d, frames) = (2000usize, 40usize, 1_000_000usize);
        let counts: Vec<usize> = (0..pdfs)
            .map(|_| 1 + rng.below(31) + rng.below(2) * rng.below(10))
            .collect();
        let m = random_model(&mut rng, d, CovKind::Diagonal, &counts);
        let feats = random_feats(&mut rng, frames, d);
        let ali: Vec<u32> = (0..frames).map(|_| rng.below(pdfs) as u32).collect();
        let mut lm = amtool::engine::cuda::model::CudaModel::new(e, &m).unwrap();
        let mut acc = ModelAccumulators::zeros(&m, UpdateFlags::default());
        let secs = lm
            .time_accumulate(
                FrameBatch::new(&feats, d),
                FrameTargets::Aligned(&ali),
                3,
                &mut acc,
            )
            .unwrap();
        let sub = 20_000;
        let mut sacc = ModelAccumulators::zeros(&m, UpdateFlags::default());
        use amtool::engine::LoadedModel;
        lm.accumulate(
            FrameBatch::new(&feats[..sub * d], d),
            FrameTargets::Aligned(&ali[..sub]),
            &mut sacc,
        )
        .unwrap();
        let want = ref_accumulate(&m, &feats[..sub * d], FrameTargets::Aligned(&ali[..sub]));
        let err = acc_rel_err(&sacc, &want);
        let g: usize = counts.iter().sum();
        println!(
            "{{\"case\":\"acc_ali\",\"pdfs\":{pdfs},\"gaussians\":{g},\"D\":{d},\"frames\":{frames},\"seconds\":{secs},\"rel_err_vs_f64\":{err:e},\"engine\":\"cuda\",\"device\":\"{}\"}}",
            e.device()
        );
    }
}

/// CUDA engine ≡ CPU engine: the same log-likelihoods, and statistics each
/// within TOL of the f64 reference.
fn check_against_cpu(e: &CudaEngine, c: &Case) -> Result<(), String> {
    let cpu = amtool::engine::cpu::CpuEngine::new(2).map_err(|e| e.to_string())?;
    let mut rng = Rng(c.seed);
    let m = random_model(&mut rng, c.dim, c.kind, &c.counts);
    let feats = random_feats(&mut rng, c.frames, c.dim);
    let batch = FrameBatch::new(&feats, c.dim);
    let s = m.num_states();
    let mut g = e.load(&m).map_err(|e| e.to_string())?;
    let mut h = cpu.load(&m).map_err(|e| e.to_string())?;
    let (mut a, mut b) = (vec![f32::NAN; c.frames * s], vec![f32::NAN; c.frames * s]);
    g.state_loglikes(batch, &mut a).map_err(|e| e.to_string())?;
    h.state_loglikes(batch, &mut b).map_err(|e| e.to_string())?;
    let err = rel_err(
        a.iter().map(|&v| f64::from(v)),
        b.iter().map(|&v| f64::from(v)),
    );
    if err > TOL {
        return Err(format!("state_loglikes: cuda vs cpu rel err {err:.3e}"));
    }
    let ali: Vec<u32> = (0..c.frames).map(|_| rng.below(s) as u32).collect();
    let mut ga = ModelAccumulators::zeros(&m, UpdateFlags::default());
    let mut ha = ModelAccumulators::zeros(&m, UpdateFlags::default());
    g.accumulate(batch, FrameTargets::Aligned(&ali), &mut ga)
        .map_err(|e| e.to_string())?;
    h.accumulate(batch, FrameTargets::Aligned(&ali), &mut ha)
        .map_err(|e| e.to_string())?;
    // Each engine is held to the bound against the f64 reference
    // (engine against engine, the two errors can add up: one full-covariance
    // case, dim 61, came to 2.02e-5 apart).
    let want = ref_accumulate(&m, &feats, FrameTargets::Aligned(&ali));
    compare_acc(&ga, &want).map_err(|e| format!("aligned statistics, cuda vs f64: {e}"))?;
    compare_acc(&ha, &want).map_err(|e| format!("aligned statistics, cpu vs f64: {e}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: gmm_ref::cases(16), max_shrink_iters: 20, ..ProptestConfig::default() })]

    #[test]
    fn cuda_diag_matches_cpu_engine(c in case(CovKind::Diagonal, 100, 100, 2000)) {
        let Some(e) = engine() else { return Ok(()) };
        check_against_cpu(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
    }

    #[test]
    fn cuda_full_matches_cpu_engine(c in case(CovKind::Full, 20, 16, 600)) {
        let Some(e) = engine() else { return Ok(()) };
        check_against_cpu(e, &c).map_err(|m| TestCaseError::fail(format!("{c:?}: {m}")))?;
    }
}

/// A case the device run of 2026-11-22 (fourth session) found: the CPU
/// engine's full-covariance statistics against the f64 reference, D = 35,
/// two frames, both ambiguous (posteriors 0.52 / 0.27 / 0.12 and 0.79 /
/// 0.21). The engine's log-likelihoods are 1e-5 to 1.3e-4 from f64 on values
/// near −80 (a few ulps of 666-term float sums of either sign), which moves
/// the occupancies by 2.06e-5 of their norm: above the 3e-8·K = 2.0e-5 bound
/// of the time, within today's 4e-8·K (see `tol_full_stats`). Runs without
/// a GPU.
#[test]
fn cpu_full_statistics_of_an_ambiguous_frame() {
    let c = Case {
        dim: 35,
        kind: CovKind::Full,
        counts: vec![1, 16, 12, 13, 3],
        frames: 2,
        seed: 3685979391549501250,
    };
    let mut rng = Rng(c.seed);
    let m = random_model(&mut rng, c.dim, c.kind, &c.counts);
    let feats = random_feats(&mut rng, c.frames, c.dim);
    let s = m.num_states();
    let ali: Vec<u32> = (0..c.frames).map(|_| rng.below(s) as u32).collect();
    let cpu = amtool::engine::cpu::CpuEngine::new(2).unwrap();
    let mut h = cpu.load(&m).unwrap();
    let mut ha = ModelAccumulators::zeros(&m, UpdateFlags::default());
    h.accumulate(
        FrameBatch::new(&feats, c.dim),
        FrameTargets::Aligned(&ali),
        &mut ha,
    )
    .unwrap();
    let want = ref_accumulate(&m, &feats, FrameTargets::Aligned(&ali));
    println!("occupancy rel err {:.3e}", acc_rel_err(&ha, &want));
    compare_acc(&ha, &want).unwrap();
}

mod likes_accuracy;

/// The CUDA engine's FP32 kernels (`AMTOOL_CUDA_TC=0`, and what devices
/// before sm_80 run) against f64, beside Kaldi's (issue 15): at least as
/// accurate, mean and worst, on every fixture model. On the H100
/// (2026-11-24): final.mdl 1.10e-5/8.4e-4 against Kaldi's 1.18e-5/1.06e-3,
/// ubm 1.04e-5/6.4e-5 against 2.19e-5/1.97e-4, fubm 3.1e-4/1.9e-2 against
/// 5.8e-4/2.3e-2 (the block scoring's z paired by dimension, last first).
#[test]
fn cuda_fp32_loglikes_at_least_as_accurate_as_kaldi() {
    let Some(e) = engine_fp32() else { return };
    likes_accuracy::assert_at_least_as_accurate_as_kaldi(e, "cuda fp32");
}

/// The default engine (tensor cores) after `score_in_fp32`, as forced
/// alignment loads its model: Kaldi's accuracy on every fixture.
#[test]
fn cuda_score_in_fp32_is_at_least_as_accurate_as_kaldi() {
    struct Fp32Scoring(&'static CudaEngine);
    impl Engine for Fp32Scoring {
        fn name(&self) -> &'static str {
            "cuda"
        }
        fn device(&self) -> String {
            self.0.device()
        }
        fn load<'e>(
            &'e self,
            model: &amtool::model::AcousticModel,
        ) -> amtool::Result<Box<dyn amtool::engine::LoadedModel + 'e>> {
            let mut m = self.0.load(model)?;
            m.score_in_fp32();
            Ok(m)
        }
    }
    let Some(e) = engine() else { return };
    likes_accuracy::assert_at_least_as_accurate_as_kaldi(&Fp32Scoring(e), "cuda score_in_fp32");
}

/// The same with the tensor-core scoring, which only the statistics use
/// (the tools whose output is log-likelihoods take the FP32 kernels:
/// `engine::load_for_loglikes`, held by the test above and by
/// tests/cli_score.rs `gpu_scores_are_the_fp32_kernels_bits`). Split TF32
/// keeps 22 bits of each operand, so on the diagonal models it is not as
/// accurate as Kaldi: on the H100 (2026-11-24) final.mdl 1.69e-5/1.48e-3
/// (Kaldi 1.18e-5/1.06e-3), ubm 2.47e-5/1.95e-4 (Kaldi 2.19e-5/1.97e-4); the
/// full-covariance UBM meets it (2.9e-4/1.3e-2 against 5.8e-4/2.3e-2). Run
/// it with `--ignored` on the device when working on the tensor-core split.
#[test]
#[ignore = "the tensor-core scoring (statistics only) keeps 22 bits an operand: 1.4x Kaldi's error on diagonal models"]
fn cuda_tc_loglikes_at_least_as_accurate_as_kaldi() {
    let Some(e) = engine() else { return };
    likes_accuracy::assert_at_least_as_accurate_as_kaldi(e, "cuda");
}
