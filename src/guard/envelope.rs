//! What a compaction leaves alone outside the history it shortens, checked on every output
//! beside [`super::check_compaction`]:
//! - the envelope: every top-level field other than the history (`tools`, `model`,
//!   `tool_choice`, `metadata`, deferred tools, MCP tool lists, ...) byte-identical, so the
//!   provider's prompt cache and tool definitions survive (Anthropic "Prompt caching": the cache
//!   prefix is tools, then system, then messages; OpenAI "Prompt caching": exact prefix match).
//!   The one exception: when the input held more than 4 `cache_control` breakpoints,
//!   [`settle`] may have taken surplus ones off `tools`;
//! - the latest provider compaction item of the input (see [`super::refs`]), byte-identical;
//! - no more `cache_control` breakpoints than the input had.

use super::cache;
use super::refs::is_compaction;
use super::violation::{Violation, ViolationKind};
use crate::conversation::{Block, Conversation};
use crate::format::Format;

/// Makes a compaction output meet the request-wide rules a strategy does not see: for
/// Anthropic, at most 4 `cache_control` breakpoints and none on an empty text block
/// ([`cache::fit`]). Called by the pipeline on every strategy output before it is checked;
/// returns the breakpoints removed so the report can say so.
pub fn settle(format: Format, output: &mut Conversation) -> Vec<cache::RemovedBreakpoint> {
    match format {
        Format::Anthropic => cache::fit(output),
        _ => Vec::new(),
    }
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
    if n_after > n_before {
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
}
