//! Google Gemini `generateContent` (../shared/PROVIDER_RULES.md §D) through the CLI and the
//! proxy: the repository's own cases `tests/cases/gc*.json` (written by
//! `scripts/gemini-cases.py`: what Gemini CLI 0.61 sends) compacted by `compactor compact` and
//! by the proxy in front of a fake upstream on 127.0.0.1, each output judged by the independent
//! checker ../shared/tools/check_request.py against its input; the proxy's Gemini routing
//! (steps compacted, side calls and unknown Google routes passed to the Gemini upstream, never
//! to another); and random Gemini histories through every preset, each output checked by a
//! checker written here from the provider's rules (D1, D2, D3/D4 on kept calls, D7).

use crate::server::{Reply, call, settings, spawn_upstream, state};
use crate::support::checker::{Batch, Body as Checked};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use compactor::server::{AppState, app};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The repository's Gemini cases, with their parsed contents.
fn cases() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with("gc") && name.ends_with(".json")
        })
        .map(|p| {
            let name = p.file_stem().unwrap().to_str().unwrap().to_string();
            let case = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (name, case)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gemini_shapes");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `out` as a compaction of `input` (files, read now), for the checker's run at the end of the
/// test (one Python process for all cases).
fn judge(batch: &mut Batch, label: String, out: &Path, input: &Path) {
    batch.push(Checked {
        label,
        output: std::fs::read(out).unwrap(),
        input: Some(std::fs::read(input).unwrap()),
        format: Some("gemini"),
        open_tail: false,
    });
}

/// The proxy with every upstream at `gemini` (and Anthropic / OpenAI at `other`).
fn gemini_state(budget: usize, gemini: &str, other: &str) -> AppState {
    let mut s = settings(budget);
    s.server.anthropic_upstream = other.to_string();
    s.server.openai_upstream = other.to_string();
    s.server.gemini_upstream = gemini.to_string();
    state(s)
}

const STEP: &str = "/v1beta/models/gemini-3-flash:streamGenerateContent?alt=sse";

fn gemini_request(path: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .header("x-goog-api-key", "AIza-test-key")
        .body(body.into())
        .unwrap()
}

#[test]
fn every_gemini_case_compacts_validly_through_the_cli() {
    let cases = cases();
    assert_eq!(cases.len(), 4, "tests/cases/gc*.json");
    let mut checked = Batch::new("compacts_validly_through_the_cli");
    let mut faults = Vec::new();
    for (name, case) in &cases {
        let input = dir().join(format!("{name}.in.json"));
        std::fs::write(&input, case["request"].to_string()).unwrap();
        let out = dir().join(format!("{name}.cli.json"));
        let _ = std::fs::remove_file(&out);
        let o = crate::support::compactor_bin()
            .arg("compact")
            .arg(&input)
            .args(["--format", "gemini", "--budget"])
            .arg(case["budget"].to_string())
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        if let Some(error) = case["expect"]["error"].as_str() {
            if o.status.success() || !stderr.contains(error) {
                faults.push(format!("{name}: not refused naming {error:?}: {stderr}"));
            }
            continue;
        }
        if !o.status.success() {
            faults.push(format!("{name}: {stderr}"));
            continue;
        }
        let body: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        if case["expect"]["unchanged"] == true {
            if body != case["request"] {
                faults.push(format!("{name}: changed although under its budget"));
            }
            continue;
        }
        if !stderr.contains("compacted: ") {
            faults.push(format!("{name}: not compacted: {stderr}"));
        }
        judge(&mut checked, format!("{name} (cli)"), &out, &input);
        for key in ["systemInstruction", "tools", "generationConfig"] {
            if body[key] != case["request"][key] {
                faults.push(format!("{name}: {key} changed"));
            }
        }
    }
    faults.extend(checked.faults_named(|_| true));
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

#[tokio::test]
async fn every_gemini_case_compacts_validly_through_the_proxy() {
    let mut checked = Batch::new("compacts_validly_through_the_proxy");
    let mut faults = Vec::new();
    for (name, case) in cases() {
        let budget = case["budget"].as_u64().unwrap() as usize;
        let (gemini, seen) = spawn_upstream(Reply::json(200, "{}")).await;
        let (other, other_seen) = spawn_upstream(Reply::json(200, "{}")).await;
        let sent = case["request"].to_string();
        let (status, headers, _) = call(
            app(gemini_state(budget, &gemini, &other)),
            gemini_request(STEP, sent.clone()),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{name}");
        assert!(other_seen.lock().unwrap().is_empty(), "{name}");
        let got = seen.lock().unwrap()[0].clone();
        assert_eq!(got.uri, STEP, "{name}: path and query kept");
        assert_eq!(got.headers["x-goog-api-key"], "AIza-test-key", "{name}");
        let forwarded = got.body;
        if case["expect"].get("error").is_some() {
            // Broken on purpose: forwarded as it came.
            seen.sent_invalid(sent.clone());
            assert_eq!(forwarded, sent.as_bytes(), "{name}");
            assert_eq!(headers["x-compactor-skipped"], "invalid history", "{name}");
            continue;
        }
        let tokens = headers
            .get("x-compactor-tokens")
            .map(|h| h.to_str().unwrap().to_string())
            .unwrap_or_default();
        if case["expect"]["unchanged"] == true {
            assert_eq!(forwarded, sent.as_bytes(), "{name}");
            continue;
        }
        if tokens.is_empty() || tokens.contains("tier=none") {
            faults.push(format!("{name}: not compacted by the proxy: {headers:?}"));
        }
        // Not the CLI test's file: the two run at once.
        let input = dir().join(format!("{name}.proxy.in.json"));
        std::fs::write(&input, &sent).unwrap();
        let out = dir().join(format!("{name}.proxy.json"));
        std::fs::write(&out, &forwarded).unwrap();
        judge(&mut checked, format!("{name} (proxy)"), &out, &input);
    }
    faults.extend(checked.faults_named(|_| true));
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

/// Side calls (`:generateContent`), `:countTokens` and Google routes the proxy does not handle
/// go to the Gemini upstream as they came, with their key; none reaches another upstream.
#[tokio::test]
async fn side_calls_and_other_google_routes_pass_through_to_the_gemini_upstream() {
    let (_, case) = cases()
        .into_iter()
        .find(|(n, _)| n.starts_with("gc01"))
        .unwrap();
    let big = case["request"].to_string();
    let (gemini, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let (other, other_seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let st = gemini_state(2_000, &gemini, &other);
    let routes = [
        ("POST", "/v1beta/models/gemini-3-flash:generateContent"),
        ("POST", "/v1beta/models/gemini-3-flash:countTokens"),
        ("POST", "/v1/models/gemini-3-flash:generateContent"),
        ("GET", "/v1beta/models?pageSize=50"),
        ("POST", "/upload/v1beta/files?key=AIza-in-query"),
    ];
    for (method, path) in routes {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(big.clone()))
            .unwrap();
        let (status, headers, _) = call(app(st.clone()), req).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(headers.get("x-compactor-tokens").is_none(), "{path}");
        let got = seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(got.uri, path, "{path}");
        if method == "POST" {
            assert_eq!(got.body, big.as_bytes(), "{path}: forwarded as it came");
        }
    }
    assert_eq!(seen.lock().unwrap().len(), routes.len());
    assert!(other_seen.lock().unwrap().is_empty());
    // The step itself, over the budget, is compacted.
    let (_, headers, _) = call(app(st), gemini_request(STEP, big.clone())).await;
    assert!(
        headers["x-compactor-tokens"]
            .to_str()
            .unwrap()
            .contains("tier="),
        "{headers:?}"
    );
    let stepped = seen.lock().unwrap().last().cloned().unwrap();
    assert!(stepped.body.len() < big.len());
}

/// Numbers of any size or precision, in call arguments, a non-text response and the envelope,
/// come back as they were, through detection, the reader and the byte writer.
#[test]
fn numbers_round_trip_exactly_through_the_gemini_reader_and_writer() {
    use compactor::format::Format;
    let text = r#"{"contents":[{"parts":[{"text":"go"}],"role":"user"},{"parts":[{"functionCall":{"id":"a","args":{"n":340282366920938463463374607431768211457,"f":0.1000000000000000055511151231257827,"e":1e400},"name":"f"},"thoughtSignature":"c2ln"}],"role":"model"},{"parts":[{"functionResponse":{"id":"a","name":"f","response":{"output":{"k":1.50}}}}],"role":"user"}],"generationConfig":{"temperature":0.70},"systemInstruction":{"parts":[{"text":"s"}]}}"#;
    let loaded = compactor::format::load(text.as_bytes(), None, Default::default()).unwrap();
    assert_eq!(loaded.format, Format::Gemini);
    let written = String::from_utf8(Format::Gemini.write_bytes(&loaded.conversation)).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&written).unwrap(),
        serde_json::from_str::<Value>(text).unwrap()
    );
    for n in [
        "340282366920938463463374607431768211457",
        "0.1000000000000000055511151231257827",
        // serde_json writes the exponent with its sign (the same number).
        "1e+400",
        "1.50",
        "0.70",
    ] {
        assert!(written.contains(n), "{n} in {written}");
    }
}

// ---------------------------------------------------------------------------------------------
// Random Gemini histories through every preset, each output checked from the provider's rules.

/// A Gemini CLI-like body: contents[0] the task, then `steps` call turns of 1-3 calls (the
/// first signed) each answered by one response turn, sometimes failed, sometimes a later user
/// text turn with its own signed answer; ids present or not.
fn history(steps: &[(u8, bool, bool)], ids: bool, size: usize) -> Value {
    let mut contents = vec![json!({"parts": [
        {"text": "<session_context>\nWorkspace: /w\n</session_context>"},
        {"text": "make the tests pass"}], "role": "user"})];
    for (s, &(n, failed, user_after)) in steps.iter().enumerate() {
        let mut calls = Vec::new();
        let mut responses = Vec::new();
        for i in 0..n.clamp(1, 3) {
            let mut fc = json!({"name": "read_file", "args": {"path": format!("src/f{s}_{i}.py")}});
            let mut fr = json!({"name": "read_file", "response": if failed && i == 0 {
                json!({"error": format!("File not found: src/f{s}_{i}.py")})
            } else {
                json!({"output": format!("line of f{s}_{i}\n").repeat(size)})
            }});
            if ids {
                fc["id"] = json!(format!("fc-{s}-{i}"));
                fr["id"] = json!(format!("fc-{s}-{i}"));
            }
            let mut part = json!({"functionCall": fc});
            if i == 0 {
                part["thoughtSignature"] = json!(format!("sig-{s}"));
            }
            calls.push(part);
            responses.push(json!({"functionResponse": fr}));
        }
        contents.push(json!({"role": "model", "parts": calls}));
        contents.push(json!({"role": "user", "parts": responses}));
        if user_after && s + 1 < steps.len() {
            contents.push(json!({"role": "model", "parts": [{"text": format!("done step {s}"), "thoughtSignature": format!("t-{s}")}]}));
            contents.push(json!({"role": "user", "parts": [{"text": format!("next task {s}")}]}));
        }
    }
    json!({
        "contents": contents,
        "systemInstruction": {"parts": [{"text": "You are a coding agent."}]},
        "tools": [{"functionDeclarations": [{"name": "read_file"}]}],
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "HIGH"}},
    })
}

/// What a Gemini request must hold, from ../shared/PROVIDER_RULES.md §D, checked without the
/// crate: roles user / model, parts not empty (D0.1); every call turn right after a user turn
/// (D2) and answered by the next content, a user turn with as many responses, the same ids or
/// names in the same order (D1); every response turn right after a call turn; and against the
/// input: contents[0] and the envelope unchanged (D7), every kept call's signature its own (D3,
/// D4; the skip marker where it had none, D5).
fn gemini_faults(input: &Value, out: &Value) -> Vec<String> {
    let mut f = Vec::new();
    let c = out["contents"].as_array().unwrap();
    let calls = |x: &Value| -> Vec<Value> {
        x["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("functionCall").cloned())
            .collect()
    };
    let resps = |x: &Value| -> Vec<Value> {
        x["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("functionResponse").cloned())
            .collect()
    };
    for (i, x) in c.iter().enumerate() {
        let role = x["role"].as_str().unwrap_or("?");
        if role != "user" && role != "model" {
            f.push(format!("contents[{i}]: role {role}"));
        }
        if x["parts"].as_array().is_none_or(Vec::is_empty) {
            f.push(format!("contents[{i}]: no parts"));
        }
        let cs = calls(x);
        if !cs.is_empty() {
            if i == 0 || c[i - 1]["role"] != "user" {
                f.push(format!("contents[{i}]: D2"));
            }
            let rs = c.get(i + 1).map(resps).unwrap_or_default();
            let key = |v: &Value| v.get("id").cloned().unwrap_or_else(|| v["name"].clone());
            if rs.len() != cs.len() || cs.iter().map(key).ne(rs.iter().map(key)) {
                f.push(format!(
                    "contents[{i}]: D1 ({} calls, {} responses)",
                    cs.len(),
                    rs.len()
                ));
            }
        }
        if !resps(x).is_empty() && (i == 0 || calls(&c[i - 1]).is_empty()) {
            f.push(format!(
                "contents[{i}]: a response turn not after a call turn"
            ));
        }
    }
    if c.first() != input["contents"].get(0) {
        f.push("contents[0] changed".into());
    }
    for key in ["systemInstruction", "tools", "generationConfig"] {
        if out[key] != input[key] {
            f.push(format!("{key} changed"));
        }
    }
    let mut sigs = std::collections::HashMap::new();
    for x in input["contents"].as_array().unwrap() {
        for p in x["parts"].as_array().unwrap() {
            if let Some(fc) = p.get("functionCall") {
                sigs.insert(fc.to_string(), p.get("thoughtSignature").cloned());
            }
        }
    }
    for x in c {
        for p in x["parts"].as_array().into_iter().flatten() {
            if let Some(fc) = p.get("functionCall") {
                let sig = p.get("thoughtSignature").cloned();
                match sigs.get(&fc.to_string()) {
                    Some(s) if *s == sig => {}
                    Some(None) if sig == Some(json!("skip_thought_signature_validator")) => {}
                    // An edited call (its arguments cleared) keeps its id and signature.
                    None if fc.get("id").is_some() => {}
                    other => f.push(format!("signature of {fc}: {other:?} -> {sig:?}")),
                }
            }
        }
    }
    f
}

fn engines() -> &'static Vec<(&'static str, compactor::Compactor)> {
    static ENGINES: std::sync::OnceLock<Vec<(&'static str, compactor::Compactor)>> =
        std::sync::OnceLock::new();
    ENGINES.get_or_init(|| {
        ["default", "truncate", "microcompact"]
            .into_iter()
            .map(|p| {
                let mut s = compactor::config::Loader {
                    preset: Some(p.to_string()),
                    env: false,
                    ..compactor::config::Loader::default()
                }
                .load()
                .unwrap();
                s.policy.remember = false;
                (p, compactor::Compactor::from_config(s).unwrap())
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Random Gemini histories x budgets x presets: every output keeps the provider's rules
    /// and what a compaction must keep, checked by [`gemini_faults`], not by the guard.
    #[test]
    fn random_gemini_histories_compact_validly_under_every_preset(
        steps in proptest::collection::vec((1u8..4, any::<bool>(), proptest::bool::weighted(0.15)), 2..14),
        ids in any::<bool>(),
        size in 5usize..60,
        budget in 600usize..4_000,
    ) {
        use compactor::format::Format;
        let body = history(&steps, ids, size);
        let conv = Format::Gemini.read(&body).unwrap();
        prop_assert_eq!(&Format::Gemini.write(&conv), &body);
        for (preset, engine) in engines() {
            let out = crate::support::runtime()
                .block_on(engine.compact(&conv, Format::Gemini, Some(budget)))
                .unwrap();
            let written = Format::Gemini.write(&out.conversation);
            let faults = gemini_faults(&body, &written);
            prop_assert!(faults.is_empty(), "{} @ {}: {}", preset, budget, faults.join("; "));
            // A failure (response.error) stays failed: kept with its error, or named with
            // its file (the digest's failure line, the call's path).
            let text = written.to_string();
            for (s, &(_, failed, _)) in steps.iter().enumerate() {
                if failed {
                    let path = format!("src/f{s}_0.py");
                    prop_assert!(text.contains(&path), "{}: failure {} lost", preset, path);
                }
            }
        }
    }
}
