//! `amtool copy` and `amtool copy-to-htk` on HTK files, against files the
//! real tools wrote: Kaldi's copy-feats-to-htk (testdata/kaldi/feats/s01-001.mfc
//! from feats.first3.ark's first entry), HTK's binary MMFs (testdata/htk/mmf,
//! written by HHEd -B) and HCopy's compressed + CRC parameter file with its
//! HList dump (testdata/htk/param, testdata/htk/dumps).

mod common;

use common::{gunzip, ok, read, run};

use std::path::Path;
use std::process::Command;

const KD: &str = "testdata/kaldi/feats";
const HD: &str = "testdata/htk";

/// copy-feats-to-htk's files byte for byte, and back (copy-feats --htk-in) to
/// Kaldi's archive byte for byte.
#[test]
fn feature_archives_to_htk_files_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let htk = dir.path().join("htk");
    let htk_dir = htk.display().to_string();
    let err = ok(&[
        "copy-to-htk",
        &format!("--output-dir={htk_dir}"),
        "--output-ext=mfc",
        &format!("ark:{KD}/feats.first3.ark"),
    ]);
    assert!(
        err.contains(&format!(
            "3 HTK feature files generated in the direcory: {htk_dir}"
        )),
        "{err}"
    );
    assert!(read(htk.join("s01-001.mfc")) == read(format!("{KD}/s01-001.mfc")));
    // Through the Kaldi tool name.
    let link = dir.path().join("copy-feats-to-htk");
    std::os::unix::fs::symlink(common::amtool_bin(), &link).unwrap();
    let htk2 = dir.path().join("htk2");
    let o = Command::new(&link)
        .args([
            format!("--output-dir={}", htk2.display()),
            "--output-ext=mfc".to_string(),
            format!("ark:{KD}/feats.first3.ark"),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for k in ["s01-001", "s01-002", "s01-003"] {
        assert!(read(htk.join(format!("{k}.mfc"))) == read(htk2.join(format!("{k}.mfc"))));
    }
    // Back: float data copied exactly, so the archive is Kaldi's own bytes.
    let scp = dir.path().join("htk.scp");
    let lines: String = ["s01-001", "s01-002", "s01-003"]
        .iter()
        .map(|k| format!("{k} {}\n", htk.join(format!("{k}.mfc")).display()))
        .collect();
    std::fs::write(&scp, lines).unwrap();
    let back = dir.path().join("back.ark");
    let err = ok(&[
        "copy",
        "--htk-in",
        &format!("scp:{}", scp.display()),
        &format!("ark:{}", back.display()),
    ]);
    assert!(err.contains("Copied 3 feature matrices."), "{err}");
    assert!(read(&back) == read(format!("{KD}/feats.first3.ark")));
}

/// One HTK parameter file in, Kaldi's text form of the same matrix out.
#[test]
fn parameter_file_to_kaldi_text_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.txt");
    let err = ok(&[
        "copy",
        "--binary=false",
        &format!("{KD}/s01-001.mfc"),
        &out.display().to_string(),
    ]);
    assert!(err.contains("USER, 171 frames of 13"), "{err}");
    // Kaldi's ark,t text is "s01-001 " + the object's text form.
    let kaldi = gunzip(&format!("{KD}/feats.first3.txt.gz"));
    let kaldi = String::from_utf8(kaldi).unwrap();
    let first = &kaldi["s01-001 ".len()..kaldi.find("\ns01-002").unwrap() + 1];
    assert_eq!(String::from_utf8(read(&out)).unwrap(), first);
}

/// A compressed + CRC file (HCopy, `SAVECOMPRESSED`, `SAVEWITHCRC`) decodes to
/// the values HList printed. Tolerance: both are 7-significant-digit printings
/// of the same f32 (ours %.7g, HList's %e), so they differ by ≤ 1e-6 relative.
#[test]
fn compressed_crc_parameter_file_equals_hlist() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.txt");
    ok(&[
        "copy",
        "--binary=false",
        &format!("{HD}/param/mfcc_0_d_a_c_k.spk01_u001.htk"),
        &out.display().to_string(),
    ]);
    let ours = String::from_utf8(read(&out)).unwrap();
    let dump = String::from_utf8(read(format!(
        "{HD}/dumps/mfcc_0_d_a_c_k.spk01_u001.raw.head10.txt"
    )))
    .unwrap();
    let rows: Vec<&str> = ours.lines().skip(1).collect(); // " [" first
    let mut n = 0;
    for (t, line) in dump.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let want: Vec<f64> = line
            .split_whitespace()
            .map(|v| v.parse().unwrap())
            .collect();
        let got: Vec<f64> = rows[t]
            .split_whitespace()
            .filter(|v| *v != "]")
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(got.len(), want.len(), "frame {t}");
        for (a, b) in got.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs().max(1e-30),
                "frame {t}: {a} vs {b}"
            );
            n += 1;
        }
    }
    assert!(n >= 390, "only {n} values compared");
}

/// MMFs: HTK's binary files copied to binary are byte-identical; text →
/// binary → text is exact; text → text keeps HTK's layout.
#[test]
fn mmf_binary_and_text_copies() {
    let dir = tempfile::tempdir().unwrap();
    let t = |n: &str| dir.path().join(n).display().to_string();
    for m in ["mono1", "mixvar", "fullcov"] {
        let bin = format!("{HD}/mmf/{m}.bin.mmf");
        let err = ok(&["copy", &bin, &t(&format!("{m}.bin"))]);
        assert!(
            err.contains("Written HTK MMF") && err.contains("binary"),
            "{err}"
        );
        assert!(
            read(t(&format!("{m}.bin"))) == read(&bin),
            "{m}: binary copy differs"
        );
        ok(&["copy", "--binary=false", &bin, &t(&format!("{m}.txt"))]);
        // Text → binary → text is exact (HTK's text has fewer digits than its
        // floats, so binary → text → binary is not, for HTK as for us).
        ok(&["copy", &t(&format!("{m}.txt")), &t(&format!("{m}.bin2"))]);
        ok(&[
            "copy",
            "--binary=false",
            &t(&format!("{m}.bin2")),
            &t(&format!("{m}.txt2")),
        ]);
        assert!(
            read(t(&format!("{m}.txt2"))) == read(t(&format!("{m}.txt"))),
            "{m}: text -> binary -> text differs"
        );
        // With the fixtures present: the text equals HTK's own text of the model.
        let htk_text = format!("../shared/fixtures/htk/models/{m}.mmf");
        if Path::new(&htk_text).exists() {
            assert!(
                read(t(&format!("{m}.txt"))) == read(&htk_text),
                "{m}: text differs from HTK's"
            );
        } else {
            eprintln!("skipped the comparison with HTK's text: {htk_text} not present");
        }
    }
    // The HCompV prototype (text) is rewritten in HTK's layout unchanged.
    ok(&[
        "copy",
        "--binary=false",
        &format!("{HD}/mmf/hmm0.proto"),
        &t("proto"),
    ]);
    assert!(read(t("proto")) == read(format!("{HD}/mmf/hmm0.proto")));
}

#[test]
fn bad_htk_inputs_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let t = |n: &str| dir.path().join(n).display().to_string();
    // Truncated parameter file: named, with the sizes.
    let good = read(format!("{KD}/s01-001.mfc"));
    std::fs::write(t("cut.mfc"), &good[..good.len() - 6]).unwrap();
    let (code, err) = run(&["copy", &t("cut.mfc"), &t("o")]);
    assert_eq!(code, 1);
    assert!(
        err.contains("cut.mfc") && err.contains("should be 8904 bytes, has 8898: truncated"),
        "{err}"
    );
    assert!(!Path::new(&t("o")).exists());
    // Bad CRC.
    let mut ck = read(format!("{HD}/param/mfcc_0_d_a_c_k.spk01_u001.htk"));
    let n = ck.len();
    ck[n - 1] ^= 0x55;
    std::fs::write(t("crc.htk"), &ck).unwrap();
    let (code, err) = run(&["copy", &t("crc.htk"), &t("o")]);
    assert_eq!(code, 1);
    assert!(
        err.contains("crc.htk") && err.contains("CRC error"),
        "{err}"
    );
    // Truncated MMF: file and line.
    let proto = read(format!("{HD}/mmf/hmm0.proto"));
    std::fs::write(t("cut.mmf"), &proto[..proto.len() / 2]).unwrap();
    let (code, err) = run(&["copy", &t("cut.mmf"), &t("o")]);
    assert_eq!(code, 1);
    assert!(err.contains("cut.mmf") && err.contains("line"), "{err}");
    assert!(!Path::new(&t("o")).exists());
    // --htk-in on a Kaldi archive entry: the key and what was wrong.
    std::fs::write(t("bad.scp"), format!("u1 {KD}/cmvn.ark\n")).unwrap();
    let (code, err) = run(&[
        "copy",
        "--htk-in",
        &format!("scp:{}", t("bad.scp")),
        &format!("ark:{}", t("o.ark")),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("HTK parameter file") && err.contains("u1"),
        "{err}"
    );
    // copy-to-htk on a table that holds no matrices.
    let (code, err) = run(&[
        "copy-to-htk",
        &format!("--output-dir={}", t("h")),
        &format!("ark:{KD}/ali.first3.ark"),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("not a feature matrix") && err.contains("s01-001"),
        "{err}"
    );
    let (code, err) = run(&[
        "copy-to-htk",
        "--sample-kind=77",
        &format!("--output-dir={}", t("h")),
        &format!("ark:{KD}/feats.first3.ark"),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("invalid --sample-kind=77"), "{err}");
}
