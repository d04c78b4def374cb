//! A table written on its own thread, so that encoding and writing the
//! results of one batch overlaps the engine's work on the next (the mirror
//! of [`super::prefetch`]). Entries are written in the order they are sent:
//! whole objects, or [`SharedRows`], rows of a batch's buffer that the
//! caller shares with the thread instead of copying them out.
//! The output is committed (Kaldi's atomic close) only by [`WriteBehind::close`]:
//! dropped without it, or after a failed write, the writer is dropped
//! unclosed and leaves no output behind, as a [`TableWriter`] does.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use amtool_formats::kaldi::holder::Holder;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::TableWriter;
use amtool_formats::Error;

/// What can be sent to a [`WriteBehind`]: an object of the table's type, or
/// something that writes one.
pub trait TableEntry: Send + 'static {
    type Holder: Holder;
    fn write_to(&self, key: &str, w: &mut TableWriter<Self::Holder>) -> Result<(), Error>;
}

impl<H: Holder + Send + 'static> TableEntry for H {
    type Holder = H;
    fn write_to(&self, key: &str, w: &mut TableWriter<H>) -> Result<(), Error> {
        w.write(key, self)
    }
}

/// `rows × cols` floats at `start` of a buffer shared with the caller,
/// written as a float matrix.
pub struct SharedRows {
    pub buf: Arc<Vec<f32>>,
    pub start: usize,
    pub rows: usize,
    pub cols: usize,
}

impl TableEntry for SharedRows {
    type Holder = Matrix<f32>;
    fn write_to(&self, key: &str, w: &mut TableWriter<Matrix<f32>>) -> Result<(), Error> {
        let end = self.start + self.rows * self.cols;
        w.write_rows(key, self.rows, self.cols, &self.buf[self.start..end])
    }
}

enum Msg<E> {
    Entry(String, E),
    Close,
}

/// A wspecifier being written behind the caller.
pub struct WriteBehind<E: TableEntry> {
    tx: Option<SyncSender<Msg<E>>>,
    worker: Option<JoinHandle<Result<(), Error>>>,
}

impl<E: TableEntry> WriteBehind<E> {
    /// Opens `wspecifier` (errors now, as [`TableWriter::open`]) and starts
    /// the writing thread; at most `depth` entries wait for it.
    pub fn open(wspecifier: &str, depth: usize) -> Result<Self, Error> {
        let mut writer = TableWriter::<E::Holder>::open(wspecifier)?;
        let (tx, rx) = sync_channel::<Msg<E>>(depth.max(1));
        let worker = std::thread::Builder::new()
            .name("table-writer".into())
            .spawn(move || {
                for msg in rx {
                    match msg {
                        Msg::Entry(key, obj) => obj.write_to(&key, &mut writer)?,
                        Msg::Close => return writer.close(),
                    }
                }
                Ok(()) // abandoned: the writer is dropped unclosed
            })
            .map_err(|e| Error::format(amtool_formats::Pos::Unknown, format!("{e}")))?;
        Ok(WriteBehind {
            tx: Some(tx),
            worker: Some(worker),
        })
    }

    /// Queues one entry; blocks while `depth` entries wait. A write that
    /// failed on the thread is returned here (or by [`Self::close`]).
    pub fn write(&mut self, key: String, obj: E) -> Result<(), Error> {
        let sent = match &self.tx {
            Some(tx) => tx.send(Msg::Entry(key, obj)).is_ok(),
            None => false,
        };
        if sent {
            Ok(())
        } else {
            self.finish()
        }
    }

    /// Writes what is queued and commits the output.
    pub fn close(mut self) -> Result<(), Error> {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Close);
        }
        self.finish()
    }

    /// Ends the thread and returns its result.
    fn finish(&mut self) -> Result<(), Error> {
        self.tx = None;
        match self.worker.take() {
            Some(w) => w.join().unwrap_or_else(|_| {
                Err(Error::format(
                    amtool_formats::Pos::Unknown,
                    "table writer thread panicked".to_string(),
                ))
            }),
            None => Err(Error::format(
                amtool_formats::Pos::Unknown,
                "table writer already stopped".to_string(),
            )),
        }
    }
}

impl<E: TableEntry> Drop for WriteBehind<E> {
    fn drop(&mut self) {
        self.tx = None; // no Close: the thread drops its writer unclosed
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amtool_formats::kaldi::matrix::Vector;
    use amtool_formats::kaldi::table::SequentialTableReader;

    fn spec(d: &tempfile::TempDir) -> String {
        format!("ark,t:{}", d.path().join("out.ark").display())
    }

    #[test]
    fn entries_are_written_in_order_and_committed_by_close() {
        let d = tempfile::tempdir().unwrap();
        let mut w = WriteBehind::<Vector<f32>>::open(&spec(&d), 2).unwrap();
        for i in 0..20 {
            w.write(
                format!("u{i:02}"),
                Vector {
                    data: vec![i as f32; 3],
                },
            )
            .unwrap();
        }
        w.close().unwrap();
        let mut r =
            SequentialTableReader::<Vector<f32>>::open(&spec(&d).replace(",t", "")).unwrap();
        let mut keys = Vec::new();
        while let Some((k, v)) = r.next_entry().unwrap() {
            assert_eq!(v.data[0] as usize, keys.len());
            keys.push(k);
        }
        assert_eq!(keys.len(), 20);
        assert_eq!(keys[19], "u19");
    }

    #[test]
    fn shared_rows_are_written_as_the_matrices_they_are() {
        let d = tempfile::tempdir().unwrap();
        let buf = Arc::new((0..24).map(|v| v as f32).collect::<Vec<_>>());
        let s = format!("ark:{}", d.path().join("rows.ark").display());
        let mut w = WriteBehind::<SharedRows>::open(&s, 1).unwrap();
        for (k, start, rows) in [("a", 0, 2), ("b", 6, 3), ("c", 15, 0)] {
            let (buf, cols) = (buf.clone(), 3);
            w.write(
                k.into(),
                SharedRows {
                    buf,
                    start,
                    rows,
                    cols,
                },
            )
            .unwrap();
        }
        w.close().unwrap();
        let m = format!("ark:{}", d.path().join("mats.ark").display());
        let mut t = TableWriter::<Matrix<f32>>::open(&m).unwrap();
        t.write("a", &Matrix::from_vec(2, 3, buf[0..6].to_vec()).unwrap())
            .unwrap();
        t.write("b", &Matrix::from_vec(3, 3, buf[6..15].to_vec()).unwrap())
            .unwrap();
        t.write("c", &Matrix::from_vec(0, 3, vec![]).unwrap())
            .unwrap();
        t.close().unwrap();
        let read = |n: &str| std::fs::read(d.path().join(n)).unwrap();
        assert_eq!(read("rows.ark"), read("mats.ark"));
    }

    #[test]
    fn dropped_without_close_leaves_no_output() {
        let d = tempfile::tempdir().unwrap();
        let mut w = WriteBehind::<Vector<f32>>::open(&spec(&d), 2).unwrap();
        w.write("u1".into(), Vector { data: vec![1.0; 3] }).unwrap();
        drop(w);
        assert!(!d.path().join("out.ark").exists());
    }

    #[test]
    fn a_failed_write_is_reported_and_leaves_no_output() {
        let d = tempfile::tempdir().unwrap();
        let mut w = WriteBehind::<Vector<f32>>::open(&spec(&d), 1).unwrap();
        let mut err = None;
        for _ in 0..4 {
            // An invalid key fails on the thread; a later call reports it.
            if let Err(e) = w.write("bad key".into(), Vector { data: vec![1.0] }) {
                err = Some(e);
                break;
            }
        }
        let err = err
            .map(|e| e.to_string())
            .unwrap_or_else(|| w.close().unwrap_err().to_string());
        assert!(
            err.contains("out.ark: cannot write key \"bad key\""),
            "{err}"
        );
        assert!(!d.path().join("out.ark").exists());
    }
}
