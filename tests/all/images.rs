//! Unusable inline images (empty or undecodable base64 data; anthropics/claude-code#35897,
//! #5240): one outside the newest exchange is replaced by a text placeholder whenever
//! compacting (library, CLI, API, proxy), one inside it refuses the input. The oracle of the
//! property is the generator's own record of where each image is and which op is the newest,
//! and the placeholder the spec names, written here from the image's JSON.

use crate::guard_props::persisted;
use crate::server::{
    Reply, anthropic_request, call, post_json, proxy_state, settings, spawn_upstream, state,
};
use crate::support::{runtime, shared};
use axum::http::StatusCode;
use compactor::format::detect::ImportOptions;
use compactor::guard::{self, ValidateOptions, ViolationKind};
use compactor::server::app;
use compactor::{CompactError, Compactor, Conversation, Format, Status};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::borrow::Cow;

use std::sync::OnceLock;

/// The PNG signature's 8 bytes, base64: data that decodes.
const PNG: &str = "iVBORw0KGgo=";

/// An image of a generated history.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Img {
    Good,
    /// `data` empty.
    Empty,
    /// `data` that is no base64 (a PNG's base64 cut short).
    Cut,
}

impl Img {
    fn data(self) -> &'static str {
        match self {
            Img::Good => PNG,
            Img::Empty => "",
            Img::Cut => "iVBORw0KG",
        }
    }

    fn why(self) -> &'static str {
        match self {
            Img::Empty => "empty base64 data",
            _ => "invalid base64 data",
        }
    }
}

/// One step of a generated history.
#[derive(Debug, Clone)]
enum Op {
    /// The user asks, with an image or not (and a `cache_control` on it when true).
    Ask(Option<(Img, bool)>),
    /// A tool call whose result holds a text and these images.
    Tool(Vec<Img>),
    /// The model answers.
    Answer,
}

fn img() -> impl Strategy<Value = Img> {
    prop_oneof![3 => Just(Img::Good), 1 => Just(Img::Empty), 1 => Just(Img::Cut)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => prop::option::weighted(0.5, (img(), prop::bool::weighted(0.3))).prop_map(Op::Ask),
        3 => prop::collection::vec(img(), 0..3).prop_map(Op::Tool),
        2 => Just(Op::Answer),
    ]
}

/// An image of the built body: its path, what it is, the op it belongs to, and its JSON.
#[derive(Debug, Clone)]
struct Placed {
    path: String,
    img: Img,
    op: usize,
    value: Value,
}

/// The request body of `ops` in `format` (the first op is always an `Ask`, so it starts with
/// the user), and every image placed in it. Each tool result's text is `lines` lines long.
fn build(format: Format, ops: &[Op], lines: usize) -> (Value, Vec<Placed>) {
    let mut items: Vec<Value> = Vec::new();
    let mut placed = Vec::new();
    let text = |t: String| match format {
        Format::OpenAiResponses => json!({"type": "input_text", "text": t}),
        _ => json!({"type": "text", "text": t}),
    };
    let image = |i: Img, cc: bool| {
        let data = i.data();
        let mut v = match format {
            Format::Anthropic => {
                json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})
            }
            Format::OpenAiChat => {
                json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}})
            }
            _ => {
                json!({"type": "input_image", "image_url": format!("data:image/png;base64,{data}")})
            }
        };
        if cc && format == Format::Anthropic {
            v["cache_control"] = json!({"type": "ephemeral"});
        }
        v
    };
    let mut place = |path: String, i: Img, op: usize, value: &Value| {
        placed.push(Placed {
            path,
            img: i,
            op,
            value: value.clone(),
        })
    };
    let key = match format {
        Format::OpenAiResponses => "input",
        _ => "messages",
    };
    for (k, op) in ops.iter().enumerate() {
        let n = items.len();
        match op {
            Op::Ask(i) => {
                let mut content = vec![text(format!("request {k}: look at the page"))];
                if let Some((i, cc)) = i {
                    let v = image(*i, *cc);
                    place(format!("{key}[{n}].content[1]"), *i, k, &v);
                    content.push(v);
                }
                items.push(json!({"role": "user", "content": content}));
            }
            Op::Answer => items.push(match format {
                Format::OpenAiResponses => json!({"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": format!("answer {k}")}]}),
                _ => json!({"role": "assistant", "content": format!("answer {k}")}),
            }),
            Op::Tool(images) => {
                let id = format!("call_{k}");
                let file: String = (0..lines)
                    .map(|l| format!("line {l} of the page {k}\n"))
                    .collect();
                let mut content = vec![text(file)];
                let at = |j: usize| match format {
                    Format::Anthropic => format!("{key}[{}].content[0].content[{j}]", n + 1),
                    Format::OpenAiChat => format!("{key}[{}].content[{j}]", n + 1),
                    _ => format!("{key}[{}].output[{j}]", n + 1),
                };
                for (j, i) in images.iter().enumerate() {
                    let v = image(*i, false);
                    place(at(j + 1), *i, k, &v);
                    content.push(v);
                }
                match format {
                    Format::Anthropic => {
                        items.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "screenshot", "input": {"page": k}}]}));
                        items.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": content}]}));
                    }
                    Format::OpenAiChat => {
                        items.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "screenshot", "arguments": format!("{{\"page\":{k}}}")}}]}));
                        items.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
                    }
                    _ => {
                        items.push(json!({"type": "function_call", "call_id": id, "name": "screenshot", "arguments": format!("{{\"page\":{k}}}")}));
                        items.push(json!({"type": "function_call_output", "call_id": id, "output": content}));
                    }
                }
            }
        }
    }
    let body = match format {
        Format::OpenAiResponses => json!({"model": "gpt-4o", "input": items}),
        _ => json!({"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": items}),
    };
    (body, placed)
}

/// The placeholder the spec names for `p`: a text of the image's format in its place, naming
/// why and the media type, with the image's `cache_control` on it.
fn placeholder(format: Format, p: &Placed) -> Value {
    let text = format!("[compactor: image removed: {} (image/png)]", p.img.why());
    let mut v = match format {
        Format::OpenAiResponses => json!({"type": "input_text", "text": text}),
        _ => json!({"type": "text", "text": text}),
    };
    if let Some(cc) = p.value.get("cache_control") {
        v["cache_control"] = cc.clone();
    }
    v
}

/// The value at a JSON path written as `messages[3].content[0].content[1]`.
fn at_path<'a>(body: &'a mut Value, path: &str) -> &'a mut Value {
    let mut v = body;
    for part in path.split('.') {
        let (name, index) = part.split_once('[').unwrap();
        v = &mut v[name];
        for i in index.trim_end_matches(']').split("][") {
            v = &mut v[i.parse::<usize>().unwrap()];
        }
    }
    v
}

/// Every image of `body` whose inline data is empty or no base64, by its own walk.
fn bad_images(body: &Value) -> Vec<String> {
    use base64::Engine;
    let mut out = Vec::new();
    fn walk(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                let data = match o.get("type").and_then(Value::as_str) {
                    Some("image") => o
                        .get("source")
                        .and_then(|s| s.get("data"))
                        .and_then(Value::as_str),
                    Some("image_url") => o["image_url"]["url"]
                        .as_str()
                        .and_then(|u| u.split_once(','))
                        .map(|(_, d)| d),
                    Some("input_image") => o["image_url"]
                        .as_str()
                        .and_then(|u| u.split_once(','))
                        .map(|(_, d)| d),
                    _ => None,
                };
                if let Some(d) = data
                    && (d.is_empty()
                        || base64::engine::general_purpose::STANDARD.decode(d).is_err())
                {
                    out.push(path.to_string());
                }
                for (k, w) in o {
                    walk(w, &format!("{path}.{k}"), out);
                }
            }
            Value::Array(a) => {
                for (j, w) in a.iter().enumerate() {
                    walk(w, &format!("{path}[{j}]"), out);
                }
            }
            _ => {}
        }
    }
    walk(body, "$", &mut out);
    out
}

/// The paths of the images a report says were repaired.
fn repaired(r: &compactor::Report) -> Vec<&str> {
    r.repairs.iter().map(|x| x.path.as_str()).collect()
}

fn engines() -> &'static [Compactor; 2] {
    static ENGINES: OnceLock<[Compactor; 2]> = OnceLock::new();
    ENGINES.get_or_init(|| {
        let engine = |preset: &str| {
            let mut s = compactor::config::Loader {
                preset: Some(preset.into()),
                env: false,
                ..compactor::config::Loader::default()
            }
            .load()
            .unwrap();
            s.policy.remember = false;
            Compactor::from_config(s).unwrap()
        };
        [engine("default"), engine("microcompact")]
    })
}

proptest! {
    #![proptest_config(persisted(200))]

    /// Bad images anywhere: refused exactly when one is in the newest exchange (the images of
    /// the last op that is not the model's answer), naming those; else every bad one replaced
    /// by its placeholder and nothing else changed (under the trigger), or, compacted, a valid
    /// output with no bad image left and the newest exchange as it came.
    #[test]
    fn bad_images_are_replaced_outside_the_newest_exchange_and_refuse_it_inside(
        format in prop::sample::select(vec![Format::Anthropic, Format::OpenAiChat, Format::OpenAiResponses]),
        first in prop::option::weighted(0.5, (img(), any::<bool>())),
        ops in prop::collection::vec(op(), 0..10),
        lines in 1usize..60,
        share in 0.1f64..0.6,
    ) {
        let mut all = vec![Op::Ask(first)];
        all.extend(ops);
        let (body, placed) = build(format, &all, lines);
        let input = format.read(&body).unwrap();
        let newest_op = all.iter().rposition(|o| !matches!(o, Op::Answer)).unwrap();
        let bad: Vec<&Placed> = placed.iter().filter(|p| p.img != Img::Good).collect();
        let in_newest: Vec<String> = bad.iter().filter(|p| p.op == newest_op).map(|p| p.path.clone()).collect();
        for engine in engines() {
            let before = engine.counter().count_conversation(&input);
            for budget in [before * 10 + 1000, ((before as f64 * share) as usize).max(1)] {
                let out = runtime().block_on(engine.compact(&input, format, Some(budget)));
                if !in_newest.is_empty() {
                    let Err(CompactError::InvalidInput(v)) = out else {
                        return Err(TestCaseError::fail(format!("accepted a bad image in the newest exchange {in_newest:?}")));
                    };
                    let named: Vec<String> = v.iter().map(|v| v.path.clone()).collect();
                    prop_assert_eq!(&named, &in_newest);
                    let images = v.iter().all(|v| matches!(v.kind, ViolationKind::BadImage { .. }));
                    prop_assert!(images, "{:?}", v);
                    continue;
                }
                let out = out.unwrap();
                let r = &out.report;
                let expected: Vec<&str> = bad.iter().map(|p| p.path.as_str()).collect();
                prop_assert_eq!(repaired(r), expected);
                let written = format.write(&out.conversation);
                prop_assert_eq!(bad_images(&written), Vec::<String>::new());
                if budget > before {
                    // Under the trigger: the input with only the placeholders.
                    let mut want = body.clone();
                    for p in &bad {
                        *at_path(&mut want, &p.path) = placeholder(format, p);
                    }
                    prop_assert_eq!(&written, &want);
                    let status = if bad.is_empty() { Status::Unchanged } else { Status::Repaired };
                    prop_assert_eq!(r.status, status);
                    prop_assert_eq!(matches!(out.conversation, Cow::Borrowed(_)), bad.is_empty());
                } else {
                    let v = guard::validate(&out.conversation, format, ValidateOptions { allow_open_tail: false });
                    prop_assert!(v.is_empty(), "{}", v[0]);
                    // What every compaction keeps: the newest message (only a tool result's
                    // content may shrink there, so then its call).
                    let key = format.messages_key();
                    let (a, b) = (body[key].as_array().unwrap(), written[key].as_array().unwrap());
                    match all.last() {
                        Some(Op::Tool(_)) => prop_assert_eq!(&a[a.len() - 2], &b[b.len() - 2]),
                        _ => prop_assert_eq!(a.last(), b.last()),
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The corpus session with a real screenshot in a tool result, its image broken at run time

const SESSION: &str = "cc_agentcmd_image_in_tool_result.jsonl";

/// The session log with its screenshot's base64 replaced by `data` (every copy of it in the
/// log), and the index of the line that holds it.
fn broken_session(data: &str) -> (String, usize) {
    let text = std::fs::read_to_string(shared("corpus").join(SESSION)).unwrap();
    let from = text.find("\"type\":\"base64\",\"data\":\"").unwrap() + 24;
    let len = text[from..].find('"').unwrap();
    let png = &text[from..from + len];
    assert!(
        png.starts_with("iVBORw0KGgo"),
        "a PNG in the log: {}",
        &png[..20]
    );
    let line = text[..from].matches('\n').count();
    (text.replace(png, data), line)
}

/// The session as an Anthropic request body, its screenshot's data replaced by `data`; with
/// `upto`, only its first `upto` messages.
fn broken_body(data: &str, upto: Option<usize>) -> Value {
    let (log, _) = broken_session(data);
    let mut c: Conversation =
        compactor::format::load(log.as_bytes(), None, ImportOptions::default())
            .unwrap()
            .conversation;
    if let Some(n) = upto {
        c.messages.truncate(n);
    }
    let mut body = Format::Anthropic.write(&c);
    body["model"] = json!("claude-sonnet-4-5");
    body["max_tokens"] = json!(1024);
    body
}

/// Where the session's screenshot is: the first block of message 4's tool result.
const SHOT: &str = "messages[4].content[0].content[0]";

fn dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("images");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn compactor_cli(args: &[&str]) -> std::process::Output {
    super::support::compactor_bin().args(args).output().unwrap()
}

#[test]
fn the_cli_repairs_an_old_broken_screenshot_and_says_so_on_stderr() {
    for (data, why) in [
        ("", "empty base64 data"),
        ("iVBORw0KGgo!!", "invalid base64 data"),
    ] {
        let (log, _) = broken_session(data);
        let input = dir().join("broken.jsonl");
        std::fs::write(&input, &log).unwrap();
        let (out, report) = (
            dir().join("broken.out.json"),
            dir().join("broken.report.json"),
        );
        let o = compactor_cli(&[
            "compact",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
            "--model",
            "claude-sonnet-4-5",
            "--max-tokens",
            "1024",
        ]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "warning: {SHOT}: image removed ({why}): the provider would reject every later request\n"
            )),
            "{stderr}"
        );
        let summary = stderr.lines().last().unwrap();
        assert!(
            summary.starts_with("repaired: ") && summary.ends_with("; 1 unusable image removed"),
            "{summary}"
        );
        let sent: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(
            sent["messages"][4]["content"][0]["content"][0],
            json!({"type": "text", "text": format!("[compactor: image removed: {why} (image/png)]")})
        );
        assert_eq!(bad_images(&sent), Vec::<String>::new());
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert_eq!(report["status"], "repaired");
        let reason = if data.is_empty() {
            "empty"
        } else {
            "not_base64"
        };
        assert_eq!(
            report["repairs"],
            json!([{"path": SHOT, "message": 4, "block": 0, "nested": 0, "reason": reason, "media_type": "image/png"}])
        );
        // The checker is unchanged: it still names the image, exit 1.
        let v = compactor_cli(&["validate", input.to_str().unwrap()]);
        assert_eq!(v.status.code(), Some(1));
        let shown =
            String::from_utf8_lossy(&v.stdout).into_owned() + &String::from_utf8_lossy(&v.stderr);
        assert!(shown.contains(&format!("{SHOT}: image data is")), "{shown}");
        // The output compacts again to itself: nothing left to repair.
        let again = dir().join("broken.again.json");
        let o = compactor_cli(&[
            "compact",
            out.to_str().unwrap(),
            "-o",
            again.to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!String::from_utf8_lossy(&o.stderr).contains("image removed"));
        assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&out).unwrap());
    }
}

#[test]
fn the_cli_refuses_a_broken_screenshot_the_tool_just_returned() {
    let (log, line) = broken_session("");
    // The log up to the line of the screenshot's tool result: it is the newest exchange.
    let upto: String = log.split_inclusive('\n').take(line + 1).collect();
    let input = dir().join("newest.jsonl");
    std::fs::write(&input, upto).unwrap();
    let out = dir().join("newest.out.json");
    let o = compactor_cli(&[
        "compact",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("invalid input: {SHOT}: image data is empty")),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[tokio::test]
async fn the_api_repairs_under_the_trigger_and_reports_it() {
    let body = broken_body("", None);
    let (status, answer) = post_json(
        app(state(settings(200_000))),
        "/v1/compact",
        &json!({"request": body}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let report = &answer["report"];
    assert_eq!(report["status"], "repaired");
    assert_eq!(report["repairs"][0]["path"], SHOT);
    assert_eq!(report["repairs"][0]["reason"], "empty");
    assert_eq!(report["tokens_before"], report["tokens_after"]);
    let mut want = body.clone();
    *at_path(&mut want, SHOT) = json!({"type": "text", "text": "[compactor: image removed: empty base64 data (image/png)]"});
    assert_eq!(answer["request"], want);
    // The newest exchange: refused, located.
    let (status, answer) = post_json(
        app(state(settings(200_000))),
        "/v1/compact",
        &json!({"request": broken_body("", Some(5))}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(answer["error"]["code"], "invalid_history");
    assert_eq!(answer["error"]["location"], SHOT);
}

#[tokio::test]
async fn the_proxy_sends_the_repaired_body_and_forwards_a_new_broken_one_as_it_came() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let body = broken_body("", None);
    let (status, headers, _) = call(
        app(proxy_state(200_000, &upstream)),
        anthropic_request(body.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let sent: Value = serde_json::from_slice(&seen.lock().unwrap()[0].body).unwrap();
    let mut want = body.clone();
    *at_path(&mut want, SHOT) = json!({"type": "text", "text": "[compactor: image removed: empty base64 data (image/png)]"});
    assert_eq!(sent, want);
    let header = headers["x-compactor-tokens"].to_str().unwrap();
    assert!(
        header.ends_with("; tier=none; repaired=1; status=repaired"),
        "{header}"
    );

    let newest = broken_body("", Some(5)).to_string();
    let (status, headers, _) = call(
        app(proxy_state(200_000, &upstream)),
        anthropic_request(newest.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["x-compactor-skipped"], "invalid history");
    assert_eq!(seen.lock().unwrap()[1].body, bytes::Bytes::from(newest));
}

/// A remembered compaction of a history with a broken image is continued by the next turns:
/// the prefix sent stays the same, the image never comes back, and a broken image among the
/// new messages (outside the newest exchange) is repaired in the continuation too.
#[test]
fn a_remembered_compaction_continues_without_bringing_a_broken_image_back() {
    let mut s = settings(6_000);
    s.policy.remember = true;
    let engine = Compactor::from_config(s).unwrap();
    let mut body = crate::server::history(30);
    let shot = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}});
    let file = body["messages"][2]["content"][0]["content"].clone();
    body["messages"][2]["content"][0]["content"] = json!([{"type": "text", "text": file}, shot]);
    let first_in = Format::Anthropic.read(&body).unwrap();
    let first = runtime()
        .block_on(engine.compact(&first_in, Format::Anthropic, None))
        .unwrap();
    assert_eq!(
        first.report.status,
        Status::Compacted,
        "{:?}",
        first.report.notes
    );
    assert_eq!(
        repaired(&first.report),
        ["messages[2].content[0].content[1]"]
    );
    let first_out = Format::Anthropic.write(&first.conversation);
    assert_eq!(bad_images(&first_out), Vec::<String>::new());

    // The agent resends its history (the broken image in it) with a new exchange whose
    // screenshot is cut, and a new request.
    let n = body["messages"].as_array().unwrap().len();
    let msgs = body["messages"].as_array_mut().unwrap();
    msgs.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_shot", "name": "screenshot", "input": {}}]}));
    msgs.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_shot", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KG"}}]}]}));
    msgs.push(json!({"role": "user", "content": "the screenshot failed; go on"}));
    let second_in = Format::Anthropic.read(&body).unwrap();
    let second = runtime()
        .block_on(engine.compact(&second_in, Format::Anthropic, None))
        .unwrap();
    assert_eq!(
        second.report.continued_from,
        Some(n),
        "{:?}",
        second.report.notes
    );
    assert_eq!(
        repaired(&second.report),
        [
            "messages[2].content[0].content[1]",
            &format!("messages[{}].content[0].content[0]", n + 1)
        ]
    );
    let second_out = Format::Anthropic.write(&second.conversation);
    assert_eq!(bad_images(&second_out), Vec::<String>::new());
    let (a, b) = (
        first_out["messages"].as_array().unwrap(),
        second_out["messages"].as_array().unwrap(),
    );
    assert_eq!(
        &b[..a.len()],
        &a[..],
        "the prefix sent last turn is sent again"
    );
    assert_eq!(
        b[a.len() + 1]["content"][0]["content"][0]["text"],
        "[compactor: image removed: invalid base64 data (image/png)]"
    );
    assert_eq!(
        guard::validate(
            &second.conversation,
            Format::Anthropic,
            ValidateOptions::default()
        ),
        vec![]
    );
}
