//! `amtool copy-to-htk [options] IN-RSPECIFIER`: Kaldi's copy-feats-to-htk.
//! Each matrix of the table becomes one HTK parameter file
//! `OUTPUT-DIR/KEY.OUTPUT-EXT` (big-endian float frames, the given sample
//! period and kind; Kaldi's defaults 100000 = 10 ms and 9 = USER), written
//! atomically. The reverse is `amtool copy --htk-in` (copy-feats --htk-in).

use std::path::Path;

use clap::Args;

use amtool_formats::htk::param::{ByteOrder, ParamFile};
use amtool_formats::htk::parmkind::ParmKind;
use amtool_formats::kaldi::any::AnyObject;
use amtool_formats::kaldi::files::printable_rx;
use amtool_formats::kaldi::table::SequentialTableReader;

use super::KaldiStandard;

#[derive(Debug, Clone, Args)]
pub struct CopyToHtkArgs {
    #[command(flatten)]
    pub std: KaldiStandard,
    /// Output directory (created if missing).
    #[arg(long, default_value = "./", value_name = "DIR")]
    pub output_dir: String,
    /// Extension of the HTK files.
    #[arg(long, default_value = "fea", value_name = "EXT")]
    pub output_ext: String,
    /// HTK sampPeriod, in 100 ns units.
    #[arg(long, default_value_t = 100000, value_name = "N")]
    pub sample_period: i32,
    /// HTK parmKind code (e.g. 6 MFCC, 7 FBANK, 9 USER, 11 PLP; qualifier bits allowed).
    #[arg(long, default_value_t = 9, value_name = "N")]
    pub sample_kind: i32,
    /// Input: an rspecifier of feature matrices (ark:..., scp:...).
    #[arg(value_name = "IN")]
    pub input: String,
}

/// Run `amtool copy-to-htk`; returns the exit status.
pub fn run(args: &CopyToHtkArgs) -> i32 {
    match copy_to_htk(args) {
        Ok(code) => code,
        Err(msg) => super::fail(&msg),
    }
}

fn copy_to_htk(args: &CopyToHtkArgs) -> Result<i32, String> {
    let kind = u16::try_from(args.sample_kind)
        .ok()
        .map(ParmKind)
        .filter(|k| k.is_valid())
        .ok_or_else(|| {
            format!(
                "invalid --sample-kind={} (an HTK parmKind code)",
                args.sample_kind
            )
        })?;
    if args.sample_period <= 0 {
        return Err(format!(
            "invalid --sample-period={} (must be > 0)",
            args.sample_period
        ));
    }
    let dir = Path::new(&args.output_dir);
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "Could not create output directory: {}: {e}",
            args.output_dir
        )
    })?;
    let mut reader =
        SequentialTableReader::<AnyObject>::open(&args.input).map_err(|e| e.to_string())?;
    let mut num_done = 0usize;
    while let Some((key, obj)) = reader.next_entry().map_err(|e| e.to_string())? {
        let m = obj.to_float_matrix().ok_or_else(|| {
            format!(
                "{}: key {key}: holds a {}, not a feature matrix",
                printable_rx(&args.input),
                obj.object_type().describe()
            )
        })?;
        let path = dir.join(format!("{key}.{}", args.output_ext));
        ParamFile::from_matrix(&m, kind, args.sample_period)
            .write(&path, ByteOrder::Big)
            .map_err(|e| e.to_string())?;
        num_done += 1;
    }
    // Kaldi's wording, typo included: recipes may grep it.
    crate::kaldi_log!(
        "{num_done} HTK feature files generated in the direcory: {}",
        args.output_dir
    );
    Ok(if num_done != 0 { 0 } else { 1 })
}
