//! The A/B report as one self-contained HTML page: the tables, and charts drawn as inline SVG
//! (no script, no external resource).
//!
//! Charts: tokens saved vs fidelity (one point per transcript x strategy x budget, one colour per
//! strategy), and tokens sent per call in each session replay (one line per strategy, the
//! uncompacted baseline in grey).

use super::AbReport;
use super::output::{Timing, preamble, tables};
use std::fmt::Write;

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];
const BASELINE: &str = "#999999";
const W: f64 = 640.0;
const H: f64 = 300.0;
const PAD: f64 = 50.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

/// Axes, ticks and labels of a chart with x in `[0, xmax]` and y in `[0, ymax]`.
fn frame(svg: &mut String, title: &str, xlabel: &str, ylabel: &str, xmax: f64, ymax: f64) {
    let _ = write!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">
<text x="{}" y="16" text-anchor="middle" font-size="13">{}</text>
<line x1="{PAD}" y1="{}" x2="{}" y2="{}" stroke="#333"/>
<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{}" stroke="#333"/>
<text x="{}" y="{}" text-anchor="middle">{}</text>
<text x="14" y="{}" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>
"##,
        W / 2.0,
        esc(title),
        H - PAD,
        W - PAD,
        H - PAD,
        H - PAD,
        W / 2.0,
        H - 12.0,
        esc(xlabel),
        H / 2.0,
        H / 2.0,
        esc(ylabel)
    );
    for k in 0..=4 {
        let f = k as f64 / 4.0;
        let (x, y) = (PAD + f * (W - 2.0 * PAD), H - PAD - f * (H - 2.0 * PAD));
        let _ = writeln!(
            svg,
            r##"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text><line x1="{PAD}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/>"##,
            H - PAD + 14.0,
            short(f * xmax),
            PAD - 4.0,
            y + 4.0,
            short(f * ymax),
            W - PAD
        );
    }
}

fn short(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.0}k", x / 1000.0)
    } else if x >= 100.0 || x == x.trunc() {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn legend(svg: &mut String, names: &[(String, &str)]) {
    for (i, (name, c)) in names.iter().enumerate() {
        let x = PAD + 10.0 + (i as f64) * 120.0;
        let _ = writeln!(
            svg,
            r#"<rect x="{x}" y="26" width="10" height="10" fill="{c}"/><text x="{}" y="35">{}</text>"#,
            x + 14.0,
            esc(name)
        );
    }
}

/// Tokens saved (%) against fidelity (%), one point per compaction.
fn saved_vs_fidelity(r: &AbReport) -> String {
    let mut svg = String::new();
    frame(
        &mut svg,
        "Tokens saved vs fidelity (whole transcript compacted once)",
        "tokens saved (%)",
        "fidelity (%)",
        100.0,
        100.0,
    );
    for f in &r.files {
        for row in &f.rows {
            let Some(c) = &row.compaction else { continue };
            let Some(fid) = c.fidelity else { continue };
            let i = r
                .strategies
                .iter()
                .position(|s| *s == row.strategy)
                .unwrap_or(0);
            let x = PAD + c.reduction_pct().clamp(0.0, 100.0) / 100.0 * (W - 2.0 * PAD);
            let y = H - PAD - fid * (H - 2.0 * PAD);
            // An output still over the budget is a hollow ring: it kept more because it did
            // not do what was asked.
            let (fill, over) = match c.status == "over_budget" {
                true => ("none", " (OVER BUDGET)"),
                false => (color(i), ""),
            };
            let _ = writeln!(
                svg,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{fill}" stroke="{}" fill-opacity="0.7"><title>{} · {} · budget {}: saved {:.1}%, fidelity {:.1}%{over}</title></circle>"#,
                color(i),
                esc(&f.name),
                esc(&row.strategy),
                row.budget,
                c.reduction_pct(),
                fid * 100.0
            );
        }
    }
    let names: Vec<(String, &str)> = r
        .strategies
        .iter()
        .enumerate()
        .map(|(i, s)| (s.clone(), color(i)))
        .collect();
    legend(&mut svg, &names);
    let _ = writeln!(
        svg,
        r#"<text x="{:.0}" y="{:.0}" font-size="11">hollow ring: still over the budget</text>"#,
        W - 230.0,
        H - PAD - 8.0
    );
    svg + "</svg>\n"
}

fn polyline(svg: &mut String, points: &[usize], xmax: f64, ymax: f64, c: &str) {
    let n = points.len().max(2) - 1;
    let pts: Vec<String> = points
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let x = PAD + (k as f64 / n as f64) * xmax.min(1.0) * (W - 2.0 * PAD);
            let y = H - PAD - (*t as f64 / ymax) * (H - 2.0 * PAD);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="1.5"/>"#,
        pts.join(" ")
    );
}

/// Tokens sent per replayed call, one chart per transcript and budget.
fn replay_charts(r: &AbReport) -> String {
    let mut out = String::new();
    for f in &r.files {
        let Some(base) = &f.baseline else { continue };
        if base.tokens_per_call.len() < 2 {
            continue;
        }
        let mut budgets: Vec<usize> = f.rows.iter().map(|row| row.budget).collect();
        budgets.dedup();
        for budget in budgets {
            let ymax = base
                .tokens_per_call
                .iter()
                .copied()
                .max()
                .unwrap_or(1)
                .max(1) as f64;
            let mut svg = String::new();
            frame(
                &mut svg,
                &format!("{} · budget {budget}: tokens sent per call", f.name),
                &format!("replayed call (1..{})", base.tokens_per_call.len()),
                "tokens sent",
                base.tokens_per_call.len() as f64,
                ymax,
            );
            polyline(&mut svg, &base.tokens_per_call, 1.0, ymax, BASELINE);
            let mut names = vec![("none".to_string(), BASELINE)];
            for row in f.rows.iter().filter(|row| row.budget == budget) {
                let Some(s) = &row.replay else { continue };
                let i = r
                    .strategies
                    .iter()
                    .position(|x| *x == row.strategy)
                    .unwrap_or(0);
                polyline(&mut svg, &s.tokens_per_call, 1.0, ymax, color(i));
                names.push((row.strategy.clone(), color(i)));
            }
            legend(&mut svg, &names);
            out += &svg;
            out += "</svg>\n";
        }
    }
    out
}

/// The whole page.
pub fn page(r: &AbReport, timing: Timing) -> String {
    let mut out = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>compactor A/B</title>\n<style>\
         body{font-family:sans-serif;margin:2em;max-width:1400px}\
         table{border-collapse:collapse;font-size:12px;margin-bottom:2em}\
         td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}\
         td:first-child,td:nth-child(2),th{text-align:left}\
         svg{margin:0 1em 1em 0;border:1px solid #eee}\
         table.verdict td{text-align:left}tr.over td{background:#fde2e2}tr.win td{background:#e3f4e1}\
         ul.notes{font-size:12px;color:#444;max-width:60em}</style></head><body>\n<h1>compactor A/B</h1>\n",
    );
    let tables = tables(r, timing);
    // The verdict first, then what it rests on.
    if let Some(v) = tables.first() {
        table(&mut out, v);
    }
    for l in preamble(r, timing) {
        let _ = writeln!(out, "<p>{}</p>", esc(&l));
    }
    out += "<h2>Charts</h2>\n";
    out += &saved_vs_fidelity(r);
    out += &replay_charts(r);
    for t in tables.iter().skip(1) {
        table(&mut out, t);
    }
    out + "</body></html>\n"
}

/// One table with its column notes; a row that holds an over-budget mark is tinted red, a
/// verdict row of all files green.
fn table(out: &mut String, t: &super::output::Table) {
    {
        // The verdict's sentences read left to right.
        let class = match t.title.starts_with("Verdict") {
            true => r#" class="verdict""#,
            false => "",
        };
        let _ = writeln!(out, "<h2>{}</h2>\n<table{class}>", esc(&t.title));
        let th: Vec<String> = t
            .header
            .iter()
            .map(|h| format!("<th>{}</th>", esc(h)))
            .collect();
        let _ = writeln!(out, "<tr>{}</tr>", th.concat());
        for row in &t.rows {
            let td: Vec<String> = row.iter().map(|c| format!("<td>{}</td>", esc(c))).collect();
            let class = if row.iter().any(|c| c.starts_with("OVER")) {
                r#" class="over""#
            } else if row.first().is_some_and(|c| c == "all files") {
                r#" class="win""#
            } else {
                ""
            };
            let _ = writeln!(out, "<tr{class}>{}</tr>", td.concat());
        }
        *out += "</table>\n";
        if !t.notes.is_empty() {
            *out += "<ul class=\"notes\">";
            for n in &t.notes {
                let _ = write!(out, "<li>{}</li>", esc(n));
            }
            *out += "</ul>\n";
        }
    }
}
