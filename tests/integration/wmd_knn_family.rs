//! kNN classification by WMD through the harness (`wmd_knn`): on a hand-made data dir whose
//! single-word queries each have a training document of the same single word (at distance 0,
//! whatever the embeddings), every variant agrees and classifies them all right at k = 1; a
//! missing file beside the dataset is a plan error at its parameter, before anything runs.

use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;
use std::path::Path;

/// Writes the data dir: training documents, test documents and a text corpus that has every
/// word of both.
fn data_dir(dir: &Path) {
    std::fs::write(
        dir.join("train.txt"),
        "crude\toil\ncrude\tbarrel\ncrude\toil barrel crude\nmoney\tbank\nmoney\trate\nmoney\tbank rate loan\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("test.txt"),
        "crude\toil\nmoney\trate\ncrude\tbarrel\nmoney\tbank",
    )
    .unwrap();
    let sentence = "oil barrel crude prices rose bank rate loan interest fell\n";
    std::fs::write(dir.join("corpus.txt"), sentence.repeat(50)).unwrap();
}

fn experiment(extra: &str) -> String {
    format!(
        "name: wmd_knn_under_test
paper: none
reproduces: none
family: wmd_knn
data: {{ source: dataset, file: train.txt, seed: 5 }}
params:
  test_file: test.txt
  embedding_corpus: corpus.txt
  dim: 8
  min_count: 1
{extra}variants: [doc-major, fused-par, sparse, fused, dense]
sweep:
  threads: [1, 2]
repetitions: 1
warmup: 0
equivalence: {{ reference: dense, rel_tol: 1.0e-10 }}
claims:
  - {{ kind: equivalence, name: every variant agrees with dense }}
"
    )
}

/// Runs the experiment with `extra` parameters on a fresh data dir.
fn run(extra: &str) -> runner::RunSummary {
    let dir = tempfile::tempdir().unwrap();
    data_dir(dir.path());
    let file = dir.path().join("knn.yaml");
    std::fs::write(&file, experiment(extra)).unwrap();
    let plan = plan::build(&file, false, Some(dir.path())).unwrap();
    runner::run(&plan, &dir.path().join("run"), false, ProgressMode::Silent)
        .expect("the sweep runs")
}

#[test]
fn every_variant_classifies_the_hand_made_queries_and_agrees_with_dense() {
    let summary = run("");
    assert_eq!(summary.rows.len(), 2 * 5);
    for claim in &summary.claims {
        assert!(claim.passed, "{}: {}", claim.name, claim.detail);
    }
    for row in &summary.rows {
        let m = |name: &str| {
            *row.metrics
                .get(name)
                .unwrap_or_else(|| panic!("no {name}: {row:?}"))
        };
        assert_eq!(m("docs"), 6.0);
        assert_eq!(m("test_docs"), 4.0);
        // Rows: every word a document uses (oil, barrel, crude, bank, rate, loan).
        assert_eq!(m("vocab"), 6.0);
        // Each query's own word is a training document at distance 0.
        assert_eq!(m("test_error_k1_pct"), 0.0, "{}", row.variant);
        assert_eq!(m("test_error_min_pct"), 0.0);
        // Three training documents a class: the majority is the first class, crude.
        assert_eq!(m("majority_error_pct"), 50.0);
        assert_eq!(m("oov_token_pct"), 0.0);
        assert!(m("queries_per_s") > 0.0);
        // k = 19 votes with all six: a tie, broken by the nearest five, then four, ...
        assert!((0.0..=100.0).contains(&m("test_error_k19_pct")));
        assert!(row.phases_s.contains_key("loop") && row.phases_s.contains_key("classify"));
        assert!(m("wmd_s") > 0.0 && m("wmd_s") <= row.wall_time_s);
        if row.variant != "dense" {
            assert!(row.equiv_rel_error.is_some_and(|e| e <= 1e-10), "{row:?}");
        }
    }
}

#[test]
fn batches_of_queries_give_the_distances_of_queries_alone() {
    // Four test documents in batches of 3 and 1: the document-major variants share the
    // distance phase (reported as `kernels`), the others solve each query in turn; every one
    // still agrees with dense and classifies as alone.
    let summary = run("  batch: 3\n");
    for claim in &summary.claims {
        assert!(claim.passed, "{}: {}", claim.name, claim.detail);
    }
    for row in &summary.rows {
        assert_eq!(row.metrics["test_error_k1_pct"], 0.0, "{}", row.variant);
        let shared = row.phases_s.contains_key("kernels");
        assert_eq!(shared, row.variant == "doc-major", "{row:?}");
    }
}

#[test]
fn a_batch_of_no_queries_is_a_plan_error() {
    let dir = tempfile::tempdir().unwrap();
    data_dir(dir.path());
    let file = dir.path().join("knn.yaml");
    std::fs::write(&file, experiment("  batch: 0\n")).unwrap();
    let err = format!(
        "{:#}",
        plan::build(&file, false, Some(dir.path())).unwrap_err()
    );
    assert!(err.contains("batch"), "{err}");
}

#[test]
fn a_subset_takes_documents_from_the_whole_file() {
    let summary = run("  train_docs: 2\n  test_docs: 2\n");
    for row in &summary.rows {
        // Training lines 1 and 4 (oil, bank); test lines 1 and 3 (oil, barrel): barrel is a
        // row that only a query uses.
        assert_eq!(row.metrics["docs"], 2.0);
        assert_eq!(row.metrics["test_docs"], 2.0);
        assert_eq!(row.metrics["vocab"], 3.0);
        assert_eq!(row.metrics["majority_error_pct"], 0.0);
    }
}

#[test]
fn a_missing_file_beside_the_dataset_is_a_plan_error_at_its_parameter() {
    let dir = tempfile::tempdir().unwrap();
    data_dir(dir.path());
    let file = dir.path().join("knn.yaml");
    let text = experiment("").replace("test_file: test.txt", "test_file: tset.txt");
    std::fs::write(&file, &text).unwrap();
    let err = plan::build(&file, false, Some(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`test_file`") && err.contains("tset.txt"),
        "{err}"
    );
    // At the line that names it.
    let line = text.lines().position(|l| l.contains("tset.txt")).unwrap() + 1;
    assert!(err.contains(&format!(":{line}:")), "{err}");
    assert!(!dir.path().join("run").exists());
}
