//! `amtool copy` on tables of OpenFst training graphs (fstcopy): binary and
//! text, archives, gz pipes and scripts, against real Kaldi outputs
//! (testdata/kaldi/ali: compile-train-graphs' archive, fstcopy's text form
//! of it, and fstcopy's binary re-reading of that text).

mod common;
use common::*;

const GRAPHS: &str = "testdata/kaldi/ali/graphs.fsts.ark";

#[test]
fn binary_graphs_copy_byte_for_byte_through_ark_pipe_and_scp() {
    let d = tmp();
    let out = path(&d, "g.ark");
    let log = ok(&["copy", &format!("ark:{GRAPHS}"), &format!("ark:{out}")]);
    assert!(log.contains("Copied 40 objects (FST)."), "{log}");
    assert_eq!(read(&out), read(GRAPHS));
    // Through a gz pipe into ark+scp, then back out of the scp.
    let gz = path(&d, "g.ark.gz");
    ok(&[
        "copy",
        &format!("ark:{GRAPHS}"),
        &format!("ark:| gzip -c > {gz}"),
    ]);
    let (ark, scp) = (path(&d, "s.ark"), path(&d, "s.scp"));
    ok(&[
        "copy",
        &format!("ark:gunzip -c {gz}|"),
        &format!("ark,scp:{ark},{scp}"),
    ]);
    let back = path(&d, "back.ark");
    ok(&["copy", &format!("scp:{scp}"), &format!("ark:{back}")]);
    assert_eq!(read(&back), read(GRAPHS));
}

#[test]
fn text_form_is_fstcopys() {
    let d = tmp();
    let txt = path(&d, "g.txt");
    ok(&["copy", &format!("ark:{GRAPHS}"), &format!("ark,t:{txt}")]);
    assert_eq!(read(&txt), gunzip("testdata/kaldi/ali/graphs.fsts.txt.gz"));
    // Text back to binary: the properties are recomputed as OpenFst does, so
    // the bytes are fstcopy's from the same text.
    let bin = path(&d, "g.ark");
    ok(&["copy", &format!("ark,t:{txt}"), &format!("ark:{bin}")]);
    assert_eq!(
        read(&bin),
        gunzip("testdata/kaldi/ali/graphs.fromtext.ark.gz")
    );
}

#[test]
fn truncated_graph_archive_names_key_and_offset() {
    let d = tmp();
    let cut = path(&d, "cut.ark");
    let raw = read(GRAPHS);
    std::fs::write(&cut, &raw[..raw.len() - 10]).unwrap();
    let out = path(&d, "o.ark");
    let (code, log) = run(&["copy", &format!("ark:{cut}"), &format!("ark:{out}")]);
    assert_ne!(code, 0);
    assert!(log.contains("s04-010") && log.contains("byte"), "{log}");
    assert!(!std::path::Path::new(&out).exists(), "no partial output");
}

/// fstcopy and lattice-copy read a text table as FSTs and lattices: a bad
/// line in its first entry is reported in that entry, at that line (it was
/// taken for an empty integer vector, and the error blamed the next line
/// as an object named '0').
#[test]
fn bad_line_in_first_text_entry_is_named_where_it_is() {
    let d = tmp();
    let cases = [
        ("fstcopy", "testdata/kaldi/ali/graphs.fsts.txt.gz", 2),
        ("lattice-copy", "testdata/kaldi/lattice/lat.txt.gz", 2),
    ];
    for (tool, text, line) in cases {
        let good = String::from_utf8(gunzip(text)).unwrap();
        let mut lines: Vec<String> = good.lines().map(str::to_string).collect();
        lines[line] = format!("{}\tabc", lines[line]);
        let bad = path(&d, "bad.txt");
        std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
        let key = lines[0].trim();
        let at: usize = lines[..line].iter().map(|l| l.len() + 1).sum();
        let out = path(&d, "o.ark");
        let (code, log) = run(&[
            "copy",
            &format!("--kaldi-tool={tool}"),
            &format!("ark,t:{bad}"),
            &format!("ark:{out}"),
        ]);
        assert_ne!(code, 0, "{tool}");
        assert!(
            log.contains(&format!("(object '{key}') at byte {at}")) && log.contains("bad line"),
            "{tool}: {log}"
        );
    }
}
