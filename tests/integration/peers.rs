//! Peers through the harness (`docs/peers.md`): a declared peer written in plain Python (no
//! numpy: `tests/integration/peers/plain_sinkhorn_peer.py`, the iteration from its definition,
//! one document at a time) runs beside parbench's Sinkhorn variants and agrees with them; every
//! way a peer can fail is an error naming it, with its standard error, and never a row; a
//! declared peer's mistakes are plan errors with positions; shipped peers that were never
//! installed are refused with how to install them.

use crate::support::{parbench, stderr, stdout};
use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;
use std::path::{Path, PathBuf};

const PEER: &str = "tests/integration/peers/plain_sinkhorn_peer.py";

/// An experiment running `dense`, `fused` and the plain peer in `mode` (its time limit
/// `timeout_s`), in a fresh folder holding a copy of the peer.
fn experiment(mode: &str, timeout_s: f64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(PEER),
        dir.path().join("peer.py"),
    )
    .unwrap();
    let file = dir.path().join("peers.yaml");
    std::fs::write(
        &file,
        format!(
            "name: peers_under_test
paper: none
reproduces: none
family: sinkhorn
data: {{ source: synthetic, seed: 11 }}
params: {{ vocab: 40, dim: 5, docs: 6, words_per_doc: 4, query_words: 3, lambda: 1.5, iters: 9 }}
peers:
  plain:
    command: [python3, ./peer.py, {mode}]
    about: the iteration in plain Python
    timeout_s: {timeout_s}
variants: [dense, fused, plain]
repetitions: 2
equivalence: {{ reference: dense, rel_tol: 1.0e-12 }}
claims:
  - {{ kind: equivalence, name: the peer agrees with dense }}
"
        ),
    )
    .unwrap();
    (dir, file)
}

fn run(mode: &str, timeout_s: f64) -> anyhow::Result<runner::RunSummary> {
    let (dir, file) = experiment(mode, timeout_s);
    let plan = plan::build(&file, false, None).unwrap();
    runner::run(&plan, &dir.path().join("run"), false, ProgressMode::Silent)
}

#[test]
fn a_declared_peer_runs_beside_the_variants_and_agrees_with_them() {
    let (dir, file) = experiment("ok", 60.0);
    let plan = plan::build(&file, false, None).unwrap();
    assert_eq!(plan.peers.keys().collect::<Vec<_>>(), ["plain"]);
    let summary = runner::run(&plan, &dir.path().join("run"), false, ProgressMode::Silent).unwrap();
    assert!(summary.passed(), "{:?}", summary.claims);
    let peer_rows: Vec<_> = summary
        .rows
        .iter()
        .filter(|r| r.variant == "plain")
        .collect();
    assert_eq!(peer_rows.len(), 2);
    for row in peer_rows {
        let err = row
            .equiv_rel_error
            .expect("the peer is compared with dense");
        assert!(err <= 1e-12, "{err:e}");
        // Its own compute time, and the whole process's, which includes Python's start.
        let process = row.metrics["process_s"];
        assert!(
            row.wall_time_s > 0.0 && process > row.wall_time_s,
            "{row:?}"
        );
        assert_eq!(
            row.metrics["peer_documents"], 6.0,
            "its own metrics are kept apart"
        );
        assert_eq!(row.metrics["docs"], 6.0, "and parbench's sizes are added");
    }
    let meta = parbench::results::read_meta(&dir.path().join("run")).unwrap();
    let record = &meta.peers["plain"];
    assert_eq!(record.program, "python3 ./peer.py ok");
    assert_eq!(record.about, "the iteration in plain Python");

    // The side-by-side table, from the stored run alone, into a file between its markers.
    let tables = parbench::peers::table::markdown(&[dir.path().join("run")]).unwrap();
    assert!(
        tables.contains("**peers_under_test** (full run;"),
        "{tables}"
    );
    assert!(tables.contains("| all | plain (peer) |"), "{tables}");
    assert!(tables.contains("| all | dense |"), "{tables}");
    assert!(
        tables.contains("Peers: `plain` (python3 ./peer.py ok)."),
        "{tables}"
    );
    let readme = dir.path().join("README.md");
    let markers = format!(
        "intro\n{}\nold\n{}\nafter\n",
        parbench::peers::table::BEGIN,
        parbench::peers::table::END
    );
    std::fs::write(&readme, &markers).unwrap();
    parbench::peers::table::update(&readme, &tables).unwrap();
    let text = std::fs::read_to_string(&readme).unwrap();
    assert!(
        text.starts_with("intro\n") && text.ends_with("after\n"),
        "{text}"
    );
    assert!(
        text.contains("plain (peer)") && !text.contains("old"),
        "{text}"
    );
    std::fs::write(&readme, "no markers").unwrap();
    assert!(parbench::peers::table::update(&readme, &tables).is_err());
}

#[test]
fn a_failing_peer_is_an_error_with_its_standard_error() {
    let e = format!("{:#}", run("fail", 60.0).unwrap_err());
    assert!(e.contains("peer `plain`"), "{e}");
    assert!(e.contains("exited with exit status: 1"), "{e}");
    assert!(e.contains("the solver diverged on purpose"), "{e}");
}

#[test]
fn a_peer_past_its_time_limit_is_stopped() {
    let e = format!("{:#}", run("sleep", 0.5).unwrap_err());
    assert!(
        e.contains("peer `plain`") && e.contains("time limit of 0 s"),
        "{e}"
    );
}

#[test]
fn malformed_or_missing_output_is_an_error_naming_the_file() {
    let e = format!("{:#}", run("nan", 60.0).unwrap_err());
    assert!(
        e.contains("distances.csv:7: NaN is not a finite number"),
        "{e}"
    );
    let e = format!("{:#}", run("short", 60.0).unwrap_err());
    assert!(e.contains("5 distances for 6 documents"), "{e}");
    let e = format!("{:#}", run("notiming", 60.0).unwrap_err());
    assert!(e.contains("wrote no") && e.contains("timing.json"), "{e}");
}

#[test]
fn a_declared_peers_mistakes_are_plan_errors_with_positions() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "name: bad_peers
paper: none
reproduces: none
family: sinkhorn
data: { source: synthetic, seed: 1 }
peers:
  fused:
    command: [python3, x.py]
  empty:
    command: []
    timeout_s: -1
variants: [dense, empty, pott]
",
    )
    .unwrap();
    let e = plan::build(&file, false, None).unwrap_err().to_string();
    assert!(
        e.contains("bad.yaml:7:3: peer `fused` has the name of a sinkhorn variant or shipped peer"),
        "{e}"
    );
    assert!(
        e.contains("bad.yaml:10:5: peer `empty` has an empty command"),
        "{e}"
    );
    assert!(
        e.contains("bad.yaml:11:5: peer `empty` has timeout_s -1"),
        "{e}"
    );
    // The list of valid variants names the shipped peers and the declared ones.
    assert!(e.contains("unknown variant `pott`"), "{e}");
    assert!(
        e.contains("pot") && e.contains("paper-python") && e.contains("empty"),
        "{e}"
    );
}

#[test]
fn shipped_peers_never_installed_are_refused_with_how_to_install_them() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pot.yaml");
    std::fs::write(
        &file,
        "name: needs_pot
paper: none
reproduces: none
family: sinkhorn
data: { source: synthetic, seed: 1 }
params: { vocab: 40, dim: 5, docs: 6, words_per_doc: 4, query_words: 3 }
variants: [dense, pot]
",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_parbench"))
        .env("PARBENCH_PEERS_DIR", cache.path())
        .args(["run", file.to_str().unwrap(), "--out"])
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("needs_pot: it runs the peers pot"), "{e}");
    assert!(
        e.contains("not installed") && e.contains("parbench peers install"),
        "{e}"
    );
    assert!(
        !dir.path().join("run").exists(),
        "nothing ran, nothing was written"
    );

    let list = std::process::Command::new(env!("CARGO_BIN_EXE_parbench"))
        .env("PARBENCH_PEERS_DIR", cache.path())
        .args(["peers", "list"])
        .output()
        .unwrap();
    let text = stdout(&list);
    assert!(text.contains("the peers are not installed"), "{text}");
    assert!(
        text.contains("pot ") && text.contains("POT (not installed)"),
        "{text}"
    );
    let _ = parbench; // the shared helper is for commands without an environment of their own
}

/// A family's typed point from `params`.
fn point(
    family: &dyn parbench::family::Family,
    params: &[(&str, parbench::family::Value)],
) -> parbench::family::TypedPoint {
    let params: parbench::family::Params = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    family
        .typed_point(&params, &[])
        .unwrap_or_else(|e| panic!("{e:?}"))
}

#[test]
fn fusedmm_peer_files_carry_the_problem_exactly_and_a_result_reads_back_exactly() {
    use fusedmm::{local::local_kernel, mtx, Kernel, KernelOutput, Par, Problem};
    use parbench::family::{Family, Value};
    let family = parbench::families::fusedmm::FusedmmFamily;
    for kernel in Kernel::ALL {
        let p = point(
            &family,
            &[
                ("rows", Value::Int(40)),
                ("nnz_per_row", Value::Int(3)),
                ("r", Value::Int(5)),
                ("kernel", Value::Str(kernel.name().to_string())),
            ],
        );
        let input = family.prepare(&p, None, 9).unwrap();
        let problem = input.downcast_ref::<Problem>().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let files = family.peer_input(&input, &p, dir.path()).unwrap();
        assert_eq!(files.params["kernel"], kernel.name());
        match mtx::read_path(&dir.path().join(&files.files["s"])).unwrap() {
            mtx::MatrixFile::Sparse(s) => assert_eq!(&s, problem.s()),
            other => panic!("{other:?}"),
        }
        match mtx::read_path(&dir.path().join(&files.files["b"])).unwrap() {
            mtx::MatrixFile::Dense(b) => assert_eq!(&b, problem.b()),
            other => panic!("{other:?}"),
        }
        // A peer that wrote parbench's own result gives back exactly that result.
        let out = local_kernel(problem, kernel, Par::threads(1)).unwrap();
        let result = dir.path().join("result.mtx");
        let mut file = std::fs::File::create(&result).unwrap();
        match &out {
            KernelOutput::Sparse(s) => mtx::write_coordinate(&mut file, s).unwrap(),
            KernelOutput::Dense(d) => mtx::write_array(&mut file, d).unwrap(),
        }
        let m = family.peer_output(&input, &p, dir.path(), 0.5).unwrap();
        assert_eq!(m.output, out.flatten(), "{}", kernel.name());
        assert!(m.metrics["gflop_per_s"] > 0.0);
        // The other shape of result is refused, naming the file.
        let mut file = std::fs::File::create(&result).unwrap();
        match &out {
            KernelOutput::Sparse(_) => mtx::write_array(&mut file, problem.a()).unwrap(),
            KernelOutput::Dense(_) => mtx::write_coordinate(&mut file, problem.s()).unwrap(),
        }
        let e = format!(
            "{:#}",
            family.peer_output(&input, &p, dir.path(), 0.5).unwrap_err()
        );
        assert!(e.contains("result.mtx"), "{e}");
    }
}

#[test]
fn an_sddmm_result_off_the_pattern_of_s_is_refused() {
    use fusedmm::{mtx, Csr, Problem};
    use parbench::family::{Family, Value};
    let family = parbench::families::fusedmm::FusedmmFamily;
    let p = point(
        &family,
        &[
            ("rows", Value::Int(20)),
            ("nnz_per_row", Value::Int(2)),
            ("r", Value::Int(3)),
            ("kernel", Value::Str("sddmm".to_string())),
        ],
    );
    let input = family.prepare(&p, None, 3).unwrap();
    let s = input.downcast_ref::<Problem>().unwrap().s();
    // S less its last nonzero.
    let mut triples: Vec<(usize, usize, f64)> = (0..s.nrows())
        .flat_map(|i| {
            let (cols, vals) = s.row(i);
            cols.iter()
                .zip(vals)
                .map(move |(&j, &v)| (i, j as usize, v))
                .collect::<Vec<_>>()
        })
        .collect();
    triples.pop();
    let fewer = Csr::from_triplets(s.nrows(), s.ncols(), &triples).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut file = std::fs::File::create(dir.path().join("result.mtx")).unwrap();
    mtx::write_coordinate(&mut file, &fewer).unwrap();
    let e = format!(
        "{:#}",
        family.peer_output(&input, &p, dir.path(), 0.1).unwrap_err()
    );
    assert!(e.contains("does not have the pattern of S"), "{e}");
}

#[test]
fn lda_peer_files_carry_the_corpus_and_counts_are_scored_by_parbench() {
    use parbench::family::{Family, Value};
    let family = parbench::families::lda::LdaFamily;
    let p = point(
        &family,
        &[
            ("topics", Value::Int(4)),
            ("docs", Value::Int(30)),
            ("words", Value::Int(60)),
            ("alpha", Value::Float(0.3)),
            ("beta", Value::Float(0.05)),
        ],
    );
    let input = family.prepare(&p, None, 5).unwrap();
    let corpus = input.downcast_ref::<lda::Corpus>().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = family.peer_input(&input, &p, dir.path()).unwrap();
    assert_eq!(files.params["topics"], 4);
    // The docword file is the same bag of words per document.
    let back = lda::Corpus::read_uci(&dir.path().join(&files.files["docword"]), None).unwrap();
    assert_eq!(back.num_docs(), corpus.num_docs());
    for (a, b) in back.docs().iter().zip(corpus.docs()) {
        let (mut a, mut b) = (a.clone(), b.clone());
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
    }
    // A peer's final counts (here a random state's) are scored with parbench's likelihood.
    let state = lda::LdaState::random(corpus, 4, 77);
    let write = |name: &str, table: &[u32]| {
        let text: String = table
            .chunks(4)
            .map(|row| {
                let row: Vec<String> = row.iter().map(u32::to_string).collect();
                row.join(",") + "\n"
            })
            .collect();
        std::fs::write(dir.path().join(name), text).unwrap();
    };
    write("word_topic.csv", state.word_topic());
    write("doc_topic.csv", state.doc_topic());
    let m = family.peer_output(&input, &p, dir.path(), 2.0).unwrap();
    assert_eq!(
        m.metrics["final_loglik"],
        state.log_likelihood(corpus, 0.3, 0.05)
    );
    let sampled = corpus.num_tokens() as f64 * m.metrics["iterations"];
    assert_eq!(m.metrics["tokens_per_s"], sampled / 2.0);
    // Counts that are not a state of this corpus are refused.
    let mut doc_topic = state.doc_topic().to_vec();
    doc_topic[0] += 1;
    write("doc_topic.csv", &doc_topic);
    let e = format!(
        "{:#}",
        family.peer_output(&input, &p, dir.path(), 2.0).unwrap_err()
    );
    assert!(e.contains("not a state of this corpus"), "{e}");
}

#[test]
fn reproduce_skips_peer_experiments_when_peers_were_never_installed_and_refuses_them_by_name() {
    let cache = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let experiments = work.path().join("experiments");
    std::fs::create_dir_all(experiments.join("sinkhorn")).unwrap();
    let body = |name: &str, variants: &str| {
        format!(
            "name: {name}
paper: none
reproduces: none
family: sinkhorn
data: {{ source: synthetic, seed: 1 }}
params: {{ vocab: 40, dim: 5, docs: 6, words_per_doc: 4, query_words: 3, iters: 3 }}
variants: [{variants}]
repetitions: 1
"
        )
    };
    std::fs::write(
        experiments.join("sinkhorn/alone.yaml"),
        body("alone", "dense, fused"),
    )
    .unwrap();
    std::fs::write(
        experiments.join("sinkhorn/with_pot.yaml"),
        body("with_pot", "dense, pot"),
    )
    .unwrap();
    let reproduce = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_parbench"))
            .current_dir(work.path())
            .env("PARBENCH_PEERS_DIR", cache.path())
            .args(["reproduce", "--experiments"])
            .arg(&experiments)
            .arg("--out")
            .arg(work.path().join(format!("out{}", extra.len())))
            .args(extra)
            .output()
            .unwrap()
    };
    let all = reproduce(&[]);
    assert!(all.status.success(), "{}", stderr(&all));
    assert!(
        stderr(&all)
            .contains("skipping with_pot: it runs the peers pot, and the peers are not installed"),
        "{}",
        stderr(&all)
    );
    assert!(
        stdout(&all)
            .contains("skipped 1 experiment(s) that run peers, never installed here (with_pot)"),
        "{}",
        stdout(&all)
    );
    assert!(work.path().join("out0/alone/meta.json").exists());
    let by_name = reproduce(&["peers"]);
    assert!(!by_name.status.success());
    assert!(
        stderr(&by_name).contains("with_pot: it runs the peers pot")
            && stderr(&by_name).contains("parbench peers install"),
        "{}",
        stderr(&by_name)
    );
}
