//! The text report of `compactor calibrate`: per model the fit, its segments and a
//! `[tokens.models]` snippet.

use super::fitting::ModelFit;
use super::points::UsagePoint;

/// The text report of `compactor calibrate`: per model the ratio, the error of the fit, each
/// segment's slope and constant (with the log it comes from, `names[source]`), and a
/// `[tokens.models]` snippet to paste.
pub fn render(
    fits: &[ModelFit],
    names: &[String],
    logs: &[Vec<UsagePoint>],
    tokenizer: crate::tokens::Tokenizer,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (name, points) in names.iter().zip(logs) {
        let _ = writeln!(out, "{name}: {} usage records", points.len());
    }
    for f in fits {
        let _ = writeln!(
            out,
            "\n{}: ratio {:.4} model tokens per {tokenizer} token and {:.0} per tool call over {} \
             requests; error rms {:.2}%, max {:.2}% (a ratio alone: {:.4}, rms {:.2}%)",
            f.model,
            f.ratio,
            f.tool_call,
            f.points,
            f.rms_error * 100.0,
            f.max_error * 100.0,
            f.linear_ratio,
            f.linear_rms_error * 100.0
        );
        for s in &f.segments {
            let slope = s
                .slope
                .map_or_else(|| "-".to_string(), |v| format!("{v:.4}"));
            let _ = writeln!(
                out,
                "  {} segment {}: {} requests, own slope {slope}, constant {:.0} model tokens",
                names.get(s.source).map_or("?", String::as_str),
                s.segment,
                s.points,
                s.intercept
            );
        }
        let pattern = family_pattern(&f.model);
        let _ = writeln!(
            out,
            "  # The constant is what each request held that the log does not (system prompt, \
             tools, framing);\n  # a request the counter sees whole needs only the framing as \
             overhead.\n  [tokens.models.\"{pattern}\"]\n  tokenizer = \"{tokenizer}\"\n  \
             ratio = {:.3}\n  tool_call = {:.0}",
            f.ratio, f.tool_call
        );
    }
    out
}

/// `claude-opus-4-6` -> `claude-opus-4-6*`: the snippet names the model itself (and its dated
/// versions); widen it by hand to a family.
fn family_pattern(model: &str) -> String {
    format!("{model}*")
}
