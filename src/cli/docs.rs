//! Man pages and shell completions, generated from the clap definitions so they
//! can never disagree with the program: `amtool man DIR` writes one roff page
//! per (sub)command with clap_mangen, `amtool completions SHELL` prints a
//! completion script with clap_complete. The checked-in `man/` and
//! `completions/` folders are produced by `amtool man --completions=completions man`;
//! a test fails when they are stale.

use std::io;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;

/// Shells whose completion scripts are checked in (file name per shell).
pub const SHELLS: [(Shell, &str); 3] = [
    (Shell::Bash, "amtool.bash"),
    (Shell::Zsh, "_amtool"),
    (Shell::Fish, "amtool.fish"),
];

/// The command to run to regenerate the checked-in docs (printed by the test).
pub const REGENERATE: &str = "cargo run -- man --completions=completions man";

/// Every man page: (file name, roff text), for `amtool` and each visible
/// subcommand (`amtool-copy.1`, ...), sorted by name.
pub fn man_pages() -> io::Result<Vec<(String, Vec<u8>)>> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    render_all(&cmd, &mut out)?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn render_all(cmd: &clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        render_all(sub, out)?;
    }
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render(&mut buf)?;
    out.push((man.get_filename(), buf));
    Ok(())
}

/// The completion script for `shell`.
pub fn completion(shell: Shell) -> Vec<u8> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "amtool", &mut buf);
    buf
}

/// Write the man pages into `dir` (created if missing), removing pages of
/// subcommands that no longer exist. Returns the files written.
pub fn write_man_pages(dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let pages = man_pages()?;
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with("amtool")
            && name.ends_with(".1")
            && !pages.iter().any(|(n, _)| *n == name)
        {
            std::fs::remove_file(&p)?;
        }
    }
    let mut written = Vec::new();
    for (name, text) in pages {
        let p = dir.join(name);
        write_atomic(&p, &text)?;
        written.push(p);
    }
    Ok(written)
}

/// Write the completion scripts of [`SHELLS`] into `dir`.
pub fn write_completions(dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (shell, name) in SHELLS {
        let p = dir.join(name);
        write_atomic(&p, &completion(shell))?;
        written.push(p);
    }
    Ok(written)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    amtool_formats::atomic::write(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_names_its_command() {
        let pages = man_pages().unwrap();
        assert!(pages.iter().any(|(n, _)| n == "amtool.1"));
        for (name, text) in &pages {
            let text = String::from_utf8_lossy(text);
            let cmd = name.trim_end_matches(".1");
            assert!(text.contains(".TH"), "{name}: no title");
            assert!(text.contains(cmd), "{name}: does not name {cmd}");
        }
    }

    #[test]
    fn completions_mention_the_subcommands() {
        let bash = String::from_utf8(completion(Shell::Bash)).unwrap();
        for sub in Cli::command()
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
        {
            assert!(
                bash.contains(sub.get_name()),
                "bash completion lacks {}",
                sub.get_name()
            );
        }
    }
}
