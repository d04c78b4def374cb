//! The fixture's tables (testdata/kaldi, so these cases run from the source
//! folder) copied under new keys until they hold enough frames: the input of
//! the cases that time a subcommand's own table code end to end
//! (score_lattice, align_ark).

use amtool_formats::kaldi::holder::Holder;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::table::{SequentialTableReader, TableWriter};

use crate::Error;

/// The fixture's features (CMVN and deltas applied).
pub(super) const FEATS: &str = "scp:testdata/kaldi/acc/feats_cmvn_deltas.scp";

/// The error of `case` when its data cannot be read or written.
pub(super) fn case_err(case: &str, e: impl std::fmt::Display) -> Error {
    Error::Usage(format!(
        "bench {case} (needs testdata/kaldi: run from the amtool source folder): {e}"
    ))
}

/// Every entry of a table, in order.
pub(super) fn read_all<H: Holder>(spec: &str) -> amtool_formats::Result<Vec<(String, H)>> {
    let mut r = SequentialTableReader::<H>::open(spec)?;
    let mut out = Vec::new();
    while let Some(e) = r.next_entry()? {
        out.push(e);
    }
    Ok(out)
}

/// Archives of a replicated table and its features.
pub(super) struct Replicated {
    /// The table's rspecifier (`ark:DIR/NAME.ark`).
    pub table: String,
    /// The features' rspecifier (`ark:DIR/feats.ark`).
    pub features: String,
    /// Feature frames written.
    pub frames: usize,
    /// Entries of the table written.
    pub entries: usize,
}

/// The fixture's table `table` (e.g. its lattices or training graphs) and
/// [`FEATS`] copied under the keys `r0000-KEY`, `r0001-KEY`, ... into
/// `dir/NAME.ark` and `dir/feats.ark`, as many copies as give at least
/// `min_frames` frames.
pub(super) fn replicate<H: Holder>(
    dir: &std::path::Path,
    table: &str,
    name: &str,
    min_frames: usize,
) -> amtool_formats::Result<Replicated> {
    let items = read_all::<H>(table)?;
    let feats = read_all::<Matrix<f32>>(FEATS)?;
    let per_copy: usize = feats.iter().map(|(_, m)| m.rows()).sum();
    let copies = min_frames.div_ceil(per_copy.max(1)).max(1);
    let out = Replicated {
        table: format!("ark:{}", dir.join(format!("{name}.ark")).display()),
        features: format!("ark:{}", dir.join("feats.ark").display()),
        frames: copies * per_copy,
        entries: copies * items.len(),
    };
    let mut tw = TableWriter::<H>::open(&out.table)?;
    let mut fw = TableWriter::<Matrix<f32>>::open(&out.features)?;
    for c in 0..copies {
        for (k, x) in &items {
            tw.write(&format!("r{c:04}-{k}"), x)?;
        }
        for (k, m) in &feats {
            fw.write(&format!("r{c:04}-{k}"), m)?;
        }
    }
    tw.close()?;
    fw.close()?;
    Ok(out)
}
