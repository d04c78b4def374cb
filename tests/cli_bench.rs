//! `amtool bench` through its command line: every option issue 4 lists is
//! accepted and shapes the cases (small sizes; timings are not looked at),
//! the read cases write their archives under `--path` and remove them, and a
//! bad case or engine is an error with exit status 1.

mod common;

fn bench(args: &[&str]) -> (i32, String, String) {
    let out = common::amtool().arg("bench").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The raw text of `"key": value` in a JSON line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let pat = format!("\"{key}\": ");
    let i = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + pat.len();
    let rest = &line[i..];
    &rest[..rest.find([',', '}']).unwrap()]
}

#[test]
fn every_option_is_accepted_and_shapes_the_cases() {
    let (code, out, err) = bench(&[
        "--engine",
        "cpu",
        "--case",
        "estep_seed000",
        "--case",
        "acc_ali",
        "--case",
        "score_seed002",
        "--case",
        "fullcov_score_seed001",
        "--frames",
        "120",
        "--gaussians",
        "6",
        "--states",
        "4",
        "--gaussians-per-state",
        "3",
        "--dim",
        "5",
        "--threads",
        "2",
        "--reps",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    for l in &lines {
        for k in [
            "seconds",
            "gflops_paper_count",
            "rel_err_vs_f64",
            "engine",
            "device",
        ] {
            field(l, k);
        }
        assert_eq!(field(l, "D"), "5", "{l}");
        assert_eq!(field(l, "engine"), "\"cpu\"");
    }
    assert_eq!(field(lines[0], "case"), "\"estep_seed000\"");
    assert_eq!((field(lines[0], "T"), field(lines[0], "M")), ("120", "6"));
    assert_eq!(
        (field(lines[1], "pdfs"), field(lines[1], "frames")),
        ("4", "120")
    );
    assert_eq!(
        (
            field(lines[2], "states"),
            field(lines[2], "gauss_per_state")
        ),
        ("4", "3")
    );
    field(lines[2], "inv_rtf_100fps");
    assert_eq!(field(lines[3], "gaussians"), "12"); // 4 states x 3
}

#[test]
fn read_cases_write_under_path_and_clean_up() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().display().to_string();
    let (code, out, err) = bench(&[
        "--case",
        "read_ark",
        "--case",
        "read_ark_compressed",
        "--frames",
        "1500",
        "--dim",
        "7",
        "--reps",
        "1",
        "--path",
        &p,
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(field(lines[0], "case"), "\"read_ark\"");
    field(lines[0], "raw_gb_per_s");
    assert_eq!(field(lines[1], "case"), "\"read_ark_compressed\"");
    field(lines[1], "decoded_gb_per_s_per_core");
    assert!(
        err.contains(&p),
        "the archives were not written under --path: {err}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "left files behind"
    );
}

#[test]
fn bad_case_or_engine_is_an_error() {
    let (code, _, err) = bench(&["--case", "nope", "--frames", "10"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("unknown benchmark case") && err.contains("read_ark"),
        "{err}"
    );
    let (code, _, err) = bench(&["--engine", "tpu", "--case", "estep_seed000"]);
    assert_eq!(code, 1, "{err}");
}

/// acc_stats_ark on the CPU engine: the archive written and read back in
/// batches gives the likelihood of the same frames in one call in memory
/// (to the rounding of a different summation order), and the job's steps
/// are reported.
#[test]
fn acc_stats_ark_reads_every_frame_of_its_archive() {
    let (code, out, err) = bench(&[
        "--engine",
        "cpu",
        "--case",
        "acc_stats_ark",
        "--frames",
        "5500",
        "--gaussians",
        "8",
        "--dim",
        "6",
        "--reps",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let l = lines[0];
    assert_eq!(field(l, "case"), "\"acc_stats_ark\"");
    assert_eq!(
        (field(l, "T"), field(l, "D"), field(l, "M")),
        ("5500", "6", "8")
    );
    let num = |k: &str| field(l, k).parse::<f64>().unwrap();
    let (e2e, mem) = (num("avg_like_per_frame"), num("kernel_avg_like_per_frame"));
    assert!(e2e.is_finite() && e2e < 0.0, "{l}");
    assert!(
        (e2e - mem).abs() <= 1e-9 * mem.abs(),
        "archive {e2e} against memory {mem}"
    );
    // 5500 frames of 6 floats, and each utterance's key and header.
    let gb = num("file_gb");
    assert!(gb > 5500.0 * 24.0 / 1e9 && gb < 5600.0 * 24.0 / 1e9, "{l}");
    for k in ["seconds", "read_seconds", "host_settle_seconds"] {
        assert!(num(k) >= 0.0, "{k} in {l}");
    }
}
