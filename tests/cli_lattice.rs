//! Lattices through the CLI against Kaldi's own outputs (testdata/kaldi/lattice,
//! see testdata/kaldi/README.md): `amtool copy` / `lattice-copy` copies are
//! byte-identical (binary) and identical to lattice-copy's text;
//! `amtool rescore-lattice` / `gmm-rescore-lattice` reproduce
//! gmm-rescore-lattice's lattices for final.mdl and est.mdl; bad input is
//! warned about and counted per utterance, or stops the run with exit 1.
//!
//! Rescoring tolerance: structure (states, arcs, words, transition-id
//! strings), graph costs and the OpenFst properties word must be identical;
//! acoustic costs within 1e-5 relative (absolute floor 1e-3). An arc's cost is
//! a float32 sum, in Kaldi's order, of up to a few hundred per-frame
//! −log-likelihoods of about 60–120 each; ours differ from Kaldi's only in the
//! per-frame log-likelihoods (our CPU engine's dot products vs Kaldi's BLAS,
//! both float32, ~1e-6 relative each), so the sums agree to a few 1e-6
//! relative (measured: ≤ 2e-6).

mod common;

use common::{read_table as read_all, run, run_cmd};

use std::process::Command;

use amtool_formats::kaldi::holder::Holder;
use amtool_formats::kaldi::lattice::{CompactLattice, CompactLatticeWeight, Lattice};
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::TableWriter;

const D: &str = "testdata/kaldi/lattice";
const FINAL_MDL: &str = "testdata/kaldi/final.mdl";
const EST_MDL: &str = "testdata/kaldi/train/est.mdl";

fn gunzip(name: &str) -> Vec<u8> {
    common::gunzip(format!("{D}/{name}.gz"))
}

struct Work {
    dir: tempfile::TempDir,
}

impl Work {
    fn new() -> Self {
        Work {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
    /// A fixture unzipped into the work folder; the features are the 40
    /// utterances the training tests use (testdata/kaldi/acc).
    fn fixture(&self, name: &str) -> String {
        if name == "feats_cmvn_deltas.ark" {
            return "testdata/kaldi/acc/feats_cmvn_deltas.ark".to_string();
        }
        let p = self.path(name);
        if !std::path::Path::new(&p).exists() {
            std::fs::write(&p, gunzip(name)).unwrap();
        }
        p
    }
}

fn write_all<H: Holder>(wspec: &str, items: &[(String, H)]) {
    let mut w = TableWriter::<H>::open(wspec).unwrap();
    for (k, v) in items {
        w.write(k, v).unwrap();
    }
    w.close().unwrap();
}

/// The message of the LOG line of a Kaldi log file (text after "...) ").
fn kaldi_log_message(log: &str) -> String {
    let text = std::fs::read_to_string(format!("{D}/{log}")).unwrap();
    let line = text.lines().find(|l| l.starts_with("LOG (")).unwrap();
    line.split_once(") ").unwrap().1.to_string()
}

/// Rescored lattices equal Kaldi's (see the module docs for the tolerance).
fn assert_same_lattices(ours: &[(String, CompactLattice)], kaldi: &[(String, CompactLattice)]) {
    assert_eq!(ours.len(), kaldi.len());
    let mut worst = 0f64;
    for ((k1, a), (k2, b)) in ours.iter().zip(kaldi) {
        assert_eq!(k1, k2);
        assert_eq!(a.properties, b.properties, "{k1}");
        assert_eq!((a.start, a.num_states()), (b.start, b.num_states()), "{k1}");
        fn weights(l: &CompactLattice) -> Vec<(i32, i32, i32, &CompactLatticeWeight)> {
            l.states
                .iter()
                .flat_map(|s| {
                    std::iter::once((-1, -1, -1, &s.final_weight)).chain(
                        s.arcs
                            .iter()
                            .map(|a| (a.ilabel, a.olabel, a.nextstate, &a.weight)),
                    )
                })
                .collect::<Vec<_>>()
        }
        let (wa, wb) = (weights(a), weights(b));
        assert_eq!(wa.len(), wb.len(), "{k1}");
        for (x, y) in wa.iter().zip(&wb) {
            assert_eq!((x.0, x.1, x.2), (y.0, y.1, y.2), "{k1}");
            assert_eq!(x.3.string, y.3.string, "{k1}");
            assert_eq!(
                x.3.weight.graph.to_bits(),
                y.3.weight.graph.to_bits(),
                "{k1}"
            );
            let (p, q) = (x.3.weight.acoustic as f64, y.3.weight.acoustic as f64);
            if p.is_infinite() || q.is_infinite() {
                assert_eq!(p, q, "{k1}");
                continue;
            }
            let tol = (1e-5 * q.abs()).max(1e-3);
            assert!(
                (p - q).abs() <= tol,
                "{k1}: acoustic cost {p} vs Kaldi's {q}"
            );
            worst = worst.max((p - q).abs() / q.abs().max(1.0));
        }
    }
    eprintln!("largest relative acoustic-cost difference: {worst:.2e}");
}

/// How a rescoring test calls amtool.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    /// `amtool score --lattices=R MODEL FEATS OUT` (how users call it).
    Score,
    /// A link named gmm-rescore-lattice (Kaldi's argument order).
    Shim,
}

fn rescore_matches(model: &str, expected: &str, log: &str, via: Via) {
    let w = Work::new();
    let lat = w.fixture("lat.ark");
    let feats = w.fixture("feats_cmvn_deltas.ark");
    let out = w.path("out.ark");
    let args = [
        "--use-gpu=no".to_string(),
        model.to_string(),
        format!("ark:{lat}"),
        format!("ark:{feats}"),
        format!("ark:{out}"),
    ];
    let (code, err) = match via {
        Via::Shim => {
            let link = w.dir.path().join("gmm-rescore-lattice");
            std::os::unix::fs::symlink(common::amtool_bin(), &link).unwrap();
            run_cmd(Command::new(&link).args(&args))
        }
        Via::Score => {
            let lats = format!("--lattices=ark:{lat}");
            run(&["score", "--use-gpu=no", &lats, model, &args[3], &args[4]])
        }
    };
    assert_eq!(code, 0, "{err}");
    // "Done 40 lattices with errors on 0, #frames is 8445", as Kaldi's log.
    assert!(err.contains(&kaldi_log_message(log)), "{err}");
    let ours: Vec<(String, CompactLattice)> = read_all(&format!("ark:{out}"));
    let kaldi: Vec<(String, CompactLattice)> = read_all(&format!("ark:{}", w.fixture(expected)));
    assert_same_lattices(&ours, &kaldi);
    // Same length as Kaldi's file: same structure and header everywhere.
    assert_eq!(
        std::fs::metadata(&out).unwrap().len() as usize,
        gunzip(expected).len()
    );
}

#[test]
fn score_lattices_with_final_mdl_matches_kaldi() {
    rescore_matches(
        FINAL_MDL,
        "lat_rescored.ark",
        "gmm-rescore-lattice.log",
        Via::Score,
    );
}

#[test]
fn rescore_with_est_mdl_matches_kaldi_through_shim() {
    rescore_matches(
        EST_MDL,
        "lat_rescored_est.ark",
        "gmm-rescore-lattice-est.log",
        Via::Shim,
    );
}

#[test]
fn old_acoustic_scale_one_adds_to_old_costs() {
    // With --old-acoustic-scale=1 the new cost is added to the old one:
    // ours(1) - lat = ours(0), to float rounding of costs of a few thousand.
    let w = Work::new();
    let lat = w.fixture("lat.ark");
    let feats = w.fixture("feats_cmvn_deltas.ark");
    let (o0, o1) = (w.path("o0.ark"), w.path("o1.ark"));
    for (scale, out) in [("0", &o0), ("1", &o1)] {
        let (code, err) = run(&[
            "rescore-lattice",
            "--use-gpu=no",
            &format!("--old-acoustic-scale={scale}"),
            FINAL_MDL,
            &format!("ark:{lat}"),
            &format!("ark:{feats}"),
            &format!("ark:{out}"),
        ]);
        assert_eq!(code, 0, "{err}");
    }
    let l0: Vec<(String, CompactLattice)> = read_all(&format!("ark:{o0}"));
    let l1: Vec<(String, CompactLattice)> = read_all(&format!("ark:{o1}"));
    let mut old: Vec<(String, CompactLattice)> = read_all(&format!("ark:{lat}"));
    // Rescoring top-sorts lattices that are not (s01-004 of lat.ark is not;
    // Kaldi's output has it sorted), so compare with the sorted input.
    let mut sorted = 0;
    for (_, c) in &mut old {
        if !c.is_top_sorted() {
            assert!(c.top_sort());
            sorted += 1;
        }
    }
    assert!(sorted > 0);
    for (((k, a), (_, b)), (_, c)) in l0.iter().zip(&l1).zip(&old) {
        for ((sa, sb), sc) in a.states.iter().zip(&b.states).zip(&c.states) {
            for ((x, y), z) in sa.arcs.iter().zip(&sb.arcs).zip(&sc.arcs) {
                let want = x.weight.weight.acoustic as f64 + z.weight.weight.acoustic as f64;
                let got = y.weight.weight.acoustic as f64;
                // Float32 sums of different order: a few ulps of ~1e4.
                assert!(
                    (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "{k}: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn lattice_copies_are_exact() {
    let w = Work::new();
    let lat = w.fixture("lat.ark");
    // Binary to binary: byte-identical; text identical to lattice-copy's.
    let out = w.path("copy.ark");
    let (code, err) = run(&["copy", &format!("ark:{lat}"), &format!("ark:{out}")]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Done copying 40 lattices."), "{err}");
    assert!(std::fs::read(&out).unwrap() == gunzip("lat.ark"));
    let txt = w.path("copy.txt");
    let link = w.dir.path().join("lattice-copy");
    std::os::unix::fs::symlink(common::amtool_bin(), &link).unwrap();
    let (code, err) =
        run_cmd(Command::new(&link).args([format!("ark:{lat}"), format!("ark,t:{txt}")]));
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&txt).unwrap() == gunzip("lat.txt"));
    // Text back to text: stable.
    let txt2 = w.path("copy2.txt");
    let (code, err) = run(&["copy", &format!("ark:{txt}"), &format!("ark,t:{txt2}")]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&txt2).unwrap() == gunzip("lat.txt"));
    // Non-compact lattices with --write-compact=false, as the fixture was made.
    let raw = w.fixture("lat_raw_first3.ark");
    let out = w.path("raw.ark");
    let (code, err) = run_cmd(Command::new(&link).args([
        "--write-compact=false".into(),
        format!("ark:{raw}"),
        format!("ark:{out}"),
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Done copying 3 lattices."), "{err}");
    assert!(std::fs::read(&out).unwrap() == gunzip("lat_raw_first3.ark"));
    let (code, err) = run_cmd(Command::new(&link).args([
        "--write-compact=false".into(),
        format!("ark:{raw}"),
        format!("ark,t:{txt}"),
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&txt).unwrap() == gunzip("lat_raw_first3.txt"));
    // `amtool copy` keeps a non-compact archive as stored.
    let (code, err) = run(&["copy", &format!("ark:{raw}"), &format!("ark:{out}")]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&out).unwrap() == gunzip("lat_raw_first3.ark"));
}

#[test]
fn compact_to_non_compact_conversion() {
    // lattice-copy --write-compact=false on a compact archive: Kaldi's
    // ConvertLattice, one arc per transition-id, costs and words kept.
    let w = Work::new();
    let lat = w.fixture("lat.ark");
    let out = w.path("lat_full.ark");
    let (code, err) = run(&[
        "copy",
        "--write-compact=false",
        &format!("ark:{lat}"),
        &format!("ark:{out}"),
    ]);
    assert_eq!(code, 0, "{err}");
    let full: Vec<(String, Lattice)> = read_all(&format!("ark:{out}"));
    let compact: Vec<(String, CompactLattice)> = read_all(&format!("ark:{lat}"));
    assert_eq!(full.len(), 40);
    for ((k, l), (_, c)) in full.iter().zip(&compact) {
        let frames = |c: &CompactLattice| -> usize {
            c.states
                .iter()
                .flat_map(|s| &s.arcs)
                .map(|a| a.weight.string.len().max(1))
                .sum::<usize>()
                + c.states
                    .iter()
                    .map(|s| s.final_weight.string.len())
                    .sum::<usize>()
        };
        assert_eq!(l.num_arcs(), frames(c), "{k}");
        let words = |it: Vec<i32>| it.into_iter().filter(|&w| w != 0).collect::<Vec<_>>();
        assert_eq!(
            words(
                l.states
                    .iter()
                    .flat_map(|s| &s.arcs)
                    .map(|a| a.olabel)
                    .collect()
            ),
            words(
                c.states
                    .iter()
                    .flat_map(|s| &s.arcs)
                    .map(|a| a.ilabel)
                    .collect()
            ),
            "{k}"
        );
        let g = |x: f32| x as f64;
        let total_l: f64 = l
            .states
            .iter()
            .flat_map(|s| &s.arcs)
            .map(|a| g(a.weight.graph))
            .sum();
        let total_c: f64 = c
            .states
            .iter()
            .flat_map(|s| &s.arcs)
            .map(|a| g(a.weight.weight.graph))
            .sum::<f64>()
            + c.states
                .iter()
                .filter(|s| {
                    s.final_weight.weight.graph.is_finite() && !s.final_weight.string.is_empty()
                })
                .map(|s| g(s.final_weight.weight.graph))
                .sum::<f64>();
        let finals_l: f64 = l
            .states
            .iter()
            .filter(|s| s.final_weight.graph.is_finite())
            .map(|s| g(s.final_weight.graph))
            .sum();
        let finals_c: f64 = c
            .states
            .iter()
            .filter(|s| s.final_weight.weight.graph.is_finite() && s.final_weight.string.is_empty())
            .map(|s| g(s.final_weight.weight.graph))
            .sum();
        // Sums of the same float32 values (exactly representable in f64).
        assert_eq!(total_l + finals_l, total_c + finals_c, "{k}");
    }
    // A non-compact archive becomes compact with lattice-copy's default
    // (Kaldi's Factor + TopSort): every transition-id kept, top-sorted.
    let raw = w.fixture("lat_raw_first3.ark");
    let link = w.dir.path().join("lattice-copy");
    std::os::unix::fs::symlink(common::amtool_bin(), &link).unwrap();
    let out = w.path("raw_compact.ark");
    let (code, err) =
        run_cmd(Command::new(&link).args([format!("ark:{raw}"), format!("ark:{out}")]));
    assert_eq!(code, 0, "{err}");
    let compact: Vec<(String, CompactLattice)> = read_all(&format!("ark:{out}"));
    let full: Vec<(String, Lattice)> = read_all(&format!("ark:{raw}"));
    assert_eq!(compact.len(), 3);
    for ((k, c), (_, l)) in compact.iter().zip(&full) {
        assert!(c.is_top_sorted(), "{k}");
        let tids: usize = c
            .states
            .iter()
            .flat_map(|s| {
                s.arcs
                    .iter()
                    .map(|a| &a.weight)
                    .chain(std::iter::once(&s.final_weight))
            })
            .map(|w| w.string.len())
            .sum();
        assert_eq!(
            tids,
            l.states
                .iter()
                .flat_map(|s| &s.arcs)
                .filter(|a| a.ilabel != 0)
                .count(),
            "{k}"
        );
    }
}

#[test]
fn rescoring_raw_lattices_reproduces_the_decoders_costs() {
    // gmm-rescore-lattice reads a non-compact archive as compact lattices
    // (converted). The raw lattices of s01-001..003 were decoded with
    // final.mdl from these features, so rescoring them with final.mdl gives
    // back the decoder's own acoustic costs. Tolerance 1e-4 relative (0.01
    // absolute floor): the decoder stored −loglike × 0.083333 per frame and
    // divided by 0.083333 again, two float32 roundings per frame of values
    // near 100, against our unscaled float32 sums.
    let w = Work::new();
    let raw = w.fixture("lat_raw_first3.ark");
    let (out, conv) = (w.path("r.ark"), w.path("c.ark"));
    let (code, err) = run(&[
        "rescore-lattice",
        "--use-gpu=no",
        FINAL_MDL,
        &format!("ark:{raw}"),
        "ark:testdata/kaldi/feats/feats_cmvn_deltas.first3.ark",
        &format!("ark:{out}"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Done 3 lattices with errors on 0"), "{err}");
    let (code, err) = run(&[
        "copy",
        "--write-compact=true",
        &format!("ark:{raw}"),
        &format!("ark:{conv}"),
    ]);
    assert_eq!(code, 0, "{err}");
    let ours: Vec<(String, CompactLattice)> = read_all(&format!("ark:{out}"));
    let decoder: Vec<(String, CompactLattice)> = read_all(&format!("ark:{conv}"));
    assert_eq!(ours.len(), 3);
    for ((k, a), (_, b)) in ours.iter().zip(&decoder) {
        assert_eq!(a.num_states(), b.num_states(), "{k}");
        for (sa, sb) in a.states.iter().zip(&b.states) {
            let wa = sa
                .arcs
                .iter()
                .map(|x| &x.weight)
                .chain(std::iter::once(&sa.final_weight));
            let wb = sb
                .arcs
                .iter()
                .map(|x| &x.weight)
                .chain(std::iter::once(&sb.final_weight));
            for (x, y) in wa.zip(wb) {
                assert_eq!(x.string, y.string, "{k}");
                assert_eq!(x.weight.graph.to_bits(), y.weight.graph.to_bits(), "{k}");
                let (p, q) = (x.weight.acoustic as f64, y.weight.acoustic as f64);
                if q.is_finite() {
                    assert!(
                        (p - q).abs() <= (1e-4 * q.abs()).max(1e-2),
                        "{k}: {p} vs decoder's {q}"
                    );
                }
            }
        }
    }
}

/// The first `n` lattices and features, for the error-path tests.
fn first(w: &Work, n: usize) -> (Vec<(String, CompactLattice)>, Vec<(String, Matrix<f32>)>) {
    let lats: Vec<(String, CompactLattice)> = read_all(&format!("ark:{}", w.fixture("lat.ark")));
    let feats: Vec<(String, Matrix<f32>)> =
        read_all(&format!("ark:{}", w.fixture("feats_cmvn_deltas.ark")));
    (
        lats.into_iter().take(n).collect(),
        feats.into_iter().take(n).collect(),
    )
}

fn rescore_err(w: &Work, lats: &str, feats: &str) -> (i32, String) {
    run(&[
        "rescore-lattice",
        "--use-gpu=no",
        FINAL_MDL,
        &format!("ark:{lats}"),
        &format!("ark:{feats}"),
        &format!("ark:{}", w.path("out.ark")),
    ])
}

#[test]
fn per_utterance_errors_are_warned_and_counted() {
    let w = Work::new();
    let (mut lats, mut feats) = first(&w, 4);
    // s01-001: a transition-id the model does not have.
    let arc = &mut lats[0].1.states[0].arcs[0];
    arc.weight.string[3] = 99_999;
    // s01-002: features shorter than the lattice.
    let m = &feats[1].1;
    let short = Matrix::from_vec(
        m.rows() - 5,
        m.cols(),
        m.data()[..(m.rows() - 5) * m.cols()].to_vec(),
    )
    .unwrap();
    let short_rows = short.rows();
    feats[1].1 = short;
    // s01-003: no features at all.
    feats.remove(2);
    let (l, f) = (w.path("l.ark"), w.path("f.ark"));
    write_all(&format!("ark:{l}"), &lats);
    write_all(&format!("ark:{f}"), &feats);
    let (code, err) = rescore_err(&w, &l, &f);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("transition-id 99999 (state 0) is not in the model")
            && err.contains("[utterance s01-001]"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "Features are too short for lattice: utt-len is {}, {} is last frame [utterance s01-002]",
            m_rows(&lats[1].1),
            short_rows - 1
        )),
        "{err}"
    );
    assert!(
        err.contains("No feature found for utterance s01-003. Skipping"),
        "{err}"
    );
    let rows4 = feats[2].1.rows();
    assert!(
        err.contains(&format!(
            "Done 1 lattices with errors on 3, #frames is {rows4}"
        )),
        "{err}"
    );
    let out: Vec<(String, CompactLattice)> = read_all(&format!("ark:{}", w.path("out.ark")));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, "s01-004");
}

/// Frames of a compact lattice (transition-ids along any path).
fn m_rows(c: &CompactLattice) -> usize {
    let mut t = vec![0usize; c.num_states()];
    let mut len = 0;
    for (s, st) in c.states.iter().enumerate() {
        for a in &st.arcs {
            t[a.nextstate as usize] = t[s] + a.weight.string.len();
        }
        if st.final_weight.weight.graph.is_finite() {
            len = t[s] + st.final_weight.string.len();
        }
    }
    len
}

#[test]
fn no_lattice_rescored_exits_1() {
    let w = Work::new();
    let (lats, feats) = first(&w, 2);
    let (l, f) = (w.path("l.ark"), w.path("f.ark"));
    write_all(&format!("ark:{l}"), &lats);
    write_all(&format!("ark:{f}"), &feats[1..]);
    let mut lats1 = lats;
    lats1.truncate(1);
    write_all(&format!("ark:{l}"), &lats1);
    let (code, err) = rescore_err(&w, &l, &f);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Done 0 lattices with errors on 1, #frames is 0"),
        "{err}"
    );
}

#[test]
fn whole_file_problems_stop_the_run() {
    let w = Work::new();
    let (lats, feats) = first(&w, 2);
    let (l, f) = (w.path("l.ark"), w.path("f.ark"));
    write_all(&format!("ark:{f}"), &feats);
    // A truncated lattice archive: error names the file, key and byte offset; no output left.
    write_all(&format!("ark:{l}"), &lats);
    let bytes = std::fs::read(&l).unwrap();
    std::fs::write(&l, &bytes[..bytes.len() - 30]).unwrap();
    let (code, err) = rescore_err(&w, &l, &f);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("l.ark") && err.contains("'s01-002'") && err.contains("at byte"),
        "{err}"
    );
    assert!(
        !std::path::Path::new(&w.path("out.ark")).exists(),
        "a failed run left its output"
    );
    // Features of the wrong dimension.
    write_all(&format!("ark:{l}"), &lats);
    let narrow: Vec<(String, Matrix<f32>)> = feats
        .iter()
        .map(|(k, m)| {
            let rows: Vec<f32> = (0..m.rows())
                .flat_map(|r| m.row(r)[..13].to_vec())
                .collect();
            (k.clone(), Matrix::from_vec(m.rows(), 13, rows).unwrap())
        })
        .collect();
    write_all(&format!("ark:{f}"), &narrow);
    std::fs::write(w.path("out.ark"), b"the user's old output").unwrap();
    let (code, err) = rescore_err(&w, &l, &f);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("utterance s01-001: feature dimension 13 does not match the model's 39"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(w.path("out.ark")).unwrap(),
        b"the user's old output",
        "a failed run replaced the old output"
    );
    // A model file that is not a model.
    let (code, err) = run(&[
        "rescore-lattice",
        "--use-gpu=no",
        &l,
        &format!("ark:{l}"),
        &format!("ark:{f}"),
        &format!("ark:{}", w.path("out.ark")),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("l.ark"), "{err}");
}

#[test]
fn include_exclude_and_ignore_missing() {
    let w = Work::new();
    let lat = w.fixture("lat.ark");
    let all: Vec<(String, CompactLattice)> = read_all(&format!("ark:{lat}"));
    let list = w.path("keys.txt");
    std::fs::write(&list, "s01-002 extra fields\ns02-001\n").unwrap();
    let out = w.path("sub.ark");
    let link = w.dir.path().join("lattice-copy");
    std::os::unix::fs::symlink(common::amtool_bin(), &link).unwrap();
    let lc = |args: &[String]| run_cmd(Command::new(&link).args(args));
    let (code, err) = lc(&[
        format!("--include={list}"),
        format!("ark:{lat}"),
        format!("ark:{out}"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(" Wrote 2 out of 40 utterances."), "{err}");
    let sub: Vec<(String, CompactLattice)> = read_all(&format!("ark:{out}"));
    let want: Vec<&(String, CompactLattice)> = all
        .iter()
        .filter(|(k, _)| k == "s01-002" || k == "s02-001")
        .collect();
    assert_eq!(sub.iter().collect::<Vec<_>>(), want);
    let (code, err) = lc(&[
        format!("--exclude={list}"),
        format!("ark:{lat}"),
        format!("ark:{out}"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(" Wrote 38 out of 40 utterances."), "{err}");
    // Sorted input: reading stops after the last listed key.
    let (code, err) = lc(&[
        format!("--include={list}"),
        format!("ark,s:{lat}"),
        format!("ark:{out}"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("The utterance s02-002 is larger than the last key in the include list. Not reading further.")
            && err.contains("Wrote 2 utterances"),
        "{err}"
    );
    // Nothing copied: exit 1, unless --ignore-missing.
    std::fs::write(&list, "nobody\n").unwrap();
    let (code, err) = lc(&[
        format!("--include={list}"),
        format!("ark:{lat}"),
        format!("ark:{out}"),
    ]);
    assert_eq!(code, 1, "{err}");
    let (code, err) = lc(&[
        "--ignore-missing".into(),
        format!("--include={list}"),
        format!("ark:{lat}"),
        format!("ark:{out}"),
    ]);
    assert_eq!(code, 0, "{err}");
    // Bad use.
    std::fs::write(&list, "a\n\nb\n").unwrap();
    let (code, err) = lc(&[
        format!("--include={list}"),
        format!("ark:{lat}"),
        format!("ark:{out}"),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Unable to parse line \"\"") && err.contains("keys.txt"),
        "{err}"
    );
    let (code, err) = lc(&[
        format!("--include={list}"),
        format!("--exclude={list}"),
        format!("ark:{lat}"),
        format!("ark:{out}"),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("should not have both --exclude and --include option!"),
        "{err}"
    );
}
