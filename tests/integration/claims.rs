//! Claims on hand-made rows with known medians, and on rows produced by the mock family.

use parbench::claims::{self, column, evaluate, ClaimOutcome};
use parbench::config::ClaimConfig;
use parbench::model::{Params, ResultRow, Value};
use parbench::plan;
use std::collections::BTreeMap;

fn params(pairs: &[(&str, i64)]) -> Params {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Value::Int(*v)))
        .collect()
}

fn row(point: usize, p: &[(&str, i64)], variant: &str, repetition: usize, wall: f64) -> ResultRow {
    ResultRow {
        experiment: "test".to_string(),
        point,
        params: params(p),
        variant: variant.to_string(),
        repetition,
        wall_time_s: wall,
        phases_s: BTreeMap::new(),
        metrics: BTreeMap::new(),
        equiv_rel_error: None,
    }
}

/// Three repetitions whose median is `median` but whose mean is far from it, so a claim that
/// used the mean would fail these tests.
fn reps(point: usize, p: &[(&str, i64)], variant: &str, median: f64) -> Vec<ResultRow> {
    [median, median * 1000.0, median * 0.999]
        .iter()
        .enumerate()
        .map(|(i, &t)| row(point, p, variant, i, t))
        .collect()
}

fn ratio(at_least: f64, at: &[(&str, &str)]) -> ClaimConfig {
    ClaimConfig::Ratio {
        name: "slow-over-fast".to_string(),
        column: "wall_time_s".to_string(),
        numerator: "slow".to_string(),
        denominator: "fast".to_string(),
        at_least: Some(at_least),
        at_most: None,
        at: at
            .iter()
            .map(|(k, v)| (k.to_string(), Value::Str(v.to_string())))
            .collect(),
    }
}

fn one(claim: ClaimConfig, rows: &[ResultRow]) -> ClaimOutcome {
    let mut outcomes = evaluate(&[claim], rows);
    assert_eq!(outcomes.len(), 1);
    outcomes.remove(0)
}

fn assert_outcome(outcome: &ClaimOutcome, passed: bool, detail_has: &[&str]) {
    assert_eq!(
        outcome.passed, passed,
        "expected passed={passed}, got {outcome:?}"
    );
    for d in detail_has {
        assert!(
            outcome.detail.contains(d),
            "expected detail to contain {d:?}, got: {}",
            outcome.detail
        );
    }
}

#[test]
fn ratio_passes_at_the_threshold_and_fails_just_above() {
    let mut rows = reps(0, &[("size", 10)], "slow", 100.0);
    rows.extend(reps(0, &[("size", 10)], "fast", 1.0));
    let median_ratio = 100.0 / 1.0;
    assert_outcome(
        &one(ratio(median_ratio, &[]), &rows),
        true,
        &["slow/fast = 100.0x", "required >= 100"],
    );
    assert_outcome(
        &one(ratio(median_ratio * 1.0001, &[]), &rows),
        false,
        &["slow/fast = 100.0x", "1 of 1 points fail"],
    );
}

#[test]
fn ratio_at_max_picks_the_largest_point() {
    let mut rows = Vec::new();
    // The ratio grows with size: 2x at size 10, 50x at size 100.
    for (point, size, slow) in [(0, 10, 2.0), (1, 100, 50.0)] {
        rows.extend(reps(point, &[("size", size), ("threads", 1)], "slow", slow));
        rows.extend(reps(point, &[("size", size), ("threads", 1)], "fast", 1.0));
    }
    assert_outcome(
        &one(ratio(40.0, &[("size", "max")]), &rows),
        true,
        &["50.00x at size=100"],
    );
    assert_outcome(
        &one(ratio(40.0, &[("size", "min")]), &rows),
        false,
        &["2.000x at size=10"],
    );
    // Without `at`, every point must pass; the failing one is named.
    assert_outcome(
        &one(ratio(40.0, &[]), &rows),
        false,
        &["size=10", "1 of 2 points fail"],
    );
    // A fixed value selects that point.
    let mut fixed = ratio(40.0, &[]);
    if let ClaimConfig::Ratio { at, .. } = &mut fixed {
        at.insert("size".to_string(), Value::Int(100));
    }
    assert_outcome(&one(fixed, &rows), true, &["size=100"]);
}

#[test]
fn difference_bounds_the_gap_between_medians_on_both_sides() {
    // Quality metrics: `batched` scores 0.02 below `original` at size 10, 0.05 below at 100.
    let mut rows = Vec::new();
    for (point, size, batched) in [(0, 10, 0.63), (1, 100, 0.60)] {
        rows.extend(reps(point, &[("size", size)], "original", 0.65));
        rows.extend(reps(point, &[("size", size)], "batched", batched));
    }
    let within = |tol: f64, at: &[(&str, i64)]| ClaimConfig::Difference {
        name: "batched-minus-original".to_string(),
        column: "wall_time_s".to_string(),
        minuend: "batched".to_string(),
        subtrahend: "original".to_string(),
        at_least: Some(-tol),
        at_most: Some(tol),
        at: at
            .iter()
            .map(|(k, v)| (k.to_string(), Value::Int(*v)))
            .collect(),
    };
    assert_outcome(
        &one(within(0.03, &[("size", 10)]), &rows),
        true,
        &["batched - original = -0.02", "size=10"],
    );
    assert_outcome(
        &one(within(0.03, &[]), &rows),
        false,
        &[
            "batched - original = -0.05",
            "size=100",
            "1 of 2 points fail",
        ],
    );
    // A gap on the other side is bounded too.
    assert_outcome(
        &one(within(0.01, &[("size", 10)]), &rows),
        false,
        &["-0.02"],
    );
}

fn slope_claim(variants: &[&str]) -> ClaimConfig {
    ClaimConfig::Slope {
        name: "linear".to_string(),
        x: "size".to_string(),
        column: "wall_time_s".to_string(),
        variants: variants.iter().map(|v| v.to_string()).collect(),
        min: 0.8,
        max: 1.2,
        at: BTreeMap::new(),
    }
}

#[test]
fn slope_of_linear_data_is_one_and_of_quadratic_data_fails() {
    let mut rows = Vec::new();
    for (point, size) in [1, 2, 4, 8, 16].into_iter().enumerate() {
        let x = size as f64;
        rows.extend(reps(point, &[("size", size)], "linear", 3e-4 * x));
        rows.extend(reps(point, &[("size", size)], "quadratic", 3e-4 * x * x));
    }
    assert_outcome(
        &one(slope_claim(&["linear"]), &rows),
        true,
        &[
            "linear: slope 1.000 over 5 points",
            "required in [0.8, 1.2]",
        ],
    );
    assert_outcome(
        &one(slope_claim(&["quadratic"]), &rows),
        false,
        &["quadratic: slope 2.000"],
    );
    // Every listed variant must pass.
    assert!(!one(slope_claim(&["linear", "quadratic"]), &rows).passed);
}

#[test]
fn slope_against_a_metric_column() {
    let mut rows = Vec::new();
    for (point, n) in [10, 20, 40].into_iter().enumerate() {
        let mut r = row(point, &[("size", point as i64)], "v", 0, 1e-6 * (n as f64));
        r.metrics.insert("nnz".to_string(), n as f64);
        rows.push(r);
    }
    let claim = ClaimConfig::Slope {
        name: "nnz".to_string(),
        x: "metric_nnz".to_string(),
        column: "wall_time_s".to_string(),
        variants: vec!["v".to_string()],
        min: 0.99,
        max: 1.01,
        at: BTreeMap::new(),
    };
    assert_outcome(&one(claim, &rows), true, &["slope 1.000 over 3 points"]);
}

#[test]
fn slope_needs_two_distinct_x() {
    let rows = reps(0, &[("size", 8)], "linear", 1.0);
    assert_outcome(
        &one(slope_claim(&["linear"]), &rows),
        false,
        &["2 or more distinct"],
    );
}

fn share_claim(at_least: f64) -> ClaimConfig {
    ClaimConfig::Share {
        name: "compute-dominates".to_string(),
        variant: "fast".to_string(),
        phase: "compute".to_string(),
        at_least: Some(at_least),
        at_most: None,
        at: BTreeMap::new(),
    }
}

#[test]
fn share_of_a_phase() {
    let mut rows = Vec::new();
    for (rep, (compute, setup)) in [(0.8, 0.2), (1.6, 0.4), (0.1, 0.9)].into_iter().enumerate() {
        let mut r = row(0, &[("size", 1)], "fast", rep, compute + setup);
        r.phases_s.insert("compute".to_string(), compute);
        r.phases_s.insert("setup".to_string(), setup);
        rows.push(r);
    }
    // Shares per repetition: 0.8, 0.8, 0.1; the median is 0.8.
    assert_outcome(
        &one(share_claim(0.75), &rows),
        true,
        &["= 0.800", "required >= 0.75"],
    );
    assert_outcome(&one(share_claim(0.85), &rows), false, &["= 0.800"]);
    assert_eq!(column(&rows[0], "phase_compute_s"), Some(0.8));
}

fn equivalence_claim(max_rel_error: f64) -> ClaimConfig {
    ClaimConfig::Equivalence {
        name: "same-answers".to_string(),
        max_rel_error,
    }
}

#[test]
fn equivalence_takes_the_worst_error() {
    let mut rows = vec![row(0, &[("size", 1)], "slow", 0, 1.0)];
    for (rep, err) in [1e-12, 3e-10, 1e-13].into_iter().enumerate() {
        let mut r = row(0, &[("size", 1)], "fast", rep, 1.0);
        r.equiv_rel_error = Some(err);
        rows.push(r);
    }
    assert_outcome(
        &one(equivalence_claim(1e-9), &rows),
        true,
        &["fast: max rel error 3.000e-10"],
    );
    assert_outcome(
        &one(equivalence_claim(1e-10), &rows),
        false,
        &["3.000e-10", "required <= 0.0000000001"],
    );
}

#[test]
fn scaling_over_threads() {
    let mut rows = Vec::new();
    for (point, threads, t) in [(0, 1, 10.0), (1, 2, 5.5), (2, 4, 3.0)] {
        rows.extend(reps(point, &[("size", 5), ("threads", threads)], "par", t));
    }
    let claim = |at_least: f64| ClaimConfig::Scaling {
        name: "speedup".to_string(),
        variant: "par".to_string(),
        column: "wall_time_s".to_string(),
        param: "threads".to_string(),
        from: Value::Str("min".to_string()),
        to: Value::Int(2),
        at_least,
        at: BTreeMap::new(),
    };
    assert_outcome(
        &one(claim(1.8), &rows),
        true,
        &["(threads=1) / wall_time_s(threads=2) = 1.818x"],
    );
    assert_outcome(
        &one(claim(1.9), &rows),
        false,
        &["1.818x", "required >= 1.9"],
    );
}

#[test]
fn claims_without_matching_rows_fail_and_say_so() {
    let rows = reps(0, &[("size", 10)], "slow", 1.0);
    assert_outcome(&one(ratio(1.0, &[]), &rows), false, &["no rows of `fast`"]);
    let mut at_missing = ratio(1.0, &[]);
    if let ClaimConfig::Ratio { at, .. } = &mut at_missing {
        at.insert("size".to_string(), Value::Int(11));
    }
    assert_outcome(&one(at_missing, &rows), false, &["no rows with size=11"]);
    assert_outcome(
        &one(slope_claim(&["fast"]), &rows),
        false,
        &["fast: needs points"],
    );
    assert_outcome(
        &one(share_claim(0.1), &rows),
        false,
        &["no rows of `fast` with phase `compute`"],
    );
    assert_outcome(
        &one(equivalence_claim(1.0), &rows),
        false,
        &["no rows carry an equivalence error"],
    );
    assert_outcome(&one(equivalence_claim(1.0), &[]), false, &["no rows"]);
}

#[test]
fn column_lookup_covers_every_kind_of_column() {
    let mut r = row(3, &[("size", 7)], "v", 0, 2.5);
    r.metrics.insert("nnz".to_string(), 42.0);
    r.phases_s.insert("setup".to_string(), 0.5);
    r.equiv_rel_error = Some(1e-12);
    r.params
        .insert("mode".to_string(), Value::Str("x".to_string()));
    assert_eq!(column(&r, "wall_time_s"), Some(2.5));
    assert_eq!(column(&r, "metric_nnz"), Some(42.0));
    assert_eq!(column(&r, "phase_setup_s"), Some(0.5));
    assert_eq!(column(&r, "equiv_rel_error"), Some(1e-12));
    assert_eq!(column(&r, "size"), Some(7.0));
    assert_eq!(column(&r, "mode"), None);
    assert_eq!(column(&r, "metric_missing"), None);
}

const MOCK_EXPERIMENT: &str = "\
name: mock-claims
paper: none
reproduces: the pipeline
family: mock
data: {source: synthetic, seed: 1}
variants: [slow, fast, wrong]
sweep:
  threads: [1, 2, 4]
  size: [1000, 2000, 4000, 8000]
repetitions: 3
equivalence: {reference: slow, rel_tol: 1e-9}
claims:
  - name: fast-100x
    kind: ratio
    numerator: slow
    denominator: fast
    at_least: 99
    at_most: 101
    at: {size: max, threads: 1}
  - name: linear-in-size
    kind: slope
    x: size
    variants: [slow, fast]
    min: 0.95
    max: 1.05
    at: {threads: 2}
  - name: strong-scaling
    kind: scaling
    variant: fast
    from: min
    to: max
    at_least: 3.9
  - name: compute-share
    kind: share
    variant: slow
    phase: compute
    at_least: 0.79
    at_most: 0.81
  - name: all-equivalent
    kind: equivalence
    max_rel_error: 1e-9
";

/// Runs the plan through the mock family the way the runner does (prepare per point, every
/// variant and repetition, equivalence against the reference's output).
fn mock_rows(plan: &plan::Plan) -> Vec<ResultRow> {
    let reference = plan
        .config
        .equivalence
        .as_ref()
        .map(|e| e.reference.clone());
    let mut rows = Vec::new();
    for (index, point) in plan.points.iter().enumerate() {
        let input = plan.family.prepare(point, None, 1).unwrap();
        let threads = plan::threads_of(point);
        let reference_output = reference
            .as_ref()
            .map(|r| plan.family.run(r, &input, point, threads).unwrap().output);
        for variant in &plan.config.variants {
            for repetition in 0..plan.config.repetitions {
                let m = plan.family.run(variant, &input, point, threads).unwrap();
                let equiv_rel_error = match (&reference, &reference_output) {
                    (Some(r), Some(out)) if r != variant => Some(
                        m.output
                            .iter()
                            .zip(out)
                            .map(|(a, b)| (a - b).abs() / b.abs().max(f64::MIN_POSITIVE))
                            .fold(0.0, f64::max),
                    ),
                    _ => None,
                };
                rows.push(ResultRow {
                    experiment: plan.config.name.clone(),
                    point: index,
                    params: point.clone(),
                    variant: variant.clone(),
                    repetition,
                    wall_time_s: m.wall_time_s,
                    phases_s: m.phases_s,
                    metrics: m.metrics,
                    equiv_rel_error,
                });
            }
        }
    }
    rows
}

#[test]
fn mock_family_through_claims() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mock.yaml");
    std::fs::write(&path, MOCK_EXPERIMENT).unwrap();
    let plan = plan::build(&path, false, None).unwrap();
    assert_eq!(plan.family.name(), "mock");
    assert_eq!(plan.points.len(), 12);
    let rows = mock_rows(&plan);
    assert_eq!(rows.len(), 12 * 3 * 3);

    let outcomes = evaluate(&plan.config.claims, &rows);
    let by_name: BTreeMap<&str, &ClaimOutcome> =
        outcomes.iter().map(|o| (o.name.as_str(), o)).collect();
    assert_outcome(
        by_name["fast-100x"],
        true,
        &["slow/fast = 100.0x at size=8000, threads=1"],
    );
    assert_outcome(
        by_name["linear-in-size"],
        true,
        &["slow: slope 1.000", "fast: slope 1.000"],
    );
    assert_outcome(by_name["strong-scaling"], true, &["= 4.000x"]);
    assert_outcome(by_name["compute-share"], true, &["= 0.800"]);
    // `wrong` differs from `slow` by the injected 1e-3, which the claim must catch.
    assert_outcome(
        by_name["all-equivalent"],
        false,
        &["wrong: max rel error 1.000e-3", "fast: max rel error 0"],
    );

    // Without `wrong`, the same claims all pass.
    let without_wrong: Vec<ResultRow> = rows.into_iter().filter(|r| r.variant != "wrong").collect();
    assert!(evaluate(&plan.config.claims, &without_wrong)
        .iter()
        .all(|o| o.passed));
}

#[test]
fn medians_use_the_middle_value() {
    assert_eq!(claims::median(&[5.0, 1.0, 1000.0]), Some(5.0));
}

/// Regression: Sinkhorn's `dense` reports `loop` and its parts (`loop_dense_product`, ...), so a
/// share taken of the summed phases halved the loop's share and failed Table I's claim.
#[test]
fn share_is_of_wall_time_when_phases_nest() {
    let mut r = row(0, &[("size", 1)], "fast", 0, 1.0);
    r.phases_s.insert("compute".to_string(), 0.9);
    r.phases_s.insert("compute_inner".to_string(), 0.85);
    r.phases_s.insert("setup".to_string(), 0.1);
    assert_outcome(&one(share_claim(0.85), &[r]), true, &["= 0.900"]);
}
