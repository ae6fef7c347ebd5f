//! Temporary token counter (replaced by the tokens module).
#![allow(missing_docs)]
use crate::conversation::{Block, Conversation, Message};

pub trait TokenCounter: Send + Sync {
    fn count_text(&self, text: &str) -> usize;
    fn count_block(&self, b: &Block) -> usize {
        match b {
            Block::Text(t) => self.count_text(&t.text),
            other => self.count_text(&crate::format::anthropic::write_block(other).to_string()),
        }
    }
    fn count_message(&self, m: &Message) -> usize {
        3 + m.content.iter().map(|b| self.count_block(b)).sum::<usize>()
    }
    fn count_conversation(&self, c: &Conversation) -> usize {
        c.system
            .as_ref()
            .map_or(0, |s| self.count_text(&s.to_string()))
            + c.tools().map_or(0, |t| self.count_text(&t.to_string()))
            + c.messages
                .iter()
                .map(|m| self.count_message(m))
                .sum::<usize>()
    }
}

pub struct TiktokenCounter;
impl TokenCounter for TiktokenCounter {
    fn count_text(&self, text: &str) -> usize {
        text.len() / 4 + 1
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    #[default]
    O200kBase,
    Cl100kBase,
}

pub fn counter_for(_t: Tokenizer) -> std::sync::Arc<dyn TokenCounter> {
    std::sync::Arc::new(TiktokenCounter)
}
