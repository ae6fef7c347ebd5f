//! `compactor serve`: the HTTP service (the JSON API and the compacting proxy).

use super::Failure;
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `compactor serve`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// A config file (TOML), layered over the built-in defaults; its `[server]` section
    /// sets the address, limits and upstreams.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The strategy preset of the proxy and the default of the API.
    #[arg(long)]
    strategy: Option<String>,
    /// Address to bind (overrides `server.listen`, default 127.0.0.1:8787).
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
}

/// Serves until stopped.
pub(crate) fn run(args: Args) -> Result<ExitCode, Failure> {
    serve(args.config, args.strategy, args.listen)
}

fn serve(
    config: Option<PathBuf>,
    strategy: Option<String>,
    listen: Option<std::net::SocketAddr>,
) -> Result<ExitCode, Failure> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,tower_http=info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: a log redirected to a file or a pipe stays plain text
        // (and `NO_COLOR` turns it off on a terminal too).
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        .init();
    let loader = compactor::config::Loader {
        file: config,
        preset: strategy,
        ..compactor::config::Loader::from_environment()
    };
    let state =
        compactor::server::AppState::new(loader).map_err(|e| Failure::Unreadable(e.into()))?;
    let addr = match listen {
        Some(a) => a,
        None => state
            .settings()
            .server
            .listen
            .parse()
            .context("server.listen")
            .map_err(Failure::Unreadable)?,
    };
    compactor::server::exposure(&state, addr)
        .map_err(|e| Failure::Unreadable(anyhow::anyhow!(e)))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
        .map_err(Failure::Invalid)?;
    runtime
        .block_on(compactor::server::serve(state, addr))
        .with_context(|| format!("serving on {addr}"))
        .map_err(Failure::Invalid)?;
    Ok(ExitCode::SUCCESS)
}
