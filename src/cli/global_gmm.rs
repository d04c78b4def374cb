//! Model reading shared by the subcommands on a global GMM (gselect,
//! global-get-post, gselect-to-post) and by score: the model file must hold
//! a DiagGmm or FullGmm, and `--n` is limited to its number of Gaussians as
//! Kaldi does; the lookup of an utterance's Gaussian selection (also used
//! by score).

use amtool_formats::kaldi::holder::Int32VectorVector;
use amtool_formats::kaldi::table::RandomAccessTableReader;

use super::kaldi::program;
use super::shims::model_kind_read_by;
use crate::kaldi_warn;
use crate::model::AcousticModel;
use crate::score::model_file::ModelFile;

/// The model file `path`; run as a Kaldi tool (a shim), only the kind that
/// tool reads: `gmm-gselect` given a FullGmm is an error, as in Kaldi.
pub fn read_model_file(path: &str) -> Result<ModelFile, String> {
    let file = ModelFile::read(path).map_err(|e| e.to_string())?;
    match model_kind_read_by(program()) {
        Some(wanted) if wanted != file.kind() => Err(file
            .kind()
            .mismatch_error(path, wanted.describe())
            .to_string()),
        _ => Ok(file),
    }
}

/// The global GMM in file `path`; an acoustic model is an error
/// "`path`: `needs`, not an acoustic model".
pub fn read_global_model(path: &str, needs: &str) -> Result<AcousticModel, String> {
    let file = read_model_file(path)?;
    if !file.is_global() {
        return Err(format!("{path}: {needs}, not an acoustic model"));
    }
    Ok(file.into_acoustic_model())
}

/// (number of Gaussians, `n` limited to it) of the global GMM `model` read
/// from `path`. A GMM without Gaussians is an error; a larger `n` is warned
/// about as Kaldi does, its warning ending in `note`.
pub fn gaussians_to_keep(
    model: &AcousticModel,
    path: &str,
    n: usize,
    note: &str,
) -> Result<(usize, usize), String> {
    let num_gauss = model.states[0].num_components();
    if num_gauss == 0 {
        return Err(format!("{path}: the GMM has no Gaussians"));
    }
    if n > num_gauss {
        kaldi_warn!(
            "You asked for {n} Gaussians but GMM only has {num_gauss}, returning this many. {note}"
        );
        return Ok((num_gauss, num_gauss));
    }
    Ok((num_gauss, n))
}

/// The Gaussian selection of utterance `key` of `frames` frames; None, after
/// Kaldi's warning, when it is missing or of another length (the caller
/// counts the utterance as an error).
pub fn gselect_for<'a>(
    reader: &'a mut RandomAccessTableReader<Int32VectorVector>,
    key: &str,
    frames: usize,
) -> Result<Option<&'a Int32VectorVector>, String> {
    let Some(sel) = reader.get(key).map_err(|e| e.to_string())? else {
        kaldi_warn!("No gselect information for utterance {key}");
        return Ok(None);
    };
    if sel.0.len() != frames {
        kaldi_warn!(
            "gselect information for utterance {key} has wrong size {} vs. {frames}",
            sel.0.len()
        );
        return Ok(None);
    }
    Ok(Some(sel))
}
