//! Where the tokens of a conversation go: by role, block type and tool, and the largest blocks.

use super::{MESSAGE_OVERHEAD, TokenCounter};
use crate::conversation::{Block, Conversation, Role};
use crate::format::Format;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};

/// How many tools and blocks a [`Breakdown`] lists.
pub const TOP_N: usize = 10;

/// Name under which tool_result tokens are listed when no tool_use with their id precedes them.
pub const UNKNOWN_TOOL: &str = "(unknown)";

/// The token count of a conversation, split up. All figures are tokens of the counter used.
///
/// `total = system + tools + messages`. The system prompt is one figure wherever the format
/// puts it: `system` is the top-level field (Anthropic `system`, Responses `instructions`) plus
/// the messages of role `system` (OpenAI Chat), and `by_role["system"]` is that same figure;
/// `messages` is every other message (its blocks plus [`MESSAGE_OVERHEAD`] each), so `by_role`
/// adds up to `system + messages`. `by_block_type` sums the blocks of every message (those of
/// role `system` too), without the overhead. Serializes to JSON; `Display` prints a table for
/// humans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Breakdown {
    /// Everything: system prompt, tool definitions and messages.
    pub total: usize,
    /// The system prompt: the top-level field plus the messages of role `system` (overhead
    /// included).
    pub system: usize,
    /// The tool definitions.
    pub tools: usize,
    /// The messages not of role `system`, overhead included.
    pub messages: usize,
    /// Number of the messages in `messages`.
    pub message_count: usize,
    /// The per-message overhead part of `messages` (`message_count × MESSAGE_OVERHEAD`).
    pub message_overhead: usize,
    /// Tokens per role name (`user`, `assistant`, ...; messages with their overhead), the
    /// system prompt under `system` (= the `system` figure).
    pub by_role: BTreeMap<String, usize>,
    /// Block tokens per block type ([`Block::kind`]: `text`, `tool_use`, `tool_result`, ...).
    /// Blocks nested in a tool_result count as the tool_result.
    pub by_block_type: BTreeMap<String, usize>,
    /// The `TOP_N` tools with the most tokens (calls + results), most first.
    pub by_tool: Vec<ToolEntry>,
    /// The `TOP_N` largest blocks, largest first (ties: earlier first).
    pub largest: Vec<BlockEntry>,
}

/// Tokens spent on one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolEntry {
    /// The tool name (`UNKNOWN_TOOL` for results without a known call).
    pub name: String,
    /// Number of tool_use blocks.
    pub calls: usize,
    /// Tokens of its tool_use blocks (name + input).
    pub call_tokens: usize,
    /// Tokens of the tool_result blocks answering those calls (matched by id).
    pub result_tokens: usize,
    /// `call_tokens + result_tokens`.
    pub tokens: usize,
}

/// One block and where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockEntry {
    /// Index of the message (Responses: of the input item).
    pub message: usize,
    /// Index of the block in the message's content.
    pub block: usize,
    /// JSON path in the wire format's terms (`messages[3].content[1]`,
    /// `messages[3].tool_calls[0]`, `input[7]`).
    pub path: String,
    /// The message's role.
    pub role: String,
    /// The block type ([`Block::kind`]).
    pub kind: String,
    /// Its tokens.
    pub tokens: usize,
    /// A one-line description (`crate::render::block_summary`).
    pub summary: String,
}

impl Breakdown {
    /// Counts `conversation` with `counter` and splits the total up; `format` names the paths.
    /// Every block is counted once (through `counter.count_block`, so a
    /// [`CachedCounter`](super::CachedCounter) serves repeated calls from its cache).
    pub fn new<C: TokenCounter + ?Sized>(
        counter: &C,
        conversation: &Conversation,
        format: Format,
    ) -> Breakdown {
        let mut system = counter.count_system(conversation.system.as_ref());
        let tools = counter.count_tools(conversation.tools());

        let mut tool_of: HashMap<&str, &str> = HashMap::new();
        for (_, _, b) in conversation.blocks() {
            if let Block::ToolUse(t) = b {
                tool_of.insert(t.id.as_str(), t.name.as_str());
            }
        }

        let mut by_role: BTreeMap<String, usize> = BTreeMap::new();
        let mut by_block_type: BTreeMap<String, usize> = BTreeMap::new();
        let mut by_tool: HashMap<&str, ToolEntry> = HashMap::new();
        let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
        if system > 0 {
            by_role.insert(Role::System.as_str().to_string(), system);
        }
        let mut messages = 0;
        let mut message_count = 0;
        for (i, m) in conversation.messages.iter().enumerate() {
            let mut message_tokens = MESSAGE_OVERHEAD;
            for (j, b) in m.content.iter().enumerate() {
                let n = counter.count_block(b);
                message_tokens += n;
                *by_block_type.entry(b.kind().to_string()).or_default() += n;
                blocks.push((n, i, j));
                let (name, is_call) = match b {
                    Block::ToolUse(t) => (t.name.as_str(), true),
                    Block::ToolResult(r) => (
                        tool_of
                            .get(r.tool_use_id.as_str())
                            .copied()
                            .unwrap_or(UNKNOWN_TOOL),
                        false,
                    ),
                    _ => continue,
                };
                let e = by_tool.entry(name).or_insert_with(|| ToolEntry {
                    name: name.to_string(),
                    calls: 0,
                    call_tokens: 0,
                    result_tokens: 0,
                    tokens: 0,
                });
                if is_call {
                    e.calls += 1;
                    e.call_tokens += n;
                } else {
                    e.result_tokens += n;
                }
                e.tokens += n;
            }
            *by_role.entry(m.role.as_str().to_string()).or_default() += message_tokens;
            if m.role == Role::System {
                system += message_tokens;
            } else {
                messages += message_tokens;
                message_count += 1;
            }
        }

        let mut by_tool: Vec<ToolEntry> = by_tool.into_values().collect();
        by_tool.sort_by(|a, b| b.tokens.cmp(&a.tokens).then_with(|| a.name.cmp(&b.name)));
        by_tool.truncate(TOP_N);

        blocks.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| (a.1, a.2).cmp(&(b.1, b.2))));
        let largest = blocks
            .into_iter()
            .take(TOP_N)
            .filter_map(|(n, i, j)| {
                let m = conversation.messages.get(i)?;
                let b = m.content.get(j)?;
                Some(BlockEntry {
                    message: i,
                    block: j,
                    path: crate::format::block_path(format, conversation, i, Some(j)),
                    role: m.role.as_str().to_string(),
                    kind: b.kind().to_string(),
                    tokens: n,
                    summary: crate::render::block_summary(b),
                })
            })
            .collect();

        Breakdown {
            total: system + tools + messages,
            system,
            tools,
            messages,
            message_count,
            message_overhead: message_count * MESSAGE_OVERHEAD,
            by_role,
            by_block_type,
            by_tool,
            largest,
        }
    }
}

/// `1234567` -> `1,234,567`.
pub(super) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (k, c) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn percent(part: usize, total: usize) -> String {
    if total == 0 {
        return "-".to_string();
    }
    format!("{:.1}%", part as f64 * 100.0 / total as f64)
}

impl fmt::Display for Breakdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.total;
        let mut s = String::new();
        writeln!(s, "total {} tokens", thousands(t))?;
        writeln!(
            s,
            "  {:<28}{:>10}{:>8}",
            "system",
            thousands(self.system),
            percent(self.system, t)
        )?;
        writeln!(
            s,
            "  {:<28}{:>10}{:>8}",
            "tools",
            thousands(self.tools),
            percent(self.tools, t)
        )?;
        let label = format!("messages ({})", self.message_count);
        writeln!(
            s,
            "  {:<28}{:>10}{:>8}",
            label,
            thousands(self.messages),
            percent(self.messages, t)
        )?;
        writeln!(
            s,
            "    {:<26}{:>10}{:>8}",
            "of which overhead",
            thousands(self.message_overhead),
            percent(self.message_overhead, t)
        )?;

        writeln!(s, "\nby role")?;
        for (role, n) in &self.by_role {
            writeln!(
                s,
                "  {:<28}{:>10}{:>8}",
                role,
                thousands(*n),
                percent(*n, t)
            )?;
        }

        writeln!(s, "\nby block type")?;
        let mut kinds: Vec<(&String, &usize)> = self.by_block_type.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        for (kind, n) in kinds {
            writeln!(
                s,
                "  {:<28}{:>10}{:>8}",
                kind,
                thousands(*n),
                percent(*n, t)
            )?;
        }

        if !self.by_tool.is_empty() {
            writeln!(
                s,
                "\n{:<34}{:>6}{:>10}{:>10}{:>10}",
                format!("by tool (top {TOP_N})"),
                "calls",
                "call",
                "result",
                "tokens"
            )?;
            for e in &self.by_tool {
                writeln!(
                    s,
                    "  {:<32}{:>6}{:>10}{:>10}{:>10}{:>8}",
                    crate::render::clip(&e.name, 31),
                    e.calls,
                    thousands(e.call_tokens),
                    thousands(e.result_tokens),
                    thousands(e.tokens),
                    percent(e.tokens, t)
                )?;
            }
        }

        if !self.largest.is_empty() {
            writeln!(s, "\nlargest blocks (top {TOP_N})")?;
            for e in &self.largest {
                writeln!(
                    s,
                    "  {:>8}  {:<28} {:<9} {}",
                    thousands(e.tokens),
                    e.path,
                    e.role,
                    crate::render::clip(&e.summary, 60)
                )?;
            }
        }
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::TiktokenCounter;
    use serde_json::json;

    /// One word = one token, so every figure below is checkable by eye.
    struct Words;
    impl TokenCounter for Words {
        fn count_text(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
    }

    fn chat() -> Conversation {
        let body = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "list the files please"},
            {"role": "assistant", "content": "ok", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "cat", "arguments": "a b c d e f"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.rs b.rs c.rs"},
            {"role": "tool", "tool_call_id": "c2", "content": "one two three four five six seven"},
            {"role": "tool", "tool_call_id": "zz", "content": "lost"}
        ]});
        Format::OpenAiChat.read(&body).unwrap()
    }

    #[test]
    fn figures_add_up_and_results_go_to_their_tool() {
        let conv = chat();
        let b = Breakdown::new(&Words, &conv, Format::OpenAiChat);
        // The system message is the system prompt: one figure, on top and by role.
        assert_eq!(b.system, 2 + 3);
        assert_eq!(b.by_role["system"], b.system);
        assert_eq!(b.message_count, 5);
        assert_eq!(b.message_overhead, 15);
        // blocks: 4 + 1 + (1+2) + (1+6) + 3 + 7 + 1 = 26, and the system message's 2
        assert_eq!(b.messages, 26 + 15);
        assert_eq!(b.total, b.system + b.messages);
        assert_eq!(b.by_role.values().sum::<usize>(), b.system + b.messages);
        assert_eq!(b.by_block_type.values().sum::<usize>(), 28);
        assert_eq!(b.by_block_type["tool_use"], 10);
        let cat = &b.by_tool[0];
        assert_eq!(
            (
                cat.name.as_str(),
                cat.calls,
                cat.call_tokens,
                cat.result_tokens
            ),
            ("cat", 1, 7, 7)
        );
        assert_eq!(b.by_tool[1].name, "ls");
        assert_eq!(b.by_tool[1].tokens, 3 + 3);
        assert_eq!(b.by_tool[2].name, UNKNOWN_TOOL);
    }

    #[test]
    fn largest_blocks_carry_their_wire_path() {
        let conv = chat();
        let b = Breakdown::new(&Words, &conv, Format::OpenAiChat);
        let top = &b.largest[0];
        assert_eq!(
            (top.tokens, top.path.as_str()),
            (7, "messages[2].tool_calls[1]")
        );
        assert_eq!(b.largest[1].path, "messages[4]");
        assert_eq!(b.largest.len(), 8);
    }

    #[test]
    fn breakdown_total_equals_count_conversation() {
        let conv = chat();
        let c = TiktokenCounter::default();
        let b = Breakdown::new(&c, &conv, Format::OpenAiChat);
        assert_eq!(b.total, c.count_conversation(&conv));
        let text = b.to_string();
        assert!(text.starts_with(&format!("total {} tokens", b.total)));
        assert!(serde_json::to_value(&b).unwrap()["by_tool"].is_array());
    }

    #[test]
    fn a_top_level_system_prompt_is_listed_by_role_too() {
        let body =
            json!({"system": "be very brief", "messages": [{"role": "user", "content": "hi"}]});
        let conv = Format::Anthropic.read(&body).unwrap();
        let b = Breakdown::new(&Words, &conv, Format::Anthropic);
        assert_eq!(b.system, 3);
        assert_eq!(b.by_role["system"], 3);
        assert_eq!((b.messages, b.message_count), (1 + 3, 1));
        let text = b.to_string();
        assert!(
            text.contains("  system                               3   42.9%\n"),
            "{text}"
        );
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
