//! The start-up line: what the service does, as configured (where it listens, where it
//! forwards, the budget and its trigger and target, the tiers, the summary model, the store,
//! whether a token is required), one INFO line when it starts listening.

use super::AppState;
use crate::config::Settings;
use crate::config::origin::redacted_url;

/// The fields of the start-up line, each `key=value` (a value with spaces quoted by the log
/// format): `budget`, `trigger` and `target` in the model's tokens of the configured budget.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Startup {
    /// `anthropic_upstream`.
    pub anthropic: String,
    /// `openai_upstream`.
    pub openai: String,
    /// `gemini_upstream`.
    pub gemini: String,
    /// The budget in tokens (`[budget]`).
    pub budget: usize,
    /// `budget.trigger` x budget: bodies over it are compacted.
    pub trigger: usize,
    /// `budget.target` x budget: how far they are compacted.
    pub target: usize,
    /// `microcompact+summary+truncate [default]`: the tiers and the name reports give them.
    pub tiers: String,
    /// The summary model (`openai any at http://127.0.0.1:8080`), or `none` (with the tier
    /// skipped when the tiers list it).
    pub llm: String,
    /// `in-process`, or `redis redis://host:6379` (no password).
    pub store: String,
    /// `token` (`auth_token_env`) or `none`.
    pub auth: &'static str,
}

impl Startup {
    /// What `settings` configure.
    pub(crate) fn of(settings: &Settings, token: bool) -> Startup {
        let budget = settings.budget.budget(None);
        let share = |f: f64| (budget as f64 * f) as usize;
        let summary = settings.policy.tiers.iter().any(|t| t == "summary");
        let llm = match &settings.llm {
            Some(l) => {
                let provider = serde_json::to_value(l.provider)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                format!("{provider} {} at {}", l.model, l.base())
            }
            None if summary => "none (the summary tier is skipped)".into(),
            None => "none".into(),
        };
        let store = match settings
            .store
            .redis_url
            .as_deref()
            .filter(|u| !u.is_empty())
        {
            Some(url) => format!("redis {}", redacted_url(url)),
            None => "in-process".into(),
        };
        Startup {
            anthropic: settings.server.anthropic_upstream.clone(),
            openai: settings.server.openai_upstream.clone(),
            gemini: settings.server.gemini_upstream.clone(),
            budget,
            trigger: share(settings.budget.trigger),
            target: share(settings.budget.target),
            tiers: format!("{} [{}]", settings.policy.tiers.join("+"), settings.label()),
            llm,
            store,
            auth: if token { "token" } else { "none" },
        }
    }
}

/// Logs the start-up line of `state` listening on `addr`.
pub(crate) fn log(state: &AppState, addr: std::net::SocketAddr) {
    let s = Startup::of(state.settings(), state.inner.auth_token.is_some());
    tracing::info!(
        addr = %addr,
        anthropic_upstream = %s.anthropic,
        openai_upstream = %s.openai,
        gemini_upstream = %s.gemini,
        budget = s.budget,
        trigger = s.trigger,
        target = s.target,
        tiers = %s.tiers,
        llm = %s.llm,
        store = %s.store,
        auth = %s.auth,
        "compactor serve: listening on {addr}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_budget_tiers_and_store_without_a_password() {
        let mut s = Settings::default();
        s.budget.tokens = 40_000;
        s.store.redis_url = Some("redis://app:s3cret@127.0.0.1:6379/0".into());
        s.tiers_from = Some("c.toml".into());
        s.policy.tiers = vec!["microcompact".into(), "truncate".into()];
        let line = Startup::of(&s, true);
        assert_eq!(
            line,
            Startup {
                anthropic: "https://api.anthropic.com".into(),
                openai: "https://api.openai.com".into(),
                gemini: "https://generativelanguage.googleapis.com".into(),
                budget: 40_000,
                trigger: 32_000,
                target: 24_000,
                tiers: "microcompact+truncate [c.toml]".into(),
                llm: "none".into(),
                store: "redis redis://app:***@127.0.0.1:6379/0".into(),
                auth: "token",
            }
        );
    }
}
