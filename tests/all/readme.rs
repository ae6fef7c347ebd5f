//! README.md as a newcomer reads it: its first command, run as written, prints the lines the
//! README shows it printing.

const README: &str = include_str!("../../README.md");

/// The first fenced `sh` block's `cargo run --release -- ...` line, as the binary's arguments.
fn first_command() -> Vec<String> {
    let block = &README[README.find("```sh\n").unwrap() + 6..];
    let block = &block[..block.find("```").unwrap()];
    let line = block.lines().next().unwrap();
    let args = line
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| {
            panic!("the README's first command is not `cargo run --release -- ...`: {line}")
        });
    args.split_whitespace().map(str::to_string).collect()
}

/// The lines of the fenced block after "prints on stderr:".
fn shown_lines() -> Vec<&'static str> {
    let at = README
        .find("prints on stderr:")
        .expect("the README says what the command prints");
    let block = &README[at..];
    let start = block.find("```\n").unwrap() + 4;
    let end = start + block[start..].find("```").unwrap();
    block[start..end].lines().collect()
}

#[test]
fn the_first_command_prints_the_lines_the_readme_shows() {
    let args = first_command();
    assert_eq!(
        args[..4],
        ["compact", "examples/session.json", "--budget", "3000"],
        "{args:?}"
    );
    // Run where the README runs it: a folder holding examples/session.json, outputs relative.
    let dir = super::cli::dir().join("readme");
    std::fs::create_dir_all(dir.join("examples")).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/examples/session.json"),
        dir.join("examples/session.json"),
    )
    .unwrap();
    let out = super::support::compactor_bin()
        .args(&args)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(dir.join("compacted.json").is_file() && dir.join("report.json").is_file());
    // The README writes the default recall directory as ~/.cache/...; the test's is its own.
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cache");
    let printed = super::cli::stderr(&out);
    let shown: Vec<String> = shown_lines()
        .iter()
        .map(|l| l.replace("~/.cache", &cache.display().to_string()))
        .collect();
    let printed: Vec<&str> = printed.lines().collect();
    assert_eq!(
        printed, shown,
        "README.md shows other lines than the command prints"
    );
}
