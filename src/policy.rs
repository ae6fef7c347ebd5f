//! The policy: when to compact (trigger), how far (target), whether to continue from a
//! remembered compaction (hysteresis), when a tier's output is taken and when to stop.
//!
//! ```text
//! tokens <= trigger                 -> unchanged (borrowed)
//! remembered prefix + new messages  -> continue from it (the compacted prefix, and the
//!                                      provider's prompt cache, stay the same)
//! tiers in the settings' order      -> take an output only when smaller; stop at the target
//! ```
//!
//! Budget, trigger and target are set in the target model's tokens; strategies work in the
//! counter's own (cached) tokens, so [`Targets::of`] converts them once.

use crate::config::BudgetSettings;
use crate::conversation::Conversation;
use crate::memory::{Memory, Predecessor, PrefixHashes, Remembered};
use crate::models::{ModelEntry, Prices};
use crate::report::Status;
use crate::strategy::Budget;
use crate::tokens::ModelTokens;

/// The budget in model tokens: `explicit` tokens, else the configured one, else the window of
/// the model's table entry `model` less the reserve ([`BudgetSettings::budget_for`]), with
/// the target at `budget.target × limit`.
pub fn model_budget(
    settings: &BudgetSettings,
    explicit: Option<usize>,
    model: Option<&ModelEntry>,
) -> Budget {
    let limit = settings.budget_for(explicit, model);
    Budget {
        limit,
        target: (limit as f64 * settings.target) as usize,
    }
}

/// The figures of one compaction, in model tokens and in counted tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Targets {
    /// Limit and target in model tokens.
    pub model: Budget,
    /// Compaction starts above this many model tokens (`budget.trigger × limit`).
    pub model_trigger: usize,
    /// Limit and target in the counter's tokens (what strategies see).
    pub counted: Budget,
    /// The trigger in the counter's tokens.
    pub trigger: usize,
}

impl Targets {
    /// Converts the configured (or `explicit`, or the model table `entry`'s) budget with the
    /// model's counting basis.
    pub fn of(
        settings: &BudgetSettings,
        basis: &ModelTokens,
        explicit: Option<usize>,
        entry: Option<&ModelEntry>,
    ) -> Targets {
        let model = model_budget(settings, explicit, entry);
        let model_trigger = (model.limit as f64 * settings.trigger) as usize;
        Targets {
            model,
            model_trigger,
            counted: Budget {
                limit: basis.to_counted(model.limit),
                target: basis.to_counted(model.target),
            },
            trigger: basis.to_counted(model_trigger),
        }
    }

    /// Under the trigger: nothing to do (counted tokens).
    pub fn untouched(&self, tokens: usize) -> bool {
        tokens <= self.trigger
    }

    /// Whether a continuation of a remembered compaction, of `tokens` counted tokens, goes out
    /// as it is (the prefix sent last turn, with the new messages appended): while it fits the
    /// budget, so a compaction is followed by as many appending turns as the budget allows;
    /// once the cached prefix is `cold` (the session idle past the cache's lifetime, so the
    /// next request writes the whole prefix anyway) only while under the trigger: that is the
    /// moment to compact.
    pub fn continues(&self, tokens: usize, cold: bool) -> bool {
        match cold {
            true => tokens <= self.trigger,
            false => tokens <= self.counted.limit,
        }
    }

    /// The counted target of a re-compaction of a continuation of `tokens` counted tokens, of
    /// which `fixed` (system prompt and tools) stay cached whatever is compacted, growing by
    /// `growth` counted tokens a turn: the configured target, or lower until the compaction
    /// pays back its cache write. Writing the new prefix costs `(W − fixed) × (write − read)`
    /// more than reading it; each turn until the next re-compaction (`(limit − W) / growth`
    /// turns) reads `tokens − W` fewer tokens. Searched downwards from the target in steps of
    /// 1% of the limit, never below `fixed`. A `cold` prefix is written anyway: the target.
    pub fn recompaction(
        &self,
        tokens: usize,
        fixed: usize,
        growth: usize,
        prices: &Prices,
        cold: bool,
    ) -> usize {
        let target = self.counted.target;
        if cold || growth == 0 || prices.cache_read <= 0.0 {
            return target;
        }
        let limit = self.counted.limit as f64;
        let (p, s, d) = (tokens as f64, fixed as f64, growth as f64);
        let premium = (prices.cache_write - prices.cache_read).max(0.0);
        let pays = |w: f64| {
            let turns = ((limit - w) / d).max(0.0);
            turns * (p - w).max(0.0) * prices.cache_read >= (w - s).max(0.0) * premium
        };
        let step = (limit / 100.0).max(1.0);
        let mut w = target as f64;
        while w - step > s && !pays(w) {
            w -= step;
        }
        (w as usize).min(target)
    }

    /// A tier's output of `tokens` is taken only when smaller than the best so far (`now`).
    pub fn takes(&self, tokens: usize, now: usize) -> bool {
        tokens < now
    }

    /// The tier loop stops once the target is reached.
    pub fn reached(&self, tokens: usize) -> bool {
        tokens <= self.counted.target
    }

    /// The report's status: `changed` when some output was taken, `tokens` the final count,
    /// `degraded` when a fallback made it.
    pub fn status(&self, changed: bool, before: usize, tokens: usize, degraded: bool) -> Status {
        match changed {
            false if before > self.counted.limit => Status::OverBudget,
            false => Status::Unchanged,
            true if tokens > self.counted.limit => Status::OverBudget,
            true if degraded => Status::Degraded,
            true => Status::Compacted,
        }
    }
}

/// A remembered compaction of the input's prefix, taken out of the memory to be continued:
/// the guard builds and checks its continuation by the input's new messages
/// ([`crate::guard::continue_prefix`]).
#[derive(Debug)]
pub struct Recalled {
    /// Input messages the remembered compaction covers.
    pub len: usize,
    /// Messages of the remembered output.
    pub output_messages: usize,
    /// The remembered output (its `output_messages` messages; empty while the guard's
    /// continuation of it holds them).
    pub output: Conversation,
    /// Why the remembered output was degraded (made by a fallback), when it was.
    pub degraded: Option<String>,
    /// The remembered output's failure records (indices stay valid: messages are appended).
    pub failures: Vec<crate::guard::FailureRecord>,
    /// What continuing needs (counts and the guard's junctions), when remembered.
    pub continuation: Option<std::sync::Arc<crate::memory::Continuation>>,
    /// Whether it was taken out of the memory ([`Memory::take`]): it goes back
    /// ([`Recalled::put_back`]) or is remembered again as the continuation's predecessor.
    pub removed: bool,
    /// The written items of the remembered output (its `output_messages` messages), when the
    /// service attached them ([`Memory::attach_written`]).
    pub written: Option<std::sync::Arc<crate::memory::Written>>,
    /// The sum of [`crate::memory::message_bytes`] over the remembered output's messages,
    /// when known.
    pub messages_bytes: Option<usize>,
}

impl Recalled {
    /// What the memory remembers of it again as the predecessor of its continuation.
    pub fn predecessor(&self) -> Predecessor {
        Predecessor {
            len: self.len,
            messages: self.output_messages,
            degraded: self.degraded.clone(),
            failures: self.failures.clone(),
            continuation: self.continuation.clone(),
            messages_bytes: self.messages_bytes,
        }
    }

    /// Puts the remembered compaction back into `memory` when it was taken out; nothing when
    /// it stayed there.
    pub fn put_back(self, memory: &Memory, hashes: &PrefixHashes) {
        if !self.removed {
            return;
        }
        memory.put_back(
            hashes,
            self.len,
            Remembered {
                output: self.output,
                degraded: self.degraded,
                failures: self.failures,
                continuation: self.continuation,
            },
        );
    }
}

/// Hysteresis: the remembered compaction of the longest remembered prefix of `input`, taken
/// out of the memory ([`Memory::take`], moved rather than copied). The guard builds and checks
/// its continuation by the input's new messages ([`crate::guard::continue_prefix`]); the
/// caller then puts it back or remembers it as the predecessor of what it made.
pub fn recall(memory: &Memory, hashes: &PrefixHashes, input: &Conversation) -> Option<Recalled> {
    let taken = memory.take(hashes)?;
    let remembered = taken.remembered;
    if taken.len > input.messages.len() {
        if taken.removed {
            memory.put_back(hashes, taken.len, remembered);
        }
        return None;
    }
    let output = remembered.output;
    let output_messages = output.messages.len();
    Some(Recalled {
        len: taken.len,
        output_messages,
        output,
        degraded: remembered.degraded,
        failures: remembered.failures,
        continuation: remembered.continuation,
        removed: taken.removed,
        written: taken.written.filter(|w| w.messages == output_messages),
        messages_bytes: taken.messages_bytes,
    })
}
