//! Hysteresis in the pipeline: taking a remembered compaction that the input continues
//! ([`continue_from`]), and remembering an output with what a continuation of it needs
//! ([`remember_output`]).

use super::{Best, Host, Run, ms};
use crate::conversation::Conversation;
use crate::guard::{self, Junction};
use crate::memory::{Continuation, Cycle, Predecessor, PrefixHashes};
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
    // A continuation sent unchanged goes on with its predecessor's cycle; a compaction starts
    // one.
    let cycle = predecessor
        .as_ref()
        .and_then(|p| p.continuation.as_ref())
        .map_or_else(|| Cycle::start(best.tokens), |c| c.cycle.next());
    let continuation = Continuation {
        basis: run.basis.clone(),
        input_tokens,
        output_tokens: best.tokens,
        input: input_junction,
        output: output_junction,
        cycle,
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
) -> Result<Continued, Box<policy::Recalled>> {
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
    // A surplus of `cache_control` breakpoints is the remembered prefix's own: each turn the
    // client marks its newest block, and the block it marked last turn stays marked in the
    // remembered output. The oldest go ([`guard::settle`]: history before the newest message
    // first, oldest first), never the client's newest; the breakpoints are not part of the
    // prefix the provider caches, so the prefix stays the one sent last turn.
    let surplus = !violations.is_empty() && violations.iter().all(|v| v.kind.is_repairable());
    if (!violations.is_empty() && !surplus) || !run.targets.takes(tokens, best.tokens) {
        *continued = None;
        return Err(Box::new(recalled));
    }
    let mut recalled = recalled;
    let mut moved = false;
    if surplus {
        let removed = guard::settle(run.format, &mut recalled.conversation);
        moved = removed.iter().any(|r| match r.site {
            guard::cache::Site::Block { message, .. } => message < recalled.output_messages,
            _ => true,
        });
        report.notes.extend(removed.iter().map(ToString::to_string));
    }
    let predecessor = recalled.predecessor();
    let new_tokens: usize = run.input.messages[len..]
        .iter()
        .map(|m| run.counter.count_message(m))
        .sum();
    let output_messages = recalled.output_messages;
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
    // The remembered envelope is this request's by value: sent in the client's bytes.
    guard::take_client_envelope(&mut recalled.conversation, run.input);
    best.conversation = Some(recalled.conversation);
    Ok(Continued {
        predecessor,
        rewritten: moved,
        new_tokens,
        output_messages,
    })
}

/// A remembered compaction taken as the start of this output.
pub(super) struct Continued {
    /// What it continues, remembered again as a view of the output's first messages.
    pub predecessor: Predecessor,
    /// Whether a breakpoint was moved off its messages (their written bytes are stale).
    pub rewritten: bool,
    /// Counted tokens of the input's new messages (those after the remembered prefix).
    pub new_tokens: usize,
    /// Messages of the remembered output (the first ones of the continuation).
    pub output_messages: usize,
}

/// Caps the oversized blocks of a continuation's new messages (`best`'s messages `from..`)
/// when the settings' tiers include `truncate`: the caps a compaction would give them, given
/// when they first go out, so the prefix stays byte-stable (a block capped at the next
/// re-compaction would rewrite the cached prefix from there) and the cache never writes what
/// the next compaction cuts. Taken when the guard accepts it (its run added to the report's
/// tiers); `None` when nothing was over a cap or it was not taken.
pub(super) fn cap_on_arrival(
    compactor: &dyn Host,
    run: &Run<'_>,
    best: &mut Best,
    from: usize,
    report: &mut Report,
) -> Option<()> {
    let settings = compactor.settings();
    if !settings.policy.tiers.iter().any(|t| t == "truncate") {
        return None;
    }
    let truncate = crate::strategy::truncate::Truncate {
        config: settings.truncate.clone(),
    };
    let base = best.conversation.as_ref()?;
    let t0 = Instant::now();
    let layout = run.layout_of(base);
    let per = crate::guard::MessageTokens::of(base, run.counter);
    let sink = crate::recall::Sink::default();
    let cx = crate::strategy::Context {
        format: run.format,
        counter: run.counter,
        instructions: None,
        layout: &layout,
        tokens: &per,
        recall: run.recall.map(|_| &sink),
    };
    let compaction = truncate.caps_from(base, from, run.targets.counted, &cx);
    if compaction.plan.is_empty() {
        return None;
    }
    let applied = guard::apply(base, &layout, compaction.plan, Some(&best.records)).ok()?;
    let mut output = applied.conversation;
    guard::settle(run.format, &mut output);
    let tokens = run.counter.count_conversation(&output);
    let records = applied.records.unwrap_or_default();
    // The remembered prefix carries breakpoints the client moved on from (a continuation sent
    // unchanged does too, within the provider's limit, which `validate` checks): the caps add
    // none of their own.
    let mut violations = run.verify(&output, Some(&records), report);
    violations.retain(|v| !matches!(v.kind, guard::ViolationKind::CacheBreakpointsAdded { .. }));
    if !violations.is_empty() || tokens >= best.tokens {
        return None;
    }
    let entries = sink.take();
    if let Some(store) = run.recall {
        for e in &entries {
            store.put(e);
        }
    }
    best.conversation = Some(output);
    best.tokens = tokens;
    best.records = records;
    best.layout = None;
    best.per = None;
    report.tiers.push(crate::report::TierRun {
        strategy: "truncate".into(),
        accepted: true,
        tokens_after: run.basis.to_model(tokens),
        violations: Vec::new(),
        notes: vec![format!(
            "capped {} new block(s) as they arrived; the prefix sent before stays as it was",
            compaction.edits.len()
        )],
        edits: compaction.edits,
        millis: ms(t0),
        degraded: None,
        failed: None,
        recall: entries.into_iter().map(|e| e.reference).collect(),
        carried: Default::default(),
    });
    Some(())
}
