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
