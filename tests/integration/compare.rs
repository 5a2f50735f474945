//! `parbench compare`: a head-to-head from the command line, its run directory rerunnable with
//! `parbench run`, and its mistakes reported before anything runs.

use crate::support::{parbench, stderr, stdout};

#[test]
fn a_comparison_prints_ratios_and_agreement_and_its_experiment_reruns() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("cmp");
    let out = parbench(&[
        "compare",
        "mock",
        "--variants",
        "slow,fast",
        "--sweep",
        "size=100,1000",
        "--repetitions",
        "3",
        "--no-progress-bar",
        "--out",
        run.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    // The mock's `fast` takes exactly 1/100 of `slow`'s time, and computes the same output.
    let fast: Vec<&str> = text.lines().filter(|l| l.contains(" fast ")).collect();
    assert_eq!(fast.len(), 2, "{text}");
    for line in &fast {
        assert!(line.contains("0.010x (0.010-0.010)"), "{line}");
        assert!(line.contains("0.0e0"), "{line}");
    }
    assert_eq!(text.matches("1 (baseline)").count(), 2, "{text}");
    assert!(
        text.contains("[PASS] every variant agrees with slow"),
        "{text}"
    );
    let yaml = run.join("experiment.yaml");
    let written = std::fs::read_to_string(&yaml).unwrap();
    assert!(written.contains("size: [100, 1000]"), "{written}");
    let again = parbench(&[
        "run",
        yaml.to_str().unwrap(),
        "--no-progress-bar",
        "--out",
        dir.path().join("again").to_str().unwrap(),
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(stdout(&again).contains("[PASS] every variant agrees with slow"));
}

#[test]
fn json_lines_carry_the_interval_and_a_disagreeing_variant_fails() {
    let dir = tempfile::tempdir().unwrap();
    let out = parbench(&[
        "compare",
        "mock",
        "--variants",
        "slow,wrong",
        "--set",
        "size=50",
        "--repetitions",
        "2",
        "--json",
        "--no-progress-bar",
        "--out",
        dir.path().join("cmp").to_str().unwrap(),
    ]);
    // `wrong` differs from `slow` by 1e-3 relative: the agreement claim fails (exit 3).
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let lines: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let lines = lines.as_array().unwrap();
    assert_eq!(lines.len(), 2);
    let wrong = &lines[1];
    assert_eq!(wrong["variant"], "wrong");
    assert_eq!(wrong["repetitions"], 2);
    assert!((wrong["ratio"].as_f64().unwrap() - 0.01).abs() < 1e-12);
    assert!(wrong["ratio_lower"].as_f64().unwrap() <= 0.01 + 1e-12);
    assert!(wrong["rel_error"].as_f64().unwrap() > 1e-4);
    assert_eq!(wrong["point"]["size"], "50");
}

#[test]
fn every_mistake_is_reported_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("cmp");
    let out = parbench(&[
        "compare",
        "mock",
        "--variants",
        "slow,fsat",
        "--set",
        "sise=10",
        "--sweep",
        "size=0,10",
        "--out",
        run.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert!(!out.status.success());
    for needle in ["`fsat`", "`sise`", "size"] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert!(
        err.lines()
            .filter(|l| l.contains("parbench compare:"))
            .count()
            >= 3,
        "{err}"
    );
    assert!(
        !run.exists(),
        "a run directory was written for a comparison that cannot run"
    );
}
