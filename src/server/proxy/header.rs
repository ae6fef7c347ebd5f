//! The value of the proxy's tokens header (`x-compactor-tokens`) for a body the pipeline ran
//! on: `BEFORE->AFTER; COUNTING; tier=APPLIED[; prefix=reused]` and its notes (grammar:
//! docs/service.md).

/// The tokens header's value: `BEFORE->AFTER; COUNTING; tier=APPLIED[; prefix=reused]` and
/// the notes (grammar: docs/service.md); `reused`: a remembered prefix sent again.
pub(super) fn tokens_header(report: &crate::report::Report, reused: bool) -> String {
    let applied = if reused {
        format!("{}; prefix=reused", report.applied())
    } else {
        report.applied()
    };
    format!(
        "{}->{}; {}tier={applied}{}{}{}",
        report.tokens_before,
        report.tokens_after,
        counting_note(report),
        repaired_note(report),
        status_note(report.status),
        request_note(report.request)
    )
}

/// `; repaired=N` for the tokens header when N unusable images were replaced by placeholders
/// (the report's `repairs`, each logged with its path); empty otherwise.
fn repaired_note(report: &crate::report::Report) -> String {
    match report.repairs.len() {
        0 => String::new(),
        n => format!("; repaired={n}"),
    }
}

/// `; status=degraded` (a fallback's output, also when reused from memory),
/// `; status=over_budget` (the best valid output is still over the budget) or
/// `; status=repaired` (only image repairs changed the body) for the tokens header; empty for
/// the other statuses.
fn status_note(status: crate::report::Status) -> &'static str {
    match status {
        crate::report::Status::Degraded => "; status=degraded",
        crate::report::Status::OverBudget => "; status=over_budget",
        crate::report::Status::Repaired => "; status=repaired",
        crate::report::Status::Unchanged | crate::report::Status::Compacted => "",
    }
}

/// `; request=client_summary (to the context window)` for the tokens header when the body was
/// the client's own summary request, compacted to the window and not the budget.
fn request_note(request: crate::report::RequestKind) -> &'static str {
    match request {
        crate::report::RequestKind::ClientSummary => {
            "; request=client_summary (to the context window)"
        }
        crate::report::RequestKind::Turn => "",
    }
}

/// `model=M; ratio=R (SOURCE); overhead=N; ` for the tokens header: the counting of its
/// figures, also when they are the counter's own (`model=-; ratio=1.000 (counter); …` when no
/// model is named).
fn counting_note(report: &crate::report::Report) -> String {
    format!("{}; ", report.counting.describe())
}
