//! Changing the number of Gaussians: Kaldi's `AmDiagGmm::SplitByCount` /
//! `MergeByCount` (gmm/am-diag-gmm.cc: per-state targets from occupancy^power
//! with a minimum count per Gaussian), `DiagGmm::Split` (halve the heaviest
//! component, perturb the two means by ± perturb × σ × N(0,1)), `DiagGmm::Merge`
//! (greedy pairwise merge with the least likelihood loss) and `FullGmm::Split`.
//!
//! The Gaussian COUNT per state is exactly Kaldi's: the targets come from the
//! same priority queue (libstdc++'s binary heap is reproduced, so ties break
//! as in Kaldi) with the same float arithmetic. The perturbation uses
//! [`KaldiRng`], a reimplementation of glibc's `rand()` with its default seed
//! and Kaldi's `RandGauss`, so a fresh `gmm-est` process's random draws are
//! reproduced too, and the perturbation is added as Kaldi's BLAS adds it
//! ([`blas_saxpy`]): the diagonal splits are Kaldi's to the bit on the
//! fixtures (`gmm-est --mix-up`, `gmm-global-est --mix-up`, tested); the
//! full-covariance ones within float rounding (the Cholesky factor here is
//! f64).

use crate::model::StateGmm;
use crate::stats::linalg::{cholesky, sp_len};
use crate::stats::mle_diag::diag_gconsts;
use crate::stats::mle_full::full_gconsts;

/// glibc's `rand()` (the TYPE_3 additive feedback generator, degree 31) with
/// the seed a process starts with (`srand(1)`), and Kaldi's `RandUniform` /
/// `RandGauss` on top. Kaldi's GMM tools never seed it, so every run of
/// gmm-est draws the same numbers.
#[derive(Debug, Clone)]
pub struct KaldiRng {
    /// The last 31 values of glibc's sequence r[i] = r[i−31] + r[i−3].
    ring: [u32; 31],
    /// Index in `ring` of r[i−31] for the next i.
    head: usize,
}

impl Default for KaldiRng {
    fn default() -> Self {
        KaldiRng::new(1)
    }
}

impl KaldiRng {
    /// As after `srand(seed)`.
    pub fn new(seed: u32) -> Self {
        let seed = if seed == 0 { 1 } else { seed };
        let mut r = [0i64; 31];
        r[0] = seed as i64;
        for i in 1..31 {
            // 16807 · r mod (2³¹ − 1) by Schrage's method, as glibc's srandom_r.
            let hi = r[i - 1] / 127_773;
            let lo = r[i - 1] % 127_773;
            let mut word = 16_807 * lo - 2_836 * hi;
            if word < 0 {
                word += 2_147_483_647;
            }
            r[i] = word;
        }
        let mut ring = [0u32; 31];
        for i in 0..31 {
            ring[i] = r[i] as u32;
        }
        // r[31..34] = r[0..3]: the ring is shifted by three.
        let mut rng = KaldiRng { ring, head: 0 };
        let first: Vec<u32> = (0..3).map(|i| rng.ring[i]).collect();
        let mut shifted = [0u32; 31];
        for i in 0..31 {
            shifted[i] = if i < 28 {
                rng.ring[i + 3]
            } else {
                first[i - 28]
            };
        }
        rng.ring = shifted;
        // glibc discards r[34..344].
        for _ in 34..344 {
            rng.step();
        }
        rng
    }

    fn step(&mut self) -> u32 {
        // ring[head] is r[i−31]; r[i−3] is 28 places after it (mod 31).
        let v = self.ring[self.head].wrapping_add(self.ring[(self.head + 28) % 31]);
        self.ring[self.head] = v;
        self.head = (self.head + 1) % 31;
        v
    }

    /// `rand()`: 0 ..= RAND_MAX (2³¹ − 1).
    pub fn rand(&mut self) -> u32 {
        self.step() >> 1
    }

    /// Kaldi's `RandUniform`: `float((rand() + 1.0) / (RAND_MAX + 2.0))`.
    pub fn rand_uniform(&mut self) -> f32 {
        ((self.rand() as f64 + 1.0) / (2_147_483_647.0 + 2.0)) as f32
    }

    /// Kaldi's `RandGauss`:
    /// `sqrtf(-2 * logf(RandUniform())) * cosf(2π RandUniform())`. The two
    /// draws are made in the order gcc evaluates that expression (left first).
    pub fn rand_gauss(&mut self) -> f32 {
        let u1 = self.rand_uniform();
        let u2 = self.rand_uniform();
        (-2.0f32 * u1.ln()).sqrt() * ((2.0 * std::f64::consts::PI * u2 as f64) as f32).cos()
    }

    /// Kaldi's `VectorBase<float>::SetRandn`: a `RandomState` seeded with
    /// `rand() + 27437` (one draw from this generator), then `RandGauss2`
    /// pairs from glibc's `rand_r` on that seed, and for an odd `dim` the
    /// last element from `RandGauss` on the same state.
    pub fn randn_vector(&mut self, dim: usize) -> Vec<f32> {
        let mut state = RandRState(self.rand().wrapping_add(27_437));
        let mut v = Vec::with_capacity(dim);
        while v.len() + 1 < dim {
            let u1 = state.rand_uniform();
            let u2 = state.rand_uniform();
            let r = (-2.0f32 * u1.ln()).sqrt();
            let angle = (2.0 * std::f64::consts::PI * u2 as f64) as f32;
            v.push(r * angle.cos());
            v.push(r * angle.sin());
        }
        if v.len() < dim {
            let u1 = state.rand_uniform();
            let u2 = state.rand_uniform();
            let angle = (2.0 * std::f64::consts::PI * u2 as f64) as f32;
            v.push((-2.0f32 * u1.ln()).sqrt() * angle.cos());
        }
        v
    }
}

/// glibc's `rand_r` (three steps of the ANSI LCG, 31 bits) on its seed: the
/// generator of Kaldi's `RandomState`.
struct RandRState(u32);

impl RandRState {
    fn rand(&mut self) -> u32 {
        let mut next = self.0;
        next = next.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let mut result = (next / 65_536) % 2_048;
        next = next.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        result = (result << 10) ^ ((next / 65_536) % 1_024);
        next = next.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        result = (result << 10) ^ ((next / 65_536) % 1_024);
        self.0 = next;
        result
    }

    /// Kaldi's `RandUniform(&state)`.
    fn rand_uniform(&mut self) -> f32 {
        ((self.rand() as f64 + 1.0) / (2_147_483_647.0 + 2.0)) as f32
    }
}

/// One entry of Kaldi's split queue (`CountStats`).
#[derive(Debug, Clone, Copy)]
struct CountStats {
    pdf: usize,
    num_components: usize,
    occupancy: f32,
}

impl CountStats {
    /// `operator<`: `occ / (n + 1e-10)` compared in double.
    fn less(&self, other: &CountStats) -> bool {
        (self.occupancy as f64) / (self.num_components as f64 + 1.0e-10)
            < (other.occupancy as f64) / (other.num_components as f64 + 1.0e-10)
    }
}

/// `std::priority_queue<CountStats>` as libstdc++ implements it (a binary
/// max-heap with `push_heap`/`pop_heap`), so equal keys come out in Kaldi's
/// order.
struct KaldiHeap(Vec<CountStats>);

impl KaldiHeap {
    fn push(&mut self, v: CountStats) {
        self.0.push(v);
        let mut hole = self.0.len() - 1;
        // __push_heap: move up while parent < value.
        while hole > 0 {
            let parent = (hole - 1) / 2;
            if self.0[parent].less(&v) {
                self.0[hole] = self.0[parent];
                hole = parent;
            } else {
                break;
            }
        }
        self.0[hole] = v;
    }

    fn top(&self) -> Option<CountStats> {
        self.0.first().copied()
    }

    fn pop(&mut self) {
        let len = self.0.len();
        if len <= 1 {
            self.0.clear();
            return;
        }
        // __pop_heap: the last element goes into the root's hole, adjusted
        // by __adjust_heap (hole sifted to a leaf by the larger child, then
        // the value pushed up).
        let value = self.0[len - 1];
        self.0[len - 1] = self.0[0];
        let n = len - 1;
        let mut hole = 0usize;
        let mut child = hole;
        while child < (n - 1) / 2 {
            child = 2 * (child + 1);
            if self.0[child].less(&self.0[child - 1]) {
                child -= 1;
            }
            self.0[hole] = self.0[child];
            hole = child;
        }
        if n % 2 == 0 && child == (n - 2) / 2 {
            child = 2 * (child + 1);
            self.0[hole] = self.0[child - 1];
            hole = child - 1;
        }
        // __push_heap from hole with top index 0.
        let mut parent = if hole > 0 { (hole - 1) / 2 } else { 0 };
        while hole > 0 && self.0[parent].less(&value) {
            self.0[hole] = self.0[parent];
            hole = parent;
            parent = if hole > 0 { (hole - 1) / 2 } else { 0 };
        }
        self.0[hole] = value;
        self.0.truncate(n);
    }
}

/// Kaldi's `GetSplitTargets` (gmm/model-common.cc): Gaussians per state for a total of
/// `target`, allotted by `occ^power`, no state getting a Gaussian for which
/// `(n + 1) × min_count ≥ occ`. Returns the targets and, when the target could
/// not be reached, Kaldi's warning text.
pub fn split_targets(
    state_occs: &[f32],
    target: usize,
    power: f32,
    min_count: f32,
) -> (Vec<usize>, Option<String>) {
    let mut heap = KaldiHeap(Vec::with_capacity(state_occs.len()));
    for (pdf, &occ) in state_occs.iter().enumerate() {
        heap.push(CountStats {
            pdf,
            num_components: 1,
            occupancy: ((occ as f64).powf(power as f64)) as f32,
        });
    }
    let mut warning = None;
    let mut num_gauss = state_occs.len();
    while num_gauss < target {
        let Some(mut top) = heap.top() else { break };
        if top.occupancy == 0.0 {
            warning = Some(format!(
                "Could not split up to {target} due to min-count = {} (or no counts at all)",
                crate::stats::fmt_g(min_count as f64)
            ));
            break;
        }
        heap.pop();
        let orig_occ = state_occs[top.pdf];
        if (top.num_components as f32 + 1.0) * min_count >= orig_occ {
            // Barred by the min-count: the state leaves the race, and no
            // Gaussian is counted (Kaldi's `GetSplitTargets` counts only
            // real splits, so the others still reach the target).
            top.occupancy = 0.0;
        } else {
            top.num_components += 1;
            num_gauss += 1;
        }
        heap.push(top);
    }
    let mut targets = vec![0; state_occs.len()];
    for e in heap.0 {
        targets[e.pdf] = e.num_components;
    }
    (targets, warning)
}

/// The heaviest of the first `cur` components (the first on ties), its
/// weight halved and a copy of it appended with its inverse variances
/// (`vlen` a component): the pair a split makes, before its means are
/// perturbed ([`perturb_pair`]). Returns its index.
fn halve_heaviest(gmm: &mut StateGmm, cur: usize, vlen: usize) -> usize {
    let mut max_idx = 0;
    for i in 1..cur {
        if gmm.weights[i] > gmm.weights[max_idx] {
            max_idx = i;
        }
    }
    gmm.weights[max_idx] /= 2.0;
    gmm.weights.push(gmm.weights[max_idx]);
    gmm.inv_vars
        .extend_from_within(max_idx * vlen..(max_idx + 1) * vlen);
    max_idx
}

/// The split pair's means: a new last row, row `max_idx` plus `perturb` ×
/// `rand_vec`, and row `max_idx` minus it. Kaldi does both with
/// `VectorBase::AddVec`, which is BLAS's `saxpy`: OpenBLAS's x86-64 kernels
/// (Haswell and later) take the first `n & !15` elements in blocks of 16
/// with fused multiply-adds and the rest with a product and a sum, and so
/// does [`blas_saxpy`]. (A product and a sum everywhere differed from
/// Kaldi's split means in the last bit now and then, and the training
/// parted from Kaldi's at the first mix-up of steps/train_mono.sh.)
fn perturb_pair(means: &mut Vec<f32>, max_idx: usize, dim: usize, perturb: f32, rand_vec: &[f32]) {
    let row = max_idx * dim..(max_idx + 1) * dim;
    let mut new_row = means[row.clone()].to_vec();
    blas_saxpy(perturb, rand_vec, &mut new_row);
    blas_saxpy(-perturb, rand_vec, &mut means[row]);
    means.extend(new_row);
}

/// `y += alpha · x` as OpenBLAS's x86-64 `saxpy` computes it: fused
/// multiply-adds over the first `n & !15` elements, a rounded product added
/// over the rest.
pub fn blas_saxpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let fused = n & !15;
    for (yi, &xi) in y[..fused].iter_mut().zip(&x[..fused]) {
        *yi = alpha.mul_add(xi, *yi);
    }
    for (yi, &xi) in y[fused..n].iter_mut().zip(&x[fused..n]) {
        *yi += alpha * xi;
    }
}

/// Kaldi's `DiagGmm::Split`: up to `target` components by repeatedly halving
/// the heaviest (first on ties) and perturbing the pair's means.
pub fn split_diag(
    gmm: &mut StateGmm,
    dim: usize,
    target: usize,
    perturb_factor: f32,
    rng: &mut KaldiRng,
) -> Result<(), String> {
    let mut cur = gmm.num_components();
    if target < cur || cur == 0 {
        return Err(format!("Cannot split from {cur} to {target} components"));
    }
    while cur < target {
        let max_idx = halve_heaviest(gmm, cur, dim);
        let rand_vec: Vec<f32> = (0..dim)
            .map(|d| rng.rand_gauss() * gmm.inv_vars[max_idx * dim + d].sqrt())
            .collect();
        perturb_pair(
            &mut gmm.means_invvars,
            max_idx,
            dim,
            perturb_factor,
            &rand_vec,
        );
        cur += 1;
    }
    gmm.gconsts = diag_gconsts(&gmm.weights, &gmm.means_invvars, &gmm.inv_vars, dim)?;
    Ok(())
}

/// Kaldi's `FullGmm::Split`: as [`split_diag`], the perturbation drawn as
/// `Lᵀ r` with `r` from `SetRandn` ([`KaldiRng::randn_vector`]) and `L` the
/// Cholesky factor of Σ⁻¹ (f64 here; Kaldi uses float).
pub fn split_full(
    gmm: &mut StateGmm,
    dim: usize,
    target: usize,
    perturb_factor: f32,
    rng: &mut KaldiRng,
) -> Result<(), String> {
    let vlen = sp_len(dim);
    let mut cur = gmm.num_components();
    if target <= cur || cur == 0 {
        return Err(format!("Cannot split from {cur} to {target} components"));
    }
    while cur < target {
        let max_idx = halve_heaviest(gmm, cur, vlen);
        let r: Vec<f64> = rng
            .randn_vector(dim)
            .into_iter()
            .map(|x| x as f64)
            .collect();
        let icov: Vec<f64> = gmm.inv_vars[max_idx * vlen..(max_idx + 1) * vlen]
            .iter()
            .map(|&x| x as f64)
            .collect();
        let l = cholesky(&icov, dim).ok_or_else(|| {
            format!("component {max_idx}: inverse covariance not positive definite")
        })?;
        // rand_vec = Lᵀ r.
        let rand_vec: Vec<f32> = (0..dim)
            .map(|j| (j..dim).map(|i| l[i * dim + j] * r[i]).sum::<f64>() as f32)
            .collect();
        perturb_pair(
            &mut gmm.means_invvars,
            max_idx,
            dim,
            perturb_factor,
            &rand_vec,
        );
        cur += 1;
    }
    gmm.gconsts = full_gconsts(&gmm.weights, &gmm.means_invvars, &gmm.inv_vars, dim)?;
    Ok(())
}

/// log det of a merged pair (Kaldi's `merged_components_logdet`, in float).
fn merged_logdet(w1: f32, w2: f32, f1: &[f32], f2: &[f32], s1: &[f32], s2: &[f32]) -> f32 {
    let w_sum = w1 + w2;
    let mut ld = 0.0f32;
    for d in 0..f1.len() {
        let m = (f1[d] + (w2 / w1) * f2[d]) * (w1 / w_sum);
        let v = (s1[d] + (w2 / w1) * s2[d]) * (w1 / w_sum) - m * m;
        ld = (ld as f64 - 0.5 * (v as f64).ln()) as f32;
    }
    ld
}

/// Kaldi's `DiagGmm::Merge`: down to `target` components, merging at each
/// step the pair whose merge loses the least likelihood (float arithmetic as
/// Kaldi).
pub fn merge_diag(gmm: &mut StateGmm, dim: usize, target: usize) -> Result<(), String> {
    let n = gmm.num_components();
    if target == 0 || n < target {
        return Err(format!(
            "Invalid argument for target number of Gaussians (={target}), #Gauss = {n}"
        ));
    }
    if n == target {
        return Ok(());
    }
    if target == 1 {
        return merge_to_one(gmm, dim);
    }
    let mut m = Merging::new(gmm, dim);
    for _ in 0..n - target {
        let (bi, bj) = m
            .best_pair()
            .ok_or_else(|| "no pair of components left to merge".to_string())?;
        m.merge(gmm, bi, bj);
    }
    let keep: Vec<usize> = (0..n).filter(|&i| !m.discarded[i]).collect();
    let row = |v: &[f32], i: usize| v[i * dim..(i + 1) * dim].to_vec();
    gmm.weights = keep.iter().map(|&i| gmm.weights[i]).collect();
    gmm.inv_vars = keep.iter().flat_map(|&i| row(&gmm.inv_vars, i)).collect();
    gmm.means_invvars = keep
        .iter()
        .flat_map(|&i| row(&gmm.means_invvars, i))
        .collect();
    gmm.gconsts = diag_gconsts(&gmm.weights, &gmm.means_invvars, &gmm.inv_vars, dim)?;
    Ok(())
}

/// Each component's mean and second moment (variance + mean²), from the
/// model's natural parameters.
fn moments(gmm: &StateGmm) -> (Vec<f32>, Vec<f32>) {
    let vars: Vec<f32> = gmm.inv_vars.iter().map(|v| 1.0 / v).collect();
    let means: Vec<f32> = gmm
        .means_invvars
        .iter()
        .zip(&vars)
        .map(|(m, v)| m * v)
        .collect();
    let second = vars.iter().zip(&means).map(|(v, m)| v + m * m).collect();
    (means, second)
}

/// Kaldi's `Merge` to one component: the moment-matched Gaussian.
fn merge_to_one(gmm: &mut StateGmm, dim: usize) -> Result<(), String> {
    let n = gmm.num_components();
    let (means, vars) = moments(gmm);
    let mut w0 = 0.0f32;
    let mut m0 = vec![0.0f32; dim];
    let mut v0 = vec![0.0f32; dim];
    for i in 0..n {
        w0 += gmm.weights[i];
        for d in 0..dim {
            m0[d] += gmm.weights[i] * means[i * dim + d];
            v0[d] += gmm.weights[i] * vars[i * dim + d];
        }
    }
    if ((w0 - 1.0).abs() as f64) > 1e-6 * (w0.abs() as f64 + 1.0) {
        // Kaldi warns "Weights sum to ..: rescaling." and scales by the sum.
        for d in 0..dim {
            m0[d] *= w0;
            v0[d] *= w0;
        }
        w0 = 1.0;
    }
    let mut iv = vec![0.0f32; dim];
    let mut mi = vec![0.0f32; dim];
    for d in 0..dim {
        iv[d] = 1.0 / (v0[d] - m0[d] * m0[d]);
        mi[d] = m0[d] * iv[d];
    }
    gmm.weights = vec![w0];
    gmm.inv_vars = iv;
    gmm.means_invvars = mi;
    gmm.gconsts = diag_gconsts(&gmm.weights, &gmm.means_invvars, &gmm.inv_vars, dim)?;
    Ok(())
}

/// Kaldi's general `Merge`: the components' moments, ½ log det of each
/// precision, and the likelihood change of merging each pair (a packed
/// symmetric matrix: (i, j) and (j, i) are one entry).
struct Merging {
    n: usize,
    dim: usize,
    means: Vec<f32>,
    vars: Vec<f32>,
    logdet: Vec<f32>,
    delta: Vec<f32>,
    discarded: Vec<bool>,
}

impl Merging {
    fn new(gmm: &StateGmm, dim: usize) -> Self {
        let n = gmm.num_components();
        let mut logdet = vec![0.0f32; n];
        for (i, ld) in logdet.iter_mut().enumerate() {
            for d in 0..dim {
                *ld = (*ld as f64 + 0.5 * (gmm.inv_vars[i * dim + d] as f64).ln()) as f32;
            }
        }
        let (means, vars) = moments(gmm);
        let mut m = Merging {
            n,
            dim,
            means,
            vars,
            logdet,
            delta: vec![0.0f32; n * n],
            discarded: vec![false; n],
        };
        for i in 0..n {
            for j in 0..i {
                m.delta[i * n + j] = m.merge_change(gmm, i, j);
            }
        }
        m
    }

    fn idx(&self, i: usize, j: usize) -> usize {
        if j <= i {
            i * self.n + j
        } else {
            j * self.n + i
        }
    }

    fn row<'v>(&self, v: &'v [f32], i: usize) -> &'v [f32] {
        &v[i * self.dim..(i + 1) * self.dim]
    }

    /// The likelihood change of merging components i and j.
    fn merge_change(&self, gmm: &StateGmm, i: usize, j: usize) -> f32 {
        let (w1, w2) = (gmm.weights[i], gmm.weights[j]);
        let ml = merged_logdet(
            w1,
            w2,
            self.row(&self.means, i),
            self.row(&self.means, j),
            self.row(&self.vars, i),
            self.row(&self.vars, j),
        );
        (w1 + w2) * ml - w1 * self.logdet[i] - w2 * self.logdet[j]
    }

    /// The pair (i > j) of components left whose merge loses least (the
    /// first in Kaldi's scan order on ties).
    fn best_pair(&self) -> Option<(usize, usize)> {
        let mut best = -f32::MAX;
        let mut pair = None;
        for i in (0..self.n).filter(|&i| !self.discarded[i]) {
            for j in (0..i).filter(|&j| !self.discarded[j]) {
                let d = self.delta[self.idx(i, j)];
                if d > best {
                    best = d;
                    pair = Some((i, j));
                }
            }
        }
        pair
    }

    /// Component bj merged into bi (bj discarded), and bi's merge changes
    /// with every component left.
    fn merge(&mut self, gmm: &mut StateGmm, bi: usize, bj: usize) {
        let dim = self.dim;
        let (w1, w2) = (gmm.weights[bi], gmm.weights[bj]);
        let w_sum = w1 + w2;
        for d in 0..dim {
            let (a, b) = (bi * dim + d, bj * dim + d);
            self.means[a] = (self.means[a] + (w2 / w1) * self.means[b]) * (w1 / w_sum);
            self.vars[a] = (self.vars[a] + (w2 / w1) * self.vars[b]) * (w1 / w_sum);
        }
        gmm.weights[bi] = w_sum;
        let mut ld = 0.0f32;
        for d in 0..dim {
            let a = bi * dim + d;
            let iv = 1.0 / (self.vars[a] - self.means[a] * self.means[a]);
            gmm.inv_vars[a] = iv;
            gmm.means_invvars[a] = self.means[a] * iv;
            ld = (ld as f64 + 0.5 * (iv as f64).ln()) as f32;
        }
        self.logdet[bi] = ld;
        self.discarded[bj] = true;
        for j in 0..self.n {
            if j == bi || self.discarded[j] {
                continue;
            }
            let k = self.idx(bi, j);
            self.delta[k] = self.merge_change(gmm, bi, j);
        }
    }
}

/// Result of a split or merge by count, for Kaldi's log line.
#[derive(Debug, Clone, PartialEq)]
pub struct ResizeReport {
    pub gauss_before: usize,
    pub gauss_after: usize,
    pub warning: Option<String>,
}

/// `AmDiagGmm::SplitByCount`.
pub fn split_by_count(
    states: &mut [StateGmm],
    dim: usize,
    state_occs: &[f32],
    target: usize,
    perturb_factor: f32,
    power: f32,
    min_count: f32,
    rng: &mut KaldiRng,
) -> Result<ResizeReport, String> {
    if state_occs.len() != states.len() {
        return Err(format!(
            "{} state occupancies for {} states",
            state_occs.len(),
            states.len()
        ));
    }
    let before = states.iter().map(|s| s.num_components()).sum();
    let (targets, warning) = split_targets(state_occs, target, power, min_count);
    for (s, &t) in states.iter_mut().zip(&targets) {
        if s.num_components() < t {
            split_diag(s, dim, t, perturb_factor, rng)?;
        }
    }
    Ok(ResizeReport {
        gauss_before: before,
        gauss_after: states.iter().map(|s| s.num_components()).sum(),
        warning,
    })
}

/// `AmDiagGmm::MergeByCount`.
pub fn merge_by_count(
    states: &mut [StateGmm],
    dim: usize,
    state_occs: &[f32],
    target: usize,
    power: f32,
    min_count: f32,
) -> Result<ResizeReport, String> {
    if state_occs.len() != states.len() {
        return Err(format!(
            "{} state occupancies for {} states",
            state_occs.len(),
            states.len()
        ));
    }
    let before = states.iter().map(|s| s.num_components()).sum();
    let (targets, warning) = split_targets(state_occs, target, power, min_count);
    for (s, &t) in states.iter_mut().zip(&targets) {
        let t = t.max(1);
        if s.num_components() > t {
            merge_diag(s, dim, t)?;
        }
    }
    Ok(ResizeReport {
        gauss_before: before,
        gauss_after: states.iter().map(|s| s.num_components()).sum(),
        warning,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `blas_saxpy` fuses the first `n & !15` elements and rounds the
    /// product of the rest, as OpenBLAS's saxpy; the inputs are ones where
    /// the two ways differ on both sides of the cut.
    #[test]
    fn saxpy_fuses_the_blocks_of_16_and_not_the_tail() {
        // y ≈ −αx: the sum cancels, so the product's rounding shows.
        let alpha = 0.01f32;
        let x: Vec<f32> = (0..39)
            .map(|i| (1.0 + i as f64 / 64.0 + 1.0 / 3.0) as f32)
            .collect();
        let y0: Vec<f32> = x
            .iter()
            .map(|&v| -(alpha * v) * (1.0 + 1.0 / 1024.0))
            .collect();
        let mut y = y0.clone();
        blas_saxpy(alpha, &x, &mut y);
        let (mut fused_differs, mut tail_differs) = (false, false);
        for i in 0..39 {
            let fused = alpha.mul_add(x[i], y0[i]);
            let plain = y0[i] + alpha * x[i];
            let want = if i < 32 { fused } else { plain };
            assert_eq!(y[i].to_bits(), want.to_bits(), "element {i}");
            if fused != plain {
                *(if i < 32 {
                    &mut fused_differs
                } else {
                    &mut tail_differs
                }) = true;
            }
        }
        assert!(
            fused_differs && tail_differs,
            "inputs that tell the two ways apart"
        );
    }
    use proptest::prelude::*;

    #[test]
    fn glibc_rand_sequence_from_default_seed() {
        // The first outputs of glibc rand() without srand (well known).
        let mut r = KaldiRng::default();
        assert_eq!(
            [r.rand(), r.rand(), r.rand(), r.rand()],
            [1804289383, 846930886, 1681692777, 1714636915]
        );
    }

    fn gmm(weights: &[f32], dim: usize) -> StateGmm {
        let m = weights.len();
        let means_invvars: Vec<f32> = (0..m * dim).map(|k| k as f32 * 0.1).collect();
        let inv_vars = vec![2.0f32; m * dim];
        StateGmm {
            gconsts: diag_gconsts(weights, &means_invvars, &inv_vars, dim).unwrap(),
            weights: weights.to_vec(),
            means_invvars,
            inv_vars,
        }
    }

    #[test]
    fn targets_follow_occupancy_and_min_count() {
        // occs 100, 400, 30 with power 1: the 400 state gets most; min_count
        // 20 allows at most 1 Gaussian for the 30 state.
        let (t, w) = split_targets(&[100.0, 400.0, 30.0], 10, 1.0, 20.0);
        assert_eq!(t.iter().sum::<usize>(), 10);
        assert_eq!(t[2], 1);
        assert!(t[1] > t[0]);
        assert!(w.is_none());
        // Not enough data for 100 Gaussians.
        let (t, w) = split_targets(&[100.0, 400.0, 30.0], 100, 1.0, 20.0);
        assert_eq!(t, vec![4, 19, 1]);
        assert!(w
            .unwrap()
            .starts_with("Could not split up to 100 due to min-count = 20"));
    }

    #[test]
    fn state_barred_by_min_count_does_not_use_up_the_target() {
        // 100 takes Gaussians 2 and 3; then 39 is on top but barred
        // (2 × 20 ≥ 39): Kaldi counts only real splits, so 100 gets the 5th.
        let (t, w) = split_targets(&[39.0, 100.0], 5, 1.0, 20.0);
        assert_eq!(t, vec![1, 4]);
        assert!(w.is_none());
    }

    #[test]
    fn split_halves_heaviest_and_keeps_weight_sum() {
        let mut g = gmm(&[0.2, 0.5, 0.3], 2);
        let mut rng = KaldiRng::default();
        split_diag(&mut g, 2, 5, 0.01, &mut rng).unwrap();
        assert_eq!(g.num_components(), 5);
        assert_eq!(g.weights, vec![0.2, 0.25, 0.15, 0.25, 0.15]);
        // Perturbation is symmetric about the old mean.
        for d in 0..2 {
            let old = (2 + d) as f32 * 0.1;
            assert!((g.means_invvars[2 + d] + g.means_invvars[6 + d] - 2.0 * old).abs() < 1e-6);
        }
    }

    #[test]
    fn merge_to_one_gives_moment_matched_gaussian() {
        // Two equal-weight unit-variance Gaussians at ±1 → mean 0, variance 2.
        let mut g = StateGmm {
            gconsts: vec![0.0; 2],
            weights: vec![0.5, 0.5],
            means_invvars: vec![-1.0, 1.0],
            inv_vars: vec![1.0, 1.0],
        };
        merge_diag(&mut g, 1, 1).unwrap();
        assert_eq!(g.weights, vec![1.0]);
        assert!((g.inv_vars[0] - 0.5).abs() < 1e-6 && g.means_invvars[0].abs() < 1e-6);
    }

    proptest! {
        /// The libstdc++ heap emulation pops in max order.
        #[test]
        fn heap_pops_in_order(v in proptest::collection::vec(0u32..50, 1..40)) {
            let mut h = KaldiHeap(vec![]);
            for (i, &x) in v.iter().enumerate() {
                h.push(CountStats { pdf: i, num_components: 1, occupancy: x as f32 });
            }
            let mut out = vec![];
            while let Some(t) = h.top() { out.push(t.occupancy); h.pop(); }
            let mut sorted: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            sorted.sort_by(|a, b| b.partial_cmp(a).unwrap());
            prop_assert_eq!(out, sorted);
        }

        /// Merging then reports the requested count and finite parameters.
        #[test]
        fn merge_reaches_target(m in 2usize..12, t in 1usize..12, dim in 1usize..4) {
            let t = t.min(m);
            let w: Vec<f32> = (0..m).map(|i| 1.0 / m as f32 + 0.0 * i as f32).collect();
            let mut g = gmm(&w, dim);
            merge_diag(&mut g, dim, t).unwrap();
            prop_assert_eq!(g.num_components(), t);
            prop_assert!(g.gconsts.iter().all(|x| x.is_finite()));
            let s: f32 = g.weights.iter().sum();
            prop_assert!((s - 1.0).abs() < 1e-5);
        }
    }
}
