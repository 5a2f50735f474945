//! Progress traces from one run: the runner stores every recorded run's progress steps in
//! `traces.parquet`, `kind: trace` figures are drawn from it (also by `parbench plot` on a copied
//! run directory), and LDA's trace ends at the run's final log-likelihood.

use crate::support::{parbench, stderr, stdout};
use parbench::analysis::plot::trace_figure_series;
use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;
use parbench::families::mock::MockFamily;
use parbench::family::{ResultRow, TraceRow, Value};
use parbench::results;
use std::collections::BTreeMap;
use std::path::Path;

const MOCK: &str = r#"name: mock_traces
description: traces of the scripted family
paper: none
reproduces: Fig. 0
family: mock
data: { source: synthetic, seed: 1 }
variants: [slow, fast]
sweep:
  size: [16, 256]
repetitions: 2
warmup: 1
figures:
  - { name: mock_time, title: "Mock time", x: size, y: wall_time_s }
  - name: mock_residual_trace
    kind: trace
    title: "Mock residual per step"
    x: step
    y: metric_residual
    filter: { size: 256 }
    log_y: true
"#;

fn run_experiment(dir: &Path, name: &str, text: &str) -> runner::RunSummary {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    let plan = plan::build(&file, false, None).expect("the plan validates");
    runner::run(&plan, &dir.join("run"), false, ProgressMode::Silent).expect("runs")
}

/// The trace rows of one run (point, variant, repetition), in step order.
fn run_trace<'t>(traces: &'t [TraceRow], row: &ResultRow) -> Vec<&'t TraceRow> {
    traces
        .iter()
        .filter(|t| t.point == row.point && t.variant == row.variant)
        .filter(|t| t.repetition == row.repetition)
        .collect()
}

#[test]
fn a_run_writes_one_trace_row_per_progress_step_of_every_variant_and_repetition() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = run_experiment(tmp.path(), "mock.yaml", MOCK);
    let run = tmp.path().join("run");
    let traces = results::read_traces(&run).unwrap();
    // Warm-ups leave no trace, as they leave no row.
    assert_eq!(
        traces.len(),
        summary.rows.len() * MockFamily::TRACE_STEPS,
        "points x variants x repetitions x steps"
    );
    for row in &summary.rows {
        let steps = run_trace(&traces, row);
        let numbers: Vec<usize> = steps.iter().map(|t| t.step).collect();
        assert_eq!(numbers, [1, 2, 3, 4], "run {row:?}");
        let size = row.metrics["size"];
        for t in &steps {
            assert_eq!(
                t.params, row.params,
                "a trace row carries its point's parameters"
            );
            assert_eq!(t.experiment, "mock_traces");
            let want = size / 2f64.powi(t.step as i32);
            assert_eq!(t.metrics["residual"], want, "step {}", t.step);
        }
        assert_eq!(
            steps.last().unwrap().time_s,
            row.wall_time_s,
            "the last step ends the run"
        );
    }
    // The trace figure was drawn with the run's other figures.
    for f in ["mock_residual_trace.png", "mock_residual_trace.svg"] {
        assert!(run.join("figures").join(f).is_file(), "{f} missing");
    }
}

#[test]
fn a_trace_figure_has_one_marker_per_step_at_the_median_over_repetitions() {
    let tmp = tempfile::tempdir().unwrap();
    run_experiment(tmp.path(), "mock.yaml", MOCK);
    let traces = results::read_traces(&tmp.path().join("run")).unwrap();
    let plan = plan::build(&tmp.path().join("mock.yaml"), false, None).unwrap();
    let fig = &plan.config.figures[1];
    let series = trace_figure_series(fig, &traces).unwrap();
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["fast", "slow"]);
    for s in &series {
        let xs: Vec<f64> = s.points.iter().map(|p| p.x).collect();
        assert_eq!(xs, [1.0, 2.0, 3.0, 4.0], "{}", s.name);
        for p in &s.points {
            let want = 256.0 / 2f64.powf(p.x);
            assert_eq!((p.low, p.mid, p.high), (want, want, want), "{}", s.name);
        }
    }
    // Over time: the x of a step is the median of its repetitions' times.
    let mut over_time = fig.clone();
    over_time.x = "time_s".into();
    let series = trace_figure_series(&over_time, &traces).unwrap();
    let slow = series.iter().find(|s| s.name == "slow").unwrap();
    let wall = 256.0 * MockFamily::factor("slow").unwrap();
    let xs: Vec<f64> = slow.points.iter().map(|p| p.x).collect();
    assert_eq!(xs, [wall / 4.0, wall / 2.0, wall * 3.0 / 4.0, wall]);
    // A y the trace lacks says what it has.
    let mut missing = fig.clone();
    missing.y = "metric_loglik".into();
    let err = format!("{:#}", trace_figure_series(&missing, &traces).unwrap_err());
    assert!(err.contains("metric_residual"), "{err}");
}

#[test]
fn plot_redraws_a_trace_figure_from_a_copied_run_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("mock.yaml");
    std::fs::write(&file, MOCK).unwrap();
    let out = tmp.path().join("run");
    let run = parbench(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-progress-bar",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    // Elsewhere, without its figures and without the experiment file it came from.
    let copy = tmp.path().join("elsewhere").join("run-copy");
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(&out).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
    }
    std::fs::remove_file(&file).unwrap();
    assert!(!copy.join("figures").exists());
    let plot = parbench(&["plot", copy.to_str().unwrap()]);
    assert!(plot.status.success(), "{}", stderr(&plot));
    assert!(!stderr(&plot).contains("not drawn"), "{}", stderr(&plot));
    let printed = stdout(&plot);
    for f in ["mock_residual_trace.png", "mock_residual_trace.svg"] {
        let path = copy.join("figures").join(f);
        assert!(
            printed.contains(path.to_str().unwrap()),
            "{f} not printed:\n{printed}"
        );
        assert!(std::fs::metadata(&path).unwrap().len() > 0, "{f} empty");
    }
    // The redrawn figure is the one the run drew.
    let original = std::fs::read(out.join("figures/mock_residual_trace.svg")).unwrap();
    let redrawn = std::fs::read(copy.join("figures/mock_residual_trace.svg")).unwrap();
    assert!(
        original == redrawn,
        "the redrawn SVG differs from the run's"
    );
}

#[test]
fn a_trace_figure_on_a_results_column_is_a_plan_error_with_a_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.yaml");
    let text = MOCK.replace("    x: step\n", "    x: size\n");
    std::fs::write(&file, text).unwrap();
    let err = format!("{:#}", plan::build(&file, false, None).unwrap_err());
    assert!(
        err.contains("unknown trace x `size`") && err.contains("metric_<name>"),
        "{err}"
    );
}

const LDA: &str = r#"name: lda_traces
description: LDA's trace
paper: none
reproduces: none
family: lda
data: { source: synthetic, seed: 3 }
variants: [sequential, sparse, mh, sync, async]
params: { docs: 60, words: 40, true_topics: 3, min_len: 10, max_len: 20, topics: 3, iters: 12, checkpoint_docs: 5, likelihood_every: 1, threads: 2 }
repetitions: 1
warmup: 0
figures:
  - { name: loglik, kind: trace, title: "LDA", x: step, y: metric_loglik }
"#;

#[test]
fn ldas_trace_has_every_iteration_and_ends_at_the_final_loglik() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = run_experiment(tmp.path(), "lda.yaml", LDA);
    let traces = results::read_traces(&tmp.path().join("run")).unwrap();
    assert_eq!(summary.rows.len(), 5);
    for row in &summary.rows {
        let steps = run_trace(&traces, row);
        let numbers: Vec<usize> = steps.iter().map(|t| t.step).collect();
        assert_eq!(numbers, (1..=12).collect::<Vec<_>>(), "{}", row.variant);
        let mut last_time = 0.0;
        for t in &steps {
            assert!(t.time_s >= last_time, "{}: time goes back", row.variant);
            last_time = t.time_s;
            let sampling = t.metrics["sampling_s"];
            assert!(sampling >= 0.0 && sampling <= t.time_s, "{t:?}");
            assert!(t.metrics["loglik"] < 0.0, "{t:?}");
        }
        let last = steps.last().unwrap().metrics["loglik"];
        let fin = row.metrics["final_loglik"];
        if matches!(row.variant.as_str(), "sequential" | "sparse" | "mh") {
            // One thread: the same sum over the same final state.
            assert_eq!(last, fin, "{}: trace's last vs final", row.variant);
        } else {
            // The document part is summed per worker first: the same value up to rounding.
            assert!(
                ((last - fin) / fin).abs() < 1e-12,
                "{}: trace's last {last} vs final {fin}",
                row.variant
            );
        }
    }
    let figure = tmp.path().join("run/figures/loglik.png");
    assert!(figure.is_file());
}

#[test]
fn a_resumed_run_keeps_the_traces_of_its_finished_points() {
    let tmp = tempfile::tempdir().unwrap();
    run_experiment(tmp.path(), "mock.yaml", MOCK);
    let run = tmp.path().join("run");
    let before = results::read_traces(&run).unwrap();
    let plan = plan::build(&tmp.path().join("mock.yaml"), false, None).unwrap();
    let summary = runner::run(&plan, &run, true, ProgressMode::Silent).unwrap();
    assert_eq!(summary.resumed_points, 2);
    assert_eq!(results::read_traces(&run).unwrap(), before);
    // A stored trace keeps its parameters' types.
    let sizes: BTreeMap<String, usize> = before
        .iter()
        .filter_map(|t| match t.params.get("size") {
            Some(Value::Int(n)) => Some((t.variant.clone(), *n as usize)),
            _ => None,
        })
        .collect();
    assert_eq!(sizes.len(), 2);
}
