//! [`Compactor`]: a configured pipeline (counter, tiers, memory, calibration) as one value an
//! agent loop keeps across turns. What one compaction does, step by step, is
//! [`crate::pipeline`]'s; when to compact and how far is [`crate::policy`]'s; which strategy a
//! tier name means is the [`Registry`]'s.

use crate::config::{ConfigError, Settings};
use crate::conversation::Conversation;
use crate::format::Format;
use crate::memory::Memory;
use crate::models::{ModelEntry, ModelTable};
use crate::pipeline::Host;
pub use crate::pipeline::{CompactError, Compacted, SharedCompacted};
use crate::registry::Registry;
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
    /// The model table of `[models]`.
    models: ModelTable,
}

impl Compactor {
    /// Builds the pipeline the settings describe: the tokenizer, and one strategy per tier.
    /// `summary` needs an LLM (`[llm]`); without one it is left out, and the report says so,
    /// when `[policy] optional` lists it (the default preset), and refused otherwise.
    ///
    /// # Errors
    /// [`ConfigError`] for a tier that cannot be built, and for one that cannot run here
    /// (`llm`: `the summary tier cannot run: no [llm] configured; …`) unless `[policy]
    /// optional` lists it.
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
        let crate::registry::Tiers {
            ready: tiers,
            skipped,
        } = registry.tiers(&settings)?;
        let secret = settings
            .recall
            .secret()
            .map_err(|(key, message)| ConfigError::Invalid {
                key: key.into(),
                message,
            })?;
        let recall = recall_of(&settings.recall, secret.as_deref());
        let settings_models = settings.models.clone();
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
            models: ModelTable::new(settings_models),
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
        let settings_models = settings.models.clone();
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
            models: ModelTable::new(settings_models),
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
    /// remembered outputs; see `Memory`). Anything remembered so far is dropped.
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
    pub(crate) fn memory(&self) -> &Memory {
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
    /// request sent (`Report::counted_after`), `actual` the input tokens of the answer's
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

    /// The budget in model tokens: `explicit` tokens, else the configured one (no model known:
    /// see [`Compactor::budget_for`]).
    pub fn budget(&self, explicit: Option<usize>) -> Budget {
        crate::policy::model_budget(&self.settings.budget, explicit, None)
    }

    /// The budget in model tokens of a request to `model` (the body's `model`, else `[tokens]
    /// model`): `explicit` tokens, else the configured one, else the model's window in the
    /// model table less the reserve ([`crate::config::BudgetSettings::budget_for`]).
    pub fn budget_for(&self, explicit: Option<usize>, model: Option<&str>) -> Budget {
        let entry = self.model_entry(model).map(|(_, e)| e);
        crate::policy::model_budget(&self.settings.budget, explicit, entry)
    }

    /// The model table entry of `model` (the body's `model`, else `[tokens] model`) with its
    /// pattern; `None` when no entry names it.
    pub fn model_entry(&self, model: Option<&str>) -> Option<(&str, &ModelEntry)> {
        self.models.lookup(self.calibration.model_of(model)?)
    }

    /// The model table (`[models]`).
    pub fn models(&self) -> &ModelTable {
        &self.models
    }

    /// Compacts `conversation` (of wire format `format`) to the budget (`budget` tokens, or the
    /// configured one). Never mutates the input; returns it borrowed when it is under the
    /// trigger or nothing valid and smaller could be made, unless it holds an unusable inline
    /// image outside the newest exchange: then a copy with that image replaced by a text
    /// placeholder (`crate::guard::plan_repairs`; the report's `repairs`, status
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
    /// `crate::pipeline`'s.
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
    /// `PrefixHashes::of` or
    /// `PrefixHashes::extended` under the budget's
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
    fn model_entry(&self, model: Option<&str>) -> Option<&ModelEntry> {
        Compactor::model_entry(self, model).map(|(_, e)| e)
    }
}

/// The model rules and learning switch of `[tokens]`.
fn calibration_of(settings: &Settings) -> Calibration {
    let t = &settings.tokens;
    Calibration::new(t.tokenizer, &t.model, t.models.clone(), t.learn)
        .with_learned_bytes(t.learned_bytes)
}

#[cfg(test)]
mod tests;
