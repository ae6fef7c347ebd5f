//! OpenAI Responses: `{"instructions"?, "input": [item], ...}`. Blocks here are the input item
//! types (one item is one message of the model) and the content part types of message items.

use super::{
    BlockKind::*, BlockRule, Carry, CarryRule, FailureRule, FailureSignal, PairRule, RoleKind,
    RoleRule, Rule, Signal, Table,
};

const ANY: &[RoleKind] = &[];
const ASSISTANT: &[RoleKind] = &[RoleKind::Assistant];
const OUTPUT: &[RoleKind] = &[RoleKind::ToolOutput];
const INSTRUCTION: &[RoleKind] = &[RoleKind::Instruction];
const UNION: &str =
    "openai-python src/openai/types/responses/response_input_item_param.py (2026-08 snapshot)";

/// A call item type and its output item type, paired by `call_id`.
const fn pair(
    call: &'static str,
    output: &'static str,
    human: &'static str,
    when: Option<(&'static str, &'static str)>,
) -> PairRule {
    PairRule {
        call,
        output,
        id_field: "call_id",
        output_id_alt: None,
        when,
        human,
        rule: "B1",
    }
}

const fn item(
    name: &'static str,
    kind: super::BlockKind,
    roles: &'static [RoleKind],
    rule: &'static str,
) -> BlockRule {
    BlockRule {
        name,
        kind,
        roles,
        rule,
    }
}

/// The OpenAI Responses table (../shared/PROVIDER_RULES.md §B).
pub static OPENAI_RESPONSES: Table = Table {
    format: "openai-responses",
    api: "OpenAI Responses API (POST /v1/responses)",
    roles: &[
        RoleRule {
            name: "user",
            kind: RoleKind::User,
            rule: "B10",
        },
        RoleRule {
            name: "assistant",
            kind: RoleKind::Assistant,
            rule: "B10",
        },
        RoleRule {
            name: "system",
            kind: RoleKind::Instruction,
            rule: "B10",
        },
        RoleRule {
            name: "developer",
            kind: RoleKind::Instruction,
            rule: "B10",
        },
        // No message role on the wire: the role compactor's reader gives the output items
        // (`function_call_output`, `apply_patch_call_output`, ...).
        RoleRule {
            name: "tool",
            kind: RoleKind::ToolOutput,
            rule: "B1",
        },
    ],
    blocks: &[
        // Message items and their content parts.
        item("message", Text, ANY, "B10"),
        item("input_text", Text, ANY, "B10"),
        item("output_text", Text, ASSISTANT, "B10"),
        item("text", Text, ANY, "B10"),
        item("refusal", Content, ASSISTANT, "B10"),
        item("input_image", Media, ANY, "B0.2"),
        item("input_file", Media, ANY, "B0.2"),
        item("input_audio", Media, ANY, "B0.2"),
        // Client calls and their outputs.
        item("function_call", Call, ASSISTANT, "B1"),
        item("function_call_output", Output, OUTPUT, "B1"),
        item("custom_tool_call", Call, ASSISTANT, "B1"),
        item("custom_tool_call_output", Output, OUTPUT, "B1"),
        item("apply_patch_call", Call, ASSISTANT, "B1"),
        item("apply_patch_call_output", Output, OUTPUT, "B1"),
        item("shell_call", Call, ASSISTANT, "B1"),
        item("shell_call_output", Output, OUTPUT, "B1"),
        item("local_shell_call", Call, ASSISTANT, "B1"),
        item("local_shell_call_output", Output, OUTPUT, "B1"),
        item("computer_call", Call, ASSISTANT, "B1"),
        item("computer_call_output", Output, OUTPUT, "B1"),
        item("tool_search_call", Call, ASSISTANT, "B8"),
        item("tool_search_output", Output, OUTPUT, "B8"),
        item("program", Call, ASSISTANT, "B7"),
        item("program_output", Output, OUTPUT, "B7"),
        // Built-in calls that carry their own result.
        item("web_search_call", SelfContained, ASSISTANT, "B0.3"),
        item("file_search_call", SelfContained, ASSISTANT, "B0.3"),
        item("code_interpreter_call", SelfContained, ASSISTANT, "B0.3"),
        item("image_generation_call", SelfContained, ASSISTANT, "B0.3"),
        item("mcp_list_tools", SelfContained, ASSISTANT, "B0.3"),
        item("mcp_call", SelfContained, ASSISTANT, "B8"),
        item("mcp_approval_request", ApprovalRequest, ASSISTANT, "B8"),
        item("mcp_approval_response", ApprovalResponse, ANY, "B8"),
        // State.
        item("reasoning", Thinking, ASSISTANT, "B2"),
        item("compaction", Compaction, ANY, "B3"),
        item("compaction_trigger", Trigger, ANY, "B3.1"),
        item("item_reference", StoredItem, ANY, "B4"),
        item("additional_tools", ToolChange, INSTRUCTION, "B5"),
        item("configuration_update", Configuration, INSTRUCTION, "B6"),
    ],
    pairs: &[
        pair(
            "function_call",
            "function_call_output",
            "function call",
            None,
        ),
        pair(
            "custom_tool_call",
            "custom_tool_call_output",
            "custom tool call",
            None,
        ),
        pair(
            "apply_patch_call",
            "apply_patch_call_output",
            "apply patch call",
            None,
        ),
        pair("shell_call", "shell_call_output", "shell call", None),
        // openai-python LocalShellCallOutput names the call in `id`.
        PairRule {
            output_id_alt: Some("id"),
            ..pair(
                "local_shell_call",
                "local_shell_call_output",
                "local shell call",
                None,
            )
        },
        pair(
            "computer_call",
            "computer_call_output",
            "computer call",
            None,
        ),
        pair(
            "tool_search_call",
            "tool_search_output",
            "tool search call",
            Some(("execution", "client")),
        ),
        pair("program", "program_output", "program", None),
    ],
    rules: &[
        Rule {
            id: "B0.1",
            says: "function_call arguments are a JSON object encoded as a string; call ids are unique.",
            source: UNION,
            error: "",
        },
        Rule {
            id: "B0.2",
            says: "Inline image data (input_image data URLs) is not empty and decodes.",
            source: "OpenAI error text (reported)",
            error: "Invalid image",
        },
        Rule {
            id: "B0.3",
            says: "Built-in tool calls without an output item in the union (web_search_call, file_search_call, code_interpreter_call, image_generation_call, mcp_list_tools) hold their own result.",
            source: UNION,
            error: "",
        },
        Rule {
            id: "B1",
            says: "Each call item and its output share call_id; every call needs its output and every output its call, of the matching type (unless the history lives on the server, B4).",
            source: "openai-python response_input_item_param.py; openai/codex#17630",
            error: "No tool output found for function call call_X.",
        },
        Rule {
            id: "B1.1",
            says: "An output item answers an earlier call of its own type.",
            source: "openai/codex#17630",
            error: "No tool call found for function call output with call_id call_X.",
        },
        Rule {
            id: "B1.2",
            says: "Failure lives in fields: apply_patch_call_output status \"failed\", shell_call_output output[].outcome (exit_code != 0, timeout), mcp_call error.",
            source: UNION,
            error: "",
        },
        Rule {
            id: "B2",
            says: "A reasoning item is followed by the item it preceded; it is replayed verbatim.",
            source: "OpenAI Responses 400 (reported)",
            error: "Item 'rs_…' of type 'reasoning' was provided without its required following item.",
        },
        Rule {
            id: "B3",
            says: "A compaction item is kept verbatim; items before the latest one may be dropped by the client.",
            source: "developers.openai.com/api/docs/guides/compaction",
            error: "",
        },
        Rule {
            id: "B3.1",
            says: "A compaction_trigger item must be the final input item.",
            source: "developers.openai.com/api/docs/guides/compaction",
            error: "",
        },
        Rule {
            id: "B4",
            says: "With previous_response_id or conversation, input holds only new items: outputs of calls stored on the server are valid input; nothing the server holds is pruned; an item_reference is never expanded.",
            source: "openai-python responses.create; Conversation state guide",
            error: "Mutually exclusive parameters: 'previous_response_id' and 'conversation'.",
        },
        Rule {
            id: "B5",
            says: "An additional_tools item offers its tools from its position on.",
            source: "openai-docs skill upgrading-to-gpt-6-astra.md (reported)",
            error: "",
        },
        Rule {
            id: "B6",
            says: "A configuration_update item changes the reasoning effort until the next one.",
            source: "openai-docs skill upgrading-to-gpt-6-astra.md (reported)",
            error: "",
        },
        Rule {
            id: "B7",
            says: "program / program_output pair by call_id; a call with caller {type: program} keeps its program item.",
            source: "openai-docs skill (GPT-6 programmatic tool calling, reported)",
            error: "",
        },
        Rule {
            id: "B8",
            says: "A client tool search (execution client) pairs by call_id; an mcp_approval_response or mcp_call names a kept mcp_approval_request.",
            source: "OpenAI Remote MCP servers guide; openai-python McpApprovalResponse",
            error: "",
        },
        Rule {
            id: "B9",
            says: "Assistant message items keep their phase (commentary, final_answer).",
            source: "gpt-5.3-codex prompting guide (reported)",
            error: "",
        },
        Rule {
            id: "B10",
            says: "Message items have role user, assistant, system or developer; system and developer items may sit anywhere in input but between a call and its output.",
            source: "openai-python EasyInputMessageParam; third-party live probe (mid-input developer item -> 200)",
            error: "",
        },
    ],
    carry: &[
        CarryRule {
            what: Carry::StandingInstruction,
            says: "system and developer message items of a dropped range are kept verbatim after the marker, in order, deduplicated.",
            rule: "B10",
        },
        CarryRule {
            what: Carry::ToolChanges,
            says: "additional_tools items of a dropped range are kept verbatim after the marker.",
            rule: "B5",
        },
        CarryRule {
            what: Carry::Effort,
            says: "The last configuration_update of a dropped range is kept verbatim after the marker.",
            rule: "B6",
        },
        CarryRule {
            what: Carry::ToolLoader,
            says: "A client tool search whose output loaded a tool a kept call uses is kept in place.",
            rule: "B8",
        },
        CarryRule {
            what: Carry::ClientContext,
            says: "Context text blocks of dropped user messages (Codex's <environment_context>, <user_instructions>) are carried verbatim, newest of each kind, before the digest.",
            rule: "B10",
        },
        CarryRule {
            what: Carry::Opaque,
            says: "An item of an unknown type or role is kept byte-identical, in place, with the unit it belongs to.",
            rule: "B10",
        },
    ],
    signals: &[
        Signal::TopLevelKey("input"),
        Signal::TopLevelKey("instructions"),
        Signal::TopLevelKey("previous_response_id"),
        Signal::TopLevelKey("conversation"),
        Signal::TopLevelKey("max_output_tokens"),
        Signal::BlockType("input_text"),
        Signal::BlockType("output_text"),
        Signal::BlockType("input_image"),
        Signal::BlockType("function_call"),
        Signal::BlockType("function_call_output"),
        Signal::BlockType("reasoning"),
        Signal::ModelPrefix("gpt-"),
        Signal::ModelPrefix("codex"),
    ],
    failures: &[
        FailureRule {
            item: "apply_patch_call_output",
            signal: FailureSignal::Status {
                field: "status",
                failed: &["failed"],
                ok: &["completed"],
                cause: "output",
            },
            rule: "B1.2",
        },
        FailureRule {
            item: "shell_call_output",
            signal: FailureSignal::Outcomes {
                list: "output",
                outcome: "outcome",
                exit_code: "exit_code",
                timeout: "timeout",
                text: &["stderr", "stdout"],
            },
            rule: "B1.2",
        },
        FailureRule {
            item: "mcp_call",
            signal: FailureSignal::Present { field: "error" },
            rule: "B1.2",
        },
        FailureRule {
            item: "mcp_call",
            signal: FailureSignal::Status {
                field: "status",
                failed: &["failed"],
                ok: &["completed"],
                cause: "output",
            },
            rule: "B1.2",
        },
    ],
    server_state: &["previous_response_id", "conversation"],
    model_roles: &[],
    pin_first: false,
};
