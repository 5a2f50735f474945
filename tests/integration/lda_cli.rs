//! End-to-end tests of `parbench lda train` against the built binary (tiny UCI corpora in a
//! temporary folder), and of the LDA family driven through the harness's plan and runner on a
//! tiny synthetic corpus.

use crate::support::{parbench, stderr, stdout};
use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;
use parbench::results;
use std::path::{Path, PathBuf};
use std::process::Output;

/// 4 documents over 6 words: two "pets" documents, two "vehicles" documents; 30 tokens.
const DOCWORD: &str = "\
4
6
10
1 1 3
1 2 4
2 1 2
2 2 3
2 3 1
3 4 5
3 5 4
4 4 2
4 5 3
4 6 3
";
const TOKENS: u64 = 30;
const VOCAB: &str = "cat\ndog\nfish\ncar\nbus\ntruck\n";

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temporary folder");
        std::fs::write(dir.path().join("docword.tiny.txt"), DOCWORD).expect("write docword");
        std::fs::write(dir.path().join("vocab.tiny.txt"), VOCAB).expect("write vocab");
        Fixture { dir }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn arg(&self, name: &str) -> String {
        self.path(name).to_str().expect("UTF-8 path").to_string()
    }
}

/// `parbench lda train --uci <tiny> --vocab <tiny>` with small settings, plus `extra`.
fn train(fx: &Fixture, extra: &[&str]) -> Output {
    let docword = fx.arg("docword.tiny.txt");
    let vocab = fx.arg("vocab.tiny.txt");
    let mut args = vec![
        "lda",
        "train",
        "--uci",
        &docword,
        "--vocab",
        &vocab,
        "--topics",
        "2",
        "--iters",
        "20",
        "--workers",
        "2",
        "--seed",
        "7",
    ];
    args.extend_from_slice(extra);
    parbench(&args)
}

#[test]
fn train_prints_one_line_of_top_words_per_topic() {
    let fx = Fixture::new();
    for variant in lda::variant_names() {
        let out = train(&fx, &["--variant", variant, "--top-words", "3"]);
        assert!(out.status.success(), "{variant}: {}", stderr(&out));
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{variant}: {text}");
        for (k, line) in lines.iter().enumerate() {
            let words = line
                .strip_prefix(&format!("topic {k}: "))
                .unwrap_or_else(|| panic!("{variant}: unexpected line {line:?}"));
            let words: Vec<&str> = words.split(' ').collect();
            assert!(!words.is_empty() && words.len() <= 3, "{variant}: {line}");
            for w in words {
                assert!(VOCAB.lines().any(|v| v == w), "{variant}: unknown word {w}");
            }
        }
        assert!(stderr(&out).contains("final log-likelihood"), "{variant}");
    }
}

#[test]
fn json_is_one_object_with_the_run_summary() {
    let fx = Fixture::new();
    let out = train(
        &fx,
        &[
            "--variant",
            "async",
            "--json",
            "--checkpoint",
            "1",
            "--likelihood-every",
            "5",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.trim().lines().count(), 1, "one line of JSON: {text}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("stdout is JSON");
    for key in [
        "final_loglik",
        "tokens_per_second",
        "workers",
        "merges",
        "params",
        "corpus",
        "top_words",
        "loglik_trace",
    ] {
        assert!(v.get(key).is_some(), "missing key {key}: {v}");
    }
    let loglik = v["final_loglik"].as_f64().expect("a number");
    assert!(loglik.is_finite() && loglik < 0.0, "{loglik}");
    assert_eq!(v["corpus"]["tokens"].as_u64(), Some(TOKENS));
    assert_eq!(v["params"]["topics"].as_u64(), Some(2));
    assert_eq!(v["params"]["checkpoint_docs"].as_u64(), Some(1));
    assert_eq!(v["params"]["workers"].as_u64(), Some(2));
    let workers = v["workers"].as_array().expect("an array");
    assert_eq!(workers.len(), 2);
    for w in workers {
        for key in ["sampling_s", "sending_s", "waiting_s", "exchanges"] {
            assert!(w.get(key).is_some(), "worker misses {key}: {w}");
        }
    }
    let sampled: u64 = workers
        .iter()
        .map(|w| w["tokens_sampled"].as_u64().unwrap())
        .sum();
    assert_eq!(
        sampled,
        20 * TOKENS,
        "every token sampled once per iteration"
    );
    assert!(v["merges"].as_u64().unwrap() > 0);
    // Likelihood every 5 of 20 iterations.
    assert_eq!(v["loglik_trace"].as_array().unwrap().len(), 4);
}

/// Parses a count table written by `--out`: header, then rows of `key columns` + K counts.
fn read_counts(path: &Path, key_columns: usize, topics: usize) -> (Vec<String>, Vec<Vec<u64>>) {
    let text = std::fs::read_to_string(path).expect("table written");
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .expect("header")
        .split(',')
        .map(String::from)
        .collect();
    assert_eq!(header.len(), key_columns + topics, "{header:?}");
    let rows = lines
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            assert_eq!(fields.len(), key_columns + topics, "{line}");
            fields[key_columns..]
                .iter()
                .map(|f| f.parse::<u64>().expect("a count"))
                .collect()
        })
        .collect();
    (header, rows)
}

#[test]
fn out_writes_tables_whose_counts_sum_to_the_tokens() {
    let fx = Fixture::new();
    let dir = fx.path("model");
    let out = train(&fx, &["--variant", "sync", "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (header, words) = read_counts(&dir.join("word_topic.csv"), 2, 2);
    assert_eq!(header, ["word_id", "word", "topic_0", "topic_1"]);
    assert_eq!(words.len(), 6);
    let (header, docs) = read_counts(&dir.join("doc_topic.csv"), 1, 2);
    assert_eq!(header, ["doc", "topic_0", "topic_1"]);
    assert_eq!(docs.len(), 4);
    let total = |rows: &[Vec<u64>]| rows.iter().flatten().sum::<u64>();
    assert_eq!(total(&words), TOKENS);
    assert_eq!(total(&docs), TOKENS);
    // Row sums are the corpus's own counts: word "cat" (id 0) occurs 5 times, document 3 has 9.
    assert_eq!(words[0].iter().sum::<u64>(), 5);
    assert_eq!(docs[2].iter().sum::<u64>(), 9);
    let top = std::fs::read_to_string(dir.join("top_words.txt")).unwrap();
    assert_eq!(top.lines().count(), 2);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert!(summary["final_loglik"].as_f64().is_some());
    // Nothing temporary is left behind.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
}

#[test]
fn malformed_uci_names_the_file_and_line() {
    let fx = Fixture::new();
    let bad = DOCWORD.replace("3 4 5", "3 four 5");
    std::fs::write(fx.path("docword.tiny.txt"), bad).unwrap();
    let out = train(&fx, &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("docword.tiny.txt:9"), "{err}");
    assert!(err.contains("docID wordID count"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_settings_and_missing_files_are_clear_errors() {
    let fx = Fixture::new();
    let cases: [(&[&str], &str); 4] = [
        (&["--topics", "0"], "number of topics"),
        (&["--alpha", "0"], "alpha must be finite and positive"),
        (&["--beta", "-1"], "beta must be finite and positive"),
        (&["--workers", "0"], "--workers must be at least 1"),
    ];
    let docword = fx.arg("docword.tiny.txt");
    for (extra, expected) in cases {
        let mut args = vec!["lda", "train", "--uci", &docword, "--iters", "2"];
        args.extend_from_slice(extra);
        let out = parbench(&args);
        assert!(!out.status.success(), "{extra:?} succeeded");
        let err = stderr(&out);
        assert!(err.contains(expected), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let missing = fx.arg("nope.txt");
    let out = parbench(&["lda", "train", "--uci", &missing]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("nope.txt"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Neither --uci nor --text: clap's usage error.
    let out = parbench(&["lda", "train"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--uci"), "{}", stderr(&out));
}

#[test]
fn text_corpora_train_too() {
    let fx = Fixture::new();
    let text =
        "the cat and the dog\ncats dogs cat dog fish\ncar bus truck car\nbus truck the car\n";
    std::fs::write(fx.path("docs.txt"), text).unwrap();
    let docs = fx.arg("docs.txt");
    let out = parbench(&[
        "lda",
        "train",
        "--text",
        &docs,
        "--min-count",
        "1",
        "--topics",
        "2",
        "--iters",
        "5",
        "--variant",
        "sparse",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["corpus"]["docs"].as_u64(), Some(4));
    // "the" and "and" are stop words.
    assert_eq!(v["corpus"]["tokens"].as_u64(), Some(14));
}

const SYNTHETIC: &str = r#"name: lda_tiny
description: the LDA family through the harness
paper: none
reproduces: none
family: lda
data: { source: synthetic, seed: 3 }
variants: [sequential, sparse, sync, async]
params: { docs: 60, words: 40, true_topics: 3, min_len: 10, max_len: 20, topics: 3, iters: 30, checkpoint_docs: 5, verify_invariants: true }
sweep:
  threads: [1, 2]
repetitions: 1
warmup: 0
figures:
  - { name: tiny_loglik, title: "tiny", x: threads, y: metric_final_loglik }
claims:
  - { kind: ratio, name: sync within 10% of sequential, column: metric_final_loglik, numerator: sync, denominator: sequential, at_least: 0.9, at_most: 1.1 }
  - { kind: ratio, name: async samples every token as often as sync, column: metric_tokens_sampled, numerator: async, denominator: sync, at_least: 1, at_most: 1 }
"#;

#[test]
fn the_family_runs_through_plan_and_runner() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("lda.yaml");
    std::fs::write(&file, SYNTHETIC).unwrap();
    let plan = plan::build(&file, false, None).expect("the plan validates");
    let run_dir = tmp.path().join("run");
    let summary = runner::run(&plan, &run_dir, false, ProgressMode::Silent).expect("runs");
    assert_eq!(summary.rows.len(), 2 * 4, "points x variants");
    for c in &summary.claims {
        assert!(c.passed, "claim {} failed: {}", c.name, c.detail);
    }
    for row in &summary.rows {
        let m = &row.metrics;
        assert_eq!(m["invariant_violations"], 0.0, "{row:?}");
        assert!(m["final_loglik"] < 0.0, "{row:?}");
        assert_eq!(m["tokens_sampled"], 30.0 * m["tokens"], "{row:?}");
        assert!(m["tokens_per_s"] > 0.0);
        let share = m["waiting_share"];
        assert!((0.0..=1.0).contains(&share), "{row:?}");
        let parallel = row.variant == "sync" || row.variant == "async";
        let workers = if parallel {
            row.params["threads"].as_usize().unwrap()
        } else {
            1
        };
        assert_eq!(m["workers"], workers as f64, "{row:?}");
        assert_eq!(m["merges"] > 0.0, parallel, "{row:?}");
        // Exactly these phases, each a duration (their sizes are timing: not asserted).
        let phases: Vec<&str> = row.phases_s.keys().map(String::as_str).collect();
        assert_eq!(
            phases,
            ["applying", "sampling", "sending", "waiting"],
            "{row:?}"
        );
        assert!(
            row.phases_s.values().all(|v| v.is_finite() && *v >= 0.0),
            "{row:?}"
        );
        assert_eq!(m["iterations"], 30.0, "{row:?}");
    }
    // sequential is repeatable: both points (threads ignored) give the same chain.
    let seq: Vec<f64> = summary
        .rows
        .iter()
        .filter(|r| r.variant == "sequential")
        .map(|r| r.metrics["final_loglik"])
        .collect();
    assert_eq!(seq.len(), 2);
    assert_eq!(seq[0], seq[1]);
    assert_eq!(results::read_rows(&run_dir).unwrap().len(), 8);
    assert!(run_dir.join("figures/tiny_loglik.png").is_file());
}

#[test]
fn unknown_parameters_and_bad_options_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("lda.yaml");
    std::fs::write(&file, SYNTHETIC.replace("true_topics", "true_topcs")).unwrap();
    let err = plan::build(&file, false, None).unwrap_err().to_string();
    assert!(err.contains("true_topcs"), "{err}");
    std::fs::write(
        &file,
        SYNTHETIC.replace("verify_invariants: true", "delta: hashed"),
    )
    .unwrap();
    // A typo'd option is an error of the plan, before anything runs, with the valid names.
    let err = plan::build(&file, false, None).unwrap_err().to_string();
    assert!(err.contains("delta") && err.contains("hashed"), "{err}");
    assert!(err.contains("dense, sparse"), "{err}");
}
