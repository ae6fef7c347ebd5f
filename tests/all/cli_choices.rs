//! The command line takes or refuses what the user chose, never replaces it silently: a
//! strategy that cannot run, the model a session log records, recall ids a later `compactor
//! recall` answers; and what it prints reads as a newcomer expects (kebab-case names, failed
//! results marked, one figure for the system prompt, no colour codes in a redirected log).

use super::cli::{anthropic, code, dir, run, stderr, write};
use serde_json::{Value, json};
use std::io::BufRead;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn summary_without_an_llm_is_refused_naming_the_key_unless_the_default_preset_leaves_it_out() {
    let input = write("choice.json", &anthropic().to_string());
    let input = input.to_str().unwrap();
    let o = run(&["compact", input, "--budget", "300", "--strategy", "summary"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert_eq!(
        stderr(&o).lines().next().unwrap(),
        "error: configuration: llm: the summary tier cannot run: no [llm] configured; add an \
         [llm] section (provider, model, base_url; see config/compactor.toml) to the config \
         file, or set COMPACTOR__LLM__PROVIDER and COMPACTOR__LLM__MODEL; or use the default \
         preset, which leaves summary out without an LLM ([policy] optional)"
    );
    assert!(o.stdout.is_empty());
    // A config file that lists summary as optional runs without it, and says so.
    let optional = write(
        "optional.toml",
        "[policy]\ntiers = [\"summary\", \"truncate\"]\noptional = [\"summary\"]\n",
    );
    let report = dir().join("optional.report.json");
    let o = run(&[
        "compact",
        input,
        "--budget",
        "300",
        "--config",
        optional.to_str().unwrap(),
        "-o",
        dir().join("optional.out.json").to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("warning: summary tier skipped: no [llm] configured\n"),
        "{}",
        stderr(&o)
    );
    let r = read_json(&report);
    assert_eq!(
        r["skipped"],
        json!(["summary tier skipped: no [llm] configured"])
    );
    assert_eq!(r["tiers"][0]["strategy"], "truncate");
    // An optional name that is not a strategy is named by its key.
    let typo = write("typo-optional.toml", "[policy]\noptional = [\"sumary\"]\n");
    let o = run(&["compact", input, "--config", typo.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("configuration: policy.optional: unknown strategy \"sumary\""),
        "{}",
        stderr(&o)
    );
}

/// A Codex rollout whose turns ran on `gpt-5-codex`, with one long tool output to compact.
fn rollout() -> String {
    let long = "src/team.rs: fn load_team() { /* all teams */ }\n".repeat(150);
    let lines = [
        json!({"timestamp": "t", "type": "session_meta", "payload": {"id": "s1", "instructions": "You are Codex."}}),
        json!({"timestamp": "t", "type": "turn_context", "payload": {"cwd": "/w", "model": "gpt-5-codex"}}),
        json!({"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Why is the team page slow?"}]}}),
        json!({"timestamp": "t", "type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"bash\",\"-lc\",\"rg load_team\"]}", "call_id": "call_1"}}),
        json!({"timestamp": "t", "type": "response_item", "payload": {"type": "function_call_output", "call_id": "call_1", "output": long}}),
        json!({"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It loads every team."}]}}),
        json!({"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Load only this team."}]}}),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn the_model_a_codex_rollout_records_is_used_by_count_compact_and_convert() {
    let log = write("rollout.jsonl", &rollout());
    let log = log.to_str().unwrap();
    let o = run(&["count", log, "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let counted: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        counted["model_tokens"]["counting"]["model"],
        json!("gpt-5-codex")
    );
    assert_eq!(
        counted["model_tokens"]["counting"]["pattern"],
        json!("gpt-5*")
    );
    let o = run(&["count", log]);
    assert!(!stdout(&o).contains("no model named"), "{}", stdout(&o));

    let out = dir().join("rollout.out.json");
    let report = dir().join("rollout.report.json");
    let o = run(&[
        "compact",
        log,
        "--budget",
        "400",
        "-o",
        out.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stderr(&o).contains("lacks model"), "{}", stderr(&o));
    assert_eq!(
        read_json(&report)["counting"]["model"],
        json!("gpt-5-codex")
    );
    assert_eq!(read_json(&out)["model"], json!("gpt-5-codex"));

    // convert names the source in kebab case and keeps the model; --model replaces it.
    let converted = dir().join("rollout.chat.json");
    let o = run(&[
        "convert",
        log,
        "--to",
        "openai-chat",
        "-o",
        converted.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stderr(&o), "codex-rollout -> openai-chat: 6 messages\n");
    assert_eq!(read_json(&converted)["model"], json!("gpt-5-codex"));
    let o = run(&[
        "convert",
        log,
        "--to",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "--max-tokens",
        "1024",
        "-o",
        converted.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(read_json(&converted)["model"], json!("claude-sonnet-4-5"));
    assert!(
        stderr(&o).starts_with("codex-rollout -> anthropic: 5 messages\n"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_request_body_keeps_its_model_and_a_different_model_flag_is_a_warning() {
    let input = write("keeps-model.json", &anthropic().to_string());
    let o = run(&[
        "compact",
        input.to_str().unwrap(),
        "--budget",
        "300",
        "--model",
        "gpt-4o",
        "-o",
        dir().join("keeps-model.out.json").to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with(
            "warning: --model gpt-4o not used: the request names model claude-x, which it \
             keeps and is counted for\n"
        ),
        "{}",
        stderr(&o)
    );
}

/// The recall ids of `out` (a compacted body), in order.
fn recall_ids(out: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut rest = out;
    while let Some(at) = rest.find("recall rc_") {
        let id = &rest[at + "recall ".len()..at + "recall ".len() + 35];
        ids.push(id.to_string());
        rest = &rest[at + 10..];
    }
    ids
}

#[test]
fn compact_keeps_what_it_cleared_or_dropped_in_a_recall_dir_that_recall_reads() {
    let input = write("recall.json", &anthropic().to_string());
    let recall_dir = dir().join("recall-dir");
    let _ = std::fs::remove_dir_all(&recall_dir);
    let out = dir().join("recall.out.json");
    let o = run(&[
        "compact",
        input.to_str().unwrap(),
        "--budget",
        "300",
        "-o",
        out.to_str().unwrap(),
        "--recall-dir",
        recall_dir.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let ids = recall_ids(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(ids.len(), 1, "{}", std::fs::read_to_string(&out).unwrap());
    assert!(
        stderr(&o).ends_with(&format!(
            "note: 1 original kept in {}: compactor recall ID prints one back\n",
            recall_dir.display()
        )),
        "{}",
        stderr(&o)
    );
    let o = run(&[
        "recall",
        &ids[0],
        "--recall-dir",
        recall_dir.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let got: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(got["id"], json!(ids[0]));
    // The dropped span: every message before the last user turn, as the input had them.
    assert_eq!(got["kind"], "span");
    let messages = anthropic()["messages"].as_array().unwrap().clone();
    assert_eq!(got["original"], Value::Array(messages[..6].to_vec()));

    // The same directory named by the config key; an unknown id is exit 1, a malformed one 2.
    let config = write(
        "recall-dir.toml",
        &format!("[recall]\ndir = {:?}\n", recall_dir.to_str().unwrap()),
    );
    let o = run(&["recall", &ids[0], "--config", config.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(serde_json::from_str::<Value>(&stdout(&o)).unwrap(), got);
    let unknown = "rc_00000000000000000000000000000000";
    let o = run(&["recall", unknown, "--config", config.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).starts_with(&format!(
            "error: recall id {unknown} is unknown: {} holds no such original",
            recall_dir.display()
        )),
        "{}",
        stderr(&o)
    );
    let o = run(&[
        "recall",
        "rc_12",
        "--recall-dir",
        recall_dir.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 2);
    assert_eq!(
        stderr(&o),
        "error: malformed recall id \"rc_12\": expected rc_ and 32 hex digits\n"
    );

    // Without a flag or key: the user's cache directory (here the tests' $XDG_CACHE_HOME).
    let o = run(&[
        "compact",
        input.to_str().unwrap(),
        "--budget",
        "300",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = run(&["recall", &ids[0]]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(serde_json::from_str::<Value>(&stdout(&o)).unwrap(), got);
}

#[test]
fn the_summary_line_counts_in_the_singular_for_one() {
    let long = "trace line ".repeat(600);
    let body = json!({"model": "claude-x", "max_tokens": 256, "messages": [
        {"role": "user", "content": "Deploy."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_e1", "name": "Bash", "input": {"command": "./deploy.sh"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_e1", "is_error": true, "content": long}]},
        {"role": "assistant", "content": "Ready."},
        {"role": "user", "content": "Go on."}
    ]});
    let input = write("plural.json", &body.to_string());
    let cap = write("plural.toml", "[truncate]\nmax_tool_result_tokens = 100\n");
    let o = run(&[
        "compact",
        input.to_str().unwrap(),
        "--budget",
        "1000",
        "--strategy",
        "truncate",
        "--config",
        cap.to_str().unwrap(),
        "-o",
        dir().join("plural.out.json").to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let line = stderr(&o).lines().next().unwrap().to_string();
    assert!(
        line.ends_with(" by truncate [truncate]; 1 block truncated"),
        "{line}"
    );
}

#[test]
fn show_marks_failed_results_and_results_whose_outcome_the_wire_does_not_say() {
    let input = write("show-failed.json", &anthropic().to_string());
    let o = run(&["show", input.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let lines: Vec<String> = stdout(&o).lines().map(String::from).collect();
    assert_eq!(lines[2], "  2 user tool_result toolu_e1 FAILED 3300 chars");
    assert_eq!(lines[4], "  4 user tool_result toolu_r1 3300 chars");
    let chat = json!({"messages": [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "sh", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Exit code: 2\nno such file"},
        {"role": "tool", "tool_call_id": "c2", "content": "done"}
    ]});
    let input = write("show-chat.json", &chat.to_string());
    let o = run(&["show", input.to_str().unwrap()]);
    let lines: Vec<String> = stdout(&o).lines().map(String::from).collect();
    assert_eq!(lines[2], "  2 tool tool_result c1 FAILED 25 chars");
    assert_eq!(
        lines[3],
        "  3 tool tool_result c2 (outcome unknown) 4 chars"
    );
}

#[test]
fn count_gives_the_system_prompt_one_figure_on_top_and_by_role() {
    let chat = json!({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "You are a helpful assistant that writes short answers about code."},
        {"role": "user", "content": "hi"}
    ]});
    let input = write("count-system.json", &chat.to_string());
    let o = run(&["count", input.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = stdout(&o);
    let row = |label: &str, section: &str| -> String {
        let from = text.find(section).unwrap();
        text[from..]
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap()
            .to_string()
    };
    assert_eq!(
        row("system", "total"),
        "  system                              15   78.9%"
    );
    assert_eq!(row("system", "by role"), row("system", "total"));
    assert_eq!(
        row("messages", "total"),
        "  messages (1)                         4   21.1%"
    );
}

#[test]
fn a_redirected_service_log_has_no_colour_codes() {
    let mut child = super::support::compactor_bin()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("NO_COLOR")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    log.read_line(&mut line).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(line.contains("compactor serve: listening"), "{line:?}");
    assert!(line.contains("addr=127.0.0.1:"), "{line:?}");
    assert!(!line.contains('\u{1b}'), "{line:?}");
}
