//! Kaldi's `gmm-boost-silence` update: multiply the mixture weights of every
//! pdf the listed phones use by a factor (and recompute the gconsts), which
//! raises those pdfs' likelihoods by log(factor) — typically silence, so
//! that alignment prefers it.

use amtool_formats::kaldi::model::KaldiModel;
use amtool_formats::kaldi::transition::TransitionModel;

/// Kaldi `GetPdfsForPhones`: the sorted pdfs (forward and self-loop) of the
/// transition-states of `phones`, and whether no other phone uses them.
pub fn pdfs_for_phones(tm: &TransitionModel, phones: &[i32]) -> (Vec<i32>, bool) {
    let mut pdfs: Vec<i32> = tm
        .tuples()
        .iter()
        .filter(|t| phones.binary_search(&t.phone).is_ok())
        .flat_map(|t| [t.forward_pdf, t.self_loop_pdf])
        .collect();
    pdfs.sort_unstable();
    pdfs.dedup();
    let exclusive = tm.tuples().iter().all(|t| {
        phones.binary_search(&t.phone).is_ok()
            || (pdfs.binary_search(&t.forward_pdf).is_err()
                && pdfs.binary_search(&t.self_loop_pdf).is_err())
    });
    (pdfs, exclusive)
}

/// Scale the weights of `pdfs` by `boost` (float, as `Vector::Scale`) and
/// recompute their gconsts. Errors name the pdf.
pub fn boost_pdfs(model: &mut KaldiModel, pdfs: &[i32], boost: f32) -> Result<(), String> {
    let n = model.am.pdfs.len();
    for &p in pdfs {
        let gmm = model
            .am
            .pdfs
            .get_mut(p as usize)
            .ok_or_else(|| format!("pdf {p} is not in the model ({n} pdfs)"))?;
        for w in gmm.weights.iter_mut() {
            *w *= boost;
        }
        gmm.compute_gconsts().map_err(|e| format!("pdf {p}: {e}"))?;
    }
    Ok(())
}
