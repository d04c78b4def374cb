//! Optional: `amtool copy` on EVERY file of ../shared/fixtures/kaldi (written by
//! Kaldi's own tools; its README gives the command behind each) and of
//! ../shared/fixtures/wild/kaldi (real-world files, read in place, never copied
//! into the project). Skips, saying so, when those folders are absent.
//!
//! Each file is copied the way a user would: a single object with `copy F OUT`
//! (binary files must come back byte-identical, text ones token for token,
//! which is Kaldi's own text form); an archive with `copy ark:F ark:OUT`
//! (binary byte-identical, text token for token); where the fixtures hold
//! Kaldi's text form of a binary file beside it (`X.txt`), our text copy
//! equals it token for token; a script file with
//! `copy scp:F ark:OUT` (paths made absolute); gzip files through
//! `"ark:gunzip -c F|"`. Files that are no object amtool reads (trees, FSTs,
//! symbol tables, nnet transition models, question files) must be refused
//! with an error that says what they hold. Lattices are read by
//! `formats::kaldi::lattice` (separate work) and are only listed here; so are
//! the tools' logs and plain-text records (READMEs, lists of integers,
//! `*-info` reports), which are no Kaldi objects.

mod common;

use std::path::{Path, PathBuf};

fn amtool(args: &[String]) -> (i32, String) {
    let out = common::amtool()
        .arg(&args[0])
        .arg("--print-args=false")
        .args(&args[1..])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn tokens(b: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(b)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// `b` with the values of every diagonal GMM's `<GCONSTS>` vector blanked:
/// Kaldi's `DiagGmm::Read` recomputes them, so its copy of a text model
/// (7-digit parameters) or of one another machine wrote differs from the file
/// there, and amtool's copy is Kaldi's (formats/tests/kaldi_gmm.rs checks the
/// bytes against Kaldi's own copies).
fn without_gconsts(b: &[u8], binary: bool) -> Vec<u8> {
    let mut out = b.to_vec();
    if binary {
        let tok = b"<GCONSTS> FV \x04";
        let mut i = 0;
        while let Some(at) = out[i..].windows(tok.len()).position(|w| w == tok) {
            let start = i + at + tok.len();
            let n = i32::from_le_bytes(out[start..start + 4].try_into().unwrap()) as usize;
            let end = (start + 4 + 4 * n).min(out.len());
            out[start + 4..end].fill(0);
            i = end;
        }
        return out;
    }
    let text = String::from_utf8_lossy(b);
    let mut masked = Vec::new();
    let mut in_gconsts = false;
    for t in text.split_whitespace() {
        match t {
            "<GCONSTS>" => in_gconsts = true,
            "]" if in_gconsts => in_gconsts = false,
            "[" => {}
            _ if in_gconsts => continue,
            _ => {}
        }
        masked.push(t);
    }
    masked.join(" ").into_bytes()
}

/// Plain-text records and logs of the fixture runs, which are no Kaldi objects.
fn is_record(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap();
    name == "README.md"
        || name.ends_with(".log")
        || name.ends_with(".tsv")
        || name.ends_with(".int")
        || name.ends_with(".csl")
        || name.ends_with("info.txt")
        || matches!(
            name,
            "text" | "spk2utt" | "utt2spk" | "show-transitions.txt" | "wer.txt" | "best_words.txt"
        )
}

fn is_lattice(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap();
    name.starts_with("lat")
}

/// Kaldi's own text form of a binary file, where the fixtures have one beside
/// it (`X.txt` or `X` with its extension replaced by `.txt`).
fn text_twin(
    path: &Path,
    rel: &str,
    input: &[String],
    tmp: &Path,
    report: &mut Vec<String>,
) -> Result<(), String> {
    let with_txt = PathBuf::from(format!("{}.txt", path.display()));
    let replaced = path.with_extension("txt");
    let Some(twin) = [with_txt, replaced]
        .into_iter()
        .find(|p| p.exists() && p != path)
    else {
        return Ok(());
    };
    let kaldi = std::fs::read(&twin).unwrap();
    if kaldi.starts_with(b"\0B") {
        return Ok(());
    }
    let out = tmp.join("text").display().to_string();
    // As amtool copy, then as copy-matrix (which reads every matrix as float:
    // Kaldi's text of a double matrix made by copy-matrix has float digits).
    let mut last = String::new();
    for tool in ["amtool-copy", "copy-matrix"] {
        let mut args = vec!["copy".to_string(), format!("--kaldi-tool={tool}")];
        if input[0].starts_with("ark:") {
            args.push(input[0].clone());
            args.push(format!("ark,t:{out}"));
        } else {
            args.push("--binary=false".into());
            args.push(input[0].clone());
            args.push(out.clone());
        }
        let (code, err) = amtool(&args);
        if code != 0 {
            return Err(format!("{rel}: text copy failed: {err}"));
        }
        let (a, b) = (tokens(&std::fs::read(&out).unwrap()), tokens(&kaldi));
        if a == b {
            report.push(format!(
                "  its text form (as {tool}) equals Kaldi's {}",
                twin.display()
            ));
            return Ok(());
        }
        let i = a
            .iter()
            .zip(&b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        last = format!("as {tool}, token {i}: {:?} vs {:?}", a.get(i), b.get(i));
    }
    Err(format!(
        "{rel}: our text differs from Kaldi's {}: {last}",
        twin.display()
    ))
}

/// Outcome of one file, for the report.
fn check_file(
    root: &Path,
    path: &Path,
    tmp: &Path,
    report: &mut Vec<String>,
) -> Result<(), String> {
    let rel = path.strip_prefix(root).unwrap().display().to_string();
    let bytes = std::fs::read(path).unwrap();
    let f = path.display().to_string();
    let out = tmp.join("out").display().to_string();
    let _ = std::fs::remove_file(&out);
    if is_record(&rel) {
        report.push(format!("record (not a Kaldi object): {rel}"));
        return Ok(());
    }
    if is_lattice(&rel) {
        report.push(format!(
            "lattice (formats::kaldi::lattice, not checked here): {rel}"
        ));
        return Ok(());
    }
    let binary =
        bytes.starts_with(b"\0B") || amtool_formats::htk::param::ParamFile::looks_like(&bytes);
    let (code, err) = amtool(&[
        "copy".into(),
        format!("--binary={binary}"),
        f.clone(),
        out.clone(),
    ]);
    let same = |got: &[u8], bin: bool| {
        let exact = if bin {
            got == &bytes[..]
        } else {
            tokens(got) == tokens(&bytes)
        };
        exact || without_gconsts(got, bin) == without_gconsts(&bytes, bin)
    };
    if code == 0 && err.contains("Copied HTK parameter file") {
        // copy-feats-to-htk output: our Kaldi matrix, written back as HTK by
        // copy-to-htk, must give the file again.
        let mut ark = b"k ".to_vec();
        ark.extend(std::fs::read(&out).unwrap());
        let ark_path = tmp.join("one.ark");
        std::fs::write(&ark_path, ark).unwrap();
        let hd = tmp.join("htk").display().to_string();
        let (code, err) = amtool(&[
            "copy-to-htk".into(),
            format!("--output-dir={hd}"),
            format!("ark:{}", ark_path.display()),
        ]);
        if code != 0 || std::fs::read(format!("{hd}/k.fea")).unwrap() != bytes {
            return Err(format!(
                "{rel}: HTK -> Kaldi -> HTK is not identical: {err}"
            ));
        }
        report.push(format!(
            "HTK parameter file, identical through a Kaldi matrix: {rel}"
        ));
        return Ok(());
    }
    if code == 0 {
        let got = std::fs::read(&out).unwrap();
        if !same(&got, binary) {
            return Err(format!("{rel}: copy is not identical to the original"));
        }
        report.push(format!("object, identical copy: {rel}"));
        if binary {
            text_twin(path, &rel, &[f.clone()], tmp, report)?;
        }
        return Ok(());
    }
    if !err.contains(&f) {
        return Err(format!("{rel}: the error does not name the file: {err}"));
    }
    if err.contains("give it as ark:FILE") {
        // A binary archive has "\0B" after its first key.
        let bin_ark = bytes
            .iter()
            .position(|&c| c == b' ')
            .is_some_and(|i| bytes[i + 1..].starts_with(b"\0B"));
        let w = if bin_ark {
            format!("ark:{out}")
        } else {
            format!("ark,t:{out}")
        };
        let (code, err) = amtool(&["copy".into(), format!("ark:{f}"), w]);
        if code != 0 {
            return Err(format!("{rel}: archive copy failed: {err}"));
        }
        if !same(&std::fs::read(&out).unwrap(), bin_ark) {
            return Err(format!("{rel}: archive copy is not identical"));
        }
        report.push(format!("archive, identical copy: {rel}"));
        if bin_ark {
            text_twin(path, &rel, &[format!("ark:{f}")], tmp, report)?;
        }
        return Ok(());
    }
    if err.contains("give it as scp:FILE") {
        // Relative locations are relative to the fixture root.
        let text = String::from_utf8_lossy(&bytes);
        let abs: String = text
            .lines()
            .map(|l| {
                let (k, loc) = l.split_once(' ').unwrap();
                if loc.starts_with('/') {
                    format!("{k} {loc}\n")
                } else {
                    format!("{k} {}/{loc}\n", root.display())
                }
            })
            .collect();
        let scp = tmp.join("abs.scp");
        std::fs::write(&scp, abs).unwrap();
        let (code, err) = amtool(&[
            "copy".into(),
            format!("scp:{}", scp.display()),
            format!("ark:{out}"),
        ]);
        if code == 0 {
            report.push(format!("script file, every entry read: {rel}"));
        } else if text
            .lines()
            .all(|l| l.split_once(' ').is_some_and(|(_, p)| p.starts_with('/')))
        {
            // Absolute paths of someone else's machine: the error names the missing file.
            let missing = text.split_whitespace().nth(1).unwrap();
            let missing = missing.rsplit_once(':').map_or(missing, |(p, _)| p);
            if !err.contains(missing) {
                return Err(format!("{rel}: error does not name {missing}: {err}"));
            }
            report.push(format!(
                "script file, its archive is absent (error names it): {rel}"
            ));
        } else {
            return Err(format!("{rel}: script copy failed: {err}"));
        }
        return Ok(());
    }
    if err.contains("gzip-compressed") {
        let (code, err) = amtool(&[
            "copy".into(),
            format!("ark:gunzip -c {f}|"),
            format!("ark:{out}"),
        ]);
        if code != 0 {
            return Err(format!("{rel}: gzipped archive copy failed: {err}"));
        }
        report.push(format!("gzipped archive, read through gunzip: {rel}"));
        return Ok(());
    }
    for what in [
        "ContextDependency tree",
        "OpenFst FST",
        "symbol table",
        "Questions",
        "TransitionModel only",
        "nnet model",
    ] {
        if err.contains(what) {
            report.push(format!("refused, says it holds a {what}: {rel}"));
            return Ok(());
        }
    }
    Err(format!("{rel}: unexpected failure: {err}"))
}

fn walk(root: &str, min_files: usize) {
    let root = Path::new(root);
    if !root.exists() {
        eprintln!("skipped: {} not present", root.display());
        return;
    }
    let mut files = Vec::new();
    files_under(root, &mut files);
    files.sort();
    let tmp = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    let failures: Vec<String> = files
        .iter()
        .filter_map(|p| check_file(root, p, tmp.path(), &mut report).err())
        .collect();
    for r in &report {
        eprintln!("{r}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(files.len() >= min_files, "only {} files", files.len());
}

#[test]
fn every_kaldi_fixture_file() {
    walk("../shared/fixtures/kaldi", 200);
}

#[test]
fn every_wild_kaldi_file() {
    walk("../shared/fixtures/wild/kaldi", 10);
}
