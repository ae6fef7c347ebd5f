//! The independent oracle: request bodies judged by ../shared/tools/check_request.py (the
//! providers' documented message rules, written apart from this crate), many per Python start.
//!
//! A test gathers its bodies in a [`Batch`] and calls [`Batch::assert_valid`] once: every body
//! is written to a folder of its own under `CARGO_TARGET_TMPDIR/checked/` (kept after a failure,
//! to re-run the checker on by hand) and `check_batch.py` judges them all in one process with
//! the checker's own `load` and `check`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The driver that runs the checker over a manifest of bodies in one Python process.
const DRIVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/all/support/check_batch.py"
);

/// One body to judge: the arguments of one `check_request.py` call.
pub struct Body {
    /// Names the body in a failure: the test case or request it comes from.
    pub label: String,
    /// The request body as sent (bytes: an unreadable body is the checker's to find).
    pub output: Vec<u8>,
    /// The body it was compacted from (`--input`): the checker then also judges what the
    /// compaction had to preserve.
    pub input: Option<Vec<u8>>,
    /// `--format` (`anthropic`, `openai-chat`, `openai-responses`, `gemini`); the checker
    /// guesses when `None`.
    pub format: Option<&'static str>,
    /// `--allow-open-tail`: the history may end with a call still waiting for its result.
    pub open_tail: bool,
}

/// Bodies gathered for one run of the checker.
pub struct Batch {
    name: String,
    /// This batch's own folder (tests run in parallel threads, a test may check twice).
    dir: PathBuf,
    bodies: Vec<Body>,
}

impl Batch {
    /// An empty batch; `name` names its folder and its failures.
    pub fn new(name: &str) -> Batch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let slug: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Batch {
            name: name.to_string(),
            dir: Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("checked")
                .join(format!("{slug}-{}-{n}", std::process::id())),
            bodies: Vec::new(),
        }
    }

    /// Adds one body.
    pub fn push(&mut self, body: Body) {
        self.bodies.push(body);
    }

    /// How many bodies the batch holds.
    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    /// Whether the batch holds no body.
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// The label of the `i`th body pushed.
    pub fn label(&self, i: usize) -> &str {
        &self.bodies[i].label
    }

    /// Each body's faults as the checker prints them (an empty list for a valid body), in the
    /// order pushed. No Python runs for an empty batch. Panics naming the missing path when
    /// ../shared/tools/check_request.py is not there, and with Python's stderr when the driver
    /// itself fails.
    pub fn faults(&self) -> Vec<Vec<String>> {
        if self.is_empty() {
            return Vec::new();
        }
        let checker = super::shared("tools/check_request.py");
        let dir = &self.dir;
        std::fs::create_dir_all(dir).unwrap();
        let manifest: Vec<serde_json::Value> = self
            .bodies
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let output = dir.join(format!("{i}.out.json"));
                std::fs::write(&output, &b.output).unwrap();
                let input = b.input.as_ref().map(|bytes| {
                    let path = dir.join(format!("{i}.in.json"));
                    std::fs::write(&path, bytes).unwrap();
                    path
                });
                serde_json::json!({
                    "output": output,
                    "input": input,
                    "format": b.format,
                    "allow_open_tail": b.open_tail,
                })
            })
            .collect();
        let list = dir.join("manifest.json");
        std::fs::write(&list, serde_json::to_vec(&manifest).unwrap()).unwrap();
        let run = Command::new("python3")
            .arg(DRIVER)
            .arg(&checker)
            .arg(&list)
            .output()
            .unwrap_or_else(|e| panic!("cannot run python3 for {}: {e}", checker.display()));
        assert!(
            run.status.success(),
            "{DRIVER} on {}: {}",
            list.display(),
            String::from_utf8_lossy(&run.stderr)
        );
        let faults: Vec<Vec<String>> = serde_json::from_slice(&run.stdout).unwrap();
        assert_eq!(faults.len(), self.bodies.len(), "{}", list.display());
        faults
    }

    /// Removes the files [`Batch::faults`] wrote, once the test found its verdicts as expected
    /// ([`Batch::faults_named`] removes them itself when no body is faulty).
    pub fn remove_files(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// One line per faulty body: its label, the checker's lines that `counts` keeps, and the
    /// command that re-runs the checker on its files (kept for it); empty when no body has such
    /// a line (the files removed).
    pub fn faults_named(&self, counts: impl Fn(&str) -> bool) -> Vec<String> {
        let dir = &self.dir;
        let faults: Vec<Vec<String>> = self
            .faults()
            .into_iter()
            .map(|f| f.into_iter().filter(|l| counts(l)).collect())
            .collect();
        let failed: Vec<String> = faults
            .iter()
            .zip(&self.bodies)
            .enumerate()
            .filter(|(_, (f, _))| !f.is_empty())
            .map(|(i, (f, b))| {
                let input = if b.input.is_some() {
                    format!(" --input {}", dir.join(format!("{i}.in.json")).display())
                } else {
                    String::new()
                };
                format!(
                    "{}: {}\n  (check_request.py {}{input}{}{})",
                    b.label,
                    f.join("; "),
                    dir.join(format!("{i}.out.json")).display(),
                    b.format.map_or(String::new(), |f| format!(" --format {f}")),
                    if b.open_tail {
                        " --allow-open-tail"
                    } else {
                        ""
                    },
                )
            })
            .collect();
        if failed.is_empty() {
            let _ = std::fs::remove_dir_all(dir);
        }
        failed
    }

    /// Panics unless the checker finds every body valid, listing each faulty body as
    /// [`Batch::faults_named`] does.
    pub fn assert_valid(&self) {
        let failed = self.faults_named(|_| true);
        assert!(
            failed.is_empty(),
            "{}: the independent checker refused {} of {} bodies:\n{}",
            self.name,
            failed.len(),
            self.bodies.len(),
            failed.join("\n")
        );
    }
}
