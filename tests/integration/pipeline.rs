//! The whole sweep pipeline (plan, run, results, figures, claims, resume, check, CLI exit codes),
//! driven end to end by the scripted mock family: no real timing, so every number is known.

use parbench::analysis::check;
use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;
use parbench::family::ResultRow;
use parbench::results;
use std::path::{Path, PathBuf};
use std::process::Command;

const MOCK: &str = r#"name: mock_pipeline
description: the pipeline under test
paper: none
reproduces: Fig. 0
family: mock
data: { source: synthetic, seed: 1 }
variants: [slow, fast]
params: { work: 1.0 }
sweep:
  size: [10, 100, 1000]
  threads: [1, 2]
repetitions: 2
warmup: 1
equivalence: { reference: slow, rel_tol: 1.0e-10 }
figures:
  - { name: mock_time, title: "Mock figure", x: size, y: wall_time_s, log_x: true, log_y: true }
claims:
  - { kind: equivalence, name: variants agree, max_rel_error: 1.0e-10 }
  - { kind: ratio, name: fast is 100x faster, numerator: slow, denominator: fast, at_least: 99, at: { size: max } }
  - { kind: slope, name: time linear in size, x: size, variants: [slow], min: 0.99, max: 1.01 }
"#;

fn write_experiment(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("mock.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run_mock(dir: &Path, text: &str) -> runner::RunSummary {
    let file = write_experiment(dir, text);
    let plan = plan::build(&file, false, None).unwrap();
    runner::run(&plan, &dir.join("run"), false, ProgressMode::Silent).unwrap()
}

#[test]
fn a_run_records_every_point_variant_and_repetition_and_its_claims_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = run_mock(tmp.path(), MOCK);
    assert_eq!(
        summary.rows.len(),
        3 * 2 * 2 * 2,
        "points x variants x repetitions"
    );
    for c in &summary.claims {
        assert!(c.passed, "claim {} failed: {}", c.name, c.detail);
    }
    let run = tmp.path().join("run");
    for f in [
        "results.parquet",
        "results.csv",
        "meta.json",
        "experiment.yaml",
        "summary.txt",
    ] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    assert!(run.join("figures/mock_time.png").is_file());
    assert!(run.join("figures/mock_time.svg").is_file());
    // Stored rows are exactly what the run returned.
    let mut stored = results::read_rows(&run).unwrap();
    let key = |r: &ResultRow| (r.point, r.variant.clone(), r.repetition);
    stored.sort_by_key(key);
    let mut returned = summary.rows.clone();
    returned.sort_by_key(key);
    assert_eq!(stored, returned);
    // The reference has no error against itself on repetition 0; `fast` matches it exactly.
    for r in &stored {
        if r.variant == "fast" {
            assert_eq!(r.equiv_rel_error, Some(0.0), "row {r:?}");
        }
    }
}

#[test]
fn a_variant_listed_with_its_own_option_runs_beside_the_plain_one_and_claims_compare_them() {
    let tmp = tempfile::tempdir().unwrap();
    let text = MOCK
        .replace("[slow, fast]", "[slow, fast, fast speedup=4]")
        .replace(
            "  - { kind: slope,",
            "  - { kind: ratio, name: the option speeds fast up, numerator: fast, denominator: fast speedup=4, at_least: 3.999, at_most: 4.001 }\n  - { kind: slope,",
        )
        .replace(
            "claims:\n",
            "  - { name: fast_both_ways, title: \"fast two ways\", x: size, y: wall_time_s, filter: { variant: [fast, fast speedup=4] } }\nclaims:\n",
        );
    let summary = run_mock(tmp.path(), &text);
    // A filter listing two of the three variants draws those two.
    let svg = std::fs::read_to_string(tmp.path().join("run/figures/fast_both_ways.svg")).unwrap();
    assert!(svg.contains("fast speedup=4"), "{svg}");
    assert!(!svg.contains("slow"), "{svg}");
    assert_eq!(summary.rows.len(), 3 * 2 * 3 * 2);
    for c in &summary.claims {
        assert!(c.passed, "claim {} failed: {}", c.name, c.detail);
    }
    for r in summary
        .rows
        .iter()
        .filter(|r| r.variant == "fast speedup=4")
    {
        let size = r.params["size"].as_f64().unwrap();
        let threads = r.params["threads"].as_f64().unwrap();
        assert_eq!(r.wall_time_s, size * 1e-5 / threads / 4.0, "{r:?}");
        // The option changes the time, not the output: it agrees with the reference.
        assert_eq!(r.equiv_rel_error, Some(0.0));
        // The row's parameters are the point's: the option lives in the variant's name.
        assert!(!r.params.contains_key("speedup"), "{r:?}");
    }
    // The same option set for every variant reads the same for `fast` at every point.
    let swept = tmp.path().join("swept");
    std::fs::create_dir(&swept).unwrap();
    let every = run_mock(
        &swept,
        &MOCK.replace("params: { work: 1.0 }", "params: { work: 1.0, speedup: 4 }"),
    );
    let time = |rows: &[ResultRow], variant: &str| -> Vec<f64> {
        rows.iter()
            .filter(|r| r.variant == variant)
            .map(|r| r.wall_time_s)
            .collect()
    };
    assert_eq!(
        time(&every.rows, "fast"),
        time(&summary.rows, "fast speedup=4")
    );
    // `slow` does not read it.
    assert_eq!(time(&every.rows, "slow"), time(&summary.rows, "slow"));
}

#[test]
fn a_variant_that_disagrees_fails_the_equivalence_claim() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = run_mock(
        tmp.path(),
        &MOCK
            .replace("[slow, fast]", "[slow, wrong]")
            .replace("denominator: fast", "denominator: wrong"),
    );
    let eq = summary
        .claims
        .iter()
        .find(|c| c.name == "variants agree")
        .unwrap();
    assert!(!eq.passed, "{}", eq.detail);
    let worst = summary
        .rows
        .iter()
        .filter_map(|r| r.equiv_rel_error)
        .fold(0.0f64, f64::max);
    assert!(
        worst > 1e-4 && worst < 1e-2,
        "wrong differs by about 1e-3, got {worst}"
    );
}

#[test]
fn a_ratio_claim_fails_when_the_threshold_is_not_met() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = run_mock(tmp.path(), &MOCK.replace("at_least: 99", "at_least: 101"));
    let c = summary
        .claims
        .iter()
        .find(|c| c.name == "fast is 100x faster")
        .unwrap();
    assert!(!c.passed, "{}", c.detail);
}

#[test]
fn an_interrupted_run_resumes_without_rerunning_finished_points() {
    let tmp = tempfile::tempdir().unwrap();
    let full = run_mock(tmp.path(), MOCK);
    let run = tmp.path().join("run");
    // Simulate an interruption after the first two points.
    let partial: Vec<ResultRow> = full.rows.iter().filter(|r| r.point < 2).cloned().collect();
    results::write_rows(&run, &partial).unwrap();
    let plan = plan::build(&tmp.path().join("mock.yaml"), false, None).unwrap();
    let resumed = runner::run(&plan, &run, true, ProgressMode::Silent).unwrap();
    assert_eq!(resumed.resumed_points, 2);
    assert_eq!(resumed.rows.len(), full.rows.len());
    // Without --resume an existing run directory is refused rather than overwritten.
    let err = runner::run(&plan, &run, false, ProgressMode::Silent).unwrap_err();
    assert!(format!("{err:#}").contains("--resume"), "{err:#}");
}

#[test]
fn check_passes_against_its_own_baseline_and_flags_a_slower_variant() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = run_mock(tmp.path(), MOCK);
    let plan = plan::build(&tmp.path().join("mock.yaml"), false, None).unwrap();
    let machine = results::load_run(&tmp.path().join("run")).unwrap().machine;
    let base = check::make_baseline(&summary.rows, &plan.config, &machine);
    let gate = |rows: &[ResultRow]| {
        check::check(
            &check::RunView {
                rows,
                config: &plan.config,
                machine: &machine,
            },
            Some(&base),
            // The mock's scripted times are milliseconds but exact: compare them whatever
            // their length.
            &check::CheckOptions {
                min_time_s: 0.0,
                ..check::CheckOptions::default()
            },
        )
    };
    let same = gate(&summary.rows);
    assert!(same.passed(), "{same}");
    // `fast` becomes 3x slower relative to the reference: a regression.
    let slower: Vec<ResultRow> = summary
        .rows
        .iter()
        .cloned()
        .map(|mut r| {
            if r.variant == "fast" {
                r.wall_time_s *= 3.0;
            }
            r
        })
        .collect();
    let report = gate(&slower);
    assert!(
        !report.regressions.is_empty(),
        "a 3x slowdown must be reported"
    );
}

#[test]
fn cli_exit_codes_distinguish_success_failed_claims_and_bad_files() {
    let exe = env!("CARGO_BIN_EXE_parbench");
    let tmp = tempfile::tempdir().unwrap();
    let good = write_experiment(tmp.path(), MOCK);
    let out = tmp.path().join("cli-run");
    let status = Command::new(exe)
        .args([
            "run",
            good.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        status.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(stdout.contains("[PASS] fast is 100x faster"), "{stdout}");

    let check = Command::new(exe)
        .args(["check", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let plot = Command::new(exe)
        .args(["plot", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        plot.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&plot.stderr)
    );

    let failing = tmp.path().join("failing.yaml");
    std::fs::write(&failing, MOCK.replace("at_least: 99", "at_least: 1000")).unwrap();
    let out2 = tmp.path().join("cli-run-2");
    let st = Command::new(exe)
        .args([
            "run",
            failing.to_str().unwrap(),
            "--out",
            out2.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(3), "a failed claim exits 3");

    let bad = tmp.path().join("bad.yaml");
    std::fs::write(&bad, MOCK.replace("repetitions: 2", "repetitions: many")).unwrap();
    let st = Command::new(exe)
        .args(["run", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(1));
    let err = String::from_utf8_lossy(&st.stderr);
    assert!(
        err.contains("bad.yaml") && err.contains(":12"),
        "error names file and line: {err}"
    );
}

#[test]
fn reproduce_ends_with_every_failed_claim_and_its_experiment() {
    // A long reproduction is read from its tail: the failed claims come again at the very end,
    // after the experiments that passed.
    let tmp = tempfile::tempdir().unwrap();
    let experiments = tmp.path().join("experiments");
    std::fs::create_dir_all(experiments.join("mock")).unwrap();
    let failing = MOCK
        .replace("mock_pipeline", "a_failing")
        .replace("at_least: 99", "at_least: 1000");
    std::fs::write(experiments.join("mock/a_failing.yaml"), failing).unwrap();
    let passing = MOCK.replace("mock_pipeline", "b_passing");
    std::fs::write(experiments.join("mock/b_passing.yaml"), passing).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_parbench"))
        .current_dir(tmp.path())
        .env_remove("PARBENCH_DATA")
        .args(["reproduce", "--experiments"])
        .arg(&experiments)
        .arg("--out")
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let tail: Vec<&str> = stdout.lines().rev().take(2).collect();
    assert_eq!(tail[1], "1 claim(s) failed:", "{stdout}");
    assert!(
        tail[0].starts_with("  [FAIL] a_failing: fast is 100x faster: ")
            && tail[0].contains("required >= 1000"),
        "{stdout}"
    );
}

#[test]
fn an_mpi_point_that_cannot_launch_is_an_error_naming_why() {
    let tmp = tempfile::tempdir().unwrap();
    let text = MOCK.replace("  threads: [1, 2]\n", "  backend: [local, mpi]\n")
        + "launcher: { command: no-such-mpirun-here, args: [--oversubscribe] }\n";
    let file = write_experiment(tmp.path(), &text);
    let plan = plan::build(&file, false, None).unwrap();
    let err = runner::run(&plan, &tmp.path().join("run"), false, ProgressMode::Silent)
        .expect_err("no launcher program");
    let msg = format!("{err:#}");
    assert!(msg.contains("backend: mpi"), "{msg}");
    assert!(
        msg.contains("built without MPI") || msg.contains("no-such-mpirun-here"),
        "{msg}"
    );
    // The local points before it were recorded.
    let rows = results::read_rows(&tmp.path().join("run")).unwrap();
    assert!(!rows.is_empty());
    assert!(rows
        .iter()
        .all(|r| r.params["backend"].as_str() == Some("local")));
}
