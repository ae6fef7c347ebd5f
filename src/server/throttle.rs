//! A rate limit for log lines: at most one per key per interval, and how many were held back
//! since the last one (so a WARN that repeats on every request of a busy proxy says so once a
//! minute instead of flooding the log).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The most keys remembered; past it a new key shares the slot of [`OTHER`] (callers use a
/// fixed set of keys, e.g. the guard's rule names: this bound is a safety net).
const MAX_KEYS: usize = 256;

/// The slot of the keys past [`MAX_KEYS`].
const OTHER: &str = "other";

/// At most one event per key per `interval`.
#[derive(Debug)]
pub(crate) struct Throttle {
    interval: Duration,
    /// Per key: when its last event was let through, and how many were held back since.
    last: Mutex<HashMap<String, (Instant, u64)>>,
}

impl Throttle {
    /// A throttle letting one event per key through every `interval`.
    pub(crate) fn new(interval: Duration) -> Throttle {
        Throttle {
            interval,
            last: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(held back)` when an event of `key` may be logged now (the number of events of
    /// the key held back since the last one let through); `None` when it is held back.
    pub(crate) fn allow(&self, key: &str) -> Option<u64> {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let key = if last.contains_key(key) || last.len() < MAX_KEYS {
            key
        } else {
            OTHER
        };
        match last.get_mut(key) {
            Some((at, held)) if now.duration_since(*at) < self.interval => {
                *held += 1;
                None
            }
            Some((at, held)) => {
                *at = now;
                Some(std::mem::take(held))
            }
            None => {
                last.insert(key.to_string(), (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_per_key_per_interval_and_the_count_held_back() {
        let t = Throttle::new(Duration::from_millis(200));
        assert_eq!(t.allow("orphan_result"), Some(0));
        assert_eq!(t.allow("orphan_result"), None);
        assert_eq!(t.allow("orphan_result"), None);
        // Another rule has its own clock.
        assert_eq!(t.allow("role_not_allowed"), Some(0));
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(t.allow("orphan_result"), Some(2));
        assert_eq!(t.allow("orphan_result"), None);
    }

    #[test]
    fn keys_past_the_bound_share_one_slot() {
        let t = Throttle::new(Duration::from_secs(60));
        for i in 0..MAX_KEYS {
            assert_eq!(t.allow(&format!("k{i}")), Some(0));
        }
        assert_eq!(t.allow("one more"), Some(0));
        assert_eq!(t.allow("and another"), None);
        assert_eq!(t.last.lock().unwrap().len(), MAX_KEYS + 1);
    }
}
