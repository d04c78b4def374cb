//! What the training subcommands (`acc-stats`, `sum-accs`, `est`) share on
//! the command-line side: reading one object file by rxfilename and telling
//! what it holds, writing one atomically by wxfilename, Kaldi's `--use-gpu`
//! values, and printing the library's messages as Kaldi log lines.

use std::sync::Arc;

use amtool_formats::kaldi::files::{printable_rx, read_rxfilename, write_wxfilename, InputData};
use amtool_formats::kaldi::model::ObjectKind;
use amtool_formats::kaldi::specifier::RxFilename;

use crate::engine::UseGpu;
use crate::train::est::Msg;

/// A whole input object file: its printable name, bytes and kind.
pub struct InputObject {
    pub name: String,
    pub data: Arc<InputData>,
    pub kind: ObjectKind,
}

/// Reads an rxfilename (file, `-`, `cmd |`) and detects what it holds.
pub fn read_object_file(rx: &str) -> Result<InputObject, String> {
    let name = printable_rx(rx);
    let class = RxFilename::classify(rx).map_err(|e| format!("{name}: {}", e.0))?;
    let data = read_rxfilename(&class).map_err(|e| e.to_string())?;
    if data.is_empty() {
        return Err(format!("{name}: empty file, expected a Kaldi object"));
    }
    let kind = ObjectKind::detect(&data);
    Ok(InputObject { name, data, kind })
}

/// Writes `bytes` to a wxfilename (files atomically: a failed run leaves no
/// partial output).
pub fn write_object_file(wx: &str, bytes: &[u8]) -> Result<(), String> {
    write_wxfilename(wx, |w| w.write_all(bytes)).map_err(|e| e.to_string())
}

/// Kaldi's `--use-gpu` values: yes, no, optional (and wait, which here means yes).
pub fn parse_use_gpu(s: &str) -> Result<UseGpu, String> {
    match s {
        "yes" | "wait" => Ok(UseGpu::Yes),
        "no" => Ok(UseGpu::No),
        "optional" => Ok(UseGpu::Optional),
        _ => Err(format!(
            "invalid --use-gpu={s} (expected yes, no, optional or wait)"
        )),
    }
}

/// Prints the library's messages as Kaldi LOG/WARNING lines.
pub fn print_msgs(msgs: &[Msg]) {
    for m in msgs {
        match m {
            Msg::Log(s) => crate::kaldi_log!("{s}"),
            Msg::Warn(s) => crate::kaldi_warn!("{s}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_gpu_values() {
        assert_eq!(parse_use_gpu("no"), Ok(UseGpu::No));
        assert_eq!(parse_use_gpu("optional"), Ok(UseGpu::Optional));
        assert!(parse_use_gpu("maybe").is_err());
    }
}
