//! Compactor's own breakpoint at the end of the prefix a compaction kept, and which surplus
//! breakpoint a continuation gives up.

use super::*;
use crate::format::Format;
use crate::guard::{ViolationKind, check_envelope};
use serde_json::{Value, json};

fn read(body: &Value) -> Conversation {
    Format::Anthropic.read(body).unwrap()
}

fn at(message: usize, block: usize) -> Site {
    Site::Block {
        message,
        block,
        nested: None,
    }
}

fn hour() -> Value {
    json!({"type": "ephemeral", "ttl": "1h"})
}

/// A Claude Code-like input: a first user message of context and the request, three rounds,
/// the client's breakpoints on a system block and on the newest message.
fn input() -> Value {
    json!({
        "system": [{"type": "text", "text": "you are an agent", "cache_control": hour()}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>cwd: /w</system-reminder>"},
                {"type": "text", "text": "fix the tests"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "make"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "ok", "cache_control": hour()}]}
        ]
    })
}

/// What a drop of the first round makes of it: the first message's blocks, then a marker.
fn compacted() -> Value {
    let mut out = input();
    let msgs = out["messages"].as_array_mut().unwrap();
    msgs[0]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "text", "text": "[marker] 2 earlier messages"}));
    msgs.drain(1..3);
    out
}

#[test]
fn the_last_kept_block_before_the_marker_gets_the_clients_next_breakpoint() {
    let before = read(&input());
    let mut after = read(&compacted());
    assert_eq!(kept_prefix_end(&before, &after), Some(at(0, 1)));
    assert_eq!(mark_kept_prefix(&before, &mut after), Some(at(0, 1)));
    let written = Format::Anthropic.write(&after);
    // A copy of the breakpoint after it (the newest message's, 1h): TTLs never go up.
    assert_eq!(
        written["messages"][0]["content"][1]["cache_control"],
        hour()
    );
    assert_eq!(
        written["messages"][0]["content"][1]["text"],
        "fix the tests"
    );
    assert!(
        written["messages"][0]["content"][2]
            .get("cache_control")
            .is_none()
    );
    assert_eq!(count(&after), 3);
    // The guard takes exactly this one added breakpoint ...
    assert_eq!(check_envelope(&before, &after, Format::Anthropic), vec![]);
    // ... and no other: one on the marker is refused.
    let mut elsewhere = read(&compacted());
    elsewhere.messages[0].content[2] = Block::text("[marker] 2 earlier messages");
    if let Block::Text(t) = &mut elsewhere.messages[0].content[2] {
        t.extra.insert("cache_control".into(), hour());
    }
    let v = check_envelope(&before, &elsewhere, Format::Anthropic);
    assert!(
        v.iter().any(|v| matches!(
            v.kind,
            ViolationKind::CacheBreakpointsAdded {
                before: 2,
                after: 3
            }
        )),
        "{v:?}"
    );
}

#[test]
fn nothing_is_marked_without_a_client_breakpoint_at_the_limit_or_on_a_thinking_block() {
    // The client did not ask for caching.
    let mut plain = input();
    plain["system"][0]
        .as_object_mut()
        .unwrap()
        .remove("cache_control");
    plain["messages"][4]["content"][0]
        .as_object_mut()
        .unwrap()
        .remove("cache_control");
    let mut out = compacted();
    out["system"] = plain["system"].clone();
    out["messages"][2] = plain["messages"][4].clone();
    assert_eq!(mark_kept_prefix(&read(&plain), &mut read(&out)), None);
    // Four already: the limit.
    let mut full = input();
    for k in 0..3 {
        full["system"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "text", "text": format!("s{k}"), "cache_control": hour()}));
    }
    let mut out = compacted();
    out["system"] = full["system"].clone();
    assert_eq!(count(&read(&out)), 5);
    assert_eq!(kept_prefix_end(&read(&full), &read(&out)), None);
    // The kept prefix ends on a thinking block: it cannot carry cache_control.
    let mut thinking = input();
    thinking["messages"][1]["content"] = json!([
        {"type": "thinking", "thinking": "hm", "signature": "c2ln"},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    ]);
    let mut out = thinking.clone();
    out["messages"][1]["content"]
        .as_array_mut()
        .unwrap()
        .truncate(1);
    out["messages"][1]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "text", "text": "cut"}));
    assert_eq!(kept_prefix_end(&read(&thinking), &read(&out)), None);
}

#[test]
fn a_continuation_over_the_limit_gives_up_the_newest_history_breakpoint_first() {
    // system, compactor's own (message 0), the client's of last turn (message 2), the
    // client's newest (message 4): five with the second system block.
    let mut body = input();
    body["system"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "text", "text": "more", "cache_control": hour()}));
    body["messages"][0]["content"][1]["cache_control"] = hour();
    body["messages"][2]["content"][0]["cache_control"] = hour();
    let mut conv = read(&body);
    assert_eq!(count(&conv), 5);
    let removed: Vec<Site> = fit(&mut conv).into_iter().map(|r| r.site).collect();
    assert_eq!(removed, vec![at(2, 0)]);
    assert!(sites(&conv).contains(&at(0, 1)));
    assert!(sites(&conv).contains(&at(4, 0)));
}
