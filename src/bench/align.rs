//! The forced-alignment case `align_ark` (`gmm-align-compiled` end to end,
//! through `amtool align`'s own table code): the fixture's training graphs
//! and features (testdata/kaldi, so run it from the source folder)
//! replicated under new keys to at least `frames` frames (default 200,000),
//! written as archives, and aligned with the fixture's command (beam 10,
//! retry-beam 40, acoustic-scale 0.1, self-loop-scale 0.1, transition-scale
//! 1). One line per model:
//!
//! - `fixture`: testdata/kaldi/final.mdl (63 pdfs, 514 Gaussians);
//! - `pdfs2000x16`: the fixture's transition model with an acoustic model of
//!   2,000 pdfs × 16 Gaussians (32,000): pdf p is the fixture's pdf p mod 63
//!   with its Gaussians split into 16 (each copy carries its share of the
//!   weight, so a pdf's likelihood is the fixture's up to rounding). The
//!   graphs' transition-ids reach pdfs 0–62 only, so the search is the
//!   fixture's; what changes is the likelihood work: an engine that scores
//!   every pdf of every frame (the GPU) does 32,000 Gaussians a frame; the
//!   CPU engine, like Kaldi's decodable, computes only the pdfs the search
//!   asks for, 16 Gaussians each (`pdf_evals_per_frame` says how many).
//!
//! The time is split between likelihoods and search (`likes_seconds`,
//! `search_seconds`; the rest is reading, graph preparation and writing).
//! With `--path DIR` the archives, both models (`fixture.mdl`,
//! `pdfs2000x16.mdl`, Kaldi's binary format) and the alignments
//! (`fixture.ali.ark`, `pdfs2000x16.ali.ark`) are written there and kept, so
//! Kaldi's gmm-align-compiled can run on the same data (Kaldi reads a model
//! whose acoustic model has more pdfs than its transition model uses; amtool
//! loads this one only here, in memory).

use amtool_formats::kaldi::fst::StdVectorFst;
use amtool_formats::kaldi::gmm::{AmDiagGmm, DiagGmm};
use amtool_formats::kaldi::model::KaldiModel;

use super::json::Json;
use super::replicate::{case_err, replicate};
use super::{time_median, BenchConfig};
use crate::align::decoder::DecoderOptions;
use crate::align::AlignConfig;
use crate::cli::align::{align_tables, AlignSettings, AlignTables, Totals};
use crate::engine::Engine;
use crate::model::AcousticModel;
use crate::{Error, Result};

const MODEL: &str = "testdata/kaldi/final.mdl";
const GRAPHS: &str = "ark:testdata/kaldi/ali/graphs.fsts.ark";
/// The synthetic variant's shape.
const BIG_PDFS: usize = 2000;
const BIG_GAUSS: usize = 16;

fn err(e: impl std::fmt::Display) -> Error {
    case_err("align_ark", e)
}

/// The fixture's command (testdata/kaldi/ali/gmm-align-compiled.log).
pub(crate) fn fixture_settings() -> AlignSettings {
    AlignSettings {
        config: AlignConfig {
            beam: 10.0,
            retry_beam: 40.0,
            careful: false,
        },
        decoder: DecoderOptions {
            beam: 10.0,
            ..DecoderOptions::default()
        },
        acoustic_scale: 0.1,
        transition_scale: 1.0,
        self_loop_scale: 0.1,
    }
}

/// `g` with exactly `n` Gaussians. Fewer: split, component `i` a copy of
/// component `i mod m`, each copy carrying its share of the weight (the same
/// likelihood up to rounding). More (the fixture's silence pdf has 138): its
/// `n` heaviest, weights renormalised.
fn split_gaussians(g: &DiagGmm, n: usize) -> Result<DiagGmm> {
    let (m, d) = (g.num_gauss(), g.dim);
    if m == 0 {
        return Err(err("a pdf without Gaussians"));
    }
    if m > n {
        return heaviest(g, n);
    }
    let mut out = DiagGmm {
        dim: d,
        gconsts: Vec::new(),
        weights: Vec::with_capacity(n),
        means_invvars: Vec::with_capacity(n * d),
        inv_vars: Vec::with_capacity(n * d),
    };
    for i in 0..n {
        let c = i % m;
        let copies = n / m + usize::from(c < n % m);
        out.weights.push(g.weights[c] / copies as f32);
        out.means_invvars
            .extend_from_slice(&g.means_invvars[c * d..(c + 1) * d]);
        out.inv_vars
            .extend_from_slice(&g.inv_vars[c * d..(c + 1) * d]);
    }
    out.compute_gconsts().map_err(err)?;
    Ok(out)
}

/// The `n` heaviest Gaussians of `g`, weights renormalised.
fn heaviest(g: &DiagGmm, n: usize) -> Result<DiagGmm> {
    let d = g.dim;
    let mut order: Vec<usize> = (0..g.num_gauss()).collect();
    order.sort_by(|&a, &b| g.weights[b].total_cmp(&g.weights[a]));
    order.truncate(n);
    let total: f32 = order.iter().map(|&c| g.weights[c]).sum();
    let mut out = DiagGmm {
        dim: d,
        gconsts: Vec::new(),
        weights: order.iter().map(|&c| g.weights[c] / total).collect(),
        means_invvars: Vec::with_capacity(n * d),
        inv_vars: Vec::with_capacity(n * d),
    };
    for &c in &order {
        out.means_invvars
            .extend_from_slice(&g.means_invvars[c * d..(c + 1) * d]);
        out.inv_vars
            .extend_from_slice(&g.inv_vars[c * d..(c + 1) * d]);
    }
    out.compute_gconsts().map_err(err)?;
    Ok(out)
}

/// The `pdfs2000x16` variant: pdf p is the fixture's pdf p mod 63, split
/// into 16 Gaussians.
fn big_model(fixture: &KaldiModel) -> Result<KaldiModel> {
    let small = &fixture.am.pdfs;
    let pdfs = (0..BIG_PDFS)
        .map(|p| split_gaussians(&small[p % small.len()], BIG_GAUSS))
        .collect::<Result<Vec<_>>>()?;
    Ok(KaldiModel {
        trans: fixture.trans.clone(),
        am: AmDiagGmm {
            dim: fixture.am.dim,
            pdfs,
        },
    })
}

/// Align the archives `reps` times (after a warm-up) with `kaldi`'s
/// transition model and acoustic model; the median timing and the last
/// run's counts.
fn time_alignment(
    engine: &dyn Engine,
    cfg: &BenchConfig,
    kaldi: &KaldiModel,
    tables: &AlignTables<'_>,
) -> Result<(super::Timing, Totals)> {
    let model = AcousticModel::from_am_diag_gmm(&kaldi.am);
    let settings = fixture_settings();
    let mut tot = Totals::default();
    let timing = time_median(cfg.reps, || {
        tot = align_tables(engine, &kaldi.trans, &model, tables, &settings).map_err(err)?;
        Ok(None)
    })?;
    Ok((timing, tot))
}

pub fn align_ark(
    engine: &dyn Engine,
    cfg: &BenchConfig,
    emit: &mut dyn FnMut(&Json),
) -> Result<()> {
    let case = "align_ark";
    let fixture = KaldiModel::from_bytes(&std::fs::read(MODEL).map_err(err)?).map_err(err)?;
    let big = big_model(&fixture)?;
    let tmp = tempfile::tempdir().map_err(err)?;
    let dir = cfg.path.as_deref().unwrap_or(tmp.path());
    std::fs::create_dir_all(dir).map_err(err)?;
    let rep = replicate::<StdVectorFst>(dir, GRAPHS, "graphs", cfg.frames.unwrap_or(200_000))
        .map_err(err)?;
    let (graphs, features, frames, utts) = (rep.table, rep.features, rep.frames, rep.entries);
    if cfg.path.is_some() {
        std::fs::write(dir.join("fixture.mdl"), fixture.to_bytes(true)).map_err(err)?;
        std::fs::write(dir.join("pdfs2000x16.mdl"), big.to_bytes(true)).map_err(err)?;
    }
    let likelihoods = if engine.cpu_threads().is_some() {
        "the pdfs the search asks for, when it asks (as Kaldi's decodable)"
    } else {
        "every pdf of every frame, one engine call per batch; each utterance's own pdfs copied back"
    };
    for (variant, kaldi) in [("fixture", &fixture), ("pdfs2000x16", &big)] {
        let ali = format!("ark:{}", dir.join(format!("{variant}.ali.ark")).display());
        let tables = AlignTables {
            graphs: &graphs,
            features: &features,
            alignments: &ali,
            scores: None,
            per_frame: "",
        };
        let (timing, tot) = time_alignment(engine, cfg, kaldi, &tables)?;
        let secs = timing.wall;
        emit(
            &Json::new()
                .str("case", case)
                .str("variant", variant)
                .int("pdfs", kaldi.am.num_pdfs())
                .int("gaussians", kaldi.am.num_gauss())
                .int("D", kaldi.am.dim)
                .int("frames", frames)
                .int("utterances", utts)
                .int("aligned", tot.done)
                .num("seconds", secs)
                .num("frames_per_second", frames as f64 / secs)
                .num("likes_seconds", tot.likes_seconds)
                .num("search_seconds", tot.search_seconds)
                .num("pdf_evals_per_frame", tot.pdf_evals as f64 / frames as f64)
                .str("likelihoods", likelihoods)
                .str("engine", engine.name())
                .str("device", &engine.device()),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::cpu::CpuEngine;

    #[test]
    fn aligns_every_replicated_utterance_with_both_models() {
        let engine = CpuEngine::new(1).unwrap();
        let cfg = BenchConfig {
            frames: Some(10_000),
            reps: 1,
            ..BenchConfig::default()
        };
        let mut lines = Vec::new();
        align_ark(&engine, &cfg, &mut |j| lines.push(j.clone())).unwrap();
        assert_eq!(lines.len(), 2);
        for (j, variant) in lines.iter().zip(["\"fixture\"", "\"pdfs2000x16\""]) {
            assert_eq!(j.get("variant"), Some(variant));
            // 8445 frames a copy (the fixture), so two copies of 40 utterances.
            assert_eq!(j.get("frames"), Some("16890"));
            assert_eq!(j.get("aligned"), Some("80"));
            assert!(j.get("likes_seconds").is_some());
        }
        assert_eq!(lines[1].get("gaussians"), Some("32000"));
    }

    /// Batch scoring through the pipeline (25,335 frames: two batches)
    /// writes the alignments the on-demand search writes (Kaldi's: see
    /// tests/cli_align.rs), byte for byte, with both models.
    #[test]
    fn batch_scoring_aligns_as_the_on_demand_search() {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let engines: [&dyn Engine; 2] = [
            &CpuEngine::new(2).unwrap(),
            &crate::cli::align::tests::Batched(CpuEngine::new(2).unwrap()),
        ];
        for (e, d) in engines.iter().zip(&dirs) {
            let cfg = BenchConfig {
                frames: Some(20_000),
                reps: 1,
                path: Some(d.path().to_path_buf()),
                ..BenchConfig::default()
            };
            let mut lines = Vec::new();
            align_ark(*e, &cfg, &mut |j| lines.push(j.clone())).unwrap();
            assert!(lines.iter().all(|j| j.get("aligned") == Some("120")));
        }
        for variant in ["fixture", "pdfs2000x16"] {
            let name = format!("{variant}.ali.ark");
            let [a, b] = dirs
                .each_ref()
                .map(|d| std::fs::read(d.path().join(&name)).unwrap());
            assert!(!a.is_empty() && a == b, "{variant}");
        }
    }

    #[test]
    fn split_gaussians_keep_the_pdfs_likelihood() {
        let fixture = KaldiModel::from_bytes(&std::fs::read(MODEL).unwrap()).unwrap();
        let g = &fixture.am.pdfs[5];
        let s = split_gaussians(g, BIG_GAUSS).unwrap();
        assert_eq!(s.num_gauss(), BIG_GAUSS);
        let x = vec![0.3f32; g.dim];
        let (a, b) = (
            AcousticModel::from_diag_gmm(g),
            AcousticModel::from_diag_gmm(&s),
        );
        let la =
            crate::engine::reference::state_loglikes(&a, crate::engine::FrameBatch::new(&x, g.dim));
        let lb =
            crate::engine::reference::state_loglikes(&b, crate::engine::FrameBatch::new(&x, g.dim));
        assert!(
            (la[0] - lb[0]).abs() < 1e-3 * la[0].abs().max(1.0),
            "{la:?} {lb:?}"
        );
    }
}
