//! Unit edits and [`apply`]: strategies plan, the guard builds the output.
//!
//! ```text
//! strategy.compact(view)  -> Vec<UnitEdit>   (pure: indices of the strategy's input)
//! apply(input, layout, plan)
//!   -> checks each edit against the layout  (a legal cut, no protected message, a block
//!                                            of the same kind and call id, a failure
//!                                            stays one, no two edits on one block, no cap
//!                                            of a result compactor already rewrote)
//!   -> drops a span with its tool_use / tool_result partners together, writes the marker
//!      (or the summary message, from its parts: head, narrative, code-made ledger)
//!   -> records where each failure is kept     (typed: FailureRecord) and what each edited
//!      result now is                          (typed: ToolResult::rewritten)
//!   -> Applied | PlanError naming the edit
//! ```
//!
//! Pairing is kept by construction, in data: a drop ends only at a legal cut (never inside an
//! exchange), and [`apply`] still checks that no kept tool_result lost its call and no kept
//! call lost its result (Anthropic: `tool_use ids were found without tool_result blocks
//! immediately after`; OpenAI Chat: tool messages must answer a preceding `tool_calls`).

use super::layout::Layout;
use crate::conversation::{Block, Conversation, Message, Outcome, Rewrite, Role, ToolResult};
use crate::facts::UserWords;
use foldhash::HashSet;
use std::collections::BTreeMap;

/// One edit, in units the guard knows. Indices are message / block indices of the input the
/// strategy was given.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum UnitEdit {
    /// A block capped (head + tail with a truncation marker): `with` is the capped block, of the
    /// same kind (and call id) as the one it replaces. A tool result is marked
    /// [`Rewrite::Capped`] in the output; one already rewritten is refused
    /// ([`PlanError::Rewritten`]).
    Cap {
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
        /// The capped block.
        with: Block,
    },
    /// A tool_result's content replaced by a placeholder; id, `is_error` and outcome unchanged.
    /// Marked [`Rewrite::Cleared`] in the output; a result already cleared is refused
    /// ([`PlanError::Rewritten`]), a capped one may be cleared.
    Clear {
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
        /// The cleared result.
        with: ToolResult,
    },
    /// Messages `pinned..to` dropped, `marker` (a user-role message) put in their place.
    Drop {
        /// First kept message: a legal cut of the layout.
        to: usize,
        /// The record that stands for the dropped span.
        marker: Marker,
    },
    /// Messages `pinned..to` replaced by one user-role summary message, which [`apply`]
    /// writes from its parts ([`SummaryParts::text`]) and whose ledger's failures it records.
    Summarize {
        /// First kept message: a legal cut of the layout.
        to: usize,
        /// What stands for the summarized span.
        summary: SummaryParts,
    },
}

/// The parts of a summary message, kept apart so that what a model wrote never reads as what
/// code recorded: the ledger comes last, under its own header line, which the narrative may
/// not hold ([`PlanError::ForgedLedger`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryParts {
    /// The first line: which messages the summary replaces, and that it is background for the
    /// turns that follow, not a request.
    pub head: String,
    /// The summarizing model's text.
    pub narrative: String,
    /// The code-made ledger (its first line is its header; empty text = no ledger) and the
    /// failures it records (typed ids).
    pub ledger: Marker,
}

impl SummaryParts {
    /// The message text: `head`, a blank line, the narrative, then (when there is one) a blank
    /// line and the ledger.
    pub fn text(&self) -> String {
        let mut s = format!("{}\n\n{}\n", self.head.trim(), self.narrative.trim());
        if !self.ledger.text.trim().is_empty() {
            s.push('\n');
            s.push_str(&self.ledger.text);
            if !s.ends_with('\n') {
                s.push('\n');
            }
        }
        s
    }

    /// Whether the narrative holds the ledger's header line (a model imitating code).
    fn forged(&self) -> bool {
        let header = self.ledger.text.lines().next().unwrap_or("").trim();
        !header.is_empty() && self.narrative.contains(header)
    }
}

/// A user-role record of a dropped span, with the failures it writes (typed ids).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marker {
    /// The message text.
    pub text: String,
    /// Call ids of the failures the text records.
    pub failures: Vec<String>,
    /// The user's requests the text does not hold verbatim (shortened or left out), when the
    /// text is a record of the span's session state; empty for any other marker.
    pub user_words: UserWords,
}

/// Where a failure of the input is kept in the output when its result is gone: the output
/// message (a marker) that records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureRecord {
    /// The failed call's id.
    pub id: String,
    /// Output message index of the record.
    pub message: usize,
}

/// An output built by [`apply`], with its typed facts.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The output conversation.
    pub conversation: Conversation,
    /// Failures recorded in markers (output indices); `None` when the input's own records
    /// were not known (then a later check falls back to reading the text).
    pub records: Option<Vec<FailureRecord>>,
    /// Per output message: the index of the input message it is an unchanged copy of (no block
    /// of it replaced), `None` for the marker and for edited messages. What was counted of the
    /// input holds for these without counting them again.
    pub unchanged: Vec<Option<usize>>,
}

/// A plan the guard refuses; `edit` is the index of the faulty edit in the plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The edit names a message or block the input does not have.
    #[error("edit {edit}: messages[{message}].content[{block}] does not exist")]
    OutOfRange {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
    },
    /// The edit touches a protected message (pinned prefix, open tool loop).
    #[error("edit {edit}: messages[{message}] is protected (pinned prefix or open tool loop)")]
    Protected {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
    },
    /// The newest message may only have its tool results' content shortened.
    #[error("edit {edit}: the newest message may only have its tool results shortened")]
    Newest {
        /// Edit index.
        edit: usize,
    },
    /// The replacement is not the same kind of block, changes a call id, or is a thinking block
    /// (signed: byte-identical or gone).
    #[error("edit {edit}: messages[{message}].content[{block}]: {why}")]
    Mismatch {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
        /// What differs.
        why: &'static str,
    },
    /// A failed call would read as a success.
    #[error("edit {edit}: the failure of call {id} would be lost")]
    FailureLost {
        /// Edit index.
        edit: usize,
        /// Call id.
        id: String,
    },
    /// Two edits on one block, or more than one drop.
    #[error("edit {edit}: conflicts with edit {other}")]
    Conflict {
        /// Edit index.
        edit: usize,
        /// The earlier edit.
        other: usize,
    },
    /// A drop that does not end at a legal cut.
    #[error("edit {edit}: {to} is not a legal cut")]
    IllegalCut {
        /// Edit index.
        edit: usize,
        /// The cut asked for.
        to: usize,
    },
    /// An edit of a message the plan's drop removes.
    #[error("edit {edit}: messages[{message}] is dropped by edit {drop}")]
    EditsDropped {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
        /// The drop.
        drop: usize,
    },
    /// The drop would part a tool_use from its tool_result.
    #[error("edit {edit}: call {id} and its result would be parted")]
    PartsPair {
        /// Edit index.
        edit: usize,
        /// Call id.
        id: String,
    },
    /// A tool result compactor already rewrote (an earlier tier's placeholder or cap, known from
    /// [`ToolResult::rewritten`]) would be cut again, or a placeholder cleared again: what it
    /// names (tool, call id, size, error lines) would be lost or misstated.
    #[error("edit {edit}: messages[{message}].content[{block}] was already {done:?} by compactor")]
    Rewritten {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
        /// What was done to it.
        done: Rewrite,
    },
    /// A summary's narrative holds its ledger's header line, so model text would read as the
    /// code-made ledger.
    #[error("edit {edit}: the summary's narrative holds the ledger's header line")]
    ForgedLedger {
        /// Edit index.
        edit: usize,
    },
}

/// Builds the output of `plan` on `input` (whose layout is `layout`). `records` are the typed
/// failure records of `input` itself (from an earlier apply), `None` when unknown.
///
/// # Errors
/// [`PlanError`] naming the first faulty edit; nothing is built then.
pub fn apply(
    input: &Conversation,
    layout: &Layout,
    plan: Vec<UnitEdit>,
    records: Option<&[FailureRecord]>,
) -> Result<Applied, PlanError> {
    let pinned = layout.pinned();
    let mut drop: Option<(usize, usize, Marker)> = None;
    let mut blocks: BTreeMap<(usize, usize), (usize, Block)> = BTreeMap::new();
    for (edit, e) in plan.into_iter().enumerate() {
        let (to, marker) = match e {
            UnitEdit::Drop { to, marker } => (to, marker),
            // A summary is written here, from its parts, then stands for its span as a marker.
            UnitEdit::Summarize { to, summary } => {
                if summary.forged() {
                    return Err(PlanError::ForgedLedger { edit });
                }
                let text = summary.text();
                let Marker {
                    failures,
                    user_words,
                    ..
                } = summary.ledger;
                (
                    to,
                    Marker {
                        text,
                        failures,
                        user_words,
                    },
                )
            }
            UnitEdit::Cap {
                message,
                block,
                with,
            } => {
                check_block(
                    input,
                    layout,
                    (edit, message, block),
                    &with,
                    Rewrite::Capped,
                )?;
                let with = match with {
                    Block::ToolResult(r) => Block::ToolResult(ToolResult {
                        rewritten: Some(Rewrite::Capped),
                        ..r
                    }),
                    other => other,
                };
                insert(&mut blocks, edit, message, block, with)?;
                continue;
            }
            UnitEdit::Clear {
                message,
                block,
                with,
            } => {
                let with = Block::ToolResult(ToolResult {
                    rewritten: Some(Rewrite::Cleared),
                    ..with
                });
                check_block(
                    input,
                    layout,
                    (edit, message, block),
                    &with,
                    Rewrite::Cleared,
                )?;
                insert(&mut blocks, edit, message, block, with)?;
                continue;
            }
        };
        if let Some((other, _, _)) = &drop {
            return Err(PlanError::Conflict {
                edit,
                other: *other,
            });
        }
        if layout
            .cuts()
            .binary_search_by_key(&to, |c| c.index)
            .is_err()
        {
            return Err(PlanError::IllegalCut { edit, to });
        }
        drop = Some((edit, to, marker));
    }
    let to = drop.as_ref().map_or(pinned, |(_, to, _)| *to);
    if let Some((d, _, marker)) = &drop {
        if let Some((&(message, _), &(edit, _))) = blocks.range((pinned, 0)..(to, 0)).next() {
            return Err(PlanError::EditsDropped {
                edit,
                message,
                drop: *d,
            });
        }
        check_drop(input, *d, pinned..to, marker, records)?;
    }
    let capacity = input.messages.len() - (to - pinned) + 1;
    let mut out: (Vec<Message>, Vec<Option<usize>>) =
        (Vec::with_capacity(capacity), Vec::with_capacity(capacity));
    let mut kept = |i: usize, m: &Message, out: &mut (Vec<Message>, Vec<Option<usize>>)| {
        // The replacements of this message's blocks, in block order (the map is sorted).
        let mut with: Vec<(usize, Block)> = Vec::new();
        while let Some(entry) = blocks.first_entry() {
            if entry.key().0 != i {
                break;
            }
            let ((_, j), (_, b)) = entry.remove_entry();
            with.push((j, b));
        }
        with.retain(|(j, _)| *j < m.content.len());
        if with.is_empty() {
            out.0.push(m.clone());
            out.1.push(Some(i));
            return;
        }
        // An edited message: a replaced block is not copied first.
        let mut with = with.into_iter().peekable();
        let content = m
            .content
            .iter()
            .enumerate()
            .map(|(j, b)| match with.next_if(|(at, _)| *at == j) {
                Some((_, new)) => new,
                None => b.clone(),
            })
            .collect();
        out.0.push(Message {
            role: m.role,
            content,
            extra: m.extra.clone(),
            form: m.form,
        });
        out.1.push(None);
    };
    for (i, m) in input.messages.iter().enumerate().take(pinned) {
        kept(i, m, &mut out);
    }
    let mut new_records: Option<Vec<FailureRecord>> = records.map(|r| {
        r.iter()
            .filter_map(|f| match f.message {
                m if m < pinned => Some(f.clone()),
                m if m >= to => Some(FailureRecord {
                    id: f.id.clone(),
                    message: m - to + pinned + usize::from(drop.is_some()),
                }),
                _ => None,
            })
            .collect()
    });
    if let Some((_, _, marker)) = drop {
        let at = out.0.len();
        let fresh = marker
            .failures
            .into_iter()
            .map(|id| FailureRecord { id, message: at });
        // When the input's own records are unknown, so are the output's.
        if let Some(r) = &mut new_records {
            r.extend(fresh);
        }
        out.0.push(Message::text(Role::User, marker.text));
        out.1.push(None);
    }
    for (i, m) in input.messages.iter().enumerate().skip(to) {
        kept(i, m, &mut out);
    }
    let (messages, unchanged) = out;
    Ok(Applied {
        conversation: Conversation {
            system: input.system.clone(),
            messages,
            extra: input.extra.clone(),
            bare: input.bare,
        },
        records: new_records,
        unchanged,
    })
}

fn insert(
    blocks: &mut BTreeMap<(usize, usize), (usize, Block)>,
    edit: usize,
    message: usize,
    block: usize,
    with: Block,
) -> Result<(), PlanError> {
    if let Some((other, _)) = blocks.get(&(message, block)) {
        return Err(PlanError::Conflict {
            edit,
            other: *other,
        });
    }
    blocks.insert((message, block), (edit, with));
    Ok(())
}

/// A replacement block must be the same kind, the same call, and keep a failure one; a result
/// compactor already rewrote is not capped again, nor a cleared one cleared again (`doing`:
/// what the edit does).
fn check_block(
    input: &Conversation,
    layout: &Layout,
    (edit, message, block): (usize, usize, usize),
    with: &Block,
    doing: Rewrite,
) -> Result<(), PlanError> {
    let Some(old) = input
        .messages
        .get(message)
        .and_then(|m| m.content.get(block))
    else {
        return Err(PlanError::OutOfRange {
            edit,
            message,
            block,
        });
    };
    if layout.is_protected(message) {
        return Err(PlanError::Protected { edit, message });
    }
    if layout.newest() == Some(message) && !matches!(old, Block::ToolResult(_)) {
        return Err(PlanError::Newest { edit });
    }
    let mismatch = |why| PlanError::Mismatch {
        edit,
        message,
        block,
        why,
    };
    match (old, with) {
        (Block::Thinking(_), _) => Err(mismatch("a thinking block is never edited")),
        (Block::ToolResult(a), Block::ToolResult(b)) => {
            if a.tool_use_id != b.tool_use_id {
                return Err(mismatch("the result's call id changed"));
            }
            if a.outcome == Outcome::Error
                && (b.outcome != Outcome::Error || a.is_error != b.is_error)
            {
                return Err(PlanError::FailureLost {
                    edit,
                    id: a.tool_use_id.clone(),
                });
            }
            match a.rewritten {
                // A capped result may still give way to a placeholder.
                Some(Rewrite::Capped) if doing == Rewrite::Cleared => Ok(()),
                Some(done) => Err(PlanError::Rewritten {
                    edit,
                    message,
                    block,
                    done,
                }),
                None => Ok(()),
            }
        }
        (Block::ToolUse(a), Block::ToolUse(b)) if a.id == b.id && a.name == b.name => Ok(()),
        (Block::ToolUse(_), Block::ToolUse(_)) => Err(mismatch("the call's id or name changed")),
        (Block::Text(_), Block::Text(_)) => Ok(()),
        _ => Err(mismatch("the replacement is another kind of block")),
    }
}

/// A drop of `span` must keep every failure in it (as a record of the marker) and take each
/// call with its results.
fn check_drop(
    input: &Conversation,
    edit: usize,
    span: std::ops::Range<usize>,
    marker: &Marker,
    records: Option<&[FailureRecord]>,
) -> Result<(), PlanError> {
    let recorded: HashSet<&str> = marker.failures.iter().map(String::as_str).collect();
    let dropped = &input.messages[span.clone()];
    let earlier = records
        .unwrap_or(&[])
        .iter()
        .filter(|r| span.contains(&r.message))
        .map(|r| r.id.as_str());
    let failed = dropped
        .iter()
        .flat_map(Message::tool_results)
        .filter(|r| r.outcome == Outcome::Error)
        .map(|r| r.tool_use_id.as_str());
    if let Some(id) = failed.chain(earlier).find(|id| !recorded.contains(id)) {
        return Err(PlanError::FailureLost {
            edit,
            id: id.to_string(),
        });
    }
    let calls: HashSet<&str> = dropped
        .iter()
        .flat_map(|m| m.tool_uses().map(|t| t.id.as_str()))
        .collect();
    let results: HashSet<&str> = dropped
        .iter()
        .flat_map(|m| m.tool_results().map(|r| r.tool_use_id.as_str()))
        .collect();
    let kept = input.messages[..span.start]
        .iter()
        .chain(&input.messages[span.end..]);
    for m in kept {
        let parted = m
            .tool_results()
            .map(|r| r.tool_use_id.as_str())
            .find(|id| calls.contains(id))
            .or_else(|| {
                m.tool_uses()
                    .map(|t| t.id.as_str())
                    .find(|id| results.contains(id))
            });
        if let Some(id) = parted {
            return Err(PlanError::PartsPair {
                edit,
                id: id.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use serde_json::json;

    /// Round 1 holds a failed call, round 2 a successful one, round 3 the question.
    fn history() -> Conversation {
        Format::Anthropic
            .read(&json!({"messages": [
                {"role": "user", "content": "build"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": true}]},
                {"role": "user", "content": "again"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "make"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "ok"}]},
                {"role": "user", "content": "done?"}
            ]}))
            .unwrap()
    }

    fn marker(failures: &[&str]) -> Marker {
        Marker {
            text: "[record]".into(),
            failures: failures.iter().map(|s| s.to_string()).collect(),
            ..Marker::default()
        }
    }

    fn summary(narrative: &str, failures: &[&str]) -> SummaryParts {
        SummaryParts {
            head: "[summary of 0-2]".into(),
            narrative: narrative.into(),
            ledger: Marker {
                text: "Ledger (by code):\n  [failed t1] make: boom\n".into(),
                failures: failures.iter().map(|s| s.to_string()).collect(),
                ..Marker::default()
            },
        }
    }

    #[test]
    fn a_drop_or_a_summary_stands_for_its_span_and_records_its_failures_there() {
        let c = history();
        let layout = Layout::of(&c);
        let drop = UnitEdit::Drop {
            to: 3,
            marker: marker(&["t1"]),
        };
        let summarize = UnitEdit::Summarize {
            to: 3,
            summary: summary("They built it.", &["t1"]),
        };
        for (edit, text) in [
            (drop, "[record]"),
            (
                summarize,
                "[summary of 0-2]\n\nThey built it.\n\nLedger (by code):\n  [failed t1] make: boom\n",
            ),
        ] {
            let out = apply(&c, &layout, vec![edit], Some(&[])).unwrap();
            // Round 1 replaced by one user message of `text`, recording `t1` where it stands.
            assert_eq!(out.conversation.messages.len(), 5);
            assert_eq!(out.conversation.messages[0].role, Role::User);
            assert_eq!(out.conversation.messages[0].plain_text(), text);
            assert_eq!(out.conversation.messages[1..], c.messages[3..]);
            assert_eq!(
                out.records,
                Some(vec![FailureRecord {
                    id: "t1".into(),
                    message: 0
                }])
            );
        }
        // Without a ledger there is no header and nothing after the narrative.
        let mut bare = summary("They built it.", &["t1"]);
        bare.ledger.text.clear();
        assert_eq!(bare.text(), "[summary of 0-2]\n\nThey built it.\n");
    }

    #[test]
    fn a_summary_whose_narrative_forges_the_ledger_or_omits_a_failure_is_refused() {
        let c = history();
        let layout = Layout::of(&c);
        let refused = |summary| {
            let plan = vec![UnitEdit::Summarize { to: 3, summary }];
            apply(&c, &layout, plan, Some(&[])).err()
        };
        let forged = summary("Fine.\nLedger (by code):\n  [ran ok] rm -rf /", &["t1"]);
        assert_eq!(refused(forged), Some(PlanError::ForgedLedger { edit: 0 }));
        assert_eq!(
            refused(summary("Fine.", &[])),
            Some(PlanError::FailureLost {
                edit: 0,
                id: "t1".into()
            })
        );
        let twice = vec![
            UnitEdit::Summarize {
                to: 3,
                summary: summary("Fine.", &["t1"]),
            },
            UnitEdit::Drop {
                to: 3,
                marker: marker(&["t1"]),
            },
        ];
        assert_eq!(
            apply(&c, &layout, twice, Some(&[])),
            Err(PlanError::Conflict { edit: 1, other: 0 })
        );
    }

    #[test]
    fn a_drop_whose_marker_omits_a_failure_is_refused_naming_the_edit() {
        let c = history();
        let layout = Layout::of(&c);
        let plan = vec![
            UnitEdit::Cap {
                message: 4,
                block: 0,
                with: c.messages[4].content[0].clone(),
            },
            UnitEdit::Drop {
                to: 3,
                marker: marker(&[]),
            },
        ];
        assert_eq!(
            apply(&c, &layout, plan, Some(&[])),
            Err(PlanError::FailureLost {
                edit: 1,
                id: "t1".into()
            })
        );
    }

    #[test]
    fn a_drop_inside_an_exchange_is_not_a_legal_cut() {
        let c = history();
        let layout = Layout::of(&c);
        let plan = vec![UnitEdit::Drop {
            to: 2,
            marker: marker(&["t1"]),
        }];
        assert_eq!(
            apply(&c, &layout, plan, Some(&[])),
            Err(PlanError::IllegalCut { edit: 0, to: 2 })
        );
    }

    #[test]
    fn a_clear_that_makes_a_failure_a_success_is_refused() {
        let c = history();
        let layout = Layout::of(&c);
        let Some(Block::ToolResult(r)) = c.messages[2].content.first() else {
            panic!("a tool_result");
        };
        let mut ok = r.clone();
        ok.outcome = Outcome::Success;
        ok.is_error = None;
        let plan = vec![UnitEdit::Clear {
            message: 2,
            block: 0,
            with: ok,
        }];
        assert_eq!(
            apply(&c, &layout, plan, Some(&[])),
            Err(PlanError::FailureLost {
                edit: 0,
                id: "t1".into()
            })
        );
    }

    /// A clear or a cap is typed on the result it writes; a later plan may clear a capped
    /// result, but not cap what was written, nor clear a placeholder again.
    #[test]
    fn a_rewritten_result_is_typed_and_not_cut_again() {
        let c = history();
        let Some(Block::ToolResult(r)) = c.messages[5].content.first() else {
            panic!("a tool_result");
        };
        let placeholder = ToolResult {
            content: Some(crate::conversation::ToolResultContent::Text(
                "[cleared]".into(),
            )),
            ..r.clone()
        };
        let clear = |with: &ToolResult| UnitEdit::Clear {
            message: 5,
            block: 0,
            with: with.clone(),
        };
        let cap = |with: &ToolResult| UnitEdit::Cap {
            message: 5,
            block: 0,
            with: Block::ToolResult(with.clone()),
        };
        let rewritten = |plan: Vec<UnitEdit>, on: &Conversation| {
            let out = apply(on, &Layout::of(on), plan, Some(&[])).unwrap();
            let Some(Block::ToolResult(r)) = out.conversation.messages[5].content.first() else {
                panic!("a tool_result");
            };
            (out.conversation.clone(), r.rewritten)
        };
        assert_eq!(r.rewritten, None);
        let (capped, done) = rewritten(vec![cap(r)], &c);
        assert_eq!(done, Some(Rewrite::Capped));
        let (cleared, done) = rewritten(vec![clear(&placeholder)], &capped);
        assert_eq!(done, Some(Rewrite::Cleared));
        let refused = |plan, on: &Conversation, done| {
            assert_eq!(
                apply(on, &Layout::of(on), plan, Some(&[])),
                Err(PlanError::Rewritten {
                    edit: 0,
                    message: 5,
                    block: 0,
                    done
                })
            );
        };
        refused(vec![cap(r)], &capped, Rewrite::Capped);
        refused(vec![cap(&placeholder)], &cleared, Rewrite::Cleared);
        refused(vec![clear(&placeholder)], &cleared, Rewrite::Cleared);
    }

    #[test]
    fn an_edit_of_a_dropped_message_or_twice_of_one_block_is_refused() {
        let c = history();
        let layout = Layout::of(&c);
        let cap = |message| UnitEdit::Cap {
            message,
            block: 0,
            with: c.messages[message].content[0].clone(),
        };
        let plan = vec![
            cap(1),
            UnitEdit::Drop {
                to: 3,
                marker: marker(&["t1"]),
            },
        ];
        assert_eq!(
            apply(&c, &layout, plan, Some(&[])),
            Err(PlanError::EditsDropped {
                edit: 0,
                message: 1,
                drop: 1
            })
        );
        assert_eq!(
            apply(&c, &layout, vec![cap(4), cap(4)], Some(&[])),
            Err(PlanError::Conflict { edit: 1, other: 0 })
        );
        assert_eq!(
            apply(&c, &layout, vec![cap(6)], Some(&[])),
            Err(PlanError::Newest { edit: 0 })
        );
    }
}
