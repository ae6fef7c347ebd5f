//! What the session state of `pinned..k` will take, for every `k` at once, without building it:
//! prefix sums over the facts (each text counted once, through the counter's cache), so a
//! strategy that searches a cut can price each candidate in O(1) and build the real
//! [`super::SessionState`] only for a few.
//!
//! Two figures per `k`, in counter tokens of the marker text:
//! - [`StateSizes::need`]: an estimate of the priority parts (the user's words with a
//!   `[then]` line each, earlier summaries, failures, files, commands deduplicated, with the
//!   header and section titles), what the marker should get room for;
//! - [`StateSizes::least`]: a lower bound of what the marker takes whatever its budget (the
//!   parts [`super::SessionState::render`] keeps past its limit: each request at its shortest,
//!   each summary, each failure's id and first error line).

use super::{Facts, around_constraints};
use crate::conversation::Outcome;
use crate::tokens::TokenCounter;
use foldhash::{HashSet, HashSetExt};

/// Tokens assumed for one `[then]` line (its text depends on where the range ends).
const THEN_TOKENS: usize = 24;
/// Tokens of the marker's first line, its section titles and the omitted-items line.
const FRAME_TOKENS: usize = 110;
/// Tokens around a failure's parts (`[failed ] …, command …: error:  | -> fixed by …`).
const FAILURE_FRAME_TOKENS: usize = 18;
/// Tokens around a command (`[ran ok]  (×2, last …)`).
const COMMAND_FRAME_TOKENS: usize = 8;
/// Tokens of the five action tags of the files section (`[edited] `…).
const FILES_FRAME_TOKENS: usize = 20;

/// Per-`k` sizes of the session state of `pinned..k` (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSizes {
    pinned: usize,
    /// `need[k - pinned]`, `least[k - pinned]` for `k` in `pinned..=len`.
    need: Vec<usize>,
    least: Vec<usize>,
}

impl StateSizes {
    /// The sizes for every cut `k` in `pinned..=len` (`len` messages), read from `facts` in
    /// one pass; every text is counted with `counter`'s cache (the marker's render finds the
    /// same texts there).
    pub fn of(facts: &Facts, pinned: usize, len: usize, counter: &dyn TokenCounter) -> StateSizes {
        let slots = len.saturating_sub(pinned) + 1;
        // Tokens a fact at message `m` adds, at slot `m - pinned + 1` (it counts once the cut
        // is past its message).
        let mut need = vec![0usize; slots];
        let mut least = vec![0usize; slots];
        let slot = |m: usize| (m >= pinned && m < len).then(|| m - pinned + 1);
        let count = |s: &str| counter.count_text_cached(s);
        for u in &facts.user {
            let Some(i) = slot(u.message) else { continue };
            let full = count(&u.text) + 6;
            let short = count(&around_constraints(&u.text)) + 6;
            need[i] += full + THEN_TOKENS;
            least[i] += full.min(short);
        }
        for s in &facts.summaries {
            let Some(i) = slot(s.message) else { continue };
            let t = count(&s.text) + 4;
            need[i] += t;
            least[i] += t;
        }
        for f in &facts.failures {
            let Some(c) = facts.call_of(f) else { continue };
            let Some(i) = slot(c.message) else { continue };
            let first = count(&f.first_line) + count(&c.id) + 4;
            let rest = f.last_line.as_deref().map_or(0, count)
                + c.command
                    .as_deref()
                    .or(c.argument.as_deref())
                    .map_or(0, count)
                + FAILURE_FRAME_TOKENS;
            need[i] += first + rest;
            least[i] += first;
        }
        let mut seen: HashSet<&str> = HashSet::new();
        for t in &facts.touches {
            let Some(i) = slot(t.message) else { continue };
            if seen.insert(&t.shown) {
                need[i] += count(&t.shown) + 1;
            }
        }
        let mut commands: HashSet<(&str, Option<Outcome>)> = HashSet::new();
        for c in &facts.calls {
            let (Some(cmd), Some(i)) = (&c.command_line, slot(c.message)) else {
                continue;
            };
            if commands.insert((cmd, c.outcome)) {
                need[i] += count(cmd) + count(&c.id) + COMMAND_FRAME_TOKENS;
            }
        }
        need[0] = FRAME_TOKENS + FILES_FRAME_TOKENS;
        for i in 1..slots {
            need[i] += need[i - 1];
            least[i] += least[i - 1];
        }
        StateSizes {
            pinned,
            need,
            least,
        }
    }

    fn at(v: &[usize], pinned: usize, k: usize) -> usize {
        k.checked_sub(pinned)
            .and_then(|i| v.get(i).or(v.last()))
            .copied()
            .unwrap_or(0)
    }

    /// Estimated tokens of the priority parts of the state of `pinned..k`.
    pub fn need(&self, k: usize) -> usize {
        Self::at(&self.need, self.pinned, k)
    }

    /// Tokens the marker of `pinned..k` takes at least, whatever its budget.
    pub fn least(&self, k: usize) -> usize {
        Self::at(&self.least, self.pinned, k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Message, Role};
    use crate::facts::SessionState;
    use crate::facts::test_blocks::{call, result};
    use crate::tokens::{TiktokenCounter, Tokenizer};
    use proptest::prelude::*;
    use serde_json::json;

    /// A session of `rounds` requests, each with `calls` Bash calls, every `fail`-th failing.
    fn session(rounds: usize, calls: usize, fail: usize) -> Vec<Message> {
        let mut m = Vec::new();
        for r in 0..rounds {
            m.push(Message::text(
                Role::User,
                format!("Round {r}: make step {r} pass. Never touch vendor/ in round {r}."),
            ));
            for c in 0..calls {
                let id = format!("t{r}_{c}");
                m.push(Message::new(
                    Role::Assistant,
                    vec![call(
                        &id,
                        "Bash",
                        json!({"command": format!("cargo test step_{r}_{c}")}),
                    )],
                ));
                let failed = fail > 0 && (r * calls + c) % fail == fail - 1;
                let text = if failed {
                    format!("error[E0425]: cannot find `v{c}`\nerror: could not compile")
                } else {
                    "ok".to_string()
                };
                m.push(Message::new(Role::User, vec![result(&id, &text, failed)]));
            }
        }
        m
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// The lower bound never exceeds the marker the real state writes, at any budget, and
        /// both figures grow with the cut.
        #[test]
        fn least_bounds_the_real_marker_and_both_grow(
            rounds in 1usize..6, calls in 0usize..6, fail in 0usize..5, budget in 0usize..400
        ) {
            let msgs = session(rounds, calls, fail);
            let facts = Facts::of(&msgs);
            let counter = TiktokenCounter::new(Tokenizer::default());
            let sizes = StateSizes::of(&facts, 0, msgs.len(), &counter);
            for k in 0..=msgs.len() {
                let text = SessionState::of(&facts, 0..k).marker_text(k, 0, budget, &counter);
                prop_assert!(sizes.least(k) <= counter.count_text(&text), "k {}", k);
                prop_assert!(sizes.least(k) <= sizes.need(k));
                if k > 0 {
                    prop_assert!(sizes.need(k - 1) <= sizes.need(k));
                    prop_assert!(sizes.least(k - 1) <= sizes.least(k));
                }
            }
        }
    }

    #[test]
    fn the_need_covers_what_an_unbounded_marker_writes_of_the_priority_parts() {
        let msgs = session(3, 4, 3);
        let facts = Facts::of(&msgs);
        let counter = TiktokenCounter::new(Tokenizer::default());
        let sizes = StateSizes::of(&facts, 0, msgs.len(), &counter);
        let text =
            SessionState::of(&facts, 0..msgs.len()).marker_text(msgs.len(), 0, 100_000, &counter);
        // The unbounded marker also writes the other calls; the priority parts are most of it.
        let priority: String = text
            .lines()
            .filter(|l| !l.starts_with("[call ") && !l.starts_with("[assistant]"))
            .collect::<Vec<_>>()
            .join("\n");
        let real = counter.count_text(&priority);
        let need = sizes.need(msgs.len());
        assert!(
            need >= real && need <= real * 2,
            "need {need}, priority parts {real}"
        );
    }
}
