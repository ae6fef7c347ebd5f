//! The settings as written ([`RawSettings`], every key of a file) and as checked
//! ([`Settings`]): data only; [`super::check`] turns one into the other.

use super::server::ServerSettings;
use super::store::StoreSettings;
use crate::llm::LlmConfig;
use crate::strategy::microcompact::MicrocompactConfig;
use crate::strategy::summary::SummaryConfig;
use crate::strategy::truncate::TruncateConfig;
use crate::tokens::Tokenizer;
use serde::{Deserialize, Serialize};

/// Settings as written (all sections optional in a file; defaults come from
/// [`DEFAULT_CONFIG`](super::DEFAULT_CONFIG)).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSettings {
    /// A preset's one-line description.
    #[serde(default)]
    pub description: Option<String>,
    /// `[budget]`.
    pub budget: BudgetSettings,
    /// `[policy]`.
    pub policy: PolicySettings,
    /// `[tokens]`.
    pub tokens: TokenSettings,
    /// `[models."PATTERN"]`: the model table (window, max output, prices; [`crate::models`]).
    #[serde(default)]
    pub models: std::collections::BTreeMap<String, crate::models::ModelEntry>,
    /// `[truncate]`.
    pub truncate: TruncateConfig,
    /// `[microcompact]`.
    pub microcompact: MicrocompactConfig,
    /// `[summary]`.
    #[serde(default)]
    pub summary: SummaryConfig,
    /// `[llm]`: absent = no LLM (the `summary` tier is skipped).
    #[serde(default)]
    pub llm: Option<LlmConfig>,
    /// `[server]`.
    pub server: ServerSettings,
    /// `[store]`: a shared store for the service (absent = in-process only).
    #[serde(default)]
    pub store: StoreSettings,
    /// `[recall]`: the store of cleared and dropped originals (absent = defaults).
    #[serde(default)]
    pub recall: super::recall::RecallSettings,
    /// `[carry]`: which text blocks of a dropped user message are the client's context.
    #[serde(default)]
    pub carry: crate::guard::ContextRules,
}

/// `[budget]`: how many tokens the request may hold, and when and how far to compact.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSettings {
    /// Context window of the model, in model tokens; 0 = the request's model's window in the
    /// model table ([`crate::models`]), [`crate::models::DEFAULT_CONTEXT_WINDOW`] when no
    /// entry names it.
    pub context_window: usize,
    /// Model tokens reserved for the model's answer (at most the model's `max_output`).
    pub reserve_output: usize,
    /// Explicit budget in tokens; 0 = use `context_window - reserve_output`.
    pub tokens: usize,
    /// Compact when over `trigger × budget` (0 < trigger <= 1).
    pub trigger: f64,
    /// Compact down to `target × budget` (0 < target <= trigger).
    pub target: f64,
}

impl BudgetSettings {
    /// The budget of a client's own summary request ([`crate::report::RequestKind`]): the
    /// model's context window less the output reserve (`tokens` left out), compacted only
    /// when over it and only down to it.
    pub fn to_window(&self) -> BudgetSettings {
        BudgetSettings {
            tokens: 0,
            trigger: 1.0,
            target: 1.0,
            ..self.clone()
        }
    }

    /// The budget in model tokens when no model is known: [`BudgetSettings::budget_for`]
    /// without a model table entry.
    pub fn budget(&self, explicit: Option<usize>) -> usize {
        self.budget_for(explicit, None)
    }

    /// The budget in model tokens for a model of table entry `model`: `explicit`, else
    /// `tokens`, else window minus reserve. The window is `context_window`, else the entry's,
    /// else [`crate::models::DEFAULT_CONTEXT_WINDOW`]; the reserve is `reserve_output`, at
    /// most the entry's `max_output`.
    pub fn budget_for(
        &self,
        explicit: Option<usize>,
        model: Option<&crate::models::ModelEntry>,
    ) -> usize {
        if let Some(b) = explicit.filter(|b| *b > 0) {
            return b;
        }
        if self.tokens > 0 {
            return self.tokens;
        }
        let window = match (self.context_window, model) {
            (0, Some(m)) => m.context_window,
            (0, None) => crate::models::DEFAULT_CONTEXT_WINDOW,
            (w, _) => w,
        };
        let reserve = model.map_or(self.reserve_output, |m| {
            self.reserve_output.min(m.max_output)
        });
        window.saturating_sub(reserve)
    }
}

/// `[policy]`: which strategies, in which order.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySettings {
    /// Tier names, cheapest first: `microcompact`, `summary`, `truncate`.
    pub tiers: Vec<String>,
    /// Tiers that may be left out when they cannot run here (`summary` without `[llm]`): the
    /// run goes on without them and the report says so. Any other tier that cannot run is a
    /// configuration error ([`crate::Compactor::from_config`]).
    #[serde(default)]
    pub optional: Vec<String>,
    /// Remember recent compactions and continue from them when a later input extends the same
    /// history (keeps the compacted prefix stable for prompt caching).
    #[serde(default = "yes")]
    pub remember: bool,
    /// The provider's prompt-cache lifetime, in seconds (Anthropic's default cache: 5
    /// minutes). A remembered compaction not continued for longer is cold: its next request
    /// writes the whole prefix anyway, so it is compacted from the trigger on, not the budget.
    #[serde(default = "cache_ttl_secs")]
    pub cache_ttl_secs: f64,
}

fn cache_ttl_secs() -> f64 {
    300.0
}

fn yes() -> bool {
    true
}

/// `[tokens]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSettings {
    /// The tokenizer: counts models no `[tokens.models]` pattern names.
    pub tokenizer: Tokenizer,
    /// The target model when the request body names none ("" = none): budgets, triggers,
    /// targets and reports are in this model's tokens. `--model` sets it.
    #[serde(default)]
    pub model: String,
    /// `[tokens.models."PATTERN"]`: how each model family is counted (see
    /// `crate::tokens::model`).
    #[serde(default)]
    pub models: std::collections::BTreeMap<String, crate::tokens::ModelRule>,
    /// Learn each calibrated model's ratio from the provider's `usage` (the proxy does).
    #[serde(default = "yes")]
    pub learn: bool,
    /// Bound of the learned ratios, in bytes (each weighs its model name plus
    /// `crate::tokens::model::LEARNED_ENTRY_BYTES`; the least used evicted first); also
    /// bounds the `compactor_model_token_ratio` series of `/metrics`, one per ratio kept.
    #[serde(default = "learned_bytes")]
    pub learned_bytes: u64,
}

pub(super) fn learned_bytes() -> u64 {
    crate::tokens::model::DEFAULT_LEARNED_BYTES
}

/// Checked settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    /// The preset's name (`default`, `truncate`, a file name) for reports.
    pub preset: String,
    /// Its description.
    pub description: Option<String>,
    /// `[budget]`.
    pub budget: BudgetSettings,
    /// `[policy]`.
    pub policy: PolicySettings,
    /// Where `[policy] tiers` came from when not from the preset: the config file's name
    /// (`c.toml`) or `environment`; `None`: the preset's. Reports name the tier list by it
    /// ([`Settings::label`]).
    pub tiers_from: Option<String>,
    /// `[tokens]`.
    pub tokens: TokenSettings,
    /// `[models]`: the model table.
    pub models: std::collections::BTreeMap<String, crate::models::ModelEntry>,
    /// `[truncate]`.
    pub truncate: TruncateConfig,
    /// `[microcompact]`.
    pub microcompact: MicrocompactConfig,
    /// `[summary]`.
    pub summary: SummaryConfig,
    /// `[llm]`, when configured.
    pub llm: Option<LlmConfig>,
    /// `[server]`.
    pub server: ServerSettings,
    /// `[store]`.
    pub store: StoreSettings,
    /// `[recall]`.
    pub recall: super::recall::RecallSettings,
    /// `[carry]`.
    pub carry: crate::guard::ContextRules,
}

impl Settings {
    /// The name of the tier list in force, for reports (`[default]` in the summary line, the
    /// report's `strategy`, the metrics' `strategy` label): the config file that set
    /// `[policy] tiers` (`c.toml`), `environment`, else the preset's name.
    pub fn label(&self) -> &str {
        self.tiers_from.as_deref().unwrap_or(&self.preset)
    }
}
