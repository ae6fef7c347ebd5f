//! What a drop keeps or carries: the rule table's *carry* rules ([`crate::rules::Carry`]).
//!
//! ```text
//! drop of messages pinned..to ->  marker (user)          the client's context blocks of the span's
//!                                                        user messages, then the digest / summary
//!                                 kept, in order          units the table does not know, tool
//!                                                        loaders still used, (OpenAI) standing
//!                                                        instruction and state items
//!                                 tail to..               as it was
//!                                 + one system message    (Anthropic) the span's standing system
//!                                                        messages, tool changes and last effort,
//!                                                        at the first slot after the marker where
//!                                                        a system message may stand (A1.2, A1.3)
//! ```
//!
//! Computed by [`Layout::carry`] for a candidate cut (a strategy prices it, [`super::apply`]
//! builds it), the same answer both times.

use super::context::ContextRules;
use super::layout::Layout;
use super::units::Slot;
use crate::conversation::{Block, ContentForm, Conversation, Message, Object, Role};
use crate::rules::{BlockKind, Carry, RoleKind, Unknown};
use serde::Serialize;
use serde_json::Value;

/// Why a message of a dropped span is kept in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "because", rename_all = "snake_case")]
pub enum Kept {
    /// It (or a message of its unit) holds a role or type the table does not know.
    Unknown {
        /// What.
        what: Unknown,
    },
    /// It loaded a deferred tool that a kept call uses.
    ToolLoader {
        /// The tool.
        tool: String,
    },
    /// A standing instruction (OpenAI system / developer message).
    Instruction,
    /// A tool change (Responses `additional_tools`).
    ToolChange,
    /// The last configuration directive (Responses `configuration_update`).
    Configuration,
    /// The latest provider compaction item (Anthropic `compaction` block, Responses
    /// `compaction` item): the provider's summary of all before it (A9, B3).
    ProviderCompaction,
}

/// What a drop of `pinned..to` keeps and carries ([`Layout::carry`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Carried {
    /// Messages of the span kept verbatim, in order, right after the marker (a Responses
    /// `compaction` item: right before it, B3), with why.
    pub kept: Vec<(usize, Kept)>,
    /// Anthropic: the one system message that carries the span's standing system messages
    /// (the message itself when there is one, else their blocks), and where it goes: before
    /// the `at`-th message after the marker (0 = right after it) of the kept messages followed
    /// by the tail.
    pub system: Option<(Message, usize)>,
    /// The input messages the system message carries.
    pub system_from: Vec<usize>,
    /// The client's context blocks of the span's user messages, newest of each kind, in input
    /// order, with the message each came from and its tag ([`ContextRules::tag_of`]): they
    /// open the marker message.
    pub context: Vec<(usize, String, Block)>,
}

impl Carried {
    /// Nothing kept or carried.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.system.is_none() && self.context.is_empty()
    }
}

/// Why no drop may end at a cut.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CarryError {
    /// The span's standing system messages have no slot after the marker: no user message of
    /// the kept tail is followed by an assistant message before the end (A1.2, A1.3).
    #[error(
        "no slot for the carried system message after the marker (a system message must follow a user turn and precede an assistant turn: A1.2, A1.3)"
    )]
    NoSystemSlot,
}

impl Layout {
    /// What a drop of messages `pinned..to` of `input` (whose layout this is) must keep in
    /// place and carry, by the carry rules of the format's table.
    ///
    /// # Errors
    /// `CarryError` when what must be carried cannot be placed legally after that cut.
    pub fn carry(&self, input: &Conversation, to: usize) -> Result<Carried, CarryError> {
        let table = self.format().rules();
        let pinned = self.pinned();
        let msgs = &input.messages;
        let to = to.min(msgs.len());
        let mut out = Carried::default();
        if to <= pinned {
            return Ok(out);
        }
        let mut kept: Vec<(usize, Kept)> = Vec::new();
        // Units the table does not know, and tool loaders still used after the cut.
        for &(s, e, ref what) in self.opaque_units() {
            if s >= pinned && e <= to {
                kept.extend((s..e).map(|i| (i, Kept::Unknown { what: what.clone() })));
            }
        }
        if let Some((s, e)) = self.provider_compaction()
            && s >= pinned
            && e <= to
            && !kept.iter().any(|k| k.0 == s)
        {
            kept.extend((s..e).map(|i| (i, Kept::ProviderCompaction)));
        }
        if table.carries(Carry::ToolLoader) {
            for (s, e, tool, last_use) in self.loaders() {
                if *s >= pinned && *e <= to && *last_use >= to && !kept.iter().any(|k| k.0 == *s) {
                    kept.extend((*s..*e).map(|i| (i, Kept::ToolLoader { tool: tool.clone() })));
                }
            }
        }
        let instructions: Vec<usize> = self
            .instructions()
            .iter()
            .copied()
            .take_while(|&i| i < to)
            .filter(|&i| !kept.iter().any(|k| k.0 == i))
            .collect();
        if self.format() == crate::format::Format::Anthropic {
            out.system = self
                .carried_system(input, &instructions, to)
                .map(|m| (m, 0));
        } else {
            for &i in &instructions {
                let m = &msgs[i];
                let why = match m.content.first().and_then(|b| table.kind_of_block(b)) {
                    Some(BlockKind::ToolChange) => Kept::ToolChange,
                    Some(BlockKind::Configuration) => {
                        // Only the last one in force: a later one in the span or the tail
                        // supersedes it.
                        let later = (i + 1..msgs.len()).any(|k| {
                            msgs[k].content.first().and_then(|b| table.kind_of_block(b))
                                == Some(BlockKind::Configuration)
                        });
                        if later {
                            continue;
                        }
                        Kept::Configuration
                    }
                    _ => {
                        // An identical instruction later (in the span or the tail) says it
                        // again: this copy may go.
                        if msgs[i + 1..].iter().any(|later| later == m) {
                            continue;
                        }
                        Kept::Instruction
                    }
                };
                kept.push((i, why));
            }
        }
        kept.sort_by_key(|k| k.0);
        kept.dedup_by_key(|k| k.0);
        out.kept = kept;
        if table.carries(Carry::ClientContext) {
            out.context = self.carried_context(input, &out.kept, to);
        }
        if let Some((system, _)) = out.system.take() {
            let at = system_slot(input, self, &out.kept, to, &system)?;
            out.system = Some((system, at));
            out.system_from = instructions;
        }
        Ok(out)
    }

    /// Anthropic: the one system message standing for the span's standing system messages
    /// (`instructions`, indices of the input), or `None` when nothing of them is still in force.
    fn carried_system(
        &self,
        input: &Conversation,
        instructions: &[usize],
        to: usize,
    ) -> Option<Message> {
        let msgs = &input.messages;
        // What the kept tail says itself: its system messages' blocks and whether one of them
        // sets the effort again.
        let tail_system: Vec<&Message> = msgs[to..]
            .iter()
            .filter(|m| m.role == Role::System)
            .collect();
        let tail_effort = tail_system
            .iter()
            .any(|m| m.extra.contains_key("output_config"));
        let standing: Vec<usize> = instructions
            .iter()
            .copied()
            .filter(|&i| !turn_scoped(&msgs[i]))
            .collect();
        let mut blocks: Vec<Block> = Vec::new();
        let mut effort: Option<Value> = None;
        let mut sources = 0usize;
        for &i in &standing {
            let m = &msgs[i];
            if let Some(oc) = m.extra.get("output_config") {
                effort = Some(oc.clone());
            }
            if !m.content.is_empty() {
                sources += 1;
            }
            blocks.extend(m.content.iter().cloned());
        }
        if tail_effort {
            effort = None;
        }
        // Deduplicated: a block said again later (in the span or the tail) goes here.
        let said_later = |k: usize, b: &Block| {
            blocks[k + 1..].iter().any(|x| same_block(x, b))
                || tail_system
                    .iter()
                    .any(|m| m.content.iter().any(|x| same_block(x, b)))
        };
        let deduped: Vec<Block> = blocks
            .iter()
            .enumerate()
            .filter(|(k, b)| !said_later(*k, b))
            .map(|(_, b)| b.clone())
            .collect();
        if deduped.is_empty() && effort.is_none() {
            return None;
        }
        // One message kept whole (its bytes, its output_config) when it alone is carried.
        if let [only] = standing.as_slice()
            && sources <= 1
            && deduped.len() == blocks.len()
            && (effort.is_none() || msgs[*only].extra.get("output_config") == effort.as_ref())
        {
            let m = &msgs[*only];
            if effort.is_some() || !m.content.is_empty() {
                return Some(m.clone());
            }
        }
        let mut extra = Object::new();
        if let Some(e) = effort {
            extra.insert("output_config".into(), e);
        }
        Some(Message {
            role: Role::System,
            content: deduped,
            extra,
            form: ContentForm::Blocks,
        })
    }

    /// The client's context blocks of the span's user messages (not kept ones): the newest of
    /// each kind that the kept tail does not say again; then the words of the current request
    /// when the span holds it ([`Layout::request_words`], tag [`REQUEST_TAG`]); in input order.
    fn carried_context(
        &self,
        input: &Conversation,
        kept: &[(usize, Kept)],
        to: usize,
    ) -> Vec<(usize, String, Block)> {
        let all = self.context_blocks();
        let split = all.partition_point(|c| c.0 < to);
        let (span, tail) = all.split_at(split);
        let span: Vec<&(usize, usize, String)> = span
            .iter()
            .filter(|c| c.0 >= self.pinned() && !kept.iter().any(|k| k.0 == c.0))
            .collect();
        let mut out: Vec<(usize, usize, String)> = span
            .iter()
            .enumerate()
            .filter(|(n, (_, _, kind))| {
                !tail.iter().any(|c| &c.2 == kind) && !span[n + 1..].iter().any(|c| &c.2 == kind)
            })
            .map(|(_, (i, j, kind))| (*i, *j, ContextRules::tag_of(kind).to_string()))
            .collect();
        if let Some((r, blocks)) = self.request_words(input)
            && r >= self.pinned()
            && r < to
            && !kept.iter().any(|k| k.0 == r)
        {
            out.extend(blocks.into_iter().map(|j| (r, j, REQUEST_TAG.to_string())));
            out.sort_by_key(|c| (c.0, c.1));
        }
        out.into_iter()
            .filter_map(|(i, j, tag)| {
                Some((i, tag, input.messages.get(i)?.content.get(j)?.clone()))
            })
            .collect()
    }

    /// The current request: the newest user message that opens a round (no tool results) and
    /// holds text besides the client's context blocks and earlier summaries
    /// ([`crate::facts::summary_kind`]), with the indices of those text blocks;
    /// `None` when there is none or its text is over [`REQUEST_MAX_BYTES`]. A drop whose span
    /// holds it carries those blocks verbatim in the marker message, so the model reads what it
    /// is working on in the user's own turn (the digest also quotes it as the user's words);
    /// the blocks before the marker then stay those the client sent, and a client's first
    /// message stays a prefix the provider has cached.
    fn request_words(&self, input: &Conversation) -> Option<(usize, Vec<usize>)> {
        let context = self.context_blocks();
        // The user's words: a text block that is neither the client's context nor an earlier
        // summary (compactor's marker, a client's own compaction summary).
        let words_at = |i: usize, j: usize, b: &Block| match b {
            Block::Text(t) => {
                !t.text.trim().is_empty()
                    && crate::facts::summary_kind(&t.text).is_none()
                    && !context.iter().any(|c| c.0 == i && c.1 == j)
            }
            _ => false,
        };
        let r = (0..input.messages.len()).rev().find(|&i| {
            self.units().slot(i) == Some(Slot::Clean)
                && input.messages[i].role == Role::User
                && (input.messages[i].content.iter().enumerate()).any(|(j, b)| words_at(i, j, b))
        })?;
        let m = &input.messages[r];
        let words: Vec<usize> = (0..m.content.len())
            .filter(|&j| words_at(r, j, &m.content[j]))
            .collect();
        let bytes: usize = words
            .iter()
            .map(|&j| match &m.content[j] {
                Block::Text(t) => t.text.len(),
                _ => 0,
            })
            .sum();
        (bytes <= REQUEST_MAX_BYTES).then_some((r, words))
    }
}

/// The tag of the current request's words carried in a marker message (the report's
/// `carried.context` lists them under it).
pub const REQUEST_TAG: &str = "request";

/// The most bytes of text (UTF-8) of the current request a drop carries verbatim; a longer
/// request is quoted by the digest only (the digest quotes a carried one too, shortened around
/// its constraint sentences: a long request carried would be said twice at length).
pub const REQUEST_MAX_BYTES: usize = 2 * 1024;

/// A turn-scoped system message (`clear_at: "next_user_message"`, A6): it goes with its round.
pub(crate) fn turn_scoped(m: &Message) -> bool {
    m.extra.get("clear_at").and_then(Value::as_str) == Some("next_user_message")
}

/// Two blocks that say the same: equal, or text blocks of the same text.
fn same_block(a: &Block, b: &Block) -> bool {
    match (a, b) {
        (Block::Text(x), Block::Text(y)) => x.text.trim() == y.text.trim(),
        _ => a == b,
    }
}

/// Where the carried system message goes: the first place after the marker, among the kept
/// messages and the tail, where the message before is a user turn (the marker, a kept user
/// message, one carrying tool results) or an assistant turn ending in a server tool result, and
/// the message after is an assistant turn (A1.2, A1.3); before a system group of the tail that
/// stands in such a place (the group takes it in: judged as one, A1.5). An effort-only message
/// (no content) goes right after the marker (A1.6).
fn system_slot(
    input: &Conversation,
    layout: &Layout,
    kept: &[(usize, Kept)],
    to: usize,
    system: &Message,
) -> Result<usize, CarryError> {
    if system.content.is_empty() {
        return Ok(0);
    }
    let table = layout.format().rules();
    let msgs = &input.messages;
    let after: Vec<usize> = kept.iter().map(|k| k.0).chain(to..msgs.len()).collect();
    let user_like = |i: usize| {
        let m = &msgs[i];
        match table.kind_of(m) {
            Some(RoleKind::User) => true,
            Some(RoleKind::Assistant) => paused(table, m),
            _ => false,
        }
    };
    for at in 0..after.len() {
        let prev_ok = at == 0 || user_like(after[at - 1]);
        let next = layout.units().slot(after[at]);
        if prev_ok && matches!(next, Some(Slot::Assistant | Slot::Instruction)) {
            return Ok(at);
        }
    }
    Err(CarryError::NoSystemSlot)
}

/// An assistant message whose last block is a server tool result (a paused turn, A1.2).
fn paused(table: &crate::rules::Table, m: &Message) -> bool {
    m.content
        .last()
        .is_some_and(|b| table.kind_of_block(b) == Some(BlockKind::ServerOutput))
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use serde_json::json;

    #[test]
    fn responses_state_items_and_instructions_of_a_dropped_round_stay_in_force() {
        let body = json!({"input": [
            {"role": "developer", "content": "standing"},
            {"role": "user", "content": "first"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "additional_tools", "role": "developer", "tools": [{"type": "function", "name": "g"}]},
            {"type": "configuration_update", "reasoning": {"effort": "low"}},
            {"role": "developer", "content": "mid-history rule"},
            {"type": "configuration_update", "reasoning": {"effort": "high"}},
            {"type": "mcp_call", "id": "m1", "name": "q", "arguments": "{}", "output": "1"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "second"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "third"}
        ]});
        let conv = Format::OpenAiResponses.read(&body).unwrap();
        let roles: Vec<&str> = conv.messages[4..9]
            .iter()
            .map(|m| m.role.as_str())
            .collect();
        assert_eq!(
            roles,
            [
                "developer",
                "developer",
                "developer",
                "developer",
                "assistant"
            ]
        );
        let layout = Layout::of(&conv, Format::OpenAiResponses);
        let kept = layout.carry(&conv, 12).unwrap().kept;
        assert_eq!(
            kept,
            vec![
                (4, Kept::ToolChange),
                (6, Kept::Instruction),
                // Only the last effort change is in force.
                (7, Kept::Configuration),
            ]
        );
        // Written back as they came.
        assert_eq!(Format::OpenAiResponses.write(&conv), body);
    }

    fn round(id: &str) -> [serde_json::Value; 2] {
        [
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "a"}]}),
        ]
    }

    fn carried(messages: &[serde_json::Value], to: usize) -> Vec<(usize, String, Block)> {
        let conv = Format::Anthropic
            .read(&json!({"messages": messages}))
            .unwrap();
        let layout = Layout::of(&conv, Format::Anthropic);
        layout.carry(&conv, to).unwrap().context
    }

    #[test]
    fn a_drop_inside_the_current_request_carries_its_words_after_the_context() {
        let first = json!({"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>\nAs you answer, use the project notes.\n</system-reminder>"},
            {"type": "text", "text": "fix the failing tests"}]});
        let mut msgs = vec![first.clone()];
        msgs.extend(round("t1"));
        msgs.extend(round("t2"));
        let out = carried(&msgs, 3);
        let tags: Vec<(usize, &str)> = out.iter().map(|(i, t, _)| (*i, t.as_str())).collect();
        assert_eq!(tags, vec![(0, "system-reminder"), (0, REQUEST_TAG)]);
        assert_eq!(out[1].2, Block::text("fix the failing tests"));
        // A later request in the kept tail: the first one's words are not carried.
        let mut later = vec![first.clone()];
        later.extend(round("t1"));
        later.push(json!({"role": "assistant", "content": "done"}));
        later.push(json!({"role": "user", "content": "now the docs"}));
        later.extend(round("t2"));
        let out = carried(&later, 4);
        assert!(out.iter().all(|(_, t, _)| t != REQUEST_TAG), "{out:?}");
        // An earlier marker in the first message is a summary, not the user's words.
        let mut marked = first;
        marked["content"].as_array_mut().unwrap().push(json!(
            {"type": "text", "text": format!("{} 4 earlier messages", crate::facts::MARKER_PREFIX)}
        ));
        msgs[0] = marked;
        let out = carried(&msgs, 3);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].2, Block::text("fix the failing tests"));
        // A request over the byte limit is left to the digest.
        let long = json!({"role": "user", "content": "x".repeat(REQUEST_MAX_BYTES + 1)});
        let mut big = vec![long];
        big.extend(round("t1"));
        big.extend(round("t2"));
        assert_eq!(carried(&big, 3), vec![]);
    }
}
