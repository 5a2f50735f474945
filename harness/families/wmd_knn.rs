//! Document classification by Word Mover's Distance, end to end (Kusner et al. 2015's use of
//! WMD, issue 14 item 3): a pipeline a user would run, not one kernel.
//!
//! A point prepares, once, timed stage by stage:
//! 1. **embeddings**: word2vec (`trainer`, skip-gram with negative sampling) trained on
//!    `embedding_corpus`, a text corpus in the data dir beside the dataset (`wiki17m.txt.gz`);
//! 2. **documents**: the dataset (training documents, `label<TAB>text`, R8) as the targets and
//!    `test_file` beside it as the queries, evenly spaced subsets of each when `train_docs` /
//!    `test_docs` are set, as normalized bags of words over the words either uses
//!    ([`sinkhorn::corpus::TargetsAndQueries`]), and the problem they make, built and checked
//!    once for the whole batch of queries.
//!
//! A run of a variant (a Sinkhorn solver) computes every query's distance to every target on
//! `threads` threads, one query after another against the same problem
//! ([`sinkhorn::WmdProblem::set_query`]) or, with `batch` > 1, `batch` queries at a time
//! ([`sinkhorn::WmdSolver::solve_batch`]: the document-major variants share the distance phase
//! across them, and report it as the phase `kernels`), and classifies each query by the majority class of its
//! k nearest targets ([`sinkhorn::knn`]) for k in [`KS`] (Kusner et al. choose k in 1..19).
//!
//! Metrics: `test_error_k<k>_pct` for every k, `test_error_min_pct` (the lowest over k: chosen
//! on the test split, so optimistic), the same for the bag-of-words baseline (`bow_error_*`:
//! kNN by cosine distance of the same histograms, no embeddings, [`sinkhorn::knn::
//! CosineTargets`]), `majority_error_pct` (every query given the most common training
//! class), `queries_per_s`, `gflop_per_s`, the sizes (`docs`,
//! `test_docs`, `vocab`, `nnz`, `embedding_words`), `oov_token_pct` (content tokens of both
//! splits without a vector, dropped) and the prepared stages' `train_embeddings_s`,
//! `train_words_per_s` and `build_s`, and `wmd_s` (every solve, end to end). Phases: the
//! solver's own (`distance`, `precompute`, `loop`, `final`), summed over the queries, and
//! `classify`. The output
//! compared for equivalence is every distance, query by query.

use crate::exec::bound::work_metrics;
use crate::families::params::{positive, Choice, Named, PointIssue};
use crate::families::sinkhorn::solve_queries;
use crate::families::word2vec::InnerVariant;
use crate::family::{prepared, Measurement, PreparedInput, TypedFamily};
use anyhow::{anyhow, bail, Context, Result};
use parbench_common::embeddings::Embeddings;
use parbench_common::Par;
use sinkhorn::corpus::{batch_problem, TargetsAndQueries};
use sinkhorn::{knn, SinkhornParams, WmdProblem};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;
use word2vec::{Corpus, CorpusOptions, TrainParams};

pub struct WmdKnnFamily;

/// The numbers of neighbours every run classifies with.
pub const KS: [usize; 10] = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19];

crate::point_params! {
    /// A kNN classification by WMD: where the embeddings come from and how they are trained,
    /// which documents are classified, and the solver's settings.
    pub struct WmdKnnPoint {
        /// the documents to classify (label<TAB>text), in the data dir beside the dataset
        test_file: String = "r8-test.txt".to_string(),
        /// training documents used, evenly spaced through the dataset (none: all)
        train_docs: Option<usize> = None,
        /// test documents classified, evenly spaced through the test file (none: all)
        test_docs: Option<usize> = None,
        /// text corpus the embeddings are trained on, in the data dir beside the dataset
        embedding_corpus: String = "wiki17m.txt.gz".to_string(),
        /// train the embeddings on the corpus's first N words only (none: all)
        embedding_tokens: Option<u64> = None,
        /// embedding dimension d
        dim: usize = 300,
        /// passes of word2vec over the corpus
        epochs: usize = 1,
        /// words seen fewer times in the corpus get no vector
        min_count: u64 = CorpusOptions::default().min_count,
        /// the word2vec variant that trains the embeddings
        trainer: Choice<InnerVariant> = Choice(InnerVariant::DEFAULT),
        /// threads training the embeddings (1: the same embeddings bit for bit on every run)
        train_threads: usize = 1,
        /// entropic regularization of the Sinkhorn solve
        lambda: f64 = SinkhornParams::default().lambda,
        /// Sinkhorn iterations
        iters: usize = SinkhornParams::default().max_iter,
        /// test documents solved together (1: each its own solve; more: one `solve_batch` per
        /// batch, which the document-major variants run with the distance phase shared)
        batch: usize = 1,
    }
}

impl WmdKnnPoint {
    fn solver(&self) -> SinkhornParams {
        SinkhornParams {
            lambda: self.lambda,
            max_iter: self.iters,
            tol: None,
        }
    }
}

/// What a point prepares once for every variant and repetition.
struct Prepared {
    /// The first query in place; a run puts each in turn (on its own copy).
    problem: WmdProblem,
    queries: Vec<Vec<(u32, f64)>>,
    train_labels: Vec<u32>,
    test_labels: Vec<u32>,
    metrics: BTreeMap<String, f64>,
}

impl TypedFamily for WmdKnnFamily {
    type Point = WmdKnnPoint;
    const NAME: &'static str = "wmd_knn";

    fn variants(&self) -> Vec<&'static str> {
        sinkhorn::variant_names()
    }

    // Exact: the sizes and the flop model, which the corpus and the vocabulary cut fix.
    fn exact_metrics(&self) -> &'static [&'static str] {
        &[
            "docs",
            "test_docs",
            "vocab",
            "nnz",
            "embedding_words",
            "flops",
            "work_*",
        ]
    }

    fn datasets(&self) -> Vec<(&'static str, &'static str)> {
        vec![(
            "r8-train.txt",
            "Reuters R8 training split, label<TAB>text per line (with r8-test.txt and wiki17m.txt.gz beside it)",
        )]
    }

    // The variants are the Sinkhorn solvers, counted and timed by the Sinkhorn gate workloads;
    // what this family adds around them (histograms, kNN votes) is a small share of a run.
    fn variants_gated_by(&self) -> Option<&'static str> {
        Some(<crate::families::sinkhorn::SinkhornFamily as TypedFamily>::NAME)
    }

    fn data_files(&self, point: &WmdKnnPoint) -> Vec<(&'static str, String)> {
        vec![
            ("test_file", point.test_file.clone()),
            ("embedding_corpus", point.embedding_corpus.clone()),
        ]
    }

    fn check(&self, point: &WmdKnnPoint, _variants: &[String]) -> Vec<PointIssue> {
        let mut issues = Vec::new();
        for (key, value) in [
            ("dim", point.dim),
            ("epochs", point.epochs),
            ("iters", point.iters),
            ("train_threads", point.train_threads),
            ("batch", point.batch),
        ] {
            positive(&mut issues, key, value);
        }
        for (key, value) in [
            ("train_docs", point.train_docs),
            ("test_docs", point.test_docs),
        ] {
            if let Some(n) = value {
                positive(&mut issues, key, n);
            }
        }
        if point.embedding_tokens == Some(0) {
            issues.push(PointIssue::new(
                &["embedding_tokens"],
                "`embedding_tokens` is 0: the embeddings would be trained on no text".to_string(),
                "leave it unset to train on the whole corpus, or give a positive count",
            ));
        }
        if let Err(e) = point.solver().validate() {
            issues.push(PointIssue::new(
                &["lambda"],
                e.to_string(),
                "lambda must be a positive number",
            ));
        }
        issues
    }

    fn prepare(
        &self,
        point: &WmdKnnPoint,
        dataset: Option<&Path>,
        seed: u64,
    ) -> Result<PreparedInput> {
        let Some(train_path) = dataset else {
            bail!("wmd_knn classifies real documents: give `data: source: dataset` (r8-train.txt)");
        };
        let dir = train_path.parent().unwrap_or(Path::new("."));
        let test_path = dir.join(&point.test_file);
        let corpus_path = dir.join(&point.embedding_corpus);

        let started = Instant::now();
        let text = Corpus::read(
            &corpus_path,
            &CorpusOptions {
                min_count: point.min_count,
                max_vocab: None,
                max_tokens: point.embedding_tokens,
            },
        )
        .with_context(|| format!("reading the embedding corpus {}", corpus_path.display()))?;
        let params = TrainParams {
            dim: point.dim,
            epochs: point.epochs,
            seed,
            min_count: point.min_count,
            report_interval_seconds: 3600.0,
            ..TrainParams::default()
        };
        let trainer = word2vec::variant(point.trainer.name()).ok_or_else(|| {
            anyhow!(
                "internal: unknown word2vec variant {}",
                point.trainer.name()
            )
        })?;
        let par = if point.train_threads == 1 {
            Par::Seq
        } else {
            Par::threads(point.train_threads)
        };
        let trained = trainer
            .train(&text, &params, par, &mut |_| word2vec::Control::Continue)
            .context("training the embeddings")?;
        let model = trained.model;
        let embeddings = Embeddings::new(
            model.words().to_vec(),
            model.dim(),
            model.vectors().iter().map(|&x| f64::from(x)).collect(),
        )
        .context("the trained model as an embeddings table")?;
        let train_embeddings_s = started.elapsed().as_secs_f64();

        let started = Instant::now();
        let read = |path: &Path, take: Option<usize>| -> Result<Vec<(usize, String, String)>> {
            let docs = parbench_common::corpora::read_r8(path)
                .with_context(|| format!("reading documents from {}", path.display()))?;
            Ok(evenly_spaced(docs.len(), take)
                .map(|i| {
                    let (label, text) = docs[i].clone();
                    (i + 1, label, text)
                })
                .collect())
        };
        let train = read(train_path, point.train_docs)?;
        let test = read(&test_path, point.test_docs)?;
        let split = TargetsAndQueries::build(
            train.iter().map(|(line, _, text)| (*line, text.as_str())),
            test.iter().map(|(line, _, text)| (*line, text.as_str())),
            &embeddings,
        )
        .with_context(|| {
            format!(
                "building the bags of words of {} (lines of the targets) and {} (lines of the queries)",
                train_path.display(),
                test_path.display()
            )
        })?;
        let mut classes: Vec<&str> = train.iter().map(|(_, label, _)| label.as_str()).collect();
        classes.sort_unstable();
        classes.dedup();
        let class_of = |label: &str| -> u32 {
            // A test class the training split lacks gets an id no prediction can have.
            classes
                .binary_search(&label)
                .map_or(classes.len() as u32, |c| c as u32)
        };
        let train_labels: Vec<u32> = train.iter().map(|(_, l, _)| class_of(l)).collect();
        let test_labels: Vec<u32> = test.iter().map(|(_, l, _)| class_of(l)).collect();
        let stats = split.targets.stats;
        let first = split
            .queries
            .first()
            .cloned()
            .ok_or_else(|| anyhow!("{} has no documents to classify", test_path.display()))?;
        let problem =
            batch_problem(&split.targets, &embeddings, first).context("assembling the problem")?;
        let build_s = started.elapsed().as_secs_f64();

        let content_tokens = (stats.tokens - stats.stop_words_removed).max(1) as f64;
        let metrics = BTreeMap::from([
            ("train_embeddings_s".to_string(), train_embeddings_s),
            ("train_words_per_s".to_string(), trained.words_per_second),
            ("build_s".to_string(), build_s),
            ("embedding_words".to_string(), embeddings.len() as f64),
            (
                "oov_token_pct".to_string(),
                100.0 * stats.oov_tokens as f64 / content_tokens,
            ),
            ("docs".to_string(), problem.num_docs() as f64),
            ("test_docs".to_string(), split.queries.len() as f64),
            ("vocab".to_string(), problem.vocab() as f64),
            ("nnz".to_string(), problem.nnz() as f64),
            (
                "majority_error_pct".to_string(),
                knn::error_percent(
                    &vec![majority(&train_labels); test_labels.len()],
                    &test_labels,
                ),
            ),
        ]);
        let targets = knn::CosineTargets::new(problem.docs_by_word());
        let bow = split.queries.iter().map(|q| targets.distances(q));
        let bow_errors = errors_by_k(bow, &train_labels, &test_labels);
        let mut metrics = metrics;
        insert_errors(&mut metrics, "bow_error", &bow_errors);
        Ok(Box::new(Prepared {
            problem,
            queries: split.queries,
            train_labels,
            test_labels,
            metrics,
        }))
    }

    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &WmdKnnPoint,
        threads: usize,
    ) -> Result<Measurement> {
        let prepared: &Prepared = prepared(input, "a kNN classification")?;
        let solver = sinkhorn::variant(variant)
            .ok_or_else(|| anyhow!("unknown sinkhorn variant {variant}"))?;
        let params = point.solver();
        let par = Par::threads(threads);
        let mut problem = prepared.problem.clone();
        // Once per collection, as loading it would be (queries only swap the query).
        solver.prepare(&problem);
        let docs = problem.num_docs();
        let start = Instant::now();
        // The solver's own phases (distance, precompute, loop, final), summed over the queries.
        let solved = solve_queries(
            &*solver,
            &mut problem,
            &prepared.queries,
            point.batch,
            &params,
            par,
        )?;
        let (flops, wmd_s) = (solved.flops, solved.solve_s);
        let mut phases_s = solved.phases_s;
        let distances = solved.distances;
        let started = Instant::now();
        let errors = errors_by_k(
            distances.chunks_exact(docs),
            &prepared.train_labels,
            &prepared.test_labels,
        );
        let classify_s = started.elapsed().as_secs_f64();
        let wall = start.elapsed().as_secs_f64();
        let mut metrics = prepared.metrics.clone();
        insert_errors(&mut metrics, "test_error", &errors);
        metrics.insert(
            "queries_per_s".to_string(),
            prepared.queries.len() as f64 / wall,
        );
        metrics.insert("flops".to_string(), flops);
        metrics.insert("gflop_per_s".to_string(), flops / wmd_s / 1e9);
        metrics.insert("wmd_s".to_string(), wmd_s);
        metrics.extend(work_metrics(&solved.work));
        Ok(Measurement {
            wall_time_s: wall,
            phases_s: {
                phases_s.insert("classify".to_string(), classify_s);
                phases_s
            },
            metrics,
            output: distances,
            trace: Vec::new(),
        })
    }
}

/// The error of kNN classification for every k of [`KS`], in percent, given each query's
/// distances to the training documents (query by query, in the order of `test_labels`).
fn errors_by_k(
    rows: impl Iterator<Item = impl AsRef<[f64]>>,
    train_labels: &[u32],
    test_labels: &[u32],
) -> Vec<f64> {
    let mut predicted = vec![Vec::with_capacity(test_labels.len()); KS.len()];
    for row in rows {
        for (by_k, class) in predicted
            .iter_mut()
            .zip(knn::predict(row.as_ref(), train_labels, &KS))
        {
            by_k.push(class);
        }
    }
    predicted
        .iter()
        .map(|p| knn::error_percent(p, test_labels))
        .collect()
}

/// Stores `errors` (one per k of [`KS`]) as `<prefix>_k<k>_pct`, and their lowest as
/// `<prefix>_min_pct`.
fn insert_errors(metrics: &mut BTreeMap<String, f64>, prefix: &str, errors: &[f64]) {
    for (k, &error) in KS.iter().zip(errors) {
        metrics.insert(format!("{prefix}_k{k}_pct"), error);
    }
    let lowest = errors.iter().copied().fold(f64::INFINITY, f64::min);
    metrics.insert(format!("{prefix}_min_pct"), lowest);
}

/// `take` indices spread evenly over `0..len` (all of them when `take` is unset or not
/// smaller), so a subset keeps the classes in about their proportions.
fn evenly_spaced(len: usize, take: Option<usize>) -> impl Iterator<Item = usize> {
    let n = take.map_or(len, |t| t.min(len));
    (0..n).map(move |i| i * len / n)
}

/// The most common label (the smallest id among equals).
fn majority(labels: &[u32]) -> u32 {
    let mut counts = BTreeMap::new();
    for &l in labels {
        *counts.entry(l).or_insert(0usize) += 1;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map_or(0, |(l, _)| l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsets_are_spread_over_the_whole_file() {
        assert_eq!(
            evenly_spaced(10, Some(4)).collect::<Vec<_>>(),
            vec![0, 2, 5, 7]
        );
        assert_eq!(evenly_spaced(3, None).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(evenly_spaced(3, Some(9)).collect::<Vec<_>>(), vec![0, 1, 2]);
    }

    #[test]
    fn the_majority_class_is_the_most_common_and_the_smallest_among_equals() {
        assert_eq!(majority(&[2, 1, 2, 0]), 2);
        assert_eq!(majority(&[3, 1, 1, 3]), 1);
    }
}
