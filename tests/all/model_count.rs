//! One number for model tokens everywhere (issue 28): for the same body and model,
//! `compactor count --json` (`model_tokens.total`), `compactor compact --report`
//! (`tokens_before`, with a budget above the total and one below), the API's
//! `/v1/count_tokens` (`model_tokens.total`) and the proxy's `x-compactor-tokens` header (its
//! BEFORE figure, against a fake upstream on 127.0.0.1) agree, on every corpus file that loads
//! as a conversation and on prefixes of each Claude Code log (one cut before any assistant
//! line) — counted for `claude-opus-4-6`, for the body's own model, and for no model. The
//! figure itself is recomputed from tiktoken-rs counts of each block on two sessions.

use super::server::{Reply, anthropic_request, call, loader, post_json, spawn_upstream, state};
use super::support::{shared, shared_dir};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use compactor::config::Settings;
use compactor::conversation::{ToolInput, ToolResultContent};
use compactor::format::detect::ImportOptions;
use compactor::format::{self, Format};
use compactor::guard::{self, ValidateOptions};
use compactor::{Block, Conversation};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

const OPUS: &str = "claude-opus-4-6";

/// A budget far above every input: nothing is compacted.
const ABOVE: usize = 100_000_000;

/// One history: a corpus file or a prefix of a Claude Code log, as the CLI reads it.
struct Input {
    name: String,
    path: PathBuf,
    format: Format,
    conversation: Conversation,
}

impl Input {
    fn model(&self) -> Option<&str> {
        self.conversation.extra.get("model").and_then(Value::as_str)
    }
}

fn dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("model_count");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn load(path: &Path) -> Option<(Format, Conversation)> {
    let bytes = std::fs::read(path).unwrap();
    let loaded = format::load(&bytes, None, ImportOptions::default()).ok()?;
    Some((loaded.format, loaded.conversation))
}

/// Every corpus file that loads as a conversation (all the logs `corpus.rs` pins, nothing
/// else), and each Claude Code log cut before its first assistant line, at a third and at two
/// thirds of its lines. Written once per test run.
fn inputs() -> &'static [Input] {
    static INPUTS: OnceLock<Vec<Input>> = OnceLock::new();
    INPUTS.get_or_init(|| {
        let mut out = Vec::new();
        for path in shared_dir("corpus") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let Some((format, conversation)) = load(&path) else {
                continue;
            };
            out.push(Input {
                name: name.clone(),
                path: path.clone(),
                format,
                conversation,
            });
            if !name.starts_with("cc_") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            let first_assistant = lines
                .iter()
                .position(|l| l.contains("\"type\":\"assistant\""))
                .unwrap();
            // Before any assistant line; then the first cut from a third and from two thirds
            // of the lines on that is a history the provider accepts (a cut between the lines of
            // one response can leave a call without its result before the next message).
            let mut cuts = vec![first_assistant];
            for from in [lines.len() / 3, lines.len() * 2 / 3] {
                let valid = (from.max(first_assistant + 1)..=lines.len()).find(|&cut| {
                    format::load(
                        lines[..cut].concat().as_bytes(),
                        None,
                        ImportOptions::default(),
                    )
                    .is_ok_and(|l| {
                        let options = ValidateOptions {
                            allow_open_tail: true,
                        };
                        guard::validate(&l.conversation, l.format, options).is_empty()
                    })
                });
                cuts.push(valid.unwrap_or_else(|| panic!("{name}: no valid cut from {from}")));
            }
            for cut in cuts {
                let cut_path = dir().join(format!("{name}.{cut}.jsonl"));
                std::fs::write(&cut_path, lines[..cut].concat()).unwrap();
                let (format, conversation) = load(&cut_path)
                    .unwrap_or_else(|| panic!("{name} cut at {cut} lines does not load"));
                out.push(Input {
                    name: format!("{name}[..{cut}]"),
                    path: cut_path,
                    format,
                    conversation,
                });
            }
        }
        let loaded: Vec<&str> = out
            .iter()
            .filter(|i| !i.name.contains("[.."))
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(loaded, super::corpus::LOGS);
        out
    })
}

/// Which model a body is counted for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Model {
    /// `claude-opus-4-6`: `--model` for `count`, the body's `model` elsewhere.
    Explicit,
    /// The body's own `model` (none for a log cut before its first assistant line).
    Own,
    /// No model anywhere: the body's `model` removed.
    Unnamed,
}

/// The request body of `input` counted for `model`.
fn body_of(input: &Input, model: Model) -> Value {
    let mut body = input.format.write(&input.conversation);
    let object = body.as_object_mut().unwrap();
    match model {
        Model::Explicit => {
            object.insert("model".into(), json!(OPUS));
        }
        Model::Own => {}
        Model::Unnamed => {
            object.remove("model");
        }
    }
    body
}

fn run(args: &[&str]) -> Output {
    let o = super::support::compactor_bin().args(args).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `compactor count FILE --json [EXTRA]`: the whole answer.
fn cli_count_json(file: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["count", file.to_str().unwrap(), "--json"];
    args.extend(extra);
    serde_json::from_slice(&run(&args).stdout).unwrap()
}

/// `compactor count FILE --json [EXTRA]`: its `model_tokens`.
fn cli_count(file: &Path, extra: &[&str]) -> Value {
    cli_count_json(file, extra)["model_tokens"].clone()
}

/// `compactor compact FILE --budget N --report R [EXTRA]`: the report and the summary line.
fn cli_compact(file: &Path, budget: usize, extra: &[&str]) -> (Value, String) {
    let stem = file.file_name().unwrap().to_string_lossy().into_owned();
    let report = dir().join(format!("{stem}.{budget}.report.json"));
    let output = dir().join(format!("{stem}.{budget}.out.json"));
    let budget = budget.to_string();
    let mut args = vec![
        "compact",
        file.to_str().unwrap(),
        "--budget",
        &budget,
        "-o",
        output.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    args.extend(extra);
    let o = run(&args);
    let line = String::from_utf8_lossy(&o.stderr)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let report = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    (report, line)
}

/// The settings of the API and the proxy: the built-in defaults, a budget above every input.
fn service_settings() -> Settings {
    let mut s = loader().load().unwrap();
    s.budget.tokens = ABOVE;
    s
}

/// `/v1/count_tokens` of `body`: its `model_tokens`.
async fn api_count(app: axum::Router, body: &Value, format: Format) -> Value {
    let (status, answer) = post_json(
        app,
        "/v1/count_tokens",
        &json!({"request": body, "format": format.as_str()}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["model_tokens"].clone()
}

/// The proxy's `x-compactor-tokens` for `body`: its BEFORE figure and the whole value.
async fn proxy_count(app: axum::Router, body: &Value, format: Format) -> (usize, String) {
    let req = match format {
        Format::Anthropic => anthropic_request(body.to_string()),
        other => {
            let path = match other {
                Format::OpenAiChat => "/v1/chat/completions",
                _ => "/v1/responses",
            };
            Request::post(path)
                .header("authorization", "Bearer sk-test")
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap()
        }
    };
    let (status, headers, answer) = call(app, req).await;
    assert_eq!(status, StatusCode::OK, "{headers:?} {answer:?}");
    let header = headers
        .get("x-compactor-tokens")
        .unwrap_or_else(|| panic!("no x-compactor-tokens: {headers:?}"))
        .to_str()
        .unwrap()
        .to_string();
    let before = header.split("->").next().unwrap().parse().unwrap();
    (before, header)
}

/// Every place's total for every input counted for `model`, and the counting they name.
async fn every_place_agrees(model: Model) {
    let (upstream, _) = spawn_upstream(Reply::json(200, "{}")).await;
    let mut settings = service_settings();
    settings.server.anthropic_upstream.clone_from(&upstream);
    settings.server.openai_upstream = upstream;
    let service = state(settings);
    for input in inputs() {
        let body = body_of(input, model);
        let written = dir().join(format!("{}.{model:?}.json", input.name));
        std::fs::write(&written, body.to_string()).unwrap();
        // The CLI on the file as it is where that is the same body and model, and on the body.
        let mut counts = vec![("count BODY", cli_count(&written, &[]))];
        let named = input.model().is_some();
        match model {
            Model::Explicit => counts.push((
                "count FILE --model",
                cli_count(&input.path, &["--model", OPUS]),
            )),
            Model::Own => counts.push(("count FILE", cli_count(&input.path, &[]))),
            Model::Unnamed if !named => counts.push(("count FILE", cli_count(&input.path, &[]))),
            Model::Unnamed => {}
        }
        let count = counts[0].1.clone();
        let total = count["total"].as_u64().unwrap() as usize;
        let compacted = if model == Model::Own {
            &input.path
        } else {
            &written
        };
        let (above, line) = cli_compact(compacted, ABOVE, &[]);
        let (below, _) = cli_compact(compacted, (total / 2).max(1), &[]);
        let api = api_count(compactor::server::app(service.clone()), &body, input.format).await;
        let (proxy, header) =
            proxy_count(compactor::server::app(service.clone()), &body, input.format).await;

        let mut totals: Vec<(&str, usize)> = counts
            .iter()
            .map(|(place, c)| (*place, c["total"].as_u64().unwrap() as usize))
            .collect();
        totals.push((
            "compact above",
            above["tokens_before"].as_u64().unwrap() as usize,
        ));
        totals.push((
            "compact below",
            below["tokens_before"].as_u64().unwrap() as usize,
        ));
        totals.push(("api", api["total"].as_u64().unwrap() as usize));
        totals.push(("proxy", proxy));
        assert!(
            totals.iter().all(|(_, n)| *n == total),
            "{} ({model:?}): {totals:?}",
            input.name
        );
        // Each names the same counting, of the model asked for.
        for (place, c) in &counts {
            assert_eq!(c, &count, "{} ({model:?}): {place}", input.name);
        }
        assert_eq!(above["counting"], count["counting"], "{}", input.name);
        assert_eq!(below["counting"], count["counting"], "{}", input.name);
        assert_eq!(api, count, "{} ({model:?}): api", input.name);
        assert_eq!(above["status"], "unchanged", "{}", input.name);
        assert_eq!(
            above["tokens_after"], above["tokens_before"],
            "{}",
            input.name
        );
        assert_eq!(above["counted_before"], count["counted"], "{}", input.name);
        let expected_model = match model {
            Model::Explicit => Some(OPUS),
            Model::Own => input.model(),
            Model::Unnamed => None,
        };
        assert_eq!(
            count["counting"]["model"].as_str(),
            expected_model,
            "{}",
            input.name
        );
        assert!(
            header.contains(&format!("; model={}; ", expected_model.unwrap_or("-"))),
            "{}: {header}",
            input.name
        );
        if expected_model.is_none() {
            assert_eq!(count["counting"]["source"], "counter", "{}", input.name);
            assert!(
                line.contains("(no model named: o200k_base tokens as counted; budget "),
                "{}: {line}",
                input.name
            );
        }
    }
}

#[tokio::test]
async fn every_place_gives_the_same_model_tokens_for_an_explicit_model() {
    every_place_agrees(Model::Explicit).await;
}

#[tokio::test]
async fn every_place_gives_the_same_model_tokens_for_the_bodys_own_model() {
    every_place_agrees(Model::Own).await;
}

#[tokio::test]
async fn every_place_gives_the_same_model_tokens_when_no_model_is_named() {
    every_place_agrees(Model::Unnamed).await;
}

/// A log cut before its first assistant line names no model: `count` says which counting it
/// used, in text and in JSON.
#[test]
fn a_prefix_before_any_assistant_line_says_its_tokens_are_counted_tokens() {
    let cut = inputs()
        .iter()
        .find(|i| i.name.starts_with("cc_spotter_fa812bfe.jsonl[..") && i.model().is_none())
        .unwrap();
    let text = String::from_utf8(run(&["count", cut.path.to_str().unwrap()]).stdout).unwrap();
    let count = cli_count(&cut.path, &[]);
    let total = count["total"].as_u64().unwrap() as usize;
    assert_eq!(
        text.lines().last().unwrap(),
        format!(
            "model tokens: {} (no model named: o200k_base tokens as counted; give --model)",
            compactor::strategy::thousands(total)
        )
    );
    assert_eq!(
        count["counting"],
        json!({"model": null, "pattern": null, "tokenizer": "o200k_base", "ratio": 1.0,
               "rule_ratio": 1.0, "overhead": 0, "tool_call": 0, "source": "counter"})
    );
    assert_eq!(count["total"], count["counted"]);
}

/// `[tokens]` of `--config` counts in `count` as it budgets in `compact` and in the service: the
/// configured model names the model of a body that names none, with the file's own rule.
#[tokio::test]
async fn the_configured_model_and_rules_count_the_same_everywhere() {
    let config = dir().join("tokens.toml");
    std::fs::write(
        &config,
        format!(
            "[tokens]\nmodel = \"{OPUS}\"\n[tokens.models.\"claude-*\"]\nratio = 1.5\ntool_call = 100\noverhead = 20\n"
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let (upstream, _) = spawn_upstream(Reply::json(200, "{}")).await;
    let mut settings = service_settings();
    settings.tokens.model = OPUS.into();
    let rule = settings.tokens.models.get_mut("claude-*").unwrap();
    (rule.ratio, rule.tool_call, rule.overhead) = (1.5, 100, 20);
    settings.server.anthropic_upstream.clone_from(&upstream);
    settings.server.openai_upstream = upstream;
    let service = state(settings);
    let unnamed: Vec<&Input> = inputs().iter().filter(|i| i.model().is_none()).collect();
    assert!(unnamed.len() >= 8, "{}", unnamed.len());
    // And a log with tool calls, its model removed.
    let full = inputs()
        .iter()
        .find(|i| i.name == "cc_spotter_fa812bfe.jsonl")
        .unwrap();
    for input in unnamed.into_iter().chain([full]) {
        let body = body_of(input, Model::Unnamed);
        let written = dir().join(format!("{}.configured.json", input.name));
        std::fs::write(&written, body.to_string()).unwrap();
        let answer = cli_count_json(&written, &["--config", config]);
        let count = &answer["model_tokens"];
        let (report, _) = cli_compact(&written, ABOVE, &["--config", config]);
        let api = api_count(compactor::server::app(service.clone()), &body, input.format).await;
        let (proxy, _) =
            proxy_count(compactor::server::app(service.clone()), &body, input.format).await;
        let total = count["total"].as_u64().unwrap() as usize;
        assert_eq!(
            [
                report["tokens_before"].as_u64().unwrap() as usize,
                api["total"].as_u64().unwrap() as usize,
                proxy
            ],
            [total; 3],
            "{}",
            input.name
        );
        assert_eq!(count["counting"]["model"], OPUS);
        assert_eq!(count["counting"]["ratio"], 1.5);
        // The breakdown's o200k tokens, ceil(100 / 1.5) = 67 more per call, x 1.5, + 20.
        let calls = input
            .conversation
            .messages
            .iter()
            .map(|m| m.tool_uses().count())
            .sum::<usize>();
        let plain = answer["breakdown"]["total"].as_u64().unwrap() as usize;
        assert_eq!(count["tool_calls"], calls, "{}", input.name);
        assert_eq!(count["counted"], plain + calls * 67, "{}", input.name);
        assert_eq!(
            total,
            ((plain + calls * 67) as f64 * 1.5).ceil() as usize + 20
        );
    }
}

/// o200k tokens of one block by the documented rules, from tiktoken-rs: text; a tool_use's name
/// and its input as compact JSON; a tool_result's text or its text blocks; a thinking block's
/// `thinking` text (the signature is not counted). Other blocks are not expected here.
fn oracle_block(block: &Block) -> usize {
    let bpe = tiktoken_rs::o200k_base_singleton();
    let n = |s: &str| bpe.encode_ordinary(s).len();
    match block {
        Block::Text(t) => n(&t.text),
        Block::ToolUse(t) => {
            n(&t.name)
                + match &t.input {
                    ToolInput::Json(v) => n(&v.to_string()),
                    ToolInput::Arguments(s) | ToolInput::Freeform(s) => n(s),
                }
        }
        Block::ToolResult(r) => match &r.content {
            Some(ToolResultContent::Text(s)) => n(s),
            Some(ToolResultContent::Blocks(bs)) => bs.iter().map(oracle_block).sum(),
            None => panic!("a tool_result without content"),
        },
        Block::Thinking(v) => n(v["thinking"].as_str().unwrap()),
        other => panic!("the oracle does not count {}", other.kind()),
    }
}

/// The model tokens of a Claude Code log from first principles: each block's o200k count by
/// tiktoken-rs, 3 tokens per message (OpenAI cookbook `tokens_per_message`), the configured
/// `claude-*` framing `ceil(tool_call / ratio)` per tool_use block, then `ceil(x × ratio) +
/// overhead` — against `compactor count --model claude-opus-4-6`.
#[test]
fn the_claude_count_is_the_framed_o200k_count_times_the_ratio() {
    let rule = Settings::default().tokens.models["claude-*"].clone();
    for name in [
        "cc_spotter_fa812bfe.jsonl",
        "cc_spotter_4d5611e5_subagent_a2898e3.jsonl",
    ] {
        let path = shared("corpus").join(name);
        let (_, conversation) = load(&path).unwrap();
        assert!(conversation.system.is_none() && conversation.tools().is_none());
        let mut counted = 0;
        let mut calls = 0;
        for m in &conversation.messages {
            counted += 3 + m.content.iter().map(oracle_block).sum::<usize>();
            calls += m
                .content
                .iter()
                .filter(|b| matches!(b, Block::ToolUse(_)))
                .count();
        }
        let framing = (rule.tool_call as f64 / rule.ratio).ceil() as usize;
        let expected =
            ((counted + calls * framing) as f64 * rule.ratio).ceil() as usize + rule.overhead;
        let count = cli_count(&path, &["--model", OPUS]);
        assert!(calls > 10, "{name}: {calls}");
        assert_eq!(
            (
                count["total"].as_u64().unwrap() as usize,
                count["tool_calls"].as_u64().unwrap() as usize
            ),
            (expected, calls),
            "{name}"
        );
    }
}
