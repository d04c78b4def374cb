//! Batches written into page-locked memory the CUDA engine lends
//! (`LoadedModel::host_frames` / `accumulate_frames`) against the same
//! batches in ordinary memory (`accumulate_deferred`): the same kernels on
//! the same chunks, so the statistics must agree bit for bit. Several
//! batches are sent before one settle, so lent buffers are recycled while
//! earlier copies may still be reading them; a missing wait would show as
//! different statistics. Also the training tools' batching
//! (`GlobalAccStats`, `AmAccStats` through the CUDA engine) against the f64
//! reference at the 1e-5, including an utterance longer than a
//! batch.
//!
//! Without a GPU every test prints `skipped: no CUDA device` and passes;
//! with `AMTOOL_REQUIRE_GPU=1` a missing GPU fails them.

use std::sync::OnceLock;

use amtool::engine::cuda::model::CudaModel;
use amtool::engine::cuda::{engine_for_tests, pieces_reused_unwaited, CudaEngine};
use amtool::engine::upload::PIECE_FLOATS;
use amtool::engine::{Engine, FrameBatch, FrameSource, FrameTargets, HostFrames, LoadedModel};
use amtool::model::{AcousticModel, CovKind};
use amtool::stats::{ModelAccumulators, UpdateFlags};
use amtool::train::acc_stats::{GlobalAccStats, BATCH_FRAMES};

mod gmm_ref;
use gmm_ref::*;

/// The device, its batch buffers sent piece by piece as they are gathered
/// (as when a process uses several devices).
fn engine() -> Option<&'static CudaEngine> {
    static E: OnceLock<Option<CudaEngine>> = OnceLock::new();
    let e = E.get_or_init(engine_for_tests).as_ref();
    if let Some(e) = e {
        e.set_uploads(true);
    }
    e
}

/// Frame ranges of random batch sizes (1..=`max`) covering `frames`.
fn batches(rng: &mut Rng, frames: usize, max: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut t = 0;
    while t < frames {
        let n = (1 + rng.below(max)).min(frames - t);
        out.push((t, t + n));
        t += n;
    }
    out
}

/// How a test sends its batches.
#[derive(Clone, Copy, PartialEq, Debug)]
enum How {
    /// `accumulate_deferred` from ordinary memory.
    Plain,
    /// Pushed into lent memory (copied there at once).
    Pushed,
    /// Kept as parts of random lengths, one pushed among them, gathered
    /// into lent memory when the batch is sent, and sent on to the device
    /// as they are copied (`engine::upload`).
    Kept,
}

/// A batch of `rows` (frames of `d` floats) queued in `buf` as `how` says.
fn queue(buf: &mut HostFrames, rows: &[f32], d: usize, how: How, rng: &mut Rng) {
    assert!(buf.is_empty() && buf.has_room(rows.len()));
    if how == How::Pushed {
        assert!(buf.push(rows));
        return;
    }
    let frames = rows.len() / d;
    let mut lens = Vec::new();
    let mut t = 0;
    while t < frames {
        lens.push((1 + rng.below(3_000)).min(frames - t));
        t += lens[lens.len() - 1];
    }
    // One part of several is pushed (a batch of one part keeps it).
    let pushed = (lens.len() > 1).then(|| rng.below(lens.len()));
    let mut t = 0;
    for (i, n) in lens.into_iter().enumerate() {
        let part = &rows[t * d..(t + n) * d];
        if pushed == Some(i) {
            assert!(buf.push(part));
        } else {
            assert!(buf.keep_parts(vec![Box::new(part.to_vec()) as Box<dyn FrameSource + Send>]));
        }
        t += n;
    }
}

/// Statistics of `feats` sent batch by batch, `how` says from where;
/// `states[t]`: the state of frame t (None: global statistics). Also the
/// chunks that took the FP16 E-step, and the batches uploaded early.
fn send(
    e: &CudaEngine,
    m: &AcousticModel,
    feats: &[f32],
    states: Option<&[u32]>,
    ranges: &[(usize, usize)],
    how: How,
) -> (ModelAccumulators, f64, usize, usize) {
    let d = m.dim;
    let mut cm = CudaModel::new(e, m).expect("model");
    let mut acc = ModelAccumulators::zeros(m, UpdateFlags::default());
    let max = ranges.iter().map(|r| r.1 - r.0).max().unwrap_or(1);
    let mut buf = cm.host_frames(max * d).expect("host frames");
    assert!(buf.is_lent(), "the CUDA engine lends page-locked memory");
    let mut rng = Rng(ranges.len() as u64);
    let mut like = 0.0;
    for &(t0, t1) in ranges {
        let targets = match states {
            None => FrameTargets::Global,
            Some(s) => FrameTargets::Aligned(&s[t0..t1]),
        };
        let rows = &feats[t0 * d..t1 * d];
        let l = if how != How::Plain {
            queue(&mut buf, rows, d, how, &mut rng);
            let l = cm.accumulate_frames(&mut buf, d, targets, &mut acc);
            // The lent memory went with the batch: the caller asks for more.
            assert!(
                buf.is_empty() && !buf.has_room(1),
                "the batch's memory went with it"
            );
            buf = cm.host_frames(max * d).expect("host frames");
            assert!(buf.is_lent(), "the next batch's memory is lent again");
            l
        } else {
            cm.accumulate_deferred(FrameBatch::new(rows, d), targets, &mut acc)
        };
        like += l.expect("accumulate").unwrap_or(0.0);
    }
    like += cm.settle(&mut acc).expect("settle");
    (acc, like, cm.fp16_estep_chunks(), cm.uploaded_batches())
}

type Sent = (ModelAccumulators, f64, usize, usize);

fn same_bits(lent: &Sent, plain: &Sent) {
    assert!(lent.0 == plain.0, "lent and plain statistics differ");
    assert_eq!(lent.1.to_bits(), plain.1.to_bits(), "likelihoods differ");
}

#[test]
fn cuda_lent_batches_equal_plain_aligned() {
    let Some(e) = engine() else { return };
    let mut rng = Rng(11);
    let counts: Vec<usize> = (0..70).map(|_| 1 + rng.below(40)).collect();
    let m = random_model(&mut rng, 13, CovKind::Diagonal, &counts);
    let frames = 40_000;
    let feats = random_feats(&mut rng, frames, m.dim);
    let states: Vec<u32> = (0..frames)
        .map(|_| rng.below(counts.len()) as u32)
        .collect();
    let ranges = batches(&mut rng, frames, 9_000);
    assert!(ranges.len() > 4, "buffers are recycled");
    let plain = send(e, &m, &feats, Some(&states), &ranges, How::Plain);
    let lent = send(e, &m, &feats, Some(&states), &ranges, How::Pushed);
    same_bits(&lent, &plain);
    let kept = send(e, &m, &feats, Some(&states), &ranges, How::Kept);
    same_bits(&kept, &plain);
    assert_eq!(
        (lent.3, kept.3),
        (0, ranges.len()),
        "batches uploaded early"
    );
    let want = ref_accumulate(&m, &feats, FrameTargets::Aligned(&states));
    compare_acc(&lent.0, &want).expect("vs f64");
}

#[test]
fn cuda_lent_batches_equal_plain_global_fp16_and_fp32() {
    let Some(e) = engine() else { return };
    // 300 Gaussians take the FP16 E-step (largest |x| from the lent memory),
    // 20 the FP32 statistics kernels.
    for (g, fp16) in [(300, true), (20, false)] {
        let mut rng = Rng(5 + g as u64);
        let m = random_model(&mut rng, 40, CovKind::Diagonal, &[g]);
        let frames = 30_000;
        let feats = random_feats(&mut rng, frames, m.dim);
        let ranges = batches(&mut rng, frames, 7_000);
        let lent = send(e, &m, &feats, None, &ranges, How::Pushed);
        let plain = send(e, &m, &feats, None, &ranges, How::Plain);
        same_bits(&lent, &plain);
        let kept = send(e, &m, &feats, None, &ranges, How::Kept);
        same_bits(&kept, &plain);
        assert_eq!(
            (lent.3, kept.3),
            (0, ranges.len()),
            "batches uploaded early"
        );
        assert_eq!(lent.2 > 0, fp16, "{g} Gaussians: FP16 E-step used");
        let want = ref_accumulate(&m, &feats, FrameTargets::Global);
        compare_acc(&lent.0, &want).expect("vs f64");
    }
}

/// Batches of many pieces each (`upload::PIECE_FLOATS`), with parts
/// longer than a piece, and chunks of the FP16 E-step that cut parts,
/// against the same in ordinary memory, bit for bit.
#[test]
fn cuda_batches_sent_while_gathered_equal_plain() {
    let Some(e) = engine() else { return };
    let mut rng = Rng(31);
    let m = random_model(&mut rng, 40, CovKind::Diagonal, &[300]);
    let frames = 240_000;
    let feats = random_feats(&mut rng, frames, m.dim);
    let mut ranges = batches(&mut rng, 140_000, 30_000);
    ranges.push((140_000, frames));
    assert!((frames - 140_000) * m.dim > 6 * PIECE_FLOATS);
    let plain = send(e, &m, &feats, None, &ranges, How::Plain);
    let kept = send(e, &m, &feats, None, &ranges, How::Kept);
    same_bits(&kept, &plain);
    assert_eq!(kept.3, ranges.len(), "batches uploaded early");
    assert!(kept.2 > 0, "FP16 E-step used");
    // A second job: the copying threads' pieces were last read by the
    // first job's batches, which have all landed, so they are reused
    // without waiting for their events, and the bits are the same.
    let reused = pieces_reused_unwaited();
    let again = send(e, &m, &feats, None, &ranges, How::Kept);
    same_bits(&again, &plain);
    assert!(
        pieces_reused_unwaited() > reused,
        "pieces of landed batches reused without a wait"
    );
}

/// `gmm-global-acc-stats` through the CUDA engine: utterances batched into
/// lent memory, owned and borrowed, one of them longer than a batch.
#[test]
fn cuda_global_acc_stats_batches_in_lent_memory() {
    let Some(e) = engine() else { return };
    let mut rng = Rng(23);
    let d = 5;
    let m = random_model(&mut rng, d, CovKind::Diagonal, &[24]);
    let lens = [700, BATCH_FRAMES + 300, 1, 90_000, BATCH_FRAMES - 5, 4_000];
    let frames: usize = lens.iter().sum();
    let feats = random_feats(&mut rng, frames, d);
    let mut acc = GlobalAccStats::new(e, &m, UpdateFlags::default()).expect("acc");
    let mut t = 0;
    for (u, &n) in lens.iter().enumerate() {
        let rows = &feats[t * d..(t + n) * d];
        let key = format!("utt{u}");
        // Owned utterances wait and are copied in together; borrowed ones
        // are copied at once, after those.
        let out = if u % 3 == 1 {
            acc.add_utterance(&key, rows, n, d, None, None)
        } else {
            acc.add_utterance(&key, rows.to_vec(), n, d, None, None)
        };
        out.expect("utterance");
        t += n;
    }
    let like = acc.take_like().expect("like");
    let got = acc.into_diag().expect("accs");
    // The same statistics on the CPU engine (held to 1e-5 against each other,
    // as both are against the f64 reference).
    let cpu = amtool::engine::cpu::CpuEngine::new(2).expect("cpu");
    let mut h = cpu.load(&m).expect("load");
    let mut want = ModelAccumulators::zeros(&m, UpdateFlags::default());
    h.accumulate(FrameBatch::new(&feats, d), FrameTargets::Global, &mut want)
        .expect("cpu accumulate");
    let rel = |a: f64, b: f64| (a - b).abs() / b.abs().max(1e-30);
    assert!(
        rel(like, want.total_like) < TOL,
        "like {like} vs {}",
        want.total_like
    );
    let occ: f64 = got.occupancy.iter().sum();
    assert!(
        rel(occ, frames as f64) < 1e-6,
        "occupancy {occ} of {frames} frames"
    );
    let w = &want.states[0];
    for (name, a, b) in [
        ("occupancy", &got.occupancy, &w.occupancy),
        ("mean", &got.mean_accs, &w.mean_acc),
        ("var", &got.var_accs, &w.var_acc),
    ] {
        assert_eq!(a.len(), b.len(), "{name} length");
        let err = rel_err(a.iter().copied(), b.iter().copied());
        assert!(
            err <= TOL,
            "{name}: rel err {err:.3e} against the CPU engine"
        );
    }
}
