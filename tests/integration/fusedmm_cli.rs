//! End-to-end tests of `parbench fusedmm` against the built binary (tiny ER and `.mtx` inputs),
//! and of the FusedMM family through the harness's plan and runner.

use crate::support::{parbench, stderr};
use parbench::exec::runner::{self, ProgressMode};
use parbench::family::Value;
use std::path::Path;
use std::process::Output;

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "failed: {}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("stdout is one JSON object")
}

#[test]
fn er_run_reports_counts_per_phase_equal_to_the_model() {
    let o = parbench(&[
        "fusedmm",
        "--er",
        "48,3",
        "--r",
        "4",
        "--kernel",
        "fusedmma",
        "--algorithm",
        "1.5d-dense-shift",
        "--strategy",
        "reuse",
        "--ranks",
        "6",
        "--replication",
        "2",
        "--json",
    ]);
    let v = json(&o);
    assert_eq!(v["algorithm"], "1.5d-dense-shift");
    assert_eq!(v["strategy"], "reuse");
    assert_eq!(v["ranks"], 6);
    assert_eq!(v["nnz"], 48 * 3);
    assert_eq!(v["words_sent_per_rank"].as_array().unwrap().len(), 6);
    for phase in ["replication", "propagation", "reduction", "total"] {
        let ph = &v["phases"][phase];
        for key in [
            "words_max",
            "words_mean",
            "messages_max",
            "model_words",
            "model_messages",
        ] {
            assert!(ph[key].is_number(), "{phase}.{key} missing: {ph}");
        }
        // Dense shifting is exact on any pattern when 48 rows split evenly over 6 ranks.
        assert_eq!(ph["words_max"], ph["model_words"], "{phase}");
        assert_eq!(ph["messages_max"], ph["model_messages"], "{phase}");
    }
    assert_eq!(v["model_exact"], true);
    assert!(v["phases"]["total"]["words_max"].as_f64().unwrap() > 0.0);
    assert!(v["times_s"]["run"].as_f64().unwrap() >= 0.0);
}

const TINY_MTX: &str = "\
%%MatrixMarket matrix coordinate real general
% a 4 x 4 example
4 4 6
1 1 2.0
1 3 -1.0
2 2 0.5
3 4 1.5
4 1 3.0
4 4 1.0
";

#[test]
fn mtx_input_writes_an_output_that_reads_back_and_matches_the_serial_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let mtx = dir.path().join("s.mtx");
    std::fs::write(&mtx, TINY_MTX).unwrap();
    for (kernel, algorithm, strategy, ranks, c) in [
        ("sddmm", "1.5d-sparse-shift", "none", "2", "1"),
        ("fusedmmb", "2.5d-sparse-replicate", "none", "4", "1"),
        ("spmma", "1d", "none", "4", "1"),
    ] {
        let out = dir.path().join(format!("{kernel}.mtx"));
        let o = parbench(&[
            "fusedmm",
            "--matrix",
            mtx.to_str().unwrap(),
            "--r",
            "3",
            "--kernel",
            kernel,
            "--algorithm",
            algorithm,
            "--strategy",
            strategy,
            "--ranks",
            ranks,
            "--replication",
            c,
            "--seed",
            "7",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{kernel}: {}", stderr(&o));
        assert!(stderr(&o).contains("words max"), "{}", stderr(&o));
        let got = fusedmm::mtx::read_path(&out).expect("the output parses as MatrixMarket");
        // The same S, A and B the command used: S from the file, A and B from seed 7.
        let s = fusedmm::mtx::read_path(&mtx).unwrap();
        let fusedmm::mtx::MatrixFile::Sparse(s) = s else {
            panic!("the input is sparse")
        };
        let a = fusedmm::Dense::random(4, 3, 8);
        let b = fusedmm::Dense::random(4, 3, 9);
        let problem = fusedmm::Problem::new(s, a, b).unwrap();
        let want = fusedmm::local::local_kernel(
            &problem,
            fusedmm::Kernel::from_name(kernel).unwrap(),
            fusedmm::Par::Seq,
        )
        .unwrap();
        let (got, want) = match (got, want) {
            (fusedmm::mtx::MatrixFile::Sparse(g), fusedmm::KernelOutput::Sparse(w)) => {
                assert_eq!(g.indices(), w.indices());
                (g.values().to_vec(), w.values().to_vec())
            }
            (fusedmm::mtx::MatrixFile::Dense(g), fusedmm::KernelOutput::Dense(w)) => {
                assert_eq!((g.rows(), g.cols()), (w.rows(), w.cols()));
                (g.data().to_vec(), w.data().to_vec())
            }
            _ => panic!("{kernel}: wrong output format"),
        };
        let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-12 * scale, "{kernel}: {g} vs {w}");
        }
    }
}

#[test]
fn permuted_run_gives_the_unpermuted_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut outs = Vec::new();
    for permute in [false, true] {
        let out = dir.path().join(format!("out-{permute}.mtx"));
        let mut args = vec![
            "fusedmm",
            "--er",
            "30,4",
            "--r",
            "2",
            "--kernel",
            "fusedmmb",
            "--algorithm",
            "1.5d-dense-shift",
            "--strategy",
            "fusion",
            "--ranks",
            "4",
            "--replication",
            "2",
            "--out",
            out.to_str().unwrap(),
        ];
        if permute {
            args.push("--permute");
        }
        let o = parbench(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let fusedmm::mtx::MatrixFile::Dense(d) = fusedmm::mtx::read_path(&out).unwrap() else {
            panic!("dense output expected")
        };
        outs.push(d);
    }
    let scale = outs[0].data().iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (a, b) in outs[0].data().iter().zip(outs[1].data()) {
        assert!((a - b).abs() <= 1e-12 * scale);
    }
}

#[test]
fn impossible_grid_says_which_replication_factors_work() {
    let o = parbench(&[
        "fusedmm",
        "--er",
        "16,2",
        "--r",
        "2",
        "--algorithm",
        "2.5d-dense-replicate",
        "--ranks",
        "8",
        "--replication",
        "4",
    ]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("p = 8"), "{err}");
    assert!(err.contains("[2, 8]"), "{err}");
    let o = parbench(&[
        "fusedmm",
        "--er",
        "16,2",
        "--r",
        "2",
        "--algorithm",
        "1.5d-dense-shift",
        "--ranks",
        "6",
        "--replication",
        "4",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("[1, 2, 3, 6]"), "{}", stderr(&o));
    // A strategy the algorithm does not offer is refused with the ones it does.
    let o = parbench(&[
        "fusedmm",
        "--er",
        "16,2",
        "--r",
        "2",
        "--algorithm",
        "1.5d-sparse-shift",
        "--strategy",
        "fusion",
        "--ranks",
        "4",
        "--replication",
        "2",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("fusion"), "{}", stderr(&o));
}

#[test]
fn malformed_mtx_is_reported_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let mtx = dir.path().join("bad.mtx");
    std::fs::write(
        &mtx,
        "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n2 x 4.0\n",
    )
    .unwrap();
    let o = parbench(&[
        "fusedmm",
        "--matrix",
        mtx.to_str().unwrap(),
        "--r",
        "2",
        "--ranks",
        "1",
    ]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("line 4"), "{err}");
    assert!(err.contains("bad.mtx"), "{err}");
}

#[test]
fn missing_inputs_are_explained() {
    let o = parbench(&["fusedmm", "--r", "2"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--matrix"), "{}", stderr(&o));
    let o = parbench(&["fusedmm", "--er", "10,20", "--r", "2"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot exceed ROWS"), "{}", stderr(&o));
    let o = parbench(&["fusedmm", "--er", "10,2"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--r"), "{}", stderr(&o));
}

const CONFIG: &str = r#"
name: fusedmm_tiny
paper: test
reproduces: test
family: fusedmm
data: { source: synthetic, seed: 3 }
params:
  rows: 48
  nnz_per_row: 4
  r: 6
  ranks: 4
variants:
  - local
  - 1d
  - 1.5d-dense-shift strategy=none
  - 1.5d-dense-shift strategy=reuse
  - 1.5d-dense-shift strategy=fusion
  - 1.5d-sparse-shift strategy=none
  - 1.5d-sparse-shift strategy=reuse
  - 2.5d-dense-replicate strategy=none
  - 2.5d-dense-replicate strategy=reuse
  - 2.5d-sparse-replicate
sweep:
  kernel: [sddmm, spmmb, fusedmma]
  replication: [1, 0]
repetitions: 1
warmup: 0
equivalence: { reference: local, rel_tol: 1.0e-12 }
claims:
  - kind: equivalence
    name: all agree
    max_rel_error: 1.0e-12
  - kind: ratio
    name: dense shifting matches the model exactly
    column: metric_model_exact
    numerator: 1.5d-dense-shift strategy=none
    denominator: local
    at_least: 1
    at_most: 1
"#;

#[test]
fn family_runs_through_plan_and_runner_with_equivalence_against_local() {
    let dir = tempfile::tempdir().unwrap();
    let plan =
        parbench::experiment::plan::build_from_str(CONFIG, Path::new("tiny.yaml"), false, None)
            .expect("plan");
    let summary = runner::run(&plan, &dir.path().join("run"), false, ProgressMode::Lines)
        .expect("the run completes");
    assert!(summary.passed(), "{:?}", summary.claims);
    assert_eq!(summary.rows.len(), 6 * 10);
    for row in summary.rows.iter().filter(|r| r.variant != "local") {
        let err = row.equiv_rel_error.expect("compared with local");
        assert!(err <= 1e-12, "{} {:?}: {err}", row.variant, row.params);
        assert!(row.metrics.contains_key("words_max_propagation"));
        assert!(row.metrics["phi"] > 0.0);
        if row.params["replication"] == Value::Int(0) {
            // Best c: a valid replication factor of 4 ranks, at most as many words as c = 1.
            let c = row.metrics["replication_used"];
            assert!([1.0, 2.0, 4.0].contains(&c), "{c}");
            let at_one = summary
                .rows
                .iter()
                .find(|o| {
                    o.variant == row.variant
                        && o.params["kernel"] == row.params["kernel"]
                        && o.params["replication"] == Value::Int(1)
                })
                .unwrap();
            assert!(row.metrics["words_max"] <= at_one.metrics["words_max"]);
        }
    }
}
