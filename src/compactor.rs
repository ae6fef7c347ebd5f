//! [`Compactor`]: a configured pipeline (counter, tiers, memory, calibration) as one value an
//! agent loop keeps across turns. What one compaction does, step by step, is
//! [`crate::pipeline`]'s; when to compact and how far is [`crate::policy`]'s; which strategy a
//! tier name means is the [`Registry`]'s.

use crate::config::{ConfigError, Settings};
use crate::conversation::Conversation;
use crate::format::Format;
use crate::memory::Memory;
use crate::pipeline::Host;
pub use crate::pipeline::{CompactError, Compacted, SharedCompacted};
use crate::registry::{Built, Registry};
use crate::strategy::{Budget, Strategy};
use crate::tokens::{Calibration, ModelTokens, Observation, TokenCounter, Tokenizer};
use std::sync::Arc;

mod count;
mod recall;
use recall::recall_of;

/// A configured pipeline. Cheap to share (`Arc` inside); reuse it across turns so the token
/// cache stays warm.
pub struct Compactor {
    settings: Settings,
    counter: Arc<dyn TokenCounter>,
    tiers: Vec<Box<dyn Strategy>>,
    skipped: Vec<String>,
    memory: Memory,
    /// The vocabulary of `counter`.
    tokenizer: Tokenizer,
    /// A counter of the other vocabulary, built when a model needs it.
    other_counter: std::sync::OnceLock<Arc<dyn TokenCounter>>,
    calibration: Calibration,
    /// The recall store (`None`: `[recall] enabled = false`).
    recall: Option<crate::recall::RecallStore>,
}

impl Compactor {
    /// Builds the pipeline the settings describe: the tokenizer, and one strategy per tier.
    /// `summary` needs an LLM (`[llm]`); without one it is skipped and the report says so.
    ///
    /// # Errors
    /// [`ConfigError`] for a tier that cannot be built.
    pub fn from_config(settings: Settings) -> Result<Compactor, ConfigError> {
        Compactor::from_registry(settings, &Registry::builtin())
    }

    /// Builds the pipeline the settings describe with the strategies of `registry`: each name
    /// of `[policy] tiers` is looked up there, so a tier list can name a user's own
    /// [`Strategy`] registered beside the built-in ones.
    ///
    /// # Errors
    /// [`ConfigError`] for a name nobody registered or a tier that cannot be built.
    pub fn from_registry(
        settings: Settings,
        registry: &Registry,
    ) -> Result<Compactor, ConfigError> {
        let counter = crate::tokens::counter_for(settings.tokens.tokenizer);
        let mut tiers: Vec<Box<dyn Strategy>> = Vec::new();
        let mut skipped = Vec::new();
        for name in &settings.policy.tiers {
            match registry.build(name, &settings)? {
                Built::Ready(s) => tiers.push(s),
                Built::Skipped(why) => skipped.push(why),
            }
        }
        let secret = settings
            .recall
            .secret()
            .map_err(|(key, message)| ConfigError::Invalid {
                key: key.into(),
                message,
            })?;
        let recall = recall_of(&settings.recall, secret.as_deref());
        Ok(Compactor {
            tokenizer: settings.tokens.tokenizer,
            other_counter: std::sync::OnceLock::new(),
            calibration: calibration_of(&settings),
            settings,
            counter,
            tiers,
            skipped,
            memory: Memory::default(),
            recall,
        })
    }

    /// A pipeline with explicit parts (tests, custom strategies).
    pub fn with_parts(
        settings: Settings,
        counter: Arc<dyn TokenCounter>,
        tiers: Vec<Box<dyn Strategy>>,
    ) -> Compactor {
        // A secret variable that is not set leaves the process's own key (this constructor
        // cannot fail; `from_config` refuses it).
        let secret = settings.recall.secret().ok().flatten();
        let recall = recall_of(&settings.recall, secret.as_deref());
        Compactor {
            tokenizer: settings.tokens.tokenizer,
            other_counter: std::sync::OnceLock::new(),
            calibration: calibration_of(&settings),
            settings,
            counter,
            tiers,
            skipped: Vec::new(),
            memory: Memory::default(),
            recall,
        }
    }

    /// This pipeline counting with `counter`, which must count the configured `[tokens]
    /// tokenizer (e.g. a [`CachedCounter`](crate::tokens::CachedCounter) with a byte bound the
    /// service shows in its metrics).
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Compactor {
        self.counter = counter;
        self
    }

    /// This pipeline counting a model of the other vocabulary (not the configured `[tokens]
    /// tokenizer`) with `counter`, which must count that vocabulary (e.g. the service's
    /// [`CachedCounter`](crate::tokens::CachedCounter) bounded by `server.token_cache_bytes`);
    /// without it such a model gets a cache of the default entry bound on first use.
    pub fn with_other_counter(self, counter: Arc<dyn TokenCounter>) -> Compactor {
        // A fresh pipeline has not built one yet; if it had, the given one is not used.
        let _ = self.other_counter.set(counter);
        self
    }

    /// This pipeline with its compaction memory bounded to `max_bytes` (estimated bytes of
    /// remembered outputs; see [`Memory`]). Anything remembered so far is dropped.
    pub fn with_memory_bytes(mut self, max_bytes: u64) -> Compactor {
        self.memory = Memory::with_max_bytes(max_bytes);
        self
    }

    /// This pipeline keeping recallable originals in `store` (the service shares one store
    /// between its API and its proxy); ignored when `[recall] enabled = false`.
    pub fn with_recall_store(mut self, store: crate::recall::RecallStore) -> Compactor {
        if self.recall.is_some() {
            self.recall = Some(store);
        }
        self
    }

    /// The recall store, when recall is on (its counts feed the service's `/metrics`).
    pub fn recall_store(&self) -> Option<&crate::recall::RecallStore> {
        self.recall.as_ref()
    }

    /// The compaction memory (its size and bound feed the service's `/metrics`).
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The token counter (cached).
    pub fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    /// Tiers of the settings that cannot run here, with the reason (`summary tier skipped: no
    /// [llm] configured`).
    pub fn skipped_tiers(&self) -> &[String] {
        &self.skipped
    }

    /// The counting basis of `model` (the request body's `model`; `None`: `[tokens] model`):
    /// vocabulary, ratio and overhead in force, learned ratio included.
    pub fn model_tokens(&self, model: Option<&str>) -> ModelTokens {
        self.calibration.resolve(self.calibration.model_of(model))
    }

    /// Feeds the provider's count of one request back: `counted` is the counter's count of the
    /// request sent ([`Report::counted_after`]), `actual` the input tokens of the answer's
    /// `usage` (Anthropic: `input_tokens + cache_read_input_tokens +
    /// cache_creation_input_tokens`; OpenAI: `prompt_tokens` / `input_tokens`). The model's
    /// running ratio moves (bounded, outliers ignored; see
    /// [`Calibration::observe`](crate::tokens::Calibration::observe)) and the next
    /// compactions of that model use it. `None` when nothing was learned (an exact model, no
    /// rule, learning off).
    pub fn observe_usage(&self, model: &str, counted: usize, actual: u64) -> Option<Observation> {
        self.calibration.observe(model, counted, actual)
    }

    /// The ratios learned so far: `(model, ratio, accepted samples, ignored samples)`.
    pub fn learned_ratios(&self) -> Vec<(String, f64, u64, u64)> {
        self.calibration.learned()
    }

    /// The estimated bytes of the learned ratios and their bound (`[tokens] learned_bytes`).
    pub fn learned_ratio_bytes(&self) -> (u64, u64) {
        self.calibration.learned_bytes()
    }

    /// The cached counter of `tokenizer`'s vocabulary: the configured one, or one of the
    /// other vocabulary (built on first use). Counts without per-call framing.
    pub fn counter_of(&self, tokenizer: Tokenizer) -> &dyn TokenCounter {
        if tokenizer == self.tokenizer {
            return self.counter.as_ref();
        }
        self.other_counter
            .get_or_init(|| crate::tokens::counter_for(tokenizer))
            .as_ref()
    }

    /// The budget in model tokens: `explicit` tokens, else the configured one.
    pub fn budget(&self, explicit: Option<usize>) -> Budget {
        crate::policy::model_budget(&self.settings.budget, explicit)
    }

    /// Compacts `conversation` (of wire format `format`) to the budget (`budget` tokens, or the
    /// configured one). Never mutates the input; returns it borrowed when it is under the
    /// trigger or nothing valid and smaller could be made, unless it holds an unusable inline
    /// image outside the newest exchange: then a copy with that image replaced by a text
    /// placeholder ([`crate::guard::plan_repairs`]; the report's `repairs`, status
    /// [`crate::Status::Repaired`] when that is all).
    ///
    /// # Errors
    /// [`CompactError::InvalidInput`] when the input itself breaks the provider's rules (an
    /// unusable image in the newest exchange included).
    pub async fn compact<'a>(
        &self,
        conversation: &'a Conversation,
        format: Format,
        budget: Option<usize>,
    ) -> Result<Compacted<'a>, CompactError> {
        self.compact_with(conversation, format, budget, None).await
    }

    /// [`Compactor::compact`] with extra instructions for a model summary. The steps are
    /// [`crate::pipeline`]'s.
    ///
    /// # Errors
    /// As [`Compactor::compact`].
    pub async fn compact_with<'a>(
        &self,
        input: &'a Conversation,
        format: Format,
        budget: Option<usize>,
        instructions: Option<&str>,
    ) -> Result<Compacted<'a>, CompactError> {
        self.keyed(crate::pipeline::compact(
            self,
            input,
            format,
            budget,
            instructions,
        ))
        .await
    }

    /// [`Compactor::compact_with`] with the output shared with the compaction memory rather
    /// than copied out of it ([`SharedCompacted`]: a caller that writes the output and lets it
    /// go makes the next turn's continuation copy nothing of the remembered history), and
    /// with the input's prefix hashes when the caller has them (`hashes`: made by
    /// [`PrefixHashes::of`](crate::memory::PrefixHashes::of) or
    /// [`PrefixHashes::extended`](crate::memory::PrefixHashes::extended) under the budget's
    /// limit as tag, [`Compactor::budget`]; otherwise, or when they do not cover every
    /// message of `input`, the input is hashed here).
    ///
    /// # Errors
    /// As [`Compactor::compact`].
    pub async fn compact_shared(
        &self,
        input: &Conversation,
        format: Format,
        budget: Option<usize>,
        instructions: Option<&str>,
        hashes: Option<&crate::memory::PrefixHashes>,
    ) -> Result<SharedCompacted, CompactError> {
        self.keyed(crate::pipeline::compact_shared(
            self,
            input,
            format,
            budget,
            instructions,
            hashes,
        ))
        .await
    }

    /// The tiers, in the order they run.
    pub(crate) fn tiers(&self) -> &[Box<dyn Strategy>] {
        &self.tiers
    }
}

impl Host for Compactor {
    fn settings(&self) -> &Settings {
        Compactor::settings(self)
    }
    fn skipped_tiers(&self) -> &[String] {
        Compactor::skipped_tiers(self)
    }
    fn memory(&self) -> &Memory {
        Compactor::memory(self)
    }
    fn tiers(&self) -> &[Box<dyn Strategy>] {
        Compactor::tiers(self)
    }
    fn model_tokens(&self, model: Option<&str>) -> ModelTokens {
        Compactor::model_tokens(self, model)
    }
    fn counter_of(&self, tokenizer: Tokenizer) -> &dyn TokenCounter {
        Compactor::counter_of(self, tokenizer)
    }
    fn recall_store(&self) -> Option<&crate::recall::RecallStore> {
        Compactor::recall_store(self)
    }
}

/// The model rules and learning switch of `[tokens]`.
fn calibration_of(settings: &Settings) -> Calibration {
    let t = &settings.tokens;
    Calibration::new(t.tokenizer, &t.model, t.models.clone(), t.learn)
        .with_learned_bytes(t.learned_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::PrefixHashes;
    use crate::report::Status;
    use crate::strategy::truncate::Truncate;
    use crate::strategy::{Compaction, Context, StrategyError};
    use serde_json::json;

    /// The real truncation, reported the way `summary` reports its fallback.
    struct FellBack(Truncate);

    #[async_trait::async_trait]
    impl Strategy for FellBack {
        fn name(&self) -> &str {
            "summary"
        }
        async fn compact(
            &self,
            conversation: &Conversation,
            budget: Budget,
            cx: &Context<'_>,
        ) -> Result<Compaction, StrategyError> {
            let mut c = self.0.compact(conversation, budget, cx).await?;
            c.degraded = Some("summary failed (connection refused): fell back to truncate".into());
            Ok(c)
        }
    }

    fn history(turns: usize) -> Conversation {
        let long = "output line ".repeat(300);
        let mut messages = vec![json!({"role": "user", "content": "start"})];
        for i in 0..turns {
            let id = format!("toolu_{i}");
            messages.push(json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]}));
            messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": long}]}));
            messages.push(json!({"role": "assistant", "content": format!("turn {i}")}));
            messages.push(json!({"role": "user", "content": "go on"}));
        }
        Format::Anthropic
            .read(&json!({"model": "m", "max_tokens": 8, "messages": messages}))
            .unwrap()
    }

    #[tokio::test]
    async fn a_fallback_is_named_warned_and_stays_degraded_when_continued_from_memory() {
        let settings = Settings::default();
        let counter = crate::tokens::counter_for(settings.tokens.tokenizer);
        let engine = Compactor::with_parts(
            settings.clone(),
            counter,
            vec![Box::new(FellBack(Truncate {
                config: settings.truncate.clone(),
            }))],
        );
        let first = history(8);
        let out = engine
            .compact(&first, Format::Anthropic, Some(2_000))
            .await
            .unwrap();
        assert_eq!(out.report.status, Status::Degraded);
        assert_eq!(out.report.applied(), "truncate after summary failed");
        assert!(
            out.report
                .summary_line()
                .contains(" by truncate after summary failed [default]")
        );
        assert_eq!(
            out.report.warnings(),
            vec!["summary failed (connection refused): fell back to truncate".to_string()]
        );
        // The next turn extends the same history and fits after the remembered prefix.
        let mut next = first.clone();
        next.messages.push(crate::conversation::Message::new(
            crate::conversation::Role::Assistant,
            vec![crate::conversation::Block::text("ok")],
        ));
        next.messages.push(crate::conversation::Message::new(
            crate::conversation::Role::User,
            vec![crate::conversation::Block::text("and now?")],
        ));
        let again = engine
            .compact(&next, Format::Anthropic, Some(2_000))
            .await
            .unwrap();
        assert_eq!(again.report.continued_from, Some(first.messages.len()));
        assert_eq!(again.report.status, Status::Degraded, "{:?}", again.report);
    }

    /// `history(turns)` whose first `failed` results are failures (`is_error`).
    fn history_with_failures(turns: usize, failed: usize) -> Conversation {
        let mut c = history(turns);
        for m in &mut c.messages {
            for b in &mut m.content {
                if let crate::conversation::Block::ToolResult(r) = b
                    && r.tool_use_id
                        .trim_start_matches("toolu_")
                        .parse::<usize>()
                        .is_ok_and(|i| i < failed)
                {
                    r.is_error = Some(true);
                }
            }
        }
        Format::Anthropic
            .read(&Format::Anthropic.write(&c))
            .unwrap()
    }

    #[tokio::test]
    async fn a_continuation_is_checked_against_the_failure_records_remembered_with_its_prefix() {
        let mut settings = Settings::default();
        settings.policy.tiers = vec!["truncate".into()];
        let engine = Compactor::from_config(settings).unwrap();
        let first = history_with_failures(8, 2);
        let out = engine
            .compact(&first, Format::Anthropic, Some(2_000))
            .await
            .unwrap();
        assert_eq!(out.report.status, Status::Compacted);
        let kept: Vec<&str> = out
            .conversation
            .messages
            .iter()
            .flat_map(|m| m.tool_results())
            .map(|r| r.tool_use_id.as_str())
            .collect();
        assert!(
            !kept.contains(&"toolu_0") && !kept.contains(&"toolu_1"),
            "the failed results were dropped: {kept:?}"
        );
        let mut next = first.clone();
        next.messages.push(crate::conversation::Message::text(
            crate::conversation::Role::Assistant,
            "ok",
        ));
        next.messages.push(crate::conversation::Message::text(
            crate::conversation::Role::User,
            "and now?",
        ));
        // With the records it was built with, the remembered prefix is taken.
        let again = engine
            .compact(&next, Format::Anthropic, Some(2_000))
            .await
            .unwrap();
        assert_eq!(again.report.continued_from, Some(first.messages.len()));
        // The same output remembered without its records: the marker's text still names both
        // failures, but the guard reads no text, so the continuation is refused and the history
        // compacted afresh.
        let limit = engine.budget(Some(2_000)).limit as u64;
        let hashes = PrefixHashes::of(&next, limit);
        let (len, remembered) = engine.memory().recall(&hashes).unwrap();
        assert_eq!(len, next.messages.len());
        assert_eq!(remembered.failures.len(), 2, "{:?}", remembered.failures);
        let text: String = remembered
            .output
            .messages
            .iter()
            .map(crate::conversation::Message::plain_text)
            .collect();
        assert!(
            text.contains("toolu_0") && text.contains("toolu_1"),
            "{text}"
        );
        engine
            .memory()
            .remember(&hashes, &remembered.output, None, &[]);
        let afresh = engine
            .compact(&next, Format::Anthropic, Some(2_000))
            .await
            .unwrap();
        assert_eq!(
            afresh.report.continued_from, None,
            "{:?}",
            afresh.report.notes
        );
        assert_eq!(afresh.report.status, Status::Compacted);
    }

    #[test]
    fn a_model_of_the_other_vocabulary_counts_with_the_counter_given_for_it() {
        use crate::tokens::{CachedCounter, TiktokenCounter};
        let settings = Settings::default();
        let other = match settings.tokens.tokenizer {
            Tokenizer::O200kBase => Tokenizer::Cl100kBase,
            _ => Tokenizer::O200kBase,
        };
        let given: Arc<dyn TokenCounter> = Arc::new(CachedCounter::with_max_bytes(
            TiktokenCounter::new(other),
            10 * 128,
        ));
        let c = Compactor::from_config(settings)
            .unwrap()
            .with_other_counter(given.clone());
        let used = c.counter_of(other) as *const dyn TokenCounter;
        assert!(std::ptr::addr_eq(used, Arc::as_ptr(&given)));
        // Without one, a counter of its own is built (not the configured vocabulary's).
        let plain = Compactor::from_config(Settings::default()).unwrap();
        let own = plain.counter_of(other) as *const dyn TokenCounter;
        assert!(!std::ptr::addr_eq(own, Arc::as_ptr(&given)));
        assert!(!std::ptr::addr_eq(own, Arc::as_ptr(&plain.counter)));
    }

    /// A faulty tier: blanks the first assistant text it may edit. `guard::apply` takes the
    /// plan (a text for a text), the provider would not (an empty text block).
    struct Blank;

    #[async_trait::async_trait]
    impl Strategy for Blank {
        fn name(&self) -> &str {
            "blank"
        }
        async fn compact(
            &self,
            conversation: &Conversation,
            _budget: Budget,
            cx: &Context<'_>,
        ) -> Result<Compaction, StrategyError> {
            let at = conversation.messages.iter().enumerate().find(|(i, m)| {
                m.role == crate::conversation::Role::Assistant
                    && !cx.layout.is_protected(*i)
                    && cx.layout.newest() != Some(*i)
                    && matches!(m.content.first(), Some(crate::conversation::Block::Text(_)))
            });
            let Some((message, _)) = at else {
                return Ok(Compaction::unchanged(
                    conversation,
                    "blank: nothing to blank",
                ));
            };
            Ok(Compaction {
                plan: vec![crate::guard::UnitEdit::Cap {
                    message,
                    block: 0,
                    with: crate::conversation::Block::text(""),
                }],
                edits: vec![crate::strategy::Edit::Truncated {
                    message,
                    block: 0,
                    what: "text",
                    id: None,
                    tokens_before: 3,
                    tokens_after: 0,
                }],
                notes: Vec::new(),
                degraded: None,
            })
        }
    }

    /// A tier that never edits.
    struct Idle;

    #[async_trait::async_trait]
    impl Strategy for Idle {
        fn name(&self) -> &str {
            "idle"
        }
        async fn compact(
            &self,
            conversation: &Conversation,
            _budget: Budget,
            _cx: &Context<'_>,
        ) -> Result<Compaction, StrategyError> {
            Ok(Compaction::unchanged(conversation, "idle"))
        }
    }

    /// A first tier's output that is smaller but short of the target is handed to the next
    /// tier before the guard's verdict; when it ends up the output, the verdict comes then:
    /// refused, it is not taken, its tier names the violation, and the input stands.
    #[tokio::test]
    async fn an_output_passed_on_unjudged_is_judged_when_it_ends_up_the_output() {
        let mut settings = Settings::default();
        settings.policy.remember = false;
        let counter = crate::tokens::counter_for(settings.tokens.tokenizer);
        let engine =
            Compactor::with_parts(settings, counter, vec![Box::new(Blank), Box::new(Idle)]);
        let input = history(8);
        let out = engine
            .compact(&input, Format::Anthropic, Some(2_000))
            .await
            .unwrap();
        assert_eq!(out.report.status, Status::OverBudget, "{:?}", out.report);
        assert_eq!(*out.conversation, input);
        let blank = &out.report.tiers[0];
        assert!(!blank.accepted);
        assert!(
            blank.violations.iter().any(|v| v.contains("empty")),
            "{:?}",
            blank.violations
        );
        assert_eq!(out.report.rejections(), 1);
        assert_eq!(out.report.applied(), "none");
        // The same faulty tier last: judged at once, with the same verdict.
        let counter = crate::tokens::counter_for(Settings::default().tokens.tokenizer);
        let mut settings = Settings::default();
        settings.policy.remember = false;
        let alone = Compactor::with_parts(settings, counter, vec![Box::new(Blank)]);
        let once = alone
            .compact(&input, Format::Anthropic, Some(2_000))
            .await
            .unwrap();
        assert_eq!(once.report.tiers[0].violations, blank.violations);
        assert_eq!(once.report.status, Status::OverBudget);
    }

    /// Passed on unjudged and then built on: the later tier's output is judged against the
    /// original input on its own, and both tiers are named as applied.
    #[tokio::test]
    async fn an_output_passed_on_and_built_on_is_settled_by_the_later_verdict() {
        let mut settings = Settings::default();
        settings.policy.remember = false;
        settings.policy.tiers = vec!["microcompact".into(), "truncate".into()];
        let engine = Compactor::from_config(settings).unwrap();
        let input = history_with_failures(12, 1);
        let out = engine
            .compact(&input, Format::Anthropic, Some(2_000))
            .await
            .unwrap();
        assert_eq!(out.report.status, Status::Compacted, "{:?}", out.report);
        assert_eq!(out.report.applied(), "microcompact+truncate");
        assert_eq!(out.report.rejections(), 0);
        assert!(
            crate::guard::validate(&out.conversation, Format::Anthropic, Default::default())
                .is_empty()
        );
    }

    /// A refused output that later tiers were built on: they run again on the output before
    /// it, so a faulty tier costs its own edits, not the later tiers' work.
    #[tokio::test]
    async fn the_tiers_after_a_refused_output_run_again_on_the_one_before_it() {
        let mut settings = Settings::default();
        settings.policy.remember = false;
        let counter = crate::tokens::counter_for(settings.tokens.tokenizer);
        let microcompact = crate::strategy::microcompact::Microcompact {
            config: settings.microcompact.clone(),
        };
        let engine = Compactor::with_parts(
            settings,
            counter,
            vec![Box::new(Blank), Box::new(microcompact)],
        );
        let input = history(8);
        let out = engine
            .compact(&input, Format::Anthropic, Some(2_000))
            .await
            .unwrap();
        let runs: Vec<(&str, bool, bool)> = out
            .report
            .tiers
            .iter()
            .map(|t| (t.strategy.as_str(), t.accepted, t.violations.is_empty()))
            .collect();
        // Blank passed on, microcompact's output built on it refused (it keeps the blanked
        // text), Blank refused when judged, microcompact again on the input: taken.
        assert_eq!(
            runs,
            vec![
                ("blank", false, false),
                ("microcompact", false, false),
                ("microcompact", true, true)
            ],
            "{:?}",
            out.report
        );
        assert_eq!(out.report.applied(), "microcompact");
        assert!(out.report.tokens_after < out.report.tokens_before);
        assert!(
            crate::guard::validate(&out.conversation, Format::Anthropic, Default::default())
                .is_empty()
        );
    }
}
