//! Forced alignment, as Kaldi's `gmm-align-compiled` and
//! `align-equal-compiled` do it: training graphs with transition
//! probabilities added ([`graph`]), Kaldi's `FasterDecoder` over per-frame
//! acoustic costs ([`decoder`]), the retry with a wider beam and the
//! per-utterance outcome (`AlignUtteranceWrapper`, here [`align_utterance`]),
//! and equally spaced alignments ([`equal`]).
//!
//! The log-likelihoods come from an engine (all pdfs of a batch of frames in
//! one call); this module only searches. It knows nothing of tables.

pub mod costs;
pub mod decoder;
pub mod equal;
pub mod graph;

pub use costs::{LazyLoglikes, ScaledLoglikes};
use decoder::{AcousticCosts, BestPath, DecoderOptions, FasterDecoder};
use graph::DecodingGraph;

/// Kaldi `AlignConfig`.
#[derive(Debug, Clone, Copy)]
pub struct AlignConfig {
    pub beam: f32,
    pub retry_beam: f32,
    pub careful: bool,
}

impl AlignConfig {
    /// Kaldi's check in `AlignUtteranceWrapper`.
    pub fn check(&self) -> Result<(), String> {
        if (self.retry_beam != 0.0 && self.retry_beam <= self.beam) || self.beam <= 0.0 {
            return Err(format!(
                "Beams do not make sense: beam {}, retry-beam {}",
                self.beam, self.retry_beam
            ));
        }
        Ok(())
    }
}

/// What became of one utterance.
#[derive(Debug, Clone)]
pub enum AlignOutcome {
    /// Aligned (possibly after a retry).
    Done { path: BestPath, retried: bool },
    /// No final state reached, even with the retry beam (if any).
    Failed { retried: bool },
}

/// Kaldi `AlignUtteranceWrapper`'s search: decode with `beam`; when no final
/// state is reached and a retry beam is set, decode again with it (the same
/// decoder, as Kaldi reuses it).
pub fn align_utterance<A: AcousticCosts + ?Sized>(
    graph: &DecodingGraph,
    costs: &mut A,
    config: &AlignConfig,
    base: DecoderOptions,
) -> AlignOutcome {
    let mut opts = base;
    opts.beam = config.beam;
    let mut dec = FasterDecoder::new(graph, opts);
    dec.decode(costs);
    let mut ok = dec.reached_final();
    let mut retried = false;
    if !ok && config.retry_beam != 0.0 {
        retried = true;
        opts.beam = config.retry_beam;
        dec.set_options(opts);
        dec.decode(costs);
        ok = dec.reached_final();
    }
    match (ok, dec.best_path()) {
        (true, Some(path)) => AlignOutcome::Done { path, retried },
        _ => AlignOutcome::Failed { retried },
    }
}
