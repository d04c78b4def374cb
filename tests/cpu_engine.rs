//! The CPU engine against the naive f64 reference (`engine::reference`) on
//! random models: 1–100 Gaussians per state, dimensions 1–80 (diagonal) and
//! 1–40 (full) including non-multiples of 4 and 8, frame counts that leave
//! partial 6-frame tiles and partial 128-frame chunks; all three target kinds;
//! one thread against two (bit-identical).
//!
//! Tolerances (norm-wise relative error ‖out − ref‖/‖ref‖ over each output,
//! the measure `amtool bench` reports):
//! - log-likelihoods 1e-6: the engine sums `K` = 2D or D + D(D+1)/2 f32
//!   products per Gaussian (as Kaldi does in f32); rounding grows like
//!   √K·2⁻²⁴ ≈ 6e-8·√K relative to the size of the terms. Observed ≤ 4e-8.
//! - statistics and total log-likelihood 1e-4: posteriors are exp(ll − lse),
//!   so their relative error is the *absolute* error of the f32
//!   log-likelihoods (~1e-6 at |ll| ≈ 100 with K ≈ 800), plus 2⁻²⁴ from the
//!   f32 posterior; sums are exact-product f64 and add nothing measurable.
//!   Typically ~1e-8; the worst seen is 1.02e-5 (full covariance, D = 36, a
//!   statistic dominated by a Gaussian whose posterior is a small difference
//!   of large log-likelihoods), kept in proptest-regressions.

use amtool::bench::random::{self, Rng};
use amtool::engine::cpu::CpuEngine;
use amtool::engine::{reference, Engine, FrameBatch, FrameTargets};
use amtool::model::{AcousticModel, CovKind};
use amtool::stats::{ModelAccumulators, UpdateFlags};
use proptest::prelude::*;

struct Outputs {
    state_ll: Vec<f32>,
    comp_ll: Vec<Vec<f32>>,
    accs: Vec<(ModelAccumulators, f64)>,
}

fn targets_for(rng: &mut Rng, ns: usize, frames: usize) -> (Vec<u32>, Vec<usize>, Vec<(u32, f32)>) {
    let ali: Vec<u32> = (0..frames).map(|_| rng.int(0, ns - 1) as u32).collect();
    let mut offsets = vec![0usize];
    let mut pairs = Vec::new();
    for _ in 0..frames {
        for _ in 0..rng.int(0, 3) {
            pairs.push((rng.int(0, ns - 1) as u32, rng.uniform() as f32));
        }
        offsets.push(pairs.len());
    }
    (ali, offsets, pairs)
}

fn run(
    engine: &CpuEngine,
    model: &AcousticModel,
    feats: FrameBatch<'_>,
    targets: &[FrameTargets<'_>],
) -> Outputs {
    let mut lm = engine.load(model).unwrap();
    let ns = model.num_states();
    let mut state_ll = vec![0f32; feats.frames * ns];
    lm.state_loglikes(feats, &mut state_ll).unwrap();
    let comp_ll = (0..ns)
        .map(|s| {
            let mut o = vec![0f32; feats.frames * model.states[s].num_components()];
            lm.component_loglikes(s, feats, &mut o).unwrap();
            o
        })
        .collect();
    let accs = targets
        .iter()
        .map(|&t| {
            let mut acc = ModelAccumulators::zeros(model, UpdateFlags::default());
            let like = lm.accumulate(feats, t, &mut acc).unwrap();
            (acc, like)
        })
        .collect();
    Outputs {
        state_ll,
        comp_ll,
        accs,
    }
}

fn check(
    seed: u64,
    counts: &[usize],
    dim: usize,
    frames: usize,
    kind: CovKind,
) -> Result<(), TestCaseError> {
    let mut rng = Rng::new(seed);
    let model = random::model(&mut rng, counts, dim, kind);
    let data = random::features(&mut rng, frames, dim);
    let feats = FrameBatch::new(&data, dim);
    let (ali, offsets, pairs) = targets_for(&mut rng, counts.len(), frames);
    let targets = [
        FrameTargets::Global,
        FrameTargets::Aligned(&ali),
        FrameTargets::Weighted {
            offsets: &offsets,
            pairs: &pairs,
        },
    ];
    let one = run(&CpuEngine::new(1).unwrap(), &model, feats, &targets);
    let two = run(&CpuEngine::new(2).unwrap(), &model, feats, &targets);

    let ll_tol = 1e-6;
    let e = reference::rel_err(&one.state_ll, &reference::state_loglikes(&model, feats));
    prop_assert!(e < ll_tol, "state loglikes rel err {e}");
    for (s, st) in model.states.iter().enumerate() {
        let r: Vec<f64> = (0..frames)
            .flat_map(|t| reference::component_loglikes(&model, st, feats.row(t)))
            .collect();
        let e = reference::rel_err(&one.comp_ll[s], &r);
        prop_assert!(e < ll_tol, "component loglikes of state {s}: rel err {e}");
    }
    for (i, &t) in targets.iter().enumerate() {
        let r = reference::accumulate(&model, feats, t, UpdateFlags::default());
        let (acc, like) = &one.accs[i];
        let e = reference::acc_rel_err(acc, &r);
        prop_assert!(e < 1e-4, "target kind {i}: statistics rel err {e}");
        prop_assert!(reference::rel_err(&[*like], &[r.total_like]) < 1e-4);
    }
    // Bit-identical with two threads.
    prop_assert!(one
        .state_ll
        .iter()
        .zip(&two.state_ll)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    prop_assert_eq!(&one.comp_ll, &two.comp_ll);
    for (a, b) in one.accs.iter().zip(&two.accs) {
        prop_assert!(
            a.0 == b.0 && a.1.to_bits() == b.1.to_bits(),
            "accumulators differ between 1 and 2 threads"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn diagonal_matches_f64_reference(
        seed in any::<u64>(),
        counts in prop::collection::vec(1usize..=100, 1..5),
        dim in 1usize..=80,
        frames in 1usize..300,
    ) {
        check(seed, &counts, dim, frames, CovKind::Diagonal)?;
    }

    #[test]
    fn full_matches_f64_reference(
        seed in any::<u64>(),
        counts in prop::collection::vec(1usize..=100, 1..4),
        dim in 1usize..=40,
        frames in 1usize..200,
    ) {
        check(seed, &counts, dim, frames, CovKind::Full)?;
    }
}

#[test]
fn mismatched_inputs_are_errors_not_panics() {
    let mut rng = Rng::new(3);
    let model = random::model(&mut rng, &[2, 3], 5, CovKind::Diagonal);
    let engine = CpuEngine::new(1).unwrap();
    let mut lm = engine.load(&model).unwrap();
    let data = random::features(&mut rng, 4, 4);
    let feats = FrameBatch::new(&data, 4);
    assert!(lm.state_loglikes(feats, &mut [0f32; 8]).is_err());
    let data = random::features(&mut rng, 4, 5);
    let feats = FrameBatch::new(&data, 5);
    assert!(lm.state_loglikes(feats, &mut [0f32; 7]).is_err());
    assert!(lm.component_loglikes(2, feats, &mut [0f32; 8]).is_err());
    let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
    assert!(lm
        .accumulate(feats, FrameTargets::Aligned(&[0, 1, 2, 0]), &mut acc)
        .is_err());
    assert!(lm
        .accumulate(feats, FrameTargets::Aligned(&[0, 1]), &mut acc)
        .is_err());
    let bad = FrameTargets::Weighted {
        offsets: &[0, 1, 1, 2],
        pairs: &[(0, 1.0), (1, 1.0)],
    };
    assert!(lm.accumulate(feats, bad, &mut acc).is_err());
    assert_eq!(
        acc,
        ModelAccumulators::zeros(&model, UpdateFlags::default())
    );
}
