//! Kaldi's table specifiers (`util/kaldi-table.cc`) and stream names
//! (`util/kaldi-io.cc`):
//! - rspecifier `[opts,]ark|scp[,opts]:rxfilename`, options `b t` (ignored),
//!   `o no s ns cs ncs p np bg`;
//! - wspecifier `ark:wx`, `scp:wx`, `ark,scp:ark_wx,scp_wx` with options
//!   `b t f nf p`;
//! - rxfilename: `-` or empty (stdin), `cmd |` (input pipe), `file:offset`,
//!   plain file; wxfilename: `-` (stdout), `| cmd` (output pipe), plain file.
//!
//! Options are separated by commas or spaces and may come in any order, but,
//! as in Kaldi, empty pieces, unknown options, `scp,ark`, and trailing
//! whitespace make a specifier invalid.

use std::fmt;

/// Options of an rspecifier (they matter for random access).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadOptions {
    /// `o`: each key is asked for once.
    pub once: bool,
    /// `s`: keys are sorted.
    pub sorted: bool,
    /// `cs`: keys will be asked for in sorted order.
    pub called_sorted: bool,
    /// `p`: unreadable scp entries / a corrupt archive tail are treated as
    /// missing instead of being errors.
    pub permissive: bool,
    /// `bg`: read ahead in the background (accepted; reading is already cheap).
    pub background: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    Archive,
    Script,
}

/// A parsed rspecifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RSpecifier {
    pub kind: TableKind,
    pub rxfilename: String,
    pub opts: ReadOptions,
}

/// Options of a wspecifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// `b` (default) or `t`.
    pub binary: bool,
    /// `f` / `nf`: flush after each entry (None: the default, no flush).
    pub flush: Option<bool>,
    /// `p`: for `scp:` writers, skip keys the scp does not list.
    pub permissive: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            binary: true,
            flush: None,
            permissive: false,
        }
    }
}

/// Where a table writer writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WTarget {
    Archive(String),
    /// `scp:file`: each object goes to the wxfilename the scp lists for its key.
    Script(String),
    /// `ark,scp:ark_wx,scp_wx`: an archive plus an scp with byte offsets into it.
    Both {
        archive: String,
        script: String,
    },
}

/// A parsed wspecifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WSpecifier {
    pub target: WTarget,
    pub opts: WriteOptions,
}

/// Why a specifier is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecifierError(pub String);

impl fmt::Display for SpecifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for SpecifierError {}

/// Split the options before the colon as Kaldi does (on ',' and ' ', keeping
/// empty pieces, which are then invalid).
fn split_opts(s: &str) -> impl Iterator<Item = &str> {
    s.split([',', ' '])
}

impl RSpecifier {
    pub fn parse(spec: &str) -> Result<Self, SpecifierError> {
        let bad = |why: &str| SpecifierError(format!("invalid rspecifier '{spec}': {why}"));
        let (before, after) = spec
            .split_once(':')
            .ok_or_else(|| bad("no ':' (expected e.g. ark:file or scp:file)"))?;
        if spec.ends_with(|c: char| c.is_ascii_whitespace()) {
            return Err(bad("trailing whitespace"));
        }
        let mut kind = None;
        let mut opts = ReadOptions::default();
        for o in split_opts(before) {
            match o {
                "b" | "t" => {}
                "o" => opts.once = true,
                "no" => opts.once = false,
                "s" => opts.sorted = true,
                "ns" => opts.sorted = false,
                "cs" => opts.called_sorted = true,
                "ncs" => opts.called_sorted = false,
                "p" => opts.permissive = true,
                "np" => opts.permissive = false,
                "bg" => opts.background = true,
                "ark" | "scp" => {
                    if kind.is_some() {
                        return Err(bad("more than one of ark/scp"));
                    }
                    kind = Some(if o == "ark" {
                        TableKind::Archive
                    } else {
                        TableKind::Script
                    });
                }
                other => return Err(bad(&format!("unknown option '{other}'"))),
            }
        }
        let kind = kind.ok_or_else(|| bad("neither ark nor scp given"))?;
        Ok(RSpecifier {
            kind,
            rxfilename: after.to_string(),
            opts,
        })
    }
}

impl WSpecifier {
    pub fn parse(spec: &str) -> Result<Self, SpecifierError> {
        let bad = |why: &str| SpecifierError(format!("invalid wspecifier '{spec}': {why}"));
        let (before, after) = spec
            .split_once(':')
            .ok_or_else(|| bad("no ':' (expected e.g. ark:file)"))?;
        if spec.ends_with(|c: char| c.is_ascii_whitespace()) {
            return Err(bad("trailing whitespace"));
        }
        let (mut ark, mut scp) = (false, false);
        let mut opts = WriteOptions::default();
        for o in split_opts(before) {
            match o {
                "b" => opts.binary = true,
                "t" => opts.binary = false,
                "f" => opts.flush = Some(true),
                "nf" => opts.flush = Some(false),
                "p" => opts.permissive = true,
                "ark" if !ark && !scp => ark = true,
                "ark" => {
                    return Err(bad(
                        "'ark' repeated or after 'scp' (only ark,scp is allowed)",
                    ))
                }
                "scp" if !scp => scp = true,
                "scp" => return Err(bad("'scp' repeated")),
                other => return Err(bad(&format!("unknown option '{other}'"))),
            }
        }
        let target = match (ark, scp) {
            (true, false) => WTarget::Archive(after.to_string()),
            (false, true) => WTarget::Script(after.to_string()),
            (true, true) => {
                let (a, s) = after
                    .split_once(',')
                    .ok_or_else(|| bad("ark,scp needs two names: archive,script"))?;
                WTarget::Both {
                    archive: a.to_string(),
                    script: s.to_string(),
                }
            }
            (false, false) => return Err(bad("neither ark nor scp given")),
        };
        Ok(WSpecifier { target, opts })
    }
}

/// True when `s` looks like a table specifier (`ark:`/`scp:` with options),
/// as opposed to a plain (r/w)xfilename.
pub fn is_table_specifier(s: &str) -> bool {
    RSpecifier::parse(s).is_ok() || WSpecifier::parse(s).is_ok()
}

/// What an rxfilename names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RxFilename {
    Stdin,
    /// `cmd |`: the command (without the bar).
    Pipe(String),
    /// `file:offset`.
    Offset(String, u64),
    File(String),
}

impl RxFilename {
    /// Kaldi `ClassifyRxfilename`.
    pub fn classify(s: &str) -> Result<RxFilename, SpecifierError> {
        if s.is_empty() || s == "-" {
            return Ok(RxFilename::Stdin);
        }
        if let Some(cmd) = s.strip_suffix('|') {
            return Ok(RxFilename::Pipe(cmd.to_string()));
        }
        if s.starts_with('|') {
            return Err(SpecifierError(format!(
                "'{s}' is an output pipe, not an input"
            )));
        }
        if s.starts_with(|c: char| c.is_ascii_whitespace())
            || s.ends_with(|c: char| c.is_ascii_whitespace())
        {
            return Err(SpecifierError(format!(
                "invalid input name '{s}' (leading or trailing whitespace)"
            )));
        }
        if let Some((file, off)) = s.rsplit_once(':') {
            if !off.is_empty() && off.bytes().all(|c| c.is_ascii_digit()) {
                let o = off
                    .parse::<u64>()
                    .map_err(|_| SpecifierError(format!("offset too large in '{s}'")))?;
                return Ok(RxFilename::Offset(file.to_string(), o));
            }
        }
        Ok(RxFilename::File(s.to_string()))
    }
}

/// What a wxfilename names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WxFilename {
    Stdout,
    /// `| cmd`: the command (without the bar).
    Pipe(String),
    File(String),
}

impl WxFilename {
    /// Kaldi `ClassifyWxfilename`.
    pub fn classify(s: &str) -> Result<WxFilename, SpecifierError> {
        if s.is_empty() || s == "-" {
            return Ok(WxFilename::Stdout);
        }
        if let Some(cmd) = s.strip_prefix('|') {
            return Ok(WxFilename::Pipe(cmd.to_string()));
        }
        if s.ends_with('|') {
            return Err(SpecifierError(format!(
                "'{s}' is an input pipe, not an output"
            )));
        }
        if s.starts_with(|c: char| c.is_ascii_whitespace())
            || s.ends_with(|c: char| c.is_ascii_whitespace())
        {
            return Err(SpecifierError(format!(
                "invalid output name '{s}' (leading or trailing whitespace)"
            )));
        }
        if let Some((_, off)) = s.rsplit_once(':') {
            if !off.is_empty() && off.bytes().all(|c| c.is_ascii_digit()) {
                return Err(SpecifierError(format!(
                    "cannot write to '{s}': looks like a file with a byte offset"
                )));
            }
        }
        Ok(WxFilename::File(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rspecifiers() {
        let r = RSpecifier::parse("ark:foo.ark").unwrap();
        assert_eq!(
            (r.kind, r.rxfilename.as_str()),
            (TableKind::Archive, "foo.ark")
        );
        let r = RSpecifier::parse("o,s,p,cs,scp:a b.scp").unwrap();
        assert_eq!(r.kind, TableKind::Script);
        assert!(r.opts.once && r.opts.sorted && r.opts.permissive && r.opts.called_sorted);
        let r = RSpecifier::parse("ark,s,cs:gunzip -c x.gz|").unwrap();
        assert_eq!(r.rxfilename, "gunzip -c x.gz|");
        let r = RSpecifier::parse("p,np,ns,ncs,no,t,b,bg,ark:-").unwrap();
        assert!(!r.opts.permissive && !r.opts.sorted && r.opts.background);
        for bad in [
            "foo.ark",
            "ark,scp:x",
            "arc:x",
            "ark,:x",
            "ark, t:x",
            "ark:x ",
            "xx,ark:x",
            ":x",
        ] {
            assert!(RSpecifier::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wspecifiers() {
        let w = WSpecifier::parse("ark,t:-").unwrap();
        assert_eq!(w.target, WTarget::Archive("-".into()));
        assert!(!w.opts.binary);
        let w = WSpecifier::parse("ark,scp,f:a.ark,a.scp").unwrap();
        assert_eq!(
            w.target,
            WTarget::Both {
                archive: "a.ark".into(),
                script: "a.scp".into()
            }
        );
        assert_eq!(w.opts.flush, Some(true));
        assert!(w.opts.binary);
        let w = WSpecifier::parse("ark,scp,t,nf:foo.ark,|gzip -c > foo.scp.gz").unwrap();
        assert_eq!(
            w.target,
            WTarget::Both {
                archive: "foo.ark".into(),
                script: "|gzip -c > foo.scp.gz".into()
            }
        );
        assert_eq!(w.opts.flush, Some(false));
        let w = WSpecifier::parse("ark:| gzip -c > x.gz").unwrap();
        assert_eq!(w.target, WTarget::Archive("| gzip -c > x.gz".into()));
        assert_eq!(
            WSpecifier::parse("scp,p:x.scp").unwrap().target,
            WTarget::Script("x.scp".into())
        );
        for bad in [
            "scp,ark:a,b",
            "ark,scp:a",
            "ark,ark:a",
            "ark,o:a",
            "ark:a\n",
            "x",
        ] {
            assert!(WSpecifier::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn xfilenames() {
        assert_eq!(RxFilename::classify("-").unwrap(), RxFilename::Stdin);
        assert_eq!(RxFilename::classify("").unwrap(), RxFilename::Stdin);
        assert_eq!(
            RxFilename::classify("gunzip -c a.gz |").unwrap(),
            RxFilename::Pipe("gunzip -c a.gz ".into())
        );
        assert_eq!(
            RxFilename::classify("a.ark:123").unwrap(),
            RxFilename::Offset("a.ark".into(), 123)
        );
        assert_eq!(
            RxFilename::classify("c:/x").unwrap(),
            RxFilename::File("c:/x".into())
        );
        assert!(RxFilename::classify("| cmd").is_err());
        assert_eq!(
            WxFilename::classify("| gzip").unwrap(),
            WxFilename::Pipe(" gzip".into())
        );
        assert_eq!(WxFilename::classify("-").unwrap(), WxFilename::Stdout);
        assert!(WxFilename::classify("a:12").is_err());
        assert!(WxFilename::classify("cmd |").is_err());
    }
}
