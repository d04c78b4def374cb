//! HERest's ML update (`MLUpdateModels`): HMMs are visited in HTK's scan
//! order (macro hash order); an HMM seen in fewer than `-m` utterances is
//! copied; otherwise its transitions, mixture weights, variances and means are
//! re-estimated from the accumulators attached to the shared objects, each
//! object once (the first HMM that reaches it updates it), variances floored
//! by `varFloorN` (or `-v`), weights below `MINMIX` zeroed and floored by `-w`,
//! and the `<GCONST>`s of updated HMMs recomputed.

use amtool_formats::htk::mmf::{htk_hash, Covariance, Hmm, HmmSet, TriMat, MINMIX};

use super::accs::{HerestAccs, HtkUpdate};

/// Update settings beyond the flags.
#[derive(Debug, Clone)]
pub struct UpdateSettings {
    pub flags: HtkUpdate,
    /// `-m`.
    pub min_egs: u64,
    /// `-v` (used when the set has no `varFloor1` macro).
    pub min_var: f32,
    /// `-w` × MINMIX.
    pub mix_floor: f32,
    /// `MAPTAU` (HMap) for `-u p`.
    pub map_tau: f64,
}

/// What the update did, for HERest's summary lines.
#[derive(Debug, Clone, Default)]
pub struct UpdateReport {
    pub floored_elements: usize,
    pub floored_mixes: usize,
    pub warnings: Vec<String>,
}

/// Physical HMMs (indices into `set.hmms`, with names) in HTK's scan order:
/// by macro hash bucket, the last defined first within a bucket.
pub fn scan_order(set: &HmmSet) -> Vec<(usize, String)> {
    let mut v: Vec<(u32, usize, usize, String)> = set
        .macros
        .iter()
        .enumerate()
        .filter(|(_, m)| m.kind == b'h')
        .map(|(k, m)| (htk_hash(&m.name), k, m.target, m.name.clone()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    v.into_iter().map(|(_, _, h, n)| (h, n)).collect()
}

/// The most mixtures of any state of the set (HERest's maxM).
pub fn max_mixes(set: &HmmSet) -> usize {
    set.states
        .iter()
        .map(|s| s.streams[0].num_mixes)
        .max()
        .unwrap_or(1)
}

/// The variance floor vector of stream 1: the `varFloor1` macro, else `-v`.
pub fn variance_floor(set: &HmmSet, min_var: f32) -> Vec<f32> {
    match set.find_macro(b'v', "varFloor1") {
        Some(m) => set.variances[m.target].clone(),
        None => vec![min_var; set.options.vec_size],
    }
}

/// Apply the accumulators to `set` with HERest's rules.
pub fn ml_update(set: &mut HmmSet, accs: &HerestAccs, st: &UpdateSettings) -> UpdateReport {
    let mut up = MlUpdate::new(set, accs, st, st.min_var);
    for (px, (h, name)) in scan_order(up.set).into_iter().enumerate() {
        let n = accs.num_egs[h];
        if n < st.min_egs {
            up.rep.warnings.push(format!(
                "WARNING [-2331]  UpdateModels: {name}[{}] copied: only {n} egs",
                px + 1
            ));
        }
        if !(n >= st.min_egs && n > 0) {
            continue;
        }
        let hmm = up.set.hmms[h].clone();
        let at = Visit { px, name: &name };
        if st.flags.trans {
            up.trans(&hmm, &at);
        }
        if up.max_m > 1 && st.flags.weights {
            up.weights(&hmm, &at);
        }
        // UpdateVars, then UpdateMeans (the variance needs the mean shift).
        if st.flags.vars {
            up.vars(&hmm, &at);
        }
        if st.flags.means {
            up.means(&hmm, &at);
        }
        if st.flags.means || st.flags.vars {
            up.gconsts(&hmm);
        }
    }
    up.rep
}

/// The HMM being updated, for the warnings: its place in the scan order
/// and its name.
struct Visit<'a> {
    px: usize,
    name: &'a str,
}

/// One `MLUpdateModels`: the set, its accumulators, and which shared
/// objects were updated already (each is updated once, by the first HMM
/// that reaches it).
struct MlUpdate<'a> {
    set: &'a mut HmmSet,
    accs: &'a HerestAccs,
    st: &'a UpdateSettings,
    rep: UpdateReport,
    vfloor: Vec<f32>,
    /// The most mixtures of any state (weights are updated only when > 1).
    max_m: usize,
    /// GetUse(cov.var): how many Gaussians reference each variance/covariance.
    var_use: Vec<usize>,
    cov_use: Vec<usize>,
    done_trans: Vec<bool>,
    done_wt: Vec<bool>,
    done_mean: Vec<bool>,
    done_var: Vec<bool>,
    done_cov: Vec<bool>,
}

impl<'a> MlUpdate<'a> {
    /// `min_var`: the variance floor where the set has no `varFloor1`
    /// (ML: `-v`; MAP: none).
    fn new(
        set: &'a mut HmmSet,
        accs: &'a HerestAccs,
        st: &'a UpdateSettings,
        min_var: f32,
    ) -> Self {
        let vfloor = variance_floor(set, min_var);
        let max_m = max_mixes(set);
        let mut var_use = vec![0usize; set.variances.len()];
        let mut cov_use = vec![0usize; set.covars.len()];
        for p in &set.pdfs {
            match p.cov {
                Covariance::Diag(v) => var_use[v] += 1,
                Covariance::InvCovar(c) => cov_use[c] += 1,
                _ => {}
            }
        }
        MlUpdate {
            done_trans: vec![false; set.transps.len()],
            done_wt: vec![false; set.states.len()],
            done_mean: vec![false; set.means.len()],
            done_var: vec![false; set.variances.len()],
            done_cov: vec![false; set.covars.len()],
            set,
            accs,
            st,
            rep: UpdateReport::default(),
            vfloor,
            max_m,
            var_use,
            cov_use,
        }
    }

    /// Variance `x` of dimension k at least the floor; a floored one is
    /// counted, and noted in `floored`.
    fn floor_var(&mut self, x: f32, k: usize, floored: &mut bool) -> f32 {
        if x < self.vfloor[k] {
            self.rep.floored_elements += 1;
            *floored = true;
            return self.vfloor[k];
        }
        x
    }

    fn warn(&mut self, w: String) {
        self.rep.warnings.push(w);
    }

    /// UpdateTrans.
    fn trans(&mut self, hmm: &Hmm, at: &Visit<'_>) {
        if self.done_trans[hmm.transp] {
            return;
        }
        self.done_trans[hmm.transp] = true;
        let accs = self.accs;
        let ta = &accs.trans[hmm.transp];
        let nn = hmm.num_states;
        for i in 1..nn {
            let occi = ta.occ[i] as f32;
            if occi > 0.0 {
                let tp = &mut self.set.transps[hmm.transp];
                for j in 2..=nn {
                    let x = ta.tran[i * (nn + 1) + j] as f32 / occi;
                    tp.probs[(i - 1) * nn + (j - 1)] = if (x as f64) > 2.45e-308 { x } else { 0.0 };
                }
            } else {
                self.warn(format!(
                    "WARNING [-2326]  UpdateTrans: Model {}[{}]: no transitions out of state {i}",
                    at.px + 1,
                    at.name
                ));
            }
        }
    }

    /// UpdateWeights of each state not updated yet.
    fn weights(&mut self, hmm: &Hmm, at: &Visit<'_>) {
        for (si, &s) in hmm.states.iter().enumerate() {
            if self.done_wt[s] {
                continue;
            }
            self.done_wt[s] = true;
            let accs = self.accs;
            let wa = &accs.weight[s];
            let occi = wa.occ as f32;
            if occi > 0.0 {
                let mix = &mut self.set.states[s].streams[0].mixtures;
                for (m, me) in mix.iter_mut().enumerate() {
                    let mut x = wa.c[m] as f32 / occi;
                    if x > 1.0 {
                        x = 1.0;
                    }
                    me.weight = if x > MINMIX { x } else { 0.0 };
                }
                if self.st.mix_floor > 0.0 {
                    floor_mixes(
                        mix.iter_mut().map(|m| &mut m.weight).collect(),
                        self.st.mix_floor,
                    );
                }
            } else {
                self.warn(format!(
                    "WARNING [-2330]  UpdateWeights: Model {}[{}]: no use of mixtures in {}.1",
                    at.px + 1,
                    at.name,
                    si + 2
                ));
            }
        }
    }

    /// UpdateVars: every used mixture's variance or covariance not updated
    /// yet, around its mean as it will be updated (unless shared).
    fn vars(&mut self, hmm: &Hmm, at: &Visit<'_>) {
        for (si, &s) in hmm.states.iter().enumerate() {
            let mixes = self.set.states[s].streams[0].mixtures.clone();
            for (m, me) in mixes.iter().enumerate() {
                if me.weight <= MINMIX {
                    continue;
                }
                let pdf = self.set.pdfs[me.pdf].clone();
                let which = format!("{}.1.{}", si + 2, m + 1);
                match pdf.cov {
                    Covariance::Diag(v) if !self.done_var[v] => {
                        self.done_var[v] = true;
                        self.diag_var(v, pdf.mean, at, &which);
                    }
                    Covariance::InvCovar(c) if !self.done_cov[c] => {
                        self.done_cov[c] = true;
                        self.inv_covar(c, pdf.mean, at, &which);
                    }
                    _ => {}
                }
            }
        }
    }

    /// The mean shift of element k (the update the mean will get), or 0
    /// where the variance is shared, the mean is updated already or unused,
    /// or means are not updated.
    fn shift(&self, mean: usize, shared: bool, k: usize) -> f32 {
        if shared || self.done_mean[mean] {
            return 0.0;
        }
        let ma = &self.accs.mean[mean];
        (ma.sum[k] as f32) / (ma.occ as f32)
    }

    /// Whether a variance used `uses` times is updated around its own
    /// Gaussian's mean shift (HERest: not when shared, or the mean is not
    /// updated).
    fn shared(&self, uses: usize, mean: usize) -> bool {
        let unused = self.done_mean[mean] || self.accs.mean[mean].occ <= 0.0;
        uses > 1 || unused || !self.st.flags.means
    }

    fn diag_var(&mut self, v: usize, mean: usize, at: &Visit<'_>, which: &str) {
        let accs = self.accs;
        let va = &accs.var[v];
        let occ = va.occ as f32;
        if occ <= 0.0 {
            self.warn(format!(
                "WARNING [-2330]  UpdateVars: Model {}[{}]: no use of variance {which}",
                at.px + 1,
                at.name
            ));
            return;
        }
        let shared = self.shared(self.var_use[v], mean);
        let mut floored = false;
        for k in 0..va.sum.len() {
            let d = self.shift(mean, shared, k);
            let x = va.sum[k] as f32 / occ - d * d;
            self.set.variances[v][k] = self.floor_var(x, k, &mut floored);
        }
        self.rep.floored_mixes += floored as usize;
    }

    fn inv_covar(&mut self, c: usize, mean: usize, at: &Visit<'_>, which: &str) {
        let accs = self.accs;
        let va = &accs.covar[c];
        let occ = va.occ as f32;
        if occ <= 0.0 {
            return;
        }
        let shared = self.shared(self.cov_use[c], mean);
        let dim = self.set.means[mean].len();
        let mut cov = vec![0f64; dim * (dim + 1) / 2];
        let mut floored = false;
        let mut idx = 0;
        for k in 0..dim {
            let dk = self.shift(mean, shared, k);
            for l in 0..=k {
                let dl = self.shift(mean, shared, l);
                let mut x = va.sum[idx] as f32 / occ - dk * dl;
                if k == l {
                    x = self.floor_var(x, k, &mut floored);
                }
                cov[idx] = x as f64;
                idx += 1;
            }
        }
        self.rep.floored_mixes += floored as usize;
        match crate::stats::linalg::sp_invert(&cov, dim) {
            Some(inv) => {
                let mut upper = Vec::with_capacity(inv.len());
                for i in 0..dim {
                    for j in i..dim {
                        upper.push(inv[j * (j + 1) / 2 + i] as f32);
                    }
                }
                self.set.covars[c] = TriMat { n: dim, upper };
            }
            None => self.warn(format!(
                "WARNING  UpdateVars: Model {}[{}]: covariance {which} not positive definite; kept",
                at.px + 1,
                at.name
            )),
        }
    }

    /// UpdateMeans of every used mixture's mean not updated yet.
    fn means(&mut self, hmm: &Hmm, at: &Visit<'_>) {
        for (si, &s) in hmm.states.iter().enumerate() {
            let mixes = self.set.states[s].streams[0].mixtures.clone();
            for (m, me) in mixes.iter().enumerate() {
                let mean = self.set.pdfs[me.pdf].mean;
                if me.weight <= MINMIX || self.done_mean[mean] {
                    continue;
                }
                self.done_mean[mean] = true;
                let accs = self.accs;
                let ma = &accs.mean[mean];
                let occ = ma.occ as f32;
                if occ > 0.0 {
                    for k in 0..ma.sum.len() {
                        self.set.means[mean][k] += ma.sum[k] as f32 / occ;
                    }
                } else {
                    self.warn(format!(
                        "WARNING [-2330]  UpdateMeans: Model {}[{}]: no use of mean {}.1.{}",
                        at.px + 1,
                        at.name,
                        si + 2,
                        m + 1
                    ));
                }
            }
        }
    }

    /// The `<GCONST>`s of the HMM's Gaussians, recomputed.
    fn gconsts(&mut self, hmm: &Hmm) {
        for &s in &hmm.states {
            for me in self.set.states[s].streams[0].mixtures.clone() {
                if let Some(g) = self.set.compute_gconst(me.pdf) {
                    self.set.pdfs[me.pdf].gconst = Some(g);
                }
            }
        }
    }
}

/// HERest's FloorMixes.
fn floor_mixes(mut w: Vec<&mut f32>, floor: f32) {
    let (mut sum, mut fsum) = (0f32, 0f32);
    for x in w.iter_mut() {
        if **x > floor {
            sum += **x;
        } else {
            fsum += floor;
            **x = floor;
        }
    }
    if fsum == 0.0 || sum == 0.0 || fsum > 1.0 {
        return;
    }
    let scale = (1.0 - fsum) / sum;
    for x in w.iter_mut() {
        if **x > floor {
            **x *= scale;
        }
    }
}

/// What loading a set for re-estimation and saving it again does to the
/// parameters HERest leaves alone (single pass, not `-p 0`): variances pass
/// through their inverse and weights through their log, in float.
pub fn htk_round_trip(set: &mut HmmSet) {
    let mut seen = vec![false; set.variances.len()];
    for p in &set.pdfs {
        if let Covariance::Diag(v) = p.cov {
            seen[v] = true;
        }
    }
    for (v, s) in set.variances.iter_mut().zip(seen) {
        if s {
            v.iter_mut().for_each(|x| *x = 1.0 / (1.0 / *x));
        }
    }
    // ConvLogWt/ConvExpWt visit a shared Gaussian's first use only (see
    // `score::log_weights`): later uses keep their weight untouched.
    let mut state_seen = vec![false; set.states.len()];
    let mut pdf_seen = vec![false; set.pdfs.len()];
    for (h, _) in scan_order(set) {
        for s in set.hmms[h].states.clone() {
            if std::mem::replace(&mut state_seen[s], true) {
                continue;
            }
            for m in &mut set.states[s].streams[0].mixtures {
                if std::mem::replace(&mut pdf_seen[m.pdf], true) {
                    continue;
                }
                let l = if m.weight < MINMIX {
                    -1.0e10f32
                } else {
                    (m.weight as f64).ln() as f32
                };
                m.weight = if l < -0.5e10 {
                    0.0
                } else {
                    (l as f64).exp() as f32
                };
            }
        }
    }
}

/// HMap.c's MAP update (`HERest -u p...`, `MAPTAU`): weights
/// (wτD − 1)₊ + counts renormalised, variances and means interpolated
/// between the prior (the current model) and the statistics; transitions are
/// not supported by HMap. HMAP's own `MINEGS` (0) applies, not `-m`.
pub fn map_update(set: &mut HmmSet, accs: &HerestAccs, st: &UpdateSettings) -> UpdateReport {
    let mut up = MlUpdate::new(set, accs, st, 0.0);
    for (h, _name) in scan_order(up.set) {
        if accs.num_egs[h] == 0 {
            continue;
        }
        let hmm = up.set.hmms[h].clone();
        if up.max_m > 1 && st.flags.weights {
            up.map_weights(&hmm);
        }
        if st.flags.vars {
            up.map_vars(&hmm);
        }
        if st.flags.means {
            up.map_means(&hmm);
        }
        if st.flags.means || st.flags.vars {
            up.gconsts(&hmm);
        }
    }
    up.rep
}

/// HMap's rules (`-u p`, MAPTAU τ), on the same bookkeeping as the ML update.
impl MlUpdate<'_> {
    /// Mixture weights: the prior max(0, w·vsize·τ − 1) plus the counts,
    /// floored (`-w`) and renormalised.
    fn map_weights(&mut self, hmm: &Hmm) {
        let tau = self.st.map_tau as f32;
        let vsize = self.set.options.vec_size as f32;
        for &s in &hmm.states {
            if std::mem::replace(&mut self.done_wt[s], true) {
                continue;
            }
            let accs = self.accs;
            let wa = &accs.weight[s];
            let occi = wa.occ as f32;
            if occi <= 0.0 {
                continue;
            }
            let mix = &mut self.set.states[s].streams[0].mixtures;
            let prior = |w: f32| (w * vsize * tau - 1.0).max(0.0);
            let denom: f32 = mix.iter().map(|m| prior(m.weight)).sum();
            for (k, me) in mix.iter_mut().enumerate() {
                let x = (prior(me.weight) + wa.c[k] as f32) / (denom + occi);
                me.weight = x.min(1.0);
            }
            if self.st.mix_floor > 0.0 {
                floor_mixes(
                    mix.iter_mut().map(|m| &mut m.weight).collect(),
                    self.st.mix_floor,
                );
            }
            let sum: f32 = mix.iter().map(|m| m.weight).sum();
            mix.iter_mut().for_each(|m| m.weight /= sum);
        }
    }

    /// Diagonal variances: (τ·σ² + Σγx² − d) / (τ + γ), d the MAP mean's
    /// shift term (0 where the variance is shared), floored.
    fn map_vars(&mut self, hmm: &Hmm) {
        let tau = self.st.map_tau as f32;
        for &s in &hmm.states {
            for me in self.set.states[s].streams[0].mixtures.clone() {
                if me.weight <= MINMIX {
                    continue;
                }
                let pdf = self.set.pdfs[me.pdf].clone();
                let Covariance::Diag(v) = pdf.cov else {
                    continue;
                };
                if std::mem::replace(&mut self.done_var[v], true) {
                    continue;
                }
                let accs = self.accs;
                let va = &accs.var[v];
                let occ = va.occ as f32;
                if occ <= 0.0 {
                    continue;
                }
                let shared = self.shared(self.var_use[v], pdf.mean);
                let ma = &accs.mean[pdf.mean];
                let mut floored = false;
                for k in 0..va.sum.len() {
                    let d = if shared {
                        0.0
                    } else {
                        let mu = ma.sum[k] as f32;
                        let dmu = mu / (tau + occ);
                        2.0 * dmu * mu - dmu * dmu * occ
                    };
                    let var = self.set.variances[v][k];
                    let x = (tau * var + va.sum[k] as f32 - d) / (tau + occ);
                    self.set.variances[v][k] = self.floor_var(x, k, &mut floored);
                }
                self.rep.floored_mixes += floored as usize;
            }
        }
    }

    /// Means: (τ·μ + Σγ(x − μ) + γ·μ) / (τ + γ).
    fn map_means(&mut self, hmm: &Hmm) {
        let tau = self.st.map_tau as f32;
        for &s in &hmm.states {
            for me in self.set.states[s].streams[0].mixtures.clone() {
                let mean = self.set.pdfs[me.pdf].mean;
                if me.weight <= MINMIX || std::mem::replace(&mut self.done_mean[mean], true) {
                    continue;
                }
                let accs = self.accs;
                let ma = &accs.mean[mean];
                let occ = ma.occ as f32;
                if occ > 0.0 {
                    for k in 0..ma.sum.len() {
                        let m = self.set.means[mean][k];
                        self.set.means[mean][k] =
                            (m * tau + (ma.sum[k] as f32 + m * occ)) / (tau + occ);
                    }
                }
            }
        }
    }
}
