//! The physical HMMs of a set as the forward-backward needs them (log
//! transitions as HModel keeps them, emitting states mapped to model states,
//! minimum durations) and the sentence HMM of an utterance: its label
//! sequence mapped through the HMM list to physical HMMs, with HFB's checks
//! (no tee model first or last, no two tee models in a row).

use std::collections::HashMap;

use amtool_formats::htk::mmf::{HmmList, HmmSet};

use super::fb::{LSMALL, LZERO};
use crate::model::htk::HtkModel;
use crate::{Error, Result};

/// One physical HMM, ready for forward-backward (indices 1..=n as in HTK).
#[derive(Debug, Clone)]
pub struct PhysHmm {
    pub name: String,
    /// Index into `HmmSet::hmms`.
    pub hmm: usize,
    pub transp: usize,
    pub n: usize,
    /// (n+1)² log probabilities as float, as HModel stores them (`LZERO` for 0).
    pub log_trans: Vec<f64>,
    /// j (2..n-1) → model state; other entries unused.
    pub states: Vec<usize>,
    /// Fewest frames to pass through (0 for a tee model).
    pub min_dur: usize,
}

impl PhysHmm {
    #[inline]
    pub fn a(&self, i: usize, j: usize) -> f64 {
        self.log_trans[i * (self.n + 1) + j]
    }
}

/// HModel's float log of a probability (`LZERO` below `MINLARG`).
pub fn htk_log(p: f32) -> f64 {
    if (p as f64) < 2.45e-308 {
        LZERO as f32 as f64
    } else {
        (p as f64).ln() as f32 as f64
    }
}

/// SetMinDurs: fewest emitting states on a path from entry to exit.
fn min_duration(h: &PhysHmm) -> usize {
    let n = h.n;
    let mut md = vec![usize::MAX; n + 1];
    md[1] = 0;
    for _ in 0..n {
        for i in 2..=n {
            for j in 1..n {
                if j != i && md[j] != usize::MAX && h.a(j, i) > LSMALL {
                    let d = md[j] + usize::from(i != n);
                    if d < md[i] {
                        md[i] = d;
                    }
                }
            }
        }
    }
    md[n].min(n)
}

/// The physical HMMs of a set and the logical names that map to them.
pub struct HmmTable {
    pub hmms: Vec<PhysHmm>,
    /// Logical name → index into `hmms`.
    pub logical: HashMap<String, usize>,
}

impl HmmTable {
    pub fn new(set: &HmmSet, list: &HmmList, model: &HtkModel) -> Result<Self> {
        let mut hmms = Vec::new();
        let mut by_arena = HashMap::new();
        for m in set.macros.iter().filter(|m| m.kind == b'h') {
            let h = &set.hmms[m.target];
            let tp = &set.transps[h.transp];
            let n = h.num_states;
            let mut log_trans = vec![LZERO; (n + 1) * (n + 1)];
            for i in 0..n {
                for j in 0..n {
                    log_trans[(i + 1) * (n + 1) + j + 1] = htk_log(tp.probs[i * n + j]);
                }
            }
            let mut states = vec![0; n + 1];
            for (k, &s) in h.states.iter().enumerate() {
                states[k + 2] = model.model_state[s].expect("every HMM state is in the model");
            }
            let mut p = PhysHmm {
                name: m.name.clone(),
                hmm: m.target,
                transp: h.transp,
                n,
                log_trans,
                states,
                min_dur: 0,
            };
            p.min_dur = min_duration(&p);
            by_arena.insert(m.name.clone(), hmms.len());
            hmms.push(p);
        }
        let mut logical = HashMap::new();
        for (l, p) in &list.entries {
            let Some(&i) = by_arena.get(p) else {
                return Err(Error::Mismatch(format!(
                    "HMM list: physical HMM {p} (for {l}) is not defined in the loaded MMFs"
                )));
            };
            logical.insert(l.clone(), i);
        }
        Ok(HmmTable { hmms, logical })
    }
}

/// The model sequence of one utterance; `models[0]` is a placeholder so that
/// q runs 1..=Q as in HFB.
pub struct Sentence<'a> {
    pub models: Vec<&'a PhysHmm>,
    pub min_durs: Vec<usize>,
}

impl<'a> Sentence<'a> {
    /// The sentence HMM of `labels`; `labfn` names the label file in errors.
    pub fn new(table: &'a HmmTable, labels: &[String], labfn: &str) -> Result<Self> {
        if labels.is_empty() {
            return Err(Error::Mismatch(format!("{labfn}: no labels")));
        }
        let mut models = Vec::with_capacity(labels.len() + 1);
        for (k, l) in labels.iter().enumerate() {
            let Some(&i) = table.logical.get(l) else {
                return Err(Error::Mismatch(format!(
                    "{labfn}: label {} ('{l}') is not in the HMM list",
                    k + 1
                )));
            };
            if models.is_empty() {
                models.push(&table.hmms[i]);
            }
            models.push(&table.hmms[i]);
        }
        let min_durs: Vec<usize> = models.iter().map(|m| m.min_dur).collect();
        let q = models.len() - 1;
        for k in 2..=q {
            if min_durs[k] == 0 && min_durs[k - 1] == 0 {
                return Err(Error::Mismatch(format!(
                    "{labfn}: successive tee models ({} {}) at labels {} and {}",
                    models[k - 1].name,
                    models[k].name,
                    k - 1,
                    k
                )));
            }
        }
        if min_durs[1] == 0 || min_durs[q] == 0 {
            return Err(Error::Mismatch(format!(
                "{labfn}: a tee model cannot start or end a transcription"
            )));
        }
        Ok(Sentence { models, min_durs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hmm(n: usize, arcs: &[(usize, usize)]) -> PhysHmm {
        let mut log_trans = vec![LZERO; (n + 1) * (n + 1)];
        for &(i, j) in arcs {
            log_trans[i * (n + 1) + j] = (0.5f64).ln();
        }
        PhysHmm {
            name: "x".into(),
            hmm: 0,
            transp: 0,
            n,
            log_trans,
            states: vec![0; n + 1],
            min_dur: 0,
        }
    }

    #[test]
    fn minimum_durations() {
        // Left-to-right 3 emitting states.
        let lr = hmm(5, &[(1, 2), (2, 2), (2, 3), (3, 3), (3, 4), (4, 4), (4, 5)]);
        assert_eq!(min_duration(&lr), 3);
        // sil with 2→4 and 4→2 (HHEd sil.hed): two frames.
        let sil = hmm(5, &[(1, 2), (2, 3), (2, 4), (3, 4), (4, 2), (4, 5)]);
        assert_eq!(min_duration(&sil), 2);
        // A tee model (sp): entry straight to exit.
        let sp = hmm(3, &[(1, 2), (1, 3), (2, 2), (2, 3)]);
        assert_eq!(min_duration(&sp), 0);
    }
}
