//! The Sinkhorn-WMD family: synthetic problems of the paper's shape, or real documents (R8,
//! 20news from the data dir) with seeded random embeddings or a word2vec text file.

use super::params::{get_f64, get_usize};
use crate::model::{Family, Measurement, ParamSpec, Params, PreparedInput};
use anyhow::{anyhow, Context, Result};
use sinkhorn::generate::{generate, SyntheticSpec};
use sinkhorn::{Control, Par, SinkhornParams, WmdProblem};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

pub struct SinkhornFamily;

/// Solver settings of a point (`lambda`, `iters`, `tol`).
pub fn solver_params(point: &Params) -> Result<SinkhornParams> {
    let tol = match point.get("tol") {
        None => None,
        Some(v) => Some(
            v.as_f64()
                .ok_or_else(|| anyhow!("parameter tol must be a number, got {v}"))?,
        ),
    };
    let p = SinkhornParams {
        lambda: get_f64(point, "lambda", 10.0)?,
        max_iter: get_usize(point, "iters", 15)?,
        tol,
    };
    p.validate()?;
    Ok(p)
}

/// The synthetic generator's shape from a point, with the paper's shape as defaults.
pub fn synthetic_spec(point: &Params, seed: u64) -> Result<SyntheticSpec> {
    let paper = SyntheticSpec::paper();
    Ok(SyntheticSpec {
        vocab: get_usize(point, "vocab", paper.vocab)?,
        dim: get_usize(point, "dim", paper.dim)?,
        docs: get_usize(point, "docs", paper.docs)?,
        words_per_doc: get_usize(point, "words_per_doc", paper.words_per_doc)?,
        query_words: get_usize(point, "query_words", paper.query_words)?,
        zipf_exponent: get_f64(point, "zipf_exponent", paper.zipf_exponent)?,
        seed,
    })
}

impl Family for SinkhornFamily {
    fn name(&self) -> &'static str {
        "sinkhorn"
    }

    fn variants(&self) -> Vec<&'static str> {
        sinkhorn::variant_names()
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec { name: "vocab", kind: "integer", help: "vocabulary size V (synthetic)" },
            ParamSpec { name: "dim", kind: "integer", help: "embedding dimension d" },
            ParamSpec { name: "docs", kind: "integer", help: "target documents N (synthetic; for a dataset, the first N documents)" },
            ParamSpec { name: "words_per_doc", kind: "integer", help: "distinct words per target document (synthetic)" },
            ParamSpec { name: "query_words", kind: "integer", help: "distinct words in the query, v_s (synthetic)" },
            ParamSpec { name: "zipf_exponent", kind: "float", help: "exponent of the Zipf law words are drawn from (synthetic)" },
            ParamSpec { name: "query_doc", kind: "integer", help: "index of the query document (dataset)" },
            ParamSpec { name: "embeddings", kind: "string", help: "word2vec text file of embeddings (dataset; default: seeded random vectors of dimension dim)" },
            ParamSpec { name: "lambda", kind: "float", help: "entropic regularization (default 10)" },
            ParamSpec { name: "iters", kind: "integer", help: "Sinkhorn iterations (default 15)" },
            ParamSpec { name: "tol", kind: "float", help: "per-document stopping tolerance on the change of x (default none)" },
        ]
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

    fn prepare(&self, point: &Params, dataset: Option<&Path>, seed: u64) -> Result<PreparedInput> {
        let problem = match dataset {
            None => generate(&synthetic_spec(point, seed)?)
                .context("generating the synthetic Sinkhorn problem")?,
            Some(path) => dataset_problem(point, path, seed)?,
        };
        Ok(Box::new(problem))
    }

    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Params,
        threads: usize,
    ) -> Result<Measurement> {
        let problem = input
            .downcast_ref::<WmdProblem>()
            .ok_or_else(|| anyhow!("internal: the prepared input is not a Sinkhorn problem"))?;
        let solver = sinkhorn::variant(variant)
            .ok_or_else(|| anyhow!("unknown sinkhorn variant {variant}"))?;
        let params = solver_params(point)?;
        let start = Instant::now();
        let out = solver.solve(problem, &params, Par::threads(threads), &mut |_| {
            Control::Continue
        })?;
        let wall = start.elapsed().as_secs_f64();
        let phases_s: BTreeMap<String, f64> = out
            .phases
            .0
            .iter()
            .map(|&(n, s)| (n.to_string(), s))
            .collect();
        let vs = problem.query().len() as f64;
        let nnz = problem.nnz() as f64;
        let mut metrics = BTreeMap::new();
        metrics.insert("gflop_per_s".to_string(), out.flops / wall / 1e9);
        metrics.insert("flops".to_string(), out.flops);
        metrics.insert("iterations".to_string(), out.iterations as f64);
        metrics.insert("nnz".to_string(), nnz);
        metrics.insert("query_words".to_string(), vs);
        metrics.insert("nnz_x_query".to_string(), nnz * vs);
        metrics.insert("vocab".to_string(), problem.vocab() as f64);
        metrics.insert("docs".to_string(), problem.num_docs() as f64);
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
        })
    }
}

/// Real documents, the first `docs` of them as targets and document `query_doc` as the query:
/// R8 lines `label<TAB>text`, or a `.tar.gz` of one document per file (20 Newsgroups, Ohsumed).
/// A document is numbered by its line (R8) or its position in the archive, for error messages.
fn dataset_problem(point: &Params, path: &Path, seed: u64) -> Result<WmdProblem> {
    use sinkhorn::corpus;
    let max_docs = get_usize(point, "docs", usize::MAX)?;
    let query_doc = get_usize(point, "query_doc", 0)?;
    let dim = get_usize(point, "dim", 300)?;
    let is_archive = path.to_string_lossy().ends_with(".tar.gz");
    let texts: Vec<(usize, String)> = if is_archive {
        crate::datadir::read_labeled_tar_gz(path, Some(max_docs))?
            .into_iter()
            .enumerate()
            .map(|(i, d)| (i + 1, d.text))
            .collect()
    } else {
        crate::datadir::read_r8(path)
            .with_context(|| format!("reading documents from {}", path.display()))?
            .into_iter()
            .enumerate()
            .map(|(i, (_, text))| (i + 1, text))
            .take(max_docs)
            .collect()
    };
    let embeddings = match point.get("embeddings").and_then(|v| v.as_str()) {
        Some(file) => parbench_common::embeddings::read_word2vec_text(Path::new(file))
            .with_context(|| format!("reading embeddings {file}"))?,
        None => corpus::random_embeddings_for(&texts, dim, seed)
            .context("making random embeddings for the documents' words")?,
    };
    let corpus =
        corpus::DocCorpus::build(texts.iter().map(|(l, t)| (*l, t.as_str())), &embeddings)?;
    Ok(corpus::query_problem(&corpus, &embeddings, query_doc)?)
}
