//! Token counting: the hot path of every compaction decision.
//!
//! ```text
//! Conversation -> CachedCounter (per-block count cache, xxh3 content hash)
//!                   -> TokenCounter::count_block (rules below)
//!                        -> count_text (TiktokenCounter: o200k_base | cl100k_base,
//!                                       encoded by bpe-openai)
//! ```
//!
//! All counts are **tokens** of the chosen BPE vocabulary, the ones OpenAI's tiktoken encodes
//! with (`encode_ordinary`: special-token markers are ordinary text); they approximate, not
//! reproduce, what a provider bills (Anthropic's tokenizer is not public). The engine is
//! GitHub's `bpe-openai` (rust-gems): the same vocabularies, a pre-tokenizer that emulates
//! tiktoken's split regexes, and a backtracking BPE that gives the same tokens as tiktoken's
//! merge by rank, in linear time. It counts exactly what tiktoken-rs counts: the tests hold it
//! to tiktoken-rs `encode_ordinary` token by token (`oracle_tests.rs`, both vocabularies) and
//! on every string of the shared corpus (`tests/all/tokens_oracle.rs`). The rules per block,
//! each with its source:
//!
//! | block | counted as |
//! |---|---|
//! | text | its text |
//! | tool_use | tool name + input as compact JSON (`Arguments` / `Freeform` strings as they are) |
//! | tool_result | its text, or its nested blocks, recursively |
//! | thinking | the `thinking` text / reasoning `summary` texts; encrypted payloads estimated ([`encrypted_estimate`]) |
//! | image | Anthropic's `width × height / 750` rule after resizing (`image::image_tokens`) |
//! | document | its text when it has a text source, a per-page estimate for PDFs (`image::document_tokens`) |
//! | other | its JSON serialization |
//!
//! Each message adds [`MESSAGE_OVERHEAD`] tokens; the system prompt and the tool definitions
//! count too ([`TokenCounter::count_system`], [`TokenCounter::count_tools`]).
//!
//! These counted tokens become the target model's tokens through `model` (a rule's ratio,
//! per-call framing and overhead); [`ModelCount`] is that figure for a whole request, the one
//! every report, budget and count gives ([`crate::Compactor::model_count`]).

mod breakdown;
mod cache;
pub mod calibrate;
mod cut;
mod framed;
pub(crate) mod image;
pub(crate) mod model;
mod model_count;
#[cfg(test)]
mod oracle_tests;
pub(crate) mod pieces;

pub use breakdown::{BlockEntry, Breakdown, ToolEntry};
pub use cache::{CacheStats, CachedCounter, DEFAULT_CACHE_CAPACITY};
pub(crate) use cache::{hash_str, hash_value};
pub use framed::FramedCounter;
pub use model::{Calibration, ModelRule, ModelTokens, Observation, RatioSource};
pub use model_count::ModelCount;

use crate::conversation::{Block, Conversation, Message, ToolInput, ToolResultContent};
use serde_json::Value;

/// Tokens added per message for the role and the message delimiters, whatever its content.
///
/// Source: OpenAI cookbook "How to count tokens with tiktoken" (`num_tokens_from_messages`:
/// `tokens_per_message = 3` for the gpt-3.5-turbo-0613 / gpt-4 family). Anthropic does not
/// document its framing; the same constant is used for every format. No per-block overhead is
/// added.
pub const MESSAGE_OVERHEAD: usize = 3;

/// Which BPE vocabulary [`TiktokenCounter`] counts in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[non_exhaustive]
pub enum Tokenizer {
    /// `o200k_base` (GPT-4o and later). The default.
    #[default]
    #[serde(rename = "o200k_base")]
    O200kBase,
    /// `cl100k_base` (GPT-4, GPT-3.5-turbo).
    #[serde(rename = "cl100k_base")]
    Cl100kBase,
}

impl Tokenizer {
    /// The vocabulary's name: `o200k_base` or `cl100k_base`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::Cl100kBase => "cl100k_base",
        }
    }
}

impl std::fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Tokenizer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "o200k_base" => Ok(Tokenizer::O200kBase),
            "cl100k_base" => Ok(Tokenizer::Cl100kBase),
            other => Err(format!(
                "unknown tokenizer {other:?} (expected o200k_base or cl100k_base)"
            )),
        }
    }
}

/// Counts tokens. Object safe and `Send + Sync`, so one counter (usually a [`CachedCounter`])
/// can be shared by strategies, the policy and the server as `Arc<dyn TokenCounter>`.
///
/// Implementors provide [`count_text`](TokenCounter::count_text); the provided methods apply
/// the per-block rules of the [module docs](self) on top of it. A wrapper such as
/// [`CachedCounter`] overrides [`count_block`](TokenCounter::count_block) (and the system / tools
/// methods) to avoid counting the same content twice; every other method goes through those.
pub trait TokenCounter: Send + Sync {
    /// Tokens in `text` (plain BPE encoding, special-token markers counted as ordinary text).
    fn count_text(&self, text: &str) -> usize;

    /// Tokens in `text`, served from a cache when the counter has one (a long text that a
    /// strategy looks at on every compaction is then tokenized once). Same value as
    /// [`TokenCounter::count_text`].
    fn count_text_cached(&self, text: &str) -> usize {
        self.count_text(text)
    }

    /// The longest prefix of `text` that ends on a char boundary and counts at most
    /// `max_tokens` tokens (`text` itself when it fits; `""` for 0). For cutting a text to fit:
    /// the head of a head + tail truncation, a capped block. [`TiktokenCounter`] encodes
    /// `text` once (for a prefix, only its pre-tokenizer pieces up to the cut) and cuts at the
    /// token index (plus one check count of the result); this provided form searches with
    /// [`TokenCounter::count_text`] (about `log2(len)` encodes).
    /// Maximal within one token: a longer char-boundary prefix either counts more than
    /// `max_tokens` or the result counts at least `max_tokens - 1`.
    fn prefix_within<'t>(&self, text: &'t str, max_tokens: usize) -> &'t str {
        cut::prefix_by_search(&|s| self.count_text(s), text, max_tokens)
    }

    /// The longest suffix of `text` that starts on a char boundary and counts at most
    /// `max_tokens` tokens: the tail of a head + tail truncation. As
    /// [`TokenCounter::prefix_within`], from the other end.
    fn suffix_within<'t>(&self, text: &'t str, max_tokens: usize) -> &'t str {
        cut::suffix_by_search(&|s| self.count_text(s), text, max_tokens)
    }

    /// A lower bound of [`TokenCounter::count_text`] of `text`, found without tokenizing it:
    /// a caller that only asks whether a text fits a small room skips counting one that
    /// cannot. The provided form knows nothing and returns 0; [`TiktokenCounter`] returns the
    /// number of pieces its pre-tokenizer is sure to cut `text` into (`split_floor`).
    fn count_at_least(&self, text: &str) -> usize {
        let _ = text;
        0
    }

    /// Whether [`TokenCounter::count_text`] adds up at every `pieces::piece_start`:
    /// `count_text(s) == count_text(&s[..at]) + count_text(&s[at..])` there. True for
    /// [`TiktokenCounter`] (both vocabularies' pre-tokenizers start a piece there, see
    /// `pieces`); false by default, and a caller then counts a joined text whole.
    fn adds_at_piece_starts(&self) -> bool {
        false
    }

    /// [`TokenCounter::count_text_cached`] of `text` for a caller that may know the count from
    /// parts it counted: where the count is not cached, `sum()` is taken when it gives one (it
    /// must equal `count_text(text)`: a sum at piece starts, `pieces`), else `text` is
    /// tokenized. A caching counter keeps the count, so `text` is found later untokenized.
    fn count_text_cached_or(&self, text: &str, sum: &mut dyn FnMut() -> Option<usize>) -> usize {
        sum().unwrap_or_else(|| self.count_text_cached(text))
    }

    /// Tokens in one content block (see the rules in the [module docs](self)).
    fn count_block(&self, block: &Block) -> usize {
        block_tokens(self, block)
    }

    /// Tokens in one message: [`MESSAGE_OVERHEAD`] plus its blocks.
    fn count_message(&self, message: &Message) -> usize {
        MESSAGE_OVERHEAD
            + message
                .content
                .iter()
                .map(|b| self.count_block(b))
                .sum::<usize>()
    }

    /// Tokens in the top-level system prompt (Anthropic `system`, Responses `instructions`): a
    /// string as is; an array of blocks block by block (text blocks by their `text`, others as
    /// JSON). Zero when absent.
    fn count_system(&self, system: Option<&Value>) -> usize {
        match system {
            None | Some(Value::Null) => 0,
            Some(Value::String(s)) => self.count_text(s),
            Some(Value::Array(items)) => items
                .iter()
                .map(|b| match b.get("text").and_then(Value::as_str) {
                    Some(t) => self.count_text(t),
                    None => json_tokens(self, b),
                })
                .sum(),
            Some(other) => json_tokens(self, other),
        }
    }

    /// Tokens in the tool definitions (`tools`), as their compact JSON serialization. Zero when
    /// absent. Providers render tool schemas in their own (undocumented) way; JSON is a close,
    /// slightly high estimate.
    fn count_tools(&self, tools: Option<&Value>) -> usize {
        match tools {
            None | Some(Value::Null) => 0,
            Some(v) => json_tokens(self, v),
        }
    }

    /// Tokens of the whole request: system prompt + tool definitions + every message.
    fn count_conversation(&self, conversation: &Conversation) -> usize {
        self.count_system(conversation.system.as_ref())
            + self.count_tools(conversation.tools())
            + conversation
                .messages
                .iter()
                .map(|m| self.count_message(m))
                .sum::<usize>()
    }
}

/// The default counter: tokens of tiktoken's `o200k_base` or `cl100k_base` vocabulary, exactly as
/// tiktoken's `encode_ordinary` makes them (no special-token parsing), encoded by `bpe-openai`.
///
/// The name says what it counts (tiktoken's vocabularies, token for token), not which crate
/// encodes: it kept its name when the engine moved from tiktoken-rs to bpe-openai, so callers
/// and configurations did not change. Each vocabulary is loaded once per process and shared
/// (bpe-openai's statics).
#[derive(Clone)]
pub struct TiktokenCounter {
    tokenizer: Tokenizer,
    bpe: &'static bpe_openai::Tokenizer,
}

impl TiktokenCounter {
    /// A counter for `tokenizer`. The first call per vocabulary loads it (the dictionary is
    /// built at compile time and deserialized: about 60 ms for cl100k, 120-160 ms for o200k
    /// here; `git show 97644f4:docs/speed.md`); later calls are free.
    pub fn new(tokenizer: Tokenizer) -> TiktokenCounter {
        TiktokenCounter {
            tokenizer,
            bpe: engine(tokenizer),
        }
    }

    /// The vocabulary in use.
    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }
}

/// The bpe-openai tokenizer of a vocabulary (a process-wide static).
///
/// No `&str` reaches a panic in it (bpe-openai 0.3.2 `src/lib.rs`, bpe 0.2.3): its split slices
/// the text at the ends of earlier pieces, which are char boundaries (a match ends on one, and
/// the dropped look-ahead is one whole char); the `expect` and `assert_ne!` there run only for
/// a match of `\s+\s`, two chars at least, so one is left after the look-ahead char is dropped
/// (`every_whitespace_pair_before_every_kind_of_char_encodes_as_tiktoken_does` walks that path
/// with every whitespace char); the regex-automata meta engine's search is infallible; the BPE
/// encoder needs every single byte to be a token, which both vocabularies have; the `expect`s of
/// the statics read the dictionaries built into the crate, not the input. Every char starts some
/// piece (a letter a word, a digit a number, whitespace `\s+`, anything else punctuation), so
/// no text is left unsplit and uncounted: the oracle tests check that the pieces cover the text.
pub(crate) fn engine(tokenizer: Tokenizer) -> &'static bpe_openai::Tokenizer {
    match tokenizer {
        Tokenizer::O200kBase => bpe_openai::o200k_base(),
        Tokenizer::Cl100kBase => bpe_openai::cl100k_base(),
    }
}

impl Default for TiktokenCounter {
    /// An `o200k_base` counter.
    fn default() -> Self {
        TiktokenCounter::new(Tokenizer::default())
    }
}

impl std::fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiktokenCounter")
            .field("tokenizer", &self.tokenizer)
            .finish()
    }
}

impl TokenCounter for TiktokenCounter {
    fn count_text(&self, text: &str) -> usize {
        self.bpe.count(text)
    }

    fn count_at_least(&self, text: &str) -> usize {
        split_floor(text)
    }

    fn adds_at_piece_starts(&self) -> bool {
        true
    }

    fn prefix_within<'t>(&self, text: &'t str, max_tokens: usize) -> &'t str {
        cut::prefix_within(self.bpe, text, max_tokens)
    }

    fn suffix_within<'t>(&self, text: &'t str, max_tokens: usize) -> &'t str {
        cut::suffix_within(self.bpe, text, max_tokens)
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for std::sync::Arc<T> {
    fn count_text(&self, text: &str) -> usize {
        (**self).count_text(text)
    }
    fn count_text_cached(&self, text: &str) -> usize {
        (**self).count_text_cached(text)
    }
    fn count_at_least(&self, text: &str) -> usize {
        (**self).count_at_least(text)
    }
    fn adds_at_piece_starts(&self) -> bool {
        (**self).adds_at_piece_starts()
    }
    fn count_text_cached_or(&self, text: &str, sum: &mut dyn FnMut() -> Option<usize>) -> usize {
        (**self).count_text_cached_or(text, sum)
    }
    fn prefix_within<'t>(&self, text: &'t str, max_tokens: usize) -> &'t str {
        (**self).prefix_within(text, max_tokens)
    }
    fn suffix_within<'t>(&self, text: &'t str, max_tokens: usize) -> &'t str {
        (**self).suffix_within(text, max_tokens)
    }
    fn count_block(&self, block: &Block) -> usize {
        (**self).count_block(block)
    }
    fn count_message(&self, message: &Message) -> usize {
        (**self).count_message(message)
    }
    fn count_system(&self, system: Option<&Value>) -> usize {
        (**self).count_system(system)
    }
    fn count_tools(&self, tools: Option<&Value>) -> usize {
        (**self).count_tools(tools)
    }
    fn count_conversation(&self, conversation: &Conversation) -> usize {
        (**self).count_conversation(conversation)
    }
}

/// Pieces the `o200k_base` and `cl100k_base` pre-tokenizers are sure to cut `text` into, each
/// at least one token, so at most [`TiktokenCounter::count_text`] of it in either vocabulary:
/// the text's start, and every space followed by an ASCII letter.
///
/// Why such a space starts a piece, read from the patterns the engine splits with (bpe-openai
/// `src/lib.rs`: one alternation `pat1` in tiktoken's order, then `\s+\s` whose last char is
/// dropped from the piece, then `\s+`; the first that matches at a piece's start wins):
/// - in a word piece (`[^\r\n\p{L}\p{N}]?` then letters and marks, a contraction after them)
///   or a punctuation piece (` ?[^\s\p{L}\p{N}]+[\r\n/]*`), a space can only be the first
///   character; number pieces (`\p{N}{1,3}`) and cl100k's contractions hold none;
/// - a whitespace piece holding it must go on after it: `\s*[\r\n]+` to a line break,
///   `\s+$` to the end, `\s+\s` to one more whitespace (the dropped look-ahead char: when the
///   space is that char, the piece ends before it); the letter after the space is none of
///   them;
/// - `\s+` is tried only when all of those failed at the piece's start: a run of two or more
///   whitespace chars before the letter matches `\s+\s`, and a lone space before a letter
///   matches the word pattern (every ASCII letter is `Lu` or `Ll`, so one of o200k's two word
///   forms takes it).
///
/// tiktoken's own patterns (`\s+(?!\S)` where bpe-openai has `\s+$` and `\s+\s`) give the
/// same argument; the proptest below checks the floor against tiktoken-rs, the oracle.
pub(crate) fn split_floor(text: &str) -> usize {
    let b = text.as_bytes();
    let Some(&first) = b.first() else { return 0 };
    let word_start = |w: &[u8]| w[0] == b' ' && w[1].is_ascii_alphabetic();
    let spaces = b.windows(2).filter(|w| word_start(w)).count();
    // The start is a piece of its own unless it is such a space.
    let starts_with_one = first == b' ' && b.get(1).is_some_and(u8::is_ascii_alphabetic);
    spaces + usize::from(!starts_with_one)
}

/// Tokens of a JSON value's compact serialization.
fn json_tokens<C: TokenCounter + ?Sized>(counter: &C, v: &Value) -> usize {
    counter.count_text(&v.to_string())
}

/// The per-block rules, shared by [`TokenCounter::count_block`] and wrappers that call it on a
/// cache miss. Nested blocks (tool_result content) go through `counter.count_block`, so a
/// caching counter caches them too.
pub(crate) fn block_tokens<C: TokenCounter + ?Sized>(counter: &C, block: &Block) -> usize {
    match block {
        Block::Text(t) => counter.count_text(&t.text),
        Block::ToolUse(t) => {
            counter.count_text(&t.name)
                + match &t.input {
                    ToolInput::Json(v) => json_tokens(counter, v),
                    ToolInput::Arguments(s) | ToolInput::Freeform(s) => counter.count_text(s),
                }
        }
        Block::ToolResult(r) => match &r.content {
            // A built-in tool's non-text output (OpenAI Responses `computer_call_output`) is
            // kept in the item as it came: counted as the JSON it is.
            None => r.extra.get("output").map_or(0, |v| json_tokens(counter, v)),
            Some(ToolResultContent::Text(s)) => counter.count_text(s),
            Some(ToolResultContent::Blocks(bs)) => bs.iter().map(|b| counter.count_block(b)).sum(),
        },
        Block::Thinking(v) => thinking_tokens(counter, v),
        Block::Image(v) => image::image_tokens(v),
        Block::Document(v) => image::document_tokens(v, &|s| counter.count_text(s)),
        Block::Other(v) => json_tokens(counter, v),
    }
}

/// Thinking / reasoning blocks.
///
/// - Anthropic `thinking`: the `thinking` text. The `signature` is not counted: it is an opaque
///   verification token, not model-visible text (Anthropic "Building with extended thinking":
///   the full thinking is encrypted into the signature only so the API can verify it).
/// - Anthropic `redacted_thinking`: the encrypted `data` is decrypted by the API and shown to the
///   model, so it counts, as [`encrypted_estimate`] of its length.
/// - OpenAI Responses `reasoning`: the `summary[].text` texts plus [`encrypted_estimate`] of
///   `encrypted_content`.
///
/// This is an upper bound for Anthropic: its "Context windows" doc says thinking blocks of
/// previous assistant turns are stripped from the context window
/// (`context_window = (input_tokens - previous_thinking_tokens) + current_turn_tokens`), except
/// in the assistant turn of a still-open tool-use loop. A per-block count cannot know which turn
/// is current, so it counts every thinking block; over-counting never breaks a budget.
fn thinking_tokens<C: TokenCounter + ?Sized>(counter: &C, v: &Value) -> usize {
    let mut n = 0;
    // Anthropic `thinking`; a Gemini thought or signed text part's `text`.
    for key in ["thinking", "text"] {
        if let Some(t) = v.get(key).and_then(Value::as_str) {
            n += counter.count_text(t);
        }
    }
    if let Some(Value::Array(parts)) = v.get("summary") {
        for p in parts {
            if let Some(t) = p.get("text").and_then(Value::as_str) {
                n += counter.count_text(t);
            }
        }
    }
    for key in ["data", "encrypted_content"] {
        if let Some(d) = v.get(key).and_then(Value::as_str) {
            n += encrypted_estimate(d.len());
        }
    }
    n
}

/// Estimated tokens of an encrypted reasoning payload of `base64_len` base64 characters: the
/// ciphertext is `3/4` of that in bytes, roughly the plaintext size, and English text runs about
/// 4 bytes per token (OpenAI's "a token is ~4 characters" rule of thumb). So `len × 3 / 16`,
/// rounded up. Neither provider documents this; it is a size-proportional guess.
pub fn encrypted_estimate(base64_len: usize) -> usize {
    (base64_len * 3).div_ceil(16)
}

/// The counter a pipeline uses: tiktoken with `tokenizer`, behind the per-block cache.
pub fn counter_for(tokenizer: Tokenizer) -> std::sync::Arc<dyn TokenCounter> {
    std::sync::Arc::new(CachedCounter::new(TiktokenCounter::new(tokenizer)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Object, Role, ToolResult, ToolUse};
    use serde_json::json;

    fn o200k() -> TiktokenCounter {
        TiktokenCounter::new(Tokenizer::O200kBase)
    }

    fn _object_safe(_: &dyn TokenCounter) {}

    #[test]
    fn hello_world_is_two_tokens_in_both_vocabularies() {
        assert_eq!(o200k().count_text("hello world"), 2);
        assert_eq!(
            TiktokenCounter::new(Tokenizer::Cl100kBase).count_text("hello world"),
            2
        );
        assert_eq!(o200k().count_text(""), 0);
    }

    #[test]
    fn special_token_markers_are_ordinary_text() {
        // encode_ordinary: "<|endoftext|>" is split into ordinary pieces, never one special token.
        assert!(o200k().count_text("<|endoftext|>") > 1);
    }

    #[test]
    fn tokenizer_names_parse_and_deserialize() {
        assert_eq!(
            "cl100k_base".parse::<Tokenizer>(),
            Ok(Tokenizer::Cl100kBase)
        );
        assert!("gpt2".parse::<Tokenizer>().is_err());
        let t: Tokenizer = serde_json::from_value(json!("o200k_base")).unwrap();
        assert_eq!(t, Tokenizer::O200kBase);
    }

    #[test]
    fn tool_use_counts_name_and_json_input() {
        let c = o200k();
        let input = json!({"command": "ls"});
        let b = Block::ToolUse(ToolUse {
            id: "toolu_1".into(),
            name: "Bash".into(),
            input: ToolInput::Json(input),
            extra: Object::new(),
        });
        let expected = c.count_text("Bash") + c.count_text(r#"{"command":"ls"}"#);
        assert_eq!(c.count_block(&b), expected);
        let args = Block::ToolUse(ToolUse {
            id: "call_1".into(),
            name: "Bash".into(),
            input: ToolInput::Arguments(r#"{"command": "ls"}"#.into()),
            extra: Object::new(),
        });
        assert_eq!(
            c.count_block(&args),
            c.count_text("Bash") + c.count_text(r#"{"command": "ls"}"#)
        );
    }

    #[test]
    fn tool_result_counts_nested_blocks() {
        let c = o200k();
        let r = Block::ToolResult(ToolResult {
            tool_use_id: "t".into(),
            content: Some(ToolResultContent::Blocks(vec![
                Block::text("hello world"),
                Block::text("hello world"),
            ])),
            is_error: None,
            extra: Object::new(),
            outcome: Default::default(),
            rewritten: None,
        });
        assert_eq!(c.count_block(&r), 4);
    }

    #[test]
    fn thinking_counts_text_not_signature_and_estimates_redacted_data() {
        let c = o200k();
        let t = Block::Thinking(
            json!({"type": "thinking", "thinking": "hello world", "signature": "EqQBCkYIBxgCKkBq"}),
        );
        assert_eq!(c.count_block(&t), 2);
        let r = Block::Thinking(json!({"type": "redacted_thinking", "data": "A".repeat(160)}));
        assert_eq!(c.count_block(&r), 30);
        let reasoning = Block::Thinking(
            json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "hello world"}], "encrypted_content": "gAAA"}),
        );
        assert_eq!(c.count_block(&reasoning), 2 + 1);
        // A Gemini thought part: its text, not its signature.
        let gemini = Block::Thinking(
            json!({"text": "hello world", "thought": true, "thoughtSignature": "EqQBCkYIBxgCKkBq"}),
        );
        assert_eq!(c.count_block(&gemini), 2);
    }

    #[test]
    fn message_and_conversation_add_overhead_system_and_tools() {
        let c = o200k();
        let conv = Conversation {
            system: Some(json!("hello world")),
            messages: vec![Message::text(Role::User, "hello world")],
            extra: serde_json::from_value(json!({"tools": [{"name": "x"}]})).unwrap(),
            bare: false,
        };
        let tools = c.count_text(r#"[{"name":"x"}]"#);
        assert_eq!(c.count_message(&conv.messages[0]), MESSAGE_OVERHEAD + 2);
        assert_eq!(
            c.count_conversation(&conv),
            2 + tools + MESSAGE_OVERHEAD + 2
        );
        let blocks = json!([{"type": "text", "text": "hello world"}, {"type": "text", "text": "hello world"}]);
        assert_eq!(c.count_system(Some(&blocks)), 4);
    }

    #[test]
    fn the_split_floor_counts_the_words_a_space_starts() {
        assert_eq!(split_floor(""), 0);
        assert_eq!(split_floor("x"), 1);
        // "[ran", " ok", "]", " `", "cargo", " test", "`": the floor sees the start, " ok"
        // and " test".
        assert_eq!(split_floor("[ran ok] `cargo test`"), 3);
        assert_eq!(split_floor(" hello world"), 2);
        assert!(
            split_floor("[ran ok] `cargo test`") <= o200k().count_text("[ran ok] `cargo test`")
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// The floor never exceeds the count of the oracle (tiktoken-rs `encode_ordinary`, which
        /// the engine equals: oracle_tests.rs), in either vocabulary: texts of words, spaces
        /// and other whitespace, line breaks, digits, punctuation, contractions, non-ASCII
        /// letters and marks.
        #[test]
        fn the_split_floor_is_at_most_the_count(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    " ", "  ", "a", "Zeta", "word", " x", "\n", "\r\n", "\t", "1", "2024",
                    ".", "]", "`", "/", "'s", "'LL", "é", "中文", "—", "…", "\u{301}", "_",
                    "\u{a0}", "\u{3000}", " \n", "ǅ", "ʰ", "🦀", "\0",
                ]),
                0..40,
            )
        ) {
            let text: String = parts.concat();
            let floor = split_floor(&text);
            for vocabulary in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
                let oracle = match vocabulary {
                    Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton(),
                    Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
                };
                let count = oracle.encode_ordinary(&text).len();
                proptest::prop_assert!(floor <= count, "{text:?}: floor {floor} > {count} ({vocabulary})");
            }
        }
    }
}
