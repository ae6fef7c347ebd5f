//! Strategy registry: tier name -> constructor, so a tier list (`[policy] tiers`) can name any
//! registered strategy, a user's own included.
//!
//! ```text
//! Settings.policy.tiers ["microcompact", "mine", "truncate"]
//!   -> Registry::build(name, settings)   Ready(Box<dyn Strategy>) | Skipped(why) | error
//!   -> Compactor tiers, in that order
//! ```
//!
//! [`Registry::builtin`] holds `truncate`, `microcompact` and `summary` (skipped, with the
//! reason on the report, when no `[llm]` is configured).

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
    /// The tier cannot run with these settings; the reason goes on every report
    /// (`summary tier skipped: no [llm] configured`).
    Skipped(String),
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

/// `summary`: needs `[llm]`; its prompt is `summary.prompt_file` or the built-in one.
fn build_summary(settings: &Settings) -> Result<Built, ConfigError> {
    let Some(llm) = &settings.llm else {
        return Ok(Built::Skipped(
            "summary tier skipped: no [llm] configured".to_string(),
        ));
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
    fn summary_without_an_llm_is_skipped_with_the_reason() {
        let s = Settings {
            llm: None,
            ..Settings::default()
        };
        let Ok(Built::Skipped(why)) = Registry::builtin().build("summary", &s) else {
            panic!("expected a skip");
        };
        assert_eq!(why, "summary tier skipped: no [llm] configured");
    }
}
