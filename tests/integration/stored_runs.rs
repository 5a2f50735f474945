//! `parbench plot` and `parbench check` read only the run directory (its experiment.yaml,
//! meta.json and results): they work after the run's dataset is gone, with an empty data dir,
//! and on runs whose stored experiment names variants or parameters parbench no longer has.

use parbench::results;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `parbench` in `cwd` with no data dir from the environment.
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

/// The claim verdict lines (`  [PASS] name: detail`) a command printed, in order.
/// The claim verdicts of a run's or a check's table (not the recap of failures a check ends
/// with: [`recap`]).
fn verdicts(out: &Output) -> Vec<String> {
    text(&out.stdout)
        .lines()
        .take_while(|l| !l.ends_with("failing verdict(s):"))
        .filter(|l| l.starts_with("  [PASS]") || l.starts_with("  [FAIL]"))
        .map(str::to_string)
        .collect()
}

/// The lines after a check's "N failing verdict(s):", which must count them.
fn recap(out: &Output) -> Vec<String> {
    let stdout = text(&out.stdout);
    let mut lines = stdout
        .lines()
        .skip_while(|l| !l.ends_with("failing verdict(s):"));
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let recap: Vec<String> = lines.map(str::to_string).collect();
    assert_eq!(header, format!("{} failing verdict(s):", recap.len()));
    recap
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A mock experiment reading `mock_input.dat` from the data dir, with one claim that fails so
/// the verdicts compared are not all the same.
const DATASET_EXPERIMENT: &str = r#"name: mock_dataset
description: a mock run that reads a file of the data dir
paper: none
reproduces: Fig. 0
family: mock
data: { source: dataset, file: mock_input.dat, seed: 3 }
variants: [slow, fast]
sweep:
  size: [10, 100, 1000]
  threads: [1, 2]
repetitions: 2
equivalence: { reference: slow, rel_tol: 1.0e-10 }
figures:
  - { name: mock_time, title: "Mock time", x: size, y: wall_time_s, log_x: true, log_y: true }
claims:
  - { kind: equivalence, name: variants agree, max_rel_error: 1.0e-10 }
  - { kind: ratio, name: fast is 100x faster, numerator: slow, denominator: fast, at_least: 99, at: { size: max } }
  - { kind: ratio, name: fast is 1000x faster, numerator: slow, denominator: fast, at_least: 1000 }
"#;

#[test]
fn plot_and_check_need_only_the_run_directory_not_its_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let data = root.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(
        data.join("mock_input.dat"),
        "input the mock does not read\n",
    )
    .unwrap();
    let empty = root.join("empty-data");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(root.join("exp.yaml"), DATASET_EXPERIMENT).unwrap();

    let run = parbench_in(
        root,
        &[
            "--data-dir",
            data.to_str().unwrap(),
            "run",
            "exp.yaml",
            "--out",
            "run",
            "--no-progress-bar",
        ],
    );
    assert_eq!(run.status.code(), Some(3), "{}", text(&run.stderr));
    let run_verdicts = verdicts(&run);
    assert_eq!(run_verdicts.len(), 3, "{}", text(&run.stdout));
    assert!(run_verdicts[2].starts_with("  [FAIL] fast is 1000x faster"));
    let meta = results::read_meta(&root.join("run")).unwrap();
    assert_eq!(meta.dataset.as_deref(), Some("mock_input.dat"));

    // Move the run elsewhere and delete the dataset.
    let copy = root.join("moved").join("run-copy");
    copy_dir(&root.join("run"), &copy);
    std::fs::remove_dir_all(copy.join("figures")).unwrap();
    std::fs::remove_dir_all(&data).unwrap();

    // Re-planning the stored experiment now fails: the dataset is gone.
    let replan = parbench_in(
        root,
        &[
            "--data-dir",
            empty.to_str().unwrap(),
            "run",
            copy.join("experiment.yaml").to_str().unwrap(),
            "--out",
            "again",
        ],
    );
    assert!(!replan.status.success());
    assert!(text(&replan.stderr).contains("mock_input.dat"));

    // Analysis does not care, with an empty data dir or none.
    for data_args in [vec!["--data-dir", empty.to_str().unwrap()], vec![]] {
        let mut args = data_args.clone();
        args.extend(["plot", copy.to_str().unwrap()]);
        let plot = parbench_in(root, &args);
        assert!(plot.status.success(), "{}", text(&plot.stderr));
        let printed: Vec<PathBuf> = text(&plot.stdout).lines().map(PathBuf::from).collect();
        assert_eq!(
            printed,
            vec![
                copy.join("figures/mock_time.png"),
                copy.join("figures/mock_time.svg")
            ]
        );
        for f in &printed {
            assert!(std::fs::metadata(f).unwrap().len() > 0, "{}", f.display());
        }

        let mut args = data_args.clone();
        args.extend(["check", copy.to_str().unwrap()]);
        let check = parbench_in(root, &args);
        assert_eq!(check.status.code(), Some(3), "{}", text(&check.stderr));
        assert_eq!(verdicts(&check), run_verdicts, "{}", text(&check.stdout));
        // The failed claim again at the end, named with its experiment.
        let failed: Vec<String> = run_verdicts
            .iter()
            .filter_map(|v| v.strip_prefix("  [FAIL] "))
            .map(|v| format!("  [FAIL] mock_dataset: {v}"))
            .collect();
        assert!(!failed.is_empty());
        assert_eq!(recap(&check), failed, "{}", text(&check.stdout));
    }

    // The reproduce-directory form (a folder of runs) reads the same way.
    let check = parbench_in(root, &["check", root.join("moved").to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(3), "{}", text(&check.stderr));
    assert_eq!(verdicts(&check), run_verdicts);
}

const RENAMED_EXPERIMENT: &str = r#"name: mock_renamed
description: a run of the mock family
paper: none
reproduces: Fig. 0
family: mock
data: { source: synthetic, seed: 1 }
variants: [slow, fast]
sweep:
  size: [10, 100, 1000]
repetitions: 2
equivalence: { reference: slow, rel_tol: 1.0e-10 }
figures:
  - { name: by_size, title: "Mock time", x: size, y: wall_time_s, log_x: true, log_y: true }
  - { name: speedup, title: "Mock speedup", x: size, y: wall_time_s, speedup_over: { variant: slow }, filter: { variant: fast } }
claims:
  - { kind: equivalence, name: variants agree, max_rel_error: 1.0e-10 }
  - { kind: ratio, name: the new variant is 100x faster, numerator: slow, denominator: fast, at_least: 99 }
"#;

#[test]
fn a_run_whose_experiment_names_a_variant_and_a_parameter_parbench_lost_still_plots_and_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::write(root.join("exp.yaml"), RENAMED_EXPERIMENT).unwrap();
    let run = parbench_in(
        root,
        &["run", "exp.yaml", "--out", "run", "--no-progress-bar"],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let dir = root.join("run");

    // Make it a run of an older parbench: its `fast` was called `turbo` and it had a parameter
    // `legacy_knob`, in the stored experiment and in the stored rows.
    let yaml = std::fs::read_to_string(dir.join("experiment.yaml")).unwrap();
    let yaml = yaml
        .replace("[slow, fast]", "[slow, turbo]")
        .replace("denominator: fast", "denominator: turbo")
        .replace("variant: fast", "variant: turbo")
        .replace(
            "variants: [slow, turbo]",
            "variants: [slow, turbo]\nparams: { legacy_knob: 7 }",
        );
    assert!(yaml.contains("legacy_knob") && !yaml.contains(": fast") && !yaml.contains(" fast]"));
    std::fs::write(dir.join("experiment.yaml"), &yaml).unwrap();
    let mut rows = results::read_rows(&dir).unwrap();
    for r in &mut rows {
        if r.variant == "fast" {
            r.variant = "turbo".to_string();
        }
        r.params
            .insert("legacy_knob".to_string(), parbench::family::Value::Int(7));
    }
    results::write_rows(&dir, &rows).unwrap();
    std::fs::remove_dir_all(dir.join("figures")).unwrap();

    // This parbench cannot plan it any more ...
    let replan = parbench_in(
        root,
        &[
            "run",
            dir.join("experiment.yaml").to_str().unwrap(),
            "--out",
            "again",
        ],
    );
    assert!(!replan.status.success());
    assert!(
        text(&replan.stderr).contains("turbo"),
        "{}",
        text(&replan.stderr)
    );

    // ... but plots and checks it from what is stored.
    let plot = parbench_in(root, &["plot", dir.to_str().unwrap()]);
    assert!(plot.status.success(), "{}", text(&plot.stderr));
    assert_eq!(
        text(&plot.stdout).lines().count(),
        4,
        "{}",
        text(&plot.stdout)
    );
    assert!(text(&plot.stderr).is_empty(), "{}", text(&plot.stderr));
    for f in ["by_size.png", "by_size.svg", "speedup.png", "speedup.svg"] {
        assert!(dir.join("figures").join(f).is_file(), "{f} missing");
    }
    let check = parbench_in(root, &["check", dir.to_str().unwrap()]);
    assert!(check.status.success(), "{}", text(&check.stdout));
    let v = verdicts(&check);
    assert_eq!(v.len(), 2, "{}", text(&check.stdout));
    assert!(v[0].starts_with("  [PASS] variants agree"), "{v:?}");
    assert!(
        v[1].starts_with("  [PASS] the new variant is 100x faster"),
        "{v:?}"
    );

    // The library path the commands use.
    let stored = results::load_run(&dir).unwrap();
    assert_eq!(stored.config.variants, ["slow", "turbo"]);
    assert_eq!(stored.rows.len(), rows.len());
    assert!(!stored.quick);
}

#[test]
fn a_quick_run_is_reread_with_its_quick_overrides() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let experiment = RENAMED_EXPERIMENT.to_string()
        + "quick:\n  sweep: { size: [10, 20] }\n  repetitions: 1\n  variants: [slow, fast]\n  claims:\n    - { kind: ratio, name: quick claim, numerator: slow, denominator: fast, at_least: 50 }\n";
    std::fs::write(root.join("exp.yaml"), experiment).unwrap();
    let run = parbench_in(
        root,
        &[
            "run",
            "exp.yaml",
            "--quick",
            "--out",
            "run",
            "--no-progress-bar",
        ],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let stored = results::load_run(&root.join("run")).unwrap();
    assert!(stored.quick);
    assert_eq!(stored.config.repetitions, 1);
    assert_eq!(stored.rows.len(), 2 * 2);
    let check = parbench_in(root, &["check", "run"]);
    assert!(check.status.success(), "{}", text(&check.stdout));
    assert_eq!(verdicts(&check), verdicts(&run));
    assert!(verdicts(&check)[0].starts_with("  [PASS] quick claim"));
}

#[test]
fn a_run_stopped_before_its_first_point_is_reported_not_plotted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("experiment.yaml"), RENAMED_EXPERIMENT).unwrap();
    std::fs::write(dir.join("meta.json"), r#"{"quick": false}"#).unwrap();
    let out = parbench_in(tmp.path(), &["plot", "run"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("holds no results yet") && err.contains("--resume"),
        "{err}"
    );
}
