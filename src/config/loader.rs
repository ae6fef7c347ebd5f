//! The loader: where settings come from and in which order their layers merge (built-in
//! defaults, config file, preset, environment), each source also checked alone so an error
//! names the one at fault; and `Settings::default()`, the built-in files alone.

use super::check::check;
use super::server::ServerSettings;
use super::settings::{
    BudgetSettings, PolicySettings, RawSettings, Settings, TokenSettings, learned_bytes,
};
use super::store::StoreSettings;
use super::{BUILTIN_PRESETS, ConfigError, DEFAULT_CONFIG, KNOWN_TIERS};
use crate::strategy::microcompact::MicrocompactConfig;
use crate::strategy::summary::SummaryConfig;
use crate::strategy::truncate::TruncateConfig;
use crate::tokens::Tokenizer;
use config::{Config, Environment, File, FileFormat};
use std::path::{Path, PathBuf};

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
            context_window: 0,
            reserve_output: 20_000,
            tokens: 0,
            trigger: 0.8,
            target: 0.6,
        },
        policy: PolicySettings {
            tiers: KNOWN_TIERS.iter().map(|s| s.to_string()).collect(),
            optional: vec!["summary".to_string()],
            remember: true,
            cache_ttl_secs: 300.0,
        },
        tiers_from: None,
        tokens: TokenSettings {
            tokenizer: Tokenizer::default(),
            model: String::new(),
            models: Default::default(),
            learn: true,
            learned_bytes: learned_bytes(),
        },
        models: Default::default(),
        truncate: TruncateConfig::default(),
        microcompact: MicrocompactConfig::default(),
        summary: SummaryConfig::default(),
        llm: None,
        server: ServerSettings::default(),
        store: StoreSettings::default(),
        recall: crate::config::RecallSettings::default(),
        carry: crate::guard::ContextRules::default(),
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
    /// A config given as JSON text rather than a file (the Python package's dict config),
    /// layered right after [`Loader::file`] and named by its own name in errors.
    pub text: Option<ConfigText>,
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

/// A config given as text (JSON, the sections and keys of a config file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigText {
    /// How errors name it (`config dict`).
    pub name: String,
    /// The JSON text.
    pub json: String,
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
            text: None,
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
    /// naming its source ([`ConfigError::In`]) even where a later source overrides it; a
    /// field a source alone lacks is not its fault (a partial `[llm]` in the file completed
    /// by `COMPACTOR__LLM__PROVIDER`): the merged settings must have it, else the error names
    /// every source. [`Settings::tiers_from`] names the layer that set `[policy] tiers` when
    /// it is not the preset.
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
        let mut builder = defaults();
        if self.preset.is_none() {
            builder = builder.add_source(preset());
        }
        for (_, source) in self.given() {
            builder = builder.add_source(vec![source]);
        }
        if self.preset.is_some() {
            builder = builder.add_source(preset());
        }
        let env_vars = self.env_vars();
        if !env_vars.is_empty() {
            builder = builder.add_source(environment());
        }
        let merged = builder
            .build()
            .and_then(|c| c.try_deserialize::<RawSettings>())
            .map_err(ConfigError::from)
            .and_then(|raw| check(raw, preset_name.clone(), &self.strategies));
        // Each source alone: the first one at fault names itself. A field a source alone
        // lacks (`[llm]` with only `timeout_secs`) is no fault of its own: another source may
        // give it, and the merged settings are what must be whole.
        let mut alone: Vec<(String, config::ConfigBuilder<config::builder::DefaultState>)> =
            Vec::new();
        for (origin, source) in self.given() {
            alone.push((origin, defaults().add_source(vec![source])));
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
        let origins: Vec<String> = alone.iter().map(|(o, _)| o.clone()).collect();
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
                    || matches!(e, ConfigError::Invalid { key, .. }
                        if key == "policy.tiers" || key == "policy.optional")
            };
            let missing = matches!(
                &one,
                Err(ConfigError::Load(config::ConfigError::NotFound(_)))
            );
            if let Err(e) = one
                && !missing
                && (merged.is_err() || own_fault(&e))
            {
                return Err(ConfigError::In {
                    origin,
                    source: Box::new(e),
                });
            }
        }
        // A field no source gives: the merged settings' error names every source.
        let mut settings = merged.map_err(|e| match e {
            ConfigError::Load(config::ConfigError::NotFound(_)) => ConfigError::In {
                origin: format!("the merged configuration ({})", origins.join(", ")),
                source: Box::new(e),
            },
            other => other,
        })?;
        settings.tiers_from =
            super::origin::tiers_from(&self.layers(&preset_name, &preset_text, &env_vars)?);
        Ok(settings)
    }

    /// The config sources given besides the presets, in order, each with the name errors use:
    /// the file, then the text.
    fn given(&self) -> Vec<(String, Box<dyn config::Source + Send + Sync>)> {
        let mut out: Vec<(String, Box<dyn config::Source + Send + Sync>)> = Vec::new();
        if let Some(f) = &self.file {
            out.push((
                format!("config file {}", f.display()),
                Box::new(File::from(f.as_path()).required(true)),
            ));
        }
        if let Some(t) = &self.text {
            out.push((
                t.name.clone(),
                Box::new(File::from_str(&t.json, FileFormat::Json)),
            ));
        }
        out
    }

    /// The `COMPACTOR__…` environment variables set (none unless [`Loader::env`]).
    pub(super) fn env_vars(&self) -> Vec<String> {
        if !self.env {
            return Vec::new();
        }
        let mut vars: Vec<String> = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .filter(|k| k.starts_with("COMPACTOR__"))
            .collect();
        vars.sort();
        vars
    }

    pub(super) fn find_preset(&self, name: &str) -> Result<(String, String), ConfigError> {
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
pub(super) fn environment() -> Environment {
    Environment::with_prefix("COMPACTOR")
        .separator("__")
        .try_parsing(true)
        .list_separator(",")
        .with_list_parse_key("policy.tiers")
        .with_list_parse_key("policy.optional")
        .with_list_parse_key("microcompact.compactable_tools")
}

#[cfg(test)]
mod tests;
