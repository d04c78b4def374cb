//! HTK MMFs against the files HTK 3.4.1 wrote (../shared/fixtures/htk). Text
//! output is compared byte for byte with HTK's own text; binary output with
//! HTK's `-B` files.

use std::path::Path;

use amtool_formats::htk::mmf::HmmSet;

const SHARED: &str = "../../shared/fixtures/htk";

fn shared(p: &str) -> Option<std::path::PathBuf> {
    let p = Path::new(SHARED).join(p);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: {} not present", p.display());
        None
    }
}

fn first_diff(a: &[u8], b: &[u8]) -> String {
    let i = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let line = 1 + a[..i].iter().filter(|&&c| c == b'\n').count();
    let ctx = |s: &[u8]| {
        String::from_utf8_lossy(&s[i.saturating_sub(60)..(i + 60).min(s.len())]).into_owned()
    };
    format!(
        "first difference at byte {i} (line {line}), lengths {} vs {}\nours: {}\nhtk:  {}",
        a.len(),
        b.len(),
        ctx(a),
        ctx(b)
    )
}

#[test]
fn single_file_text_models_rewrite_identically() {
    for f in [
        "models/mono1.mmf",
        "models/mixvar.mmf",
        "models/fullcov.mmf",
        "models/map_spk03.mmf",
        "acc/mono1/merged/mono1.mmf",
        "acc/mixvar/single/mixvar.mmf",
        "acc/fullcov/merged/fullcov.mmf",
        "hmm/hmm0/proto",
    ] {
        let Some(p) = shared(f) else { return };
        let bytes = std::fs::read(&p).unwrap();
        let set = HmmSet::load(&[&p]).unwrap_or_else(|e| panic!("{e}"));
        let ours = set.to_text(None);
        assert!(ours == bytes, "{f}: {}", first_diff(&ours, &bytes));
    }
}

#[test]
fn two_file_layouts_rewrite_identically() {
    for d in [
        "hmm/hmm5",
        "hmm/hmm9",
        "hmm/hmm10",
        "hmm/hmm16",
        "hmm/hmm18",
        "hmm/fc0",
    ] {
        let (Some(m), Some(h)) = (
            shared(&format!("{d}/macros")),
            shared(&format!("{d}/hmmdefs")),
        ) else {
            return;
        };
        let set = HmmSet::load(&[&m, &h]).unwrap_or_else(|e| panic!("{e}"));
        for (i, p) in [m, h].iter().enumerate() {
            let bytes = std::fs::read(p).unwrap();
            let ours = set.to_text(Some(i));
            assert!(
                ours == bytes,
                "{}: {}",
                p.display(),
                first_diff(&ours, &bytes)
            );
        }
    }
}

#[test]
fn binary_models_read_and_rewrite_identically() {
    for f in ["mono1", "mixvar", "fullcov"] {
        let (Some(b), Some(t)) = (
            shared(&format!("models/{f}.bin.mmf")),
            shared(&format!("models/{f}.mmf")),
        ) else {
            return;
        };
        let bin = std::fs::read(&b).unwrap();
        let set = HmmSet::load(&[&b]).unwrap_or_else(|e| panic!("{e}"));
        let ours = set.to_binary(None);
        assert!(ours == bin, "{f} binary: {}", first_diff(&ours, &bin));
        let text = std::fs::read(&t).unwrap();
        let ours = set.to_text(None);
        assert!(
            ours == text,
            "{f} binary->text: {}",
            first_diff(&ours, &text)
        );
    }
}

/// HHEd -w read a two-file model and wrote one MMF (text and -B binary): doing
/// the same (plus HTK's log/exp round trip of the transition matrices and its
/// `FixAllGConsts`) must
/// give HTK's bytes.
#[test]
fn hhed_conversions_reproduced_byte_for_byte() {
    for (dir, model) in [("hmm/hmm9", "mono1"), ("hmm/hmm18", "mixvar")] {
        let (Some(m), Some(h)) = (
            shared(&format!("{dir}/macros")),
            shared(&format!("{dir}/hmmdefs")),
        ) else {
            return;
        };
        let mut set = HmmSet::load(&[&m, &h]).unwrap();
        set.normalise_transitions_like_htk();
        set.recompute_gconsts();
        let text = std::fs::read(Path::new(SHARED).join(format!("models/{model}.mmf"))).unwrap();
        let ours = set.to_text(None);
        assert!(ours == text, "{model} text: {}", first_diff(&ours, &text));
        let bin = std::fs::read(Path::new(SHARED).join(format!("models/{model}.bin.mmf"))).unwrap();
        let ours = set.to_binary(None);
        assert!(ours == bin, "{model} binary: {}", first_diff(&ours, &bin));
    }
    let Some(t) = shared("models/map_spk03.mmf") else {
        return;
    };
    let mut set = HmmSet::load(&[&t]).unwrap();
    set.normalise_transitions_like_htk();
    set.recompute_gconsts();
    let bin = std::fs::read(Path::new(SHARED).join("models/map_spk03.bin.mmf")).unwrap();
    let ours = set.to_binary(None);
    assert!(ours == bin, "map_spk03 binary: {}", first_diff(&ours, &bin));
}

/// Every MMF in the fixture set loads (two-file sets together, the HCompV
/// variance floors after the prototype that supplies their `~o`).
#[test]
fn every_fixture_mmf_loads() {
    let Some(root) = shared("hmm") else { return };
    let mut sets = 0;
    for d in std::fs::read_dir(&root).unwrap() {
        let d = d.unwrap().path();
        let files: Vec<_> = if d.ends_with("hmm0") {
            vec![d.join("proto"), d.join("vFloors")]
        } else {
            vec![d.join("macros"), d.join("hmmdefs")]
        };
        HmmSet::load(&files).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        sets += 1;
    }
    let hmm0 = root.join("hmm0");
    let set = HmmSet::load(&[hmm0.join("macros"), hmm0.join("hmmdefs")]).unwrap();
    assert_eq!(set.hmm_names().count(), 20);
    for f in [
        "models",
        "acc/mono1/merged",
        "acc/mono1/single",
        "acc/mixvar/merged",
        "acc/mixvar/single",
        "acc/mixvar/single_B",
        "acc/fullcov/merged",
        "acc/fullcov/single",
        "acc/mono1_textacc/merged",
    ] {
        let Some(dir) = shared(f) else { continue };
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "mmf") {
                let set = HmmSet::load(&[&p]).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert_eq!(set.hmm_names().count(), 21, "{}", p.display());
                let bytes = std::fs::read(&p).unwrap();
                let ours = if bytes.windows(2).any(|w| w[0] == b':' && w[1] < 32) {
                    set.to_binary(None)
                } else {
                    set.to_text(None)
                };
                assert!(
                    ours == bytes,
                    "{}: {}",
                    p.display(),
                    first_diff(&ours, &bytes)
                );
                sets += 1;
            }
        }
    }
    assert!(sets >= 20, "{sets}");
}

/// Other people's MMFs (../shared/fixtures/wild): each loads, or is refused as
/// unsupported with file and position; loaded ones survive text and binary
/// round trips.
#[test]
fn wild_mmfs_load_or_are_refused_clearly() {
    let dir = Path::new("../../shared/fixtures/wild/htk_mmf");
    if !dir.is_dir() {
        eprintln!("skipped: {} not present", dir.display());
        return;
    }
    let w = |n: &str| dir.join(n);
    let sets: Vec<Vec<std::path::PathBuf>> = vec![
        vec![
            w("ericzhong_learn-htk__hmm15_macros"),
            w("ericzhong_learn-htk__hmm15_hmmdefs"),
        ],
        vec![
            w("ericzhong_learn-htk__hmm13_macros.bin"),
            w("ericzhong_learn-htk__hmm13_hmmdefs.bin"),
        ],
        vec![w("ericzhong_learn-htk__hmm0_proto")],
        vec![w("ericzhong_learn-htk__proto")],
        vec![w("KNajman_PZR__hmm6_hmmdefs")],
        vec![w("WenboGong_MLSALT2__hmm84_MMF")],
        vec![w("lukasmerk_ase-praktikum__hmm12_hmmdefs")],
        vec![w("lukasmerk_ase-praktikum__hmm10_hmmdefs.bin")],
        vec![
            w("sajdoann_speech_gen__hmm0_macros"),
            w("sajdoann_speech_gen__hmm0_hmmdefs"),
        ],
        vec![w("sinb_HTK_C_MATLAB_tools__proto_tiantian_8_5_lpcce")],
        vec![w("sinb_HTK_C_MATLAB_tools__tiantianCUT_12_5_lpcce_norm")],
    ];
    for files in sets {
        match HmmSet::load(&files) {
            Ok(set) => {
                assert!(set.hmm_names().count() > 0, "{files:?}");
                let text = set.to_text(None);
                let back = HmmSet::parse(&text, "text")
                    .unwrap_or_else(|e| panic!("{files:?} reparse: {e}"));
                assert_eq!(back.to_text(None), text, "{files:?}");
                let bin = set.to_binary(None);
                let back = HmmSet::parse(&bin, "bin")
                    .unwrap_or_else(|e| panic!("{files:?} binary reparse: {e}"));
                assert_eq!(back.to_text(None), text, "{files:?} via binary");
            }
            Err(e @ amtool_formats::Error::Unsupported { .. }) => eprintln!("refused (ok): {e}"),
            Err(e) => panic!("{files:?}: {e}"),
        }
    }
}

mod testdata {
    //! Tests on the copies in ../testdata/htk/mmf (HHEd -B output and the
    //! HCompV prototype), so they run without ../shared.
    use super::*;
    use amtool_formats::htk::mmf::Covariance;

    const TD: &str = "../testdata/htk/mmf";

    #[test]
    fn binary_models_round_trip_through_text() {
        for f in ["mono1.bin.mmf", "mixvar.bin.mmf"] {
            let bin = std::fs::read(format!("{TD}/{f}")).unwrap();
            let set = HmmSet::parse(&bin, f).unwrap();
            assert_eq!(set.to_binary(None), bin, "{f}");
            // Text keeps 7 significant digits, so it is text -> binary -> text
            // that must be the identity.
            let text = set.to_text(None);
            let back = HmmSet::parse(&text, "text").unwrap();
            let back2 = HmmSet::parse(&back.to_binary(None), "bin").unwrap();
            assert_eq!(back2.to_text(None), text, "{f}: text -> binary -> text");
        }
    }

    #[test]
    fn prototype_gconst_matches_hcompv() {
        let bytes = std::fs::read(format!("{TD}/hmm0.proto")).unwrap();
        let mut set = HmmSet::parse(&bytes, "proto").unwrap();
        assert_eq!(set.to_text(None), bytes);
        // HCompV wrote <GCONST>; computing it the way HModel does gives the same float.
        let written: Vec<f32> = set.pdfs.iter().map(|p| p.gconst.unwrap()).collect();
        set.recompute_gconsts();
        let computed: Vec<f32> = set.pdfs.iter().map(|p| p.gconst.unwrap()).collect();
        let fmt = |v: &[f32]| {
            v.iter()
                .map(|&x| amtool_formats::htk::cfmt::fmt_e(x as f64))
                .collect::<Vec<_>>()
        };
        assert_eq!(fmt(&computed), fmt(&written));
    }

    #[test]
    fn sharing_is_preserved() {
        let bin = std::fs::read(format!("{TD}/mixvar.bin.mmf")).unwrap();
        let set = HmmSet::parse(&bin, "mixvar.bin.mmf").unwrap();
        let sil = set.hmm("sil").unwrap();
        let sp = set.hmm("sp").unwrap();
        // TI silst {sil.state[3],sp.state[2]}: one State object.
        assert_eq!(sil.states[1], sp.states[0]);
        assert_eq!(set.find_macro(b's', "silst").unwrap().target, sp.states[0]);
        // TI trP_vowel: nine vowel HMMs, one transition matrix.
        let t = set.find_macro(b't', "trP_vowel").unwrap().target;
        let vowels = ["ah", "ao", "ay", "eh", "ey", "ih", "iy", "ow", "uw"];
        assert!(vowels.iter().all(|v| set.hmm(v).unwrap().transp == t));
        // TI var_sil_2 {sil.state[2].mix[1-8].cov}: eight Gaussians, one variance.
        let v = set.find_macro(b'v', "var_sil_2").unwrap().target;
        let st = &set.states[sil.states[0]];
        assert_eq!(st.streams[0].mixtures.len(), 8);
        assert!(st.streams[0]
            .mixtures
            .iter()
            .all(|m| set.pdfs[m.pdf].cov == Covariance::Diag(v)));
        // ~m mix_nw_2 shared by n and w; ~u mean_kt_4 by k and t.
        let m = set.find_macro(b'm', "mix_nw_2").unwrap().target;
        for h in ["n", "w"] {
            let s = &set.states[set.hmm(h).unwrap().states[0]];
            assert!(s.streams[0].mixtures.iter().any(|x| x.pdf == m), "{h}");
        }
        // (k's share of mean_kt_4 sits in a component HERest pruned to weight
        // 0, which HTK no longer writes.)
        let u = set.find_macro(b'u', "mean_kt_4").unwrap().target;
        for h in ["t"] {
            let s = &set.states[set.hmm(h).unwrap().states[2]];
            assert!(
                s.streams[0]
                    .mixtures
                    .iter()
                    .any(|x| set.pdfs[x.pdf].mean == u),
                "{h}"
            );
        }
    }
}

mod errors {
    //! Bad input: each message names the file, the object and the line/byte.
    use super::*;

    const HEAD: &str = "~o <STREAMINFO> 1 2 <VECSIZE> 2 <NULLD> <MFCC> <DIAGC>\n";
    const BODY: &str = "<BEGINHMM>\n<NUMSTATES> 3\n<STATE> 2\n<MEAN> 2\n 0.0 1.0\n<VARIANCE> 2\n 1.0 2.0\n<TRANSP> 3\n 0 1 0\n 0 0.5 0.5\n 0 0 0\n<ENDHMM>\n";

    fn err(text: &str) -> String {
        match HmmSet::parse(text.as_bytes(), "bad.mmf") {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn good_file_parses() {
        let set = HmmSet::parse(format!("{HEAD}~h \"a\"\n{BODY}").as_bytes(), "ok.mmf").unwrap();
        assert_eq!(set.hmm_names().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn unknown_macro_reference() {
        let e = err(&format!(
            "{HEAD}~h \"a\"\n{}",
            BODY.replace("<STATE> 2\n", "<STATE> 2\n~s \"nosuch\"\n")
        ));
        assert!(
            e.contains("bad.mmf")
                && e.contains("undefined macro ~s \"nosuch\"")
                && e.contains("line 6"),
            "{e}"
        );
        assert!(e.contains("~h \"a\" state 2"), "{e}");
    }

    #[test]
    fn unterminated_hmm() {
        let e = err(&format!(
            "{HEAD}~h \"a\"\n{}",
            BODY.replace("<ENDHMM>\n", "")
        ));
        assert!(
            e.contains("<ENDHMM> expected, found end of file") && e.contains("bad.mmf"),
            "{e}"
        );
    }

    #[test]
    fn size_disagrees_with_vecsize() {
        let e = err(&format!(
            "{HEAD}~h \"a\"\n{}",
            BODY.replace("<MEAN> 2\n 0.0 1.0", "<MEAN> 3\n 0.0 1.0 2.0")
        ));
        assert!(
            e.contains("mean size 3") && e.contains("stream width 2") && e.contains("line 6"),
            "{e}"
        );
    }

    #[test]
    fn negative_variance() {
        let e = err(&format!(
            "{HEAD}~h \"a\"\n{}",
            BODY.replace("1.0 2.0", "1.0 -2.0")
        ));
        assert!(
            e.contains("negative or NaN variance -2") && e.contains("line 8"),
            "{e}"
        );
    }

    #[test]
    fn tied_mixtures_are_unsupported() {
        let e = err(&format!(
            "{HEAD}~h \"a\"\n{}",
            BODY.replace(
                "<MEAN> 2\n 0.0 1.0\n<VARIANCE> 2\n 1.0 2.0\n",
                "<TMIX> mix 0.5*2\n"
            )
        ));
        assert!(
            e.contains("unsupported: tied-mixture <TMIX>") && e.contains("line 6"),
            "{e}"
        );
    }

    #[test]
    fn truncated_binary() {
        let set = HmmSet::parse(format!("{HEAD}~h \"a\"\n{BODY}").as_bytes(), "ok.mmf").unwrap();
        let bin = set.to_binary(None);
        let e = match HmmSet::parse(&bin[..bin.len() - 30], "cut.mmf") {
            Ok(_) => panic!("truncated binary accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("cut.mmf") && e.contains("truncated") && e.contains("at byte"),
            "{e}"
        );
    }

    #[test]
    fn unknown_macro_type_and_keyword() {
        // `~q` is no HTK macro type.
        let e = err(&format!("{HEAD}~q \"a\"\n{BODY}"));
        assert!(
            e.contains("bad.mmf") && e.contains("line 2") && e.contains("~q"),
            "{e}"
        );
        // Nor is <FOO> a keyword.
        let e = err(&format!(
            "{HEAD}~h \"a\"\n{}",
            BODY.replace("<MEAN> 2", "<FOO> 2")
        ));
        assert!(
            e.contains("bad.mmf") && e.contains("unknown symbol <FOO>") && e.contains("line 6"),
            "{e}"
        );
    }

    #[test]
    fn duplicate_and_bad_sums() {
        let e = err(&format!("{HEAD}~h \"a\"\n{BODY}~h \"a\"\n{BODY}"));
        assert!(e.contains("already defined"), "{e}");
        let e = err(&format!(
            "{HEAD}~h \"a\"\n{}",
            BODY.replace(" 0 0.5 0.5", " 0 0.5 0.6")
        ));
        assert!(e.contains("row 2 sums to"), "{e}");
    }
}

mod roundtrip {
    //! Random HMM sets (variable mixtures per state, tied states, tied
    //! variances and transition matrices, full covariance, several streams):
    //! text -> parse gives the same set, text -> binary -> text is the identity.
    use amtool_formats::htk::mmf::*;
    use amtool_formats::htk::parmkind::ParmKind;
    use proptest::prelude::*;

    /// Values k/16 print exactly in `%e`, so parsing text gives the same floats.
    fn v16(n: usize, lo: i32, hi: i32) -> impl Strategy<Value = Vec<f32>> {
        prop::collection::vec(lo..hi, n)
            .prop_map(|v| v.into_iter().map(|k| k as f32 / 16.0).collect())
    }

    /// Mixture weights that print exactly and sum to 1.
    const WEIGHTS: [&[f32]; 4] = [&[], &[1.0], &[0.25, 0.75], &[0.25, 0.25, 0.5]];

    #[derive(Debug, Clone)]
    struct Spec {
        widths: Vec<usize>,
        full: bool,
        hmms: Vec<(usize, Vec<Option<usize>>)>, // (num_states, per state: Some(shared idx) or inline)
        shared_states: usize,
        nmix: Vec<Vec<usize>>, // per created state, per stream
        seed_vals: Vec<f32>,
    }

    fn spec() -> impl Strategy<Value = Spec> {
        (
            prop::collection::vec(1usize..4, 1..3),
            any::<bool>(),
            1usize..3,
            prop::collection::vec(
                (
                    3usize..6,
                    prop::collection::vec(prop::option::of(0usize..2), 4),
                ),
                1..4,
            ),
            prop::collection::vec(prop::collection::vec(1usize..4, 2), 16),
            v16(4096, -4000, 4000),
        )
            .prop_map(
                |(widths, full, shared_states, hmms, nmix, seed_vals)| Spec {
                    full: full && widths.len() == 1,
                    widths,
                    hmms: hmms
                        .into_iter()
                        .map(|(n, s)| (n, s.into_iter().take(n - 2).collect()))
                        .collect(),
                    shared_states,
                    nmix,
                    seed_vals,
                },
            )
    }

    struct Vals(Vec<f32>, usize);
    impl Vals {
        fn take(&mut self, n: usize) -> Vec<f32> {
            (0..n)
                .map(|_| {
                    self.1 += 1;
                    self.0[self.1 % self.0.len()]
                })
                .collect()
        }
        fn pos(&mut self, n: usize) -> Vec<f32> {
            self.take(n).into_iter().map(|x| x.abs() + 0.0625).collect()
        }
    }

    fn build(sp: &Spec) -> HmmSet {
        let mut set = HmmSet::default();
        set.files.push("gen.mmf".into());
        let vs: usize = sp.widths.iter().sum();
        set.options = Options {
            stream_widths: sp.widths.clone(),
            vec_size: vs,
            parm_kind: Some("MFCC_0_D".parse::<ParmKind>().unwrap()),
            cov_kind: Some(if sp.full {
                CovKind::Full
            } else {
                CovKind::Diag
            }),
            ..Default::default()
        };
        let mut vals = Vals(sp.seed_vals.clone(), 0);
        // a shared variance macro for stream-1 Gaussians of inline states
        set.variances.push(vals.pos(sp.widths[0]));
        set.add_macro(b'v', "var_shared".into(), 0, 0).unwrap();
        let mut make_state = |set: &mut HmmSet, k: usize, share_var: bool| -> usize {
            let mut streams = Vec::new();
            for (si, &wd) in sp.widths.iter().enumerate() {
                let m = sp.nmix[k % sp.nmix.len()][si % 2];
                let ws = WEIGHTS[m];
                let mut mixtures = Vec::new();
                for (mi, wt) in ws.iter().enumerate() {
                    set.means.push(vals.take(wd));
                    let mean = set.means.len() - 1;
                    let cov = if sp.full {
                        // diagonally dominant => positive definite
                        let mut upper = Vec::new();
                        for i in 0..wd {
                            for j in i..wd {
                                upper.push(if i == j { wd as f32 + 1.0 } else { 0.25 });
                            }
                        }
                        set.covars.push(TriMat { n: wd, upper });
                        Covariance::InvCovar(set.covars.len() - 1)
                    } else if share_var && si == 0 && mi == 0 {
                        Covariance::Diag(0)
                    } else {
                        set.variances.push(vals.pos(wd));
                        Covariance::Diag(set.variances.len() - 1)
                    };
                    set.pdfs.push(MixPdf {
                        mean,
                        cov,
                        gconst: None,
                    });
                    mixtures.push(Mixture {
                        index: mi + 1,
                        weight: *wt,
                        pdf: set.pdfs.len() - 1,
                    });
                }
                streams.push(Stream {
                    num_mixes: m,
                    mixtures,
                });
            }
            let sweights = if sp.widths.len() > 1 {
                set.sweights.push(vec![1.0; sp.widths.len()]);
                Some(set.sweights.len() - 1)
            } else {
                None
            };
            set.states.push(State {
                streams,
                sweights,
                dur: None,
            });
            set.states.len() - 1
        };
        let mut k = 0;
        let mut shared = Vec::new();
        for i in 0..sp.shared_states {
            let s = make_state(&mut set, k, false);
            k += 1;
            set.add_macro(b's', format!("st{i}"), s, 0).unwrap();
            shared.push(s);
        }
        // one tied transition matrix per state count
        let mut tied: std::collections::HashMap<usize, usize> = Default::default();
        for (h, (n, sts)) in sp.hmms.iter().enumerate() {
            let states: Vec<usize> = sts
                .iter()
                .map(|o| match o {
                    Some(i) => shared[i % shared.len()],
                    None => {
                        k += 1;
                        make_state(&mut set, k, true)
                    }
                })
                .collect();
            let transp = *tied.entry(*n).or_insert_with(|| {
                let n = *n;
                let mut probs = vec![0f32; n * n];
                probs[1] = 1.0;
                for i in 1..n - 1 {
                    probs[i * n + i] = 0.625;
                    probs[i * n + i + 1] = 0.375;
                }
                set.transps.push(TransP { n, probs });
                let t = set.transps.len() - 1;
                set.add_macro(b't', format!("trans{n}"), t, 0).unwrap();
                t
            });
            set.hmms.push(Hmm {
                num_states: *n,
                states,
                transp,
                dur: None,
            });
            set.add_macro(b'h', format!("hmm{h}"), h, 0).unwrap();
        }
        set.finish().unwrap();
        set
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn text_and_binary_round_trips(sp in spec()) {
            let set = build(&sp);
            let text = set.to_text(None);
            let back = HmmSet::parse(&text, "gen.mmf").unwrap();
            prop_assert_eq!(back.to_text(None), text.clone());
            // same objects, same sharing (arena layout may differ, so compare
            // what each HMM resolves to)
            for name in set.hmm_names() {
                let (a, b) = (set.hmm(name).unwrap(), back.hmm(name).unwrap());
                prop_assert_eq!(a.num_states, b.num_states);
                for (sa, sb) in a.states.iter().zip(&b.states) {
                    let (x, y) = (&set.states[*sa], &back.states[*sb]);
                    for (xs, ys) in x.streams.iter().zip(&y.streams) {
                        for (xm, ym) in xs.mixtures.iter().zip(&ys.mixtures) {
                            prop_assert_eq!(xm.weight, ym.weight);
                            prop_assert_eq!(&set.means[set.pdfs[xm.pdf].mean], &back.means[back.pdfs[ym.pdf].mean]);
                        }
                    }
                }
            }
            let bin = back.to_binary(None);
            let via_bin = HmmSet::parse(&bin, "gen.bin").unwrap();
            prop_assert_eq!(via_bin.to_text(None), text);
            prop_assert_eq!(via_bin.to_binary(None), bin);
        }
    }
}

/// HHEd runs `FixAllGConsts` before saving, so the `<GCONST>`s in its binary
/// output are exactly what HModel computes: ours must be the same floats, bit
/// for bit (diagonal: `FixDiagGConst`; full: `FixFullGConst(-CovDet(inv))`).
#[test]
fn computed_gconsts_equal_hhed_bit_for_bit() {
    for f in ["mono1.bin.mmf", "mixvar.bin.mmf", "fullcov.bin.mmf"] {
        let bin = std::fs::read(format!("../testdata/htk/mmf/{f}")).unwrap();
        let mut set = HmmSet::parse(&bin, f).unwrap();
        let written: Vec<u32> = set
            .pdfs
            .iter()
            .map(|p| p.gconst.unwrap().to_bits())
            .collect();
        set.recompute_gconsts();
        let ours: Vec<u32> = set
            .pdfs
            .iter()
            .map(|p| p.gconst.unwrap().to_bits())
            .collect();
        assert_eq!(ours, written, "{f}");
        assert_eq!(set.to_binary(None), bin, "{f}");
    }
}

/// `-M dir`: each MMF goes back under its own name, byte-identical.
#[test]
fn save_to_dir_writes_each_file_back() {
    let (Some(m), Some(h)) = (shared("hmm/hmm18/macros"), shared("hmm/hmm18/hmmdefs")) else {
        return;
    };
    let set = HmmSet::load(&[&m, &h]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let written = set.save_to_dir(dir.path(), false).unwrap();
    assert_eq!(written.len(), 2);
    assert_eq!(
        std::fs::read(dir.path().join("macros")).unwrap(),
        std::fs::read(&m).unwrap()
    );
    assert_eq!(
        std::fs::read(dir.path().join("hmmdefs")).unwrap(),
        std::fs::read(&h).unwrap()
    );
}
