//! Continuing a remembered compaction: the guard builds the continuation (the remembered
//! output followed by the input's new messages, verbatim) and gives its verdict in the same
//! place ([`continue_prefix`]), then finishes the one the pipeline takes ([`Continued::finish`]).
//!
//! ```text
//! remembered output R (of input[..covered]) + input[covered..]   -> the continuation
//!   junctions known -> validate_continuation (from R's junction)  -> violations, new junction
//!                      check_continuation (from the input's)        (the new messages only)
//!   else            -> validate + check_compaction_with              (the whole, R's records)
//! taken by the pipeline -> finish: settle a surplus of breakpoints, the client's envelope
//! not taken             -> into_remembered: R again, for the memory
//! ```
//!
//! The pipeline decides whether to take it (it counts it, and compares with the budget); the
//! guard alone writes and judges its messages.

use super::cache::RemovedBreakpoint;
use super::edit::FailureRecord;
use super::envelope::{settle, take_client_envelope};
use super::layout::Layout;
use super::preserve::{check_compaction_with, check_continuation};
use super::validate::{Junction, ValidateOptions, validate, validate_continuation};
use super::violation::Violation;
use crate::conversation::Conversation;
use crate::format::Format;

/// A remembered compaction that the input continues: its output `R`, the compaction of the
/// input's first `covered` messages.
pub(crate) struct Prefix<'a> {
    /// The remembered output `R` (moved in: the continuation appends to it).
    pub output: Conversation,
    /// Input messages `R` is the compaction of (the new messages are the input's `covered..`).
    pub covered: usize,
    /// The failure records `R` was built with ([`super::apply`]'s, remembered with it).
    pub records: &'a [FailureRecord],
    /// The junctions it was remembered with, when they serve this input (the same counting
    /// basis, the input's covering `covered` messages): the input prefix's and `R`'s.
    pub junctions: Option<(&'a Junction, &'a Junction)>,
}

/// A remembered output continued by the input's new messages, with the guard's verdict on it.
/// Built and checked by [`continue_prefix`] only.
#[derive(Debug)]
pub(crate) struct Continued {
    /// The remembered output followed by the input's new messages.
    conversation: Conversation,
    /// Messages of the remembered output (the first ones of `conversation`).
    output_messages: usize,
    /// What [`validate`] and [`check_compaction_with`] find in the continuation (only the
    /// repairable ones when it [`Continued::passes`]).
    violations: Vec<Violation>,
    /// The junction at the continuation's end, when it was checked from the junctions (in
    /// proportion to the new messages); `None` when it was checked whole.
    junction: Option<Junction>,
}

/// Builds the continuation of `prefix` by `input` (the input as compaction sees it: the
/// original or its repaired copy): the remembered output followed by `input.messages[covered..]`,
/// and checks it. With the junctions, only the junction and the new messages are validated and
/// checked ([`validate_continuation`] from the output's junction, [`check_continuation`] from
/// the input prefix's); without them, or when those cannot decide (a reference beyond call /
/// result pairs, another format), the whole continuation is ([`validate`],
/// [`check_compaction_with`] against `input` with the remembered records; `input_layout` gives
/// the input's layout, computed only then). No new message when `covered` exceeds the input's.
pub(crate) fn continue_prefix<'l>(
    prefix: Prefix<'_>,
    input: &Conversation,
    (format, options): (Format, ValidateOptions),
    input_layout: impl FnOnce() -> &'l Layout,
) -> Continued {
    let Prefix {
        output: mut conversation,
        covered,
        records,
        junctions,
    } = prefix;
    let output_messages = conversation.messages.len();
    let new = input.messages.get(covered..).unwrap_or_default();
    conversation.messages.extend_from_slice(new);
    let incremental = junctions.and_then(|(input_junction, output_junction)| {
        let (mut v, junction) =
            validate_continuation(&conversation, output_junction, format, options)?;
        v.extend(check_continuation(
            input,
            covered,
            input_junction,
            &conversation,
        )?);
        Some((v, junction))
    });
    let (violations, junction) = match incremental {
        Some((violations, junction)) => (violations, Some(junction)),
        None => {
            let mut v = validate(&conversation, format, options);
            v.extend(check_compaction_with(
                input,
                input_layout(),
                &conversation,
                format,
                Some(records),
            ));
            (v, None)
        }
    };
    Continued {
        conversation,
        output_messages,
        violations,
        junction,
    }
}

impl Continued {
    /// Whether the guard accepts it: no violation but repairable ones (a surplus of
    /// `cache_control` breakpoints, which [`Continued::finish`] settles).
    pub(crate) fn passes(&self) -> bool {
        self.violations.iter().all(|v| v.kind.is_repairable())
    }

    /// The junction at its end when it was checked from the junctions; `None` when it was
    /// checked whole.
    pub(crate) fn junction(&self) -> Option<&Junction> {
        self.junction.as_ref()
    }

    /// Messages of the remembered output (the first ones of the continuation).
    pub(crate) fn output_messages(&self) -> usize {
        self.output_messages
    }

    /// The continuation as it goes out, once taken (it [`Continued::passes`]), with the
    /// breakpoints removed and its end's junction (when checked from the junctions).
    ///
    /// A surplus of `cache_control` breakpoints is the remembered prefix's own: each turn the
    /// client marks its newest block, and the block it marked last turn stays marked in the
    /// remembered output. The oldest go ([`settle`]: history before the newest message
    /// first, oldest first), never the client's newest; the breakpoints are not part of the
    /// prefix the provider caches, so the prefix stays the one sent last turn. The envelope is
    /// then `input`'s by value: sent in the client's bytes ([`take_client_envelope`]).
    pub(crate) fn finish(
        self,
        input: &Conversation,
        format: Format,
    ) -> (Conversation, Vec<RemovedBreakpoint>, Option<Junction>) {
        let mut conversation = self.conversation;
        let removed = match self.violations.is_empty() {
            true => Vec::new(),
            false => settle(format, &mut conversation),
        };
        take_client_envelope(&mut conversation, input);
        (conversation, removed, self.junction)
    }

    /// The remembered output again (the new messages cut off), when it is not taken.
    pub(crate) fn into_remembered(self) -> Conversation {
        let mut conversation = self.conversation;
        conversation.messages.truncate(self.output_messages);
        conversation
    }

    /// The continuation, to count it.
    pub(crate) fn conversation(&self) -> &Conversation {
        &self.conversation
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::ViolationKind;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn read(messages: &serde_json::Value) -> Conversation {
        Format::Anthropic
            .read(&json!({"model": "m", "max_tokens": 8, "messages": messages}))
            .expect("readable")
    }

    fn first(c: &Conversation, n: usize) -> Conversation {
        Conversation {
            messages: c.messages[..n].to_vec(),
            ..c.clone()
        }
    }

    /// `prefix` continued by `input` from `covered`, from the junctions or (`false`) whole.
    fn continued(
        output: &Conversation,
        input: &Conversation,
        covered: usize,
        from_junctions: bool,
    ) -> Continued {
        let format = Format::Anthropic;
        let input_junction = Junction::of(&first(input, covered), format);
        let output_junction = Junction::of(output, format);
        let layout = Layout::of(input, format);
        let options = ValidateOptions {
            allow_open_tail: layout.ends_with_open_call(),
        };
        let prefix = Prefix {
            output: output.clone(),
            covered,
            records: &[],
            junctions: from_junctions.then_some((&input_junction, &output_junction)),
        };
        continue_prefix(prefix, input, (format, options), || &layout)
    }

    #[test]
    fn a_continuation_is_the_remembered_output_followed_by_the_new_messages() {
        let input = read(&json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "long answer"},
            {"role": "user", "content": "next"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "again"}
        ]));
        // The remembered output dropped the first round's answer.
        let output = Conversation {
            messages: vec![input.messages[0].clone(), input.messages[2].clone()],
            ..input.clone()
        };
        for from_junctions in [true, false] {
            let c = continued(&output, &input, 3, from_junctions);
            assert!(c.passes());
            assert_eq!(c.junction().is_some(), from_junctions);
            assert_eq!(c.output_messages(), 2);
            let mut expected = output.messages.clone();
            expected.extend_from_slice(&input.messages[3..]);
            assert_eq!(c.conversation().messages, expected);
            assert_eq!(c.into_remembered(), output);
        }
        let (sent, removed, junction) =
            continued(&output, &input, 3, true).finish(&input, Format::Anthropic);
        assert_eq!(sent.messages.len(), 4);
        assert!(removed.is_empty());
        assert_eq!(junction, Some(Junction::of(&sent, Format::Anthropic)));
    }

    /// The input's last exchange began in the remembered prefix and the remembered output
    /// dropped a message of it: refused, from the junctions as when checked whole.
    #[test]
    fn an_open_loop_the_remembered_output_changed_is_refused_either_way() {
        let input = read(&json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "thinking aloud"},
            {"role": "assistant", "content": "still"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}
        ]));
        let output = Conversation {
            messages: vec![input.messages[0].clone(), input.messages[2].clone()],
            ..input.clone()
        };
        for from_junctions in [true, false] {
            let c = continued(&output, &input, 3, from_junctions);
            assert!(!c.passes());
            assert!(
                c.violations
                    .iter()
                    .any(|v| v.kind == ViolationKind::OpenLoopChanged)
            );
        }
    }
}
