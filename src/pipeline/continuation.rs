//! Hysteresis in the pipeline: taking a remembered compaction that the input continues
//! ([`continue_from`]), and remembering an output with what a continuation of it needs
//! ([`remember_output`]).

use super::{Best, Host, Run, ms};
use crate::conversation::Conversation;
use crate::guard::{self, Junction};
use crate::memory::{Continuation, Predecessor, PrefixHashes};
use crate::policy;
use crate::report::Report;
use std::sync::Arc;
use std::time::Instant;

/// Remembers `output` (the best output, of `best.tokens` counted tokens) as the compaction of
/// the input hashed in `hashes` (`input_tokens` counted tokens), with the junctions (input's,
/// output's) a continuation of it starts from, and the compaction it continues (remembered
/// again as a view of its first messages).
#[allow(clippy::too_many_arguments)]
pub(super) fn remember_output(
    compactor: &dyn Host,
    hashes: &PrefixHashes,
    run: &Run<'_>,
    input_tokens: usize,
    best: &Best,
    output: &Arc<Conversation>,
    (input_junction, output_junction): (Junction, Junction),
    predecessor: Option<Predecessor>,
) {
    let continuation = Continuation {
        basis: run.basis.clone(),
        input_tokens,
        output_tokens: best.tokens,
        input: input_junction,
        output: output_junction,
    };
    compactor.memory().remember_shared(
        hashes,
        output,
        best.degraded.as_deref(),
        &best.records,
        continuation,
        predecessor,
    );
}

/// Takes the remembered compaction when the guard accepts it and it is smaller than the input;
/// returns what it continues when taken, and gives it back when not. With what continuing needs (`known`, of the same counting
/// basis) only the junction and the new messages are validated, checked and counted
/// ([`guard::validate_continuation`], [`guard::check_continuation`]), and `continued` is set to
/// the output's new junction; else the continuation is validated, checked and counted whole.
pub(super) fn continue_from(
    run: &Run<'_>,
    recalled: policy::Recalled,
    known: Option<&Continuation>,
    best: &mut Best,
    continued: &mut Option<Junction>,
    report: &mut Report,
) -> Result<Predecessor, Box<policy::Recalled>> {
    let len = recalled.len;
    let conversation = &recalled.conversation;
    let t0 = Instant::now();
    let incremental = known.and_then(|c| {
        let (mut v, junction) =
            guard::validate_continuation(conversation, &c.output, run.format, run.options)?;
        v.extend(guard::check_continuation(
            run.input,
            len,
            &c.input,
            conversation,
        )?);
        Some((v, junction, c.output_tokens))
    });
    let (violations, tokens) = match incremental {
        Some((violations, junction, output_tokens)) => {
            let tokens = output_tokens
                + run.input.messages[len..]
                    .iter()
                    .map(|m| run.counter.count_message(m))
                    .sum::<usize>();
            *continued = Some(junction);
            (violations, tokens)
        }
        None => {
            let mut v = guard::validate(conversation, run.format, run.options);
            v.extend(guard::check_compaction_with(
                run.input,
                run.layout(),
                conversation,
                run.format,
                Some(recalled.failures.as_slice()),
            ));
            (v, run.counter.count_conversation(conversation))
        }
    };
    report.timings.guard_ms += ms(t0);
    if !violations.is_empty() || !run.targets.takes(tokens, best.tokens) {
        *continued = None;
        return Err(Box::new(recalled));
    }
    let predecessor = recalled.predecessor();
    report.notes.push(format!(
        "continued from the remembered compaction of the first {len} messages ({} new)",
        run.input.messages.len() - len
    ));
    report.continued_from = Some(len);
    if let Some(why) = recalled.degraded {
        // The remembered prefix was made by a fallback: so is this output.
        report
            .notes
            .push(format!("remembered compaction was degraded: {why}"));
        best.degraded = Some(why);
    }
    best.tokens = tokens;
    best.records = recalled.failures;
    // The tiers that may follow compute its layout (none when it stays under the trigger).
    best.layout = None;
    // Its messages are counted by the first tier that runs on it.
    best.per = None;
    best.conversation = Some(recalled.conversation);
    Ok(predecessor)
}
