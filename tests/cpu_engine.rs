//! The CPU engine against the naive f64 reference (`engine::reference`) on
//! random models: 1–100 Gaussians per state, dimensions 1–80 (diagonal) and
//! 1–40 (full) including non-multiples of 4 and 8, frame counts that leave
//! partial 6-frame tiles and partial 128-frame chunks; all four target kinds
//! (Gaussian selection in state 0: 1–5 components a frame, weights with zeros);
//! one thread against two (bit-identical), and against two and three over
//! many chunks and groups of chunks.
//!
//! Tolerances (norm-wise relative error ‖out − ref‖/‖ref‖ over each output,
//! the measure `amtool bench` reports):
//! - log-likelihoods: the engine sums `K` = 2D or D + D(D+1)/2 f32
//!   products per Gaussian (as Kaldi does in f32); rounding grows like
//!   √K·2⁻²⁴ ≈ 6e-8·√K relative to the size of the terms, which for full
//!   covariances cancel to a smaller result. Diagonal: 1e-6 (observed ≤ 4e-8).
//!   Full: the 1e-5, as the CUDA tests; observed up to 1.12e-6 (D = 38,
//!   K = 779, two frames, so no averaging over many values; kept in
//!   proptest-regressions).
//! - statistics and total log-likelihood 1e-4: posteriors are exp(ll − lse),
//!   so their relative error is the *absolute* error of the f32
//!   log-likelihoods (~1e-6 at |ll| ≈ 100 with K ≈ 800), plus 2⁻²⁴ from the
//!   f32 posterior; the sums are f32 over sub-blocks of 64 frames (within
//!   64·2⁻²⁴ ≈ 3.8e-6 of the summed |terms|, typically ~5e-7) and f64 across.
//!   Typically ~1e-8; the worst seen is 1.02e-5 (full covariance, D = 36, a
//!   statistic dominated by a Gaussian whose posterior is a small difference
//!   of large log-likelihoods), kept in proptest-regressions.

use amtool::bench::random::{self, Rng};
use amtool::engine::cpu::CpuEngine;
use amtool::engine::{reference, Engine, FrameBatch, FrameTargets, LoadedModel, Selection};
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

/// A Gaussian selection among the `m` components of state 0: 1–5 a frame
/// (repeats allowed), weights 0, 0.5, 1 or 2.25.
struct RandomSelection {
    offsets: Vec<usize>,
    components: Vec<u32>,
    weights: Vec<f32>,
}

impl RandomSelection {
    fn new(rng: &mut Rng, m: usize, frames: usize) -> Self {
        let mut s = RandomSelection {
            offsets: vec![0],
            components: Vec::new(),
            weights: Vec::new(),
        };
        for _ in 0..frames {
            for _ in 0..rng.int(1, 5) {
                s.components.push(rng.int(0, m - 1) as u32);
            }
            s.offsets.push(s.components.len());
            s.weights.push([0.0, 0.5, 1.0, 2.25][rng.int(0, 3)]);
        }
        s
    }

    fn targets(&self) -> FrameTargets<'_> {
        FrameTargets::Selected(Selection {
            offsets: &self.offsets,
            components: &self.components,
            weights: Some(&self.weights),
        })
    }
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
    let sel = RandomSelection::new(&mut rng, counts[0], frames);
    let targets = [
        FrameTargets::Global,
        FrameTargets::Aligned(&ali),
        FrameTargets::Weighted {
            offsets: &offsets,
            pairs: &pairs,
        },
        sel.targets(),
    ];
    let one = run(&CpuEngine::new(1).unwrap(), &model, feats, &targets);
    let two = run(&CpuEngine::new(2).unwrap(), &model, feats, &targets);

    let ll_tol = match kind {
        CovKind::Diagonal => 1e-6,
        CovKind::Full => 1e-5,
    };
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

/// Many chunks: 41 chunks of 128 frames in 6 groups of 8 (the last partial),
/// so 1 thread runs 6 waves of one group, 2 threads 2 waves of four groups, 3
/// threads one of six (Gaussian selection: blocks of scoring tasks and of
/// components); bit for bit the same, for both covariance kinds and
/// all four target kinds; and the statistics still within the property
/// tests' 1e-4 of the f64 reference.
#[test]
fn many_chunks_are_bit_identical_across_thread_counts() {
    let frames = 40 * 128 + 37;
    for (kind, dim) in [(CovKind::Diagonal, 13), (CovKind::Full, 7)] {
        let mut rng = Rng::new(11);
        let model = random::model(&mut rng, &[37, 5, 20], dim, kind);
        let data = random::features(&mut rng, frames, dim);
        let feats = FrameBatch::new(&data, dim);
        let (ali, offsets, pairs) = targets_for(&mut rng, 3, frames);
        let sel = RandomSelection::new(&mut rng, 37, frames);
        let targets = [
            FrameTargets::Global,
            FrameTargets::Aligned(&ali),
            FrameTargets::Weighted {
                offsets: &offsets,
                pairs: &pairs,
            },
            sel.targets(),
        ];
        let one = run(&CpuEngine::new(1).unwrap(), &model, feats, &targets);
        for (i, &t) in targets.iter().enumerate() {
            let r = reference::accumulate(&model, feats, t, UpdateFlags::default());
            let e = reference::acc_rel_err(&one.accs[i].0, &r);
            assert!(e < 1e-4, "{kind:?} target kind {i}: statistics rel err {e}");
        }
        for threads in [2, 3] {
            let other = run(&CpuEngine::new(threads).unwrap(), &model, feats, &targets);
            for (i, (a, b)) in one.accs.iter().zip(&other.accs).enumerate() {
                assert!(
                    a.0 == b.0 && a.1.to_bits() == b.1.to_bits(),
                    "{kind:?} target kind {i}: accumulators differ between 1 and {threads} threads"
                );
            }
        }
    }
}

/// A model that has only the required methods: `state_loglikes_subset` is
/// the trait's default (every state, then the columns gathered on the host).
struct EveryState<'a>(&'a mut dyn LoadedModel);

impl LoadedModel for EveryState<'_> {
    fn num_states(&self) -> usize {
        self.0.num_states()
    }
    fn state_loglikes(&mut self, feats: FrameBatch<'_>, out: &mut [f32]) -> amtool::Result<()> {
        self.0.state_loglikes(feats, out)
    }
    fn component_loglikes(
        &mut self,
        state: usize,
        feats: FrameBatch<'_>,
        out: &mut [f32],
    ) -> amtool::Result<()> {
        self.0.component_loglikes(state, feats, out)
    }
    fn accumulate(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> amtool::Result<f64> {
        self.0.accumulate(feats, targets, acc)
    }
}

/// `state_loglikes_subset` gives each utterance's columns of
/// `state_loglikes` bit for bit: the CPU engine's own (only the states
/// asked for) and the trait's default, for both covariance kinds, on 1 and
/// 2 threads; subsets that do not fit the batch are errors.
#[test]
fn state_subsets_are_the_full_scores_columns() {
    let (ns, frames) = (150, 700);
    for (kind, dim) in [(CovKind::Diagonal, 39), (CovKind::Full, 7)] {
        let mut rng = Rng::new(5);
        let counts = random::skewed_counts(&mut rng, ns, 8.0, 40);
        let model = random::model(&mut rng, &counts, dim, kind);
        let data = random::features(&mut rng, frames, dim);
        let feats = FrameBatch::new(&data, dim);
        let subsets = random::state_subsets(&mut rng, frames, ns, 160);
        for threads in [1, 2] {
            let engine = CpuEngine::new(threads).unwrap();
            let mut lm = engine.load(&model).unwrap();
            let mut all = vec![0f32; frames * ns];
            lm.state_loglikes(feats, &mut all).unwrap();
            let mut want = vec![0f32; subsets.output_len()];
            subsets.gather(&all, ns, &mut want);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let mut got = vec![f32::NAN; want.len()];
            lm.state_loglikes_subset(feats, &subsets, &mut got).unwrap();
            assert_eq!(bits(&got), bits(&want), "{kind:?}, {threads} threads");
            got.fill(f32::NAN);
            EveryState(lm.as_mut())
                .state_loglikes_subset(feats, &subsets, &mut got)
                .unwrap();
            assert_eq!(bits(&got), bits(&want), "default, {kind:?}");
            let short = &mut got[1..];
            assert!(lm.state_loglikes_subset(feats, &subsets, short).is_err());
            let fewer = FrameBatch::new(&data[dim..], dim);
            assert!(lm.state_loglikes_subset(fewer, &subsets, &mut got).is_err());
        }
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
    // Gaussian selection: an empty frame, a component state 0 lacks, too few
    // weights; each error names the frame.
    for (offsets, components, weights, what) in [
        (
            &[0usize, 1, 1, 2, 3][..],
            &[0u32, 1, 0][..],
            None,
            "frame 1",
        ),
        (&[0, 1, 2, 3, 4], &[0, 1, 2, 0], None, "frame 2"),
        (
            &[0, 1, 2, 3, 4],
            &[0, 1, 1, 0],
            Some(&[1.0f32, 1.0][..]),
            "2 weights",
        ),
    ] {
        let sel = FrameTargets::Selected(Selection {
            offsets,
            components,
            weights,
        });
        let e = lm.accumulate(feats, sel, &mut acc).unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
    }
    assert_eq!(
        acc,
        ModelAccumulators::zeros(&model, UpdateFlags::default())
    );
}

// ---------------------------------------------------------------------------
// Against Kaldi's own per-frame log-likelihoods (testdata/kaldi/feats/README.md
// names the command behind each file; features are the first utterances of
// feats_cmvn_deltas.ark, the same rows Kaldi scored).

mod kaldi_fixtures {
    use std::io::Read;

    use amtool::engine::cpu::CpuEngine;
    use amtool::engine::reference;
    use amtool::engine::{Engine, FrameBatch};
    use amtool::model::{AcousticModel, CovKind};
    use amtool_formats::kaldi::gmm::{DiagGmm, FullGmm};
    use amtool_formats::kaldi::matrix::{Matrix, Vector};
    use amtool_formats::kaldi::model::KaldiModel;
    use amtool_formats::kaldi::object::read_object;
    use amtool_formats::kaldi::table::SequentialTableReader;

    const FEATS: &str = "testdata/kaldi/feats";

    /// A table in a (possibly gzipped) file, read through the formats crate.
    fn table<H: amtool_formats::kaldi::holder::Holder>(name: &str) -> Vec<(String, H)> {
        let path = format!("{FEATS}/{name}");
        let dir = tempfile::tempdir().unwrap();
        let plain = if name.ends_with(".gz") {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&std::fs::read(&path).unwrap()[..])
                .read_to_end(&mut out)
                .unwrap();
            let p = dir.path().join("table");
            std::fs::write(&p, out).unwrap();
            p.display().to_string()
        } else {
            path
        };
        SequentialTableReader::<H>::open(&format!("ark:{plain}"))
            .unwrap()
            .collect::<amtool_formats::Result<Vec<_>>>()
            .unwrap()
    }

    fn feats() -> Vec<(String, Matrix<f32>)> {
        table("feats_cmvn_deltas.first3.ark")
    }

    /// Our per-frame per-state log-likelihoods for one utterance.
    fn state_loglikes(model: &AcousticModel, m: &Matrix<f32>, threads: usize) -> Vec<f32> {
        let engine = CpuEngine::new(threads).unwrap();
        let mut lm = engine.load(model).unwrap();
        let mut out = vec![0f32; m.rows() * model.num_states()];
        lm.state_loglikes(FrameBatch::new(m.data(), m.cols()), &mut out)
            .unwrap();
        out
    }

    /// Σ|terms| of one component's log-likelihood at `x`, in f64: |gconst| +
    /// Σ|xᵢ bᵢ| + ½Σ|xᵢ xⱼ Aᵢⱼ| (A = Σ⁻¹ or diag(1/σ²), b = Σ⁻¹μ). Both sides
    /// round at ~2⁻²⁴ of this size, whatever the size of the result: the
    /// full-covariance UBM's log-likelihoods are small differences of terms of
    /// ~10⁴ (Kaldi prints values such as -3.015625, a multiple of 2⁻⁶).
    fn term_size(model: &AcousticModel, s: usize, c: usize, x: &[f32]) -> f64 {
        let st = &model.states[s];
        let d = model.dim;
        let b = &st.means_invvars[c * d..(c + 1) * d];
        let mut sum = (st.gconsts[c] as f64).abs();
        sum += x
            .iter()
            .zip(b)
            .map(|(&xi, &bi)| (xi as f64 * bi as f64).abs())
            .sum::<f64>();
        match model.kind {
            CovKind::Diagonal => {
                let a = &st.inv_vars[c * d..(c + 1) * d];
                sum += 0.5
                    * x.iter()
                        .zip(a)
                        .map(|(&xi, &ai)| (xi as f64 * xi as f64 * ai as f64).abs())
                        .sum::<f64>();
            }
            CovKind::Full => {
                let a = &st.inv_vars[c * d * (d + 1) / 2..(c + 1) * d * (d + 1) / 2];
                for i in 0..d {
                    for j in 0..d {
                        let (r, k) = if j <= i { (i, j) } else { (j, i) };
                        let aij = a[r * (r + 1) / 2 + k] as f64;
                        sum += 0.5 * (x[i] as f64 * x[j] as f64 * aij).abs();
                    }
                }
            }
        }
        sum
    }

    /// Largest |ours − Kaldi's| / allowed over all frames and states, where
    /// allowed = TOL × the size of the terms of the component that dominates
    /// the state's log-likelihood (by the f64 reference) + PRINT × |Kaldi's|.
    /// Below 1 passes.
    fn max_scaled_diff(model: &AcousticModel, m: &Matrix<f32>, ours: &[f32], kaldi: &[f32]) -> f64 {
        let ns = model.num_states();
        assert_eq!(ours.len(), kaldi.len(), "value counts differ");
        assert_eq!(ours.len(), m.rows() * ns, "value counts differ");
        let mut worst = 0f64;
        for t in 0..m.rows() {
            let x = &m.data()[t * m.cols()..(t + 1) * m.cols()];
            for s in 0..ns {
                let ll = reference::component_loglikes(model, &model.states[s], x);
                let c = (0..ll.len())
                    .max_by(|&a, &b| ll[a].total_cmp(&ll[b]))
                    .unwrap();
                let diff = (ours[t * ns + s] as f64 - kaldi[t * ns + s] as f64).abs();
                let allowed =
                    TOL * term_size(model, s, c, x) + PRINT * (kaldi[t * ns + s] as f64).abs();
                worst = worst.max(diff / allowed);
            }
        }
        worst
    }

    // Tolerance for every comparison below: |ours − Kaldi's| ≤ 1e-6 × the
    // summed |terms| of the dominant Gaussian (see `term_size`). Kaldi sums
    // gconst + x·b − ½xᵀAx in f32 in BLAS order (2D = 78 terms diagonal,
    // D + D(D+1)/2 = 858 full), we sum in another f32 order; each side's
    // rounding is about 2⁻²⁴·√K of the term size (4e-7 diagonal, 2e-6 at
    // worst for full; observed up to 8e-7 full, 4e-7 diagonal). Kaldi's text forms add %.7g
    // printing: 7 significant digits, ≤ 5e-7 of the value (PRINT).
    const TOL: f64 = 1e-6;
    const PRINT: f64 = 5e-7;

    #[test]
    fn gmm_compute_likes_of_final_mdl() {
        let buf = std::fs::read("testdata/kaldi/final.mdl").unwrap();
        let model = AcousticModel::from_am_diag_gmm(&KaldiModel::from_bytes(&buf).unwrap().am);
        let kaldi = table::<Matrix<f32>>("likes_first1.txt.gz");
        assert_eq!(kaldi.len(), 1);
        let (key, feats) = &feats()[0];
        assert_eq!(&kaldi[0].0, key);
        assert_eq!(
            (kaldi[0].1.rows(), kaldi[0].1.cols()),
            (feats.rows(), model.num_states())
        );
        for threads in [1, 2] {
            let ours = state_loglikes(&model, feats, threads);
            let d = max_scaled_diff(&model, feats, &ours, kaldi[0].1.data());
            eprintln!("gmm-compute-likes {key}: {threads} thread(s), max diff / allowed {d:.3}");
            assert!(d < 1.0, "{key}: max diff / allowed {d}");
        }
    }

    #[test]
    fn gmm_global_get_frame_likes_of_diag_ubm() {
        let g: DiagGmm =
            read_object(&std::fs::read("testdata/kaldi/train/ubm.1.dubm").unwrap()).unwrap();
        let model = AcousticModel::from_diag_gmm(&g);
        // The binary archive (exact f32s) and the text form Kaldi printed.
        for name in [
            "ubm.1.frame_likes.first3.ark",
            "ubm.1.frame_likes_first3.txt",
        ] {
            let kaldi = table::<Vector<f32>>(name);
            let feats = feats();
            assert_eq!(kaldi.len(), 3, "{name}");
            for ((k, want), (key, m)) in kaldi.iter().zip(&feats) {
                assert_eq!(k, key);
                let d = max_scaled_diff(&model, m, &state_loglikes(&model, m, 2), &want.data);
                eprintln!("gmm-global-get-frame-likes {name} {key}: max diff / allowed {d:.3}");
                assert!(d < 1.0, "{name} {key}: max diff / allowed {d}");
            }
        }
    }

    #[test]
    fn fgmm_global_get_frame_likes_of_full_ubm() {
        let g: FullGmm =
            read_object(&std::fs::read("testdata/kaldi/train/fubm.1.fubm").unwrap()).unwrap();
        let model = AcousticModel::from_full_gmm(&g);
        let kaldi = table::<Vector<f32>>("fubm.1.frame_likes_first3.txt.gz");
        let feats = feats();
        assert_eq!(kaldi.len(), 3);
        for ((k, want), (key, m)) in kaldi.iter().zip(&feats) {
            assert_eq!(k, key);
            let d = max_scaled_diff(&model, m, &state_loglikes(&model, m, 2), &want.data);
            eprintln!("fgmm-global-get-frame-likes {key}: max diff / allowed {d:.3}");
            assert!(d < 1.0, "{key}: max diff / allowed {d}");
        }
    }
}

mod likes_accuracy;

/// The CPU engine's log-likelihoods against f64, beside Kaldi's (issue 15).
#[test]
fn cpu_loglikes_at_least_as_accurate_as_kaldi() {
    let engine = amtool::engine::cpu::CpuEngine::new(2).unwrap();
    likes_accuracy::assert_at_least_as_accurate_as_kaldi(&engine, "cpu");
}
