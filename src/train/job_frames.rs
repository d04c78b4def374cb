//! How many frames a feature table holds, estimated before reading it, so
//! that `--use-gpu=optional` can pick the engine that finishes first
//! ([`crate::engine::choice`]). Cheap by design (a few headers, never the
//! whole table):
//! - `scp:FILE`: the number of entries × the mean rows of up to
//!   [`SAMPLES`] entries spread over the list;
//! - `ark:FILE` on a regular file: the file's size over the bytes of a row
//!   of its first matrix (float, double or compressed);
//! - a pipe (`ark:apply-cmvn ... scp:feats.scp ark:- | add-deltas ... |`,
//!   what Kaldi recipes pass): the largest estimate of the tables named
//!   inside the command (the per-utterance features, not the per-speaker
//!   CMVN statistics);
//! - anything else (stdin, text archives): unknown.

use amtool_formats::kaldi::holder::Holder;
use amtool_formats::kaldi::matrix::Matrix;
use amtool_formats::kaldi::script::parse_script;
use amtool_formats::kaldi::specifier::{RSpecifier, RxFilename, TableKind};
use amtool_formats::kaldi::table::ObjectLoader;

/// Entries of a script whose rows are read.
pub const SAMPLES: usize = 16;

/// Estimated frames of the table `rspecifier` names, or `None`.
pub fn estimate_frames(rspecifier: &str) -> Option<usize> {
    let spec = RSpecifier::parse(rspecifier).ok()?;
    match RxFilename::classify(&spec.rxfilename).ok()? {
        RxFilename::File(path) => match spec.kind {
            TableKind::Script => script_frames(&path),
            TableKind::Archive => archive_frames(&path),
        },
        RxFilename::Pipe(cmd) => pipe_frames(&cmd),
        _ => None,
    }
}

/// The largest estimate of the rspecifiers among the command's words.
fn pipe_frames(cmd: &str) -> Option<usize> {
    cmd.split_whitespace()
        .filter(|w| w.contains(':') && !w.ends_with(":-"))
        .filter_map(estimate_frames)
        .max()
}

fn script_frames(path: &str) -> Option<usize> {
    let data = std::fs::read(path).ok()?;
    let entries = parse_script(&data, path).ok()?;
    if entries.is_empty() {
        return Some(0);
    }
    let step = entries.len().div_ceil(SAMPLES);
    let mut loader = ObjectLoader::default();
    let mut rows = Vec::new();
    for e in entries.iter().step_by(step) {
        let m = loader
            .load_with(&e.rxfilename, Matrix::<f32>::read_holder)
            .ok()?;
        rows.push(m.rows());
    }
    let mean = rows.iter().sum::<usize>() as f64 / rows.len() as f64;
    Some((mean * entries.len() as f64).round() as usize)
}

/// Bytes per value of the matrix whose binary token starts `token`.
fn value_bytes(token: &[u8]) -> Option<f64> {
    Some(match token {
        b"FM" => 4.0,
        b"DM" => 8.0,
        b"CM2" => 2.0,
        b"CM" | b"CM3" => 1.0,
        _ => return None,
    })
}

fn archive_frames(path: &str) -> Option<usize> {
    let size = std::fs::metadata(path).ok()?.len();
    if size == 0 {
        return Some(0);
    }
    let mut loader = ObjectLoader::default();
    // The first entry: "key \0B" then the matrix (its token, then rows and
    // columns as the holder reads them).
    let head = {
        use std::io::Read;
        let mut buf = vec![0u8; 4096];
        let mut f = std::fs::File::open(path).ok()?;
        let n = f.read(&mut buf).ok()?;
        buf.truncate(n);
        buf
    };
    let key_end = head.iter().position(|&b| b == b' ')?;
    let body = head.get(key_end + 1..)?.strip_prefix(b"\0B")?;
    let tok_end = body.iter().position(|&b| b == b' ')?;
    let per_value = value_bytes(&body[..tok_end])?;
    let first = loader
        .load_with(
            &format!("{path}:{}", key_end + 1),
            Matrix::<f32>::read_holder,
        )
        .ok()?;
    let row_bytes = per_value * first.cols().max(1) as f64;
    Some((size as f64 / row_bytes) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bundled features: 40 utterances, 8445 frames of dimension 39.
    const FRAMES: usize = 8445;

    fn near(est: Option<usize>, want: usize, tol: f64) -> bool {
        est.is_some_and(|e| (e as f64 - want as f64).abs() <= tol * want as f64)
    }

    #[test]
    fn an_archive_on_disk_is_estimated_from_its_size() {
        let e = estimate_frames("ark:testdata/kaldi/acc/feats_cmvn_deltas.ark");
        // Headers make the size a little more than the rows' bytes.
        assert!(near(e, FRAMES, 0.02), "{e:?}");
    }

    #[test]
    fn a_script_is_estimated_from_sampled_entries() {
        let e = estimate_frames("scp:testdata/kaldi/acc/feats_cmvn_deltas.scp");
        assert!(near(e, FRAMES, 0.25), "{e:?}");
        let half = estimate_frames("scp,s,cs:testdata/kaldi/acc/half1.scp");
        assert!(near(half, FRAMES / 2, 0.3), "{half:?}");
    }

    #[test]
    fn a_recipe_pipe_is_estimated_from_the_tables_inside_it() {
        let spec = "ark,s,cs:apply-cmvn --utt2spk=ark:data/utt2spk scp:testdata/kaldi/acc/half2.scp scp:testdata/kaldi/acc/feats_cmvn_deltas.scp ark:- | add-deltas ark:- ark:- |";
        let e = estimate_frames(spec);
        assert!(near(e, FRAMES, 0.25), "{e:?}");
    }

    #[test]
    fn unknown_sizes_are_none() {
        assert_eq!(estimate_frames("ark:-"), None);
        assert_eq!(estimate_frames("ark:cat x.ark |"), None);
        assert_eq!(estimate_frames("scp:no/such/file.scp"), None);
        assert_eq!(estimate_frames("not a specifier"), None);
    }
}
