//! OpenAI Chat Completions: `{"messages": [{"role", "content", "tool_calls"?}], "tools"?, ...}`.
//! Blocks here are the content parts and the `tool_calls[]` entry types.

use super::{
    BlockKind::*, BlockRule, Carry, CarryRule, PairRule, RoleKind, RoleRule, Rule, Signal, Table,
};

const ASSISTANT: &[RoleKind] = &[RoleKind::Assistant];
const ANY: &[RoleKind] = &[];
const NOT_ASSISTANT: &[RoleKind] = &[RoleKind::User, RoleKind::Instruction];
const SOURCE: &str =
    "openai-python types/chat/chat_completion_*_param.py (2026-08); Chat Completions API reference";

/// The OpenAI Chat Completions table (../shared/PROVIDER_RULES.md §C).
pub static OPENAI_CHAT: Table = Table {
    format: "openai-chat",
    api: "OpenAI Chat Completions API (POST /v1/chat/completions)",
    roles: &[
        RoleRule {
            name: "system",
            kind: RoleKind::Instruction,
            rule: "C1",
        },
        RoleRule {
            name: "developer",
            kind: RoleKind::Instruction,
            rule: "C1",
        },
        RoleRule {
            name: "user",
            kind: RoleKind::User,
            rule: "C1",
        },
        RoleRule {
            name: "assistant",
            kind: RoleKind::Assistant,
            rule: "C1",
        },
        RoleRule {
            name: "tool",
            kind: RoleKind::ToolOutput,
            rule: "C2",
        },
        RoleRule {
            name: "function",
            kind: RoleKind::ToolOutput,
            rule: "C0.2",
        },
    ],
    blocks: &[
        BlockRule {
            name: "text",
            kind: Text,
            roles: ANY,
            rule: "C3",
        },
        BlockRule {
            name: "image_url",
            kind: Media,
            roles: NOT_ASSISTANT,
            rule: "C0.3",
        },
        BlockRule {
            name: "input_audio",
            kind: Media,
            roles: NOT_ASSISTANT,
            rule: "C0.3",
        },
        BlockRule {
            name: "file",
            kind: Media,
            roles: NOT_ASSISTANT,
            rule: "C0.3",
        },
        BlockRule {
            name: "refusal",
            kind: Content,
            roles: ASSISTANT,
            rule: "C4",
        },
        BlockRule {
            name: "function",
            kind: Call,
            roles: ASSISTANT,
            rule: "C2",
        },
        BlockRule {
            name: "custom",
            kind: Call,
            roles: ASSISTANT,
            rule: "C5",
        },
    ],
    pairs: &[
        PairRule {
            call: "function",
            output: "tool",
            id_field: "tool_call_id",
            output_id_alt: None,
            when: None,
            human: "tool_call",
            rule: "C2",
        },
        PairRule {
            call: "custom",
            output: "tool",
            id_field: "tool_call_id",
            output_id_alt: None,
            when: None,
            human: "tool_call",
            rule: "C5",
        },
    ],
    rules: &[
        Rule {
            id: "C0.1",
            says: "function arguments are a JSON object encoded as a string; call ids are unique.",
            source: SOURCE,
            error: "",
        },
        Rule {
            id: "C0.2",
            says: "A legacy assistant function_call is answered by the next message, role function, with the same name (deprecated; an unanswered one is allowed).",
            source: "Chat Completions API reference (deprecated function_call and the function role)",
            error: "",
        },
        Rule {
            id: "C0.3",
            says: "content is null or missing only on an assistant message with tool_calls, function_call, refusal or audio; image, audio and file parts stand in user messages.",
            source: SOURCE,
            error: "",
        },
        Rule {
            id: "C1",
            says: "Roles are developer, system, user, assistant, tool (and legacy function); system and developer messages may repeat and sit anywhere but inside a tool_calls -> tool block.",
            source: "openai-python chat_completion_message_param.py; third-party live probe 2026-09-10 (mid-context system/developer -> 200)",
            error: "",
        },
        Rule {
            id: "C2",
            says: "An assistant message with tool_calls is followed by tool messages answering every id before any other role; a tool message answers a call of the assistant message before it.",
            source: SOURCE,
            error: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_X",
        },
        Rule {
            id: "C2.1",
            says: "A tool message answers a tool_calls entry of a preceding assistant message.",
            source: SOURCE,
            error: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
        },
        Rule {
            id: "C3",
            says: "tool, developer and system content is a string or an array of text parts.",
            source: SOURCE,
            error: "",
        },
        Rule {
            id: "C4",
            says: "Assistant content is text or refusal parts, or null with tool_calls, function_call or refusal set; a refusal is content, not an empty message.",
            source: SOURCE,
            error: "",
        },
        Rule {
            id: "C5",
            says: "A custom tool call is {id, type: \"custom\", custom: {name, input}} with free-form input and no function object.",
            source: "openai-python chat_completion_message_custom_tool_call_param.py",
            error: "Missing required parameter: 'messages[2].tool_calls[0].custom.input'.",
        },
    ],
    carry: &[
        CarryRule {
            what: Carry::StandingInstruction,
            says: "system and developer messages of a dropped range are kept verbatim after the marker, in order, deduplicated (never inside a tool_calls -> tool block, never folded into user text).",
            rule: "C1",
        },
        CarryRule {
            what: Carry::ClientContext,
            says: "Context text blocks of dropped user messages are carried verbatim, newest of each kind, before the digest.",
            rule: "C1",
        },
        CarryRule {
            what: Carry::Opaque,
            says: "A message of an unknown role or holding an unknown part or call type is kept byte-identical, in place, with its tool exchange.",
            rule: "C1",
        },
    ],
    signals: &[
        Signal::MessageKey("tool_calls"),
        Signal::MessageKey("tool_call_id"),
        Signal::MessageKey("function_call"),
        Signal::Role("tool"),
        Signal::Role("developer"),
        Signal::Role("function"),
        Signal::BlockType("image_url"),
        Signal::BlockType("input_audio"),
        Signal::TopLevelKey("max_completion_tokens"),
        Signal::TopLevelKey("response_format"),
        Signal::TopLevelKey("reasoning_effort"),
        Signal::TopLevelKey("n"),
        Signal::TopLevelKey("frequency_penalty"),
        Signal::TopLevelKey("presence_penalty"),
        Signal::TopLevelKey("logprobs"),
        Signal::TopLevelKey("stream_options"),
        Signal::ModelPrefix("gpt-"),
        Signal::ModelPrefix("o1"),
        Signal::ModelPrefix("o3"),
        Signal::ModelPrefix("o4"),
    ],
    failures: &[],
    server_state: &[],
    model_roles: &[],
    pin_first: false,
};
