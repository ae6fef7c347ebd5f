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
}

/// `[budget]`: how many tokens the request may hold, and when and how far to compact.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSettings {
    /// Context window of the model, in tokens.
    pub context_window: usize,
    /// Tokens reserved for the model's answer.
    pub reserve_output: usize,
    /// Explicit budget in tokens; 0 = use `context_window - reserve_output`.
    pub tokens: usize,
    /// Compact when over `trigger × budget` (0 < trigger <= 1).
    pub trigger: f64,
    /// Compact down to `target × budget` (0 < target <= trigger).
    pub target: f64,
}

impl BudgetSettings {
    /// The budget in tokens: `explicit`, else `tokens`, else window minus reserve.
    pub fn budget(&self, explicit: Option<usize>) -> usize {
        explicit.filter(|b| *b > 0).unwrap_or(if self.tokens > 0 {
            self.tokens
        } else {
            self.context_window.saturating_sub(self.reserve_output)
        })
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
    /// [`crate::tokens::model`]).
    #[serde(default)]
    pub models: std::collections::BTreeMap<String, crate::tokens::ModelRule>,
    /// Learn each calibrated model's ratio from the provider's `usage` (the proxy does).
    #[serde(default = "yes")]
    pub learn: bool,
    /// Bound of the learned ratios, in bytes (each weighs its model name plus
    /// [`crate::tokens::model::LEARNED_ENTRY_BYTES`]; the least used evicted first); also
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
}

impl Settings {
    /// The name of the tier list in force, for reports (`[default]` in the summary line, the
    /// report's `strategy`, the metrics' `strategy` label): the config file that set
    /// `[policy] tiers` (`c.toml`), `environment`, else the preset's name.
    pub fn label(&self) -> &str {
        self.tiers_from.as_deref().unwrap_or(&self.preset)
    }
}
