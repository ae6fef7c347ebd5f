//! The circuit breaker in front of the summarizer's HTTP attempts, counting calls in flight.
//!
//! ```text
//! closed     admits an attempt while failures + attempts in flight < threshold, else waits
//!            for one to end; `threshold` consecutive failures -> open
//! open       refuses every attempt (retries of requests already in flight too) until the
//!            cool-down has passed -> half-open
//! half-open  admits one probe and refuses the rest; its success -> closed, its failure -> open
//! ```
//! Counting the attempts in flight is what keeps a burst bounded: 8 concurrent requests to a
//! failing model make at most `threshold` calls, not 8 x (1 + retries), because no more
//! attempts are ever out than the breaker could still count as failures before it opens.
//! An attempt that is dropped before its answer (the time budget ran out) counts as failed.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The breaker's state (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Calls go out; `failures` consecutive ones failed so far.
    Closed { failures: u32 },
    /// Every attempt is refused until `until`.
    Open { until: Instant },
    /// One probe is out (`probing`) or may go out.
    HalfOpen { probing: bool },
}

#[derive(Debug)]
struct Inner {
    state: State,
    in_flight: u32,
}

/// A circuit breaker shared by every request of one summarizer. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Breaker {
    inner: Arc<Mutex<Inner>>,
    changed: Arc<Notify>,
    /// Consecutive failed attempts that open the circuit (0: never open, no in-flight bound).
    threshold: u32,
    cooldown: Duration,
}

/// Why an attempt was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The circuit is open for this much longer.
    Open(Duration),
    /// The circuit is half-open and its one probe is out.
    Probing,
}

/// One admitted attempt. Report its outcome with [`Ticket::succeeded`] or
/// [`Ticket::failed`]; dropping it unreported counts as a failure.
#[derive(Debug)]
pub struct Ticket {
    breaker: Breaker,
    done: bool,
}

impl Breaker {
    /// A breaker opening after `threshold` consecutive failed attempts, for `cooldown`.
    pub fn new(threshold: u32, cooldown: Duration) -> Breaker {
        Breaker {
            inner: Arc::new(Mutex::new(Inner {
                state: State::Closed { failures: 0 },
                in_flight: 0,
            })),
            changed: Arc::new(Notify::new()),
            threshold,
            cooldown,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The state is a few words written under the lock: a panic cannot leave it torn.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the right to send one attempt.
    ///
    /// # Errors
    /// [`Refused`] when the circuit is open, or half-open with its probe out.
    pub async fn admit(&self) -> Result<Ticket, Refused> {
        loop {
            // Registered before the state is read, so an end between the read and the wait
            // still wakes this waiter.
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut inner = self.lock();
                let now = Instant::now();
                if let State::Open { until } = inner.state {
                    if now < until {
                        return Err(Refused::Open(until - now));
                    }
                    inner.state = State::HalfOpen { probing: false };
                }
                match inner.state {
                    State::HalfOpen { probing: true } => return Err(Refused::Probing),
                    State::HalfOpen { probing: false } => {
                        inner.state = State::HalfOpen { probing: true };
                        inner.in_flight += 1;
                        return Ok(self.ticket());
                    }
                    State::Closed { failures }
                        if self.threshold == 0 || failures + inner.in_flight < self.threshold =>
                    {
                        inner.in_flight += 1;
                        return Ok(self.ticket());
                    }
                    // Closed with no room: wait for an attempt to end.
                    State::Closed { .. } | State::Open { .. } => {}
                }
            }
            notified.await;
        }
    }

    fn ticket(&self) -> Ticket {
        Ticket {
            breaker: self.clone(),
            done: false,
        }
    }

    fn end(&self, ok: bool) {
        {
            let mut inner = self.lock();
            inner.in_flight = inner.in_flight.saturating_sub(1);
            inner.state = match (inner.state, ok) {
                (_, true) => State::Closed { failures: 0 },
                (State::Closed { failures }, false)
                    if self.threshold == 0 || failures + 1 < self.threshold =>
                {
                    State::Closed {
                        failures: failures + 1,
                    }
                }
                (State::Open { until }, false) => State::Open { until },
                (_, false) => State::Open {
                    until: Instant::now() + self.cooldown,
                },
            };
        }
        self.changed.notify_waiters();
    }

    /// Whether the circuit is open now (for logs and tests).
    pub fn is_open(&self) -> bool {
        matches!(self.lock().state, State::Open { until } if Instant::now() < until)
    }
}

impl Ticket {
    /// The attempt got an answer the model's health counts as good.
    pub fn succeeded(mut self) {
        self.done = true;
        self.breaker.end(true);
    }

    /// The attempt failed (transport error, timeout, 429, 5xx, an answer over the size cap).
    pub fn failed(mut self) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn attempts_in_flight_and_failures_never_exceed_the_threshold() {
        let b = Breaker::new(3, Duration::from_secs(60));
        let t1 = b.admit().await.unwrap();
        let t2 = b.admit().await.unwrap();
        t1.failed();
        let t3 = b.admit().await.unwrap();
        // 1 failure + 2 in flight: a fourth attempt waits (it is not admitted yet).
        let waiting = tokio::spawn({
            let b = b.clone();
            async move { b.admit().await.map(|t| t.failed()) }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        t2.failed();
        t3.failed();
        // Three failures: open; the waiter is refused, not sent.
        assert!(matches!(waiting.await.unwrap(), Err(Refused::Open(_))));
        assert!(b.is_open());
    }

    #[tokio::test]
    async fn half_open_admits_one_probe_and_its_success_closes() {
        let b = Breaker::new(1, Duration::from_millis(0));
        b.admit().await.unwrap().failed();
        let probe = b.admit().await.unwrap();
        assert_eq!(b.admit().await.err(), Some(Refused::Probing));
        probe.succeeded();
        b.admit().await.unwrap().succeeded();
        assert!(!b.is_open());
        // A failed probe opens the circuit again.
        b.admit().await.unwrap().failed();
        let probe = b.admit().await.unwrap();
        probe.failed();
        let b = Breaker {
            cooldown: Duration::from_secs(60),
            ..b
        };
        b.admit().await.unwrap().failed();
        assert!(matches!(b.admit().await, Err(Refused::Open(_))));
    }

    #[tokio::test]
    async fn a_dropped_ticket_counts_as_a_failure() {
        let b = Breaker::new(1, Duration::from_secs(60));
        drop(b.admit().await.unwrap());
        assert!(matches!(b.admit().await, Err(Refused::Open(_))));
    }
}
