//! Feature tables read ahead on their own thread, so that reading (and
//! decompressing) the next utterances overlaps the engine's work on the
//! current batch: the statistics of a feature ark on disk then take about
//! the longer of the two, not their sum. Entries come out in table order.

use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::SequentialTableReader;

type Entry = (String, Matrix<f32>);

/// A feature rspecifier being read ahead.
pub struct PrefetchedFeats {
    name: String,
    rx: Receiver<Result<Entry, amtool_formats::Error>>,
    worker: Option<JoinHandle<()>>,
}

/// Utterances read ahead of the consumer.
const DEPTH: usize = 64;

impl PrefetchedFeats {
    /// Opens `rspecifier` here (so a bad specifier or missing file is
    /// reported at once) and reads it on a worker thread.
    pub fn open(rspecifier: &str) -> Result<Self, amtool_formats::Error> {
        let mut reader = SequentialTableReader::<Matrix<f32>>::open(rspecifier)?;
        let (tx, rx) = sync_channel(DEPTH);
        let worker = std::thread::Builder::new()
            .name("amtool-read".into())
            .spawn(move || loop {
                let next = reader.next_entry();
                let stop = !matches!(next, Ok(Some(_)));
                let item = match next {
                    Ok(Some(e)) => Ok(e),
                    Ok(None) => break,
                    Err(e) => Err(e),
                };
                // A closed channel means the consumer stopped early.
                if tx.send(item).is_err() || stop {
                    break;
                }
            })
            .map_err(|e| amtool_formats::Error::io(rspecifier, e))?;
        Ok(PrefetchedFeats {
            name: rspecifier.to_string(),
            rx,
            worker: Some(worker),
        })
    }

    /// The next (key, features) entry, `None` at the end of the table.
    pub fn next_entry(&mut self) -> Result<Option<Entry>, amtool_formats::Error> {
        match self.rx.recv() {
            Ok(Ok(e)) => Ok(Some(e)),
            Ok(Err(e)) => Err(e),
            Err(_) => match self.worker.take().map(JoinHandle::join) {
                Some(Err(_)) => Err(amtool_formats::Error::io(
                    self.name.clone(),
                    std::io::Error::other("the reading thread stopped unexpectedly"),
                )),
                _ => Ok(None),
            },
        }
    }
}
