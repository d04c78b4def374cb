//! The full-covariance tensor-core E-step (global statistics of one
//! full-covariance GMM, `kernels/estep_fullcov.cu`) against the float64
//! reference and against the CPU engine: random GMMs of 1–300 Gaussians
//! (tiles of 128 with padding), dims 1–48 (z of 2–1225 terms: partial
//! k-steps and stages), 1–4,000 frames (partial tiles, several ranges of
//! frames) and, in fixed cases, several chunks; features and model scaled
//! together by 2^±8, so that the per-dimension FP16 exponents move far from
//! 0 while the posteriors stay those of the unscaled model.
//!
//! Tolerance: the bound every full-covariance statistic is held to
//! (`tol_full_stats`: max(1e-5, 4e-8·K), 3.5e-5 at D = 40), for both
//! engines against f64. The split FP16 products keep 22 bits of each
//! operand (as 3xTF32), and the sums restart every 32 terms, so the scores
//! are at least as accurate as the FP32 kernels' (whose error is what that
//! bound allows for: posteriors of ambiguous frames move with the rounding of
//! 860-term sums).
//!
//! Each test checks that the tensor-core path really ran
//! (`fullcov_estep_chunks`), so a silent fall back to the FP32 kernels fails
//! it. Without a GPU every test prints `skipped: no CUDA device` and passes;
//! with `AMTOOL_REQUIRE_GPU=1` a missing GPU fails them.

use std::sync::OnceLock;

use amtool::engine::cuda::model::CudaModel;
use amtool::engine::cuda::{engine_for_tests, CudaEngine};
use amtool::engine::{Engine, FrameBatch, FrameTargets, LoadedModel};
use amtool::model::{AcousticModel, CovKind};
use amtool::stats::{ModelAccumulators, UpdateFlags};
use proptest::prelude::*;

mod gmm_ref;
use gmm_ref::*;

fn engine() -> Option<&'static CudaEngine> {
    static E: OnceLock<Option<CudaEngine>> = OnceLock::new();
    E.get_or_init(engine_for_tests).as_ref()
}

/// A random one-state full-covariance model and features, both scaled by
/// 2^`log2s` (x' = s·x, μ' = s·μ, Σ' = s²Σ: the same posteriors).
fn scaled_case(
    dim: usize,
    g: usize,
    frames: usize,
    seed: u64,
    log2s: i32,
) -> (AcousticModel, Vec<f32>) {
    let mut rng = Rng(seed);
    let mut m = random_model(&mut rng, dim, CovKind::Full, &[g]);
    let feats = random_feats(&mut rng, frames, dim);
    let s = 2f32.powi(log2s);
    let st = &mut m.states[0];
    // means_invvars = Pμ → (P/s²)(sμ) = Pμ/s; precisions P/s².
    for v in &mut st.means_invvars {
        *v /= s;
    }
    for v in &mut st.inv_vars {
        *v /= s * s;
    }
    let shift = dim as f64 * f64::from(log2s) * std::f64::consts::LN_2;
    for c in &mut st.gconsts {
        *c = (f64::from(*c) - shift) as f32;
    }
    (m, feats.iter().map(|&x| x * s).collect())
}

fn global_ref(m: &AcousticModel, feats: &[f32]) -> ModelAccumulators {
    ref_accumulate(m, feats, FrameTargets::Global)
}

/// Global statistics on the CUDA engine (the tensor-core path from one
/// Gaussian on); also the number of chunks that took it.
fn cuda_global(
    e: &CudaEngine,
    m: &AcousticModel,
    feats: &[f32],
) -> Result<(ModelAccumulators, usize), String> {
    let mut cm = CudaModel::new(e, m).map_err(|e| e.to_string())?;
    cm.set_fullcov_estep_min_gaussians(1);
    if !cm.shape().fc16 {
        return Err(format!(
            "no full-covariance E-step kernels for {:?}",
            cm.shape()
        ));
    }
    let mut acc = ModelAccumulators::zeros(m, UpdateFlags::default());
    cm.accumulate(
        FrameBatch::new(feats, m.dim),
        FrameTargets::Global,
        &mut acc,
    )
    .map_err(|e| e.to_string())?;
    Ok((acc, cm.fullcov_estep_chunks()))
}

fn check(dim: usize, g: usize, frames: usize, seed: u64, log2s: i32) -> Result<(), String> {
    let Some(e) = engine() else { return Ok(()) };
    let (m, feats) = scaled_case(dim, g, frames, seed, log2s);
    let (acc, chunks) = cuda_global(e, &m, &feats)?;
    if chunks == 0 {
        return Err("the tensor-core E-step did not run".into());
    }
    let want = global_ref(&m, &feats);
    compare_acc(&acc, &want).map_err(|e| format!("cuda vs f64: {e}"))?;
    // The CPU engine on the same inputs, held to the same bound.
    let cpu = amtool::engine::cpu::CpuEngine::new(2).map_err(|e| e.to_string())?;
    let mut h = cpu.load(&m).map_err(|e| e.to_string())?;
    let mut ha = ModelAccumulators::zeros(&m, UpdateFlags::default());
    h.accumulate(FrameBatch::new(&feats, dim), FrameTargets::Global, &mut ha)
        .map_err(|e| e.to_string())?;
    compare_acc(&ha, &want).map_err(|e| format!("cpu vs f64: {e}"))?;
    // Determinism: the same bits run after run.
    let (again, _) = cuda_global(e, &m, &feats)?;
    if again != acc {
        return Err("two identical runs differ".into());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: gmm_ref::cases(16), max_shrink_iters: 20, ..ProptestConfig::default() })]

    #[test]
    fn cuda_fullcov_estep_matches_f64_and_cpu(
        dim in 1usize..=48,
        g in 1usize..=300,
        frames in 1usize..=4_000,
        seed in any::<u64>(),
        log2s in -8i32..=8,
    ) {
        check(dim, g, frames, seed, log2s)
            .map_err(|m| TestCaseError::fail(format!("dim {dim} g {g} frames {frames} seed {seed} 2^{log2s}: {m}")))?;
    }
}

/// Fixed shapes: the benchmark's (D = 40, M = 256) on fewer frames, in two
/// chunks; one frame and one Gaussian; the largest dimension; a tile of
/// Gaussians plus one.
#[test]
fn cuda_fullcov_estep_edge_shapes() {
    for (dim, g, frames) in [(40, 256, 9000), (1, 1, 1), (96, 5, 300), (13, 129, 4097)] {
        check(dim, g, frames, 5, 0)
            .unwrap_or_else(|m| panic!("dim {dim} g {g} frames {frames}: {m}"));
    }
}

/// By default small GMMs keep the FP32 kernels; large ones take the tensor
/// cores. Beyond the kernels' largest dimension the FP32 kernels run.
#[test]
fn cuda_fullcov_estep_is_the_default_for_large_gmms_only() {
    let Some(e) = engine() else { return };
    for (dim, g, want) in [(6, 40, 0), (6, 130, 1), (97, 70, 0)] {
        let (m, feats) = scaled_case(dim, g, 700, 4, 0);
        let mut cm = CudaModel::new(e, &m).unwrap();
        let mut acc = ModelAccumulators::zeros(&m, UpdateFlags::default());
        cm.accumulate(FrameBatch::new(&feats, dim), FrameTargets::Global, &mut acc)
            .unwrap();
        assert_eq!(
            cm.fullcov_estep_chunks().min(1),
            want,
            "{g} Gaussians, D = {dim}"
        );
        compare_acc(&acc, &global_ref(&m, &feats)).unwrap();
    }
}

/// A chunk whose values FP16 cannot hold (one product beyond 2^30) takes the
/// FP32 kernels, with the same results; the chunk beside it keeps the
/// tensor cores.
#[test]
fn cuda_fullcov_estep_refused_chunk_falls_back() {
    let Some(e) = engine() else { return };
    let (m, mut feats) = scaled_case(5, 40, 10_000, 8, 0);
    // The call is cut into two chunks (8,192 and 1,808 frames); spoil the
    // first: x = 1e5 gives x²·P ≥ 1e10 > 2^30.
    feats[3] = 1e5;
    let (acc, chunks) = cuda_global(e, &m, &feats).unwrap();
    assert_eq!(
        chunks, 1,
        "one chunk should take the tensor cores, one refuse them"
    );
    compare_acc(&acc, &global_ref(&m, &feats)).unwrap();
}

/// One Gaussian: every posterior is exp(L − L) = 1 (the posteriors come
/// from the same scores as the log-likelihood), so the occupancy is exactly
/// the frame count.
#[test]
fn cuda_fullcov_estep_one_gaussian_has_posteriors_of_one() {
    let Some(e) = engine() else { return };
    let (m, feats) = scaled_case(7, 1, 3001, 3, 2);
    let (acc, chunks) = cuda_global(e, &m, &feats).unwrap();
    assert!(chunks > 0, "the tensor-core E-step did not run");
    assert_eq!(acc.states[0].occupancy[0], 3001.0);
    compare_acc(&acc, &global_ref(&m, &feats)).unwrap();
}

/// `AMTOOL_CUDA_TC=nof16` keeps the FP32 statistics kernels for
/// comparison; both meet the bound.
#[test]
fn cuda_fullcov_estep_switch_keeps_the_fp32_kernels() {
    if engine().is_none() {
        return;
    }
    let e = CudaEngine::with_tensor_cores("nof16").unwrap();
    let (m, feats) = scaled_case(12, 200, 2000, 6, 0);
    let mut cm = CudaModel::new(&e, &m).unwrap();
    assert!(!cm.shape().fc16);
    let mut acc = ModelAccumulators::zeros(&m, UpdateFlags::default());
    cm.accumulate(FrameBatch::new(&feats, 12), FrameTargets::Global, &mut acc)
        .unwrap();
    assert_eq!(cm.fullcov_estep_chunks(), 0);
    compare_acc(&acc, &global_ref(&m, &feats)).unwrap();
}
