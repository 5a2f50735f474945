//! The LDA family: collapsed Gibbs sampling (`sequential`, `sparse`, `sync` AD-LDA, `async`
//! master-worker) from the `lda` crate, on a UCI bag-of-words corpus (KOS), a text corpus
//! (20 Newsgroups archive, one-article-per-line wiki17m) or a seeded synthetic corpus drawn from
//! LDA's generative model.
//!
//! Conventions of this adapter:
//! - `threads` is the number of workers of `sync` and `async` (each worker is one thread; the
//!   master is one more thread that mostly sleeps on its channel). `sequential` and `sparse`
//!   ignore it, so at a point with `threads: 2` they still run on one thread; a ratio claim
//!   between a parallel variant and `sequential` at that point compares p workers against one.
//! - The checkpoint interval is `checkpoint_docs` documents when given, else
//!   `checkpoint_fraction` (default 0.1) of a worker's share of the documents, `D / workers`.
//! - Phases are the mean over workers of the seconds each spent `sampling`, `sending`,
//!   `waiting` and `applying` (the master's table folded into the local one), so they add up to
//!   about the wall time of the run rather than to worker-seconds. The sequential variants
//!   report one worker that only samples.
//! - `wall_time_s` is the sampler's own run time (`LdaOutput::train_seconds`): initialization,
//!   sampling, exchanges and any log-likelihood evaluated during the run (`likelihood_every`,
//!   default 0 = none, so timings measure sampling). The final log-likelihood is computed after
//!   the timed run and is the `output`, but stochastic variants never agree numerically, so
//!   experiments compare `metric_final_loglik` with ratio claims instead of an equivalence rule.
//!
//! - Under `backend: mpi` (the experiment's launcher) `sync` and `async` run with the master on
//!   rank 0 and `threads` workers on ranks 1.., one process each; every process reads the corpus.
//!
//! Cost of `prepare`: one pass over the file (UCI: O(NNZ + tokens); text: two streaming passes);
//! `run`: O(iterations x tokens x K) for the standard sampler, about O(iterations x tokens x
//! nonzero topics) for `sparse`.

use super::params::{get_bool, get_f64, get_str, get_usize};
use crate::backend::Backend;
use crate::model::{Family, Measurement, ParamSpec, Params, PreparedInput};
use anyhow::{anyhow, bail, Context, Result};
use lda::{Control, Corpus, DeltaEncoding, InnerSampler, LdaParams, SyntheticSpec, TextOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct LdaFamily;

/// Default share of a worker's documents between two exchanges (the paper's 10,000 documents
/// of a large corpus per checkpoint is about a tenth of a worker's share).
pub const DEFAULT_CHECKPOINT_FRACTION: f64 = 0.1;

/// Default minimum count of a word in a text corpus.
pub const DEFAULT_MIN_COUNT: u64 = 5;

/// The checkpoint interval in documents: `explicit` when given, else `fraction` of a worker's
/// share `ceil(docs / workers)`, at least 1.
pub fn checkpoint_docs(
    docs: usize,
    workers: usize,
    explicit: Option<usize>,
    fraction: f64,
) -> usize {
    match explicit {
        Some(n) => n,
        None => {
            let share = docs.div_ceil(workers.max(1));
            ((share as f64 * fraction).round() as usize).max(1)
        }
    }
}

/// The sampler settings of a point, with `workers` worker threads (`threads` of the point).
pub fn sampler_params(point: &Params, corpus: &Corpus, workers: usize) -> Result<LdaParams> {
    let delta_name = get_str(point, "delta", "dense")?;
    let delta = DeltaEncoding::from_name(delta_name)
        .ok_or_else(|| anyhow!("parameter delta must be dense or sparse, got {delta_name}"))?;
    let inner_name = get_str(point, "inner", "standard")?;
    let inner = InnerSampler::from_name(inner_name)
        .ok_or_else(|| anyhow!("parameter inner must be standard or sparse, got {inner_name}"))?;
    let fraction = get_f64(point, "checkpoint_fraction", DEFAULT_CHECKPOINT_FRACTION)?;
    if !(fraction.is_finite() && fraction > 0.0) {
        bail!("parameter checkpoint_fraction must be positive, got {fraction}");
    }
    let explicit = match point.get("checkpoint_docs") {
        None => None,
        Some(_) => Some(get_usize(point, "checkpoint_docs", 0)?),
    };
    let params = LdaParams {
        topics: get_usize(point, "topics", 20)?,
        alpha: get_f64(point, "alpha", 0.1)?,
        beta: get_f64(point, "beta", 0.1)?,
        iterations: get_usize(point, "iters", 100)?,
        seed: get_usize(point, "seed", 0)? as u64,
        workers,
        checkpoint_docs: checkpoint_docs(corpus.num_docs(), workers, explicit, fraction),
        likelihood_every: get_usize(point, "likelihood_every", 0)?,
        delta,
        non_blocking: get_bool(point, "non_blocking", false)?,
        inner,
        verify_invariants: get_bool(point, "verify_invariants", false)?,
    };
    params.validate()?;
    Ok(params)
}

/// The synthetic corpus's shape from a point (defaults: 1000 documents of 50 to 150 tokens over
/// 1000 words from 20 true topics, alpha = beta = 0.1).
pub fn synthetic_spec(point: &Params, seed: u64) -> Result<SyntheticSpec> {
    Ok(SyntheticSpec {
        docs: get_usize(point, "docs", 1000)?,
        words: get_usize(point, "words", 1000)?,
        topics: get_usize(point, "true_topics", 20)?,
        min_len: get_usize(point, "min_len", 50)?,
        max_len: get_usize(point, "max_len", 150)?,
        alpha: get_f64(point, "true_alpha", 0.1)?,
        beta: get_f64(point, "true_beta", 0.1)?,
        seed,
    })
}

/// The `vocab.*` file next to a UCI `docword.*` file, if it exists.
pub fn uci_vocab_for(docword: &Path) -> Option<PathBuf> {
    let name = docword.file_name()?.to_str()?;
    let rest = name.strip_prefix("docword")?;
    let rest = rest.strip_suffix(".gz").unwrap_or(rest);
    let vocab = docword.with_file_name(format!("vocab{rest}"));
    vocab.is_file().then_some(vocab)
}

/// A 20 Newsgroups post without its header block (everything up to the first blank line):
/// `From:`, `Subject:`, `Organization:` lines and addresses would otherwise dominate the topics.
pub fn strip_mail_header(text: &str) -> &str {
    let body_start = text
        .find("\n\n")
        .or_else(|| text.find("\r\n\r\n"))
        .map_or(0, |i| i + 2);
    &text[body_start..]
}

/// Reads a dataset of the data dir: UCI (`docword.*` with `vocab.*` next to it), a `.tar.gz` of
/// one document per file (20 Newsgroups, headers stripped), or text with one document per line
/// (`.gz` allowed). `docs` keeps the first documents (UCI: the first ids).
pub fn read_dataset(path: &Path, docs: Option<usize>, min_count: u64) -> Result<Corpus> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name.starts_with("docword") {
        let vocab = uci_vocab_for(path);
        let corpus = Corpus::read_uci(path, vocab.as_deref())?;
        return match docs {
            Some(n) if n < corpus.num_docs() => Ok(Corpus::new(
                corpus.docs()[..n].to_vec(),
                corpus.vocab().to_vec(),
                corpus.num_words(),
            )?),
            _ => Ok(corpus),
        };
    }
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        let posts = crate::datadir::read_labeled_tar_gz(path, docs)?;
        let texts: Vec<&str> = posts.iter().map(|p| strip_mail_header(&p.text)).collect();
        return Ok(Corpus::from_texts(&texts, min_count));
    }
    Ok(Corpus::read_text(
        path,
        &TextOptions {
            min_count,
            max_docs: docs,
        },
    )?)
}

impl Family for LdaFamily {
    fn name(&self) -> &'static str {
        "lda"
    }

    fn variants(&self) -> Vec<&'static str> {
        lda::variant_names()
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec { name: "topics", kind: "integer", help: "K, the number of topics (default 20)" },
            ParamSpec { name: "alpha", kind: "float", help: "symmetric document-topic prior (default 0.1)" },
            ParamSpec { name: "beta", kind: "float", help: "symmetric topic-word prior (default 0.1)" },
            ParamSpec { name: "iters", kind: "integer", help: "Gibbs sweeps over the corpus (default 100)" },
            ParamSpec { name: "seed", kind: "integer", help: "sampler seed: initial topics, document shares, draws (default 0)" },
            ParamSpec { name: "checkpoint_docs", kind: "integer", help: "documents a worker samples between exchanges (default: checkpoint_fraction of its share)" },
            ParamSpec { name: "checkpoint_fraction", kind: "float", help: "checkpoint as a fraction of a worker's share D / threads (default 0.1)" },
            ParamSpec { name: "likelihood_every", kind: "integer", help: "evaluate the log-likelihood every N iterations inside the timed run (default 0: only after it)" },
            ParamSpec { name: "delta", kind: "string", help: "async delta encoding: dense or sparse (default dense)" },
            ParamSpec { name: "non_blocking", kind: "boolean", help: "async: keep sampling while the master's reply is in flight (default false)" },
            ParamSpec { name: "inner", kind: "string", help: "per-token sampler of sync/async workers: standard or sparse (default standard)" },
            ParamSpec { name: "verify_invariants", kind: "boolean", help: "recount the tables after every merge (slow; default false)" },
            ParamSpec { name: "docs", kind: "integer", help: "dataset: keep the first N documents; synthetic: number of documents (default 1000)" },
            ParamSpec { name: "min_count", kind: "integer", help: "text corpora: drop words seen fewer times (default 5)" },
            ParamSpec { name: "words", kind: "integer", help: "synthetic: vocabulary size W (default 1000)" },
            ParamSpec { name: "true_topics", kind: "integer", help: "synthetic: topics of the generating model (default 20)" },
            ParamSpec { name: "min_len", kind: "integer", help: "synthetic: shortest document in tokens (default 50)" },
            ParamSpec { name: "max_len", kind: "integer", help: "synthetic: longest document in tokens (default 150)" },
            ParamSpec { name: "true_alpha", kind: "float", help: "synthetic: Dirichlet concentration of document mixtures (default 0.1)" },
            ParamSpec { name: "true_beta", kind: "float", help: "synthetic: Dirichlet concentration of topics (default 0.1)" },
        ]
    }

    fn datasets(&self) -> Vec<(&'static str, &'static str)> {
        vec![
            (
                "docword.kos.txt",
                "UCI bag of words, KOS blog entries (vocab.kos.txt next to it)",
            ),
            (
                "20news-bydate.tar.gz",
                "20 Newsgroups posts, one file per post (headers stripped)",
            ),
            (
                "wiki17m-docs.txt.gz",
                "Wikipedia articles, one per line (use `docs` to keep runs small)",
            ),
        ]
    }

    fn prepare(&self, point: &Params, dataset: Option<&Path>, seed: u64) -> Result<PreparedInput> {
        let corpus = match dataset {
            None => {
                lda::generate(&synthetic_spec(point, seed)?)
                    .context("generating the synthetic LDA corpus")?
                    .corpus
            }
            Some(path) => {
                let docs = match point.get("docs") {
                    None => None,
                    Some(_) => Some(get_usize(point, "docs", 0)?),
                };
                let min_count = get_usize(point, "min_count", DEFAULT_MIN_COUNT as usize)? as u64;
                read_dataset(path, docs, min_count)
                    .with_context(|| format!("reading the corpus {}", path.display()))?
            }
        };
        if corpus.num_tokens() == 0 {
            bail!("the corpus has no tokens");
        }
        Ok(Box::new(corpus))
    }

    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Params,
        threads: usize,
    ) -> Result<Measurement> {
        measure(variant, input, point, threads, &Backend::Local)?
            .ok_or_else(|| anyhow!("internal: the local backend returned no measurement"))
    }

    /// The master and one process per worker.
    fn processes(&self, _point: &Params, threads: usize) -> Result<usize> {
        Ok(threads + 1)
    }

    fn run_on_ranks(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Params,
        threads: usize,
        backend: &Backend,
    ) -> Result<Option<Measurement>> {
        measure(variant, input, point, threads, backend)
    }
}

/// One training run on threads, or across the MPI job's processes (`None` on the workers).
fn measure(
    variant: &str,
    input: &PreparedInput,
    point: &Params,
    threads: usize,
    backend: &Backend,
) -> Result<Option<Measurement>> {
    let corpus = input
        .downcast_ref::<Corpus>()
        .ok_or_else(|| anyhow!("internal: the prepared input is not an LDA corpus"))?;
    let sampler = lda::variant(variant).ok_or_else(|| anyhow!("unknown lda variant {variant}"))?;
    let params = sampler_params(point, corpus, threads)?;
    let out = sampler.train_on(corpus, &params, backend.communicator(), &mut |_| {
        Control::Continue
    })?;
    Ok(out.map(|out| measurement(corpus, &params, &out)))
}

/// The harness's view of one training run (see the module docs for the conventions).
pub fn measurement(corpus: &Corpus, params: &LdaParams, out: &lda::LdaOutput) -> Measurement {
    let n = out.workers.len().max(1) as f64;
    let sum = |f: fn(&lda::WorkerStats) -> f64| out.workers.iter().map(f).sum::<f64>();
    let sampling = sum(|w| w.sampling_seconds);
    let sending = sum(|w| w.sending_seconds);
    let waiting = sum(|w| w.waiting_seconds);
    let applying = sum(|w| w.applying_seconds);
    let busy = sampling + sending + waiting + applying;
    let phases_s = BTreeMap::from([
        ("sampling".to_string(), sampling / n),
        ("sending".to_string(), sending / n),
        ("waiting".to_string(), waiting / n),
        ("applying".to_string(), applying / n),
    ]);
    let share = |x: f64| if busy > 0.0 { x / busy } else { 0.0 };
    let tokens = corpus.num_tokens() as f64;
    let likelihood_s: f64 = out.loglik_trace.iter().map(|p| p.eval_seconds).sum();
    let metrics = BTreeMap::from([
        ("tokens_per_s".to_string(), out.tokens_per_second),
        ("final_loglik".to_string(), out.final_loglik),
        (
            "loglik_per_token".to_string(),
            if tokens > 0.0 {
                out.final_loglik / tokens
            } else {
                0.0
            },
        ),
        ("tokens".to_string(), tokens),
        ("tokens_sampled".to_string(), out.tokens_sampled as f64),
        ("docs".to_string(), corpus.num_docs() as f64),
        ("words".to_string(), corpus.num_words() as f64),
        ("iterations".to_string(), out.iterations as f64),
        ("seconds".to_string(), out.train_seconds),
        ("merges".to_string(), out.merges as f64),
        ("workers".to_string(), out.workers.len() as f64),
        ("checkpoint_docs".to_string(), params.checkpoint_docs as f64),
        ("waiting_share".to_string(), share(waiting)),
        (
            "communication_share".to_string(),
            share(sending + waiting + applying),
        ),
        ("waiting_max_s".to_string(), {
            let max = out.workers.iter().map(|w| w.waiting_seconds);
            max.fold(0.0, f64::max)
        }),
        ("master_s".to_string(), out.master_seconds),
        ("likelihood_s".to_string(), likelihood_s),
        (
            "exchanges".to_string(),
            out.workers.iter().map(|w| w.exchanges as f64).sum(),
        ),
        (
            "bytes_sent".to_string(),
            out.workers.iter().map(|w| w.bytes_sent as f64).sum(),
        ),
        (
            "invariant_violations".to_string(),
            out.invariants.violations.len() as f64,
        ),
    ]);
    Measurement {
        wall_time_s: out.train_seconds,
        phases_s,
        metrics,
        output: vec![out.final_loglik],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_defaults_to_a_tenth_of_a_share() {
        assert_eq!(checkpoint_docs(3430, 2, None, 0.1), 172);
        assert_eq!(checkpoint_docs(3430, 1, None, 0.1), 343);
        assert_eq!(checkpoint_docs(5, 8, None, 0.1), 1);
        assert_eq!(checkpoint_docs(3430, 2, Some(7), 0.1), 7);
    }

    #[test]
    fn mail_headers_are_stripped() {
        assert_eq!(
            strip_mail_header("From: a@b\nSubject: x\n\nbody text\n\nmore"),
            "body text\n\nmore"
        );
        assert_eq!(strip_mail_header("no header at all"), "no header at all");
    }

    #[test]
    fn bad_option_strings_are_errors() {
        let corpus = Corpus::new(vec![vec![0, 1]], Vec::new(), 2).unwrap();
        let mut point = Params::new();
        point.insert("delta".into(), crate::model::Value::Str("dens".into()));
        let err = sampler_params(&point, &corpus, 1).unwrap_err();
        assert!(err.to_string().contains("dense or sparse"), "{err}");
        let mut point = Params::new();
        point.insert("topics".into(), crate::model::Value::Int(0));
        assert!(sampler_params(&point, &corpus, 1).is_err());
    }
}
