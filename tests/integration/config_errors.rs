//! Experiment files with mistakes: every error must name the file, the line of the mistake and
//! the key, and say how to fix it, before anything runs.

use parbench::experiment::config;
use parbench::experiment::plan::{self, PlanError};
use parbench::family::Value;
use std::path::{Path, PathBuf};

/// A valid mock experiment; tests replace one line to introduce one mistake. Line numbers
/// (1-based) are noted where tests rely on them.
const VALID: &str = "\
name: demo
paper: mock paper
reproduces: Fig. 0
family: mock
data:
  source: synthetic
  seed: 7
variants: [slow, fast]
params:
  work: 1.5
sweep:
  threads: [1, 2]
  size: [1000, 2000, 4000]
repetitions: 2
equivalence:
  reference: slow
  rel_tol: 1e-9
figures:
  - name: time
    title: Time over size
    x: size
    y: wall_time_s
claims:
  - name: fast-is-faster
    kind: ratio
    numerator: slow
    denominator: fast
    at_least: 50
quick:
  sweep:
    size: [100]
  repetitions: 1
";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Replaces the one line equal to `old` (trimmed) by `new`.
fn edit(old: &str, new: &str) -> String {
    let mut found = false;
    let text: Vec<String> = VALID
        .lines()
        .map(|l| {
            if l.trim() == old {
                found = true;
                new.to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(found, "no line `{old}` in the template");
    text.join("\n") + "\n"
}

fn plan_error(text: &str, data_dir: Option<&Path>) -> (String, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "fig8.yaml", text);
    match plan::build(&path, false, data_dir) {
        Ok(plan) => panic!(
            "expected an error, got a plan with {} points",
            plan.points.len()
        ),
        Err(err) => (err.to_string(), dir, path),
    }
}

fn assert_contains(text: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(
            text.contains(w),
            "expected the error to contain {w:?}\n--- actual error ---\n{text}"
        );
    }
}

#[test]
fn the_template_is_valid_and_expands_in_written_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "ok.yaml", VALID);
    let plan = plan::build(&path, false, None).unwrap();
    assert_eq!(plan.points.len(), 6);
    // threads is written first, so it varies slowest.
    let order: Vec<(Value, Value)> = plan
        .points
        .iter()
        .map(|p| (p["threads"].clone(), p["size"].clone()))
        .collect();
    assert_eq!(order[0], (Value::Int(1), Value::Int(1000)));
    assert_eq!(order[1], (Value::Int(1), Value::Int(2000)));
    assert_eq!(order[3], (Value::Int(2), Value::Int(1000)));
    assert!(plan.points.iter().all(|p| p["work"] == Value::Float(1.5)));
    assert_eq!(plan.yaml_text, VALID);
    assert_eq!(plan.total_runs(), 6 * 2 * 2);

    let quick = plan::build(&path, true, None).unwrap();
    assert_eq!(quick.points.len(), 2);
    assert_eq!(quick.config.repetitions, 1);
    assert!(quick.points.iter().all(|p| p["size"] == Value::Int(100)));
}

#[test]
fn threads_default_to_one() {
    let text = edit("threads: [1, 2]", "");
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "ok.yaml", &text);
    let plan = plan::build(&path, false, None).unwrap();
    assert_eq!(plan.points.len(), 3);
    assert!(plan.points.iter().all(|p| p["threads"] == Value::Int(1)));
}

#[test]
fn unknown_key_names_file_line_and_key() {
    let text = edit("repetitions: 2", "reptitions: 2");
    let (err, _dir, _) = plan_error(&text, None);
    eprintln!("{err}");
    assert_contains(
        &err,
        &["fig8.yaml:14:", "unknown field `reptitions`", "repetitions"],
    );
}

#[test]
fn unknown_nested_key_names_its_line() {
    let text = edit("seed: 7", "  sed: 7");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(&err, &["fig8.yaml:7:", "sed"]);
}

#[test]
fn wrong_type_names_line_and_key() {
    let text = edit("repetitions: 2", "repetitions: many");
    let (err, _dir, _) = plan_error(&text, None);
    eprintln!("{err}");
    assert_contains(&err, &["fig8.yaml:14:", "repetitions", "many"]);
}

#[test]
fn missing_field_is_named() {
    let text = edit("paper: mock paper", "");
    let (err, _dir, _) = plan_error(&text, None);
    eprintln!("{err}");
    assert_contains(&err, &["fig8.yaml", "missing field `paper`"]);
}

#[test]
fn unreadable_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.yaml");
    let err = config::load(&path, false).unwrap_err();
    assert_contains(&err.to_string(), &["absent.yaml", "cannot read"]);
    let err = plan::build(&path, false, None).unwrap_err();
    assert!(matches!(err, PlanError::Config(_)), "{err:?}");
}

#[test]
fn unknown_variant_lists_the_valid_ones() {
    let text = edit("variants: [slow, fast]", "variants: [slow, fastest]");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(
        &err,
        &[
            "fig8.yaml:8:18:",
            "unknown variant `fastest`",
            "slow, fast, wrong",
        ],
    );
}

#[test]
fn unknown_param_lists_the_valid_ones() {
    let text = edit("work: 1.5", "  wrok: 1.5");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(
        &err,
        &[
            "fig8.yaml:10:3:",
            "unknown parameter `wrok`",
            "threads, backend, size, work",
        ],
    );
}

#[test]
fn param_of_the_wrong_kind_is_rejected() {
    let text = edit("size: [1000, 2000, 4000]", "  size: [1000, 2.5, 4000]");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(&err, &["fig8.yaml:13:", "`size` must be an integer", "2.5"]);
}

#[test]
fn zero_threads_is_rejected() {
    let text = edit("threads: [1, 2]", "  threads: [0, 2]");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(
        &err,
        &["fig8.yaml:12:", "`threads` must be an integer >= 1"],
    );
}

#[test]
fn empty_sweep_list_is_rejected() {
    let text = edit("size: [1000, 2000, 4000]", "  size: []");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(&err, &["fig8.yaml:13:3:", "sweep list `size` is empty"]);
}

#[test]
fn missing_dataset_file_names_file_dir_and_manifest() {
    let text = edit("source: synthetic", "  source: dataset\n  file: corpus.bin");
    let data = tempfile::tempdir().unwrap();
    let (err, _dir, _) = plan_error(&text, Some(data.path()));
    assert_contains(
        &err,
        &[
            "fig8.yaml:7:",
            "corpus.bin",
            &data.path().display().to_string(),
            "MANIFEST.md",
        ],
    );
}

#[test]
fn dataset_without_data_dir_says_how_to_set_one() {
    let text = edit("source: synthetic", "  source: dataset\n  file: corpus.bin");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(&err, &["corpus.bin", "--data-dir", "PARBENCH_DATA"]);
}

#[test]
fn dataset_without_file_is_rejected() {
    let text = edit("source: synthetic", "  source: dataset");
    let data = tempfile::tempdir().unwrap();
    let (err, _dir, _) = plan_error(&text, Some(data.path()));
    assert_contains(&err, &["fig8.yaml:6:", "needs `file:`"]);
}

#[test]
fn present_dataset_file_is_resolved() {
    let text = edit("source: synthetic", "  source: dataset\n  file: corpus.bin");
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("corpus.bin"), b"x").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "ok.yaml", &text);
    let plan = plan::build(&path, false, Some(data.path())).unwrap();
    assert_eq!(plan.dataset, Some(data.path().join("corpus.bin")));
}

#[test]
fn unknown_family_lists_the_known_ones() {
    let text = edit("family: mock", "family: mocks");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(&err, &["fig8.yaml:4:", "unknown family `mocks`", "mock"]);
}

#[test]
fn equivalence_reference_must_be_run() {
    let text = edit("reference: slow", "  reference: wrong");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(&err, &["fig8.yaml:16:", "reference `wrong`", "slow, fast"]);
}

#[test]
fn claim_on_a_variant_not_run_points_at_the_claim() {
    let text = edit("denominator: fast", "    denominator: wrong");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(
        &err,
        &["fig8.yaml:27:18:", "claim `fast-is-faster`", "`wrong`"],
    );
}

#[test]
fn figure_with_an_unknown_column_points_at_the_figure() {
    let text = edit("y: wall_time_s", "    y: walltime");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(&err, &["fig8.yaml:22:", "unknown y column `walltime`"]);
}

#[test]
fn typo_in_the_quick_section_is_caught_without_quick() {
    let text = edit("size: [100]", "    sise: [100]");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(&err, &["fig8.yaml:31:", "unknown parameter `sise`"]);
}

#[test]
fn several_problems_are_reported_together() {
    let text = edit("repetitions: 2", "repetitions: 0");
    let text = text.replace("  work: 1.5", "  wrok: 1.5");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(
        &err,
        &[
            "fig8.yaml:14:",
            "repetitions",
            "fig8.yaml:10:",
            "wrok",
            "2 problems in",
        ],
    );
    assert!(err.contains("help:"), "{err}");
}

#[test]
fn misspelt_key_inside_a_claim_points_at_the_key_and_suggests_the_fix() {
    let text = edit("at_least: 50", "    at_leats: 50");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(
        &err,
        &[
            "fig8.yaml:28:5:",
            "unknown field `at_leats`",
            "did you mean `at_least`?",
        ],
    );
}

#[test]
fn claim_at_a_value_outside_the_grid_is_rejected() {
    let text = edit("at_least: 50", "    at_least: 50\n    at: {size: 3000}");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(
        &err,
        &["fig8.yaml:29:", "`at: {size: 3000}` matches no point"],
    );
}

#[test]
fn every_committed_experiment_is_valid_in_full_and_quick_form() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
    // Validation only asks that a dataset file exists: stand-ins let this run without the data.
    let data = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for family in std::fs::read_dir(&root).unwrap() {
        for entry in std::fs::read_dir(family.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    assert!(
        files.len() >= 20,
        "found only {} experiment files",
        files.len()
    );
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        for line in text.lines() {
            // The dataset (`file: NAME`) and the files a point reads beside it
            // (`test_file: NAME`, `embedding_corpus: NAME`).
            let Some((key, name)) = line.trim().split_once(": ") else {
                continue;
            };
            if key == "file" || key == "test_file" || key == "embedding_corpus" {
                std::fs::write(data.path().join(name.trim()), b"").unwrap();
            }
        }
        for quick in [false, true] {
            if let Err(err) = plan::build(path, quick, Some(data.path())) {
                panic!("{} (quick: {quick}) is invalid:\n{err}", path.display());
            }
        }
    }
}

#[test]
fn a_quick_claim_error_points_into_the_quick_section() {
    let text = format!(
        "{VALID}  claims:\n    - kind: ratio\n      name: q\n      numerator: nosuch\n      denominator: fast\n      at_least: 1.0\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "q.yaml", &text);
    let err = plan::build(&path, true, None).unwrap_err().to_string();
    assert_contains(&err, &["variant `nosuch` is not among the variants run"]);
    let line = text.lines().position(|l| l.contains("nosuch")).unwrap() + 1;
    assert_contains(&err, &[&format!(":{line}:")]);
    // The full run checks the quick claims too, so a typo there is found before CI runs it.
    let err = plan::build(&path, false, None).unwrap_err().to_string();
    assert_contains(&err, &["variant `nosuch`"]);
}

#[test]
fn an_mpi_backend_without_a_launcher_is_rejected() {
    let text = edit("threads: [1, 2]", "  backend: [local, mpi]");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(
        &err,
        &["fig8.yaml:12:", "`backend: mpi` needs a `launcher`"],
    );
}

#[test]
fn interleaved_points_cannot_include_mpi_points() {
    let text = edit("threads: [1, 2]", "  backend: [local, mpi]")
        + "launcher:\n  command: mpirun\ninterleave_points: true\n";
    let (err, _dir, _) = plan_error(&text, None);
    let line = text
        .lines()
        .position(|l| l.starts_with("interleave_points"))
        .unwrap()
        + 1;
    assert_contains(
        &err,
        &[
            &format!("fig8.yaml:{line}:"),
            "`interleave_points` runs every point in this process",
        ],
    );
}

#[test]
fn an_unknown_backend_is_rejected() {
    let text = edit("threads: [1, 2]", "  backend: [local, gpu]");
    let (err, _dir, _) = plan_error(&text, None);
    assert_contains(
        &err,
        &[
            "fig8.yaml:12:",
            "`backend` must be `local` or `mpi`, got gpu",
        ],
    );
}

#[test]
fn a_launcher_makes_mpi_points_valid_and_checks_its_own_keys() {
    let with_launcher = |launcher: &str| {
        edit("threads: [1, 2]", "  backend: [local, mpi]") + &format!("launcher:\n{launcher}\n")
    };
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "ok.yaml",
        &with_launcher("  args: [--oversubscribe]"),
    );
    let plan = plan::build(&path, false, None).unwrap();
    let mpi: Vec<bool> = plan.points.iter().map(plan::is_mpi_point).collect();
    assert_eq!(mpi, [false, false, false, true, true, true]);
    let launcher = plan.config.launcher.as_ref().unwrap();
    assert_eq!(launcher.command, "mpirun");
    assert_eq!(launcher.args, ["--oversubscribe"]);
    let (err, _dir, _) = plan_error(&with_launcher("  np: 4"), None);
    assert_contains(&err, &["fig8.yaml:", "np"]);
}
