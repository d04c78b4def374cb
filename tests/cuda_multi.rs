//! The multi-device engine over logical partitions of one GPU
//! (`MultiEngine` of 2 and 3 CUDA engines on the same device, as
//! `AMTOOL_PARTITIONS` makes them) against one partition: state and
//! component log-likelihoods to the bit (each row computed as the whole
//! call computes it, whichever device gets it), and EM statistics to the
//! bit in f64 (each batch summed from zero on its device, the batches added
//! on the host in batch order): global diagonal (the FP16 tensor-core
//! E-step from 128 Gaussians), global full, aligned and weighted, one big
//! call cut into pieces and a stream of deferred batches in memory the
//! engine lends (`GlobalAccStats`, with and without the devices made ready
//! first). Two GPUs of one model give what two
//! partitions give: the same kernels and the same work split (which depends
//! on the device's multiprocessor count).
//!
//! Without a GPU every test prints `skipped: no CUDA device` and passes;
//! with `AMTOOL_REQUIRE_GPU=1` a missing GPU fails them.

use amtool::bench::random::{self, Rng};
use amtool::engine::cuda::partitions_for_tests;
use amtool::engine::multi::PIECE_FRAMES;
use amtool::engine::{Engine, FrameBatch, FrameTargets, MultiEngine};
use amtool::model::{AcousticModel, CovKind};
use amtool::stats::{ModelAccumulators, UpdateFlags};
use amtool::train::acc_stats::GlobalAccStats;

/// One, two and three partitions of the GPU (splitting small scoring calls too).
fn engines() -> Option<Vec<MultiEngine>> {
    [1, 2, 3]
        .into_iter()
        .map(|p| partitions_for_tests(p).map(|e| e.with_min_part_rows(1)))
        .collect()
}

fn bits32(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn scores_are_the_same_bits_on_any_number_of_partitions() {
    let Some(engines) = engines() else { return };
    let mut rng = Rng::new(21);
    let d = 39;
    let counts = random::skewed_counts(&mut rng, 300, 8.0, 40);
    let models = [
        random::model(&mut rng, &counts, d, CovKind::Diagonal),
        random::model(&mut rng, &[512], d, CovKind::Diagonal),
        random::model(&mut rng, &[64], 20, CovKind::Full),
    ];
    for model in &models {
        let ns = model.states.len();
        let g0 = model.states[0].num_components();
        // Few frames (the tensor-core kernel splits its blocks across CTAs)
        // and many.
        for frames in [700, 5_000, 70_000] {
            let data = random::features(&mut rng, frames * model.dim, 1);
            let feats = FrameBatch::new(&data, model.dim);
            let run = |e: &MultiEngine| {
                let mut lm = e.load(model).unwrap();
                let mut s = vec![0f32; frames * ns];
                lm.state_loglikes(feats, &mut s).unwrap();
                let mut c = vec![0f32; frames * g0];
                lm.component_loglikes(0, feats, &mut c).unwrap();
                (bits32(&s), bits32(&c))
            };
            let want = run(&engines[0]);
            for (i, e) in engines.iter().enumerate().skip(1) {
                let got = run(e);
                assert!(
                    got.0 == want.0,
                    "{} states, {frames} frames: state log-likelihoods on {} partitions",
                    ns,
                    i + 1
                );
                assert!(
                    got.1 == want.1,
                    "{} states, {frames} frames: component log-likelihoods on {} partitions",
                    ns,
                    i + 1
                );
            }
        }
    }
}

#[test]
fn statistics_are_the_same_bits_on_any_number_of_partitions() {
    let Some(engines) = engines() else { return };
    let mut rng = Rng::new(22);
    let d = 39;
    let frames = 2 * PIECE_FRAMES + 4321;
    let data = random::uneven_features(&mut rng, frames, d, 0.7);
    let feats = FrameBatch::new(&data, d);
    let counts = random::skewed_counts(&mut rng, 100, 6.0, 24);
    let am = random::model(&mut rng, &counts, d, CovKind::Diagonal);
    let ubm = random::model(&mut rng, &[256], d, CovKind::Diagonal);
    let fubm = random::model(&mut rng, &[32], d, CovKind::Full);
    let ali: Vec<u32> = (0..frames)
        .map(|_| rng.int(0, counts.len() - 1) as u32)
        .collect();
    let mut offsets = vec![0];
    let mut pairs = Vec::new();
    for _ in 0..frames {
        for _ in 0..rng.int(0, 3) {
            pairs.push((rng.int(0, counts.len() - 1) as u32, rng.uniform() as f32));
        }
        offsets.push(pairs.len());
    }
    let cases: [(&str, &AcousticModel, FrameTargets<'_>); 4] = [
        ("global diagonal (FP16 E-step)", &ubm, FrameTargets::Global),
        ("global full", &fubm, FrameTargets::Global),
        ("aligned", &am, FrameTargets::Aligned(&ali)),
        (
            "weighted",
            &am,
            FrameTargets::Weighted {
                offsets: &offsets,
                pairs: &pairs,
            },
        ),
    ];
    for (what, model, targets) in cases {
        let run = |e: &MultiEngine| {
            let mut lm = e.load(model).unwrap();
            let mut acc = ModelAccumulators::zeros(model, UpdateFlags::default());
            let like = lm.accumulate(feats, targets, &mut acc).unwrap();
            (like.to_bits(), acc.bit_patterns())
        };
        let want = run(&engines[0]);
        for (i, e) in engines.iter().enumerate().skip(1) {
            assert!(run(e) == want, "{what}: {} partitions differ from 1", i + 1);
        }
    }
}

/// The training tools' stream: utterances queued into batches in memory
/// the engine lends, each batch sent to the next partition, settled twice.
#[test]
fn streamed_statistics_are_the_same_bits_on_any_number_of_partitions() {
    let Some(engines) = engines() else { return };
    let mut rng = Rng::new(23);
    let d = 39;
    let mut lens: Vec<usize> = (0..600).map(|_| rng.int(50, 1_500)).collect();
    lens.insert(300, PIECE_FRAMES + 777);
    let total: usize = lens.iter().sum();
    let data = random::uneven_features(&mut rng, total, d, 0.7);
    let weights: Vec<f32> = (0..total).map(|t| ((t * 7) % 5) as f32 * 0.25).collect();
    for (model, weighted) in [
        (random::model(&mut rng, &[256], d, CovKind::Diagonal), false),
        (random::model(&mut rng, &[64], d, CovKind::Diagonal), true),
        (random::model(&mut rng, &[16], d, CovKind::Full), false),
    ] {
        // `prepared`: the devices made ready before the first utterance, as
        // `amtool acc-stats` does (the FP16 E-step's forms made on a thread
        // of their own while the first batches are held and copied).
        let run = |e: &MultiEngine, prepared: bool| {
            let mut acc = GlobalAccStats::new(e, &model, UpdateFlags::default()).unwrap();
            if prepared && !weighted {
                acc.prepare_plain().unwrap();
            }
            let mut t = 0;
            let mut like = 0.0;
            for (u, &n) in lens.iter().enumerate() {
                let f = data[t * d..(t + n) * d].to_vec();
                let w = weighted.then(|| &weights[t..t + n]);
                acc.add_utterance(&format!("u{u}"), f, n, d, w, None)
                    .unwrap();
                if u == 400 {
                    like += acc.take_like().unwrap();
                }
                t += n;
            }
            like += acc.take_like().unwrap();
            let out = match model.kind {
                CovKind::Diagonal => {
                    let a = acc.into_diag().unwrap();
                    [a.occupancy, a.mean_accs, a.var_accs].concat()
                }
                CovKind::Full => {
                    let a = acc.into_full().unwrap();
                    [a.occupancy, a.mean_accs, a.centered_covar_accs].concat()
                }
            };
            let mut b: Vec<u64> = out.iter().map(|x| x.to_bits()).collect();
            b.push(like.to_bits());
            b
        };
        let want = run(&engines[0], false);
        for (i, e) in engines.iter().enumerate() {
            for prepared in [false, true] {
                if i == 0 && !prepared {
                    continue;
                }
                assert!(
                    run(e, prepared) == want,
                    "{} Gaussians {:?} weighted={weighted} prepared={prepared}: {} partitions \
                     differ from 1",
                    model.num_gaussians(),
                    model.kind,
                    i + 1
                );
            }
        }
    }
}
