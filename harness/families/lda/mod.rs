//! The LDA family: collapsed Gibbs sampling (`sequential`, `sparse`, `mh` Metropolis-Hastings,
//! `warp` WarpLDA's delayed Metropolis-Hastings, `sync` AD-LDA, `async` master-worker) from the `lda` crate, on a UCI bag-of-words corpus
//! (KOS), a text corpus (20 Newsgroups archive, one-article-per-line wiki17m) or a seeded
//! synthetic corpus drawn from LDA's generative model.
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
//! - The trace has one step per iteration (the sampler's progress report; for `sync` and
//!   `async` an iteration every worker has finished): `time_s` is the sampler's clock (seconds
//!   since sampling started, likelihood evaluations included), `metric_loglik` and
//!   `metric_loglik_per_token` the joint log-likelihood where one was due (`likelihood_every`;
//!   with 1 every step has it, and the last step's value is the final state's, equal to
//!   `metric_final_loglik` up to the order of the sum over workers), `metric_likelihood_s` the
//!   seconds spent evaluating it so far, and `metric_sampling_s` = `time_s` minus those: the
//!   time axis of a convergence curve that does not count its own measuring. (For `sync` and
//!   `async` the evaluation's document part runs on the workers in parallel and the slowest
//!   worker's share is subtracted, but not the time other workers then wait for it, so
//!   `sampling_s` overstates the time a run without evaluations takes: on KOS with 2 workers,
//!   1.9 s for sync's 1.72 s.)
//!
//! - With `target_loglik_per_token` a run stops at the first evaluation (every
//!   `likelihood_every` iterations) whose log-likelihood per token reaches it, `iters` being
//!   the most it runs; `metric_seconds_to_target` is the sampling seconds (evaluations taken
//!   out) at that evaluation, and `metric_reached_target` 1, or the whole run's and 0 when no
//!   evaluation reached it: samplers that mix at different rates per iteration compared by the
//!   time they take to get equally far.
//!
//! - Under `backend: mpi` (the experiment's launcher) `sync` and `async` run with the master on
//!   rank 0 and `threads` workers on ranks 1.., one process each; every process reads the corpus.
//!
//! Cost of `prepare`: one pass over the file (UCI: O(NNZ + tokens); text: two streaming passes);
//! `run`: O(iterations x tokens x K) for the standard sampler, about O(iterations x tokens x
//! nonzero topics) for `sparse`, O(iterations x tokens x steps) for `mh`.

pub mod cli;

use crate::exec::bound::work_metrics;
use crate::exec::ranks::Ranks;
use crate::families::params::{positive, Choice, Named, PointIssue};
use crate::family::{Measurement, PeerInput, PreparedInput, TraceStep, TypedFamily};
use crate::peers::files as peer_files;
use anyhow::{anyhow, bail, Context, Result};
use lda::{
    Control, Corpus, DeltaEncoding, InnerSampler, IterationReport, LdaError, LdaParams, Par,
    SyntheticSpec,
};
use std::collections::BTreeMap;
use std::path::Path;

pub struct LdaFamily;

/// Default share of a worker's documents between two exchanges (the paper's 10,000 documents
/// of a large corpus per checkpoint is about a tenth of a worker's share).
pub const DEFAULT_CHECKPOINT_FRACTION: f64 = 0.1;

/// Default minimum count of a word in a text corpus.
pub const DEFAULT_MIN_COUNT: u64 = 5;

/// Documents of the synthetic corpus when a point does not set `docs`.
pub const DEFAULT_SYNTHETIC_DOCS: usize = 1000;

impl Named for DeltaEncoding {
    const WHAT: &'static str = "delta encoding";
    fn all() -> Vec<Self> {
        vec![DeltaEncoding::Dense, DeltaEncoding::Sparse]
    }
    fn name(self) -> &'static str {
        DeltaEncoding::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        DeltaEncoding::from_name(name)
    }
}

impl Named for InnerSampler {
    const WHAT: &'static str = "inner sampler";
    fn all() -> Vec<Self> {
        vec![InnerSampler::Standard, InnerSampler::Sparse]
    }
    fn name(self) -> &'static str {
        InnerSampler::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        InnerSampler::from_name(name)
    }
}

crate::point_params! {
    /// An LDA point: the sampler's settings (the `lda` crate's defaults, but no log-likelihood
    /// inside the timed run), the corpus cut of a dataset, and the synthetic corpus's shape
    /// (1000 documents of 50 to 150 tokens over 1000 words from 20 true topics by default).
    pub struct LdaPoint {
        /// K, the number of topics
        topics: usize = LdaParams::default().topics,
        /// symmetric document-topic prior
        alpha: f64 = LdaParams::default().alpha,
        /// symmetric topic-word prior
        beta: f64 = LdaParams::default().beta,
        /// Gibbs sweeps over the corpus
        iters: usize = LdaParams::default().iterations,
        /// sampler seed: initial topics, document shares, draws
        seed: u64 = LdaParams::default().seed,
        /// documents a worker samples between exchanges (none: checkpoint_fraction of its share)
        checkpoint_docs for ["sync", "async"]: Option<usize> = None,
        /// checkpoint as a fraction of a worker's share D / threads, in (0, 1]
        checkpoint_fraction for ["sync", "async"]: f64 = DEFAULT_CHECKPOINT_FRACTION,
        /// evaluate the log-likelihood every N iterations inside the timed run (0: only after it)
        likelihood_every: usize = 0,
        /// stop once an evaluated log-likelihood per token reaches this (needs likelihood_every;
        /// gives metrics seconds_to_target and reached_target; none: run every iteration)
        target_loglik_per_token: Option<f64> = None,
        /// how a worker encodes its delta
        delta for ["async"]: Choice<DeltaEncoding> = Choice(DeltaEncoding::default()),
        /// keep sampling while the master's reply is in flight
        non_blocking for ["async"]: bool = LdaParams::default().non_blocking,
        /// the workers' per-token sampler
        inner for ["sync", "async"]: Choice<InnerSampler> = Choice(InnerSampler::default()),
        /// recount the tables after every merge (slow)
        verify_invariants for ["sync", "async"]: bool = LdaParams::default().verify_invariants,
        /// dataset: keep the first N documents (none: all); synthetic: number of documents
        /// (none: 1000)
        docs: Option<usize> = None,
        /// text corpora: drop words seen fewer times
        min_count: u64 = DEFAULT_MIN_COUNT,
        /// synthetic: vocabulary size W
        words: usize = 1000,
        /// synthetic: topics of the generating model
        true_topics: usize = 20,
        /// synthetic: shortest document in tokens
        min_len: usize = 50,
        /// synthetic: longest document in tokens
        max_len: usize = 150,
        /// synthetic: Dirichlet concentration of document mixtures
        true_alpha: f64 = 0.1,
        /// synthetic: Dirichlet concentration of topics
        true_beta: f64 = 0.1,
    }
}

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

impl LdaPoint {
    /// The sampler settings for a corpus of `docs` documents and `workers` worker threads
    /// (`threads` of the point, which set the checkpoint interval and are passed to the sampler
    /// apart); not validated (see [`LdaParams::validate`]).
    pub fn sampler_params(&self, docs: usize, workers: usize) -> LdaParams {
        LdaParams {
            topics: self.topics,
            alpha: self.alpha,
            beta: self.beta,
            iterations: self.iters,
            seed: self.seed,
            checkpoint_docs: checkpoint_docs(
                docs,
                workers,
                self.checkpoint_docs,
                self.checkpoint_fraction,
            ),
            likelihood_every: self.likelihood_every,
            delta: *self.delta,
            non_blocking: self.non_blocking,
            inner: *self.inner,
            verify_invariants: self.verify_invariants,
        }
    }

    /// The synthetic corpus's shape (see [`lda::generate`]).
    pub fn synthetic_spec(&self, seed: u64) -> SyntheticSpec {
        SyntheticSpec {
            docs: self.docs.unwrap_or(DEFAULT_SYNTHETIC_DOCS),
            words: self.words,
            topics: self.true_topics,
            min_len: self.min_len,
            max_len: self.max_len,
            alpha: self.true_alpha,
            beta: self.true_beta,
            seed,
        }
    }
}

/// The point's keys behind an error of [`LdaParams::validate`].
fn sampler_keys(e: &LdaError) -> &'static [&'static str] {
    match e {
        LdaError::BadTopics { .. } => &["topics"],
        LdaError::BadAlpha(_) => &["alpha"],
        LdaError::BadBeta(_) => &["beta"],
        LdaError::BadCheckpoint => &["checkpoint_docs", "checkpoint_fraction"],
        _ => &["topics", "alpha", "beta"],
    }
}

/// The point's keys behind an error of [`SyntheticSpec::validate`] (its message names the
/// spec's field).
fn synthetic_keys(e: &LdaError) -> &'static [&'static str] {
    let message = e.to_string();
    let says = |field: &str| {
        message
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|w| w == field)
    };
    if says("min_len") || says("max_len") {
        &["min_len", "max_len"]
    } else if says("alpha") {
        &["true_alpha"]
    } else if says("beta") {
        &["true_beta"]
    } else {
        &["words", "true_topics"]
    }
}

impl TypedFamily for LdaFamily {
    type Point = LdaPoint;
    const NAME: &'static str = "lda";

    // Exact: the corpus (the asynchronous variant's merges and samples depend on timing).
    fn exact_metrics(&self) -> &'static [&'static str] {
        &["tokens", "docs", "words", "work_*"]
    }
    // The output is the trained model's quality (log-likelihood, topic recovery): each variant
    // draws its own samples.
    fn outputs_agree(&self) -> bool {
        false
    }
    fn variants(&self) -> Vec<&'static str> {
        lda::variant_names()
    }

    fn check(&self, point: &LdaPoint, _variants: &[String]) -> Vec<PointIssue> {
        let mut issues = Vec::new();
        positive(&mut issues, "iters", point.iters);
        if let Some(target) = point.target_loglik_per_token {
            if !(target.is_finite() && target < 0.0) {
                issues.push(PointIssue::new(
                    &["target_loglik_per_token"],
                    format!("`target_loglik_per_token` must be a negative number (a log-likelihood per token), got {target}"),
                    "set it to a value the samplers reach, e.g. 1% below sequential's final `metric_loglik_per_token`",
                ));
            }
            if point.likelihood_every == 0 {
                issues.push(PointIssue::new(
                    &["target_loglik_per_token", "likelihood_every"],
                    "`target_loglik_per_token` is only seen where the log-likelihood is evaluated, and `likelihood_every` is 0".to_string(),
                    "set `likelihood_every` to 1 or more",
                ));
            }
        }
        if let Some(docs) = point.docs {
            positive(&mut issues, "docs", docs);
        }
        let fraction = point.checkpoint_fraction;
        if !(fraction > 0.0 && fraction <= 1.0) {
            issues.push(PointIssue::new(
                &["checkpoint_fraction"],
                format!("`checkpoint_fraction` must be in (0, 1], got {fraction}"),
                "set `checkpoint_fraction` to a share of a worker's documents, e.g. 0.1",
            ));
        }
        // The crate's own validation, so each rule is written once (one document and one
        // worker: only an explicit checkpoint of 0 can make the interval 0).
        if let Err(e) = point.sampler_params(1, 1).validate() {
            let keys = sampler_keys(&e);
            issues.push(PointIssue::new(
                keys,
                format!("`{}`: {e}", keys[0]),
                format!("change `{}`", keys.join("` or `")),
            ));
        }
        if let Err(e) = point.synthetic_spec(0).validate() {
            let keys = synthetic_keys(&e);
            issues.push(PointIssue::new(
                keys,
                format!("`{}`: {e}", keys[0]),
                format!(
                    "change `{}` (the synthetic corpus's shape)",
                    keys.join("` or `")
                ),
            ));
        }
        issues
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

    fn prepare(
        &self,
        point: &LdaPoint,
        dataset: Option<&Path>,
        seed: u64,
    ) -> Result<PreparedInput> {
        let corpus = match dataset {
            None => {
                lda::generate(&point.synthetic_spec(seed))
                    .context("generating the synthetic LDA corpus")?
                    .corpus
            }
            Some(path) => Corpus::read_dataset(path, point.docs, point.min_count)
                .with_context(|| format!("reading the corpus {}", path.display()))?,
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
        point: &LdaPoint,
        threads: usize,
    ) -> Result<Measurement> {
        measure(variant, input, point, threads, &Ranks::Local)?
            .ok_or_else(|| anyhow!("internal: the local backend returned no measurement"))
    }

    /// The master and one process per worker.
    fn processes(&self, _point: &LdaPoint, threads: usize) -> Result<usize> {
        Ok(threads + 1)
    }

    fn run_on_ranks(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &LdaPoint,
        threads: usize,
        backend: &Ranks,
    ) -> Result<Option<Measurement>> {
        measure(variant, input, point, threads, backend)
    }

    fn peer_input(&self, input: &PreparedInput, point: &LdaPoint, dir: &Path) -> Result<PeerInput> {
        let corpus = corpus_of(input)?;
        // UCI bag of words: per document, each distinct word with its count.
        let mut entries: Vec<(usize, u32, u32)> = Vec::new();
        for (d, doc) in corpus.docs().iter().enumerate() {
            let mut words = doc.clone();
            words.sort_unstable();
            for run in words.chunk_by(|a, b| a == b) {
                entries.push((d + 1, run[0] + 1, run.len() as u32));
            }
        }
        peer_files::write_with(&dir.join("docword.txt"), |w| {
            use std::io::Write;
            writeln!(
                w,
                "{}\n{}\n{}",
                corpus.num_docs(),
                corpus.num_words(),
                entries.len()
            )?;
            for (d, word, count) in &entries {
                writeln!(w, "{d} {word} {count}")?;
            }
            Ok(())
        })?;
        let params = serde_json::json!({
            "topics": point.topics,
            "alpha": point.alpha,
            "beta": point.beta,
            "iters": point.iters,
            "seed": point.seed,
        });
        Ok(PeerInput {
            files: BTreeMap::from([("docword".to_string(), "docword.txt".to_string())]),
            params: params.as_object().cloned().unwrap_or_default(),
        })
    }

    /// The peer's final counts, checked against the corpus and scored with parbench's own
    /// log-likelihood.
    fn peer_output(
        &self,
        input: &PreparedInput,
        point: &LdaPoint,
        dir: &Path,
        compute_s: f64,
    ) -> Result<Measurement> {
        let corpus = corpus_of(input)?;
        let k = point.topics;
        let table = |file: &str, rows: usize| -> Result<Vec<u32>> {
            let path = dir.join(file);
            peer_files::read_count_matrix(&path, rows, k)?
                .into_iter()
                .flatten()
                .map(|c| {
                    u32::try_from(c).map_err(|_| {
                        anyhow!("{}: the count {c} exceeds the corpus", path.display())
                    })
                })
                .collect()
        };
        let word_topic = table("word_topic.csv", corpus.num_words())?;
        let doc_topic = table("doc_topic.csv", corpus.num_docs())?;
        let loglik = lda::model::log_likelihood_of_counts(
            corpus,
            &word_topic,
            &doc_topic,
            k,
            point.alpha,
            point.beta,
        )
        .map_err(|e| {
            anyhow!(
                "{}: the counts are not a state of this corpus: {e}",
                dir.display()
            )
        })?;
        let tokens = corpus.num_tokens() as f64;
        let sampled = tokens * point.iters as f64;
        let metrics = BTreeMap::from([
            ("final_loglik".to_string(), loglik),
            ("loglik_per_token".to_string(), loglik / tokens),
            ("tokens".to_string(), tokens),
            ("tokens_sampled".to_string(), sampled),
            ("docs".to_string(), corpus.num_docs() as f64),
            ("words".to_string(), corpus.num_words() as f64),
            ("iterations".to_string(), point.iters as f64),
            (
                "tokens_per_s".to_string(),
                if compute_s > 0.0 {
                    sampled / compute_s
                } else {
                    0.0
                },
            ),
        ]);
        Ok(Measurement {
            metrics,
            ..Measurement::default()
        })
    }
}

fn corpus_of(input: &PreparedInput) -> Result<&Corpus> {
    crate::family::prepared(input, "an LDA corpus")
}

/// One training run on threads, or across the MPI job's processes (`None` on the workers).
fn measure(
    variant: &str,
    input: &PreparedInput,
    point: &LdaPoint,
    threads: usize,
    backend: &Ranks,
) -> Result<Option<Measurement>> {
    let corpus = corpus_of(input)?;
    let sampler = lda::variant(variant).ok_or_else(|| anyhow!("unknown lda variant {variant}"))?;
    let params = point.sampler_params(corpus.num_docs(), threads);
    params.validate()?;
    let mut reports = Vec::with_capacity(params.iterations);
    // Under MPI the workers are the job's ranks after the master, `threads` of them.
    let par = Par::threads(threads);
    let tokens = corpus.num_tokens().max(1) as f64;
    let target = point.target_loglik_per_token;
    let reached =
        |r: &IterationReport| target.is_some_and(|t| r.loglik.is_some_and(|ll| ll / tokens >= t));
    let out = sampler.train_on(corpus, &params, par, backend.communicator(), &mut |r| {
        reports.push(*r);
        if reached(r) {
            Control::Stop
        } else {
            Control::Continue
        }
    })?;
    Ok(out.map(|out| {
        let mut m = Measurement {
            trace: trace(corpus, &reports, &out),
            ..measurement(corpus, &params, &out)
        };
        if target.is_some() {
            m.metrics
                .extend(time_to_target(&reports, &m.trace, reached));
        }
        // Under MPI the workers are the ranks after the master: `threads` of them either way.
        let work = sampler.work(corpus, &params, &out, par);
        m.metrics.extend(work_metrics(&work));
        m
    }))
}

/// `seconds_to_target`: the sampling seconds (evaluations taken out) at the first report that
/// `reached`, else at the last one (a lower bound); `reached_target`: 1 or 0.
fn time_to_target(
    reports: &[IterationReport],
    trace: &[TraceStep],
    reached: impl Fn(&IterationReport) -> bool,
) -> [(String, f64); 2] {
    let first = reports.iter().position(reached);
    let step = first.or(reports.len().checked_sub(1));
    let seconds = step
        .and_then(|i| trace.get(i))
        .and_then(|s| s.metrics.get("sampling_s").copied())
        .unwrap_or(0.0);
    [
        ("seconds_to_target".to_string(), seconds),
        (
            "reached_target".to_string(),
            f64::from(u8::from(first.is_some())),
        ),
    ]
}

/// The trace of a run from its progress reports (see the module docs): one step per report,
/// the evaluation seconds of the log-likelihoods taken up to it subtracted for `sampling_s`.
pub fn trace(corpus: &Corpus, reports: &[IterationReport], out: &lda::LdaOutput) -> Vec<TraceStep> {
    let tokens = corpus.num_tokens() as f64;
    let mut evaluations = out.loglik_trace.iter().peekable();
    let mut likelihood_s = 0.0;
    reports
        .iter()
        .map(|r| {
            while let Some(p) = evaluations.next_if(|p| p.iteration <= r.iteration) {
                likelihood_s += p.eval_seconds;
            }
            let mut metrics = BTreeMap::from([
                ("likelihood_s".to_string(), likelihood_s),
                (
                    "sampling_s".to_string(),
                    (r.elapsed_seconds - likelihood_s).max(0.0),
                ),
            ]);
            if let Some(ll) = r.loglik {
                metrics.insert("loglik".to_string(), ll);
                if tokens > 0.0 {
                    metrics.insert("loglik_per_token".to_string(), ll / tokens);
                }
            }
            TraceStep {
                step: r.iteration,
                time_s: r.elapsed_seconds,
                metrics,
            }
        })
        .collect()
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
    let exchanges: u64 = out.workers.iter().map(|w| w.exchanges).sum();
    let sent: u64 = out.workers.iter().map(|w| w.bytes_sent).sum();
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
        ("exchanges".to_string(), exchanges as f64),
        ("bytes_sent".to_string(), sent as f64),
        ("delta_bytes_over_dense".to_string(), {
            // What the same exchanges would have sent as dense deltas: a sparse encoding's
            // saving, machine-independent (1 for dense deltas; 0 with no exchange).
            let dense = exchanges * lda::dense_delta_bytes(corpus.num_words(), params.topics);
            if dense > 0 {
                sent as f64 / dense as f64
            } else {
                0.0
            }
        }),
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
        trace: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::params::PointParams;
    use crate::family::{Family, Params, Value};

    #[test]
    fn delta_bytes_are_read_against_the_dense_encoding_of_the_same_exchanges() {
        let corpus = lda::generate(&lda::SyntheticSpec::default())
            .unwrap()
            .corpus;
        let run = |delta: DeltaEncoding, topics: usize| {
            let params = LdaParams {
                topics,
                iterations: 3,
                checkpoint_docs: 10,
                delta,
                ..LdaParams::default()
            };
            let out = lda::variant("async")
                .unwrap()
                .train(&corpus, &params, Par::threads(2), &mut |_| {
                    Control::Continue
                })
                .unwrap();
            let m = measurement(&corpus, &params, &out);
            (m.metrics["delta_bytes_over_dense"], m.metrics["exchanges"])
        };
        // Dense deltas send W x K counts of 4 bytes at every exchange, exactly.
        let (dense, exchanges) = run(DeltaEncoding::Dense, 5);
        assert_eq!(dense, 1.0);
        assert!(exchanges >= 2.0 * 30.0, "{exchanges}");
        // A worker's 10 documents (about 600 tokens) touch a small part of 60 x 50 cells, and
        // each sparse entry costs 12 bytes against the dense 4: above 1/3 of the cells would
        // not pay.
        let (sparse, _) = run(DeltaEncoding::Sparse, 50);
        assert!(sparse > 0.0 && sparse < 1.0, "{sparse}");
        // With nothing exchanged (a sequential run) there is nothing to compare.
        let params = LdaParams::default();
        let out = lda::variant("sequential")
            .unwrap()
            .train(&corpus, &params, Par::Seq, &mut |_| Control::Continue)
            .unwrap();
        assert_eq!(
            measurement(&corpus, &params, &out).metrics["delta_bytes_over_dense"],
            0.0
        );
    }

    #[test]
    fn a_target_needs_evaluations_and_a_negative_value() {
        let p = LdaPoint {
            target_loglik_per_token: Some(-7.0),
            ..Default::default()
        };
        assert_eq!(
            issue_keys(&p),
            vec![vec!["target_loglik_per_token", "likelihood_every"]]
        );
        for bad in [0.5, f64::NAN] {
            let p = LdaPoint {
                target_loglik_per_token: Some(bad),
                likelihood_every: 1,
                ..Default::default()
            };
            assert_eq!(
                issue_keys(&p),
                vec![vec!["target_loglik_per_token"]],
                "{bad}"
            );
        }
        let p = LdaPoint {
            target_loglik_per_token: Some(-7.0),
            likelihood_every: 2,
            ..Default::default()
        };
        assert!(issue_keys(&p).is_empty());
    }

    /// A run with a target stops at the first evaluation that reaches it, and the time it
    /// reports is that evaluation's sampling time; an unreachable one runs every iteration.
    #[test]
    fn a_run_stops_at_its_target_and_reports_the_time_to_it() {
        let corpus = lda::generate(&lda::SyntheticSpec::default())
            .unwrap()
            .corpus;
        let input: PreparedInput = Box::new(corpus);
        let free = LdaPoint {
            iters: 30,
            likelihood_every: 1,
            ..Default::default()
        };
        let run = |point: &LdaPoint| {
            measure("sequential", &input, point, 1, &Ranks::Local)
                .unwrap()
                .unwrap()
        };
        let full = run(&free);
        let per_token: Vec<f64> = full
            .trace
            .iter()
            .map(|s| s.metrics["loglik_per_token"])
            .collect();
        // A level first reached after the start and before the end.
        let target = per_token[9];
        let first = per_token.iter().position(|&l| l >= target).unwrap();
        assert!(first > 0 && first < 29, "{first}");
        let stopped = run(&LdaPoint {
            target_loglik_per_token: Some(target),
            ..free.clone()
        });
        assert_eq!(stopped.metrics["iterations"], (first + 1) as f64);
        assert_eq!(stopped.metrics["reached_target"], 1.0);
        let last = stopped.trace.last().unwrap();
        assert_eq!(
            stopped.metrics["seconds_to_target"],
            last.metrics["sampling_s"]
        );
        let never = run(&LdaPoint {
            target_loglik_per_token: Some(-1e-9),
            ..free.clone()
        });
        assert_eq!(never.metrics["iterations"], 30.0);
        assert_eq!(never.metrics["reached_target"], 0.0);
        assert!(!full.metrics.contains_key("seconds_to_target"));
    }

    #[test]
    fn checkpoint_defaults_to_a_tenth_of_a_share() {
        assert_eq!(checkpoint_docs(3430, 2, None, 0.1), 172);
        assert_eq!(checkpoint_docs(3430, 1, None, 0.1), 343);
        assert_eq!(checkpoint_docs(5, 8, None, 0.1), 1);
        assert_eq!(checkpoint_docs(3430, 2, Some(7), 0.1), 7);
    }

    fn point(pairs: &[(&str, Value)]) -> Result<LdaPoint, String> {
        let params: Params = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        LdaPoint::from_params(&params)
    }

    fn issue_keys(p: &LdaPoint) -> Vec<Vec<&'static str>> {
        LdaFamily
            .check(p, &["async".to_string()])
            .into_iter()
            .map(|i| i.keys)
            .collect()
    }

    #[test]
    fn bad_option_strings_are_errors() {
        let family: &dyn Family = &LdaFamily;
        let typo = Value::Str("dens".into());
        let err = family.check_value("delta", &typo).unwrap().unwrap_err();
        assert!(
            err.contains("delta encoding") && err.contains("`dens`"),
            "{err}"
        );
        let err = family
            .check_value("inner", &Value::Str("sparce".into()))
            .unwrap()
            .unwrap_err();
        assert!(
            err.contains("inner sampler") && err.contains("`sparce`"),
            "{err}"
        );
        // The valid names come with the parameter (the plan's help lists them).
        let specs = family.params();
        let choices = |key: &str| {
            specs
                .iter()
                .find(|s| s.name == key)
                .unwrap()
                .choices
                .clone()
        };
        assert_eq!(choices("delta"), Some(vec!["dense", "sparse"]));
        assert_eq!(choices("inner"), Some(vec!["standard", "sparse"]));
        let err = point(&[("delta", typo)]).unwrap_err();
        assert!(err.contains("valid: dense, sparse"), "{err}");
        let ok = point(&[("delta", Value::Str("sparse".into()))]).unwrap();
        assert_eq!(*ok.delta, DeltaEncoding::Sparse);
    }

    #[test]
    fn defaults_are_the_samplers_and_absent_checkpoint_is_a_fraction() {
        let p = point(&[("threads", Value::Int(2))]).unwrap();
        let params = p.sampler_params(3430, 2);
        assert_eq!(
            params,
            LdaParams {
                checkpoint_docs: 172,
                likelihood_every: 0,
                ..LdaParams::default()
            }
        );
        let p = LdaPoint {
            checkpoint_docs: Some(7),
            ..Default::default()
        };
        assert_eq!(p.sampler_params(3430, 2).checkpoint_docs, 7);
        assert_eq!(
            LdaPoint::default().synthetic_spec(3).docs,
            DEFAULT_SYNTHETIC_DOCS
        );
        assert!(issue_keys(&LdaPoint::default()).is_empty());
    }

    #[test]
    fn domain_errors_name_their_keys() {
        let zero_topics = LdaPoint {
            topics: 0,
            ..Default::default()
        };
        assert_eq!(issue_keys(&zero_topics), vec![vec!["topics"]]);
        let issues = LdaFamily.check(&zero_topics, &[]);
        assert!(issues[0].message.contains("topics"), "{}", issues[0]);
        for fraction in [0.0, -0.1, 1.5] {
            let p = LdaPoint {
                checkpoint_fraction: fraction,
                ..Default::default()
            };
            assert_eq!(
                issue_keys(&p),
                vec![vec!["checkpoint_fraction"]],
                "{fraction}"
            );
        }
        let p = LdaPoint {
            checkpoint_fraction: 1.0,
            ..Default::default()
        };
        assert!(issue_keys(&p).is_empty());
        let p = LdaPoint {
            checkpoint_docs: Some(0),
            ..Default::default()
        };
        assert_eq!(issue_keys(&p)[0][0], "checkpoint_docs");
        let p = LdaPoint {
            alpha: 0.0,
            ..Default::default()
        };
        assert_eq!(issue_keys(&p), vec![vec!["alpha"]]);
        let p = LdaPoint {
            beta: -1.0,
            ..Default::default()
        };
        assert_eq!(issue_keys(&p), vec![vec!["beta"]]);
        let p = LdaPoint {
            iters: 0,
            docs: Some(0),
            ..Default::default()
        };
        assert_eq!(issue_keys(&p), vec![vec!["iters"], vec!["docs"]]);
        let p = LdaPoint {
            min_len: 200,
            ..Default::default()
        };
        assert_eq!(issue_keys(&p), vec![vec!["min_len", "max_len"]]);
        let p = LdaPoint {
            true_topics: 0,
            ..Default::default()
        };
        assert_eq!(issue_keys(&p), vec![vec!["words", "true_topics"]]);
        let p = LdaPoint {
            true_alpha: 0.0,
            ..Default::default()
        };
        assert_eq!(issue_keys(&p), vec![vec!["true_alpha"]]);
        let p = LdaPoint {
            true_beta: 0.0,
            ..Default::default()
        };
        assert_eq!(issue_keys(&p), vec![vec!["true_beta"]]);
    }
}
