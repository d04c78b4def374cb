//! Log-likelihoods at least as accurate as Kaldi's (issue 15): on each
//! fixture model, Kaldi's own output (its float BLAS sums) and an engine's
//! are measured against a float64 evaluation of the same f32 model at the
//! same f32 features ([`amtool::engine::reference`]); the engine's mean and
//! worst |error| must not exceed Kaldi's (`mod likes_accuracy;` in the CPU
//! and CUDA engine tests). The Kaldi files and their commands are listed in
//! testdata/kaldi/score/README.md.
#![allow(dead_code)]

use std::io::Read;

use amtool::engine::reference;
use amtool::engine::{Engine, FrameBatch};
use amtool::model::AcousticModel;
use amtool_formats::kaldi::gmm::{DiagGmm, FullGmm};
use amtool_formats::kaldi::matrix::{Matrix, Vector};
use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::object::read_object;
use amtool_formats::kaldi::table::SequentialTableReader;

/// A fixture model with Kaldi's scores of `FEATS`.
pub struct Fixture {
    /// What Kaldi ran, for messages.
    pub name: &'static str,
    pub model: AcousticModel,
    /// Per utterance, `frames × states` (Kaldi's output, exact f32s).
    pub kaldi: Vec<Vec<f32>>,
}

/// The features every fixture was scored on (s01-001..s01-003, 659 frames).
pub const FEATS: &str = "testdata/kaldi/feats/feats_cmvn_deltas.first3.ark";

fn bytes(path: &str) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    if path.ends_with(".gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        out
    } else {
        raw
    }
}

fn table<H: amtool_formats::kaldi::holder::Holder>(path: &str) -> Vec<(String, H)> {
    SequentialTableReader::<H>::open(&format!("ark:{path}"))
        .unwrap()
        .collect::<amtool_formats::Result<Vec<_>>>()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn feats() -> Vec<(String, Matrix<f32>)> {
    table(FEATS)
}

fn check_keys<T>(name: &str, kaldi: &[(String, T)]) {
    let keys: Vec<String> = feats().into_iter().map(|(k, _)| k).collect();
    let theirs: Vec<&String> = kaldi.iter().map(|(k, _)| k).collect();
    assert_eq!(
        theirs,
        keys.iter().collect::<Vec<_>>(),
        "{name}: utterances"
    );
}

/// Every fixture model with Kaldi's scores of [`FEATS`].
pub fn fixtures() -> Vec<Fixture> {
    let mut out = Vec::new();
    let am = KaldiModel::from_bytes(&bytes("testdata/kaldi/final.mdl"))
        .unwrap()
        .am;
    let likes = table::<Matrix<f32>>("testdata/kaldi/score/likes_first10.first3.ark");
    check_keys("likes_first10.first3.ark", &likes);
    out.push(Fixture {
        name: "gmm-compute-likes final.mdl",
        model: AcousticModel::from_am_diag_gmm(&am),
        kaldi: likes.into_iter().map(|(_, m)| m.data().to_vec()).collect(),
    });
    let ubm: DiagGmm = read_object(&bytes("testdata/kaldi/train/ubm.1.dubm")).unwrap();
    let likes = table::<Vector<f32>>("testdata/kaldi/feats/ubm.1.frame_likes.first3.ark");
    check_keys("ubm.1.frame_likes.first3.ark", &likes);
    out.push(Fixture {
        name: "gmm-global-get-frame-likes ubm.1.dubm",
        model: AcousticModel::from_diag_gmm(&ubm),
        kaldi: likes.into_iter().map(|(_, v)| v.data).collect(),
    });
    let fubm: FullGmm = read_object(&bytes("testdata/kaldi/train/fubm.1.fubm")).unwrap();
    let likes = table::<Vector<f32>>("testdata/kaldi/score/fubm.1.frame_likes.first3.ark");
    check_keys("fubm.1.frame_likes.first3.ark", &likes);
    out.push(Fixture {
        name: "fgmm-global-get-frame-likes fubm.1.fubm",
        model: AcousticModel::from_full_gmm(&fubm),
        kaldi: likes.into_iter().map(|(_, v)| v.data).collect(),
    });
    out
}

/// Mean and worst |error| against the f64 reference.
#[derive(Debug, Clone, Copy, Default)]
pub struct ErrStats {
    pub mean: f64,
    pub worst: f64,
}

impl ErrStats {
    fn of(errs: &[f64]) -> ErrStats {
        ErrStats {
            mean: errs.iter().sum::<f64>() / errs.len() as f64,
            worst: errs.iter().copied().fold(0.0, f64::max),
        }
    }
}

/// (Kaldi's, the engine's) errors on one fixture.
pub fn measure(engine: &dyn Engine, f: &Fixture) -> (ErrStats, ErrStats) {
    let mut lm = engine.load(&f.model).unwrap();
    let ns = f.model.num_states();
    let (mut theirs, mut ours) = (Vec::new(), Vec::new());
    for ((key, m), kaldi) in feats().iter().zip(&f.kaldi) {
        assert_eq!(kaldi.len(), m.rows() * ns, "{}: {key}: value count", f.name);
        let batch = FrameBatch::new(m.data(), m.cols());
        let want = reference::state_loglikes(&f.model, batch);
        let mut out = vec![f32::NAN; m.rows() * ns];
        lm.state_loglikes(batch, &mut out).unwrap();
        for i in 0..want.len() {
            theirs.push((kaldi[i] as f64 - want[i]).abs());
            ours.push((out[i] as f64 - want[i]).abs());
        }
    }
    (ErrStats::of(&theirs), ErrStats::of(&ours))
}

/// Measures every fixture with `engine` (named `label` in the table it
/// prints) and fails unless its mean and worst errors are at most Kaldi's.
pub fn assert_at_least_as_accurate_as_kaldi(engine: &dyn Engine, label: &str) {
    let mut failures = Vec::new();
    eprintln!("model | Kaldi mean | Kaldi worst | {label} mean | {label} worst");
    for f in fixtures() {
        let (k, e) = measure(engine, &f);
        eprintln!(
            "{} | {:.3e} | {:.3e} | {:.3e} | {:.3e}",
            f.name, k.mean, k.worst, e.mean, e.worst
        );
        if e.mean > k.mean || e.worst > k.worst {
            failures.push(format!(
                "{}: {label} mean {:.3e} worst {:.3e}, Kaldi mean {:.3e} worst {:.3e}",
                f.name, e.mean, e.worst, k.mean, k.worst
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "less accurate than Kaldi: {failures:#?}"
    );
}
