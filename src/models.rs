//! The model table: for each model family its context window, its maximum output and its
//! prices (input, cache write, cache read, output), each entry with the source of its figures.
//!
//! ```text
//! model name ("claude-sonnet-4-5", from the request body, --model or [tokens] model)
//!   -> entry: the most specific matching pattern of [models]        ("claude-sonnet-4-5*")
//!   -> window and max output -> the default budget (policy::model_budget):
//!        context_window - min(reserve_output, max_output)   unless [budget] sets them
//!   -> prices -> what a request costs (cost::estimate): cache reads, cache writes, plain input
//! ```
//!
//! The token rule of a family (how its tokens are counted) stays in `[tokens.models]`
//! ([`crate::tokens::ModelRule`]); `compactor models` prints both side by side.
//!
//! Units: windows and output limits are in the model's own tokens; prices are US dollars per
//! million model tokens. The built-in table is `[models]` in `config/compactor.toml`; a config
//! file overrides any figure of an entry (`[models."gpt-4o*"] input = 2.0`) or adds an entry.

use crate::tokens::model::glob_match;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The context window assumed for a model that no entry names, in model tokens (the window of
/// the Claude models before 1M windows; the default before the table).
pub const DEFAULT_CONTEXT_WINDOW: usize = 200_000;

/// One `[models."PATTERN"]` entry. `PATTERN` matches model names as in `[tokens.models]`
/// (`*` any run of characters, ASCII case ignored, the most literal characters win).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Context window, in model tokens (input and output together).
    pub context_window: usize,
    /// Most output tokens one answer may hold, in model tokens.
    pub max_output: usize,
    /// Dollars per million plain (uncached) input tokens.
    pub input: f64,
    /// Dollars per million input tokens written to the prompt cache (Anthropic: 1.25x input
    /// for the 5-minute cache; OpenAI and Gemini's implicit caches charge plain input).
    pub cache_write: f64,
    /// Dollars per million input tokens read from the prompt cache.
    pub cache_read: f64,
    /// Dollars per million output tokens.
    pub output: f64,
    /// Where the figures come from (a provider's page and when it was read).
    #[serde(default)]
    pub source: String,
}

impl ModelEntry {
    /// Checks the entry of `pattern`: a window larger than the output limit, prices finite
    /// and not negative.
    ///
    /// # Errors
    /// The message for `models.PATTERN`.
    pub fn check(&self, pattern: &str) -> Result<(), String> {
        if pattern.trim().is_empty() {
            return Err("an empty model pattern".into());
        }
        if self.context_window == 0 || self.max_output >= self.context_window {
            return Err(format!(
                "context_window ({}) must be larger than max_output ({})",
                self.context_window, self.max_output
            ));
        }
        let prices = [
            ("input", self.input),
            ("cache_write", self.cache_write),
            ("cache_read", self.cache_read),
            ("output", self.output),
        ];
        for (name, p) in prices {
            if !(p.is_finite() && p >= 0.0) {
                return Err(format!("{name} must be a price >= 0, found {p}"));
            }
        }
        Ok(())
    }

    /// Its prices.
    pub fn prices(&self) -> Prices {
        Prices {
            input: self.input,
            cache_write: self.cache_write,
            cache_read: self.cache_read,
            output: self.output,
        }
    }
}

/// Prices of one model, in US dollars per million model tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prices {
    /// Plain (uncached) input.
    pub input: f64,
    /// Input written to the prompt cache.
    pub cache_write: f64,
    /// Input read from the prompt cache.
    pub cache_read: f64,
    /// Output.
    pub output: f64,
}

impl Prices {
    /// The relative prices of Anthropic's 5-minute prompt cache (input 1, write 1.25, read
    /// 0.1): what a model without an entry is priced at, in input-token equivalents, and the
    /// model ../shared/tools/realclients/cachesim.py uses.
    pub const RELATIVE: Prices = Prices {
        input: 1.0,
        cache_write: 1.25,
        cache_read: 0.1,
        output: 0.0,
    };

    /// Dollars of `tokens` model tokens of input split as providers bill it.
    pub fn input_dollars(&self, tokens: &InputTokens) -> f64 {
        (tokens.plain as f64 * self.input
            + tokens.cache_write as f64 * self.cache_write
            + tokens.cache_read as f64 * self.cache_read)
            / 1e6
    }
}

/// The input tokens of one request as providers bill them, in model tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct InputTokens {
    /// Read from the prompt cache (a prefix an earlier request wrote).
    pub cache_read: usize,
    /// Written to the prompt cache (up to the request's last breakpoint).
    pub cache_write: usize,
    /// Neither.
    pub plain: usize,
}

impl InputTokens {
    /// All of them.
    pub fn total(&self) -> usize {
        self.cache_read + self.cache_write + self.plain
    }
}

/// The table: entries by pattern, looked up by model name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelTable {
    entries: BTreeMap<String, ModelEntry>,
}

impl ModelTable {
    /// The table of `entries` (the settings' `[models]`).
    pub fn new(entries: BTreeMap<String, ModelEntry>) -> ModelTable {
        ModelTable { entries }
    }

    /// The entry of `model` with its pattern: the most specific matching pattern (most
    /// literal characters); `None` when no pattern matches.
    pub fn lookup(&self, model: &str) -> Option<(&str, &ModelEntry)> {
        self.entries
            .iter()
            .filter(|(p, _)| glob_match(p, model))
            .max_by_key(|(p, _)| p.chars().filter(|c| *c != '*').count())
            .map(|(p, e)| (p.as_str(), e))
    }

    /// Every entry, by pattern.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &ModelEntry)> {
        self.entries.iter().map(|(p, e)| (p.as_str(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    fn table() -> ModelTable {
        ModelTable::new(Settings::default().models)
    }

    #[test]
    fn the_built_in_table_names_each_family_with_a_source() {
        let t = table();
        let gpt4o = t.lookup("gpt-4o-2024-08-06").expect("gpt-4o").1;
        assert_eq!((gpt4o.context_window, gpt4o.max_output), (128_000, 16_384));
        assert_eq!(gpt4o.prices().input, 2.5);
        assert_eq!(t.lookup("gpt-4o-mini").expect("mini").0, "gpt-4o-mini*");
        let sonnet = t.lookup("claude-sonnet-4-5-20250929").expect("sonnet").1;
        assert_eq!(
            (
                sonnet.input,
                sonnet.cache_write,
                sonnet.cache_read,
                sonnet.output
            ),
            (3.0, 3.75, 0.3, 15.0)
        );
        assert!(t.lookup("gemini-2.5-pro").is_some());
        assert!(t.lookup("a-model-of-my-own").is_none());
        for (pattern, e) in t.entries() {
            assert!(!e.source.is_empty(), "{pattern} has no source");
            e.check(pattern).expect("valid");
        }
    }

    #[test]
    fn input_dollars_price_each_kind_of_token() {
        let p = Prices {
            input: 3.0,
            cache_write: 3.75,
            cache_read: 0.3,
            output: 15.0,
        };
        let t = InputTokens {
            cache_read: 1_000_000,
            cache_write: 2_000_000,
            plain: 100_000,
        };
        assert_eq!(t.total(), 3_100_000);
        assert!((p.input_dollars(&t) - (0.3 + 7.5 + 0.3)).abs() < 1e-9);
    }

    #[test]
    fn an_entry_with_a_window_under_its_output_is_refused() {
        let mut e = table().lookup("gpt-4o").expect("gpt-4o").1.clone();
        e.max_output = e.context_window;
        assert!(e.check("gpt-4o*").is_err());
        e.max_output = 10;
        e.cache_read = f64::NAN;
        assert_eq!(
            e.check("gpt-4o*"),
            Err("cache_read must be a price >= 0, found NaN".into())
        );
    }
}
