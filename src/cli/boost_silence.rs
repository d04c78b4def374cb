//! `amtool boost-silence [options] <silence-phones-list> <model-in>
//! <model-out>`: Kaldi's gmm-boost-silence — the weights of the Gaussians of
//! every pdf the colon-separated phones use are multiplied by `--boost` (the
//! update is `train::boost_silence`); the model is written atomically.

use clap::Args;

use amtool_formats::kaldi::model::{KaldiModel, ObjectKind};
use amtool_formats::kaldi::object::object_to_bytes;

use super::train_io::{read_object_file, write_object_file};
use super::{kaldi, KaldiStandard};
use crate::stats::fmt_g;
use crate::train::boost_silence::{boost_pdfs, pdfs_for_phones};
use crate::{kaldi_log, kaldi_warn};

#[derive(Debug, Clone, Args)]
pub struct BoostSilenceArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    /// Write output in binary mode.
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = kaldi::parse_bool)]
    pub binary: bool,
    /// Factor by which to boost silence probs.
    #[arg(long, value_name = "FLOAT", default_value_t = 1.5)]
    pub boost: f32,
    /// Phones whose pdfs are boosted, colon-separated (e.g. 1:2:3).
    #[arg(value_name = "SILENCE-PHONES-LIST")]
    pub phones: String,
    /// Model (rxfilename).
    #[arg(value_name = "MODEL-IN")]
    pub model_in: String,
    /// Boosted model (wxfilename).
    #[arg(value_name = "MODEL-OUT")]
    pub model_out: String,
}

/// Run `amtool boost-silence`; returns the exit status.
pub fn run(args: BoostSilenceArgs) -> i32 {
    match boost(&args) {
        Ok(()) => 0,
        Err(msg) => super::fail(&msg),
    }
}

/// Kaldi's `SplitStringToIntegers(s, ":", false)`, sorted; duplicates are an error.
fn parse_phones(s: &str) -> Result<Vec<i32>, String> {
    let mut v = s
        .split(':')
        .map(|f| {
            f.trim()
                .parse::<i32>()
                .map_err(|_| format!("invalid silence-phones list '{s}': '{f}' is not an integer"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    v.sort_unstable();
    if v.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("Silence phones non-unique: '{s}'"));
    }
    Ok(v)
}

fn boost(args: &BoostSilenceArgs) -> Result<(), String> {
    let phones = if args.phones.is_empty() {
        kaldi_warn!("gmm-boost-silence: no silence phones specified, doing nothing.");
        Vec::new()
    } else {
        parse_phones(&args.phones)?
    };
    let input = read_object_file(&args.model_in)?;
    if input.kind != ObjectKind::Model {
        return Err(input
            .kind
            .mismatch_error(&input.name, "a GMM model (TransitionModel + AmDiagGmm)")
            .to_string());
    }
    let mut model =
        KaldiModel::from_bytes(&input.data).map_err(|e| e.in_file(&input.name).to_string())?;
    let (pdfs, exclusive) = pdfs_for_phones(&model.trans, &phones);
    if !exclusive {
        kaldi_warn!("The pdfs for the silence phones may be shared by other phones (note: this probably does not matter.)");
    }
    boost_pdfs(&mut model, &pdfs, args.boost)?;
    kaldi_log!(
        "Boosted weights for {} pdfs, by factor of {}",
        pdfs.len(),
        fmt_g(args.boost as f64)
    );
    write_object_file(&args.model_out, &object_to_bytes(&model, args.binary))?;
    kaldi_log!("Wrote model to {}", args.model_out);
    Ok(())
}
