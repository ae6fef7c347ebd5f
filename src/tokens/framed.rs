//! A counter that adds a model's per-call framing to every tool_use block.
//!
//! Measured on the corpus Claude Code logs (`compactor calibrate`, see
//! [`super::calibrate::fit`]): Claude's count grows by a constant per tool call on top of the
//! o200k count of the call's name, input and result (the provider renders each call and its
//! result in its own framing, which the logged JSON does not show). A linear ratio alone folds
//! that constant into the slope, which is right only while the calls-per-token mix of a history
//! stays as it was; a compacted history with many cleared results holds many calls and few
//! tokens. Adding the framing per call keeps the count right for any mix.

use super::TokenCounter;
use crate::conversation::{Block, Message};
use serde_json::Value;

/// `inner` plus `per_call` counted tokens for every top-level tool_use block. Made by
/// [`super::ModelTokens::framed`]; with `per_call == 0` it counts exactly as `inner`.
///
/// Only [`TokenCounter::count_block`] changes; text, system and tools counts are `inner`'s, and
/// messages and conversations are summed from blocks as usual, so the framing is counted once
/// per call wherever a count is taken.
#[derive(Clone, Copy)]
pub struct FramedCounter<'a> {
    inner: &'a dyn TokenCounter,
    per_call: usize,
}

impl<'a> FramedCounter<'a> {
    /// `inner`, adding `per_call` counted tokens per tool_use block.
    pub fn new(inner: &'a dyn TokenCounter, per_call: usize) -> FramedCounter<'a> {
        FramedCounter { inner, per_call }
    }

    /// Counted tokens added per tool_use block.
    pub fn per_call(&self) -> usize {
        self.per_call
    }
}

impl std::fmt::Debug for FramedCounter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FramedCounter")
            .field("per_call", &self.per_call)
            .finish_non_exhaustive()
    }
}

impl TokenCounter for FramedCounter<'_> {
    fn count_text(&self, text: &str) -> usize {
        self.inner.count_text(text)
    }

    fn count_text_cached(&self, text: &str) -> usize {
        self.inner.count_text_cached(text)
    }

    fn count_at_least(&self, text: &str) -> usize {
        self.inner.count_at_least(text)
    }

    fn adds_at_piece_starts(&self) -> bool {
        self.inner.adds_at_piece_starts()
    }

    fn count_text_cached_or(&self, text: &str, sum: &mut dyn FnMut() -> Option<usize>) -> usize {
        self.inner.count_text_cached_or(text, sum)
    }

    fn prefix_within<'t>(&self, text: &'t str, max_tokens: usize) -> &'t str {
        self.inner.prefix_within(text, max_tokens)
    }

    fn suffix_within<'t>(&self, text: &'t str, max_tokens: usize) -> &'t str {
        self.inner.suffix_within(text, max_tokens)
    }

    fn count_block(&self, block: &Block) -> usize {
        let framing = match block {
            Block::ToolUse(_) => self.per_call,
            _ => 0,
        };
        self.inner.count_block(block) + framing
    }

    fn count_message(&self, message: &Message) -> usize {
        if self.per_call == 0 {
            return self.inner.count_message(message);
        }
        super::MESSAGE_OVERHEAD
            + message
                .content
                .iter()
                .map(|b| self.count_block(b))
                .sum::<usize>()
    }

    fn count_system(&self, system: Option<&Value>) -> usize {
        self.inner.count_system(system)
    }

    fn count_tools(&self, tools: Option<&Value>) -> usize {
        self.inner.count_tools(tools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Object, Role, ToolInput, ToolUse};
    use crate::tokens::{CachedCounter, TiktokenCounter};
    use serde_json::json;

    fn call(id: &str) -> Block {
        Block::ToolUse(ToolUse {
            id: id.into(),
            name: "Bash".into(),
            input: ToolInput::Json(json!({"command": "ls"})),
            extra: Object::new(),
        })
    }

    #[test]
    fn each_tool_use_block_carries_the_framing_once_and_nothing_else_does() {
        let inner = CachedCounter::new(TiktokenCounter::default());
        let framed = FramedCounter::new(&inner, 155);
        let m = Message::new(
            Role::Assistant,
            vec![Block::text("two calls"), call("a"), call("b")],
        );
        assert_eq!(framed.count_message(&m), inner.count_message(&m) + 2 * 155);
        let t = Message::text(Role::User, "hello world");
        assert_eq!(framed.count_message(&t), inner.count_message(&t));
        assert_eq!(framed.count_text("hello world"), 2);
        let none = FramedCounter::new(&inner, 0);
        assert_eq!(none.count_message(&m), inner.count_message(&m));
    }
}
