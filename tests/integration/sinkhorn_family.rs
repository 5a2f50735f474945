//! The Sinkhorn-WMD family through the harness: every variant the crate registers, on a small
//! seeded synthetic problem, over one and two threads, agrees with the dense reference, reports
//! its phases and rates, and an independent hand-made check of the plan's expansion holds.

use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;

fn experiment(variants: &[&str]) -> String {
    format!(
        "name: sinkhorn_family_under_test
paper: none
reproduces: none
family: sinkhorn
data: {{ source: synthetic, seed: 7 }}
params:
  vocab: 3000
  dim: 16
  docs: 80
  words_per_doc: 9
  query_words: 6
  lambda: 10.0
  iters: 12
variants: [{}]
sweep:
  threads: [1, 2]
repetitions: 2
warmup: 0
equivalence: {{ reference: dense, rel_tol: 1.0e-5 }}
claims:
  - {{ kind: equivalence, name: every variant agrees with dense }}
",
        variants.join(", ")
    )
}

#[test]
fn every_registered_variant_runs_in_the_harness_and_agrees_with_dense() {
    let variants = sinkhorn::variant_names();
    assert!(variants.contains(&"dense"), "{variants:?}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sinkhorn.yaml");
    std::fs::write(&file, experiment(&variants)).unwrap();
    let plan = plan::build(&file, false, None).unwrap();
    assert_eq!(plan.points.len(), 2, "one point per thread count");
    let summary = runner::run(&plan, &dir.path().join("run"), false, ProgressMode::Silent)
        .expect("the sweep runs");

    assert_eq!(summary.rows.len(), 2 * variants.len() * 2);
    for claim in &summary.claims {
        assert!(claim.passed, "{}: {}", claim.name, claim.detail);
    }
    for row in &summary.rows {
        assert!(row.wall_time_s > 0.0, "{row:?}");
        if row.variant != "dense" {
            let err = row
                .equiv_rel_error
                .unwrap_or_else(|| panic!("no equivalence error recorded: {row:?}"));
            // The experiment's tolerance admits the f32 variant; the f64 ones are held to theirs.
            let tol = match sinkhorn::variant(&row.variant).unwrap().precision() {
                sinkhorn::Precision::F64 => 1e-10,
                sinkhorn::Precision::F32 => 1e-5,
            };
            assert!(err <= tol, "{} differs from dense by {err:e}", row.variant);
        }
        // The phases of the paper's breakdown are recorded (their values are timings: only
        // their sign is checked).
        assert!(!row.phases_s.is_empty(), "{row:?}");
        for (phase, seconds) in &row.phases_s {
            assert!(*seconds >= 0.0, "{phase}: {seconds}");
        }
    }
}

#[test]
fn a_zero_sized_problem_is_refused_by_the_plan_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        experiment(&["dense", "fused"]).replace("dim: 16", "dim: 0"),
    )
    .unwrap();
    let err = plan::build(&file, false, None).unwrap_err().to_string();
    assert!(err.contains("dim"), "{err}");
    assert!(err.contains(&format!("{}:", file.display())), "{err}");
}
