//! `amtool ubm-map`: relevance-MAP of a diagonal UBM (no Kaldi counterpart,
//! so checked by its defining properties): a huge relevance factor returns
//! the UBM, supervectors are the adapted GMM's means, speakers pool their
//! utterances, and bad input fails clearly.
//!
//! Tolerances: means are stored by Kaldi's DiagGmm as μ/σ² and 1/σ² in float,
//! so a mean read back is within ~1e-6 relative (1e-5 used).

mod common;

use common::{read_table as read, run};

use amtool::formats::kaldi::gmm::DiagGmm;
use amtool::formats::kaldi::matrix::Vector;

const UBM: &str = "testdata/kaldi/train/ubm.1.dubm";
const FEATS: &str = "ark:testdata/kaldi/feats/feats_cmvn_deltas.first3.ark";

fn means(g: &DiagGmm) -> Vec<f64> {
    g.means_invvars
        .iter()
        .zip(&g.inv_vars)
        .map(|(&m, &iv)| m as f64 / iv as f64)
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * b.abs().max(1.0)
}

#[test]
fn supervectors_are_the_adapted_means_and_huge_relevance_keeps_the_ubm() {
    let dir = tempfile::tempdir().unwrap();
    let gmms = format!("ark:{}", dir.path().join("g.ark").display());
    let svs = format!("ark:{}", dir.path().join("s.ark").display());
    let (code, err) = run(&["ubm-map", "--use-gpu=no", UBM, FEATS, &gmms]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("Done 3 files, 0 with errors; wrote 3 adapted models."),
        "{err}"
    );
    let (code, err) = run(&[
        "ubm-map",
        "--use-gpu=no",
        "--supervector=true",
        UBM,
        FEATS,
        &svs,
    ]);
    assert_eq!(code, 0, "{err}");
    let g: Vec<(String, DiagGmm)> = read(&gmms);
    let s: Vec<(String, Vector<f32>)> = read(&svs);
    let ubm = DiagGmm::from_bytes(&std::fs::read(UBM).unwrap()).unwrap();
    assert_eq!(g.len(), 3);
    for ((k1, gmm), (k2, sv)) in g.iter().zip(&s) {
        assert_eq!(k1, k2);
        assert_eq!(sv.len(), 64 * 39);
        let m = means(gmm);
        assert!(m
            .iter()
            .zip(sv.data.iter())
            .all(|(&a, &b)| close(b as f64, a)));
        // Means-only (the default): weights and variances are the UBM's.
        assert_eq!(gmm.inv_vars, ubm.inv_vars);
        assert_eq!(gmm.weights, ubm.weights);
        assert!(
            m.iter().zip(means(&ubm)).any(|(a, b)| !close(*a, b)),
            "{k1} not adapted"
        );
    }
    let (code, err) = run(&[
        "ubm-map",
        "--relevance=1e12",
        "--update-flags=mvw",
        UBM,
        FEATS,
        &gmms,
    ]);
    assert_eq!(code, 0, "{err}");
    for (k, gmm) in read::<DiagGmm>(&gmms) {
        assert!(
            means(&gmm)
                .iter()
                .zip(means(&ubm))
                .all(|(a, b)| close(*a, b)),
            "{k}"
        );
        for (a, b) in gmm.inv_vars.iter().zip(&ubm.inv_vars) {
            assert!(close(*a as f64, *b as f64), "{k}");
        }
    }
}

#[test]
fn speakers_pool_their_utterances() {
    let dir = tempfile::tempdir().unwrap();
    let spk2utt = dir.path().join("spk2utt");
    std::fs::write(&spk2utt, "a s01-001 s01-002 s01-003 s01-404\n").unwrap();
    let out = format!("ark:{}", dir.path().join("a.ark").display());
    let (code, err) = run(&[
        "ubm-map",
        "--supervector",
        &format!("--spk2utt=ark:{}", spk2utt.display()),
        UBM,
        FEATS,
        &out,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("Did not find features for utterance s01-404"),
        "{err}"
    );
    assert!(
        err.contains("Done 3 files, 0 with errors; wrote 1 adapted models."),
        "{err}"
    );
    assert!(err.contains("over 659 frames."), "{err}");
    let s: Vec<(String, Vector<f32>)> = read(&out);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0, "a");
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = format!("ark:{}", dir.path().join("o.ark").display());
    let (code, err) = run(&["ubm-map", "testdata/kaldi/final.mdl", FEATS, &out]);
    assert_eq!(code, 1);
    assert!(
        err.contains("final.mdl") && err.contains("DiagGmm"),
        "{err}"
    );
    let (code, err) = run(&["ubm-map", "--relevance=-1", UBM, FEATS, &out]);
    assert_eq!(code, 1);
    assert!(err.contains("--relevance"), "{err}");
    let (code, err) = run(&[
        "ubm-map",
        UBM,
        "ark:testdata/kaldi/feats/feats.first3.ark",
        &out,
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Dimension mismatch for utterance s01-001: got 13, expected 39"),
        "{err}"
    );
    assert!(err.contains("Done 0 files, 3 with errors"), "{err}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "only o.ark (empty archive)"
    );
}
