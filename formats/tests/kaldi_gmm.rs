//! Kaldi GMM objects against files written by Kaldi itself (testdata/kaldi is
//! copied from ../shared/fixtures/kaldi; see testdata/kaldi/README.md for the
//! command behind each file).
//!
//! Binary files read and written back must be byte-identical. Text written by
//! amtool must equal Kaldi's text form byte for byte (both print floats with
//! C++'s `%.7g` rule), which is stronger than "token for token, numbers equal
//! as f32".

use std::io::Read;
use std::path::Path;

use amtool_formats::kaldi::accs::{AccumDiagGmm, AccumFullGmm, AmAccs};
use amtool_formats::kaldi::gmm::{DiagGmm, FullGmm};
use amtool_formats::kaldi::model::{KaldiModel, ObjectKind};
use amtool_formats::kaldi::transition::Topology;

const TD: &str = "../testdata/kaldi";
const SHARED: &str = "../../shared/fixtures/kaldi";

fn load(path: impl AsRef<Path>) -> Vec<u8> {
    let path = path.as_ref();
    let raw = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        raw
    }
}

fn td(name: &str) -> Vec<u8> {
    load(Path::new(TD).join(name))
}

/// First differing line, for readable failures.
fn assert_same_text(ours: &[u8], kaldi: &[u8], what: &str) {
    if ours == kaldi {
        return;
    }
    let (a, b) = (
        String::from_utf8_lossy(ours),
        String::from_utf8_lossy(kaldi),
    );
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            let at = x
                .chars()
                .zip(y.chars())
                .position(|(p, q)| p != q)
                .unwrap_or(x.len().min(y.len()));
            let lo = at.saturating_sub(60);
            panic!(
                "{what}: text differs at line {}:\n ours:  ...{}\n kaldi: ...{}",
                i + 1,
                &x[lo..(at + 60).min(x.len())],
                &y[lo..(at + 60).min(y.len())]
            );
        }
    }
    panic!(
        "{what}: text differs in length: ours {} bytes, kaldi {} bytes",
        ours.len(),
        kaldi.len()
    );
}

/// Spans of `buf` (a binary Kaldi object) holding the floats of a
/// `<GCONSTS>` vector.
fn binary_gconst_spans(buf: &[u8]) -> Vec<std::ops::Range<usize>> {
    let tok = b"<GCONSTS> FV \x04";
    let mut spans = Vec::new();
    let mut i = 0;
    while let Some(at) = buf[i..].windows(tok.len()).position(|w| w == tok) {
        let start = i + at + tok.len();
        let n = i32::from_le_bytes(buf[start..start + 4].try_into().unwrap()) as usize;
        spans.push(start + 4..start + 4 + 4 * n);
        i = start + 4;
    }
    spans
}

/// A GMM file written back after Kaldi's `Read` recomputed the gconsts:
/// `ours` must equal `theirs` everywhere but in the gconsts (text: the
/// `<GCONSTS>` lines; binary: the bytes of the `<GCONSTS>` vectors).
fn assert_same_but_gconsts(ours: &[u8], theirs: &[u8], binary: bool, what: &str) {
    if binary {
        assert_eq!(ours.len(), theirs.len(), "{what}: lengths differ");
        let spans = binary_gconst_spans(theirs);
        for (k, (a, b)) in ours.iter().zip(theirs).enumerate() {
            assert!(
                a == b || spans.iter().any(|s| s.contains(&k)),
                "{what}: byte {k} differs outside the gconsts"
            );
        }
    } else {
        let (a, b) = (
            String::from_utf8_lossy(ours),
            String::from_utf8_lossy(theirs),
        );
        assert_eq!(
            a.lines().count(),
            b.lines().count(),
            "{what}: line counts differ"
        );
        for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
            assert!(
                x == y || (x.starts_with("<GCONSTS>") && y.starts_with("<GCONSTS>")),
                "{what}: line {} differs outside the gconsts",
                i + 1
            );
        }
    }
}

/// Generic checks for one (binary, text) pair of the same object.
/// `text_again` is what Kaldi writes when it reads its own text form and
/// writes text again, where that is not the text itself: a diagonal GMM's
/// `Read` recomputes the gconsts, here from the 7-digit parameters
/// (`gmm-copy --binary=false` of the text, testdata/kaldi/README.md).
fn check_pair<T, R, W>(
    bin: &[u8],
    txt: Option<&[u8]>,
    text_again: Option<&[u8]>,
    read: R,
    write: W,
    what: &str,
) where
    T: PartialEq + std::fmt::Debug,
    R: Fn(&[u8]) -> amtool_formats::Result<T>,
    W: Fn(&T, bool) -> Vec<u8>,
{
    let obj = read(bin).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        write(&obj, true),
        bin,
        "{what}: binary written back is not byte-identical"
    );
    // binary -> text -> binary: text keeps 7 digits, so compare text forms.
    let text = write(&obj, false);
    let again = read(&text).unwrap_or_else(|e| panic!("{what} (our text): {e}"));
    if text_again.is_none() {
        assert_eq!(
            write(&again, false),
            text,
            "{what}: text -> read -> text is not stable"
        );
    }
    if let Some(txt) = txt {
        assert_same_text(&text, txt, what);
        let from_text = read(txt).unwrap_or_else(|e| panic!("{what} (Kaldi's text): {e}"));
        let want = text_again.unwrap_or(txt);
        assert_same_text(
            &write(&from_text, false),
            want,
            &format!("{what} (Kaldi's text read and written back)"),
        );
        // Our text is Kaldi's, so reading it must give what Kaldi gives.
        assert_same_text(
            &write(&again, false),
            want,
            &format!("{what} (our text read and written back)"),
        );
    }
}

#[test]
fn model_files_roundtrip() {
    for name in ["final.mdl", "init.mdl"] {
        let bin = td(name);
        let txt = td(&format!("{name}.txt.gz"));
        let again = (name == "final.mdl").then(|| td("final.mdl.txt.recopied.txt.gz"));
        check_pair(
            &bin,
            Some(&txt),
            again.as_deref(),
            KaldiModel::from_bytes,
            KaldiModel::to_bytes,
            name,
        );
    }
}

#[test]
fn final_mdl_structure_matches_kaldi_logs() {
    let m = KaldiModel::from_bytes(&td("final.mdl")).unwrap();
    // README: "63 pdfs, 514 Gaussians, min 1 max 138", dimension 39, <Triples> 258.
    assert_eq!(m.am.num_pdfs(), 63);
    assert_eq!(m.am.num_gauss(), 514);
    assert_eq!(m.am.dim, 39);
    assert_eq!(m.trans.num_pdfs(), 63);
    assert_eq!(m.trans.num_transition_states(), 258);
    assert!(m.trans.topology().is_hmm());
    let counts: Vec<usize> = m.am.pdfs.iter().map(|p| p.num_gauss()).collect();
    assert_eq!(counts.iter().min(), Some(&1));
    assert_eq!(counts.iter().max(), Some(&138));
    // gmm-info.txt (written by Kaldi's gmm-info) gives the transition-id count.
    let info = Path::new(SHARED).join("model1/model/gmm-info.txt");
    if !info.exists() {
        eprintln!("skipped: {} not present", info.display());
        return;
    }
    let info = load(info);
    let info = String::from_utf8_lossy(&info);
    for line in info.lines() {
        if let Some(n) = line.strip_prefix("number of transition-ids ") {
            assert_eq!(
                n.trim().parse::<usize>().unwrap(),
                m.trans.num_transition_ids()
            );
        }
        if let Some(n) = line.strip_prefix("number of transition-states ") {
            assert_eq!(
                n.trim().parse::<usize>().unwrap(),
                m.trans.num_transition_states()
            );
        }
    }
}

/// The trainer's view of transition-ids must agree with Kaldi's `ali-to-pdf`:
/// model1/ali/ali.txt (transition-ids) and pdf_ali.txt (pdf-ids), same model.
#[test]
fn transition_ids_map_to_pdfs_as_ali_to_pdf_does() {
    let (ali, pdf) = (
        Path::new(SHARED).join("model1/ali/ali.txt"),
        Path::new(SHARED).join("model1/ali/pdf_ali.txt"),
    );
    if !ali.exists() || !pdf.exists() {
        eprintln!("skipped: {} not present", ali.display());
        return;
    }
    let m = KaldiModel::from_bytes(&td("final.mdl")).unwrap();
    let (ali, pdf) = (
        String::from_utf8(load(ali)).unwrap(),
        String::from_utf8(load(pdf)).unwrap(),
    );
    let mut n = 0;
    for (a, p) in ali.lines().zip(pdf.lines()) {
        let a: Vec<&str> = a.split_whitespace().collect();
        let p: Vec<&str> = p.split_whitespace().collect();
        assert_eq!(a[0], p[0]);
        assert_eq!(a.len(), p.len());
        for (t, q) in a[1..].iter().zip(&p[1..]) {
            let tid: i32 = t.parse().unwrap();
            assert_eq!(
                m.trans.transition_id_to_pdf(tid),
                Some(q.parse().unwrap()),
                "tid {tid}"
            );
            n += 1;
        }
    }
    assert!(n > 1000);
}

#[test]
fn topology_file_reads_and_writes_back() {
    let topo = Topology::from_bytes(&td("topo")).unwrap();
    assert_eq!(topo.entries.len(), 2);
    assert_eq!(topo.phones.len(), 86);
    // The topology inside final.mdl is the same object.
    let m = KaldiModel::from_bytes(&td("final.mdl")).unwrap();
    assert_eq!(m.trans.topology(), &topo);
    // Kaldi's text form (gmm-copy --binary=false) of the topology:
    let txt = String::from_utf8(topo.to_bytes(false)).unwrap();
    let model_txt = String::from_utf8(td("final.mdl.txt.gz")).unwrap();
    assert!(
        model_txt.contains(&txt),
        "topology text not found in Kaldi's model text"
    );
    assert_eq!(Topology::from_bytes(&topo.to_bytes(true)).unwrap(), topo);
}

#[test]
fn diag_gmm_files_roundtrip() {
    check_pair(
        &td("ubm.0.dubm"),
        Some(&td("ubm.0.dubm.txt.gz")),
        Some(&td("ubm.0.dubm.txt.recopied.txt.gz")),
        DiagGmm::from_bytes,
        DiagGmm::to_bytes,
        "ubm.0.dubm",
    );
}

/// A diagonal GMM whose stored gconsts are stale (three edited in Kaldi's
/// text form) reads as Kaldi reads it: the gconsts recomputed from the
/// parameters. `gmm-global-copy` of it is Kaldi's binary copy byte for byte
/// (the same bytes Kaldi writes from the unedited text).
#[test]
fn stale_gconsts_are_recomputed_as_kaldi_does() {
    let stale = DiagGmm::from_bytes(&td("ubm.0.stale_gconsts.txt.gz")).unwrap();
    let kaldi = td("ubm.0.stale_gconsts.kaldi-copy.dubm");
    assert!(stale.to_bytes(true) == kaldi, "not Kaldi's copy");
    // The same in a model: the first gconst of pdf 0 edited in the text.
    let text = String::from_utf8(td("final.mdl.txt.gz")).unwrap();
    let mut edited = text.clone();
    let at = text.find("<GCONSTS>  [ ").unwrap() + "<GCONSTS>  [ ".len();
    let end = at + text[at..].find(' ').unwrap();
    edited.replace_range(at..end, "1000");
    let read = |t: &str| KaldiModel::from_bytes(t.as_bytes()).unwrap().to_bytes(true);
    assert!(
        read(&edited) == read(&text),
        "an edited gconst changed the model"
    );
}

/// Kaldi's `FullGmm::Read` recomputes the gconsts too (its text copy of
/// fubm.0.fubm.txt differs from it in the last digits); this reader keeps
/// the stored ones, and amtool's tools replace those that disagree with
/// the parameters (`model::kaldi::read_full_gmm`: amtool cannot recompute a
/// full GMM's gconsts bit for bit, a DiagGmm's it can).
#[test]
fn full_gmm_files_roundtrip() {
    check_pair(
        &td("fubm.0.fubm.gz"),
        Some(&td("fubm.0.fubm.txt.gz")),
        None,
        FullGmm::from_bytes,
        FullGmm::to_bytes,
        "fubm.0.fubm",
    );
}

#[test]
fn am_accs_roundtrip() {
    check_pair(
        &td("all.acc"),
        Some(&td("all.acc.txt.gz")),
        None,
        AmAccs::from_bytes,
        AmAccs::to_bytes,
        "all.acc",
    );
    let a = AmAccs::from_bytes(&td("all.acc")).unwrap();
    assert_eq!(a.gmm.pdfs.len(), 63);
    // gmm-acc-stats-ali's log: "Overall avg like per frame ... over 8445 frames"
    assert_eq!(a.gmm.total_frames, 8445.0);
    let m = KaldiModel::from_bytes(&td("final.mdl")).unwrap();
    assert_eq!(a.transition_accs.len(), m.trans.num_transition_ids() + 1);
    for (acc, pdf) in a.gmm.pdfs.iter().zip(&m.am.pdfs) {
        assert_eq!(acc.num_comp, pdf.num_gauss());
        assert_eq!(acc.dim, 39);
    }
}

#[test]
fn diag_accs_roundtrip() {
    check_pair(
        &td("ubm.0.acc"),
        Some(&td("ubm.0.acc.txt.gz")),
        None,
        AccumDiagGmm::from_bytes,
        AccumDiagGmm::to_bytes,
        "ubm.0.acc",
    );
}

#[test]
fn full_accs_roundtrip() {
    let txt = Path::new(SHARED).join("ubm/fubm.0.acc.txt");
    let txt = txt.exists().then(|| load(txt));
    if txt.is_none() {
        eprintln!("skipped: text form of fubm.0.acc (../shared not present); binary checked only");
    }
    check_pair(
        &td("fubm.0.acc.gz"),
        txt.as_deref(),
        None,
        AccumFullGmm::from_bytes,
        AccumFullGmm::to_bytes,
        "fubm.0.acc",
    );
}

#[test]
fn gconsts_recomputed_bit_exactly() {
    // Kaldi recomputes gconsts on every read; the stored ones were computed by
    // the same function, so ours must reproduce them bit for bit.
    let m = KaldiModel::from_bytes(&td("final.mdl")).unwrap();
    let u = DiagGmm::from_bytes(&td("ubm.0.dubm")).unwrap();
    let mut n = 0;
    for g in m.am.pdfs.iter().chain(std::iter::once(&u)) {
        let mut h = g.clone();
        h.compute_gconsts().unwrap();
        for (i, (a, b)) in g.gconsts.iter().zip(&h.gconsts).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "gconst {i}: stored {a}, computed {b}"
            );
            n += 1;
        }
    }
    assert_eq!(n, 514 + 64);
}

#[test]
fn detection_by_first_token() {
    assert_eq!(ObjectKind::detect(&td("final.mdl")), ObjectKind::Model);
    assert_eq!(
        ObjectKind::detect(&td("final.mdl.txt.gz")),
        ObjectKind::Model
    );
    assert_eq!(ObjectKind::detect(&td("ubm.0.dubm")), ObjectKind::DiagGmm);
    assert_eq!(
        ObjectKind::detect(&td("fubm.0.fubm.gz")),
        ObjectKind::FullGmm
    );
    assert_eq!(ObjectKind::detect(&td("all.acc")), ObjectKind::AmAccs);
    assert_eq!(
        ObjectKind::detect(&td("all.acc.txt.gz")),
        ObjectKind::AmAccs
    );
    assert_eq!(ObjectKind::detect(&td("ubm.0.acc")), ObjectKind::DiagAccs);
    assert_eq!(
        ObjectKind::detect(&td("ubm.0.acc.txt.gz")),
        ObjectKind::DiagAccs
    );
    assert_eq!(
        ObjectKind::detect(&td("fubm.0.acc.gz")),
        ObjectKind::FullAccs
    );
    assert_eq!(ObjectKind::detect(&td("topo")), ObjectKind::Topology);
    assert_eq!(ObjectKind::detect(&td("final.occs")), ObjectKind::Vector);
}

/// Every model / GMM / accumulator file in ../shared/fixtures/kaldi (not only
/// the copies in testdata): parse, and binary ones write back byte-identically.
#[test]
fn all_shared_fixtures_parse() {
    let root = Path::new(SHARED);
    if !root.exists() {
        eprintln!("skipped: {} not present", root.display());
        return;
    }
    let mut files = Vec::new();
    for dir in ["model1/model", "model1/est", "model1/acc", "ubm"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut checked = 0;
    for f in files {
        let buf = load(&f);
        let name = f.display().to_string();
        let kind = ObjectKind::detect(&buf);
        let binary = buf.starts_with(b"\0B");
        let back = match kind {
            ObjectKind::Model => KaldiModel::from_bytes(&buf).map(|o| o.to_bytes(binary)),
            ObjectKind::DiagGmm => DiagGmm::from_bytes(&buf).map(|o| o.to_bytes(binary)),
            ObjectKind::FullGmm => FullGmm::from_bytes(&buf).map(|o| o.to_bytes(binary)),
            ObjectKind::AmAccs => AmAccs::from_bytes(&buf).map(|o| o.to_bytes(binary)),
            ObjectKind::DiagAccs => AccumDiagGmm::from_bytes(&buf).map(|o| o.to_bytes(binary)),
            ObjectKind::FullAccs => AccumFullGmm::from_bytes(&buf).map(|o| o.to_bytes(binary)),
            ObjectKind::Topology => Topology::from_bytes(&buf).map(|o| o.to_bytes(binary)),
            _ => continue,
        };
        let back = back.unwrap_or_else(|e| panic!("{name}: {e}"));
        if matches!(kind, ObjectKind::Model | ObjectKind::DiagGmm) && !binary {
            // Kaldi's text keeps 7 digits; its Read recomputes the gconsts
            // from them, and so does amtool's (checked to the byte against
            // Kaldi's own copies in model_files_roundtrip and
            // diag_gmm_files_roundtrip).
            assert_same_but_gconsts(&back, &buf, binary, &name);
        } else if binary {
            assert!(
                back == buf,
                "{name}: binary written back is not byte-identical"
            );
        } else if !name.ends_with("/topo") {
            // The topo file is hand-written (no trailing spaces); the rest is Kaldi's text.
            assert_same_text(&back, &buf, &name);
        }
        eprintln!("ok: {name} ({})", kind.describe());
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} files checked");
}

/// Real-world files from public repositories (never copied into the project):
/// GMM models parse and write back byte-identically; trees, question files and
/// nnet transition models get an error that says what they hold.
#[test]
fn wild_kaldi_files() {
    let root = Path::new("../../shared/fixtures/wild/kaldi");
    if !root.exists() {
        eprintln!("skipped: {} not present", root.display());
        return;
    }
    let mut seen = 0;
    for e in std::fs::read_dir(root).unwrap() {
        let f = e.unwrap().path();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let buf = std::fs::read(&f).unwrap();
        let binary = buf.starts_with(b"\0B");
        let as_model = KaldiModel::from_bytes(&buf);
        if name.ends_with(".mdl") {
            let m = as_model.unwrap_or_else(|e| panic!("{name}: {e}"));
            // Another machine's Kaldi computed the stored gconsts; Kaldi's
            // gmm-copy here recomputes them, and so does amtool (yesno's
            // 40.mdl: Kaldi f4007661's copy differs from the file in the
            // gconsts only, and amtool's copy is Kaldi's, byte for byte,
            // checked by hand on 2026-11-27).
            assert_same_but_gconsts(&m.to_bytes(binary), &buf, binary, &name);
            eprintln!(
                "ok: {name}: {} pdfs, {} Gaussians",
                m.am.num_pdfs(),
                m.am.num_gauss()
            );
        } else if name.contains("tree") {
            let e = as_model.unwrap_err().to_string();
            assert!(
                e.contains("ContextDependency tree (decision tree), which amtool does not read"),
                "{name}: {e}"
            );
            eprintln!("ok: {name}: {e}");
        } else if name.contains("questions") {
            let e = as_model.unwrap_err().to_string();
            assert!(e.contains("Questions"), "{name}: {e}");
            eprintln!("ok: {name}: {e}");
        } else if name.contains("mlp_final.mdl") {
            let e = as_model.unwrap_err().to_string();
            assert!(e.contains("TransitionModel only"), "{name}: {e}");
            eprintln!("ok: {name}: {e}");
        } else if name.ends_with("topo") {
            let t = Topology::from_bytes(&buf).unwrap_or_else(|e| panic!("{name}: {e}"));
            eprintln!("ok: {name}: topology of {} phones", t.phones.len());
        } else {
            continue;
        }
        seen += 1;
    }
    assert!(seen >= 5);
}

/// Byte offset in an error message ("at byte N").
fn err_byte(e: &amtool_formats::Error) -> u64 {
    let s = e.to_string();
    let i = s
        .find("at byte ")
        .unwrap_or_else(|| panic!("no byte offset in: {s}"));
    s[i + 8..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn truncated_files_are_errors_with_positions() {
    for name in [
        "final.mdl",
        "all.acc",
        "ubm.0.dubm",
        "fubm.0.fubm.gz",
        "ubm.0.acc",
        "fubm.0.acc.gz",
    ] {
        let buf = td(name);
        let kind = ObjectKind::detect(&buf);
        // Every prefix at a spread of lengths (and a few around the end).
        let mut cuts: Vec<usize> = (3..buf.len()).step_by(buf.len() / 97 + 1).collect();
        cuts.extend(buf.len().saturating_sub(12)..buf.len());
        for cut in cuts {
            let b = &buf[..cut];
            let r = match kind {
                ObjectKind::Model => KaldiModel::from_bytes(b).map(|_| ()),
                ObjectKind::AmAccs => AmAccs::from_bytes(b).map(|_| ()),
                ObjectKind::DiagGmm => DiagGmm::from_bytes(b).map(|_| ()),
                ObjectKind::FullGmm => FullGmm::from_bytes(b).map(|_| ()),
                ObjectKind::DiagAccs => AccumDiagGmm::from_bytes(b).map(|_| ()),
                ObjectKind::FullAccs => AccumFullGmm::from_bytes(b).map(|_| ()),
                k => panic!("{name}: {k:?}"),
            };
            let e = r.expect_err(&format!("{name} cut at {cut} parsed"));
            assert!(err_byte(&e) <= cut as u64, "{name} cut at {cut}: {e}");
        }
    }
}

/// Replace the first `from` in Kaldi's text form by `to`, parse, return the
/// error and the offset of the replaced text.
fn text_error<T: std::fmt::Debug>(
    name: &str,
    from: &str,
    to: &str,
    read: fn(&[u8]) -> amtool_formats::Result<T>,
) -> (String, u64) {
    let txt = String::from_utf8(td(name)).unwrap();
    let at = txt
        .find(from)
        .unwrap_or_else(|| panic!("{from} not in {name}"));
    let bad = format!("{}{}{}", &txt[..at], to, &txt[at + from.len()..]);
    let e = read(bad.as_bytes()).expect_err(&format!("{name} with {to} parsed"));
    let pos = err_byte(&e);
    (e.to_string(), pos.abs_diff(at as u64))
}

#[test]
fn wrong_tokens_are_named_with_their_position() {
    let (e, d) = text_error(
        "ubm.0.dubm.txt.gz",
        "<INV_VARS>",
        "<INV_VAXS>",
        DiagGmm::from_bytes,
    );
    assert!(
        e.contains("expected token <INV_VARS>, found <INV_VAXS>") && d <= 2,
        "{e}"
    );
    let (e, d) = text_error(
        "final.mdl.txt.gz",
        "<Triples>",
        "<Quads>",
        KaldiModel::from_bytes,
    );
    assert!(
        e.contains("<Triples> or <Tuples>") && e.contains("<Quads>") && d <= 2,
        "{e}"
    );
    let (e, _) = text_error(
        "all.acc.txt.gz",
        "<MEANACCS>",
        "<MEANSACCS>",
        AmAccs::from_bytes,
    );
    assert!(
        e.contains("unexpected token '<MEANSACCS>'") && e.contains("pdf 0"),
        "{e}"
    );
    let (e, _) = text_error(
        "fubm.0.fubm.txt.gz",
        "<FullGMM>",
        "<DiagGMM>",
        FullGmm::from_bytes,
    );
    assert!(e.contains("expected <FullGMM>, found '<DiagGMM>'"), "{e}");
    // A binary model whose marker is damaged.
    let mut b = td("final.mdl");
    b[1] = b'X';
    let e = KaldiModel::from_bytes(&b).unwrap_err().to_string();
    assert!(e.contains("binary header"), "{e}");
}

#[test]
fn wrong_dims_are_errors() {
    let (e, _) = text_error(
        "ubm.0.acc.txt.gz",
        "<NUMCOMPONENTS> 64",
        "<NUMCOMPONENTS> 65",
        AccumDiagGmm::from_bytes,
    );
    assert!(
        e.contains("wrong dims") && e.contains("<OCCUPANCY> has 64 entries"),
        "{e}"
    );
    let (e, _) = text_error(
        "final.mdl.txt.gz",
        "<DIMENSION> 39",
        "<DIMENSION> 40",
        KaldiModel::from_bytes,
    );
    assert!(e.contains("wrong dims") && e.contains("pdf 0"), "{e}");
    let (e, _) = text_error(
        "final.mdl.txt.gz",
        "<NUMPDFS> 63",
        "<NUMPDFS> 62",
        KaldiModel::from_bytes,
    );
    assert!(e.contains("wrong dims") && e.contains("62 pdfs"), "{e}");
    let (e, _) = text_error(
        "ubm.0.acc.txt.gz",
        "<VECSIZE> 39",
        "<VECSIZE> 38",
        AccumDiagGmm::from_bytes,
    );
    assert!(
        e.contains("wrong dims") && e.contains("<MEANACCS> is 64 x 39"),
        "{e}"
    );
    let (e, _) = text_error(
        "init.mdl.txt.gz",
        "]\n</LogProbs>",
        "-0.5 ]\n</LogProbs>",
        KaldiModel::from_bytes,
    );
    assert!(e.contains("wrong dims") && e.contains("<LogProbs>"), "{e}");
}

#[test]
fn negative_counts_are_errors() {
    let (e, d) = text_error(
        "final.mdl.txt.gz",
        "<NUMPDFS> 63",
        "<NUMPDFS> -63",
        KaldiModel::from_bytes,
    );
    assert!(
        e.contains("<NUMPDFS> must be positive, found -63") && d <= 12,
        "{e}"
    );
    let (e, _) = text_error(
        "final.mdl.txt.gz",
        "<Triples> 258",
        "<Triples> -258",
        KaldiModel::from_bytes,
    );
    assert!(e.contains("negative <Triples> count -258"), "{e}");
    let (e, _) = text_error(
        "ubm.0.acc.txt.gz",
        "<NUMCOMPONENTS> 64",
        "<NUMCOMPONENTS> -64",
        AccumDiagGmm::from_bytes,
    );
    assert!(e.contains("<NUMCOMPONENTS> must be positive"), "{e}");
    let (e, _) = text_error(
        "all.acc.txt.gz",
        "<NUMPDFS> 63",
        "<NUMPDFS> -1",
        AmAccs::from_bytes,
    );
    assert!(e.contains("negative <NUMPDFS> -1"), "{e}");
    // Binary: a negative matrix row count inside the first DiagGMM.
    let mut b = td("ubm.0.dubm");
    let at = b.windows(3).position(|w| w == b"FM ").unwrap() + 4;
    b[at..at + 4].copy_from_slice(&(-5i32).to_le_bytes());
    let e = DiagGmm::from_bytes(&b).unwrap_err();
    assert!(
        e.to_string().contains("negative number of rows -5") && err_byte(&e) == at as u64 - 1,
        "{e}"
    );
}

/// `final.occs` (gmm-est --write-occs): a float vector, one occupancy per pdf.
#[test]
fn occs_vector_matches_the_model() {
    use amtool_formats::kaldi::matrix::Vector;
    use amtool_formats::kaldi::object::{object_to_bytes, read_object};
    let buf = td("final.occs");
    let occs: Vector<f32> = read_object(&buf).unwrap();
    let m = KaldiModel::from_bytes(&td("final.mdl")).unwrap();
    assert_eq!(occs.len(), m.am.num_pdfs());
    assert_eq!(object_to_bytes(&occs, false), buf);
    let back: Vector<f32> = read_object(&object_to_bytes(&occs, true)).unwrap();
    assert_eq!(back, occs);
    let est = Path::new(SHARED).join("model1/est/est.occs");
    if est.exists() {
        let b = load(est);
        let v: Vector<f32> = read_object(&b).unwrap();
        assert_eq!(object_to_bytes(&v, b.starts_with(b"\0B")), b);
    }
}

/// fgmm-global-acc-stats stores centred second-order statistics; un-centring
/// them gives Σγxxᵀ whose diagonal, divided by γ, minus the squared mean is a
/// variance (non-negative), and centring again gives the stored block back.
#[test]
fn full_accs_uncentering() {
    let a = AccumFullGmm::from_bytes(&td("fubm.0.acc.gz")).unwrap();
    let u = a.uncentered_covar_accs();
    let (d, plen) = (a.dim, a.packed_len());
    for i in 0..a.num_comp {
        let occ = a.occupancy[i];
        if occ < 1.0 {
            continue;
        }
        for r in 0..d {
            let k = r * (r + 1) / 2 + r;
            let mean = a.mean_accs[i * d + r] / occ;
            let var = u[i * plen + k] / occ - mean * mean;
            assert!(
                var > -1e-3 * (mean * mean).max(1.0),
                "component {i} dim {r}: variance {var}"
            );
        }
    }
    let mut b = a.clone();
    b.set_uncentered_covar_accs(&u).unwrap();
    for (x, y) in b.centered_covar_accs.iter().zip(&a.centered_covar_accs) {
        assert!(
            (x - y).abs() <= 1e-9 * y.abs().max(1.0) + 1e-6,
            "{x} vs {y}"
        );
    }
}

/// Files that are no single Kaldi object say what they are (so `amtool copy`
/// can tell the user to write `ark:FILE`, `scp:FILE` or a gunzip pipe).
#[test]
fn non_objects_are_named() {
    let cases: [(&[u8], &str); 9] = [
        (b"\x1f\x8b\x08\x00rest", "gzip-compressed"),
        (&[0xd6, 0xfd, 0xb2, 0x7e, 6, 0, 0, 0], "OpenFst FST"),
        (
            b"utt1 \xd6\xfd\xb2\x7e\x06\0\0\0vector",
            "archive of OpenFst FSTs",
        ),
        (
            b"utt1 \0BFM \x04\0\0\0\0\x04\0\0\0\0",
            "give it as ark:FILE",
        ),
        (b"utt1  [\n 1 2 ]\n", "text archive"),
        (b"utt1 <DIMENSION> 39 <NUMPDFS> 1\n", "text archive"),
        (b"<eps> 0\nSIL 1\nY 2\n", "symbol table"),
        (b"u1 feats.ark:8\nu2 feats.ark:900\n", "give it as scp:FILE"),
        (b"u1 1 1 2 3\nu2 4 5\n", "text archive of integer vectors"),
    ];
    for (bytes, want) in cases {
        let k = ObjectKind::detect(bytes);
        let e = k.mismatch_error("x", "a GMM").to_string();
        assert!(
            e.contains(want),
            "{:?}: {e}",
            String::from_utf8_lossy(bytes)
        );
    }
    let e = ObjectKind::detect(b"u1 -79.5\nu2 -80.25\n").describe();
    assert!(e.contains("text archive (KEY value per line)"), "{e}");
    assert_eq!(ObjectKind::detect(b"hello"), ObjectKind::Unknown);
}
