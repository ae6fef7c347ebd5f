//! Settings: built-in defaults -> config file -> strategy preset -> environment -> flags.
//!
//! Read with the `config` crate into [`RawSettings`] (every section `deny_unknown_fields`, so a
//! misspelt key is an error naming it), then checked into [`Settings`]. No globals: two
//! `Settings` can live side by side in one process (the A/B command runs several at once).
//!
//! ```text
//! settings.rs   the settings as written (RawSettings) and as checked (Settings): data only
//! check.rs      RawSettings -> Settings: every range and tier name, the key at fault
//! loader.rs     Loader: the layers (defaults, file, preset, environment), each also alone
//! origin.rs     where each key came from (Loader::explain, `compactor config`)
//! server.rs     [server]
//! store.rs      [store]
//! recall.rs     [recall]
//! ```
//!
//! This file holds what they share: the error, the built-in sources and the duration bounds.

pub mod recall;
pub mod server;
pub mod store;
pub use recall::RecallSettings;
pub use server::ServerSettings;
pub use store::StoreSettings;

mod check;
mod loader;
pub mod origin;
mod settings;
pub use loader::{ConfigText, Loader};
pub use origin::{Explained, Origin};
pub use settings::{BudgetSettings, PolicySettings, RawSettings, Settings, TokenSettings};

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

/// The built-in tier names (`Registry::builtin`); a [`Loader`] accepts more with
/// [`Loader::accepting`].
pub const KNOWN_TIERS: &[&str] = &["microcompact", "summary", "truncate"];
