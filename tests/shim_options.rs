//! Option parity of the shims (issue 15, part 2): every Kaldi tool `amtool
//! shims` makes a link for accepts every option that tool registers, in both
//! spellings Kaldi's `ParseOptions` accepts (`-` and `_` alike), with the
//! tool's default value (and, for a bool, alone). The lists come from the real
//! tools' `--help` (testdata/kaldi/options/TOOL.txt, written by make.sh
//! there); the list of shims and the list of files must match, so a new shim
//! needs its tool's options file, and a tool's new option shows up here.
//!
//! The shims' command lines are parsed, not run: `cli::invoked_as` and
//! `cli::clap_args` are what `main_with_args` does before it runs a tool.

use std::collections::BTreeSet;
use std::ffi::OsString;

use amtool::cli::shims::SHIMS;
use amtool::cli::{clap_args, invoked_as, Cli};
use clap::error::ErrorKind;
use clap::Parser;

const DIR: &str = "testdata/kaldi/options";

/// Shims that stand for HTK tools, not Kaldi ones: their single-dash options
/// are HTK's (tests/htk_herest.rs), with no Kaldi `--help` to list them.
const NOT_KALDI: &[&str] = &["HERest"];

/// One registered option: its name as Kaldi prints it, type and default.
struct KaldiOption {
    name: String,
    kind: String,
    default: String,
}

fn options_of(tool: &str) -> Vec<KaldiOption> {
    let path = format!("{DIR}/{tool}.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{path}: {e} (every Kaldi shim needs its tool's options file; see {DIR}/make.sh)")
    });
    text.lines()
        .map(|l| {
            let mut f = l.splitn(3, ' ');
            let (name, kind, default) = (f.next(), f.next(), f.next());
            match (name, kind, default) {
                (Some(n), Some(k), Some(d)) if n.starts_with("--") => KaldiOption {
                    name: n.to_string(),
                    kind: k.to_string(),
                    default: d.trim_matches('"').to_string(),
                },
                _ => panic!("{path}: bad line {l:?}"),
            }
        })
        .collect()
}

/// Parses `tool ARGS...` as the shim would; Ok when clap took every option
/// (a missing positional argument is fine: none is given).
fn accepts(tool: &str, args: &[String]) -> Result<(), String> {
    let mut argv = vec![OsString::from(format!("/some/dir/{tool}"))];
    argv.extend(args.iter().map(OsString::from));
    let (_, sub, rest) = invoked_as(&argv);
    let full = clap_args(sub, rest)?;
    match Cli::try_parse_from(&full) {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::MissingRequiredArgument | ErrorKind::DisplayHelp
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// `--change_dim` and `--change-dim`: Kaldi normalises `_` to `-` in names.
fn spellings(name: &str) -> BTreeSet<String> {
    [
        name.to_string(),
        name.replace('_', "-"),
        format!("--{}", name[2..].replace('-', "_")),
    ]
    .into_iter()
    .collect()
}

#[test]
fn every_shim_has_its_tools_options_file_and_no_other() {
    let shims: BTreeSet<String> = SHIMS
        .iter()
        .map(|s| s.tool.to_string())
        .filter(|t| !NOT_KALDI.contains(&t.as_str()))
        .collect();
    let files: BTreeSet<String> = std::fs::read_dir(DIR)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.strip_suffix(".txt").map(str::to_string)
        })
        .collect();
    assert_eq!(shims, files, "shims (left) and {DIR}/*.txt (right) differ");
}

#[test]
fn every_shim_accepts_every_option_of_its_tool() {
    let config = tempfile::NamedTempFile::new().unwrap();
    let mut refused = Vec::new();
    let mut checked = 0;
    for shim in SHIMS.iter().filter(|s| !NOT_KALDI.contains(&s.tool)) {
        let opts = options_of(shim.tool);
        for standard in ["--config", "--help", "--print-args", "--verbose"] {
            assert!(
                opts.iter().any(|o| o.name == standard),
                "{}: no {standard}",
                shim.tool
            );
        }
        for o in &opts {
            for name in spellings(&o.name) {
                let mut tries = vec![match o.name.as_str() {
                    "--help" => name.clone(),
                    "--config" => format!("{name}={}", config.path().display()),
                    _ => format!("{name}={}", o.default),
                }];
                if o.kind == "bool" && o.name != "--help" {
                    tries.push(name.clone());
                }
                for arg in tries {
                    checked += 1;
                    if let Err(e) = accepts(shim.tool, &[arg.clone()]) {
                        refused.push(format!(
                            "{} {arg}: {}",
                            shim.tool,
                            e.lines().next().unwrap_or("")
                        ));
                    }
                }
            }
        }
    }
    assert!(
        refused.is_empty(),
        "{} of {checked} refused:\n{}",
        refused.len(),
        refused.join("\n")
    );
    assert!(checked > 300, "only {checked} options checked");
}

/// The check itself refuses what a tool does not register.
#[test]
fn an_unknown_option_is_refused() {
    let e = accepts("copy-vector", &["--no-such-option=1".to_string()]).unwrap_err();
    assert!(e.contains("no-such-option"), "{e}");
}
