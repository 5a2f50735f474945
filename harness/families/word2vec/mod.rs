//! The word2vec family: skip-gram with negative sampling by `hogwild` (word2vec.c), `gemm`
//! (pWord2Vec's shared negatives and small matrix products) and `full` (FULL-W2V's negative
//! independence and lifetime reuse) from the `word2vec` crate, on a text corpus of the data dir
//! (`wiki17m.txt.gz`, the text8 prefix) or a seeded synthetic corpus with planted word groups.
//!
//! Conventions of this adapter:
//! - `threads` is the number of training threads (Hogwild in every variant).
//! - `wall_time_s` is the training loop alone (`TrainOutput::seconds`: no corpus reading, no
//!   model initialization, no evaluation); `words_per_s` is corpus words per epoch times epochs
//!   over that time, as the papers report it, and `gflop_per_s` counts `6 d` flops per (context,
//!   target) pair for every variant, so it compares like with like.
//! - Model traffic is exact: rows of the two model matrices loaded and stored by the training
//!   loop, counted by the crate, reported per epoch in bytes (`model_bytes_read_per_epoch`,
//!   `model_bytes_written_per_epoch`, `model_bytes_per_epoch`); it does not depend on the
//!   machine, only on the seed, so FULL-W2V's Table 4 holds on any CPU.
//! - Quality: on a dataset, the evaluation sets next to it in the data dir (`wordsim353.tsv`,
//!   `simlex999.txt`, `questions-words.txt`) when present: `ws353_spearman`, `simlex_spearman`
//!   (with `*_pairs` covered), `analogy_add`, `analogy_mul` and their `_semantic`/`_syntactic`
//!   parts as fractions, `analogy_coverage`. On the synthetic corpus, `planted_accuracy`: the
//!   share of words whose nearest neighbour belongs to their own planted group. `evaluate:
//!   false` skips evaluation (timing-only sweeps). Evaluation time is the `eval` phase.
//! - The seed of a run is the data seed plus the point's `seed` (default 0), so sweeping `seed`
//!   gives independent runs (FULL-W2V Table 7's mean and deviation over seeds).
//! - `output` is a few quality numbers; stochastic variants never agree numerically, so
//!   experiments compare them with ratio claims on the metrics instead of an equivalence rule.
//!
//! Cost of `prepare`: one streaming pass over `max_tokens` words of the corpus (O(tokens)) and
//! reading the evaluation sets; `run`: O(epochs x words x window x (negative + 1) x d) training
//! plus O(distinct analogy words x 30,000 x d) evaluation.

pub mod cli;

use crate::exec::ranks::Ranks;
use crate::families::params::{positive, Choice, Named, PointIssue};
use crate::family::{Measurement, PreparedInput, TypedFamily};
use anyhow::{anyhow, bail, Context, Result};
use parbench_common::comm::{Communicator, Phase};
use parbench_common::rng::Rng;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;
use word2vec::eval::{EvalSuite, Evaluator};
use word2vec::{
    Control, Corpus, CorpusOptions, Model, SyncOptions, TrainOutput, TrainParams, W2vError,
};

/// The data-parallel variant across in-process ranks ([`word2vec::Distributed`]).
const DISTRIBUTED: &str = "distributed";

pub struct Word2vecFamily;

/// A shared-memory variant of the `word2vec` crate, by name ([`word2vec::variant_names`]):
/// what every rank of `distributed` trains its shard with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InnerVariant(&'static str);

impl InnerVariant {
    /// pWord2Vec's kernel, the variant its distributed runs use.
    pub const DEFAULT: InnerVariant = InnerVariant("gemm");
}

impl Named for InnerVariant {
    const WHAT: &'static str = "word2vec variant";
    fn all() -> Vec<Self> {
        word2vec::variant_names()
            .into_iter()
            .map(InnerVariant)
            .collect()
    }
    fn name(self) -> &'static str {
        self.0
    }
}

crate::point_params! {
    /// A word2vec point: the training settings (word2vec.c's, but one epoch, the papers'
    /// throughput setting), the corpus cut of a dataset, `distributed`'s exchange schedule and
    /// the planted synthetic corpus's shape.
    pub struct Word2vecPoint {
        /// embedding dimension d
        dim: usize = TrainParams::default().dim,
        /// maximum window W; full uses ceil(W/2)
        window: usize = TrainParams::default().window,
        /// negative samples K
        negative: usize = TrainParams::default().negative,
        /// subsampling threshold, 0 keeps every word
        sample: f64 = TrainParams::default().sample,
        /// starting learning rate
        alpha: f64 = TrainParams::default().alpha,
        /// passes over the corpus
        epochs: usize = 1,
        /// drop words seen fewer times
        min_count: u64 = CorpusOptions::default().min_count,
        /// dataset: train on the first N words only (none: all)
        max_tokens: Option<u64> = None,
        /// dataset: keep only the N most frequent words (pWord2Vec Table II; none: all)
        max_vocab: Option<usize> = None,
        /// added to the data seed for the run's seed
        seed: u64 = 0,
        /// compute the quality metrics after training
        evaluate: bool = true,
        /// distributed: in-process ranks, each with `threads` threads
        ranks: usize = 1,
        /// distributed: the variant each rank trains with
        inner: Choice<InnerVariant> = Choice(InnerVariant::DEFAULT),
        /// distributed: corpus words per rank between model exchanges
        sync_words: u64 = SyncOptions::default().sync_words,
        /// distributed: the most frequent words, exchanged every time
        hot_words: usize = SyncOptions::default().hot_words,
        /// distributed: the other rows are exchanged every N exchanges
        rare_every: usize = SyncOptions::default().rare_every,
        /// distributed: multiply alpha by the number of ranks
        scale_alpha: bool = SyncOptions::default().scale_alpha,
        /// synthetic: planted word groups
        groups: usize = 10,
        /// synthetic: words per group
        group_words: usize = 50,
        /// synthetic: words per sentence
        sentence_words: usize = 20,
        /// synthetic: corpus length in words
        words: usize = 200_000,
    }
}

/// The corpus of a point, the evaluation data that goes with it, and the data seed.
pub struct W2vInput {
    pub corpus: Corpus,
    /// Word similarity and analogy sets (datasets whose folder holds them).
    pub suite: Option<EvalSuite>,
    /// Words per planted group (synthetic corpora), for `planted_accuracy`.
    pub planted_group_words: Option<usize>,
    pub data_seed: u64,
}

impl Word2vecPoint {
    /// The training settings with `threads` threads, the run's seed the data seed plus the
    /// point's; not validated (see [`TrainParams::validate`]).
    pub fn train_params(&self, data_seed: u64, threads: usize) -> TrainParams {
        TrainParams {
            dim: self.dim,
            window: self.window,
            negative: self.negative,
            sample: self.sample,
            alpha: self.alpha,
            epochs: self.epochs,
            threads,
            seed: data_seed.wrapping_add(self.seed),
            min_count: self.min_count,
            // The harness shows no progress of its own inside a run; one report per epoch is
            // enough.
            report_interval_seconds: 3600.0,
        }
    }

    /// How a dataset's corpus is read.
    pub fn corpus_options(&self) -> CorpusOptions {
        CorpusOptions {
            min_count: self.min_count,
            max_vocab: self.max_vocab,
            max_tokens: self.max_tokens,
        }
    }

    /// `distributed`'s exchange schedule.
    pub fn sync_options(&self) -> SyncOptions {
        SyncOptions {
            sync_words: self.sync_words,
            hot_words: self.hot_words,
            rare_every: self.rare_every,
            scale_alpha: self.scale_alpha,
        }
    }
}

/// The point's key behind an error of [`TrainParams::validate`].
fn train_key(e: &W2vError) -> &'static str {
    match e {
        W2vError::BadDimension { .. } => "dim",
        W2vError::BadWindow { .. } => "window",
        W2vError::BadNegative { .. } => "negative",
        W2vError::BadSample(_) => "sample",
        W2vError::BadAlpha(_) => "alpha",
        W2vError::NoEpochs => "epochs",
        _ => "threads",
    }
}

/// Why the planted corpus cannot have this shape: the key responsible and the rule.
fn planted_shape(
    groups: usize,
    group_words: usize,
    sentence_words: usize,
    words: usize,
) -> Result<(), (&'static str, String)> {
    for (key, value) in [
        ("groups", groups),
        ("group_words", group_words),
        ("sentence_words", sentence_words),
    ] {
        if value < 2 {
            return Err((
                key,
                format!("synthetic corpus: {key} must be at least 2, got {value}"),
            ));
        }
    }
    if words < sentence_words {
        return Err((
            "words",
            format!(
                "synthetic corpus: words ({words}) must be at least sentence_words \
                 ({sentence_words})"
            ),
        ));
    }
    Ok(())
}

/// A corpus with planted structure: `groups` groups of `group_words` words; every sentence of
/// `sentence_words` words draws uniformly from one group (groups in turn), so words of a group
/// share contexts and words of different groups never do. About `words` tokens.
pub fn planted_corpus(
    groups: usize,
    group_words: usize,
    sentence_words: usize,
    words: usize,
    seed: u64,
) -> Result<Corpus> {
    if let Err((_, why)) = planted_shape(groups, group_words, sentence_words, words) {
        bail!(why);
    }
    let names: Vec<String> = (0..groups * group_words)
        .map(|i| format!("g{}w{}", i / group_words, i % group_words))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut rng = Rng::new(seed);
    let sentences = words / sentence_words;
    let mut ids = Vec::with_capacity(sentences * sentence_words);
    let mut ends = Vec::with_capacity(sentences);
    for s in 0..sentences {
        let base = (s % groups) * group_words;
        for _ in 0..sentence_words {
            ids.push((base + rng.below(group_words as u64) as usize) as u32);
        }
        ends.push(ids.len());
    }
    Ok(Corpus::from_ids(&refs, ids, ends))
}

/// Share of the model's words whose nearest neighbour (cosine) is in the same planted group;
/// group membership is read from the `g<group>w<index>` names.
pub fn planted_accuracy(model: &Model) -> f64 {
    let group = |w: &str| w.split('w').next().map(str::to_string);
    let e = Evaluator::new(model);
    let words = model.words();
    let hits = words
        .iter()
        .filter(|w| {
            e.neighbors(w, 1)
                .first()
                .is_some_and(|(n, _)| group(n) == group(w))
        })
        .count();
    hits as f64 / words.len().max(1) as f64
}

impl TypedFamily for Word2vecFamily {
    type Point = Word2vecPoint;
    const NAME: &'static str = "word2vec";

    fn variants(&self) -> Vec<&'static str> {
        let mut v = word2vec::variant_names();
        v.push(DISTRIBUTED);
        v
    }

    fn check(&self, point: &Word2vecPoint, _variants: &[String]) -> Vec<PointIssue> {
        let mut issues = Vec::new();
        for (key, value) in [
            ("negative", point.negative),
            ("ranks", point.ranks),
            ("sync_words", point.sync_words as usize),
            ("rare_every", point.rare_every),
        ] {
            positive(&mut issues, key, value);
        }
        if let Some(n) = point.max_tokens {
            positive(&mut issues, "max_tokens", n as usize);
        }
        if let Some(n) = point.max_vocab {
            positive(&mut issues, "max_vocab", n);
        }
        // The crate's own validation, so each rule is written once (dim, window, negative,
        // sample, alpha, epochs).
        if let Err(e) = point.train_params(0, 1).validate() {
            let key = train_key(&e);
            issues.push(PointIssue::new(
                &[key],
                format!("`{key}`: {e}"),
                format!("change `{key}`"),
            ));
        }
        if let Err((key, why)) = planted_shape(
            point.groups,
            point.group_words,
            point.sentence_words,
            point.words,
        ) {
            issues.push(PointIssue::new(
                &[key],
                why,
                format!("change `{key}` (the planted corpus's shape)"),
            ));
        }
        issues
    }

    fn datasets(&self) -> Vec<(&'static str, &'static str)> {
        vec![
            (
                "wiki17m.txt.gz",
                "text8-style Wikipedia text, 17.5M words on one line (use max_tokens for short runs)",
            ),
            (
                "text8_prefix_12549837.txt.gz",
                "the first 2.1M words of text8",
            ),
        ]
    }

    fn prepare(
        &self,
        point: &Word2vecPoint,
        dataset: Option<&Path>,
        seed: u64,
    ) -> Result<PreparedInput> {
        let input = match dataset {
            None => {
                let corpus = planted_corpus(
                    point.groups,
                    point.group_words,
                    point.sentence_words,
                    point.words,
                    seed,
                )?;
                W2vInput {
                    corpus,
                    suite: None,
                    planted_group_words: Some(point.group_words),
                    data_seed: seed,
                }
            }
            Some(path) => {
                let corpus = Corpus::read(path, &point.corpus_options())
                    .with_context(|| format!("reading the corpus {}", path.display()))?;
                let dir = path.parent().unwrap_or(Path::new("."));
                let has_suite = [
                    crate::families::word2vec::cli::WORDSIM353_FILE,
                    crate::families::word2vec::cli::SIMLEX999_FILE,
                    crate::families::word2vec::cli::ANALOGY_FILE,
                ]
                .iter()
                .all(|f| dir.join(f).is_file());
                let suite = if point.evaluate && has_suite {
                    Some(EvalSuite::load(dir).with_context(|| {
                        format!("reading the evaluation sets in {}", dir.display())
                    })?)
                } else {
                    None
                };
                W2vInput {
                    corpus,
                    suite,
                    planted_group_words: None,
                    data_seed: seed,
                }
            }
        };
        if input.corpus.num_words() == 0 {
            bail!("the corpus has no words in its vocabulary");
        }
        Ok(Box::new(input))
    }

    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Word2vecPoint,
        threads: usize,
    ) -> Result<Measurement> {
        self.measure(variant, input, point, threads, &Ranks::Local)?
            .context("internal: the local backend returned no measurement")
    }

    /// `distributed` runs one rank per process.
    fn processes(&self, point: &Word2vecPoint, _threads: usize) -> Result<usize> {
        Ok(point.ranks)
    }

    fn run_on_ranks(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Word2vecPoint,
        threads: usize,
        backend: &Ranks,
    ) -> Result<Option<Measurement>> {
        if variant != DISTRIBUTED {
            bail!("{variant} runs in one process; only {DISTRIBUTED} runs across MPI processes");
        }
        self.measure(variant, input, point, threads, backend)
    }
}

/// `distributed` on the processes of an MPI job: this rank's model and the whole job's
/// counters, and (words sent by the busiest rank, exchanges, rows exchanged, exchange seconds).
fn train_across_processes(
    comm: &dyn Communicator,
    input: &W2vInput,
    point: &Word2vecPoint,
    params: &TrainParams,
) -> Result<(TrainOutput, (u64, usize, u64, f64))> {
    let ranks = point.ranks;
    if ranks != comm.size() {
        bail!(
            "the point asks for {ranks} ranks, the MPI job has {} processes",
            comm.size()
        );
    }
    let inner = point.inner.name();
    let sync = point.sync_options();
    // The world's counters run over every run of this process; this run's are the difference.
    let before = comm.stats().total().words_sent;
    comm.barrier()?;
    let start = Instant::now();
    let r =
        word2vec::distributed::train_rank(comm, inner, &input.corpus, params, &sync, &mut |_| {
            Control::Continue
        })?;
    comm.barrier()?;
    let seconds = start.elapsed().as_secs_f64();
    let sent = (comm.stats().total().words_sent - before) as f64;
    let per_rank = comm.all_gather_f64(Phase::Replication, &[sent], &vec![1; comm.size()])?;
    let words_max = per_rank.iter().fold(0f64, |m, &w| m.max(w)) as u64;
    let info = (words_max, r.exchanges, r.rows_exchanged, r.exchange_seconds);
    Ok((
        word2vec::distributed::whole_job(comm, r.train, seconds)?,
        info,
    ))
}

impl Word2vecFamily {
    /// One run of `variant`; under MPI only `distributed`, and `None` on ranks other than 0.
    fn measure(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Word2vecPoint,
        threads: usize,
        backend: &Ranks,
    ) -> Result<Option<Measurement>> {
        let input = input
            .downcast_ref::<W2vInput>()
            .ok_or_else(|| anyhow!("internal: the prepared input is not a word2vec corpus"))?;
        let params = point.train_params(input.data_seed, threads);
        params.validate()?;
        let (out, exchange) = if let Some(comm) = backend.communicator() {
            let (out, info) = train_across_processes(comm, input, point, &params)?;
            if !backend.is_root() {
                return Ok(None);
            }
            (out, Some(info))
        } else if variant == DISTRIBUTED {
            let d = word2vec::Distributed {
                inner: point.inner.name().to_string(),
                ranks: point.ranks,
                sync: point.sync_options(),
            };
            let mut ranks = d.train_ranks(&input.corpus, &params, &mut |_| Control::Continue)?;
            let words: u64 = ranks
                .iter()
                .map(|r| r.comm.total().words_sent)
                .max()
                .unwrap_or(0);
            let first = ranks.remove(0);
            let info = (
                words,
                first.exchanges,
                first.rows_exchanged,
                first.exchange_seconds,
            );
            (first.train, Some(info))
        } else {
            let trainer = word2vec::variant(variant)
                .ok_or_else(|| anyhow!("unknown word2vec variant {variant}"))?;
            (
                trainer.train(&input.corpus, &params, &mut |_| Control::Continue)?,
                None,
            )
        };
        let mut m = measurement(&input.corpus, &params, &out);
        if let Some((words, exchanges, rows, seconds)) = exchange {
            m.metrics
                .insert("exchange_words_max".to_string(), words as f64);
            m.metrics.insert("exchanges".to_string(), exchanges as f64);
            m.metrics.insert("rows_exchanged".to_string(), rows as f64);
            m.phases_s.insert("exchange".to_string(), seconds);
        }
        if point.evaluate {
            let t = Instant::now();
            let quality = quality_metrics(input, &out.model);
            m.phases_s
                .insert("eval".to_string(), t.elapsed().as_secs_f64());
            m.output = ["ws353_spearman", "analogy_add", "planted_accuracy"]
                .iter()
                .filter_map(|k| quality.get(*k).copied())
                .collect();
            m.metrics.extend(quality);
        }
        Ok(Some(m))
    }
}

/// The quality metrics of a trained model (see the module docs); NaN results (nothing covered)
/// are left out rather than stored.
pub fn quality_metrics(input: &W2vInput, model: &Model) -> BTreeMap<String, f64> {
    let mut q = BTreeMap::new();
    if input.planted_group_words.is_some() {
        q.insert("planted_accuracy".to_string(), planted_accuracy(model));
    }
    if let Some(suite) = &input.suite {
        let r = suite.evaluate(model);
        let a = &r.analogy;
        let entries = [
            ("ws353_spearman", r.wordsim353.spearman),
            ("ws353_pairs", r.wordsim353.pairs_covered as f64),
            ("simlex_spearman", r.simlex999.spearman),
            ("simlex_pairs", r.simlex999.pairs_covered as f64),
            ("analogy_add", a.add.overall),
            ("analogy_add_semantic", a.add.semantic),
            ("analogy_add_syntactic", a.add.syntactic),
            ("analogy_mul", a.mul.overall),
            ("analogy_mul_semantic", a.mul.semantic),
            ("analogy_mul_syntactic", a.mul.syntactic),
            ("analogy_covered", a.covered as f64),
            (
                "analogy_coverage",
                if a.total > 0 {
                    a.covered as f64 / a.total as f64
                } else {
                    f64::NAN
                },
            ),
        ];
        for (k, v) in entries {
            if v.is_finite() {
                q.insert(k.to_string(), v);
            }
        }
    }
    q
}

/// The harness's view of one training run (see the module docs for the conventions).
pub fn measurement(corpus: &Corpus, params: &TrainParams, out: &TrainOutput) -> Measurement {
    let epochs = out.epochs_completed.max(1) as f64;
    let traffic = out.total_traffic();
    let read = traffic.bytes_read(params.dim) as f64 / epochs;
    let written = traffic.bytes_written(params.dim) as f64 / epochs;
    let pairs: u64 = out.epochs.iter().map(|e| e.pairs).sum();
    let kept: u64 = out.epochs.iter().map(|e| e.kept_words).sum();
    let gflop_per_s = if out.seconds > 0.0 {
        out.flops / out.seconds / 1e9
    } else {
        0.0
    };
    let metrics = BTreeMap::from([
        ("words_per_s".to_string(), out.words_per_second),
        ("gflop_per_s".to_string(), gflop_per_s),
        ("seconds".to_string(), out.seconds),
        ("words".to_string(), corpus.num_words() as f64),
        ("vocab".to_string(), corpus.vocab().len() as f64),
        ("epochs".to_string(), out.epochs_completed as f64),
        ("kept_words_per_epoch".to_string(), kept as f64 / epochs),
        ("pairs_per_epoch".to_string(), pairs as f64 / epochs),
        ("model_bytes_read_per_epoch".to_string(), read),
        ("model_bytes_written_per_epoch".to_string(), written),
        ("model_bytes_per_epoch".to_string(), read + written),
        (
            "input_rows_read_per_epoch".to_string(),
            traffic.input_rows_read as f64 / epochs,
        ),
        (
            "output_rows_read_per_epoch".to_string(),
            traffic.output_rows_read as f64 / epochs,
        ),
        (
            "bytes_per_word".to_string(),
            (read + written) / corpus.num_words().max(1) as f64,
        ),
    ]);
    Measurement {
        wall_time_s: out.seconds,
        phases_s: BTreeMap::from([("train".to_string(), out.seconds)]),
        metrics,
        output: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::params::PointParams;
    use crate::family::{Family, Params, Value};

    #[test]
    fn planted_corpus_keeps_each_sentence_in_one_group() {
        let c = planted_corpus(3, 4, 5, 60, 1).unwrap();
        assert_eq!(c.num_words(), 60);
        assert_eq!(c.line_ends().len(), 12);
        let words = c.vocab().words();
        let mut start = 0;
        for &end in c.line_ends() {
            let group = |id: &u32| words[*id as usize].split('w').next().unwrap().to_string();
            let first = group(&c.ids()[start]);
            assert!(c.ids()[start..end].iter().all(|id| group(id) == first));
            start = end;
        }
        assert!(planted_corpus(1, 4, 5, 60, 1).is_err());
    }

    fn issue_keys(p: &Word2vecPoint) -> Vec<Vec<&'static str>> {
        Word2vecFamily
            .check(p, &["gemm".to_string()])
            .into_iter()
            .map(|i| i.keys)
            .collect()
    }

    #[test]
    fn bad_parameters_are_errors() {
        let family: &dyn Family = &Word2vecFamily;
        assert!(issue_keys(&Word2vecPoint::default()).is_empty());
        let p = Word2vecPoint {
            dim: 0,
            ..Default::default()
        };
        assert_eq!(issue_keys(&p), vec![vec!["dim"]]);
        let issues = Word2vecFamily.check(&p, &[]);
        assert!(issues[0].message.contains("dimension"), "{}", issues[0]);
        assert!(family
            .check_value("sample", &Value::Str("x".into()))
            .unwrap()
            .is_err());
        for (p, key) in [
            (
                Word2vecPoint {
                    max_tokens: Some(0),
                    ..Default::default()
                },
                "max_tokens",
            ),
            (
                Word2vecPoint {
                    max_vocab: Some(0),
                    ..Default::default()
                },
                "max_vocab",
            ),
            (
                Word2vecPoint {
                    window: 0,
                    ..Default::default()
                },
                "window",
            ),
            (
                Word2vecPoint {
                    epochs: 0,
                    ..Default::default()
                },
                "epochs",
            ),
            (
                Word2vecPoint {
                    sample: -1e-4,
                    ..Default::default()
                },
                "sample",
            ),
            (
                Word2vecPoint {
                    alpha: 0.0,
                    ..Default::default()
                },
                "alpha",
            ),
            (
                Word2vecPoint {
                    ranks: 0,
                    ..Default::default()
                },
                "ranks",
            ),
            (
                Word2vecPoint {
                    sync_words: 0,
                    ..Default::default()
                },
                "sync_words",
            ),
            (
                Word2vecPoint {
                    rare_every: 0,
                    ..Default::default()
                },
                "rare_every",
            ),
            (
                Word2vecPoint {
                    groups: 1,
                    ..Default::default()
                },
                "groups",
            ),
            (
                Word2vecPoint {
                    words: 10,
                    ..Default::default()
                },
                "words",
            ),
        ] {
            assert_eq!(issue_keys(&p), vec![vec![key]], "{key}");
        }
        let p = Word2vecPoint {
            negative: 0,
            ..Default::default()
        };
        assert_eq!(issue_keys(&p)[0], vec!["negative"]);
        let p = Word2vecPoint {
            negative: 1000,
            ..Default::default()
        };
        assert_eq!(issue_keys(&p), vec![vec!["negative"]]);
    }

    #[test]
    fn a_typo_in_inner_is_refused_with_the_valid_names() {
        let family: &dyn Family = &Word2vecFamily;
        let typo = Value::Str("gem".into());
        let err = family.check_value("inner", &typo).unwrap().unwrap_err();
        assert!(
            err.contains("word2vec variant") && err.contains("`gem`"),
            "{err}"
        );
        let specs = family.params();
        let inner = specs.iter().find(|s| s.name == "inner").unwrap();
        assert_eq!(inner.choices, Some(word2vec::variant_names()));
        assert_eq!(inner.default, "gemm");
        let params: Params = [("inner".to_string(), typo)].into();
        let err = Word2vecPoint::from_params(&params).unwrap_err();
        assert!(err.contains("valid: hogwild, gemm, full"), "{err}");
        assert!(InnerVariant::all().contains(&InnerVariant::DEFAULT));
    }

    #[test]
    fn the_seed_parameter_offsets_the_data_seed() {
        let point = Word2vecPoint {
            seed: 3,
            ..Default::default()
        };
        assert_eq!(point.train_params(10, 2).seed, 13);
        let defaults = Word2vecPoint::default().train_params(10, 2);
        assert_eq!(defaults.epochs, 1);
        assert_eq!(
            defaults,
            TrainParams {
                epochs: 1,
                threads: 2,
                seed: 10,
                report_interval_seconds: 3600.0,
                ..TrainParams::default()
            }
        );
        assert_eq!(
            Word2vecPoint::default().sync_options(),
            SyncOptions::default()
        );
        assert_eq!(
            Word2vecPoint::default().corpus_options(),
            CorpusOptions::default()
        );
    }
}
