//! The end-to-end statistics case: EM statistics of a global GMM over a
//! binary feature ark on disk, through the same library path as
//! `amtool acc-stats` (gmm-global-acc-stats): read-ahead table reader
//! (`SharedFeats`: matrices kept as handles on the mapped file) → batches in
//! memory the engine lends → engine → accumulators. Reported beside the two
//! times it is judged against: the engine's kernel time on the same frames
//! held in memory, and one plain read of the file that decodes every matrix
//! (from the page cache, as a second pass finds it; the end-to-end runs find
//! it there too).

use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::{SequentialTableReader, TableWriter};

use super::json::Json;
use super::random::{self, Rng};
use super::{accumulate_once, time_median, BenchConfig, Timing};
use crate::engine::batch_trace::{flush as trace_flush, mark as trace_mark};
use crate::engine::{Engine, FrameBatch, FrameTargets};
use crate::model::{AcousticModel, CovKind};
use crate::stats::UpdateFlags;
use crate::train::acc_stats::GlobalAccStats;
use crate::train::prefetch::SharedFeats;
use crate::{Error, Result};

/// Frames per utterance of the generated ark (a 10 s utterance at 100 fps).
const UTT_FRAMES: usize = 1000;

fn table_err(e: amtool_formats::Error) -> Error {
    Error::Usage(format!("bench ark: {e}"))
}

/// `data` (frames × `d`) written as a binary feature ark `feats.ark` of
/// `utt_frames`-frame utterances in a new temporary folder; its rspecifier.
fn feature_ark(data: &[f32], d: usize, utt_frames: usize) -> Result<(tempfile::TempDir, String)> {
    let dir = tempfile::tempdir().map_err(|e| Error::Usage(format!("bench temp dir: {e}")))?;
    let spec = format!("ark:{}", dir.path().join("feats.ark").display());
    let mut w = TableWriter::<Matrix<f32>>::open(&spec).map_err(table_err)?;
    for (u, rows) in data.chunks(utt_frames * d).enumerate() {
        let mat = Matrix::from_vec(rows.len() / d, d, rows.to_vec())
            .ok_or_else(|| Error::Usage("bench ark: bad matrix shape".into()))?;
        w.write(&format!("utt{u:07}"), &mat).map_err(table_err)?;
    }
    w.close().map_err(table_err)?;
    Ok((dir, spec))
}

pub fn acc_stats_ark(
    engine: &dyn Engine,
    cfg: &BenchConfig,
    emit: &mut dyn FnMut(&Json),
) -> Result<()> {
    let (t, d) = (cfg.frames.unwrap_or(3_125_506), cfg.dim.unwrap_or(40));
    let m = cfg.gaussians.unwrap_or(2048);
    let mut rng = Rng::new(cfg.seed);
    let data = random::features(&mut rng, t, d);
    let model = random::model(&mut rng, &[m], d, CovKind::Diagonal);

    let (dir, spec) = feature_ark(&data, d, UTT_FRAMES)?;
    let bytes = std::fs::metadata(dir.path().join("feats.ark"))
        .map(|m| m.len())
        .unwrap_or(0);
    let (kernel, kernel_like) = time_in_memory(engine, &model, &data, d, cfg.reps)?;
    drop(data);
    let read = time_plain_read(&spec, t, cfg.reps)?;
    let job = time_end_to_end(engine, &model, &spec, d, cfg.reps)?;

    let budget = 1.5 * kernel.seconds() + read.wall;
    let mut line = Json::new()
        .str("case", "acc_stats_ark")
        .int("T", t)
        .int("D", d)
        .int("M", m)
        .num("seconds", job.timing.wall)
        .num("kernel_seconds", kernel.seconds())
        .num("read_seconds", read.wall)
        .num("budget_seconds", budget)
        .num(
            "ratio_to_kernel_plus_read",
            job.timing.wall / (kernel.seconds() + read.wall),
        )
        .num("file_gb", bytes as f64 / 1e9)
        .num("host_setup_seconds", job.split[0])
        .num("host_wait_read_seconds", job.split[1])
        .num("host_queue_and_send_seconds", job.split[2])
        .num("host_settle_seconds", job.split[3]);
    // The main thread's steps inside queuing and sending (last run); the
    // devices' kernel and idle times between batches (`gpu_*`, summed over
    // devices).
    for (step, secs) in job.steps {
        let key = match step.starts_with("gpu_") {
            true => format!("{step}_seconds"),
            false => format!("host_{step}_seconds"),
        };
        line = line.num(&key, secs);
    }
    emit(
        &line
            .num("avg_like_per_frame", job.like / t as f64)
            .num("kernel_avg_like_per_frame", kernel_like / t as f64)
            .str("engine", engine.name())
            .str("device", &engine.device()),
    );
    Ok(())
}

/// The engine's kernel time for the statistics of `data` held in memory
/// (one call), and their Σ log-likelihood.
fn time_in_memory(
    engine: &dyn Engine,
    model: &AcousticModel,
    data: &[f32],
    d: usize,
    reps: usize,
) -> Result<(Timing, f64)> {
    let mut lm = engine.load(model)?;
    let mut like = 0.0;
    let kernel = time_median(reps, || {
        let feats = FrameBatch::new(data, d);
        like = accumulate_once(lm.as_mut(), model, feats, FrameTargets::Global)?.total_like;
        Ok(lm.last_kernel_seconds())
    })?;
    Ok((kernel, like))
}

/// One plain read of the archive `spec` that decodes every matrix (`t`
/// frames in all).
fn time_plain_read(spec: &str, t: usize, reps: usize) -> Result<Timing> {
    time_median(reps, || {
        let mut r = SequentialTableReader::<Matrix<f32>>::open(spec).map_err(table_err)?;
        let mut n = 0usize;
        while let Some((_, mat)) = r.next_entry().map_err(table_err)? {
            n += mat.rows();
        }
        if n != t {
            return Err(Error::Usage(format!("bench ark: read {n} frames of {t}")));
        }
        Ok(None)
    })
}

/// The end-to-end job's time, its Σ log-likelihood, and where its main
/// thread's time went (last run): setting up, waiting for the reader
/// thread, queuing and sending batches, settling at the end; and the
/// tallied steps inside them.
struct EndToEnd {
    timing: Timing,
    like: f64,
    split: [f64; 4],
    steps: Vec<(&'static str, f64)>,
}

/// `gmm-global-acc-stats`' job on the archive `spec`, as `amtool
/// acc-stats` runs it.
fn time_end_to_end(
    engine: &dyn Engine,
    model: &AcousticModel,
    spec: &str,
    d: usize,
    reps: usize,
) -> Result<EndToEnd> {
    let mut like = 0.0;
    let mut split = [0f64; 4];
    let timing = time_median(reps, || {
        crate::timeline::tallies_on();
        let t0 = std::time::Instant::now();
        trace_mark("start");
        // As `amtool acc-stats`: the reader reads ahead while the model
        // goes to the engine.
        let mut r = SharedFeats::open(spec).map_err(table_err)?;
        trace_mark("opened");
        let mut acc = GlobalAccStats::new(engine, model, UpdateFlags::default())?;
        acc.prepare_plain()?;
        trace_mark("loaded");
        let mut s = [t0.elapsed().as_secs_f64(), 0.0, 0.0, 0.0];
        let mut first = true;
        loop {
            let t = std::time::Instant::now();
            let Some((key, mat)) = r.next_entry().map_err(table_err)? else {
                break;
            };
            let t1 = std::time::Instant::now();
            if std::mem::take(&mut first) {
                trace_mark("first");
            }
            let rows = mat.rows();
            acc.add_utterance(&key, mat, rows, d, None, None)?;
            s[1] += (t1 - t).as_secs_f64();
            s[2] += t1.elapsed().as_secs_f64();
        }
        let t = std::time::Instant::now();
        trace_mark("settle");
        like = acc.take_like()?;
        trace_mark("taken");
        acc.into_diag()?;
        trace_mark("end");
        s[3] = t.elapsed().as_secs_f64();
        split = s;
        Ok(None)
    })?;
    // The trace's lines, written after the timed runs.
    trace_flush();
    Ok(EndToEnd {
        timing,
        like,
        split,
        steps: crate::timeline::tallies_off(),
    })
}

/// `amtool score` end to end (gmm-compute-likes): a feature ark on disk of
/// `frames` frames in 256-frame utterances scored against the score_seed002
/// model shape (5000 states × 256 Gaussians, D = 36) into a log-likelihood
/// ark on disk, through the subcommand's own table code. Reported apart:
/// reading the model from a binary AmDiagGmm file (`read_model_seconds`),
/// putting it on the engine (`load_seconds`: layout and upload), and the
/// steady state with the model loaded (`frames_per_second`), which writes
/// `states × 4` bytes a frame (`output_gb_per_second`).
pub fn score_ark(
    engine: &dyn Engine,
    cfg: &BenchConfig,
    emit: &mut dyn FnMut(&Json),
) -> Result<()> {
    let case = "score_ark";
    let s = cfg.states.unwrap_or(5000);
    let d = cfg.dim.unwrap_or(36);
    let frames = cfg.frames.unwrap_or(25_600);
    let mut rng = Rng::new(cfg.seed.wrapping_add(2));
    let model = random::model(
        &mut rng,
        &vec![cfg.gauss_per_state.unwrap_or(256); s],
        d,
        CovKind::Diagonal,
    );
    let data = random::features(&mut rng, frames, d);
    let (dir, spec) = feature_ark(&data, d, 256)?;
    let read_model = time_model_read(&model, dir.path())?;
    let load = time_median(cfg.reps, || {
        crate::engine::load_for_loglikes(engine, &model)?;
        Ok(None)
    })?;
    let mut loaded = crate::engine::load_for_loglikes(engine, &model)?;
    let out_path = dir.path().join("loglikes.ark");
    let out = format!("ark:{}", out_path.display());
    let timing = time_median(cfg.reps, || {
        let _ = std::fs::remove_file(&out_path);
        crate::cli::score::likes_table_loaded(loaded.as_mut(), &model, &spec, &out)
            .map_err(Error::Usage)?;
        Ok(None)
    })?;
    let out_bytes = std::fs::metadata(&out_path).map(|m| m.len()).unwrap_or(0);
    let _ = std::fs::remove_file(&out_path);
    // The two bounds: the engine alone on one batch of frames in memory, and
    // writing the same output (same matrices' shape, no scoring).
    let batch = frames
        .min(crate::score::likes::BATCH_VALUES / s.max(1))
        .max(1);
    let mut ll = vec![0f32; batch * s];
    let kernel = time_median(cfg.reps, || {
        loaded.state_loglikes(FrameBatch::new(&data[..batch * d], d), &mut ll)?;
        Ok(None)
    })?;
    let write = time_median(cfg.reps, || {
        write_only(&out, frames, 256, s, &ll)?;
        let _ = std::fs::remove_file(&out_path);
        Ok(None)
    })?;
    emit(
        &Json::new()
            .str("case", case)
            .int("states", s)
            .int("gauss_per_state", model.num_gaussians() / s.max(1))
            .int("D", d)
            .int("frames", frames)
            .num("seconds", timing.wall)
            .num("frames_per_second", frames as f64 / timing.wall)
            .num("output_gb_per_second", out_bytes as f64 / timing.wall / 1e9)
            .num("score_frames_per_second", batch as f64 / kernel.wall)
            .num("write_frames_per_second", frames as f64 / write.wall)
            .num("read_model_seconds", read_model)
            .num("load_seconds", load.wall)
            .str("engine", engine.name())
            .str("device", &engine.device()),
    );
    Ok(())
}

/// Writes `frames` rows of `cols` log-likelihoods to `out` as score does
/// (`utt_frames`-row matrices from a shared batch buffer, written behind),
/// the values taken from `rows` over and over: what writing alone costs.
fn write_only(
    out: &str,
    frames: usize,
    utt_frames: usize,
    cols: usize,
    rows: &[f32],
) -> Result<()> {
    use crate::train::write_behind::{SharedRows, WriteBehind};
    let buf = std::sync::Arc::new(rows.to_vec());
    let per_buf = rows.len() / cols.max(1);
    if per_buf < utt_frames {
        return Err(Error::Usage(
            "bench: write buffer shorter than an utterance".into(),
        ));
    }
    let mut w = WriteBehind::<SharedRows>::open(out, 64).map_err(table_err)?;
    let mut start = 0;
    for u in 0..frames.div_ceil(utt_frames) {
        let n = utt_frames.min(frames - u * utt_frames);
        if start + n > per_buf {
            start = 0;
        }
        let (buf, at) = (buf.clone(), start * cols);
        w.write(
            format!("utt{u:07}"),
            SharedRows {
                buf,
                start: at,
                rows: n,
                cols,
            },
        )
        .map_err(table_err)?;
        start += n;
    }
    w.close().map_err(table_err)
}

/// Seconds to read `model` back from a binary AmDiagGmm file in `dir` (the
/// model part of a Kaldi .mdl) and convert it to the neutral model: the
/// host's share of loading it, before the engine's.
fn time_model_read(model: &crate::model::AcousticModel, dir: &std::path::Path) -> Result<f64> {
    use amtool_formats::kaldi::gmm::AmDiagGmm;
    use amtool_formats::kaldi::object::{read_object, write_object};
    let path = dir.join("model.am");
    let am = crate::train::convert::am_from_model(model);
    let file =
        std::fs::File::create(&path).map_err(|e| Error::Usage(format!("bench model: {e}")))?;
    write_object(&am, std::io::BufWriter::new(file), true)
        .and_then(|mut w| std::io::Write::flush(&mut w))
        .map_err(|e| Error::Usage(format!("bench model: {e}")))?;
    drop(am);
    let t = std::time::Instant::now();
    // As ModelFile::read does: the file mapped, parsed, the parameters taken over.
    let rx = amtool_formats::kaldi::specifier::RxFilename::File(path.display().to_string());
    let bytes = amtool_formats::kaldi::files::read_rxfilename(&rx).map_err(table_err)?;
    let am: AmDiagGmm = read_object(&bytes).map_err(table_err)?;
    let back = crate::model::AcousticModel::from_am_diag_gmm_owned(am);
    let secs = t.elapsed().as_secs_f64();
    if back.num_gaussians() != model.num_gaussians() {
        return Err(Error::Usage(
            "bench model: read back a different model".into(),
        ));
    }
    let _ = std::fs::remove_file(&path);
    Ok(secs)
}
