//! Unit edits and [`apply`]: strategies plan, the guard builds the output.
//!
//! ```text
//! strategy.compact(view)  -> Vec<UnitEdit>   (pure: indices of the strategy's input)
//! apply(input, layout, plan)
//!   -> checks each edit against the layout  (a legal cut, no protected message, a
//!                                            replacement the guard wrote for that block,
//!                                            no two edits on one block, no cap of a
//!                                            result compactor already rewrote)
//!   -> drops a span with its tool_use / tool_result partners together, writes the marker
//!      (or the summary message, from its parts: head, narrative, code-made ledger), puts
//!      an unusable image's placeholder in its place (RepairImage)
//!   -> records where each failure is kept     (typed: FailureRecord) and what each edited
//!      result now is                          (typed: ToolResult::rewritten)
//!   -> Applied | PlanError naming the edit
//! ```
//!
//! Pairing is kept by construction, in data: a drop ends only at a legal cut (never inside an
//! exchange), and [`apply`] still checks that no kept tool_result lost its call and no kept
//! call lost its result (Anthropic: `tool_use ids were found without tool_result blocks
//! immediately after`; OpenAI Chat: tool messages must answer a preceding `tool_calls`).
//!
//! Here, [`apply`] in its steps: `check_plan` (each edit on its own, collecting the replaced
//! blocks and the drop), `check_span` (the drop's span: no edit inside it, its carry, its
//! failures recorded, no call parted from its result), `splice` (the output, message by
//! message) and `output_records` (the failure records carried over). A capped block, a
//! cleared result and a marker come written by the guard ([`super::write`]), sealed, so their
//! content is not read again here; a marker's typed failures are still checked against the
//! span it drops.
//!
//! The plan's edits and the summary and marker parts they carry are in `plan`, the refusals
//! in `error`, the checks of one edit against the input and its layout in `check`, an image's
//! repair (its record and the block that takes its place) in `image`.

mod check;
mod error;
mod image;
mod plan;
#[cfg(test)]
mod recall_tests;
mod record;
#[cfg(test)]
mod tests;

use super::carry::{Carried, Kept};
use super::layout::Layout;
use super::write::Marker;
use crate::conversation::{Block, Conversation, Message, Rewrite, Role, ToolResult};
use check::{check_drop, check_target};
pub use error::PlanError;
pub(super) use image::image_at;
use image::repaired_block;
pub use image::{IMAGE_REMOVED_PREFIX, ImageRepair};
pub use plan::{SummaryParts, UnitEdit};
pub use record::Edit;
use std::collections::BTreeMap;

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
    /// The images the plan's [`UnitEdit::RepairImage`] edits replaced, in plan order (message
    /// indices of the input).
    pub repairs: Vec<ImageRepair>,
    /// What the drop kept in place and carried, and where.
    pub carried: CarriedOut,
    /// What was applied, one [`Edit`] per edit of the plan in plan order (image repairs and a
    /// call input cleared along with its result not listed): the report's edits.
    pub edits: Vec<Edit>,
    /// The originals the output names by recall id, one per applied edit whose guard-written
    /// text names one ([`super::write::Capped::recall`], [`super::write::Cleared::recall`],
    /// [`Marker::recall`]), in plan order: the report's recall refs, and what the pipeline
    /// keeps when it takes the output.
    pub recall: Vec<crate::recall::Entry>,
}

/// What a drop kept in place and carried ([`super::Layout::carry`]), as built.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CarriedOut {
    /// Input messages of the dropped span kept verbatim, with why.
    pub kept: Vec<(usize, super::carry::Kept)>,
    /// Output index of the carried system message (Anthropic), if one was carried.
    pub system: Option<usize>,
    /// Input messages whose standing system content it carries.
    pub system_from: Vec<usize>,
    /// The context blocks that open the marker message: the input message each came from
    /// and its tag (`environment_context`, `INSTRUCTIONS`, `system-reminder`).
    pub context: Vec<(usize, String)>,
}

/// Builds the output of `plan` on `input` (whose layout is `layout`). `records` are the typed
/// failure records of `input` itself (from an earlier apply), `None` when unknown.
///
/// The steps: check each edit and collect the replaced blocks and the drop (`check_plan`),
/// check the drop's span (`check_span`), splice the output (`splice`), then carry the
/// failure records over (`output_records`).
///
/// # Errors
/// [`PlanError`] naming the first faulty edit; nothing is built then.
pub fn apply(
    input: &Conversation,
    layout: &Layout,
    plan: Vec<UnitEdit>,
    records: Option<&[FailureRecord]>,
) -> Result<Applied, PlanError> {
    let checked = check_plan(input, layout, plan)?;
    let carried = check_span(input, layout, &checked, records)?;
    let Checked {
        drop,
        blocks,
        repairs,
        edits,
        recall,
    } = checked;
    let (out, fresh, carried) = splice(input, layout, blocks, drop, carried);
    let records = output_records(records, &out.at, fresh);
    Ok(Applied {
        conversation: Conversation {
            system: input.system.clone(),
            messages: out.messages,
            extra: input.extra.clone(),
            bare: input.bare,
        },
        records,
        unchanged: out.unchanged,
        repairs,
        carried,
        edits,
        recall,
    })
}

/// A plan whose edits each passed their checks: the drop (its edit, its end, its marker),
/// the replaced blocks by (message, block) with the edit that replaced them, and the image
/// repairs, the report's edits and the recall entries in plan order.
struct Checked {
    drop: Option<(usize, usize, Marker)>,
    blocks: BTreeMap<(usize, usize), (usize, Block)>,
    repairs: Vec<ImageRepair>,
    edits: Vec<Edit>,
    recall: Vec<crate::recall::Entry>,
}

/// Checks each edit of `plan` on its own (a legal cut, no protected message, a replacement
/// written for its block, no two edits on one block) and collects what it replaces.
fn check_plan(
    input: &Conversation,
    layout: &Layout,
    plan: Vec<UnitEdit>,
) -> Result<Checked, PlanError> {
    let mut checked = Checked {
        drop: None,
        blocks: BTreeMap::new(),
        repairs: Vec::new(),
        edits: Vec::new(),
        recall: Vec::new(),
    };
    let pinned = layout.pinned();
    // Repaired images (message, block, nested) -> edit.
    let mut repaired: BTreeMap<(usize, usize, Option<usize>), usize> = BTreeMap::new();
    for (edit, e) in plan.into_iter().enumerate() {
        let (to, marker, (record, named)) = match e {
            UnitEdit::Drop { to, mut marker } => {
                let record = Edit::dropped(input, pinned..to, &marker);
                let named = marker.recall.take();
                if let Some(r) = named.as_ref().map(|e| &e.reference)
                    && (r.message, r.end) != (pinned, to)
                {
                    let (from, end) = (r.message, r.end);
                    return Err(PlanError::RecallElsewhere { edit, from, end });
                }
                (to, marker, (record, named))
            }
            // A summary is written here, from its parts, then stands for its span as a marker.
            UnitEdit::Summarize { to, summary } => {
                let record = Edit::summarized(pinned..to, &summary);
                (to, summary_marker(edit, summary)?, (record, None))
            }
            UnitEdit::Cap(mut c) => {
                let (message, block) = (c.message, c.block);
                check_target(
                    input,
                    layout,
                    (edit, message, block),
                    &c.with,
                    Rewrite::Capped,
                )?;
                if c.reported {
                    checked.edits.push(Edit::truncated(&c));
                }
                checked.recall.extend(c.recall.take());
                let with = match c.with {
                    Block::ToolResult(r) => Block::ToolResult(ToolResult {
                        rewritten: Some(Rewrite::Capped),
                        ..r
                    }),
                    other => other,
                };
                insert(&mut checked.blocks, edit, message, block, with)?;
                continue;
            }
            UnitEdit::Clear(c) => {
                let (message, block) = (c.message, c.block);
                checked.edits.push(Edit::cleared(&c));
                checked.recall.extend(c.recall);
                let with = Block::ToolResult(ToolResult {
                    rewritten: Some(Rewrite::Cleared),
                    ..c.with
                });
                check_target(
                    input,
                    layout,
                    (edit, message, block),
                    &with,
                    Rewrite::Cleared,
                )?;
                insert(&mut checked.blocks, edit, message, block, with)?;
                continue;
            }
            UnitEdit::RepairImage(r) => {
                check_repair(input, layout, edit, r, &mut checked, &mut repaired)?;
                continue;
            }
        };
        if let Some((other, _, _)) = &checked.drop {
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
        checked.drop = Some((edit, to, marker));
        checked.edits.push(record);
        checked.recall.extend(named);
    }
    Ok(checked)
}

/// The marker a summary stands for its span as: its text written from its parts, its ledger's
/// failures and user words.
fn summary_marker(edit: usize, summary: SummaryParts) -> Result<Marker, PlanError> {
    if summary.forged() {
        return Err(PlanError::ForgedLedger { edit });
    }
    let text = summary.text();
    let tokens_before = summary.tokens_before;
    let Marker {
        failures,
        user_words,
        ..
    } = summary.ledger;
    Ok(Marker {
        text,
        failures,
        user_words,
        removed_tokens: tokens_before,
        recall: None,
    })
}

/// Checks an image repair and puts the repaired block in `checked` (several images of one
/// tool result: each repair goes on from the last one's block; any other edit of the block
/// conflicts).
fn check_repair(
    input: &Conversation,
    layout: &Layout,
    edit: usize,
    r: ImageRepair,
    checked: &mut Checked,
    repaired: &mut BTreeMap<(usize, usize, Option<usize>), usize>,
) -> Result<(), PlanError> {
    let key = (r.message, r.block);
    if let Some(&other) = repaired.get(&(r.message, r.block, r.nested)) {
        return Err(PlanError::Conflict { edit, other });
    }
    let current = match checked.blocks.get(&key) {
        Some((other, _)) if !repaired.keys().any(|&(m, b, _)| (m, b) == key) => {
            return Err(PlanError::Conflict {
                edit,
                other: *other,
            });
        }
        Some((first, b)) => Some((*first, b)),
        None => None,
    };
    let with = repaired_block(input, layout, edit, &r, current.map(|(_, b)| b))?;
    checked
        .blocks
        .insert(key, (current.map_or(edit, |(first, _)| first), with));
    repaired.insert((r.message, r.block, r.nested), edit);
    checked.repairs.push(r);
    Ok(())
}

/// The checks of the drop's span, if there is one: no other edit inside it, a legal carry
/// ([`Layout::carry`]), every failure in it recorded and no call parted from its result
/// ([`check_drop`]). Returns what the drop carries (nothing without a drop).
fn check_span(
    input: &Conversation,
    layout: &Layout,
    checked: &Checked,
    records: Option<&[FailureRecord]>,
) -> Result<Carried, PlanError> {
    let Some((d, to, marker)) = &checked.drop else {
        return Ok(Carried::default());
    };
    let (d, to, pinned) = (*d, *to, layout.pinned());
    if let Some((&(message, _), &(edit, _))) = checked.blocks.range((pinned, 0)..(to, 0)).next() {
        return Err(PlanError::EditsDropped {
            edit,
            message,
            drop: d,
        });
    }
    let carried = layout
        .carry(input, to)
        .map_err(|why| PlanError::Carry { edit: d, to, why })?;
    let kept: Vec<usize> = carried.kept.iter().map(|k| k.0).collect();
    check_drop(input, d, pinned..to, &kept, marker, records)?;
    Ok(carried)
}

/// Splices the output: the pinned prefix, then (with a drop) the kept provider compaction
/// items, the marker, the carried units and system message and the tail, else every message
/// after the prefix; each kept message with its replaced blocks. Returns the output, the
/// marker's failure records and what the drop carried, as built.
fn splice(
    input: &Conversation,
    layout: &Layout,
    mut blocks: BTreeMap<(usize, usize), (usize, Block)>,
    drop: Option<(usize, usize, Marker)>,
    carried: Carried,
) -> (Output, Vec<FailureRecord>, CarriedOut) {
    let pinned = layout.pinned();
    let to = drop.as_ref().map_or(pinned, |(_, to, _)| *to);
    let capacity = input.messages.len() - (to - pinned) + 2 + carried.kept.len();
    let mut out = Output {
        messages: Vec::with_capacity(capacity),
        unchanged: Vec::with_capacity(capacity),
        at: vec![None; input.messages.len()],
    };
    let mut kept = |i: usize, m: &Message, out: &mut Output| {
        // The replacements of this message's blocks, in block order (the map is sorted).
        let mut with: Vec<(usize, Block)> = Vec::new();
        while let Some(entry) = blocks.first_entry() {
            if entry.key().0 != i {
                break;
            }
            let ((_, j), (_, b)) = entry.remove_entry();
            with.push((j, b));
        }
        out.keep(i, m, with);
    };
    for (i, m) in input.messages.iter().enumerate().take(pinned) {
        kept(i, m, &mut out);
    }
    let mut fresh: Vec<FailureRecord> = Vec::new();
    let mut carried_out = CarriedOut::default();
    let Some((_, _, marker)) = drop else {
        for (i, m) in input.messages.iter().enumerate().skip(to) {
            kept(i, m, &mut out);
        }
        return (out, fresh, carried_out);
    };
    // OpenAI Responses ignores every item before the latest `compaction` item (B3): a kept
    // one goes before the marker, so the marker is read. (Anthropic's compaction block sits
    // in an assistant message, which cannot open the history: it stays after the marker.)
    let lead: Vec<usize> = if layout.format() == crate::format::Format::Anthropic {
        Vec::new()
    } else {
        carried
            .kept
            .iter()
            .filter(|k| matches!(k.1, Kept::ProviderCompaction))
            .map(|k| k.0)
            .collect()
    };
    for &i in &lead {
        kept(i, &input.messages[i], &mut out);
    }
    let at = out.messages.len();
    fresh.extend(
        marker
            .failures
            .into_iter()
            .map(|id| FailureRecord { id, message: at }),
    );
    out.messages.push(marker_message(marker.text, &carried));
    out.unchanged.push(None);
    carried_out.context = carried
        .context
        .iter()
        .map(|(i, tag, _)| (*i, tag.clone()))
        .collect();
    // What stays in force after the marker: the kept units, then the tail, with the one
    // carried system message at its slot.
    let rest: Vec<usize> = carried
        .kept
        .iter()
        .map(|k| k.0)
        .filter(|i| !lead.contains(i))
        .chain(to..input.messages.len())
        .collect();
    let system_at = carried.system.as_ref().map(|(_, at)| *at);
    for (n, &i) in rest.iter().enumerate() {
        if system_at == Some(n)
            && let Some((system, _)) = &carried.system
        {
            carried_out.system = Some(out.messages.len());
            out.messages.push(system.clone());
            out.unchanged.push(None);
        }
        kept(i, &input.messages[i], &mut out);
    }
    carried_out.kept = carried.kept;
    carried_out.system_from = carried.system_from;
    (out, fresh, carried_out)
}

/// Failure records of the output: the input's own follow their messages (`at`: where each
/// input message went); the marker's (`fresh`) are new. When the input's own records are
/// unknown, so are the output's.
fn output_records(
    records: Option<&[FailureRecord]>,
    at: &[Option<usize>],
    fresh: Vec<FailureRecord>,
) -> Option<Vec<FailureRecord>> {
    records.map(|r| {
        r.iter()
            .filter_map(|f| {
                let message = at.get(f.message).copied().flatten()?;
                Some(FailureRecord {
                    id: f.id.clone(),
                    message,
                })
            })
            .chain(fresh)
            .collect()
    })
}

/// The output being built, and where each input message went.
struct Output {
    messages: Vec<Message>,
    unchanged: Vec<Option<usize>>,
    /// Per input message: its index in the output, when kept.
    at: Vec<Option<usize>>,
}

impl Output {
    /// Puts input message `i` (`m`) in the output, with `with` (its replaced blocks, in block
    /// order) in place of its own; a message without one is copied whole.
    fn keep(&mut self, i: usize, m: &Message, mut with: Vec<(usize, Block)>) {
        with.retain(|(j, _)| *j < m.content.len());
        self.at[i] = Some(self.messages.len());
        if with.is_empty() {
            self.messages.push(m.clone());
            self.unchanged.push(Some(i));
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
        self.messages.push(Message {
            role: m.role.clone(),
            content,
            extra: m.extra.clone(),
            form: m.form,
        });
        self.unchanged.push(None);
    }
}

/// The marker message: the client's carried context blocks, then the marker's text (a plain
/// string when nothing is carried, as before).
fn marker_message(text: String, carried: &Carried) -> Message {
    if carried.context.is_empty() {
        return Message::text(Role::User, text);
    }
    let mut content: Vec<Block> = carried.context.iter().map(|(_, _, b)| b.clone()).collect();
    content.push(Block::text(text));
    Message::new(Role::User, content)
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
