//! The crate's one circuit breaker: in front of the summarizer's HTTP attempts (the LLM
//! client's, [`Policy::Probe`], `[llm]` `breaker_threshold` / `breaker_cooldown_secs`) and in
//! front of whole summaries (the summary strategy's, [`Policy::NoProbe`], `[summary]`
//! `failure_threshold` / `cooldown_secs`).
//!
//! ```text
//! closed  a call goes; `threshold` consecutive failures -> open (threshold 0: never opens)
//! open    every call is refused until the cool-down has passed since the failure that opened
//!         it (Probe: until it has fully passed; NoProbe: its last instant still refuses)
//! cooled  Probe: one probe goes, the rest are refused until it ends
//!         NoProbe: every call goes
//! always  a success -> closed, failures 0; a failure once the circuit has opened (while open,
//!         a probe's, any once cooled) -> open again, the cool-down counted from it
//! ```
//!
//! It is used one of two ways, never both on one breaker:
//! - per attempt ([`Breaker::admit`], the LLM client): an admitted attempt holds a [`Ticket`]
//!   that reports its outcome, and attempts in flight count with the failures: a closed
//!   circuit admits one only while failures + attempts in flight < threshold, else it waits
//!   for one to end. That keeps a burst bounded: 8 concurrent requests to a failing model make
//!   at most `threshold` calls, not 8 x (1 + retries), because no more attempts are ever out
//!   than the breaker could still count as failures before it opens. An attempt dropped before
//!   its answer (the time budget ran out) counts as failed.
//! - after the fact ([`Breaker::open_for`] before a call, [`Breaker::record`] after it, the
//!   summary strategy): nothing is counted in flight and nothing waits; a summary is several
//!   model calls or none (a cache hit is not recorded).
//!
//! The state machine ([`Circuit`]) is given the time of every step, so its tests set the clock
//! instead of sleeping.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[cfg(test)]
mod tests;

/// What the breaker does around the end of its cool-down: the rules of its two users, kept as
/// each had them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// The LLM client's, per HTTP attempt: open while less than the cool-down has passed since
    /// the failure that opened it; then [`Breaker::admit`] lets one probe through and refuses
    /// the rest ([`Refused::Probing`]) until it ends.
    Probe,
    /// The summary strategy's, per summary: open until the cool-down has passed, its last
    /// instant included; then every call goes, and as its failures were not forgotten, the next
    /// failure opens the circuit again.
    NoProbe,
}

/// The breaker's state (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Calls go; `failures` consecutive ones failed so far (fewer than the threshold).
    Closed { failures: u32 },
    /// Opened by the failure at `at`: refuses calls for the cool-down after it; then cooled
    /// (the [`Policy`] says what goes).
    Open { at: Instant },
    /// [`Policy::Probe`], cooled: one probe is out and every other attempt is refused.
    Probing,
}

/// The breaker's state machine, without clock or waiting: every step is given `now`.
#[derive(Debug)]
struct Circuit {
    state: State,
    /// Attempts admitted by [`Circuit::admit`] and not ended yet (a count).
    in_flight: u32,
    /// Consecutive failures that open the circuit (a count; 0: never).
    threshold: u32,
    /// How long the open circuit refuses calls after the failure that opened it.
    cooldown: Duration,
    policy: Policy,
}

/// What [`Circuit::admit`] answers an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// It may go; it is counted in flight until [`Circuit::end`].
    Admitted,
    /// It may not go.
    Refused(Refused),
    /// Closed, but failures + attempts in flight are at the threshold: it waits for an end.
    Wait,
}

impl Circuit {
    fn new(threshold: u32, cooldown: Duration, policy: Policy) -> Circuit {
        Circuit {
            state: State::Closed { failures: 0 },
            in_flight: 0,
            threshold,
            cooldown,
            policy,
        }
    }

    /// The cool-down left at `now` while the circuit is open; `None` when it is not open.
    fn open_for(&self, now: Instant) -> Option<Duration> {
        let State::Open { at } = self.state else {
            return None;
        };
        let passed = now.saturating_duration_since(at);
        let open = match self.policy {
            Policy::Probe => passed < self.cooldown,
            Policy::NoProbe => passed <= self.cooldown,
        };
        open.then(|| self.cooldown - passed)
    }

    /// One attempt asks to go at `now`.
    fn admit(&mut self, now: Instant) -> Admission {
        if let Some(left) = self.open_for(now) {
            return Admission::Refused(Refused::Open(left));
        }
        match self.state {
            State::Probing => return Admission::Refused(Refused::Probing),
            State::Open { .. } => {
                // Cooled.
                if self.policy == Policy::Probe {
                    self.state = State::Probing;
                }
            }
            State::Closed { failures } => {
                if self.threshold > 0 && failures.saturating_add(self.in_flight) >= self.threshold {
                    return Admission::Wait;
                }
            }
        }
        self.in_flight += 1;
        Admission::Admitted
    }

    /// An admitted attempt ended at `now`, `ok` or not.
    fn end(&mut self, now: Instant, ok: bool) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.record(now, ok);
    }

    /// A call's outcome at `now`, `ok` or not.
    fn record(&mut self, now: Instant, ok: bool) {
        self.state = match (self.state, ok) {
            (_, true) => State::Closed { failures: 0 },
            (State::Closed { failures }, false)
                if self.threshold == 0 || failures + 1 < self.threshold =>
            {
                State::Closed {
                    failures: failures.saturating_add(1),
                }
            }
            (_, false) => State::Open { at: now },
        };
    }
}

/// A circuit breaker (see the module docs). Cheap to clone: the clones share one circuit.
#[derive(Debug, Clone)]
pub(crate) struct Breaker {
    circuit: Arc<Mutex<Circuit>>,
    /// Wakes the attempts waiting for room when the state changes.
    changed: Arc<Notify>,
}

/// Why a call was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The circuit is open for this much longer.
    Open(Duration),
    /// [`Policy::Probe`]: the circuit has cooled and its one probe is out.
    Probing,
}

/// One admitted attempt. Report its outcome with [`Ticket::succeeded`] or
/// [`Ticket::failed`]; dropping it unreported counts as a failure.
#[derive(Debug)]
pub(crate) struct Ticket {
    breaker: Breaker,
    done: bool,
}

impl Breaker {
    /// A breaker opening after `threshold` consecutive failures (a count; 0: never) and then
    /// refusing calls for `cooldown`, with `policy` once that has passed.
    pub(crate) fn new(threshold: u32, cooldown: Duration, policy: Policy) -> Breaker {
        Breaker {
            circuit: Arc::new(Mutex::new(Circuit::new(threshold, cooldown, policy))),
            changed: Arc::new(Notify::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Circuit> {
        // The state is a few words written under the lock: a panic cannot leave it torn.
        self.circuit.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the right to send one attempt, counted in flight until its [`Ticket`] ends.
    ///
    /// # Errors
    /// [`Refused`] when the circuit is open, or cooled with its probe out.
    pub(crate) async fn admit(&self) -> Result<Ticket, Refused> {
        loop {
            // Registered before the state is read, so an end between the read and the wait
            // still wakes this waiter.
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let admission = self.lock().admit(Instant::now());
            match admission {
                Admission::Admitted => {
                    return Ok(Ticket {
                        breaker: self.clone(),
                        done: false,
                    });
                }
                Admission::Refused(refused) => return Err(refused),
                Admission::Wait => {}
            }
            notified.await;
        }
    }

    /// The cool-down left at `now` (`Instant::now()` but in tests) while the circuit is open;
    /// `None` when a call may go. Used after the fact with [`Breaker::record`]: nothing is
    /// counted in flight.
    pub(crate) fn open_for(&self, now: Instant) -> Option<Duration> {
        self.lock().open_for(now)
    }

    /// Records the outcome, at `now` (`Instant::now()` but in tests), of a call
    /// [`Breaker::open_for`] let go, `ok` or not.
    pub(crate) fn record(&self, now: Instant, ok: bool) {
        self.lock().record(now, ok);
        self.changed.notify_waiters();
    }

    fn end(&self, ok: bool) {
        self.lock().end(Instant::now(), ok);
        self.changed.notify_waiters();
    }
}

impl Ticket {
    /// The attempt got an answer the model's health counts as good.
    pub(crate) fn succeeded(mut self) {
        self.done = true;
        self.breaker.end(true);
    }

    /// The attempt failed (transport error, timeout, 429, 5xx, an answer over the size cap).
    pub(crate) fn failed(mut self) {
        self.done = true;
        self.breaker.end(false);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.done {
            self.breaker.end(false);
        }
    }
}
