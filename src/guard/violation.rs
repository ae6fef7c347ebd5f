//! Typed, located rule violations.

use crate::conversation::Role;
use crate::format::Format;
use crate::tokens::image::ImageFault;
use serde::Serialize;

/// One broken rule, with where it is.
///
/// Displays as `PATH: WHAT`, e.g. `messages[3].content[1]: tool_result toolu_x has no tool_use in
/// the previous message`. The path is in the wire format's own terms (`messages[i].content[j]`,
/// `messages[i].tool_calls[j]`, `input[i]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// JSON path of the offending element.
    pub path: String,
    /// Index of the message (or Responses item).
    pub message: Option<usize>,
    /// Index of the block inside the message's content, when a block is at fault.
    pub block: Option<usize>,
    /// What is wrong.
    pub kind: ViolationKind,
    /// The ID of the provider rule it breaks in the format's table (`crate::rules`: its
    /// source and the provider's error text are there); `None` for this project's own checks
    /// of what a compaction keeps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
}

/// What rule is broken. The sources: Anthropic Messages API docs (tool use, extended thinking,
/// message ordering), OpenAI Chat Completions and Responses API docs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ViolationKind {
    /// No messages at all.
    NoMessages,
    /// Anthropic: the first message must have role user.
    FirstNotUser {
        /// The role found.
        role: Role,
    },
    /// A role the format does not allow (Anthropic: only user and assistant).
    RoleNotAllowed {
        /// The role found.
        role: Role,
    },
    /// A message with no content (only the final assistant message may be empty).
    EmptyContent,
    /// Anthropic: a text block that is empty or only whitespace.
    EmptyText,
    /// A block type that may not appear in a message of this role.
    BlockNotAllowed {
        /// The block type.
        block: String,
        /// The message role.
        role: Role,
    },
    /// Two calls with one id.
    DuplicateCall {
        /// The id.
        id: String,
    },
    /// A result whose call is not where the format needs it (or nowhere).
    OrphanResult {
        /// The call id the result names.
        id: String,
        /// Where the call should have been.
        expected: &'static str,
    },
    /// Responses: an output item that answers a call of another type (a
    /// `custom_tool_call_output` for a `function_call`); the provider looks for a call of the
    /// output's own type (B1.1: `No tool call found for custom tool call output with call_id
    /// …`).
    OutputTypeMismatch {
        /// The call id.
        id: String,
        /// The output's wire type.
        output: String,
        /// How the provider names the output's call type (`custom tool call`).
        output_human: String,
        /// The wire type of the call with that id.
        call: String,
    },
    /// Responses: a `reasoning` item that is not directly followed by an item the model
    /// emitted (B2: `Item 'rs_…' of type 'reasoning' was provided without its required
    /// following item.`).
    ReasoningWithoutFollower {
        /// The reasoning item's `id` (empty when it has none).
        id: String,
    },
    /// Responses: a `compaction_trigger` item that is not the last input item (B3.1: "Must be
    /// the final input item").
    TriggerNotLast,
    /// A second result for one call.
    DuplicateResult {
        /// The id.
        id: String,
    },
    /// Calls without results where the format needs them.
    MissingResults {
        /// The unanswered call ids.
        ids: Vec<String>,
        /// Where the results should have been.
        expected: &'static str,
    },
    /// Anthropic: a tool_result after other content in its message.
    ResultNotFirst {
        /// The call id.
        id: String,
    },
    /// Anthropic: tool_use input that is not a JSON object.
    InputNotObject {
        /// The call id.
        id: String,
    },
    /// OpenAI: `arguments` that is not a JSON object encoded as a string.
    ArgumentsNotJson {
        /// The call id.
        id: String,
        /// The parser's complaint.
        reason: String,
    },
    /// Anthropic: a server tool result (`web_search_tool_result`, `code_execution_tool_result`,
    /// ...) whose `server_tool_use` is not earlier in the same turn (Anthropic "Server tools"
    /// docs; error text `unexpected tool_use_id found in ... tool_result blocks`).
    OrphanServerResult {
        /// The server tool call id (`srvtoolu_…`) the result names.
        id: String,
    },
    /// Anthropic: a `server_tool_use` of an earlier turn left without its result (only the
    /// newest turn may end with one pending, a `pause_turn` continuation).
    ServerCallWithoutResult {
        /// The server tool call id.
        id: String,
    },
    /// Anthropic: a `tool_use.caller.tool_id` that names no earlier `server_tool_use`
    /// (Anthropic "Programmatic tool calling" docs).
    CallerMissing {
        /// The client call id.
        id: String,
        /// The server tool call id it names.
        caller: String,
    },
    /// Responses: an `mcp_approval_response` / `mcp_call` whose `approval_request_id` names no
    /// earlier `mcp_approval_request` (OpenAI "Remote MCP servers" docs).
    OrphanApproval {
        /// The item type.
        item: String,
        /// The approval request id it names.
        id: String,
    },
    /// Responses: a `computer_call_output` acknowledging a safety check its `computer_call` did
    /// not raise (OpenAI "Computer use" docs: acknowledge the call's `pending_safety_checks`).
    UnknownSafetyCheck {
        /// The call id.
        id: String,
        /// The safety check id.
        check: String,
    },
    /// Anthropic: more than 4 `cache_control` breakpoints (error text `A maximum of 4 blocks
    /// with cache_control may be provided. Found N.`). Repaired by compaction
    /// ([`ViolationKind::is_repairable`]).
    TooManyCacheBreakpoints {
        /// Breakpoints found.
        found: usize,
    },
    /// Anthropic: `cache_control` on an empty text block (error text `cache_control cannot be
    /// set for empty text blocks`).
    CacheControlOnEmptyText,
    /// An inline base64 image whose data is empty or not base64 (Anthropic error texts `image
    /// cannot be empty`, `invalid base64 data`, `Could not process image`; OpenAI `Invalid
    /// image`): every later request that carries it fails. Compaction replaces one outside the
    /// newest exchange by a text placeholder (`crate::guard::plan_repairs`); one inside it
    /// refuses the input.
    BadImage {
        /// What is wrong with the data.
        reason: ImageFault,
        /// The image's index in the content of the tool_result that holds it (the violation's
        /// `block` is then that tool_result); `None` for an image at the top level of its
        /// message.
        #[serde(skip_serializing_if = "Option::is_none")]
        nested: Option<usize>,
    },
    /// A provider compaction item (Anthropic `compaction` block, Responses `compaction` item) of
    /// the input is missing from the output or changed: it holds the provider's summary of all
    /// that came before it.
    CompactionItemLost,
    /// A request's output token limit (`max_tokens`, `max_completion_tokens`,
    /// `max_output_tokens`) that is no integer of at least 1 (Anthropic Messages and OpenAI API
    /// references: an integer, at least 1). Checked by [`super::check_token_limits`], not by
    /// [`super::validate`]: compaction passes the field through as it came.
    BadTokenLimit {
        /// The field.
        field: String,
        /// What it holds: the number as serde_json writes it (`1e+400`, `-0`), or its type.
        found: String,
    },
    /// Compaction: a top-level field other than the history changed (tools, model, metadata,
    /// ...), which would break the provider's prompt cache and tool definitions.
    EnvelopeChanged {
        /// The top-level key.
        key: String,
    },
    /// Compaction: the output holds more `cache_control` breakpoints than the input.
    CacheBreakpointsAdded {
        /// Breakpoints in the input.
        before: usize,
        /// Breakpoints in the output.
        after: usize,
    },
    /// Compaction: the system prompt changed.
    SystemChanged,
    /// Compaction: the newest message changed beyond shortening its tool results.
    LastMessageChanged,
    /// Compaction: a thinking / redacted_thinking / reasoning block was altered.
    ThinkingModified,
    /// Compaction: the assistant turn of the open tool loop is not kept verbatim.
    OpenLoopChanged,
    /// Compaction: a failed call now reads as a success, or vanished without a trace.
    FailureLost {
        /// The call id.
        id: String,
    },
    /// Anthropic: a mid-conversation system message breaks a rule of its content or place
    /// (../shared/PROVIDER_RULES.md A1, A2, A4.4, A6; the provider's texts in
    /// [`SystemRule`]'s display).
    SystemMessage {
        /// Which rule.
        #[serde(rename = "system_rule")]
        rule: SystemRule,
    },
    /// Compaction: a standing instruction of the input (a system / developer message in
    /// force) is in no instruction message of the output (it was dropped, or only folded into
    /// user text).
    InstructionLost {
        /// The start of its text.
        text: String,
    },
    /// Compaction: the output is larger than the input.
    Grew {
        /// Tokens before.
        before: usize,
        /// Tokens after.
        after: usize,
    },
}

/// The rule a mid-conversation system message breaks ([`ViolationKind::SystemMessage`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "what", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SystemRule {
    /// A1.1: a content-bearing system message first.
    First,
    /// A1.2: not right after a user message or a paused assistant message.
    NotAfterUser,
    /// A1.3: followed by something other than an assistant message.
    NotBeforeAssistant,
    /// A2: a block type a system message may not hold.
    BlockType {
        /// The block type.
        block: String,
    },
    /// A2.1: no content (and no `output_config`: not the effort-only form).
    Empty,
    /// A6: `clear_at` on a message that is not a system message.
    ClearAtRole,
    /// A6: `clear_at` neither `next_user_message` nor `never`.
    ClearAtValue,
    /// A6.2: a turn-scoped message holding more than text.
    TurnScopedContent,
    /// A6.2: a turn-scoped message with `output_config`.
    TurnScopedEffort,
    /// A6.2: `cache_control` on a turn-scoped message.
    TurnScopedCache,
    /// A4.4: a tool change right after a paused assistant message.
    ToolChangeAfterPause,
}

impl SystemRule {
    /// The rule's ID in the Anthropic table (`crate::rules::ANTHROPIC`).
    pub fn id(&self) -> &'static str {
        match self {
            SystemRule::First => "A1.1",
            SystemRule::NotAfterUser => "A1.2",
            SystemRule::NotBeforeAssistant => "A1.3",
            SystemRule::BlockType { .. } => "A2",
            SystemRule::Empty => "A2.1",
            SystemRule::ClearAtRole | SystemRule::ClearAtValue => "A6",
            SystemRule::TurnScopedContent
            | SystemRule::TurnScopedEffort
            | SystemRule::TurnScopedCache => "A6.2",
            SystemRule::ToolChangeAfterPause => "A4.4",
        }
    }
}

impl std::fmt::Display for SystemRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const DIRECTIVE: &str = "; the directive-only form (content: [] with output_config) is accepted at any position";
        match self {
            SystemRule::First => write!(
                f,
                "use the top-level 'system' parameter for the initial system prompt{DIRECTIVE}"
            ),
            SystemRule::NotAfterUser => write!(
                f,
                "role 'system' must follow a 'user' message or an 'assistant' message ending in a server tool result{DIRECTIVE}"
            ),
            SystemRule::NotBeforeAssistant => write!(
                f,
                "role 'system' must precede an 'assistant' message or end the array{DIRECTIVE}"
            ),
            SystemRule::BlockType { block } => write!(
                f,
                "role 'system' supports text, tool_addition, and tool_removal blocks only (found {block})"
            ),
            SystemRule::Empty => write!(f, "system content must contain at least one block"),
            SystemRule::ClearAtRole => {
                write!(f, "clear_at is only permitted on role 'system' messages")
            }
            SystemRule::ClearAtValue => {
                write!(
                    f,
                    "clear_at: Input should be 'next_user_message' or 'never'"
                )
            }
            SystemRule::TurnScopedContent => write!(
                f,
                "a turn-scoped system message supports text blocks only (clear_at: 'next_user_message')"
            ),
            SystemRule::TurnScopedEffort => write!(
                f,
                "output_config is not permitted on a turn-scoped system message (clear_at: 'next_user_message')"
            ),
            SystemRule::TurnScopedCache => write!(
                f,
                "cache_control is not permitted on a turn-scoped system message (clear_at: 'next_user_message')"
            ),
            SystemRule::ToolChangeAfterPause => write!(
                f,
                "tool changes are not accepted immediately after a paused assistant turn (one ending in a server tool result); only text is"
            ),
        }
    }
}

impl ViolationKind {
    /// The ID of the rule this breaks in `format`'s table (`crate::rules`), `None` for the
    /// checks of what a compaction must keep (this project's rules, not a provider's).
    pub fn rule_id(&self, format: Format) -> Option<&'static str> {
        use ViolationKind::*;
        let (a, r, c, g) = match self {
            NoMessages | EmptyContent | EmptyText => ("A0.6", "B10", "C0.3", "D0.1"),
            FirstNotUser { .. } | RoleNotAllowed { .. } => ("A0.1", "B10", "C1", "D2"),
            BlockNotAllowed { .. } => ("A0.1", "B10", "C0.3", "D0.2"),
            DuplicateCall { .. } | InputNotObject { .. } => ("A0.2", "B0.1", "C0.1", "D0.2"),
            ArgumentsNotJson { .. } => ("A0.2", "B0.1", "C0.1", "D0.2"),
            OrphanResult { .. } | DuplicateResult { .. } | OutputTypeMismatch { .. } => {
                ("A0.3", "B1.1", "C2.1", "D1")
            }
            MissingResults { .. } => ("A0.2", "B1", "C2", "D1"),
            ReasoningWithoutFollower { .. } => ("A0.1", "B2", "C1", "D6"),
            TriggerNotLast => ("A0.1", "B3.1", "C1", "D0.1"),
            ResultNotFirst { .. } => ("A0.4", "B1", "C2", "D1"),
            OrphanServerResult { .. } | ServerCallWithoutResult { .. } | CallerMissing { .. } => {
                ("A11", "B8", "C1", "D0.2")
            }
            OrphanApproval { .. } | UnknownSafetyCheck { .. } => ("A11", "B8", "C1", "D0.2"),
            TooManyCacheBreakpoints { .. } | CacheControlOnEmptyText => ("A14", "B10", "C1", "D7"),
            BadImage { .. } => ("A0.7", "B0.2", "C0.3", "D0.2"),
            SystemMessage { rule } => return Some(rule.id()),
            _ => return None,
        };
        Some(match format {
            Format::Anthropic => a,
            Format::OpenAiResponses => r,
            Format::OpenAiChat => c,
            Format::Gemini => g,
        })
    }

    /// True for a fault of the input that compaction itself repairs (a surplus of
    /// `cache_control` breakpoints: the guard removes the surplus from every output), so an
    /// input with it is compacted rather than refused.
    pub fn is_repairable(&self) -> bool {
        matches!(self, ViolationKind::TooManyCacheBreakpoints { .. })
    }
}

impl std::fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use ViolationKind::*;
        match self {
            NoMessages => write!(f, "no messages"),
            FirstNotUser { role } => write!(f, "first message must have role user, found {role}"),
            RoleNotAllowed { role } => write!(f, "role {role} is not allowed in this format"),
            EmptyContent => write!(f, "message has no content"),
            EmptyText => write!(f, "text block is empty or whitespace only"),
            BlockNotAllowed { block, role } => write!(f, "{block} block in a {role} message"),
            DuplicateCall { id } => write!(f, "duplicate tool_use id {id}"),
            OrphanResult { id, expected } => {
                write!(f, "tool_result {id} has no tool_use {expected}")
            }
            OutputTypeMismatch {
                id,
                output,
                output_human,
                call,
            } => write!(
                f,
                "{output} {id} answers a {call}: No tool call found for {output_human} output with call_id {id}"
            ),
            ReasoningWithoutFollower { id } => write!(
                f,
                "Item '{id}' of type 'reasoning' was provided without its required following item."
            ),
            TriggerNotLast => write!(f, "compaction_trigger must be the final input item"),
            DuplicateResult { id } => write!(f, "duplicate tool_result for {id}"),
            MissingResults { ids, expected } => {
                write!(
                    f,
                    "tool_use {} without tool_result {expected}",
                    ids.join(", ")
                )
            }
            ResultNotFirst { id } => {
                write!(
                    f,
                    "tool_result {id} comes after other content (tool_result blocks must come first)"
                )
            }
            InputNotObject { id } => write!(f, "tool_use {id} input is not a JSON object"),
            ArgumentsNotJson { id, reason } => {
                write!(
                    f,
                    "tool call {id} arguments is not a JSON object string: {reason}"
                )
            }
            OrphanServerResult { id } => write!(
                f,
                "server tool result for {id} has no server_tool_use earlier in its turn"
            ),
            ServerCallWithoutResult { id } => write!(
                f,
                "server_tool_use {id} has no result (only the newest turn may leave one pending)"
            ),
            CallerMissing { id, caller } => write!(
                f,
                "tool_use {id} names caller {caller}, which is no earlier server_tool_use"
            ),
            OrphanApproval { item, id } => write!(
                f,
                "{item} names approval_request_id {id}, which no earlier mcp_approval_request has"
            ),
            UnknownSafetyCheck { id, check } => write!(
                f,
                "computer_call_output {id} acknowledges safety check {check}, which its computer_call did not raise"
            ),
            TooManyCacheBreakpoints { found } => write!(
                f,
                "{found} cache_control breakpoints (A maximum of 4 blocks with cache_control may be provided)"
            ),
            CacheControlOnEmptyText => {
                write!(f, "cache_control cannot be set for empty text blocks")
            }
            BadImage { reason, .. } => write!(f, "image {reason}"),
            CompactionItemLost => write!(
                f,
                "a provider compaction item of the input is missing or changed"
            ),
            BadTokenLimit { field, found } => write!(
                f,
                "{field} must be an integer of at least 1 (no fraction or exponent), not {found}"
            ),
            EnvelopeChanged { key } => write!(f, "top-level field {key:?} changed"),
            CacheBreakpointsAdded { before, after } => {
                write!(f, "cache_control breakpoints rose from {before} to {after}")
            }
            SystemChanged => write!(f, "system prompt changed"),
            LastMessageChanged => {
                write!(
                    f,
                    "newest message changed (only its tool results may be shortened)"
                )
            }
            ThinkingModified => write!(
                f,
                "thinking block modified (its signature would no longer match)"
            ),
            OpenLoopChanged => write!(
                f,
                "the assistant turn of the open tool loop was not kept verbatim"
            ),
            FailureLost { id } => write!(f, "failed call {id} no longer shows its failure"),
            SystemMessage { rule } => write!(f, "{rule} ({})", rule.id()),
            InstructionLost { text } => write!(
                f,
                "a standing instruction is in no system/developer message of the output: {text:?}"
            ),
            Grew { before, after } => write!(f, "output grew from {before} to {after} tokens"),
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.kind)
    }
}

impl Serialize for Role {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Renders the JSON path of message `i` / block `j` in the terms of `format`.
pub(crate) fn path_of(
    format: Format,
    conv: &crate::conversation::Conversation,
    i: usize,
    j: Option<usize>,
) -> String {
    crate::format::block_path(format, conv, i, j)
}
