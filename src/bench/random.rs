//! Reproducible random models and features for benchmarks and property tests:
//! a small fixed-seed generator (SplitMix64) and the inputs the benchmark
//! README asks for — weights uniform then normalised, means N(0,1), variances
//! U(0.5, 1), features N(0,1); full covariances as the peer makes them
//! (precision `P = L Lᵀ`, `L = 0.1·N(0,1) + I`).

use crate::model::{AcousticModel, CovKind, StateGmm};

/// SplitMix64: tiny, fast, good enough for test inputs, same stream everywhere.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
    spare: Option<f64>,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng {
            state: seed,
            spare: None,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform integer in `lo..=hi`.
    pub fn int(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        let r = (-2.0 * u1.ln()).sqrt();
        let th = 2.0 * std::f64::consts::PI * u2;
        self.spare = Some(r * th.sin());
        r * th.cos()
    }
}

/// `n × dim` features, N(0,1).
pub fn features(rng: &mut Rng, n: usize, dim: usize) -> Vec<f32> {
    (0..n * dim).map(|_| rng.normal() as f32).collect()
}

/// [`features`] scaled by a factor of its own every 997 frames, e^N(0,σ²)
/// (`spread` σ): sums over different blocks differ in exponent, so adding
/// them in another order rounds differently (tests of summation order).
pub fn uneven_features(rng: &mut Rng, n: usize, dim: usize, spread: f64) -> Vec<f32> {
    let mut data = features(rng, n, dim);
    for block in data.chunks_mut(997 * dim.max(1)) {
        let scale = (rng.normal() * spread).exp() as f32;
        block.iter_mut().for_each(|x| *x *= scale);
    }
    data
}

/// Normalised weights: uniform draws (never zero) scaled to sum 1.
fn weights(rng: &mut Rng, m: usize) -> Vec<f64> {
    let w: Vec<f64> = (0..m).map(|_| rng.uniform() + 0.1).collect();
    let s: f64 = w.iter().sum();
    w.iter().map(|x| x / s).collect()
}

const LOG_2PI: f64 = 1.837_877_066_409_345_5;

/// A diagonal state with `m` Gaussians in Kaldi's parameterisation.
pub fn diag_state(rng: &mut Rng, m: usize, dim: usize) -> StateGmm {
    let w = weights(rng, m);
    let mut st = StateGmm {
        gconsts: Vec::with_capacity(m),
        weights: w.iter().map(|&x| x as f32).collect(),
        means_invvars: Vec::with_capacity(m * dim),
        inv_vars: Vec::with_capacity(m * dim),
    };
    for &wg in &w {
        let mut g = wg.ln() - 0.5 * dim as f64 * LOG_2PI;
        for _ in 0..dim {
            let mu = rng.normal();
            let var = 0.5 + 0.5 * rng.uniform();
            g -= 0.5 * (var.ln() + mu * mu / var);
            st.means_invvars.push((mu / var) as f32);
            st.inv_vars.push((1.0 / var) as f32);
        }
        st.gconsts.push(g as f32);
    }
    st
}

/// A full-covariance state with `m` Gaussians (inv_vars = Σ⁻¹ packed lower).
pub fn full_state(rng: &mut Rng, m: usize, dim: usize) -> StateGmm {
    let w = weights(rng, m);
    let v = dim * (dim + 1) / 2;
    let mut st = StateGmm {
        gconsts: Vec::with_capacity(m),
        weights: w.iter().map(|&x| x as f32).collect(),
        means_invvars: Vec::with_capacity(m * dim),
        inv_vars: Vec::with_capacity(m * v),
    };
    for &wg in &w {
        let mu: Vec<f64> = (0..dim).map(|_| rng.normal()).collect();
        let l: Vec<f64> = (0..dim * dim)
            .map(|i| 0.1 * rng.normal() + if i / dim == i % dim { 1.0 } else { 0.0 })
            .collect();
        // P = L Lᵀ, rounded to f32 first so gconst matches the stored matrix.
        let mut p = vec![0f64; dim * dim];
        for i in 0..dim {
            for j in 0..=i {
                let s: f64 = (0..dim).map(|k| l[i * dim + k] * l[j * dim + k]).sum();
                let s = s as f32 as f64;
                p[i * dim + j] = s;
                p[j * dim + i] = s;
            }
        }
        let logdet = cholesky_logdet(&p, dim);
        let pmu: Vec<f64> = (0..dim)
            .map(|i| (0..dim).map(|j| p[i * dim + j] * mu[j]).sum())
            .collect();
        let mpm: f64 = (0..dim).map(|i| mu[i] * pmu[i]).sum();
        st.gconsts
            .push((wg.ln() - 0.5 * (dim as f64 * LOG_2PI - logdet + mpm)) as f32);
        st.means_invvars.extend(pmu.iter().map(|&x| x as f32));
        for i in 0..dim {
            for j in 0..=i {
                st.inv_vars.push(p[i * dim + j] as f32);
            }
        }
    }
    st
}

/// log det of a symmetric positive-definite matrix (row-major `n × n`).
fn cholesky_logdet(a: &[f64], n: usize) -> f64 {
    let mut l = vec![0f64; n * n];
    let mut logdet = 0.0;
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = a[i * n + j] - (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum::<f64>();
            if i == j {
                let d = s.max(1e-300).sqrt();
                l[i * n + i] = d;
                logdet += 2.0 * d.ln();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    logdet
}

/// A model whose state `s` has `counts[s]` Gaussians.
pub fn model(rng: &mut Rng, counts: &[usize], dim: usize, kind: CovKind) -> AcousticModel {
    let states = counts
        .iter()
        .map(|&m| match kind {
            CovKind::Diagonal => diag_state(rng, m, dim),
            CovKind::Full => full_state(rng, m, dim),
        })
        .collect();
    AcousticModel { dim, kind, states }
}

/// Gaussians per state from a skewed distribution on `1..=max` with mean ≈
/// `mean` (a geometric-like law, clipped): most states small, a few large, as
/// in trained models with variable Gaussian counts.
pub fn skewed_counts(rng: &mut Rng, states: usize, mean: f64, max: usize) -> Vec<usize> {
    (0..states)
        .map(|_| {
            let u = 1.0 - rng.uniform();
            let g = 1.0 + (-(mean - 1.0) * u.ln()).floor();
            (g as usize).clamp(1, max)
        })
        .collect()
}

/// Frames and their Gaussian selections (`n` components a frame) as a UBM
/// of an i-vector recipe sees them, made cheaply: frames come in runs of
/// 1–20 (as speech dwells in a sound) around a centre component drawn by
/// weight; a frame is the centre's mean + N(0, 1) in each dimension; its
/// selection is the `n` components whose means are nearest the frame
/// (Euclidean, best first) among the `2n` nearest the centre's mean — a
/// stand-in for `gmm-gselect`'s top `n` by a diagonal approximation, which
/// would cost the full scoring to compute. Returns the frames (`frames ×
/// dim`), the selection offsets (`frames + 1`) and the components.
pub fn selected_frames(
    rng: &mut Rng,
    model: &AcousticModel,
    frames: usize,
    n: usize,
) -> (Vec<f32>, Vec<usize>, Vec<u32>) {
    let d = model.dim;
    let st = &model.states[0];
    let m = st.num_components();
    let n = n.clamp(1, m.max(1));
    let means = component_means(model);
    let k = (2 * n).min(m);
    let candidates = nearest_means(&means, d, k);
    let cumulative: Vec<f64> = st
        .weights
        .iter()
        .scan(0.0, |s, &w| {
            *s += w as f64;
            Some(*s)
        })
        .collect();
    let total = cumulative.last().copied().unwrap_or(1.0);
    let mut data = Vec::with_capacity(frames * d);
    let mut offsets = Vec::with_capacity(frames + 1);
    let mut comps = Vec::with_capacity(frames * n);
    offsets.push(0);
    let (mut centre, mut left) = (0, 0);
    let mut dist: Vec<(f64, u32)> = Vec::with_capacity(k);
    while offsets.len() <= frames {
        if left == 0 {
            let u = rng.uniform() * total;
            centre = cumulative.partition_point(|&c| c < u).min(m - 1);
            left = rng.int(1, 20);
        }
        left -= 1;
        let x: Vec<f32> = means[centre * d..(centre + 1) * d]
            .iter()
            .map(|&mu| (mu + rng.normal()) as f32)
            .collect();
        dist.clear();
        for &g in &candidates[centre * k..(centre + 1) * k] {
            let mu = &means[g as usize * d..(g as usize + 1) * d];
            let e: f64 = x
                .iter()
                .zip(mu)
                .map(|(&a, &b)| (a as f64 - b).powi(2))
                .sum();
            dist.push((e, g));
        }
        dist.sort_by(|a, b| a.0.total_cmp(&b.0));
        comps.extend(dist.iter().take(n).map(|&(_, g)| g));
        offsets.push(comps.len());
        data.extend_from_slice(&x);
    }
    (data, offsets, comps)
}

/// The means of state 0's components (`m × dim`, f64): μ/σ² · σ², or the
/// full covariance's Σ⁻¹μ solved.
fn component_means(model: &AcousticModel) -> Vec<f64> {
    use crate::stats::linalg::{sp_invert, sp_vec};
    let d = model.dim;
    let st = &model.states[0];
    let v = model.inv_var_len();
    let mut out = Vec::with_capacity(st.num_components() * d);
    for g in 0..st.num_components() {
        let b: Vec<f64> = st.means_invvars[g * d..(g + 1) * d]
            .iter()
            .map(|&x| x as f64)
            .collect();
        let iv: Vec<f64> = st.inv_vars[g * v..(g + 1) * v]
            .iter()
            .map(|&x| x as f64)
            .collect();
        match model.kind {
            CovKind::Diagonal => out.extend(b.iter().zip(&iv).map(|(b, p)| b / p)),
            CovKind::Full => match sp_invert(&iv, d) {
                Some(cov) => out.extend(sp_vec(&cov, d, &b)),
                None => out.extend(b),
            },
        }
    }
    out
}

/// For each of the `means.len() / dim` means, the `k` nearest (itself
/// first), `k` a row.
fn nearest_means(means: &[f64], dim: usize, k: usize) -> Vec<u32> {
    let m = means.len() / dim.max(1);
    let mut out = Vec::with_capacity(m * k);
    let mut dist: Vec<(f64, u32)> = Vec::with_capacity(m);
    for a in 0..m {
        let ma = &means[a * dim..(a + 1) * dim];
        dist.clear();
        for b in 0..m {
            let mb = &means[b * dim..(b + 1) * dim];
            let e: f64 = ma.iter().zip(mb).map(|(x, y)| (x - y).powi(2)).sum();
            dist.push((e, b as u32));
        }
        if k < m {
            dist.select_nth_unstable_by(k, |x, y| x.0.total_cmp(&y.0));
        }
        dist[..k].sort_by(|x, y| x.0.total_cmp(&y.0));
        out.extend(dist[..k].iter().map(|&(_, b)| b));
    }
    out
}

/// `frames` rows cut into utterances of 0 to `max_len` frames, each needing
/// up to 40 of `states` states in any order, repeats allowed (some none):
/// the shape of forced alignment's state subsets, for tests.
pub fn state_subsets(
    rng: &mut Rng,
    frames: usize,
    states: usize,
    max_len: usize,
) -> crate::engine::StateSubsets {
    let mut s = crate::engine::StateSubsets::new();
    let mut left = frames;
    while left > 0 {
        let n = rng.int(0, max_len.max(1)).min(left);
        let cols: Vec<u32> = (0..rng.int(0, 40))
            .map(|_| rng.int(0, states - 1) as u32)
            .collect();
        s.push(n, &cols);
        left -= n;
    }
    s
}
