//! `amtool score-htk`: per-frame state log-likelihoods of an HTK HMM set
//! (testdata/htk/herest: HERest's variable-mixture model `mixvar.mmf`, its
//! HMM list and MFCC_0_D_A parameter files), checked against a float64
//! evaluation written here straight from the MMF's means, variances and
//! mixture weights (log Σ_m c_m N(x; μ_m, diag σ²_m)), column by column in
//! the documented order: the emitting states of the listed HMMs, in list order.

mod common;

use common::{gunzip, run};

use amtool_formats::htk::mmf::{Covariance, HmmList, HmmSet};
use amtool_formats::htk::param::ParamFile;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::SequentialTableReader;

const H: &str = "testdata/htk/herest";
const UTTS: [&str; 2] = ["spk01_u001", "spk02_u003"];

/// log Σ_m c_m N(x; μ_m, diag σ²_m) of set state `s`, in f64.
fn state_ll(set: &HmmSet, s: usize, x: &[f32]) -> f64 {
    let mut terms = Vec::new();
    for mix in &set.states[s].streams[0].mixtures {
        if mix.weight <= 1e-5 {
            continue; // HTK's MINMIX: such components are not scored
        }
        let pdf = &set.pdfs[mix.pdf];
        let mean = &set.means[pdf.mean];
        let Covariance::Diag(v) = pdf.cov else {
            panic!("diagonal model expected")
        };
        let var = &set.variances[v];
        let mut l = (mix.weight as f64).ln();
        for i in 0..x.len() {
            let (d, v) = (x[i] as f64 - mean[i] as f64, var[i] as f64);
            l -= 0.5 * ((2.0 * std::f64::consts::PI * v).ln() + d * d / v);
        }
        terms.push(l);
    }
    let m = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + terms.iter().map(|t| (t - m).exp()).sum::<f64>().ln()
}

#[test]
fn htk_state_loglikes_in_hmmlist_order() {
    let dir = tempfile::tempdir().unwrap();
    let mmf = dir.path().join("mixvar.mmf");
    std::fs::write(&mmf, gunzip(&format!("{H}/models/mixvar.mmf.gz"))).unwrap();
    let scp = dir.path().join("feats.scp");
    let lines: Vec<String> = UTTS
        .iter()
        .map(|u| format!("{u} {H}/feat/mfcc_0_d_a/{u}.mfc\n"))
        .collect();
    std::fs::write(&scp, lines.concat()).unwrap();
    let out = dir.path().join("ll.ark");
    let list = format!("{H}/monophones1");
    let (code, err) = run(&[
        "score-htk",
        "--use-gpu=no",
        "--htk-in",
        &list,
        &format!("scp:{}", scp.display()),
        &format!("ark:{}", out.display()),
        mmf.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("computed likelihoods for 2 utterances"),
        "{err}"
    );

    let set = HmmSet::load(&[&mmf]).unwrap();
    let hmms = HmmList::load(&list).unwrap();
    let cols: Vec<usize> = hmms
        .entries
        .iter()
        .flat_map(|(_, p)| set.hmm(p).unwrap().states.clone())
        .collect();
    let got: Vec<(String, Matrix<f32>)> =
        SequentialTableReader::<Matrix<f32>>::open(&format!("ark:{}", out.display()))
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
    assert_eq!(got.len(), UTTS.len());
    let mut worst = 0f64;
    for ((key, m), u) in got.iter().zip(UTTS) {
        assert_eq!(key, u);
        let feats = ParamFile::open(format!("{H}/feat/mfcc_0_d_a/{u}.mfc"))
            .unwrap()
            .to_matrix();
        assert_eq!((m.rows(), m.cols()), (feats.rows(), cols.len()));
        let d = feats.cols();
        for t in 0..feats.rows() {
            let x = &feats.data()[t * d..(t + 1) * d];
            for (j, &s) in cols.iter().enumerate() {
                let want = state_ll(&set, s, x);
                let g = m.data()[t * cols.len() + j] as f64;
                // float32 evaluation of sums of terms up to ~1e3 in magnitude:
                // 1e-4 of the value, with 1e-3 absolute for values near zero.
                let e = (g - want).abs() / want.abs().max(10.0);
                worst = worst.max(e);
                assert!(e < 1e-4, "{u} frame {t} column {j}: {g} vs {want}");
            }
        }
    }
    eprintln!("worst relative difference from f64: {worst:.2e}");
}

#[test]
fn feature_dimension_mismatch_is_an_error_naming_the_utterance() {
    let dir = tempfile::tempdir().unwrap();
    let mmf = dir.path().join("mixvar.mmf");
    std::fs::write(&mmf, gunzip(&format!("{H}/models/mixvar.mmf.gz"))).unwrap();
    let out = dir.path().join("ll.ark");
    // 39-dim Kaldi features against the 39-dim set are fine; 13-dim are not.
    let (code, err) = run(&[
        "score-htk",
        "--use-gpu=no",
        &format!("{H}/monophones1"),
        "ark:testdata/kaldi/feats/feats.first3.ark",
        &format!("ark:{}", out.display()),
        mmf.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("dimension 13") && err.contains("utterance"),
        "{err}"
    );
    assert!(!out.exists(), "a failed run left {}", out.display());
    // An HMM of the list missing from the MMFs is named.
    let list = dir.path().join("list");
    std::fs::write(&list, "sil\nnosuchhmm\n").unwrap();
    let (code, err) = run(&[
        "score-htk",
        "--use-gpu=no",
        list.to_str().unwrap(),
        "ark:testdata/kaldi/feats/feats.first3.ark",
        &format!("ark:{}", out.display()),
        mmf.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nosuchhmm"), "{err}");
}
