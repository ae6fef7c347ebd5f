//! `compactor config`: the effective settings, one `key = value` line each (valid TOML), with
//! where the value came from: `default`, `file PATH`, `preset NAME`, `environment VAR` or
//! `flag --NAME` ([`compactor::config::Loader::explain`]).

use super::Failure;
use super::output::write_stdout;
use compactor::config::{Explained, Origin};
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `compactor config`: the ones of `compactor serve`, read the same way.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// A config file (TOML), layered over the built-in defaults.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A strategy preset name or path (default: `default`, under the file).
    #[arg(long)]
    strategy: Option<String>,
    /// The address `compactor serve --listen` would bind (shown as `server.listen`).
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
}

/// Prints the effective settings and their origins.
pub(crate) fn run(args: Args) -> Result<ExitCode, Failure> {
    let loader = compactor::config::Loader {
        file: args.config,
        preset: args.strategy,
        ..compactor::config::Loader::from_environment()
    };
    let (settings, mut keys) = loader
        .explain()
        .map_err(|e| Failure::Unreadable(e.into()))?;
    if let Some(listen) = args.listen {
        for k in keys.iter_mut().filter(|k| k.key == "server.listen") {
            k.value = Value::String(listen.to_string());
            k.origin = Origin::Flag("--listen".into());
        }
    }
    let mut text = format!(
        "# compactor config: the effective settings, each with where it came from\n\
         # preset: {} ({}); tier list named in reports: [{}]\n",
        settings.preset,
        if loader.preset.is_some() {
            "--strategy"
        } else {
            "implicit default"
        },
        settings.label(),
    );
    text.push_str(&render(&keys));
    write_stdout(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// One line per key: `key = value  # origin`; a key that is not set is a comment
/// (`# llm: not set  # default`).
fn render(keys: &[Explained]) -> String {
    let mut out = String::new();
    for k in keys {
        match toml_value(&k.value) {
            Some(v) => out.push_str(&format!("{} = {v}  # {}\n", k.key, k.origin)),
            None => out.push_str(&format!("# {}: not set  # {}\n", k.key, k.origin)),
        }
    }
    out
}

/// `v` written as a TOML value (`None` for `null`, which TOML cannot hold). JSON strings,
/// numbers, booleans and arrays of them are TOML as JSON writes them; a table is inline.
fn toml_value(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => return None,
        Value::Array(items) => {
            let items: Vec<String> = items.iter().filter_map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .filter_map(|(k, v)| {
                    let key = Value::String(k.clone()).to_string();
                    toml_value(v).map(|v| format!("{key} = {v}"))
                })
                .collect();
            if fields.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", fields.join(", "))
            }
        }
        other => other.to_string(),
    })
}
