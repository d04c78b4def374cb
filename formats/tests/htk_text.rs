//! HTK text formats: MLFs, script files and HMM lists, against the files HTK
//! 3.4.1 wrote for the fixtures (HVite alignments and recognition output, HLEd
//! phone MLFs): each parses and is written back byte for byte.

use std::path::Path;

use amtool_formats::htk::mlf::{EntryBody, Mlf};
use amtool_formats::htk::mmf::HmmList;
use amtool_formats::htk::script::ScriptFile;

const TD: &str = "../testdata/htk/lists";
const SHARED: &str = "../../shared/fixtures/htk";

#[test]
fn testdata_mlfs_and_scripts_rewrite_identically() {
    for f in [
        "mixvar.state_align.first3.mlf",
        "mixvar.word_align.first3.mlf",
    ] {
        let text = std::fs::read_to_string(format!("{TD}/{f}")).unwrap();
        let m = Mlf::parse(&text).unwrap();
        assert_eq!(m.entries.len(), 3, "{f}");
        assert_eq!(m.to_text(), text, "{f}");
    }
    let m = Mlf::load(format!("{TD}/mixvar.state_align.first3.mlf")).unwrap();
    let EntryBody::Labels(alts) = &m.find("feat/mfcc_0_d_a/spk01_u001.lab").unwrap().body else {
        panic!()
    };
    let first = &alts[0][0];
    assert_eq!((first.start, first.end), (Some(0), Some(1_400_000)));
    assert_eq!(first.levels[0].0, "sil[2]");
    assert_eq!(first.levels[1].0, "silence");
    for f in ["train.first3.scp", "hcopy_mfcc_0.first3.scp"] {
        let text = std::fs::read_to_string(format!("{TD}/{f}")).unwrap();
        let s = ScriptFile::parse(&text).unwrap();
        assert_eq!(s.to_text(), text, "{f}");
    }
    let list = HmmList::load(format!("{TD}/monophones1")).unwrap();
    assert_eq!(list.entries.len(), 21);
    assert_eq!(list.physical("sp"), Some("sp"));
}

#[test]
fn every_fixture_mlf_and_script() {
    let root = Path::new(SHARED);
    if !root.is_dir() {
        eprintln!("skipped: {SHARED} not present");
        return;
    }
    let mut n = 0;
    for dir in ["align", "rec", "lists"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            match p.extension().and_then(|x| x.to_str()) {
                Some("mlf") => {
                    let m = Mlf::load(&p).unwrap_or_else(|e| panic!("{e}"));
                    assert!(!m.entries.is_empty());
                    assert_eq!(m.to_text(), text, "{}", p.display());
                    n += 1;
                }
                Some("scp") => {
                    let s = ScriptFile::load(&p).unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(s.to_text(), text, "{}", p.display());
                    n += 1;
                }
                _ => {}
            }
        }
    }
    assert!(n >= 30, "{n}");
}

#[test]
fn wild_mlfs_parse() {
    let dir = Path::new("../../shared/fixtures/wild/htk_mlf");
    if !dir.is_dir() {
        eprintln!("skipped: {} not present", dir.display());
        return;
    }
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let m = Mlf::load(&p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Mlf::parse(&m.to_text()).unwrap(), m, "{}", p.display());
    }
}

mod roundtrip {
    use amtool_formats::htk::mlf::*;
    use amtool_formats::htk::script::*;
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = String> {
        "[a-zA-Z][a-zA-Z0-9_\\-\\[\\]+]{0,8}"
    }

    fn label() -> impl Strategy<Value = Label> {
        (
            prop::option::of((0i64..1_000_000, 0i64..1_000_000)),
            prop::collection::vec((name(), prop::option::of(-100_000i64..100_000)), 1..3),
        )
            .prop_map(|(t, lv)| Label {
                start: t.map(|x| x.0),
                end: t.map(|x| x.0 + x.1),
                // scores with 6 decimals print exactly as %f
                levels: lv
                    .into_iter()
                    .map(|(n, s)| (n, s.map(|k| k as f64 / 64.0)))
                    .collect(),
            })
    }

    fn mlf() -> impl Strategy<Value = Mlf> {
        prop::collection::vec(
            (
                "\\*/[a-z0-9_]{1,8}\\.lab",
                prop_oneof![
                    prop::collection::vec(prop::collection::vec(label(), 0..4), 1..3)
                        .prop_map(EntryBody::Labels),
                    "[a-z]{1,6}".prop_map(EntryBody::SubDir),
                    "[a-z]{1,6}".prop_map(EntryBody::FullDir),
                ],
            )
                .prop_map(|(pattern, body)| MlfEntry { pattern, body }),
            0..4,
        )
        .prop_map(|entries| Mlf { entries })
    }

    fn entry() -> impl Strategy<Value = ScriptEntry> {
        (
            "[a-z0-9_/]{1,10}",
            prop::option::of("[a-z0-9_]{1,6}"),
            prop::option::of((0i64..100, 0i64..100)),
        )
            .prop_map(|(p, l, r)| ScriptEntry {
                logical: l.unwrap_or_else(|| p.clone()),
                physical: p,
                range: r.map(|(a, b)| (a, a + b)),
            })
    }

    proptest! {
        #[test]
        fn mlf_round_trips(m in mlf()) {
            let text = m.to_text();
            prop_assert_eq!(Mlf::parse(&text).unwrap(), m);
        }

        #[test]
        fn script_round_trips(lines in prop::collection::vec(prop::collection::vec(entry(), 1..3), 0..5)) {
            let s = ScriptFile { lines };
            prop_assert_eq!(ScriptFile::parse(&s.to_text()).unwrap(), s);
        }
    }
}

/// Every configuration file: the fixture configs and the wild ones.
#[test]
fn config_files_parse() {
    use amtool_formats::htk::config::Config;
    let mut n = 0;
    for dir in [
        format!("{SHARED}/config"),
        "../../shared/fixtures/wild/htk_config".to_string(),
    ] {
        let dir = Path::new(&dir);
        if !dir.is_dir() {
            eprintln!("skipped: {} not present", dir.display());
            continue;
        }
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let c = Config::load(&p).unwrap_or_else(|e| panic!("{e}"));
            assert!(!c.entries.is_empty(), "{}", p.display());
            n += 1;
        }
    }
    if n > 0 {
        let c = Config::load(format!("{SHARED}/config/map.cfg")).unwrap();
        assert_eq!(c.get_f64("HMAP", "MAPTAU"), Some(Ok(10.0)));
    }
}
