//! Every feature-side Kaldi file kind of the fixtures (copied as first-3-entry
//! subsets into testdata/kaldi/feats, see its README), read and written back:
//! binary byte-identical, text identical to Kaldi's own text output, compressed
//! matrices decoded and encoded as Kaldi does, and bad input rejected with the
//! file, key and byte offset.
//!
//! Tolerance: none. Binary comparisons are byte-for-byte; text comparisons are
//! byte-for-byte against Kaldi's `%.7g` output (so a decoded float is checked to
//! the 7 significant digits Kaldi printed; the compression test, which is
//! byte-exact, checks the same float arithmetic fully).

use std::io::Read;

use amtool_formats::kaldi::compressed::{CompressedMatrix, CompressionMethod};
use amtool_formats::kaldi::holder::{Basic, Holder, Int32Vector, Int32VectorVector, Posterior};
use amtool_formats::kaldi::matrix::{Matrix, Vector};
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader, TableWriter};

const DIR: &str = "../testdata/kaldi/feats";

fn path(name: &str) -> String {
    format!("{DIR}/{name}")
}

fn read_maybe_gz(name: &str) -> Vec<u8> {
    let p = path(name);
    let raw = std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    if p.ends_with(".gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        raw
    }
}

fn read_all<H: Holder>(rspec: &str) -> Vec<(String, H)> {
    SequentialTableReader::<H>::open(rspec)
        .unwrap_or_else(|e| panic!("{rspec}: {e}"))
        .collect::<amtool_formats::Result<Vec<_>>>()
        .unwrap_or_else(|e| panic!("{rspec}: {e}"))
}

/// Write entries through a TableWriter to a temporary file and return its bytes.
fn write_all<H: Holder>(entries: &[(String, H)], opts: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.ark");
    let mut w = TableWriter::<H>::open(&format!("ark{opts}:{}", out.display())).unwrap();
    for (k, v) in entries {
        w.write(k, v).unwrap();
    }
    w.close().unwrap();
    std::fs::read(out).unwrap()
}

fn assert_same(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let i = got
            .iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        let ctx = |b: &[u8]| {
            String::from_utf8_lossy(&b[i.saturating_sub(40)..(i + 40).min(b.len())]).into_owned()
        };
        panic!(
            "{what}: differs at byte {i} (lengths {} vs {})\n got: {:?}\nwant: {:?}",
            got.len(),
            want.len(),
            ctx(got),
            ctx(want)
        );
    }
}

#[test]
fn float_and_double_matrices_binary_byte_identical() {
    for f in [
        "feats.first3.ark",
        "feats_cmvn.first3.ark",
        "feats_cmvn_deltas.first3.ark",
        "feats_deltas.first3.ark",
        "feats_cmvn_normvars.first3.ark",
    ] {
        let e = read_all::<Matrix<f32>>(&format!("ark:{}", path(f)));
        assert_eq!(e.len(), 3, "{f}");
        assert_same(&write_all(&e, ""), &read_maybe_gz(f), f);
    }
    let e = read_all::<Matrix<f64>>(&format!("ark:{}", path("cmvn.ark")));
    assert_eq!(e.len(), 4);
    assert_same(&write_all(&e, ""), &read_maybe_gz("cmvn.ark"), "cmvn.ark");
}

#[test]
fn text_matrices_identical_to_kaldi_text() {
    let e = read_all::<Matrix<f32>>(&format!("ark:{}", path("feats.first3.ark")));
    let want = read_maybe_gz("feats.first3.txt.gz");
    assert_same(&write_all(&e, ",t"), &want, "feats text");
    // Reading Kaldi's text and writing it again gives the same text.
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("f.txt");
    std::fs::write(&t, &want).unwrap();
    let back = read_all::<Matrix<f32>>(&format!("ark:{}", t.display()));
    assert_same(&write_all(&back, ",t"), &want, "feats text re-read");
    // copy-matrix reads BaseFloat matrices: the double CMVN stats become float
    // before they are printed.
    let e = read_all::<Matrix<f32>>(&format!("ark:{}", path("cmvn.ark")));
    assert_same(
        &write_all(&e, ",t"),
        &read_maybe_gz("cmvn.txt"),
        "cmvn text",
    );
    // Double matrices printed as doubles (compute-cmvn-stats writes them directly).
    let e = read_all::<Matrix<f64>>(&format!("ark:{}", path("cmvn_per_utt.first3.txt")));
    assert_same(
        &write_all(&e, ",t"),
        &read_maybe_gz("cmvn_per_utt.first3.txt"),
        "cmvn per utt text",
    );
}

#[test]
fn compressed_binary_byte_identical() {
    for m in 1..=7 {
        let f = format!("feats_cm{m}.first3.ark");
        let e = read_all::<CompressedMatrix>(&format!("ark:{}", path(&f)));
        assert_eq!(e.len(), 3);
        assert_same(&write_all(&e, ""), &read_maybe_gz(&f), &f);
    }
}

#[test]
fn compressed_decode_matches_kaldi() {
    for m in 2..=7 {
        let e =
            read_all::<Matrix<f32>>(&format!("ark:{}", path(&format!("feats_cm{m}.first3.ark"))));
        let want = read_maybe_gz(&format!("feats_cm{m}.first3.decompressed.txt.gz"));
        assert_same(&write_all(&e, ",t"), &want, &format!("cm{m} decompressed"));
        // Writing the compressed matrix in text mode writes the decompressed matrix.
        let c = read_all::<CompressedMatrix>(&format!(
            "ark:{}",
            path(&format!("feats_cm{m}.first3.ark"))
        ));
        assert_same(&write_all(&c, ",t"), &want, &format!("cm{m} text"));
    }
}

#[test]
fn compress_bit_identical_to_copy_feats() {
    let feats = read_all::<Matrix<f32>>(&format!("ark:{}", path("feats.first3.ark")));
    for m in 1..=7 {
        let method = CompressionMethod::from_i32(m).unwrap();
        let c: Vec<(String, CompressedMatrix)> = feats
            .iter()
            .map(|(k, v)| (k.clone(), CompressedMatrix::compress(v, method).unwrap()))
            .collect();
        let f = format!("feats_cm{m}.first3.ark");
        assert_same(
            &write_all(&c, ""),
            &read_maybe_gz(&f),
            &format!("compress method {m}"),
        );
    }
}

#[test]
fn alignments() {
    let e = read_all::<Int32Vector>(&format!("ark:{}", path("ali.first3.ark")));
    assert_eq!(e.len(), 3);
    assert_same(
        &write_all(&e, ""),
        &read_maybe_gz("ali.first3.ark"),
        "ali binary",
    );
    assert_same(
        &write_all(&e, ",t"),
        &read_maybe_gz("ali.first3.txt"),
        "ali text",
    );
    let t = read_all::<Int32Vector>(&format!("ark:{}", path("ali.first3.txt")));
    assert_same(
        &write_all(&t, ""),
        &read_maybe_gz("ali.first3.ark"),
        "ali text to binary",
    );
}

#[test]
fn posteriors() {
    for f in ["post.first3.ark", "fubm.1.post.first3.ark"] {
        let e = read_all::<Posterior>(&format!("ark:{}", path(f)));
        assert_eq!(e.len(), 3);
        assert_same(&write_all(&e, ""), &read_maybe_gz(f), f);
    }
    let e = read_all::<Posterior>(&format!("ark:{}", path("fubm.1.post.first3.ark")));
    let want = read_maybe_gz("fubm.1.post_first3.txt");
    let t = read_all::<Posterior>(&format!("ark:{}", path("fubm.1.post_first3.txt")));
    assert_same(&write_all(&t, ",t"), &want, "post text re-read");
    if e.iter().map(|x| &x.0).eq(t.iter().map(|x| &x.0)) {
        assert_same(&write_all(&e, ",t"), &want, "post binary to text");
    }
}

#[test]
fn gaussian_selection() {
    let e = read_all::<Int32VectorVector>(&format!("ark:{}", path("ubm.1.gselect.first3.ark")));
    assert_same(
        &write_all(&e, ""),
        &read_maybe_gz("ubm.1.gselect.first3.ark"),
        "gselect binary",
    );
    assert_same(
        &write_all(&e, ",t"),
        &read_maybe_gz("ubm.1.gselect_first3.txt"),
        "gselect text",
    );
    let t = read_all::<Int32VectorVector>(&format!("ark:{}", path("ubm.1.gselect_first3.txt")));
    assert_eq!(t, e);
}

#[test]
fn vectors_and_basic_values() {
    let e = read_all::<Vector<f32>>(&format!("ark:{}", path("ubm.1.frame_likes.first3.ark")));
    assert_same(
        &write_all(&e, ""),
        &read_maybe_gz("ubm.1.frame_likes.first3.ark"),
        "frame likes binary",
    );
    assert_same(
        &write_all(&e, ",t"),
        &read_maybe_gz("ubm.1.frame_likes_first3.txt"),
        "frame likes text",
    );
    let e = read_all::<Basic<f32>>(&format!("ark:{}", path("ubm.1.avg_likes.txt")));
    assert_eq!(e.len(), 40);
    assert_same(
        &write_all(&e, ",t"),
        &read_maybe_gz("ubm.1.avg_likes.txt"),
        "avg likes text",
    );
    let e = read_all::<Basic<i32>>(&format!("ark:{}", path("feats_lengths.txt")));
    assert_same(
        &write_all(&e, ",t"),
        &read_maybe_gz("feats_lengths.txt"),
        "lengths text",
    );
}

#[test]
fn scp_with_offsets_ranges_and_random_access() {
    let dir = tempfile::tempdir().unwrap();
    let ark = dir.path().join("f.ark");
    let scp = dir.path().join("f.scp");
    let feats = read_all::<Matrix<f32>>(&format!("ark:{}", path("feats.first3.ark")));
    let mut w =
        TableWriter::<Matrix<f32>>::open(&format!("ark,scp:{},{}", ark.display(), scp.display()))
            .unwrap();
    for (k, v) in &feats {
        w.write(k, v).unwrap();
    }
    w.close().unwrap();
    assert_same(
        &std::fs::read(&ark).unwrap(),
        &read_maybe_gz("feats.first3.ark"),
        "ark,scp archive",
    );
    // The scp Kaldi wrote for the full archive starts with the same offsets.
    let scp_text = std::fs::read_to_string(&scp).unwrap();
    let kaldi_scp = std::fs::read_to_string("../../shared/fixtures/kaldi/feats/feats.scp").ok();
    if let Some(k) = kaldi_scp {
        for (ours, theirs) in scp_text.lines().zip(k.lines()) {
            assert_eq!(ours.rsplit(':').next(), theirs.rsplit(':').next());
        }
    } else {
        println!("skipped: ../../shared/fixtures/kaldi/feats/feats.scp not present");
    }
    let mut ra =
        RandomAccessTableReader::<Matrix<f32>>::open(&format!("scp:{}", scp.display())).unwrap();
    let (k2, m2) = &feats[2];
    assert_eq!(ra.value(k2).unwrap(), m2);
    // A range: rows 1..=4, columns 2..=5.
    let first = scp_text.lines().next().unwrap();
    let rscp = dir.path().join("r.scp");
    std::fs::write(&rscp, format!("{first}[1:4,2:5]\n")).unwrap();
    let r = read_all::<Matrix<f32>>(&format!("scp:{}", rscp.display()));
    assert_eq!(r[0].1, feats[0].1.sub_matrix(1, 5, 2, 6).unwrap());
    // Sorted archive, random access.
    let mut ra = RandomAccessTableReader::<Matrix<f32>>::open(&format!(
        "ark,s,cs:{}",
        path("feats.first3.ark")
    ))
    .unwrap();
    assert_eq!(ra.value(&feats[1].0).unwrap(), &feats[1].1);
    assert!(!ra.has_key("zzz").unwrap());
}

#[test]
fn pipes_and_compressed_output() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("f.ark.gz");
    let feats = read_all::<Matrix<f32>>(&format!("ark:{}", path("feats.first3.ark")));
    let mut w =
        TableWriter::<Matrix<f32>>::open(&format!("ark:| gzip -c > {}", gz.display())).unwrap();
    for (k, v) in &feats {
        w.write(k, v).unwrap();
    }
    w.close().unwrap();
    let back = read_all::<Matrix<f32>>(&format!("ark:gunzip -c {} |", gz.display()));
    assert_eq!(back, feats);
    let cm = read_all::<Matrix<f32>>(&format!("ark:cat {} |", path("feats_cm2.first3.ark")));
    assert_eq!(cm.len(), 3);
}

fn err_of<H: Holder + std::fmt::Debug>(rspec: &str) -> String {
    match SequentialTableReader::<H>::open(rspec) {
        Err(e) => e.to_string(),
        Ok(r) => match r.collect::<amtool_formats::Result<Vec<_>>>() {
            Err(e) => e.to_string(),
            Ok(v) => panic!("{rspec}: expected an error, read {} entries", v.len()),
        },
    }
}

#[test]
fn bad_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = read_maybe_gz("feats.first3.ark");
    let write = |name: &str, b: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, b).unwrap();
        p.display().to_string()
    };
    // Truncated archive: names the file, the key and the offset.
    let p = write("trunc.ark", &good[..good.len() - 10]);
    let e = err_of::<Matrix<f32>>(&format!("ark:{p}"));
    assert!(
        e.contains("trunc.ark")
            && e.contains("'s01-003'")
            && e.contains("at byte")
            && e.contains("truncated"),
        "{e}"
    );
    // Wrong binary marker.
    let mut b = good.clone();
    b[9] = b'X'; // "s01-001 \0B" -> "\0X"
    let p = write("marker.ark", &b);
    let e = err_of::<Matrix<f32>>(&format!("ark:{p}"));
    assert!(
        e.contains("marker.ark")
            && e.contains("'s01-001'")
            && e.contains("at byte 8")
            && e.contains("binary header"),
        "{e}"
    );
    // Unknown token.
    let mut b = good.clone();
    b[10] = b'Q'; // "FM" -> "QM"
    let p = write("token.ark", &b);
    let e = err_of::<Matrix<f32>>(&format!("ark:{p}"));
    assert!(e.contains("at byte 10") && e.contains("found QM"), "{e}");
    // Wrong dims: a row count far beyond the data.
    let mut b = good.clone();
    b[14..18].copy_from_slice(&100000i32.to_le_bytes());
    let p = write("dims.ark", &b);
    let e = err_of::<Matrix<f32>>(&format!("ark:{p}"));
    assert!(
        e.contains("matrix of 100000 x 13") && e.contains("'s01-001'"),
        "{e}"
    );
    let mut b = good.clone();
    b[14..18].copy_from_slice(&(-5i32).to_le_bytes());
    let p = write("negdims.ark", &b);
    let e = err_of::<Matrix<f32>>(&format!("ark:{p}"));
    assert!(
        e.contains("negative number of rows -5") && e.contains("at byte 13"),
        "{e}"
    );
    // scp offset past the end of the file.
    let ark = write("ok.ark", &good);
    let scp = write(
        "bad.scp",
        format!("u1 {ark}:8\nu2 {ark}:999999\n").as_bytes(),
    );
    let e = err_of::<Matrix<f32>>(&format!("scp:{scp}"));
    assert!(
        e.contains("ok.ark")
            && e.contains("'u2'")
            && e.contains("past the end")
            && e.contains("999999"),
        "{e}"
    );
    // A failing pipe command.
    let e = err_of::<Matrix<f32>>(&format!("ark:cat {ark}; false |"));
    assert!(e.contains("failed"), "{e}");
    let e = err_of::<Matrix<f32>>("ark:no-such-command-amtool 2>/dev/null |");
    assert!(e.contains("failed"), "{e}");
    // Not an archive at all.
    let p = write("garbage.ark", b"\x01\x02\x03 \x00\x05");
    let e = err_of::<Matrix<f32>>(&format!("ark:{p}"));
    assert!(e.contains("garbage.ark"), "{e}");
    // A bad specifier.
    let e = err_of::<Matrix<f32>>("arc:foo");
    assert!(e.contains("invalid rspecifier"), "{e}");
    // Output to a folder that does not exist leaves nothing behind and errors.
    assert!(TableWriter::<Matrix<f32>>::open("ark:/nonexistent-dir-amtool/x.ark").is_err());
}

#[test]
fn zero_copy_raw_matrix_access() {
    use amtool_formats::kaldi::matrix::RawMatrix;
    let feats = read_all::<Matrix<f32>>(&format!("ark:{}", path("feats.first3.ark")));
    let mut r =
        SequentialTableReader::<Matrix<f32>>::open(&format!("ark:{}", path("feats.first3.ark")))
            .unwrap();
    let mut i = 0;
    while let Some((k, (rows, cols, data))) = r
        .next_with(|_, rd| {
            rd.read_kaldi_header()?;
            let m = RawMatrix::read(rd)?;
            let mut v = vec![0f32; m.rows * m.cols];
            m.copy_to_f32(&mut v);
            Ok((m.rows, m.cols, v))
        })
        .unwrap()
    {
        assert_eq!(k, feats[i].0);
        assert_eq!((rows, cols), (feats[i].1.rows(), feats[i].1.cols()));
        assert_eq!(data, feats[i].1.data());
        i += 1;
    }
    assert_eq!(i, 3);
}
