//! Settings: built-in defaults -> config file -> strategy preset -> environment -> flags.
//!
//! Read with the `config` crate into [`RawSettings`] (every section `deny_unknown_fields`, so a
//! misspelt key is an error naming it), then checked into [`Settings`]. No globals: two
//! `Settings` can live side by side in one process (the A/B command runs several at once).

use crate::llm::LlmConfig;
use crate::strategy::microcompact::MicrocompactConfig;
use crate::strategy::summary::SummaryConfig;
use crate::strategy::truncate::TruncateConfig;
use crate::tokens::Tokenizer;
use config::{Config, Environment, File, FileFormat};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub mod server;
pub mod store;
pub use server::ServerSettings;
pub use store::StoreSettings;

/// The longest time any duration key takes, in seconds (one day): every `*_secs` and
/// `*_ms` key of `[server]`, `[store]` (but `ttl_secs`), `[llm]` and `[summary]` is checked
/// against it, so no `Instant + Duration` of the service or the library can overflow.
pub const MAX_SECS: u64 = 86_400;

/// `secs` of `key` in `1..=MAX_SECS`, else `(key, message)`.
pub(crate) fn check_secs(key: &'static str, secs: u64) -> Result<(), (&'static str, String)> {
    if secs == 0 || secs > MAX_SECS {
        return Err((
            key,
            format!("must be 1 to {MAX_SECS} seconds (one day), found {secs}"),
        ));
    }
    Ok(())
}

/// `secs` of `key` finite and in `(0, MAX_SECS]` (`[0, MAX_SECS]` with `zero`), else
/// `(key, message)`.
pub(crate) fn check_secs_f64(
    key: &'static str,
    secs: f64,
    zero: bool,
) -> Result<(), (&'static str, String)> {
    let low_ok = if zero { secs >= 0.0 } else { secs > 0.0 };
    if !(low_ok && secs <= MAX_SECS as f64) {
        let low = if zero { ">= 0" } else { "> 0" };
        return Err((
            key,
            format!("must be {low} and at most {MAX_SECS} seconds (one day), found {secs}"),
        ));
    }
    Ok(())
}

/// The built-in defaults: `config/compactor.toml`, documented key by key.
pub const DEFAULT_CONFIG: &str = include_str!("../config/compactor.toml");

/// The presets shipped in the binary (`strategies/*.toml`); files in a strategies directory
/// take precedence, and a user adds a preset by adding a file.
pub const BUILTIN_PRESETS: &[(&str, &str)] = &[
    ("default", include_str!("../strategies/default.toml")),
    ("truncate", include_str!("../strategies/truncate.toml")),
    (
        "microcompact",
        include_str!("../strategies/microcompact.toml"),
    ),
    ("summary", include_str!("../strategies/summary.toml")),
];

/// Errors while loading settings.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A source could not be read or merged, or a key is unknown or of the wrong type.
    #[error("configuration: {0}")]
    Load(#[from] config::ConfigError),
    /// A value is out of range.
    #[error("configuration: {key}: {message}")]
    Invalid {
        /// The dotted key (`budget.trigger`).
        key: String,
        /// What is wrong.
        message: String,
    },
    /// An error of one source of settings, named: the config file, the preset file or the
    /// environment variables.
    #[error("{origin}: {source}")]
    In {
        /// `config file my.toml`, `preset truncate`, `environment (COMPACTOR__BUDGET__TRIGGER)`.
        origin: String,
        /// The error that source alone gives over the built-in defaults.
        #[source]
        source: Box<ConfigError>,
    },
    /// `--strategy NAME` names no preset.
    #[error(
        "no strategy preset {name:?} (looked in {searched}; built in: default, truncate, microcompact, summary)"
    )]
    PresetNotFound {
        /// The name asked for.
        name: String,
        /// Where it was looked for.
        searched: String,
    },
}

/// Settings as written (all sections optional in a file; defaults come from [`DEFAULT_CONFIG`]).
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

fn learned_bytes() -> u64 {
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
}

/// The built-in tier names (`Registry::builtin`); a [`Loader`] accepts more with
/// [`Loader::accepting`].
pub const KNOWN_TIERS: &[&str] = &["microcompact", "summary", "truncate"];

impl Default for Settings {
    /// The built-in defaults with the `default` preset: [`DEFAULT_CONFIG`] and
    /// [`BUILTIN_PRESETS`] only; no environment variable and no file is read (the CLI and the
    /// service read them through [`Loader::from_environment`]). Infallible: the built-in files
    /// are checked by a unit test, so the written-out fallback is never reached.
    fn default() -> Self {
        Loader::default().load().unwrap_or_else(|_| builtin())
    }
}

/// The main built-in defaults written out (no model rules, no description), for the case
/// (ruled out by a unit test) that the built-in files fail to load.
fn builtin() -> Settings {
    Settings {
        preset: "default".into(),
        description: None,
        budget: BudgetSettings {
            context_window: 200_000,
            reserve_output: 20_000,
            tokens: 0,
            trigger: 0.8,
            target: 0.6,
        },
        policy: PolicySettings {
            tiers: KNOWN_TIERS.iter().map(|s| s.to_string()).collect(),
            remember: true,
        },
        tokens: TokenSettings {
            tokenizer: Tokenizer::default(),
            model: String::new(),
            models: Default::default(),
            learn: true,
            learned_bytes: learned_bytes(),
        },
        truncate: TruncateConfig::default(),
        microcompact: MicrocompactConfig::default(),
        summary: SummaryConfig::default(),
        llm: None,
        server: ServerSettings::default(),
        store: StoreSettings::default(),
    }
}

/// Where settings come from.
///
/// `Loader::default()` is the built-in defaults and presets alone (no environment, no
/// directory searched); [`Loader::from_environment`] adds what the CLI, the service and the
/// Python package read: `COMPACTOR__…` variables and presets in `$COMPACTOR_STRATEGIES` and
/// `./strategies`.
#[derive(Debug, Clone, Default)]
pub struct Loader {
    /// A config file (`--config`).
    pub file: Option<PathBuf>,
    /// A preset name or path (`--strategy`); `None` = `default`.
    pub preset: Option<String>,
    /// Read `COMPACTOR__…` environment variables.
    pub env: bool,
    /// Directories searched for `NAME.toml` presets before the built-in ones.
    pub preset_dirs: Vec<PathBuf>,
    /// Strategy names `[policy] tiers` may list besides [`KNOWN_TIERS`]: a user's own
    /// strategies, registered under these names in the [`crate::registry::Registry`] the
    /// settings are built with (`Loader { strategies: registry.names()..., .. }`, or
    /// [`Loader::accepting`]). Empty = the built-in names only.
    pub strategies: Vec<String>,
}

impl Loader {
    /// Built-in defaults, then `COMPACTOR__SECTION__KEY` environment variables; presets are
    /// looked for in `$COMPACTOR_STRATEGIES` (when set), then `./strategies`, then the built-in
    /// ones. Reads the process environment once, here and in [`Loader::load`].
    pub fn from_environment() -> Loader {
        let mut preset_dirs = Vec::new();
        if let Some(dir) = std::env::var_os("COMPACTOR_STRATEGIES") {
            preset_dirs.push(PathBuf::from(dir));
        }
        preset_dirs.push(PathBuf::from("strategies"));
        Loader {
            file: None,
            preset: None,
            env: true,
            preset_dirs,
            strategies: Vec::new(),
        }
    }

    /// The same loader, also accepting the tier names `names` (e.g. `registry.names()`) in
    /// `[policy] tiers`.
    pub fn accepting<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Loader {
        for n in names {
            if !KNOWN_TIERS.contains(&n) && !self.strategies.iter().any(|s| s == n) {
                self.strategies.push(n.to_string());
            }
        }
        self
    }
}

impl Loader {
    /// Merges the layers and checks the result.
    ///
    /// Order: built-in defaults, then the `--config` file, then the preset, then the
    /// environment. When no preset is asked for, the implicit `default` preset goes *under* the
    /// file, so a file's explicit `[policy] tiers` (or any key) wins over it. Each source is
    /// also checked alone over the defaults, so a bad key or an unknown tier name is an error
    /// naming its source ([`ConfigError::In`]) even where a later source overrides it.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, key or preset at fault.
    pub fn load(&self) -> Result<Settings, ConfigError> {
        let name = self.preset.clone().unwrap_or_else(|| "default".into());
        let (preset_name, preset_text) = self.find_preset(&name)?;
        // A number TOML cannot hold fails the parse with a message naming no key: named here.
        let file_text = self
            .file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok().map(|t| (f, t)));
        let texts = file_text
            .iter()
            .map(|(f, t)| (format!("config file {}", f.display()), t.as_str()))
            .chain(std::iter::once((
                format!("preset {preset_name}"),
                preset_text.as_str(),
            )));
        for (origin, text) in texts {
            if let Some((key, literal)) = oversized_integer(text) {
                return Err(ConfigError::In {
                    origin,
                    source: Box::new(ConfigError::Invalid {
                        key,
                        message: format!(
                            "{literal} is larger than a TOML integer can be ({}); see the \
                             key's documented range",
                            i64::MAX
                        ),
                    }),
                });
            }
        }
        let preset = || File::from_str(&preset_text, FileFormat::Toml);
        let file = || {
            self.file
                .as_ref()
                .map(|f| File::from(f.as_path()).required(true))
        };
        let mut builder = defaults();
        if self.preset.is_none() {
            builder = builder.add_source(preset());
        }
        if let Some(f) = file() {
            builder = builder.add_source(f);
        }
        if self.preset.is_some() {
            builder = builder.add_source(preset());
        }
        let env_vars: Vec<String> = if self.env {
            std::env::vars()
                .map(|(k, _)| k)
                .filter(|k| k.starts_with("COMPACTOR__"))
                .collect()
        } else {
            Vec::new()
        };
        if !env_vars.is_empty() {
            builder = builder.add_source(environment());
        }
        let merged = builder
            .build()
            .and_then(|c| c.try_deserialize::<RawSettings>())
            .map_err(ConfigError::from)
            .and_then(|raw| check(raw, preset_name.clone(), &self.strategies));
        // Each source alone: the first one at fault names itself.
        let mut alone: Vec<(String, config::ConfigBuilder<config::builder::DefaultState>)> =
            Vec::new();
        if let (Some(path), Some(f)) = (&self.file, file()) {
            alone.push((
                format!("config file {}", path.display()),
                defaults().add_source(f),
            ));
        }
        alone.push((
            format!("preset {preset_name}"),
            defaults().add_source(preset()),
        ));
        if !env_vars.is_empty() {
            alone.push((
                format!("environment ({})", env_vars.join(", ")),
                defaults().add_source(environment()),
            ));
        }
        for (origin, builder) in alone {
            let one = builder
                .build()
                .and_then(|c| c.try_deserialize::<RawSettings>())
                .map_err(ConfigError::from)
                .and_then(|raw| check(raw, preset_name.clone(), &self.strategies));
            // When the merged settings are fine, a source alone may still break a rule that
            // involves another source (trigger vs target); only its own faults count then.
            let own_fault = |e: &ConfigError| {
                matches!(e, ConfigError::Load(_))
                    || matches!(e, ConfigError::Invalid { key, .. } if key == "policy.tiers")
            };
            if let Err(e) = one
                && (merged.is_err() || own_fault(&e))
            {
                return Err(ConfigError::In {
                    origin,
                    source: Box::new(e),
                });
            }
        }
        merged
    }

    fn find_preset(&self, name: &str) -> Result<(String, String), ConfigError> {
        let looks_like_path = name.ends_with(".toml") || name.contains('/') || name.contains('\\');
        if looks_like_path {
            let path = Path::new(name);
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Invalid {
                key: "strategy".into(),
                message: format!("cannot read preset {}: {e}", path.display()),
            })?;
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| name.into());
            return Ok((stem, text));
        }
        let mut searched = Vec::new();
        let mut dirs = self.preset_dirs.clone();
        if let Some(file) = &self.file
            && let Some(parent) = file.parent()
        {
            dirs.push(parent.join("strategies"));
            dirs.push(parent.join("../strategies"));
        }
        for dir in &dirs {
            let path = dir.join(format!("{name}.toml"));
            searched.push(path.display().to_string());
            if let Ok(text) = std::fs::read_to_string(&path) {
                return Ok((name.to_string(), text));
            }
        }
        if let Some((_, text)) = BUILTIN_PRESETS.iter().find(|(n, _)| *n == name) {
            return Ok((name.to_string(), text.to_string()));
        }
        Err(ConfigError::PresetNotFound {
            name: name.into(),
            searched: searched.join(", "),
        })
    }
}

/// The first `key = INTEGER` of `text` whose decimal integer does not fit TOML's 64-bit
/// signed integers, as `(section.key, literal)` (the `config` crate's parse error for it names
/// no key: "number too large to fit in target type"). Tables are followed by their `[header]`
/// lines; anything else (strings, arrays, inline tables) is left to the parser.
fn oversized_integer(text: &str) -> Option<(String, String)> {
    let mut section = String::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if let Some(header) = line.strip_prefix('[') {
            section = header.trim_matches(['[', ']', ' ']).replace([' ', '"'], "");
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let digits = value.trim().trim_start_matches(['+', '-']).replace('_', "");
        if !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && value.trim().replace('_', "").parse::<i64>().is_err()
        {
            let key = key.trim().trim_matches('"');
            let dotted = if section.is_empty() {
                key.to_string()
            } else {
                format!("{section}.{key}")
            };
            return Some((dotted, value.trim().to_string()));
        }
    }
    None
}

fn defaults() -> config::ConfigBuilder<config::builder::DefaultState> {
    Config::builder().add_source(File::from_str(DEFAULT_CONFIG, FileFormat::Toml))
}

/// `COMPACTOR__SECTION__KEY` variables (lists comma separated).
fn environment() -> Environment {
    Environment::with_prefix("COMPACTOR")
        .separator("__")
        .try_parsing(true)
        .list_separator(",")
        .with_list_parse_key("policy.tiers")
        .with_list_parse_key("microcompact.compactable_tools")
}

fn check(raw: RawSettings, preset: String, extra: &[String]) -> Result<Settings, ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        key: key.into(),
        message,
    };
    let b = &raw.budget;
    if !(b.trigger > 0.0 && b.trigger <= 1.0) {
        return Err(invalid(
            "budget.trigger",
            format!("must be in (0, 1], found {}", b.trigger),
        ));
    }
    if !(b.target > 0.0 && b.target <= b.trigger) {
        return Err(invalid(
            "budget.target",
            format!(
                "must be in (0, trigger = {}], found {}",
                b.trigger, b.target
            ),
        ));
    }
    if b.budget(None) == 0 {
        return Err(invalid(
            "budget.context_window",
            "the budget (window - reserve) is 0".into(),
        ));
    }
    if raw.policy.tiers.is_empty() {
        return Err(invalid("policy.tiers", "no strategy listed".into()));
    }
    for t in &raw.policy.tiers {
        if !KNOWN_TIERS.contains(&t.as_str()) && !extra.contains(t) {
            let known: Vec<&str> = KNOWN_TIERS
                .iter()
                .copied()
                .chain(extra.iter().map(String::as_str))
                .collect();
            return Err(invalid(
                "policy.tiers",
                format!("unknown strategy {t:?} (known: {})", known.join(", ")),
            ));
        }
    }
    if !(0.0..1.0).contains(&raw.truncate.digest_share) {
        return Err(invalid(
            "truncate.digest_share",
            format!("must be in [0, 1), found {}", raw.truncate.digest_share),
        ));
    }
    let t = &raw.truncate;
    if !(t.digest_share..1.0).contains(&t.digest_max_share) {
        return Err(invalid(
            "truncate.digest_max_share",
            format!(
                "must be in [digest_share ({}), 1), found {}",
                t.digest_share, t.digest_max_share
            ),
        ));
    }
    let sm = &raw.summary;
    if !(0.0..1.0).contains(&sm.keep_recent_share) {
        return Err(invalid(
            "summary.keep_recent_share",
            format!("must be in [0, 1), found {}", sm.keep_recent_share),
        ));
    }
    if sm.max_summary_tokens == 0 {
        return Err(invalid("summary.max_summary_tokens", "must be > 0".into()));
    }
    let named = |(key, message): (&str, String)| invalid(key, message);
    check_secs_f64("summary.cooldown_secs", sm.cooldown_secs, true).map_err(named)?;
    if let Some(llm) = &raw.llm {
        if llm.model.trim().is_empty() {
            return Err(invalid("llm.model", "must not be empty".into()));
        }
        check_secs_f64("llm.timeout_secs", llm.timeout_secs, false).map_err(named)?;
        check_secs_f64("llm.breaker_cooldown_secs", llm.breaker_cooldown_secs, true)
            .map_err(named)?;
        if llm.context_window <= sm.max_summary_tokens {
            return Err(invalid(
                "llm.context_window",
                format!(
                    "must be larger than summary.max_summary_tokens ({}), found {}",
                    sm.max_summary_tokens, llm.context_window
                ),
            ));
        }
    }
    for (pattern, rule) in &raw.tokens.models {
        if let Err(message) = rule.check(pattern) {
            return Err(invalid(&format!("tokens.models.{pattern}"), message));
        }
    }
    if let Err((key, message)) = raw.server.check() {
        return Err(invalid(key, message));
    }
    if let Err((key, message)) = raw.store.check() {
        return Err(invalid(key, message));
    }
    Ok(Settings {
        preset,
        description: raw.description,
        budget: raw.budget,
        policy: raw.policy,
        tokens: raw.tokens,
        truncate: raw.truncate,
        microcompact: raw.microcompact,
        summary: raw.summary,
        llm: raw.llm,
        server: raw.server,
        store: raw.store,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loader() -> Loader {
        Loader {
            file: None,
            preset: None,
            env: false,
            preset_dirs: Vec::new(),
            strategies: Vec::new(),
        }
    }

    #[test]
    fn built_in_defaults_and_presets_load() {
        let s = loader().load().unwrap();
        assert_eq!(s.preset, "default");
        assert_eq!(s.budget.budget(None), 180_000);
        assert_eq!(s.policy.tiers, vec!["microcompact", "summary", "truncate"]);
        for (name, _) in BUILTIN_PRESETS {
            let s = Loader {
                preset: Some(name.to_string()),
                ..loader()
            }
            .load()
            .unwrap();
            assert_eq!(&s.preset, name);
        }
        let t = Loader {
            preset: Some("truncate".into()),
            ..loader()
        }
        .load()
        .unwrap();
        assert_eq!(t.policy.tiers, vec!["truncate"]);
    }

    #[test]
    fn default_settings_are_the_built_in_files_alone() {
        let loaded = loader().load().unwrap();
        assert_eq!(Settings::default(), loaded);
        assert_eq!(builtin().budget, loaded.budget);
        assert_eq!(builtin().policy, loaded.policy);
        let l = Loader::default();
        assert!(!l.env && l.preset_dirs.is_empty() && l.file.is_none() && l.preset.is_none());
    }

    #[test]
    fn from_environment_reads_variables_and_the_strategies_directories() {
        let l = Loader::from_environment();
        assert!(l.env);
        assert_eq!(l.preset_dirs.last(), Some(&PathBuf::from("strategies")));
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let dir = std::env::temp_dir().join(format!("compactor-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bad.toml");
        std::fs::write(&file, "[truncate]\nmax_tool_result_tokenz = 5\n").unwrap();
        let err = Loader {
            file: Some(file),
            ..loader()
        }
        .load()
        .unwrap_err()
        .to_string();
        assert!(err.contains("max_tool_result_tokenz"), "{err}");
    }

    #[test]
    fn a_digest_max_share_below_the_floor_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("compactor-cfg-max-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let load = |body: &str| {
            let file = dir.join("share.toml");
            std::fs::write(&file, body).unwrap();
            Loader {
                file: Some(file),
                ..loader()
            }
            .load()
        };
        let err = load("[truncate]\ndigest_share = 0.2\ndigest_max_share = 0.1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("truncate.digest_max_share"), "{err}");
        let ok = load("[truncate]\ndigest_share = 0.2\ndigest_max_share = 0.2\n").unwrap();
        assert_eq!(ok.truncate.digest_max_share, 0.2);
    }

    #[test]
    fn llm_extra_body_is_read_as_a_json_object() {
        let dir = std::env::temp_dir().join(format!("compactor-cfg3-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("llm.toml");
        std::fs::write(
            &file,
            "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n\
             extra_body = { frequency_penalty = 0.5, top_k = 40, stop = [\"</s>\"] }\n",
        )
        .unwrap();
        let s = Loader {
            file: Some(file),
            ..loader()
        }
        .load()
        .unwrap();
        let extra = serde_json::Value::Object(s.llm.unwrap().extra_body);
        assert_eq!(
            extra,
            serde_json::json!({"frequency_penalty": 0.5, "top_k": 40, "stop": ["</s>"]})
        );
    }

    #[test]
    fn out_of_range_values_name_their_key() {
        let dir = std::env::temp_dir().join(format!("compactor-cfg2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("range.toml");
        std::fs::write(&file, "[budget]\ntrigger = 0.5\ntarget = 0.7\n").unwrap();
        let err = load_error(&file);
        assert_eq!(
            err,
            format!(
                "config file {}: configuration: budget.target: must be in (0, trigger = 0.5], found 0.7",
                file.display()
            )
        );
    }

    /// The error of loading `file` over the built-in defaults.
    fn load_error(file: &Path) -> String {
        Loader {
            file: Some(file.to_path_buf()),
            ..loader()
        }
        .load()
        .unwrap_err()
        .to_string()
    }

    fn file_with(tag: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("compactor-cfg-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("{tag}.toml"));
        std::fs::write(&file, text).unwrap();
        file
    }

    #[test]
    fn every_duration_is_bounded_by_a_day_and_names_its_key() {
        for (text, key) in [
            (
                "[server]\nheader_read_timeout_secs = 9223372036854775807\n",
                "server.header_read_timeout_secs",
            ),
            (
                "[server]\nidle_timeout_secs = 86401\n",
                "server.idle_timeout_secs",
            ),
            (
                "[server]\nbody_timeout_secs = 0\n",
                "server.body_timeout_secs",
            ),
            (
                "[server]\nshutdown_timeout_secs = 100000000\n",
                "server.shutdown_timeout_secs",
            ),
            (
                "[server]\nsummary_budget_secs = 1e300\n",
                "server.summary_budget_secs",
            ),
            (
                "[store]\ntimeout_ms = 9223372036854775807\n",
                "store.timeout_ms",
            ),
            (
                "[store]\nretry_secs = 9223372036854775807\n",
                "store.retry_secs",
            ),
            (
                "[summary]\ncooldown_secs = 1e300\n",
                "summary.cooldown_secs",
            ),
            (
                "[llm]\nprovider = \"openai\"\nmodel = \"m\"\ntimeout_secs = 1e300\n",
                "llm.timeout_secs",
            ),
        ] {
            let file = file_with("secs", text);
            let err = load_error(&file);
            assert!(
                err.starts_with(&format!(
                    "config file {}: configuration: {key}: must be",
                    file.display()
                )),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn an_integer_too_large_for_toml_is_an_error_naming_its_key() {
        let file = file_with(
            "huge",
            "[server] # the service\nrequest_timeout_secs = 18446744073709551615\n",
        );
        let err = load_error(&file);
        assert_eq!(
            err,
            format!(
                "config file {}: configuration: server.request_timeout_secs: \
                 18446744073709551615 is larger than a TOML integer can be \
                 (9223372036854775807); see the key's documented range",
                file.display()
            )
        );
        assert_eq!(
            oversized_integer("a = 1\n[x.y]\nb = -9_223_372_036_854_775_809\nc = 2"),
            Some(("x.y.b".into(), "-9_223_372_036_854_775_809".into()))
        );
        assert_eq!(
            oversized_integer("a = 9223372036854775807\nb = \"99999999999999999999\""),
            None
        );
    }

    #[test]
    fn a_config_files_tiers_win_over_the_implicit_default_preset_but_not_an_explicit_one() {
        let file = file_with("tiers", "[policy]\ntiers = [\"truncate\"]\n");
        let s = Loader {
            file: Some(file.clone()),
            ..loader()
        }
        .load()
        .unwrap();
        assert_eq!(s.policy.tiers, vec!["truncate"]);
        let s = Loader {
            file: Some(file),
            preset: Some("microcompact".into()),
            ..loader()
        }
        .load()
        .unwrap();
        assert_eq!(s.policy.tiers, vec!["microcompact"]);
    }

    #[test]
    fn an_unknown_tier_is_an_error_naming_the_file_even_when_a_preset_overrides_it() {
        let file = file_with("typo", "[policy]\ntiers = [\"microcompakt\"]\n");
        for preset in [None, Some("truncate".to_string())] {
            let err = Loader {
                file: Some(file.clone()),
                preset,
                ..loader()
            }
            .load()
            .unwrap_err()
            .to_string();
            assert_eq!(
                err,
                format!(
                    "config file {}: configuration: policy.tiers: unknown strategy \"microcompakt\" \
                     (known: microcompact, summary, truncate)",
                    file.display()
                )
            );
        }
    }

    #[test]
    fn two_settings_live_side_by_side() {
        let a = Loader {
            preset: Some("truncate".into()),
            ..loader()
        }
        .load()
        .unwrap();
        let b = Loader {
            preset: Some("microcompact".into()),
            ..loader()
        }
        .load()
        .unwrap();
        assert_ne!(a.policy, b.policy);
        assert_eq!(b.microcompact.keep_recent, 3);
        assert_eq!(a.microcompact.keep_recent, 5);
    }

    #[test]
    fn a_user_preset_file_is_found_without_rebuilding() {
        let dir = std::env::temp_dir().join(format!("compactor-presets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("gentle.toml"),
            "description = \"mine\"\n[budget]\ntrigger = 0.9\n",
        )
        .unwrap();
        let s = Loader {
            preset: Some("gentle".into()),
            preset_dirs: vec![dir],
            ..loader()
        }
        .load()
        .unwrap();
        assert_eq!(s.preset, "gentle");
        assert_eq!(s.budget.trigger, 0.9);
        assert_eq!(s.description.as_deref(), Some("mine"));
    }
}
