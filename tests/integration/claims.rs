//! Claims on hand-made rows with known medians, and on rows produced by the mock family.

use parbench::analysis::claims::{self, column, evaluate, ClaimOutcome};
use parbench::experiment::config::{
    self, ClaimConfig, EquivalenceConfig, EquivalenceTest, ExperimentConfig,
};
use parbench::experiment::plan;
use parbench::family::{Params, ResultRow, Value};
use std::collections::BTreeMap;
use std::path::Path;

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

/// An experiment running every variant these tests use, with `claims` and an equivalence
/// section whose reference is `slow` (when `rel_tol` is given).
fn experiment(claims: Vec<ClaimConfig>, rel_tol: Option<f64>) -> ExperimentConfig {
    let text = "name: t\npaper: none\nreproduces: test\nfamily: mock\ndata: {source: synthetic}\nvariants: [slow, fast, original, batched, linear, quadratic, v, par]\n";
    let mut cfg = config::parse_str(text, Path::new("t.yaml")).unwrap();
    cfg.claims = claims;
    cfg.equivalence = rel_tol.map(|rel_tol| EquivalenceConfig {
        reference: "slow".to_string(),
        rel_tol,
    });
    cfg
}

fn one(claim: ClaimConfig, rows: &[ResultRow]) -> ClaimOutcome {
    one_with_tolerance(claim, rows, None)
}

fn one_with_tolerance(
    claim: ClaimConfig,
    rows: &[ResultRow],
    rel_tol: Option<f64>,
) -> ClaimOutcome {
    let mut outcomes = evaluate(&experiment(vec![claim], rel_tol), rows);
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

fn equivalence_claim() -> ClaimConfig {
    ClaimConfig::Equivalence {
        name: "same-answers".to_string(),
        max_rel_error: None,
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
    // The tolerance is the experiment's `equivalence.rel_tol`.
    assert_outcome(
        &one_with_tolerance(equivalence_claim(), &rows, Some(1e-9)),
        true,
        &["fast: max rel error 3.000e-10"],
    );
    assert_outcome(
        &one_with_tolerance(equivalence_claim(), &rows, Some(1e-10)),
        false,
        &["3.000e-10", "required <= 0.0000000001"],
    );
}

/// What a test sets on a `scaling` claim beyond its ends and bound.
#[derive(Default)]
struct ScalingOptions<'a> {
    over: Option<&'a str>,
    relative_to: Option<&'a str>,
    at: &'a [(&'a str, i64)],
}

/// A `scaling` claim on `variant`'s `wall_time_s` from `ends.0` to `ends.1` of `param`.
fn scaling(
    variant: &str,
    param: &str,
    (from, to): (Value, Value),
    at_least: f64,
    options: ScalingOptions,
) -> ClaimConfig {
    ClaimConfig::Scaling {
        name: format!("{variant} over {param}"),
        variant: variant.to_string(),
        column: "wall_time_s".to_string(),
        param: param.to_string(),
        from,
        to,
        at_least,
        over: options.over.map(str::to_string),
        relative_to: options.relative_to.map(str::to_string),
        at: options
            .at
            .iter()
            .map(|(k, v)| (k.to_string(), Value::Int(*v)))
            .collect(),
    }
}

#[test]
fn scaling_over_threads() {
    let mut rows = Vec::new();
    for (point, threads, t) in [(0, 1, 10.0), (1, 2, 5.5), (2, 4, 3.0)] {
        rows.extend(reps(point, &[("size", 5), ("threads", threads)], "par", t));
    }
    let claim = |at_least: f64| {
        let ends = (Value::Str("min".to_string()), Value::Int(2));
        scaling("par", "threads", ends, at_least, ScalingOptions::default())
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
fn scaling_over_a_switch_compares_its_off_and_on_points() {
    // A boolean swept off and on (`full_model: [false, true]`) orders false before true.
    let mut rows = Vec::new();
    for (point, on, t) in [(0, false, 2.0), (1, true, 9.0)] {
        for mut r in reps(point, &[("size", 5)], "par", t) {
            r.params.insert("full".to_string(), Value::Bool(on));
            rows.push(r);
        }
    }
    let claim = |from: bool, at_least: f64| {
        let ends = (Value::Bool(from), Value::Bool(!from));
        scaling("par", "full", ends, at_least, ScalingOptions::default())
    };
    assert_outcome(
        &one(claim(true, 4.0), &rows),
        true,
        &["wall_time_s(full=1) / wall_time_s(full=0) = 4.500x"],
    );
    assert_outcome(
        &one(claim(true, 5.0), &rows),
        false,
        &["4.500x", "required >= 5"],
    );
    assert_outcome(&one(claim(false, 0.2), &rows), true, &["= 0.222x"]);
}

#[test]
fn scaling_relative_to_another_variant_is_how_the_speedup_over_it_changes() {
    // `slow` takes 10 s on one thread and 8 s on two, `fast` 8 and 4: fast's speedup over slow
    // grows from 1.25x to 2x, so slow / fast at two threads over one thread is 2 / 1.25 = 1.6.
    let mut rows = Vec::new();
    for (point, threads, slow, fast) in [(0, 1, 10.0, 8.0), (1, 2, 8.0, 4.0)] {
        rows.extend(reps(
            point,
            &[("size", 5), ("threads", threads)],
            "slow",
            slow,
        ));
        rows.extend(reps(
            point,
            &[("size", 5), ("threads", threads)],
            "fast",
            fast,
        ));
    }
    let claim = |relative_to: &str, at_least: f64| {
        let ends = (Value::Str("max".to_string()), Value::Str("min".to_string()));
        let options = ScalingOptions {
            relative_to: Some(relative_to),
            ..ScalingOptions::default()
        };
        scaling("slow", "threads", ends, at_least, options)
    };
    assert_outcome(
        &one(claim("fast", 1.6), &rows),
        true,
        &["slow / fast: wall_time_s(threads=2) / wall_time_s(threads=1) = 1.600x"],
    );
    assert_outcome(&one(claim("fast", 1.7), &rows), false, &["1.600x"]);
    // Relative to a variant with no rows: a failure naming it, not a ratio of one side.
    assert_outcome(&one(claim("batched", 1.0), &rows), false, &["batched"]);
}

#[test]
fn scaling_across_seeds_holds_the_lower_end_of_the_mean_ratio_interval() {
    // At seeds 0, 1, 2 the ratios (size 1 over size 2) are 1.1, 1.2 and 1.3: mean 1.2, standard
    // deviation 0.1, so the 90% interval is 1.2 +- 2.920 * 0.1 / sqrt(3) = +-0.16859 (t at 2
    // degrees of freedom): [1.0314, 1.3686].
    let mut rows = Vec::new();
    for (seed, ratio) in [(0, 1.1), (1, 1.2), (2, 1.3)] {
        for (size, t) in [(1, 2.0 * ratio), (2, 2.0)] {
            let point = 2 * seed as usize + size as usize;
            rows.extend(reps(point, &[("size", size), ("seed", seed)], "par", t));
        }
    }
    let claim = |at_least: f64| {
        let options = ScalingOptions {
            over: Some("seed"),
            ..ScalingOptions::default()
        };
        scaling(
            "par",
            "size",
            (Value::Int(1), Value::Int(2)),
            at_least,
            options,
        )
    };
    assert_outcome(
        &one(claim(1.03), &rows),
        true,
        &[
            "wall_time_s(size=1) / wall_time_s(size=2): mean 1.200x over 3 values of `seed`",
            "90% interval [1.0314, 1.3686], lower end held",
        ],
    );
    // Every seed's ratio is above 1.05, and the test still refuses: three draws this spread do
    // not show a mean above it.
    assert_outcome(&one(claim(1.05), &rows), false, &["[1.0314, 1.3686]"]);
    // A seed missing one end fails, naming it, instead of testing on the seeds left.
    let partial: Vec<ResultRow> = rows
        .iter()
        .filter(|r| !(r.params["seed"] == Value::Int(2) && r.params["size"] == Value::Int(2)))
        .cloned()
        .collect();
    assert_outcome(&one(claim(1.0), &partial), false, &["seed=2"]);
}

#[test]
fn scaling_between_two_names_of_a_parameter() {
    // `delta: dense` against `delta: sparse` at two sizes: 6 / 2 = 3x at size 1, 4 / 4 = 1x at 2.
    let mut rows = Vec::new();
    for (point, size, delta, t) in [
        (0, 1, "dense", 6.0),
        (1, 1, "sparse", 2.0),
        (2, 2, "dense", 4.0),
        (3, 2, "sparse", 4.0),
    ] {
        for mut r in reps(point, &[("size", size)], "par", t) {
            r.params
                .insert("delta".to_string(), Value::Str(delta.to_string()));
            rows.push(r);
        }
    }
    let claim = |at_least: f64, at: &[(&str, i64)]| {
        let ends = (
            Value::Str("dense".to_string()),
            Value::Str("sparse".to_string()),
        );
        let options = ScalingOptions {
            at,
            ..ScalingOptions::default()
        };
        scaling("par", "delta", ends, at_least, options)
    };
    assert_outcome(
        &one(claim(2.9, &[("size", 1)]), &rows),
        true,
        &["wall_time_s(delta=dense) / wall_time_s(delta=sparse) = 3.000x"],
    );
    // Over both sizes the tightest fails.
    assert_outcome(
        &one(claim(2.9, &[]), &rows),
        false,
        &["1.000x at size=2", "1 of 2 points fail"],
    );
    // `max` / `min` have nothing to pick among names: a failure saying so, not a guess.
    let mut extreme = claim(1.0, &[]);
    if let ClaimConfig::Scaling { from, .. } = &mut extreme {
        *from = Value::Str("max".to_string());
    }
    assert_outcome(&one(extreme, &rows), false, &["delta takes dense, sparse"]);
}

/// `fast` and `slow` at five seeds, `slow`'s metric `base` and `fast`'s `base + diffs[seed]`.
fn seeded(diffs: &[f64]) -> Vec<ResultRow> {
    let mut rows = Vec::new();
    for (seed, d) in diffs.iter().enumerate() {
        for (variant, value) in [("slow", 0.5), ("fast", 0.5 + d)] {
            let mut r = row(seed, &[("size", 5), ("seed", seed as i64)], variant, 0, 1.0);
            r.metrics.insert("score".to_string(), value);
            rows.push(r);
        }
    }
    rows
}

fn fast_against_slow(margin: f64, test: EquivalenceTest) -> ClaimConfig {
    ClaimConfig::EquivalentOver {
        name: "fast as good as slow".to_string(),
        column: "metric_score".to_string(),
        variant: "fast".to_string(),
        reference: "slow".to_string(),
        over: "seed".to_string(),
        margin,
        test,
        at: BTreeMap::new(),
    }
}

fn equivalent(margin: f64) -> ClaimConfig {
    fast_against_slow(margin, EquivalenceTest::Equivalence)
}

fn not_worse(margin: f64) -> ClaimConfig {
    fast_against_slow(margin, EquivalenceTest::NonInferiority)
}

#[test]
fn equivalence_over_seeds_is_two_one_sided_tests_on_the_paired_differences() {
    // Differences 0.01, -0.01, 0.02, 0, -0.02: mean 0, standard deviation sqrt(2.5e-4), so the
    // 90% interval is 0 +- 2.132 * 0.015811 / sqrt(5) = +-0.015075 (t at 4 degrees of freedom).
    let centred = seeded(&[0.01, -0.01, 0.02, 0.0, -0.02]);
    assert_outcome(
        &one(equivalent(0.03), &centred),
        true,
        &[
            "fast - slow in `metric_score`: mean 0",
            "over 5 values of `seed`",
            "[-0.0151, 0.0151]",
        ],
    );
    assert_outcome(
        &one(equivalent(0.015), &centred),
        false,
        &["[-0.0151, 0.0151]"],
    );
    // The same spread about 0.02: the upper end 0.03508 leaves a margin of 0.03.
    let shifted = seeded(&[0.03, 0.01, 0.04, 0.02, 0.0]);
    assert_outcome(
        &one(equivalent(0.03), &shifted),
        false,
        &["mean 0.02", "0.0351"],
    );
    assert_outcome(&one(equivalent(0.04), &shifted), true, &["0.0351"]);
    // Better by more than the margin is not equivalent, but it is not inferior: only the lower
    // end (0.00492) is held, above -margin. Worse by as much is inferior.
    assert_outcome(
        &one(not_worse(0.03), &shifted),
        true,
        &["[0.0049, 0.0351]", "required >= -0.03)"],
    );
    let worse = seeded(&[-0.03, -0.01, -0.04, -0.02, 0.0]);
    assert_outcome(
        &one(not_worse(0.03), &worse),
        false,
        &["[-0.0351, -0.0049]"],
    );
    // One seed has no interval; a seed without `fast` is missing, not skipped.
    assert_outcome(
        &one(equivalent(1.0), &seeded(&[0.0])),
        false,
        &["1 value(s) of `seed`"],
    );
    let mut gap = seeded(&[0.0, 0.0, 0.0]);
    gap.retain(|r| !(r.variant == "fast" && r.point == 1));
    assert_outcome(
        &one(equivalent(1.0), &gap),
        false,
        &["no rows of `fast` at seed=1"],
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
        &["fast: no rows of `fast` at the only point"],
    );
    assert_outcome(
        &one(share_claim(0.1), &rows),
        false,
        &["no rows of `fast` with phase `compute`"],
    );
    assert_outcome(
        &one_with_tolerance(equivalence_claim(), &rows, Some(1.0)),
        false,
        &["no rows carry an equivalence error"],
    );
    assert_outcome(
        &one_with_tolerance(equivalence_claim(), &[], Some(1.0)),
        false,
        &["no rows"],
    );
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
        let typed = &plan.typed[index];
        let input = plan.family.prepare(typed, None, 1).unwrap();
        let threads = plan::threads_of(point);
        let reference_output = reference
            .as_ref()
            .map(|r| plan.family.run(r, &input, typed, threads).unwrap().output);
        for variant in &plan.config.variants {
            for repetition in 0..plan.config.repetitions {
                let m = plan.family.run(variant, &input, typed, threads).unwrap();
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

    let outcomes = evaluate(&plan.config, &rows);
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
    assert!(evaluate(&plan.config, &without_wrong)
        .iter()
        .all(|o| o.passed));
}

#[test]
fn medians_use_the_middle_value() {
    assert_eq!(
        parbench::util::stats::median(&[5.0, 1.0, 1000.0]),
        Some(5.0)
    );
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

// ---------------------------------------------------------------------------------------------
// Holes that let a claim pass without evidence, and the plan errors that close them.
// ---------------------------------------------------------------------------------------------

/// A mock experiment over `sweep` (YAML flow mapping) with `claims` (YAML list items, indented
/// by two spaces) and `extra` top-level lines.
fn mock_yaml(sweep: &str, claims: &str, extra: &str) -> String {
    format!(
        "name: holes\npaper: none\nreproduces: test\nfamily: mock\ndata: {{source: synthetic, seed: 1}}\nvariants: [slow, fast]\nsweep: {sweep}\nrepetitions: 1\nequivalence: {{reference: slow, rel_tol: 1e-9}}\n{extra}claims:\n{claims}"
    )
}

fn build(text: &str, quick: bool) -> Result<plan::Plan, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holes.yaml");
    std::fs::write(&path, text).unwrap();
    plan::build(&path, quick, None).map_err(|e| e.to_string())
}

fn plan_error(text: &str, quick: bool, expected: &[&str]) -> String {
    let err = match build(text, quick) {
        Ok(_) => panic!("expected a plan error, the plan built:\n{text}"),
        Err(e) => e,
    };
    for e in expected {
        assert!(err.contains(e), "expected {e:?} in:\n{err}");
    }
    err
}

/// The 1-based line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

const GRID: &str = "{threads: [1, 2], size: [1000, 2000]}";

#[test]
fn scaling_from_and_to_on_the_same_value_is_a_plan_error() {
    // Both literal and equal.
    let text = mock_yaml(
        GRID,
        "  - name: s\n    kind: scaling\n    variant: fast\n    from: 2\n    to: 2\n    at_least: 1\n",
        "",
    );
    let err = plan_error(
        &text,
        false,
        &["claim `s`: `from` and `to` are both threads=2"],
    );
    assert!(
        err.contains(&format!(":{}:", line_of(&text, "to: 2"))),
        "{err}"
    );
    // min and max over a sweep of one value.
    let claim = "  - name: s\n    kind: scaling\n    variant: fast\n    from: min\n    to: max\n    at_least: 1\n";
    let one_value = mock_yaml("{threads: [2], size: [1000, 2000]}", claim, "");
    plan_error(
        &one_value,
        false,
        &[
            "`from` and `to` both resolve to threads=2",
            "compares a point with itself",
        ],
    );
    // `at` fixing the scaled parameter leaves one value too.
    let fixed = mock_yaml(GRID, &format!("{claim}    at: {{threads: 1}}\n"), "");
    plan_error(&fixed, false, &["both resolve to threads=1"]);
    // The same claim over two values is fine.
    assert!(build(&mock_yaml(GRID, claim, ""), false).is_ok());
    // A quick run that sweeps one value makes it vacuous there: refused on the quick build too.
    let quick = mock_yaml(GRID, claim, "quick: {sweep: {threads: [1]}}\n");
    assert!(build(&quick, false).is_ok());
    plan_error(
        &quick,
        true,
        &["both resolve to threads=1 on the quick grid"],
    );
}

#[test]
fn equivalence_over_one_value_a_variant_against_itself_and_no_margin_are_plan_errors() {
    let claim = |variant: &str, margin: &str| {
        format!("  - name: e\n    kind: equivalent_over\n    column: wall_time_s\n    variant: {variant}\n    reference: slow\n    over: threads\n    margin: {margin}\n")
    };
    assert!(build(&mock_yaml(GRID, &claim("fast", "0.1"), ""), false).is_ok());
    plan_error(
        &mock_yaml(
            "{threads: [2], size: [1000, 2000]}",
            &claim("fast", "0.1"),
            "",
        ),
        false,
        &["`threads` takes one value", "needs two or more"],
    );
    plan_error(
        &mock_yaml(GRID, &claim("slow", "0.1"), ""),
        false,
        &["variant and reference are both `slow`"],
    );
    plan_error(
        &mock_yaml(GRID, &claim("fast", "0"), ""),
        false,
        &["`margin: 0` must be a positive number"],
    );
}

#[test]
fn scaling_across_a_parameter_of_one_value_or_across_itself_is_a_plan_error() {
    let claim = |over: &str| {
        format!("  - name: s\n    kind: scaling\n    variant: fast\n    param: threads\n    from: min\n    to: max\n    over: {over}\n    at_least: 1\n")
    };
    assert!(build(&mock_yaml(GRID, &claim("size"), ""), false).is_ok());
    plan_error(
        &mock_yaml("{threads: [1, 2], size: [1000]}", &claim("size"), ""),
        false,
        &[
            "`size` takes one value",
            "a test across it needs two or more",
        ],
    );
    plan_error(
        &mock_yaml(GRID, &claim("threads"), ""),
        false,
        &["`over: threads` is the parameter the claim scales over"],
    );
    plan_error(
        &mock_yaml(GRID, &claim("seeds"), ""),
        false,
        &["unknown parameter `seeds`"],
    );
}

#[test]
fn scaling_relative_to_itself_is_a_plan_error() {
    let claim = |other: &str| {
        format!("  - name: s\n    kind: scaling\n    variant: fast\n    relative_to: {other}\n    from: max\n    to: min\n    at_least: 1\n")
    };
    assert!(build(&mock_yaml(GRID, &claim("slow"), ""), false).is_ok());
    plan_error(
        &mock_yaml(GRID, &claim("fast"), ""),
        false,
        &["variant and relative_to are both `fast`"],
    );
}

#[test]
fn scaling_between_names_must_name_values_the_grid_has() {
    let claim = |to: &str| {
        format!("  - name: s\n    kind: scaling\n    variant: fast\n    param: layout\n    from: dense\n    to: {to}\n    at_least: 1\n")
    };
    let grid = "{threads: [1, 2], layout: [dense, sparse]}";
    assert!(build(&mock_yaml(grid, &claim("sparse"), ""), false).is_ok());
    plan_error(
        &mock_yaml(grid, &claim("sparce"), ""),
        false,
        &[
            "`to: sparce` matches no point",
            "`layout` takes dense, sparse",
        ],
    );
    plan_error(
        &mock_yaml(grid, &claim("max"), ""),
        false,
        &["`to: max` has no numeric value to pick"],
    );
}

#[test]
fn quick_claims_are_checked_against_the_quick_grid_on_a_full_build() {
    let text = mock_yaml(
        GRID,
        "  - {name: full, kind: ratio, numerator: slow, denominator: fast, at_least: 1}\n",
        "quick:\n  sweep: {threads: [2]}\n  claims:\n    - name: q\n      kind: scaling\n      variant: fast\n      from: min\n      to: max\n      at_least: 1\n",
    );
    let err = plan_error(&text, false, &["claim `q`", "on the quick grid"]);
    assert!(
        err.contains(&format!(":{}:", line_of(&text, "      to: max"))),
        "{err}"
    );
}

#[test]
fn scaling_from_equal_to_fails_at_evaluation_too() {
    // Stored rows from before the plan refused it: a ratio of 1 is not evidence.
    let rows = reps(0, &[("size", 5), ("threads", 2)], "par", 3.0);
    let ends = (Value::Str("min".to_string()), Value::Str("max".to_string()));
    let claim = scaling("par", "threads", ends, 1.0, ScalingOptions::default());
    assert_outcome(
        &one(claim, &rows),
        false,
        &["are the same point (threads=2)"],
    );
}

#[test]
fn a_self_ratio_or_self_difference_is_a_plan_error() {
    let text = mock_yaml(
        GRID,
        "  - name: r\n    kind: ratio\n    numerator: fast\n    denominator: fast\n    at_least: 1\n",
        "",
    );
    let err = plan_error(
        &text,
        false,
        &[
            "claim `r`: numerator and denominator are both `fast`",
            "kind: bound",
        ],
    );
    assert!(
        err.contains(&format!(":{}:", line_of(&text, "denominator: fast"))),
        "{err}"
    );
    let text = mock_yaml(
        GRID,
        "  - {name: d, kind: difference, column: wall_time_s, minuend: slow, subtrahend: slow, at_most: 0}\n",
        "",
    );
    plan_error(&text, false, &["minuend and subtrahend are both `slow`"]);
}

#[test]
fn a_missing_point_fails_a_ratio_instead_of_being_skipped() {
    // `fast` ran at size 10 only: the claim cannot say anything about size 100.
    let mut rows = reps(0, &[("size", 10)], "slow", 100.0);
    rows.extend(reps(1, &[("size", 100)], "slow", 100.0));
    rows.extend(reps(0, &[("size", 10)], "fast", 1.0));
    assert_outcome(
        &one(ratio(50.0, &[]), &rows),
        false,
        &[
            "slow/fast: no rows of `fast` at size=100",
            "1 of 2 points fail",
        ],
    );
}

#[test]
fn a_missing_column_fails_a_ratio_and_names_the_column() {
    let metric_ratio = ClaimConfig::Ratio {
        name: "m".to_string(),
        column: "metric_m".to_string(),
        numerator: "slow".to_string(),
        denominator: "fast".to_string(),
        at_least: Some(1.0),
        at_most: None,
        at: BTreeMap::new(),
    };
    let mut rows = Vec::new();
    for (point, size) in [(0, 10), (1, 100)] {
        for variant in ["slow", "fast"] {
            let mut r = row(point, &[("size", size)], variant, 0, 1.0);
            // `fast` stopped reporting the metric at size 100.
            if variant == "slow" || size == 10 {
                r.metrics.insert("m".to_string(), 2.0);
            }
            rows.push(r);
        }
    }
    assert_outcome(
        &one(metric_ratio, &rows),
        false,
        &[
            "`fast` reports no `metric_m` (1 rows) at size=100",
            "1 of 2 points fail",
        ],
    );
}

#[test]
fn a_missing_point_fails_slope_scaling_share_and_equivalence() {
    // Slope: `linear` lacks size 16; the fit over the rest would pass.
    let mut rows = Vec::new();
    for (point, size) in [1, 2, 4, 8, 16].into_iter().enumerate() {
        rows.extend(reps(
            point,
            &[("size", size)],
            "quadratic",
            1.0 * (size * size) as f64,
        ));
        if size != 16 {
            rows.extend(reps(point, &[("size", size)], "linear", size as f64));
        }
    }
    assert_outcome(
        &one(slope_claim(&["linear"]), &rows),
        false,
        &["linear: no rows of `linear` at size=16"],
    );
    // Scaling: `par` did not run at threads=2 for size 6 (another variant did).
    let mut rows = Vec::new();
    for (point, (size, threads)) in [(5, 1), (5, 2), (6, 1), (6, 2)].into_iter().enumerate() {
        let p = [("size", size), ("threads", threads)];
        rows.extend(reps(point, &p, "slow", 10.0));
        if (size, threads) != (6, 2) {
            rows.extend(reps(point, &p, "par", 10.0 / threads as f64));
        }
    }
    let ends = (Value::Str("min".to_string()), Value::Str("max".to_string()));
    let scaling = scaling("par", "threads", ends, 1.5, ScalingOptions::default());
    assert_outcome(
        &one(scaling, &rows),
        false,
        &[
            "par: no rows of `par` at threads=2 at size=6",
            "1 of 2 points fail",
        ],
    );
    // Share: the phase is missing at one point.
    let mut rows = Vec::new();
    for (point, size) in [(0, 1), (1, 2)] {
        let mut r = row(point, &[("size", size)], "fast", 0, 1.0);
        if size == 1 {
            r.phases_s.insert("compute".to_string(), 0.9);
        }
        rows.push(r);
    }
    assert_outcome(
        &one(share_claim(0.5), &rows),
        false,
        &["no rows of `fast` with phase `compute` and a positive wall time at size=2"],
    );
    // Equivalence: `fast` was never compared at size 2.
    let mut rows = Vec::new();
    for (point, size) in [(0, 1), (1, 2)] {
        rows.push(row(point, &[("size", size)], "slow", 0, 1.0));
        let mut r = row(point, &[("size", size)], "fast", 0, 1.0);
        if size == 1 {
            r.equiv_rel_error = Some(0.0);
        }
        rows.push(r);
    }
    assert_outcome(
        &one_with_tolerance(equivalence_claim(), &rows, Some(1e-9)),
        false,
        &["`fast` has no equivalence error at size=2"],
    );
}

#[test]
fn the_equivalence_tolerance_is_rel_tol() {
    // Omitted, the claim takes `rel_tol` (the mock experiment above relies on it too).
    let ok = mock_yaml(GRID, "  - {name: e, kind: equivalence}\n", "");
    let plan = build(&ok, false).unwrap();
    let resolved = resolved_claims(&plan);
    assert_eq!(
        resolved[0].check,
        claims::Check::Equivalence {
            max_rel_error: 1e-9,
            reference: Some("slow".to_string()),
        }
    );
    // Restating it is accepted; a second, different tolerance is not.
    let same = mock_yaml(
        GRID,
        "  - {name: e, kind: equivalence, max_rel_error: 1e-9}\n",
        "",
    );
    assert!(build(&same, false).is_ok());
    let other = mock_yaml(
        GRID,
        "  - {name: e, kind: equivalence, max_rel_error: 1e-6}\n",
        "",
    );
    plan_error(
        &other,
        false,
        &["max_rel_error 0.000001 differs from `equivalence.rel_tol` 0.000000001"],
    );
    // Without an equivalence section there is no tolerance at all.
    let none = ok.replace("equivalence: {reference: slow, rel_tol: 1e-9}\n", "");
    plan_error(&none, false, &["has no `equivalence:` section"]);
}

/// The plan's claims in their typed form.
fn resolved_claims(plan: &plan::Plan) -> Vec<claims::ResolvedClaim> {
    let variants: Vec<&str> = plan.config.variants.iter().map(String::as_str).collect();
    let scope = claims::Scope::of_run(&plan.config, &variants);
    claims::resolve(&plan.config.claims, &scope).unwrap()
}

#[test]
fn a_bound_claim_compares_a_column_with_a_constant() {
    let claim = |at_least: f64, at_most: f64| ClaimConfig::Bound {
        name: "exact".to_string(),
        variant: "fast".to_string(),
        column: "metric_model_exact".to_string(),
        at_least: Some(at_least),
        at_most: Some(at_most),
        at: BTreeMap::new(),
    };
    let mut rows = Vec::new();
    for (point, size) in [(0, 10), (1, 100)] {
        for rep in 0..3 {
            let mut r = row(point, &[("size", size)], "fast", rep, 1.0);
            // One odd repetition at size 100; the median ignores it.
            let exact = if size == 100 && rep == 2 { 0.0 } else { 1.0 };
            r.metrics.insert("model_exact".to_string(), exact);
            rows.push(r);
        }
    }
    assert_outcome(
        &one(claim(1.0, 1.0), &rows),
        true,
        &[
            "fast: metric_model_exact = 1.000",
            "required >= 1 and <= 1",
            "all pass",
        ],
    );
    assert_outcome(&one(claim(1.5, 2.0), &rows), false, &["2 of 2 points fail"]);
    // Validated like the others.
    let text = mock_yaml(
        GRID,
        "  - {name: b, kind: bound, variant: quick, column: metric_size, at_least: 1}\n  - {name: c, kind: bound, variant: fast, column: metric_size}\n",
        "",
    );
    plan_error(
        &text,
        false,
        &[
            "claim `b`: variant `quick` is not among the variants run",
            "claim `c` sets no bound",
        ],
    );
    let ok = mock_yaml(
        GRID,
        "  - {name: b, kind: bound, variant: fast, column: metric_size, at_least: 1000, at_most: 2000}\n",
        "",
    );
    assert!(build(&ok, false).is_ok());
}

#[test]
fn resolve_reports_each_problem_with_its_claim_and_key() {
    let claims_list = vec![
        ratio(1.0, &[]),
        ClaimConfig::Ratio {
            name: "slow-over-fast".to_string(),
            column: "nonsense".to_string(),
            numerator: "slow".to_string(),
            denominator: "slow".to_string(),
            at_least: Some(2.0),
            at_most: Some(1.0),
            at: BTreeMap::new(),
        },
    ];
    let variants = ["slow", "fast"];
    let scope = claims::Scope {
        variants: &variants,
        params: Some(&["threads", "size"]),
        equivalence: None,
        grid: None,
    };
    let problems = claims::resolve(&claims_list, &scope).unwrap_err();
    let found: Vec<(usize, Vec<&str>)> = problems
        .iter()
        .map(|p| (p.claim, p.path.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        found,
        vec![
            (1, vec!["name"]),
            (1, vec!["denominator"]),
            (1, vec!["column"]),
            (1, vec!["at_least"]),
        ],
        "{problems:#?}"
    );
}
