//! `parbench check`: re-evaluates an experiment's claims on stored rows and compares the run
//! against a committed baseline.
//!
//! The baseline records, per experiment, per point (parameters rendered by
//! [`crate::experiment::plan::point_key`]) and per variant, the median wall time and the median time
//! relative to the reference variant (the equivalence reference, else the first variant) at
//! the same point. Relative times come from one run on one machine, so machine speed and noise
//! shared by all variants cancel: a variant whose relative time grew by more than
//! `max_slowdown` is a regression. Absolute times move with the machine, so only a slowdown
//! beyond the generous `max_absolute_slowdown` is reported, as a warning. Points absent from
//! the baseline are skipped with a note. Cost: O(rows log rows).

use crate::analysis::claims::{self, ClaimOutcome};
use crate::experiment::config::ExperimentConfig;
use crate::experiment::plan::point_key;
use crate::family::ResultRow;
use crate::util::stats::median;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Default allowed growth of a variant's time relative to the reference variant.
pub const DEFAULT_MAX_SLOWDOWN: f64 = 1.5;
/// Default absolute slowdown above which a warning is printed.
pub const DEFAULT_MAX_ABSOLUTE_SLOWDOWN: f64 = 3.0;
/// Shortest median time (of the variant and of the reference, now and in the baseline) whose
/// ratio is compared: below it, scheduling noise on a shared machine (16 in-process ranks on 2
/// cores, a cold page) moves ratios by more than any allowed slowdown.
pub const DEFAULT_MIN_TIME_S: f64 = 0.02;
/// Version of the baseline file format.
pub const BASELINE_VERSION: u32 = 1;

/// Reference timings committed to the repository.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub version: u32,
    /// Experiment name -> its baseline.
    pub experiments: BTreeMap<String, ExperimentBaseline>,
}

/// An empty baseline of the current format (what `check --write-baseline` merges runs into).
impl Default for Baseline {
    fn default() -> Self {
        Baseline {
            version: BASELINE_VERSION,
            experiments: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExperimentBaseline {
    /// The variant relative times are measured against.
    pub reference_variant: String,
    /// Point key -> variant -> timings.
    pub points: BTreeMap<String, BTreeMap<String, BaselineEntry>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineEntry {
    pub median_wall_time_s: f64,
    /// Median wall time divided by the reference variant's at the same point (None when the
    /// reference has no rows there).
    pub relative_to_reference: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error("{}: cannot read or write baseline: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a parbench baseline file: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: baseline format version {found}, this parbench reads version {expected}; regenerate it with the current parbench", path.display())]
    Version {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
}

impl Baseline {
    /// Writes pretty JSON (stable key order, so diffs of committed baselines are readable).
    pub fn save(&self, path: &Path) -> Result<(), BaselineError> {
        let json = serde_json::to_string_pretty(self).map_err(|source| BaselineError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        crate::results::write_atomic(path, (json + "\n").as_bytes()).map_err(|err| {
            BaselineError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::other(format!("{err:#}")),
            }
        })
    }

    pub fn load(path: &Path) -> Result<Self, BaselineError> {
        let text = std::fs::read_to_string(path).map_err(|source| BaselineError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let baseline: Baseline =
            serde_json::from_str(&text).map_err(|source| BaselineError::Json {
                path: path.to_path_buf(),
                source,
            })?;
        if baseline.version != BASELINE_VERSION {
            return Err(BaselineError::Version {
                path: path.to_path_buf(),
                found: baseline.version,
                expected: BASELINE_VERSION,
            });
        }
        Ok(baseline)
    }

    /// Adds (or replaces) the experiments of `other`, so one file can hold several.
    pub fn merge(&mut self, other: Baseline) {
        self.experiments.extend(other.experiments);
    }
}

/// The variant relative times are measured against: the equivalence reference, else the first
/// listed variant that has rows, else the first variant found in the rows.
pub fn reference_variant(rows: &[ResultRow], config: &ExperimentConfig) -> Option<String> {
    let has_rows = |v: &str| rows.iter().any(|r| r.variant == v);
    config
        .equivalence
        .as_ref()
        .map(|e| e.reference.clone())
        .filter(|v| has_rows(v))
        .or_else(|| config.variants.iter().find(|v| has_rows(v)).cloned())
        .or_else(|| rows.iter().map(|r| r.variant.clone()).min())
}

/// Summarizes a run's rows as a baseline for `config.name`.
pub fn make_baseline(rows: &[ResultRow], config: &ExperimentConfig) -> Baseline {
    let mut experiments = BTreeMap::new();
    experiments.insert(config.name.clone(), experiment_baseline(rows, config));
    Baseline {
        version: BASELINE_VERSION,
        experiments,
    }
}

fn experiment_baseline(rows: &[ResultRow], config: &ExperimentConfig) -> ExperimentBaseline {
    let reference = reference_variant(rows, config).unwrap_or_default();
    let mut times: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for row in rows {
        times
            .entry(point_key(&row.params))
            .or_default()
            .entry(row.variant.clone())
            .or_default()
            .push(row.wall_time_s);
    }
    let points = times
        .into_iter()
        .map(|(key, by_variant)| {
            let medians: BTreeMap<String, f64> = by_variant
                .into_iter()
                .filter_map(|(v, ts)| median(&ts).map(|m| (v, m)))
                .collect();
            let reference_time = medians.get(&reference).copied();
            let entries = medians
                .iter()
                .map(|(v, &m)| {
                    let relative = reference_time.filter(|&r| r > 0.0).map(|r| m / r);
                    (
                        v.clone(),
                        BaselineEntry {
                            median_wall_time_s: m,
                            relative_to_reference: relative,
                        },
                    )
                })
                .collect();
            (key, entries)
        })
        .collect();
    ExperimentBaseline {
        reference_variant: reference,
        points,
    }
}

/// Thresholds of the baseline comparison.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckOptions {
    /// Allowed growth factor of a variant's time relative to the reference variant.
    pub max_slowdown: f64,
    /// Absolute slowdown factor above which a warning is reported.
    pub max_absolute_slowdown: f64,
    /// Relative times are compared only where every time involved is at least this long.
    pub min_time_s: f64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            max_slowdown: DEFAULT_MAX_SLOWDOWN,
            max_absolute_slowdown: DEFAULT_MAX_ABSOLUTE_SLOWDOWN,
            min_time_s: DEFAULT_MIN_TIME_S,
        }
    }
}

/// What `parbench check` found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckReport {
    pub claims: Vec<ClaimOutcome>,
    /// Relative slowdowns beyond the allowed factor (fail the check).
    pub regressions: Vec<String>,
    /// Absolute slowdowns beyond the generous factor (do not fail the check).
    pub warnings: Vec<String>,
    /// What was not compared and why (points or experiments absent from the baseline).
    pub notes: Vec<String>,
}

impl CheckReport {
    pub fn claims_passed(&self) -> bool {
        self.claims.iter().all(|c| c.passed)
    }
    pub fn passed(&self) -> bool {
        self.claims_passed() && self.regressions.is_empty()
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.claims {
            let mark = if c.passed { "PASS" } else { "FAIL" };
            writeln!(f, "{mark} claim {}: {}", c.name, c.detail)?;
        }
        for r in &self.regressions {
            writeln!(f, "REGRESSION {r}")?;
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

/// Re-evaluates `config`'s claims on `rows` and compares with `baseline` (when given), with
/// the default absolute-slowdown warning factor.
pub fn check(
    rows: &[ResultRow],
    config: &ExperimentConfig,
    baseline: Option<&Baseline>,
    max_slowdown: f64,
) -> CheckReport {
    check_with(
        rows,
        config,
        baseline,
        &CheckOptions {
            max_slowdown,
            ..CheckOptions::default()
        },
    )
}

/// [`check`] with every threshold explicit.
pub fn check_with(
    rows: &[ResultRow],
    config: &ExperimentConfig,
    baseline: Option<&Baseline>,
    options: &CheckOptions,
) -> CheckReport {
    let mut report = CheckReport {
        claims: claims::evaluate(config, rows),
        ..CheckReport::default()
    };
    let Some(baseline) = baseline else {
        return report;
    };
    let Some(old) = baseline.experiments.get(&config.name) else {
        report.notes.push(format!(
            "the baseline has no entry for experiment `{}`; nothing compared (add one with the baseline command)",
            config.name
        ));
        return report;
    };
    let new = experiment_baseline(rows, config);
    let same_reference = old.reference_variant == new.reference_variant;
    if !same_reference {
        report.notes.push(format!(
            "the baseline measures relative times against `{}`, this run against `{}`: relative times not compared",
            old.reference_variant, new.reference_variant
        ));
    }
    let mut absent_points = 0;
    let mut short_points = 0usize;
    for (key, variants) in &new.points {
        let Some(old_variants) = old.points.get(key) else {
            absent_points += 1;
            report
                .notes
                .push(format!("point {key} is not in the baseline: skipped"));
            continue;
        };
        for (variant, now) in variants {
            let Some(then) = old_variants.get(variant) else {
                report.notes.push(format!(
                    "variant `{variant}` at {key} is not in the baseline: skipped"
                ));
                continue;
            };
            if same_reference && *variant != new.reference_variant {
                if let (Some(r_now), Some(r_then)) =
                    (now.relative_to_reference, then.relative_to_reference)
                {
                    let shortest = [
                        now.median_wall_time_s,
                        now.median_wall_time_s / r_now,
                        then.median_wall_time_s,
                        then.median_wall_time_s / r_then,
                    ]
                    .into_iter()
                    .fold(f64::INFINITY, f64::min);
                    let growth = r_now / r_then;
                    if shortest < options.min_time_s {
                        short_points += 1;
                    } else if growth > options.max_slowdown || growth.is_nan() {
                        report.regressions.push(format!(
                            "`{variant}` at {key}: {}x slower relative to `{}` ({} -> {} of its time; allowed {}x)",
                            claims::fmt_num(growth),
                            new.reference_variant,
                            claims::fmt_num(r_then),
                            claims::fmt_num(r_now),
                            options.max_slowdown
                        ));
                    }
                }
            }
            let growth = now.median_wall_time_s / then.median_wall_time_s;
            if growth > options.max_absolute_slowdown {
                report.warnings.push(format!(
                    "`{variant}` at {key}: median wall time {} s vs {} s in the baseline ({}x; warning above {}x, absolute times depend on the machine)",
                    claims::fmt_num(now.median_wall_time_s),
                    claims::fmt_num(then.median_wall_time_s),
                    claims::fmt_num(growth),
                    options.max_absolute_slowdown
                ));
            }
        }
    }
    if short_points > 0 {
        report.notes.push(format!(
            "{short_points} variant(s) and point(s) ran under {} s: relative times not compared there (too short to time reliably)",
            claims::fmt_num(options.min_time_s)
        ));
    }
    let missing_now = old
        .points
        .keys()
        .filter(|k| !new.points.contains_key(*k))
        .count();
    if missing_now > 0 {
        report.notes.push(format!(
            "{missing_now} baseline points were not run this time"
        ));
    }
    if absent_points > 0 && absent_points == new.points.len() {
        report.notes.push(
            "no point of this run is in the baseline (a --quick run against a full baseline?)"
                .to_string(),
        );
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::config::{DataConfig, DataSource, EquivalenceConfig};
    use crate::family::{Params, Value};

    fn config() -> ExperimentConfig {
        ExperimentConfig {
            name: "exp".to_string(),
            description: String::new(),
            paper: "p".to_string(),
            reproduces: "r".to_string(),
            family: "mock".to_string(),
            data: DataConfig {
                source: DataSource::Synthetic,
                file: None,
                seed: 0,
            },
            variants: vec!["slow".to_string(), "fast".to_string()],
            params: BTreeMap::new(),
            sweep: BTreeMap::new(),
            repetitions: 3,
            warmup: 0,
            quick: None,
            equivalence: Some(EquivalenceConfig {
                reference: "slow".to_string(),
                rel_tol: 1e-9,
            }),
            figures: Vec::new(),
            launcher: None,
            claims: Vec::new(),
        }
    }

    /// Rows at sizes 10 and 20: `slow` takes `slow_s`, `fast` takes `fast_s` (3 repetitions,
    /// one outlier each, which the medians must ignore).
    fn rows(slow_s: f64, fast_s: f64, sizes: &[i64]) -> Vec<ResultRow> {
        let mut out = Vec::new();
        for (point, &size) in sizes.iter().enumerate() {
            let params = Params::from([
                ("size".to_string(), Value::Int(size)),
                ("threads".to_string(), Value::Int(1)),
            ]);
            for (variant, t) in [("slow", slow_s), ("fast", fast_s)] {
                for (repetition, factor) in [1.0, 1.0, 50.0].into_iter().enumerate() {
                    out.push(ResultRow {
                        experiment: "exp".to_string(),
                        point,
                        params: params.clone(),
                        variant: variant.to_string(),
                        repetition,
                        wall_time_s: t * factor,
                        phases_s: BTreeMap::new(),
                        metrics: BTreeMap::new(),
                        equiv_rel_error: None,
                    });
                }
            }
        }
        out
    }

    /// Regression: `check --write-baseline` merged runs into `Baseline::default()`, whose
    /// derived version 0 made the file it wrote unreadable by `check --baseline`.
    #[test]
    fn a_baseline_merged_into_the_default_loads_back() {
        let mut all = Baseline::default();
        all.merge(make_baseline(&rows(1.0, 0.1, &[10]), &config()));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.json");
        all.save(&path).unwrap();
        assert_eq!(Baseline::load(&path).unwrap(), all);
    }

    #[test]
    fn baseline_records_medians_and_relative_times() {
        let b = make_baseline(&rows(1.0, 0.1, &[10]), &config());
        let exp = &b.experiments["exp"];
        assert_eq!(exp.reference_variant, "slow");
        let entry = &exp.points["size=10,threads=1"]["fast"];
        assert_eq!(entry.median_wall_time_s, 0.1);
        assert_eq!(entry.relative_to_reference, Some(0.1));
    }

    #[test]
    fn unchanged_run_passes() {
        let base = make_baseline(&rows(1.0, 0.1, &[10, 20]), &config());
        let report = check(&rows(1.0, 0.1, &[10, 20]), &config(), Some(&base), 1.5);
        assert!(report.passed(), "{report}");
        assert!(report.regressions.is_empty() && report.warnings.is_empty());
    }

    #[test]
    fn relative_slowdown_is_a_regression() {
        let base = make_baseline(&rows(1.0, 0.1, &[10]), &config());
        // fast got 2x slower while the reference stayed put.
        let report = check(&rows(1.0, 0.2, &[10]), &config(), Some(&base), 1.5);
        assert!(!report.passed());
        assert_eq!(report.regressions.len(), 1, "{report}");
        assert!(report.regressions[0].contains("`fast` at size=10,threads=1: 2.000x slower"));
        // A looser threshold accepts it.
        let report = check(&rows(1.0, 0.2, &[10]), &config(), Some(&base), 2.5);
        assert!(report.passed(), "{report}");
    }

    /// Regression: in-process FusedMM runs of a few milliseconds (16 rank threads on 2 cores)
    /// swing by more than 1.5x between identical runs; such times must not fail CI.
    #[test]
    fn times_too_short_to_measure_are_not_compared() {
        let base = make_baseline(&rows(1.0, 0.005, &[10]), &config());
        let report = check(&rows(1.0, 0.015, &[10]), &config(), Some(&base), 1.5);
        assert!(report.passed(), "{report}");
        assert!(
            report.notes.iter().any(|n| n.contains("too short")),
            "{report}"
        );
    }

    #[test]
    fn a_slower_machine_only_warns() {
        let base = make_baseline(&rows(1.0, 0.1, &[10]), &config());
        // Everything 4x slower: relative times unchanged, absolute beyond the 3x warning.
        let report = check(&rows(4.0, 0.4, &[10]), &config(), Some(&base), 1.5);
        assert!(report.passed(), "{report}");
        assert_eq!(report.warnings.len(), 2, "{report}");
    }

    #[test]
    fn points_absent_from_the_baseline_are_skipped_with_a_note() {
        let base = make_baseline(&rows(1.0, 0.1, &[10]), &config());
        let report = check(&rows(1.0, 0.05, &[10, 30]), &config(), Some(&base), 10.0);
        assert!(report.passed(), "{report}");
        assert!(
            report.notes.iter().any(|n| n.contains("size=30")),
            "{report}"
        );
        let mut other = config();
        other.name = "other".to_string();
        let report = check(&rows(1.0, 0.1, &[10]), &other, Some(&base), 1.5);
        assert!(report.notes[0].contains("no entry for experiment `other`"));
    }

    #[test]
    fn failed_claims_fail_the_check() {
        let mut cfg = config();
        cfg.claims
            .push(crate::experiment::config::ClaimConfig::Equivalence {
                name: "eq".to_string(),
                max_rel_error: Some(1e-9),
            });
        let report = check(&rows(1.0, 0.1, &[10]), &cfg, None, 1.5);
        assert!(!report.claims_passed() && !report.passed());
    }

    #[test]
    fn baseline_round_trips_through_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baseline.json");
        let mut b = make_baseline(&rows(1.0, 0.1, &[10, 20]), &config());
        let mut second = config();
        second.name = "exp2".to_string();
        b.merge(make_baseline(&rows(2.0, 0.5, &[10]), &second));
        b.save(&path).unwrap();
        assert_eq!(Baseline::load(&path).unwrap(), b);
        std::fs::write(&path, "{\"version\": 99, \"experiments\": {}}").unwrap();
        let err = Baseline::load(&path).unwrap_err().to_string();
        assert!(err.contains("version 99"), "{err}");
    }
}
