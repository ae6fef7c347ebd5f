//! What a record did to the user's words ([`UserWords`]): the requests it shortened, the run
//! it left out ([`LeftOut`]) and the line that names that run, written and read back.

use serde::Serialize;

/// What a record of a dropped span did to the user's requests, by request number (`#N` in
/// its lines, counted from the session's first request). Empty when every request of the span
/// is written verbatim.
///
/// The user's words come first in a record (`super::SessionState::render`) and are kept
/// even past its room: a request is shortened when the requests whole would take more than
/// half the room, and left out only when, shortened, they take more than the words' ceiling
/// leaves after the section titles and the failures (the ceiling: what the whole output can
/// give the record, `super::SessionState::with_words_ceiling`): the first request (the
/// task) and the newest ones are kept, the ones between named by a line `[… N earlier
/// requests left out: #a–#b]` (one run, with the requests earlier records had left out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UserWords {
    /// Requests written shortened around their constraint sentences (first sentence, every
    /// sentence with an instruction word, last sentence; `crate::facts::around_constraints`),
    /// each line tagged `(shortened)`.
    pub shortened: Vec<usize>,
    /// Requests left out of the record: one run between the first and the newest kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_out: Option<LeftOut>,
    /// Sentences this record's shortening of the written requests left out as repeats of a
    /// kept one (`Always run tests. [… 39 repeats left out]`;
    /// `crate::facts::Shortened::repeats_left_out`), summed over those requests.
    #[serde(skip_serializing_if = "is_zero")]
    pub repeats_left_out: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The run of requests a record left out ([`UserWords::left_out`]), by request number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// How many requests (this record's and those earlier records had left out).
    pub count: usize,
    /// The first one's number.
    pub first: usize,
    /// The last one's number.
    pub last: usize,
}

impl LeftOut {
    /// One run of both: the counts added, from the first of either to the last of either.
    pub fn joined(self, other: LeftOut) -> LeftOut {
        LeftOut {
            count: self.count + other.count,
            first: self.first.min(other.first),
            last: self.last.max(other.last),
        }
    }
}

impl UserWords {
    /// Whether every request of the span is written verbatim.
    pub fn is_verbatim(&self) -> bool {
        self.shortened.is_empty() && self.left_out.is_none() && self.repeats_left_out == 0
    }

    /// The report's note: `the record's user words: 2 requests shortened around their
    /// constraint sentences (#3, #7); 4980 requests left out (#2–#4981), the first and the
    /// newest kept`.
    pub fn note(&self) -> String {
        let list = |ns: &[usize]| match ns {
            [a, .., b] if ns.len() > 3 => format!("#{a}–#{b}"),
            _ => ns
                .iter()
                .map(|n| format!("#{n}"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let mut parts = Vec::new();
        if !self.shortened.is_empty() {
            let repeats = match self.repeats_left_out {
                0 => String::new(),
                n => format!(", {n} repeated sentences left out"),
            };
            parts.push(format!(
                "{} requests shortened around their constraint sentences ({}){repeats}",
                self.shortened.len(),
                list(&self.shortened)
            ));
        }
        if let Some(l) = self.left_out {
            parts.push(format!(
                "{} requests left out (#{}–#{}), the first and the newest kept",
                l.count, l.first, l.last
            ));
        }
        format!("the record's user words: {}", parts.join("; "))
    }
}

/// `[… N earlier requests left out: #a–#b]` (`[… 1 earlier request left out: #a]`).
pub(super) fn left_out_line(run: LeftOut) -> String {
    if run.count == 1 && run.first == run.last {
        format!("[… 1 earlier request left out: #{}]", run.first)
    } else {
        format!(
            "[… {} earlier requests left out: #{}–#{}]",
            run.count, run.first, run.last
        )
    }
}

/// The run a [`left_out_line`] names, read back from its tag (`… N earlier requests left
/// out`) and body (`#a–#b` or `#a`).
pub(super) fn left_out_of(tag: &str, body: &str) -> Option<LeftOut> {
    let words = tag.trim_start_matches('…').trim();
    let (n, rest) = words.split_once(' ')?;
    if rest != "earlier requests left out" && rest != "earlier request left out" {
        return None;
    }
    let count = n.parse().ok()?;
    let body = body.trim();
    let (first, last) = body.split_once('–').unwrap_or((body, body));
    let number = |x: &str| x.trim().strip_prefix('#')?.parse().ok();
    Some(LeftOut {
        count,
        first: number(first)?,
        last: number(last)?,
    })
}
