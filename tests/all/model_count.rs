//! One number for model tokens everywhere (issue 28). `Compactor::model_count` makes it; four
//! places report it, one test each, each against that function's figure for the same body and
//! model: `compactor count --json` (`model_tokens`), `compactor compact --report`
//! (`tokens_before`, `counted_before`, `counting`; a budget above the total and one below), the
//! API's `/v1/count_tokens` (`model_tokens`) and the proxy's `x-compactor-tokens` header (its
//! BEFORE figure, against a fake upstream on 127.0.0.1) — counted for `claude-opus-4-6`, for the
//! body's own model, and for no model. The figure itself is recomputed from first principles
//! (tiktoken-rs counts of each block, the documented framing, ratio and overhead) on every
//! Claude Code input, and the model each place names is the one asked for.
//!
//! The inputs: every corpus file that loads as a conversation, and each Claude Code log cut
//! before its first assistant line (a body that names no model). The in-process places count
//! all of them; the CLI runs on one input of each format (a process per call is what costs).

use super::server::{Reply, anthropic_request, call, loader, post_json, spawn_upstream, state};
use super::support::shared_dir;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use compactor::config::Settings;
use compactor::conversation::{ToolInput, ToolResultContent};
use compactor::format::detect::ImportOptions;
use compactor::format::{self, Format};
use compactor::{Block, Compactor, Conversation};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

const OPUS: &str = "claude-opus-4-6";

/// A budget far above every input: nothing is compacted.
const ABOVE: usize = 100_000_000;

/// The CLI's inputs, one of each format: a Claude Code subagent log with tool calls
/// (Anthropic), a mini-swe-agent trajectory (Chat) and a Codex rollout (Responses).
const CLI_INPUTS: [&str; 3] = [
    "cc_spotter_4d5611e5_subagent_a2898e3.jsonl",
    "miniswe_deepseek_chat_astroid1333.traj.json",
    "codex_rollout_01997e76.jsonl",
];

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
/// else), and each Claude Code log cut before its first assistant line. Written once per run.
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
            let cut = lines
                .iter()
                .position(|l| l.contains("\"type\":\"assistant\""))
                .unwrap();
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
        let loaded: Vec<&str> = out
            .iter()
            .filter(|i| !i.name.contains("[.."))
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(loaded, super::corpus::LOGS);
        out
    })
}

fn input(name: &str) -> &'static Input {
    inputs().iter().find(|i| i.name == name).unwrap()
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

const MODELS: [Model; 3] = [Model::Explicit, Model::Own, Model::Unnamed];

/// The conversation of `input` as counted for `model`: its `model` set, kept or removed.
fn conversation_of(input: &Input, model: Model) -> Conversation {
    let mut conversation = input.conversation.clone();
    match model {
        Model::Explicit => {
            conversation.extra.insert("model".into(), json!(OPUS));
        }
        Model::Own => {}
        Model::Unnamed => {
            conversation.extra.remove("model");
        }
    }
    conversation
}

/// The request body of `input` counted for `model`.
fn body_of(input: &Input, model: Model) -> Value {
    input.format.write(&conversation_of(input, model))
}

/// The body of `input` for `model` in a file of its own (for the CLI).
fn written(input: &Input, model: Model) -> PathBuf {
    let path = dir().join(format!("{}.{model:?}.json", input.name));
    std::fs::write(&path, body_of(input, model).to_string()).unwrap();
    path
}

/// The settings of the CLI (no config), the API and the proxy: the built-in defaults, a budget
/// above every input.
fn service_settings() -> Settings {
    let mut s = loader().load().unwrap();
    s.budget.tokens = ABOVE;
    s
}

/// What every place must report for `input` counted for `model`: `Compactor::model_count` of
/// the same conversation, as JSON (`{"total", "counted", "tool_calls", "counting"}`), naming
/// the model asked for.
fn expected(input: &Input, model: Model) -> Value {
    static ENGINE: OnceLock<Compactor> = OnceLock::new();
    let engine = ENGINE.get_or_init(|| Compactor::from_config(service_settings()).unwrap());
    let count = engine.model_count(&conversation_of(input, model), None);
    let asked = match model {
        Model::Explicit => Some(OPUS),
        Model::Own => input.model(),
        Model::Unnamed => None,
    };
    assert_eq!(count.counting.model.as_deref(), asked, "{}", input.name);
    serde_json::to_value(count).unwrap()
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

/// The proxy's and the API's service, its upstreams on `upstream`.
fn service(upstream: &str, mut settings: Settings) -> compactor::server::AppState {
    settings.server.anthropic_upstream = upstream.to_string();
    settings.server.openai_upstream = upstream.to_string();
    state(settings)
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

/// `compactor count` gives the figure of every corpus log as it is read from its file (its own
/// model), and of one body of each format for each model (`--model` on the file, too).
#[test]
fn cli_count_gives_the_model_count() {
    for input in inputs().iter().filter(|i| !i.name.contains("[..")) {
        let want = expected(input, Model::Own);
        assert_eq!(cli_count(&input.path, &[]), want, "count {}", input.name);
    }
    for name in CLI_INPUTS {
        let input = input(name);
        for model in MODELS {
            let want = expected(input, model);
            let body = written(input, model);
            assert_eq!(cli_count(&body, &[]), want, "count {name} ({model:?})");
        }
        assert_eq!(
            cli_count(&input.path, &["--model", OPUS]),
            expected(input, Model::Explicit),
            "count {name} --model"
        );
    }
}

/// `compactor compact --report` budgets with the same figure, above the budget and below it,
/// and says so when no model is named.
#[test]
fn cli_compact_reports_the_model_count_as_tokens_before() {
    let cut = inputs()
        .iter()
        .find(|i| i.name.starts_with("cc_spotter_fa812bfe.jsonl[.."))
        .unwrap();
    let cases = CLI_INPUTS
        .iter()
        .map(|name| (input(name), Model::Own))
        .chain([
            (input(CLI_INPUTS[0]), Model::Explicit),
            (input(CLI_INPUTS[0]), Model::Unnamed),
            (cut, Model::Own),
        ]);
    for (input, model) in cases {
        let want = expected(input, model);
        let total = want["total"].as_u64().unwrap() as usize;
        let file = if model == Model::Own {
            input.path.clone()
        } else {
            written(input, model)
        };
        let (above, line) = cli_compact(&file, ABOVE, &[]);
        let (below, _) = cli_compact(&file, (total / 2).max(1), &[]);
        for (report, budget) in [(&above, "above"), (&below, "below")] {
            assert_eq!(
                [
                    &report["tokens_before"],
                    &report["counted_before"],
                    &report["counting"]
                ],
                [&want["total"], &want["counted"], &want["counting"]],
                "{} ({model:?}) {budget}",
                input.name
            );
        }
        assert_eq!(above["status"], "unchanged", "{}", input.name);
        assert_eq!(above["tokens_after"], want["total"], "{}", input.name);
        assert_ne!(below["status"], "unchanged", "{}", input.name);
        if want["counting"]["model"].is_null() {
            assert_eq!(want["counting"]["source"], "counter", "{}", input.name);
            assert!(
                line.contains("(no model named: o200k_base tokens as counted; budget "),
                "{}: {line}",
                input.name
            );
        }
    }
}

/// The API's `/v1/count_tokens` answers the figure of every input for every model.
#[tokio::test]
async fn api_count_tokens_answers_the_model_count() {
    let (upstream, _seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let service = service(&upstream, service_settings());
    for input in inputs() {
        for model in MODELS {
            let body = body_of(input, model);
            let api = api_count(compactor::server::app(service.clone()), &body, input.format).await;
            assert_eq!(api, expected(input, model), "{} ({model:?})", input.name);
        }
    }
}

/// The proxy's header gives the figure of every input for every model as its BEFORE, with the
/// model counted for.
#[tokio::test]
async fn the_proxy_header_gives_the_model_count_before() {
    let (upstream, _seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let service = service(&upstream, service_settings());
    for input in inputs() {
        for model in MODELS {
            let want = expected(input, model);
            let body = body_of(input, model);
            let (before, header) =
                proxy_count(compactor::server::app(service.clone()), &body, input.format).await;
            assert_eq!(
                before, want["total"],
                "{} ({model:?}): {header}",
                input.name
            );
            let named = want["counting"]["model"].as_str().unwrap_or("-");
            assert!(
                header.contains(&format!("; model={named}; ")),
                "{}: {header}",
                input.name
            );
        }
    }
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
    let (upstream, _seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let mut settings = service_settings();
    settings.tokens.model = OPUS.into();
    let rule = settings.tokens.models.get_mut("claude-*").unwrap();
    (rule.ratio, rule.tool_call, rule.overhead) = (1.5, 100, 20);
    let service = service(&upstream, settings);
    // A log cut before its first assistant line, and a log with tool calls, its model removed.
    let cut = inputs()
        .iter()
        .find(|i| i.name.starts_with("cc_spotter_fa812bfe.jsonl[.."))
        .unwrap();
    for input in [cut, input(CLI_INPUTS[0])] {
        let body = body_of(input, Model::Unnamed);
        let written = written(input, Model::Unnamed);
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
/// `thinking` text (the signature is not counted). `None` for a block it has no rule for (an
/// image).
fn oracle_block(block: &Block) -> Option<usize> {
    let bpe = tiktoken_rs::o200k_base_singleton();
    let n = |s: &str| bpe.encode_ordinary(s).len();
    Some(match block {
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
            Some(ToolResultContent::Blocks(bs)) => {
                bs.iter().map(oracle_block).sum::<Option<usize>>()?
            }
            None => panic!("a tool_result without content"),
        },
        Block::Thinking(v) => n(v["thinking"].as_str().unwrap()),
        _ => return None,
    })
}

/// The model count of every Claude Code input the oracle has rules for (no image), for every
/// model, from first principles: each block's o200k count by tiktoken-rs, 3 tokens per message
/// (OpenAI cookbook `tokens_per_message`); for a `claude-*` model the configured rule's framing
/// `ceil(tool_call / ratio)` per tool_use block, then `ceil(x × ratio) + overhead`; for no model
/// the counted tokens as they are. The engine counts with bpe-openai, not tiktoken-rs.
#[test]
fn the_model_count_is_the_framed_o200k_count_times_the_ratio() {
    let rule = Settings::default().tokens.models["claude-*"].clone();
    let mut checked = 0;
    for input in inputs().iter().filter(|i| i.name.starts_with("cc_")) {
        assert!(input.conversation.system.is_none() && input.conversation.tools().is_none());
        let Some(blocks) = input
            .conversation
            .messages
            .iter()
            .map(|m| Some(3 + m.content.iter().map(oracle_block).sum::<Option<usize>>()?))
            .sum::<Option<usize>>()
        else {
            continue;
        };
        let calls = input
            .conversation
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter(|b| matches!(b, Block::ToolUse(_)))
            .count();
        for model in MODELS {
            let want = expected(input, model);
            let claude = want["counting"]["model"]
                .as_str()
                .is_some_and(|m| m.starts_with("claude-"));
            let (counted, total) = if claude {
                let counted = blocks + calls * (rule.tool_call as f64 / rule.ratio).ceil() as usize;
                let total = (counted as f64 * rule.ratio).ceil() as usize + rule.overhead;
                (counted, total)
            } else {
                (blocks, blocks)
            };
            assert_eq!(
                [&want["total"], &want["counted"], &want["tool_calls"]],
                [&json!(total), &json!(counted), &json!(calls)],
                "{} ({model:?})",
                input.name
            );
            checked += 1;
        }
    }
    // All Claude Code inputs but the one with images, for three models.
    assert_eq!(checked, 3 * 15, "inputs the oracle counted, times models");
}
