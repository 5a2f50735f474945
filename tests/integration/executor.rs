//! The runner behind the executor trait: whatever executes the runs, the runner records them
//! the same way, keeps what finished when a run fails, and a resume with another executor
//! completes the sweep with the rows an uninterrupted run makes.

use parbench::exec::executor::{InProcess, Scripted};
use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;
use parbench::family::{Measurement, ResultRow};
use parbench::results;
use std::collections::BTreeMap;

const MOCK: &str = "name: executor_under_test
paper: none
reproduces: none
family: mock
data: { source: synthetic, seed: 1 }
variants: [slow, fast]
sweep:
  size: [10, 20, 30]
repetitions: 2
warmup: 1
equivalence: { reference: slow, rel_tol: 1.0e-10 }
";

fn plan_in(dir: &std::path::Path) -> plan::Plan {
    let file = dir.join("mock.yaml");
    std::fs::write(&file, MOCK).unwrap();
    plan::build(&file, false, None).unwrap()
}

/// A measurement whose numbers say where it came from.
fn scripted(point: usize, variant: &str, run: usize) -> Measurement {
    Measurement {
        wall_time_s: 1.0 + point as f64 + run as f64 / 1000.0,
        phases_s: BTreeMap::new(),
        metrics: BTreeMap::from([("run".to_string(), run as f64)]),
        // `fast` is off by 1e-6 relative at point 1 only.
        output: vec![
            if variant == "fast" && point == 1 {
                1.000001
            } else {
                1.0
            };
            3
        ],
        trace: Vec::new(),
    }
}

/// Rows without their times, in a fixed order, to compare runs.
fn untimed(rows: &[ResultRow]) -> Vec<(usize, String, usize, String)> {
    let mut v: Vec<_> = rows
        .iter()
        .map(|r| {
            let mut params = r.params.clone();
            params.remove("threads");
            (
                r.point,
                r.variant.clone(),
                r.repetition,
                format!("{params:?}"),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn what_an_executor_measures_is_recorded_exactly_with_warm_ups_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_in(dir.path());
    let executor = Scripted::new(|p, v: &str, r| Ok(scripted(p, v, r)));
    let run_dir = dir.path().join("run");
    let summary = runner::run_with(&plan, &run_dir, false, ProgressMode::Silent, &executor)
        .expect("the scripted sweep runs");
    // 3 points x 2 variants x (1 warm-up + 2 repetitions).
    assert_eq!(executor.runs_taken(), 3 * 2 * 3);
    assert_eq!(summary.rows.len(), 3 * 2 * 2);
    let stored = results::read_rows(&run_dir).unwrap();
    assert_eq!(stored, summary.rows);
    for row in &stored {
        // Each point's 6 runs: both variants' warm-ups (the reference `slow` first), then the
        // repetitions interleaved, slow, fast, slow, fast. A warm-up is never recorded.
        let run = row.metrics["run"] as usize;
        let variant_index = usize::from(row.variant == "fast");
        assert_eq!(run % 6, 2 + 2 * row.repetition + variant_index, "{row:?}");
        assert_eq!(
            row.wall_time_s,
            1.0 + row.point as f64 + run as f64 / 1000.0
        );
        let expected_error = (row.variant == "fast" && row.point == 1).then_some(1e-6);
        match (row.equiv_rel_error, expected_error) {
            (Some(e), Some(want)) => assert!((e - want).abs() < 1e-12, "{row:?}"),
            (Some(e), None) => assert_eq!(e, 0.0, "{row:?}"),
            (None, _) => assert_eq!(row.variant, "slow", "{row:?}"),
        }
    }
}

#[test]
fn a_failed_run_keeps_the_finished_points_and_a_resume_completes_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_in(dir.path());
    let run_dir = dir.path().join("run");
    // The first run of point 2 fails.
    let failing = Scripted::new(|p, v: &str, r| {
        if p == 2 {
            anyhow::bail!("the device fell over")
        }
        Ok(scripted(p, v, r))
    });
    let err = runner::run_with(&plan, &run_dir, false, ProgressMode::Silent, &failing)
        .expect_err("the failure stops the run");
    let text = format!("{err:#}");
    assert!(text.contains("the device fell over"), "{text}");
    assert!(
        text.contains("point 3"),
        "the failing point is named: {text}"
    );
    let kept = results::read_rows(&run_dir).unwrap();
    assert_eq!(
        kept.iter()
            .map(|r| r.point)
            .collect::<std::collections::BTreeSet<_>>(),
        [0, 1].into()
    );

    // Resume in-process: points 0 and 1 are kept as they were, point 2 runs.
    let resumed = runner::run_with(
        &plan,
        &run_dir,
        true,
        ProgressMode::Silent,
        &InProcess::default(),
    )
    .expect("the resume completes");
    assert_eq!(resumed.resumed_points, 2);
    for row in resumed.rows.iter().filter(|r| r.point < 2) {
        assert!(kept.contains(row), "a finished point was rerun: {row:?}");
    }
    let fresh_dir = dir.path().join("fresh");
    let fresh = runner::run(&plan, &fresh_dir, false, ProgressMode::Silent).unwrap();
    assert_eq!(untimed(&resumed.rows), untimed(&fresh.rows));
}

#[test]
fn interleaved_points_run_in_rounds_and_record_what_one_after_another_records() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mock.yaml");
    std::fs::write(&file, format!("{MOCK}interleave_points: true\n")).unwrap();
    let plan = plan::build(&file, false, None).unwrap();
    assert!(plan.config.interleave_points);
    let executor = Scripted::new(|p, v: &str, r| Ok(scripted(p, v, r)));
    let run_dir = dir.path().join("run");
    let summary = runner::run_with(&plan, &run_dir, false, ProgressMode::Silent, &executor)
        .expect("the interleaved sweep runs");
    assert_eq!(executor.runs_taken(), 3 * 2 * 3);
    // Runs 0-5: the warm-ups, point by point (slow, fast); then round k runs repetition k of
    // slow and fast at points 0, 1, 2: run 6 + 6k + 2p + (fast).
    for row in &summary.rows {
        let run = row.metrics["run"] as usize;
        let variant_index = usize::from(row.variant == "fast");
        assert_eq!(
            run,
            6 + 6 * row.repetition + 2 * row.point + variant_index,
            "{row:?}"
        );
        let expected_error = (row.variant == "fast" && row.point == 1).then_some(1e-6);
        match (row.equiv_rel_error, expected_error) {
            (Some(e), Some(want)) => assert!((e - want).abs() < 1e-12, "{row:?}"),
            (Some(e), None) => assert_eq!(e, 0.0, "{row:?}"),
            (None, _) => assert_eq!(row.variant, "slow", "{row:?}"),
        }
    }
    assert_eq!(results::read_rows(&run_dir).unwrap(), summary.rows);
    let apart = runner::run(
        &plan_in(dir.path()),
        &dir.path().join("apart"),
        false,
        ProgressMode::Silent,
    )
    .unwrap();
    assert_eq!(untimed(&summary.rows), untimed(&apart.rows));
}
