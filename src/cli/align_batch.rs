//! The reading half of `amtool align`: training graphs in table order, each
//! with its features looked up by key, its transition log-probabilities
//! added (and made careful when asked), packed for the decoder, and, for an
//! engine that scores batches, the pdfs its graph reaches; gathered into
//! batches of utterances. Utterances that cannot be aligned stay in the
//! batch as the warning Kaldi gives for them, so every log line comes out
//! in input order whichever thread reads.

use amtool_formats::kaldi::fst::StdVectorFst;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::{RandomAccessTableReader, SequentialTableReader};

use crate::align::graph::{add_transition_probs, make_careful, DecodingGraph};

/// An utterance waiting for its batch's likelihoods.
pub struct Pending {
    pub key: String,
    pub graph: DecodingGraph,
    pub feats: Matrix<f32>,
    /// The pdfs the graph reaches, ascending, its arcs' columns their
    /// places here (with `columns`; else empty and the columns are pdfs).
    pub pdfs: Vec<u32>,
}

/// One graph of the table, in order.
pub enum Entry {
    Utterance(Pending),
    /// Not aligned: Kaldi's warning for it (counted as an error).
    Skipped(String),
}

/// Utterances read together.
#[derive(Default)]
pub struct Batch {
    pub entries: Vec<Entry>,
    pub frames: usize,
}

impl Batch {
    pub fn utterances(&self) -> impl Iterator<Item = &Pending> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Utterance(p) => Some(p),
            Entry::Skipped(_) => None,
        })
    }
}

/// What the reader needs to know of the job.
pub struct ReadOptions<'a> {
    /// Per transition-id, the cost `add_transition_probs` adds.
    pub transition_costs: &'a [f32],
    pub careful: bool,
    /// The model's feature dimension and pdf count.
    pub dim: usize,
    pub num_pdfs: usize,
    /// Transition-id → pdf.
    pub id2pdf: &'a [i32],
    /// Whether to find each graph's pdfs (for an engine that scores batches).
    pub columns: bool,
    /// A batch ends once it holds this many frames…
    pub batch_frames: usize,
    /// …or this many frames × pdfs.
    pub batch_values: usize,
}

/// The graph and feature tables of one job, read a batch at a time.
pub struct BatchReader<'a> {
    graphs: SequentialTableReader<StdVectorFst>,
    feats: RandomAccessTableReader<Matrix<f32>>,
    opts: ReadOptions<'a>,
    ended: bool,
}

impl<'a> BatchReader<'a> {
    pub fn open(graphs: &str, features: &str, opts: ReadOptions<'a>) -> Result<Self, String> {
        Ok(BatchReader {
            graphs: SequentialTableReader::open(graphs).map_err(|e| e.to_string())?,
            feats: RandomAccessTableReader::open(features).map_err(|e| e.to_string())?,
            opts,
            ended: false,
        })
    }

    /// The next batch, or `None` after the last graph.
    pub fn next_batch(&mut self) -> Result<Option<Batch>, String> {
        let mut batch = Batch::default();
        let (frames, values, pdfs) = (
            self.opts.batch_frames,
            self.opts.batch_values,
            self.opts.num_pdfs,
        );
        while !self.ended && batch.frames < frames && batch.frames.saturating_mul(pdfs) < values {
            match self.graphs.next_entry().map_err(|e| e.to_string())? {
                None => self.ended = true,
                Some((key, fst)) => {
                    let entry = self.prepare(key, fst)?;
                    if let Entry::Utterance(p) = &entry {
                        batch.frames += p.feats.rows();
                    }
                    batch.entries.push(entry);
                }
            }
        }
        Ok((!batch.entries.is_empty()).then_some(batch))
    }

    /// One graph with its features, ready to search (or why not).
    fn prepare(&mut self, key: String, mut fst: StdVectorFst) -> Result<Entry, String> {
        let Some(m) = self.feats.get(&key).map_err(|e| e.to_string())? else {
            return Ok(Entry::Skipped(format!("No features for utterance {key}")));
        };
        if m.rows() == 0 {
            return Ok(Entry::Skipped(format!("Zero-length utterance: {key}")));
        }
        if m.cols() != self.opts.dim {
            return Ok(Entry::Skipped(format!(
                "Dimension mismatch for utterance {key}: got {}, expected {}",
                m.cols(),
                self.opts.dim
            )));
        }
        let feats = m.clone();
        add_transition_probs(&mut fst, self.opts.transition_costs)
            .map_err(|e| format!("utterance {key}: {e}"))?;
        if self.opts.careful {
            make_careful(&mut fst);
        }
        let Some(mut graph) = DecodingGraph::pack(&fst) else {
            return Ok(Entry::Skipped(format!("Empty decoding graph for {key}")));
        };
        graph
            .set_pdfs(self.opts.id2pdf, self.opts.num_pdfs)
            .map_err(|e| format!("utterance {key}: {e}"))?;
        let pdfs = if self.opts.columns {
            graph.compact_columns()
        } else {
            Vec::new()
        };
        Ok(Entry::Utterance(Pending {
            key,
            graph,
            feats,
            pdfs,
        }))
    }
}
