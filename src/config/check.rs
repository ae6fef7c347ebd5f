//! Checking: [`RawSettings`] -> [`Settings`], every range and tier name, an error naming the
//! key at fault (the `[server]` and `[store]` sections check themselves).

use super::settings::{RawSettings, Settings};
use super::{ConfigError, KNOWN_TIERS, check_secs_f64};

pub(super) fn check(
    raw: RawSettings,
    preset: String,
    extra: &[String],
) -> Result<Settings, ConfigError> {
    check_budget(&raw)?;
    check_tiers(&raw, extra)?;
    check_truncate(&raw)?;
    check_summary(&raw)?;
    check_tables(&raw)?;
    Ok(Settings {
        preset,
        description: raw.description,
        budget: raw.budget,
        policy: raw.policy,
        tiers_from: None,
        tokens: raw.tokens,
        models: raw.models,
        truncate: raw.truncate,
        microcompact: raw.microcompact,
        summary: raw.summary,
        llm: raw.llm,
        server: raw.server,
        store: raw.store,
        recall: raw.recall,
        carry: raw.carry,
    })
}

/// The error for `key`: `message` says what is wrong.
fn invalid(key: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message,
    }
}

/// `[budget]`: trigger in (0, 1], target in (0, trigger], a budget above 0.
fn check_budget(raw: &RawSettings) -> Result<(), ConfigError> {
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
    Ok(())
}

/// `policy.tiers` (not empty) and `policy.optional`: every name a known strategy or one of
/// `extra`.
fn check_tiers(raw: &RawSettings, extra: &[String]) -> Result<(), ConfigError> {
    if raw.policy.tiers.is_empty() {
        return Err(invalid("policy.tiers", "no strategy listed".into()));
    }
    for (key, t) in raw
        .policy
        .tiers
        .iter()
        .map(|t| ("policy.tiers", t))
        .chain(raw.policy.optional.iter().map(|t| ("policy.optional", t)))
    {
        if !KNOWN_TIERS.contains(&t.as_str()) && !extra.contains(t) {
            let known: Vec<&str> = KNOWN_TIERS
                .iter()
                .copied()
                .chain(extra.iter().map(String::as_str))
                .collect();
            return Err(invalid(
                key,
                format!("unknown strategy {t:?} (known: {})", known.join(", ")),
            ));
        }
    }
    Ok(())
}

/// `[truncate]`: digest_share in [0, 1), digest_max_share in [digest_share, 1).
fn check_truncate(raw: &RawSettings) -> Result<(), ConfigError> {
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
    Ok(())
}

/// `[summary]` and `[llm]`, with `policy.cache_ttl_secs`: shares, token counts and durations
/// in range, a model named, a window larger than the summary.
fn check_summary(raw: &RawSettings) -> Result<(), ConfigError> {
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
    check_secs_f64("policy.cache_ttl_secs", raw.policy.cache_ttl_secs, true).map_err(named)?;
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
    Ok(())
}

/// The tables and sections that check themselves: `[tokens.models]`, `[models]`,
/// `[server]`, `[store]`, `[recall]`.
fn check_tables(raw: &RawSettings) -> Result<(), ConfigError> {
    for (pattern, rule) in &raw.tokens.models {
        if let Err(message) = rule.check(pattern) {
            return Err(invalid(&format!("tokens.models.{pattern}"), message));
        }
    }
    for (pattern, entry) in &raw.models {
        if let Err(message) = entry.check(pattern) {
            return Err(invalid(&format!("models.{pattern}"), message));
        }
    }
    if let Err((key, message)) = raw.server.check() {
        return Err(invalid(key, message));
    }
    if let Err((key, message)) = raw.store.check() {
        return Err(invalid(key, message));
    }
    if let Err((key, message)) = raw.recall.check() {
        return Err(invalid(key, message));
    }
    Ok(())
}
