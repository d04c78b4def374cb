//! The checked-in man pages (`man/`) and completion scripts (`completions/`)
//! must be what the current clap definitions generate. When this fails, run
//! the command in the message and commit the result.

use amtool::cli::docs;

#[test]
fn man_pages_are_up_to_date() {
    let pages = docs::man_pages().unwrap();
    let mut stale = Vec::new();
    for (name, text) in &pages {
        match std::fs::read(format!("man/{name}")) {
            Ok(have) if have == *text => {}
            Ok(_) => stale.push(format!("man/{name} differs")),
            Err(_) => stale.push(format!("man/{name} is missing")),
        }
    }
    for e in std::fs::read_dir("man").unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".1") && !pages.iter().any(|(n, _)| *n == name) {
            stale.push(format!(
                "man/{name} is for a subcommand that no longer exists"
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "stale man pages ({}); regenerate with: {}",
        stale.join(", "),
        docs::REGENERATE
    );
}

#[test]
fn completions_are_up_to_date() {
    for (shell, name) in docs::SHELLS {
        let have = std::fs::read(format!("completions/{name}")).unwrap_or_default();
        assert!(
            have == docs::completion(shell),
            "completions/{name} is stale; regenerate with: {}",
            docs::REGENERATE
        );
    }
}
