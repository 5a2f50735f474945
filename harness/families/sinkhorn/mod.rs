//! The Sinkhorn-WMD family: synthetic problems of the paper's shape, or real documents (R8,
//! 20news from the data dir) with seeded random embeddings or a word2vec text file.
//!
//! Trace: one step per Sinkhorn iteration from the solver's progress callback, with
//! `metric_max_rel_change` (the largest relative change of x over the documents still
//! iterating, what `tol` is compared with) and `metric_active_docs`; `time_s` is taken by the
//! callback, from the start of the solve (precomputation included). `doc-major` replays its
//! per-iteration statistics after its loop, so its steps all carry the loop's end time.
//!
//! `metric_loop_kernel_imbalance` (variants that split the loop's kernel among threads): the
//! busiest thread's kernel time over the mean of all threads', summed over the iterations of a
//! single solve; 1 is a perfect split.

pub mod cli;

use crate::families::params::{positive, PointIssue};
use crate::family::{Measurement, PeerInput, PreparedInput, ServeOptions, TraceStep, TypedFamily};
use crate::peers::files as peer_files;
use crate::peers::protocol::{Request, Timing};
use anyhow::{anyhow, bail, Context, Result};
use parbench_common::embeddings::{read_maybe_cached, EmbeddingsCache};
use sinkhorn::generate::{generate, SyntheticSpec};
use sinkhorn::{Control, Par, SinkhornParams, WmdProblem};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

pub struct SinkhornFamily;

crate::point_params! {
    /// A Sinkhorn-WMD point: the synthetic generator's shape (the paper's by default) or the
    /// documents taken from a dataset, and the solver's settings.
    pub struct SinkhornPoint {
        /// vocabulary size V (synthetic)
        vocab: usize = SyntheticSpec::paper().vocab,
        /// embedding dimension d
        dim: usize = SyntheticSpec::paper().dim,
        /// target documents N (synthetic; for a dataset, the first N documents, all when unset)
        docs: Option<usize> = None,
        /// distinct words per target document (synthetic)
        words_per_doc: usize = SyntheticSpec::paper().words_per_doc,
        /// distinct words in the query, v_s (synthetic)
        query_words: usize = SyntheticSpec::paper().query_words,
        /// exponent of the Zipf law words are drawn from (synthetic)
        zipf_exponent: f64 = SyntheticSpec::paper().zipf_exponent,
        /// index of the query document (dataset)
        query_doc: usize = 0,
        /// word2vec text file of embeddings (dataset; default: seeded random vectors of dimension dim)
        embeddings: Option<String> = None,
        /// entropic regularization
        lambda: f64 = SinkhornParams::default().lambda,
        /// Sinkhorn iterations
        iters: usize = SinkhornParams::default().max_iter,
        /// per-document stopping tolerance on the change of x
        tol: Option<f64> = None,
        /// queries solved against the collection in a run (synthetic; the first is the
        /// generator's query, the others drawn the same way)
        queries: usize = 1,
        /// queries solved together (1: each its own solve; more: one `solve_batch` per batch,
        /// which the document-major variants run with the distance phase shared)
        batch: usize = 1,
    }
}

impl SinkhornPoint {
    /// The solver's settings.
    pub fn solver(&self) -> SinkhornParams {
        SinkhornParams {
            lambda: self.lambda,
            max_iter: self.iters,
            tol: self.tol,
        }
    }

    /// The synthetic generator's shape.
    pub fn synthetic_spec(&self, seed: u64) -> SyntheticSpec {
        SyntheticSpec {
            vocab: self.vocab,
            dim: self.dim,
            docs: self.docs.unwrap_or(SyntheticSpec::paper().docs),
            words_per_doc: self.words_per_doc,
            query_words: self.query_words,
            zipf_exponent: self.zipf_exponent,
            seed,
        }
    }
}

impl TypedFamily for SinkhornFamily {
    type Point = SinkhornPoint;
    const NAME: &'static str = "sinkhorn";

    // Exact: sizes and the flop model.
    fn exact_metrics(&self) -> &'static [&'static str] {
        &[
            "flops",
            "nnz",
            "nnz_x_query",
            "docs",
            "query_words",
            "vocab",
            "work_*",
        ]
    }
    fn variants(&self) -> Vec<&'static str> {
        sinkhorn::variant_names()
    }

    fn check(&self, point: &SinkhornPoint, _variants: &[String]) -> Vec<PointIssue> {
        let mut issues = Vec::new();
        for (key, value) in [
            ("vocab", point.vocab),
            ("dim", point.dim),
            ("words_per_doc", point.words_per_doc),
            ("query_words", point.query_words),
            ("iters", point.iters),
            ("queries", point.queries),
            ("batch", point.batch),
        ] {
            positive(&mut issues, key, value);
        }
        if let Some(docs) = point.docs {
            positive(&mut issues, "docs", docs);
        }
        // The solver's own validation, so the rule is written once.
        if let Err(e) = point.solver().validate() {
            let key = if matches!(e, sinkhorn::WmdError::BadTolerance(_)) {
                "tol"
            } else {
                "lambda"
            };
            issues.push(PointIssue::new(
                &[key],
                e.to_string(),
                "lambda must be a positive number; tol, when set, a non-negative one",
            ));
        }
        if point.query_words > point.vocab {
            issues.push(PointIssue::new(
                &["query_words", "vocab"],
                format!(
                    "the query cannot have {} distinct words in a vocabulary of {}",
                    point.query_words, point.vocab
                ),
                "make query_words at most vocab",
            ));
        }
        issues
    }

    fn dataset_issues(&self, point: &SinkhornPoint) -> Vec<PointIssue> {
        if point.queries == 1 {
            return Vec::new();
        }
        vec![PointIssue::new(
            &["queries"],
            format!(
                "queries = {}: a point on a dataset solves its one query (query_doc); several \
                 queries are drawn for synthetic collections only",
                point.queries
            ),
            "leave queries at 1 here, or make the data source synthetic",
        )]
    }

    fn datasets(&self) -> Vec<(&'static str, &'static str)> {
        vec![
            (
                "r8-train.txt",
                "Reuters R8 training split, label<TAB>text per line",
            ),
            (
                "r8-test.txt",
                "Reuters R8 test split, label<TAB>text per line",
            ),
            (
                "20news-bydate.tar.gz",
                "20 Newsgroups by date, one post per file (headers kept)",
            ),
            (
                "ohsumed_single_23.tar.gz",
                "Ohsumed medical abstracts, one per file",
            ),
        ]
    }

    fn prepare(
        &self,
        point: &SinkhornPoint,
        dataset: Option<&Path>,
        seed: u64,
    ) -> Result<PreparedInput> {
        let (problem, queries) = match dataset {
            None => {
                let spec = point.synthetic_spec(seed);
                let problem =
                    generate(&spec).context("generating the synthetic Sinkhorn problem")?;
                (problem, sinkhorn::generate::queries(&spec, point.queries))
            }
            Some(path) if point.queries == 1 => {
                let problem = dataset_problem(point, path, seed)?;
                let query = problem.query().to_vec();
                (problem, vec![query])
            }
            // The plan refuses this (`dataset_issues`); a direct caller learns it here.
            Some(_) => bail!(
                "queries = {}: a point on a dataset solves its one query (query_doc)",
                point.queries
            ),
        };
        Ok(Box::new(Prepared {
            problem: Mutex::new(problem),
            queries,
        }))
    }

    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &SinkhornPoint,
        threads: usize,
    ) -> Result<Measurement> {
        let prepared: &Prepared = crate::family::prepared(input, "a Sinkhorn problem")?;
        let mut guard = lock(prepared)?;
        let problem = &mut *guard;
        let solver = sinkhorn::variant(variant)
            .ok_or_else(|| anyhow!("unknown sinkhorn variant {variant}"))?;
        let params = point.solver();
        // Per-collection work, untimed: a query against a loaded collection does not repeat it.
        solver.prepare(problem);
        if prepared.queries.len() > 1 {
            return run_queries(&*solver, problem, &prepared.queries, point, threads);
        }
        let mut trace = Vec::with_capacity(params.max_iter.min(1 << 16));
        let start = Instant::now();
        let out = solver.solve(problem, &params, Par::threads(threads), &mut |r| {
            trace.push(TraceStep {
                step: r.iteration,
                time_s: start.elapsed().as_secs_f64(),
                metrics: BTreeMap::from([
                    ("max_rel_change".to_string(), r.max_change),
                    ("active_docs".to_string(), r.active_docs as f64),
                ]),
            });
            Control::Continue
        })?;
        let wall = start.elapsed().as_secs_f64();
        let phases_s: BTreeMap<String, f64> = out
            .phases
            .0
            .iter()
            .map(|&(n, s)| (n.to_string(), s))
            .collect();
        let mut metrics = Self::size_metrics(problem);
        metrics.insert("gflop_per_s".to_string(), out.flops / wall / 1e9);
        metrics.insert("flops".to_string(), out.flops);
        metrics.insert("iterations".to_string(), out.iterations as f64);
        let work = solver.work(problem, &out, Par::threads(threads));
        metrics.extend(crate::exec::bound::work_metrics(&work));
        if let Some(imbalance) = out.kernel_imbalance() {
            metrics.insert("loop_kernel_imbalance".to_string(), imbalance);
        }
        let loop_s = out.phases.get("loop");
        if loop_s > 0.0 {
            metrics.insert(
                "loop_s_per_iter".to_string(),
                loop_s / out.iterations.max(1) as f64,
            );
        }
        Ok(Measurement {
            wall_time_s: wall,
            phases_s,
            metrics,
            output: out.distances,
            trace,
        })
    }

    fn peer_input(
        &self,
        input: &PreparedInput,
        point: &SinkhornPoint,
        dir: &Path,
    ) -> Result<PeerInput> {
        let problem = problem_of(input)?;
        let embeddings = (0..problem.vocab()).map(|w| (format!("w{w}"), problem.vec(w)));
        peer_files::write_word2vec_text(
            &dir.join("embeddings.txt"),
            problem.vocab(),
            problem.dim(),
            embeddings,
        )?;
        let mut query = String::from("word,weight\n");
        for &(w, x) in problem.query() {
            query.push_str(&format!("{w},{x}\n"));
        }
        peer_files::write_with(&dir.join("query.csv"), |w| w.write_all(query.as_bytes()))?;
        peer_files::write_with(&dir.join("docs.mtx"), |w| {
            fusedmm::mtx::write_coordinate(w, problem.docs_by_word())
        })?;
        let params = serde_json::json!({
            "lambda": point.lambda,
            "iters": point.iters,
            "tol": point.tol,
        });
        Ok(PeerInput {
            files: BTreeMap::from([
                ("embeddings".to_string(), "embeddings.txt".to_string()),
                ("query".to_string(), "query.csv".to_string()),
                ("docs".to_string(), "docs.mtx".to_string()),
            ]),
            params: params.as_object().cloned().unwrap_or_default(),
        })
    }

    fn peer_output(
        &self,
        input: &PreparedInput,
        _point: &SinkhornPoint,
        dir: &Path,
        _compute_s: f64,
    ) -> Result<Measurement> {
        let problem = problem_of(input)?;
        let distances = peer_files::read_number_column(&dir.join("distances.csv"), "distance")?;
        if distances.len() != problem.num_docs() {
            anyhow::bail!(
                "{}: {} distances for {} documents",
                dir.join("distances.csv").display(),
                distances.len(),
                problem.num_docs()
            );
        }
        Ok(Measurement {
            metrics: Self::size_metrics(&problem),
            output: distances,
            ..Measurement::default()
        })
    }

    /// `variant` on the peer files as its own process: the embeddings through parbench's
    /// parallel parser (or its parsed cache, given one), then the solve, timed as the Python
    /// peers time theirs.
    fn serve_peer(&self, variant: &str, request: &Request, options: &ServeOptions) -> Result<()> {
        let solver = sinkhorn::variant(variant)
            .ok_or_else(|| anyhow!("unknown sinkhorn variant {variant}"))?;
        let loading = Instant::now();
        let cache = options.cache.as_ref().map(EmbeddingsCache::new);
        let (embeddings, _, _) = read_maybe_cached(&request.input("embeddings")?, cache.as_ref())?;
        let query_path = request.input("query")?;
        let query = peer_files::read_number_rows(&query_path, "word,weight")?
            .into_iter()
            .enumerate()
            .map(|(i, row)| {
                let word = row[0];
                if word.fract() != 0.0 || word < 0.0 || word > u32::MAX as f64 {
                    bail!(
                        "{}:{}: word {word} is not a word number",
                        query_path.display(),
                        i + 2
                    );
                }
                Ok((word as u32, row[1]))
            })
            .collect::<Result<Vec<_>>>()?;
        let docs_path = request.input("docs")?;
        let docs = match fusedmm::mtx::read_path(&docs_path)? {
            fusedmm::mtx::MatrixFile::Sparse(s) => s,
            fusedmm::mtx::MatrixFile::Dense(_) => {
                bail!(
                    "{}: the documents are an array, expected a coordinate matrix",
                    docs_path.display()
                )
            }
        };
        let problem = WmdProblem::new(embeddings.vecs, embeddings.dim, query, docs)?;
        solver.prepare(&problem);
        let params = SinkhornParams {
            lambda: request.required("lambda")?,
            max_iter: request.required("iters")? as usize,
            tol: request.number("tol")?,
        };
        let load_s = loading.elapsed().as_secs_f64();
        let start = Instant::now();
        let out = solver.solve(
            &problem,
            &params,
            Par::threads(request.threads),
            &mut |_| Control::Continue,
        )?;
        let compute_s = start.elapsed().as_secs_f64();
        let dir = request.output_dir();
        peer_files::write_with(&dir.join("distances.csv"), |w| {
            writeln!(w, "distance")?;
            for d in &out.distances {
                writeln!(w, "{d}")?;
            }
            Ok(())
        })?;
        Timing {
            compute_s,
            phases_s: out
                .phases
                .0
                .iter()
                .map(|&(n, s)| (n.to_string(), s))
                .collect(),
            metrics: BTreeMap::from([
                ("iterations".to_string(), out.iterations as f64),
                ("load_s".to_string(), load_s),
            ]),
        }
        .write(&dir)
    }
}

impl SinkhornFamily {
    /// The sizes every variant reports, a peer included: exact counters of the gate.
    fn size_metrics(problem: &WmdProblem) -> BTreeMap<String, f64> {
        let vs = problem.query().len() as f64;
        let nnz = problem.nnz() as f64;
        BTreeMap::from([
            ("nnz".to_string(), nnz),
            ("query_words".to_string(), vs),
            ("nnz_x_query".to_string(), nnz * vs),
            ("vocab".to_string(), problem.vocab() as f64),
            ("docs".to_string(), problem.num_docs() as f64),
        ])
    }
}

/// A point's collection and the queries a run solves against it: the problem's own query alone,
/// or (`queries` > 1) that many, which a run puts in place in turn; hence the lock (the runs of
/// a point take their turns).
struct Prepared {
    problem: Mutex<WmdProblem>,
    queries: Vec<Vec<(u32, f64)>>,
}

fn lock(prepared: &Prepared) -> Result<MutexGuard<'_, WmdProblem>> {
    prepared
        .problem
        .lock()
        .map_err(|_| anyhow!("internal: an earlier run of this point failed holding its problem"))
}

fn problem_of(input: &PreparedInput) -> Result<MutexGuard<'_, WmdProblem>> {
    lock(crate::family::prepared(input, "a Sinkhorn problem")?)
}

/// Every query of `queries` solved against `problem`, `batch` at a time (1: a `solve` each, as
/// a caller without batches runs them; more: `solve_batch`), in order, and what a run reports of
/// them summed. The problem is left holding the last query.
pub(crate) struct SolvedQueries {
    /// Seconds of the solves alone.
    pub solve_s: f64,
    /// Every query's distances, one query after another.
    pub distances: Vec<f64>,
    /// The solver's phases, summed over the queries.
    pub phases_s: BTreeMap<String, f64>,
    pub flops: f64,
    pub work: sinkhorn::Work,
    /// The most iterations any query ran.
    pub iterations: usize,
}

pub(crate) fn solve_queries(
    solver: &dyn sinkhorn::WmdSolver,
    problem: &mut WmdProblem,
    queries: &[Vec<(u32, f64)>],
    batch: usize,
    params: &SinkhornParams,
    par: Par,
) -> Result<SolvedQueries> {
    let start = Instant::now();
    let mut outputs = Vec::with_capacity(queries.len());
    for (b, chunk) in queries.chunks(batch).enumerate() {
        let first = b * batch;
        if batch == 1 {
            problem.set_query(chunk[0].clone())?;
            outputs.push(
                solver
                    .solve(problem, params, par, &mut |_| Control::Continue)
                    .with_context(|| format!("query {first}"))?,
            );
        } else {
            outputs.extend(
                solver
                    .solve_batch(problem, chunk, params, par)
                    .with_context(|| format!("queries {first}..{}", first + chunk.len()))?,
            );
        }
    }
    let solve_s = start.elapsed().as_secs_f64();
    let mut solved = SolvedQueries {
        solve_s,
        distances: Vec::with_capacity(queries.len() * problem.num_docs()),
        phases_s: BTreeMap::new(),
        flops: 0.0,
        work: sinkhorn::Work::none(solver.threads(par)),
        iterations: 0,
    };
    for (query, out) in queries.iter().zip(&outputs) {
        for &(name, seconds) in &out.phases.0 {
            *solved.phases_s.entry(name.to_string()).or_insert(0.0) += seconds;
        }
        solved.flops += out.flops;
        solved.iterations = solved.iterations.max(out.iterations);
        // The work model reads the query's size from the problem.
        problem.set_query(query.clone())?;
        solved.work = solved.work.then(&solver.work(problem, out, par));
        solved.distances.extend_from_slice(&out.distances);
    }
    Ok(solved)
}

/// A run of several queries against the collection, `point.batch` at a time, with
/// `queries_per_s`; the collection's own query is put back at the end, for the next run.
fn run_queries(
    solver: &dyn sinkhorn::WmdSolver,
    problem: &mut WmdProblem,
    queries: &[Vec<(u32, f64)>],
    point: &SinkhornPoint,
    threads: usize,
) -> Result<Measurement> {
    let par = Par::threads(threads);
    let solved = solve_queries(solver, problem, queries, point.batch, &point.solver(), par)?;
    problem.set_query(queries[0].clone())?;
    let wall = solved.solve_s;
    let mut metrics = SinkhornFamily::size_metrics(problem);
    metrics.insert("gflop_per_s".to_string(), solved.flops / wall / 1e9);
    metrics.insert("flops".to_string(), solved.flops);
    metrics.insert("iterations".to_string(), solved.iterations as f64);
    metrics.insert("queries_per_s".to_string(), queries.len() as f64 / wall);
    metrics.extend(crate::exec::bound::work_metrics(&solved.work));
    Ok(Measurement {
        wall_time_s: wall,
        phases_s: solved.phases_s,
        metrics,
        output: solved.distances,
        trace: Vec::new(),
    })
}

/// Real documents, the first `docs` of them as targets and document `query_doc` as the query:
/// R8 lines `label<TAB>text`, or a `.tar.gz` of one document per file (20 Newsgroups, Ohsumed).
/// A document is numbered by its line (R8) or its position in the archive, for error messages.
fn dataset_problem(point: &SinkhornPoint, path: &Path, seed: u64) -> Result<WmdProblem> {
    use sinkhorn::corpus;
    let max_docs = point.docs.unwrap_or(usize::MAX);
    let query_doc = point.query_doc;
    let dim = point.dim;
    let is_archive = path.to_string_lossy().ends_with(".tar.gz");
    let texts: Vec<(usize, String)> = if is_archive {
        parbench_common::corpora::read_labeled_tar_gz(path, Some(max_docs))?
            .into_iter()
            .enumerate()
            .map(|(i, d)| (i + 1, d.text))
            .collect()
    } else {
        parbench_common::corpora::read_r8(path)
            .with_context(|| format!("reading documents from {}", path.display()))?
            .into_iter()
            .enumerate()
            .map(|(i, (_, text))| (i + 1, text))
            .take(max_docs)
            .collect()
    };
    let embeddings = match point.embeddings.as_deref() {
        // Through the user's parsed cache: a sweep reads the same file at every point.
        Some(file) => {
            let cache = EmbeddingsCache::default_location();
            read_maybe_cached(Path::new(file), cache.as_ref())
                .with_context(|| format!("reading embeddings {file}"))?
                .0
        }
        None => corpus::random_embeddings_for(&texts, dim, seed)
            .context("making random embeddings for the documents' words")?,
    };
    let corpus =
        corpus::DocCorpus::build(texts.iter().map(|(l, t)| (*l, t.as_str())), &embeddings)?;
    Ok(corpus::query_problem(&corpus, &embeddings, query_doc)?)
}
