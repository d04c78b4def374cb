//! Label lookup as HERest does it: the label file name of a data file
//! (HShell's `MakeFN`: same path or `-L` dir, extension `-X`), found in the
//! `-I` MLFs (labels inline, or `->`/`=>` directories) or else on disk.

use std::path::Path;

use amtool_formats::htk::mlf::{EntryBody, Mlf};

use crate::{Error, Result};

/// HERest's label file name for a data file (HShell's `MakeFN`): the data
/// file's path, or `dir` and its base name, with extension `ext`.
pub fn label_file_name(datafn: &str, dir: Option<&Path>, ext: &str) -> String {
    let p = Path::new(datafn).with_extension(ext);
    match dir {
        Some(d) => d
            .join(p.file_name().unwrap_or_default())
            .display()
            .to_string(),
        None => p.display().to_string(),
    }
}

pub fn base_name(f: &str) -> String {
    Path::new(f)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| f.to_string())
}

/// The label names of `labfn`, from the first MLF that has it, else from the file.
pub fn load_labels(mlfs: &[(String, Mlf)], labfn: &str) -> Result<Vec<String>> {
    for (mname, mlf) in mlfs {
        if let Some(e) = mlf.find(labfn) {
            return match &e.body {
                EntryBody::Labels(alts) => Ok(alts
                    .first()
                    .map(|a| a.iter().map(|l| l.levels[0].0.clone()).collect())
                    .unwrap_or_default()),
                EntryBody::SubDir(d) => read_label_file(&Path::new(d).join(base_name(labfn))),
                EntryBody::FullDir(d) => read_label_file(&Path::new(d).join(labfn)),
            }
            .map_err(|e| Error::Mismatch(format!("{e} (label file {labfn} via MLF {mname})")));
        }
    }
    read_label_file(Path::new(labfn)).map_err(|e| {
        Error::Mismatch(format!(
            "cannot find label file {labfn}: not in any -I MLF and not readable ({e})"
        ))
    })
}

fn read_label_file(p: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(p).map_err(|e| Error::Io {
        path: p.display().to_string(),
        source: e,
    })?;
    let mut v = Vec::new();
    for line in text.lines() {
        if line.trim() == "///" {
            break;
        }
        if let Some(w) = line.split_whitespace().find(|w| w.parse::<f64>().is_err()) {
            v.push(w.to_string());
        }
    }
    Ok(v)
}
