//! The pipeline of one compaction, each step once:
//!
//! ```text
//! input -> guard::validate (the input's own faults refuse it)
//!       -> repair: an unusable image outside the newest exchange -> a text placeholder
//!          (guard::plan_repairs + guard::apply); the repaired copy is compacted instead,
//!          and is the output even under the trigger
//!       -> guard::Layout::of (once) and count (cached)
//!       -> policy: under the trigger? -> unchanged (borrowed, no copy)
//!       -> policy: remembered prefix?  -> continue from it (verified by the guard from the
//!                                         prefix's junction: only the new messages are
//!                                         validated, checked and counted)
//!       -> tier 1 .. tier n            strategy plan -> guard::apply -> settle -> verify
//!                                      -> taken when smaller
//!       -> verify the output taken last, if it was passed on unjudged (refused: the
//!          tiers after it run again on the output before it)
//!       -> report
//! ```
//!
//! Each tier works on the output of the last taken one (with that output's layout) and the
//! run stops at the first tier that reaches the target. Every output returned passes
//! [`guard::validate`], [`guard::check_compaction_with`] against the original input and
//! [`guard::check_envelope`]; one that fails is not taken, and the report names the
//! violations. A tier's output that is smaller but short of the target, with a tier after it,
//! is passed on before that verdict and judged only if it ends up the output.
//!
//! Here: the run of one compaction (`compact_shared`). Beside it: what a compaction returns
//! and its report's figures (`output`), the tier loop (`tiers`), continuing from a
//! remembered compaction and remembering the output (`continuation`), and repairing the
//! input's unusable images (`repair`).

mod continuation;
mod output;
mod repair;
#[cfg(test)]
mod tests;
mod tiers;

use crate::config::Settings;
use crate::conversation::Conversation;
use crate::format::Format;
use crate::guard::{
    self, FailureRecord, Junction, Layout, MessageTokens, ValidateOptions, Violation,
};
use crate::memory::{Memory, Predecessor, PrefixHashes};
use crate::policy::{self, Targets};
use crate::report::{Report, RequestKind, Status};
use crate::strategy::Strategy;
use crate::tokens::{ModelTokens, TokenCounter, Tokenizer};
use continuation::{continue_from, remember_output};
pub use output::{CompactError, Compacted, SharedCompacted};
use output::{finish, first_report};
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tiers::{Pending, run_tiers, settle_pending};

/// What the pipeline needs of its owner, [`crate::Compactor`] (which implements it; the
/// pipeline does not import it, so the two modules do not depend on each other).
pub(crate) trait Host: Sync {
    /// The settings in force.
    fn settings(&self) -> &Settings;
    /// Tiers of the settings that cannot run here, with the reason.
    fn skipped_tiers(&self) -> &[String];
    /// The hysteresis memory of earlier compactions.
    fn memory(&self) -> &Memory;
    /// The tiers, in the order they run.
    fn tiers(&self) -> &[Box<dyn Strategy>];
    /// The counting basis of `model` (the request body's `model`).
    fn model_tokens(&self, model: Option<&str>) -> ModelTokens;
    /// The cached counter of `tokenizer`'s vocabulary.
    fn counter_of(&self, tokenizer: Tokenizer) -> &dyn TokenCounter;
    /// The recall store the originals of taken outputs go to; `None` when recall is off.
    fn recall_store(&self) -> Option<&crate::recall::RecallStore>;
    /// The model table entry of `model` (the request body's `model`); `None` when no entry
    /// names it.
    fn model_entry(&self, model: Option<&str>) -> Option<&crate::models::ModelEntry>;
}

/// What one compaction knows of its input, computed once.
struct Run<'a> {
    input: &'a Conversation,
    /// The input's layout, computed when first needed (a continuation that stays under the
    /// trigger needs none).
    layout: OnceLock<Layout>,
    /// Counter tokens of each input message, counted once when first needed (a continuation
    /// counts only its new messages).
    tokens: OnceLock<MessageTokens>,
    format: Format,
    options: ValidateOptions,
    counter: &'a dyn TokenCounter,
    basis: ModelTokens,
    targets: Targets,
    /// What the request asks (a turn, or the client's own summary request).
    request: RequestKind,
    /// Where the originals named by recall ids go (`None`: recall is off).
    recall: Option<&'a crate::recall::RecallStore>,
    /// Which user text blocks are the client's context (`[carry]`).
    context: Arc<crate::guard::ContextRules>,
}

impl Run<'_> {
    /// The input's layout ([`Layout::of`], once).
    fn layout(&self) -> &Layout {
        self.layout.get_or_init(|| self.layout_of(self.input))
    }

    /// The layout of a conversation of this run (an output a next tier works on).
    fn layout_of(&self, conversation: &Conversation) -> Layout {
        Layout::with_context(conversation, self.format, self.context.clone())
    }

    /// Counter tokens of each input message ([`MessageTokens::of`], once).
    fn tokens(&self) -> &MessageTokens {
        self.tokens
            .get_or_init(|| MessageTokens::of(self.input, self.counter))
    }

    /// The guard's verdict on an output: provider rules, what must survive, the envelope.
    fn verify(
        &self,
        output: &Conversation,
        records: Option<&[FailureRecord]>,
        report: &mut Report,
    ) -> Vec<Violation> {
        let t0 = Instant::now();
        let mut violations = guard::validate(output, self.format, self.options);
        violations.extend(guard::check_compaction_with(
            self.input,
            self.layout(),
            output,
            self.format,
            records,
        ));
        violations.extend(guard::check_envelope(self.input, output, self.format));
        report.timings.guard_ms += ms(t0);
        violations
    }
}

/// The best output so far and why it is degraded, if it is.
struct Best {
    conversation: Option<Conversation>,
    /// Layout of `conversation` (what the next tier is given); a tier's output gets it only
    /// when a next tier runs on it (`None` until then).
    layout: Option<Layout>,
    /// Counter tokens of each message of `conversation` when a tier built it (a tier given a
    /// conversation without them counts it); `None` before.
    per: Option<MessageTokens>,
    tokens: usize,
    degraded: Option<String>,
    /// Typed failure records of `conversation` (the input has none of its own; a remembered
    /// output brings its own from the memory).
    records: Vec<FailureRecord>,
    /// When `conversation` is a tier's output taken without the guard's verdict yet (see
    /// [`Pending`]): that tier and the best output before it.
    pending: Option<Pending>,
}

/// [`Compactor::compact_with`](crate::Compactor::compact_with): the steps above.
pub(crate) async fn compact<'a>(
    compactor: &dyn Host,
    input: &'a Conversation,
    format: Format,
    budget: Option<usize>,
    instructions: Option<&str>,
) -> Result<Compacted<'a>, CompactError> {
    let shared = compact_shared(compactor, input, format, budget, instructions, None).await?;
    Ok(shared.into_compacted(input))
}

/// The steps above, the output shared with the memory. `given`: the input's prefix hashes
/// when the caller has them (the proxy extends last turn's, [`PrefixHashes::extended`]);
/// used when made under this budget's tag and covering every input message, else the input
/// is hashed here.
pub(crate) async fn compact_shared(
    compactor: &dyn Host,
    input: &Conversation,
    format: Format,
    budget: Option<usize>,
    instructions: Option<&str>,
    given: Option<&PrefixHashes>,
) -> Result<SharedCompacted, CompactError> {
    let started = Instant::now();
    let model = input.extra.get("model").and_then(|m| m.as_str());
    let basis = compactor.model_tokens(model);
    let entry = compactor.model_entry(model);
    // The model's per-call framing (`[tokens.models] tool_call`) joins every tool_use block's
    // count; with none configured this is the cached counter as it is.
    let framed = basis.framed(compactor.counter_of(basis.tokenizer));
    let counter: &dyn TokenCounter = &framed;
    let context = Arc::new(compactor.settings().carry.clone());
    // The client's own summary request is compacted to the window, not the budget (a budget
    // the caller names is a budget too: it does not apply).
    let request = if context.is_summary_request(input) {
        RequestKind::ClientSummary
    } else {
        RequestKind::Turn
    };
    let budget_settings = match request {
        RequestKind::ClientSummary => Cow::Owned(compactor.settings().budget.to_window()),
        RequestKind::Turn => Cow::Borrowed(&compactor.settings().budget),
    };
    let explicit = budget.filter(|_| request == RequestKind::Turn);
    let targets = Targets::of(&budget_settings, &basis, explicit, entry);
    let remember = compactor.settings().policy.remember;
    // Hysteresis: the remembered compaction of the longest remembered prefix, looked up first
    // so that the input's validation and count start from that prefix's junction.
    let tag = targets.model.limit as u64;
    let hashes: Option<Cow<'_, PrefixHashes>> = remember.then(|| match given {
        Some(h) if h.tag() == tag && h.messages() == input.messages.len() => Cow::Borrowed(h),
        _ => Cow::Owned(PrefixHashes::of(input, tag)),
    });
    let hashes = hashes.as_deref();
    // Taken out of the memory: every way out below puts it back or remembers it again.
    let mut recalled = hashes.and_then(|h| policy::recall(compactor.memory(), h, input));
    let known = recalled.as_ref().and_then(|r| {
        r.continuation
            .clone()
            .filter(|c| c.basis == basis && c.input.messages() == r.len)
            .map(|c| (r.len, c))
    });
    let input_options = ValidateOptions {
        allow_open_tail: true,
    };
    let (mut invalid, input_junction) = match known
        .as_ref()
        .and_then(|(_, c)| guard::validate_continuation(input, &c.input, format, input_options))
    {
        Some((violations, junction)) => (violations, Some(junction)),
        None => (guard::validate(input, format, input_options), None),
    };
    // A fault every output repairs (surplus cache_control) does not refuse the input.
    invalid.retain(|v| !v.kind.is_repairable());
    // Nor does an unusable image outside the newest exchange: compaction works on a copy
    // with it replaced (one in the newest exchange stays in `invalid` and refuses it).
    let repaired = repair::repair_input(input, format, context.clone(), &mut invalid);
    if !invalid.is_empty() {
        if let (Some(r), Some(h)) = (recalled, hashes) {
            r.put_back(compactor.memory(), h);
        }
        return Err(CompactError::InvalidInput(invalid));
    }
    // The input as compaction sees it from here on (the original, or its repaired copy):
    // the remembered prefix is continued by its new messages, and the tiers work on it.
    let (repaired, layout, repairs) = match repaired {
        None => (None, OnceLock::new(), Vec::new()),
        Some(r) => (Some(r.conversation), OnceLock::from(r.layout), r.repairs),
    };
    let work: &Conversation = repaired.as_ref().unwrap_or(input);
    if let Some(r) = recalled.as_mut()
        && repairs.iter().any(|x| x.message >= r.len)
    {
        r.extend_from(work);
    }
    // Whether the input ends inside a tool loop: from the junction on when continuing (no
    // reference beyond call / result pairs, so the last exchange is found there), else from
    // the layout.
    let open_tail = match (&known, &input_junction) {
        (Some((_, c)), Some(_)) => c.input.last_exchange(work).is_some_and(|e| e.open),
        _ => layout
            .get_or_init(|| Layout::with_context(work, format, context.clone()))
            .ends_with_open_call(),
    };
    let mut run = Run {
        context: context.clone(),
        input: work,
        options: ValidateOptions {
            allow_open_tail: open_tail,
        },
        layout,
        tokens: OnceLock::new(),
        format,
        counter,
        basis,
        targets,
        request,
        recall: compactor.recall_store(),
    };
    let t0 = Instant::now();
    // A continuation: the remembered prefix's count plus the new messages' (the count of a
    // request is the sum of its system prompt's, its tools' and its messages' counts).
    let tokens_before = match (&known, &input_junction) {
        (Some((len, c)), Some(_)) => {
            c.input_tokens
                + work.messages[*len..]
                    .iter()
                    .map(|m| counter.count_message(m))
                    .sum::<usize>()
        }
        // The count of a request is its system prompt's, its tools' and its messages' (each
        // message counted once, kept for the tiers).
        _ => {
            counter.count_system(input.system.as_ref())
                + counter.count_tools(input.tools())
                + run.tokens().tail(0)
        }
    };
    let prices = entry.map(crate::models::ModelEntry::prices);
    // The client's previous body, when a remembered compaction knows it (counted tokens).
    let mut known_input = known.as_ref().map(|(_, c)| c.input_tokens);
    // Counted tokens of the previous forwarded body, and its messages, when continued.
    let (mut sent, mut prefix_messages) = (0, 0);
    let mut report = first_report(compactor, &run, tokens_before);
    report.timings.count_ms = ms(t0);
    report.repairs = repairs;
    if request == RequestKind::ClientSummary {
        report.notes.push(format!(
            "the client's own summary request: compacted only as far as the context window \
             ({} tokens) requires, not to the budget",
            targets.model.limit
        ));
    }
    if targets.untouched(tokens_before) {
        let what = match repaired {
            None => "nothing to do",
            Some(_) => "only the repairs",
        };
        report.notes.push(format!(
            "under the trigger ({} <= {} tokens): {what}",
            report.tokens_before, targets.model_trigger
        ));
        if let (Some(r), Some(h)) = (recalled, hashes) {
            r.put_back(compactor.memory(), h);
        }
        report.cost = Some(output::cost(&run, prices, tokens_before, None, None));
        // The repaired copy is the output: what the provider would refuse must not go out.
        let conversation = repaired_output(run.format, input, repaired, &mut report)?;
        report.timings.total_ms = ms(started);
        return Ok(SharedCompacted {
            conversation,
            report,
            written: None,
        });
    }
    report
        .notes
        .extend(compactor.skipped_tiers().iter().cloned());
    report.skipped = compactor.skipped_tiers().to_vec();
    let mut best = Best {
        conversation: None,
        layout: None,
        per: None,
        tokens: tokens_before,
        degraded: None,
        records: Vec::new(),
        pending: None,
    };
    // The output junction of a continuation that was taken.
    let mut continued: Option<Junction> = None;
    // The remembered compaction a taken continuation continues.
    let mut predecessor: Option<Predecessor> = None;
    // The remembered output's written items, for a continuation taken.
    let mut written = None;
    if let Some(mut recalled) = recalled {
        let items = recalled.written.take();
        match continue_from(
            &run,
            recalled,
            known.as_ref().map(|(_, c)| c.as_ref()),
            &mut best,
            &mut continued,
            &mut report,
        ) {
            Ok(c) => {
                // The client's previous body and the previous forwarded one: this turn's
                // input and output less the new messages.
                known_input = Some(tokens_before.saturating_sub(c.new_tokens));
                sent = best.tokens.saturating_sub(c.new_tokens);
                prefix_messages = c.output_messages;
                predecessor = Some(c.predecessor);
                // Bytes written for messages whose breakpoint moved are stale.
                written = items.filter(|_| !c.rewritten);
            }
            Err(recalled) => {
                if let Some(h) = hashes {
                    (*recalled).put_back(compactor.memory(), h);
                }
            }
        }
    }
    // The cost policy (see [`policy`]): the cycle of the remembered compaction, and whether
    // its prefix has left the provider's cache (the session idle past the cache's lifetime).
    let cycle = known.as_ref().map(|(_, c)| c.cycle);
    let ttl = compactor.settings().policy.cache_ttl_secs;
    let cold = cycle.is_some_and(|c| c.sent.elapsed().as_secs_f64() > ttl);
    if predecessor.is_some() {
        // New blocks over the caps are capped as they arrive (the prefix stays as it was),
        // whether the continuation then goes out as it is or is compacted again: a block
        // first sent whole would be written to the cache whole, and the turn that caps it
        // later rewrites the prefix from there.
        if continuation::cap_on_arrival(compactor, &run, &mut best, prefix_messages, &mut report)
            .is_some()
        {
            continued = None;
        }
    }
    if predecessor.is_some()
        && targets.continues(best.tokens, cold)
        && let Some(conversation) = best.conversation.take()
    {
        // Still within the budget after the new messages (under the trigger once the cache is
        // cold): the remembered prefix is the output, each turn appends to it.
        let conversation = Arc::new(conversation);
        if let Some(hashes) = hashes {
            let input = input_junction.unwrap_or_else(|| Junction::of(input, format));
            let output = continued.unwrap_or_else(|| Junction::of(&conversation, format));
            remember_output(
                compactor,
                hashes,
                &run,
                tokens_before,
                &best,
                &conversation,
                (input, output),
                predecessor,
            );
        }
        finish(
            &run,
            &mut report,
            true,
            best.tokens,
            best.degraded.is_some(),
        );
        // The previous forwarded body is this one's prefix.
        report.cost = Some(output::cost(
            &run,
            prices,
            tokens_before,
            known_input,
            Some((best.tokens, sent)),
        ));
        report.messages_after = conversation.messages.len();
        report.timings.total_ms = ms(started);
        return Ok(SharedCompacted {
            conversation: Some(conversation),
            report,
            written: written.take(),
        });
    }
    // Continued but over the trigger: the tiers compact the continuation afresh and what
    // they make is remembered for the whole input; the compaction it continued (taken out of
    // the memory) is not put back: the history has grown past it and its prefix is no longer
    // what is sent (keeping it held a stale whole output per crossing, docs/service.md).
    let recompacting = predecessor.take().is_some();
    if recompacting && let Some(c) = best.conversation.as_mut() {
        // The breakpoints the remembered prefix carries were the client's of earlier turns;
        // the re-compaction rewrites that prefix, so they mark nothing cached any more.
        guard::cache::remove_before(c, prefix_messages);
    }
    if let Some(c) = &best.conversation
        && best.layout.is_none()
    {
        // Continued but over the budget: the tiers work on the continuation's layout.
        best.layout = Some(run.layout_of(c));
    }
    if let Some(c) = cycle.filter(|_| recompacting) {
        // A re-compaction goes deep enough to pay back its cache write.
        let fixed =
            counter.count_system(input.system.as_ref()) + counter.count_tools(input.tools());
        let prices = entry.map_or(crate::models::Prices::RELATIVE, |e| e.prices());
        let growth = c.growth(best.tokens);
        let deep = targets.recompaction(best.tokens, fixed, growth, &prices, cold);
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
            report.notes.push(format!(
                "the cached prefix is cold (idle over {ttl} s): compacted at the trigger"
            ));
        }
    }
    let tiers = compactor.tiers();
    run_tiers(&run, tiers, instructions, true, &mut best, &mut report).await;
    if let Some(refused) = settle_pending(&run, &mut best, &mut report) {
        // The tiers after a refused output ran on it: they run again on the output before it
        // (judged at once). `report.tiers` holds one run per tier so far, in tier order.
        let after = tiers.get(refused + 1..).unwrap_or_default();
        run_tiers(&run, after, instructions, false, &mut best, &mut report).await;
    }
    if let Some(why) = output::lossy_without_payback(&run, &best, &report, tokens_before) {
        // Still over the budget, and the words or rounds it dropped bought too little: the
        // request goes as it is (status over_budget, the reason in the notes).
        report.notes.push(why);
        best.conversation = None;
        best.tokens = tokens_before;
    }
    if format == Format::Anthropic
        && let Some(c) = best.conversation.as_mut()
        && let Some(site) = guard::cache::mark_kept_prefix(input, c)
    {
        // The prefix a re-compaction keeps is read from the cache, not written again.
        report.cache_breakpoint = Some(site.to_string());
    }
    finish(
        &run,
        &mut report,
        best.conversation.is_some(),
        best.tokens,
        best.degraded.is_some(),
    );
    if best.conversation.is_some() && !run.targets.reached(best.tokens) {
        report.notes.push(format!(
            "target not reached: {} > {} tokens",
            run.basis.to_model(best.tokens),
            report.target
        ));
    }
    // Compacted afresh: the tools and system prompt stay cached, the messages are written.
    let fixed = counter.count_system(input.system.as_ref()) + counter.count_tools(input.tools());
    let after = best.conversation.as_ref().map(|_| (best.tokens, fixed));
    report.cost = Some(output::cost(
        &run,
        prices,
        tokens_before,
        known_input,
        after,
    ));
    report.timings.total_ms = ms(started);
    let conversation = match best.conversation.take() {
        Some(c) => {
            let c = Arc::new(c);
            if let Some(hashes) = hashes {
                // Remembered under the input's own prefix (the next turn resends it as it
                // came); its junction keeps the input's bad images, so a continuation repairs
                // them again.
                // The output junction of the continuation when no tier replaced it.
                let output = continued
                    .filter(|_| report.tiers.iter().all(|t| !t.accepted))
                    .unwrap_or_else(|| Junction::of(&c, format));
                let input = input_junction
                    .unwrap_or_else(|| Junction::of_laid_out(input, format, run.layout()));
                remember_output(
                    compactor,
                    hashes,
                    &run,
                    tokens_before,
                    &best,
                    &c,
                    (input, output),
                    None,
                );
            }
            Some(c)
        }
        // No tier's output taken: the repaired copy, if there is one, is the output.
        None => repaired_output(run.format, input, repaired, &mut report)?,
    };
    report.messages_after = conversation
        .as_ref()
        .map_or(input.messages.len(), |c| c.messages.len());
    Ok(SharedCompacted {
        conversation,
        report,
        written: None,
    })
}

/// The repaired copy of the input as the output, once the guard accepts it (a refusal, which
/// no repair plan made from the input's own violations should meet, refuses the input rather
/// than send what the provider refuses); `None` without repairs (the input is the output). A
/// report that says `unchanged` says `repaired` then.
fn repaired_output(
    format: Format,
    input: &Conversation,
    repaired: Option<Conversation>,
    report: &mut Report,
) -> Result<Option<Arc<Conversation>>, CompactError> {
    let Some(repaired) = repaired else {
        return Ok(None);
    };
    let t0 = Instant::now();
    let violations = repair::verify_repaired(input, &repaired, format);
    report.timings.guard_ms += ms(t0);
    if !violations.is_empty() {
        return Err(CompactError::InvalidInput(violations));
    }
    if report.status == Status::Unchanged {
        report.status = Status::Repaired;
    }
    Ok(Some(Arc::new(repaired)))
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}
