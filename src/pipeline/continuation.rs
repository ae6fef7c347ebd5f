//! Hysteresis in the pipeline: taking a remembered compaction that the input continues
//! ([`continue_from`], [`continue_or_lay_out`]: sent as it is while within the budget, else
//! laid out for the tiers, with a re-compaction's deeper target), and remembering an output
//! with what a continuation of it needs ([`remember_output`], [`remember_compacted`]).

use super::output::{self, finish};
use super::{Best, Host, Run, Shared, SharedCompacted, ms};
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

/// Takes the remembered compaction when the guard accepts its continuation and it is smaller
/// than the input; returns what it continues when taken, and gives it back when not. The guard
/// builds and checks the continuation ([`guard::continue_prefix`]: from the junctions when
/// `known`, of the same counting basis, serves, in proportion to the new messages, and
/// `continued` is set to the output's new junction; else whole) and finishes the one taken
/// (its breakpoints settled, the client's envelope); here it is counted (from the remembered
/// count when checked from the junctions) and taken.
pub(super) fn continue_from(
    run: &Run<'_>,
    mut recalled: policy::Recalled,
    known: Option<&Continuation>,
    best: &mut Best,
    continued: &mut Option<Junction>,
    report: &mut Report,
) -> Result<Start, Box<policy::Recalled>> {
    let len = recalled.len;
    let t0 = Instant::now();
    let prefix = guard::Prefix {
        // Moved into the continuation; back in `recalled` when it is not taken.
        output: std::mem::take(&mut recalled.output),
        covered: len,
        records: &recalled.failures,
        junctions: known.map(|c| (&c.input, &c.output)),
    };
    let continuation = guard::continue_prefix(prefix, run.input, (run.format, run.options), || {
        run.layout()
    });
    let new_tokens = || -> usize {
        run.input.messages[len..]
            .iter()
            .map(|m| run.counter.count_message(m))
            .sum()
    };
    let (tokens, counted_new) = match (continuation.junction(), known) {
        (Some(_), Some(c)) => {
            let new = new_tokens();
            (c.output_tokens + new, Some(new))
        }
        _ => (
            run.counter.count_conversation(continuation.conversation()),
            None,
        ),
    };
    report.timings.guard_ms += ms(t0);
    if !continuation.passes() || !run.targets.takes(tokens, best.tokens) {
        *continued = None;
        recalled.output = continuation.into_remembered();
        return Err(Box::new(recalled));
    }
    let output_messages = continuation.output_messages();
    let (conversation, removed, junction) = continuation.finish(run.input, run.format);
    *continued = junction;
    // Bytes written for the remembered messages are stale when a breakpoint moved off them.
    let moved = removed.iter().any(|r| match r.site {
        guard::cache::Site::Block { message, .. } => message < output_messages,
        _ => true,
    });
    report.notes.extend(removed.iter().map(ToString::to_string));
    let predecessor = recalled.predecessor();
    let new_tokens = counted_new.unwrap_or_else(new_tokens);
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
    best.conversation = Some(conversation);
    Ok(Start {
        predecessor,
        rewritten: moved,
        new_tokens,
        output_messages,
    })
}

/// A remembered compaction taken as the start of this output.
pub(super) struct Start {
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
    let cx = crate::strategy::Context {
        format: run.format,
        counter: run.counter,
        instructions: None,
        layout: &layout,
        tokens: &per,
        recall: run.recall.is_some(),
    };
    let compaction = truncate.caps_from(base, from, run.targets.counted, &cx);
    if compaction.plan.is_empty() {
        return None;
    }
    let applied = guard::apply(base, &layout, compaction.plan, Some(&best.records)).ok()?;
    let (edits, entries) = (applied.edits, applied.recall);
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
        refused: None,
        notes: vec![format!(
            "capped {} new block(s) as they arrived; the prefix sent before stays as it was",
            edits.len()
        )],
        edits,
        millis: ms(t0),
        degraded: None,
        failed: None,
        recall: entries.into_iter().map(|e| e.reference).collect(),
        carried: Default::default(),
    });
    Some(())
}

/// After continuing: the continuation to send as it is (with the best output it leaves), or
/// the best output so far for the tiers.
pub(super) enum Next {
    Send(Conversation, Best, Continuing),
    Compact(Best, Continuing),
}

/// Continues the remembered compaction when the guard takes it ([`continue_remembered`]), caps
/// its new blocks as they arrive, and sends it when it stays within the budget; else lays out
/// what the tiers work on (the continuation, or the input), with a re-compaction's deeper
/// target ([`deepen`]).
pub(super) fn continue_or_lay_out(
    shared: &Shared<'_>,
    run: &mut Run<'_>,
    recalled: Option<policy::Recalled>,
    known: Option<&crate::memory::Continuation>,
    report: &mut Report,
) -> Next {
    let mut best = Best {
        conversation: None,
        layout: None,
        per: None,
        tokens: shared.tokens_before,
        degraded: None,
        records: Vec::new(),
        pending: None,
    };
    // The client's previous body, when a remembered compaction knows it (counted tokens).
    let known_input = known.map(|c| c.input_tokens);
    let mut continuing = match recalled {
        Some(recalled) => continue_remembered(shared, run, recalled, known, &mut best, report)
            .with_known_input(known_input),
        None => Continuing {
            known_input,
            ..Continuing::default()
        },
    };
    // The cost policy (see [`policy`]): the cycle of the remembered compaction, and whether
    // its prefix has left the provider's cache (the session idle past the cache's lifetime).
    let cycle = known.map(|c| c.cycle);
    let ttl = shared.compactor.settings().policy.cache_ttl_secs;
    let cold = cycle.is_some_and(|c| c.sent.elapsed().as_secs_f64() > ttl);
    // New blocks over the caps are capped as they arrive (the prefix stays as it was), whether
    // the continuation then goes out as it is or is compacted again: a block first sent whole
    // would be written to the cache whole, and the turn that caps it later rewrites the prefix
    // from there.
    if continuing.predecessor.is_some()
        && cap_on_arrival(
            shared.compactor,
            run,
            &mut best,
            continuing.prefix_messages,
            report,
        )
        .is_some()
    {
        continuing.continued = None;
    }
    if continuing.predecessor.is_some()
        && run.targets.continues(best.tokens, cold)
        && let Some(conversation) = best.conversation.take()
    {
        // Still within the budget after the new messages (under the trigger once the cache is
        // cold): the remembered prefix is the output, each turn appends to it.
        return Next::Send(conversation, best, continuing);
    }
    // Continued but over the trigger: the tiers compact the continuation afresh and what
    // they make is remembered for the whole input; the compaction it continued (taken out of
    // the memory) is not put back: the history has grown past it and its prefix is no longer
    // what is sent (keeping it held a stale whole output per crossing, docs/service.md).
    let recompacting = continuing.predecessor.take().is_some();
    if recompacting && let Some(c) = best.conversation.as_mut() {
        // The breakpoints the remembered prefix carries were the client's of earlier turns;
        // the re-compaction rewrites that prefix, so they mark nothing cached any more.
        guard::cache::remove_before(c, continuing.prefix_messages);
    }
    if let Some(c) = &best.conversation
        && best.layout.is_none()
    {
        // Continued but over the budget: the tiers work on the continuation's layout.
        best.layout = Some(run.layout_of(c));
    }
    if let Some(c) = cycle.filter(|_| recompacting) {
        deepen(shared, run, c, (best.tokens, cold), report);
    }
    Next::Compact(best, continuing)
}

/// What continuing a remembered compaction found.
#[derive(Default)]
pub(super) struct Continuing {
    /// Counted tokens of the client's previous body, when a remembered compaction knows it.
    pub(super) known_input: Option<usize>,
    /// Counted tokens of the previous forwarded body, when continued.
    pub(super) sent: usize,
    /// Messages of the previous forwarded body, when continued.
    pub(super) prefix_messages: usize,
    /// The output junction of a continuation that was taken.
    pub(super) continued: Option<Junction>,
    /// The remembered compaction a taken continuation continues.
    pub(super) predecessor: Option<Predecessor>,
    /// The remembered output's written items, for a continuation taken.
    pub(super) written: Option<Arc<crate::memory::Written>>,
}

impl Continuing {
    /// With `known` as the client's previous body's count unless the continuation set it.
    fn with_known_input(mut self, known: Option<usize>) -> Continuing {
        if self.predecessor.is_none() {
            self.known_input = known;
        }
        self
    }
}

/// Takes the remembered compaction as the start of the output when the guard accepts it
/// ([`continue_from`]); gives it back to the memory when not.
pub(super) fn continue_remembered(
    shared: &Shared<'_>,
    run: &Run<'_>,
    mut recalled: policy::Recalled,
    known: Option<&crate::memory::Continuation>,
    best: &mut Best,
    report: &mut Report,
) -> Continuing {
    let items = recalled.written.take();
    let mut continuing = Continuing::default();
    match continue_from(
        run,
        recalled,
        known,
        best,
        &mut continuing.continued,
        report,
    ) {
        Ok(start) => {
            // The client's previous body and the previous forwarded one: this turn's
            // input and output less the new messages.
            continuing.known_input = Some(shared.tokens_before.saturating_sub(start.new_tokens));
            continuing.sent = best.tokens.saturating_sub(start.new_tokens);
            continuing.prefix_messages = start.output_messages;
            continuing.predecessor = Some(start.predecessor);
            // Bytes written for messages whose breakpoint moved are stale.
            continuing.written = items.filter(|_| !start.rewritten);
        }
        Err(recalled) => {
            if let Some(h) = shared.hashes {
                (*recalled).put_back(shared.compactor.memory(), h);
            }
        }
    }
    continuing
}

/// The continuation as the output (still within the budget after the new messages), remembered
/// with its predecessor; the previous forwarded body is its prefix.
pub(super) fn send_continuation(
    shared: &Shared<'_>,
    run: &Run<'_>,
    best: &Best,
    conversation: Conversation,
    mut continuing: Continuing,
    mut report: Report,
) -> SharedCompacted {
    let conversation = Arc::new(conversation);
    let continued = continuing.continued.take();
    shared.remember(
        run,
        best,
        &conversation,
        (
            || Junction::of(shared.input, run.format),
            || continued.unwrap_or_else(|| Junction::of(&conversation, run.format)),
        ),
        continuing.predecessor.take(),
    );
    finish(run, &mut report, true, best.tokens, best.degraded.is_some());
    report.cost = Some(output::cost(
        run,
        shared.prices,
        shared.tokens_before,
        continuing.known_input,
        Some((best.tokens, continuing.sent)),
    ));
    report.messages_after = conversation.messages.len();
    report.timings.total_ms = ms(shared.started);
    SharedCompacted {
        conversation: Some(conversation),
        report,
        written: continuing.written.take(),
    }
}

/// A re-compaction goes deep enough to pay back its cache write: the run's target is lowered
/// to where it does (`tokens`: the continuation's count; `cold`: its prefix left the cache).
pub(super) fn deepen(
    shared: &Shared<'_>,
    run: &mut Run<'_>,
    cycle: crate::memory::Cycle,
    (tokens, cold): (usize, bool),
    report: &mut Report,
) {
    let input = shared.input;
    let fixed =
        run.counter.count_system(input.system.as_ref()) + run.counter.count_tools(input.tools());
    let prices = shared
        .entry
        .map_or(crate::models::Prices::RELATIVE, |e| e.prices());
    let growth = cycle.growth(tokens);
    let targets = run.targets;
    let deep = targets.recompaction(tokens, fixed, growth, &prices, cold);
    if deep < targets.counted.target {
        run.targets.counted.target = deep;
        report.target = run.basis.to_model(deep);
        report.notes.push(format!(
            "re-compaction target {} tokens: the cache write pays back at {} tokens a turn",
            report.target,
            run.basis.to_model(growth)
        ));
    }
    if cold {
        let ttl = shared.compactor.settings().policy.cache_ttl_secs;
        report.notes.push(format!(
            "the cached prefix is cold (idle over {ttl} s): compacted at the trigger"
        ));
    }
}

/// Remembers a compacted output under the input's own prefix (the next turn resends it as it
/// came); its junction keeps the input's bad images, so a continuation repairs them again.
/// `continued`: the output junction of the continuation, used when no tier replaced it.
pub(super) fn remember_compacted(
    shared: &Shared<'_>,
    run: &Run<'_>,
    best: &Best,
    c: Conversation,
    continued: Option<Junction>,
    report: &Report,
) -> Arc<Conversation> {
    let c = Arc::new(c);
    shared.remember(
        run,
        best,
        &c,
        (
            || Junction::of_laid_out(shared.input, run.format, run.layout()),
            || {
                continued
                    .filter(|_| report.tiers.iter().all(|t| !t.accepted))
                    .unwrap_or_else(|| Junction::of(&c, run.format))
            },
        ),
        None,
    );
    c
}
