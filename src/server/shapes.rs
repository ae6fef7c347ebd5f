//! The shapes the rule table does not know that the proxy has seen: one WARN per shape
//! (format and role or block/item type) and process, so an operator learns that a client sends
//! something new once, not on every request (the count goes on in
//! `compactor_opaque_units_total`).

use crate::rules::Unknown;
use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

/// The most shapes remembered; past it new shapes are no longer logged one by one (a client
/// choosing random type names must not grow the set), and one line says so.
const MAX_SHAPES: usize = 256;

/// The shapes seen so far.
#[derive(Debug, Default)]
pub(crate) struct Shapes {
    seen: Mutex<HashSet<(String, Unknown)>>,
}

/// What to log of a shape.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FirstSeen {
    /// Seen before: nothing.
    Known,
    /// New: one WARN.
    New,
    /// New, and the set just filled up: one WARN saying later shapes are not logged.
    Last,
}

impl Shapes {
    /// Whether `what` in a body of `format` is new to this process (see [`FirstSeen`]).
    pub(crate) fn first_seen(&self, format: &str, what: &Unknown) -> FirstSeen {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= MAX_SHAPES {
            return FirstSeen::Known;
        }
        if !seen.insert((format.to_string(), what.clone())) {
            return FirstSeen::Known;
        }
        if seen.len() == MAX_SHAPES {
            FirstSeen::Last
        } else {
            FirstSeen::New
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_is_new_once_and_the_set_is_bounded() {
        let shapes = Shapes::default();
        let role = Unknown::Role("critic".into());
        assert_eq!(shapes.first_seen("anthropic", &role), FirstSeen::New);
        assert_eq!(shapes.first_seen("anthropic", &role), FirstSeen::Known);
        assert_eq!(shapes.first_seen("openai-chat", &role), FirstSeen::New);
        let mut last = Vec::new();
        for i in 0..1000 {
            let what = Unknown::Block {
                name: format!("t{i}"),
                nested: false,
            };
            last.push(shapes.first_seen("anthropic", &what));
        }
        // 2 roles + 254 blocks fill the set; the 254th block says so; none after it is new.
        assert_eq!(last.iter().filter(|f| **f == FirstSeen::New).count(), 253);
        assert_eq!(last[253], FirstSeen::Last);
        assert!(last[254..].iter().all(|f| *f == FirstSeen::Known));
        assert_eq!(shapes.seen.lock().unwrap().len(), MAX_SHAPES);
    }
}
