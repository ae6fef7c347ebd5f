//! The command line: exit codes (README "Exit codes"), refusals that say where and what, and
//! the stderr notes (skipped tiers, left-out log parts, missing fields, dropped blocks).

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

pub(super) fn dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(super) fn write(name: &str, text: &str) -> PathBuf {
    let path = dir().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The binary with `args`; the default recall directory (`$XDG_CACHE_HOME/compactor/recall`)
/// is under the test's own directory, never the user's cache.
pub(super) fn run(args: &[&str]) -> Output {
    super::support::compactor_bin().args(args).output().unwrap()
}

pub(super) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(super) fn code(o: &Output) -> i32 {
    o.status.code().unwrap()
}

/// An Anthropic body with one failed call and enough text to need compacting at 300 tokens.
pub(super) fn anthropic() -> Value {
    let long = "trace line ".repeat(300);
    json!({"model": "claude-x", "max_tokens": 256, "messages": [
        {"role": "user", "content": "Deploy."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_e1", "name": "Bash", "input": {"command": "./deploy.sh"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_e1", "is_error": true, "content": long}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_r1", "name": "Read", "input": {"file_path": "/a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_r1", "content": long}]},
        {"role": "assistant", "content": "Ready."},
        {"role": "user", "content": "Go on."}
    ]})
}

#[test]
fn a_format_hint_the_body_contradicts_is_refused_with_exit_1_naming_the_block() {
    let input = write("hint.json", &anthropic().to_string());
    let out = dir().join("hint.out.json");
    for cmd in ["compact", "validate", "show", "count"] {
        let mut args = vec![cmd, input.to_str().unwrap(), "--format", "openai-chat"];
        if cmd == "compact" {
            args.extend(["--budget", "300", "-o", out.to_str().unwrap()]);
        }
        let o = run(&args);
        assert_eq!(code(&o), 1, "{cmd}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(
                "messages[1].content[0]: a \"tool_use\" block belongs to anthropic, not to \
                 openai-chat (the format given); the body looks like anthropic"
            ),
            "{cmd}: {}",
            stderr(&o)
        );
    }
    assert!(!out.exists());
}

#[test]
fn validate_reports_a_token_limit_the_provider_refuses_as_the_api_does() {
    for (limit, found) in [("1e400", "1e+400"), ("-0", "-0"), ("1024.0", "1024.0")] {
        let mut body = anthropic().to_string();
        body = body.replace("\"max_tokens\":256", &format!("\"max_tokens\":{limit}"));
        assert!(body.contains(&format!("\"max_tokens\":{limit}")), "{body}");
        let input = write("limit.json", &body);
        let o = run(&["validate", input.to_str().unwrap()]);
        assert_eq!(code(&o), 1, "{limit}: {}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.starts_with("max_tokens: ") && out.contains(&format!("not {found}")),
            "{limit}: {out}"
        );
    }
}

#[test]
fn exit_codes_follow_the_table() {
    let input = write("codes.json", &anthropic().to_string());
    let input = input.to_str().unwrap();
    let missing = dir().join("no-such-file.json");
    let missing = missing.to_str().unwrap();
    // 0: fine.
    assert_eq!(code(&run(&["validate", input])), 0);
    // 1: read, but invalid (a located shape error).
    let bad = write(
        "shape.json",
        r#"{"messages": [{"role": "user", "content": 5}]}"#,
    );
    let o = run(&["validate", bad.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("messages[0]"), "{}", stderr(&o));
    // 2: unreadable input, bad usage, bad configuration.
    assert_eq!(code(&run(&["validate", missing])), 2);
    let not_json = write("not.json", "{ nope");
    assert_eq!(code(&run(&["compact", not_json.to_str().unwrap()])), 2);
    assert_eq!(code(&run(&["compact"])), 2);
    assert_eq!(code(&run(&["compact", input, "--frobnicate"])), 2);
    assert_eq!(code(&run(&["compact", input, "--strategy", "nope"])), 2);
    // 3: the output cannot be written.
    let o = run(&["compact", input, "-o", "/nonexistent-dir/out.json"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("writing /nonexistent-dir/out.json"));
}

#[test]
fn a_zero_budget_is_an_error_saying_what_a_budget_is() {
    let input = write("zero.json", &anthropic().to_string());
    for cmd in [
        vec!["compact", input.to_str().unwrap(), "--budget", "0"],
        vec!["ab", input.to_str().unwrap(), "--budget", "0"],
    ] {
        let o = run(&cmd);
        assert_eq!(code(&o), 2, "{}", stderr(&o));
        assert!(
            stderr(&o).contains("a budget is the number of tokens the compacted request may hold"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn ab_fails_fast_on_a_missing_file_or_an_unknown_strategy() {
    let input = write("ab.json", &anthropic().to_string());
    let o = run(&["ab", "/nonexistent/x.json"]);
    assert_eq!(code(&o), 2);
    assert_eq!(
        stderr(&o).trim(),
        "error: /nonexistent/x.json: no such file or directory"
    );
    assert!(o.stdout.is_empty());
    let o = run(&[
        "ab",
        input.to_str().unwrap(),
        "--strategies",
        "truncate,nope",
    ]);
    assert_eq!(code(&o), 2);
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("--strategies nope: no strategy preset \"nope\""));
    assert!(o.stdout.is_empty());
}

#[test]
fn a_skipped_summary_tier_is_one_warning_and_the_line_names_who_did_the_work() {
    let input = write("tiers.json", &anthropic().to_string());
    let out = dir().join("tiers.out.json");
    let o = run(&[
        "compact",
        input.to_str().unwrap(),
        "--budget",
        "300",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[0],
        "warning: summary tier skipped: no [llm] configured"
    );
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[1].contains(" by "), "{err}");
    assert!(!lines[1].contains("by summary"), "{err}");
    assert!(lines[2].starts_with("note: 1 original kept in "), "{err}");
}

#[test]
fn an_explicit_config_tier_list_wins_and_a_typo_names_the_file_and_key() {
    let input = write("config.json", &anthropic().to_string());
    let good = write("only-truncate.toml", "[policy]\ntiers = [\"truncate\"]\n");
    let report = dir().join("config.report.json");
    let o = run(&[
        "compact",
        input.to_str().unwrap(),
        "--budget",
        "300",
        "--config",
        good.to_str().unwrap(),
        "-o",
        dir().join("config.out.json").to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let tiers: Vec<&str> = r["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(tiers, ["truncate"]);
    let typo = write("typo.toml", "[policy]\ntiers = [\"microcompakt\"]\n");
    let o = run(&[
        "compact",
        input.to_str().unwrap(),
        "--config",
        typo.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 2);
    assert_eq!(
        stderr(&o).trim(),
        format!(
            "error: config file {}: configuration: policy.tiers: unknown strategy \
             \"microcompakt\" (known: microcompact, summary, truncate)",
            typo.display()
        )
    );
}

#[allow(clippy::needless_pass_by_value)] // reads best with `json!` arguments
fn cc_line(kind: &str, content: Value, id: &str) -> String {
    let mut v = json!({"type": kind, "sessionId": "s", "parentUuid": null, "isSidechain": false,
                       "uuid": id, "message": {"role": kind, "content": content}});
    if kind == "assistant" {
        v["message"]["id"] = json!(format!("msg_{id}"));
        v["message"]["model"] = json!("claude-x");
    }
    format!("{v}\n")
}

/// A Claude Code log: 60 `summary` lines, an old exchange, a compact boundary, a new one, and a
/// cut-off last line, behind a byte-order mark.
fn claude_log() -> String {
    let mut log = String::from("\u{feff}");
    for i in 0..60 {
        log.push_str(&format!(
            "{}\n",
            json!({"type": "summary", "summary": format!("s{i}"), "leafUuid": format!("l{i}")})
        ));
    }
    log.push_str(&cc_line("user", json!("old question"), "u1"));
    log.push_str(&cc_line(
        "assistant",
        json!([{"type": "text", "text": "old answer"}]),
        "a1",
    ));
    log.push_str(&format!(
        "{}\n",
        json!({"type": "system", "subtype": "compact_boundary", "sessionId": "s", "isSidechain": false})
    ));
    log.push_str(&cc_line("user", json!("new question"), "u2"));
    log.push_str(&cc_line(
        "assistant",
        json!([{"type": "text", "text": "new answer"}]),
        "a2",
    ));
    let partial = cc_line("user", json!("still being written"), "u3");
    log.push_str(&partial[..partial.len() / 2]);
    log
}

#[test]
fn a_claude_code_log_with_leading_summaries_a_bom_and_a_cut_off_line_is_read_and_explained() {
    let log = write("session.jsonl", &claude_log());
    let log = log.to_str().unwrap();
    for cmd in ["show", "count", "validate", "compact"] {
        let o = run(&[cmd, log]);
        assert_eq!(code(&o), 0, "{cmd}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "warning: {log}: line 66 is cut off (the log is still being written?): skipped"
            )),
            "{cmd}: {err}"
        );
        assert!(
            err.contains(&format!(
                "note: {log}: read from the last compact_boundary; 2 earlier messages ("
            )) && err.contains("left out; --whole-log reads everything"),
            "{cmd}: {err}"
        );
    }
    let o = run(&["show", log]);
    let shown = String::from_utf8_lossy(&o.stdout);
    assert_eq!(shown.lines().count(), 2, "{shown}");
    let o = run(&["show", log, "--whole-log"]);
    assert!(!stderr(&o).contains("compact_boundary"), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 4);
}

#[test]
fn convert_says_what_is_missing_and_dropped_and_takes_model_and_max_tokens_from_flags() {
    let responses = json!({"model": "gpt-x", "input": [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        {"role": "user", "content": "more"}
    ]});
    let input = write("responses.json", &responses.to_string());
    let out = dir().join("converted.json");
    let o = run(&[
        "convert",
        input.to_str().unwrap(),
        "--to",
        "anthropic",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(
            "warning: the anthropic request lacks max_tokens (the provider requires it); give --max-tokens"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "warning: openai-responses -> anthropic dropped 1 encrypted reasoning item(s)"
        ),
        "{err}"
    );
    let o = run(&[
        "convert",
        input.to_str().unwrap(),
        "--to",
        "anthropic",
        "--max-tokens",
        "4096",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(!stderr(&o).contains("lacks"), "{}", stderr(&o));
    let body: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(body["max_tokens"], json!(4096));
    assert_eq!(body["model"], json!("gpt-x"));
}

/// Runs the binary with stdout sent to `stdout` (a file such as `/dev/full`, or a pipe).
fn run_to(args: &[&str], stdout: std::process::Stdio) -> Output {
    super::support::compactor_bin()
        .args(args)
        .stdout(stdout)
        .output()
        .unwrap()
}

#[test]
fn a_stdout_that_cannot_be_written_is_exit_3_for_every_command_never_a_panic() {
    let input = write("full.json", &anthropic().to_string());
    let input = input.to_str().unwrap();
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    for args in [
        vec!["validate", input],
        vec!["show", input],
        vec!["count", input],
        vec!["compact", input, "--budget", "300"],
        vec!["probe", input, input],
        vec!["ab", input, "--budget", "300", "--no-timings"],
    ] {
        let o = run_to(&args, full().into());
        assert_eq!(code(&o), 3, "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("writing stdout"),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_reader_that_closes_the_pipe_early_ends_the_output_and_keeps_the_verdict() {
    // Many violations, so the output outgrows the pipe's buffer after the reader is gone.
    let messages: Vec<Value> = (0..4000)
        .map(|i| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("orphan_{i}"), "content": "x"}]}))
        .collect();
    let input = write("pipe.json", &json!({"messages": messages}).to_string());
    let mut child = super::support::compactor_bin()
        .args(["validate", input.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then close the pipe, as `| head -1` does.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    std::io::Read::read(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert!(stderr(&o).contains("violation(s) in"), "{}", stderr(&o));
}

#[test]
fn ab_with_no_readable_transcript_is_exit_2_naming_each_reason() {
    let truncated = write("ab_truncated.json", r#"{"messages": [{"role": "user", "#);
    let o = run(&["ab", truncated.to_str().unwrap(), "--budget", "100"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("error: no transcript could be read (ab_truncated.json: "),
        "{}",
        stderr(&o)
    );
}
