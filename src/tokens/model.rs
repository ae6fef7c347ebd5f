//! Tokens of the *target model*: which counter a model's budget is measured with, and the
//! calibration that turns the counter's tokens into the model's.
//!
//! ```text
//! model name ("claude-opus-4-6", from the request body, --model or [tokens] model)
//!   -> rule: the most specific matching pattern of [tokens.models]  ("claude-*")
//!        exact     (OpenAI: o200k_base / cl100k_base, ratio 1, overhead 0)
//!        calibrated (Claude, any model without a public tokenizer: ratio x o200k + overhead)
//!   -> learned: a running ratio from the provider's own `usage` (the proxy), when there is one
//!   -> ModelTokens { ratio, overhead, tool_call, tokenizer }:
//!        model tokens = ceil((counted + calls x ceil(tool_call / ratio)) x ratio) + overhead
//!        (the per-call part is added by the counter `ModelTokens::framed` returns)
//! ```
//!
//! Shipped defaults (`config/compactor.toml`): OpenAI model families exact in their own
//! vocabulary; `claude-*` ratio 1.105, tool_call 172, overhead 0: what `compactor calibrate`
//! finds on the corpus Claude Code logs (the six `cc_*` logs pooled, 338 requests); it replays
//! every request within 5% (tests/all/budgets.rs), while a ratio alone (1.32; 1.35 on the
//! largest log, `cc_spotter_fa812bfe`, the default before) misses requests that follow large
//! file reads by up to 8.6%. The logs cannot separate
//! a per-request constant from the system prompt and tools they do not hold, and what a
//! request carries is counted in it, so overhead is 0; Anthropic's tool-use system prompt (346
//! tokens for Claude 4 models) comes on top for requests with tools: set an overhead for that
//! margin.
//!
//! The counter's per-block cache stays the hot path: the ratio scales the *cached* counts of
//! the chosen vocabulary, nothing is tokenized again.

use super::framed::FramedCounter;
use super::{TokenCounter, Tokenizer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One `[tokens.models."PATTERN"]` entry: how to count a family of models.
///
/// `PATTERN` is a model name where `*` matches any run of characters (`claude-*`, `gpt-4o*`);
/// matching ignores ASCII case. When several patterns match, the one with the most literal
/// characters wins (`claude-3-haiku*` over `claude-*`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelRule {
    /// The vocabulary counted with (default `o200k_base`).
    #[serde(default)]
    pub tokenizer: Tokenizer,
    /// Model tokens per counted token (1.0 = the vocabulary is the model's own).
    #[serde(default = "one")]
    pub ratio: f64,
    /// Model tokens per request that the count never sees (framing, a provider-added system
    /// prompt), added once per request.
    #[serde(default)]
    pub overhead: usize,
    /// Model tokens per tool_use block that the count of the block's name and input never sees
    /// (the provider's rendering of a call and of its result), added per call the request holds.
    /// 0 = none. Fitted by `compactor calibrate` (its `tool_call` figure).
    #[serde(default)]
    pub tool_call: usize,
}

fn one() -> f64 {
    1.0
}

impl ModelRule {
    /// Checks the rule of `pattern`: `ratio` finite and in `[0.25, 8]` (a wider factor is a
    /// typo, not a tokenizer), `pattern` not empty.
    ///
    /// # Errors
    /// The message for `tokens.models.PATTERN.ratio` (or the pattern itself).
    pub fn check(&self, pattern: &str) -> Result<(), String> {
        if pattern.trim().is_empty() {
            return Err("an empty model pattern".into());
        }
        if !(self.ratio.is_finite() && (0.25..=8.0).contains(&self.ratio)) {
            return Err(format!("ratio must be in [0.25, 8], found {}", self.ratio));
        }
        Ok(())
    }
}

/// Where the ratio in force comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RatioSource {
    /// No rule matched, or no model is known: the counter's tokens as they are.
    Counter,
    /// A `[tokens.models]` rule.
    Config,
    /// Learned from the provider's `usage` (see [`Calibration::observe`]).
    Learned,
}

/// The counting basis of one model: what a budget in that model's tokens means for the counter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelTokens {
    /// The model name, when known.
    pub model: Option<String>,
    /// The pattern of the rule applied, if any.
    pub pattern: Option<String>,
    /// The vocabulary the counter uses.
    pub tokenizer: Tokenizer,
    /// Model tokens per counted token.
    pub ratio: f64,
    /// The ratio of the configured rule (`ratio` itself unless a ratio was learned): the
    /// per-call framing is converted to counted tokens at it ([`ModelTokens::call_framing`]).
    /// A learned ratio scales the whole framed count, framing included; were the framing
    /// converted at the learned ratio, each sample would move the framing and the next sample
    /// with it, and the ratio would drift past the provider's (a fake charging 1.5 per framed
    /// token was learned as 1.69 after 8 requests).
    pub rule_ratio: f64,
    /// Model tokens added per request.
    pub overhead: usize,
    /// Model tokens added per tool_use block (see [`ModelRule::tool_call`]); a counter wrapped
    /// by [`ModelTokens::framed`] adds them, in counted tokens ([`ModelTokens::call_framing`]).
    pub tool_call: usize,
    /// Where `ratio` comes from.
    pub source: RatioSource,
}

impl ModelTokens {
    /// The basis of an unknown model: counted tokens are model tokens.
    pub fn counter(tokenizer: Tokenizer) -> ModelTokens {
        ModelTokens {
            model: None,
            pattern: None,
            tokenizer,
            ratio: 1.0,
            rule_ratio: 1.0,
            overhead: 0,
            tool_call: 0,
            source: RatioSource::Counter,
        }
    }

    /// Counted tokens a [`ModelTokens::framed`] counter adds per tool_use block:
    /// `ceil(tool_call / rule_ratio)`, so that `to_model` of a framed count at the configured
    /// ratio carries at least `tool_call` model tokens per call (a learned ratio scales them
    /// with the rest). 0 when the rule has no `tool_call`.
    pub fn call_framing(&self) -> usize {
        if self.tool_call == 0 {
            return 0;
        }
        (self.tool_call as f64 / self.rule_ratio).ceil() as usize
    }

    /// `inner` with this model's per-call framing ([`ModelTokens::call_framing`]) added to every
    /// tool_use block it counts, so budgets, strategies and reports that work in counted tokens
    /// see what the model is charged per call. Cheap (a reference and a number); the blocks'
    /// own counts still come from `inner` (its cache).
    pub fn framed<'a>(&self, inner: &'a dyn TokenCounter) -> FramedCounter<'a> {
        FramedCounter::new(inner, self.call_framing())
    }

    /// Model tokens of a request the counter counts `counted` tokens:
    /// `ceil(counted × ratio) + overhead`.
    pub fn to_model(&self, counted: usize) -> usize {
        (counted as f64 * self.ratio).ceil() as usize + self.overhead
    }

    /// The most counted tokens a request may hold to stay within `model_tokens`:
    /// `floor((model_tokens − overhead) / ratio)`, so `to_model(to_counted(m)) <= m`.
    pub fn to_counted(&self, model_tokens: usize) -> usize {
        let room = model_tokens.saturating_sub(self.overhead) as f64;
        let mut n = (room / self.ratio).floor() as usize;
        // Float rounding may put the inverse one token over.
        while n > 0 && self.to_model(n) > model_tokens {
            n -= 1;
        }
        n
    }

    /// `ratio=1.35 (config claude-*), overhead=200` for headers and logs.
    pub fn describe(&self) -> String {
        let source = match (self.source, &self.pattern) {
            (RatioSource::Config, Some(p)) => format!("config {p}"),
            (RatioSource::Config, None) => "config".into(),
            (RatioSource::Learned, _) => "learned".into(),
            (RatioSource::Counter, _) => "counter".into(),
        };
        let calls = if self.tool_call > 0 {
            format!("; tool_call={}", self.tool_call)
        } else {
            String::new()
        };
        format!(
            "model={}; ratio={:.3} ({source}); overhead={}{calls}",
            self.model.as_deref().unwrap_or("-"),
            self.ratio,
            self.overhead
        )
    }
}

/// A running ratio learned from usage. Bounded and robust: see [`Calibration::observe`].
#[derive(Debug, Clone, Copy, PartialEq)]
struct Learned {
    ratio: f64,
    samples: u64,
    ignored: u64,
}

/// What [`Calibration::observe`] did with one usage sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Observation {
    /// The ratio of this sample: `(actual − overhead) / counted`.
    pub sample: f64,
    /// Whether it moved the running ratio (false: outside the bounds, or an outlier).
    pub accepted: bool,
    /// The ratio in force after it.
    pub ratio: f64,
    /// Samples accepted so far for this model.
    pub samples: u64,
}

/// Samples are bounded to this range of ratios; anything outside is a broken sample (a request
/// the estimate did not describe, a cache-only usage record), never a tokenizer.
pub const LEARN_BOUNDS: (f64, f64) = (0.5, 4.0);
/// After [`LEARN_WARMUP`] samples, a sample further than this share from the running ratio is
/// an outlier and ignored.
pub const LEARN_OUTLIER: f64 = 0.25;
/// Samples averaged plainly before the running ratio becomes an exponential average of weight
/// `1 / LEARN_WINDOW`.
pub const LEARN_WARMUP: u64 = 3;
/// The exponential average's window, in samples.
pub const LEARN_WINDOW: u64 = 20;

/// The default bound of the learned ratios, in bytes (`[tokens] learned_bytes`).
pub const DEFAULT_LEARNED_BYTES: u64 = 128 * 1024;
/// The bytes a learned ratio weighs besides its model name's: the ratio and counts, the
/// name's `String`, the cache's bookkeeping (an estimate, as the token cache's 128 bytes).
pub const LEARNED_ENTRY_BYTES: usize = 128;

/// The model rules of `[tokens]` and the ratios learned at run time. Thread safe; one per
/// [`crate::Compactor`], so two configurations learn apart. The learned ratios are bounded by
/// bytes ([`Calibration::with_learned_bytes`]; `moka`, the least used evicted first): a client
/// naming a new model on every request cannot grow them.
pub struct Calibration {
    default_tokenizer: Tokenizer,
    default_model: Option<String>,
    rules: BTreeMap<String, ModelRule>,
    learn: bool,
    learned: moka::sync::Cache<String, Learned>,
    learned_max: u64,
}

impl std::fmt::Debug for Calibration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calibration")
            .field("default_tokenizer", &self.default_tokenizer)
            .field("default_model", &self.default_model)
            .field("rules", &self.rules)
            .field("learn", &self.learn)
            .field("learned", &self.learned.entry_count())
            .field("learned_max", &self.learned_max)
            .finish()
    }
}

/// The learned ratios' cache, of at most `max_bytes` (model name + [`LEARNED_ENTRY_BYTES`]
/// each).
fn learned_cache(max_bytes: u64) -> moka::sync::Cache<String, Learned> {
    moka::sync::Cache::builder()
        .max_capacity(max_bytes)
        .weigher(|model: &String, _: &Learned| {
            u32::try_from(model.len() + LEARNED_ENTRY_BYTES).unwrap_or(u32::MAX)
        })
        .build()
}

impl Calibration {
    /// Rules from `[tokens.models]`; `default_model` is `[tokens] model` ("" = none);
    /// `default_tokenizer` counts models no rule names; `learn` enables [`Calibration::observe`].
    pub fn new(
        default_tokenizer: Tokenizer,
        default_model: &str,
        rules: BTreeMap<String, ModelRule>,
        learn: bool,
    ) -> Calibration {
        let default_model = Some(default_model.trim())
            .filter(|m| !m.is_empty())
            .map(str::to_string);
        Calibration {
            default_tokenizer,
            default_model,
            rules,
            learn,
            learned: learned_cache(DEFAULT_LEARNED_BYTES),
            learned_max: DEFAULT_LEARNED_BYTES,
        }
    }

    /// The same rules, the learned ratios bounded by `max_bytes` (model name +
    /// `LEARNED_ENTRY_BYTES` each; `[tokens] learned_bytes`). Learned ratios so far are
    /// dropped.
    pub fn with_learned_bytes(mut self, max_bytes: u64) -> Calibration {
        self.learned = learned_cache(max_bytes);
        self.learned_max = max_bytes;
        self
    }

    /// The estimated bytes of the learned ratios and their bound.
    pub fn learned_bytes(&self) -> (u64, u64) {
        self.learned.run_pending_tasks();
        (self.learned.weighted_size(), self.learned_max)
    }

    /// The model of a request: `body_model` (the request's `model`) else `[tokens] model`.
    pub fn model_of<'a>(&'a self, body_model: Option<&'a str>) -> Option<&'a str> {
        body_model
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .or(self.default_model.as_deref())
    }

    /// The counting basis of `model` (see the module docs); `None` = no model known.
    pub fn resolve(&self, model: Option<&str>) -> ModelTokens {
        let Some(model) = model else {
            return ModelTokens::counter(self.default_tokenizer);
        };
        let Some((pattern, rule)) = self
            .rules
            .iter()
            .filter(|(p, _)| glob_match(p, model))
            .max_by_key(|(p, _)| p.chars().filter(|c| *c != '*').count())
        else {
            return ModelTokens {
                model: Some(model.to_string()),
                ..ModelTokens::counter(self.default_tokenizer)
            };
        };
        let learned = self.learned.get(&model.to_ascii_lowercase());
        let (ratio, source) = match learned {
            Some(l) if l.samples > 0 => (l.ratio, RatioSource::Learned),
            _ => (rule.ratio, RatioSource::Config),
        };
        ModelTokens {
            model: Some(model.to_string()),
            pattern: Some(pattern.clone()),
            tokenizer: rule.tokenizer,
            ratio,
            rule_ratio: rule.ratio,
            overhead: rule.overhead,
            tool_call: rule.tool_call,
            source,
        }
    }

    /// Feeds one usage record: the provider counted `actual` input tokens for a request of
    /// which the counter counted `counted` tokens (the same vocabulary [`Self::resolve`] names).
    /// Only models with a calibrated rule (ratio ≠ 1 or a non-zero overhead) learn; an exact
    /// tokenizer needs no ratio. The sample `(actual − overhead) / counted` is ignored when it
    /// is outside `LEARN_BOUNDS`, or, after `LEARN_WARMUP` samples, further than
    /// `LEARN_OUTLIER` from the running ratio. Returns `None` when nothing was learned
    /// (learning off, no rule, an exact rule, `counted == 0`).
    pub fn observe(&self, model: &str, counted: usize, actual: u64) -> Option<Observation> {
        if !self.learn || counted == 0 {
            return None;
        }
        let basis = self.resolve(Some(model));
        let calibrated = basis.source != RatioSource::Counter
            && basis
                .pattern
                .as_ref()
                .and_then(|p| self.rules.get(p))
                .is_some_and(|r| r.ratio != 1.0 || r.overhead != 0 || r.tool_call != 0);
        if !calibrated {
            return None;
        }
        let sample = actual.saturating_sub(basis.overhead as u64) as f64 / counted as f64;
        let mut seen = None;
        self.learned
            .entry(model.to_ascii_lowercase())
            .and_upsert_with(|old| {
                let mut entry = old.map_or(
                    Learned {
                        ratio: basis.ratio,
                        samples: 0,
                        ignored: 0,
                    },
                    |e| e.into_value(),
                );
                let in_bounds = (LEARN_BOUNDS.0..=LEARN_BOUNDS.1).contains(&sample);
                let outlier = entry.samples >= LEARN_WARMUP
                    && ((sample - entry.ratio) / entry.ratio).abs() > LEARN_OUTLIER;
                let accepted = in_bounds && !outlier;
                if accepted {
                    entry.samples += 1;
                    let weight = 1.0 / entry.samples.min(LEARN_WINDOW) as f64;
                    entry.ratio += (sample - entry.ratio) * weight;
                } else {
                    entry.ignored += 1;
                }
                seen = Some(Observation {
                    sample,
                    accepted,
                    ratio: entry.ratio,
                    samples: entry.samples,
                });
                entry
            });
        seen
    }

    /// The learned ratios: `(model, ratio, accepted samples, ignored samples)`, by model name.
    pub fn learned(&self) -> Vec<(String, f64, u64, u64)> {
        // Evictions still pending would be listed too.
        self.learned.run_pending_tasks();
        let mut out: Vec<_> = self
            .learned
            .iter()
            .map(|(k, l)| ((*k).clone(), l.ratio, l.samples, l.ignored))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// `*`-glob match ignoring ASCII case: `*` matches any run of characters, every other
/// character itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().map(|c| c.to_ascii_lowercase()).collect();
    let n: Vec<char> = name.chars().map(|c| c.to_ascii_lowercase()).collect();
    // Greedy matching with backtracking to the last star: linear in practice.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules() -> BTreeMap<String, ModelRule> {
        let mut r = BTreeMap::new();
        r.insert(
            "claude-*".into(),
            ModelRule {
                tokenizer: Tokenizer::O200kBase,
                ratio: 1.35,
                overhead: 200,
                tool_call: 0,
            },
        );
        r.insert(
            "claude-3-haiku*".into(),
            ModelRule {
                tokenizer: Tokenizer::O200kBase,
                ratio: 1.2,
                overhead: 0,
                tool_call: 0,
            },
        );
        r.insert(
            "gpt-4".into(),
            ModelRule {
                tokenizer: Tokenizer::Cl100kBase,
                ratio: 1.0,
                overhead: 0,
                tool_call: 0,
            },
        );
        r
    }

    #[test]
    fn globs_match_stars_and_ignore_case() {
        assert!(glob_match("claude-*", "Claude-Opus-4-6"));
        assert!(glob_match("*sonnet*", "claude-sonnet-4-5"));
        assert!(!glob_match("claude-*", "gpt-4o"));
        assert!(glob_match("gpt-4", "gpt-4"));
        assert!(!glob_match("gpt-4", "gpt-4o"));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
    }

    #[test]
    fn the_most_specific_pattern_wins_and_unknown_models_count_as_counted() {
        let c = Calibration::new(Tokenizer::O200kBase, "", rules(), true);
        let opus = c.resolve(Some("claude-opus-4-6"));
        assert_eq!((opus.ratio, opus.overhead), (1.35, 200));
        assert_eq!(opus.pattern.as_deref(), Some("claude-*"));
        let haiku = c.resolve(Some("claude-3-haiku-20240307"));
        assert_eq!(haiku.ratio, 1.2);
        assert_eq!(c.resolve(Some("gpt-4")).tokenizer, Tokenizer::Cl100kBase);
        let other = c.resolve(Some("llama-3"));
        assert_eq!(
            (other.ratio, other.overhead, other.source),
            (1.0, 0, RatioSource::Counter)
        );
        assert_eq!(c.resolve(None).model, None);
    }

    #[test]
    fn the_body_model_comes_before_the_configured_one() {
        let c = Calibration::new(Tokenizer::O200kBase, "claude-opus-4-6", rules(), true);
        assert_eq!(c.model_of(Some("gpt-4")), Some("gpt-4"));
        assert_eq!(c.model_of(None), Some("claude-opus-4-6"));
        assert_eq!(c.model_of(Some("  ")), Some("claude-opus-4-6"));
    }

    #[test]
    fn a_learned_ratio_leaves_the_per_call_framing_where_the_rule_put_it() {
        let mut r = rules();
        r.insert(
            "claude-opus*".into(),
            ModelRule {
                tokenizer: Tokenizer::O200kBase,
                ratio: 1.1,
                overhead: 0,
                tool_call: 172,
            },
        );
        let c = Calibration::new(Tokenizer::O200kBase, "", r, true);
        // ceil(172 / 1.1): the framing in counted tokens at the configured ratio.
        let framing = 157;
        assert_eq!(c.resolve(Some("claude-opus-4-6")).call_framing(), framing);
        // The provider charges 1.5 per framed token; each request is counted as the proxy
        // does, with the framing of the basis in force when it was sent.
        for (raw, calls) in [(1000usize, 3usize), (8000, 40), (30_000, 90), (60_000, 200)]
            .into_iter()
            .cycle()
            .take(16)
        {
            let basis = c.resolve(Some("claude-opus-4-6"));
            let counted = raw + calls * basis.call_framing();
            let actual = ((raw + calls * framing) as f64 * 1.5).round() as u64;
            c.observe("claude-opus-4-6", counted, actual).unwrap();
        }
        let learned = c.resolve(Some("claude-opus-4-6"));
        assert_eq!(learned.source, RatioSource::Learned);
        assert!((learned.ratio - 1.5).abs() < 0.002, "{}", learned.ratio);
        assert_eq!(learned.call_framing(), framing);
    }

    #[test]
    fn learned_ratios_stay_under_their_byte_bound_however_many_models_come() {
        let c = Calibration::new(Tokenizer::O200kBase, "", rules(), true).with_learned_bytes(4096);
        for i in 0..2000 {
            let model = format!("claude-made-up-{i}");
            assert!(c.observe(&model, 1000, 1300).is_some());
        }
        let (used, max) = c.learned_bytes();
        assert_eq!(max, 4096);
        assert!(used <= 4096, "{used}");
        let kept = c.learned().len();
        // Each weighs its name (17-20 bytes) + 128: at most 27 fit.
        assert!(kept > 0 && kept <= 4096 / LEARNED_ENTRY_BYTES, "{kept}");
    }

    #[test]
    fn learning_converges_ignores_outliers_and_leaves_exact_models_alone() {
        let c = Calibration::new(Tokenizer::O200kBase, "", rules(), true);
        // The provider counts 1.5 x + 200.
        for counted in [1000usize, 5000, 20_000, 40_000, 80_000, 120_000] {
            let o = c
                .observe(
                    "claude-opus-4-6",
                    counted,
                    (counted as f64 * 1.5) as u64 + 200,
                )
                .unwrap();
            assert!(o.accepted);
        }
        let r = c.resolve(Some("claude-opus-4-6"));
        assert_eq!(r.source, RatioSource::Learned);
        assert!((r.ratio - 1.5).abs() < 1e-9, "{}", r.ratio);
        // An outlier (a cache-only record, a request the estimate did not describe) is ignored.
        let o = c.observe("claude-opus-4-6", 10_000, 40_000).unwrap();
        assert!(!o.accepted);
        assert!((c.resolve(Some("claude-opus-4-6")).ratio - 1.5).abs() < 1e-9);
        // Out of bounds even before warm-up.
        assert!(
            !c.observe("claude-sonnet-4-5", 1000, 10_000)
                .unwrap()
                .accepted
        );
        // Another model of the same family did not learn from opus.
        assert_eq!(c.resolve(Some("claude-sonnet-4-5")).ratio, 1.35);
        assert_eq!(c.observe("gpt-4", 1000, 1100), None);
        assert_eq!(c.observe("llama-3", 1000, 1100), None);
        let off = Calibration::new(Tokenizer::O200kBase, "", rules(), false);
        assert_eq!(off.observe("claude-opus-4-6", 1000, 1500), None);
    }

    proptest! {
        #[test]
        fn to_counted_is_the_largest_count_within_the_model_budget(
            ratio in 0.5f64..3.0, overhead in 0usize..500, budget in 0usize..400_000,
        ) {
            let m = ModelTokens { ratio, rule_ratio: ratio, overhead, ..ModelTokens::counter(Tokenizer::O200kBase) };
            let n = m.to_counted(budget);
            if budget >= overhead {
                prop_assert!(m.to_model(n) <= budget);
                prop_assert!(m.to_model(n + 1) > budget);
            } else {
                prop_assert_eq!(n, 0);
            }
        }
    }
}
