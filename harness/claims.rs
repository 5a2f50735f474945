//! Claims: checkable statements about stored results (`claims:` in an experiment file).
//!
//! Every claim works on medians over repetitions: rows are grouped by (`point`, `variant`) and
//! the median of the claimed column is taken in each group, so one noisy repetition cannot make
//! or break a claim. Kinds:
//!
//! - `equivalence`: the largest recorded `equiv_rel_error` is at most `max_rel_error`.
//! - `ratio`: median(numerator) / median(denominator) at the same point, at every point
//!   selected by `at`, lies within `[at_least, at_most]`.
//! - `slope`: ordinary least squares of ln(median column) on ln(x) over the selected points,
//!   per variant; the slope must lie in `[min, max]` (1 = linear scaling, -1 = perfect strong
//!   scaling in threads).
//! - `scaling`: for one variant, median(column at `param` = `from`) / median(column at
//!   `param` = `to`) with all other parameters equal (a speedup when `param` is `threads`), at
//!   least `at_least` for every such pair of points.
//! - `share`: the median over repetitions of `phase / sum of all phases` lies within bounds.
//!
//! `at` keeps rows whose parameter equals a value; `max`/`min` keep the rows at the largest or
//! smallest value of that parameter (applied after the fixed values, in key order). A claim
//! that matches no rows fails and says so, because silence would hide a renamed variant or an
//! emptied sweep. Cost: O(rows log rows) per claim.

use crate::config::ClaimConfig;
use crate::model::{ResultRow, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The verdict on one claim, with measured and required values side by side in `detail`.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimOutcome {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// Number of failing points listed in a detail before the rest are counted.
const MAX_LISTED: usize = 5;

/// The value of a named column of a row: `wall_time_s`, `equiv_rel_error`, `phase_<name>_s`,
/// `metric_<name>`, or a numeric parameter. `None` when the row has no such (numeric) value.
pub fn column(row: &ResultRow, name: &str) -> Option<f64> {
    match name {
        "wall_time_s" => return Some(row.wall_time_s),
        "equiv_rel_error" => return row.equiv_rel_error,
        _ => {}
    }
    if let Some(phase) = name
        .strip_prefix("phase_")
        .and_then(|rest| rest.strip_suffix("_s"))
    {
        if let Some(&t) = row.phases_s.get(phase) {
            return Some(t);
        }
    }
    if let Some(metric) = name.strip_prefix("metric_") {
        if let Some(&m) = row.metrics.get(metric) {
            return Some(m);
        }
    }
    row.params.get(name).and_then(Value::as_f64)
}

/// Median of `values` (the mean of the two middle ones for an even count); `None` when empty.
/// NaNs sort last, so they only move the median when they are the majority.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        0.5 * (sorted[mid - 1] + sorted[mid])
    })
}

/// Evaluates every claim against `rows` (all rows of one experiment run).
pub fn evaluate(claims: &[ClaimConfig], rows: &[ResultRow]) -> Vec<ClaimOutcome> {
    let labels = PointLabels::new(rows);
    claims
        .iter()
        .map(|claim| {
            let (passed, detail) = match claim {
                ClaimConfig::Equivalence { max_rel_error, .. } => {
                    equivalence(rows, *max_rel_error, &labels)
                }
                ClaimConfig::Ratio {
                    column,
                    numerator,
                    denominator,
                    at_least,
                    at_most,
                    at,
                    ..
                } => compare(
                    rows,
                    column,
                    (numerator, denominator),
                    Comparison::Ratio,
                    Bounds::new(*at_least, *at_most),
                    at,
                    &labels,
                ),
                ClaimConfig::Difference {
                    column,
                    minuend,
                    subtrahend,
                    at_least,
                    at_most,
                    at,
                    ..
                } => compare(
                    rows,
                    column,
                    (minuend, subtrahend),
                    Comparison::Difference,
                    Bounds::new(*at_least, *at_most),
                    at,
                    &labels,
                ),
                ClaimConfig::Slope {
                    x,
                    column,
                    variants,
                    min,
                    max,
                    at,
                    ..
                } => slope(rows, x, column, variants, *min, *max, at),
                ClaimConfig::Scaling {
                    variant,
                    column,
                    param,
                    from,
                    to,
                    at_least,
                    at,
                    ..
                } => scaling(
                    rows,
                    variant,
                    column,
                    param,
                    (from, to),
                    Bounds::new(Some(*at_least), None),
                    at,
                    &labels,
                ),
                ClaimConfig::Share {
                    variant,
                    phase,
                    at_least,
                    at_most,
                    at,
                    ..
                } => share(
                    rows,
                    variant,
                    phase,
                    Bounds::new(*at_least, *at_most),
                    at,
                    &labels,
                ),
            };
            ClaimOutcome {
                name: claim.name().to_string(),
                passed,
                detail,
            }
        })
        .collect()
}

/// Renders a point by the parameters that vary across the run (`docs=5000, threads=2`), which
/// are the ones a reader needs to tell points apart.
struct PointLabels {
    varying: Vec<String>,
}

impl PointLabels {
    fn new(rows: &[ResultRow]) -> Self {
        let mut values: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
        for row in rows {
            for (k, v) in &row.params {
                let seen = values.entry(k).or_default();
                if !seen.contains(&v) {
                    seen.push(v);
                }
            }
        }
        let varying = values
            .into_iter()
            .filter(|(k, vs)| vs.len() > 1 || rows.iter().any(|r| !r.params.contains_key(*k)))
            .map(|(k, _)| k.to_string())
            .collect();
        PointLabels { varying }
    }

    fn label(&self, row: &ResultRow) -> String {
        let parts: Vec<String> = self
            .varying
            .iter()
            .filter_map(|k| row.params.get(k).map(|v| format!("{k}={v}")))
            .collect();
        if parts.is_empty() {
            "the only point".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// Formats a measured number for a detail line: enough digits to compare with a bound, no more.
pub fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if x == 0.0 {
        "0".to_string()
    } else if !x.is_finite() {
        format!("{x}")
    } else if !(1e-3..1e4).contains(&a) {
        format!("{x:.3e}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

#[derive(Clone, Copy, Debug)]
struct Bounds {
    at_least: Option<f64>,
    at_most: Option<f64>,
}

impl Bounds {
    fn new(at_least: Option<f64>, at_most: Option<f64>) -> Self {
        Bounds { at_least, at_most }
    }
    fn is_empty(&self) -> bool {
        self.at_least.is_none() && self.at_most.is_none()
    }
    fn holds(&self, x: f64) -> bool {
        // NaN fails both comparisons, so a NaN measurement never passes.
        self.at_least.is_none_or(|lo| x >= lo)
            && self.at_most.is_none_or(|hi| x <= hi)
            && !x.is_nan()
    }
    /// How far inside the bounds `x` is (negative when outside), to pick the point to show.
    fn margin(&self, x: f64) -> f64 {
        let lo = self.at_least.map_or(f64::INFINITY, |lo| x - lo);
        let hi = self.at_most.map_or(f64::INFINITY, |hi| hi - x);
        lo.min(hi)
    }
    fn required(&self) -> String {
        match (self.at_least, self.at_most) {
            (Some(lo), Some(hi)) => format!("required >= {lo} and <= {hi}"),
            (Some(lo), None) => format!("required >= {lo}"),
            (None, Some(hi)) => format!("required <= {hi}"),
            (None, None) => "no bound given: set at_least and/or at_most".to_string(),
        }
    }
}

/// Applies an `at` selection to `rows`; `Err` explains why nothing is left.
fn select<'a>(
    rows: &'a [ResultRow],
    at: &BTreeMap<String, Value>,
) -> Result<Vec<&'a ResultRow>, String> {
    let mut selected: Vec<&ResultRow> = rows.iter().collect();
    let is_extreme = |v: &Value| matches!(v.as_str(), Some("max") | Some("min"));
    for (key, wanted) in at.iter().filter(|(_, v)| !is_extreme(v)) {
        selected.retain(|row| matches_value(row, key, wanted));
        if selected.is_empty() {
            return Err(format!("no rows with {key}={wanted}"));
        }
    }
    for (key, extreme) in at.iter().filter(|(_, v)| is_extreme(v)) {
        let values: Vec<f64> = selected.iter().filter_map(|r| column(r, key)).collect();
        let target = if extreme.as_str() == Some("max") {
            values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        } else {
            values.iter().copied().fold(f64::INFINITY, f64::min)
        };
        if values.is_empty() {
            return Err(format!(
                "no rows with a numeric `{key}` (at: {key}: {extreme})"
            ));
        }
        selected.retain(|row| column(row, key) == Some(target));
    }
    if selected.is_empty() {
        return Err("no rows".to_string());
    }
    Ok(selected)
}

fn matches_value(row: &ResultRow, key: &str, wanted: &Value) -> bool {
    match row.params.get(key) {
        Some(have) => values_equal(have, wanted),
        None => match (column(row, key), wanted.as_f64()) {
            (Some(a), Some(b)) => nearly_equal(a, b),
            _ => key == "variant" && wanted.as_str() == Some(row.variant.as_str()),
        },
    }
}

/// Integers and floats compare by value (`threads: 2` matches `threads: 2.0`).
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => nearly_equal(x, y),
        _ => a == b,
    }
}

fn nearly_equal(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Median of `col` per point over the rows of `variant`, with one representative row per point
/// (for its label).
fn medians_by_point<'a>(
    rows: &[&'a ResultRow],
    variant: &str,
    col: &str,
) -> BTreeMap<usize, (f64, &'a ResultRow)> {
    let mut groups: BTreeMap<usize, (Vec<f64>, &ResultRow)> = BTreeMap::new();
    for &row in rows.iter().filter(|r| r.variant == variant) {
        if let Some(v) = column(row, col) {
            groups
                .entry(row.point)
                .or_insert_with(|| (Vec::new(), row))
                .0
                .push(v);
        }
    }
    groups
        .into_iter()
        .filter_map(|(p, (vs, row))| median(&vs).map(|m| (p, (m, row))))
        .collect()
}

/// Joins per-point findings, listing failures first and counting what is not listed.
fn summarize(mut findings: Vec<(bool, f64, String)>, bounds: &Bounds) -> (bool, String) {
    let total = findings.len();
    let failed = findings.iter().filter(|f| !f.0).count();
    if failed == 0 {
        // Show the tightest point: the one a regression would break first.
        findings.sort_by(|a, b| a.1.total_cmp(&b.1));
        let text = &findings[0].2;
        let scope = if total == 1 {
            String::new()
        } else {
            format!("; tightest of {total} points, all pass")
        };
        (true, format!("{text} ({}){scope}", bounds.required()))
    } else {
        let listed: Vec<&str> = findings
            .iter()
            .filter(|f| !f.0)
            .take(MAX_LISTED)
            .map(|f| f.2.as_str())
            .collect();
        let more = if failed > MAX_LISTED {
            format!(", and {} more", failed - MAX_LISTED)
        } else {
            String::new()
        };
        (
            false,
            format!(
                "{}{more} ({}); {failed} of {total} points fail",
                listed.join("; "),
                bounds.required()
            ),
        )
    }
}

fn equivalence(rows: &[ResultRow], max_rel_error: f64, labels: &PointLabels) -> (bool, String) {
    let mut worst_by_variant: BTreeMap<&str, (f64, &ResultRow)> = BTreeMap::new();
    for row in rows {
        if let Some(err) = row.equiv_rel_error {
            let entry = worst_by_variant.entry(&row.variant).or_insert((err, row));
            // total_cmp puts NaN above every number, so a NaN error is the worst.
            if err.total_cmp(&entry.0).is_gt() {
                *entry = (err, row);
            }
        }
    }
    if worst_by_variant.is_empty() {
        return (
            false,
            "no rows carry an equivalence error (is `equivalence:` set, with more than one variant?)"
                .to_string(),
        );
    }
    let passed = worst_by_variant
        .values()
        .all(|(err, _)| *err <= max_rel_error);
    let parts: Vec<String> = worst_by_variant
        .iter()
        .map(|(variant, (err, row))| {
            format!(
                "{variant}: max rel error {} at {}",
                fmt_num(*err),
                labels.label(row)
            )
        })
        .collect();
    (
        passed,
        format!("{} (required <= {max_rel_error})", parts.join("; ")),
    )
}

/// How two variants' medians at one point are compared.
#[derive(Clone, Copy)]
enum Comparison {
    Ratio,
    Difference,
}

impl Comparison {
    fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            Comparison::Ratio => a / b,
            Comparison::Difference => a - b,
        }
    }
    fn describe(self, a: &str, b: &str, value: f64) -> String {
        match self {
            Comparison::Ratio => format!("{a}/{b} = {}x", fmt_num(value)),
            Comparison::Difference => format!("{a} - {b} = {}", fmt_num(value)),
        }
    }
}

/// Compares variant `a` with variant `b` on `col` at every selected point where both ran.
fn compare(
    rows: &[ResultRow],
    col: &str,
    (a, b): (&str, &str),
    how: Comparison,
    bounds: Bounds,
    at: &BTreeMap<String, Value>,
    labels: &PointLabels,
) -> (bool, String) {
    let pair = match how {
        Comparison::Ratio => format!("{a}/{b}"),
        Comparison::Difference => format!("{a} - {b}"),
    };
    let selected = match select(rows, at) {
        Ok(s) => s,
        Err(why) => return (false, format!("{pair}: {why}")),
    };
    let first = medians_by_point(&selected, a, col);
    let second = medians_by_point(&selected, b, col);
    let mut findings = Vec::new();
    for (point, (x, row)) in &first {
        if let Some((y, _)) = second.get(point) {
            let v = how.apply(*x, *y);
            findings.push((
                bounds.holds(v) && !bounds.is_empty(),
                bounds.margin(v),
                format!("{} at {}", how.describe(a, b, v), labels.label(row)),
            ));
        }
    }
    if findings.is_empty() {
        let missing = if first.is_empty() { a } else { b };
        return (
            false,
            format!("{pair}: no rows of `{missing}` with `{col}` at the selected points"),
        );
    }
    summarize(findings, &bounds)
}

fn slope(
    rows: &[ResultRow],
    x: &str,
    col: &str,
    variants: &[String],
    min: f64,
    max: f64,
    at: &BTreeMap<String, Value>,
) -> (bool, String) {
    let required = format!("required in [{min}, {max}]");
    let selected = match select(rows, at) {
        Ok(s) => s,
        Err(why) => return (false, format!("{why} ({required})")),
    };
    if variants.is_empty() {
        return (false, format!("no variants listed ({required})"));
    }
    let mut passed = true;
    let mut parts = Vec::new();
    for variant in variants {
        let ys = medians_by_point(&selected, variant, col);
        let xs = medians_by_point(&selected, variant, x);
        let pairs: Vec<(f64, f64)> = ys
            .iter()
            .filter_map(|(p, (y, _))| xs.get(p).map(|(xv, _)| (*xv, *y)))
            .collect();
        let usable: Vec<(f64, f64)> = pairs
            .iter()
            .copied()
            .filter(|(xv, y)| *xv > 0.0 && *y > 0.0 && xv.is_finite() && y.is_finite())
            .collect();
        let distinct_x: BTreeSet<u64> = usable.iter().map(|(xv, _)| xv.to_bits()).collect();
        if distinct_x.len() < 2 {
            passed = false;
            parts.push(format!(
                "{variant}: needs points at 2 or more distinct positive `{x}` with positive `{col}`, found {} ({} points with rows)",
                distinct_x.len(),
                pairs.len()
            ));
            continue;
        }
        let logs: Vec<(f64, f64)> = usable.iter().map(|(a, b)| (a.ln(), b.ln())).collect();
        let s = least_squares_slope(&logs);
        let ok = s >= min && s <= max;
        passed &= ok;
        let (lo, hi) = usable
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (xv, _)| {
                (lo.min(*xv), hi.max(*xv))
            });
        let shared = if distinct_x.len() < usable.len() {
            " (several points share an x value: fix the other parameters with `at`)"
        } else {
            ""
        };
        parts.push(format!(
            "{variant}: slope {:.3} over {} points, {x} from {} to {}{shared}",
            s,
            usable.len(),
            fmt_num(lo),
            fmt_num(hi)
        ));
    }
    (passed, format!("{} ({required})", parts.join("; ")))
}

/// Ordinary least-squares slope of y on x; the caller guarantees two distinct x values.
pub fn least_squares_slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points
        .iter()
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    let sxx: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    sxy / sxx
}

/// The target of `from`/`to`: a fixed value, or the extreme of `param` among `rows`.
fn resolve_end(rows: &[&ResultRow], param: &str, end: &Value) -> Option<f64> {
    let values = rows.iter().filter_map(|r| column(r, param));
    match end.as_str() {
        Some("max") => values.reduce(f64::max),
        Some("min") => values.reduce(f64::min),
        _ => end.as_f64(),
    }
}

#[allow(clippy::too_many_arguments)]
fn scaling(
    rows: &[ResultRow],
    variant: &str,
    col: &str,
    param: &str,
    (from, to): (&Value, &Value),
    bounds: Bounds,
    at: &BTreeMap<String, Value>,
    labels: &PointLabels,
) -> (bool, String) {
    let selected = match select(rows, at) {
        Ok(s) => s,
        Err(why) => return (false, format!("{variant}: {why} ({})", bounds.required())),
    };
    // Groups of points that differ only in `param`.
    let mut groups: BTreeMap<String, Vec<&ResultRow>> = BTreeMap::new();
    for &row in selected.iter().filter(|r| r.variant == variant) {
        let mut others = row.params.clone();
        others.remove(param);
        groups
            .entry(crate::plan::point_key(&others))
            .or_default()
            .push(row);
    }
    let mut findings = Vec::new();
    for group in groups.values() {
        let (Some(x_from), Some(x_to)) = (
            resolve_end(group, param, from),
            resolve_end(group, param, to),
        ) else {
            continue;
        };
        let at_value = |x: f64| -> Vec<&ResultRow> {
            group
                .iter()
                .copied()
                .filter(|r| column(r, param).is_some_and(|v| nearly_equal(v, x)))
                .collect()
        };
        let (rows_from, rows_to) = (at_value(x_from), at_value(x_to));
        let med = |rs: &[&ResultRow]| {
            let vs: Vec<f64> = rs.iter().filter_map(|r| column(r, col)).collect();
            median(&vs)
        };
        let (Some(t_from), Some(t_to)) = (med(&rows_from), med(&rows_to)) else {
            continue;
        };
        let r = t_from / t_to;
        let others: Vec<String> = labels
            .varying
            .iter()
            .filter(|k| k.as_str() != param)
            .filter_map(|k| group[0].params.get(k).map(|v| format!("{k}={v}")))
            .collect();
        let place = if others.is_empty() {
            String::new()
        } else {
            format!(" at {}", others.join(", "))
        };
        findings.push((
            bounds.holds(r),
            bounds.margin(r),
            format!(
                "{variant}: {col}({param}={x_from}) / {col}({param}={x_to}) = {}x{place}",
                fmt_num(r)
            ),
        ));
    }
    if findings.is_empty() {
        return (
            false,
            format!(
                "no rows of `{variant}` with `{col}` at both {param}={from} and {param}={to} ({})",
                bounds.required()
            ),
        );
    }
    summarize(findings, &bounds)
}

fn share(
    rows: &[ResultRow],
    variant: &str,
    phase: &str,
    bounds: Bounds,
    at: &BTreeMap<String, Value>,
    labels: &PointLabels,
) -> (bool, String) {
    let selected = match select(rows, at) {
        Ok(s) => s,
        Err(why) => return (false, format!("{variant}: {why} ({})", bounds.required())),
    };
    let mut per_point: BTreeMap<usize, (Vec<f64>, &ResultRow)> = BTreeMap::new();
    for &row in selected.iter().filter(|r| r.variant == variant) {
        // Phases may nest (a variant can report `loop` and its parts), so the share is taken of
        // the measured wall time, never of a sum over phases.
        let total = row.wall_time_s;
        if let (Some(&t), true) = (row.phases_s.get(phase), total > 0.0) {
            per_point
                .entry(row.point)
                .or_insert_with(|| (Vec::new(), row))
                .0
                .push(t / total);
        }
    }
    if per_point.is_empty() {
        return (
            false,
            format!(
                "no rows of `{variant}` with phase `{phase}` and a positive wall time at the selected points ({})",
                bounds.required()
            ),
        );
    }
    let findings = per_point
        .values()
        .filter_map(|(shares, row)| {
            median(shares).map(|s| {
                (
                    bounds.holds(s) && !bounds.is_empty(),
                    bounds.margin(s),
                    format!(
                        "{variant}: phase `{phase}` = {} of wall time at {}",
                        fmt_num(s),
                        labels.label(row)
                    ),
                )
            })
        })
        .collect();
    summarize(findings, &bounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn slope_of_a_line() {
        let pts: Vec<(f64, f64)> = (1..6).map(|i| (i as f64, 3.0 * i as f64 - 1.0)).collect();
        assert!((least_squares_slope(&pts) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn fmt_num_keeps_a_few_digits() {
        assert_eq!(fmt_num(143.217), "143.2");
        assert_eq!(fmt_num(0.5), "0.500");
        assert_eq!(fmt_num(1e-5), "1.000e-5");
    }
}
