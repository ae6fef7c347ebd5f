//! What a compaction leaves alone outside the history it shortens, checked on every output
//! beside [`super::check_compaction`]:
//! - the envelope: every top-level field other than the history (`tools`, `model`,
//!   `tool_choice`, `metadata`, deferred tools, MCP tool lists, ...) byte-identical, so the
//!   provider's prompt cache and tool definitions survive (Anthropic "Prompt caching": the cache
//!   prefix is tools, then system, then messages; OpenAI "Prompt caching": exact prefix match).
//!   The one exception: when the input held more than 4 `cache_control` breakpoints,
//!   [`settle`] may have taken surplus ones off `tools`;
//! - the latest provider compaction item of the input (see [`super::refs`]), byte-identical;
//! - no more `cache_control` breakpoints than the input had, but for compactor's own at the end
//!   of the prefix it kept ([`cache::kept_prefix_end`]), within the limit of 4.

use super::cache;
use super::refs::is_compaction;
use super::violation::{Violation, ViolationKind};
use crate::conversation::{Block, Conversation};
use crate::format::Format;

/// Makes a compaction output meet the request-wide rules a strategy does not see: for
/// Anthropic, at most 4 `cache_control` breakpoints and none on an empty text block
/// (`cache::fit`). Called by the pipeline on every strategy output before it is checked;
/// returns the breakpoints removed so the report can say so.
pub fn settle(format: Format, output: &mut Conversation) -> Vec<cache::RemovedBreakpoint> {
    match format {
        Format::Anthropic => cache::fit(output),
        _ => Vec::new(),
    }
}

/// Gives a continuation (`output`: a remembered compaction and the new messages) the envelope
/// of the request it answers (`input`) where the two are equal by value: the client's own
/// bytes and key order of each top-level field and of the system prompt, in the client's field
/// order. A client may build its envelope afresh for every request with its keys in another
/// order (Codex's `client_metadata`, a map); the memory continues across that ([`crate::memory`]
/// keys envelopes by value) and the provider gets what the client sent this turn. A field
/// whose value differs (a breakpoint [`settle`] took off `tools`) stays as the output has it.
pub fn take_client_envelope(output: &mut Conversation, input: &Conversation) {
    use serde_json::Value;
    // Equal (by value, as `Value`'s `==` compares objects) and in the same key order.
    fn same_order(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|((k, v), (l, w))| k == l && same_order(v, w))
            }
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_order(v, w))
            }
            _ => a == b,
        }
    }
    let in_order = output.extra.keys().eq(input.extra.keys());
    if in_order {
        for (k, v) in &input.extra {
            if let Some(o) = output.extra.get_mut(k)
                && o == v
                && !same_order(o, v)
            {
                *o = v.clone();
            }
        }
    } else {
        let mut fields = crate::conversation::Object::new();
        for (k, v) in &input.extra {
            if let Some(o) = output.extra.get(k) {
                let take = if o == v { v } else { o };
                fields.insert(k.clone(), take.clone());
            }
        }
        for (k, v) in &output.extra {
            if !fields.contains_key(k) {
                fields.insert(k.clone(), v.clone());
            }
        }
        output.extra = fields;
    }
    if let (Some(o), Some(i)) = (&output.system, &input.system)
        && o == i
        && !same_order(o, i)
    {
        output.system.clone_from(&input.system);
    }
}

/// Whether `after` holds a breakpoint on the last block of the prefix it kept of `before`
/// that `before` has not: what [`cache::mark_kept_prefix`] adds.
fn own_breakpoint(before: &Conversation, after: &Conversation) -> bool {
    let before_sites = cache::sites(before);
    cache::sites_from(after, 0).into_iter().any(|site| {
        let mut unmarked = after.clone();
        cache::remove(&mut unmarked, site);
        !before_sites.contains(&site) && cache::kept_prefix_end(before, &unmarked) == Some(site)
    })
}

/// Compares a compaction's output with its input (see the module docs) and returns what it
/// failed to keep, located at the top level (`$.tools`) or at the output message.
pub fn check_envelope(
    before: &Conversation,
    after: &Conversation,
    format: Format,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut push = |path: String, kind| {
        out.push(Violation {
            path,
            message: None,
            block: None,
            kind,
            rule: None,
        })
    };
    let (n_before, n_after) = match format {
        Format::Anthropic => (cache::count(before), cache::count(after)),
        _ => (0, 0),
    };
    let surplus = n_before > cache::MAX_BREAKPOINTS;
    let keys = before.extra.keys().chain(after.extra.keys());
    let mut seen = foldhash::HashSet::default();
    for key in keys {
        if !seen.insert(key) {
            continue;
        }
        let (a, b) = (before.extra.get(key), after.extra.get(key));
        let same = a == b
            || (surplus
                && key == "tools"
                && a.map(cache::without_breakpoints) == b.map(cache::without_breakpoints));
        if !same {
            push(
                format!("$.{key}"),
                ViolationKind::EnvelopeChanged { key: key.clone() },
            );
        }
    }
    // Compactor's own breakpoint at the end of the prefix it kept ([`cache::kept_prefix_end`]):
    // one more than the input had, within the limit, on a kept block.
    let own = n_after == n_before + 1
        && n_after <= cache::MAX_BREAKPOINTS
        && format == Format::Anthropic
        && own_breakpoint(before, after);
    if n_after > n_before && !own {
        push(
            "$".into(),
            ViolationKind::CacheBreakpointsAdded {
                before: n_before,
                after: n_after,
            },
        );
    }
    let kept: Vec<&Block> = after
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter(|b| is_compaction(format.rules(), b))
        .collect();
    // The latest one: the provider ignores what precedes it, earlier ones included (A9, B3).
    let lost = before
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .rfind(|b| is_compaction(format.rules(), b))
        .is_some_and(|b| !kept.contains(&b));
    if lost {
        push(
            format.messages_key().to_string(),
            ViolationKind::CompactionItemLost,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_changed_tool_list_or_a_lost_compaction_item_is_reported() {
        let body = json!({"model": "m", "tools": [{"name": "a"}], "input": [
            {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA"},
            {"role": "user", "content": "hi"}
        ]});
        let before = Format::OpenAiResponses.read(&body).unwrap();
        assert_eq!(
            check_envelope(&before, &before, Format::OpenAiResponses),
            vec![]
        );
        let mut after = before.clone();
        after.extra.insert("tools".into(), json!([]));
        after.messages.remove(0);
        let kinds: Vec<ViolationKind> = check_envelope(&before, &after, Format::OpenAiResponses)
            .into_iter()
            .map(|v| v.kind)
            .collect();
        assert_eq!(
            kinds,
            vec![
                ViolationKind::EnvelopeChanged {
                    key: "tools".into()
                },
                ViolationKind::CompactionItemLost
            ]
        );
    }

    #[test]
    fn a_continuation_goes_out_with_the_clients_envelope_bytes() {
        // The remembered output's envelope: the same values, keys in another order, plus a
        // tools list whose surplus breakpoint was taken off.
        let remembered = json!({"model": "m",
            "client_metadata": {"turn_id": "t", "session_id": "s", "n": {"b": 1, "a": 2}},
            "tools": [{"name": "a"}],
            "input": [{"role": "user", "content": "hi"}]});
        let client = json!({"client_metadata": {"session_id": "s", "n": {"a": 2, "b": 1}, "turn_id": "t"},
            "model": "m",
            "tools": [{"name": "a", "cache_control": {"type": "ephemeral"}}],
            "input": [{"role": "user", "content": "hi"}]});
        let f = Format::OpenAiResponses;
        let mut out = f.read(&remembered).unwrap();
        let input = f.read(&client).unwrap();
        take_client_envelope(&mut out, &input);
        let written = serde_json::to_string(&f.write(&out)).unwrap();
        // The client's field order and bytes where equal by value; the output's own tools.
        assert_eq!(
            written,
            r#"{"client_metadata":{"session_id":"s","n":{"a":2,"b":1},"turn_id":"t"},"model":"m","tools":[{"name":"a"}],"input":[{"role":"user","content":"hi"}]}"#
        );
        // A value that differs is never taken from the input.
        let other = f
            .read(&json!({"model": "n", "input": [{"role": "user", "content": "hi"}]}))
            .unwrap();
        let mut out = f.read(&remembered).unwrap();
        take_client_envelope(&mut out, &other);
        assert_eq!(f.write(&out)["model"], "m");
    }
}
