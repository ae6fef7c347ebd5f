//! Restorable compaction: every recall id a compaction writes gives back the original,
//! byte for byte (library and `GET /v1/recall/{id}`); a small store evicts and says so.

use crate::server::{call, history, loader, post_json, settings, state};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use compactor::Compactor;
use compactor::config::{Loader, Settings};
use compactor::format::Format;
use compactor::recall::{RecallError, RecallKind, RecallRef};
use compactor::server::app;
use proptest::prelude::*;
use serde_json::{Value, json};

fn preset(name: &str) -> Settings {
    Loader {
        preset: Some(name.to_string()),
        ..loader()
    }
    .load()
    .unwrap()
}

/// The value at a report path (`messages[3].content[1]`).
fn at<'v>(mut v: &'v Value, path: &str) -> &'v Value {
    for seg in path.split('.') {
        let (key, rest) = seg.split_once('[').unwrap_or((seg, ""));
        v = &v[key];
        if let Some(i) = rest.strip_suffix(']') {
            v = &v[i.parse::<usize>().unwrap()];
        }
    }
    v
}

async fn compact(engine: &Compactor, body: &Value, budget: usize) -> (Value, Vec<RecallRef>) {
    let conv = Format::Anthropic.read(body).unwrap();
    let out = engine
        .compact(&conv, Format::Anthropic, Some(budget))
        .await
        .unwrap();
    (
        Format::Anthropic.write(&out.conversation),
        out.report.recall.clone(),
    )
}

#[tokio::test]
async fn a_cleared_result_recalls_byte_identical_to_the_input_block() {
    let input = history(20);
    let engine = Compactor::from_config(preset("microcompact")).unwrap();
    let (output, refs) = compact(&engine, &input, 4000).await;
    assert!(refs.len() >= 10, "{refs:?}");
    let text = output.to_string();
    for r in &refs {
        assert_eq!(r.kind, RecallKind::Block);
        let original = at(&input, &r.path);
        assert_eq!(original["type"], "tool_result", "{}", r.path);
        let got = engine.recall(&r.id).unwrap();
        assert_eq!(
            serde_json::to_string(&got.original).unwrap(),
            serde_json::to_string(original).unwrap()
        );
        assert_eq!(r.bytes, serde_json::to_vec(original).unwrap().len());
        // The placeholder that replaced it names the id.
        let placeholder = at(&output, &r.path)["content"].to_string();
        assert!(
            placeholder.contains(&format!("· recall {}", r.id)),
            "{placeholder}"
        );
        assert!(text.contains(&r.id));
    }
    // The same history compacts to the same bytes (the ids are the content's).
    let again = Compactor::from_config(preset("microcompact")).unwrap();
    assert_eq!(compact(&again, &input, 4000).await.0, output);
}

#[tokio::test]
async fn a_dropped_span_recalls_to_the_original_messages() {
    let input = history(30);
    let engine = Compactor::from_config(preset("truncate")).unwrap();
    let (output, refs) = compact(&engine, &input, 3000).await;
    let spans: Vec<&RecallRef> = refs.iter().filter(|r| r.kind == RecallKind::Span).collect();
    assert_eq!(spans.len(), 1, "{refs:?}");
    let span = spans[0];
    assert!(span.end > span.message + 1);
    let messages = input["messages"].as_array().unwrap();
    let expected = Value::Array(messages[span.message..span.end].to_vec());
    let got = engine.recall(&span.id).unwrap();
    assert_eq!(got.kind, RecallKind::Span);
    assert_eq!(
        serde_json::to_string(&got.original).unwrap(),
        serde_json::to_string(&expected).unwrap()
    );
    // The marker in front of the kept history names the span's id.
    let marker = output["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m.to_string().contains(&span.id))
        .unwrap();
    assert_eq!(marker["role"], "user");
}

#[tokio::test]
async fn a_small_store_evicts_and_recall_says_evicted_not_unknown() {
    let mut s = preset("microcompact");
    s.recall.max_bytes = 3000;
    let engine = Compactor::from_config(s).unwrap();
    let (_, refs) = compact(&engine, &history(20), 4000).await;
    assert!(refs.len() >= 10);
    let mut evicted = 0;
    for r in &refs {
        match engine.recall(&r.id) {
            Ok(_) => {}
            Err(RecallError::Evicted(id)) => {
                assert_eq!(id, r.id);
                evicted += 1;
            }
            Err(e) => panic!("{}: {e:?}", r.id),
        }
    }
    // About 1,300 bytes each: at most two fit.
    assert!(evicted >= refs.len() - 2, "{evicted} of {}", refs.len());
    let unknown = format!("rc_{}", "0".repeat(32));
    assert_eq!(engine.recall(&unknown), Err(RecallError::Unknown(unknown)));
    assert_eq!(
        engine.recall("rc_nope"),
        Err(RecallError::Malformed("rc_nope".into()))
    );
}

#[tokio::test]
async fn recall_off_writes_no_id() {
    let mut s = preset("microcompact");
    s.recall.enabled = false;
    let engine = Compactor::from_config(s).unwrap();
    let (output, refs) = compact(&engine, &history(20), 4000).await;
    assert!(refs.is_empty());
    assert!(!output.to_string().contains("recall rc_"));
    assert_eq!(
        engine.recall(&format!("rc_{}", "0".repeat(32))),
        Err(RecallError::Disabled)
    );
}

async fn get(app: axum::Router, path: &str) -> (StatusCode, Value) {
    let req = Request::get(path).body(Body::empty()).unwrap();
    let (status, _, bytes) = call(app, req).await;
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn the_service_answers_200_404_and_400_and_an_evicted_id_as_an_unknown_one() {
    let input = history(20);
    let st = state(settings(0));
    let (status, body) = post_json(
        app(st.clone()),
        "/v1/compact",
        &json!({"request": input, "budget": 4000, "strategy": "microcompact"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let refs = body["report"]["recall"].as_array().unwrap();
    assert!(!refs.is_empty());
    for r in refs {
        let id = r["id"].as_str().unwrap();
        let (status, got) = get(app(st.clone()), &format!("/v1/recall/{id}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(got["id"], id);
        assert_eq!(got["kind"], "block");
        assert_eq!(
            got["original"].to_string(),
            at(&input, r["path"].as_str().unwrap()).to_string()
        );
    }
    let zero = format!("rc_{}", "0".repeat(32));
    let (status, unknown) = get(app(st.clone()), &format!("/v1/recall/{zero}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(unknown["error"]["code"], "unknown_recall_id");
    // The message names no id: every unknown id gets the very same body.
    assert!(!unknown.to_string().contains("rc_"), "{unknown}");
    let (status, err) = get(app(st.clone()), "/v1/recall/rc_12").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(err["error"]["code"], "malformed_recall_id");
    // Near misses are answered here, never passed through to an upstream.
    for path in [
        "/v1/recall".to_string(),
        "/v1/recall/".to_string(),
        format!("/v1/recall/{zero}/"),
        format!("/v1/recall//{zero}"),
        format!("/v1/recall/{zero}/extra"),
    ] {
        let (status, err) = get(app(st.clone()), &path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {err}");
        assert_eq!(err["error"]["code"], "malformed_recall_id", "{path}");
    }

    // A store with room for about two results evicts the others: answered exactly as an
    // unknown id is (no membership outlives the content).
    let mut small = settings(0);
    small.recall.max_bytes = 3000;
    let st = state(small);
    let (_, body) = post_json(
        app(st.clone()),
        "/v1/compact",
        &json!({"request": input, "budget": 4000, "strategy": "microcompact"}),
    )
    .await;
    let mut gone = 0;
    for r in body["report"]["recall"].as_array().unwrap() {
        let id = r["id"].as_str().unwrap();
        let (status, got) = get(app(st.clone()), &format!("/v1/recall/{id}")).await;
        match status {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => {
                assert_eq!(got, unknown);
                gone += 1;
            }
            other => panic!("{id}: {other} {got}"),
        }
    }
    assert!(gone >= 8, "{gone}");
    let (_, metrics) = {
        let req = Request::get("/metrics").body(Body::empty()).unwrap();
        let (s, _, b) = call(app(st.clone()), req).await;
        (s, String::from_utf8(b.to_vec()).unwrap())
    };
    let line = metrics
        .lines()
        .find(|l| l.starts_with("compactor_recall_evictions_total"))
        .unwrap();
    assert_eq!(line, format!("compactor_recall_evictions_total {gone}"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    /// Every id a compaction writes recalls to the JSON it replaced, whatever the history's
    /// length and budget.
    #[test]
    fn every_written_id_recalls_to_what_it_replaced(
        rounds in 6usize..24,
        budget in 1500usize..6000,
        strategy in prop::sample::select(vec!["default", "truncate", "microcompact"]),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let input = history(rounds);
        let engine = Compactor::from_config(preset(strategy)).unwrap();
        let (_, refs) = rt.block_on(compact(&engine, &input, budget));
        for r in &refs {
            let got = engine.recall(&r.id).unwrap();
            match r.kind {
                RecallKind::Block => {
                    prop_assert_eq!(got.original.to_string(), at(&input, &r.path).to_string());
                }
                // A span dropped after an earlier tier cleared some of its results holds their
                // placeholders: each recalls the input's block in turn.
                RecallKind::Span => {
                    let given = &input["messages"].as_array().unwrap()[r.message..r.end];
                    let back = got.original.as_array().unwrap();
                    prop_assert_eq!(back.len(), given.len());
                    for (b, g) in back.iter().zip(given) {
                        if b == g {
                            continue;
                        }
                        for (cb, cg) in b["content"].as_array().unwrap().iter()
                            .zip(g["content"].as_array().unwrap())
                        {
                            if cb == cg {
                                continue;
                            }
                            let text = cb["content"].to_string();
                            let at_id = text.find("recall rc_").unwrap() + "recall ".len();
                            let id = &text[at_id..at_id + 35];
                            let inner = engine.recall(id).unwrap();
                            prop_assert_eq!(inner.original.to_string(), cg.to_string());
                        }
                    }
                }
            }
        }
    }
}

#[tokio::test]
async fn a_block_truncate_caps_names_a_recall_id_that_gives_the_whole_block_back() {
    // One tool result far over truncate's cap, in the newest round (kept, so capped).
    let mut input = history(2);
    let big: String = (0..400)
        .map(|k| format!("line {k}: fn body_{k}() {{ compute({k}) }}\n"))
        .collect();
    let msgs = input["messages"].as_array_mut().unwrap();
    let last_result = msgs
        .iter_mut()
        .rev()
        .find(|m| m["content"][0]["type"] == "tool_result")
        .unwrap();
    last_result["content"][0]["content"] = json!(big);
    let engine = Compactor::from_config(preset("truncate")).unwrap();
    let (output, refs) = compact(&engine, &input, 3000).await;
    // Every capped block (the big one, and the smaller results over the target's cap).
    let capped: Vec<&RecallRef> = refs
        .iter()
        .filter(|r| r.kind == RecallKind::Block)
        .collect();
    assert!(!capped.is_empty(), "{refs:?}");
    for r in &capped {
        let text = at(&output, &r.path)["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            text.contains(&format!("tokens truncated …] · recall {}", r.id)),
            "{text}"
        );
        assert_eq!(engine.recall(&r.id).unwrap().original, *at(&input, &r.path));
    }
    let r = capped
        .iter()
        .find(|r| r.bytes > big.len())
        .unwrap_or_else(|| panic!("{refs:?}"));
    let got = engine.recall(&r.id).unwrap();
    assert_eq!(got.original, *at(&input, &r.path));
    assert_eq!(got.original["content"], json!(big));
}
