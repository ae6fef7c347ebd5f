//! The circuit breaker in front of the summarizer's HTTP attempts, counting calls in flight.
//!
//! ```text
//! closed     admits an attempt while failures + attempts in flight < threshold, else waits
//!            for one to end; `threshold` consecutive failures -> open (threshold 0: never)
//! open       refuses every attempt (retries of requests already in flight too) until the
//!            cool-down has passed since the failure that opened it -> cooled
//! cooled     admits one probe and refuses the rest; its success -> closed, its failure -> open
//! ```
//! Counting the attempts in flight is what keeps a burst bounded: 8 concurrent requests to a
//! failing model make at most `threshold` calls, not 8 x (1 + retries), because no more
//! attempts are ever out than the breaker could still count as failures before it opens.
//! An attempt that is dropped before its answer (the time budget ran out) counts as failed.
//!
//! The state machine ([`Circuit`]) is given the time of every step, so its tests set the clock
//! instead of sleeping.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[cfg(test)]
mod tests;

/// The breaker's state (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Calls go; `failures` consecutive ones failed so far (fewer than the threshold).
    Closed { failures: u32 },
    /// Opened by the failure at `at`: refuses attempts for the cool-down after it; then cooled,
    /// the next attempt is a probe.
    Open { at: Instant },
    /// Cooled: one probe is out and every other attempt is refused.
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
    /// How long the open circuit refuses attempts after the failure that opened it.
    cooldown: Duration,
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
    fn new(threshold: u32, cooldown: Duration) -> Circuit {
        Circuit {
            state: State::Closed { failures: 0 },
            in_flight: 0,
            threshold,
            cooldown,
        }
    }

    /// The cool-down left at `now` while the circuit is open; `None` when it is not open.
    fn open_for(&self, now: Instant) -> Option<Duration> {
        let State::Open { at } = self.state else {
            return None;
        };
        let passed = now.saturating_duration_since(at);
        (passed < self.cooldown).then(|| self.cooldown - passed)
    }

    /// One attempt asks to go at `now`.
    fn admit(&mut self, now: Instant) -> Admission {
        if let Some(left) = self.open_for(now) {
            return Admission::Refused(Refused::Open(left));
        }
        match self.state {
            State::Probing => return Admission::Refused(Refused::Probing),
            // Cooled: this one is the probe.
            State::Open { .. } => self.state = State::Probing,
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

    /// An attempt's outcome at `now`, `ok` or not.
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

/// A circuit breaker shared by every request of one summarizer (see the module docs). Cheap to
/// clone: the clones share one circuit.
#[derive(Debug, Clone)]
pub(crate) struct Breaker {
    circuit: Arc<Mutex<Circuit>>,
    /// Wakes the attempts waiting for room when the state changes.
    changed: Arc<Notify>,
}

/// Why an attempt was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The circuit is open for this much longer.
    Open(Duration),
    /// The circuit has cooled and its one probe is out.
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
    /// A breaker opening after `threshold` consecutive failed attempts (a count; 0: never) and
    /// then refusing attempts for `cooldown`.
    pub(crate) fn new(threshold: u32, cooldown: Duration) -> Breaker {
        Breaker {
            circuit: Arc::new(Mutex::new(Circuit::new(threshold, cooldown))),
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
