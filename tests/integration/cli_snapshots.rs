//! Snapshots of what a user reads: the columns of results.csv, summary.txt, the claim verdicts
//! of a run, the `check` report against a baseline (with regressions), and `fusedmm --json`.
//!
//! The snapshots live in tests/integration/snapshots/ and are compared by `insta` with no
//! `cargo insta` needed: a mismatch fails the test (under CI=true or INSTA_UPDATE=no nothing is
//! written; elsewhere insta leaves a `.snap.new` beside the snapshot to review). To accept a
//! deliberate change: `INSTA_UPDATE=always cargo test -p parbench --test integration
//! cli_snapshots`, then review the diff of the .snap files. Everything that depends on the
//! machine or the clock (times, rates, paths) is masked, and the mock family's numbers are
//! scripted, so the snapshots hold on every machine and every run.

use std::path::Path;
use std::process::{Command, Output};

fn parbench_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_parbench"))
        .args(args)
        .current_dir(cwd)
        .env_remove("PARBENCH_DATA")
        .output()
        .expect("the parbench binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Filters masking timings in the text outputs: the median and min-max columns of
/// summary.txt (`0.010000  0.0100-0.0100`) and the absolute times of `check`'s warnings
/// (`5.000e-4 s vs 1.250e-4 s`). Ratios of times stay: the mock's are scripted, and they are
/// what a verdict or a regression says.
fn time_filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            r"\b\d+\.\d{6}( +)\d+\.\d{4}-\d+\.\d{4}\b",
            "[median s]$1[min-max s]",
        ),
        (
            r"median wall time \S+ s vs \S+ s in the baseline",
            "median wall time [s] s vs [s] s in the baseline",
        ),
        // Times per calibration: the mock's times are scripted, its calibrations real.
        (
            r"\b\d+\.\d+x the baseline's time per calibration \(95.00% interval \S+-\S+x",
            "[ratio]x the baseline's time per calibration (95.00% interval [lower]-[upper]x",
        ),
        (r"median \S+ s -> \S+ s\)", "median [s] s -> [s] s)"),
    ]
}

const EXPERIMENT: &str = r#"name: mock_snapshot
description: what a user sees of a run
paper: none
reproduces: Fig. 0
family: mock
data: { source: synthetic, seed: 7 }
variants: [slow, fast, wrong]
params: { work: 2.5 }
sweep:
  size: [100, 1000]
  threads: [1, 2]
repetitions: 2
warmup: 1
equivalence: { reference: slow, rel_tol: 1.0e-6 }
figures:
  - { name: mock_time, title: "Mock time", x: size, y: wall_time_s, log_x: true, log_y: true }
claims:
  - { kind: equivalence, name: variants agree, max_rel_error: 1.0e-6 }
  - { kind: ratio, name: fast is 100x faster, numerator: slow, denominator: fast, at_least: 99, at: { size: max } }
  - { kind: slope, name: time linear in size, x: size, variants: [slow, fast], min: 0.99, max: 1.01 }
  - { kind: scaling, name: two threads halve the time, variant: slow, from: 1, to: 2, at_least: 1.9 }
  - { kind: share, name: compute dominates, variant: slow, phase: compute, at_least: 0.75 }
"#;

/// Runs EXPERIMENT (or `experiment`) into `cwd/run`; returns the command's output.
fn run_experiment(cwd: &Path, experiment: &str) -> Output {
    std::fs::write(cwd.join("exp.yaml"), experiment).unwrap();
    parbench_in(
        cwd,
        &["run", "exp.yaml", "--out", "run", "--no-progress-bar"],
    )
}

#[test]
fn a_mock_run_shows_its_columns_summary_and_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_experiment(tmp.path(), EXPERIMENT);
    // `wrong` breaks equivalence: exit 3.
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let run = tmp.path().join("run");

    let csv = std::fs::read_to_string(run.join("results.csv")).unwrap();
    let header = csv.lines().next().unwrap().replace(',', "\n");
    insta::assert_snapshot!("results_csv_columns", header);

    let summary = std::fs::read_to_string(run.join("summary.txt")).unwrap();
    insta::with_settings!({ filters => time_filters() }, {
        insta::assert_snapshot!("summary_txt", summary);
    });

    let verdicts: Vec<String> = text(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("  [PASS]") || l.starts_with("  [FAIL]"))
        .map(str::to_string)
        .collect();
    insta::assert_snapshot!("claim_verdicts", verdicts.join("\n"));
}

#[test]
fn check_against_a_baseline_reports_regressions_and_notes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // Without `wrong` and its failing claim, so the exit code is the regression's.
    let experiment = EXPERIMENT
        .replace("[slow, fast, wrong]", "[slow, fast]")
        .replace("name: mock_snapshot", "name: mock_check");
    let out = run_experiment(root, &experiment);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let written = parbench_in(root, &["check", "run", "--write-baseline", "base.json"]);
    assert!(written.status.success(), "{}", text(&written.stderr));
    assert_eq!(
        text(&written.stdout),
        "baseline base.json updated with 1 experiment(s) from 1 run group(s) (counted and timed runs apart)\n"
    );

    // Pretend `fast` used to be 4x faster at threads=2 (every time of it in the baseline); and
    // drop one point from the baseline.
    let mut base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("base.json")).unwrap()).unwrap();
    let points = base["experiments"]["mock_check"]["points"]
        .as_object_mut()
        .unwrap();
    let keys: Vec<String> = points.keys().cloned().collect();
    assert_eq!(keys.len(), 4, "{keys:?}");
    for key in &keys {
        if key.contains("threads=2") {
            let fast = &mut points[key]["fast"];
            let quarter = |v: &mut serde_json::Value| {
                *v = serde_json::json!(v.as_f64().unwrap() / 4.0);
            };
            // Each kind's own same-run ratios are in its timings.
            assert!(fast.get("relative").is_none(), "{fast}");
            for timing in fast["timings"].as_object_mut().unwrap().values_mut() {
                quarter(&mut timing["median_wall_time_s"]);
                for series in ["normalized", "relative"] {
                    let values = timing[series].as_array_mut().unwrap();
                    values.iter_mut().for_each(quarter);
                }
            }
        }
    }
    let dropped = keys.iter().find(|k| k.contains("threads=1")).unwrap();
    points.remove(dropped);
    std::fs::write(
        root.join("base.json"),
        serde_json::to_string_pretty(&base).unwrap(),
    )
    .unwrap();

    let check = parbench_in(
        root,
        &["check", "run", "--baseline", "base.json", "--min-time", "0"],
    );
    let report = format!(
        "exit code: {:?}\n{}",
        check.status.code(),
        text(&check.stdout)
    );
    insta::with_settings!({ filters => time_filters() }, {
        insta::assert_snapshot!("check_with_regression", report);
    });
    assert_eq!(check.status.code(), Some(4), "{}", text(&check.stderr));
}

#[test]
fn fusedmm_json_output() {
    let tmp = tempfile::tempdir().unwrap();
    let out = parbench_in(
        tmp.path(),
        &[
            "fusedmm",
            "--er",
            "40,3",
            "--r",
            "4",
            "--kernel",
            "fusedmma",
            "--algorithm",
            "1.5d-dense-shift",
            "--strategy",
            "fusion",
            "--ranks",
            "4",
            "--replication",
            "2",
            "--seed",
            "5",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    mask_times(&mut report);
    insta::assert_json_snapshot!("fusedmm_json", report, {
        ".times_s.read" => "[s]",
        ".times_s.run" => "[s]",
        ".times_s.compute_max" => "[s]",
        ".times_s.write" => "[s]",
        ".gflop_per_s" => "[GFLOP/s]",
    });
}

/// Masks every number whose key names a time (`*seconds*`) or a rate (`*per_s*`), at any
/// depth (the per-phase times); `times_s` is masked by redactions.
fn mask_times(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                let timed = key.contains("seconds") || key.contains("per_s");
                if timed && (v.is_number() || v.is_null()) {
                    *v = serde_json::Value::String("[time]".to_string());
                } else {
                    mask_times(v);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(mask_times),
        _ => {}
    }
}

/// The page's structure: its sections, tables, rows and figures, each by tag and attributes
/// (headings with their text), so a change in what the page shows appears in review; numbers,
/// times and paths are left out.
fn html_skeleton(html: &str) -> String {
    const TAGS: [&str; 10] = [
        "section", "nav", "figure", "table", "tr", "li", "dl", "h1", "h2", "h3",
    ];
    let mut out = Vec::new();
    for piece in html.split('<').skip(1) {
        let Some((open, after)) = piece.split_once('>') else {
            continue;
        };
        let (tag, attrs) = open.split_once(' ').unwrap_or((open, ""));
        if !TAGS.contains(&tag) {
            continue;
        }
        let text = if tag.starts_with('h') {
            after.trim()
        } else {
            ""
        };
        let attrs = attrs.trim();
        let sep = if attrs.is_empty() { "" } else { " " };
        out.push(format!("<{tag}{sep}{attrs}>{text}"));
    }
    out.join("\n")
}

#[test]
fn the_report_page_shows_every_claim_figure_and_row() {
    let tmp = tempfile::tempdir().unwrap();
    run_experiment(tmp.path(), EXPERIMENT);
    let out = parbench_in(tmp.path(), &["report", "run"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("report: run/report.html"));
    let html = std::fs::read_to_string(tmp.path().join("run/report.html")).unwrap();
    // Self-contained: nothing to fetch.
    for external in [
        "<script", "<link", "<img", "src=", "url(", "http://", "https://",
    ] {
        let inside_svg = html.matches(external).count()
            == html
                .split("<svg")
                .skip(1)
                .map(|s| {
                    s.split("</svg>")
                        .next()
                        .unwrap_or("")
                        .matches(external)
                        .count()
                })
                .sum::<usize>();
        assert!(
            inside_svg,
            "the page refers to something outside itself: {external}"
        );
    }
    assert!(html.contains("<svg"), "the figure is not inlined");
    insta::assert_snapshot!("report_skeleton", html_skeleton(&html));
}
