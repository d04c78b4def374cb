//! Kaldi's lattice archives (testdata/kaldi/lattice, gzipped copies of the
//! fixtures; see testdata/kaldi/README.md) read and written back: binary
//! byte-identical to what gmm-latgen-faster / gmm-rescore-lattice wrote, text
//! identical to what lattice-copy printed. Tolerance: none (byte comparisons;
//! the text is Kaldi's own 6-digit rounding of the binary floats).

use std::io::Read;

use amtool_formats::kaldi::holder::Holder;
use amtool_formats::kaldi::lattice::{detect_lattice, CompactLattice, Lattice, LatticeKind};
use amtool_formats::kaldi::table::{SequentialTableReader, TableWriter};

const DIR: &str = "../testdata/kaldi/lattice";

fn gunzip(name: &str) -> Vec<u8> {
    let p = format!("{DIR}/{name}.gz");
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&p).unwrap_or_else(|e| panic!("{p}: {e}")))
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Unzip a fixture into `dir` and return its path.
fn unzipped(dir: &tempfile::TempDir, name: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, gunzip(name)).unwrap();
    p.display().to_string()
}

fn read_all<H: Holder>(rspec: &str) -> Vec<(String, H)> {
    SequentialTableReader::<H>::open(rspec)
        .unwrap()
        .map(|x| x.unwrap())
        .collect()
}

fn write_all<H: Holder>(wspec: &str, items: &[(String, H)]) {
    let mut w = TableWriter::<H>::open(wspec).unwrap();
    for (k, v) in items {
        w.write(k, v).unwrap();
    }
    w.close().unwrap();
}

fn copy_is_exact<H: Holder>(ark: &str, txt: Option<&str>, n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let src = unzipped(&dir, ark);
    let lats: Vec<(String, H)> = read_all(&format!("ark:{src}"));
    assert_eq!(lats.len(), n, "{ark}");
    let out = dir.path().join("out.ark").display().to_string();
    write_all(&format!("ark:{out}"), &lats);
    assert!(
        std::fs::read(&out).unwrap() == gunzip(ark),
        "{ark}: binary differs"
    );
    if let Some(txt) = txt {
        let out = dir.path().join("out.txt").display().to_string();
        write_all(&format!("ark,t:{out}"), &lats);
        assert!(
            std::fs::read(&out).unwrap() == gunzip(txt),
            "{ark}: text differs from {txt}"
        );
        // Text read back and written again is the same text.
        let src_txt = unzipped(&dir, txt);
        let back: Vec<(String, H)> = read_all(&format!("ark:{src_txt}"));
        let out2 = dir.path().join("out2.txt").display().to_string();
        write_all(&format!("ark,t:{out2}"), &back);
        assert!(
            std::fs::read(&out2).unwrap() == gunzip(txt),
            "{txt}: not stable"
        );
    }
}

#[test]
fn compact_lattices_round_trip_exactly() {
    copy_is_exact::<CompactLattice>("lat.ark", Some("lat.txt"), 40);
    copy_is_exact::<CompactLattice>("lat_rescored.ark", None, 40);
    copy_is_exact::<CompactLattice>("lat_rescored_est.ark", None, 40);
}

#[test]
fn raw_lattices_round_trip_exactly() {
    copy_is_exact::<Lattice>("lat_raw_first3.ark", Some("lat_raw_first3.txt"), 3);
}

#[test]
fn fixture_structure() {
    let dir = tempfile::tempdir().unwrap();
    let src = unzipped(&dir, "lat.ark");
    let lats: Vec<(String, CompactLattice)> = read_all(&format!("ark:{src}"));
    assert_eq!(lats[0].0, "s01-001");
    let l = &lats[0].1;
    assert_eq!((l.start, l.num_states(), l.num_arcs()), (0, 3, 2));
    assert!(l.is_top_sorted());
    // Every frame has one transition-id on every path: 171 frames (the log of
    // gmm-latgen-faster) on the path through s01-001.
    let frames: usize = l
        .states
        .iter()
        .flat_map(|s| &s.arcs)
        .map(|a| a.weight.string.len())
        .sum::<usize>()
        + l.states
            .iter()
            .map(|s| s.final_weight.string.len())
            .sum::<usize>();
    assert_eq!(frames, 171);
    let raw = gunzip("lat.ark");
    assert_eq!(detect_lattice(&raw[8..]), Some(LatticeKind::Compact));
    assert_eq!(
        detect_lattice(&gunzip("lat_raw_first3.ark")[8..]),
        Some(LatticeKind::Lattice)
    );
    assert_eq!(
        detect_lattice(&gunzip("lat.txt")[8..]),
        Some(LatticeKind::Compact)
    );
    assert_eq!(
        detect_lattice(&gunzip("lat_raw_first3.txt")[8..]),
        Some(LatticeKind::Lattice)
    );
}

#[test]
fn compact_read_as_lattice_converts() {
    // SequentialLatticeReader on a compact archive converts each lattice; its
    // text has one arc per transition-id and the same total costs.
    let dir = tempfile::tempdir().unwrap();
    let src = unzipped(&dir, "lat.ark");
    let lats: Vec<(String, Lattice)> = read_all(&format!("ark:{src}"));
    let clats: Vec<(String, CompactLattice)> = read_all(&format!("ark:{src}"));
    for ((k, l), (_, c)) in lats.iter().zip(&clats) {
        let tids: usize = c
            .states
            .iter()
            .flat_map(|s| &s.arcs)
            .map(|a| a.weight.string.len().max(1))
            .sum::<usize>()
            + c.states
                .iter()
                .map(|s| s.final_weight.string.len())
                .sum::<usize>();
        assert_eq!(l.num_arcs(), tids, "{k}");
    }
}

#[test]
fn non_compact_to_compact_and_back() {
    // Kaldi's ConvertLattice both ways: CompactLattice -> Lattice -> (Factor,
    // TopSort) CompactLattice gives back the same lattice, unless a state has
    // both a final transition-id string and arcs: then the final string comes
    // back as an epsilon arc to a new final state (an equivalent lattice, as
    // in Kaldi), and the word arcs are the same.
    let dir = tempfile::tempdir().unwrap();
    let src = unzipped(&dir, "lat.ark");
    let clats: Vec<(String, CompactLattice)> = read_all(&format!("ark:{src}"));
    let bag = |c: &CompactLattice| {
        let mut v: Vec<String> = c
            .states
            .iter()
            .flat_map(|s| {
                s.arcs
                    .iter()
                    .map(|a| format!("{} {:?}", a.ilabel, a.weight))
                    .chain(std::iter::once(format!("final {:?}", s.final_weight)))
            })
            .collect();
        v.sort();
        v
    };
    let mut identical = 0;
    for (k, c) in &clats {
        let mut sorted = c.clone();
        sorted.top_sort();
        let back = sorted.to_lattice().to_compact();
        let words = |c: &CompactLattice| -> Vec<String> {
            bag(c)
                .into_iter()
                .filter(|x| !x.starts_with("final") && !x.starts_with("0 "))
                .collect()
        };
        assert_eq!(words(&back), words(&sorted), "{k}");
        let interleaved = sorted
            .states
            .iter()
            .any(|s| !s.final_weight.string.is_empty() && !s.arcs.is_empty());
        if !interleaved {
            assert_eq!(back.states, sorted.states, "{k}");
            identical += 1;
        }
    }
    assert!(identical > 0);
    // The raw lattices: every path keeps its frames (171, 276 and 212 frames,
    // gmm-latgen-faster's log for s01-001..003) and its word sequence.
    let raw = unzipped(&dir, "lat_raw_first3.ark");
    let lats: Vec<(String, Lattice)> = read_all(&format!("ark:{raw}"));
    for ((k, l), frames) in lats.iter().zip([171usize, 276, 212]) {
        let c = l.to_compact();
        assert!(c.is_top_sorted(), "{k}");
        assert!(c.num_states() < l.num_states(), "{k}");
        // Along the first arc of every state from the start to a final state.
        let mut s = c.start as usize;
        let mut n = 0;
        loop {
            let st = &c.states[s];
            if st.arcs.is_empty() {
                n += st.final_weight.string.len();
                break;
            }
            n += st.arcs[0].weight.string.len();
            s = st.arcs[0].nextstate as usize;
        }
        assert_eq!(n, frames, "{k}");
        let tids_in: usize = l
            .states
            .iter()
            .flat_map(|s| &s.arcs)
            .filter(|a| a.ilabel != 0)
            .count();
        let tids_out: usize = c
            .states
            .iter()
            .flat_map(|s| {
                s.arcs
                    .iter()
                    .map(|a| &a.weight)
                    .chain(std::iter::once(&s.final_weight))
            })
            .map(|w| w.string.len())
            .sum();
        assert_eq!(tids_in, tids_out, "{k}");
    }
}

#[test]
fn text_archives_stream_through_pipes() {
    // More than the 1 MiB read window of a pipe, so lattices straddle window
    // boundaries: every one must come through whole.
    let dir = tempfile::tempdir().unwrap();
    let src = unzipped(&dir, "lat.ark");
    let lats: Vec<(String, CompactLattice)> = read_all(&format!("ark:{src}"));
    let many: Vec<(String, CompactLattice)> = (0..40)
        .flat_map(|i| {
            lats.iter()
                .map(move |(k, l)| (format!("{k}-{i:02}"), l.clone()))
        })
        .collect();
    let txt = dir.path().join("many.txt").display().to_string();
    write_all(&format!("ark,t:{txt}"), &many);
    assert!(std::fs::metadata(&txt).unwrap().len() > 1 << 20);
    let direct: Vec<(String, CompactLattice)> = read_all(&format!("ark:{txt}"));
    let piped: Vec<(String, CompactLattice)> = read_all(&format!("ark:cat {txt} |"));
    assert_eq!(direct.len(), many.len());
    assert!(piped == direct);
    // A text lattice cut before its empty line is an error, not a short lattice.
    let text = std::fs::read(&txt).unwrap();
    let cut = dir.path().join("cut.txt");
    let end = text.iter().position(|&c| c == b'\n').unwrap() + 30;
    std::fs::write(&cut, &text[..end]).unwrap();
    let e = SequentialTableReader::<CompactLattice>::open(&format!("ark:{}", cut.display()))
        .unwrap()
        .next()
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("end of data inside a text lattice") && e.contains("s01-001-00"),
        "{e}"
    );
}
