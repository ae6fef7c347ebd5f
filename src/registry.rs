//! Strategy registry: tier name -> constructor, so a tier list (`[policy] tiers`) can name any
//! registered strategy, a user's own included.
//!
//! ```text
//! Settings.policy.tiers ["microcompact", "mine", "truncate"]
//!   -> Registry::build(name, settings)   Ready(Box<dyn Strategy>) | Skipped(why) | error
//!   -> Compactor tiers, in that order
//! ```
//!
//! [`Registry::builtin`] holds `truncate`, `microcompact` and `summary` (which needs `[llm]`:
//! without it, left out with the reason on the report where `[policy] optional` lists it, and
//! a configuration error naming the `llm` key where it does not).

use crate::config::{ConfigError, Settings};
use crate::strategy::Strategy;
use crate::strategy::microcompact::Microcompact;
use crate::strategy::summary::{DEFAULT_PROMPT, Summary};
use crate::strategy::truncate::Truncate;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a constructor made of the settings.
#[non_exhaustive]
pub enum Built {
    /// A strategy ready to run as a tier.
    Ready(Box<dyn Strategy>),
    /// The tier cannot run with these settings: left out when `[policy] optional` lists it
    /// (this text goes on every report), else a configuration error on `policy.tiers`.
    Skipped(String),
    /// The tier cannot run without a setting the settings lack: left out when `[policy]
    /// optional` lists it (`summary tier skipped: no [llm] configured` on every report), else
    /// a configuration error on `key` saying `reason` and `hint`.
    Needs {
        /// The dotted config key that is missing (`llm`).
        key: String,
        /// What is missing, in words (`no [llm] configured`).
        reason: String,
        /// How to give it.
        hint: String,
    },
}

/// Builds one strategy from the settings in force.
///
/// # Errors
/// [`ConfigError`] when the settings are unusable for it (the caller names the tier).
pub type Constructor = Arc<dyn Fn(&Settings) -> Result<Built, ConfigError> + Send + Sync>;

/// Names to constructors. Cheap to clone.
#[derive(Clone, Default)]
pub struct Registry {
    entries: BTreeMap<String, Constructor>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.entries.keys()).finish()
    }
}

impl Registry {
    /// A registry with nothing in it.
    pub fn empty() -> Registry {
        Registry::default()
    }

    /// The built-in strategies: `truncate`, `microcompact`, `summary`.
    pub fn builtin() -> Registry {
        let mut r = Registry::empty();
        r.register("truncate", |s: &Settings| {
            Ok(Built::Ready(Box::new(Truncate {
                config: s.truncate.clone(),
            })))
        });
        r.register("microcompact", |s: &Settings| {
            Ok(Built::Ready(Box::new(Microcompact {
                config: s.microcompact.clone(),
            })))
        });
        r.register("summary", build_summary);
        r
    }

    /// Registers (or replaces) the constructor of `name`.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        constructor: impl Fn(&Settings) -> Result<Built, ConfigError> + Send + Sync + 'static,
    ) -> &mut Registry {
        self.entries.insert(name.into(), Arc::new(constructor));
        self
    }

    /// The registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Builds the strategy registered as `name`.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] on key `policy.tiers` for a name nobody registered, or the
    /// constructor's own error.
    pub fn build(&self, name: &str, settings: &Settings) -> Result<Built, ConfigError> {
        match self.entries.get(name) {
            Some(make) => make(settings),
            None => Err(ConfigError::Invalid {
                key: "policy.tiers".into(),
                message: format!(
                    "unknown strategy {name:?} (registered: {})",
                    self.names().collect::<Vec<_>>().join(", ")
                ),
            }),
        }
    }
}

/// The tiers [`Registry::tiers`] built from the settings.
pub struct Tiers {
    /// The strategies that run, in `[policy] tiers` order.
    pub ready: Vec<Box<dyn Strategy>>,
    /// One note per optional tier left out (`summary tier skipped: no [llm] configured`).
    pub skipped: Vec<String>,
}

impl Registry {
    /// The strategies of `[policy] tiers`, in order, and the notes of the tiers left out: a
    /// tier that cannot run here is left out (its note says why) when `[policy] optional`
    /// lists it, and refused otherwise, so a tier the user asked for is run or refused, never
    /// silently replaced.
    ///
    /// # Errors
    /// [`ConfigError`] for a name nobody registered, a tier that cannot be built, or one that
    /// cannot run here and is not optional (`llm: the summary tier cannot run: no [llm]
    /// configured; …`).
    pub fn tiers(&self, settings: &Settings) -> Result<Tiers, ConfigError> {
        let mut tiers: Vec<Box<dyn Strategy>> = Vec::new();
        let mut skipped = Vec::new();
        for name in &settings.policy.tiers {
            let (note, refusal) = match self.build(name, settings)? {
                Built::Ready(s) => {
                    tiers.push(s);
                    continue;
                }
                Built::Skipped(why) => {
                    let refusal = ConfigError::Invalid {
                        key: "policy.tiers".into(),
                        message: format!("the {name} tier cannot run: {why}"),
                    };
                    (why, refusal)
                }
                Built::Needs { key, reason, hint } => {
                    let refusal = ConfigError::Invalid {
                        key,
                        message: format!("the {name} tier cannot run: {reason}; {hint}"),
                    };
                    (format!("{name} tier skipped: {reason}"), refusal)
                }
            };
            if settings.policy.optional.iter().any(|o| o == name) {
                skipped.push(note);
            } else {
                return Err(refusal);
            }
        }
        Ok(Tiers {
            ready: tiers,
            skipped,
        })
    }
}

/// `summary`: needs `[llm]`; its prompt is `summary.prompt_file` or the built-in one.
fn build_summary(settings: &Settings) -> Result<Built, ConfigError> {
    let Some(llm) = &settings.llm else {
        return Ok(Built::Needs {
            key: "llm".into(),
            reason: "no [llm] configured".into(),
            hint: "add an [llm] section (provider, model, base_url; see config/compactor.toml) \
                   to the config file, or set COMPACTOR__LLM__PROVIDER and \
                   COMPACTOR__LLM__MODEL; or use the default preset, which leaves summary out \
                   without an LLM ([policy] optional)"
                .into(),
        });
    };
    let summarizer = crate::llm::from_config(llm).map_err(|e| ConfigError::Invalid {
        key: "llm".into(),
        message: e.to_string(),
    })?;
    Ok(Built::Ready(Box::new(Summary::new(
        summarizer,
        settings.summary.clone(),
        summary_prompt(&settings.summary.prompt_file)?,
        settings.truncate.clone(),
    ))))
}

/// The summary prompt: the file named by `summary.prompt_file`, else the built-in one.
fn summary_prompt(file: &str) -> Result<String, ConfigError> {
    if file.trim().is_empty() {
        return Ok(DEFAULT_PROMPT.to_string());
    }
    std::fs::read_to_string(file).map_err(|e| ConfigError::Invalid {
        key: "summary.prompt_file".into(),
        message: format!("cannot read {file}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_name_is_an_error_naming_the_registered_ones() {
        let Err(ConfigError::Invalid { key, message }) =
            Registry::builtin().build("shout", &Settings::default())
        else {
            panic!("expected an error");
        };
        assert_eq!(key, "policy.tiers");
        assert_eq!(
            message,
            "unknown strategy \"shout\" (registered: microcompact, summary, truncate)"
        );
    }

    #[test]
    fn summary_without_an_llm_is_left_out_only_where_optional() {
        let mut s = Settings {
            llm: None,
            ..Settings::default()
        };
        assert_eq!(s.policy.optional, vec!["summary"]);
        let tiers = Registry::builtin().tiers(&s).unwrap();
        assert_eq!(tiers.ready.len(), 2);
        assert_eq!(
            tiers.skipped,
            vec!["summary tier skipped: no [llm] configured"]
        );
        s.policy.optional.clear();
        let Err(ConfigError::Invalid { key, message }) = Registry::builtin().tiers(&s) else {
            panic!("expected a refusal");
        };
        assert_eq!(key, "llm");
        assert!(
            message.starts_with("the summary tier cannot run: no [llm] configured; add an [llm]"),
            "{message}"
        );
    }

    #[test]
    fn summary_without_an_llm_needs_the_llm_key() {
        let s = Settings {
            llm: None,
            ..Settings::default()
        };
        let Ok(Built::Needs { key, reason, .. }) = Registry::builtin().build("summary", &s) else {
            panic!("expected a missing key");
        };
        assert_eq!(
            (key.as_str(), reason.as_str()),
            ("llm", "no [llm] configured")
        );
    }
}
