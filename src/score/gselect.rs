//! Gaussian selection and top-n posteriors, as Kaldi's UBM tools make them:
//! - [`select_top`] = `DiagGmm/FullGmm::GaussianSelection` and
//!   `GaussianSelectionPreselect` (gmm-gselect, fgmm-gselect);
//! - [`posterior_entry`] = `VectorToPosteriorEntry` (gmm-global-get-post);
//! - [`preselected_posteriors`] = the per-frame step of
//!   fgmm-global-gselect-to-post (softmax over the selected Gaussians, then
//!   `--min-post` pruning and renormalisation).
//!
//! Ties: Kaldi sorts (log-likelihood, index) pairs in decreasing order, so of
//! two Gaussians with exactly equal log-likelihoods the higher index comes
//! first, and [`select_top`] does the same. `VectorToPosteriorEntry` sorts on
//! the posterior alone with `std::sort` (tie order unspecified); here ties
//! keep increasing index order (a stable sort).

use super::likes::{apply_softmax, log_add};

/// The `n` best of `loglikes` (entry `p` is Gaussian `ids[p]`, or `p` when
/// `ids` is `None`), best first, and the log of the sum of their
/// likelihoods (float `LogAdd` in that order). `n` is capped at the number of
/// candidates. Kaldi keeps the candidates `>=` the n-th largest value, sorts
/// them by (value, index) decreasing and takes the first `n`.
pub fn select_top(loglikes: &[f32], ids: Option<&[i32]>, n: usize) -> (Vec<i32>, f32) {
    let len = loglikes.len();
    let n = n.min(len);
    let id = |p: usize| ids.map_or(p as i32, |v| v[p]);
    let thresh = if n < len && n > 0 {
        let mut copy = loglikes.to_vec();
        let k = len - n;
        copy.select_nth_unstable_by(k, |a, b| a.total_cmp(b));
        copy[k]
    } else {
        f32::NEG_INFINITY
    };
    let mut pairs: Vec<(f32, i32)> = loglikes
        .iter()
        .enumerate()
        .filter(|(_, &l)| l >= thresh)
        .map(|(p, &l)| (l, id(p)))
        .collect();
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    let mut tot = f32::NEG_INFINITY;
    let mut out = Vec::with_capacity(n);
    for &(l, g) in pairs.iter().take(n) {
        out.push(g);
        tot = log_add(tot, l);
    }
    (out, tot)
}

/// Kaldi's `VectorToPosteriorEntry(log_likes, n, min_post)`: posteriors
/// relative to the best Gaussian (only those within log(min_post) of it when
/// `min_post > 0`, all if none is), the `n` largest kept, best first, then
/// the smallest dropped while below `min_post` × their sum (at least one
/// stays), renormalised to sum to one. Returns the (Gaussian, posterior)
/// pairs and `max + log(sum kept)`, the frame's (pruned) log-likelihood.
pub fn posterior_entry(log_likes: &[f32], n: usize, min_post: f32) -> (Vec<(i32, f32)>, f32) {
    let n = n.min(log_likes.len());
    let max_like = log_likes.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut temp: Vec<(i32, f32)> = Vec::new();
    if min_post != 0.0 {
        let cutoff = max_like + min_post.ln();
        for (g, &l) in log_likes.iter().enumerate() {
            if l > cutoff {
                temp.push((g as i32, (l - max_like).exp()));
            }
        }
    }
    if temp.is_empty() {
        temp = log_likes
            .iter()
            .enumerate()
            .map(|(g, &l)| (g as i32, (l - max_like).exp()))
            .collect();
    }
    temp.sort_by(|a, b| b.1.total_cmp(&a.1));
    temp.truncate(n);
    let mut tot: f32 = 0.0;
    for e in &temp {
        tot += e.1;
    }
    let cutoff = min_post * tot;
    while temp.len() > 1 && temp.last().is_some_and(|e| e.1 < cutoff) {
        tot -= temp.pop().map_or(0.0, |e| e.1);
    }
    let inv = 1.0 / tot;
    for e in &mut temp {
        e.1 *= inv;
    }
    (temp, max_like + tot.ln())
}

/// One frame of fgmm-global-gselect-to-post: `loglikes` are those of the
/// selected Gaussians `ids`; softmax over them, then with `min_post > 0`
/// posteriors below it are zeroed and the rest renormalised (all zero: the
/// first best gets 1). Zero posteriors are left out. Returns the entries
/// and the log of the summed likelihoods, or `None` when the posteriors do
/// not sum to one within 0.01 (NaN or infinite log-likelihoods), which
/// Kaldi counts as an error for the utterance.
pub fn preselected_posteriors(
    loglikes: &mut [f32],
    ids: &[i32],
    min_post: f32,
) -> Option<(Vec<(i32, f32)>, f32)> {
    let tot = apply_softmax(loglikes);
    let sum: f64 = loglikes.iter().map(|&p| p as f64).sum();
    if !((sum as f32 - 1.0).abs() <= 0.01) {
        return None;
    }
    if min_post != 0.0 {
        let mut best = 0usize;
        for (i, &p) in loglikes.iter().enumerate() {
            if p > loglikes[best] {
                best = i;
            }
        }
        for p in loglikes.iter_mut() {
            if *p < min_post {
                *p = 0.0;
            }
        }
        let s = loglikes.iter().map(|&p| p as f64).sum::<f64>() as f32;
        if s == 0.0 {
            loglikes[best] = 1.0;
        } else {
            let scale = (1.0 / s as f64) as f32;
            for p in loglikes.iter_mut() {
                *p *= scale;
            }
        }
    }
    let entries = ids
        .iter()
        .zip(loglikes.iter())
        .filter(|(_, &p)| p != 0.0)
        .map(|(&g, &p)| (g, p))
        .collect();
    Some((entries, tot))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_n_best_first_ties_to_the_higher_index() {
        let ll = [-5.0f32, -1.0, -3.0, -1.0, -7.0];
        let (sel, tot) = select_top(&ll, None, 3);
        assert_eq!(sel, [3, 1, 2]);
        let want = (((-1.0f64).exp() * 2.0 + (-3.0f64).exp()).ln()) as f32;
        assert!((tot - want).abs() < 1e-6);
        // Preselected ids; n larger than the candidates.
        let (sel, _) = select_top(&[-2.0, -1.0], Some(&[10, 4]), 5);
        assert_eq!(sel, [4, 10]);
    }

    #[test]
    fn posterior_entry_prunes_and_renormalises() {
        let ll = [0.0f32, -0.1, -5.0, -9.0];
        let (p, _) = posterior_entry(&ll, 3, 0.0);
        assert_eq!(p.iter().map(|e| e.0).collect::<Vec<_>>(), [0, 1, 2]);
        assert!((p.iter().map(|e| e.1).sum::<f32>() - 1.0).abs() < 1e-6);
        // min_post 0.05: Gaussian 2 (post ≈ 0.0035) goes.
        let (p, like) = posterior_entry(&ll, 3, 0.05);
        assert_eq!(p.iter().map(|e| e.0).collect::<Vec<_>>(), [0, 1]);
        let want = (1.0f64 + (-0.1f64).exp()).ln() as f32;
        assert!((like - want).abs() < 1e-6);
    }

    #[test]
    fn preselected_posteriors_min_post_and_bad_sums() {
        let mut ll = [-1.0f32, -1.2, -30.0];
        let (p, _) = preselected_posteriors(&mut ll, &[7, 3, 9], 0.01).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].0, p[1].0), (7, 3));
        let mut bad = [f32::NAN, -1.0];
        assert!(preselected_posteriors(&mut bad, &[0, 1], 0.0).is_none());
    }
}
