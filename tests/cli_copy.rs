//! `amtool copy` against Kaldi's own outputs (testdata/kaldi/feats, see its
//! README): binary copies byte-identical, text copies identical to Kaldi's text,
//! copy-feats compression identical, the Kaldi tool names through shims, and
//! errors with exit status 1.

mod common;

use common::{amtool, gunzip, run};

use std::process::Command;

const D: &str = "testdata/kaldi/feats";

#[test]
fn table_copies_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let t = |n: &str| dir.path().join(n).display().to_string();
    for f in [
        "feats.first3.ark",
        "cmvn.ark",
        "feats_cm1.first3.ark",
        "feats_cm3.first3.ark",
        "feats_cm7.first3.ark",
        "ali.first3.ark",
        "post.first3.ark",
        "ubm.1.gselect.first3.ark",
        "ubm.1.frame_likes.first3.ark",
    ] {
        let out = t(f);
        let (code, err) = run(&["copy", &format!("ark:{D}/{f}"), &format!("ark:{out}")]);
        assert_eq!(code, 0, "{f}: {err}");
        assert!(
            std::fs::read(&out).unwrap() == std::fs::read(format!("{D}/{f}")).unwrap(),
            "{f} differs"
        );
    }
    // Text outputs equal Kaldi's.
    let (code, err) = run(&[
        "copy",
        &format!("ark:{D}/feats.first3.ark"),
        &format!("ark,t:{}", t("f.txt")),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Copied 3 feature matrices."), "{err}");
    assert!(std::fs::read(t("f.txt")).unwrap() == gunzip(&format!("{D}/feats.first3.txt.gz")));
    let (code, err) = run(&[
        "copy",
        &format!("ark:{D}/ali.first3.ark"),
        &format!("ark,t:{}", t("a.txt")),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Copied 3 vectors of int32."), "{err}");
    assert_eq!(
        std::fs::read(t("a.txt")).unwrap(),
        std::fs::read(format!("{D}/ali.first3.txt")).unwrap()
    );
    let (code, _) = run(&[
        "copy",
        &format!("ark:{D}/ubm.1.gselect.first3.ark"),
        &format!("ark,t:{}", t("g.txt")),
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read(t("g.txt")).unwrap(),
        std::fs::read(format!("{D}/ubm.1.gselect_first3.txt")).unwrap()
    );
    // Text back to binary.
    let (code, _) = run(&[
        "copy",
        &format!("ark:{D}/ali.first3.txt"),
        &format!("ark:{}", t("a.ark")),
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read(t("a.ark")).unwrap(),
        std::fs::read(format!("{D}/ali.first3.ark")).unwrap()
    );
}

#[test]
fn compression_and_scp_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let t = |n: &str| dir.path().join(n).display().to_string();
    for m in 1..=7 {
        let out = t(&format!("cm{m}.ark"));
        let (code, err) = run(&[
            "copy",
            "--compress=true",
            &format!("--compression-method={m}"),
            &format!("ark:{D}/feats.first3.ark"),
            &format!("ark,scp:{out},{}", t("x.scp")),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(
            std::fs::read(&out).unwrap()
                == std::fs::read(format!("{D}/feats_cm{m}.first3.ark")).unwrap(),
            "method {m}"
        );
    }
    // Read back through the scp, decompressed, as copy-feats would.
    let (code, err) = run(&[
        "copy",
        &format!("scp:{}", t("x.scp")),
        &format!("ark,t:{}", t("d.txt")),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        std::fs::read(t("d.txt")).unwrap()
            == gunzip(&format!("{D}/feats_cm7.first3.decompressed.txt.gz"))
    );
}

#[test]
fn kaldi_tool_names_through_shims() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("copy-feats");
    std::os::unix::fs::symlink(common::amtool_bin(), &link).unwrap();
    let out = dir.path().join("f.ark");
    // copy-feats decompresses (writes FM), as Kaldi's does.
    let o = Command::new(&link)
        .args([
            format!("ark:{D}/feats_cm2.first3.ark"),
            format!("ark,t:{}", out.display()),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::read(&out).unwrap()
            == gunzip(&format!("{D}/feats_cm2.first3.decompressed.txt.gz"))
    );
    let link = dir.path().join("copy-matrix");
    std::os::unix::fs::symlink(common::amtool_bin(), &link).unwrap();
    let o = Command::new(&link)
        .args([
            format!("ark:{D}/cmvn.ark"),
            format!("ark,t:{}", out.display()),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && err.contains("Copied 4 matrices."),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(format!("{D}/cmvn.txt")).unwrap()
    );
}

#[test]
fn single_objects_and_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("occs.txt");
    let (code, err) = run(&[
        "copy",
        "--binary=false",
        "testdata/kaldi/final.occs",
        &out.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let back = dir.path().join("occs.bin");
    let (code, _) = run(&[
        "copy",
        "--binary",
        &out.display().to_string(),
        &back.display().to_string(),
    ]);
    assert_eq!(code, 0);
    let o = amtool()
        .args(["copy", "--binary=false", "testdata/kaldi/final.occs", "-"])
        .output()
        .unwrap();
    assert_eq!(o.stdout, std::fs::read(&out).unwrap());
}

#[test]
fn errors_exit_1_and_leave_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.ark");
    let trunc = dir.path().join("t.ark");
    let good = std::fs::read(format!("{D}/feats.first3.ark")).unwrap();
    std::fs::write(&trunc, &good[..good.len() - 7]).unwrap();
    let (code, err) = run(&[
        "copy",
        &format!("ark:{}", trunc.display()),
        &format!("ark:{}", out.display()),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("t.ark") && err.contains("s01-003") && err.contains("truncated"),
        "{err}"
    );
    assert!(!out.exists(), "a failed copy left its output behind");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let (code, err) = run(&[
        "copy",
        &format!("ark:cat {D}/feats.first3.ark; exit 3 |"),
        &format!("ark:{}", out.display()),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("failed"), "{err}");
    let (code, err) = run(&["copy", "testdata/kaldi/feats/ubm.1.avg_likes.txt", "-"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("text archive") && err.contains("give it as ark:FILE"),
        "{err}"
    );
}

/// The model-copying shims read only their tool's model kind, as Kaldi's
/// readers do: gmm-copy of a DiagGmm is an error naming the file and both
/// kinds, and writes nothing; each copies its own kind; `amtool copy` takes
/// any.
#[test]
fn model_copy_shims_read_only_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let (mdl, ubm, fubm) = (
        "testdata/kaldi/final.mdl",
        "testdata/kaldi/ubm.0.dubm",
        "testdata/kaldi/train/fubm.1.fubm",
    );
    let cases = [
        ("gmm-copy", ubm, "DiagGmm", mdl),
        ("gmm-global-copy", fubm, "FullGmm", ubm),
        ("fgmm-global-copy", mdl, "TransitionModel", fubm),
    ];
    for (tool, wrong, holds, right) in cases {
        let link = dir.path().join(tool);
        std::os::unix::fs::symlink(common::amtool_bin(), &link).unwrap();
        let out = dir.path().join(format!("{tool}.out"));
        let o = Command::new(&link).arg(wrong).arg(&out).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{tool}: {err}");
        assert!(err.contains(wrong) && err.contains(holds), "{tool}: {err}");
        assert!(!out.exists(), "{tool} wrote output");
        let o = Command::new(&link).arg(right).arg(&out).output().unwrap();
        assert!(
            o.status.success(),
            "{tool}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            std::fs::read(&out).unwrap() == std::fs::read(right).unwrap(),
            "{tool}"
        );
    }
    let (code, err) = run(&["copy", ubm, &dir.path().join("any").display().to_string()]);
    assert_eq!(code, 0, "{err}");
}
