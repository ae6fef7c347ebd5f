//! The fit: least squares per model over the usage points (one intercept per segment, the
//! slopes shared), and the replay of a log under a fit as an agent loop would estimate it.

use super::points::UsagePoint;
use serde::Serialize;
use std::collections::BTreeMap;

/// One segment's share of a fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SegmentFit {
    /// Which log (its index in the input of [`fit`]) and segment.
    pub source: usize,
    /// Segment number in that log.
    pub segment: usize,
    /// Points in it.
    pub points: usize,
    /// The segment's own least-squares slope (model tokens per counted token); `None` with
    /// fewer than 2 distinct counts.
    pub slope: Option<f64>,
    /// `c_segment` under the pooled ratio: model tokens the log does not hold (system prompt,
    /// tools, framing).
    pub intercept: f64,
}

/// The fit of one model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelFit {
    /// The model name.
    pub model: String,
    /// Points used.
    pub points: usize,
    /// The pooled within-segment slope: model tokens per counted token, with `tool_call` per
    /// call beside it.
    pub ratio: f64,
    /// Model tokens per tool call (tool_use block) the count does not see, fitted with `ratio`;
    /// 0 when the calls do not vary apart from the tokens, the joint fit would make it
    /// negative, or it lowers the rms error by less than a quarter (then `ratio` is the linear
    /// one).
    pub tool_call: f64,
    /// The slope of the fit without a per-call term (`actual = ratio × counted + c_segment`):
    /// what a ratio alone has to be to describe these logs.
    pub linear_ratio: f64,
    /// Root mean square error of the fit with `linear_ratio` alone.
    pub linear_rms_error: f64,
    /// Per segment.
    pub segments: Vec<SegmentFit>,
    /// Root mean square of `(estimate − actual) / actual` under the fit.
    pub rms_error: f64,
    /// Largest `|estimate − actual| / actual`.
    pub max_error: f64,
}

/// Sums of one model's within-segment deviations: `x` counted, `z` tool calls, `y` actual.
#[derive(Default)]
struct Moments {
    xx: f64,
    xz: f64,
    zz: f64,
    xy: f64,
    zy: f64,
}

/// Least squares per model with one intercept per segment of each log (`logs[i]` are the
/// points of log `i`): `actual = ratio × counted + tool_call × tool_calls + c_segment`, both
/// slopes shared by every segment of the model (pooled within-segment estimates). Models whose
/// segments have no spread in `counted` get no fit.
pub fn fit(logs: &[Vec<UsagePoint>]) -> Vec<ModelFit> {
    // model -> (source, segment) -> points
    let mut by_model: BTreeMap<&str, BTreeMap<(usize, usize), Vec<&UsagePoint>>> = BTreeMap::new();
    for (source, points) in logs.iter().enumerate() {
        for p in points {
            by_model
                .entry(p.model.as_str())
                .or_default()
                .entry((source, p.segment))
                .or_default()
                .push(p);
        }
    }
    let mut out = Vec::new();
    for (model, segments) in by_model {
        let mut m = Moments::default();
        let mut stats = Vec::new();
        for ((source, segment), points) in &segments {
            let n = points.len() as f64;
            let mean =
                |f: &dyn Fn(&UsagePoint) -> f64| points.iter().map(|p| f(p)).sum::<f64>() / n;
            let mx = mean(&|p| p.counted as f64);
            let mz = mean(&|p| p.tool_calls as f64);
            let my = mean(&|p| p.actual as f64);
            let (mut xy, mut xx) = (0.0, 0.0);
            for p in points {
                let dx = p.counted as f64 - mx;
                let dz = p.tool_calls as f64 - mz;
                let dy = p.actual as f64 - my;
                xy += dx * dy;
                xx += dx * dx;
                m.xz += dx * dz;
                m.zz += dz * dz;
                m.zy += dz * dy;
            }
            m.xy += xy;
            m.xx += xx;
            stats.push((
                *source,
                *segment,
                points,
                (mx, mz, my),
                (xx > 0.0).then(|| xy / xx),
            ));
        }
        if m.xx <= 0.0 {
            continue;
        }
        let linear_ratio = m.xy / m.xx;
        let det = m.xx * m.zz - m.xz * m.xz;
        let joint = (det > 1e-9 * m.xx * m.zz.max(1.0)).then(|| {
            (
                (m.xy * m.zz - m.zy * m.xz) / det,
                (m.zy * m.xx - m.xy * m.xz) / det,
            )
        });
        // (rms, max, per-segment fits) of the line `ratio × counted + tool_call × calls + c`.
        let evaluate = |ratio: f64, tool_call: f64| {
            let (mut sq, mut max, mut n) = (0.0f64, 0.0f64, 0usize);
            let mut fits = Vec::new();
            for (source, segment, points, (mx, mz, my), slope) in &stats {
                let intercept = my - ratio * mx - tool_call * mz;
                for p in points.iter() {
                    let estimate =
                        ratio * p.counted as f64 + tool_call * p.tool_calls as f64 + intercept;
                    let e = (estimate - p.actual as f64) / p.actual as f64;
                    sq += e * e;
                    max = max.max(e.abs());
                    n += 1;
                }
                fits.push(SegmentFit {
                    source: *source,
                    segment: *segment,
                    points: points.len(),
                    slope: *slope,
                    intercept,
                });
            }
            ((sq / n.max(1) as f64).sqrt(), max, fits, n)
        };
        let linear = evaluate(linear_ratio, 0.0);
        let linear_rms_error = linear.0;
        // The per-call term is kept when it is physical (both slopes positive) and explains
        // the data clearly better (rms error down by a quarter or more); otherwise it is the
        // fit's noise (for an OpenAI model counted exactly, the calls only stand in for
        // whatever else grows with them) and the ratio alone is reported.
        let (ratio, tool_call, (rms_error, max_error, fits, n)) = match joint {
            Some((r, k)) if r > 0.0 && k >= 0.0 => {
                let with_calls = evaluate(r, k);
                if with_calls.0 <= 0.75 * linear_rms_error {
                    (r, k, with_calls)
                } else {
                    (linear_ratio, 0.0, linear)
                }
            }
            _ => (linear_ratio, 0.0, linear),
        };
        out.push(ModelFit {
            model: model.to_string(),
            points: n,
            ratio,
            tool_call,
            linear_ratio,
            linear_rms_error,
            segments: fits,
            rms_error,
            max_error,
        });
    }
    out
}

/// Replays the points of one log as an agent loop would see them: inside each segment the
/// first `warmup` points fix the segment's constant (mean of
/// `actual − ratio × counted − tool_call × tool_calls`), and every later point is estimated as
/// `ratio × counted + tool_call × tool_calls + constant`. Returns `(point, estimate)` for the
/// points after the warm-up.
pub fn replay(
    points: &[UsagePoint],
    ratio: f64,
    tool_call: f64,
    warmup: usize,
) -> Vec<(&UsagePoint, f64)> {
    let line = |p: &UsagePoint| ratio * p.counted as f64 + tool_call * p.tool_calls as f64;
    let mut out = Vec::new();
    let mut segments: BTreeMap<usize, Vec<&UsagePoint>> = BTreeMap::new();
    for p in points {
        segments.entry(p.segment).or_default().push(p);
    }
    for points in segments.values() {
        if points.len() <= warmup || warmup == 0 {
            continue;
        }
        let constant = points[..warmup]
            .iter()
            .map(|p| p.actual as f64 - line(p))
            .sum::<f64>()
            / warmup as f64;
        for p in &points[warmup..] {
            out.push((*p, line(p) + constant));
        }
    }
    out
}
