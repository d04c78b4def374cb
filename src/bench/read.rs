//! The read-throughput cases of `amtool bench` (issue 2's benchmark): write a
//! binary float feature archive (`read_ark`) or a compressed one
//! (`read_ark_compressed`, `CM` as `copy-feats --compress=true` writes) of
//! random features to a temporary folder, read it once to warm the page
//! cache, then time reading it back through the formats crate's
//! [`SequentialTableReader`] as the tools do.
//!
//! `read_ark` reports the archive's bytes per second through the
//! `Matrix<f32>` holder (one copy of each utterance out of the memory map)
//! and, as `raw_gb_per_s`, through the zero-copy `RawMatrix` view.
//! `read_ark_compressed` reports decoded float bytes per second, and per CPU
//! second of the process (the reader is one thread, so that is per core).
//! Sizes: `--frames` (default 6,250,000 × 40 dims ≈ 1 GB of floats), `--dim`;
//! `--path DIR` puts the files in DIR instead of the system's temp folder.
//! The files are removed at the end.

use std::path::Path;
use std::time::Instant;

use amtool_formats::kaldi::compressed::{CompressedMatrix, CompressionMethod};
use amtool_formats::kaldi::matrix::{Matrix, RawMatrix};
use amtool_formats::kaldi::table::{SequentialTableReader, TableWriter};

use super::json::Json;
use super::random::{self, Rng};
use super::{process_cpu_seconds, BenchConfig};
use crate::{Error, Result};

/// The read cases (not run by default: they write ~1 GB).
pub const READ_CASES: [&str; 2] = ["read_ark", "read_ark_compressed"];

/// Frames per utterance of the generated archives (10 s at 100 frames/s).
const UTT_FRAMES: usize = 1000;

fn fmt_err(e: impl std::fmt::Display) -> Error {
    Error::Engine(format!("read benchmark: {e}"))
}

/// Write `frames` random frames in utterances of [`UTT_FRAMES`]; returns the
/// file's size.
fn write_archive(path: &Path, frames: usize, dim: usize, compress: bool, seed: u64) -> Result<u64> {
    let spec = format!("ark:{}", path.display());
    let mut rng = Rng::new(seed);
    let mut done = 0;
    let mut i = 0;
    if compress {
        let mut w = TableWriter::<CompressedMatrix>::open(&spec).map_err(fmt_err)?;
        while done < frames {
            let n = UTT_FRAMES.min(frames - done);
            let m = Matrix::from_vec(n, dim, random::features(&mut rng, n, dim)).unwrap();
            let c =
                CompressedMatrix::compress(&m, CompressionMethod::Automatic).map_err(fmt_err)?;
            w.write(&format!("utt{i:07}"), &c).map_err(fmt_err)?;
            done += n;
            i += 1;
        }
        w.close().map_err(fmt_err)?;
    } else {
        let mut w = TableWriter::<Matrix<f32>>::open(&spec).map_err(fmt_err)?;
        while done < frames {
            let n = UTT_FRAMES.min(frames - done);
            let m = Matrix::from_vec(n, dim, random::features(&mut rng, n, dim)).unwrap();
            w.write(&format!("utt{i:07}"), &m).map_err(fmt_err)?;
            done += n;
            i += 1;
        }
        w.close().map_err(fmt_err)?;
    }
    Ok(std::fs::metadata(path).map_err(fmt_err)?.len())
}

/// Read every utterance as `Matrix<f32>` (decompressing CM); returns (frames,
/// a checksum that keeps the reads from being optimised away).
fn read_matrices(spec: &str) -> Result<(usize, f64)> {
    let mut frames = 0;
    let mut sum = 0f64;
    for e in SequentialTableReader::<Matrix<f32>>::open(spec).map_err(fmt_err)? {
        let (_, m) = e.map_err(fmt_err)?;
        frames += m.rows();
        sum += m.data().last().copied().unwrap_or(0.0) as f64;
    }
    Ok((frames, sum))
}

/// Read every utterance through the zero-copy view (copying only where the
/// data is not aligned for f32).
fn read_raw(spec: &str) -> Result<(usize, f64)> {
    let mut r = SequentialTableReader::<Matrix<f32>>::open(spec).map_err(fmt_err)?;
    let mut buf = Vec::new();
    let mut frames = 0;
    let mut sum = 0f64;
    while let Some((_, (rows, last))) = r
        .next_with(|_, rd| {
            rd.read_kaldi_header()?;
            let m = RawMatrix::read(rd)?;
            let last = match m.as_f32() {
                Some(v) => v.last().copied().unwrap_or(0.0),
                None => {
                    buf.resize(m.rows * m.cols, 0f32);
                    m.copy_to_f32(&mut buf);
                    buf.last().copied().unwrap_or(0.0)
                }
            };
            Ok((m.rows, last))
        })
        .map_err(fmt_err)?
    {
        frames += rows;
        sum += last as f64;
    }
    Ok((frames, sum))
}

/// Median wall and CPU seconds of `reps` runs after one warm-up run.
fn time(reps: usize, frames: usize, f: impl Fn() -> Result<(usize, f64)>) -> Result<(f64, f64)> {
    let (n, _) = f()?;
    if n != frames {
        return Err(fmt_err(format!("read {n} frames back, wrote {frames}")));
    }
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..reps.max(1) {
        let c0 = process_cpu_seconds();
        let t = Instant::now();
        std::hint::black_box(f()?);
        wall.push(t.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (c0, process_cpu_seconds()) {
            cpu.push(b - a);
        }
    }
    wall.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    let w = wall[wall.len() / 2];
    // /proc's CPU time ticks at 10 ms: never report less than nothing.
    let c = cpu.get(cpu.len() / 2).copied().unwrap_or(w).max(0.01);
    Ok((w, c))
}

/// Run `read_ark` or `read_ark_compressed`.
pub fn run(name: &str, cfg: &BenchConfig, emit: &mut dyn FnMut(&Json)) -> Result<()> {
    let compressed = name == "read_ark_compressed";
    let dim = cfg.dim.unwrap_or(40);
    let frames = cfg.frames.unwrap_or(6_250_000);
    let dir = match &cfg.path {
        Some(p) => tempfile::tempdir_in(p),
        None => tempfile::tempdir(),
    }
    .map_err(fmt_err)?;
    let path = dir.path().join(if compressed {
        "feats_cm.ark"
    } else {
        "feats.ark"
    });
    let t = Instant::now();
    let bytes = write_archive(&path, frames, dim, compressed, cfg.seed)?;
    eprintln!(
        "LOG (amtool bench) {name}: wrote {} ({bytes} bytes) in {:.1} s",
        path.display(),
        t.elapsed().as_secs_f64()
    );
    let spec = format!("ark:{}", path.display());
    let floats = (frames * dim * 4) as f64;
    let (secs, cpu) = time(cfg.reps, frames, || read_matrices(&spec))?;
    let mut j = Json::new()
        .str("case", name)
        .int("frames", frames)
        .int("D", dim)
        .int("utt_frames", UTT_FRAMES)
        .int("file_bytes", bytes as usize)
        .num("seconds", secs)
        .num("cpu_seconds", cpu)
        .num("gb_per_s", bytes as f64 / secs / 1e9);
    if compressed {
        j = j
            .num("decoded_gb_per_s", floats / secs / 1e9)
            .num("decoded_gb_per_s_per_core", floats / cpu / 1e9);
    } else {
        let (raw, _) = time(cfg.reps, frames, || read_raw(&spec))?;
        j = j
            .num("raw_seconds", raw)
            .num("raw_gb_per_s", bytes as f64 / raw / 1e9);
    }
    emit(
        &j.str(
            "timing",
            "wall clock, median after a warm-up read (page cache)",
        )
        .str(
            "reader",
            "formats::kaldi::table::SequentialTableReader<Matrix<f32>>",
        )
        .str("engine", "none"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_small(name: &str, frames: usize) -> Json {
        let cfg = BenchConfig {
            frames: Some(frames),
            dim: Some(13),
            reps: 1,
            ..BenchConfig::default()
        };
        let mut out = Vec::new();
        run(name, &cfg, &mut |j| out.push(j.clone())).unwrap();
        assert_eq!(out.len(), 1);
        out.pop().unwrap()
    }

    fn num(j: &Json, k: &str) -> f64 {
        j.get(k)
            .unwrap_or_else(|| panic!("no {k}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn read_ark_reports_the_archive_it_wrote() {
        // 2 utterances of 1000 frames and one of 500: each entry is the key
        // "uttNNNNNNN", a space, "\0BFM ", two size-prefixed int32s, the floats.
        let j = run_small("read_ark", 2500);
        let entry = |rows: usize| 10 + 1 + 5 + 2 * 5 + rows * 13 * 4;
        assert_eq!(num(&j, "file_bytes") as usize, 2 * entry(1000) + entry(500));
        assert_eq!(j.get("case"), Some("\"read_ark\""));
        for k in ["seconds", "gb_per_s", "raw_seconds", "raw_gb_per_s"] {
            assert!(num(&j, k) > 0.0, "{k}");
        }
    }

    #[test]
    fn read_ark_compressed_reports_decoded_throughput() {
        let j = run_small("read_ark_compressed", 1200);
        // CM: 16-byte header + 8 bytes per column + one byte per value.
        let entry = |rows: usize| 10 + 1 + 5 + 16 + 13 * 8 + rows * 13;
        assert_eq!(num(&j, "file_bytes") as usize, entry(1000) + entry(200));
        let (secs, cpu) = (num(&j, "seconds"), num(&j, "cpu_seconds"));
        let floats = 1200.0 * 13.0 * 4.0;
        assert!((num(&j, "decoded_gb_per_s") - floats / secs / 1e9).abs() < 1e-9);
        assert!((num(&j, "decoded_gb_per_s_per_core") - floats / cpu / 1e9).abs() < 1e-9);
    }
}
