//! The compacting proxy: `POST /v1/messages` (Anthropic), `POST /v1/chat/completions` (OpenAI
//! Chat), `POST /v1/responses` (OpenAI Responses) and `POST
//! /v1beta/models/{model}:streamGenerateContent` (Google Gemini; the other Gemini methods pass
//! through to the Gemini upstream).
//!
//! ```text
//! client body -> seen byte for byte?       -> what was sent for it then (replay.rs)
//!             -> read: the session's last read (reads.rs) + its new items only
//!                (format::slices), else the whole body through a `Value`
//!             -> under the trigger?        -> the original bytes, untouched (but for an
//!                                             unusable image outside the newest exchange:
//!                                             the body with it replaced by a placeholder)
//!             -> a remembered prefix fits? -> remembered compacted prefix ++ new messages
//!             -> else                      -> compact afresh (and remember it)
//!   -> written straight to bytes (format::emit) when compacted
//!   -> POST upstream (base URL from the config, the client's headers minus hop-by-hop)
//!   -> status, headers and body streamed back as they come (SSE included)
//!      + x-compactor-tokens: BEFORE->AFTER; COUNTING; tier=APPLIED[; prefix=reused]
//!                            [; repaired=N][; status=degraded|over_budget|repaired]
//!                            (grammar: docs/service.md)
//! ```
//! Only the outbound copy is compacted; the client's own history is never touched. A body the
//! proxy cannot read (not JSON, malformed, an invalid history) is forwarded as it came, so the
//! upstream gives its own answer; `x-compactor-skipped` says why. A Responses body that names a
//! `previous_response_id` or a `conversation` is compacted like any other: its `input` holds
//! the new items only, the outputs it opens with answer calls the provider holds and are kept
//! (their content may be capped), and nothing the provider holds is touched (rule B4,
//! [`crate::guard::Units::held`]).

use super::metrics::Metrics;
use super::pool::PoolError;
use super::reads::Last;
use super::replay::{Key, Replayed};
use super::{AppError, AppState, shapes, upstream};
use crate::compactor::CompactError;
use crate::conversation::Conversation;
use crate::format;
use crate::format::Format;
use crate::format::slices::{self, SpanRead};
use crate::memory::{PrefixHashes, Written};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

mod header;
use header::tokens_header;

/// The response header that says what the proxy did.
pub const TOKENS_HEADER: &str = "x-compactor-tokens";
/// The response header with the estimated input cost of the forwarded body and of the
/// client's body, with prompt caching ([`crate::cost::CostEstimate::header`]).
pub const COST_HEADER: &str = "x-compactor-cost";
/// The response header naming why a body was forwarded without looking at it.
pub const SKIPPED_HEADER: &str = "x-compactor-skipped";

/// `POST /v1/messages`, and `POST /v1/messages/count_tokens`: the same history (without
/// `max_tokens`), compacted by the same policy, so the count the agent gets is the count of
/// what the proxy would send.
pub(crate) async fn anthropic(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let base = state.settings().server.anthropic_upstream.clone();
    forward(&state, Format::Anthropic, &base, &uri, headers, body).await
}

/// `POST /v1/chat/completions`.
pub(crate) async fn openai_chat(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let base = state.settings().server.openai_upstream.clone();
    forward(&state, Format::OpenAiChat, &base, &uri, headers, body).await
}

/// `POST /v1/responses`.
pub(crate) async fn openai_responses(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let base = state.settings().server.openai_upstream.clone();
    forward(&state, Format::OpenAiResponses, &base, &uri, headers, body).await
}

/// What goes upstream, and the header that tells the client.
struct Outgoing {
    body: Bytes,
    header: (&'static str, String),
    /// The model and the counter's count of the body sent, to learn from the answer's usage.
    probe: Option<(String, usize)>,
    /// The decision to keep in the replay cache, when a repeat would give the same answer.
    keep: Option<Replayed>,
    /// The `x-compactor-cost` header's value, when the pipeline estimated the cost.
    cost: Option<String>,
}

async fn forward(
    state: &AppState,
    format: Format,
    base: &str,
    uri: &Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    forward_as(state, format, base, uri, uri.path(), headers, body).await
}

/// [`forward`] with the route's name for metrics, logs and the replay key.
pub(crate) async fn forward_as(
    state: &AppState,
    format: Format,
    base: &str,
    uri: &Uri,
    route: &str,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    // A body over the limit is a JSON 413 like on every other route, not axum's plain text.
    let body = body?;
    let route = route.to_string();
    // A body seen before byte for byte: hashed here (a fraction of a millisecond for 1 MB),
    // answered without the pool, no parse, count or write.
    let replay = state.replay();
    // Whose request: its compaction keeps recall originals for this tenant, and it never
    // reads another tenant's replayed or cached answers.
    let tenant = super::tenant::of(state, &headers);
    let key = (replay.max_bytes() > 0).then(|| Key::of(&format!("{route} {tenant}"), &body));
    let compactor = state.default_compactor();
    let hit = key.and_then(|key| replay.get(key, |model| compactor.model_tokens(model)));
    let outgoing = if let Some(hit) = hit {
        replayed(state, &route, &hit, body)
    } else {
        crate::recall::scope::for_tenant(tenant, compact_in_pool(state, format, &route, body)).await
    };
    let outgoing = match (key, outgoing) {
        (
            Some(key),
            Outgoing {
                keep: Some(keep),
                body,
                header,
                probe,
                cost,
            },
        ) => {
            replay.insert(key, keep);
            Outgoing {
                body,
                header,
                probe,
                keep: None,
                cost,
            }
        }
        (_, o) => o,
    };
    let url = upstream::url(
        base,
        uri.path_and_query().map_or(route.as_str(), |p| p.as_str()),
    );
    let out = upstream::Outbound {
        method: Method::POST,
        url,
        headers: upstream::request_headers(&headers, false),
        body: axum::body::Body::from(outgoing.body),
        stall: None,
    };
    let mut headers = vec![outgoing.header];
    headers.extend(outgoing.cost.map(|c| (COST_HEADER, c)));
    upstream::send(state, out, headers, outgoing.probe).await
}

/// The answer kept for a body seen before, counted in the metrics as the pipeline's own.
fn replayed(state: &AppState, route: &str, hit: &Replayed, body: Bytes) -> Outgoing {
    let started = std::time::Instant::now();
    let metrics = state.metrics();
    metrics.replayed();
    metrics.proxied(route, hit.label);
    let mut report = hit.report.clone();
    report.timings = crate::report::Timings {
        total_ms: started.elapsed().as_secs_f64() * 1000.0,
        ..Default::default()
    };
    record(metrics, route, &report);
    log_outcome(route, &report, hit.label, true);
    Outgoing {
        body: hit.body.clone().unwrap_or(body),
        header: (TOKENS_HEADER, hit.header.clone()),
        probe: hit.probe.clone(),
        keep: None,
        cost: report.cost.as_ref().map(crate::cost::CostEstimate::header),
    }
}

/// [`outgoing_body`] on the compaction pool; a fault there forwards the original body.
async fn compact_in_pool(state: &AppState, format: Format, route: &str, body: Bytes) -> Outgoing {
    let route = route.to_string();
    let tenant = crate::recall::scope::tenant();
    let outgoing = {
        let (state, original) = (state.clone(), body.clone());
        let route = route.clone();
        state
            .pool()
            .clone()
            .run(move || async move {
                let scope = state.llm_scope();
                let work = outgoing_body(&state, format, &route, original);
                crate::recall::scope::for_tenant(tenant, crate::llm::scope::with(scope, work)).await
            })
            .await
    };
    match outgoing {
        Ok(o) => o,
        // The agent's request is never dropped for a fault of ours: the original goes upstream.
        Err(e) => {
            if let PoolError::Panicked(why) = &e {
                tracing::error!(route = %route, panic = %why, "proxy: compaction panicked; original body forwarded");
            }
            state.metrics().panicked(&e);
            skipped(state, &route, body, Skip::Internal)
        }
    }
}

/// Why a body was forwarded as it came: the words of the skipped header and the label of
/// `compactor_proxy_skipped_total{reason}`, one each, a fixed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// The body is not JSON.
    NotJson,
    /// JSON, but not a request body of the route's format (no message list, a malformed
    /// message).
    NotABody,
    /// A history that breaks a known rule of the provider (the guard refuses it).
    InvalidHistory,
    /// The compaction failed inside the service (a panic: a bug).
    Internal,
}

impl Skip {
    /// The `x-compactor-skipped` header's words.
    pub(crate) fn header(self) -> &'static str {
        match self {
            Skip::NotJson => "not JSON",
            Skip::NotABody => "not a request body of this format",
            Skip::InvalidHistory => "invalid history",
            Skip::Internal => "internal error",
        }
    }

    /// The metrics label (`reason`).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Skip::NotJson => "not_json",
            Skip::NotABody => "not_a_request_body",
            Skip::InvalidHistory => "invalid_history",
            Skip::Internal => "internal_error",
        }
    }
}

/// The body sent as it came, with the reason in the skipped header, counted in the metrics
/// and logged (INFO; an invalid history is logged by its caller, with the rule).
fn skipped(state: &AppState, route: &str, body: Bytes, why: Skip) -> Outgoing {
    state.metrics().skipped(route, why.label());
    if why != Skip::InvalidHistory {
        tracing::info!(route = %route, reason = %why.label(), "proxy: forwarded as it came: {}", why.header());
    }
    Outgoing {
        body,
        header: (SKIPPED_HEADER, why.header().to_string()),
        probe: None,
        keep: None,
        cost: None,
    }
}

/// The proxy's `count_tokens` route: its compactions are counts (Claude Code's context meter),
/// counted in `compactor_count_tokens_total`, not in `compactor_compactions_total`.
pub(crate) const COUNT_ROUTE: &str = "/v1/messages/count_tokens";

/// Counts a pipeline run of `route` in the metrics: a count on [`COUNT_ROUTE`], else a
/// compaction.
fn record(metrics: &Metrics, route: &str, report: &crate::report::Report) {
    if route == COUNT_ROUTE {
        metrics.counted();
    } else {
        metrics.record(report);
    }
}

/// One log line per body the pipeline ran on: INFO when the body sent is not the one received
/// (`label` `compacted`, `reused`, `repaired`), DEBUG for a body under the trigger, a count
/// ([`COUNT_ROUTE`]) and a replay.
fn log_outcome(route: &str, report: &crate::report::Report, label: &str, replayed: bool) {
    let model = report.counting.model.as_deref().unwrap_or("-");
    let status = serde_json::to_value(report.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let ms = format!("{:.1}", report.timings.total_ms);
    let (before, after, tier) = (report.tokens_before, report.tokens_after, report.applied());
    let label = match report.request {
        crate::report::RequestKind::ClientSummary => {
            format!("{label} (the client's own summary request, to the context window)")
        }
        crate::report::RequestKind::Turn => label.to_string(),
    };
    if label == "passthrough" || route == COUNT_ROUTE || replayed {
        tracing::debug!(route = %route, model = %model, tier = %tier, status = %status, ms = %ms, replayed, "proxy: {label}: {before} -> {after} tokens");
    } else {
        tracing::info!(route = %route, model = %model, tier = %tier, status = %status, ms = %ms, "proxy: {label}: {before} -> {after} tokens");
    }
}

/// The rule a refused history breaks first (`orphan_result`, `role_not_allowed`, ...: the
/// guard's own names, a fixed set), for the log and the WARN's rate limit.
fn rule_of(violations: &[crate::guard::Violation]) -> String {
    violations
        .first()
        .and_then(|v| serde_json::to_value(&v.kind).ok())
        .and_then(|v| v.get("rule").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

/// Decides what to send: the original bytes, a remembered prefix plus the new messages, or a
/// fresh compaction.
async fn outgoing_body(state: &AppState, format: Format, route: &str, body: Bytes) -> Outgoing {
    let reads = state.reads();
    // The session's last read, taken out of the read cache, and the new items read alone.
    let spanned = (reads.max_bytes() > 0)
        .then(|| slices::scan(&body, format))
        .flatten()
        .and_then(|spans| {
            // A session is its tenant's: another tenant's body never continues from it.
            let (key, by_value, last) = reads.take_session(format, &body, &spans);
            let (read, hashes, sums) = match last {
                Some(last) => (
                    slices::read(format, &body, spans, Some((&last.body, last.read))),
                    last.hashes,
                    last.sums,
                ),
                None => (slices::read(format, &body, spans, None), None, Vec::new()),
            };
            let read = read?;
            let sums = Last::sums(sums, &read.conversation, read.reused);
            Some(((key, by_value), read, hashes, sums))
        });
    let compactor = state.default_compactor();
    // The memory's keys: last turn's hashes extended for the new messages (the first
    // `reused` messages are read from the same bytes as last turn's).
    let remember = compactor.settings().policy.remember;
    let (conversation, kept) = match spanned {
        Some((key, read, last, sums)) => {
            let tag = budget_tag(&compactor, &read.conversation);
            let hashes = remember.then(|| match last {
                Some(h) => h.extended(&read.conversation, read.reused, tag),
                None => PrefixHashes::of(&read.conversation, tag),
            });
            (read.conversation, Some((key, read.spans, hashes, sums)))
        }
        None => {
            let Ok(value) = serde_json::from_slice::<Value>(&body) else {
                return skipped(state, route, body, Skip::NotJson);
            };
            let Ok(conversation) = format.read(&value) else {
                return skipped(state, route, body, Skip::NotABody);
            };
            // The parsed body is not needed past here: freed before the pipeline runs, so the
            // peak holds one parsed copy of the history, not two.
            drop(value);
            (conversation, None)
        }
    };
    let hashes = kept.as_ref().and_then(|(_, _, h, _)| h.as_ref());
    let outgoing = decide(state, format, route, body.clone(), &conversation, hashes).await;
    if let Some(((key, by_value), spans, hashes, sums)) = kept {
        let read = SpanRead {
            conversation,
            spans,
            reused: 0,
        };
        reads.put(
            key,
            by_value,
            Last {
                body,
                read,
                hashes,
                sums,
            },
        );
    }
    outgoing
}

/// What to send for `body`, read into `conversation`: the original bytes, a remembered prefix
/// plus the new messages, or a fresh compaction. `hashes`: the conversation's prefix hashes
/// when the read cache made them.
async fn decide(
    state: &AppState,
    format: Format,
    route: &str,
    body: Bytes,
    conversation: &Conversation,
    hashes: Option<&PrefixHashes>,
) -> Outgoing {
    let compactor = state.default_compactor();
    let shared = prefetch_shared(state, &compactor, format, conversation, hashes).await;
    let result = compactor
        .compact_shared(conversation, format, None, None, hashes)
        .await;
    // What goes to Redis is written after this request is forwarded (one round trip, its
    // own task: store/mod.rs).
    let mut memory_put = None;
    if let (Some((store, hashes)), Ok(compacted)) = (&shared, &result)
        && let Some(output) = &compacted.conversation
    {
        let preset = &compactor.settings().preset;
        memory_put = store.memory_put(compactor.memory(), preset, format, hashes, output);
    }
    match result {
        Err(CompactError::InvalidInput(violations)) => {
            let first = violations
                .first()
                .map(ToString::to_string)
                .unwrap_or_default();
            let rule = rule_of(&violations);
            // A known rule broken: the provider will refuse the body too, and says why. The
            // operator sees it at WARN, once a minute per rule at most.
            match state.throttle().allow(&rule) {
                Some(held_back) => {
                    tracing::warn!(route = %route, rule = %rule, violations = violations.len(), first = %first, held_back, "proxy: invalid history (a provider rule is broken): forwarded as it came, the provider answers")
                }
                None => {
                    tracing::info!(route = %route, rule = %rule, violations = violations.len(), first = %first, "proxy: invalid history forwarded as it came")
                }
            }
            skipped(state, route, body, Skip::InvalidHistory)
        }
        Ok(compacted) => {
            record(state.metrics(), route, &compacted.report);
            if let Some(store) = state.store() {
                let tenant = crate::recall::scope::tenant();
                let mut puts = compactor.recall_store().map_or_else(Vec::new, |local| {
                    store.recall_puts(local, tenant, &compacted.report.recall)
                });
                let index = memory_put.map(|(put, index)| {
                    puts.push(put);
                    index
                });
                store.write_off_path(puts, index);
            }
            let sent = Sent {
                state,
                compactor: &compactor,
                format,
                route,
                conversation,
                hashes,
            };
            sent.outgoing(body, &compacted)
        }
    }
}

/// With a shared store: the longest compaction of this history another replica made, loaded
/// into the local memory first (only over the trigger: under it nothing is read); the store
/// and the history's prefix hashes, for the write that shares this compaction.
async fn prefetch_shared<'a>(
    state: &'a AppState,
    compactor: &crate::compactor::Compactor,
    format: Format,
    conversation: &Conversation,
    hashes: Option<&'a PrefixHashes>,
) -> Option<(&'a Arc<super::store::SharedStore>, Cow<'a, PrefixHashes>)> {
    let shared = state
        .store()
        .filter(|_| compactor.settings().policy.remember && over_trigger(compactor, conversation))
        .map(|store| {
            let tag = budget_tag(compactor, conversation);
            let hashes = match hashes {
                Some(h) if h.tag() == tag => Cow::Borrowed(h),
                _ => Cow::Owned(PrefixHashes::of(conversation, tag)),
            };
            (store, hashes)
        });
    if let Some((store, hashes)) = &shared {
        let preset = &compactor.settings().preset;
        store
            .prefetch(compactor.memory(), preset, format, hashes)
            .await;
    }
    shared
}

/// What [`decide`] knows of a body the pipeline ran on, to say what is sent for it.
struct Sent<'a> {
    state: &'a AppState,
    compactor: &'a crate::compactor::Compactor,
    format: Format,
    route: &'a str,
    conversation: &'a Conversation,
    hashes: Option<&'a PrefixHashes>,
}

impl Sent<'_> {
    /// What is sent for `body` once `compacted`: the original bytes (under the trigger), or the
    /// output's bytes; with the tokens header, the probe, the cost, and what a repeat of the
    /// body may be answered with.
    fn outgoing(&self, body: Bytes, compacted: &crate::compactor::SharedCompacted) -> Outgoing {
        let (metrics, route) = (self.state.metrics(), self.route);
        let report = &compacted.report;
        warn_new_shapes(self.state, route, report);
        // Continued from the compactor's memory without compacting again: the prefix
        // sent last time is sent again (prompt-cache hit).
        let reused = report.continued_from.is_some() && report.tiers.iter().all(|t| !t.accepted);
        for repair in &report.repairs {
            tracing::warn!(route = %route, path = %repair.path, reason = repair.reason.removed_because(), "proxy: unusable image replaced by a placeholder");
        }
        let header = (TOKENS_HEADER, tokens_header(report, reused));
        let cost = report.cost.as_ref().map(crate::cost::CostEstimate::header);
        let probe = report
            .counting
            .model
            .clone()
            .map(|m| (m, report.counted_after));
        // Kept for a repeat of this body: the two answers a repeat gives again.
        let keep = |body: Option<Bytes>, label: &'static str| Replayed {
            body,
            header: header.1.clone(),
            probe: probe.clone(),
            label,
            report: compacted.report.clone(),
            model: self
                .conversation
                .extra
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string),
            basis: compacted.report.counting.clone(),
        };
        let Some(c) = &compacted.conversation else {
            metrics.proxied(route, "passthrough");
            log_outcome(route, report, "passthrough", false);
            // Under the trigger; not an input every tier failed to shorten (a
            // repeat would run them again).
            let untouched = compacted.report.tiers.is_empty();
            let keep = untouched.then(|| keep(None, "passthrough"));
            return Outgoing {
                body,
                header,
                probe,
                keep,
                cost,
            };
        };
        // Only repaired: under the trigger, or no tier's output taken.
        let repaired_only = report.status == crate::report::Status::Repaired;
        let label = match (reused, repaired_only) {
            (true, _) => "reused",
            (false, true) => "repaired",
            (false, false) => "compacted",
        };
        metrics.proxied(route, label);
        log_outcome(route, report, label, false);
        let out = self.write(c, compacted.written.as_deref());
        // Only a remembered output no tier had to work on, or the input repaired
        // under the trigger: a repeat would run the same tiers again (a summary
        // that failed might answer next time).
        let settled = (reused || repaired_only) && compacted.report.tiers.is_empty();
        let keep = settled.then(|| keep(Some(out.clone()), label));
        Outgoing {
            body: out,
            header,
            probe,
            keep,
            cost,
        }
    }

    /// The bytes of output `c`. A continuation of an output written before (`written`): only
    /// its new messages are written, the rest copied from last time's bytes; the items written
    /// are attached to the memory for the next turn.
    fn write(&self, c: &Arc<Conversation>, written: Option<&Written>) -> Bytes {
        let format = self.format;
        let prefix = written
            .filter(|w| w.format == format)
            .map(|w| ((*w.items).as_ref(), w.messages));
        let (out, span) = format::emit::write_bytes_reusing(format, c, prefix);
        let out = Bytes::from(out);
        if let (Some(span), Some(h)) = (span, self.hashes) {
            let written = Written {
                format,
                messages: c.messages.len(),
                held_bytes: out.len(),
                items: Arc::new(out.slice(span)),
            };
            self.compactor.memory().attach_written(h, c, written);
        }
        out
    }
}

/// Whether `c` may be over the pipeline's trigger (the pipeline's own test, made early so a
/// history under it costs the shared store nothing). Counted with the pipeline's cached
/// counter; a model of the other vocabulary is always "may be".
fn over_trigger(
    compactor: &crate::compactor::Compactor,
    c: &crate::conversation::Conversation,
) -> bool {
    let basis = compactor.model_tokens(c.extra.get("model").and_then(Value::as_str));
    if basis.tokenizer != compactor.settings().tokens.tokenizer {
        return true;
    }
    let limit = compactor
        .budget_for(None, c.extra.get("model").and_then(Value::as_str))
        .limit;
    let trigger = (limit as f64 * compactor.settings().budget.trigger) as usize;
    compactor.counter().count_conversation(c) > basis.to_counted(trigger)
}

/// The memory's context tag of `c`: its model's budget (the pipeline's tag, so the hashes
/// made here are the ones it uses).
fn budget_tag(compactor: &crate::compactor::Compactor, c: &Conversation) -> u64 {
    let model = c.extra.get("model").and_then(Value::as_str);
    compactor.budget_for(None, model).limit as u64
}

/// One WARN per shape the rule table does not know (format and role or type) and process: the
/// body was compacted around it, the unit kept in place, byte-identical.
fn warn_new_shapes(state: &AppState, route: &str, report: &crate::report::Report) {
    for unit in &report.opaque {
        match state.shapes().first_seen(&report.format, &unit.what) {
            shapes::FirstSeen::Known => {}
            first => {
                tracing::warn!(route = %route, format = %report.format, path = %unit.path, "proxy: {} is not in the rule table: kept in place, byte-identical, and compacted around (logged once per process)", unit.what);
                if first == shapes::FirstSeen::Last {
                    tracing::warn!(route = %route, "proxy: 256 unknown shapes seen: later ones are not logged (compactor_opaque_units_total counts them)");
                }
            }
        }
    }
}
