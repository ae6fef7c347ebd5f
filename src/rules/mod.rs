//! The provider rule tables: one per request format, the one place that names roles and block
//! or item types.
//!
//! ```text
//! wire name ("system", "tool_addition", "apply_patch_call") -> Table -> kind (RoleKind, BlockKind)
//!                                                                    -> pairing (PairRule)
//!                                                                    -> placement rules (Rule)
//!                                                                    -> what stays in force (CarryRule)
//! ```
//!
//! Every other module asks a [`Table`] what a role or a type *is* (an instruction, a client
//! call, a server result, a tool change, ...) and reasons over the kinds, never over names. A
//! name the table does not hold is **unknown**: not invalid, but opaque. The guard keeps an
//! opaque unit byte-identical and in place and compacts the rest (see `guard::Layout`).
//!
//! Each [`Rule`] carries its ID in `../shared/PROVIDER_RULES.md` (`A1.2`, `B3`, `C2`) or, for
//! the rules that reference leaves out as settled before 2026, a project ID (`A0.x`, `B0.x`,
//! `C0.x`), the source it comes from and the provider's error text as reported. `compactor
//! rules` prints the tables; `docs/rules.md` is that output, checked in CI.
//!
//! Adding a rule is one row here plus its test; adding a format is one more table.

mod anthropic;
mod doc;
mod gemini;
mod openai_chat;
mod openai_responses;

pub use anthropic::ANTHROPIC;
pub use doc::markdown;
pub use gemini::GEMINI;
pub use openai_chat::OPENAI_CHAT;
pub use openai_responses::OPENAI_RESPONSES;

use crate::conversation::{Block, Message, ToolResultContent};
use serde::Serialize;

/// One provider's rules.
#[derive(Debug)]
pub struct Table {
    /// The format's name (`anthropic`, `openai-chat`, `openai-responses`).
    pub format: &'static str,
    /// The provider's API, for humans.
    pub api: &'static str,
    /// The roles the provider accepts, with what each is.
    pub roles: &'static [RoleRule],
    /// The content block types (Anthropic, Chat parts) or input item types (Responses) the
    /// provider documents, with what each is and in which roles it may stand.
    pub blocks: &'static [BlockRule],
    /// Which call pairs with which output, and by which id field.
    pub pairs: &'static [PairRule],
    /// The rules, each with its ID, source and the provider's error text.
    pub rules: &'static [Rule],
    /// What must stay in force when the round that holds it is dropped.
    pub carry: &'static [CarryRule],
    /// What in a body tells this format apart from the others ([`crate::format::detect`]).
    pub signals: &'static [Signal],
    /// The fields of items that tell whether a call failed ([`crate::outcome`]), beyond the
    /// format's general outcome policy.
    pub failures: &'static [FailureRule],
    /// Top-level keys of a request body that say the history lives on the provider's server
    /// (Responses `previous_response_id`, `conversation`: rule B4). With one set, `input` holds
    /// only new items: outputs of calls the server holds are valid, and nothing is pruned.
    pub server_state: &'static [&'static str],
    /// The wire name of a role the neutral model names otherwise (`assistant` is Gemini's
    /// `model`): `(model name, wire name)`. A role read as [`crate::conversation::Role::Other`]
    /// keeps its own name.
    pub model_roles: &'static [(&'static str, &'static str)],
    /// Whether the first message is pinned like a leading instruction: kept first and
    /// byte-identical by every output (Gemini: `contents[0]`, rule D7, holds the client's
    /// environment and the task of a tool loop that has no other user text turn).
    pub pin_first: bool,
}

/// What a role is to compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoleKind {
    /// The human's turn; on Anthropic also the message that carries tool results.
    User,
    /// The model's turn (and, in Responses, every item the model emitted).
    Assistant,
    /// An operator instruction: OpenAI `system` / `developer` messages, an Anthropic
    /// mid-conversation `system` message. Leading ones are pinned; later ones belong to the
    /// round before them and stay in force when that round is dropped.
    Instruction,
    /// A message that carries one tool result (OpenAI Chat `tool` and legacy `function`,
    /// Responses `*_output` items).
    ToolOutput,
}

/// A role of a table.
#[derive(Debug)]
pub struct RoleRule {
    /// The wire name (`user`, `system`, `developer`, `tool`).
    pub name: &'static str,
    /// What it is.
    pub kind: RoleKind,
    /// The rule that admits it.
    pub rule: &'static str,
}

/// What a content block or input item is to compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    /// Text, read and cut as text.
    Text,
    /// An image, document, file or audio part: kept whole, counted by its own rule.
    Media,
    /// Signed or encrypted model reasoning: byte-identical or dropped, never edited.
    Thinking,
    /// A client tool call, answered by an [`BlockKind::Output`] of the same id.
    Call,
    /// A client tool result.
    Output,
    /// A server-side tool call (Anthropic `server_tool_use`, `mcp_tool_use`): its result comes
    /// in the same assistant turn.
    ServerCall,
    /// A server-side tool result (`*_tool_result`, `mcp_tool_result`). An assistant message
    /// that ends in one is paused (`pause_turn`).
    ServerOutput,
    /// A built-in call that holds its own result (Responses `web_search_call`, `mcp_call`, ...).
    SelfContained,
    /// A request for approval (Responses `mcp_approval_request`), answered by id.
    ApprovalRequest,
    /// The answer to an approval request.
    ApprovalResponse,
    /// A provider compaction item: everything before it is summarized by the provider; pinned.
    Compaction,
    /// Must be the last input item (Responses `compaction_trigger`).
    Trigger,
    /// A change of the tools offered from here on (Anthropic `tool_addition`, `tool_removal`;
    /// Responses `additional_tools`).
    ToolChange,
    /// What loads a deferred tool into the model's context (Anthropic `tool_reference` in a
    /// tool search result; Responses `tool_search_output` of a client search).
    ToolReference,
    /// A change of the model's settings from here on (Responses `configuration_update`).
    Configuration,
    /// A pointer to an item the provider stores (Responses `item_reference`).
    StoredItem,
    /// Other documented content with no structure of its own for compaction (search results,
    /// refusals, container uploads, fallback markers, tool listings): kept whole in its message.
    Content,
}

/// A content block type or input item type of a table.
#[derive(Debug)]
pub struct BlockRule {
    /// The wire `type`.
    pub name: &'static str,
    /// What it is.
    pub kind: BlockKind,
    /// The roles of the messages it may stand in; empty = any role.
    pub roles: &'static [RoleKind],
    /// The rule that admits it here.
    pub rule: &'static str,
}

/// A call type and the output type that answers it.
#[derive(Debug)]
pub struct PairRule {
    /// The call's wire type (`tool_use`, `function_call`, `apply_patch_call`).
    pub call: &'static str,
    /// The output's wire type (`tool_result`, `function_call_output`).
    pub output: &'static str,
    /// The field of the output that names the call (`tool_use_id`, `call_id`,
    /// `tool_call_id`).
    pub id_field: &'static str,
    /// The field an output names its call by when it lacks `id_field`
    /// (`local_shell_call_output` carries the call's id in `id`: openai-python
    /// `LocalShellCallOutput`, "The unique ID of the local shell tool call").
    pub output_id_alt: Option<&'static str>,
    /// When set, the pair holds only for calls whose field has this value (a Responses tool
    /// search pairs only when `execution` is `client`).
    pub when: Option<(&'static str, &'static str)>,
    /// How the provider names the call in its error texts (`function call`, `apply patch call`).
    pub human: &'static str,
    /// The rule.
    pub rule: &'static str,
}

impl PairRule {
    /// Whether the pair holds for a call or output item with these fields: always without a
    /// `when`, else when the item's field has the value (a tool search item pairs only when
    /// its `execution` is `client`).
    pub fn holds_for(&self, item: &serde_json::Map<String, serde_json::Value>) -> bool {
        self.when
            .is_none_or(|(k, v)| item.get(k).and_then(serde_json::Value::as_str) == Some(v))
    }
}

/// One rule of a provider, as the reference states it.
#[derive(Debug)]
pub struct Rule {
    /// `A1.2` (../shared/PROVIDER_RULES.md) or a project ID for rules settled before 2026.
    pub id: &'static str,
    /// The rule in one sentence.
    pub says: &'static str,
    /// Where it comes from (the provider's page, SDK type or a public report).
    pub source: &'static str,
    /// The provider's error text (verbatim as reported; indices are examples), empty when none
    /// is recorded.
    pub error: &'static str,
}

/// What stays in force across a dropped round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Carry {
    /// Standing instruction messages (not turn-scoped): re-sent verbatim after the marker,
    /// deduplicated (Anthropic: as one system message; OpenAI: as the messages they were).
    StandingInstruction,
    /// Tool changes (additions, removals, inline definitions): carried in order.
    ToolChanges,
    /// The last effort or configuration directive.
    Effort,
    /// The unit that loaded a deferred tool, while a kept call uses that tool: kept in place.
    ToolLoader,
    /// The client's own context blocks in dropped user messages (Claude Code's
    /// `<system-reminder>`, Codex's `<environment_context>`): newest of each kind, verbatim,
    /// in the marker message before the digest.
    ClientContext,
    /// A unit of a role or type the table does not know: kept byte-identical, in place.
    Opaque,
}

/// A carry rule of a table.
#[derive(Debug)]
pub struct CarryRule {
    /// What is carried.
    pub what: Carry,
    /// How, in one sentence.
    pub says: &'static str,
    /// The rule it serves.
    pub rule: &'static str,
}

/// Where an item says whether the call it belongs to failed (../shared/PROVIDER_RULES.md
/// B1.2). Read once, when the item is read ([`crate::outcome::from_fields`]).
#[derive(Debug)]
pub struct FailureRule {
    /// The wire type of the item holding the signal (`apply_patch_call_output`, `mcp_call`).
    pub item: &'static str,
    /// The signal.
    pub signal: FailureSignal,
    /// The rule.
    pub rule: &'static str,
}

/// How an item's fields tell a failure.
#[derive(Debug)]
pub enum FailureSignal {
    /// A string field: one of `failed` is a failure, one of `ok` a success, anything else
    /// says nothing. `cause` names the string field that tells why (the output's text).
    Status {
        /// The field (`status`).
        field: &'static str,
        /// Values that mean the call failed.
        failed: &'static [&'static str],
        /// Values that mean it succeeded.
        ok: &'static [&'static str],
        /// The field whose text is the cause.
        cause: &'static str,
    },
    /// A field that is a failure whenever it is present and neither null nor empty
    /// (`mcp_call.error`); it is its own cause.
    Present {
        /// The field.
        field: &'static str,
    },
    /// A list of chunks, each with an outcome object (`shell_call_output.output[].outcome`):
    /// an outcome of type `timeout` or an exit code other than 0 is a failure, every chunk
    /// with exit code 0 a success. The cause is the failing chunk's first non-empty text field
    /// of `text` (`stderr`, then `stdout`).
    Outcomes {
        /// The list field (`output`).
        list: &'static str,
        /// The outcome field of a chunk (`outcome`).
        outcome: &'static str,
        /// The exit code field of an outcome (`exit_code`).
        exit_code: &'static str,
        /// The outcome `type` that means the command timed out.
        timeout: &'static str,
        /// The chunk's text fields, in order of preference for the cause.
        text: &'static [&'static str],
    },
}

/// A trace of a format in a body, for [`crate::format::detect`]. Strong signals exist in this
/// format only; weak ones make it likelier.
#[derive(Debug)]
pub enum Signal {
    /// A top-level key of the request body.
    TopLevelKey(&'static str),
    /// A key of a message object.
    MessageKey(&'static str),
    /// A message role.
    Role(&'static str),
    /// A content block type (or Responses item type).
    BlockType(&'static str),
    /// A model name prefix (`claude-`, `gpt-`).
    ModelPrefix(&'static str),
}

impl Table {
    /// The kind of the role named `name`; `None` for a role this table does not know.
    pub fn role_kind(&self, name: &str) -> Option<RoleKind> {
        self.roles.iter().find(|r| r.name == name).map(|r| r.kind)
    }

    /// The rule of the block or item type named `name`; `None` for a type this table does not
    /// know (opaque).
    pub fn block(&self, name: &str) -> Option<&'static BlockRule> {
        self.blocks.iter().find(|b| b.name == name)
    }

    /// The kind of the block or item type named `name`; `None` when unknown.
    pub fn block_kind(&self, name: &str) -> Option<BlockKind> {
        self.block(name).map(|b| b.kind)
    }

    /// The pair whose call type is `call`.
    pub fn pair_of_call(&self, call: &str) -> Option<&'static PairRule> {
        self.pairs.iter().find(|p| p.call == call)
    }

    /// The pair whose output type is `output`.
    pub fn pair_of_output(&self, output: &str) -> Option<&'static PairRule> {
        self.pairs.iter().find(|p| p.output == output)
    }

    /// Whether a call item of type `call` with fields `item` pairs with an output (the pair's
    /// `when` holds): the pair rule, else `None`.
    pub fn pair_of_call_item(
        &self,
        call: &str,
        item: &serde_json::Map<String, serde_json::Value>,
    ) -> Option<&'static PairRule> {
        self.pair_of_call(call).filter(|p| p.holds_for(item))
    }

    /// [`Table::pair_of_call_item`] for an output item.
    pub fn pair_of_output_item(
        &self,
        output: &str,
        item: &serde_json::Map<String, serde_json::Value>,
    ) -> Option<&'static PairRule> {
        self.pair_of_output(output).filter(|p| p.holds_for(item))
    }

    /// The failure rules of items of type `item`.
    pub fn failure_rules<'t>(&'t self, item: &'t str) -> impl Iterator<Item = &'t FailureRule> {
        self.failures.iter().filter(move |f| f.item == item)
    }

    /// Whether `body_extra` (the top-level fields of a request besides the history) says the
    /// history lives on the server ([`Table::server_state`], B4).
    pub fn server_holds_history(
        &self,
        body_extra: &serde_json::Map<String, serde_json::Value>,
    ) -> bool {
        self.server_state
            .iter()
            .any(|k| body_extra.get(*k).is_some_and(|v| !v.is_null()))
    }

    /// Whether this table carries `what` across a dropped round.
    pub fn carries(&self, what: Carry) -> bool {
        self.carry.iter().any(|c| c.what == what)
    }
}

/// What in a message the table does not know: the role, or the first block or item type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unknown {
    /// A role the table does not hold.
    Role(String),
    /// A block or item type the table does not hold (`(none)` for a block without a string
    /// `type`); `nested` when it stands inside a tool result's content.
    Block {
        /// The wire type.
        name: String,
        /// Inside a tool result's content.
        nested: bool,
    },
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unknown::Role(r) => write!(f, "role {r:?}"),
            Unknown::Block {
                name,
                nested: false,
            } => write!(f, "type {name:?}"),
            Unknown::Block { name, nested: true } => write!(f, "type {name:?} in a tool result"),
        }
    }
}

impl Table {
    /// What message `m` is: the kind of its role; `None` for an unknown role.
    pub fn kind_of(&self, m: &Message) -> Option<RoleKind> {
        self.role_kind(self.wire_role(&m.role))
    }

    /// The wire name of `role` in this format ([`Table::model_roles`]).
    pub fn wire_role<'r>(&self, role: &'r crate::conversation::Role) -> &'r str {
        let name = role.as_str();
        if role.is_other() {
            return name;
        }
        self.model_roles
            .iter()
            .find(|(m, _)| *m == name)
            .map_or(name, |(_, w)| w)
    }

    /// The kind of a block: from the model's own variants, and for a block kept verbatim
    /// ([`Block::Other`]) from its wire `type`; `None` when the table does not know it.
    pub fn kind_of_block(&self, b: &Block) -> Option<BlockKind> {
        match b {
            Block::Text(_) => Some(BlockKind::Text),
            Block::ToolUse(_) => Some(BlockKind::Call),
            Block::ToolResult(_) => Some(BlockKind::Output),
            Block::Thinking(_) => Some(BlockKind::Thinking),
            Block::Image(_) | Block::Document(_) => Some(BlockKind::Media),
            Block::Other(v) => self.other_name(v).and_then(|t| self.block_kind(t)),
        }
    }

    /// The name of a block kept verbatim: its wire `type`, or for a part without one (Gemini
    /// names a part by its data key: `inlineData`) its first key this table lists.
    pub fn other_name<'v>(&self, v: &'v serde_json::Value) -> Option<&'v str> {
        match v.get("type") {
            Some(t) => t.as_str(),
            None => v
                .as_object()?
                .keys()
                .find(|k| self.block(k).is_some())
                .map(String::as_str),
        }
    }

    /// The first thing in `m` this table does not know (its role, a block type, a type inside a
    /// tool result's content), or `None` when it knows all of it.
    pub fn unknown_in(&self, m: &Message) -> Option<Unknown> {
        if self.kind_of(m).is_none() {
            return Some(Unknown::Role(m.role.as_str().to_string()));
        }
        let name = |b: &Block| match b {
            Block::Other(v) => v
                .get("type")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("(none)")
                .to_string(),
            other => other.kind().to_string(),
        };
        for b in &m.content {
            if self.kind_of_block(b).is_none() {
                return Some(Unknown::Block {
                    name: name(b),
                    nested: false,
                });
            }
            if let Block::ToolResult(r) = b
                && let Some(ToolResultContent::Blocks(inner)) = &r.content
                && let Some(x) = inner.iter().find(|x| self.kind_of_block(x).is_none())
            {
                return Some(Unknown::Block {
                    name: name(x),
                    nested: true,
                });
            }
        }
        None
    }
}

/// Every table, in the order of `../shared/PROVIDER_RULES.md`.
pub fn tables() -> [&'static Table; 4] {
    [&ANTHROPIC, &OPENAI_RESPONSES, &OPENAI_CHAT, &GEMINI]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_a_row_names_is_in_its_table() {
        for t in tables() {
            let ids: Vec<&str> = t.rules.iter().map(|r| r.id).collect();
            let named = t
                .roles
                .iter()
                .map(|r| r.rule)
                .chain(t.blocks.iter().map(|b| b.rule))
                .chain(t.pairs.iter().map(|p| p.rule))
                .chain(t.carry.iter().map(|c| c.rule))
                .chain(t.failures.iter().map(|f| f.rule));
            for id in named {
                assert!(
                    ids.contains(&id),
                    "{}: rule {id} is named but not listed",
                    t.format
                );
            }
        }
    }

    #[test]
    fn names_and_ids_are_unique_in_each_table() {
        for t in tables() {
            let mut ids: Vec<&str> = t.rules.iter().map(|r| r.id).collect();
            let n = ids.len();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), n, "{}: duplicate rule id", t.format);
            let mut names: Vec<&str> = t.blocks.iter().map(|b| b.name).collect();
            let n = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), n, "{}: duplicate block type", t.format);
            let mut roles: Vec<&str> = t.roles.iter().map(|r| r.name).collect();
            let n = roles.len();
            roles.sort_unstable();
            roles.dedup();
            assert_eq!(roles.len(), n, "{}: duplicate role", t.format);
        }
    }

    #[test]
    fn each_failure_rule_names_a_type_of_its_table() {
        for t in tables() {
            for f in t.failures {
                assert!(t.block(f.item).is_some(), "{}: {}", t.format, f.item);
            }
        }
    }

    #[test]
    fn each_pair_names_types_of_its_table() {
        for t in tables() {
            for p in t.pairs {
                assert_eq!(t.block_kind(p.call), Some(BlockKind::Call), "{}", p.call);
                // Chat's output is a message of role tool, not a block.
                let output = t.block_kind(p.output) == Some(BlockKind::Output)
                    || t.role_kind(p.output) == Some(RoleKind::ToolOutput);
                assert!(output, "{}: {} is no output", t.format, p.output);
            }
        }
    }
}
