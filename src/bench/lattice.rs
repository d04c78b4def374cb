//! The lattice-rescoring case (`gmm-rescore-lattice` end to end): the
//! fixture's decoding lattices and features (testdata/kaldi, so run it from
//! the source folder) replicated under new keys to at least `frames` frames,
//! written as archives, and rescored through the subcommand's own table code
//! (features read `ark,s,cs:`, sorted and asked for in order, as Kaldi's
//! recipes read them) with a model of the fixture's transition model and pdfs (63) but
//! `gauss_per_state` random Gaussians each (default 256, so that scoring is
//! real work). Reported beside the engine's own rate on the same frames held
//! in memory (`score_frames_per_second`), and beside each host stage's
//! own seconds on one thread (`read_seconds`, `prepare_seconds`,
//! `apply_seconds`, `write_seconds`; [`super::lattice_stages`]), and the
//! seconds each stage of the pipeline worked in the run of median wall time
//! (`busy_read_seconds`: reading and preparing, `busy_score_seconds`,
//! `busy_apply_seconds`): a stage near `seconds` is the one that bounds it;
//! `cpu_read_seconds`, `cpu_score_seconds`, `cpu_apply_seconds` are the
//! same stages' threads' CPU time (which leaves out time off the CPU on a
//! loaded machine).

use amtool_formats::kaldi::lattice::CompactLattice;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::table::TableWriter;

use super::json::Json;
use super::lattice_stages::{time_stages, StageInput};
use super::random::{self, Rng};
use super::replicate::{case_err, read_all, replicate};
use super::{time_median, BenchConfig, Timing};
use crate::cli::rescore_lattice::{rescore_tables, BatchPool, LatticeTables, Rescored, StageBusy};
use crate::engine::{Engine, FrameBatch, LoadedModel};
use crate::model::CovKind;
use crate::{Error, Result};

const MODEL: &str = "testdata/kaldi/final.mdl";
const LATTICES: &str = "ark:gunzip -c testdata/kaldi/lattice/lat.ark.gz |";

/// Whether the fixture data this case reads is here (the default run
/// leaves the case out elsewhere).
pub fn data_present() -> bool {
    std::path::Path::new(MODEL).exists()
}

fn err(e: impl std::fmt::Display) -> Error {
    case_err("score_lattice", e)
}

pub fn score_lattice(
    engine: &dyn Engine,
    cfg: &BenchConfig,
    emit: &mut dyn FnMut(&Json),
) -> Result<()> {
    let case = "score_lattice";
    let kaldi = KaldiModel::from_bytes(&std::fs::read(MODEL).map_err(err)?).map_err(err)?;
    let (pdfs, d) = (kaldi.am.pdfs.len(), kaldi.am.dim);
    let g = cfg.gauss_per_state.unwrap_or(256);
    let model = random::model(
        &mut Rng::new(cfg.seed),
        &vec![g; pdfs],
        d,
        CovKind::Diagonal,
    );
    let dir = tempfile::tempdir().map_err(err)?;
    let rep =
        replicate::<CompactLattice>(dir.path(), LATTICES, "lat", cfg.frames.unwrap_or(100_000))
            .map_err(err)?;
    let (lat_spec, frames) = (rep.table, rep.frames);
    // As recipes read features for gmm-rescore-lattice: each one is let go
    // once used instead of the whole table kept.
    let feat_spec = rep.features.replacen("ark:", "ark,s,cs:", 1);
    let mut loaded = crate::engine::load_for_loglikes(engine, &model)?;

    let out_path = dir.path().join("rescored.ark");
    let out = format!("ark:{}", out_path.display());
    let tables = LatticeTables {
        lattices: &lat_spec,
        features: &feat_spec,
        output: &out,
    };
    let mut runs = Vec::new();
    // Batch buffers kept from run to run, as in one long job (the warm-up
    // run makes them).
    let pool = BatchPool::default();
    let timing = time_median(cfg.reps, || {
        let t = std::time::Instant::now();
        let done = rescore_tables(loaded.as_mut(), &kaldi.trans, d, &tables, 0.0, &pool)
            .map_err(Error::Usage)?;
        runs.push((t.elapsed().as_secs_f64(), done));
        Ok(None)
    })?;
    // The first run is time_median's warm-up.
    let (lattices, busy) = median_run(runs.get_mut(1..).unwrap_or_default());

    let copy = format!("ark:{}", dir.path().join("copy.ark").display());
    let (lats, read, write) = time_tables(&lat_spec, &feat_spec, &copy, cfg.reps)?;
    let feats = read_all::<Matrix<f32>>(&feat_spec).map_err(err)?;
    let (ll, kernel) = time_engine(loaded.as_mut(), &feats, frames * pdfs, d, cfg.reps)?;
    let stages = time_stages(
        &StageInput {
            lattices: &lats,
            features: &feats,
            loglikes: &ll,
            num_pdfs: pdfs,
            trans: &kaldi.trans,
        },
        cfg.reps,
    )?;
    emit(
        &Json::new()
            .str("case", case)
            .int("lattices", lattices)
            .int("pdfs", pdfs)
            .int("gauss_per_state", g)
            .int("D", d)
            .int("frames", frames)
            .num("seconds", timing.wall)
            .num("frames_per_second", frames as f64 / timing.wall)
            .num("score_frames_per_second", frames as f64 / kernel.wall)
            .num("read_seconds", read.wall)
            .num("prepare_seconds", stages.prepare)
            .num("apply_seconds", stages.apply)
            .num("write_seconds", write.wall)
            .num("busy_read_seconds", busy.read.wall)
            .num("busy_score_seconds", busy.score.wall)
            .num("busy_apply_seconds", busy.apply.wall)
            .num("cpu_read_seconds", busy.read.cpu)
            .num("cpu_score_seconds", busy.score.cpu)
            .num("cpu_apply_seconds", busy.apply.cpu)
            .str("engine", engine.name())
            .str("device", &engine.device()),
    );
    Ok(())
}

/// The tables alone: reading the lattices and features, and writing the
/// lattices to `copy`, each on its own (what the pipeline overlaps). Returns
/// the lattices read.
fn time_tables(
    lat_spec: &str,
    feat_spec: &str,
    copy: &str,
    reps: usize,
) -> Result<(Vec<(String, CompactLattice)>, Timing, Timing)> {
    let mut lats = Vec::new();
    let read = time_median(reps, || {
        lats = read_all::<CompactLattice>(lat_spec).map_err(err)?;
        read_all::<Matrix<f32>>(feat_spec).map_err(err)?;
        Ok(None)
    })?;
    let write = time_median(reps, || {
        let mut w = TableWriter::<CompactLattice>::open(copy).map_err(err)?;
        for (k, l) in &lats {
            w.write(k, l).map_err(err)?;
        }
        w.close().map_err(err)?;
        Ok(None)
    })?;
    Ok((lats, read, write))
}

/// The engine alone on the frames of `feats`, in memory: their
/// `values` log-likelihoods and the time they took.
fn time_engine(
    loaded: &mut dyn LoadedModel,
    feats: &[(String, Matrix<f32>)],
    values: usize,
    d: usize,
    reps: usize,
) -> Result<(Vec<f32>, Timing)> {
    let all: Vec<f32> = feats.iter().flat_map(|(_, m)| m.data()).copied().collect();
    let mut ll = vec![0f32; values];
    let kernel = time_median(reps, || {
        loaded.state_loglikes(FrameBatch::new(&all, d), &mut ll)?;
        Ok(None)
    })?;
    Ok((ll, kernel))
}

/// The lattices written and the stages' busy seconds of the run of median
/// wall time.
fn median_run(runs: &mut [(f64, Rescored)]) -> (usize, StageBusy) {
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    runs.get(runs.len() / 2)
        .map(|(_, r)| (r.lattices, r.busy))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuEngine;

    #[test]
    fn rescores_every_replicated_lattice() {
        let engine = CpuEngine::new(1).unwrap();
        let cfg = BenchConfig {
            frames: Some(10_000),
            gauss_per_state: Some(2),
            reps: 1,
            ..BenchConfig::default()
        };
        let mut lines = Vec::new();
        score_lattice(&engine, &cfg, &mut |j| lines.push(j.clone())).unwrap();
        let j = &lines[0];
        // 8445 frames a copy (the fixture), so two copies of 40 lattices.
        assert_eq!(j.get("frames"), Some("16890"));
        assert_eq!(j.get("lattices"), Some("80"));
        assert!(j.get("score_frames_per_second").is_some());
    }
}
