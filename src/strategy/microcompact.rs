//! `microcompact`: clear the content of stale tool results.
//!
//! All tool results but those of the `keep_recent` most recent tool calls, for tools on the
//! compactable list, get their content replaced by a short placeholder that names the tool, the
//! call id and the original size. Ids, tool names, `is_error` and the typed
//! [`crate::conversation::ToolResult::outcome`] stay, so pairing holds and a failure still is one. Images inside a
//! cleared result go too. Optionally, the string values of the matching tool_use inputs are
//! cleared as well. When fewer than `clear_at_least` tokens would go, nothing is done: a cleared
//! prefix costs a prompt-cache rewrite.
//!
//! Failed results are cleared too, but keep their cause: the placeholder of a failure holds its
//! exit-code marker (so the wire still says "failed" where it has no `is_error` flag: OpenAI
//! Chat, Responses) and its first and last informative lines, which are the error itself and
//! the summary line of most tools (`error[E0425]: …` … `error: could not compile`,
//! `FAILED tests/x.py::t` … `1 failed, 3 passed`). Leaving failures whole was the other choice;
//! it was not taken because a failing build or test log is often the largest result of a
//! session, and the two lines are what a later turn needs of it (the rest can be had by
//! re-running). A failure whose placeholder would not read as a failure under the format's
//! outcome policy is left uncleared.
//!
//! A clear is applied only when it saves: the placeholder must be smaller than what it
//! replaces in model tokens *and* in bytes, so the output never grows.

use super::{Budget, Compaction, Context, Strategy, StrategyError};
use crate::conversation::{Block, Conversation, Rewrite};
use crate::guard::{UnitEdit, write};
use foldhash::HashMap;
use serde::Deserialize;

pub use crate::facts::CLEARED_PREFIX;

/// Settings of [`Microcompact`].
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MicrocompactConfig {
    /// How many of the most recent tool calls keep their results.
    pub keep_recent: usize,
    /// Tools whose results may be cleared (case-insensitive names). Reads, searches, shells and
    /// web fetches: their output can be had again. Edits and writes are not on it.
    pub compactable_tools: Vec<String>,
    /// Do nothing unless at least this many tokens go.
    pub clear_at_least: usize,
    /// Results at or below this many tokens are left alone (the placeholder would not save).
    pub min_result_tokens: usize,
    /// Also clear the string values of the tool_use inputs of cleared calls.
    pub clear_tool_inputs: bool,
}

impl Default for MicrocompactConfig {
    fn default() -> Self {
        MicrocompactConfig {
            keep_recent: 5,
            compactable_tools: [
                "Read",
                "Grep",
                "Glob",
                "LS",
                "Bash",
                "BashOutput",
                "WebFetch",
                "WebSearch",
                "local_shell",
                "NotebookRead",
                "shell",
                "bash",
                "exec_command",
                "read_file",
                "read",
                "grep",
                "glob",
                "search",
                "list_dir",
                "find",
                "web_fetch",
                "web_search",
                "fetch",
                // Gemini CLI's reads, searches and shell.
                "run_shell_command",
                "list_directory",
                "read_many_files",
                "search_file_content",
                "grep_search",
                "google_web_search",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            clear_at_least: 0,
            min_result_tokens: 40,
            clear_tool_inputs: false,
        }
    }
}

/// The microcompact strategy.
#[derive(Debug, Clone, Default)]
pub struct Microcompact {
    /// Its settings.
    pub config: MicrocompactConfig,
}

#[async_trait::async_trait]
impl Strategy for Microcompact {
    fn name(&self) -> &str {
        "microcompact"
    }

    async fn compact(
        &self,
        conversation: &Conversation,
        budget: Budget,
        cx: &Context<'_>,
    ) -> Result<Compaction, StrategyError> {
        Ok(self.run(conversation, budget, cx))
    }
}

impl Microcompact {
    /// The synchronous core of [`Strategy::compact`]. Clears from the oldest result on and stops
    /// as soon as the target is reached, so a compaction clears no more than it must.
    pub fn run(&self, input: &Conversation, budget: Budget, cx: &Context<'_>) -> Compaction {
        let counter = cx.counter;
        let c = &self.config;
        let (stale, call_at) = self.stale_calls(input);
        let layout = cx.layout;
        let mut plan = Vec::new();
        let mut cleared_any = false;
        let mut saved = 0usize;
        let mut total = counter.count_system(input.system.as_ref())
            + counter.count_tools(input.tools())
            + cx.tokens.tail(0);
        for (i, m) in input.messages.iter().enumerate().skip(layout.pinned()) {
            for (j, b) in m.content.iter().enumerate() {
                if total <= budget.target {
                    break;
                }
                let Block::ToolResult(r) = b else {
                    continue;
                };
                let Some(tool) = stale.get(r.tool_use_id.as_str()).copied() else {
                    continue;
                };
                // No content: nothing to clear, or a built-in tool's non-text output (a
                // `computer_call_output` screenshot) that must keep its shape.
                // Cleared already: by an earlier tier (typed), or by an earlier compaction
                // whose output came back as input (only its text tells then).
                if r.content.is_none()
                    || r.rewritten == Some(Rewrite::Cleared)
                    || r.text_ref().starts_with(CLEARED_PREFIX)
                {
                    continue;
                }
                let before = cx
                    .tokens
                    .block(i, j)
                    .unwrap_or_else(|| counter.count_block(b));
                if before <= c.min_result_tokens {
                    continue;
                }
                let Some(cleared) =
                    write::clear(input, (i, j), (tool, before), cx.recall, counter, cx.format)
                else {
                    continue;
                };
                let freed = before.saturating_sub(cleared.tokens_after());
                saved += freed;
                total = total.saturating_sub(freed);
                cleared_any = true;
                plan.push(UnitEdit::Clear(cleared));
                if c.clear_tool_inputs
                    && let Some(&(ci, cj)) = call_at.get(r.tool_use_id.as_str())
                    && !layout.is_protected(ci)
                    && let Some(with) = write::clear_input(input, (ci, cj), counter)
                {
                    saved += with.tokens_before().saturating_sub(with.tokens_after());
                    plan.push(UnitEdit::Cap(with));
                }
            }
        }
        if !cleared_any {
            return Compaction::unchanged(
                "microcompact: no stale compactable tool result to clear",
            );
        }
        if saved < c.clear_at_least {
            return Compaction::unchanged(format!(
                "microcompact: only {saved} tokens could be cleared, below clear_at_least = {}",
                c.clear_at_least
            ));
        }
        Compaction {
            plan,
            notes: Vec::new(),
            degraded: None,
        }
    }

    /// The stale calls of `input` whose results may be cleared (call id -> tool name): all
    /// but the `keep_recent` most recent calls, of tools on the compactable list; and where
    /// each call is (call id -> (message, block)), for clearing its input.
    #[allow(clippy::type_complexity)]
    fn stale_calls<'c>(
        &self,
        input: &'c Conversation,
    ) -> (HashMap<&'c str, &'c str>, HashMap<&'c str, (usize, usize)>) {
        let c = &self.config;
        let allowed: Vec<String> = c
            .compactable_tools
            .iter()
            .map(|s| s.to_lowercase())
            .collect();
        let calls: Vec<(usize, &str, &str)> = input
            .messages
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                m.tool_uses()
                    .map(move |t| (i, t.id.as_str(), t.name.as_str()))
            })
            .collect();
        let recent_from = calls.len().saturating_sub(c.keep_recent);
        let call_at: HashMap<&str, (usize, usize)> = input
            .messages
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                m.content
                    .iter()
                    .enumerate()
                    .filter_map(move |(j, b)| match b {
                        Block::ToolUse(t) => Some((t.id.as_str(), (i, j))),
                        _ => None,
                    })
            })
            .collect();
        let stale: HashMap<&str, &str> = calls[..recent_from]
            .iter()
            .filter(|(_, _, name)| allowed.contains(&name.to_lowercase()))
            .map(|(_, id, name)| (*id, *name))
            .collect();
        (stale, call_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Outcome;
    use crate::format::Format;
    use crate::tokens::{Tokenizer, counter_for};
    use serde_json::{Value, json};

    /// The input, the plan, and the output `guard::apply` builds of it (`None`: no plan).
    fn run(
        format: Format,
        body: &Value,
        target: usize,
    ) -> (Conversation, Compaction, Option<Conversation>) {
        let input = format.read(body).unwrap();
        let counter = counter_for(Tokenizer::default());
        let layout = crate::guard::Layout::of(&input, format);
        let tokens = crate::guard::MessageTokens::of(&input, counter.as_ref());
        let cx = Context {
            format,
            counter: counter.as_ref(),
            instructions: None,
            layout: &layout,
            tokens: &tokens,
            recall: false,
        };
        let m = Microcompact {
            config: MicrocompactConfig {
                keep_recent: 1,
                ..Default::default()
            },
        };
        let out = m.run(
            &input,
            Budget {
                limit: target,
                target,
            },
            &cx,
        );
        // The guard builds the output of the plan (and refuses a faulty one).
        let built = (!out.plan.is_empty()).then(|| {
            crate::guard::apply(&input, &layout, out.plan.clone(), Some(&[]))
                .unwrap()
                .conversation
        });
        (input, out, built)
    }

    fn long_output(head: &str, tail: &str) -> String {
        let middle: String = (0..60)
            .map(|i| format!("  searched /etc/app/dir{i}\n"))
            .collect();
        format!("{head}\n{middle}{tail}")
    }

    fn chat(result: &str) -> Value {
        json!({"messages": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": result},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "done"},
            {"role": "user", "content": "thanks"}
        ]})
    }

    #[test]
    fn a_cleared_result_names_its_recall_id_and_hands_over_the_original() {
        let text = long_output("listing", "61 paths searched");
        let body = chat(&text);
        let input = Format::OpenAiChat.read(&body).unwrap();
        let counter = counter_for(Tokenizer::default());
        let layout = crate::guard::Layout::of(&input, crate::format::Format::OpenAiChat);
        let tokens = crate::guard::MessageTokens::of(&input, counter.as_ref());
        let cx = Context {
            format: Format::OpenAiChat,
            counter: counter.as_ref(),
            instructions: None,
            layout: &layout,
            tokens: &tokens,
            recall: true,
        };
        let m = Microcompact {
            config: MicrocompactConfig {
                keep_recent: 1,
                ..Default::default()
            },
        };
        let out = m.run(
            &input,
            Budget {
                limit: 10,
                target: 10,
            },
            &cx,
        );
        let entries: Vec<&crate::recall::Entry> = out
            .plan
            .iter()
            .filter_map(|e| match e {
                UnitEdit::Clear(c) => c.recall(),
                _ => None,
            })
            .collect();
        assert_eq!(entries.len(), 1);
        let e = entries[0];
        // OpenAI Chat: a tool message is one element, the original is that message.
        assert_eq!(e.original.to_string(), body["messages"][2].to_string());
        assert_eq!(e.reference.path, "messages[2]");
        let Some(UnitEdit::Clear(cleared)) = out.plan.first() else {
            panic!("{:?}", out.plan);
        };
        assert!(
            cleared
                .with()
                .text()
                .ends_with(&format!(" · recall {}]", e.reference.id)),
            "{}",
            cleared.with().text()
        );
    }

    #[test]
    fn a_cleared_failure_keeps_its_marker_and_first_and_last_lines() {
        let text = long_output(
            "<returncode>2</returncode>\n<output>\nls: cannot access 'conf.yaml': No such file",
            "ls: 61 paths searched\n</output>",
        );
        let (input, _, built) = run(Format::OpenAiChat, &chat(&text), 10);
        let counter = counter_for(Tokenizer::default());
        let tokens = counter.count_block(&input.messages[2].content[0]);
        let r = built.as_ref().unwrap().messages[2]
            .tool_results()
            .next()
            .unwrap();
        assert_eq!(r.outcome, Outcome::Error);
        assert_eq!(
            r.text(),
            format!(
                "[compactor: cleared failed (error) result of bash call c1 ({tokens} tokens) to \
                 save context; re-run the tool if it is needed]\n<returncode>2</returncode>\n\
                 ls: cannot access 'conf.yaml': No such file\nls: 61 paths searched"
            )
        );
        // Written and read again, the wire still says failed.
        let again = Format::OpenAiChat
            .read(&Format::OpenAiChat.write(built.as_ref().unwrap()))
            .unwrap();
        let r = again.messages[2].tool_results().next().unwrap();
        assert_eq!(r.outcome, Outcome::Error);
    }

    #[test]
    fn a_codex_failure_keeps_lines_of_its_output_string_and_the_exit_code() {
        let inner = long_output(
            "error[E0425]: cannot find value `x`",
            "error: could not compile `app`",
        );
        let text =
            json!({"output": inner, "metadata": {"exit_code": 101, "duration_seconds": 1.5}})
                .to_string();
        let body = json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "build"}]},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": text},
            {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c2", "output": "ok"}
        ]});
        let (_, _, built) = run(Format::OpenAiResponses, &body, 10);
        let r = built.as_ref().unwrap().messages[2]
            .tool_results()
            .next()
            .unwrap();
        let lines: Vec<String> = r.text().lines().skip(1).map(String::from).collect();
        assert_eq!(
            lines,
            vec![
                "\"exit_code\":101".to_string(),
                "error[E0425]: cannot find value `x`".to_string(),
                "error: could not compile `app`".to_string(),
            ]
        );
        assert_eq!(OutcomePolicy::ExitCode.classify(r), Outcome::Error);
    }

    #[test]
    fn a_success_placeholder_has_no_kept_lines() {
        let text = long_output("<returncode>0</returncode>\n<output>", "</output>");
        let (_, _, built) = run(Format::OpenAiChat, &chat(&text), 10);
        let r = built.as_ref().unwrap().messages[2]
            .tool_results()
            .next()
            .unwrap();
        assert_eq!(r.outcome, Outcome::Success);
        assert_eq!(r.text().lines().count(), 1);
    }

    #[test]
    fn a_clear_that_would_not_save_bytes_is_not_made() {
        // ~2 bytes per token: 50 digits in 99 bytes, over min_result_tokens; the ~104-byte
        // placeholder has fewer tokens but more bytes.
        let digits = "0 1 2 3 4 5 6 7 8 9 ".repeat(5);
        let digits = digits.trim_end();
        let body = json!({"messages": [
            {"role": "user", "content": "read"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": digits}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "/b"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "x"}]}
        ]});
        let (_, out, built) = run(Format::Anthropic, &body, 10);
        assert!(out.plan.is_empty());
        assert_eq!(built, None);
    }

    use crate::outcome::OutcomePolicy;
}
