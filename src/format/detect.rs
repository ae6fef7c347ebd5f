//! Recognising what a file is and loading it into a [`Conversation`].

use super::{Format, FormatError, claude_code, codex, trajectory};
use crate::conversation::{Conversation, Message, Object};
use crate::rules::Signal;
use serde_json::Value;

impl Source {
    /// Its kebab-case name without the request format: `request`, `claude-code`,
    /// `codex-rollout`, `trajectory`.
    pub fn name(self) -> &'static str {
        match self {
            Source::Request(_) => "request",
            Source::ClaudeCode => "claude-code",
            Source::CodexRollout => "codex-rollout",
            Source::Trajectory => "trajectory",
        }
    }
}

/// Options for importing session logs (owned by the Claude Code importer, the only one with options).
pub use super::claude_code::ImportOptions;

/// Where a conversation came from.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A request body (or bare message array) of the given format.
    Request(Format),
    /// A Claude Code session log (`~/.claude/projects/**.jsonl`), imported as Anthropic.
    ClaudeCode,
    /// A Codex CLI rollout (`~/.codex/sessions/**.jsonl`), imported as OpenAI Responses.
    CodexRollout,
    /// A trajectory object whose `messages` is an OpenAI Chat array (mini-swe-agent
    /// `.traj.json`), imported as OpenAI Chat.
    Trajectory,
}

/// A loaded conversation with its request format and origin.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The conversation.
    pub conversation: Conversation,
    /// The request format it is written back in.
    pub format: Format,
    /// What the input was.
    pub source: Source,
    /// What the import left out, for the caller to tell the user.
    pub notes: LoadNotes,
}

/// What loading left out of the input (all empty for a request body).
#[derive(Debug, Clone, Default)]
pub struct LoadNotes {
    /// Claude Code: the messages before the last `compact_boundary`, which the model no longer
    /// saw and which the import left out ([`ImportOptions::whole_log`] keeps them).
    pub before_boundary: Option<Vec<Message>>,
    /// 1-based number of a cut-off last line of a session log that was skipped (the log is
    /// still being written).
    pub skipped_last_line: Option<usize>,
    /// When the body's format was detected and signals of other formats were found too: which
    /// format was used and why ([`Detected::disagreement`]).
    pub detected: Option<String>,
}

fn claude_code_log(text: &str, options: ImportOptions) -> Result<Loaded, FormatError> {
    let imported = claude_code::import_log(text, options)?;
    Ok(Loaded {
        conversation: imported.conversation,
        format: Format::Anthropic,
        source: Source::ClaudeCode,
        notes: LoadNotes {
            before_boundary: imported.before_boundary,
            skipped_last_line: imported.skipped_last_line,
            detected: None,
        },
    })
}

/// Loads bytes as a conversation. With `hint`, the bytes must be a request body of that format;
/// without, the format is detected: JSONL session logs (Claude Code, Codex) by their entry types,
/// JSON bodies by their keys and message shapes ([`guess_format`]).
///
/// # Errors
/// [`FormatError`] when the bytes are not JSON / JSONL, the format cannot be told, or an element is
/// malformed (with its path or line).
pub fn load(
    bytes: &[u8],
    hint: Option<Format>,
    options: ImportOptions,
) -> Result<Loaded, FormatError> {
    let text = std::str::from_utf8(bytes).map_err(|e| FormatError::Shape {
        path: "input".into(),
        message: format!("not UTF-8 at byte {}", e.valid_up_to()),
    })?;
    // A byte-order mark (editors on Windows write one) is not part of the JSON.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let whole: Result<Value, _> = serde_json::from_str(text);
    let value = match whole {
        Ok(v) => v,
        Err(err) => {
            // Not one JSON document: a JSONL session log?
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let Ok(Value::Object(entry)) = serde_json::from_str::<Value>(first) else {
                return Err(FormatError::Json {
                    location: "input".into(),
                    source: err,
                });
            };
            if codex::is_rollout_entry(&entry) {
                log_format(hint, Format::OpenAiResponses, "a Codex rollout")?;
                return Ok(Loaded {
                    conversation: codex::import(text)?,
                    format: Format::OpenAiResponses,
                    source: Source::CodexRollout,
                    notes: LoadNotes::default(),
                });
            }
            if claude_code::looks_like_log(text) {
                log_format(hint, Format::Anthropic, "a Claude Code session log")?;
                return claude_code_log(text, options);
            }
            return Err(FormatError::Json {
                location: "input".into(),
                source: err,
            });
        }
    };
    if let Some(format) = hint {
        if let Some(c) = contradiction(&value, format) {
            // Checked here too, before the trajectory import, which is not `Format::read`.
            let message = c.to_string();
            return Err(FormatError::shape(c.path, message));
        }
        if trajectory::is_trajectory(&value) && format == Format::OpenAiChat {
            return Ok(Loaded {
                conversation: trajectory::import(&value)?,
                format,
                source: Source::Trajectory,
                notes: LoadNotes::default(),
            });
        }
        return Ok(Loaded {
            conversation: format.read(&value)?,
            format,
            source: Source::Request(format),
            notes: LoadNotes::default(),
        });
    }
    if trajectory::is_trajectory(&value) {
        return Ok(Loaded {
            conversation: trajectory::import(&value)?,
            format: Format::OpenAiChat,
            source: Source::Trajectory,
            notes: LoadNotes::default(),
        });
    }
    // A one-line Claude Code log is still a log.
    if let Value::Object(entry) = &value
        && claude_code::looks_like_log(text)
        && !entry.contains_key("messages")
    {
        return claude_code_log(text, options);
    }
    let detected = detect(&value)?;
    let format = detected.format;
    Ok(Loaded {
        conversation: format.read(&value)?,
        format,
        source: Source::Request(format),
        notes: LoadNotes {
            detected: detected.disagreement(),
            ..LoadNotes::default()
        },
    })
}

/// A session log imports into one format: a `--format` naming another is refused, not
/// ignored.
fn log_format(hint: Option<Format>, is: Format, what: &str) -> Result<(), FormatError> {
    match hint {
        Some(given) if given != is => Err(FormatError::shape(
            "input",
            format!("{what} imports as {is}, not as {given} (the format given)"),
        )),
        _ => Ok(()),
    }
}

/// What told a body's format ([`detect`]): the format, the signals of it that were found, and
/// the signals of other formats that were found too (and outweighed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    /// The format the body is read as.
    pub format: Format,
    /// The signals of it found (`top-level "system"`, `a "thinking" block`), in the order
    /// found.
    pub because: Vec<String>,
    /// Signals of other formats found in the body, with the format each belongs to.
    pub against: Vec<(Format, String)>,
}

impl Detected {
    /// A line saying which format was used when signals disagreed, `None` when they agreed.
    pub fn disagreement(&self) -> Option<String> {
        if self.against.is_empty() {
            return None;
        }
        let against: Vec<String> = self
            .against
            .iter()
            .map(|(f, s)| format!("{s} ({f})"))
            .collect();
        Some(format!(
            "read as {} ({}); signals of other formats outweighed: {} (--format overrides)",
            self.format,
            self.because.join(", "),
            against.join(", ")
        ))
    }
}

const FORMATS: [Format; 4] = [
    Format::Anthropic,
    Format::OpenAiResponses,
    Format::OpenAiChat,
    Format::Gemini,
];

/// Guesses the request format of a JSON body ([`detect`]'s format).
///
/// # Errors
/// [`FormatError::Unrecognised`] when the value is neither a request object nor an array.
pub fn guess_format(value: &Value) -> Result<Format, FormatError> {
    detect(value).map(|d| d.format)
}

/// Tells the request format of a JSON body from the signals each format's rule table lists
/// (`crate::rules::Signal`): top-level keys (`system`, `input`, `max_completion_tokens`),
/// message keys (`tool_calls`), roles (`developer`, `tool`), block and item types (`tool_use`,
/// `thinking`, `input_text`, `image_url`), a system or developer message first (OpenAI Chat:
/// Anthropic keeps its system prompt top-level) and the model name (`claude-`, `gpt-`). A
/// top-level `input` array, or items with a `type` and no `role`, are OpenAI Responses. The
/// format with the most signals wins; with none, plain user / assistant text is read as
/// Anthropic (both readers accept it and write it back unchanged).
///
/// # Errors
/// [`FormatError::Unrecognised`] when the value is neither a request object nor an array.
pub fn detect(value: &Value) -> Result<Detected, FormatError> {
    let unrecognised = || {
        FormatError::Unrecognised(
            "expected a request body with \"messages\", \"input\" or \"contents\", a message array, or a session log".into(),
        )
    };
    if super::gemini::looks_like(value) {
        return Ok(Detected {
            format: Format::Gemini,
            because: vec!["a top-level \"contents\" array of parts".into()],
            against: Vec::new(),
        });
    }
    let (obj, items) = match value {
        // A bare array of contents with parts (no `content`) is Gemini's.
        Value::Array(items)
            if !items.is_empty()
                && items.iter().all(|c| {
                    c.get("parts").is_some_and(Value::is_array) && c.get("content").is_none()
                }) =>
        {
            return Ok(Detected {
                format: Format::Gemini,
                because: vec!["contents with \"parts\"".into()],
                against: Vec::new(),
            });
        }
        Value::Array(items) => (None, items),
        Value::Object(obj) => match (obj.get("messages"), obj.get("input")) {
            (Some(Value::Array(items)), _) => (Some(obj), items),
            (_, Some(Value::Array(_))) => {
                return Ok(Detected {
                    format: Format::OpenAiResponses,
                    because: vec!["a top-level \"input\" array".into()],
                    against: Vec::new(),
                });
            }
            _ => return Err(unrecognised()),
        },
        _ => {
            return Err(FormatError::Unrecognised(
                "expected a JSON object or array".into(),
            ));
        }
    };
    if items
        .iter()
        .filter_map(Value::as_object)
        .any(|m| m.contains_key("type") && !m.contains_key("role"))
    {
        return Ok(Detected {
            format: Format::OpenAiResponses,
            because: vec!["items with a \"type\" and no \"role\"".into()],
            against: Vec::new(),
        });
    }
    let mut found: [Vec<String>; 4] = Default::default();
    for (f, format) in FORMATS.iter().enumerate() {
        for signal in format.rules().signals {
            if let Some(what) = signal_in(signal, obj, items) {
                found[f].push(what);
            }
        }
    }
    // Anthropic keeps its system prompt top-level: a system or developer message first is
    // OpenAI Chat's.
    if let Some(role) = items
        .first()
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        .filter(|r| matches!(*r, "system" | "developer"))
    {
        found[2].push(format!("a {role} message first"));
    }
    let best = (0..3)
        .max_by_key(|&f| (found[f].len(), usize::from(f == 0)))
        .unwrap_or(0);
    let format = if found[best].is_empty() {
        Format::Anthropic
    } else {
        FORMATS[best]
    };
    let against = (0..3)
        .filter(|&f| FORMATS[f] != format)
        .flat_map(|f| found[f].iter().map(move |s| (FORMATS[f], s.clone())))
        // A signal both formats have (a model prefix of OpenAI's two) is no disagreement.
        .filter(|(_, s)| !found[FORMATS.iter().position(|x| *x == format).unwrap_or(0)].contains(s))
        .collect();
    Ok(Detected {
        format,
        because: found[FORMATS.iter().position(|x| *x == format).unwrap_or(0)].clone(),
        against,
    })
}

/// Where `signal` shows in a body (its object, if any, and its message items), as words.
fn signal_in(signal: &Signal, obj: Option<&Object>, items: &[Value]) -> Option<String> {
    let messages = || items.iter().filter_map(Value::as_object);
    match signal {
        Signal::TopLevelKey(k) => obj?.contains_key(*k).then(|| format!("top-level \"{k}\"")),
        Signal::ModelPrefix(p) => obj?
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| m.starts_with(p))
            .map(|m| format!("model \"{m}\"")),
        Signal::MessageKey(k) => messages()
            .any(|m| m.get(*k).is_some_and(|v| !v.is_null()))
            .then(|| format!("a \"{k}\" field")),
        Signal::Role(r) => messages()
            .any(|m| m.get("role").and_then(Value::as_str) == Some(*r))
            .then(|| format!("role \"{r}\"")),
        Signal::BlockType(t) => messages()
            .filter_map(|m| m.get("content").and_then(Value::as_array))
            .flatten()
            .any(|b| b.get("type").and_then(Value::as_str) == Some(*t))
            .then(|| format!("a \"{t}\" block")),
    }
}

/// Evidence that a body is not of the format it was said to be: the JSON path of the first
/// element only another format has, what it is, and that format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contradiction {
    /// JSON path of the element (`messages[1].content[0]`).
    pub path: String,
    /// What the element is (`a "tool_use" block`).
    pub what: String,
    /// The format the hint named.
    pub given: Format,
    /// The format the element belongs to.
    pub looks_like: Format,
}

impl std::fmt::Display for Contradiction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} belongs to {}, not to {} (the format given); the body looks like {}",
            self.what, self.looks_like, self.given, self.looks_like
        )
    }
}

/// The first element of `value` that only another format has, when `value` is said to be of
/// format `given`, by the rule tables' signals (`crate::rules::Signal`): an item with a
/// `type` and no `role` (Responses), a message key, role or block type that another table
/// lists as its signal and `given`'s table does not know (`tool_calls`, role `developer`, a
/// `tool_use` block said to be OpenAI Chat). An element no table knows is not evidence: it is
/// an opaque unit of `given`.
///
/// A bare array is checked the same way. Returns `None` when nothing contradicts `given`.
pub fn contradiction(value: &Value, given: Format) -> Option<Contradiction> {
    let found = |path: String, what: String, looks_like: Format| {
        Some(Contradiction {
            path,
            what,
            given,
            looks_like,
        })
    };
    let key = given.messages_key();
    let items = match value {
        Value::Array(items) => items,
        Value::Object(obj) => {
            let other = if given == Format::OpenAiResponses {
                "messages"
            } else {
                "input"
            };
            match obj.get(key) {
                Some(Value::Array(items)) => items,
                _ => {
                    if let Some(Value::Array(_)) = obj.get(other) {
                        let looks_like = guess_format(value).ok()?;
                        return found(
                            "$".into(),
                            format!("a top-level \"{other}\" array"),
                            looks_like,
                        );
                    }
                    return None;
                }
            }
        }
        _ => return None,
    };
    items
        .iter()
        .enumerate()
        .find_map(|(i, item)| item_contradiction(item, i, given))
}

/// The format other than `given` whose table lists `signal` and whose name `given`'s table
/// does not know.
fn owner(given: Format, signal: impl Fn(&Signal) -> bool) -> Option<Format> {
    FORMATS
        .into_iter()
        .filter(|f| *f != given)
        .find(|f| f.rules().signals.iter().any(&signal))
}

/// The first element of message item `i` (`item`, one element of the message array) that only
/// another format than `given` has: the per-item rules of [`contradiction`].
pub(crate) fn item_contradiction(item: &Value, i: usize, given: Format) -> Option<Contradiction> {
    let found = |path: String, what: String, looks_like: Format| {
        Some(Contradiction {
            path,
            what,
            given,
            looks_like,
        })
    };
    let key = given.messages_key();
    let table = given.rules();
    let m = item.as_object()?;
    let at = format!("{key}[{i}]");
    let role = m.get("role").and_then(Value::as_str);
    if given != Format::OpenAiResponses && m.contains_key("type") && role.is_none() {
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("?");
        return found(
            at,
            format!("an item of type {kind:?} without a role"),
            Format::OpenAiResponses,
        );
    }
    for (field, v) in m {
        if v.is_null() || field == "role" || field == "content" {
            continue;
        }
        let theirs = owner(given, |s| matches!(s, Signal::MessageKey(k) if k == field));
        let mine = table
            .signals
            .iter()
            .any(|s| matches!(s, Signal::MessageKey(k) if k == field));
        if let Some(looks_like) = theirs.filter(|_| !mine) {
            return found(
                format!("{at}.{field}"),
                format!("a \"{field}\" field"),
                looks_like,
            );
        }
    }
    if let Some(r) = role.filter(|r| table.role_kind(r).is_none())
        && let Some(looks_like) = owner(given, |s| matches!(s, Signal::Role(x) if x == &r))
    {
        return found(format!("{at}.role"), format!("role {r:?}"), looks_like);
    }
    let Some(Value::Array(blocks)) = m.get("content") else {
        return None;
    };
    for (j, b) in blocks.iter().enumerate() {
        let Some(kind) = b.get("type").and_then(Value::as_str) else {
            continue;
        };
        if table.block(kind).is_some() {
            continue;
        }
        if let Some(looks_like) = owner(given, |s| matches!(s, Signal::BlockType(x) if *x == kind))
        {
            return found(
                format!("{at}.content[{j}]"),
                format!("a {kind:?} block"),
                looks_like,
            );
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_source_name_is_its_serde_name_without_the_format() {
        for s in [Source::ClaudeCode, Source::CodexRollout, Source::Trajectory] {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.name()));
        }
        let request = serde_json::to_value(Source::Request(Format::OpenAiChat)).unwrap();
        assert_eq!(request, json!({"request": "openai-chat"}));
        assert_eq!(Source::Request(Format::OpenAiChat).name(), "request");
    }

    fn anthropic_body() -> Value {
        json!({"model": "m", "max_tokens": 8, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
        ]})
    }

    #[test]
    fn an_anthropic_body_said_to_be_openai_chat_is_refused_at_its_first_anthropic_block() {
        let err = load(
            anthropic_body().to_string().as_bytes(),
            Some(Format::OpenAiChat),
            ImportOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "messages[1].content[0]: a \"tool_use\" block belongs to anthropic, not to openai-chat \
             (the format given); the body looks like anthropic"
        );
    }

    #[test]
    fn a_chat_body_said_to_be_anthropic_is_refused_at_its_tool_calls() {
        let body = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}
        ]});
        let c = contradiction(&body, Format::Anthropic).unwrap();
        assert_eq!(c.path, "messages[1].tool_calls");
        assert_eq!(c.looks_like, Format::OpenAiChat);
        let c = contradiction(&body, Format::OpenAiResponses).unwrap();
        assert_eq!((c.path.as_str(), c.looks_like), ("$", Format::OpenAiChat));
    }

    #[test]
    fn a_body_of_the_format_given_has_no_contradiction() {
        assert_eq!(contradiction(&anthropic_body(), Format::Anthropic), None);
        let items = json!([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                           {"role": "user", "content": [{"type": "input_text", "text": "x"}]}]);
        assert_eq!(contradiction(&items, Format::OpenAiResponses), None);
        let c = contradiction(&items, Format::OpenAiChat).unwrap();
        assert_eq!(
            (c.path.as_str(), c.looks_like),
            ("messages[0]", Format::OpenAiResponses)
        );
    }

    #[test]
    fn a_byte_order_mark_is_read_past() {
        let text = format!("\u{feff}{}", anthropic_body());
        let loaded = load(text.as_bytes(), None, ImportOptions::default()).unwrap();
        assert_eq!(loaded.format, Format::Anthropic);
        assert_eq!(loaded.conversation.messages.len(), 3);
    }
}
