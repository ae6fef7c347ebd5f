//! The pipeline of one compaction, each step once:
//!
//! ```text
//! input -> guard::validate (the input's own faults refuse it)
//!       -> repair: an unusable image outside the newest exchange -> a text placeholder
//!          (guard::plan_repairs + guard::apply); the repaired copy is compacted instead,
//!          and is the output even under the trigger
//!       -> guard::Layout::of (once) and count (cached)
//!       -> policy: under the trigger? -> unchanged (borrowed, no copy)
//!       -> policy: remembered prefix?  -> continue from it (built and verified by the guard,
//!                                         guard::continue_prefix, from the prefix's junction:
//!                                         only the new messages are validated, checked and
//!                                         counted)
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
//! Here: the run of one compaction (`compact_shared`: validate the input, `compact_run`:
//! count, continue or lay out, run the tiers, remember). Beside it: what a compaction returns
//! and its report's figures (`output`), the tier loop and what follows it (`tiers`),
//! continuing from a remembered compaction and remembering the output (`continuation`), and
//! repairing the input's unusable images (`repair`).

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
use continuation::{
    Next, continue_or_lay_out, remember_compacted, remember_output, send_continuation,
};
use output::first_report;
pub use output::{CompactError, Compacted, SharedCompacted};
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tiers::{Pending, compact_afresh};

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
///
/// The steps: validate the input ([`check_input`]), then [`compact_run`]: continue a
/// remembered compaction or lay the input out ([`continue_or_lay_out`]), run the tiers
/// ([`compact_afresh`]) and remember the output ([`remember_compacted`]).
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
    let targets = targets_of(compactor.settings(), &basis, request, budget, entry);
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
    let checked = check_input(
        compactor,
        (input, format),
        &context,
        known.as_ref(),
        &mut recalled,
        hashes,
    )?;
    let CheckedInput {
        repaired,
        layout,
        repairs,
        junction: input_junction,
    } = checked;
    // The input as compaction sees it from here on (the original, or its repaired copy):
    // the remembered prefix is continued by its new messages, and the tiers work on it.
    let work: &Conversation = repaired.as_ref().unwrap_or(input);
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
    let begun = Begun {
        compactor,
        input,
        hashes,
        input_junction,
        entry,
        started,
        repairs,
        repaired: repaired.is_some(),
    };
    let (mut report, under_trigger) =
        match compact_run(begun, &mut run, (recalled, known), instructions).await {
            Ending::Done(done) => return Ok(done),
            Ending::Unchanged {
                report,
                under_trigger,
            } => (report, under_trigger),
        };
    // The repaired copy is the output: what the provider would refuse must not go out.
    let conversation = repaired_output(format, input, repaired, &mut report)?;
    if under_trigger {
        report.timings.total_ms = ms(started);
    } else {
        report.messages_after = conversation
            .as_ref()
            .map_or(input.messages.len(), |c| c.messages.len());
    }
    Ok(SharedCompacted {
        conversation,
        report,
        written: None,
    })
}

/// The targets of a compaction: of the budget settings (of the context window for the client's
/// own summary request, where a budget the caller names does not apply either).
fn targets_of(
    settings: &Settings,
    basis: &ModelTokens,
    request: RequestKind,
    budget: Option<usize>,
    entry: Option<&crate::models::ModelEntry>,
) -> Targets {
    let budget_settings = match request {
        RequestKind::ClientSummary => Cow::Owned(settings.budget.to_window()),
        RequestKind::Turn => Cow::Borrowed(&settings.budget),
    };
    let explicit = budget.filter(|_| request == RequestKind::Turn);
    Targets::of(&budget_settings, basis, explicit, entry)
}

/// What the run of a checked input starts from besides the [`Run`]: the pipeline's owner, the
/// input as it came, its prefix hashes when remembering, its junction when continuing, the
/// model's table entry, when the compaction started, and the images repaired.
struct Begun<'s> {
    compactor: &'s dyn Host,
    input: &'s Conversation,
    hashes: Option<&'s PrefixHashes>,
    input_junction: Option<Junction>,
    entry: Option<&'s crate::models::ModelEntry>,
    started: Instant,
    repairs: Vec<guard::ImageRepair>,
    /// Whether the run's input is a repaired copy of the input.
    repaired: bool,
}

/// How a run ends: with its output, or with none of its own (the input, or its repaired copy,
/// is the output; `under_trigger`: nothing was tried).
enum Ending {
    Done(SharedCompacted),
    Unchanged { report: Report, under_trigger: bool },
}

/// The run of a checked input: count it, stop under the trigger, continue a remembered
/// compaction ([`continue_or_lay_out`]) and send it as it is when it stays within the budget,
/// else run the tiers ([`compact_afresh`]) and remember their output.
async fn compact_run(
    begun: Begun<'_>,
    run: &mut Run<'_>,
    (recalled, known): (
        Option<policy::Recalled>,
        Option<(usize, Arc<crate::memory::Continuation>)>,
    ),
    instructions: Option<&str>,
) -> Ending {
    let compactor = begun.compactor;
    let t0 = Instant::now();
    let tokens_before = count_input(
        begun.input,
        run,
        known.as_ref().map(|(len, c)| (*len, c.input_tokens)),
        begun.input_junction.is_some(),
    );
    let mut report = first_report(compactor, run, tokens_before);
    report.timings.count_ms = ms(t0);
    report.repairs = begun.repairs;
    if run.request == RequestKind::ClientSummary {
        report.notes.push(format!(
            "the client's own summary request: compacted only as far as the context window \
             ({} tokens) requires, not to the budget",
            run.targets.model.limit
        ));
    }
    let shared = Shared {
        compactor,
        input: begun.input,
        hashes: begun.hashes,
        input_junction: begun.input_junction,
        tokens_before,
        entry: begun.entry,
        prices: begun.entry.map(crate::models::ModelEntry::prices),
        started: begun.started,
    };
    if run.targets.untouched(tokens_before) {
        let what = if begun.repaired {
            "only the repairs"
        } else {
            "nothing to do"
        };
        report.notes.push(format!(
            "under the trigger ({} <= {} tokens): {what}",
            report.tokens_before, run.targets.model_trigger
        ));
        if let (Some(r), Some(h)) = (recalled, shared.hashes) {
            r.put_back(compactor.memory(), h);
        }
        report.cost = Some(output::cost(run, shared.prices, tokens_before, None, None));
        return Ending::Unchanged {
            report,
            under_trigger: true,
        };
    }
    report
        .notes
        .extend(compactor.skipped_tiers().iter().cloned());
    report.skipped = compactor.skipped_tiers().to_vec();
    let known = known.as_ref().map(|(_, c)| c.as_ref());
    let (mut best, continuing) =
        match continue_or_lay_out(&shared, run, recalled, known, &mut report) {
            Next::Send(conversation, best, continuing) => {
                return Ending::Done(send_continuation(
                    &shared,
                    run,
                    &best,
                    conversation,
                    continuing,
                    report,
                ));
            }
            Next::Compact(best, continuing) => (best, continuing),
        };
    compact_afresh(
        &shared,
        run,
        instructions,
        &mut best,
        continuing.known_input,
        &mut report,
    )
    .await;
    let Some(c) = best.conversation.take() else {
        return Ending::Unchanged {
            report,
            under_trigger: false,
        };
    };
    let c = remember_compacted(&shared, run, &best, c, continuing.continued, &report);
    report.messages_after = c.messages.len();
    Ending::Done(SharedCompacted {
        conversation: Some(c),
        report,
        written: None,
    })
}

/// Counted tokens of the run's input: the remembered prefix's count (`known`: its messages and
/// count, when continuing from its junction) plus the new messages', else the system prompt's,
/// the tools' and every message's (each message counted once, kept for the tiers).
fn count_input(
    input: &Conversation,
    run: &Run<'_>,
    known: Option<(usize, usize)>,
    from_junction: bool,
) -> usize {
    let counter = run.counter;
    match known {
        Some((len, tokens)) if from_junction => {
            tokens
                + run.input.messages[len..]
                    .iter()
                    .map(|m| counter.count_message(m))
                    .sum::<usize>()
        }
        _ => {
            counter.count_system(input.system.as_ref())
                + counter.count_tools(input.tools())
                + run.tokens().tail(0)
        }
    }
}

/// What the steps after the input's check share: the pipeline's owner, the input (as it
/// came), its prefix hashes when remembering, its junction when continuing, its count, the
/// model's prices and when the compaction started.
struct Shared<'s> {
    compactor: &'s dyn Host,
    input: &'s Conversation,
    hashes: Option<&'s PrefixHashes>,
    input_junction: Option<Junction>,
    tokens_before: usize,
    entry: Option<&'s crate::models::ModelEntry>,
    prices: Option<crate::models::Prices>,
    started: Instant,
}

impl Shared<'_> {
    /// Remembers `output` (the best output) as the compaction of the input when remembering
    /// ([`remember_output`]), with the input's junction (the one continued from, else
    /// `input_junction`'s) and the output's, and the compaction it continues.
    fn remember(
        &self,
        run: &Run<'_>,
        best: &Best,
        output: &Arc<Conversation>,
        (input_junction, output_junction): (impl FnOnce() -> Junction, impl FnOnce() -> Junction),
        predecessor: Option<Predecessor>,
    ) {
        let Some(hashes) = self.hashes else {
            return;
        };
        let input = self.input_junction.clone().unwrap_or_else(input_junction);
        remember_output(
            self.compactor,
            hashes,
            run,
            self.tokens_before,
            best,
            output,
            (input, output_junction()),
            predecessor,
        );
    }
}

/// The input as checked: its repaired copy and that copy's layout (when an image was
/// repaired), the repairs, and the junction its validation started from (continuing).
struct CheckedInput {
    repaired: Option<Conversation>,
    layout: OnceLock<Layout>,
    repairs: Vec<guard::ImageRepair>,
    junction: Option<Junction>,
}

/// Validates the input (from the remembered prefix's junction when `known`), repairs what
/// compaction repairs (surplus cache_control, an unusable image outside the newest exchange)
/// and refuses it for any other fault, putting the remembered compaction back then.
fn check_input(
    compactor: &dyn Host,
    (input, format): (&Conversation, Format),
    context: &Arc<crate::guard::ContextRules>,
    known: Option<&(usize, Arc<crate::memory::Continuation>)>,
    recalled: &mut Option<policy::Recalled>,
    hashes: Option<&PrefixHashes>,
) -> Result<CheckedInput, CompactError> {
    let input_options = ValidateOptions {
        allow_open_tail: true,
    };
    let (mut invalid, junction) = match known
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
        if let (Some(r), Some(h)) = (recalled.take(), hashes) {
            r.put_back(compactor.memory(), h);
        }
        return Err(CompactError::InvalidInput(invalid));
    }
    let (repaired, layout, repairs) = match repaired {
        None => (None, OnceLock::new(), Vec::new()),
        Some(r) => (Some(r.conversation), OnceLock::from(r.layout), r.repairs),
    };
    Ok(CheckedInput {
        repaired,
        layout,
        repairs,
        junction,
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
