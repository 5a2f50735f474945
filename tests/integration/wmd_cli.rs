//! End-to-end tests of `parbench wmd` against the built binary: small embeddings and documents in
//! a temporary folder, the CSV checked against distances known in closed form.

use crate::support::{parbench, stderr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Two-dimensional vectors, so Euclidean distances are easy to state.
const EMBEDDINGS: &str = "\
6 2
cat 0 0
dog 3 4
car 1 0
bus 0 2
tree 6 8
CAT 9 9
";

/// Line 1 and line 2 have the same histogram after stop words; line 5 has an unknown word.
const DOCS: &str = "\
cat dog
The DOG and the cat
car
bus bus
tree unknownword
";

struct Fixture {
    dir: tempfile::TempDir,
    /// The parsed cache's home, apart from `dir` (whose files some tests count).
    cache: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temporary folder");
        std::fs::write(dir.path().join("vecs.txt"), EMBEDDINGS).expect("write embeddings");
        std::fs::write(dir.path().join("docs.txt"), DOCS).expect("write docs");
        Fixture {
            dir,
            cache: tempfile::tempdir().expect("temporary folder"),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn wmd(fx: &Fixture, extra: &[&str]) -> Output {
    wmd_with(fx, "vecs.txt", extra)
}

/// `parbench wmd` on the fixture's `embeddings` file, its parsed cache in the fixture's folder.
fn wmd_with(fx: &Fixture, embeddings: &str, extra: &[&str]) -> Output {
    let emb = fx.path(embeddings);
    let docs = fx.path("docs.txt");
    let mut args = vec![
        "wmd",
        "--embeddings",
        emb.to_str().unwrap(),
        "--docs",
        docs.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_parbench"))
        .args(&args)
        .env("XDG_CACHE_HOME", fx.cache.path())
        .output()
        .expect("the parbench binary runs")
}

#[test]
fn a_second_run_reads_the_parsed_cache_and_no_cache_parses_again() {
    let fx = Fixture::new();
    let first = wmd(&fx, &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(
        stderr(&first).contains("parsed; stored in the cache"),
        "{}",
        stderr(&first)
    );
    let entries = |fx: &Fixture| {
        std::fs::read_dir(fx.cache.path().join("parbench/embeddings"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(entries(&fx), 1);
    let second = wmd(&fx, &[]);
    assert!(
        stderr(&second).contains("from the parsed cache"),
        "{}",
        stderr(&second)
    );
    assert_eq!(second.stdout, first.stdout);
    let uncached = wmd(&fx, &["--no-cache"]);
    assert!(uncached.status.success(), "{}", stderr(&uncached));
    assert!(
        !stderr(&uncached).contains("cache"),
        "{}",
        stderr(&uncached)
    );
    assert_eq!(uncached.stdout, first.stdout);
    // A changed file is parsed again, not served stale.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(
        fx.path("vecs.txt"),
        EMBEDDINGS.replace("car 1 0", "car 1 1"),
    )
    .unwrap();
    let changed = wmd(&fx, &[]);
    assert!(
        stderr(&changed).contains("parsed; stored"),
        "{}",
        stderr(&changed)
    );
    assert_ne!(changed.stdout, first.stdout);
    assert_eq!(entries(&fx), 1);
}

#[test]
fn word2vec_binary_embeddings_give_the_text_files_distances() {
    let fx = Fixture::new();
    // The fixture's table in the binary format: "word " then two little-endian f32 values.
    let mut bin = b"6 2\n".to_vec();
    for line in EMBEDDINGS.lines().skip(1) {
        let mut fields = line.split(' ');
        bin.extend_from_slice(fields.next().unwrap().as_bytes());
        bin.push(b' ');
        for x in fields {
            bin.extend_from_slice(&x.parse::<f32>().unwrap().to_le_bytes());
        }
        bin.push(b'\n');
    }
    std::fs::write(fx.path("vecs.bin"), bin).unwrap();
    let text = wmd(&fx, &["--no-cache"]);
    let binary = wmd_with(&fx, "vecs.bin", &["--no-cache"]);
    assert!(binary.status.success(), "{}", stderr(&binary));
    assert_eq!(binary.stdout, text.stdout);
    std::fs::write(fx.path("cut.bin"), b"6 2\ncat \x00\x00").unwrap();
    let cut = wmd_with(&fx, "cut.bin", &["--no-cache"]);
    assert!(!cut.status.success());
    assert!(
        stderr(&cut).contains("cut.bin: byte 8: vector 1 (word \"cat\"): the file ends inside"),
        "{}",
        stderr(&cut)
    );
}

/// Parses `doc,distance` CSV text, checking the header and that docs are numbered 0, 1, ...
fn parse_csv(text: &str) -> Vec<f64> {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("doc,distance"));
    lines
        .enumerate()
        .map(|(i, line)| {
            let (doc, dist) = line.split_once(',').expect("two columns");
            assert_eq!(doc.parse::<usize>().unwrap(), i);
            dist.parse::<f64>().unwrap()
        })
        .collect()
}

fn euclid(a: (f64, f64), b: (f64, f64)) -> f64 {
    ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt()
}

fn assert_close(got: f64, want: f64, what: &str) {
    assert_within(got, want, 1e-9, what)
}

/// `got` within `rel` of `want` (relative, or absolute below 1).
fn assert_within(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        (got - want).abs() <= rel * want.abs().max(1.0),
        "{what}: got {got}, want {want}"
    );
}

fn read_csv(path: &Path) -> Vec<f64> {
    parse_csv(&std::fs::read_to_string(path).expect("CSV written"))
}

#[test]
fn one_word_query_gives_euclidean_transport_costs_for_every_variant() {
    // With a one-word query the transport plan is forced (all mass moves from that word), so
    // the Sinkhorn distance is exactly sum_j c_j * |car - word_j| for any lambda.
    let fx = Fixture::new();
    let (cat, dog, car, bus, tree) = ((0.0, 0.0), (3.0, 4.0), (1.0, 0.0), (0.0, 2.0), (6.0, 8.0));
    let expected = [
        0.5 * euclid(car, cat) + 0.5 * euclid(car, dog),
        0.5 * euclid(car, cat) + 0.5 * euclid(car, dog),
        0.0,
        euclid(car, bus),
        euclid(car, tree),
    ];
    for variant in sinkhorn::variant_names() {
        let csv = fx.path(&format!("{variant}.csv"));
        let out = wmd(
            &fx,
            &[
                "--query",
                "2",
                "--variant",
                variant,
                "--threads",
                "2",
                "--out",
                csv.to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "{variant}: {}", stderr(&out));
        assert!(
            out.stdout.is_empty(),
            "with --out the CSV does not go to stdout"
        );
        let got = read_csv(&csv);
        assert_eq!(got.len(), expected.len());
        // f32 rounds the inputs to 24 bits: a hundred f32 ulps, as in the crate's conformance.
        let rel = match sinkhorn::variant(variant).unwrap().precision() {
            sinkhorn::Precision::F64 => 1e-9,
            sinkhorn::Precision::F32 => 1e-5,
        };
        for (doc, (&g, &e)) in got.iter().zip(&expected).enumerate() {
            assert_within(g, e, rel, &format!("{variant}, doc {doc}"));
        }
    }
}

#[test]
fn a_document_identical_to_the_query_is_nearest_and_stats_go_to_stderr() {
    let fx = Fixture::new();
    let out = wmd(&fx, &["--query", "0", "--lambda", "20", "--iters", "50"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dist = parse_csv(&String::from_utf8(out.stdout.clone()).unwrap());
    assert_eq!(dist.len(), 5);
    assert_close(dist[1], dist[0], "same histogram, same distance");
    for (doc, &d) in dist.iter().enumerate().skip(2) {
        assert!(
            d > dist[0] + 0.1,
            "doc {doc} ({d}) should be farther than the query's twin ({})",
            dist[0]
        );
    }
    let err = stderr(&out);
    // "The" and "and", "the" are stop words; "unknownword" has no vector; "DOG" is lowercased to
    // "dog" rather than matching a capitalized entry.
    assert!(err.contains("3 stop words removed"), "{err}");
    assert!(err.contains("1 out-of-vocabulary tokens"), "{err}");
    assert!(err.contains("GFLOP/s"), "{err}");
}

#[test]
fn an_empty_document_is_an_error_naming_its_line() {
    let fx = Fixture::new();
    std::fs::write(fx.path("docs.txt"), "cat dog\ncar\nthe of and xyzzy\nbus\n").unwrap();
    let csv = fx.path("out.csv");
    let out = wmd(&fx, &["--out", csv.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("line 3"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!csv.exists(), "no output on failure");
    assert_eq!(
        std::fs::read_dir(fx.dir.path()).unwrap().count(),
        2,
        "no temporary left behind"
    );
}

#[test]
fn missing_files_and_bad_arguments_fail_cleanly() {
    let fx = Fixture::new();
    let missing = fx.path("nope.txt");
    let out = parbench(&[
        "wmd",
        "--embeddings",
        missing.to_str().unwrap(),
        "--docs",
        fx.path("docs.txt").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("nope.txt"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let out = parbench(&[
        "wmd",
        "--embeddings",
        fx.path("vecs.txt").to_str().unwrap(),
        "--docs",
        missing.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("reading documents") && err.contains("nope.txt"),
        "{err}"
    );

    let out = wmd(&fx, &["--query", "5"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--query 5 is out of range") && err.contains("5 documents"),
        "{err}"
    );

    let out = wmd(&fx, &["--variant", "no-such-variant"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("doc-major"), "{}", stderr(&out));

    let out = wmd(&fx, &["--lambda", "-1"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("lambda"), "{}", stderr(&out));

    std::fs::write(fx.path("vecs.txt"), "2 2\ncat 0 0\ndog 3\n").unwrap();
    let out = wmd(&fx, &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("vecs.txt:3") && err.contains("expected 2"),
        "{err}"
    );
}
