//! Test helpers shared by the integration-test modules.
pub mod checker;
pub mod fake_llm;
pub mod upstream;

use std::path::{Path, PathBuf};

/// Where the shared corpus, failure cases and checker are expected by default: `../shared`
/// next to the repository.
pub const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared");

/// The shared folder: `$COMPACTOR_SHARED` when set (a checkout laid out otherwise), else
/// [`SHARED`].
pub fn shared_root() -> PathBuf {
    std::env::var_os("COMPACTOR_SHARED").map_or_else(|| PathBuf::from(SHARED), PathBuf::from)
}

/// `<shared>/<sub>` (a folder or file the tests read, [`shared_root`]), or a panic with one
/// message naming the path that is missing, instead of an unwrap on a read error deep in a
/// test.
pub fn shared(sub: &str) -> PathBuf {
    let path = shared_root().join(sub);
    if !path.exists() {
        panic!(
            "these tests read the shared corpus, cases and checker: {} does not exist \
             (expected the folder `shared` next to the repository, holding corpus/, cases/ \
             and tools/; set COMPACTOR_SHARED to use another place)",
            path.display()
        );
    }
    path
}

/// The `compactor` binary, its default recall directory (`$XDG_CACHE_HOME/compactor/recall`,
/// written by `compact`) under the tests' own directory rather than the user's cache.
pub fn compactor_bin() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_compactor"));
    cmd.env(
        "XDG_CACHE_HOME",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("cache"),
    );
    cmd
}

/// The entries of a shared folder, sorted (see [`shared`] for a missing folder).
pub fn shared_dir(sub: &str) -> Vec<PathBuf> {
    let dir = shared(sub);
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) => panic!("cannot list {}: {e}", dir.display()),
    };
    paths.sort();
    paths
}

/// One current-thread tokio runtime shared by a test module's property cases (a runtime per case
/// would dominate their time).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    })
}

/// Runs `property` on random `values` as `proptest!` does (`config`'s cases, failures persisted
/// beside `file` as the macro persists them, the same failure message with the shrunk input),
/// but as a plain call that returns when every case passed: the caller can then judge what the
/// cases gathered, e.g. in one run of the independent checker ([`checker::Batch`]).
pub fn run_cases<S>(
    name: &'static str,
    file: &'static str,
    mut config: proptest::test_runner::Config,
    values: S,
    property: impl Fn(S::Value) -> proptest::test_runner::TestCaseResult,
) where
    S: proptest::strategy::Strategy,
    S::Value: std::fmt::Debug,
{
    config.source_file = Some(file);
    config.test_name = Some(name);
    let mut runner = proptest::test_runner::TestRunner::new(config);
    if let Err(e) = runner.run(&values, property) {
        panic!("{e}\n{runner}");
    }
}
