//! End-to-end tests of `parbench w2v train|eval|neighbors` against the built binary (tiny
//! corpora, models and evaluation sets in a temporary folder), and of the word2vec family driven
//! through the harness's plan and runner.

use crate::support::{parbench, stderr, stdout};
use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;
use parbench::results;
use parbench_common::rng::Rng;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Two planted topics: every line draws its words from one of them.
const ANIMALS: [&str; 6] = ["cat", "dog", "fish", "bird", "horse", "cow"];
const VEHICLES: [&str; 6] = ["car", "bus", "truck", "train", "boat", "plane"];

/// 200 lines of 12 words, alternating topics: 2,400 tokens, 12 word types.
fn tiny_corpus(seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut text = String::new();
    for line in 0..200 {
        let group = if line % 2 == 0 { &ANIMALS } else { &VEHICLES };
        let words: Vec<&str> = (0..12)
            .map(|_| group[rng.below(group.len() as u64) as usize])
            .collect();
        text.push_str(&words.join(" "));
        text.push('\n');
    }
    text
}

/// A hand-made model whose cosines are known: man (1,0,0), woman (0,1,0), king (1,0,1),
/// queen (0,1,1), apple (-1,-1,0).
const MODEL: &str = "5 3\nman 1 0 0\nwoman 0 1 0\nking 1 0 1\nqueen 0 1 1\napple -1 -1 0\n";

/// cos(king, queen) = 0.5 > cos(man, woman) = 0 > cos(man, apple) = -0.71: the same order as
/// the human scores, so Spearman is 1 over the 3 covered pairs (the 4th has an unknown word).
const WORDSIM: &str =
    "# comment\n# comment\nking\tqueen\t9\nman\twoman\t8\nman\tapple\t1\nman\tzebra\t5\n";
/// The reverse order: Spearman -1 over 2 covered pairs of 2.
const SIMLEX: &str = "# a\n# b\nking\tqueen\t1\nman\tapple\t9\n";
/// One semantic question answered right, one not covered; one syntactic question answered right.
const ANALOGIES: &str = ": sem1\nman woman king queen\nman woman king zebra\n: sem2\n: sem3\n: sem4\n: sem5\n: syn1\nking queen man woman\n";

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temporary folder");
        std::fs::write(dir.path().join("corpus.txt"), tiny_corpus(5)).expect("write corpus");
        std::fs::write(dir.path().join("model.txt"), MODEL).expect("write model");
        let data = dir.path().join("data");
        std::fs::create_dir(&data).expect("data folder");
        std::fs::write(data.join("wordsim353.tsv"), WORDSIM).expect("write wordsim");
        std::fs::write(data.join("simlex999.txt"), SIMLEX).expect("write simlex");
        std::fs::write(data.join("questions-words.txt"), ANALOGIES).expect("write analogies");
        Fixture { dir }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn arg(&self, name: &str) -> String {
        self.path(name).to_str().expect("UTF-8 path").to_string()
    }
}

/// `parbench w2v train` on the tiny corpus with small settings, writing `out`, plus `extra`.
fn train(fx: &Fixture, out: &str, extra: &[&str]) -> Output {
    let corpus = fx.arg("corpus.txt");
    let out = fx.arg(out);
    let mut args = vec![
        "w2v",
        "train",
        "--corpus",
        &corpus,
        "--dim",
        "8",
        "--window",
        "2",
        "--negative",
        "2",
        "--min-count",
        "1",
        "--sample",
        "0",
        "--epochs",
        "2",
        "--threads",
        "1",
        "--seed",
        "3",
        "--out",
        &out,
    ];
    args.extend_from_slice(extra);
    parbench(&args)
}

fn assert_clean_error(out: &Output, needle: &str) {
    let err = stderr(out);
    assert!(!out.status.success(), "expected a failure: {err}");
    assert!(err.starts_with("error:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

#[test]
fn train_writes_a_text_model_that_reads_back_and_prints_words_per_second() {
    let fx = Fixture::new();
    for variant in word2vec::variant_names() {
        let name = format!("{variant}.txt");
        let out = train(&fx, &name, &["--variant", variant]);
        assert!(out.status.success(), "{variant}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("words/sec"), "{variant}: {text}");
        assert!(text.contains("model traffic"), "{variant}: {text}");
        let file = std::fs::read_to_string(fx.path(&name)).expect("the model exists");
        assert!(file.starts_with("12 8\n"), "{variant}: {}", &file[..20]);
        let model = word2vec::io::read_model(&fx.path(&name)).expect("reads back");
        assert_eq!((model.len(), model.dim()), (12, 8));
        assert!(model.vectors().iter().all(|x| x.is_finite()));
        for w in ANIMALS.iter().chain(&VEHICLES) {
            assert!(model.id(w).is_some(), "{variant}: {w} missing");
        }
    }
    // Atomic write: nothing but the models and the fixture's files is left in the folder.
    let mut names: Vec<String> = std::fs::read_dir(fx.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected: Vec<String> = ["corpus.txt", "data", "model.txt"]
        .iter()
        .map(|s| s.to_string())
        .chain(word2vec::variant_names().iter().map(|v| format!("{v}.txt")))
        .collect();
    expected.sort();
    assert_eq!(names, expected);
}

#[test]
fn binary_output_matches_the_text_output_and_repeats_with_a_seed() {
    let fx = Fixture::new();
    for variant in word2vec::variant_names() {
        let bin = format!("{variant}.bin");
        let txt = format!("{variant}.txt");
        let out = train(&fx, &bin, &["--variant", variant, "--binary"]);
        assert!(out.status.success(), "{variant}: {}", stderr(&out));
        let out = train(&fx, &txt, &["--variant", variant]);
        assert!(out.status.success(), "{variant}: {}", stderr(&out));
        let bytes = std::fs::read(fx.path(&bin)).unwrap();
        assert!(bytes.starts_with(b"12 8\n"), "{variant}");
        // Header, then per word: the word, a space, 8 little-endian f32 and a newline.
        let words_len: usize = ANIMALS.iter().chain(&VEHICLES).map(|w| w.len()).sum();
        assert_eq!(bytes.len(), 5 + words_len + 12 * (1 + 32 + 1), "{variant}");
        let from_bin = word2vec::io::read_model(&fx.path(&bin)).unwrap();
        let from_txt = word2vec::io::read_model(&fx.path(&txt)).unwrap();
        assert_eq!(from_bin.words(), from_txt.words(), "{variant}");
        // One thread with a seed repeats bit for bit, and text round-trips f32 exactly.
        assert_eq!(from_bin.vectors(), from_txt.vectors(), "{variant}");
    }
}

#[test]
fn a_corpus_name_not_found_here_is_looked_up_in_the_data_dir() {
    let fx = Fixture::new();
    let out = fx.arg("found.txt");
    let data_dir = fx.dir.path().to_str().unwrap().to_string();
    let args = [
        "--data-dir",
        &data_dir,
        "w2v",
        "train",
        "--corpus",
        "corpus.txt",
        "--dim",
        "4",
        "--min-count",
        "1",
        "--epochs",
        "1",
        "--threads",
        "1",
        "--out",
        &out,
    ];
    let elsewhere = tempfile::tempdir().unwrap();
    let result = Command::new(env!("CARGO_BIN_EXE_parbench"))
        .args(args)
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", stderr(&result));
    assert!(fx.path("found.txt").is_file());
}

#[test]
fn eval_reports_hand_computed_metrics() {
    let fx = Fixture::new();
    let model = fx.arg("model.txt");
    let data = fx.arg("data");
    let out = parbench(&["w2v", "eval", "--model", &model, "--data-dir", &data]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("WordSim-353"), "{text}");
    assert!(text.contains("(3 of 4 pairs covered)"), "{text}");
    assert!(text.contains("3CosMul"), "{text}");

    let out = parbench(&[
        "w2v",
        "eval",
        "--model",
        &model,
        "--data-dir",
        &data,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.trim().lines().count(), 1, "one line of JSON: {text}");
    let v: serde_json::Value = serde_json::from_str(&text).expect("stdout is JSON");
    for key in ["model", "wordsim353", "simlex999", "analogy", "eval_s"] {
        assert!(v.get(key).is_some(), "missing key {key}: {v}");
    }
    let close = |x: &serde_json::Value, want: f64| (x.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(close(&v["wordsim353"]["spearman"], 1.0), "{v}");
    assert_eq!(v["wordsim353"]["pairs_covered"].as_u64(), Some(3));
    assert_eq!(v["wordsim353"]["pairs_total"].as_u64(), Some(4));
    assert!(close(&v["simlex999"]["spearman"], -1.0), "{v}");
    assert_eq!(v["simlex999"]["pairs_covered"].as_u64(), Some(2));
    let a = &v["analogy"];
    assert_eq!(a["covered"].as_u64(), Some(2), "{a}");
    assert_eq!(a["total"].as_u64(), Some(3), "{a}");
    assert_eq!(a["semantic_covered"].as_u64(), Some(1), "{a}");
    assert_eq!(a["syntactic_covered"].as_u64(), Some(1), "{a}");
    for method in ["add", "mul"] {
        for part in ["overall", "semantic", "syntactic"] {
            assert!(close(&a[method][part], 1.0), "{method} {part}: {a}");
        }
    }
    assert!(close(&a["coverage"], 2.0 / 3.0), "{a}");
    assert_eq!(v["model"]["words"].as_u64(), Some(5));
}

#[test]
fn eval_skips_a_missing_benchmark_and_fails_without_any() {
    let fx = Fixture::new();
    let model = fx.arg("model.txt");
    std::fs::remove_file(fx.path("data").join("simlex999.txt")).unwrap();
    let data = fx.arg("data");
    let out = parbench(&[
        "w2v",
        "eval",
        "--model",
        &model,
        "--data-dir",
        &data,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(v["simlex999"].is_null(), "{v}");
    assert!(v["wordsim353"]["spearman"].is_number(), "{v}");

    let empty = tempfile::tempdir().unwrap();
    let empty = empty.path().to_str().unwrap();
    let out = parbench(&["w2v", "eval", "--model", &model, "--data-dir", empty]);
    assert_clean_error(&out, "wordsim353.tsv");
}

#[test]
fn neighbors_are_listed_best_first() {
    let fx = Fixture::new();
    let model = fx.arg("model.txt");
    let out = parbench(&[
        "w2v",
        "neighbors",
        "--model",
        &model,
        "KING",
        "apple",
        "-k",
        "2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    // cos(king, man) = 0.71 > cos(king, queen) = 0.5 > cos(king, woman) = 0.
    assert_eq!(lines[0], ["KING:"], "{text}");
    assert_eq!(lines[1], ["man", "0.7071"], "{text}");
    assert_eq!(lines[2], ["queen", "0.5000"], "{text}");
    assert_eq!(lines[3], ["apple:"], "{text}");
    assert_eq!(lines.len(), 6, "{text}");

    let out = parbench(&["w2v", "neighbors", "--model", &model, "king", "zebra"]);
    assert_clean_error(&out, "zebra");
    assert!(stdout(&out).starts_with("king:"), "known words still print");
}

#[test]
fn bad_inputs_are_clear_errors() {
    let fx = Fixture::new();
    std::fs::write(fx.path("empty.txt"), "  \n\n").unwrap();
    std::fs::write(fx.path("latin1.txt"), b"caf\xe9 caf\xe9 caf\xe9\n").unwrap();
    std::fs::write(fx.path("bad_model.txt"), "not a model\n").unwrap();
    let out_file = fx.arg("v.txt");
    let run_train = |corpus: &str, extra: &[&str]| {
        let mut args = vec!["w2v", "train", "--corpus", corpus, "--out", &out_file];
        args.extend_from_slice(extra);
        parbench(&args)
    };
    assert_clean_error(&run_train(&fx.arg("empty.txt"), &[]), "no words");
    assert_clean_error(
        &run_train(&fx.arg("latin1.txt"), &["--min-count", "1"]),
        "UTF-8",
    );
    assert_clean_error(
        &run_train(&fx.arg("corpus.txt"), &["--min-count", "100000"]),
        "lower min_count",
    );
    assert_clean_error(&run_train(&fx.arg("missing.txt"), &[]), "missing.txt");
    assert_clean_error(
        &run_train(&fx.arg("corpus.txt"), &["--dim", "0"]),
        "dimension",
    );
    assert_clean_error(
        &run_train(&fx.arg("corpus.txt"), &["--threads", "0"]),
        "--threads",
    );
    assert_clean_error(
        &run_train(&fx.arg("corpus.txt"), &["--alpha", "-1"]),
        "alpha",
    );
    let out = parbench(&[
        "w2v",
        "train",
        "--corpus",
        &fx.arg("corpus.txt"),
        "--out",
        &fx.arg("no_such_folder/v.txt"),
    ]);
    assert_clean_error(&out, "does not exist");
    let out = run_train(&fx.arg("corpus.txt"), &["--variant", "fast"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("hogwild"), "{}", stderr(&out));
    assert!(!fx.path("v.txt").exists(), "no output after failures");

    let data = fx.arg("data");
    let out = parbench(&[
        "w2v",
        "eval",
        "--model",
        &fx.arg("bad_model.txt"),
        "--data-dir",
        &data,
    ]);
    assert_clean_error(&out, "bad header");
    let out = parbench(&["w2v", "neighbors", "--model", &fx.arg("nope.bin"), "x"]);
    assert_clean_error(&out, "nope.bin");
}

/// A run directory's rows, checked for the family's metrics.
fn run_config(
    yaml: &str,
    data_dir: Option<&Path>,
) -> (
    tempfile::TempDir,
    Vec<parbench::family::ResultRow>,
    runner::RunSummary,
) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("w2v.yaml");
    std::fs::write(&file, yaml).unwrap();
    let plan = plan::build(&file, false, data_dir).expect("the plan validates");
    let run_dir = tmp.path().join("run");
    let summary = runner::run(&plan, &run_dir, false, ProgressMode::Silent).expect("runs");
    let rows = results::read_rows(&run_dir).unwrap();
    (tmp, rows, summary)
}

#[test]
fn the_family_runs_a_synthetic_corpus_through_plan_and_runner() {
    let yaml = r#"
name: w2v_tiny
paper: test
reproduces: test
family: word2vec
data: { source: synthetic, seed: 4 }
params: { groups: 4, group_words: 8, sentence_words: 10, words: 20000, dim: 16, window: 3,
          negative: 3, sample: 0, epochs: 3, min_count: 1 }
variants: [hogwild, gemm, full]
sweep: { threads: [1, 2] }
repetitions: 1
claims:
  - kind: ratio
    name: full moves fewer model bytes than hogwild
    column: metric_model_bytes_per_epoch
    numerator: full
    denominator: hogwild
    at_most: 0.9
  - kind: ratio
    name: gemm finds the planted groups about as well as hogwild
    column: metric_planted_accuracy
    numerator: gemm
    denominator: hogwild
    at_least: 0.8
"#;
    let (_tmp, rows, summary) = run_config(yaml, None);
    assert_eq!(rows.len(), 6);
    for r in &rows {
        for key in [
            "words_per_s",
            "gflop_per_s",
            "model_bytes_read_per_epoch",
            "model_bytes_written_per_epoch",
            "planted_accuracy",
        ] {
            assert!(r.metrics.contains_key(key), "{} lacks {key}", r.variant);
        }
        assert_eq!(r.metrics["words"], 20000.0);
        assert!(r.phases_s.contains_key("train") && r.phases_s.contains_key("eval"));
        // Planted groups are learned: most words' nearest neighbour is in their group.
        assert!(
            r.metrics["planted_accuracy"] > 0.7,
            "{}: {:?}",
            r.variant,
            r.metrics
        );
        assert!(r.wall_time_s > 0.0);
    }
    assert!(
        summary.claims.iter().all(|c| c.passed),
        "{:?}",
        summary.claims
    );
}

#[test]
fn the_family_reads_a_dataset_and_evaluates_it_with_the_sets_beside_it() {
    let fx = Fixture::new();
    let data = fx.path("data");
    std::fs::write(data.join("tiny.txt"), tiny_corpus(9)).unwrap();
    let yaml = r#"
name: w2v_tiny_dataset
paper: test
reproduces: test
family: word2vec
data: { source: dataset, file: tiny.txt, seed: 1 }
params: { dim: 8, window: 2, negative: 2, sample: 0, min_count: 1, max_tokens: 1000 }
variants: [hogwild, full]
repetitions: 1
"#;
    let (_tmp, rows, _) = run_config(yaml, Some(&data));
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r.metrics["words"], 1000.0);
        // None of the evaluation words is in this corpus: no pair covered, no Spearman.
        assert_eq!(r.metrics["ws353_pairs"], 0.0);
        assert_eq!(r.metrics["analogy_covered"], 0.0);
        assert!(!r.metrics.contains_key("ws353_spearman"));
    }
}

#[test]
fn unknown_parameters_and_bad_values_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.yaml");
    let base = "name: bad\npaper: t\nreproduces: t\nfamily: word2vec\ndata: { source: synthetic }\nvariants: [hogwild]\nrepetitions: 1\n";
    std::fs::write(&file, format!("{base}params: {{ dimension: 10 }}\n")).unwrap();
    let err = plan::build(&file, false, None).unwrap_err().to_string();
    assert!(err.contains("dimension"), "{err}");
    std::fs::write(&file, format!("{base}params: {{ dim: 0, words: 1000 }}\n")).unwrap();
    // A size out of the crate's range is an error of the plan, naming the key.
    let err = plan::build(&file, false, None).unwrap_err().to_string();
    assert!(err.contains("`dim`") && err.contains("dimension"), "{err}");
}

#[test]
fn distributed_on_one_rank_writes_the_inner_variants_model_and_options_are_checked() {
    let fx = Fixture::new();
    let out = train(&fx, "gemm.txt", &["--variant", "gemm"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // One rank, one exchange per epoch: the shared-memory variant itself.
    let out = train(
        &fx,
        "dist1.txt",
        &[
            "--variant",
            "distributed",
            "--inner",
            "gemm",
            "--ranks",
            "1",
            "--sync-words",
            "1000000000",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let alone = word2vec::io::read_model(&fx.path("gemm.txt")).unwrap();
    let one = word2vec::io::read_model(&fx.path("dist1.txt")).unwrap();
    assert_eq!(alone.vectors(), one.vectors());
    // Two in-process ranks train and write a model of the same vocabulary.
    let out = train(
        &fx,
        "dist2.txt",
        &[
            "--variant",
            "distributed",
            "--ranks",
            "2",
            "--sync-words",
            "50",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let two = word2vec::io::read_model(&fx.path("dist2.txt")).unwrap();
    assert_eq!(two.words(), alone.words());
    assert!(stdout(&out).contains("distributed:"), "{}", stdout(&out));
    assert_clean_error(
        &train(&fx, "x.txt", &["--variant", "gemm", "--ranks", "2"]),
        "apply to --variant distributed",
    );
    assert_clean_error(
        &train(
            &fx,
            "x.txt",
            &["--variant", "distributed", "--rare-every", "0"],
        ),
        "at least 1",
    );
    #[cfg(not(feature = "mpi"))]
    assert_clean_error(
        &train(
            &fx,
            "x.txt",
            &["--variant", "distributed", "--backend", "mpi"],
        ),
        "built without MPI",
    );
}
