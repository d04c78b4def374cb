//! Option parity of the shims (issue 15, part 2): every tool `amtool shims`
//! makes a link for accepts every option that tool registers.
//!
//! Kaldi tools: every option in both spellings Kaldi's `ParseOptions` accepts
//! (`-` and `_` alike), with the tool's default value (and, for a bool,
//! alone). The lists come from the real tools' `--help`
//! (testdata/kaldi/options/TOOL.txt, written by make.sh there).
//!
//! HTK tools: every switch of the tool, with arguments of the kind it takes,
//! is parsed and not refused as unknown (a switch amtool cannot carry out is
//! refused by name as not supported). The lists come from the HTK 3.4.1
//! sources (testdata/htk/options/TOOL.txt, README.md there).
//!
//! The list of shims and the lists of files must match, so a new shim needs
//! its tool's options file, and a tool's new option shows up here.
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
const HTK_DIR: &str = "testdata/htk/options";

/// The tools with an options file in `dir`.
fn tools_listed_in(dir: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.strip_suffix(".txt").map(str::to_string)
        })
        .collect()
}

fn is_htk(tool: &str) -> bool {
    tools_listed_in(HTK_DIR).contains(tool)
}

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
    let shims: BTreeSet<String> = SHIMS.iter().map(|s| s.tool.to_string()).collect();
    let (kaldi, htk) = (tools_listed_in(DIR), tools_listed_in(HTK_DIR));
    assert!(
        kaldi.is_disjoint(&htk),
        "a tool in both {DIR} and {HTK_DIR}"
    );
    let files: BTreeSet<String> = kaldi.union(&htk).cloned().collect();
    assert_eq!(
        shims, files,
        "shims (left) and {DIR}/*.txt + {HTK_DIR}/*.txt (right) differ"
    );
    assert!(htk.contains("HERest"), "{HTK_DIR}: no HERest.txt");
}

#[test]
fn every_shim_accepts_every_option_of_its_tool() {
    let config = tempfile::NamedTempFile::new().unwrap();
    let mut refused = Vec::new();
    let mut checked = 0;
    for shim in SHIMS.iter().filter(|s| !is_htk(s.tool)) {
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

/// One HTK switch: its name, how many arguments it takes at most, their kind.
struct HtkSwitch {
    name: String,
    max_args: usize,
    kind: String,
}

fn switches_of(tool: &str) -> Vec<HtkSwitch> {
    let path = format!("{HTK_DIR}/{tool}.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let max = f.get(1).and_then(|n| n.rsplit('-').next()?.parse().ok());
            match (f.as_slice(), max) {
                ([name, _, kind], Some(max_args)) if name.len() == 2 && name.starts_with('-') => {
                    HtkSwitch {
                        name: name.to_string(),
                        max_args,
                        kind: kind.to_string(),
                    }
                }
                _ => panic!("{path}: bad line {l:?}"),
            }
        })
        .collect()
}

/// An argument of `kind` that the tool takes (within HShell's range checks).
fn htk_value(kind: &str) -> &'static str {
    match kind {
        "int" => "1",
        "float" => "1.5",
        "flags" => "tmvw",
        "format" => "HTK",
        "string" => "ext",
        "file" => "some.file",
        "dir" => "some_dir",
        _ => panic!("unknown argument kind {kind}"),
    }
}

/// The switch parser of an HTK shim: Ok(positional arguments).
fn htk_parse(tool: &str, args: &[String]) -> Result<Vec<String>, String> {
    match tool {
        "HERest" => amtool::cli::herest::parse_switches(args).map(|s| s.positional),
        _ => panic!("{tool}: no HTK switch parser known to this test"),
    }
}

#[test]
fn every_htk_shim_takes_every_switch_of_its_tool() {
    let mut wrong = Vec::new();
    let (mut taken, mut refused) = (0, 0);
    for shim in SHIMS.iter().filter(|s| is_htk(s.tool)) {
        for sw in switches_of(shim.tool) {
            // HTK wants a switch after -E/-J/-K's optional extension: -B.
            let mut args = vec![sw.name.clone()];
            args.extend((0..sw.max_args).map(|_| htk_value(&sw.kind).to_string()));
            args.extend(["-B".to_string(), "hmmList".to_string()]);
            match htk_parse(shim.tool, &args) {
                Ok(pos) if pos == ["hmmList"] => taken += 1,
                Ok(pos) => wrong.push(format!(
                    "{} {args:?}: arguments left over: {pos:?}",
                    shim.tool
                )),
                Err(e) if e.contains(&format!("{} ", sw.name)) && e.contains("not supported") => {
                    refused += 1
                }
                Err(e) => wrong.push(format!("{} {args:?}: {e}", shim.tool)),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        taken >= 25 && refused <= 5,
        "{taken} taken, {refused} refused as not supported"
    );
}

/// The check itself refuses what HERest does not have (-N is HCopy's, -Q HList's).
#[test]
fn a_switch_herest_does_not_have_is_unknown() {
    for opt in ["-N", "-Q", "-O", "-e"] {
        let e = htk_parse("HERest", &[opt.to_string(), "hmmList".to_string()]).unwrap_err();
        assert!(e.contains(&format!("Unknown switch {opt}")), "{e}");
    }
}
