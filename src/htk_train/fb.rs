//! HFB.c's pruned forward-backward over one utterance's sentence HMM, in log
//! space with HTK's conventions (`LZERO`, `LSMALL`, `MINEARG`, `LAdd`'s
//! cut-off), so that occupancies — and which ones are dropped — match HERest:
//!
//! - the beta pass runs first, from T down to 1, inside a beam that starts as
//!   the minimum-duration taper of the model sequence and is narrowed at each
//!   frame to the models whose best beta is within `beam` of the frame's best
//!   (`-t`); when nothing survives the pass is retried with a wider beam
//!   (`-t f inc limit`), and the utterance is skipped when the limit is hit;
//! - the alpha pass narrows that beam further to the models whose best
//!   alpha·beta at t−1 is within `min_forward_prob` of the total (HERest `-c`,
//!   default 10) and gathers statistics for the models left;
//! - a component's statistics are gathered only when its occupation log
//!   probability is above −`min_forward_prob`; transition and state
//!   occupancies only when above `MINEARG`.
//!
//! State output probabilities come in precomputed (from an engine); the
//! per-component log-likelihoods (log weight included) too, for multi-mixture
//! sets. Indices follow HTK: models q = 1..=Q, states i = 1..=N.

use super::sentence::Sentence;

pub const LZERO: f64 = -1.0e10;
pub const LSMALL: f64 = -0.5e10;
pub const MINEARG: f64 = -708.3;
/// `minLogExp` = −log(−LZERO): LAdd ignores terms smaller than this.
const MIN_LOG_EXP: f64 = -23.025850929940457;

/// HMath.c's `LAdd`.
#[inline]
pub fn ladd(x: f64, y: f64) -> f64 {
    let (x, y) = if x < y { (y, x) } else { (x, y) };
    let diff = y - x;
    if diff < MIN_LOG_EXP {
        if x < LSMALL {
            LZERO
        } else {
            x
        }
    } else {
        x + (1.0 + diff.exp()).ln()
    }
}

/// HERest's pruning settings (`-t`, `-c`).
#[derive(Debug, Clone, Copy)]
pub struct Pruning {
    pub init: f64,
    pub inc: f64,
    pub limit: f64,
    pub min_forward_prob: f64,
}

/// `NOPRUNE`: the beam when `-t` is not given.
pub const NOPRUNE: f64 = 1.0e10;

impl Default for Pruning {
    fn default() -> Self {
        Pruning {
            init: NOPRUNE,
            inc: 0.0,
            limit: NOPRUNE,
            min_forward_prob: 10.0,
        }
    }
}

/// Output probabilities of one utterance: `state_ll[t * stride + col[s]]`
/// is the log-likelihood of model state `s` at frame t (0-based frames).
pub struct OutProbs<'a> {
    pub state_ll: &'a [f32],
    pub stride: usize,
    /// Model state → column (only the states of the sentence need one).
    pub col: &'a [u32],
}

/// What the forward pass hands out, frame by frame (t is 1-based).
pub trait FbSink {
    /// Occupation probability `occ[i]` (i = 1..=N) of model q at frame t.
    fn state_occ(&mut self, q: usize, t: usize, occ: &[f64]);
    /// Occupation of state j of model q at t (log), before any threshold, and
    /// the log of (the forward probability into j without its output
    /// probability) + beta − pr: the mixture accumulators split it.
    fn mix_occ(&mut self, q: usize, j: usize, t: usize, log_occ: f64, log_init: f64);
    /// Transition count (i → j of model q at frame t).
    fn trans(&mut self, q: usize, i: usize, j: usize, value: f64);
    /// The beta pass found no path and is retried with this beam.
    fn retry(&mut self, _beam: f64) {}
}

/// Why an utterance could not be aligned.
#[derive(Debug, Clone, PartialEq)]
pub enum FbFailure {
    /// More emitting states must be traversed than there are frames.
    TooShort { states: usize, frames: usize },
    /// No path survived the beam, even at its limit.
    Pruned,
}

type Col = Vec<Option<Vec<f64>>>;

struct Beta {
    qlo: Vec<usize>,
    qhi: Vec<usize>,
    beta: Vec<Col>,
}

impl Beta {
    fn get(&self, t: usize, q: usize) -> Option<&Vec<f64>> {
        self.beta[t].get(q).and_then(|b| b.as_ref())
    }
}

struct Ctx<'a> {
    s: &'a Sentence<'a>,
    op: &'a OutProbs<'a>,
}

impl Ctx<'_> {
    #[inline]
    fn out(&self, t: usize, q: usize, j: usize) -> f64 {
        let st = self.s.models[q].states[j];
        self.op.state_ll[(t - 1) * self.op.stride + self.op.col[st] as usize] as f64
    }
    #[inline]
    fn a(&self, q: usize, i: usize, j: usize) -> f64 {
        self.s.models[q].a(i, j)
    }
    #[inline]
    fn n(&self, q: usize) -> usize {
        self.s.models[q].n
    }
}

/// SetBeamTaper.
fn beam_taper(dms: &[usize], qq: usize, tt: usize, qlo: &mut [usize], qhi: &mut [usize]) {
    let (mut q, mut dq, mut i) = (1usize, dms[1] as i64, 0i64);
    for t in 1..=tt {
        while i == dq {
            i = 0;
            if q < qq {
                q += 1;
                dq = dms[q] as i64;
            } else {
                dq = -1;
            }
        }
        qhi[t] = q;
        i += 1;
    }
    let (mut q, mut dq, mut i) = (qq, dms[qq] as i64, 0i64);
    for t in (1..=tt).rev() {
        while i == dq {
            i = 0;
            if q > 1 {
                q -= 1;
                dq = dms[q] as i64;
            } else {
                dq = -1;
            }
        }
        qlo[t] = q;
        i += 1;
    }
}

/// SetBeta: returns the total log probability or None when pruned away.
fn set_beta(c: &Ctx, tt: usize, thresh: f64) -> (Option<f64>, Beta) {
    let qq = c.s.models.len() - 1;
    let mut b = Beta {
        qlo: vec![0; tt + 2],
        qhi: vec![0; tt + 2],
        beta: vec![Vec::new(); tt + 2],
    };
    beam_taper(&c.s.min_durs, qq, tt, &mut b.qlo, &mut b.qhi);
    let mut w = BetaWalk {
        max_p: vec![LZERO; qq + 2],
        last_b1: LZERO,
        lnq: 0,
        a1n: 0.0,
    };
    b.qhi[tt] = qq;
    b.beta[tt] = w.last_column(c, tt, b.qlo[tt]);
    for t in (1..tt).rev() {
        let (endq, startq) = column_range(c, &b, t);
        let (col, gmax) = w.column(c, &b, t, endq, startq);
        if !prune_column(&mut b, t, col, gmax, &w.max_p, thresh, (endq, startq)) {
            return (None, b);
        }
    }
    if w.last_b1 <= LSMALL {
        return (None, b);
    }
    (Some(w.last_b1), b)
}

/// What SetBeta carries from one model (and column) to the next: each
/// model's largest beta of the column, the last β(1) computed, and the
/// exit of the model computed last (its state count and entry-exit
/// transition).
struct BetaWalk {
    max_p: Vec<f64>,
    last_b1: f64,
    lnq: usize,
    a1n: f64,
}

impl BetaWalk {
    /// β(1) of model q at frame t from the rest of its column `bq`.
    fn entry(&mut self, c: &Ctx, t: usize, q: usize, nq: usize, bq: &mut [f64]) {
        let mut x = LZERO;
        for j in 2..nq {
            let (a, y) = (c.a(q, 1, j), bq[j]);
            if a > LSMALL && y > LSMALL {
                x = ladd(x, a + c.out(t, q, j) + y);
            }
        }
        bq[1] = x;
        self.last_b1 = x;
        self.lnq = nq;
        self.a1n = c.a(q, 1, nq);
    }

    /// The last frame's column: models `endq..=qq`, the last one ending the
    /// utterance.
    fn last_column(&mut self, c: &Ctx, tt: usize, endq: usize) -> Col {
        let qq = c.s.models.len() - 1;
        let mut col: Col = vec![None; qq + 2];
        for q in (endq..=qq).rev() {
            let nq = c.n(q);
            let mut bq = vec![LZERO; nq + 1];
            bq[nq] = if q == qq {
                0.0
            } else {
                col[q + 1].as_ref().map_or(LZERO, |v| v[self.lnq]) + self.a1n
            };
            for i in 2..nq {
                bq[i] = c.a(q, i, nq) + bq[nq];
            }
            self.entry(c, tt, q, nq, &mut bq);
            col[q] = Some(bq);
        }
        col
    }

    /// Column t for models `endq..=startq` from column t + 1, and the
    /// column's largest beta.
    fn column(&mut self, c: &Ctx, b: &Beta, t: usize, endq: usize, startq: usize) -> (Col, f64) {
        let qq = c.s.models.len() - 1;
        let mut gmax = LZERO;
        let mut col: Col = vec![None; qq + 2];
        for q in (endq..=startq).rev() {
            let mut lmax = LZERO;
            let nq = c.n(q);
            let mut bq = vec![LZERO; nq + 1];
            let bqt1 = b.get(t + 1, q);
            let bq1t1 = if q == qq { None } else { b.get(t + 1, q + 1) };
            bq[nq] = bq1t1.map(|v| v[1]).unwrap_or(LZERO);
            if q < startq && self.a1n > LSMALL {
                let next = col[q + 1].as_ref().map_or(LZERO, |v| v[self.lnq]);
                bq[nq] = ladd(bq[nq], next + self.a1n);
            }
            let in_beam = q >= b.qlo[t + 1] && q <= b.qhi[t + 1];
            for i in (2..nq).rev() {
                let mut x = c.a(q, i, nq) + bq[nq];
                if in_beam {
                    if let Some(bqt1) = bqt1 {
                        for j in 2..nq {
                            let (a, y) = (c.a(q, i, j), bqt1[j]);
                            if a > LSMALL && y > LSMALL {
                                x = ladd(x, a + c.out(t + 1, q, j) + y);
                            }
                        }
                    }
                }
                bq[i] = x;
                lmax = lmax.max(x);
                gmax = gmax.max(x);
            }
            self.entry(c, t, q, nq, &mut bq);
            self.max_p[q] = lmax;
            col[q] = Some(bq);
        }
        (col, gmax)
    }
}

/// The models column t is computed for, (endq, startq): from the last one
/// column t + 1 kept down to the first the beam allows, past models that
/// can take no frame.
fn column_range(c: &Ctx, b: &Beta, t: usize) -> (usize, usize) {
    let startq = b.qhi[t + 1];
    let mut endq = if b.qlo[t + 1] == 1 {
        1
    } else if b.qlo[t] >= b.qlo[t + 1] {
        b.qlo[t]
    } else {
        b.qlo[t + 1] - 1
    };
    while endq > 1 && c.s.min_durs[endq - 1] == 0 {
        endq -= 1;
    }
    (endq, startq)
}

/// Column t pruned to the models within `thresh` of its largest beta (and
/// within the taper) and stored in `b`; false when no model is left (the
/// beta pass failed).
fn prune_column(
    b: &mut Beta,
    t: usize,
    mut col: Col,
    gmax: f64,
    max_p: &[f64],
    thresh: f64,
    (mut endq, mut startq): (usize, usize),
) -> bool {
    while gmax - max_p[startq] > thresh {
        col[startq] = None;
        if startq <= 1 {
            return false;
        }
        startq -= 1;
    }
    while b.qhi[t] < startq {
        col[startq] = None;
        if startq <= 1 {
            return false;
        }
        startq -= 1;
    }
    b.qhi[t] = startq;
    while gmax - max_p[endq] > thresh {
        col[endq] = None;
        endq += 1;
        if endq > startq {
            b.beta[t] = col;
            return false;
        }
    }
    b.qlo[t] = endq;
    b.beta[t] = col;
    true
}

/// Runs forward-backward over one utterance of `frames` frames and reports
/// occupancies to `sink`. Returns the total log probability.
pub fn forward_backward(
    s: &Sentence<'_>,
    op: &OutProbs,
    frames: usize,
    prune: &Pruning,
    multi_mix: bool,
    sink: &mut dyn FbSink,
) -> Result<f64, FbFailure> {
    let tt = frames;
    let c = Ctx { s, op };
    let total_dur: usize = s.min_durs[1..].iter().sum();
    if total_dur > tt {
        return Err(FbFailure::TooShort {
            states: total_dur,
            frames: tt,
        });
    }
    let mut thresh = prune.init;
    let (pr, b) = loop {
        let (pr, b) = set_beta(&c, tt, thresh);
        if let Some(pr) = pr {
            break (pr, b);
        }
        thresh += prune.inc;
        if thresh > prune.limit || prune.inc == 0.0 {
            return Err(FbFailure::Pruned);
        }
        sink.retry(thresh);
    };
    step_forward(&c, &b, tt, pr, prune.min_forward_prob, multi_mix, sink);
    Ok(pr)
}

fn max_model_prob(c: &Ctx, b: &Beta, alpha: &[Vec<f64>], q: usize, t: usize, minq: usize) -> f64 {
    let mut max_p;
    if q == 1 {
        max_p = LZERO;
    } else {
        let mut nq1 = c.n(q - 1);
        max_p = match b.get(t, q - 1) {
            Some(bq1) => alpha[q - 1][nq1] + bq1[nq1],
            None => LZERO,
        };
        let mut qx = q - 1;
        while qx > minq && c.a(qx, 1, nq1) > LSMALL {
            let qx1 = qx - 1;
            nq1 = c.n(qx1);
            let x = match b.get(t, qx1) {
                Some(bq1) => alpha[qx1][nq1] + bq1[nq1],
                None => LZERO,
            };
            if x > max_p {
                max_p = x;
            }
            qx -= 1;
        }
    }
    let nq = c.n(q);
    if let Some(bq) = b.get(t, q) {
        for i in 1..nq {
            let x = alpha[q][i] + bq[i];
            if x > max_p {
                max_p = x;
            }
        }
    }
    max_p
}

fn step_forward(
    c: &Ctx,
    b: &Beta,
    tt: usize,
    pr: f64,
    min_fp: f64,
    multi_mix: bool,
    sink: &mut dyn FbSink,
) {
    let qq = c.s.models.len() - 1;
    let mut alpha: Vec<Vec<f64>> = (0..=qq)
        .map(|q| vec![LZERO; if q == 0 { 0 } else { c.n(q) + 1 }])
        .collect();
    let mut prev = alpha.clone();
    let (mut start, mut end) = (1, b.qhi[1]);
    init_alpha(c, end, &mut alpha);
    let up = Updates {
        c,
        b,
        tt,
        pr,
        multi_mix,
    };
    let mut occ = Vec::new();
    for t in 1..=tt {
        if t > 1 {
            let (sq, eq) = alpha_range(c, b, &alpha, t, pr, min_fp);
            std::mem::swap(&mut alpha, &mut prev);
            step_alpha(c, &mut alpha, &prev, t, sq, eq);
            start = sq;
            end = eq;
        }
        for q in start..=end {
            up.model(t, q, &alpha[q], &prev[q], &mut occ, sink);
        }
    }
}

/// InitAlpha: the first frame's alphas of models 1..=eq0.
fn init_alpha(c: &Ctx, eq0: usize, alpha: &mut [Vec<f64>]) {
    let mut a1n = 0.0;
    for q in 1..=eq0 {
        let nq = c.n(q);
        alpha[q][1] = if q == 1 { 0.0 } else { alpha[q - 1][1] + a1n };
        for j in 2..nq {
            let a = c.a(q, 1, j);
            alpha[q][j] = if a > LSMALL {
                alpha[q][1] + a + c.out(1, q, j)
            } else {
                LZERO
            };
        }
        alpha[q][nq] = exit_alpha(c, q, nq, &alpha[q], false);
        a1n = c.a(q, 1, nq);
    }
}

/// α of model q's exit state from its emitting states' (`live`: only
/// alphas above LSMALL count, as StepAlpha takes them).
fn exit_alpha(c: &Ctx, q: usize, nq: usize, aq: &[f64], live: bool) -> f64 {
    let mut x = LZERO;
    for i in 2..nq {
        let (a, y) = (c.a(q, i, nq), aq[i]);
        if a > LSMALL && (!live || y > LSMALL) {
            x = ladd(x, y + a);
        }
    }
    x
}

/// The models frame t's alphas are computed for, (sq, eq): those whose
/// alphas at t − 1 were within `min_fp` of the utterance's probability,
/// within the beta beam at t.
fn alpha_range(
    c: &Ctx,
    b: &Beta,
    alpha: &[Vec<f64>],
    t: usize,
    pr: f64,
    min_fp: f64,
) -> (usize, usize) {
    let qq = c.s.models.len() - 1;
    let mut sq = b.qlo[t - 1];
    while pr - max_model_prob(c, b, alpha, sq, t - 1, sq) > min_fp {
        sq += 1;
        if sq > b.qhi[t] {
            break;
        }
    }
    if sq < b.qlo[t] {
        sq = b.qlo[t];
    }
    let mut eq = if b.qhi[t - 1] < qq {
        b.qhi[t - 1] + 1
    } else {
        b.qhi[t - 1]
    };
    while eq > sq && pr - max_model_prob(c, b, alpha, eq, t - 1, sq) > min_fp {
        eq -= 1;
    }
    while eq < qq && c.s.min_durs[eq] == 0 {
        eq += 1;
    }
    (sq, eq.min(b.qhi[t]))
}

/// StepAlpha: frame t's alphas of models sq..=eq from frame t − 1's
/// (`prev`), the others zero.
fn step_alpha(c: &Ctx, alpha: &mut [Vec<f64>], prev: &[Vec<f64>], t: usize, sq: usize, eq: usize) {
    let qq = c.s.models.len() - 1;
    for q in 1..sq {
        alpha[q].iter_mut().for_each(|x| *x = LZERO);
    }
    let mut nq = if sq == 1 { 0 } else { c.n(sq - 1) };
    let mut a1n = 0.0;
    for q in sq..=eq {
        let lnq = nq;
        nq = c.n(q);
        let mut a1 = if q == 1 { LZERO } else { prev[q - 1][lnq] };
        if q > 1 && q > sq && a1n > LSMALL {
            a1 = ladd(a1, alpha[q - 1][1] + a1n);
        }
        alpha[q][1] = a1;
        for j in 2..nq {
            let a = c.a(q, 1, j);
            let mut x = if a > LSMALL { a + a1 } else { LZERO };
            for i in 2..nq {
                let (a, y) = (c.a(q, i, j), prev[q][i]);
                if a > LSMALL && y > LSMALL {
                    x = ladd(x, y + a);
                }
            }
            alpha[q][j] = x + c.out(t, q, j);
        }
        alpha[q][nq] = exit_alpha(c, q, nq, &alpha[q], true);
        a1n = c.a(q, 1, nq);
    }
    for q in eq + 1..=qq {
        alpha[q].iter_mut().for_each(|x| *x = LZERO);
    }
}

/// What the statistics of every (frame, model) read.
struct Updates<'a, 'c> {
    c: &'a Ctx<'c>,
    b: &'a Beta,
    tt: usize,
    pr: f64,
    multi_mix: bool,
}

impl Updates<'_, '_> {
    /// Model q's statistics at frame t into `sink`: state occupations
    /// (SetOcct), mixture occupations (UpMixParms) and transitions
    /// (UpTranParms), from its alphas at t (`aqt`) and t − 1 (`prev_q`).
    fn model(
        &self,
        t: usize,
        q: usize,
        aqt: &[f64],
        prev_q: &[f64],
        occ: &mut Vec<f64>,
        sink: &mut dyn FbSink,
    ) {
        let (c, b, qq) = (self.c, self.b, self.c.s.models.len() - 1);
        let Some(bqt) = b.get(t, q) else { return };
        let bqt1 = if t == self.tt { None } else { b.get(t + 1, q) };
        let bq1t = if q == qq { None } else { b.get(t, q + 1) };
        let nq = c.n(q);
        let pr = self.pr;
        // SetOcct
        occ.clear();
        occ.resize(nq + 1, 0.0);
        for i in 1..=nq {
            let mut x = aqt[i] + bqt[i];
            if i == 1 && c.a(q, 1, nq) > LSMALL {
                if let Some(bq1t) = bq1t {
                    x = ladd(x, aqt[1] + bq1t[1] + c.a(q, 1, nq));
                }
            }
            x -= pr;
            occ[i] = if x > MINEARG { x.exp() } else { 0.0 };
        }
        sink.state_occ(q, t, occ);
        self.mixes(t, q, aqt, prev_q, bqt, sink);
        self.transitions(t, q, aqt, (bqt, bqt1, bq1t), sink);
    }

    /// UpMixParms: per emitting state, the log occupation and the log of
    /// (alpha into j without its output) + beta − pr.
    fn mixes(
        &self,
        t: usize,
        q: usize,
        aqt: &[f64],
        prev_q: &[f64],
        bqt: &[f64],
        sink: &mut dyn FbSink,
    ) {
        let (c, pr, nq) = (self.c, self.pr, self.c.n(q));
        for j in 2..nq {
            let log_occ = aqt[j] + bqt[j] - pr;
            let mut initx = LZERO;
            if self.multi_mix {
                initx = c.a(q, 1, j) + aqt[1];
                if t > 1 {
                    for i in 2..nq {
                        let a = c.a(q, i, j);
                        if a > LSMALL {
                            initx = ladd(initx, prev_q[i] + a);
                        }
                    }
                }
                initx += bqt[j] - pr;
            }
            sink.mix_occ(q, j, t, log_occ, initx);
        }
    }

    /// UpTranParms, from beta at (t, q), (t + 1, q) and (t, q + 1).
    fn transitions(
        &self,
        t: usize,
        q: usize,
        aqt: &[f64],
        (bqt, bqt1, bq1t): (&[f64], Option<&Vec<f64>>, Option<&Vec<f64>>),
        sink: &mut dyn FbSink,
    ) {
        let (c, pr, nq) = (self.c, self.pr, self.c.n(q));
        for i in 1..nq {
            for j in 2..=nq {
                let ai = c.a(q, i, j);
                let mut add = |x: f64| {
                    if x > MINEARG {
                        sink.trans(q, i, j, x.exp());
                    }
                };
                if i == 1 && j < nq {
                    add(aqt[1] + ai + c.out(t, q, j) + bqt[j] - pr);
                } else if i > 1 && j < nq {
                    if let Some(bqt1) = bqt1 {
                        add(aqt[i] + ai + c.out(t + 1, q, j) + bqt1[j] - pr);
                    }
                } else if i > 1 && j == nq {
                    add(aqt[i] + ai + bqt[nq] - pr);
                }
                if i == 1 && j == nq && ai > LSMALL {
                    if let Some(bq1t) = bq1t {
                        add(aqt[1] + ai + bq1t[1] - pr);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladd_is_log_sum_exp_with_htks_cut_off() {
        let (a, b) = (-3.0f64, -4.5f64);
        assert!((ladd(a, b) - (a.exp() + b.exp()).ln()).abs() < 1e-12);
        assert_eq!(ladd(a, b), ladd(b, a));
        // Terms more than 23.03 below the larger one are dropped...
        assert_eq!(ladd(-1.0, -25.0), -1.0);
        // ...and LZERO + LZERO stays below LSMALL (HTK adds log 2 too).
        assert!(ladd(LZERO, LZERO) < LSMALL);
        assert_eq!(ladd(LZERO, -5.0), -5.0);
    }

    #[test]
    fn beam_taper_follows_minimum_durations() {
        // Models of 3, 0 (tee) and 3 frames over 8 frames (index 0 unused).
        let dms = [0, 3, 0, 3];
        let (mut lo, mut hi) = (vec![0; 10], vec![0; 10]);
        beam_taper(&dms, 3, 8, &mut lo, &mut hi);
        // Model 3 cannot be reached before frame 4, model 1 not left before 3.
        assert_eq!(&hi[1..=8], &[1, 1, 1, 3, 3, 3, 3, 3]);
        assert_eq!(&lo[1..=8], &[1, 1, 1, 1, 1, 3, 3, 3]);
    }
}
