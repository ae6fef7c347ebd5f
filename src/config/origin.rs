//! Where each setting came from: the layers of [`Loader::load`] read one by one (each source
//! on its own, through the `config` crate), and the last layer that sets a key is its origin.
//!
//! ```text
//! built-in defaults -> [implicit `default` preset] -> --config FILE -> [--strategy preset]
//!   -> COMPACTOR__… environment -> flags (the CLI's own, marked by its caller)
//! ```
//! [`Loader::explain`] gives every key of the effective [`Settings`] with its value and its
//! [`Origin`] (`compactor config` prints them); [`Loader::load`] names the layer that set
//! `[policy] tiers` in [`Settings::tiers_from`] when it is not the preset.

use super::{ConfigError, DEFAULT_CONFIG, Loader, Settings};
use config::{Config, File, FileFormat};
use serde_json::Value;
use std::path::PathBuf;

/// Where a value of the effective settings came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Built in: `config/compactor.toml`, or the key's own default when no source sets it.
    Default,
    /// The `--config` file.
    File(PathBuf),
    /// A strategy preset (`--strategy NAME`, or the implicit `default` one).
    Preset(String),
    /// An environment variable (`COMPACTOR__BUDGET__TRIGGER`).
    Environment(String),
    /// A command-line flag (`--listen`).
    Flag(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File(path) => write!(f, "file {}", path.display()),
            Origin::Preset(name) => write!(f, "preset {name}"),
            Origin::Environment(var) => write!(f, "environment {var}"),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// One key of the effective settings: its dotted path (TOML keys, quoted where they must be:
/// `tokens.models."claude-*".ratio`), its value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    /// The dotted key.
    pub key: String,
    /// The value in force (`null` for an optional key that is not set).
    pub value: Value,
    /// The source that set it.
    pub origin: Origin,
}

/// One source of settings, read alone: where it is and what it sets.
pub(super) struct Layer {
    origin: LayerOrigin,
    value: Value,
}

/// A layer's origin; the environment names its variable per key.
enum LayerOrigin {
    Fixed(Origin),
    /// Lower-case key path -> the variable that set it.
    Environment(Vec<(Vec<String>, String)>),
}

impl Layer {
    /// The origin of `path` when this layer sets it (or a table above it: a value set as a
    /// whole, e.g. an environment list).
    fn sets(&self, path: &[String]) -> Option<Origin> {
        let mut at = &self.value;
        for segment in path {
            match at {
                Value::Object(map) => at = map.get(segment)?,
                // A value set whole above the key: this layer sets it.
                _ => break,
            }
        }
        match &self.origin {
            LayerOrigin::Fixed(o) => Some(o.clone()),
            LayerOrigin::Environment(vars) => {
                let var = vars
                    .iter()
                    .find(|(p, _)| path.starts_with(p) || p.starts_with(path))
                    .map(|(_, var)| var.clone())
                    .unwrap_or_else(|| format!("COMPACTOR__{}", path.join("__").to_uppercase()));
                Some(Origin::Environment(var))
            }
        }
    }
}

/// A source's content as JSON, read by the `config` crate alone.
fn read(
    builder: config::ConfigBuilder<config::builder::DefaultState>,
) -> Result<Value, ConfigError> {
    Ok(builder.build()?.try_deserialize::<Value>()?)
}

impl Loader {
    /// The layers of [`Loader::load`] in merge order, each read alone: the built-in defaults,
    /// the preset (under the file when implicit, over it when asked for), the file, the
    /// environment (`env_vars`: the `COMPACTOR__…` names set).
    pub(super) fn layers(
        &self,
        preset_name: &str,
        preset_text: &str,
        env_vars: &[String],
    ) -> Result<Vec<Layer>, ConfigError> {
        let fixed = |o: Origin, v: Value| Layer {
            origin: LayerOrigin::Fixed(o),
            value: v,
        };
        let toml =
            |text: &str| read(Config::builder().add_source(File::from_str(text, FileFormat::Toml)));
        let mut layers = vec![fixed(Origin::Default, toml(DEFAULT_CONFIG)?)];
        let preset = fixed(Origin::Preset(preset_name.to_string()), toml(preset_text)?);
        let mut preset = Some(preset);
        if self.preset.is_none() {
            layers.extend(preset.take());
        }
        if let Some(path) = &self.file {
            let value = read(Config::builder().add_source(File::from(path.as_path())))?;
            layers.push(fixed(Origin::File(path.clone()), value));
        }
        // A config given as text (the Python package's dict), after the file as it is read.
        if let Some(t) = &self.text {
            let value =
                read(Config::builder().add_source(File::from_str(&t.json, FileFormat::Json)))?;
            layers.push(fixed(Origin::File(t.name.clone().into()), value));
        }
        layers.extend(preset);
        if !env_vars.is_empty() {
            let value = read(Config::builder().add_source(super::loader::environment()))?;
            let vars = env_vars
                .iter()
                .map(|var| {
                    let path = var
                        .trim_start_matches("COMPACTOR__")
                        .split("__")
                        .map(str::to_lowercase)
                        .collect();
                    (path, var.clone())
                })
                .collect();
            layers.push(Layer {
                origin: LayerOrigin::Environment(vars),
                value,
            });
        }
        Ok(layers)
    }

    /// Every key of the effective settings with its value and origin, in the settings' order
    /// (`[budget]` first). Flags are the caller's: it marks the keys it set
    /// ([`Origin::Flag`]). A `[store] redis_url` shows no password.
    ///
    /// # Errors
    /// [`ConfigError`] as [`Loader::load`] gives it.
    pub fn explain(&self) -> Result<(Settings, Vec<Explained>), ConfigError> {
        let settings = self.load()?;
        let (preset_name, preset_text) =
            self.find_preset(self.preset.as_deref().unwrap_or("default"))?;
        let layers = self.layers(&preset_name, &preset_text, &self.env_vars())?;
        let mut value = serde_json::to_value(&settings).map_err(|e| ConfigError::Invalid {
            key: "settings".into(),
            message: e.to_string(),
        })?;
        if let Some(map) = value.as_object_mut() {
            // Not keys of a file: the preset is `--strategy`, the label is derived.
            for derived in ["preset", "tiers_from"] {
                map.shift_remove(derived);
            }
        }
        if let Some(url) = value
            .pointer_mut("/store/redis_url")
            .and_then(|v| v.as_str().map(redacted_url))
        {
            value["store"]["redis_url"] = Value::String(url);
        }
        let mut out = Vec::new();
        leaves(&value, &mut Vec::new(), &mut |path, v| {
            let origin = layers
                .iter()
                .rev()
                .find_map(|l| l.sets(path))
                .unwrap_or(Origin::Default);
            out.push(Explained {
                key: dotted(path),
                value: v.clone(),
                origin,
            });
        });
        Ok((settings, out))
    }
}

/// What `[policy] tiers` is named by in reports when a layer other than the preset set it:
/// the config file's name (`c.toml`) or `environment`; `None` when it is the preset's.
pub(super) fn tiers_from(layers: &[Layer]) -> Option<String> {
    let path = ["policy".to_string(), "tiers".to_string()];
    match layers.iter().rev().find_map(|l| l.sets(&path))? {
        Origin::File(file) => Some(
            file.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| file.display().to_string()),
        ),
        Origin::Environment(_) => Some("environment".into()),
        Origin::Default | Origin::Preset(_) | Origin::Flag(_) => None,
    }
}

/// Calls `f` with the path and value of every leaf of `v` (a scalar, an array, an empty
/// table, or `null`).
fn leaves(v: &Value, path: &mut Vec<String>, f: &mut impl FnMut(&[String], &Value)) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, item) in map {
                path.push(k.clone());
                leaves(item, path, f);
                path.pop();
            }
        }
        _ => f(path, v),
    }
}

/// A TOML dotted key: bare segments where TOML allows them, quoted elsewhere.
fn dotted(path: &[String]) -> String {
    path.iter()
        .map(|s| {
            let bare = !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if bare {
                s.clone()
            } else {
                Value::String(s.clone()).to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// `url` with the password of its user part replaced by `***`
/// (`redis://user:***@host:6379`); unchanged when it has none.
pub fn redacted_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let (head, rest) = url.split_at(scheme_end);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some((user_info, host)) = authority.rsplit_once('@') else {
        return url.to_string();
    };
    let Some((user, _password)) = user_info.split_once(':') else {
        return url.to_string();
    };
    format!("{head}{user}:***@{host}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_loses_its_password_and_keeps_the_rest() {
        assert_eq!(
            redacted_url("redis://app:s3cret@10.0.0.5:6379/2"),
            "redis://app:***@10.0.0.5:6379/2"
        );
        assert_eq!(
            redacted_url("redis://:s3cret@h:6379"),
            "redis://:***@h:6379"
        );
        assert_eq!(
            redacted_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(redacted_url("redis://app@h:6379"), "redis://app@h:6379");
        assert_eq!(redacted_url("not a url"), "not a url");
    }

    #[test]
    fn keys_are_quoted_only_where_toml_needs_it() {
        let path = ["tokens", "models", "claude-*", "ratio"].map(String::from);
        assert_eq!(dotted(&path), "tokens.models.\"claude-*\".ratio");
    }
}
