//! `amtool map-adapt` against Kaldi's gmm-adapt-map (testdata/kaldi/score:
//! per utterance with `--mean-tau=20 --update-flags=mw`, per speaker with
//! the defaults), through the subcommand and the Kaldi tool name, and its
//! per-utterance error handling.
//!
//! Tolerances. The statistics come from posteriors computed in float by
//! amtool's engine where Kaldi used its own float BLAS order; log-likelihoods
//! differ by ~1e-4, posteriors by ~1e-4 relative, and the MAP means, which
//! interpolate those statistics, by ≤ 5e-5 in `μ/σ²` (observed). Inverse
//! variances are untouched by `mw` and must be identical; weights are
//! occupancy ratios (≤ 3e-6 observed). The objective change Kaldi prints is
//! a difference of two float sums of ~10⁵, so it agrees to ~1e-4 relative.

mod common;

use common::{path, read_table, run, run_exe};

use std::io::Read;

use amtool::formats::kaldi::gmm::AmDiagGmm;
use amtool::formats::kaldi::holder::Posterior;
use amtool::formats::kaldi::model::KaldiModel;
use amtool::formats::kaldi::table::{SequentialTableReader, TableWriter};

const S: &str = "testdata/kaldi/score";
const F: &str = "testdata/kaldi/feats";
const MDL: &str = "testdata/kaldi/final.mdl";

/// The number in a log line after `prefix` (up to the next space).
fn logged(err: &str, prefix: &str) -> f64 {
    let at = err
        .find(prefix)
        .unwrap_or_else(|| panic!("no '{prefix}' in {err}"));
    err[at + prefix.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Compares two adapted models with the tolerances of the module docs.
fn assert_models_close(a: &AmDiagGmm, b: &AmDiagGmm) {
    assert_eq!(a.dim, b.dim);
    assert_eq!(a.pdfs.len(), b.pdfs.len());
    for (p, (x, y)) in a.pdfs.iter().zip(&b.pdfs).enumerate() {
        assert_eq!(x.inv_vars, y.inv_vars, "pdf {p}: inverse variances");
        for (u, v) in x.weights.iter().zip(&y.weights) {
            assert!((u - v).abs() <= 2e-5, "pdf {p}: weight {u} vs Kaldi's {v}");
        }
        for (u, v) in x.means_invvars.iter().zip(&y.means_invvars) {
            assert!(
                (u - v).abs() <= 2e-4 * v.abs().max(1.0),
                "pdf {p}: mean·invvar {u} vs Kaldi's {v}"
            );
        }
        for (u, v) in x.gconsts.iter().zip(&y.gconsts) {
            assert!(
                (u - v).abs() <= 1e-5 * v.abs().max(1.0),
                "pdf {p}: gconst {u} vs Kaldi's {v}"
            );
        }
    }
}

#[test]
fn per_utterance_map_equals_kaldis() {
    let dir = tempfile::tempdir().unwrap();
    let scp = path(&dir, "utt1.scp");
    std::fs::write(
        &scp,
        format!("s01-001 {F}/feats_cmvn_deltas.first3.ark:8\n"),
    )
    .unwrap();
    let out = path(&dir, "map_utt.txt");
    let (code, err) = run(&[
        "map-adapt",
        "--use-gpu=no",
        "--mean-tau=20",
        "--update-flags=mw",
        MDL,
        &format!("scp:{scp}"),
        &format!("ark:{F}/post.first3.ark"),
        &format!("ark,t:{out}"),
    ]);
    assert_eq!(code, 0, "{err}");
    // model1/logs/gmm-adapt-map-utt.log
    assert!(err.contains("Done 1 files, 0 with errors"), "{err}");
    assert!(
        err.contains(
            "Overall acoustic likelihood was -80.0784 and change in likelihod per frame was "
        ),
        "{err}"
    );
    let change = logged(
        &err,
        "For utterance s01-001, objective function change from MAP was ",
    );
    assert!((change - 1.81193).abs() <= 1e-4 * 1.81193, "{change}");
    assert!(err.contains(" over 171 frames."), "{err}");
    let mut kaldi_txt = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(format!("{S}/map_utt.txt.gz")).unwrap())
        .read_to_end(&mut kaldi_txt)
        .unwrap();
    let kt = path(&dir, "kaldi.txt");
    std::fs::write(&kt, kaldi_txt).unwrap();
    let mine = read_table::<AmDiagGmm>(&format!("ark:{out}"));
    let kaldi = read_table::<AmDiagGmm>(&format!("ark:{kt}"));
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].0, "s01-001");
    assert_eq!(kaldi[0].0, "s01-001");
    assert_models_close(&mine[0].1, &kaldi[0].1);
}

#[test]
fn per_speaker_map_equals_kaldis_through_the_kaldi_name() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("gmm-adapt-map");
    std::os::unix::fs::symlink(common::amtool_bin(), &link).unwrap();
    let out = path(&dir, "map_spk.ark");
    let (code, err) = run_exe(
        &link,
        &[
            "--use-gpu=no",
            &format!("--spk2utt=ark:{S}/spk2utt.s01"),
            MDL,
            &format!("ark:gunzip -c {S}/feats_cmvn_deltas.s01.ark.gz |"),
            &format!("ark:{S}/post.s01.ark"),
            &format!("ark:{out}"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("LOG (gmm-adapt-map["), "{err}");
    assert!(err.contains("Done 10 files, 0 with errors"), "{err}");
    // model1/logs/gmm-adapt-map.log: 4.35016 over 2089 frames.
    let change = logged(
        &err,
        "For speaker s01, objective function change from MAP was ",
    );
    assert!((change - 4.35016).abs() <= 1e-4 * 4.35016, "{change}");
    assert!(err.contains(" over 2089 frames."), "{err}");
    let mine = read_table::<AmDiagGmm>(&format!("ark:{out}"));
    let kaldi = read_table::<AmDiagGmm>(&format!("ark:{S}/map_spk.s01.ark"));
    assert_eq!(mine.len(), 1);
    assert_eq!((mine[0].0.as_str(), kaldi[0].0.as_str()), ("s01", "s01"));
    assert_models_close(&mine[0].1, &kaldi[0].1);
}

/// Writes a posterior archive built from the first three utterances' posteriors.
fn write_posts(path: &str, entries: &[(&str, &Posterior)]) {
    let mut w = TableWriter::<Posterior>::open(&format!("ark:{path}")).unwrap();
    for (k, p) in entries {
        w.write(k, p).unwrap();
    }
    w.close().unwrap();
}

fn first3_posts() -> Vec<(String, Posterior)> {
    SequentialTableReader::open(&format!("ark:{F}/post.first3.ark"))
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
}

#[test]
fn per_utterance_problems_are_warned_and_counted_as_kaldi_does() {
    let dir = tempfile::tempdir().unwrap();
    let p = first3_posts();
    // s01-002: no posteriors; s01-003: the posteriors of s01-001 (171 frames
    // for 212); a speaker whose utterances have no features.
    let posts = path(&dir, "post.ark");
    write_posts(&posts, &[("s01-001", &p[0].1), ("s01-003", &p[0].1)]);
    let spk2utt = path(&dir, "spk2utt");
    std::fs::write(
        &spk2utt,
        "s01 s01-001 s01-002 s01-003 s01-999\ns09 s09-001\n",
    )
    .unwrap();
    let out = path(&dir, "map.ark");
    let (code, err) = run(&[
        "map-adapt",
        "--use-gpu=no",
        &format!("--spk2utt=ark:{spk2utt}"),
        MDL,
        &format!("ark:{F}/feats_cmvn_deltas.first3.ark"),
        &format!("ark:{posts}"),
        &format!("ark:{out}"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("Did not find posteriors for utterance s01-002"),
        "{err}"
    );
    assert!(
        err.contains("Posteriors has wrong size 171 vs. 212"),
        "{err}"
    );
    // Missing features are skipped without counting, as in Kaldi.
    assert!(
        err.contains("Did not find features for utterance s01-999"),
        "{err}"
    );
    assert!(
        err.contains("Did not find features for utterance s09-001"),
        "{err}"
    );
    assert!(err.contains("Done 1 files, 2 with errors"), "{err}");
    assert!(err.contains(" over 171 frames."), "{err}");
    // The speaker without data still gets a model: the unadapted one.
    let models = read_table::<AmDiagGmm>(&format!("ark:{out}"));
    assert_eq!(
        models.iter().map(|m| m.0.as_str()).collect::<Vec<_>>(),
        ["s01", "s09"]
    );
    let orig = KaldiModel::from_bytes(&std::fs::read(MDL).unwrap())
        .unwrap()
        .am;
    for (a, b) in models[1].1.pdfs.iter().zip(&orig.pdfs) {
        assert_eq!(a.means_invvars, b.means_invvars);
        assert_eq!(a.inv_vars, b.inv_vars);
    }
}

#[test]
fn unknown_transition_ids_and_dimension_mismatch_are_per_utterance_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = first3_posts();
    let mut bad = p[1].1.clone();
    bad.0[5] = vec![(99_999, 1.0)];
    let posts = path(&dir, "post.ark");
    write_posts(
        &posts,
        &[
            ("s01-001", &p[0].1),
            ("s01-002", &bad),
            ("s01-003", &p[2].1),
        ],
    );
    let out = path(&dir, "map.ark");
    let (code, err) = run(&[
        "map-adapt",
        "--use-gpu=no",
        MDL,
        &format!("ark:{F}/feats_cmvn_deltas.first3.ark"),
        &format!("ark:{posts}"),
        &format!("ark:{out}"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("Posterior of utterance s01-002 at frame 5 has transition-id 99999"),
        "{err}"
    );
    assert!(err.contains("Done 2 files, 1 with errors"), "{err}");
    assert_eq!(read_table::<AmDiagGmm>(&format!("ark:{out}")).len(), 2);
    // 13-dimensional features: every utterance fails, exit status 1.
    let (code, err) = run(&[
        "map-adapt",
        "--use-gpu=no",
        MDL,
        &format!("ark:{F}/feats.first3.ark"),
        &format!("ark:{F}/post.first3.ark"),
        &format!("ark:{out}"),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Dimension mismatch for utterance s01-001: got 13, expected 39"),
        "{err}"
    );
    assert!(err.contains("Done 0 files, 3 with errors"), "{err}");
}

#[test]
fn bad_inputs_fail_without_leaving_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = path(&dir, "map.ark");
    // A UBM is not an acoustic model.
    let (code, err) = run(&[
        "map-adapt",
        "testdata/kaldi/train/ubm.1.dubm",
        &format!("ark:{F}/feats_cmvn_deltas.first3.ark"),
        &format!("ark:{F}/post.first3.ark"),
        &format!("ark:{out}"),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("ubm.1.dubm") && err.contains("acoustic model"),
        "{err}"
    );
    // Bad --update-flags.
    let (code, err) = run(&[
        "map-adapt",
        "--update-flags=mx",
        MDL,
        &format!("ark:{F}/feats_cmvn_deltas.first3.ark"),
        &format!("ark:{F}/post.first3.ark"),
        &format!("ark:{out}"),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("mx"), "{err}");
    // A feature archive cut inside its second entry: the first utterance is
    // adapted, then reading fails; the output must not exist.
    let feats = std::fs::read(format!("{F}/feats_cmvn_deltas.first3.ark")).unwrap();
    let cut = path(&dir, "cut.ark");
    std::fs::write(&cut, &feats[..40_000]).unwrap();
    let (code, err) = run(&[
        "map-adapt",
        "--use-gpu=no",
        MDL,
        &format!("ark:{cut}"),
        &format!("ark:{F}/post.first3.ark"),
        &format!("ark:{out}"),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cut.ark"), "{err}");
    assert!(err.contains("For utterance s01-001"), "{err}");
    assert!(!std::path::Path::new(&out).exists(), "partial output left");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "temporary files left"
    );
}

#[test]
fn weighted_posteriors_log_kaldis_unweighted_likelihood_sum() {
    // gmm-adapt-map adds each posterior entry's log-likelihood unweighted and
    // divides by the summed weights: halving every weight doubles the
    // printed per-frame likelihood (Kaldi printed -80.0784 for s01-001 with
    // unit weights, model1/logs/gmm-adapt-map-utt.log).
    let dir = tempfile::tempdir().unwrap();
    let mut p = first3_posts().remove(0).1;
    for f in &mut p.0 {
        for e in f.iter_mut() {
            e.1 *= 0.5;
        }
    }
    let posts = path(&dir, "post.ark");
    write_posts(&posts, &[("s01-001", &p)]);
    let scp = path(&dir, "utt1.scp");
    std::fs::write(
        &scp,
        format!("s01-001 {F}/feats_cmvn_deltas.first3.ark:8\n"),
    )
    .unwrap();
    let (code, err) = run(&[
        "map-adapt",
        "--use-gpu=no",
        MDL,
        &format!("scp:{scp}"),
        &format!("ark:{posts}"),
        &format!("ark:{}", path(&dir, "m.ark")),
    ]);
    assert_eq!(code, 0, "{err}");
    let like = logged(&err, "Overall acoustic likelihood was ");
    assert!((like - 2.0 * -80.0784).abs() <= 1e-4 * 160.0, "{like}");
    assert!(err.contains(" over 85.5 frames."), "{err}");
}
