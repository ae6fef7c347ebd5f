//! Google Gemini `generateContent`: `{"contents": [{"role": "user"|"model", "parts": [...]}],
//! "systemInstruction"?, "tools"?, "generationConfig"?, ...}`. Blocks here are the parts, named
//! by their data key (`functionCall`, `inlineData`); a part has no `type`.

use super::{
    BlockKind::*, BlockRule, Carry, CarryRule, PairRule, RoleKind, RoleRule, Rule, Signal, Table,
};

const MODEL: &[RoleKind] = &[RoleKind::Assistant];
const USER: &[RoleKind] = &[RoleKind::User];
const ANY: &[RoleKind] = &[];
const SOURCE: &str = "Gemini API reference, models.generateContent and Content / Part (ai.google.dev/api/caching#Content, 2026)";
const SIGNATURES: &str = "ai.google.dev/gemini-api/docs/thought-signatures; docs.cloud.google.com/vertex-ai/generative-ai/docs/thought-signatures";

/// The Google Gemini `generateContent` table (../shared/PROVIDER_RULES.md §D).
pub static GEMINI: Table = Table {
    format: "gemini",
    api: "Google Gemini API (POST /v1beta/models/{model}:generateContent, :streamGenerateContent)",
    roles: &[
        RoleRule {
            name: "user",
            kind: RoleKind::User,
            rule: "D0.1",
        },
        RoleRule {
            name: "model",
            kind: RoleKind::Assistant,
            rule: "D0.1",
        },
    ],
    blocks: &[
        BlockRule {
            name: "text",
            kind: Text,
            roles: ANY,
            rule: "D0.2",
        },
        BlockRule {
            name: "thought",
            kind: Thinking,
            roles: MODEL,
            rule: "D6",
        },
        BlockRule {
            name: "thoughtSignature",
            kind: Thinking,
            roles: MODEL,
            rule: "D3",
        },
        BlockRule {
            name: "inlineData",
            kind: Media,
            roles: ANY,
            rule: "D0.2",
        },
        BlockRule {
            name: "fileData",
            kind: Media,
            roles: ANY,
            rule: "D0.2",
        },
        BlockRule {
            name: "functionCall",
            kind: Call,
            roles: MODEL,
            rule: "D1",
        },
        BlockRule {
            name: "functionResponse",
            kind: Output,
            roles: USER,
            rule: "D1",
        },
        BlockRule {
            name: "executableCode",
            kind: SelfContained,
            roles: MODEL,
            rule: "D0.2",
        },
        BlockRule {
            name: "codeExecutionResult",
            kind: SelfContained,
            roles: MODEL,
            rule: "D0.2",
        },
    ],
    pairs: &[PairRule {
        call: "functionCall",
        output: "functionResponse",
        id_field: "id",
        output_id_alt: None,
        when: None,
        human: "function call",
        rule: "D1",
    }],
    rules: &[
        Rule {
            id: "D0.1",
            says: "Roles are user and model; there is no system role in contents (one systemInstruction per request); contents is not empty and a content's parts are not empty.",
            source: SOURCE,
            error: "Please use a valid role: user, model.",
        },
        Rule {
            id: "D0.2",
            says: "A part holds one datum (text, inlineData, fileData, functionCall, functionResponse, executableCode, codeExecutionResult) with thought / thoughtSignature beside it; functionCall has a name and object args, functionResponse a name and an object response ({\"output\": ...} or {\"error\": ...} as Gemini CLI sends it).",
            source: SOURCE,
            error: "GenerateContentRequest.contents[33].parts[0].data: required oneof field 'data' must have one initialized field",
        },
        Rule {
            id: "D1",
            says: "A model turn with N functionCall parts is answered by the next content, one user turn with N functionResponse parts, the same ids and names, in the same order.",
            source: "../shared/PROVIDER_RULES.md D1; google-gemini/gemini-cli#4217",
            error: "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.",
        },
        Rule {
            id: "D2",
            says: "A function call turn comes right after a user turn or a function response turn; the first content is a user turn.",
            source: "../shared/PROVIDER_RULES.md D2",
            error: "Please ensure that function call turn comes immediately after a user turn or after a function response turn.",
        },
        Rule {
            id: "D3",
            says: "Gemini 3 and later: every thoughtSignature of the current turn (since the last user text) is returned exactly, on the part it came with.",
            source: SIGNATURES,
            error: "Function call is missing a thought_signature in functionCall parts",
        },
        Rule {
            id: "D4",
            says: "Parallel calls sign only the first functionCall; a signature is bound to its model family and is never truncated, merged or moved.",
            source: SIGNATURES,
            error: "INVALID_ARGUMENT",
        },
        Rule {
            id: "D5",
            says: "A call turn the model did not sign (history a client built) carries thoughtSignature \"skip_thought_signature_validator\" on its first functionCall.",
            source: SIGNATURES,
            error: "",
        },
        Rule {
            id: "D6",
            says: "Prior turns are sent whole (thoughts, calls, answers) or without their thoughts; thought parts are never edited.",
            source: SIGNATURES,
            error: "",
        },
        Rule {
            id: "D7",
            says: "systemInstruction, tools, toolConfig and generationConfig are the request's cached prefix: compaction never edits them, and a summary or marker goes in a user turn, never in systemInstruction; contents[0] (Gemini CLI's environment and task) stays first.",
            source: "../shared/PROVIDER_RULES.md §D (what compactor needs); Gemini API context caching docs",
            error: "",
        },
    ],
    carry: &[
        CarryRule {
            what: Carry::ClientContext,
            says: "Context text parts of dropped user turns (Gemini CLI's <session_context>) are carried verbatim, newest of each kind, before the digest; contents[0] itself is pinned.",
            rule: "D7",
        },
        CarryRule {
            what: Carry::Opaque,
            says: "A content of an unknown role or holding an unknown part is kept byte-identical, in place, with its call turn and response turn.",
            rule: "D0.2",
        },
    ],
    signals: &[
        Signal::TopLevelKey("contents"),
        Signal::TopLevelKey("systemInstruction"),
        Signal::TopLevelKey("generationConfig"),
        Signal::TopLevelKey("safetySettings"),
        Signal::TopLevelKey("toolConfig"),
        Signal::TopLevelKey("cachedContent"),
        Signal::MessageKey("parts"),
        Signal::Role("model"),
        Signal::ModelPrefix("gemini-"),
    ],
    failures: &[],
    server_state: &["cachedContent"],
    model_roles: &[("assistant", "model")],
    pin_first: true,
};
