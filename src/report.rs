//! What a compaction did, for humans (one line) and machines (JSON).

use crate::guard::{PlanError, Violation};
use crate::strategy::Edit;
use serde::{Serialize, Serializer};

/// The outcome of a compaction run.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Under the trigger, or nothing could be done: the input is returned as it was.
    Unchanged,
    /// Compacted and within the budget.
    Compacted,
    /// The best valid result is still over the budget (never longer than the input).
    OverBudget,
    /// Within the budget, but a tier fell back to a lesser method (e.g. summary -> truncate).
    Degraded,
    /// Under the trigger, or no tier's output could be taken, but unusable images were
    /// replaced by placeholders ([`Report::repairs`]): the output is the input with only those
    /// repairs.
    Repaired,
}

/// One tier's run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TierRun {
    /// The strategy's name.
    pub strategy: String,
    /// Whether its output was taken.
    pub accepted: bool,
    /// Tokens of its output in model tokens (0 when it produced none).
    pub tokens_after: usize,
    /// Why the guard refused the tier (its plan or its output), if it did.
    ///
    /// Serialized under the key `violations` as a list of strings: `[]` when not refused,
    /// `["plan refused: edit 0: messages[3] is protected (pinned prefix or open tool loop)"]`
    /// for a refused plan, one `PATH: WHAT` line per violation for a refused output
    /// (`messages[3].content[0]: text block is empty or whitespace only`).
    #[serde(rename = "violations", serialize_with = "refusal_lines")]
    pub refused: Option<Refusal>,
    /// Its remarks.
    pub notes: Vec<String>,
    /// Its edits, with message indices relative to the tier's input.
    pub edits: Vec<Edit>,
    /// Wall time of the strategy, in milliseconds.
    pub millis: f64,
    /// Why the strategy fell back to `truncate` (the only fallback: `summary` falls back to the
    /// rule truncation, see [`crate::strategy::Compaction::degraded`]), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
    /// Why the strategy could not run at all, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// The originals its output names by recall id (indices and paths relative to the tier's
    /// input), when its output was taken.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recall: Vec<crate::recall::RecallRef>,
    /// What its plan's drop kept in place and carried (indices of the tier's input), when it
    /// dropped something.
    #[serde(skip_serializing_if = "Carried::is_empty")]
    pub carried: Carried,
}

/// Why the guard refused a tier ([`TierRun::refused`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// `guard::apply` refused the strategy's plan, naming the faulty edit; there is no output.
    /// In the JSON report: `plan refused: edit 2: conflicts with edit 1`.
    Plan(PlanError),
    /// The guard's verdict on the built output: the rules it breaks (never empty), in the
    /// order found. In the JSON report: one `PATH: WHAT` line each.
    Output(Vec<Violation>),
}

/// Serializes [`TierRun::refused`] as the lines the report has always carried: `[]`,
/// `["plan refused: {error}"]`, or one `PATH: WHAT` per violation.
fn refusal_lines<S: Serializer>(refused: &Option<Refusal>, s: S) -> Result<S::Ok, S::Error> {
    match refused {
        None => s.collect_seq(std::iter::empty::<String>()),
        Some(Refusal::Plan(e)) => s.collect_seq([format!("plan refused: {e}")]),
        Some(Refusal::Output(v)) => violation_lines(v, s),
    }
}

/// Serializes violations as their `PATH: WHAT` lines (their `Display`), as the JSON reports
/// carry them (`#[serde(serialize_with = "...")]`).
pub(crate) fn violation_lines<S: Serializer>(v: &[Violation], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(ToString::to_string))
}

/// What a tier's drop kept in place and carried ([`crate::guard::Layout::carry`]), indices
/// of the tier's input.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Carried {
    /// Messages of the dropped span kept verbatim after the marker, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<KeptMessage>,
    /// The system / developer messages whose standing content one carried system message
    /// re-sends (Anthropic).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system_from: Vec<usize>,
    /// The client's context blocks that open the marker message, each with the message it
    /// came from and its tag (Claude Code's `system-reminder`, Codex's `environment_context`
    /// and AGENTS.md `INSTRUCTIONS`): the newest of each kind the dropped span held.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<CarriedContext>,
}

/// A context block of a dropped user message, carried verbatim into the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CarriedContext {
    /// The message it came from (an index of the tier's input).
    pub message: usize,
    /// Its tag.
    pub tag: String,
}

impl Carried {
    /// Nothing kept or carried.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.system_from.is_empty() && self.context.is_empty()
    }
}

/// A message of a dropped span kept in place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeptMessage {
    /// Its index.
    pub message: usize,
    /// Why.
    #[serde(flatten)]
    pub because: crate::guard::Kept,
}

/// A unit the format's rule table does not know, kept byte-identical and in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpaqueUnit {
    /// The JSON path of the message (`messages[3]`, `input[7]`).
    pub path: String,
    /// Its index in the input.
    pub message: usize,
    /// What the table does not know.
    pub what: crate::rules::Unknown,
}

/// Wall times in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Timings {
    /// Counting the input.
    pub count_ms: f64,
    /// All strategies together.
    pub strategies_ms: f64,
    /// All guard checks together.
    pub guard_ms: f64,
    /// The whole run.
    pub total_ms: f64,
}

/// What a request asks of the model, as far as compaction cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// An agent's turn: compacted to the budget (`[budget]`).
    #[default]
    Turn,
    /// The client's own request for a summary of the conversation (Claude Code's, after a
    /// `prompt is too long` answer; phrases in `[carry] summary_requests`): compacted only as
    /// far as the model's context window (less the output reserve) requires, so the client's
    /// summary is written from the fullest history that fits.
    ClientSummary,
}

/// The report of one compaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The outcome.
    pub status: Status,
    /// What the request asks: a turn (compacted to the budget) or the client's own summary
    /// request (compacted to the context window).
    pub request: RequestKind,
    /// The preset (`default`, `truncate`, ...).
    pub strategy: String,
    /// The wire format.
    pub format: String,
    /// Tokens of the input (system prompt, tools and messages), in the target model's tokens
    /// (see `counting`).
    pub tokens_before: usize,
    /// Tokens of the output, in the target model's tokens.
    pub tokens_after: usize,
    /// How the counter's tokens became model tokens: the model, the vocabulary, the ratio and
    /// overhead in force and where the ratio comes from.
    pub counting: crate::tokens::ModelTokens,
    /// The counter's own tokens (`counting.tokenizer`) of the input, before the ratio.
    pub counted_before: usize,
    /// The counter's own tokens of the output, before the ratio: what
    /// [`crate::Compactor::observe_usage`] compares with the provider's `usage`.
    pub counted_after: usize,
    /// The budget in model tokens; budget, trigger and target are all model tokens.
    pub budget: usize,
    /// Compaction starts above this many tokens.
    pub trigger: usize,
    /// Compaction aims for this many tokens.
    pub target: usize,
    /// Messages in and out.
    pub messages_before: usize,
    /// Messages out.
    pub messages_after: usize,
    /// Each tier that ran, in order.
    pub tiers: Vec<TierRun>,
    /// Messages of the history prefix whose remembered compaction this run continued from
    /// (hysteresis across calls), if any.
    pub continued_from: Option<usize>,
    /// Remarks (skipped tiers, unreachable target, ...).
    pub notes: Vec<String>,
    /// Tiers of the policy that could not run here, with the reason (`summary tier skipped: no
    /// [llm] configured`).
    pub skipped: Vec<String>,
    /// Timings.
    pub timings: Timings,
    /// The unusable inline images (empty or undecodable base64 data) outside the newest
    /// exchange that were replaced by text placeholders before compacting, in message order
    /// (indices and paths of the input). Each is also a warning ([`Report::warnings`]).
    pub repairs: Vec<crate::guard::ImageRepair>,
    /// The originals the output names by recall id (those of the tiers whose output was
    /// taken, in order), each kept in the recall store ([`crate::Compactor::recall`]). Empty
    /// when recall is off or nothing was cleared or dropped; not serialized then.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recall: Vec<crate::recall::RecallRef>,
    /// The messages of the input holding a role, block or item type the format's rule table
    /// does not know (`crate::rules`): each is kept byte-identical and in place (with its
    /// tool exchange), and the rest is compacted as usual. Not serialized when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub opaque: Vec<OpaqueUnit>,
    /// The estimated input cost of the output as forwarded and of the input as it came, with
    /// prompt caching ([`crate::cost`]); `None` before the pipeline sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::cost::CostEstimate>,
    /// Where compactor put its own `cache_control` breakpoint on an Anthropic output, as a
    /// JSON path (`messages[0].content[7]`): the end of the prefix of the input it kept, which
    /// the next re-compaction keeps too (`crate::guard::cache::kept_prefix_end`). Not
    /// serialized when none was put.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_breakpoint: Option<String>,
}

impl Report {
    /// Tiers whose output was taken, joined by `+` (`microcompact+truncate`), or `none`. A tier
    /// that fell back is named by what did the work: `truncate after summary failed`.
    pub fn applied(&self) -> String {
        let names: Vec<String> = self
            .tiers
            .iter()
            .filter(|t| t.accepted)
            .map(|t| match &t.degraded {
                Some(_) => format!("truncate after {} failed", t.strategy),
                None => t.strategy.clone(),
            })
            .collect();
        match (names.is_empty(), self.continued_from) {
            (true, Some(_)) => "remembered".into(),
            (true, None) => "none".into(),
            (false, Some(_)) => format!("remembered+{}", names.join("+")),
            (false, None) => names.join("+"),
        }
    }

    /// One line per image repaired, then per tier that was skipped, could not run, or fell
    /// back, for stderr: `messages[3].content[0].content[1]: image removed (empty base64
    /// data): the provider would reject every later request`,
    /// `summary tier skipped: no [llm] configured`,
    /// `summary failed (connection refused): fell back to truncate`.
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self.repairs.iter().map(ToString::to_string).collect();
        // One line per shape (the same unknown type in many messages is said once).
        let mut shapes: Vec<&crate::rules::Unknown> = Vec::new();
        for u in &self.opaque {
            if !shapes.contains(&&u.what) {
                shapes.push(&u.what);
                let n = self.opaque.iter().filter(|x| x.what == u.what).count();
                let more = if n > 1 {
                    format!(" (and {} more)", n - 1)
                } else {
                    String::new()
                };
                out.push(format!(
                    "{}: {} is unknown to the {} rules: kept as it is, in place{more}",
                    u.path, u.what, self.format
                ));
            }
        }
        out.extend(self.skipped.iter().cloned());
        for t in &self.tiers {
            if let Some(why) = &t.failed {
                out.push(format!("{} failed ({why}); went on without it", t.strategy));
            }
            if let Some(why) = t.degraded.as_ref().filter(|_| t.accepted) {
                out.push(why.clone());
            }
        }
        out
    }

    /// Tiers the guard refused (their plan or their output, [`TierRun::refused`]).
    pub fn rejections(&self) -> usize {
        self.tiers.iter().filter(|t| t.refused.is_some()).count()
    }

    /// The one-line human summary:
    /// `compacted: 182,345 -> 61,200 tokens (budget 150,000, target 90,000) by microcompact+truncate; 12 cleared, 40 messages dropped`.
    /// When the model tokens are the counter's own, the parentheses say so first:
    /// `(no model named: o200k_base tokens as counted; budget …`
    /// ([`ModelTokens::as_counted`](crate::tokens::ModelTokens::as_counted)).
    pub fn summary_line(&self) -> String {
        use crate::strategy::Edit::*;
        let t = crate::strategy::thousands;
        let (mut cleared, mut truncated, mut dropped, mut summarized) = (0, 0, 0, 0);
        for e in self
            .tiers
            .iter()
            .filter(|r| r.accepted)
            .flat_map(|r| &r.edits)
        {
            match e {
                Cleared { .. } => cleared += 1,
                Truncated { .. } => truncated += 1,
                Dropped { from, to, .. } => dropped += to - from,
                Summarized { from, to, .. } => summarized += to - from,
            }
        }
        let status = match self.status {
            Status::Unchanged => "unchanged",
            Status::Compacted => "compacted",
            Status::OverBudget => "over_budget",
            Status::Degraded => "degraded",
            Status::Repaired => "repaired",
        };
        let parts: Vec<String> = [
            (cleared, "result", "cleared"),
            (truncated, "block", "truncated"),
            (dropped, "message", "dropped"),
            (summarized, "message", "summarized"),
            (self.repairs.len(), "unusable image", "removed"),
        ]
        .into_iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, noun, done)| format!("{} {done}", counted(n, noun)))
        .collect();
        let what = if parts.is_empty() {
            String::new()
        } else {
            format!("; {}", parts.join(", "))
        };
        // Model tokens that are the counter's own say so (no model named, no rule).
        let counting = self
            .counting
            .as_counted()
            .map(|c| format!("{c}; "))
            .unwrap_or_default();
        format!(
            "{status}: {} -> {} tokens ({counting}budget {}, target {}) by {} [{}]{what}",
            t(self.tokens_before),
            t(self.tokens_after),
            t(self.budget),
            t(self.target),
            self.applied(),
            self.strategy,
        )
    }
}

/// `1 block`, `2 blocks`: a count with its noun, plural when it is not 1.
pub(crate) fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", crate::strategy::thousands(n))
    }
}

#[cfg(test)]
mod tests {
    use super::{Refusal, TierRun, counted};
    use crate::guard::{PlanError, Violation, ViolationKind};

    #[test]
    fn a_count_of_one_is_singular_and_others_plural() {
        assert_eq!(counted(1, "block"), "1 block");
        assert_eq!(counted(2, "block"), "2 blocks");
        assert_eq!(counted(1_234, "unusable image"), "1,234 unusable images");
    }

    /// The typed refusal is written as the lines the report has always carried, under
    /// `violations`, between `tokens_after` and `notes`.
    #[test]
    fn a_refusal_serializes_as_the_report_lines() {
        let run = |refused| TierRun {
            strategy: "truncate".into(),
            accepted: false,
            tokens_after: 0,
            refused,
            notes: Vec::new(),
            edits: Vec::new(),
            millis: 0.0,
            degraded: None,
            failed: None,
            recall: Vec::new(),
            carried: Default::default(),
        };
        let json = |r: TierRun| serde_json::to_string(&r).unwrap();
        let empty = Violation {
            path: "messages[3].content[0]".into(),
            message: Some(3),
            block: Some(0),
            kind: ViolationKind::EmptyText,
            rule: None,
        };
        assert_eq!(
            json(run(None)),
            r#"{"strategy":"truncate","accepted":false,"tokens_after":0,"violations":[],"notes":[],"edits":[],"millis":0.0}"#
        );
        let plan = json(run(Some(Refusal::Plan(PlanError::Conflict {
            edit: 2,
            other: 1,
        }))));
        assert!(
            plan.contains(
                r#""violations":["plan refused: edit 2: conflicts with edit 1"],"notes""#
            ),
            "{plan}"
        );
        let output = json(run(Some(Refusal::Output(vec![empty.clone(), empty]))));
        let line = "messages[3].content[0]: text block is empty or whitespace only";
        assert!(
            output.contains(&format!(r#""violations":["{line}","{line}"],"notes""#)),
            "{output}"
        );
    }
}
