//! HTK parameter files against HList dumps made by HTK 3.4.1 (see
//! ../shared/fixtures/htk/README.md). Values are compared as the strings HList
//! prints (`%e`, i.e. 7 significant digits) — exact at HList's precision; the
//! byte-level tests (rewrite, re-compress) are exact to the bit.

use std::path::{Path, PathBuf};

use amtool_formats::htk::cfmt::fmt_e;
use amtool_formats::htk::param::{ByteOrder, ParamData, ParamFile};
use amtool_formats::htk::parmkind::*;

const TD: &str = "../testdata/htk";
const SHARED: &str = "../../shared/fixtures/htk";

/// Compare the frames of `file` with an `HList -r` dump (one frame per line);
/// only the lines the dump has are compared.
fn compare_raw_dump(file: &Path, dump: &Path) -> usize {
    let p = ParamFile::open(file).unwrap();
    let vals = p.to_f32();
    let text = std::fs::read_to_string(dump).unwrap();
    let mut lines = 0;
    for (t, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            toks.len(),
            p.ncols,
            "{}: line {} width",
            dump.display(),
            t + 1
        );
        for (j, tok) in toks.iter().enumerate() {
            let ours = fmt_e(vals[t * p.ncols + j] as f64);
            assert_eq!(&ours, tok, "{} frame {t} col {j}", file.display());
        }
        lines += 1;
    }
    lines
}

#[test]
fn testdata_files_equal_hlist_dumps() {
    for k in ["mfcc_0_d_a_c_k", "mfcc_0_d_a_le", "lpc", "mfcc_0_d_a"] {
        let f = PathBuf::from(format!("{TD}/param/{k}.spk01_u001.htk"));
        let d = PathBuf::from(format!("{TD}/dumps/{k}.spk01_u001.raw.head10.txt"));
        assert_eq!(compare_raw_dump(&f, &d), 10, "{k}");
    }
}

#[test]
fn little_endian_file_is_detected_and_equals_big_endian_one() {
    let le = std::fs::read(format!("{TD}/param/mfcc_0_d_a_le.spk01_u001.htk")).unwrap();
    let be = std::fs::read(format!("{TD}/param/mfcc_0_d_a.spk01_u001.htk")).unwrap();
    assert_eq!(ParamFile::detect_order(&le), ByteOrder::Little);
    let a = ParamFile::parse(&le).unwrap();
    let b = ParamFile::parse(&be).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.to_bytes(ByteOrder::Little), le);
    assert_eq!(a.to_bytes(ByteOrder::Big), be);
}

/// HCopy computed the _C and _C_K files from the same floats it wrote to the
/// plain file: compressing those floats the way HParm does must give HTK's bytes.
#[test]
fn our_compression_and_crc_equal_hcopy_bytes() {
    let plain = ParamFile::open(format!("{TD}/param/mfcc_0_d_a.spk01_u001.htk")).unwrap();
    let c = plain.compressed().unwrap();
    let htk_c = std::fs::read(format!("{TD}/param/mfcc_0_d_a_c.spk01_u001.htk")).unwrap();
    assert_eq!(c.to_bytes(ByteOrder::Big), htk_c);
    let mut ck = c.clone();
    ck.kind = ck.kind.with(HASCRCC);
    let htk_ck = std::fs::read(format!("{TD}/param/mfcc_0_d_a_c_k.spk01_u001.htk")).unwrap();
    assert_eq!(ck.to_bytes(ByteOrder::Big), htk_ck);
}

#[test]
fn discrete_file_equals_hlist_vq_dump() {
    let p = ParamFile::open(format!("{TD}/param/discrete.spk01_u001.htk")).unwrap();
    assert_eq!(p.kind.to_string(), "DISCRETE_K");
    let ParamData::Short(v) = &p.data else {
        panic!("DISCRETE must be shorts")
    };
    let dump =
        std::fs::read_to_string(format!("{TD}/dumps/discrete.spk01_u001.HList-h.txt")).unwrap();
    let mut n = 0;
    for line in dump.lines() {
        if let Some((idx, rest)) = line.split_once(':') {
            if let (Ok(i), Some(vq)) = (
                idx.trim().parse::<usize>(),
                rest.trim().strip_prefix("VQ[1]="),
            ) {
                assert_eq!(v[i], vq.trim().parse::<i16>().unwrap(), "frame {i}");
                n += 1;
            }
        }
    }
    assert_eq!(n, p.n_frames());
}

/// Every parameter file of the full fixture set: rewritten byte-identically, and
/// equal to its HList dump where one exists.
#[test]
fn all_shared_fixture_param_files() {
    let feat = Path::new(SHARED).join("feat");
    if !feat.is_dir() {
        eprintln!("skipped: {} not present", feat.display());
        return;
    }
    let mut n = 0;
    for kind_dir in std::fs::read_dir(&feat).unwrap() {
        let kind_dir = kind_dir.unwrap().path();
        let kind = kind_dir.file_name().unwrap().to_string_lossy().to_string();
        for f in std::fs::read_dir(&kind_dir).unwrap() {
            let f = f.unwrap().path();
            let bytes = std::fs::read(&f).unwrap();
            let order = ParamFile::detect_order(&bytes);
            let p = ParamFile::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert_eq!(p.to_bytes(order), bytes, "{} rewrite", f.display());
            n += 1;
            if f.file_stem().unwrap() == "spk01_u001" {
                let dump = Path::new(SHARED).join(format!("dumps/{kind}.spk01_u001.raw.txt"));
                if dump.exists() {
                    assert_eq!(compare_raw_dump(&f, &dump), p.n_frames(), "{kind}");
                }
            }
        }
    }
    assert!(n >= 80, "only {n} files");
    // WAVEFORM: the first samples as HList -r -e 1999 printed them.
    let p = ParamFile::open(feat.join("waveform/spk01_u001.htk")).unwrap();
    assert_eq!(
        (p.kind.base(), p.samp_period, p.n_frames()),
        (WAVEFORM, 625, 38978)
    );
    let dump =
        std::fs::read_to_string(Path::new(SHARED).join("dumps/waveform.spk01_u001.raw-e1999.txt"))
            .unwrap();
    let want: Vec<f32> = dump
        .split_whitespace()
        .map(|t| t.parse().unwrap())
        .collect();
    // HList prints samples 0..=2000 for `-e 1999` on waveforms (2001 values).
    assert!(want.len() >= 2000);
    assert_eq!(&p.to_f32()[..want.len()], &want[..]);
}

/// Real-world parameter files from other people's repositories: read-only check.
#[test]
fn wild_param_files_parse() {
    let dir = Path::new("../../shared/fixtures/wild/htk_param");
    if !dir.is_dir() {
        eprintln!("skipped: {} not present", dir.display());
        return;
    }
    for f in std::fs::read_dir(dir).unwrap() {
        let f = f.unwrap().path();
        let bytes = std::fs::read(&f).unwrap();
        let p = ParamFile::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(p.n_frames() > 0);
        assert_eq!(
            p.to_bytes(ParamFile::detect_order(&bytes)),
            bytes,
            "{}",
            f.display()
        );
    }
}

mod roundtrip {
    use super::*;
    use proptest::prelude::*;

    fn file() -> impl Strategy<Value = (ParamFile, ByteOrder, bool)> {
        (
            0u16..12,
            any::<u16>(),
            1usize..6,
            0usize..5,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_flat_map(|(base, q, ncols, frames, big, crc, compress)| {
                let quals = q & !BASEMASK & !HASCOMPX & !HASCRCC;
                let short_kind = matches!(base, WAVEFORM | DISCRETE | IREFC);
                let n = ncols * frames;
                let data = if short_kind {
                    prop::collection::vec(any::<i16>(), n)
                        .prop_map(ParamData::Short)
                        .boxed()
                } else {
                    prop::collection::vec(-1.0e4f32..1.0e4, n)
                        .prop_map(ParamData::Float)
                        .boxed()
                };
                (data, 1i32..1_000_000).prop_map(move |(data, period)| {
                    let mut kind = ParmKind::new(base, quals);
                    if crc {
                        kind = kind.with(HASCRCC);
                    }
                    let f = ParamFile {
                        kind,
                        samp_period: period,
                        ncols,
                        data,
                    };
                    let order = if big {
                        ByteOrder::Big
                    } else {
                        ByteOrder::Little
                    };
                    (f, order, compress && !short_kind && frames > 0)
                })
            })
    }

    proptest! {
        #[test]
        fn every_kind_and_qualifier_both_orders((f, order, compress) in file()) {
            let f = if compress {
                // Like HParm, compression refuses columns whose offset swamps
                // their range in float arithmetic (a short out of range).
                match f.compressed() {
                    Ok(c) => c,
                    Err(e) => {
                        prop_assert!(e.to_string().contains("short out of range"), "{}", e);
                        return Ok(());
                    }
                }
            } else {
                f
            };
            let bytes = f.to_bytes(order);
            let back = ParamFile::parse_with_order(&bytes, order).unwrap();
            prop_assert_eq!(&back, &f);
            prop_assert_eq!(back.to_bytes(order), bytes);
        }
    }
}

/// Whole-file problems name the file and the byte offset.
#[test]
fn bad_files_name_path_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(format!("{TD}/param/mfcc_0_d_a_c_k.spk01_u001.htk")).unwrap();
    let cut = dir.path().join("cut.htk");
    std::fs::write(&cut, &good[..good.len() - 100]).unwrap();
    let e = ParamFile::open(&cut).unwrap_err().to_string();
    assert!(
        e.contains("cut.htk") && e.contains("truncated") && e.contains("at byte"),
        "{e}"
    );
    let mut bad = good.clone();
    bad[500] ^= 0x10;
    let crc = dir.path().join("crc.htk");
    std::fs::write(&crc, &bad).unwrap();
    let e = ParamFile::open(&crc).unwrap_err().to_string();
    assert!(
        e.contains("crc.htk")
            && e.contains("CRC error")
            && e.contains(&format!("at byte {}", good.len() - 2)),
        "{e}"
    );
    let e = ParamFile::open(dir.path().join("missing.htk"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.htk"), "{e}");
}

/// Writing goes through a temporary file: the result reads back identically.
#[test]
fn write_is_atomic_and_exact() {
    let dir = tempfile::tempdir().unwrap();
    let p = ParamFile::open(format!("{TD}/param/lpc.spk01_u001.htk")).unwrap();
    let out = dir.path().join("out.htk");
    p.write(&out, ByteOrder::Big).unwrap();
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(format!("{TD}/param/lpc.spk01_u001.htk")).unwrap()
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file left behind"
    );
}
