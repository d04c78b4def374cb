//! The CPU engine: the reference for correctness and the fallback without a GPU.
//!
//! Both covariance kinds use the GEMM formulation (Vaněk et al. 2012, eq. 1–3;
//! Kaldi computes the same sums): a frame `x` is expanded to `xe` —
//! diagonal `[x, x²]`, full `[x, q]` with `q` Kaldi's packed lower triangle of
//! `x xᵀ` whose diagonal is halved — and each Gaussian's parameters to a column
//! `[μ/σ², −½/σ²]` (diagonal) or `[Σ⁻¹μ, −Σ⁻¹ packed]` (full), so that
//! `loglike = gconst + xe·column`. Both are stored by dimension, last
//! dimension first (`xᵢ` next to its own row of `q`: diagonal
//! `x_{D−1}, x_{D−1}², …, x₀, x₀²`, full `…, x₁, x₁x₀, ½x₁², x₀, ½x₀²`) and
//! summed from zero with the gconst added last ([`kernels`]): the linear and
//! square terms of a dimension cancel, and in feature vectors of statics,
//! Δ and ΔΔ (MFCC, PLP) the large terms, those of the statics, come last,
//! when fewest roundings follow them. On every fixture model the result is
//! more accurate than Kaldi's float BLAS sums (tests/likes_accuracy: mean
//! and worst |error| against f64 at most 0.93× and 0.82× Kaldi's). Gaussians are stored per state in panels of
//! 8 (`[k][lane]`; a state's last panel is padded with virtual Gaussians of
//! gconst −∞, which its log-sum-exp never reads), and [`kernels`] evaluates
//! 6 frames × 16 Gaussians per step in registers. EM statistics are a second
//! GEMM in f64 ([`accumulate`]).
//!
//! Threads: a dedicated rayon pool. Scoring splits frames into blocks (every
//! output element is computed the same way whatever the split); accumulation
//! splits frames into fixed 128-frame chunks whose f64 partial sums are added
//! in chunk order, so results are bit-identical for any thread count.

mod accumulate;
#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod kernels;
mod selected;

use rayon::prelude::*;

use super::{Engine, FrameBatch, FrameTargets, LoadedModel, StateSubsets};
use crate::model::{AcousticModel, CovKind};
use crate::stats::ModelAccumulators;
use crate::{Error, Result};
use kernels::LANES;

/// The CPU engine with its own thread pool.
pub struct CpuEngine {
    pool: rayon::ThreadPool,
    threads: usize,
}

impl CpuEngine {
    /// An engine with `threads` worker threads (0: one per CPU).
    pub fn new(threads: usize) -> Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("amtool-cpu-{i}"))
            .build()
            .map_err(|e| Error::Engine(format!("cannot start the CPU thread pool: {e}")))?;
        let threads = pool.current_num_threads();
        Ok(CpuEngine { pool, threads })
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The model in the engine's layout, without the engine (for callers that
    /// run the kernels themselves).
    pub fn pack(model: &AcousticModel) -> Result<PackedModel> {
        PackedModel::new(model)
    }
}

impl Engine for CpuEngine {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device(&self) -> String {
        let t = self.threads;
        let threads = format!("{t} CPU thread{}", if t == 1 { "" } else { "s" });
        match cpu_model_name() {
            Some(name) => format!("{name}, {threads}"),
            None => threads,
        }
    }

    fn cpu_threads(&self) -> Option<usize> {
        Some(self.threads)
    }

    fn load<'e>(&'e self, model: &AcousticModel) -> Result<Box<dyn LoadedModel + 'e>> {
        Ok(Box::new(CpuModel {
            engine: self,
            packed: PackedModel::new(model)?,
        }))
    }
}

/// The CPU's name from /proc/cpuinfo (Linux), for benchmark records.
fn cpu_model_name() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

/// A model in the CPU engine's layout: per state, its Gaussians' expanded
/// parameter columns in panels of [`LANES`].
#[derive(Debug, Clone)]
pub struct PackedModel {
    pub dim: usize,
    pub kind: CovKind,
    /// Width of an expanded frame (`2D` or `D + D(D+1)/2`).
    pub k: usize,
    /// Gaussians per state.
    pub counts: Vec<usize>,
    /// First panel of each state; one more entry holds the total.
    pub panel_offsets: Vec<usize>,
    /// `panels × k × LANES`.
    pub a: Vec<f32>,
    /// `panels × LANES` gconsts (−∞ for padding lanes).
    pub bias: Vec<f32>,
}

impl PackedModel {
    pub fn new(model: &AcousticModel) -> Result<Self> {
        let (d, v) = (model.dim, model.inv_var_len());
        if d == 0 {
            return Err(Error::Mismatch("model has dimension 0".into()));
        }
        let k = d + v;
        let counts: Vec<usize> = model.states.iter().map(|s| s.num_components()).collect();
        let mut panel_offsets = Vec::with_capacity(counts.len() + 1);
        panel_offsets.push(0);
        for &c in &counts {
            panel_offsets.push(panel_offsets.last().unwrap_or(&0) + c.div_ceil(LANES));
        }
        let panels = *panel_offsets.last().unwrap_or(&0);
        let mut a = vec![0f32; panels * k * LANES];
        let mut bias = vec![f32::NEG_INFINITY; panels * LANES];
        for (s, st) in model.states.iter().enumerate() {
            let m = st.num_components();
            if st.means_invvars.len() != m * d
                || st.inv_vars.len() != m * v
                || st.weights.len() != m
            {
                return Err(Error::Mismatch(format!(
                    "state {s}: parameter sizes do not match {m} components of dimension {d}"
                )));
            }
            for g in 0..m {
                let (p, lane) = (panel_offsets[s] + g / LANES, g % LANES);
                bias[p * LANES + lane] = st.gconsts[g];
                let col = |kk: usize| (p * k + kk) * LANES + lane;
                let iv = &st.inv_vars[g * v..(g + 1) * v];
                for i in 0..d {
                    let at = term_start(model.kind, d, i);
                    a[col(at)] = st.means_invvars[g * d + i];
                    match model.kind {
                        // −½ is exact in f32, so this is Kaldi's −0.5·inv_vars.
                        CovKind::Diagonal => a[col(at + 1)] = -0.5 * iv[i],
                        // Row i of the packed Σ⁻¹, paired with q (diagonal
                        // halved): −Σ q·P = −½ xᵀΣ⁻¹x, as Kaldi's TraceSpSpLower.
                        CovKind::Full => {
                            let r = i * (i + 1) / 2;
                            (0..=i).for_each(|j| a[col(at + 1 + j)] = -iv[r + j]);
                        }
                    }
                }
            }
        }
        Ok(PackedModel {
            dim: d,
            kind: model.kind,
            k,
            counts,
            panel_offsets,
            a,
            bias,
        })
    }

    pub fn num_states(&self) -> usize {
        self.counts.len()
    }

    fn state_panels(&self, s: usize) -> (usize, &[f32], &[f32]) {
        let (p0, p1) = (self.panel_offsets[s], self.panel_offsets[s + 1]);
        (
            p1 - p0,
            &self.a[p0 * self.k * LANES..p1 * self.k * LANES],
            &self.bias[p0 * LANES..p1 * LANES],
        )
    }

    /// Expand `x` (length `dim`) into `out` (length `k`), in f32, by
    /// dimension, last first (see the module docs and [`term_start`]).
    pub fn expand(&self, x: &[f32], out: &mut [f32]) {
        let mut idx = 0;
        for i in (0..self.dim).rev() {
            out[idx] = x[i];
            idx += 1;
            if self.kind == CovKind::Full {
                for j in 0..i {
                    out[idx] = x[i] * x[j];
                    idx += 1;
                }
                out[idx] = 0.5 * x[i] * x[i];
            } else {
                out[idx] = x[i] * x[i];
            }
            idx += 1;
        }
    }

    /// Log-likelihoods of the components of state `s` for `rows` expanded
    /// frames `xe` (`rows × k`): the first `rows × panels·LANES` values of
    /// `l` (grown when shorter; row stride returned).
    pub fn component_block(&self, s: usize, rows: usize, xe: &[f32], l: &mut Vec<f32>) -> usize {
        let (np, a, bias) = self.state_panels(s);
        let ldo = np * LANES;
        if l.len() < rows * ldo {
            l.resize(rows * ldo, 0.0);
        }
        kernels::loglikes(rows, self.k, xe, self.k, a, bias, np, l, ldo);
        ldo
    }

    /// The log-likelihoods of state `s` for `rows` expanded frames `xe`
    /// (`rows × k`) into `out[r · stride]` (`comp`: scratch): the arithmetic
    /// of every state log-likelihood this engine computes, so a value is the
    /// same bits whichever caller asks and with whichever rows.
    pub fn state_rows(
        &self,
        s: usize,
        rows: usize,
        xe: &[f32],
        comp: &mut Vec<f32>,
        out: &mut [f32],
        stride: usize,
    ) {
        let ldo = self.component_block(s, rows, xe, comp);
        // Whole padded rows: virtual lanes are −∞ and add exactly 0.
        kernels::log_sum_exp_rows(comp, rows, ldo, out, stride);
    }

    /// The log-likelihoods of `states` for a block of frames into `out`
    /// (`rows × states.len()`).
    fn score_columns(&self, feats: &[f32], rows: usize, states: &[u32], out: &mut [f32]) {
        let (d, k) = (self.dim, self.k);
        let mut xe = vec![0f32; rows * k];
        for r in 0..rows {
            self.expand(&feats[r * d..(r + 1) * d], &mut xe[r * k..(r + 1) * k]);
        }
        let mut l = Vec::new();
        for (c, &s) in states.iter().enumerate() {
            self.state_rows(s as usize, rows, &xe, &mut l, &mut out[c..], states.len());
        }
    }
}

/// Where dimension `i`'s terms start in an expanded frame of dimension `d`
/// (last dimension first): `xᵢ`, then diagonal `xᵢ²`, full
/// `xᵢx₀ … xᵢxᵢ₋₁, ½xᵢ²` (row i of the packed `q`).
fn term_start(kind: CovKind, d: usize, i: usize) -> usize {
    match kind {
        CovKind::Diagonal => 2 * (d - 1 - i),
        // Rows d−1 … i+1 come first; row j holds j + 2 terms.
        CovKind::Full => (i + 1..d).map(|j| j + 2).sum(),
    }
}

/// Frames per parallel block of a subset call (a multiple of the kernel's rows).
const SUBSET_ROWS: usize = 20 * kernels::MR;

/// A model loaded on the CPU engine.
pub struct CpuModel<'e> {
    engine: &'e CpuEngine,
    packed: PackedModel,
}

fn check_feats(p: &PackedModel, feats: &FrameBatch<'_>) -> Result<()> {
    if feats.dim != p.dim {
        return Err(Error::Mismatch(format!(
            "features have dimension {}, the model {}",
            feats.dim, p.dim
        )));
    }
    if feats.data.len() != feats.frames * feats.dim {
        return Err(Error::Mismatch(format!(
            "frame batch holds {} values, not {} frames × {}",
            feats.data.len(),
            feats.frames,
            feats.dim
        )));
    }
    Ok(())
}

impl LoadedModel for CpuModel<'_> {
    fn num_states(&self) -> usize {
        self.packed.num_states()
    }

    fn state_loglikes(&mut self, feats: FrameBatch<'_>, out: &mut [f32]) -> Result<()> {
        let p = &self.packed;
        check_feats(p, &feats)?;
        let ns = p.num_states();
        if out.len() != feats.frames * ns {
            return Err(Error::Mismatch(format!(
                "output holds {} values, not {} frames × {} states",
                out.len(),
                feats.frames,
                ns
            )));
        }
        if ns == 0 || feats.frames == 0 {
            return Ok(());
        }
        // Blocks of whole micro-kernel row groups, enough of them to keep every
        // thread busy; each output is computed identically whatever the block.
        let per_thread = feats.frames.div_ceil(self.engine.threads);
        let fr = per_thread
            .next_multiple_of(kernels::MR)
            .clamp(kernels::MR, 120);
        let d = p.dim;
        let all: Vec<u32> = (0..ns as u32).collect();
        self.engine.pool.install(|| {
            out.par_chunks_mut(fr * ns).enumerate().for_each(|(i, o)| {
                let rows = o.len() / ns;
                p.score_columns(&feats.data[i * fr * d..(i * fr + rows) * d], rows, &all, o);
            })
        });
        Ok(())
    }

    /// Only the states asked for, each utterance's rows in blocks of up to
    /// 120 frames in parallel (`state_rows`, as every score of this engine).
    fn state_loglikes_subset(
        &mut self,
        feats: FrameBatch<'_>,
        subsets: &StateSubsets,
        out: &mut [f32],
    ) -> Result<()> {
        let p = &self.packed;
        check_feats(p, &feats)?;
        subsets.check(feats.frames, p.num_states(), out.len())?;
        let d = p.dim;
        let mut jobs = Vec::new();
        let mut row = 0;
        for (u, block) in subsets.split_mut(out).into_iter().enumerate() {
            let states = subsets.states(u);
            if !states.is_empty() {
                for (i, o) in block.chunks_mut(SUBSET_ROWS * states.len()).enumerate() {
                    jobs.push((row + i * SUBSET_ROWS, states, o));
                }
            }
            row += subsets.frames(u);
        }
        self.engine.pool.install(|| {
            jobs.into_par_iter().for_each(|(r0, states, o)| {
                let rows = o.len() / states.len();
                p.score_columns(&feats.data[r0 * d..(r0 + rows) * d], rows, states, o);
            })
        });
        Ok(())
    }

    fn component_loglikes(
        &mut self,
        state: usize,
        feats: FrameBatch<'_>,
        out: &mut [f32],
    ) -> Result<()> {
        let p = &self.packed;
        check_feats(p, &feats)?;
        if state >= p.num_states() {
            return Err(Error::Mismatch(format!(
                "state {state} out of range (model has {})",
                p.num_states()
            )));
        }
        let m = p.counts[state];
        if out.len() != feats.frames * m {
            return Err(Error::Mismatch(format!(
                "output holds {} values, not {} frames × {} components",
                out.len(),
                feats.frames,
                m
            )));
        }
        let (d, k) = (p.dim, p.k);
        let mut xe = vec![0f32; feats.frames * k];
        for t in 0..feats.frames {
            p.expand(&feats.data[t * d..(t + 1) * d], &mut xe[t * k..(t + 1) * k]);
        }
        let mut l = Vec::new();
        let ldo = p.component_block(state, feats.frames, &xe, &mut l);
        for t in 0..feats.frames {
            out[t * m..(t + 1) * m].copy_from_slice(&l[t * ldo..t * ldo + m]);
        }
        Ok(())
    }

    fn accumulate(
        &mut self,
        feats: FrameBatch<'_>,
        targets: FrameTargets<'_>,
        acc: &mut ModelAccumulators,
    ) -> Result<f64> {
        check_feats(&self.packed, &feats)?;
        accumulate::accumulate(
            &self.engine.pool,
            self.engine.threads,
            &self.packed,
            feats,
            targets,
            acc,
        )
    }
}
