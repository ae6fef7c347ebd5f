//! `compactor validate` agrees with the independent checker (../shared/tools/check_request.py) on
//! every corpus file converted to a request body and on every case in ../shared/cases and tests/cases.

// Test helpers outside `#[test]` fns: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use super::corpus::{CORPUS, LOGS, cassette_requests};
use super::support::checker::{Batch, Body as Checked};
use compactor::format::Format;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    super::support::compactor_bin()
}

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("agreement");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Exit status of `compactor validate` (0 valid, 1 invalid).
fn compactor_verdict(file: &Path, format: &str, allow_open_tail: bool) -> i32 {
    let mut cmd = bin();
    cmd.arg("validate").arg(file).args(["--format", format]);
    if !allow_open_tail {
        cmd.arg("--strict");
    }
    let out = cmd.output().unwrap();
    out.status.code().unwrap()
}

/// Verdicts to compare: compactor's, taken at once, and the independent checker's, all in one
/// Python run at [`Agreement::check`].
struct Agreement {
    checked: Batch,
    /// Per body pushed: what it names, compactor's exit status, the one expected (0 / 1).
    ours: Vec<(String, i32, i32)>,
}

impl Agreement {
    fn new(name: &str) -> Agreement {
        Agreement {
            checked: Batch::new(name),
            ours: Vec::new(),
        }
    }

    /// Takes compactor's verdict on `file` and queues the checker's.
    fn agree(&mut self, file: &Path, format: &str, allow_open_tail: bool, expected: i32) {
        let ours = compactor_verdict(file, format, allow_open_tail);
        let label = format!("{} as {format}", file.display());
        self.checked.push(Checked {
            label: label.clone(),
            output: std::fs::read(file).unwrap(),
            input: None,
            format: Some(format.parse::<Format>().unwrap().as_str()),
            open_tail: allow_open_tail,
        });
        self.ours.push((label, ours, expected));
    }

    /// Checks that both judges give the same verdict on every body (the checker's is 0 when it
    /// finds no fault), and that it is the one expected. The number of bodies.
    fn check(self) -> usize {
        let theirs = self.checked.faults();
        for ((label, ours, expected), faults) in self.ours.iter().zip(&theirs) {
            let theirs = i32::from(!faults.is_empty());
            assert_eq!(
                *ours, theirs,
                "{label}: compactor {ours}, checker {theirs} {faults:?}"
            );
            assert_eq!(ours, expected, "{label}");
        }
        self.checked.remove_files();
        self.ours.len()
    }
}

fn convert(input: &Path, to: &str, out: &Path) {
    let status = bin()
        .arg("convert")
        .arg(input)
        .args(["--to", to, "-o"])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "convert {} --to {to}: {}",
        input.display(),
        String::from_utf8_lossy(&status.stderr)
    );
}

fn native(file: &str) -> &'static str {
    if file.starts_with("codex_") {
        "openai-responses"
    } else if file.ends_with(".traj.json") {
        "openai-chat"
    } else {
        "anthropic"
    }
}

#[test]
fn validate_agrees_with_the_checker_on_every_converted_corpus_file() {
    let dir = out_dir();
    let mut inputs: Vec<(PathBuf, String, &str)> = LOGS
        .iter()
        .map(|f| (Path::new(CORPUS).join(f), f.to_string(), native(f)))
        .collect();
    for (i, body) in cassette_requests().iter().enumerate() {
        let path = dir.join(format!("cassette_request_{i}.json"));
        std::fs::write(&path, serde_json::to_string(body).unwrap()).unwrap();
        inputs.push((path, format!("cassette_request_{i}"), "anthropic"));
    }
    let mut agreement = Agreement::new("validate_agrees_on_every_converted_corpus_file");
    for (input, name, native) in &inputs {
        let mut targets = vec!["anthropic", "openai-chat"];
        if !targets.contains(native) {
            targets.push(native);
        }
        for to in targets {
            let out = dir.join(format!("{name}.{to}.json"));
            convert(input, to, &out);
            // Session logs may end in an interrupted turn; both judges accept an open tail.
            agreement.agree(&out, to, true, 0);
        }
    }
    assert_eq!(agreement.check(), 2 * 12 + 1);
}

#[test]
fn validate_agrees_with_the_checker_on_every_case() {
    let dir = out_dir();
    let mut agreement = Agreement::new("validate_agrees_on_every_case");
    let mut names = Vec::new();
    let own =
        std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases"))
            .unwrap()
            .map(|e| e.unwrap().path());
    for path in super::support::shared_dir("cases").into_iter().chain(own) {
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let format = case["format"].as_str().unwrap();
        let open_tail = case["allow_open_tail"] == Value::Bool(true);
        let request = dir.join(format!("case_{name}.json"));
        std::fs::write(&request, serde_json::to_string(&case["request"]).unwrap()).unwrap();
        let invalid = case["expect"].get("error").is_some();
        match CHECKER_LACKS
            .iter()
            .find(|(prefix, _)| name.starts_with(prefix))
        {
            // A rule the independent checker does not judge: only compactor's verdict is
            // known, and it must refuse the input.
            Some((_, rule)) => assert_eq!(
                compactor_verdict(&request, format, open_tail),
                1,
                "{name}: compactor must refuse ({rule})"
            ),
            None => agreement.agree(&request, format, open_tail, i32::from(invalid)),
        }
        names.push(name);
    }
    agreement.check();
    // The cases present when this test was written (27 shared, 4 own); more may come.
    assert!(names.len() >= 31, "{} cases", names.len());
}

/// Cases whose fault lies under a rule that `check_request.py` has no check for, with the rule.
const CHECKER_LACKS: &[(&str, &str)] = &[
    (
        "b11",
        "at most 4 cache_control breakpoints (Anthropic prompt caching)",
    ),
    (
        "x07",
        "the body is of another format than the one given (Anthropic blocks as openai-chat)",
    ),
    (
        "r01",
        "inline base64 image data not empty (Anthropic `image cannot be empty`)",
    ),
    (
        "r02",
        "inline base64 image data not empty (Anthropic `image cannot be empty`)",
    ),
    (
        "r03",
        "inline base64 image data decodable (Anthropic `invalid base64 data`)",
    ),
    (
        "r04",
        "inline base64 image data not empty (OpenAI `Invalid image`)",
    ),
];
