//! A strategy against a reference summary at equal tokens: Claude Code's own auto-compaction
//! summary (the `isCompactSummary` message after a `compact_boundary`, or the answer of its
//! compaction sub-agent in an `*_acompact_*` log) next to what compactor makes of the same
//! history at the same size.
//!
//! ```text
//! session log (whole) -> history before the summary message (what Claude Code compacted)
//! reference log       -> the summary text, T tokens (counted as one user message)
//!   reference column:  the summary alone, as the model saw it
//!   one column per strategy: the history compacted to T (its trigger and target set to the
//!                      whole budget)
//!   digest column:     compactor's session state of the whole history in T tokens (the code-made
//!                      digest standing where Claude Code's summary stood)
//!   -> every column scored with the same probes of the history ([`super::probes`])
//! ```

use super::Arm;
use super::probes::{Probes, Survival, fidelity};
use crate::compactor::Compactor;
use crate::conversation::{Block, Conversation, Message, Role};
use crate::facts::{CLAUDE_CODE_SUMMARY_PREFIX, Facts, SessionState, SummaryKind, summary_kind};
use crate::format::Format;
use crate::tokens::TokenCounter;
use serde::Serialize;

/// The name of the column holding the reference summary.
pub const REFERENCE: &str = "reference";
/// The name of the column holding compactor's session-state digest at the reference's size.
pub const DIGEST: &str = "digest";

/// The index of the first user message that carries Claude Code's summary (its first words are
/// `crate::facts::CLAUDE_CODE_SUMMARY_PREFIX`), if any.
pub fn summary_at(c: &Conversation) -> Option<usize> {
    c.messages.iter().position(|m| {
        m.role == Role::User
            && m.content.iter().any(
                |b| matches!(b, Block::Text(t) if summary_kind(&t.text) == Some(SummaryKind::ClaudeCode)),
            )
    })
}

/// The summary a reference log holds: the text of its Claude Code summary message (a session
/// log read whole), else the last assistant text (a compaction sub-agent's log: its answer is
/// the summary). `None` when it has neither.
pub fn reference_summary(c: &Conversation) -> Option<String> {
    if let Some(i) = summary_at(c) {
        return c.messages[i].content.iter().find_map(|b| match b {
            Block::Text(t) if summary_kind(&t.text).is_some() => Some(t.text.clone()),
            _ => None,
        });
    }
    c.messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .find_map(|m| {
            let text: Vec<&str> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::Text(t) if !t.text.trim().is_empty() => Some(t.text.trim()),
                    _ => None,
                })
                .collect();
            (!text.is_empty()).then(|| text.join("\n\n"))
        })
}

/// The history Claude Code compacted: the messages before its summary message (all of them
/// when there is none). System prompt and other fields are kept.
pub fn before_summary(c: &Conversation) -> Conversation {
    let end = summary_at(c).unwrap_or(c.messages.len());
    Conversation {
        system: c.system.clone(),
        messages: c.messages[..end].to_vec(),
        extra: c.extra.clone(),
        bare: c.bare,
    }
}

/// One column of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Column {
    /// [`REFERENCE`], a strategy (arm) name, or [`DIGEST`].
    pub name: String,
    /// Its size in tokens (the compactor's count; the reference and digest with the first
    /// strategy's counter, or o200k when none runs).
    pub tokens: usize,
    /// Why it has no scores (a strategy that did not load or refused the input).
    pub skipped: Option<String>,
    /// Survival of each probe.
    pub survival: Vec<Survival>,
    /// Mean share of the probes kept.
    pub fidelity: Option<f64>,
}

/// The comparison of one history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReferenceReport {
    /// Messages in the history before the summary.
    pub messages: usize,
    /// Tokens of that history.
    pub tokens_before: usize,
    /// The budget every column was held to: the reference summary's tokens.
    pub budget: usize,
    /// The probes of the history.
    pub probes: Probes,
    /// Reference, each strategy, digest.
    pub columns: Vec<Column>,
}

fn scored(name: &str, tokens: usize, output: &Conversation, probes: &Probes) -> Column {
    let survival = probes.survival(output);
    Column {
        name: name.to_string(),
        tokens,
        skipped: None,
        fidelity: fidelity(&survival),
        survival,
    }
}

/// Scores `summary` and each of `arms` (compacting `history` to the summary's size) and the
/// session-state digest of the whole history at that size, with the probes of `history`.
pub async fn compare(
    history: &Conversation,
    format: Format,
    summary: &str,
    arms: &[Arm],
) -> ReferenceReport {
    let probes = Probes::of(history);
    // As Claude Code puts it in the history: a user message with its summary prefix (a
    // sub-agent's bare answer gets the prefix, so it is read as a summary, not as the user's
    // words).
    let summary_message = Message::text(
        Role::User,
        if summary_kind(summary).is_some() {
            summary.to_string()
        } else {
            format!("{CLAUDE_CODE_SUMMARY_PREFIX}.\n\n{summary}")
        },
    );
    // Each strategy compacts *to* the summary's size: trigger and target at the whole budget
    // (the presets stop at `target × budget`, 0.6 by default, to leave room for later turns).
    let compactors: Vec<Result<Compactor, String>> = arms
        .iter()
        .map(|a| {
            a.settings.clone().and_then(|mut s| {
                s.budget.trigger = 1.0;
                s.budget.target = 1.0;
                Compactor::from_config(s).map_err(|e| e.to_string())
            })
        })
        .collect();
    let fallback = crate::tokens::counter_for(Default::default());
    let counter: &dyn TokenCounter = compactors
        .iter()
        .find_map(|c| c.as_ref().ok())
        .map_or(fallback.as_ref(), Compactor::counter);
    let budget = counter.count_message(&summary_message);
    let tokens_before = counter.count_conversation(history);
    let one = |m: Message| Conversation {
        messages: vec![m],
        ..Default::default()
    };
    let mut columns = vec![scored(
        REFERENCE,
        budget,
        &one(summary_message.clone()),
        &probes,
    )];
    for (arm, compactor) in arms.iter().zip(&compactors) {
        let skipped = |reason: String| Column {
            name: arm.name.clone(),
            tokens: 0,
            skipped: Some(reason),
            survival: Vec::new(),
            fidelity: None,
        };
        let column = match compactor {
            Err(reason) => skipped(reason.clone()),
            Ok(c) => {
                let own = c.counter().count_message(&summary_message);
                match c.compact(history, format, Some(own)).await {
                    Ok(out) => scored(
                        &arm.name,
                        out.report.tokens_after,
                        out.conversation.as_ref(),
                        &probes,
                    ),
                    Err(e) => skipped(e.to_string()),
                }
            }
        };
        columns.push(column);
    }
    let facts = Facts::of(&history.messages);
    let state = SessionState::of(&facts, 0..history.messages.len());
    // The marker message as a whole (text and message overhead) within the budget.
    let overhead = counter
        .count_message(&Message::text(Role::User, ""))
        .min(budget);
    let marker = state.marker_text(
        history.messages.len(),
        tokens_before,
        budget - overhead,
        counter,
    );
    let marker = Message::text(Role::User, marker);
    columns.push(scored(
        DIGEST,
        counter.count_message(&marker),
        &one(marker),
        &probes,
    ));
    ReferenceReport {
        messages: history.messages.len(),
        tokens_before,
        budget,
        probes,
        columns,
    }
}

/// The comparison as a Markdown table: one row per probe (`kept/total`, then how the items
/// matched), a row of tokens and one of fidelity; one column per [`Column`].
pub fn markdown(r: &ReferenceReport) -> String {
    let mut out = format!(
        "## Reference summary vs compactor at equal tokens\n\nHistory: {} messages, {} tokens, \
         compacted to the reference summary's {} tokens.\n\n",
        r.messages,
        crate::strategy::thousands(r.tokens_before),
        crate::strategy::thousands(r.budget)
    );
    let names: Vec<&str> = r.columns.iter().map(|c| c.name.as_str()).collect();
    out += &format!("| probe | {} |\n", names.join(" | "));
    out += &format!("| --- |{}\n", " --- |".repeat(names.len()));
    let row = |label: &str, cell: &dyn Fn(&Column) -> String| -> String {
        let cells: Vec<String> = r.columns.iter().map(cell).collect();
        format!("| {label} | {} |\n", cells.join(" | ").replace('\n', " "))
    };
    out += &row("tokens", &|c| match &c.skipped {
        Some(reason) => format!("skipped: {reason}"),
        None if c.tokens > r.budget => {
            format!("{} (over the budget)", crate::strategy::thousands(c.tokens))
        }
        None => crate::strategy::thousands(c.tokens),
    });
    for (name, header) in super::probes::PROBE_NAMES {
        out += &row(header, &|c| {
            c.survival
                .iter()
                .find(|s| s.probe == *name)
                .map_or_else(String::new, |s| {
                    let how = s.how_cell();
                    if how.is_empty() {
                        s.cell()
                    } else {
                        format!("{} ({how})", s.cell())
                    }
                })
        });
    }
    out += &row("fidelity", &|c| {
        c.fidelity
            .map_or_else(|| "-".into(), |f| format!("{:.1}%", 100.0 * f))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn conv(messages: Vec<Message>) -> Conversation {
        Conversation {
            messages,
            ..Default::default()
        }
    }

    #[test]
    fn the_history_ends_where_the_summary_starts() {
        let summary = format!("{CLAUDE_CODE_SUMMARY_PREFIX} that ran out of context. Summary: x");
        let c = conv(vec![
            Message::text(Role::User, "Fix the build."),
            Message::text(Role::Assistant, "Done."),
            Message::text(Role::User, summary.clone()),
            Message::text(Role::User, "Now commit."),
        ]);
        assert_eq!(summary_at(&c), Some(2));
        assert_eq!(before_summary(&c).messages, c.messages[..2].to_vec());
        assert_eq!(reference_summary(&c), Some(summary));
    }

    #[test]
    fn a_sub_agent_log_gives_its_last_answer() {
        let c = conv(vec![
            Message::text(Role::User, "Summarize."),
            Message::text(Role::Assistant, "<summary>1. The user asked …</summary>"),
        ]);
        assert_eq!(summary_at(&c), None);
        assert_eq!(
            reference_summary(&c).as_deref(),
            Some("<summary>1. The user asked …</summary>")
        );
        assert_eq!(before_summary(&c).messages.len(), 2);
    }
}
