//! [`Compactor::model_count`]: a conversation's size in its target model's tokens, counted as
//! the pipeline budgets it (see [`crate::tokens::ModelCount`]).

use super::Compactor;
use crate::conversation::Conversation;
use crate::tokens::ModelCount;

impl Compactor {
    /// The size of `conversation` in model tokens, with the counting that made it: the figure
    /// [`Compactor::compact`] reports as `tokens_before` for the same conversation and model
    /// (same counting basis, learned ratio included; same framed, cached counter).
    ///
    /// The model is `model` when given (not empty), else the conversation's own `model`, else
    /// `[tokens] model`; with none of them the count is the counter's tokens as counted
    /// (`counting.source` = `counter`, `counting.model` = `None`). What `compactor count`, the
    /// API's `/v1/count_tokens` and Python's `count` report.
    pub fn model_count(&self, conversation: &Conversation, model: Option<&str>) -> ModelCount {
        let named = model
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .or_else(|| conversation.extra.get("model").and_then(|m| m.as_str()));
        let counting = self.model_tokens(named);
        let counter = self.counter_of(counting.tokenizer);
        ModelCount::of(counting, counter, conversation)
    }
}
