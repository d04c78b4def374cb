//! Forced alignment, as Kaldi's `gmm-align-compiled` and
//! `align-equal-compiled` do it: training graphs with transition
//! probabilities added ([`graph`]), Kaldi's `FasterDecoder` over per-frame
//! acoustic costs ([`decoder`]), the retry with a wider beam and the
//! per-utterance outcome (`AlignUtteranceWrapper`, here [`align_utterance`]),
//! and equally spaced alignments ([`equal`]).
//!
//! The log-likelihoods come from an engine (all pdfs of a batch of frames in
//! one call); this module only searches. It knows nothing of tables.

pub mod decoder;
pub mod equal;
pub mod graph;

use crate::engine::cpu::PackedModel;
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

/// `DecodableAmDiagGmmScaled` over precomputed log-likelihoods: the cost of
/// transition-id `tid` at frame `t` is `−(scale · loglike[t][pdf(tid)])`, the
/// product in float as Kaldi's decodable forms it.
pub struct ScaledLoglikes<'a> {
    /// `frames × num_pdfs`, row-major.
    pub loglikes: &'a [f32],
    pub num_pdfs: usize,
    /// Transition-id → pdf (entry 0 unused).
    pub id2pdf: &'a [i32],
    pub scale: f32,
}

impl AcousticCosts for ScaledLoglikes<'_> {
    fn num_frames(&self) -> usize {
        self.loglikes.len() / self.num_pdfs.max(1)
    }

    #[inline]
    fn cost(&self, frame: usize, tid: i32) -> f32 {
        let pdf = self.id2pdf[tid as usize] as usize;
        -(self.scale * self.loglikes[frame * self.num_pdfs + pdf])
    }
}

/// `DecodableAmDiagGmmScaled` itself: the log-likelihood of a pdf at a frame
/// computed when the search first needs it (the CPU engine's kernels on one
/// frame, so each value is bit-identical to the engine's batch output), kept
/// for the rest of the frame. Forced alignment visits a few pdfs a frame, so
/// this does a fraction of the work of scoring every pdf. Also counts the
/// time spent computing.
pub struct LazyLoglikes<'a> {
    pub model: &'a PackedModel,
    /// `frames × dim`, row-major.
    pub feats: &'a [f32],
    pub id2pdf: &'a [i32],
    pub scale: f32,
    /// Per pdf: the current frame's log-likelihood, valid where `stamp` is
    /// the frame + 1.
    cache: Vec<f32>,
    stamp: Vec<u32>,
    /// The frame, expanded; the pdfs to compute, their values, and scratch.
    xe: Vec<f32>,
    todo: Vec<u32>,
    values: Vec<f32>,
    panels: Vec<u32>,
    comp: Vec<f32>,
    frame: usize,
    /// Time spent computing log-likelihoods (an estimate: every 8th
    /// frame's, times 8).
    pub busy: std::time::Duration,
    /// Pdf log-likelihoods computed.
    pub computed: usize,
}

impl<'a> LazyLoglikes<'a> {
    pub fn new(model: &'a PackedModel, feats: &'a [f32], id2pdf: &'a [i32], scale: f32) -> Self {
        let np = model.num_states();
        LazyLoglikes {
            model,
            feats,
            id2pdf,
            scale,
            cache: vec![0.0; np],
            stamp: vec![0; np],
            xe: vec![0.0; model.k],
            todo: Vec::new(),
            values: Vec::new(),
            panels: Vec::new(),
            comp: Vec::new(),
            frame: usize::MAX,
            busy: std::time::Duration::ZERO,
            computed: 0,
        }
    }
}

impl AcousticCosts for LazyLoglikes<'_> {
    fn num_frames(&self) -> usize {
        self.feats.len() / self.model.dim.max(1)
    }

    #[inline]
    fn cost(&self, _frame: usize, tid: i32) -> f32 {
        -(self.scale * self.cache[self.id2pdf[tid as usize] as usize])
    }

    fn lazy(&self) -> bool {
        true
    }

    fn prepare(&mut self, frame: usize, tids: &[i32]) {
        // Timed on every 8th frame (a clock read costs ~2 % of a frame).
        let t0 = (frame % 8 == 0).then(std::time::Instant::now);
        let (d, k) = (self.model.dim, self.model.k);
        if frame != self.frame {
            self.frame = frame;
            self.model
                .expand(&self.feats[frame * d..(frame + 1) * d], &mut self.xe[..k]);
        }
        let mark = frame as u32 + 1;
        self.todo.clear();
        for &tid in tids {
            let pdf = self.id2pdf[tid as usize] as usize;
            if self.stamp[pdf] != mark {
                self.stamp[pdf] = mark;
                self.todo.push(pdf as u32);
            }
        }
        self.values.resize(self.todo.len(), 0.0);
        self.model.some_state_loglikes(
            &self.todo,
            &self.xe,
            &mut self.panels,
            &mut self.comp,
            &mut self.values,
        );
        for (&pdf, &v) in self.todo.iter().zip(&self.values) {
            self.cache[pdf as usize] = v;
        }
        self.computed += self.todo.len();
        if let Some(t0) = t0 {
            self.busy += 8 * t0.elapsed();
        }
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
