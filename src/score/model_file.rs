//! The model file a scoring tool is given: a Kaldi acoustic model
//! (TransitionModel + AmDiagGmm, as gmm-compute-likes reads it), a global
//! diagonal GMM (gmm-global-*) or a global full-covariance GMM (fgmm-global-*),
//! told apart by their first token.

use std::sync::Arc;

use amtool_formats::kaldi::files::{printable_rx, read_rxfilename, InputData};
use amtool_formats::kaldi::gmm::{DiagGmm, FullGmm};
use amtool_formats::kaldi::model::{KaldiModel, ObjectKind};
use amtool_formats::kaldi::specifier::RxFilename;

use crate::model::AcousticModel;
use crate::train::io::read_input;
use crate::Result;

/// The bytes of a model rxfilename. A plain file is mapped rather than read
/// into a new buffer: a large model is hundreds of MB, and faulting in fresh
/// pages costs more than parsing them.
fn read_model_bytes(rx: &str) -> Result<Arc<InputData>> {
    match RxFilename::classify(rx.trim()) {
        Ok(f @ RxFilename::File(_)) => Ok(read_rxfilename(&f).map_err(|e| e.in_file(rx))?),
        _ => Ok(Arc::new(InputData::Owned(read_input(rx)?))),
    }
}

/// One model file as read.
#[derive(Debug, Clone)]
pub enum ModelFile {
    /// Transition model + AmDiagGmm: one state per pdf.
    Am(KaldiModel),
    /// A diagonal UBM: one state.
    Diag(DiagGmm),
    /// A full-covariance UBM: one state.
    Full(FullGmm),
}

impl ModelFile {
    /// Reads an rxfilename (file, `-`, `cmd |`) holding one of the three kinds.
    pub fn read(rx: &str) -> Result<ModelFile> {
        let name = printable_rx(rx);
        let buf = read_model_bytes(rx)?;
        let kind = ObjectKind::detect(&buf);
        let res = match kind {
            ObjectKind::Model => KaldiModel::from_bytes(&buf).map(ModelFile::Am),
            ObjectKind::DiagGmm => DiagGmm::from_bytes(&buf).map(ModelFile::Diag),
            ObjectKind::FullGmm => crate::model::kaldi::read_full_gmm(&buf).map(ModelFile::Full),
            k => Err(k.mismatch_error(
                "",
                "a GMM model (TransitionModel + AmDiagGmm), a DiagGmm or a FullGmm",
            )),
        };
        Ok(res.map_err(|e| e.in_file(&name))?)
    }

    /// The neutral model the engines score with, taking the parameters over.
    pub fn into_acoustic_model(self) -> AcousticModel {
        match self {
            ModelFile::Am(m) => AcousticModel::from_am_diag_gmm_owned(m.am),
            ModelFile::Diag(g) => AcousticModel::from_diag_gmm(&g),
            ModelFile::Full(g) => AcousticModel::from_full_gmm(&g),
        }
    }

    /// The neutral model the engines score with.
    pub fn acoustic_model(&self) -> AcousticModel {
        match self {
            ModelFile::Am(m) => AcousticModel::from_am_diag_gmm(&m.am),
            ModelFile::Diag(g) => AcousticModel::from_diag_gmm(g),
            ModelFile::Full(g) => AcousticModel::from_full_gmm(g),
        }
    }

    /// The kind of object the file held.
    pub fn kind(&self) -> ObjectKind {
        match self {
            ModelFile::Am(_) => ObjectKind::Model,
            ModelFile::Diag(_) => ObjectKind::DiagGmm,
            ModelFile::Full(_) => ObjectKind::FullGmm,
        }
    }

    /// `true` for the one-state global GMMs.
    pub fn is_global(&self) -> bool {
        !matches!(self, ModelFile::Am(_))
    }
}
