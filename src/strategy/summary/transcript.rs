//! The compact transcript the model summarizes: one digest line per block, thinking left out.

use super::*;

pub(super) fn role_name(role: &Role) -> &str {
    match role {
        Role::User => "User",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool",
        Role::System => "System",
        Role::Developer => "Developer",
        Role::Other(name) => name,
    }
}

/// Renders messages as a compact transcript: `User: …` / `Assistant: …` for text (whole),
/// digest lines for calls and results (`[call toolu_1 Read(src/a.rs)]`,
/// `[result toolu_1 (error): …]`), `[image]` / `[document]` for media. Thinking is left out and
/// no base64 is ever copied.
pub fn transcript(messages: &[Message]) -> String {
    let tools: HashMap<&str, &str> = messages
        .iter()
        .flat_map(Message::tool_uses)
        .map(|t| (t.id.as_str(), t.name.as_str()))
        .collect();
    let mut out = String::new();
    for m in messages {
        for b in &m.content {
            let line = match b {
                Block::Text(t) if t.text.trim().is_empty() => continue,
                Block::Text(t) => format!("{}: {}", role_name(&m.role), t.text.trim()),
                Block::Thinking(_) => continue,
                Block::Image(_) => "[image]".to_string(),
                Block::Document(_) => "[document]".to_string(),
                other => match digest_line(&m.role, other, &tools) {
                    Some(l) => l,
                    None => continue,
                },
            };
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
