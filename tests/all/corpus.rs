//! The real transcripts in ../shared/corpus: request bodies round-trip, session logs import into
//! conversations the guard accepts, with the message and tool call counts pinned per file and the
//! call count checked against an independent count over the raw file.

// Test helpers outside `#[test]` fns: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use compactor::format::detect::{ImportOptions, Source};
use compactor::format::{self, Format};
use compactor::guard::{self, ValidateOptions};
use compactor::{Block, Conversation};
use serde_json::Value;
use std::collections::HashSet;

pub const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus");

fn read(name: &str) -> String {
    let path = super::support::shared("corpus").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// What one session log imports to.
struct Expect {
    file: &'static str,
    source: Source,
    format: Format,
    messages: usize,
    tool_calls: usize,
    /// Ends with calls still waiting for their results (an interrupted turn).
    open_tail: bool,
}

/// Every session log in the corpus with its import, counted once and pinned here.
pub const LOGS: &[&str] = &[
    "cc_agentcmd_image_in_tool_result.jsonl",
    "cc_agentcmd_trailing_unpaired_tool_use.jsonl",
    "cc_spotter_4d5611e5.jsonl",
    "cc_spotter_4d5611e5_acompact_e1f845.jsonl",
    "cc_spotter_4d5611e5_subagent_a2898e3.jsonl",
    "cc_spotter_fa812bfe.jsonl",
    "cc_spotter_fa812bfe_acompact_70d8e7.jsonl",
    "cc_viewer_fe5e1c67_inline_sidechains.jsonl",
    "codex_rollout_01997e76.jsonl",
    "miniswe_deepseek_chat_astroid1333.traj.json",
];

fn expectations() -> Vec<Expect> {
    let cc = |file, messages, tool_calls, open_tail| Expect {
        file,
        source: Source::ClaudeCode,
        format: Format::Anthropic,
        messages,
        tool_calls,
        open_tail,
    };
    vec![
        cc("cc_agentcmd_image_in_tool_result.jsonl", 22, 10, false),
        cc("cc_agentcmd_trailing_unpaired_tool_use.jsonl", 20, 23, true),
        cc("cc_spotter_4d5611e5.jsonl", 156, 81, false),
        cc("cc_spotter_4d5611e5_acompact_e1f845.jsonl", 2, 0, false),
        cc("cc_spotter_4d5611e5_subagent_a2898e3.jsonl", 24, 33, false),
        cc("cc_spotter_fa812bfe.jsonl", 62, 38, false),
        cc("cc_spotter_fa812bfe_acompact_70d8e7.jsonl", 2, 0, false),
        cc("cc_viewer_fe5e1c67_inline_sidechains.jsonl", 18, 11, false),
        Expect {
            file: "codex_rollout_01997e76.jsonl",
            source: Source::CodexRollout,
            format: Format::OpenAiResponses,
            messages: 395,
            tool_calls: 123,
            open_tail: false,
        },
        Expect {
            file: "miniswe_deepseek_chat_astroid1333.traj.json",
            source: Source::Trajectory,
            format: Format::OpenAiChat,
            messages: 353,
            tool_calls: 176,
            open_tail: true,
        },
    ]
}

fn tool_calls(c: &Conversation) -> usize {
    c.blocks()
        .filter(|(_, _, b)| matches!(b, Block::ToolUse(_)))
        .count()
}

/// Independent count of the calls the model made in the part of a Claude Code log that forms
/// the conversation: distinct tool_use ids of the main chain (or of the sidechain when the file
/// holds nothing else) after the last compact boundary.
fn claude_code_calls_in_raw(text: &str) -> usize {
    let entries: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let side = |e: &Value| e["isSidechain"] == Value::Bool(true);
    let only_sidechain = entries
        .iter()
        .filter(|e| e["type"] == "user" || e["type"] == "assistant")
        .all(side);
    let start = entries
        .iter()
        .rposition(|e| e["subtype"] == "compact_boundary")
        .map_or(0, |i| i + 1);
    let mut ids = HashSet::new();
    for e in &entries[start..] {
        if e["type"] != "assistant" || side(e) != only_sidechain {
            continue;
        }
        for b in e["message"]["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_use" {
                ids.insert(b["id"].as_str().unwrap().to_string());
            }
        }
    }
    ids.len()
}

/// Independent count for a Codex rollout: function_call / custom_tool_call response items.
fn codex_calls_in_raw(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "response_item")
        .filter(|e| {
            matches!(
                e["payload"]["type"].as_str(),
                Some("function_call" | "custom_tool_call")
            )
        })
        .count()
}

/// Independent count for a trajectory: messages other than the final `exit`, and their
/// tool_calls.
fn trajectory_counts_in_raw(text: &str) -> (usize, usize) {
    let v: Value = serde_json::from_str(text).unwrap();
    let msgs: Vec<&Value> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "exit")
        .collect();
    let calls = msgs
        .iter()
        .map(|m| m["tool_calls"].as_array().map_or(0, Vec::len))
        .sum();
    (msgs.len(), calls)
}

#[test]
fn every_session_log_imports_with_the_pinned_counts_and_validates() {
    let mut report = Vec::new();
    for e in expectations() {
        let text = read(e.file);
        let loaded = format::load(text.as_bytes(), None, ImportOptions::default())
            .unwrap_or_else(|err| panic!("{}: {err}", e.file));
        assert_eq!(loaded.source, e.source, "{}", e.file);
        assert_eq!(loaded.format, e.format, "{}", e.file);
        let c = &loaded.conversation;
        report.push(format!(
            "{}: {} messages, {} tool calls",
            e.file,
            c.messages.len(),
            tool_calls(c)
        ));
        let independent = match e.source {
            Source::ClaudeCode => claude_code_calls_in_raw(&text),
            Source::CodexRollout => codex_calls_in_raw(&text),
            Source::Trajectory => {
                let (messages, calls) = trajectory_counts_in_raw(&text);
                assert_eq!(c.messages.len(), messages, "{}", e.file);
                calls
            }
            _ => unreachable!("{}: a request body, not a session log", e.file),
        };
        assert_eq!(tool_calls(c), independent, "{}: calls vs raw", e.file);
        let strict = guard::validate(
            c,
            e.format,
            ValidateOptions {
                allow_open_tail: false,
            },
        );
        let lenient = guard::validate(c, e.format, ValidateOptions::default());
        assert!(lenient.is_empty(), "{}: {lenient:?}", e.file);
        assert_eq!(!strict.is_empty(), e.open_tail, "{}: {strict:?}", e.file);
        // The import's conversion to the other request formats validates too.
        for to in [
            Format::Anthropic,
            Format::OpenAiChat,
            Format::OpenAiResponses,
        ] {
            let converted = format::convert(c, e.format, to);
            let v = guard::validate(&converted, to, ValidateOptions::default());
            assert!(v.is_empty(), "{} as {to}: {v:?}", e.file);
        }
    }
    println!("{}", report.join("\n"));
    for (e, line) in expectations().iter().zip(&report) {
        let text = read(e.file);
        let c = format::load(text.as_bytes(), None, ImportOptions::default())
            .unwrap()
            .conversation;
        assert_eq!(
            (c.messages.len(), tool_calls(&c)),
            (e.messages, e.tool_calls),
            "{line}"
        );
    }
}

#[test]
fn claude_code_logs_carry_only_role_and_content_and_the_model() {
    for file in LOGS.iter().filter(|f| f.starts_with("cc_")) {
        let text = read(file);
        let loaded = format::load(text.as_bytes(), None, ImportOptions::default()).unwrap();
        let body = Format::Anthropic.write(&loaded.conversation);
        let model = body["model"].as_str().unwrap_or_else(|| panic!("{file}"));
        assert!(model.starts_with("claude-"), "{file}: {model}");
        for m in body["messages"].as_array().unwrap() {
            let keys: Vec<&String> = m.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["role", "content"], "{file}");
        }
    }
}

#[test]
fn whole_log_keeps_what_came_before_the_compact_boundary() {
    let text = read("cc_spotter_fa812bfe.jsonl");
    let live = format::load(text.as_bytes(), None, ImportOptions::default()).unwrap();
    let whole = format::load(text.as_bytes(), None, ImportOptions { whole_log: true }).unwrap();
    let (l, w) = (&live.conversation, &whole.conversation);
    assert!(w.messages.len() > l.messages.len());
    // The live part starts with the compaction summary and is the tail of the whole log (the
    // whole log's summary is merged into the user message before it).
    assert!(
        l.messages[0]
            .plain_text()
            .starts_with("This session is being continued")
    );
    assert_eq!(
        w.messages[w.messages.len() - l.messages.len() + 1..],
        l.messages[1..]
    );
    assert!(guard::validate(w, Format::Anthropic, ValidateOptions::default()).is_empty());
}

/// Converts the YAML of the cassette to JSON values.
fn yaml_to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Real(s) => serde_json::from_str(s).unwrap(),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Array(a) => Value::Array(a.iter().map(yaml_to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| (k.as_str().unwrap().to_string(), yaml_to_json(v)))
                .collect(),
        ),
        Yaml::Null => Value::Null,
        other => panic!("unexpected YAML node {other:?}"),
    }
}

/// The Anthropic request bodies recorded in the pydantic-ai cassette.
pub fn cassette_requests() -> Vec<Value> {
    let text = read("pydanticai_anthropic_parallel_tool_calls.yaml");
    let docs = yaml_rust2::YamlLoader::load_from_str(&text).unwrap();
    let cassette = yaml_to_json(&docs[0]);
    cassette["interactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["request"]["parsed_body"].clone())
        .collect()
}

#[test]
fn cassette_request_bodies_round_trip_and_validate() {
    let bodies = cassette_requests();
    assert_eq!(bodies.len(), 2);
    let mut counts = Vec::new();
    for body in &bodies {
        assert_eq!(
            format::detect::guess_format(body).unwrap(),
            Format::Anthropic
        );
        let c = Format::Anthropic.read(body).unwrap();
        assert_eq!(&Format::Anthropic.write(&c), body);
        assert!(guard::validate(&c, Format::Anthropic, ValidateOptions::default()).is_empty());
        counts.push((c.messages.len(), tool_calls(&c)));
    }
    // The second request carries the 4 parallel calls and their results in one user message.
    assert_eq!(counts, [(1, 0), (3, 4)]);
}

#[test]
fn case_request_bodies_round_trip() {
    for path in super::support::shared_dir("cases") {
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let format: Format = case["format"].as_str().unwrap().parse().unwrap();
        let body = &case["request"];
        let c = match format.read(body) {
            Ok(c) => c,
            // A case of invalid input may be refused as soon as it is read (x07: a body of
            // another format); every other case must read.
            Err(e) if case["expect"].get("error").is_some() => {
                let want = case["expect"]["error"].as_str().unwrap_or_default();
                assert!(e.to_string().contains(want), "{}: {e}", path.display());
                continue;
            }
            Err(e) => panic!("{}: {e}", path.display()),
        };
        assert_eq!(&format.write(&c), body, "{}", path.display());
    }
}
