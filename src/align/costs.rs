//! Where a search's acoustic costs come from: Kaldi's
//! `DecodableAmDiagGmmScaled`, the cost of transition-id `tid` at frame `t`
//! being `−(scale · loglike[t][pdf(tid)])` (the product in float, as Kaldi
//! forms it), over log-likelihoods an engine computed for a batch
//! ([`ScaledLoglikes`]) or computed on the CPU as the search asks for them
//! ([`LazyLoglikes`]).

use super::decoder::AcousticCosts;
use crate::engine::cpu::{kernels, PackedModel};

/// Costs over precomputed log-likelihoods: `frames × columns`, row-major
/// (every pdf, or the pdfs an utterance's graph reaches:
/// `DecodingGraph::compact_columns`).
pub struct ScaledLoglikes<'a> {
    pub loglikes: &'a [f32],
    pub frames: usize,
    pub columns: usize,
    pub scale: f32,
}

impl AcousticCosts for ScaledLoglikes<'_> {
    fn num_frames(&self) -> usize {
        self.frames
    }

    #[inline]
    fn cost(&mut self, frame: usize, column: u32) -> f32 {
        -(self.scale * self.loglikes[frame * self.columns + column as usize])
    }
}

/// Frames a pdf's log-likelihoods are computed for at once: the CPU
/// kernel's row block, which loads each parameter once for all of them. The
/// pdfs a search asks for change little from frame to frame (on align_ark
/// 2.3 % of these values go unused), so this divides the parameter traffic
/// by about six.
pub const WINDOW: usize = kernels::MR;

/// Windows between two timed windows of [`LazyLoglikes`] (a clock read
/// costs about a tenth of a window).
const SAMPLE: usize = 31;

/// `DecodableAmDiagGmmScaled` itself (the graph's columns are pdfs): a
/// pdf's log-likelihood is computed when the search first asks for it at a
/// frame (the set Kaldi's decodable computes), together with the next
/// [`WINDOW`] − 1 frames', and kept for them. The values are the CPU
/// engine's (`PackedModel::state_rows`, the arithmetic of its batch
/// scores), so bit-identical to them. Forced alignment visits a few pdfs a
/// frame, so this does a fraction of the work of scoring every pdf. Also
/// counts the time spent computing.
pub struct LazyLoglikes<'a> {
    model: &'a PackedModel,
    /// `frames × dim`, row-major.
    feats: &'a [f32],
    scale: f32,
    frames: usize,
    /// Expanded frames (`frames × k`), the first `expanded` of them filled.
    xe: Vec<f32>,
    expanded: usize,
    /// Per pdf: the first frame of its window + 1 (0: none yet) and the
    /// window's log-likelihoods (`pdfs × WINDOW`).
    from: Vec<u32>,
    window: Vec<f32>,
    /// Per pdf: its cost at the frame `stamp` − 1.
    cost: Vec<f32>,
    stamp: Vec<u32>,
    /// Kernel output (scratch).
    comp: Vec<f32>,
    /// Time spent computing log-likelihoods (an estimate: every
    /// 31st window's, times 31).
    pub busy: std::time::Duration,
    /// Pdf log-likelihoods computed.
    pub computed: usize,
    windows: usize,
}

impl<'a> LazyLoglikes<'a> {
    pub fn new(model: &'a PackedModel, feats: &'a [f32], scale: f32) -> Self {
        let np = model.num_states();
        let frames = feats.len() / model.dim.max(1);
        LazyLoglikes {
            model,
            feats,
            scale,
            frames,
            xe: vec![0.0; frames * model.k],
            expanded: 0,
            from: vec![0; np],
            window: vec![0.0; np * WINDOW],
            cost: vec![0.0; np],
            stamp: vec![0; np],
            comp: Vec::new(),
            busy: std::time::Duration::ZERO,
            computed: 0,
            windows: 0,
        }
    }

    /// Frames `[expanded, upto)` expanded.
    fn expand_to(&mut self, upto: usize) {
        let (d, k) = (self.model.dim, self.model.k);
        for t in self.expanded..upto {
            self.model.expand(
                &self.feats[t * d..(t + 1) * d],
                &mut self.xe[t * k..(t + 1) * k],
            );
        }
        self.expanded = self.expanded.max(upto);
    }

    /// The cost of `pdf` at `frame`, from its window (computed first when
    /// the window does not hold the frame).
    #[inline(never)]
    fn refresh(&mut self, pdf: usize, frame: usize) {
        let from = self.from[pdf] as usize;
        if from == 0 || frame + 1 < from || frame + 1 >= from + WINDOW {
            self.windows += 1;
            if self.windows % SAMPLE == 0 {
                let t0 = std::time::Instant::now();
                self.fill(pdf, frame);
                self.busy += SAMPLE as u32 * t0.elapsed();
            } else {
                self.fill(pdf, frame);
            }
        }
        let at = pdf * WINDOW + frame + 1 - self.from[pdf] as usize;
        self.cost[pdf] = -(self.scale * self.window[at]);
        self.stamp[pdf] = frame as u32 + 1;
    }

    /// The window of `pdf` from `frame` on.
    fn fill(&mut self, pdf: usize, frame: usize) {
        let rows = WINDOW.min(self.frames - frame);
        self.expand_to(frame + rows);
        let k = self.model.k;
        self.model.state_rows(
            pdf,
            rows,
            &self.xe[frame * k..(frame + rows) * k],
            &mut self.comp,
            &mut self.window[pdf * WINDOW..],
            1,
        );
        self.from[pdf] = frame as u32 + 1;
        self.computed += rows;
    }
}

impl AcousticCosts for LazyLoglikes<'_> {
    fn num_frames(&self) -> usize {
        self.frames
    }

    #[inline]
    fn cost(&mut self, frame: usize, pdf: u32) -> f32 {
        let pdf = pdf as usize;
        if self.stamp[pdf] != frame as u32 + 1 {
            self.refresh(pdf, frame);
        }
        self.cost[pdf]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{cpu::CpuEngine, Engine, FrameBatch};
    use crate::model::AcousticModel;
    use amtool_formats::kaldi::model::KaldiModel;

    /// Every cost the lazy source gives, for any pattern of requests (pdfs
    /// dropped and taken up again, windows cut by the utterance's end, a
    /// second pass from frame 0 as a retry makes), is the cost over the CPU
    /// engine's batch scores, bit for bit.
    #[test]
    fn lazy_costs_are_the_batch_scores_costs() {
        let bytes = std::fs::read("testdata/kaldi/final.mdl").unwrap();
        let kaldi = KaldiModel::from_bytes(&bytes).unwrap();
        let model = AcousticModel::from_am_diag_gmm(&kaldi.am);
        let (d, np, frames) = (model.dim, model.num_states(), 23);
        let feats: Vec<f32> = (0..frames * d)
            .map(|i| (i as f32 * 0.173).sin() * 3.0)
            .collect();
        let engine = CpuEngine::new(1).unwrap();
        let mut all = vec![0f32; frames * np];
        let mut loaded = engine.load(&model).unwrap();
        loaded
            .state_loglikes(FrameBatch::new(&feats, d), &mut all)
            .unwrap();
        let mut batch = ScaledLoglikes {
            loglikes: &all,
            frames,
            columns: np,
            scale: 0.1,
        };
        let packed = CpuEngine::pack(&model).unwrap();
        let mut lazy = LazyLoglikes::new(&packed, &feats, 0.1);
        for pass in 0..2 {
            for t in 0..frames {
                // A changing subset: pdf asked at t when (pdf + t / 3 + pass) % 4 != 0,
                // some twice.
                for pdf in (0..np as u32).filter(|&p| (p as usize + t / 3 + pass) % 4 != 0) {
                    for _ in 0..1 + pdf % 2 {
                        let (a, b) = (lazy.cost(t, pdf), batch.cost(t, pdf));
                        assert_eq!(a.to_bits(), b.to_bits(), "frame {t}, pdf {pdf}");
                    }
                }
            }
        }
        assert!(lazy.computed > 0);
    }
}
