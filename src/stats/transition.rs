//! Transition-probability updates: Kaldi's `TransitionModel::MleUpdate`,
//! `MapUpdate` and their `--share-for-pdfs` forms (hmm/transition-model.cc),
//! over plain arrays so this module needs no file structures: the caller
//! (the Kaldi `TransitionModel` in `amtool_formats`) supplies, per transition
//! state, its transition ids in transition-index order, and the log
//! probabilities and counts indexed by transition id (index 0 unused, as in
//! Kaldi).
//!
//! Kaldi computes these in float (probabilities, log probabilities and the
//! running totals are `BaseFloat`; counts are double); the same conversions
//! are made here in the same order, so new log probabilities and the printed
//! "objf change" values are Kaldi's.

/// `MleTransitionUpdateConfig`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MleTransitionOptions {
    /// `--transition-floor` (default 0.01).
    pub floor: f32,
    /// `--transition-min-count` (default 5.0).
    pub mincount: f32,
    /// `--share-for-pdfs` (default false).
    pub share_for_pdfs: bool,
}

impl Default for MleTransitionOptions {
    fn default() -> Self {
        MleTransitionOptions {
            floor: 0.01,
            mincount: 5.0,
            share_for_pdfs: false,
        }
    }
}

/// `MapTransitionUpdateConfig`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MapTransitionOptions {
    /// `--transition-tau` (default 5.0).
    pub tau: f32,
    /// `--share-for-pdfs` (default false).
    pub share_for_pdfs: bool,
}

impl Default for MapTransitionOptions {
    fn default() -> Self {
        MapTransitionOptions {
            tau: 5.0,
            share_for_pdfs: false,
        }
    }
}

/// The transition structure the update needs.
#[derive(Debug, Clone, Copy)]
pub struct TransitionLayout<'a> {
    /// Per transition state (Kaldi's tstate − 1), its transition ids in
    /// transition-index order.
    pub tstate_tids: &'a [Vec<usize>],
    /// Per transition state, its forward pdf (used with `share_for_pdfs`).
    pub forward_pdf: &'a [i32],
    /// Per transition state, its self-loop pdf when the model is not a plain
    /// HMM (Kaldi's `!IsHmm()`); `None` for ordinary HMMs.
    pub self_loop_pdf: Option<&'a [i32]>,
}

/// What an update did: Kaldi's out-parameters and log-line numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TransitionUpdateReport {
    /// Σ count × (log new − log old), a float as in Kaldi.
    pub objf_impr: f32,
    /// Σ counts over the updated groups, a float as in Kaldi.
    pub count: f32,
    /// Probabilities that ended at the floor.
    pub num_floored: usize,
    /// Transition states (or pdfs, when shared) skipped for too little data.
    pub num_skipped: usize,
    pub num_tstates: usize,
}

fn check(log_probs: &[f32], stats: &[f64], layout: &TransitionLayout<'_>) -> Result<(), String> {
    if stats.len() != log_probs.len() {
        return Err(format!(
            "transition accumulators have {} entries but the model has {} transition ids (+1)",
            stats.len(),
            log_probs.len()
        ));
    }
    for (s, tids) in layout.tstate_tids.iter().enumerate() {
        if tids.is_empty() {
            return Err(format!("transition state {} has no transitions", s + 1));
        }
        if let Some(&bad) = tids.iter().find(|&&t| t == 0 || t >= log_probs.len()) {
            return Err(format!(
                "transition state {} refers to transition id {bad}, out of range",
                s + 1
            ));
        }
    }
    Ok(())
}

/// Groups of transition states updated together: each state alone, or all
/// states sharing a pdf (in pdf order, states ascending, as Kaldi's
/// `std::map<int32, std::set<int32>>`).
fn groups(layout: &TransitionLayout<'_>, shared: bool) -> Vec<Vec<usize>> {
    if !shared {
        return (0..layout.tstate_tids.len()).map(|s| vec![s]).collect();
    }
    let mut map: std::collections::BTreeMap<i32, std::collections::BTreeSet<usize>> =
        Default::default();
    for s in 0..layout.tstate_tids.len() {
        map.entry(layout.forward_pdf[s]).or_default().insert(s);
        if let Some(sl) = layout.self_loop_pdf {
            map.entry(sl[s]).or_default().insert(s);
        }
    }
    map.into_values().map(|v| v.into_iter().collect()).collect()
}

fn group_counts(
    group: &[usize],
    layout: &TransitionLayout<'_>,
    stats: &[f64],
) -> Result<Vec<f64>, String> {
    let n = layout.tstate_tids[group[0]].len();
    let mut counts = vec![0.0f64; n];
    for &s in group {
        let tids = &layout.tstate_tids[s];
        if tids.len() != n {
            return Err("Mismatch in #transition indices: you cannot use the \
                        --share-for-pdfs option with this topology and sharing scheme."
                .into());
        }
        for (c, &t) in counts.iter_mut().zip(tids) {
            *c += stats[t];
        }
    }
    Ok(counts)
}

fn commit(
    group: &[usize],
    layout: &TransitionLayout<'_>,
    log_probs: &mut [f32],
    new_probs: &[f32],
) -> Result<(), String> {
    for &s in group {
        for (&t, &p) in layout.tstate_tids[s].iter().zip(new_probs) {
            let lp = p.ln();
            if !(lp - lp == 0.0) {
                return Err("Log probs is inf or NaN: error in update or bad stats?".into());
            }
            log_probs[t] = lp;
        }
    }
    Ok(())
}

/// `TransitionModel::MleUpdate` (or `MleUpdateShared`): new log probabilities
/// in `log_probs`; returns the totals Kaldi logs.
pub fn mle_update(
    log_probs: &mut [f32],
    stats: &[f64],
    layout: &TransitionLayout<'_>,
    opts: &MleTransitionOptions,
) -> Result<TransitionUpdateReport, String> {
    check(log_probs, stats, layout)?;
    let mut rep = TransitionUpdateReport {
        num_tstates: layout.tstate_tids.len(),
        ..Default::default()
    };
    for group in groups(layout, opts.share_for_pdfs) {
        let n = layout.tstate_tids[group[0]].len();
        if n <= 1 {
            continue; // no point updating if only one transition
        }
        let counts = group_counts(&group, layout, stats)?;
        let tot: f64 = counts.iter().sum();
        rep.count = (rep.count as f64 + tot) as f32;
        if tot < opts.mincount as f64 {
            rep.num_skipped += 1;
            continue;
        }
        let old: Vec<f32> = layout.tstate_tids[group[0]]
            .iter()
            .map(|&t| log_probs[t].exp())
            .collect();
        let mut new: Vec<f32> = counts.iter().map(|&c| (c / tot) as f32).collect();
        for _ in 0..3 {
            let sum: f32 = new.iter().sum();
            let scale = (1.0 / sum as f64) as f32;
            for p in new.iter_mut() {
                *p *= scale;
                *p = p.max(opts.floor);
            }
        }
        for k in 0..n {
            if new[k] == opts.floor {
                rep.num_floored += 1;
            }
            let change = counts[k] * (new[k].ln() - old[k].ln()) as f64;
            rep.objf_impr = (rep.objf_impr as f64 + change) as f32;
        }
        commit(&group, layout, log_probs, &new)?;
    }
    Ok(rep)
}

/// `TransitionModel::MapUpdate` (or `MapUpdateShared`).
pub fn map_update(
    log_probs: &mut [f32],
    stats: &[f64],
    layout: &TransitionLayout<'_>,
    opts: &MapTransitionOptions,
) -> Result<TransitionUpdateReport, String> {
    if opts.tau <= 0.0 {
        return Err(format!("--transition-tau must be > 0, got {}", opts.tau));
    }
    check(log_probs, stats, layout)?;
    let mut rep = TransitionUpdateReport {
        num_tstates: layout.tstate_tids.len(),
        ..Default::default()
    };
    for group in groups(layout, opts.share_for_pdfs) {
        let n = layout.tstate_tids[group[0]].len();
        if n <= 1 {
            continue;
        }
        let counts = group_counts(&group, layout, stats)?;
        let tot: f64 = counts.iter().sum();
        rep.count = (rep.count as f64 + tot) as f32;
        let old: Vec<f32> = layout.tstate_tids[group[0]]
            .iter()
            .map(|&t| log_probs[t].exp())
            .collect();
        let new: Vec<f32> = (0..n)
            .map(|k| ((counts[k] + (opts.tau * old[k]) as f64) / (opts.tau as f64 + tot)) as f32)
            .collect();
        for k in 0..n {
            let change = counts[k] * (new[k].ln() - old[k].ln()) as f64;
            rep.objf_impr = (rep.objf_impr as f64 + change) as f32;
        }
        commit(&group, layout, log_probs, &new)?;
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two transition states: state 1 has tids 1 (self-loop) and 2; state 2
    /// has tid 3 only.
    fn layout_data() -> (Vec<Vec<usize>>, Vec<i32>) {
        (vec![vec![1, 2], vec![3]], vec![0, 1])
    }

    #[test]
    fn mle_update_is_relative_frequency() {
        let (tids, pdfs) = layout_data();
        let layout = TransitionLayout {
            tstate_tids: &tids,
            forward_pdf: &pdfs,
            self_loop_pdf: None,
        };
        let mut lp = vec![0.0, 0.5f32.ln(), 0.5f32.ln(), 0.0];
        let stats = vec![0.0, 30.0, 10.0, 7.0];
        let r = mle_update(&mut lp, &stats, &layout, &MleTransitionOptions::default()).unwrap();
        assert_eq!(lp[1], 0.75f32.ln());
        assert_eq!(lp[2], 0.25f32.ln());
        assert_eq!(lp[3], 0.0);
        assert_eq!(r.count, 40.0);
        let expect =
            30.0 * (0.75f32.ln() - 0.5f32.ln()) as f64 + 10.0 * (0.25f32.ln() - 0.5f32.ln()) as f64;
        assert!((r.objf_impr as f64 - expect).abs() < 1e-5);
        assert!(r.objf_impr > 0.0);
    }

    #[test]
    fn floor_and_mincount() {
        let (tids, pdfs) = layout_data();
        let layout = TransitionLayout {
            tstate_tids: &tids,
            forward_pdf: &pdfs,
            self_loop_pdf: None,
        };
        let mut lp = vec![0.0, 0.5f32.ln(), 0.5f32.ln(), 0.0];
        let r = mle_update(
            &mut lp,
            &[0.0, 1000.0, 0.0, 0.0],
            &layout,
            &Default::default(),
        )
        .unwrap();
        assert_eq!(r.num_floored, 1);
        assert!((lp[2].exp() - 0.01).abs() < 1e-6);
        let mut lp2 = vec![0.0, 0.5f32.ln(), 0.5f32.ln(), 0.0];
        let r = mle_update(
            &mut lp2,
            &[0.0, 2.0, 2.0, 0.0],
            &layout,
            &Default::default(),
        )
        .unwrap();
        assert_eq!(r.num_skipped, 1);
        assert_eq!(lp2[1], 0.5f32.ln());
    }

    #[test]
    fn shared_update_pools_states_of_one_pdf() {
        let tids = vec![vec![1, 2], vec![3, 4]];
        let pdfs = vec![5, 5];
        let layout = TransitionLayout {
            tstate_tids: &tids,
            forward_pdf: &pdfs,
            self_loop_pdf: None,
        };
        let mut lp = vec![0.0; 5];
        let opts = MleTransitionOptions {
            share_for_pdfs: true,
            ..Default::default()
        };
        mle_update(&mut lp, &[0.0, 10.0, 10.0, 20.0, 0.0], &layout, &opts).unwrap();
        assert_eq!(lp[1], lp[3]);
        assert_eq!(lp[1], 0.75f32.ln());
    }

    #[test]
    fn map_update_interpolates() {
        let (tids, pdfs) = layout_data();
        let layout = TransitionLayout {
            tstate_tids: &tids,
            forward_pdf: &pdfs,
            self_loop_pdf: None,
        };
        let mut lp = vec![0.0, 0.5f32.ln(), 0.5f32.ln(), 0.0];
        map_update(
            &mut lp,
            &[0.0, 10.0, 0.0, 0.0],
            &layout,
            &Default::default(),
        )
        .unwrap();
        // (10 + 5·0.5) / 15 and (0 + 5·0.5) / 15.
        assert!((lp[1].exp() - 12.5 / 15.0).abs() < 1e-6);
        assert!((lp[2].exp() - 2.5 / 15.0).abs() < 1e-6);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let (tids, pdfs) = layout_data();
        let layout = TransitionLayout {
            tstate_tids: &tids,
            forward_pdf: &pdfs,
            self_loop_pdf: None,
        };
        let mut lp = vec![0.0; 4];
        assert!(mle_update(&mut lp, &[0.0; 3], &layout, &Default::default()).is_err());
        let bad = vec![vec![1, 9]];
        let layout = TransitionLayout {
            tstate_tids: &bad,
            forward_pdf: &pdfs,
            self_loop_pdf: None,
        };
        assert!(mle_update(&mut lp, &[0.0; 4], &layout, &Default::default()).is_err());
    }
}
