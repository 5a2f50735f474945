//! One variant at one point, summed up from its rows: what the run's summary table, the report
//! page and `parbench compare` print.

use crate::family::{Params, ResultRow};
use crate::util::stats::median;

/// The repetitions of one variant at one point.
#[derive(Clone, Debug, PartialEq)]
pub struct VariantSummary {
    pub point: usize,
    pub params: Params,
    pub variant: String,
    /// Wall times of the repetitions, in run order.
    pub times: Vec<f64>,
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    /// Median of the `gflop_per_s` metric, for families that report it.
    pub gflop_per_s: Option<f64>,
    /// Median of `fraction_of_bound` (the machine's least time over the measured one), for rows
    /// whose variant states its work ([`crate::exec::bound`]).
    pub fraction_of_bound: Option<f64>,
    /// Largest relative difference from the equivalence reference's output.
    pub max_rel_error: Option<f64>,
}

/// Every (point, variant) of `rows`, by point then variant name.
pub fn summarize(rows: &[ResultRow]) -> Vec<VariantSummary> {
    let mut keys: Vec<(usize, &str)> = rows.iter().map(|r| (r.point, r.variant.as_str())).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|(point, variant)| {
            let sel: Vec<&ResultRow> = rows
                .iter()
                .filter(|r| r.point == point && r.variant == variant)
                .collect();
            let times: Vec<f64> = sel.iter().map(|r| r.wall_time_s).collect();
            let metric = |name: &str| -> Option<f64> {
                let values: Vec<f64> = sel
                    .iter()
                    .filter_map(|r| r.metrics.get(name).copied())
                    .collect();
                median(&values)
            };
            VariantSummary {
                point,
                params: sel[0].params.clone(),
                variant: variant.to_string(),
                median_s: median(&times).unwrap_or(f64::NAN),
                min_s: times.iter().copied().fold(f64::INFINITY, f64::min),
                max_s: times.iter().copied().fold(0.0, f64::max),
                times,
                gflop_per_s: metric("gflop_per_s"),
                fraction_of_bound: metric("fraction_of_bound"),
                max_rel_error: sel
                    .iter()
                    .filter_map(|r| r.equiv_rel_error)
                    .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e)))),
            }
        })
        .collect()
}

/// A fraction as a percentage for the tables (`-` when absent).
pub fn percent(fraction: Option<f64>) -> String {
    fraction.map_or("-".to_string(), |f| format!("{:.1}", 100.0 * f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn repetitions_sum_up_per_point_and_variant() {
        let row = |point: usize, variant: &str, t: f64, err: Option<f64>| ResultRow {
            experiment: "e".to_string(),
            point,
            params: Params::new(),
            variant: variant.to_string(),
            repetition: 0,
            wall_time_s: t,
            phases_s: BTreeMap::new(),
            metrics: BTreeMap::from([
                ("gflop_per_s".to_string(), 1.0 / t),
                ("fraction_of_bound".to_string(), 0.1 / t),
            ]),
            equiv_rel_error: err,
        };
        let rows = [
            row(1, "b", 3.0, Some(1e-12)),
            row(0, "a", 2.0, None),
            row(1, "b", 1.0, Some(3e-12)),
            row(1, "b", 2.0, None),
        ];
        let s = summarize(&rows);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].point, s[0].variant.as_str()), (0, "a"));
        let b = &s[1];
        assert_eq!(b.times, [3.0, 1.0, 2.0]);
        assert_eq!((b.median_s, b.min_s, b.max_s), (2.0, 1.0, 3.0));
        assert_eq!(b.gflop_per_s, Some(0.5));
        assert_eq!(b.fraction_of_bound, Some(0.05));
        assert_eq!(b.max_rel_error, Some(3e-12));
        assert_eq!(s[0].max_rel_error, None);
    }
}
