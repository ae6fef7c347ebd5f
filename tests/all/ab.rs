//! The A/B harness over every corpus session, every shared failure case and the repository's
//! own cases (tests/cases), deterministic strategies only. Sessions whose importer is not
//! merged yet appear as skipped rows with the reason.

use compactor::ab::{self, Arm, Options, Transcript, output::Timing};
use compactor::config::Loader;
use std::path::PathBuf;
use std::time::Instant;

fn shared(dir: &str) -> PathBuf {
    super::support::shared(dir)
}

#[test]
fn ab_over_the_corpus_and_cases_is_valid_and_stable() {
    let started = Instant::now();
    let own = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let paths = ab::expand(&[shared("corpus"), shared("cases"), own]).unwrap();
    assert!(!paths.is_empty(), "no corpus found");
    let transcripts: Vec<Transcript> = paths
        .iter()
        .map(|p| Transcript::load(p, Default::default()))
        .collect();
    let base = Loader {
        file: None,
        text: None,
        preset: None,
        env: false,
        preset_dirs: vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("strategies")],
        strategies: Vec::new(),
    };
    let arms: Vec<Arm> = ["default", "truncate", "microcompact"]
        .iter()
        .map(|s| Arm::load(s, &base))
        .collect();
    let options = Options {
        budgets: vec![50_000, 20_000],
        replay_cap: 40,
        ..Options::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let report = rt.block_on(ab::run(&transcripts, &arms, &options, &mut |_| {}));
    let (valid, total) = report.validity();
    assert_eq!(valid, total, "every compacted output passes the guard");
    assert!(total > 0);
    eprintln!("ab corpus run: {:.1} s", started.elapsed().as_secs_f64());
    insta::assert_snapshot!(
        "ab_corpus_markdown",
        ab::output::markdown(&report, Timing::Hide)
    );
}
