//! The `fusedmm-apps` family (ALS and GAT on every backend) and the `local-unfused` variant of
//! the `fusedmm` family, through the harness's plan and runner on tiny inputs; and the FusedMM
//! experiment files this adds, planned in full and quick form.

use parbench::exec::runner::{self, ProgressMode};
use parbench::family::{ResultRow, Value};
use std::path::Path;

fn run(config: &str) -> runner::RunSummary {
    let dir = tempfile::tempdir().unwrap();
    let plan =
        parbench::experiment::plan::build_from_str(config, Path::new("tiny.yaml"), false, None)
            .expect("plan");
    runner::run(&plan, &dir.path().join("run"), false, ProgressMode::Lines)
        .expect("the run completes")
}

fn row<'r>(rows: &'r [ResultRow], app: &str, variant: &str) -> &'r ResultRow {
    rows.iter()
        .find(|r| r.variant == variant && r.params["app"] == Value::Str(app.into()))
        .unwrap_or_else(|| panic!("no row for {app} {variant}"))
}

const APPS: &str = r#"
name: fusedmm_apps_tiny
paper: test
reproduces: test
family: fusedmm-apps
data: { source: synthetic, seed: 5 }
params:
  rows: 40
  cols: 36
  nnz_per_row: 4
  r: 4
  cg_iterations: 3
  outer_iterations: 2
  heads: 2
  features: 5
  ranks: 8
  replication: 2
sweep:
  app: [als, gat]
variants:
  - serial
  - 1d
  - 1.5d-dense-shift strategy=none
  - 1.5d-dense-shift strategy=reuse
  - 1.5d-dense-shift strategy=fusion
  - 1.5d-sparse-shift strategy=none
  - 1.5d-sparse-shift strategy=reuse
  - 2.5d-dense-replicate strategy=none
  - 2.5d-dense-replicate strategy=reuse
  - 2.5d-sparse-replicate
repetitions: 1
warmup: 0
equivalence: { reference: serial, rel_tol: 1.0e-10 }
claims:
  - kind: equivalence
    name: all agree
    max_rel_error: 1.0e-10
  - kind: ratio
    name: replication reuse sends fewer words in ALS
    column: metric_words_sent
    numerator: 1.5d-dense-shift strategy=reuse
    denominator: 1.5d-dense-shift strategy=none
    at_most: 0.99
    at: { app: als }
"#;

#[test]
fn applications_agree_with_serial_on_every_backend_and_report_their_breakdown() {
    let summary = run(APPS);
    assert!(summary.passed(), "{:?}", summary.claims);
    assert_eq!(summary.rows.len(), 2 * 10);
    for r in &summary.rows {
        let app = r.params["app"].as_str().unwrap();
        let kinds: &[&str] = if app == "als" {
            &["fusedmm", "spmm", "sddmm"]
        } else {
            &["sddmm", "spmm"]
        };
        for kind in kinds {
            for part in ["compute", "comm", "setup"] {
                let key = format!("{kind}_{part}");
                assert!(r.phases_s[&key] >= 0.0, "{app} {}: {key}", r.variant);
            }
            assert!(r.metrics[&format!("{kind}_calls")] >= 1.0);
        }
        assert!(r.phases_s.contains_key("other"));
        if r.variant == "serial" {
            assert_eq!(r.metrics["words_sent"], 0.0);
            assert_eq!(r.metrics["sparse_comm_s"], 0.0);
            assert!(r.equiv_rel_error.is_none());
        } else {
            assert!(r.metrics["words_sent"] > 0.0, "{app} {}", r.variant);
            let err = r.equiv_rel_error.expect("compared with serial");
            assert!(err <= 1e-10, "{app} {}: {err}", r.variant);
        }
        // Exactly these phases, each a duration; the words sent are the kernels' words added
        // up. (How the phases compare with the wall time is timing: not asserted.)
        let mut expected: Vec<String> = kinds
            .iter()
            .flat_map(|k| ["compute", "comm", "setup"].map(|p| format!("{k}_{p}")))
            .collect();
        expected.push("other".into());
        if app == "gat" {
            expected.extend(["projection".into(), "softmax".into()]);
        }
        expected.sort();
        let names: Vec<&String> = r.phases_s.keys().collect();
        assert_eq!(
            names,
            expected.iter().collect::<Vec<_>>(),
            "{app} {}",
            r.variant
        );
        for (name, v) in &r.phases_s {
            assert!(
                v.is_finite() && *v >= 0.0,
                "{app} {}: {name} {v}",
                r.variant
            );
        }
        let by_kind: f64 = kinds
            .iter()
            .map(|k| r.metrics[&format!("{k}_words_sent")])
            .sum();
        assert_eq!(r.metrics["words_sent"], by_kind, "{app} {}", r.variant);
    }
    // ALS: 2 outer iterations x 2 sides x (3 CG + 1 initial residual) FusedMMs, a loss per
    // half step plus the first, and the loss goes down.
    let als = row(&summary.rows, "als", "serial");
    assert_eq!(als.metrics["fusedmm_calls"], 16.0);
    assert_eq!(als.metrics["sddmm_calls"], 5.0);
    assert!(als.metrics["final_loss"] < als.metrics["initial_loss"]);
    assert_eq!(als.metrics["ranks_used"], 1.0);
    // The 1D baseline always runs without replication.
    assert_eq!(
        row(&summary.rows, "gat", "1d").metrics["replication_used"],
        1.0
    );
    assert_eq!(
        row(&summary.rows, "gat", "1.5d-dense-shift strategy=none").metrics["replication_used"],
        2.0
    );
    // GAT has no FusedMM, so the strategy changes nothing it sends.
    let gat_none = row(&summary.rows, "gat", "1.5d-dense-shift strategy=none");
    let gat_fusion = row(&summary.rows, "gat", "1.5d-dense-shift strategy=fusion");
    assert_eq!(
        gat_none.metrics["words_sent"],
        gat_fusion.metrics["words_sent"]
    );
    // 2 heads: one SDDMM and one SpMM each.
    assert_eq!(gat_none.metrics["sddmm_calls"], 2.0);
    assert_eq!(gat_none.metrics["spmm_calls"], 2.0);
}

#[test]
fn an_impossible_grid_is_refused_by_the_plan_with_the_algorithm_named() {
    let config = APPS
        .replace("replication: 2", "replication: 3")
        .replace("  - 1d\n", "");
    let err =
        parbench::experiment::plan::build_from_str(&config, Path::new("bad.yaml"), false, None)
            .err()
            .map(|e| e.to_string())
            .expect("c = 3 does not divide p = 8: refused before anything runs");
    assert!(err.contains("1.5d-dense-shift"), "{err}");
    assert!(err.contains("replication"), "{err}");
}

const UNFUSED: &str = r#"
name: fused_vs_unfused_tiny
paper: test
reproduces: test
family: fusedmm
data: { source: synthetic, seed: 9 }
params:
  rows: 50
  cols: 40
  r: 5
sweep:
  kernel: [sddmm, spmma, spmmb, fusedmma, fusedmmb]
  nnz_per_row: [1, 6]
variants: [local, local-unfused]
repetitions: 2
warmup: 0
equivalence: { reference: local-unfused, rel_tol: 1.0e-12 }
claims:
  - kind: equivalence
    name: fused equals unfused
    max_rel_error: 1.0e-12
"#;

#[test]
fn fused_local_kernels_equal_sddmm_then_spmm_through_the_runner() {
    let summary = run(UNFUSED);
    assert!(summary.passed(), "{:?}", summary.claims);
    assert_eq!(summary.rows.len(), 5 * 2 * 2 * 2);
    for r in &summary.rows {
        assert!(r.metrics["gflop_per_s"] >= 0.0);
        assert_eq!(r.metrics["words_max"], 0.0);
        if r.variant == "local" {
            let err = r.equiv_rel_error.expect("compared with local-unfused");
            assert!(err <= 1e-12, "{:?}: {err}", r.params);
        }
    }
}

#[test]
fn the_experiment_files_plan_in_full_and_quick_form() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, full_points, quick_points) in [
        ("local_fused_vs_unfused.yaml", 18, 8),
        ("fig9_applications.yaml", 2, 2),
    ] {
        let path = root.join("experiments/fusedmm").join(file);
        for (quick, want) in [(false, full_points), (true, quick_points)] {
            let plan = parbench::experiment::plan::build(&path, quick, None)
                .unwrap_or_else(|e| panic!("{file} (quick {quick}): {e}"));
            assert_eq!(plan.points.len(), want, "{file} (quick {quick})");
        }
    }
}
