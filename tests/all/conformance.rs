//! The repository's client fixtures (`tests/cases/c*.json`, modelled on what real agent clients
//! send) through the proxy: each is posted to its format's route of `app()` with the case's
//! budget, and the body the upstream receives is judged by the independent checker
//! (../shared/tools/check_request.py, with the input for its preservation checks) and holds
//! every `x_checks.must_contain` string. (The CLI runs them too: .ci/run, run_cases.py.)

use crate::server::{Reply, call, settings, spawn_upstream, state};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use compactor::server::app;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const CHECKER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/tools/check_request.py"
);

/// The client fixtures, sorted.
fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('c') && n.ends_with(".json"))
        })
        .collect();
    files.sort();
    files
}

fn route(format: &str) -> &'static str {
    match format {
        "anthropic" => "/v1/messages?beta=true",
        "openai-chat" => "/v1/chat/completions",
        "openai-responses" => "/v1/responses",
        other => panic!("no proxy route for format {other}"),
    }
}

/// The checker's verdict on `output` (with `input` for its preservation checks): its exit
/// status and what it printed.
fn judge(input: &Value, output: &[u8], format: &str, name: &str) -> (i32, String) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance");
    std::fs::create_dir_all(&dir).unwrap();
    let (i, o) = (
        dir.join(format!("{name}.in.json")),
        dir.join(format!("{name}.out.json")),
    );
    std::fs::write(&i, input.to_string()).unwrap();
    std::fs::write(&o, output).unwrap();
    assert!(Path::new(CHECKER).exists(), "missing {CHECKER}");
    let out = Command::new("python3")
        .arg(CHECKER)
        .arg(&o)
        .args(["--format", format, "--input"])
        .arg(&i)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[tokio::test]
async fn client_fixtures_through_the_proxy_reach_the_upstream_valid_with_their_context() {
    let files = fixtures();
    assert!(files.len() >= 3, "{} client fixtures", files.len());
    for file in files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let case: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let format = case["format"].as_str().unwrap();
        let budget = case["budget"].as_u64().unwrap() as usize;
        let request = &case["request"];
        let (upstream, seen) = spawn_upstream(Reply::json(200, "{\"id\":\"msg_1\"}")).await;
        let mut s = settings(budget);
        s.server.anthropic_upstream = upstream.clone();
        s.server.openai_upstream = upstream;
        let req = Request::post(route(format))
            .header("content-type", "application/json")
            .header("x-api-key", "sk-test")
            .header("authorization", "Bearer sk-test")
            .body(Body::from(request.to_string()))
            .unwrap();
        let (status, headers, _) = call(app(state(s)), req).await;
        assert_eq!(status, StatusCode::OK, "{name}");
        assert!(
            headers.get("x-compactor-skipped").is_none(),
            "{name}: {:?}",
            headers.get("x-compactor-skipped")
        );
        let forwarded = seen.lock().unwrap()[0].body.clone();
        let (code, said) = judge(request, &forwarded, format, &name);
        assert_eq!(code, 0, "{name}: the checker says\n{said}");
        let text = String::from_utf8_lossy(&forwarded);
        for must in case["x_checks"]["must_contain"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let must = must.as_str().unwrap();
            assert!(
                text.contains(must),
                "{name}: {must:?} is not in the forwarded body"
            );
        }
        let tokens = headers["x-compactor-tokens"].to_str().unwrap();
        // Claude Code's own summary request is said to be one.
        let asks_summary = request
            .to_string()
            .contains("detailed summary of the conversation");
        assert_eq!(
            tokens.contains("request=client_summary"),
            asks_summary,
            "{name}: {tokens}"
        );
        let expect = &case["expect"];
        if expect["unchanged"] == Value::Bool(true) {
            assert_eq!(
                serde_json::from_slice::<Value>(&forwarded).unwrap(),
                *request,
                "{name}: changed"
            );
        } else {
            assert!(!tokens.contains("tier=none"), "{name}: {tokens}");
        }
    }
}

/// A history with an invented role and an invented block type, through the proxy: compacted
/// around both, which reach the upstream byte-identical and in order; the checker finds the
/// body valid; /metrics counts them by kind without their names.
#[tokio::test]
async fn an_invented_role_and_block_type_are_kept_in_place_through_the_proxy() {
    let mut body = crate::server::history(30);
    let critic = serde_json::json!({"role": "critic", "content": "The plan skips the tests.", "x_score": 0.75});
    let note = serde_json::json!({"type": "x_annotation", "note": {"k": [1, 2.50]}});
    let messages = body["messages"].as_array_mut().unwrap();
    // Late in the history (kept anyway) and early (in the span a compaction drops).
    messages.insert(5, critic.clone());
    messages[3]["content"]
        .as_array_mut()
        .unwrap()
        .push(note.clone());
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{\"id\":\"msg_1\"}")).await;
    seen.planted("role 'critic' is not user/assistant/system");
    let mut s = settings(4_000);
    s.server.anthropic_upstream = upstream.clone();
    s.server.openai_upstream = upstream;
    let router = app(state(s));
    let req = Request::post("/v1/messages")
        .header("content-type", "application/json")
        .header("x-api-key", "sk-test")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, headers, _) = call(router.clone(), req).await;
    assert_eq!(status, StatusCode::OK);
    let tokens = headers["x-compactor-tokens"].to_str().unwrap().to_string();
    assert!(!tokens.contains("tier=none"), "{tokens}");
    let forwarded = seen.lock().unwrap()[0].body.clone();
    let out: Value = serde_json::from_slice(&forwarded).unwrap();
    let out_messages = out["messages"].as_array().unwrap();
    assert!(out_messages.len() < body["messages"].as_array().unwrap().len());
    let critic_at = out_messages
        .iter()
        .position(|m| *m == critic)
        .expect("the critic message");
    let note_at = out_messages
        .iter()
        .position(|m| m["content"].as_array().is_some_and(|c| c.contains(&note)))
        .expect("the annotation block");
    assert!(note_at < critic_at, "{note_at} {critic_at}");
    // The checker knows no role "critic" either: that is all it may find.
    let (_, said) = judge(&body, &forwarded, "anthropic", "invented");
    let faults: Vec<&str> = said
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_once("]: ").map_or(l, |(_, rest)| rest))
        .collect();
    assert_eq!(
        faults,
        ["role 'critic' is not user/assistant/system"],
        "{said}"
    );
    let (_, m) = crate::server::get_text(router, "/metrics").await;
    let lines: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("compactor_opaque_units_total{"))
        .collect();
    assert_eq!(
        lines,
        [
            "compactor_opaque_units_total{format=\"anthropic\",kind=\"block\"} 1",
            "compactor_opaque_units_total{format=\"anthropic\",kind=\"role\"} 1",
        ]
    );
}
