use std::sync::Condvar;

use super::*;
use crate::bench::random::{self, Rng};
use crate::engine::cpu::CpuEngine;
use crate::engine::test_engines::GpuLike;
use crate::engine::FrameSource;
use crate::engine::Selection;
use crate::model::CovKind;
use crate::stats::UpdateFlags;

fn cpu_parts(n: usize) -> MultiEngine {
    let parts = (0..n)
        .map(|_| Box::new(CpuEngine::new(1).unwrap()) as Box<dyn Engine>)
        .collect();
    MultiEngine::new(parts).unwrap().with_min_part_rows(1)
}

fn keeping_parts(n: usize) -> MultiEngine {
    let parts = (0..n)
        .map(|_| Box::new(GpuLike::keeping()) as Box<dyn Engine>)
        .collect();
    MultiEngine::new(parts).unwrap()
}

/// Every form of targets over `frames` frames of `states` states.
fn targets_of(
    rng: &mut Rng,
    frames: usize,
    states: usize,
) -> (Vec<u32>, Vec<usize>, Vec<(u32, f32)>) {
    let ali = (0..frames).map(|_| rng.int(0, states - 1) as u32).collect();
    let mut offsets = vec![0];
    let mut pairs = Vec::new();
    for _ in 0..frames {
        for _ in 0..rng.int(0, 3) {
            pairs.push((rng.int(0, states - 1) as u32, rng.uniform() as f32));
        }
        offsets.push(pairs.len());
    }
    (ali, offsets, pairs)
}

/// Statistics of one big call (cut into pieces, dealt to the devices)
/// and of a stream of deferred batches, on 1, 2 and 3 devices, diagonal
/// and full, every kind of targets: the same bits.
#[test]
fn statistics_are_the_same_bits_on_any_number_of_devices() {
    let mut rng = Rng::new(7);
    for kind in [CovKind::Diagonal, CovKind::Full] {
        let (d, states) = (3, 4);
        let global = random::model(&mut rng, &[5], d, kind);
        let am = random::model(&mut rng, &[2, 3, 1, 4], d, kind);
        let frames = 2 * PIECE_FRAMES + 1234;
        let data = random::uneven_features(&mut rng, frames, d, 2.0);
        let feats = FrameBatch::new(&data, d);
        let (ali, offsets, pairs) = targets_of(&mut rng, frames, states);
        // Gaussian selection: 1..=3 of the global GMM's 5 per frame.
        let mut sel_off = vec![0];
        let mut sel_comp = Vec::new();
        for _ in 0..frames {
            for _ in 0..rng.int(1, 3) {
                sel_comp.push(rng.int(0, 4) as u32);
            }
            sel_off.push(sel_comp.len());
        }
        let sel_w: Vec<f32> = (0..frames).map(|t| (t % 4) as f32 * 0.5).collect();
        let cases: [(&AcousticModel, FrameTargets<'_>); 4] = [
            (
                &global,
                FrameTargets::Selected(Selection {
                    offsets: &sel_off,
                    components: &sel_comp,
                    weights: Some(&sel_w),
                }),
            ),
            (&global, FrameTargets::Global),
            (&am, FrameTargets::Aligned(&ali)),
            (
                &am,
                FrameTargets::Weighted {
                    offsets: &offsets,
                    pairs: &pairs,
                },
            ),
        ];
        for (model, targets) in cases {
            let run = |engine: &MultiEngine| {
                let mut lm = engine.load(model).unwrap();
                let mut one = ModelAccumulators::zeros(model, UpdateFlags::default());
                let like = lm.accumulate(feats, targets, &mut one).unwrap();
                // A stream of uneven deferred batches, settled twice.
                let mut many = ModelAccumulators::zeros(model, UpdateFlags::default());
                let mut like2 = 0.0;
                let mut t0 = 0;
                for (i, n) in [1000, 70_000, 1, 300_000, 5_000].into_iter().enumerate() {
                    let r = t0..t0 + n;
                    let mut o = Vec::new();
                    let t = piece_targets(&targets, r.clone(), &mut o).unwrap();
                    like2 += lm
                        .accumulate_deferred(feats.rows(r).unwrap(), t, &mut many)
                        .unwrap()
                        .unwrap_or(0.0);
                    if i == 2 {
                        like2 += lm.settle(&mut many).unwrap();
                    }
                    t0 += n;
                }
                like2 += lm.settle(&mut many).unwrap();
                (
                    like.to_bits(),
                    one.bit_patterns(),
                    like2.to_bits(),
                    many.bit_patterns(),
                )
            };
            let want = run(&cpu_parts(1));
            for n in [2, 3] {
                assert!(run(&cpu_parts(n)) == want, "{kind:?}: {n} devices");
            }
            let kept = run(&keeping_parts(1));
            for n in [2, 3] {
                assert!(
                    run(&keeping_parts(n)) == kept,
                    "{kind:?}: {n} keeping devices"
                );
            }
            assert_eq!(kept, want, "kept and returned statistics add the same");
        }
    }
}

/// The dimension of [`small_model`].
const D2: usize = 2;

/// A three-Gaussian diagonal model of dimension [`D2`] from `seed`, and
/// the generator after it.
fn small_model(seed: u64) -> (Rng, AcousticModel) {
    let mut rng = Rng::new(seed);
    let model = random::model(&mut rng, &[3], D2, CovKind::Diagonal);
    (rng, model)
}

/// A model's drop hands its parts to their devices' threads and
/// returns without waiting for them; the engine's drop waits for them.
#[test]
fn a_models_parts_are_dropped_on_their_threads_unwaited() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let threads_seen = Arc::new(Mutex::new(Vec::new()));
    let timed_out = Arc::new(AtomicUsize::new(0));
    let hook: crate::engine::test_engines::DropHook = {
        let (gate, seen, timed_out) = (gate.clone(), threads_seen.clone(), timed_out.clone());
        Arc::new(move || {
            let (open, cv) = &*gate;
            let open = open.lock().unwrap();
            let (_open, w) = cv
                .wait_timeout_while(open, Duration::from_secs(20), |o| !*o)
                .unwrap();
            if w.timed_out() {
                timed_out.fetch_add(1, Ordering::SeqCst);
            }
            let name = std::thread::current().name().map(String::from);
            seen.lock().unwrap().push(name);
        })
    };
    let parts: Vec<Box<dyn Engine>> = (0..2)
        .map(|_| Box::new(GpuLike::keeping_dropped_with(hook.clone())) as Box<dyn Engine>)
        .collect();
    let engine = MultiEngine::new(parts).unwrap();
    let (_, model) = small_model(7);
    let loaded = engine.load(&model).unwrap();
    // Returns while both parts' drops wait for the gate.
    drop(loaded);
    assert!(threads_seen.lock().unwrap().is_empty());
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    drop(engine);
    let mut seen = threads_seen.lock().unwrap().clone();
    seen.sort();
    let want = ["amtool-dev-0", "amtool-dev-1"].map(|n| Some(n.to_string()));
    assert_eq!(seen, want);
    assert_eq!(
        timed_out.load(Ordering::SeqCst),
        0,
        "a drop waited for its parts"
    );
}

/// Each of `frames` frames counted once in `acc` (its one state's
/// occupancies sum to them).
fn assert_counted(acc: &ModelAccumulators, frames: usize) {
    let occupancy: f64 = acc.states[0].occupancy.iter().sum();
    assert!((occupancy - frames as f64).abs() < 1e-4, "{occupancy}");
}

/// A model on `engines` as one (what `MultiEngine::load` makes), to
/// look at its state.
/// `threads` are the engine's: declared after `engines` (and before
/// the model), their drop runs the models' drops while `engines` live.
fn lending_model<'e>(
    engines: &'e [GpuLike],
    threads: &'e DeviceThreads,
    model: &AcousticModel,
) -> MultiModel<'e> {
    let parts = engines
        .iter()
        .map(|e| e.load(model))
        .collect::<Result<Vec<_>>>()
        .unwrap();
    static SHAPE: Mutex<Option<Arc<ModelAccumulators>>> = Mutex::new(None);
    MultiModel::new(parts, 1, Senders::new(threads), &SHAPE)
}

/// `rows` (`d` wide) as one batch of `mm`, kept to be copied in.
fn send_rows(mm: &mut MultiModel<'_>, rows: &[f32], d: usize, acc: &mut ModelAccumulators) {
    let mut frames = mm.host_frames(rows.len()).unwrap();
    assert!(frames.keep_parts(vec![Box::new(rows.to_vec())]));
    mm.accumulate_frames(&mut frames, d, FrameTargets::Global, acc)
        .unwrap();
}

/// Batches of uneven sizes go to the device given the fewest frames;
/// no more than [`HELD`] a device wait and [`DEPTH`] a device are in
/// flight; a settle sends every batch, each counted once.
#[test]
fn batches_go_to_the_device_given_the_fewest_frames() {
    let (mut rng, model) = small_model(11);
    let d = D2;
    let engines = [GpuLike::lending(), GpuLike::lending()];
    let threads = DeviceThreads::start(engines.len()).unwrap();
    let mut mm = lending_model(&engines, &threads, &model);
    let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
    let sizes = [300, 100, 100, 100, 50, 250, 20, 20, 20, 20, 20, 20, 20, 20];
    let total: usize = sizes.iter().sum();
    let data = random::features(&mut rng, total, d);
    let mut nexts = Vec::new();
    let mut at = 0;
    for &n in &sizes {
        send_rows(&mut mm, &data[at * d..(at + n) * d], d, &mut acc);
        at += n;
        nexts.push(mm.next);
        assert!(mm.held.len() <= HELD * 2, "{} held", mm.held.len());
        for p in 0..2 {
            assert!(mm.in_flight(p) <= DEPTH, "device {p}: {}", mm.in_flight(p));
        }
    }
    // Given: [300, 0] → 1; [300, 100] → 1; [300, 200] → 1; [300, 300]
    // → 0; [350, 300] → 1; [350, 550] → 0; then 20s to device 0 until
    // it passes 550.
    assert_eq!(&nexts[..6], &[1, 1, 1, 0, 1, 0]);
    assert_eq!(mm.given, vec![510, 550]);
    mm.settle(&mut acc).unwrap();
    assert!(mm.held.is_empty() && mm.flight.is_empty());
    assert_counted(&acc, total);
}

/// The zeros that give the devices' sends the accumulators' shape are
/// made once for an engine's models of one shape and flags (the next
/// job's first send does not make them again), and anew for other
/// flags; every job's frames are counted.
#[test]
fn models_of_one_shape_share_the_zeros_of_their_shape() {
    let (mut rng, model) = small_model(14);
    let d = D2;
    let parts: Vec<Box<dyn Engine>> =
        vec![Box::new(GpuLike::lending()), Box::new(GpuLike::lending())];
    let engine = MultiEngine::new(parts).unwrap();
    let data = random::features(&mut rng, 300, d);
    let job = |flags: UpdateFlags| {
        let mut lm = engine.load(&model).unwrap();
        let mut acc = ModelAccumulators::zeros(&model, flags);
        let mut frames = lm.host_frames(data.len()).unwrap();
        assert!(frames.keep_parts(vec![Box::new(data.clone())]));
        lm.accumulate_frames(&mut frames, d, FrameTargets::Global, &mut acc)
            .unwrap();
        lm.settle(&mut acc).unwrap();
        assert_counted(&acc, 300);
        let kept = engine.shape.lock().unwrap().clone();
        kept.expect("the shape kept by the engine")
    };
    let first = job(UpdateFlags::default());
    let second = job(UpdateFlags::default());
    assert!(Arc::ptr_eq(&first, &second), "made once");
    let flags = UpdateFlags {
        variances: false,
        ..UpdateFlags::default()
    };
    let other = job(flags);
    assert!(!Arc::ptr_eq(&first, &other), "made for other flags");
    assert_eq!(other.flags, flags);
    // Zeros of more than KEPT_SHAPE_VALUES are not kept between jobs
    // (1100 Gaussians of 2000 dimensions: 4.4M values; four frames).
    let (bd, frames_big) = (2000, 4);
    let big = random::model(&mut rng, &[1100], bd, CovKind::Diagonal);
    let big_data = random::features(&mut rng, frames_big, bd);
    let mut lm = engine.load(&big).unwrap();
    let mut acc = ModelAccumulators::zeros(&big, UpdateFlags::default());
    let mut frames = lm.host_frames(big_data.len()).unwrap();
    assert!(frames.keep_parts(vec![Box::new(big_data)]));
    lm.accumulate_frames(&mut frames, bd, FrameTargets::Global, &mut acc)
        .unwrap();
    lm.settle(&mut acc).unwrap();
    assert_counted(&acc, frames_big);
    assert!(
        engine.shape.lock().unwrap().is_none(),
        "a large shape is not kept"
    );
}

/// A held batch whose frames are in place goes to its device at the
/// next hold, before the batches after it (the rounds of the sessions
/// before held it until a whole round after it was full).
#[test]
fn a_batch_is_sent_as_soon_as_its_frames_are_in_place() {
    let (mut rng, model) = small_model(12);
    let d = D2;
    let engines = [GpuLike::lending(), GpuLike::lending()];
    let threads = DeviceThreads::start(engines.len()).unwrap();
    let mut mm = lending_model(&engines, &threads, &model);
    let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
    let data = random::features(&mut rng, 200, d);
    hold_copied(&mut mm, &data[..100 * d], d, &mut acc);
    // The second batch's copy cannot end before its hold looks.
    let gate = send_gated(&mut mm, &data[100 * d..], d, &mut acc);
    assert_eq!(
        mm.flight.len(),
        1,
        "the first batch went at the second's hold"
    );
    assert_eq!(mm.flight[0].part, 0);
    gate.open();
    mm.settle(&mut acc).unwrap();
    assert_counted(&acc, 200);
}

/// A device still being made ready (`statistics_ready` false) gets no
/// batch from `send_copied`, even copied: the host goes on holding; once
/// ready, its batch goes at the next `send_copied`.
#[test]
fn a_device_not_ready_gets_its_batches_once_ready() {
    let (mut rng, model) = small_model(15);
    let d = D2;
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let engines = [
        GpuLike::lending(),
        GpuLike::lending_ready_when(ready.clone()),
    ];
    let threads = DeviceThreads::start(engines.len()).unwrap();
    let mut mm = lending_model(&engines, &threads, &model);
    let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
    let data = random::features(&mut rng, 200, d);
    hold_copied(&mut mm, &data[..100 * d], d, &mut acc);
    mm.send_copied(&mut acc).unwrap();
    assert_eq!(
        (mm.held.len(), mm.flight.len()),
        (0, 1),
        "device 0 is ready"
    );
    hold_copied(&mut mm, &data[100 * d..], d, &mut acc);
    assert_eq!(mm.held[0].part, 1);
    mm.send_copied(&mut acc).unwrap();
    assert_eq!(
        (mm.held.len(), mm.flight.len()),
        (1, 1),
        "sent to a device not ready"
    );
    assert!(!mm.statistics_ready());
    ready.store(true, std::sync::atomic::Ordering::SeqCst);
    mm.send_copied(&mut acc).unwrap();
    assert_eq!((mm.held.len(), mm.flight.len()), (0, 2));
    mm.settle(&mut acc).unwrap();
    assert_counted(&acc, 200);
}

/// Waits until the copy of `mm`'s oldest held batch has ended. On a
/// host of few cores the copies run on rayon's global pool, behind the
/// other tests' work there: a CI run (2 cores, debug build) once waited
/// more than 10 s, hence the minute.
fn wait_copied(mm: &mut MultiModel<'_>) {
    let t0 = std::time::Instant::now();
    while !mm.held.front_mut().is_some_and(|h| h.frames.is_done()) {
        assert!(t0.elapsed().as_secs() < 60, "the copy never ended");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// [`send_rows`] of a batch left held and copied: its copy is gated
/// until its hold has looked, since a copy ended by then (gatherer
/// threads can be that fast) sends the batch there.
fn hold_copied(mm: &mut MultiModel<'_>, rows: &[f32], d: usize, acc: &mut ModelAccumulators) {
    let held = mm.held.len();
    let gate = send_gated(mm, rows, d, acc);
    assert_eq!(mm.held.len(), held + 1, "the batch is not held");
    gate.open();
    let t0 = std::time::Instant::now();
    while !mm.held.back_mut().is_some_and(|h| h.frames.is_done()) {
        assert!(t0.elapsed().as_secs() < 60, "the copy never ended");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A gate that frames' copies wait at until it opens.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }

    fn wait(&self) {
        let (lock, cv) = &*self.0;
        let mut open = lock.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
    }
}

/// Frames whose copy waits at a gate.
struct Gated {
    frames: Vec<f32>,
    gate: Gate,
}

impl FrameSource for Gated {
    fn floats(&self) -> usize {
        self.frames.len()
    }
    fn copy_to(&self, dst: &mut [f32]) {
        self.gate.wait();
        dst.copy_from_slice(&self.frames);
    }
}

/// [`send_rows`] of frames whose copy waits until the gate returned
/// opens.
fn send_gated(
    mm: &mut MultiModel<'_>,
    rows: &[f32],
    d: usize,
    acc: &mut ModelAccumulators,
) -> Gate {
    let gate = Gate::default();
    let mut frames = mm.host_frames(rows.len()).unwrap();
    let gated = Gated {
        frames: rows.to_vec(),
        gate: gate.clone(),
    };
    assert!(frames.keep_parts(vec![Box::new(gated)]));
    mm.accumulate_frames(&mut frames, d, FrameTargets::Global, acc)
        .unwrap();
    gate
}

/// A held batch whose copy ends while the caller fills the next batch
/// goes out at the caller's next `send_copied` (between utterances),
/// not only at the next batch's hold.
#[test]
fn a_batch_copied_goes_at_the_next_send_copied() {
    let (mut rng, model) = small_model(13);
    let d = D2;
    let engines = [GpuLike::lending(), GpuLike::lending()];
    let threads = DeviceThreads::start(engines.len()).unwrap();
    let mut mm = lending_model(&engines, &threads, &model);
    let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
    let data = random::features(&mut rng, 100, d);
    let gate = send_gated(&mut mm, &data, d, &mut acc);
    assert_eq!((mm.held.len(), mm.flight.len()), (1, 0));
    mm.send_copied(&mut acc).unwrap();
    assert_eq!((mm.held.len(), mm.flight.len()), (1, 0), "sent uncopied");
    gate.open();
    wait_copied(&mut mm);
    assert_eq!(mm.flight.len(), 0, "nothing sends by itself");
    mm.send_copied(&mut acc).unwrap();
    assert_eq!((mm.held.len(), mm.flight.len()), (0, 1));
    mm.settle(&mut acc).unwrap();
    assert_counted(&acc, 100);
}

/// A part whose drop waits (up to 10 s) until the test lets it go and
/// notes whether it was let go.
struct SlowToDrop {
    frames: Vec<f32>,
    release: Mutex<std::sync::mpsc::Receiver<()>>,
    released: Arc<Mutex<Option<bool>>>,
}

impl crate::engine::host_frames::FrameSource for SlowToDrop {
    fn floats(&self) -> usize {
        self.frames.len()
    }
    fn copy_to(&self, dst: &mut [f32]) {
        dst.copy_from_slice(&self.frames);
    }
}

impl Drop for SlowToDrop {
    fn drop(&mut self) {
        let waited = self
            .release
            .lock()
            .unwrap()
            .recv_timeout(std::time::Duration::from_secs(10));
        *self.released.lock().unwrap() = Some(waited.is_ok());
    }
}

/// A batch's frames are handed on as soon as they are copied, before
/// the parts copied are let go (letting go of a mapped archive's last
/// part unmaps it, which held the job's last batch 3–4 ms): here the
/// drop of the part waits for the test, which lets it go only once
/// `finish` has returned the frames.
#[test]
fn copied_frames_come_back_before_their_parts_are_let_go() {
    let (tx, rx) = std::sync::mpsc::channel();
    let released = Arc::new(Mutex::new(None));
    let part = SlowToDrop {
        frames: vec![1.0, 2.0, 3.0],
        release: Mutex::new(rx),
        released: released.clone(),
    };
    let mut frames = HostFrames::lent(Box::new(crate::engine::test_engines::VecMem(vec![0.0; 3])));
    assert!(frames.keep_parts(vec![Box::new(part)]));
    let mut turns = GatherTurns::default();
    let gathering = Gathering::start(frames, 1, &mut turns).unwrap();
    let frames = gathering.finish().unwrap();
    assert_eq!(frames.as_slice(), &[1.0, 2.0, 3.0]);
    assert_eq!(*released.lock().unwrap(), None, "the part was let go first");
    tx.send(()).unwrap();
    let t0 = std::time::Instant::now();
    while released.lock().unwrap().is_none() && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(*released.lock().unwrap(), Some(true));
}

/// The test above would see a wrong order: the same batches added in
/// another order give other bits.
#[test]
fn the_order_of_the_batches_shows_in_the_bits() {
    let mut rng = Rng::new(3);
    let model = random::model(&mut rng, &[6], 4, CovKind::Diagonal);
    let data = random::uneven_features(&mut rng, 60_000, 4, 2.0);
    let engine = CpuEngine::new(1).unwrap();
    let mut lm = engine.load(&model).unwrap();
    let shape = ModelAccumulators::zeros(&model, UpdateFlags::default());
    let batches: Vec<ModelAccumulators> = data
        .chunks(4 * 5_000)
        .map(|c| {
            lm.accumulate_apart(FrameBatch::new(c, 4), FrameTargets::Global, &shape)
                .unwrap()
                .unwrap()
        })
        .collect();
    let sum = |order: &mut dyn Iterator<Item = &ModelAccumulators>| {
        let mut a = shape.zeros_like();
        order.for_each(|b| a.add(b));
        a.bit_patterns()
    };
    let forward = sum(&mut batches.iter());
    let dealt = sum(&mut batches
        .iter()
        .step_by(2)
        .chain(batches.iter().skip(1).step_by(2)));
    assert_ne!(forward, dealt);
}

/// A call's kernel time on several devices is the longest device's
/// (its batches' kernels summed), as one device's is its kernels' sum;
/// none where a device does not time its kernels.
#[test]
fn kernel_time_is_the_longest_devices() {
    use crate::engine::test_engines::SECONDS_A_FRAME;
    let mut rng = Rng::new(21);
    let model = random::model(&mut rng, &[3], 2, CovKind::Diagonal);
    let frames = 2 * PIECE_FRAMES + 1234;
    let data = random::features(&mut rng, frames, 2);
    let kernels = |engine: &MultiEngine| {
        let mut lm = engine.load(&model).unwrap();
        let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
        lm.accumulate(FrameBatch::new(&data, 2), FrameTargets::Global, &mut acc)
            .unwrap();
        let first = lm.last_kernel_seconds();
        // A second call counts its own batches only.
        let half = FrameBatch::new(&data[..2 * 1000], 2);
        lm.accumulate(half, FrameTargets::Global, &mut acc).unwrap();
        (first, lm.last_kernel_seconds())
    };
    let secs = |f: usize| Some(f as f64 * SECONDS_A_FRAME);
    assert_eq!(kernels(&keeping_parts(1)), (secs(frames), secs(1000)));
    // Pieces 0 and 2 on device 0, piece 1 on device 1.
    let longest = secs(PIECE_FRAMES + 1234);
    assert_eq!(kernels(&keeping_parts(2)), (longest, secs(1000)));
    assert_eq!(kernels(&cpu_parts(2)), (None, None));
    // Scoring: the longest of the devices' last calls, on those used.
    let scored = |engine: &MultiEngine, rows: usize| {
        let mut lm = engine.load(&model).unwrap();
        let mut out = vec![0f32; rows];
        lm.state_loglikes(FrameBatch::new(&data[..2 * rows], 2), &mut out)
            .unwrap();
        lm.last_kernel_seconds()
    };
    let two = keeping_parts(2);
    assert_eq!(scored(&two, 3001), secs(1501), "3001 rows on two devices");
    assert_eq!(scored(&two, 1500), secs(1500), "too few rows to split");
}

#[test]
fn scoring_rows_land_in_place_on_any_number_of_devices() {
    let mut rng = Rng::new(11);
    for kind in [CovKind::Diagonal, CovKind::Full] {
        let model = random::model(&mut rng, &[3, 1, 4, 2, 5], 3, kind);
        let frames = 1001;
        let data = random::features(&mut rng, frames, 3);
        let feats = FrameBatch::new(&data, 3);
        let run = |engine: &dyn Engine| {
            let mut lm = engine.load(&model).unwrap();
            let mut s = vec![0f32; frames * 5];
            lm.state_loglikes(feats, &mut s).unwrap();
            let mut rows = vec![0f32; 300 * 5];
            lm.state_loglikes_rows(feats, 400..700, &mut rows).unwrap();
            let mut c = vec![0f32; frames * 4];
            lm.component_loglikes(2, feats, &mut c).unwrap();
            let b = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            (b(&s), b(&rows), b(&c))
        };
        let want = run(&CpuEngine::new(1).unwrap());
        assert_eq!(want.1, want.0[400 * 5..700 * 5]);
        for n in [1, 2, 3] {
            assert!(run(&cpu_parts(n)) == want, "{kind:?}: {n} devices");
        }
    }
}

/// A batch whose send fails on its device's thread gives its error
/// and leaves nothing behind: the batches after it are counted as if
/// it had never come.
#[test]
fn a_failed_send_is_an_error_and_leaves_the_flight() {
    let mut rng = Rng::new(5);
    let model = random::model(&mut rng, &[2, 2], 2, CovKind::Diagonal);
    let engine = cpu_parts(2);
    let mut lm = engine.load(&model).unwrap();
    let data = random::features(&mut rng, 6, 2);
    let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
    let send = |lm: &mut Box<dyn LoadedModel + '_>, states: &[u32], acc: &mut _| {
        let mut frames = HostFrames::with_capacity(12);
        frames.push(&data);
        lm.accumulate_frames(&mut frames, 2, FrameTargets::Aligned(states), acc)
            .and_then(|_| lm.settle(acc))
    };
    let e = send(&mut lm, &[0, 1, 9, 0, 1, 0], &mut acc).unwrap_err();
    assert!(e.to_string().contains('9'), "{e}");
    send(&mut lm, &[0, 1, 1, 0, 1, 0], &mut acc).unwrap();
    let occupancy = |s: usize| acc.states[s].occupancy.iter().sum::<f64>();
    assert!((occupancy(0) - 3.0).abs() < 1e-4 && (occupancy(1) - 3.0).abs() < 1e-4);
    assert_eq!(acc.total_frames, 6.0);
}

#[test]
fn part_ranges_cover_the_rows_in_order() {
    assert_eq!(part_ranges(0..10, 3, 1), vec![0..4, 4..8, 8..10]);
    assert_eq!(part_ranges(5..9, 3, 2), vec![5..7, 7..9]);
    assert_eq!(part_ranges(0..3, 2, 1024), vec![0..3]);
    assert_eq!(part_ranges(4..4, 2, 1), vec![4..4]);
}

#[test]
fn bad_inputs_are_errors() {
    let e = MultiEngine::new(Vec::new()).err().unwrap();
    assert!(e.to_string().contains("no device"), "{e}");
    let mixed: Vec<Box<dyn Engine>> = vec![
        Box::new(CpuEngine::new(1).unwrap()),
        Box::new(GpuLike::keeping()),
    ];
    let e = MultiEngine::new(mixed).err().unwrap();
    assert!(e.to_string().contains("of one kind"), "{e}");
    let mut rng = Rng::new(1);
    let model = random::model(&mut rng, &[2, 2], 2, CovKind::Diagonal);
    let engine = cpu_parts(2);
    let mut lm = engine.load(&model).unwrap();
    let data = random::features(&mut rng, 10, 2);
    let mut acc = ModelAccumulators::zeros(&model, UpdateFlags::default());
    let short = [0u32; 9];
    let e = lm
        .accumulate(
            FrameBatch::new(&data, 2),
            FrameTargets::Aligned(&short),
            &mut acc,
        )
        .unwrap_err();
    assert!(e.to_string().contains("targets"), "{e}");
    let mut out = vec![0f32; 7];
    assert!(lm
        .state_loglikes(FrameBatch::new(&data, 2), &mut out)
        .is_err());
    let mut frames = HostFrames::with_capacity(8);
    frames.push(&data[..5]);
    let e = lm
        .accumulate_frames(&mut frames, 2, FrameTargets::Global, &mut acc)
        .unwrap_err();
    assert!(e.to_string().contains("whole frames"), "{e}");
    assert_eq!("all".parse::<Gpus>(), Ok(Gpus::All));
    assert_eq!("3".parse::<Gpus>(), Ok(Gpus::Count(3)));
    assert!("0".parse::<Gpus>().unwrap_err().contains("--gpus=0"));
}
