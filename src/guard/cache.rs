//! Anthropic prompt-cache breakpoints (`cache_control`): how many a request holds, where, and
//! how a compaction output is brought back to the provider's limit.
//!
//! Rules (Anthropic docs, "Prompt caching": up to 4 cache breakpoints per request; error texts
//! `A maximum of 4 blocks with cache_control may be provided. Found N.` and `cache_control cannot
//! be set for empty text blocks`). Breakpoints sit on `tools[i]`, on `system` text blocks and on
//! content blocks of messages (also on blocks nested in a `tool_result`).

use crate::conversation::{Block, Conversation, ToolResultContent};
use serde_json::Value;

/// The most `cache_control` breakpoints one Anthropic request may hold.
pub const MAX_BREAKPOINTS: usize = 4;

const KEY: &str = "cache_control";

/// Where a breakpoint sits, in the request's own terms. Exhaustive on purpose: these are the
/// three places the Anthropic "Prompt caching" docs allow `cache_control` (tools, system,
/// messages), and a caller rendering or repairing a site must handle each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// `tools[i]`.
    Tool(usize),
    /// `system[i]` (a text block of an array system prompt).
    System(usize),
    /// `messages[message].content[block]`, or a block nested in that tool_result's content.
    Block {
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
        /// Index inside the tool_result's content, for a nested block.
        nested: Option<usize>,
    },
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Site::Tool(i) => write!(f, "tools[{i}]"),
            Site::System(i) => write!(f, "system[{i}]"),
            Site::Block {
                message,
                block,
                nested: None,
            } => write!(f, "messages[{message}].content[{block}]"),
            Site::Block {
                message,
                block,
                nested: Some(k),
            } => write!(f, "messages[{message}].content[{block}].content[{k}]"),
        }
    }
}

/// A breakpoint that [`fit`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedBreakpoint {
    /// Where it was.
    pub site: Site,
    /// Breakpoints in the request before [`fit`] ran.
    pub found: usize,
}

impl std::fmt::Display for RemovedBreakpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "removed cache_control from {}: the request held {} breakpoints, the Anthropic API takes at most {MAX_BREAKPOINTS}",
            self.site, self.found
        )
    }
}

fn has_key(v: &Value) -> bool {
    v.get(KEY).is_some()
}

fn block_has(b: &Block) -> bool {
    match b {
        Block::Text(t) => t.extra.contains_key(KEY),
        Block::ToolUse(t) => t.extra.contains_key(KEY),
        Block::ToolResult(r) => r.extra.contains_key(KEY),
        Block::Thinking(v) | Block::Image(v) | Block::Document(v) | Block::Other(v) => has_key(v),
    }
}

/// Every breakpoint of the request, in prefix order (tools, system, messages).
pub fn sites(c: &Conversation) -> Vec<Site> {
    let mut out = Vec::new();
    if let Some(Value::Array(tools)) = c.tools() {
        out.extend(
            (0..tools.len())
                .filter(|&i| has_key(&tools[i]))
                .map(Site::Tool),
        );
    }
    if let Some(Value::Array(system)) = &c.system {
        out.extend(
            (0..system.len())
                .filter(|&i| has_key(&system[i]))
                .map(Site::System),
        );
    }
    out.extend(sites_from(c, 0));
    out
}

/// The breakpoints of messages `from..` only, in order (what a continuation adds to the
/// breakpoints of a prefix it already counted).
pub fn sites_from(c: &Conversation, from: usize) -> Vec<Site> {
    let mut out = Vec::new();
    let blocks = c
        .messages
        .iter()
        .enumerate()
        .skip(from)
        .flat_map(|(i, m)| m.content.iter().enumerate().map(move |(j, b)| (i, j, b)));
    for (message, block, b) in blocks {
        if block_has(b) {
            out.push(Site::Block {
                message,
                block,
                nested: None,
            });
        }
        if let Block::ToolResult(r) = b
            && let Some(ToolResultContent::Blocks(bs)) = &r.content
        {
            for (k, nb) in bs.iter().enumerate() {
                if block_has(nb) {
                    out.push(Site::Block {
                        message,
                        block,
                        nested: Some(k),
                    });
                }
            }
        }
    }
    out
}

/// The number of breakpoints in the request.
pub fn count(c: &Conversation) -> usize {
    sites(c).len()
}

/// Whether breakpoint `s` sits on an empty (or whitespace-only) text block (for a caller that
/// already holds the request's [`sites`] and filters them without scanning again).
pub fn on_empty(c: &Conversation, s: &Site) -> bool {
    match *s {
        Site::Block {
            message,
            block,
            nested,
        } => {
            let b = c.messages.get(message).and_then(|m| m.content.get(block));
            let b = match (b, nested) {
                (Some(Block::ToolResult(r)), Some(k)) => match &r.content {
                    Some(ToolResultContent::Blocks(bs)) => bs.get(k),
                    _ => None,
                },
                (b, _) => b,
            };
            matches!(b, Some(Block::Text(t)) if t.text.trim().is_empty())
        }
        Site::System(i) => c
            .system
            .as_ref()
            .and_then(|s| s.get(i))
            .and_then(|b| b.get("text"))
            .and_then(Value::as_str)
            .is_some_and(|t| t.trim().is_empty()),
        Site::Tool(_) => false,
    }
}

/// Brings a compaction output back to at most [`MAX_BREAKPOINTS`] breakpoints and takes every
/// breakpoint off an empty text block. Surplus breakpoints go in this order: those in history
/// messages other than the newest one, newest first (a continuation carries the one the client
/// put on its newest message last turn, which the newest message's breakpoint reads through
/// the provider's lookback; an older one, such as compactor's own at the end of the prefix a
/// re-compaction keeps ([`kept_prefix_end`]), marks a prefix more requests share), then
/// `tools`, then `system`, oldest first (a later breakpoint's cached prefix covers them), then
/// the newest message. Returns what was removed, for the report; a request within the limit is
/// left as it is.
pub fn fit(c: &mut Conversation) -> Vec<RemovedBreakpoint> {
    let all = sites(c);
    let found = all.len();
    let mut doomed: Vec<Site> = all.iter().filter(|s| on_empty(c, s)).copied().collect();
    let keep_room = found - doomed.len();
    if keep_room > MAX_BREAKPOINTS {
        let last = c.messages.len().saturating_sub(1);
        let rank = |s: &Site| match s {
            Site::Block { message, .. } if *message < last => 0,
            Site::Tool(_) => 1,
            Site::System(_) => 2,
            Site::Block { .. } => 3,
        };
        let mut rest: Vec<Site> = all.into_iter().filter(|s| !doomed.contains(s)).collect();
        let newest_first = |s: &Site| match s {
            Site::Block { message, .. } if *message < last => std::cmp::Reverse(*message),
            _ => std::cmp::Reverse(0),
        };
        rest.sort_by_key(|s| (rank(s), newest_first(s)));
        doomed.extend(rest.into_iter().take(keep_room - MAX_BREAKPOINTS));
    }
    for s in &doomed {
        remove(c, *s);
    }
    doomed
        .into_iter()
        .map(|site| RemovedBreakpoint { site, found })
        .collect()
}

/// Compactor's own breakpoint on a compaction `output` of `input`: the last block of the
/// output's longest prefix of messages identical to the input's (`cache_control` aside): for
/// a client whose first user message holds its standing context, the blocks before the
/// compaction marker. Every re-compaction keeps them, so their prefix (tools, system, those
/// blocks) is read from the cache instead of written again at 1.25x (Anthropic "Prompt
/// caching": a cache hit is checked at each breakpoint; writes cost 1.25x, reads 0.1x of the
/// input price). A breakpoint does not change the cached prefix, and the prefix it marks is
/// written by the request anyway (it precedes the client's own last breakpoint), so it costs
/// nothing more.
///
/// `None` (nothing to mark) when the input has no breakpoint (the client did not ask for
/// caching), the output already holds [`MAX_BREAKPOINTS`], no block is kept before the first
/// change, the kept prefix reaches the output's last message (nothing was compacted before
/// it), or its last block cannot carry `cache_control` (a thinking block, an empty text, a
/// block type compactor does not know: kept byte-identical).
pub fn kept_prefix_end(input: &Conversation, output: &Conversation) -> Option<Site> {
    if count(input) == 0 || count(output) >= MAX_BREAKPOINTS {
        return None;
    }
    let same = |a: &Block, b: &Block| {
        a == b || {
            let (mut a, mut b) = (a.clone(), b.clone());
            unmark(&mut a);
            unmark(&mut b);
            a == b
        }
    };
    let mut last = None;
    'messages: for (i, (a, b)) in input.messages.iter().zip(&output.messages).enumerate() {
        if a.role != b.role {
            break;
        }
        for (j, (x, y)) in a.content.iter().zip(&b.content).enumerate() {
            if !same(x, y) {
                break 'messages;
            }
            last = Some((i, j));
        }
        if a.content.len() != b.content.len() || a.extra != b.extra || a.form != b.form {
            break;
        }
    }
    let (message, block) = last?;
    if message + 1 >= output.messages.len() {
        return None;
    }
    let b = output.messages.get(message)?.content.get(block)?;
    let takes = match b {
        Block::Text(t) => !t.text.trim().is_empty(),
        Block::ToolUse(_) | Block::ToolResult(_) | Block::Image(_) | Block::Document(_) => true,
        Block::Thinking(_) | Block::Other(_) => false,
    };
    (takes && !block_has(b)).then_some(Site::Block {
        message,
        block,
        nested: None,
    })
}

/// Puts compactor's own breakpoint ([`kept_prefix_end`]) on `output`; returns where, `None`
/// when there is nothing to mark. Its `cache_control` is a copy of the client's next one in
/// prompt order (else of the client's last one): the same TTL as the breakpoint after it, so
/// a longer TTL never follows a shorter one (Anthropic "Prompt caching", mixing TTLs), and
/// any other key the client sets (a `scope`) kept.
pub fn mark_kept_prefix(input: &Conversation, output: &mut Conversation) -> Option<Site> {
    let site = kept_prefix_end(input, output)?;
    let Site::Block { message, block, .. } = site else {
        return None;
    };
    let order = |s: &Site| match s {
        Site::Tool(i) => (0, *i, 0, 0),
        Site::System(i) => (1, *i, 0, 0),
        Site::Block {
            message,
            block,
            nested,
        } => (2, *message, *block, nested.map_or(0, |k| k + 1)),
    };
    let all = sites(output);
    let next = all.iter().find(|s| order(s) > order(&site)).or(all.last());
    let mark = next
        .and_then(|s| value_at(output, *s))
        .unwrap_or_else(|| serde_json::json!({"type": "ephemeral"}));
    let b = output.messages.get_mut(message)?.content.get_mut(block)?;
    match b {
        Block::Text(t) => {
            t.extra.insert(KEY.into(), mark);
        }
        Block::ToolUse(t) => {
            t.extra.insert(KEY.into(), mark);
        }
        Block::ToolResult(r) => {
            r.extra.insert(KEY.into(), mark);
        }
        Block::Image(v) | Block::Document(v) => {
            v.as_object_mut()?.insert(KEY.into(), mark);
        }
        Block::Thinking(_) | Block::Other(_) => return None,
    }
    Some(site)
}

/// Removes every breakpoint of messages `..upto` (their blocks and the blocks nested in their
/// tool results) and returns how many: a compaction that rewrites those messages rewrites the
/// prefix they mark, so their breakpoints mark nothing the provider has cached.
pub fn remove_before(c: &mut Conversation, upto: usize) -> usize {
    let doomed: Vec<Site> = sites_from(c, 0)
        .into_iter()
        .filter(|s| matches!(s, Site::Block { message, .. } if *message < upto))
        .collect();
    for s in &doomed {
        remove(c, *s);
    }
    doomed.len()
}

/// The `cache_control` value at `site`, when there is one.
fn value_at(c: &Conversation, site: Site) -> Option<Value> {
    let of_block = |b: &Block| -> Option<Value> {
        match b {
            Block::Text(t) => t.extra.get(KEY).cloned(),
            Block::ToolUse(t) => t.extra.get(KEY).cloned(),
            Block::ToolResult(r) => r.extra.get(KEY).cloned(),
            Block::Thinking(v) | Block::Image(v) | Block::Document(v) | Block::Other(v) => {
                v.get(KEY).cloned()
            }
        }
    };
    match site {
        Site::Tool(i) => c.tools()?.get(i)?.get(KEY).cloned(),
        Site::System(i) => c.system.as_ref()?.get(i)?.get(KEY).cloned(),
        Site::Block {
            message,
            block,
            nested,
        } => {
            let b = c.messages.get(message)?.content.get(block)?;
            match (b, nested) {
                (Block::ToolResult(r), Some(k)) => match &r.content {
                    Some(ToolResultContent::Blocks(bs)) => of_block(bs.get(k)?),
                    _ => None,
                },
                (b, _) => of_block(b),
            }
        }
    }
}

/// Takes `cache_control` off one block (not off blocks nested in a tool_result).
fn unmark(b: &mut Block) {
    match b {
        Block::Text(t) => {
            t.extra.shift_remove(KEY);
        }
        Block::ToolUse(t) => {
            t.extra.shift_remove(KEY);
        }
        Block::ToolResult(r) => {
            r.extra.shift_remove(KEY);
        }
        Block::Thinking(v) | Block::Image(v) | Block::Document(v) | Block::Other(v) => {
            if let Some(o) = v.as_object_mut() {
                o.shift_remove(KEY);
            }
        }
    }
}

/// Takes the breakpoint at `site` off `c` (nothing when there is none).
pub(crate) fn remove(c: &mut Conversation, site: Site) {
    let from_block = unmark;
    match site {
        Site::Tool(i) => {
            if let Some(o) = c
                .extra
                .get_mut("tools")
                .and_then(|t| t.get_mut(i))
                .and_then(Value::as_object_mut)
            {
                o.shift_remove(KEY);
            }
        }
        Site::System(i) => {
            if let Some(o) = c
                .system
                .as_mut()
                .and_then(|s| s.get_mut(i))
                .and_then(Value::as_object_mut)
            {
                o.shift_remove(KEY);
            }
        }
        Site::Block {
            message,
            block,
            nested,
        } => {
            let Some(b) = c
                .messages
                .get_mut(message)
                .and_then(|m| m.content.get_mut(block))
            else {
                return;
            };
            match (b, nested) {
                (Block::ToolResult(r), Some(k)) => {
                    if let Some(ToolResultContent::Blocks(bs)) = &mut r.content
                        && let Some(nb) = bs.get_mut(k)
                    {
                        from_block(nb);
                    }
                }
                (b, _) => from_block(b),
            }
        }
    }
}

/// A copy of `v` without any `cache_control` key at any depth (to compare envelopes whose only
/// difference is a removed breakpoint).
pub(crate) fn without_breakpoints(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| k.as_str() != KEY)
                .map(|(k, x)| (k.clone(), without_breakpoints(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_breakpoints).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use serde_json::json;

    fn text(t: &str) -> Value {
        json!({"type": "text", "text": t, "cache_control": {"type": "ephemeral"}})
    }

    #[test]
    fn fit_drops_history_then_tools_first_and_keeps_the_newest_message() {
        let body = json!({
            "system": [text("sys")],
            "tools": [{"name": "t", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [text("old")]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [text("a"), text("b"), text("c")]}
            ]
        });
        let mut conv = Format::Anthropic.read(&body).unwrap();
        assert_eq!(count(&conv), 6);
        let removed: Vec<Site> = fit(&mut conv).into_iter().map(|r| r.site).collect();
        assert_eq!(
            removed,
            vec![
                Site::Block {
                    message: 0,
                    block: 0,
                    nested: None
                },
                Site::Tool(0)
            ]
        );
        assert_eq!(count(&conv), 4);
        assert_eq!(conv.system, body.get("system").cloned());
        assert_eq!(
            Format::Anthropic.write(&conv)["messages"][2],
            body["messages"][2]
        );
        // Within the limit: nothing moves.
        assert_eq!(fit(&mut conv), vec![]);
    }

    #[test]
    fn a_breakpoint_on_an_empty_text_block_is_found_and_removed() {
        let body = json!({"messages": [{"role": "user", "content": [text(" "), text("x")]}]});
        let mut conv = Format::Anthropic.read(&body).unwrap();
        let empty = Site::Block {
            message: 0,
            block: 0,
            nested: None,
        };
        assert_eq!(
            fit(&mut conv),
            vec![RemovedBreakpoint {
                site: empty,
                found: 2
            }]
        );
        assert_eq!(count(&conv), 1);
    }
}

#[cfg(test)]
#[path = "cache_prefix_tests.rs"]
mod prefix_tests;
