//! What makes amtool behave like a Kaldi command-line program: Kaldi's option
//! syntax (`--opt=value`, `--bool` alone meaning true, `_` and `-` alike,
//! `--config=FILE`, options before positional arguments), the command line
//! echoed on stderr, and `LOG (...)`/`WARNING (...)` lines in Kaldi's format,
//! which recipes grep.
//!
//! Clap still defines every subcommand (so man pages and completions come from
//! one place); [`normalize_args`] rewrites a Kaldi-style argument list into one
//! clap parses the same way Kaldi's `ParseOptions` would.

use std::ffi::OsString;
use std::fmt;
use std::sync::OnceLock;

static PROGRAM: OnceLock<String> = OnceLock::new();

/// Name used in log lines, e.g. `gmm-est` when run through a shim, else
/// `amtool-est`. Set once at start-up.
pub fn set_program(name: &str) {
    let _ = PROGRAM.set(name.to_string());
}

pub fn program() -> &'static str {
    PROGRAM.get().map(String::as_str).unwrap_or("amtool")
}

/// Writes one Kaldi-style log line to stderr:
/// `LOG (gmm-est[amtool-0.1.0]:est.rs:102) message`.
pub fn emit(level: &str, file: &str, line: u32, args: fmt::Arguments<'_>) {
    let file = file.rsplit('/').next().unwrap_or(file);
    eprintln!(
        "{level} ({}[amtool-{}]:{file}:{line}) {args}",
        program(),
        env!("CARGO_PKG_VERSION")
    );
}

/// `LOG (...)` line on stderr, as Kaldi's KALDI_LOG.
#[macro_export]
macro_rules! kaldi_log {
    ($($arg:tt)*) => { $crate::cli::kaldi::emit("LOG", file!(), line!(), format_args!($($arg)*)) };
}

/// `WARNING (...)` line on stderr, as Kaldi's KALDI_WARN.
#[macro_export]
macro_rules! kaldi_warn {
    ($($arg:tt)*) => { $crate::cli::kaldi::emit("WARNING", file!(), line!(), format_args!($($arg)*)) };
}

/// Whether `cols`, the dimension of utterance `utt`'s features, is the
/// model's `dim`; warns as Kaldi's tools do when it is not (the caller then
/// skips the utterance and counts an error).
pub fn dim_matches(utt: &str, cols: usize, dim: usize) -> bool {
    if cols != dim {
        crate::kaldi_warn!("Dimension mismatch for utterance {utt}: got {cols}, expected {dim}");
    }
    cols == dim
}

/// Kaldi's boolean option values: true/t/1 and false/f/0, any case; `--x`
/// alone is `--x=true` (see [`normalize_args`]).
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "t" | "1" | "" => Ok(true),
        "false" | "f" | "0" => Ok(false),
        _ => Err(format!(
            "invalid format for boolean argument [expected true or false]: {s}"
        )),
    }
}

/// Rewrites Kaldi-style options into what clap accepts, as Kaldi's
/// `ParseOptions::Read` interprets them:
/// - `--config=FILE` is replaced by the options in FILE (`--x=y` lines, `#`
///   comments), placed before the command line's own options so those win;
/// - option names are lower-cased and `_` becomes `-`;
/// - options end at the first positional argument or a lone `--`; a later
///   argument that starts with `--` is positional, so a `--` is inserted for clap.
///
/// `args` are the arguments after the subcommand name.
pub fn normalize_args(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let mut from_config = Vec::new();
    let mut options = Vec::new();
    let mut positional = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let Some(a) = args[i].to_str() else { break };
        if a == "--" {
            i += 1;
            break;
        }
        if !a.starts_with("--") || a.len() == 2 {
            break;
        }
        let (key, value) = match a[2..].split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (&a[2..], None),
        };
        if key.is_empty() {
            return Err(format!("invalid option (no key): {a}"));
        }
        let key = key.replace('_', "-").to_ascii_lowercase();
        if key == "config" {
            let file = value.unwrap_or("").trim();
            from_config.extend(read_config_file(file)?);
        } else {
            options.push(match value {
                Some(v) => OsString::from(format!("--{key}={}", v.trim())),
                None => OsString::from(format!("--{key}")),
            });
        }
        i += 1;
    }
    for a in &args[i..] {
        positional.push(a.clone());
    }
    let mut out = from_config;
    out.extend(options);
    if !positional.is_empty() {
        out.push(OsString::from("--"));
        out.extend(positional);
    }
    Ok(out)
}

/// Reads a Kaldi config file: one `--x=y` per line, `#` starts a comment.
fn read_config_file(path: &str) -> Result<Vec<OsString>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot open config file {path}: {e}"))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if !line.starts_with("--") {
            return Err(format!(
                "reading config file {path}: line {} does not look like a line from a Kaldi \
                 command-line program's config file: should be of the form --x=y",
                n + 1
            ));
        }
        // Normalise through the same rules as the command line.
        let norm = normalize_args(&[OsString::from(line)])?;
        out.extend(norm);
    }
    Ok(out)
}

/// Shell-escapes one argument the way Kaldi echoes its command line.
pub fn escape(arg: &str) -> String {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+%@^".contains(c);
    if !arg.is_empty() && arg.chars().all(ok) {
        return arg.to_string();
    }
    if arg.contains('\'') && !arg.contains(['"', '`', '$', '\\']) {
        format!("\"{arg}\"")
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn strs(v: Vec<OsString>) -> Vec<String> {
        v.into_iter().map(|s| s.into_string().unwrap()).collect()
    }

    #[test]
    fn options_end_at_first_positional() {
        let out = normalize_args(&os(&[
            "--Min_Count=3",
            "--binary",
            "a.mdl",
            "--not-an-option",
            "b",
        ]))
        .unwrap();
        assert_eq!(
            strs(out),
            [
                "--min-count=3",
                "--binary",
                "--",
                "a.mdl",
                "--not-an-option",
                "b"
            ]
        );
    }

    #[test]
    fn lone_double_dash_ends_options() {
        let out = normalize_args(&os(&["--binary=false", "--", "--weird-file"])).unwrap();
        assert_eq!(strs(out), ["--binary=false", "--", "--weird-file"]);
    }

    #[test]
    fn config_file_options_come_first_so_command_line_wins() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("x.conf");
        std::fs::write(
            &cfg,
            "# comment\n--mix_up=100  # trailing\n\n--binary=false\n",
        )
        .unwrap();
        let arg = format!("--config={}", cfg.display());
        let out = normalize_args(&os(&["--mix-up=5", &arg, "in"])).unwrap();
        assert_eq!(
            strs(out),
            ["--mix-up=100", "--binary=false", "--mix-up=5", "--", "in"]
        );
    }

    #[test]
    fn bad_config_line_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("bad.conf");
        std::fs::write(&cfg, "--a=1\nmix-up=3\n").unwrap();
        let err = normalize_args(&os(&[&format!("--config={}", cfg.display())])).unwrap_err();
        assert!(err.contains("bad.conf") && err.contains("line 2"), "{err}");
    }

    #[test]
    fn bools_as_kaldi_reads_them() {
        for t in ["true", "T", "1", ""] {
            assert_eq!(parse_bool(t), Ok(true));
        }
        for f in ["false", "F", "0"] {
            assert_eq!(parse_bool(f), Ok(false));
        }
        assert!(parse_bool("yes").is_err());
    }

    #[test]
    fn escape_quotes_like_kaldi() {
        assert_eq!(escape("ark:foo.ark"), "ark:foo.ark");
        assert_eq!(escape("ark:gunzip -c x.gz|"), "'ark:gunzip -c x.gz|'");
        assert_eq!(escape("it's"), "\"it's\"");
    }
}
