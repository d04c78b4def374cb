//! Kaldi tool names amtool answers to. Invoked through a link named like a
//! Kaldi tool, amtool runs the subcommand listed here with that tool's
//! arguments; `amtool shims DIR` makes the links, and a recipe puts DIR first
//! on its PATH (in `path.sh`) to use amtool without editing its scripts.

use std::path::Path;

use amtool_formats::kaldi::model::ObjectKind;

/// One Kaldi tool: its name and the amtool arguments it stands for (the
/// subcommand, then options fixed by the tool's identity).
#[derive(Debug, Clone, Copy)]
pub struct Shim {
    pub tool: &'static str,
    pub argv: &'static [&'static str],
}

/// Every Kaldi tool name amtool stands in for. A subcommand adds its tools here.
pub const SHIMS: &[Shim] = &[
    Shim {
        tool: "copy-feats",
        argv: &["copy", "--kaldi-tool=copy-feats"],
    },
    Shim {
        tool: "copy-feats-to-htk",
        argv: &["copy-to-htk"],
    },
    Shim {
        tool: "copy-matrix",
        argv: &["copy", "--kaldi-tool=copy-matrix"],
    },
    Shim {
        tool: "copy-vector",
        argv: &["copy", "--kaldi-tool=copy-vector"],
    },
    Shim {
        tool: "copy-int-vector",
        argv: &["copy", "--kaldi-tool=copy-int-vector"],
    },
    Shim {
        tool: "copy-post",
        argv: &["copy", "--kaldi-tool=copy-post"],
    },
    Shim {
        tool: "gmm-copy",
        argv: &["copy", "--kaldi-tool=gmm-copy"],
    },
    Shim {
        tool: "gmm-global-copy",
        argv: &["copy", "--kaldi-tool=gmm-global-copy"],
    },
    Shim {
        tool: "fgmm-global-copy",
        argv: &["copy", "--kaldi-tool=fgmm-global-copy"],
    },
    Shim {
        tool: "gmm-acc-stats-ali",
        argv: &["acc-stats", "--kaldi-tool=gmm-acc-stats-ali"],
    },
    Shim {
        tool: "gmm-acc-stats",
        argv: &["acc-stats", "--kaldi-tool=gmm-acc-stats"],
    },
    Shim {
        tool: "gmm-global-acc-stats",
        argv: &["acc-stats", "--kaldi-tool=gmm-global-acc-stats"],
    },
    Shim {
        tool: "fgmm-global-acc-stats",
        argv: &["acc-stats", "--kaldi-tool=fgmm-global-acc-stats"],
    },
    Shim {
        tool: "gmm-align-compiled",
        argv: &["align"],
    },
    Shim {
        tool: "align-equal-compiled",
        argv: &["align-equal"],
    },
    Shim {
        tool: "gmm-boost-silence",
        argv: &["boost-silence"],
    },
    Shim {
        tool: "fstcopy",
        argv: &["copy", "--kaldi-tool=fstcopy"],
    },
    Shim {
        tool: "gmm-sum-accs",
        argv: &["sum-accs", "--kaldi-tool=gmm-sum-accs"],
    },
    Shim {
        tool: "gmm-global-sum-accs",
        argv: &["sum-accs", "--kaldi-tool=gmm-global-sum-accs"],
    },
    Shim {
        tool: "fgmm-global-sum-accs",
        argv: &["sum-accs", "--kaldi-tool=fgmm-global-sum-accs"],
    },
    Shim {
        tool: "gmm-est",
        argv: &["est", "--kaldi-tool=gmm-est"],
    },
    Shim {
        tool: "gmm-global-est",
        argv: &["est", "--kaldi-tool=gmm-global-est"],
    },
    Shim {
        tool: "fgmm-global-est",
        argv: &["est", "--kaldi-tool=fgmm-global-est"],
    },
    Shim {
        tool: "gmm-compute-likes",
        argv: &["score"],
    },
    Shim {
        tool: "gmm-global-get-frame-likes",
        argv: &["score"],
    },
    Shim {
        tool: "fgmm-global-get-frame-likes",
        argv: &["score"],
    },
    Shim {
        tool: "gmm-gselect",
        argv: &["gselect"],
    },
    Shim {
        tool: "fgmm-gselect",
        argv: &["gselect"],
    },
    Shim {
        tool: "gmm-global-get-post",
        argv: &["global-get-post"],
    },
    Shim {
        tool: "fgmm-global-gselect-to-post",
        argv: &["gselect-to-post"],
    },
    Shim {
        tool: "gmm-adapt-map",
        argv: &["map-adapt"],
    },
    Shim {
        tool: "lattice-copy",
        argv: &["copy", "--kaldi-tool=lattice-copy"],
    },
    Shim {
        tool: "gmm-rescore-lattice",
        argv: &["rescore-lattice"],
    },
    Shim {
        tool: "HERest",
        argv: &["herest"],
    },
];

pub fn find(tool: &str) -> Option<&'static Shim> {
    SHIMS.iter().find(|s| s.tool == tool)
}

/// The one kind of model file the Kaldi tool `tool` reads, for the tools
/// amtool's subcommands stand in for with a model of any kind (Kaldi's
/// reader refuses the others: `gmm-copy` of a DiagGmm is an error); `None`
/// for amtool's own subcommands, which take any of the three.
pub fn model_kind_read_by(tool: &str) -> Option<ObjectKind> {
    match tool {
        "gmm-est" | "gmm-copy" | "gmm-compute-likes" => Some(ObjectKind::Model),
        "gmm-global-est"
        | "gmm-global-acc-stats"
        | "gmm-global-copy"
        | "gmm-global-get-frame-likes"
        | "gmm-gselect"
        | "gmm-global-get-post" => Some(ObjectKind::DiagGmm),
        "fgmm-global-est"
        | "fgmm-global-acc-stats"
        | "fgmm-global-copy"
        | "fgmm-global-get-frame-likes"
        | "fgmm-gselect"
        | "fgmm-global-gselect-to-post" => Some(ObjectKind::FullGmm),
        _ => None,
    }
}

/// Creates (or refreshes) one symlink per Kaldi tool in `dir`, pointing at
/// `exe`. An existing file of the same name that is not a link is left alone
/// and reported, so nothing the user had is lost.
pub fn make_links(dir: &Path, exe: &Path) -> Result<usize, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut made = 0;
    for s in SHIMS {
        let link = dir.join(s.tool);
        match std::fs::symlink_metadata(&link) {
            Ok(m) if m.file_type().is_symlink() => {
                std::fs::remove_file(&link).map_err(|e| format!("{}: {e}", link.display()))?;
            }
            Ok(_) => {
                return Err(format!(
                    "{}: exists and is not a symlink; not replacing it",
                    link.display()
                ));
            }
            Err(_) => {}
        }
        symlink(exe, &link).map_err(|e| format!("{}: {e}", link.display()))?;
        made += 1;
    }
    Ok(made)
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::fs::copy(target, link).map(|_| ())
}
