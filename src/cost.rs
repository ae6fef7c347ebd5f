//! What one request's input costs with prompt caching, as forwarded and as the client sent
//! it: the estimate a report, the proxy's `x-compactor-cost` header, `/metrics` and the A/B
//! harness give in the units people pay.
//!
//! ```text
//! one request = stable part (tools, system) + messages
//!   the client's body:  the previous request of the session is its prefix (an agent loop
//!                       appends): read from the cache; the rest is written
//!   forwarded, continued unchanged: the previous forwarded body is its prefix: read; the rest
//!                       written
//!   forwarded, compacted afresh: tools and system stay cached (read); the messages are
//!                       written again
//!   untouched:          the client's body (no saving)
//! ```
//!
//! Figures are model tokens (the counter's tokens through the model's ratio, without the
//! per-request overhead) and US dollars by the model table ([`crate::models`]); a model
//! without an entry is priced in input-token equivalents ([`Prices::RELATIVE`]: `dollars`
//! then reads "input tokens' worth").

use crate::models::{InputTokens, Prices};
use crate::tokens::ModelTokens;
use serde::Serialize;

/// The estimated input cost of one request as forwarded and as the client sent it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostEstimate {
    /// Whether the prices are the model table's (dollars); `false`: input-token equivalents.
    pub priced: bool,
    /// The forwarded body's input, in model tokens.
    pub forwarded: InputTokens,
    /// The client's body's input, in model tokens.
    pub client: InputTokens,
    /// The forwarded body's input cost (dollars, or input-token equivalents / 1e6 when not
    /// priced).
    pub forwarded_cost: f64,
    /// The client's body's input cost, in the same unit.
    pub client_cost: f64,
}

impl CostEstimate {
    /// The estimate of a request whose parts are given in counted tokens (each converted with
    /// `basis`'s ratio), priced by `prices` (`None`: [`Prices::RELATIVE`]).
    pub fn of(
        basis: &ModelTokens,
        prices: Option<Prices>,
        forwarded: Parts,
        client: Parts,
    ) -> CostEstimate {
        let p = prices.unwrap_or(Prices::RELATIVE);
        let forwarded = forwarded.in_model_tokens(basis);
        let client = client.in_model_tokens(basis);
        CostEstimate {
            priced: prices.is_some(),
            forwarded_cost: p.input_dollars(&forwarded),
            client_cost: p.input_dollars(&client),
            forwarded,
            client,
        }
    }

    /// What forwarding saved against sending the client's body (negative: it cost more).
    pub fn saved(&self) -> f64 {
        self.client_cost - self.forwarded_cost
    }

    /// The unit of the costs: `$` or `itok` (input-token equivalents, per million).
    pub fn unit(&self) -> &'static str {
        if self.priced { "$" } else { "itok" }
    }

    /// `forwarded=$0.0123 (read 20000, write 3000, plain 0); client=$0.0456 (read …);
    /// saved=$0.0333` for the proxy's `x-compactor-cost` header (a cost in input-token
    /// equivalents is written `itok` and counts input tokens, not millions).
    pub fn header(&self) -> String {
        let money = |c: f64| match self.priced {
            true => format!("${c:.6}"),
            false => format!("{:.0}itok", c * 1e6),
        };
        let parts = |t: &InputTokens| {
            format!(
                "read {}, write {}, plain {}",
                t.cache_read, t.cache_write, t.plain
            )
        };
        format!(
            "forwarded={} ({}); client={} ({}); saved={}",
            money(self.forwarded_cost),
            parts(&self.forwarded),
            money(self.client_cost),
            parts(&self.client),
            money(self.saved())
        )
    }
}

/// A request's input split by how the cache serves it, in counted tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parts {
    /// Read from the cache.
    pub read: usize,
    /// Written to it.
    pub write: usize,
}

impl Parts {
    /// `total` counted tokens of which the first `cached` were sent before (read), the rest
    /// written.
    pub fn after(total: usize, cached: usize) -> Parts {
        let read = cached.min(total);
        Parts {
            read,
            write: total - read,
        }
    }

    fn in_model_tokens(self, basis: &ModelTokens) -> InputTokens {
        let scale = |n: usize| (n as f64 * basis.ratio).ceil() as usize;
        InputTokens {
            cache_read: scale(self.read),
            cache_write: scale(self.write),
            plain: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Tokenizer;

    #[test]
    fn a_continuation_reads_what_was_sent_before_and_saves_against_the_client() {
        let basis = ModelTokens::counter(Tokenizer::O200kBase);
        let sonnet = Prices {
            input: 3.0,
            cache_write: 3.75,
            cache_read: 0.3,
            output: 15.0,
        };
        // Forwarded: 30k sent last turn (read), 2k new. Client: 150k read, 2k new.
        let e = CostEstimate::of(
            &basis,
            Some(sonnet),
            Parts::after(32_000, 30_000),
            Parts::after(152_000, 150_000),
        );
        assert_eq!(
            e.forwarded,
            InputTokens {
                cache_read: 30_000,
                cache_write: 2_000,
                plain: 0
            }
        );
        assert!((e.forwarded_cost - (0.009 + 0.0075)).abs() < 1e-12);
        assert!((e.client_cost - (0.045 + 0.0075)).abs() < 1e-12);
        assert!((e.saved() - 0.036).abs() < 1e-12);
        assert_eq!(
            e.header(),
            "forwarded=$0.016500 (read 30000, write 2000, plain 0); client=$0.052500 (read 150000, write 2000, plain 0); saved=$0.036000"
        );
    }

    #[test]
    fn an_unpriced_model_costs_input_token_equivalents_in_its_own_tokens() {
        let mut basis = ModelTokens::counter(Tokenizer::O200kBase);
        basis.ratio = 1.5;
        let e = CostEstimate::of(&basis, None, Parts::after(1_000, 0), Parts::after(1_000, 0));
        assert_eq!(e.forwarded.cache_write, 1_500);
        assert_eq!(e.unit(), "itok");
        assert!(
            e.header()
                .starts_with("forwarded=1875itok (read 0, write 1500")
        );
    }
}
