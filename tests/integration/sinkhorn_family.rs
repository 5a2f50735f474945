//! The Sinkhorn-WMD family through the harness: every variant the crate registers, on a small
//! seeded synthetic problem, over one and two threads, agrees with the dense reference, reports
//! its phases and rates, and an independent hand-made check of the plan's expansion holds.

use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;
use std::path::{Path, PathBuf};

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

/// The plan's error for the experiment `text`, written into `dir` (its data dir too), and the
/// file's path.
fn plan_error(dir: &Path, text: &str) -> (String, PathBuf) {
    let file = dir.join("bad.yaml");
    std::fs::write(&file, text).unwrap();
    let err = plan::build(&file, false, Some(dir))
        .unwrap_err()
        .to_string();
    (err, file)
}

#[test]
fn a_zero_sized_problem_is_refused_by_the_plan_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let text = experiment(&["dense", "fused"]).replace("dim: 16", "dim: 0");
    let (err, file) = plan_error(dir.path(), &text);
    assert!(err.contains("dim"), "{err}");
    assert!(err.contains(&format!("{}:", file.display())), "{err}");
}

#[test]
fn several_queries_alone_and_in_batches_give_every_query_its_own_distances() {
    // Five queries against one collection, one at a time and in batches of two (the last
    // alone): every variant agrees with dense at both, and the two runs of a variant give the
    // same distances, query by query (each batch's queries are their own solves).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("batch.yaml");
    let text = experiment(&["dense", "fused", "doc-major", "doc-major-f32"])
        .replace("  iters: 12\n", "  iters: 12\n  queries: 5\n")
        .replace(
            "  threads: [1, 2]\n",
            "  threads: [1, 2]\n  batch: [1, 2]\n",
        );
    std::fs::write(&file, text).unwrap();
    let plan = plan::build(&file, false, None).unwrap();
    let summary = runner::run(&plan, &dir.path().join("run"), false, ProgressMode::Silent)
        .expect("the sweep runs");
    assert_eq!(summary.rows.len(), 4 * 4 * 2);
    for claim in &summary.claims {
        assert!(claim.passed, "{}: {}", claim.name, claim.detail);
    }
    for row in &summary.rows {
        assert!(row.metrics["queries_per_s"] > 0.0, "{row:?}");
        // The document-major variants share the distance phase in a batch (`kernels`).
        let batched = row
            .params
            .get("batch")
            .is_some_and(|b| b.to_string() == "2");
        let shared = batched && row.variant.starts_with("doc-major");
        assert_eq!(row.phases_s.contains_key("kernels"), shared, "{row:?}");
    }
    let flops = |variant: &str, batch: &str| -> f64 {
        let param = |r: &parbench::family::ResultRow, key: &str| {
            r.params.get(key).map(|v| v.to_string()).unwrap_or_default()
        };
        summary
            .rows
            .iter()
            .find(|r| {
                r.variant == variant && param(r, "batch") == batch && param(r, "threads") == "1"
            })
            .map(|r| r.metrics["flops"])
            .unwrap_or_else(|| panic!("no row of {variant} at batch {batch}"))
    };
    // Sharing a word computes its distances once: a batch does less work than its queries
    // alone, the dense variant (one query at a time either way) the same.
    assert!(flops("doc-major", "2") < flops("doc-major", "1"));
    assert_eq!(flops("dense", "2"), flops("dense", "1"));
}

#[test]
fn a_batch_of_no_queries_is_refused_by_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let text = experiment(&["doc-major"]).replace("  iters: 12\n", "  iters: 12\n  batch: 0\n");
    let (err, _) = plan_error(dir.path(), &text);
    assert!(err.contains("batch"), "{err}");
}

#[test]
fn several_queries_on_a_dataset_are_refused_by_the_plan_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("train.txt"),
        "crude\toil prices rose\nmoney\tbank rate fell\n",
    )
    .unwrap();
    let text = experiment(&["doc-major"])
        .replace(
            "data: { source: synthetic, seed: 7 }",
            "data: { source: dataset, file: train.txt, seed: 7 }",
        )
        .replace("  iters: 12\n", "  iters: 12\n  queries: 4\n");
    let (err, file) = plan_error(dir.path(), &text);
    assert!(err.contains("queries = 4"), "{err}");
    assert!(err.contains(&format!("{}:", file.display())), "{err}");
}
