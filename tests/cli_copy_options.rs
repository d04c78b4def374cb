//! The copy tools' own options through their shims, against the real Kaldi
//! tools' outputs (testdata/kaldi/copy_opts, see its README and make.sh):
//! copy-matrix's --scale/--apply-*, copy-vector's --change_dim/--scale,
//! copy-post's --scale, copy-feats' --write-num-frames and --sphinx-in; and
//! gmm-copy's --copy-tm/--copy-am against the parts of the fixture model.
#![cfg(unix)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{gunzip, run_cmd, shim};

const D: &str = "testdata/kaldi/copy_opts";

/// Runs the shim `tool` (made in `dir`) with `args`; must succeed. Returns stderr.
fn tool(dir: &Path, name: &str, args: &[&str]) -> String {
    let link = dir.join(name);
    if !link.exists() {
        shim(dir, name);
    }
    let (code, err) = run_cmd(Command::new(&link).args(args));
    assert_eq!(code, 0, "{name} {args:?}:\n{err}");
    err
}

fn out(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

#[test]
fn copy_matrix_options_equal_kaldis_bits() {
    let d = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (&["--scale=0.5"], "mat_scale.ark"),
        (&["--apply-log"], "mat_log.ark"),
        (&["--apply-exp"], "mat_exp.ark"),
        (&["--apply-softmax-per-row"], "mat_softmax.ark"),
        (&["--apply-power=0.5"], "mat_pow0.5.ark"),
        (&["--apply-power=-1.5"], "mat_pow-1.5.ark"),
        (
            &["--scale=3", "--apply_log", "--apply-power=0.7"],
            "mat_scale_log_pow.ark",
        ),
        (
            &["--apply-softmax-per-row", "--scale=-0.3", "--apply-power=2"],
            "mat_scale_softmax_pow.ark",
        ),
    ];
    for (opts, want) in cases {
        let o = out(d.path(), want);
        let mut args = opts.to_vec();
        let (input, output) = (format!("ark,t:{D}/mat.txt"), format!("ark:{o}"));
        args.extend([input.as_str(), output.as_str()]);
        let err = tool(d.path(), "copy-matrix", &args);
        assert!(err.contains("Copied 2 matrices."), "{err}");
        assert!(
            std::fs::read(&o).unwrap() == std::fs::read(format!("{D}/{want}")).unwrap(),
            "copy-matrix {opts:?} differs from Kaldi's {want}"
        );
    }
    // Only one of log, exp and softmax, checked before anything is read.
    let link = d.path().join("copy-matrix");
    let (code, err) = run_cmd(Command::new(&link).args([
        "--apply-log",
        "--apply-exp",
        "ark:/nonexistent",
        "ark:-",
    ]));
    assert_eq!(code, 1);
    assert!(
        err.contains("Only one of apply-log, apply-exp and apply-softmax-per-row"),
        "{err}"
    );
}

#[test]
fn copy_matrix_options_on_a_single_file() {
    let d = tempfile::tempdir().unwrap();
    // A one-line text matrix is a matrix to copy-matrix (a 1×4, scaled and squared).
    let input = d.path().join("m.txt");
    std::fs::write(&input, " [ 1 -2 3 0.5 ]\n").unwrap();
    let o = out(d.path(), "m.out");
    let err = tool(
        d.path(),
        "copy-matrix",
        &[
            "--binary=false",
            "--scale=2",
            "--apply-power=2",
            &input.display().to_string(),
            &o,
        ],
    );
    assert!(err.contains(&format!("Copied matrix to {o}")), "{err}");
    assert_eq!(std::fs::read_to_string(&o).unwrap(), " [\n  4 16 36 1 ]\n");
}

#[test]
fn copy_vector_change_dim_and_scale() {
    let d = tempfile::tempdir().unwrap();
    for (opts, want) in [
        (&["--scale=-1", "--change_dim=5"][..], "v_scale_dim.txt"),
        (&["--change-dim=2"][..], "v_dim.txt"),
    ] {
        let o = out(d.path(), want);
        let mut args = opts.to_vec();
        let (input, output) = (format!("ark,t:{D}/v.txt"), format!("ark,t:{o}"));
        args.extend([input.as_str(), output.as_str()]);
        let err = tool(d.path(), "copy-vector", &args);
        let dim = if want == "v_dim.txt" {
            "2 scaled by 1"
        } else {
            "5 scaled by -1"
        };
        assert!(
            err.contains(&format!("Copied 2 vectors, setting dim to {dim}\n")),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(&o).unwrap(),
            std::fs::read_to_string(format!("{D}/{want}")).unwrap(),
            "copy-vector {opts:?}"
        );
    }
    // A single file is resized but not scaled, as Kaldi's copy-vector does.
    let o = out(d.path(), "single.txt");
    tool(
        d.path(),
        "copy-vector",
        &[
            "--binary=false",
            "--scale=3",
            "--change_dim=5",
            &format!("{D}/single.txt"),
            &o,
        ],
    );
    assert_eq!(
        std::fs::read_to_string(&o).unwrap(),
        std::fs::read_to_string(format!("{D}/single_scale_dim.txt")).unwrap()
    );
    // Without options: Kaldi's plain summary.
    let err = tool(
        d.path(),
        "copy-vector",
        &[&format!("ark,t:{D}/v.txt"), "ark:/dev/null"],
    );
    assert!(err.contains("Copied 2 vectors.\n"), "{err}");
}

#[test]
fn copy_post_scale() {
    let d = tempfile::tempdir().unwrap();
    let o = out(d.path(), "post.ark");
    let err = tool(
        d.path(),
        "copy-post",
        &[
            "--scale=0.5",
            "ark:testdata/kaldi/feats/post.first3.ark",
            &format!("ark:{o}"),
        ],
    );
    assert!(err.contains("Done copying 3 posteriors."), "{err}");
    assert!(std::fs::read(&o).unwrap() == gunzip(format!("{D}/post_scale.ark.gz")));
}

/// What steps/make_mfcc.sh runs: copy-feats --write-num-frames beside the
/// features (text and binary num-frames tables), with compression too.
#[test]
fn copy_feats_write_num_frames() {
    let d = tempfile::tempdir().unwrap();
    let feats = "ark:testdata/kaldi/feats/feats.first3.ark";
    for (spec, want) in [("ark,t", "num_frames.txt"), ("ark", "num_frames.ark")] {
        let nf = out(d.path(), want);
        let ark = out(d.path(), "raw.ark");
        let scp = out(d.path(), "raw.scp");
        let err = tool(
            d.path(),
            "copy-feats",
            &[
                "--compress=true",
                &format!("--write-num-frames={spec}:{nf}"),
                feats,
                &format!("ark,scp:{ark},{scp}"),
            ],
        );
        assert!(err.contains("Copied 3 feature matrices."), "{err}");
        assert!(
            std::fs::read(&nf).unwrap() == std::fs::read(format!("{D}/{want}")).unwrap(),
            "{want}"
        );
    }
    // Not for single files, as Kaldi.
    let link = d.path().join("copy-feats");
    let (code, err) = run_cmd(Command::new(&link).args([
        "--write-num-frames=ark:x",
        "testdata/kaldi/feats/s01-001.mfc",
        "-",
    ]));
    assert_eq!(code, 1);
    assert!(
        err.contains("--write-num-frames option not supported when writing/reading single files"),
        "{err}"
    );
}

#[test]
fn copy_feats_sphinx_in() {
    let d = tempfile::tempdir().unwrap();
    let o = out(d.path(), "s.ark");
    let err = tool(
        d.path(),
        "copy-feats",
        &[
            "--sphinx-in",
            &format!("scp:{D}/sphinx.scp"),
            &format!("ark:{o}"),
        ],
    );
    assert!(err.contains("Copied 2 feature matrices."), "{err}");
    assert!(std::fs::read(&o).unwrap() == std::fs::read(format!("{D}/sphinx.ark")).unwrap());
    // A count that is not a whole number of 13-dim frames names the file.
    let bad = d.path().join("bad.sph");
    let mut b = 14i32.to_be_bytes().to_vec();
    b.extend([0u8; 56]);
    std::fs::write(&bad, b).unwrap();
    let scp = d.path().join("bad.scp");
    std::fs::write(&scp, format!("x {}\n", bad.display())).unwrap();
    let link = d.path().join("copy-feats");
    let (code, err) = run_cmd(Command::new(&link).args([
        "--sphinx-in",
        &format!("scp:{}", scp.display()),
        "ark:/dev/null",
    ]));
    assert_eq!(code, 1);
    assert!(
        err.contains("bad.sph") && err.contains("inconsistent with vector length 13"),
        "{err}"
    );
}

/// gmm-copy --copy-am=false writes the transition model alone,
/// --copy-tm=false reads and writes an AmDiagGmm alone: the two outputs,
/// put together, are the whole model (binary and text), as Kaldi's gmm-copy
/// gives (checked with Kaldi f4007661 when this was written).
#[test]
fn gmm_copy_parts_make_up_the_model() {
    let d = tempfile::tempdir().unwrap();
    let model = std::fs::read("testdata/kaldi/final.mdl").unwrap();
    let tm = out(d.path(), "tm.mdl");
    tool(
        d.path(),
        "gmm-copy",
        &["--copy-am=false", "testdata/kaldi/final.mdl", &tm],
    );
    let tm_bytes = std::fs::read(&tm).unwrap();
    assert!(tm_bytes.len() > 2 && model.starts_with(&tm_bytes));
    // The AmDiagGmm alone: the binary marker and the rest of the model.
    let am_in = d.path().join("am_in.mdl");
    std::fs::write(&am_in, [&b"\0B"[..], &model[tm_bytes.len()..]].concat()).unwrap();
    let am = out(d.path(), "am.mdl");
    tool(
        d.path(),
        "gmm-copy",
        &["--copy-tm=false", &am_in.display().to_string(), &am],
    );
    assert!(std::fs::read(&am).unwrap() == std::fs::read(&am_in).unwrap());
    // Text: the two parts concatenated are the text model.
    let (tm_t, am_t) = (out(d.path(), "tm.txt"), out(d.path(), "am.txt"));
    tool(
        d.path(),
        "gmm-copy",
        &[
            "--binary=false",
            "--copy_am=false",
            "testdata/kaldi/final.mdl",
            &tm_t,
        ],
    );
    tool(
        d.path(),
        "gmm-copy",
        &["--binary=false", "--copy-tm=false", &am, &am_t],
    );
    let both = [std::fs::read(&tm_t).unwrap(), std::fs::read(&am_t).unwrap()].concat();
    assert!(both == gunzip("testdata/kaldi/final.mdl.txt.gz"));
    // Neither part: just the binary marker (nothing in text).
    let none = out(d.path(), "none.mdl");
    tool(
        d.path(),
        "gmm-copy",
        &[
            "--copy-am=false",
            "--copy-tm=f",
            "testdata/kaldi/final.mdl",
            &none,
        ],
    );
    assert_eq!(std::fs::read(&none).unwrap(), b"\0B");
    // --copy-tm=false on a whole model: the AmDiagGmm is expected first.
    let link = d.path().join("gmm-copy");
    let (code, err) =
        run_cmd(Command::new(&link).args(["--copy-tm=false", "testdata/kaldi/final.mdl", &none]));
    assert_eq!(code, 1);
    assert!(
        err.contains("final.mdl") && err.contains("<DIMENSION>"),
        "{err}"
    );
}
