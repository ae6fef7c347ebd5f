//! Anthropic Messages: `{"system"?, "messages": [{"role", "content"}], "tools"?, ...}`.

use super::{
    BlockKind::*, BlockRule, Carry, CarryRule, PairRule, RoleKind, RoleRule, Rule, Signal, Table,
};

const USER: &[RoleKind] = &[RoleKind::User];
const ASSISTANT: &[RoleKind] = &[RoleKind::Assistant];
const SYSTEM: &[RoleKind] = &[RoleKind::Instruction];
const USER_OR_ASSISTANT: &[RoleKind] = &[RoleKind::User, RoleKind::Assistant];
const ANY: &[RoleKind] = &[];

const MID_CONVERSATION: &str = "platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages (May and Sept 2026 revisions)";
const TOOL_USE_DOCS: &str = "platform.claude.com/docs/en/agents-and-tools/tool-use (Tool use)";

/// The Anthropic Messages table (../shared/PROVIDER_RULES.md §A).
pub static ANTHROPIC: Table = Table {
    format: "anthropic",
    api: "Anthropic Messages API (POST /v1/messages)",
    roles: &[
        RoleRule {
            name: "user",
            kind: RoleKind::User,
            rule: "A0.1",
        },
        RoleRule {
            name: "assistant",
            kind: RoleKind::Assistant,
            rule: "A0.1",
        },
        RoleRule {
            name: "system",
            kind: RoleKind::Instruction,
            rule: "A1",
        },
    ],
    blocks: &[
        BlockRule {
            name: "text",
            kind: Text,
            roles: ANY,
            rule: "A0.6",
        },
        BlockRule {
            name: "image",
            kind: Media,
            roles: USER_OR_ASSISTANT,
            rule: "A0.7",
        },
        BlockRule {
            name: "document",
            kind: Media,
            roles: USER_OR_ASSISTANT,
            rule: "A0.7",
        },
        BlockRule {
            name: "search_result",
            kind: Content,
            roles: USER,
            rule: "A12",
        },
        BlockRule {
            name: "thinking",
            kind: Thinking,
            roles: ASSISTANT,
            rule: "A0.5",
        },
        BlockRule {
            name: "redacted_thinking",
            kind: Thinking,
            roles: ASSISTANT,
            rule: "A0.5",
        },
        BlockRule {
            name: "tool_use",
            kind: Call,
            roles: ASSISTANT,
            rule: "A0.2",
        },
        BlockRule {
            name: "tool_result",
            kind: Output,
            roles: USER,
            rule: "A0.3",
        },
        BlockRule {
            name: "tool_reference",
            kind: ToolReference,
            roles: ANY,
            rule: "A10",
        },
        BlockRule {
            name: "server_tool_use",
            kind: ServerCall,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "mcp_tool_use",
            kind: ServerCall,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "web_search_tool_result",
            kind: ServerOutput,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "web_fetch_tool_result",
            kind: ServerOutput,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "code_execution_tool_result",
            kind: ServerOutput,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "bash_code_execution_tool_result",
            kind: ServerOutput,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "text_editor_code_execution_tool_result",
            kind: ServerOutput,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "tool_search_tool_result",
            kind: ServerOutput,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "advisor_tool_result",
            kind: ServerOutput,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "mcp_tool_result",
            kind: ServerOutput,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "container_upload",
            kind: Content,
            roles: USER,
            rule: "A11",
        },
        BlockRule {
            name: "fallback",
            kind: Content,
            roles: ASSISTANT,
            rule: "A11",
        },
        BlockRule {
            name: "mcp_tool_listing",
            kind: Content,
            roles: ASSISTANT,
            rule: "A5",
        },
        BlockRule {
            name: "compaction",
            kind: Compaction,
            roles: ASSISTANT,
            rule: "A9",
        },
        BlockRule {
            name: "tool_addition",
            kind: ToolChange,
            roles: SYSTEM,
            rule: "A4",
        },
        BlockRule {
            name: "tool_removal",
            kind: ToolChange,
            roles: SYSTEM,
            rule: "A4",
        },
        BlockRule {
            name: "mid_conv_system",
            kind: Text,
            roles: SYSTEM,
            rule: "A2",
        },
    ],
    pairs: &[PairRule {
        call: "tool_use",
        output: "tool_result",
        id_field: "tool_use_id",
        output_id_alt: None,
        when: None,
        human: "tool_use",
        rule: "A0.2",
    }],
    rules: &[
        Rule {
            id: "A0.1",
            says: "Roles are user and assistant (and, since 2026, system: A1); the first message that is not a system message has role user.",
            source: "Messages API reference (messages)",
            error: "messages: first message must use the \"user\" role",
        },
        Rule {
            id: "A0.2",
            says: "Each tool_use is answered by a tool_result of its id in the very next message, a user message; a tool_use input is an object; call ids are unique.",
            source: TOOL_USE_DOCS,
            error: "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_X",
        },
        Rule {
            id: "A0.3",
            says: "Each tool_result answers a tool_use of the previous message, once.",
            source: TOOL_USE_DOCS,
            error: "messages.3.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_X. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
        },
        Rule {
            id: "A0.4",
            says: "In a user message, tool_result blocks come before any other content.",
            source: TOOL_USE_DOCS,
            error: "",
        },
        Rule {
            id: "A0.5",
            says: "thinking and redacted_thinking blocks stand in assistant messages and are sent back byte-identical (their signature covers the text).",
            source: "platform.claude.com/docs/en/build-with-claude/extended-thinking",
            error: "",
        },
        Rule {
            id: "A0.6",
            says: "No message is empty and no text block is empty or whitespace only, but the final assistant message (a prefill).",
            source: "Messages API reference; reported widely",
            error: "messages: text content blocks must be non-empty",
        },
        Rule {
            id: "A0.7",
            says: "Inline base64 image data is not empty and decodes.",
            source: "anthropics/claude-code#35897, #5240 (reported)",
            error: "image cannot be empty",
        },
        Rule {
            id: "A1",
            says: "role \"system\" messages may stand inside messages (mid-conversation system messages).",
            source: MID_CONVERSATION,
            error: "role 'system' is not supported on this model",
        },
        Rule {
            id: "A1.1",
            says: "A system message that carries content is not messages[0].",
            source: MID_CONVERSATION,
            error: "messages.0: use the top-level 'system' parameter for the initial system prompt; the directive-only form (content: [] with output_config) is accepted at any position",
        },
        Rule {
            id: "A1.2",
            says: "A system message (a run of them is judged as one) immediately follows a user message or an assistant message ending in a server tool result; so never between a tool_use and its tool_result.",
            source: MID_CONVERSATION,
            error: "messages.2: role 'system' must follow a 'user' message or an 'assistant' message ending in a server tool result; the directive-only form (content: [] with output_config) is accepted at any position",
        },
        Rule {
            id: "A1.3",
            says: "A system message (or run) is the last message or is immediately followed by an assistant message.",
            source: MID_CONVERSATION,
            error: "messages.67: role 'system' must precede an 'assistant' message or end the array",
        },
        Rule {
            id: "A1.5",
            says: "Consecutive system messages are one section judged as a whole (accepted since the Sept 2026 revision; compactor never creates one).",
            source: MID_CONVERSATION,
            error: "",
        },
        Rule {
            id: "A1.6",
            says: "An effort-only system message (content [] with output_config) renders nothing and is accepted at any position.",
            source: MID_CONVERSATION,
            error: "",
        },
        Rule {
            id: "A2",
            says: "A system message's content is a non-empty string or text, tool_addition and tool_removal blocks.",
            source: MID_CONVERSATION,
            error: "messages.1: role 'system' supports text, tool_addition, and tool_removal blocks only",
        },
        Rule {
            id: "A2.1",
            says: "A system message that carries content has at least one block.",
            source: MID_CONVERSATION,
            error: "messages.1: system content must contain at least one block",
        },
        Rule {
            id: "A4",
            says: "tool_addition and tool_removal blocks of system messages change the tools offered from their position on; tools is never edited.",
            source: MID_CONVERSATION,
            error: "",
        },
        Rule {
            id: "A4.4",
            says: "Tool changes are not accepted immediately after a paused assistant message (one ending in a server tool result); text is.",
            source: MID_CONVERSATION,
            error: "",
        },
        Rule {
            id: "A5",
            says: "A tool_addition may define a tool by value (tool_definition); the definition in force is the only place that tool exists.",
            source: MID_CONVERSATION,
            error: "",
        },
        Rule {
            id: "A6",
            says: "clear_at is only on system messages and is \"next_user_message\" or \"never\".",
            source: MID_CONVERSATION,
            error: "messages.3.clear_at: clear_at is only permitted on role 'system' messages",
        },
        Rule {
            id: "A6.2",
            says: "A turn-scoped system message (clear_at next_user_message) holds text blocks only, no output_config and no cache_control.",
            source: MID_CONVERSATION,
            error: "messages.3: a turn-scoped system message supports text blocks only (clear_at: 'next_user_message')",
        },
        Rule {
            id: "A6.4",
            says: "A turn-scoped system message follows the placement rules; one followed directly by a user message is refused, not cleared.",
            source: MID_CONVERSATION,
            error: "",
        },
        Rule {
            id: "A7",
            says: "A system message's output_config changes the effort from its position on.",
            source: "platform.claude.com/docs/en/build-with-claude/effort (per-message effort)",
            error: "messages.2.output_config: Extra inputs are not permitted",
        },
        Rule {
            id: "A9",
            says: "A compaction block stands in an assistant message; the API ignores everything before the latest one; it is sent back byte-identical.",
            source: "platform.claude.com/docs/en/build-with-claude/compaction; anthropic-sdk-python beta_compaction_block_param.py",
            error: "",
        },
        Rule {
            id: "A10",
            says: "A tool_reference block in a tool search result loads a deferred tool; it names a tool of tools.",
            source: "platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool",
            error: "Tool reference 'unknown_tool' has no corresponding tool definition",
        },
        Rule {
            id: "A11",
            says: "A server tool's result stands in the same assistant turn as its server_tool_use (or a pause_turn continuation); a tool_use.caller names a kept server_tool_use.",
            source: "anthropic-sdk-python types/beta/beta_content_block_param.py; Server tools docs",
            error: "",
        },
        Rule {
            id: "A12",
            says: "search_result blocks stand in user content or tool_result content; citations point into them by index.",
            source: "anthropic-sdk-python search_result_block_param.py",
            error: "",
        },
        Rule {
            id: "A14",
            says: "At most 4 blocks carry cache_control; none on an empty text block.",
            source: "platform.claude.com/docs/en/build-with-claude/prompt-caching",
            error: "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        },
    ],
    carry: &[
        CarryRule {
            what: Carry::StandingInstruction,
            says: "Standing system messages of a dropped range (not clear_at next_user_message) are re-sent verbatim, deduplicated, as one system message at the first legal slot after the marker (after a user turn, before an assistant turn); never folded into user text; never in an input that had none.",
            rule: "A1",
        },
        CarryRule {
            what: Carry::ToolChanges,
            says: "tool_addition / tool_removal blocks (inline definitions included) of dropped system messages go into that one system message, in order.",
            rule: "A4",
        },
        CarryRule {
            what: Carry::Effort,
            says: "The last output_config of the dropped system messages goes on that one system message.",
            rule: "A7",
        },
        CarryRule {
            what: Carry::ToolLoader,
            says: "A tool exchange whose tool_result holds the tool_reference that loaded a tool a kept tool_use calls is kept in place.",
            rule: "A10",
        },
        CarryRule {
            what: Carry::ClientContext,
            says: "Context text blocks of dropped user messages (Claude Code's <system-reminder>: CLAUDE.md, environment, deferred tools, skills) are carried verbatim, newest of each kind, before the digest.",
            rule: "A1",
        },
        CarryRule {
            what: Carry::Opaque,
            says: "A message of an unknown role or holding an unknown block type is kept byte-identical, in place, with its tool exchange.",
            rule: "A0.1",
        },
    ],
    signals: &[
        Signal::TopLevelKey("system"),
        Signal::TopLevelKey("anthropic_version"),
        Signal::TopLevelKey("context_management"),
        Signal::TopLevelKey("output_config"),
        Signal::TopLevelKey("thinking"),
        Signal::BlockType("tool_use"),
        Signal::BlockType("image"),
        Signal::BlockType("document"),
        Signal::BlockType("tool_result"),
        Signal::BlockType("thinking"),
        Signal::BlockType("redacted_thinking"),
        Signal::BlockType("server_tool_use"),
        Signal::BlockType("tool_addition"),
        Signal::BlockType("tool_removal"),
        Signal::MessageKey("clear_at"),
        Signal::ModelPrefix("claude"),
    ],
    failures: &[],
    server_state: &[],
    model_roles: &[],
    pin_first: false,
};
