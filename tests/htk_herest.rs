//! HERest re-estimation against the real HTK 3.4.1 outputs copied into
//! testdata/htk/herest (see the README there for the command behind each
//! file): one pass from the mono1 / mixvar / fullcov start models, the
//! `-p 1` accumulators and the `-p 0` merge, HERest's printed numbers, and the
//! error paths.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use amtool::htk_train::accfile;
use amtool::htk_train::accs::{HerestAccs, HtkUpdate};
use amtool::model::htk::HtkModel;
use amtool_formats::htk::mmf::HmmSet;

const TD: &str = "testdata/htk/herest";

fn gunzip(rel: &str) -> Vec<u8> {
    common::gunzip(Path::new(TD).join(rel))
}

/// A temporary folder holding the start model `m`.mmf and an output folder.
fn workdir(m: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let mmf = dir.path().join(format!("{m}.mmf"));
    std::fs::write(&mmf, gunzip(&format!("models/{m}.mmf.gz"))).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    (dir, mmf, out)
}

/// Runs `amtool herest ARGS` in testdata/htk/herest; (exit code, stdout, stderr).
fn herest(args: &[&str]) -> (i32, String, String) {
    herest_env(&[], args)
}

/// [`herest`] with environment variables set.
fn herest_env(env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let o = common::amtool()
        .arg("herest")
        .args(args)
        .envs(env.iter().copied())
        .current_dir(TD)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn log_lines(log: &str, pat: &str) -> Vec<String> {
    std::fs::read_to_string(Path::new(TD).join("logs").join(log))
        .unwrap()
        .lines()
        .filter(|l| l.contains(pat))
        .map(|l| l.to_string())
        .collect()
}

fn out_lines(out: &str, pat: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.contains(pat))
        .map(|l| l.to_string())
        .collect()
}

fn is_num(s: &str) -> bool {
    s.parse::<f64>().is_ok()
}

/// Both MMFs have the same tokens apart from numbers; returns the numbers.
fn same_structure(a: &str, b: &str) -> (Vec<f64>, Vec<f64>) {
    let (ta, tb): (Vec<&str>, Vec<&str>) = (
        a.split_whitespace().collect(),
        b.split_whitespace().collect(),
    );
    assert_eq!(ta.len(), tb.len(), "different number of tokens");
    for (x, y) in ta.iter().zip(&tb) {
        assert_eq!(is_num(x), is_num(y), "token {x} vs {y}");
        if !is_num(x) {
            assert_eq!(x, y, "structure differs");
        }
    }
    let nums = |t: &[&str]| {
        t.iter()
            .filter(|x| is_num(x))
            .map(|x| x.parse::<f64>().unwrap())
            .collect()
    };
    (nums(&ta), nums(&tb))
}

/// Tolerance for a parameter HERest printed as `b`: HERest accumulates in
/// float32 (and sums in its own order), we in f64; HERest's own -p 0 and
/// single-pass outputs differ by up to 5e-4 absolute / 3.7e-5 relative
/// (fixture README). Our largest deviation on these fixtures is below a
/// sixth of this bound.
fn tol(b: f64) -> f64 {
    3e-5 * b.abs() + 1e-5
}

fn check_single_pass(m: &str, avg: &str) {
    let (stdout, got) = single_pass(m, &["-T", "1"], &[]);
    // The average HERest printed (fixture log), to all its digits.
    let want = format!("Reestimation complete - average log prob per frame = {avg}");
    assert_eq!(
        log_lines(&format!("herest_{m}_single.log"), "average log prob"),
        vec![want.clone()]
    );
    assert_eq!(out_lines(&stdout, "average log prob"), vec![want]);
    assert_eq!(
        out_lines(&stdout, "total frames seen"),
        log_lines(&format!("herest_{m}_single.log"), "total frames seen")
    );
    if m != "fullcov" {
        // Every per-utterance line too, to HERest's 7 significant digits
        // (±1 in the last: HTK rounds its float state probabilities).
        let num = |l: &String| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
        let (a, b) = (
            out_lines(&stdout, "Utterance prob"),
            log_lines(&format!("herest_{m}_single.log"), "Utterance prob"),
        );
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!(
                (num(x) - num(y)).abs() <= 1.01e-5 * num(y).abs() / 10.0 + 1e-12,
                "{x} vs HERest {y}"
            );
        }
        assert_eq!(
            out_lines(&stdout, "floored variance"),
            log_lines(&format!("herest_{m}_single.log"), "floored variance")
        );
    }
    let want = String::from_utf8(gunzip(&format!("expected/{m}/single.mmf.gz"))).unwrap();
    if m == "fullcov" {
        check_fullcov(&got, &want);
        return;
    }
    let (a, b) = same_structure(&got, &want);
    let mut worst = 0f64;
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= tol(*y),
            "{m}: number {i}: {x} vs HERest {y}"
        );
        worst = worst.max((x - y).abs() / tol(*y));
    }
    eprintln!(
        "{m}: {} numbers, worst deviation {worst:.3} of the tolerance",
        a.len()
    );
}

/// Full covariances: HERest stores Σ⁻¹ of ill-conditioned estimates, whose
/// elements move a lot with float rounding (HERest's own -p 0 vs single pass:
/// relative differences up to 0.78, fixture README). Compare means, weights
/// and transitions as above and the covariances themselves (inverted back),
/// relative to the largest element of each matrix.
fn check_fullcov(got: &str, want: &str) {
    let _ = same_structure(got, want);
    let a = HmmSet::parse(got.as_bytes(), "ours").unwrap();
    let b = HmmSet::parse(want.as_bytes(), "herest").unwrap();
    for (x, y) in a.means.iter().flatten().zip(b.means.iter().flatten()) {
        assert!(
            (*x as f64 - *y as f64).abs() <= tol(*y as f64),
            "mean {x} vs {y}"
        );
    }
    for (x, y) in a.transps.iter().zip(&b.transps) {
        for (p, q) in x.probs.iter().zip(&y.probs) {
            assert!(
                (*p as f64 - *q as f64).abs() <= tol(*q as f64),
                "transition {p} vs {q}"
            );
        }
    }
    let n = a.options.vec_size;
    let mut worst = 0f64;
    for (x, y) in a.covars.iter().zip(&b.covars) {
        let pack = |t: &amtool_formats::htk::mmf::TriMat| {
            let mut v = Vec::new();
            for i in 0..n {
                for j in 0..=i {
                    v.push(t.get(i, j) as f64);
                }
            }
            amtool::stats::linalg::sp_invert(&v, n).unwrap()
        };
        let (cx, cy) = (pack(x), pack(y));
        let scale = cy.iter().fold(0f64, |m, v| m.max(v.abs()));
        for (p, q) in cx.iter().zip(&cy) {
            let d = (p - q).abs() / scale;
            worst = worst.max(d);
            // HERest's own -p 0 and single-pass covariances (same data) differ
            // by up to 1.27e-4 of the matrix scale (float32 statistics of
            // 39×39 covariances; our -p 0 merge equals HERest's exactly).
            assert!(d <= 3e-4, "covariance element {p} vs {q} (scale {scale})");
        }
    }
    eprintln!("fullcov: worst covariance deviation {worst:.2e} of the matrix scale");
}

#[test]
fn mono1_single_pass_matches_herest() {
    check_single_pass("mono1", "-7.256297e+01");
}

#[test]
fn mixvar_single_pass_matches_herest() {
    // Tied states (~s), shared mean/variance/Gaussian/transition macros, and
    // a zero-weight component.
    check_single_pass("mixvar", "-6.506420e+01");
}

#[test]
fn fullcov_single_pass_matches_herest() {
    check_single_pass("fullcov", "-5.751341e+01");
}

#[test]
fn mono1_parallel_accumulators_match_herest() {
    let (_d, mmf, out) = workdir("mono1");
    let (code, stdout, stderr) = herest(&[
        "-T",
        "1",
        "-C",
        "train.cfg",
        "-I",
        "aligned.mlf",
        "-S",
        "train_half1.scp",
        "-H",
        mmf.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "-p",
        "1",
        "monophones1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        out_lines(&stdout, "Utterance prob"),
        log_lines("herest_mono1_p1.log", "Utterance prob")
    );
    assert!(
        out_lines(&stdout, "Reestimation complete").is_empty(),
        "-p 1 does not update"
    );
    let set = HmmSet::load(&[&mmf]).unwrap();
    let u = HtkUpdate {
        trans: true,
        means: true,
        vars: true,
        weights: true,
        map: false,
    };
    let read = |p: &Path| {
        let mut a = HerestAccs::zeros(&set);
        let (pr, t) =
            accfile::read_into(&set, &mut a, u, &std::fs::read(p).unwrap(), true, "x").unwrap();
        (a, pr, t)
    };
    let (ours, pr, t) = read(&out.join("HER1.acc"));
    let (theirs, pr2, t2) = read(&Path::new(TD).join("expected/mono1/HER1.acc"));
    assert_eq!(t, t2);
    assert!((pr - pr2).abs() <= 1e-6 * pr2.abs(), "{pr} vs {pr2}");
    assert_eq!(ours.num_egs, theirs.num_egs);
    // Each accumulator vector against HERest's float32 sums: 1e-4 of the
    // vector's largest element (centred sums cancel, so elementwise relative
    // error is meaningless near zero).
    let close = |a: &[f64], b: &[f64], what: &str| {
        let scale = b.iter().fold(1e-3f64, |m, v| m.max(v.abs()));
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-4 * scale, "{what}: {x} vs HERest {y}");
        }
    };
    for (i, (a, b)) in ours.mean.iter().zip(&theirs.mean).enumerate() {
        close(&a.sum, &b.sum, &format!("mean {i}"));
        close(&[a.occ], &[b.occ], &format!("mean occ {i}"));
    }
    for (i, (a, b)) in ours.var.iter().zip(&theirs.var).enumerate() {
        close(&a.sum, &b.sum, &format!("var {i}"));
    }
    for (i, (a, b)) in ours.trans.iter().zip(&theirs.trans).enumerate() {
        close(&a.tran, &b.tran, &format!("transitions {i}"));
        close(&a.occ, &b.occ, &format!("transition occ {i}"));
    }
}

#[test]
fn mono1_merge_of_herest_accumulators_is_byte_identical() {
    let (_d, mmf, out) = workdir("mono1");
    let (code, stdout, stderr) = herest(&[
        "-C",
        "train.cfg",
        "-H",
        mmf.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "-p",
        "0",
        "monophones1",
        "expected/mono1/HER1.acc",
        "expected/mono1/HER2.acc",
    ]);
    assert_eq!(code, 0, "{stderr}");
    // HERest -p 0 printed this (fixture README, herest_mono1_p0).
    assert!(
        stdout.contains("average log prob per frame = -7.256297e+01"),
        "{stdout}"
    );
    let got = std::fs::read(out.join("mono1.mmf")).unwrap();
    assert!(
        got == gunzip("expected/mono1/merged.mmf.gz"),
        "merged MMF differs from HERest's"
    );
}

#[test]
fn acoustic_model_of_an_htk_set() {
    let set = HmmSet::parse(&gunzip("models/mixvar.mmf.gz"), "mixvar.mmf").unwrap();
    let m = HtkModel::from_hmm_set(&set, "mixvar.mmf").unwrap();
    // 19 three-state phones + sil (3 states, one shared as sp's only state as
    // ~s silst) = 60 states; ~s st_sz_4 is shared by s and z.
    assert_eq!(m.model.num_states(), 59);
    assert_eq!(m.model.dim, 39);
    // Every emitting state of every HMM maps to a model state.
    for h in &set.hmms {
        for &s in &h.states {
            assert!(m.model_state[s].is_some());
        }
    }
    // Parameters go back into the structure unchanged (float round trip).
    let mut back = set.clone();
    m.write_back(&m.model, &mut back);
    for (a, b) in back.means.iter().flatten().zip(set.means.iter().flatten()) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} vs {b}");
    }
    for (a, b) in back
        .variances
        .iter()
        .flatten()
        .zip(set.variances.iter().flatten())
    {
        assert!((a - b).abs() <= 1e-6 * b.abs(), "{a} vs {b}");
    }
    // The engine scores like HTK's own arithmetic (HTK's form has no
    // cancellation; the expanded form loses ~1e-4 absolute per frame).
    let pf = amtool_formats::htk::param::ParamFile::open(
        Path::new(TD).join("feat/mfcc_0_d_a/spk01_u001.mfc"),
    )
    .unwrap();
    let feats = pf.to_f32();
    let eng = amtool::engine::select(amtool::engine::UseGpu::No, 1).unwrap();
    let mut lm = eng.load(&m.model).unwrap();
    let ns = m.model.num_states();
    let mut ll = vec![0f32; pf.n_frames() * ns];
    lm.state_loglikes(amtool::engine::FrameBatch::new(&feats, 39), &mut ll)
        .unwrap();
    let mut ours = vec![0f32; ll.len()];
    let lw = amtool::htk_train::score::log_weights(&set);
    let iv = amtool::htk_train::score::inverse_variances(&set);
    let states: Vec<usize> = (0..ns).collect();
    let mut cl = std::collections::HashMap::new();
    amtool::htk_train::score::score(&set, &m, &iv, &lw, &feats, 39, &states, &mut ours, &mut cl);
    let mut worst = 0f32;
    for (t, (a, b)) in ll.iter().zip(&ours).enumerate() {
        let s = t % ns;
        // ConvLogWt leaves the weight of a Gaussian's second use linear; the
        // engine model uses true weights: skip those states (w[2]).
        let st = &set.states[m.set_state[s]].streams[0];
        if st.mixtures.iter().any(|mx| {
            (lw[m.set_state[s]][st.mixtures.iter().position(|y| y == mx).unwrap()] - mx.weight.ln())
                .abs()
                > 1e-3
        }) {
            continue;
        }
        worst = worst.max((a - b).abs());
        assert!(
            (a - b).abs() <= 2e-3 + 1e-5 * b.abs(),
            "frame {} state {s}: engine {a} vs HTK {b}",
            t / ns
        );
    }
    eprintln!("engine vs HTK arithmetic: worst {worst}");
}

#[test]
fn multi_stream_sets_are_refused() {
    let mut set = HmmSet::parse(&gunzip("models/mono1.mmf.gz"), "mono1.mmf").unwrap();
    set.options.stream_widths = vec![13, 26];
    let e = HtkModel::from_hmm_set(&set, "two.mmf")
        .unwrap_err()
        .to_string();
    assert!(e.contains("two.mmf") && e.contains("multi-stream"), "{e}");
}

#[test]
fn missing_label_and_feature_files_are_named() {
    let (d, mmf, out) = workdir("mono1");
    let scp = d.path().join("x.scp");
    // A feature file that does not exist (its label is in the MLF).
    std::fs::write(&scp, "feat/mfcc_0_d_a/spk09_u001.mfc\n").unwrap();
    let mlf = d.path().join("x.mlf");
    std::fs::write(&mlf, "#!MLF!#\n\"*/spk09_u001.lab\"\nsil\nt\nsil\n.\n").unwrap();
    let args = |s: &str, m: &str| {
        vec![
            "-C".to_string(),
            "train.cfg".into(),
            "-I".into(),
            m.into(),
            "-S".into(),
            s.into(),
            "-H".into(),
            mmf.to_str().unwrap().into(),
            "-M".into(),
            out.to_str().unwrap().into(),
            "monophones1".into(),
        ]
    };
    let a = args(scp.to_str().unwrap(), mlf.to_str().unwrap());
    let (code, _, err) = herest(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    assert_eq!(code, 1);
    assert!(err.contains("spk09_u001.mfc"), "{err}");
    // A label file that is in no MLF and not on disk.
    std::fs::write(&scp, "feat/mfcc_0_d_a/spk01_u001.mfc\n").unwrap();
    let (code, _, err) = herest(
        &args(scp.to_str().unwrap(), mlf.to_str().unwrap())
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>(),
    );
    assert_eq!(code, 1);
    assert!(err.contains("spk01_u001.lab"), "{err}");
    assert!(
        !out.join("mono1.mmf").exists(),
        "no model written after an error"
    );
    // A label not in the HMM list.
    std::fs::write(&mlf, "#!MLF!#\n\"*/spk01_u001.lab\"\nsil\nxx\nsil\n.\n").unwrap();
    let (code, _, err) = herest(
        &args(scp.to_str().unwrap(), mlf.to_str().unwrap())
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>(),
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("spk01_u001.lab") && err.contains("xx"),
        "{err}"
    );
}

#[test]
fn utterances_that_cannot_be_aligned_are_skipped() {
    let (d, mmf, out) = workdir("mono1");
    let mlf = d.path().join("x.mlf");
    // 60 phones in spk01_u001's 242 frames is fine; 100 three-state phones is not.
    let mut text = String::from("#!MLF!#\n\"*/spk01_u001.lab\"\nsil\n");
    for _ in 0..100 {
        text.push_str("t\n");
    }
    text.push_str("sil\n.\n\"*/spk01_u002.lab\"\n");
    let good = std::fs::read_to_string(Path::new(TD).join("aligned.mlf")).unwrap();
    let body: String = good
        .split("\"*/spk01_u002.lab\"\n")
        .nth(1)
        .unwrap()
        .split(".\n")
        .next()
        .unwrap()
        .to_string();
    text.push_str(&body);
    text.push_str(".\n");
    std::fs::write(&mlf, text).unwrap();
    let scp = d.path().join("x.scp");
    std::fs::write(
        &scp,
        "feat/mfcc_0_d_a/spk01_u001.mfc\nfeat/mfcc_0_d_a/spk01_u002.mfc\n",
    )
    .unwrap();
    let (code, stdout, err) = herest(&[
        "-T",
        "1",
        "-C",
        "train.cfg",
        "-I",
        mlf.to_str().unwrap(),
        "-S",
        scp.to_str().unwrap(),
        "-H",
        mmf.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "-m",
        "0",
        "monophones1",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("Unable to traverse"), "{stdout}");
    assert!(
        err.contains("WARNING [-7324]") && err.contains("spk01_u001.mfc"),
        "{err}"
    );
    // Only the second utterance counted: HERest printed its prob per frame.
    assert!(
        stdout.contains(" Utterance prob per frame = -6.950759e+01"),
        "{stdout}"
    );
    let frames = out_lines(&stdout, "total frames seen");
    assert_eq!(frames.len(), 1);
    assert!(!frames[0].contains("9.464000e+03"));
}

#[test]
fn unsupported_update_flags_are_refused() {
    let (code, _, err) = herest(&["-u", "a", "-H", "x.mmf", "monophones1", "y.mfc"]);
    assert_eq!(code, 1);
    assert!(err.contains("-u a"), "{err}");
}

#[test]
fn map_adaptation_matches_herest() {
    let (_d, mmf, out) = workdir("mixvar");
    let (code, stdout, stderr) = herest(&[
        "-T",
        "1",
        "-C",
        "train.cfg",
        "-C",
        "map.cfg",
        "-u",
        "pmvw",
        "-I",
        "aligned.mlf",
        "-t",
        "250.0",
        "150.0",
        "1000.0",
        "-S",
        "map_spk03.scp",
        "-H",
        mmf.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "monophones1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    for pat in ["Utterance prob", "average log prob", "total frames seen"] {
        assert_eq!(
            out_lines(&stdout, pat),
            log_lines("herest_map.log", pat),
            "{pat}"
        );
    }
    let got = std::fs::read_to_string(out.join("mixvar.mmf")).unwrap();
    let want = String::from_utf8(gunzip("expected/map_spk03.mmf.gz")).unwrap();
    let (a, b) = same_structure(&got, &want);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!((x - y).abs() <= tol(*y), "number {i}: {x} vs HERest {y}");
    }
}

#[test]
fn map_with_transitions_is_refused() {
    let (_d, mmf, out) = workdir("mixvar");
    let (code, _, err) = herest(&[
        "-C",
        "train.cfg",
        "-u",
        "pt",
        "-I",
        "aligned.mlf",
        "-S",
        "map_spk03.scp",
        "-H",
        mmf.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "monophones1",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("MAP"), "{err}");
}

/// A single pass of `m` (aligned.mlf, train.scp) with the options `opts`
/// and the environment `env`: what it printed and the output MMF.
fn single_pass(m: &str, opts: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let (_d, mmf, out) = workdir(m);
    let mut args = opts.to_vec();
    args.extend([
        "-C",
        "train.cfg",
        "-I",
        "aligned.mlf",
        "-S",
        "train.scp",
        "-H",
        mmf.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "monophones1",
    ]);
    let (code, stdout, stderr) = herest_env(env, &args);
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(out.join(format!("{m}.mmf"))).unwrap();
    (stdout, text)
}

/// A single pass with state likelihoods from an amtool engine instead of
/// HTK's own float arithmetic: HERest's average to 4 decimals, parameters
/// within the tolerance above. Returns the output MMF.
fn engine_pass(m: &str, scorer: &str, avg: f64) -> String {
    let (stdout, text) = single_pass(m, &[scorer], &[]);
    let line = out_lines(&stdout, "average log prob").pop().unwrap();
    let got: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    // HERest's value to its 4th decimal, allowing the engines' float rounding
    // to sit on either side of a rounding boundary (the CPU engine prints
    // −65.06419 for HERest's −65.06420).
    eprintln!("{m} {scorer}: {line}");
    assert!((got - avg).abs() <= 1.5e-4, "{line} vs HERest {avg}");
    let want = String::from_utf8(gunzip(&format!("expected/{m}/single.mmf.gz"))).unwrap();
    let (a, b) = same_structure(&text, &want);
    // The engine path differs from HERest in two documented ways: the
    // log-likelihoods come from the expanded form (on centred features) and
    // the engine accumulates every component of an occupied state, where HFB
    // drops components with occupation below e^-10. On these fixtures that
    // moves parameters by up to 4.5× the tolerance of the HTK-arithmetic
    // path (mixvar; mono1 1.4×): allow 6×.
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= 6.0 * tol(*y),
            "{m} {scorer}: number {i}: {x} vs HERest {y}"
        );
    }
    text
}

#[test]
fn cpu_engine_scorer_matches_herest() {
    engine_pass("mono1", "--scorer=cpu", -7.256297e+01);
    engine_pass("mixvar", "--scorer=cpu", -6.506420e+01);
}

#[test]
fn cuda_engine_scorer_matches_cpu_and_herest() {
    if amtool::engine::cuda::engine_for_tests().is_none() {
        return;
    }
    let gpu = engine_pass("mixvar", "--scorer=cuda", -6.506420e+01);
    let cpu = engine_pass("mixvar", "--scorer=cpu", -6.506420e+01);
    // Same statistics up to the engines' float rounding: both evaluate the
    // expanded form z·w, whose terms on HTK's un-normalised features cancel
    // to ~1e-4 absolute in float, each in its own summation order; that moves
    // the posteriors of ambiguous frames. Observed on the H100 (2026-11-22):
    // 5e-5 relative on a mean (−1.035403 vs −1.035453), average log prob
    // −65.06432 (CUDA) and −65.06419 (CPU) for HERest's −65.06420. The
    // engine path's bound against HERest applies (6× the HTK-path tolerance).
    let (a, b) = same_structure(&gpu, &cpu);
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 6.0 * tol(*y), "cuda {x} vs cpu {y}");
    }
}

#[test]
fn stats_report_lists_every_hmm() {
    let (d, mmf, out) = workdir("mono1");
    let stats = d.path().join("stats");
    let (code, _, err) = herest(&[
        "-C",
        "train.cfg",
        "-I",
        "aligned.mlf",
        "-S",
        "train_half1.scp",
        "-s",
        stats.to_str().unwrap(),
        "-H",
        mmf.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "monophones1",
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&stats).unwrap();
    assert_eq!(text.lines().count(), 21);
    // sil opens and closes each of the 20 utterances: 40 examples, 3 states.
    let sil = text.lines().find(|l| l.contains("\"sil\"")).unwrap();
    let f: Vec<&str> = sil.split_whitespace().collect();
    assert_eq!(f[2], "40", "{sil}");
    assert_eq!(f.len(), 6, "{sil}");
}

#[test]
fn herest_shim_takes_htk_options() {
    // Invoked as `HERest` (a link), amtool takes HERest's own command line.
    let (d, mmf, out) = workdir("mono1");
    let link = d.path().join("HERest");
    std::os::unix::fs::symlink(common::amtool_bin(), &link).unwrap();
    let o = Command::new(&link)
        .args([
            "-A",
            "-C",
            "train.cfg",
            "-H",
            mmf.to_str().unwrap(),
            "-M",
            out.to_str().unwrap(),
            "-p",
            "0",
        ])
        .args([
            "monophones1",
            "expected/mono1/HER1.acc",
            "expected/mono1/HER2.acc",
        ])
        .current_dir(TD)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("average log prob per frame = -7.256297e+01"),
        "{stdout}"
    );
    assert!(out.join("mono1.mmf").exists());
}

#[test]
fn missing_output_directory_is_an_error() {
    let (d, mmf, _out) = workdir("mono1");
    let none = d.path().join("nope");
    let (code, _, err) = herest(&[
        "-C",
        "train.cfg",
        "-I",
        "aligned.mlf",
        "-S",
        "train_half1.scp",
        "-H",
        mmf.to_str().unwrap(),
        "-M",
        none.to_str().unwrap(),
        "monophones1",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("nope") && err.contains("does not exist"),
        "{err}"
    );
}

#[test]
fn label_directory_and_extension() {
    // -L dir -X ext: the label of feat/mfcc_0_d_a/spk01_u002.mfc is dir/spk01_u002.phn.
    let (d, mmf, out) = workdir("mono1");
    let mlf = std::fs::read_to_string(Path::new(TD).join("aligned.mlf")).unwrap();
    let body = mlf
        .split("\"*/spk01_u002.lab\"\n")
        .nth(1)
        .unwrap()
        .split(".\n")
        .next()
        .unwrap();
    let labs = d.path().join("labs");
    std::fs::create_dir(&labs).unwrap();
    std::fs::write(labs.join("spk01_u002.phn"), body).unwrap();
    let (code, stdout, err) = herest(&[
        "-T",
        "1",
        "-C",
        "train.cfg",
        "-L",
        labs.to_str().unwrap(),
        "-X",
        "phn",
        "-m",
        "0",
        "-H",
        mmf.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "monophones1",
        "feat/mfcc_0_d_a/spk01_u002.mfc",
    ]);
    assert_eq!(code, 0, "{err}");
    // The number HERest printed for this utterance (herest_mono1_single.log).
    assert!(
        stdout.contains(" Utterance prob per frame = -6.950759e+01"),
        "{stdout}"
    );
    assert!(stdout.contains("Label spk01_u002.phn"), "{stdout}");
}

#[test]
fn text_accumulators_round_trip() {
    // BINARYACCFORMAT = F writes the same tokens as text (%e): reading the
    // text form back gives HERest's binary values to %e's 7 digits.
    let set = HmmSet::parse(&gunzip("models/mono1.mmf.gz"), "mono1.mmf").unwrap();
    let u = HtkUpdate::default();
    let bin = std::fs::read(Path::new(TD).join("expected/mono1/HER1.acc")).unwrap();
    let mut a = HerestAccs::zeros(&set);
    let (pr, t) = accfile::read_into(&set, &mut a, u, &bin, true, "HER1.acc").unwrap();
    a.total_pr = pr;
    a.total_frames = t;
    // Binary written back is byte-identical.
    assert!(accfile::write(&set, &a, u, true) == bin);
    let text = accfile::write(&set, &a, u, false);
    assert!(String::from_utf8(text.clone())
        .unwrap()
        .starts_with("\"f\"\n 14 "));
    let mut b = HerestAccs::zeros(&set);
    let (pr2, t2) = accfile::read_into(&set, &mut b, u, &text, false, "text").unwrap();
    assert_eq!(t, t2);
    assert!((pr - pr2).abs() <= 5e-7 * pr.abs());
    for (x, y) in a.mean.iter().zip(&b.mean) {
        for (p, q) in x.sum.iter().zip(&y.sum) {
            assert!((p - q).abs() <= 5e-7 * p.abs() + 1e-30, "{p} vs {q}");
        }
    }
    // A truncated file is an error naming it, not a panic.
    let e = accfile::read_into(&set, &mut b, u, &bin[..1000], true, "short.acc")
        .unwrap_err()
        .to_string();
    assert!(e.contains("short.acc"), "{e}");
}

#[test]
fn flat_start_pass_with_pruning_and_two_mmfs() {
    // hmm0 (HCompV flat start, -H macros -H hmmdefs) with -t 250 150 1000:
    // HERest's printed numbers, and both files written back into -M.
    let d = tempfile::tempdir().unwrap();
    let (macros, hmmdefs) = (d.path().join("macros"), d.path().join("hmmdefs"));
    std::fs::write(&macros, gunzip("models/hmm0/macros.gz")).unwrap();
    std::fs::write(&hmmdefs, gunzip("models/hmm0/hmmdefs.gz")).unwrap();
    let out = d.path().join("hmm1");
    std::fs::create_dir(&out).unwrap();
    let (code, stdout, stderr) = herest(&[
        "-A",
        "-T",
        "1",
        "-C",
        "train.cfg",
        "-I",
        "phones0.mlf",
        "-t",
        "250.0",
        "150.0",
        "1000.0",
        "-S",
        "train.scp",
        "-H",
        macros.to_str().unwrap(),
        "-H",
        hmmdefs.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "monophones0",
    ]);
    assert_eq!(code, 0, "{stderr}");
    for pat in [
        "Utterance prob",
        "floored variance",
        "average log prob",
        "total frames seen",
    ] {
        assert_eq!(
            out_lines(&stdout, pat),
            log_lines("herest_hmm1.log", pat),
            "{pat}"
        );
    }
    // HERest's header lines (-T 1), "System is PLAIN", pruning settings.
    let log = std::fs::read_to_string(Path::new(TD).join("logs/herest_hmm1.log")).unwrap();
    let head = |t: &str| {
        t.lines()
            .skip(1)
            .take(6)
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(head(&stdout), head(&log));
    let m = std::fs::read_to_string(out.join("macros")).unwrap();
    assert!(m.contains("~v \"varFloor1\"") && !m.contains("~h"), "{m}");
    let h = std::fs::read_to_string(out.join("hmmdefs")).unwrap();
    assert_eq!(h.matches("~h \"").count(), 20);
}

#[test]
fn beta_pass_is_retried_with_a_wider_beam() {
    // -t 0.0 0.5 100.0: no path at beam 0, HERest widens the beam by 0.5
    // until one survives; -t 0.0 alone gives up and skips the utterance.
    let (_d, mmf, out) = workdir("mono1");
    let run = |t: &[&str]| {
        let mut a = vec!["-T", "1", "-C", "train.cfg", "-I", "aligned.mlf", "-m", "0"];
        a.extend_from_slice(t);
        a.extend_from_slice(&["-H", mmf.to_str().unwrap(), "-M", out.to_str().unwrap()]);
        a.extend_from_slice(&["monophones1", "feat/mfcc_0_d_a/spk01_u001.mfc"]);
        herest(&a)
    };
    let (code, stdout, err) = run(&["-t", "0.0", "0.5", "100.0"]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("Retrying Beta pass at   0.5\n"), "{stdout}");
    assert_eq!(out_lines(&stdout, "Utterance prob").len(), 1, "{stdout}");
    let (code, stdout, err) = run(&["-t", "0.0"]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains(" No path found in beta pass"), "{stdout}");
    assert!(err.contains("WARNING [-7324]  StepBack: File feat/mfcc_0_d_a/spk01_u001.mfc - bad data or over pruning"), "{err}");
}

#[test]
fn full_covariance_model_round_trip() {
    let set = HmmSet::parse(&gunzip("models/fullcov.mmf.gz"), "fullcov.mmf").unwrap();
    let m = HtkModel::from_hmm_set(&set, "fullcov.mmf").unwrap();
    assert_eq!(m.model.kind, amtool::model::CovKind::Full);
    assert_eq!(m.model.inv_var_len(), 39 * 40 / 2);
    let mut back = set.clone();
    m.write_back(&m.model, &mut back);
    // Means come back through Σ·(Σ⁻¹μ) in f64 from float Σ⁻¹μ: relative 1e-4
    // of the largest mean element (Σ⁻¹ of these models has condition numbers ~1e4).
    for (a, b) in back.means.iter().zip(&set.means) {
        let scale = b.iter().fold(1f32, |m, v| m.max(v.abs()));
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-4 * scale, "{x} vs {y}");
        }
    }
    for (a, b) in back.covars.iter().zip(&set.covars) {
        assert_eq!(a.upper, b.upper);
    }
    for (a, b) in back.pdfs.iter().zip(&set.pdfs) {
        let (x, y) = (a.gconst.unwrap(), b.gconst.unwrap());
        assert!((x - y).abs() <= 1e-4 * y.abs(), "gconst {x} vs {y}");
    }
}

#[test]
fn hmm_definition_files_with_dir_and_extensions() {
    // -d dir -x hmm: the 20 HMMs of hmm0/hmmdefs, each in its own file
    // dir/NAME.hmm (as HInit/HRest write them), give HERest's numbers of the
    // -H hmmdefs pass (herest_hmm1.log); -o new: saved as out/NAME.new.
    let d = tempfile::tempdir().unwrap();
    let macros = d.path().join("macros");
    std::fs::write(&macros, gunzip("models/hmm0/macros.gz")).unwrap();
    let defs = String::from_utf8(gunzip("models/hmm0/hmmdefs.gz")).unwrap();
    let hmms = d.path().join("hmms");
    std::fs::create_dir(&hmms).unwrap();
    let mut names = Vec::new();
    for def in defs.split("~h \"").skip(1) {
        let name = def.split('"').next().unwrap().to_string();
        std::fs::write(hmms.join(format!("{name}.hmm")), format!("~h \"{def}")).unwrap();
        names.push(name);
    }
    assert_eq!(names.len(), 20);
    let out = d.path().join("hmm1");
    std::fs::create_dir(&out).unwrap();
    let (code, stdout, stderr) = herest(&[
        "-T",
        "1",
        "-C",
        "train.cfg",
        "-I",
        "phones0.mlf",
        "-t",
        "250.0",
        "150.0",
        "1000.0",
        "-S",
        "train.scp",
        "-H",
        macros.to_str().unwrap(),
        "-d",
        hmms.to_str().unwrap(),
        "-x",
        "hmm",
        "-o",
        "new",
        "-M",
        out.to_str().unwrap(),
        "monophones0",
    ]);
    assert_eq!(code, 0, "{stderr}");
    for pat in ["Utterance prob", "average log prob", "total frames seen"] {
        assert_eq!(
            out_lines(&stdout, pat),
            log_lines("herest_hmm1.log", pat),
            "{pat}"
        );
    }
    assert!(out.join("macros").exists());
    for n in &names {
        let h = std::fs::read_to_string(out.join(format!("{n}.new"))).unwrap();
        assert_eq!(h.matches("~h \"").count(), 1, "{n}: {h}");
        assert!(h.contains(&format!("~h \"{n}\"")), "{n}");
    }
    // Without -x the files are looked up by the bare name, which is not there.
    let (code, _, err) = herest(&[
        "-C",
        "train.cfg",
        "-I",
        "phones0.mlf",
        "-S",
        "train.scp",
        "-H",
        macros.to_str().unwrap(),
        "-d",
        hmms.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "monophones0",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("is in no MMF") && err.contains("hmms/"),
        "{err}"
    );
}

#[test]
fn switches_that_change_nothing_without_transforms_leave_the_pass_alone() {
    // -b (unused in 3.4.1), -l (no speaker changes without transforms), -h,
    // -K, -z (output transforms only), -F HTK, -G HTK: HERest's number for
    // spk01_u002 (herest_mono1_single.log) is unchanged.
    let (_d, mmf, out) = workdir("mono1");
    let (code, stdout, err) = herest(&[
        "-T",
        "1",
        "-C",
        "train.cfg",
        "-I",
        "aligned.mlf",
        "-b",
        "x.scp",
        "-l",
        "1",
        "-h",
        "*%%%",
        "-K",
        "xf",
        "mllr",
        "-z",
        "TMF",
        "-F",
        "HTK",
        "-G",
        "HTK",
        "-m",
        "0",
        "-H",
        mmf.to_str().unwrap(),
        "-M",
        out.to_str().unwrap(),
        "monophones1",
        "feat/mfcc_0_d_a/spk01_u002.mfc",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains(" Utterance prob per frame = -6.950759e+01"),
        "{stdout}"
    );
}

#[test]
fn transform_switches_are_refused_by_name() {
    let (_d, mmf, out) = workdir("mono1");
    for sw in [
        &["-a"][..],
        &["-r"],
        &["-E", "dir"],
        &["-J", "dir", "ext"],
        &["-F", "NIST"],
        &["-G", "TIMIT"],
    ] {
        let mut args = sw.to_vec();
        args.extend([
            "-H",
            mmf.to_str().unwrap(),
            "-M",
            out.to_str().unwrap(),
            "monophones1",
            "x.mfc",
        ]);
        let (code, _, err) = herest(&args);
        assert_eq!(code, 1, "{sw:?}");
        assert!(
            err.contains(&format!("{} ", sw[0])) && err.contains("not supported"),
            "{err}"
        );
        assert!(!err.contains("Unknown switch"), "{err}");
    }
}

#[test]
fn switch_arguments_are_range_checked_as_hshell_does() {
    for (sw, v) in [
        ("-c", "2000"),
        ("-v", "11"),
        ("-m", "1001"),
        ("-p", "501"),
        ("-t", "-1"),
    ] {
        let (code, _, err) = herest(&[sw, v, "monophones1", "x.mfc"]);
        assert_eq!(code, 1, "{sw} {v}");
        assert!(
            err.contains(sw) && (err.contains("out of range") || err.contains("Required")),
            "{err}"
        );
    }
    let (code, _, err) = herest(&["-N", "monophones1", "x.mfc"]);
    assert_eq!(code, 1);
    assert!(err.contains("Unknown switch -N"), "{err}");
}

/// [`single_pass`] with `scorer` on `partitions` logical partitions
/// (AMTOOL_PARTITIONS).
fn partition_pass(m: &str, scorer: &str, partitions: &str) -> (String, String) {
    single_pass(m, &[scorer], &[("AMTOOL_PARTITIONS", partitions)])
}

/// HERest's engine path split over 2 and 3 partitions (its 40 utterances
/// scored in batches of 32 split by frames, their statistics sent as two
/// batches dealt to the partitions): the same printout and model as one.
#[test]
fn engine_scorer_is_the_same_on_any_number_of_partitions() {
    let one = partition_pass("mixvar", "--scorer=cpu", "1");
    for p in ["2", "3"] {
        assert!(
            partition_pass("mixvar", "--scorer=cpu", p) == one,
            "{p} partitions"
        );
    }
    if amtool::engine::cuda::engine_for_tests().is_none() {
        return;
    }
    let one = partition_pass("mixvar", "--scorer=cuda", "1");
    for p in ["2", "3"] {
        assert!(
            partition_pass("mixvar", "--scorer=cuda", p) == one,
            "GPU: {p} partitions"
        );
    }
}
