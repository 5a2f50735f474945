//! Every family's variants state their work, and every row of a run carries its time bound on
//! this machine and the fraction of it the run reached (`harness/exec/bound.rs`).

use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;
use parbench::family::ResultRow;

fn run(name: &str, family: &str, params: &str, variants: &[&str]) -> Vec<ResultRow> {
    let text = format!(
        "name: {name}
paper: none
reproduces: none
family: {family}
data: {{ source: synthetic, seed: 3 }}
params:
{params}
variants: [{}]
sweep:
  threads: [1, 2]
repetitions: 1
warmup: 0
",
        variants.join(", ")
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e.yaml");
    std::fs::write(&file, text).unwrap();
    let plan = plan::build(&file, false, None).unwrap();
    runner::run(&plan, &dir.path().join("run"), false, ProgressMode::Silent)
        .unwrap()
        .rows
}

/// Every row states its work, threads included, and its bound is the larger of the compute
/// and memory parts, over the row's own time.
fn assert_bounded(rows: &[ResultRow], flops_kind: &str) {
    assert!(!rows.is_empty());
    for row in rows {
        let m = |k: &str| {
            *row.metrics
                .get(k)
                .unwrap_or_else(|| panic!("{} lacks {k}: {:?}", row.variant, row.metrics))
        };
        let threads = row.params["threads"].as_f64().unwrap();
        if row.variant.contains("distributed")
            || row.variant.starts_with("1")
            || row.variant.starts_with("2")
        {
            assert!(m("work_threads") >= threads, "{}", row.variant);
        } else if m("work_threads") != 1.0 {
            assert_eq!(m("work_threads"), threads, "{}", row.variant);
        }
        assert!(
            m(flops_kind) > 0.0 || m("work_reuse_bytes") > 0.0,
            "{}",
            row.variant
        );
        assert!(m("work_stream_bytes") > 0.0, "{}", row.variant);
        let bound = m("bound_s");
        assert!(bound > 0.0 && bound.is_finite(), "{}", row.variant);
        assert_eq!(bound, m("bound_compute_s").max(m("bound_memory_s")));
        assert_eq!(
            m("fraction_of_bound"),
            bound / row.wall_time_s,
            "{}",
            row.variant
        );
    }
}

#[test]
fn sinkhorn_rows_carry_their_bound() {
    let params =
        "  vocab: 2000\n  dim: 16\n  docs: 60\n  words_per_doc: 8\n  query_words: 5\n  iters: 5";
    let rows = run("b_sinkhorn", "sinkhorn", params, &sinkhorn::variant_names());
    assert_bounded(&rows, "work_flops_f64");
    // The same problem and iterations: every word-major variant states the same bytes, doc-major
    // fewer (each document's rows gathered once), dense more (its dense product).
    let at = |v: &str, k: &str| {
        rows.iter()
            .find(|r| r.variant == v && r.params["threads"].as_f64() == Some(1.0))
            .unwrap()
            .metrics[k]
    };
    let reuse = "work_reuse_bytes";
    assert_eq!(at("fused", reuse), at("sparse", reuse));
    assert_eq!(at("fused", reuse), at("fused-par", reuse));
    assert!(at("doc-major", reuse) < at("fused", reuse));
    assert!(at("dense", reuse) > at("fused", reuse));
}

#[test]
fn fusedmm_rows_carry_their_bound() {
    let params =
        "  kernel: fusedmma\n  rows: 512\n  nnz_per_row: 8\n  r: 16\n  ranks: 4\n  replication: 1";
    let rows = run(
        "b_fusedmm",
        "fusedmm",
        params,
        &[
            "local",
            "local-unfused",
            "1.5d-dense-shift strategy=fusion",
            "2.5d-dense-replicate strategy=none",
        ],
    );
    assert_bounded(&rows, "work_flops_f64");
    let one = |v: &str| {
        rows.iter()
            .find(|r| r.variant == v && r.params["threads"].as_f64() == Some(1.0))
            .unwrap()
    };
    // Unfused stores and rereads R; the distributed runs add the words they send.
    let bytes = |r: &ResultRow| r.metrics["work_stream_bytes"] + r.metrics["work_reuse_bytes"];
    assert!(bytes(one("local-unfused")) > bytes(one("local")));
    assert!(bytes(one("1.5d-dense-shift strategy=fusion")) > bytes(one("local")));
    assert_eq!(one("local").metrics["work_threads"], 1.0);
    assert_eq!(
        one("2.5d-dense-replicate strategy=none").metrics["work_threads"],
        4.0
    );
}

#[test]
fn word2vec_rows_carry_their_bound_in_f32() {
    let params = "  words: 20000\n  dim: 16\n  window: 3\n  negative: 3\n  min_count: 2\n  epochs: 1\n  evaluate: false";
    let rows = run("b_w2v", "word2vec", params, &["hogwild", "gemm", "full"]);
    assert_bounded(&rows, "work_flops_f32");
    for r in &rows {
        assert_eq!(r.metrics["work_flops_f64"], 0.0, "{}", r.variant);
    }
}

#[test]
fn lda_rows_carry_their_bound() {
    let params = "  docs: 60\n  words: 200\n  topics: 8\n  true_topics: 8\n  iters: 3";
    let rows = run(
        "b_lda",
        "lda",
        params,
        &["sequential", "sparse", "mh", "sync"],
    );
    assert_bounded(&rows, "work_reuse_bytes");
    let seq = rows.iter().find(|r| r.variant == "sequential").unwrap();
    // 6 K flops a token sampled.
    assert_eq!(
        seq.metrics["work_flops_f64"],
        6.0 * 8.0 * seq.metrics["tokens"] * 3.0
    );
}

#[test]
fn fusedmm_application_rows_carry_the_bound_of_their_sparse_calls() {
    let params = "  rows: 40\n  cols: 36\n  nnz_per_row: 4\n  r: 4\n  cg_iterations: 3\n  outer_iterations: 2\n  heads: 2\n  features: 5\n  ranks: 4\n  replication: 1\n  app: gat";
    let rows = run(
        "b_apps",
        "fusedmm-apps",
        params,
        &["serial", "1.5d-dense-shift strategy=none"],
    );
    assert_bounded(&rows, "work_flops_f64");
    let one = |v: &str| {
        rows.iter()
            .find(|r| r.variant == v && r.params["threads"].as_f64() == Some(1.0))
            .unwrap()
    };
    // The same calls on the same matrix: the same flops; the distributed run also sends words.
    let (serial, shifted) = (one("serial"), one("1.5d-dense-shift strategy=none"));
    assert_eq!(
        serial.metrics["work_flops_f64"],
        shifted.metrics["work_flops_f64"]
    );
    assert!(shifted.metrics["work_stream_bytes"] > serial.metrics["work_stream_bytes"]);
    assert_eq!(shifted.metrics["work_threads"], 4.0);
}

#[test]
fn embeddings_rows_read_back_the_table_and_carry_the_bound_of_their_file() {
    let params = "  words: 300\n  dim: 12\n  decimals: 6";
    let variants = ["text", "text-gz", "binary", "cached"];
    let rows = run("b_embeddings", "embeddings", params, &variants);
    assert_bounded(&rows, "work_stream_bytes");
    let source = |v: &str| {
        rows.iter()
            .find(|r| r.variant == v)
            .map(|r| r.metrics["source_bytes"])
            .unwrap()
    };
    for r in &rows {
        // What the reader scans (the text, decompressed for text-gz; else the variant's own
        // file) streamed once and the table (300 x 12 f64) written once; no flops; the rate in
        // terms of the text the table is written as.
        let (file, read) = (r.metrics["file_bytes"], r.metrics["source_bytes"]);
        let scanned = if r.variant.starts_with("text") {
            file
        } else {
            read
        };
        assert_eq!(r.metrics["work_stream_bytes"], scanned + 8.0 * 300.0 * 12.0);
        assert_eq!(r.metrics["work_flops_f64"], 0.0);
        assert_eq!(r.metrics["gb_per_s"], file / r.wall_time_s / 1e9);
    }
    // The files each variant reads: the binary (a "w<i> " word, 12 f32 and a newline a row,
    // after its header), the cache entry (12 f64 a row, the words, and its own header).
    let words_bytes: f64 = (0..300).map(|i| format!("w{i}").len() as f64).sum();
    assert_eq!(
        source("binary"),
        "300 12\n".len() as f64 + words_bytes + 300.0 * (1.0 + 48.0 + 1.0)
    );
    assert!(source("cached") > 300.0 * 96.0 + words_bytes);
    assert!(source("text-gz") < source("text"));
}
