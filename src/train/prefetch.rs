//! Feature tables read ahead on their own thread, so that reading (and
//! decompressing) the next utterances overlaps the engine's work on the
//! current batch: the statistics of a feature ark on disk then take about
//! the longer of the two, not their sum. Entries come out in table order.
//!
//! [`PrefetchedFeats`] decodes every entry into a [`Matrix`].
//! [`SharedFeats`] keeps binary float matrices of a memory-mapped archive as
//! parts of the map ([`Features::Shared`]): the reading thread only parses
//! headers, read with `pread` so that it takes none of the map's page
//! faults, and the frames are copied once, later, straight into the
//! engine's batch (in parallel). Other entries (compressed, text, scripts,
//! pipes) are decoded as by [`PrefetchedFeats`].

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use amtool_formats::kaldi::files::InputData;
use amtool_formats::kaldi::holder::Holder;
use amtool_formats::kaldi::io::Reader;
use amtool_formats::kaldi::matrix::{Matrix, RawMatrix, SharedMatrix};
use amtool_formats::kaldi::table::SequentialTableReader;

type Table = SequentialTableReader<Matrix<f32>>;
type Item<T> = Result<(String, T), amtool_formats::Error>;

/// A feature rspecifier being read ahead, entries decoded to `T`.
pub struct Prefetched<T> {
    name: String,
    rx: Receiver<Vec<Item<T>>>,
    /// Entries received and not yet taken.
    ready: VecDeque<Item<T>>,
    worker: Option<JoinHandle<()>>,
}

/// Entries decoded into matrices.
pub type PrefetchedFeats = Prefetched<Matrix<f32>>;
/// Entries kept in the mapped archive where they can be.
pub type SharedFeats = Prefetched<Features>;

/// One utterance's features: decoded, or a part of the mapped archive.
#[derive(Debug, Clone)]
pub enum Features {
    Matrix(Matrix<f32>),
    Shared(SharedMatrix),
}

impl Features {
    pub fn rows(&self) -> usize {
        match self {
            Features::Matrix(m) => m.rows(),
            Features::Shared(m) => m.rows(),
        }
    }

    pub fn cols(&self) -> usize {
        match self {
            Features::Matrix(m) => m.cols(),
            Features::Shared(m) => m.cols(),
        }
    }
}

/// Utterances read ahead of the consumer, decoded.
const DEPTH: usize = 64;
/// Utterances read ahead as parts of a mapped archive (handles, no frames:
/// the reading thread keeps parsing while the consumer sends a round of
/// batches; four batches of 1000-frame utterances ahead).
const SHARED_DEPTH: usize = 1024;
/// Handles of a mapped archive passed on together. One at a time, a
/// consumer waiting for them was woken for each: 8 % of the reading's time
/// (the 3125 utterances of the bench's archive read alone, 19.0 ms, 17.5 in
/// handfuls; most of the rest is the kernel mapping the archive's pages as
/// the headers are touched). Reading a map never waits for input, so a
/// handful never waits long to fill.
const SHARED_CHUNK: usize = 16;

impl Prefetched<Matrix<f32>> {
    /// Opens `rspecifier` here (so a bad specifier or missing file is
    /// reported at once) and reads it on a worker thread.
    pub fn open(rspecifier: &str) -> Result<Self, amtool_formats::Error> {
        Self::spawn(rspecifier, |_| (DEPTH, 1), |r| r.next_entry())
    }
}

impl Prefetched<Features> {
    /// As [`PrefetchedFeats::open`], entries as [`Features`].
    pub fn open(rspecifier: &str) -> Result<Self, amtool_formats::Error> {
        let mut whole: Option<Option<Arc<InputData>>> = None;
        // A mapped archive's matrices are handles: many can wait.
        let depth = |r: &Table| match r.shared_input() {
            Some(_) => (SHARED_DEPTH / SHARED_CHUNK, SHARED_CHUNK),
            None => (DEPTH, 1),
        };
        Self::spawn(rspecifier, depth, move |r| {
            // A binary float matrix's header read without touching the map
            // (the copies take its page faults, in parallel).
            if let Some((key, m)) = r.next_mapped_matrix() {
                return Ok(Some((key, Features::Shared(m))));
            }
            let w = whole.get_or_insert_with(|| r.shared_input()).clone();
            r.next_with(|_, rd| read_features(rd, w.as_ref()))
        })
    }
}

/// Up to `each` (at least one) next entries of `reader`, and whether they
/// are its last: the table ended, or the last one is an error.
fn handful<T>(
    reader: &mut Table,
    next: &mut impl FnMut(&mut Table) -> Result<Option<(String, T)>, amtool_formats::Error>,
    each: usize,
) -> (Vec<Item<T>>, bool) {
    let mut hand = Vec::with_capacity(each.max(1));
    while hand.len() < each.max(1) {
        match next(reader) {
            Ok(Some(e)) => hand.push(Ok(e)),
            Ok(None) => return (hand, true),
            Err(e) => {
                hand.push(Err(e));
                return (hand, true);
            }
        }
    }
    (hand, false)
}

/// A binary `FM` matrix inside `whole` as a part of it; anything else decoded.
fn read_features(
    r: &mut Reader<'_>,
    whole: Option<&Arc<InputData>>,
) -> amtool_formats::Result<Features> {
    if let Some(w) = whole {
        let at = r.pos();
        if r.read_kaldi_header()? && r.peek_token().ok() == Some("FM") {
            let raw = RawMatrix::read(r)?;
            if let Some(m) = SharedMatrix::new(w, &raw) {
                return Ok(Features::Shared(m));
            }
            return raw.to_matrix().map(Features::Matrix);
        }
        r.set_pos(at);
    }
    Matrix::<f32>::read_holder(r).map(Features::Matrix)
}

impl<T: Send + 'static> Prefetched<T> {
    /// Reads on a thread of its own, `depth(reader)` = (handfuls, entries a
    /// handful) ahead.
    fn spawn(
        rspecifier: &str,
        depth: impl FnOnce(&Table) -> (usize, usize),
        mut next: impl FnMut(&mut Table) -> Result<Option<(String, T)>, amtool_formats::Error>
            + Send
            + 'static,
    ) -> Result<Self, amtool_formats::Error> {
        let mut reader = Table::open(rspecifier)?;
        let (handfuls, each) = depth(&reader);
        let (tx, rx) = sync_channel(handfuls.max(1));
        let worker = std::thread::Builder::new()
            .name("amtool-read".into())
            .spawn(move || loop {
                let (hand, last) = handful(&mut reader, &mut next, each);
                // A closed channel means the consumer stopped early.
                if (!hand.is_empty() && tx.send(hand).is_err()) || last {
                    break;
                }
            })
            .map_err(|e| amtool_formats::Error::io(rspecifier, e))?;
        Ok(Prefetched {
            name: rspecifier.to_string(),
            rx,
            ready: VecDeque::new(),
            worker: Some(worker),
        })
    }

    /// The next (key, features) entry, `None` at the end of the table.
    pub fn next_entry(&mut self) -> Result<Option<(String, T)>, amtool_formats::Error> {
        if self.ready.is_empty() {
            if let Ok(hand) = self.rx.recv() {
                self.ready.extend(hand);
            }
        }
        match self.ready.pop_front() {
            Some(Ok(e)) => Ok(Some(e)),
            Some(Err(e)) => Err(e),
            None => match self.worker.take().map(JoinHandle::join) {
                Some(Err(_)) => Err(amtool_formats::Error::io(
                    self.name.clone(),
                    std::io::Error::other("the reading thread stopped unexpectedly"),
                )),
                _ => Ok(None),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amtool_formats::kaldi::table::TableWriter;

    fn all<T: Send + 'static>(mut p: Prefetched<T>) -> Vec<(String, T)> {
        let mut v = Vec::new();
        while let Some(e) = p.next_entry().unwrap() {
            v.push(e);
        }
        v
    }

    /// A mapped archive's entries come in handfuls: more than one handful
    /// come out all, in order, and an archive cut short gives the entries
    /// before the cut, then its error, then the end.
    #[test]
    fn handfuls_of_entries_come_out_in_order_up_to_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ark = dir.path().join("f.ark");
        let n = 3 * SHARED_CHUNK + 5;
        let mut w = TableWriter::<Matrix<f32>>::open(&format!("ark:{}", ark.display())).unwrap();
        for u in 0..n {
            w.write(
                &format!("u{u:03}"),
                &Matrix::from_vec(2, 3, vec![u as f32; 6]).unwrap(),
            )
            .unwrap();
        }
        w.close().unwrap();
        let spec = format!("ark:{}", ark.display());
        let keys: Vec<String> = all(SharedFeats::open(&spec).unwrap())
            .into_iter()
            .map(|(k, f)| {
                assert!(matches!(f, Features::Shared(_)), "{k} was not shared");
                k
            })
            .collect();
        assert_eq!(keys, (0..n).map(|u| format!("u{u:03}")).collect::<Vec<_>>());
        // Cut inside the last entry's frames.
        let len = std::fs::metadata(&ark).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&ark).unwrap();
        f.set_len(len - 8).unwrap();
        let mut p = SharedFeats::open(&spec).unwrap();
        for u in 0..n - 1 {
            assert_eq!(p.next_entry().unwrap().unwrap().0, format!("u{u:03}"));
        }
        assert!(p.next_entry().is_err(), "the cut entry is an error");
        assert!(p.next_entry().unwrap().is_none());
    }

    /// Binary float matrices of an archive come out as parts of its map,
    /// with the decoded values; through a script they are decoded.
    #[test]
    fn archive_matrices_are_shared_script_ones_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let (ark, scp) = (dir.path().join("f.ark"), dir.path().join("f.scp"));
        let spec = format!("ark,scp:{},{}", ark.display(), scp.display());
        let mut w = TableWriter::<Matrix<f32>>::open(&spec).unwrap();
        let mats: Vec<Matrix<f32>> = (0..3)
            .map(|u| {
                let v = (0..(u + 1) * 4)
                    .map(|i| i as f32 * 0.5 - u as f32)
                    .collect();
                Matrix::from_vec(u + 1, 4, v).unwrap()
            })
            .collect();
        for (u, m) in mats.iter().enumerate() {
            w.write(&format!("u{u}"), m).unwrap();
        }
        w.close().unwrap();
        let shared = all(SharedFeats::open(&format!("ark:{}", ark.display())).unwrap());
        let decoded = all(SharedFeats::open(&format!("scp:{}", scp.display())).unwrap());
        assert_eq!((shared.len(), decoded.len()), (3, 3));
        for (u, m) in mats.iter().enumerate() {
            let (k, Features::Shared(s)) = &shared[u] else {
                panic!("utterance {u} of the archive was not shared");
            };
            assert_eq!(k, &format!("u{u}"));
            assert_eq!(&s.raw().to_matrix::<f32>().unwrap(), m);
            let Features::Matrix(d) = &decoded[u].1 else {
                panic!("a script entry was shared");
            };
            assert_eq!(d, m);
        }
        let plain = all(PrefetchedFeats::open(&format!("ark:{}", ark.display())).unwrap());
        assert_eq!(
            plain.iter().map(|e| &e.1).collect::<Vec<_>>(),
            mats.iter().collect::<Vec<_>>()
        );
    }
}
