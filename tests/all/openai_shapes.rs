//! The OpenAI shapes of 2026 (../shared/PROVIDER_RULES.md §B Responses, §C Chat) through the
//! CLI and the proxy: the repository's own cases `tests/cases/k*.json` (written by
//! `scripts/openai-cases.py`: what Codex CLI 0.171 sends, every Responses pair type, chained
//! bodies, Chat custom tools and mid-history instructions) compacted by `compactor compact` and
//! by the proxy in front of a fake upstream on 127.0.0.1, each output judged by the independent
//! checker ../shared/tools/check_request.py against its input.

use crate::server::{Reply, call, proxy_state, spawn_upstream};
use crate::support::checker::{Batch, Body as Checked};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use compactor::server::app;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The repository's OpenAI cases, with their parsed contents.
fn cases() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with('k') && name.ends_with(".json")
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
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("openai_shapes");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A case's format as the checker names it.
fn case_format(format: &str) -> &'static str {
    match format {
        "openai-chat" => "openai-chat",
        "openai-responses" => "openai-responses",
        other => panic!("no OpenAI format {other}"),
    }
}

/// `out` as a compaction of `input` (files, read now), for the checker's run at the end of the
/// test (one Python process for all cases).
fn judge(batch: &mut Batch, label: String, out: &Path, input: &Path, format: &'static str) {
    batch.push(Checked {
        label,
        output: std::fs::read(out).unwrap(),
        input: Some(std::fs::read(input).unwrap()),
        format: Some(format),
        open_tail: false,
    });
}

fn route(format: &str) -> &'static str {
    match format {
        "openai-chat" => "/v1/chat/completions",
        _ => "/v1/responses",
    }
}

/// What every output of a case must hold beside the checker's rules: the envelope as it came,
/// and each `x_checks.system_kept` text inside a system or developer message.
fn holds(name: &str, case: &Value, out: &Value) -> Vec<String> {
    let mut faults = Vec::new();
    let request = case["request"].as_object().unwrap();
    for (k, v) in request {
        if k != "messages" && k != "input" && out.get(k) != Some(v) {
            faults.push(format!("{name}: envelope field {k} changed"));
        }
    }
    let items = out
        .get("messages")
        .or_else(|| out.get("input"))
        .and_then(Value::as_array)
        .unwrap();
    for text in case["x_checks"]["system_kept"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let text = text.as_str().unwrap();
        let kept = items.iter().any(|m| {
            matches!(m["role"].as_str(), Some("system" | "developer"))
                && m["content"].to_string().contains(text)
        });
        if !kept {
            faults.push(format!(
                "{name}: {text:?} not in a system/developer message"
            ));
        }
    }
    faults
}

#[test]
fn every_openai_case_compacts_validly_through_the_cli() {
    let cases = cases();
    assert_eq!(cases.len(), 7, "tests/cases/k*.json");
    let mut checked = Batch::new("compacts_validly_through_the_cli");
    let mut faults = Vec::new();
    for (name, case) in &cases {
        let format = case["format"].as_str().unwrap();
        let input = dir().join(format!("{name}.in.json"));
        std::fs::write(&input, case["request"].to_string()).unwrap();
        let out = dir().join(format!("{name}.cli.json"));
        let _ = std::fs::remove_file(&out);
        let o = crate::support::compactor_bin()
            .arg("compact")
            .arg(&input)
            .args(["--format", format, "--budget"])
            .arg(case["budget"].to_string())
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        if let Some(error) = case["expect"]["error"].as_str() {
            // An invalid input is refused, located, with the provider's words.
            if o.status.success() || !stderr.contains(error) {
                faults.push(format!("{name}: not refused naming {error:?}: {stderr}"));
            }
            continue;
        }
        if !o.status.success() {
            faults.push(format!("{name}: {stderr}"));
            continue;
        }
        if !stderr.contains("compacted: ") {
            faults.push(format!("{name}: not compacted: {stderr}"));
        }
        judge(
            &mut checked,
            format!("{name} (cli)"),
            &out,
            &input,
            case_format(format),
        );
        let body: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        faults.extend(holds(name, case, &body));
    }
    faults.extend(checked.faults_named(|_| true));
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

#[tokio::test]
async fn every_openai_case_compacts_validly_through_the_proxy() {
    let mut checked = Batch::new("compacts_validly_through_the_proxy");
    let mut faults = Vec::new();
    for (name, case) in cases() {
        let format = case["format"].as_str().unwrap();
        let budget = case["budget"].as_u64().unwrap() as usize;
        let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
        let sent = case["request"].to_string();
        let req = Request::post(route(format))
            .header("authorization", "Bearer sk-test")
            .header("content-type", "application/json")
            .body(Body::from(sent.clone()))
            .unwrap();
        let (status, headers, _) = call(app(proxy_state(budget, &upstream)), req).await;
        assert_eq!(status, StatusCode::OK, "{name}");
        let forwarded = seen.lock().unwrap()[0].body.clone();
        if case["expect"].get("error").is_some() {
            // Broken on purpose: forwarded as it came.
            seen.sent_invalid(sent.clone());
            // A history that breaks a known rule goes out as it came, for the provider to
            // answer, and says why.
            assert_eq!(forwarded, sent.as_bytes(), "{name}");
            assert_eq!(headers["x-compactor-skipped"], "invalid history", "{name}");
            continue;
        }
        let tokens = headers
            .get("x-compactor-tokens")
            .map(|h| h.to_str().unwrap().to_string())
            .unwrap_or_default();
        if tokens.is_empty() || tokens.contains("tier=none") {
            faults.push(format!("{name}: not compacted by the proxy: {headers:?}"));
        }
        // Not the CLI test's file: the two run at once.
        let input = dir().join(format!("{name}.proxy.in.json"));
        std::fs::write(&input, &sent).unwrap();
        let out = dir().join(format!("{name}.proxy.json"));
        std::fs::write(&out, &forwarded).unwrap();
        judge(
            &mut checked,
            format!("{name} (proxy)"),
            &out,
            &input,
            case_format(format),
        );
        faults.extend(holds(
            &name,
            &case,
            &serde_json::from_slice(&forwarded).unwrap(),
        ));
    }
    faults.extend(checked.faults_named(|_| true));
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

/// A chained body (B4) through the proxy: the outputs it opens with answer calls the server
/// holds, so they go out first, in order, each still answering its call; the huge one is cut,
/// the failed ones keep their failure fields; the new turns are compacted behind a marker.
#[tokio::test]
async fn a_chained_body_keeps_the_outputs_of_stored_calls_first_and_cuts_only_their_content() {
    let (_, case) = cases()
        .into_iter()
        .find(|(n, _)| n.starts_with("k02"))
        .unwrap();
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let req = Request::post("/v1/responses")
        .header("authorization", "Bearer sk-test")
        .body(Body::from(case["request"].to_string()))
        .unwrap();
    let (status, headers, _) = call(app(proxy_state(1500, &upstream)), req).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.get("x-compactor-skipped").is_none(), "{headers:?}");
    let out: Value = serde_json::from_slice(&seen.lock().unwrap()[0].body).unwrap();
    let input = case["request"]["input"].as_array().unwrap();
    let items = out["input"].as_array().unwrap();
    let head: Vec<(&str, &str)> = items[..3]
        .iter()
        .map(|i| (i["type"].as_str().unwrap(), i["call_id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        head,
        [
            ("function_call_output", "call_k02S1"),
            ("apply_patch_call_output", "call_k02S2"),
            ("shell_call_output", "call_k02S3"),
        ]
    );
    // The huge output is cut (head and tail kept), the others go out as they came.
    let (before, after) = (
        input[0]["output"].as_str().unwrap(),
        items[0]["output"].as_str().unwrap(),
    );
    assert!(
        after.len() * 4 < before.len(),
        "{} -> {}",
        before.len(),
        after.len()
    );
    assert!(after.contains("tokens truncated"), "{after}");
    assert_eq!(
        after.lines().next(),
        before.lines().next(),
        "the head is kept"
    );
    assert_eq!(items[1], input[1]);
    assert_eq!(items[2], input[2]);
    // Then the marker (a user message) and the newest turn.
    assert_eq!(items[3]["role"], "user");
    assert!(
        items[3]["content"]
            .to_string()
            .contains("[compactor: earlier conversation compacted]")
    );
    assert_eq!(items.last(), input.last());
    assert_eq!(out["previous_response_id"], json!("resp_k02prev"));
}
