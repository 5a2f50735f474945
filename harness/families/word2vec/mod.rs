//! The word2vec family: skip-gram with negative sampling by `hogwild` (word2vec.c), `gemm`
//! (pWord2Vec's shared negatives and small matrix products), `full` (FULL-W2V's negative
//! independence and lifetime reuse) and `full-register` (its ablation without the context ring
//! buffer) from the `word2vec` crate, on a text corpus of the data dir
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
//! - The trace has one step per progress report of the training loop: every `report_every_s`
//!   seconds during an epoch (default 3600: none) and one at the end of every epoch. `time_s`
//!   is the trainer's clock; metrics are `words_processed`, `progress` (the run's share done),
//!   `epoch` (0-based, the epoch under way), `epoch_end` (1 for an epoch's closing report),
//!   `alpha` (the learning rate then), `words_per_s` (average since the start) and, with
//!   `loss_sample` pairs (default 0: none), `loss`: the skip-gram negative-sampling loss per
//!   pair on a fixed sample of the corpus's pairs, in closing reports only (see
//!   `word2vec::TrainParams::loss_sample`; the model is the same with or without it). For
//!   `distributed` the reports are rank 0's (in-process: scaled to the whole job's words;
//!   under MPI: rank 0's own).
//!
//! Cost of `prepare`: one streaming pass over `max_tokens` words of the corpus (O(tokens)) and
//! reading the evaluation sets; `run`: O(epochs x words x window x (negative + 1) x d) training
//! plus O(distinct analogy words x 30,000 x d) evaluation.

pub mod cli;

use crate::exec::bound::work_metrics;
use crate::exec::ranks::Ranks;
use crate::families::params::{positive, Choice, Named, PointIssue};
use crate::family::{Measurement, PeerInput, PreparedInput, TraceStep, TypedFamily};
use crate::peers::files as peer_files;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;
use word2vec::eval::EvalSuite;
use word2vec::generate::PlantedSpec;
use word2vec::{
    Control, Corpus, CorpusOptions, EpochReport, Model, Par, SyncOptions, TrainOutput, TrainParams,
    W2vError,
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
        /// maximum window W; full and full-register use ceil(W/2)
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
        /// seconds between progress reports (trace steps) during an epoch; one more closes
        /// every epoch
        report_every_s: f64 = 3600.0,
        /// corpus pairs over which each epoch's closing report estimates the loss (0: none)
        loss_sample: usize = 0,
        /// in-process ranks, each with `threads` threads
        ranks for ["distributed"]: usize = 1,
        /// the variant each rank trains with
        inner for ["distributed"]: Choice<InnerVariant> = Choice(InnerVariant::DEFAULT),
        /// corpus words per rank between model exchanges
        sync_words for ["distributed"]: u64 = SyncOptions::default().sync_words,
        /// the most frequent words, exchanged every time
        hot_words for ["distributed"]: usize = SyncOptions::default().hot_words,
        /// the other rows are exchanged every N exchanges
        rare_every for ["distributed"]: usize = SyncOptions::default().rare_every,
        /// multiply alpha by the number of ranks
        scale_alpha for ["distributed"]: bool = SyncOptions::default().scale_alpha,
        /// exchange every row at every exchange (full-model sync, the baseline sub-model sync
        /// saves on)
        full_model for ["distributed"]: bool = SyncOptions::default().full_model,
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
    /// The training settings, the run's seed the data seed plus the point's; not validated
    /// (see [`TrainParams::validate`]). The threads are the runner's, passed to the trainer.
    pub fn train_params(&self, data_seed: u64) -> TrainParams {
        TrainParams {
            dim: self.dim,
            window: self.window,
            negative: self.negative,
            sample: self.sample,
            alpha: self.alpha,
            epochs: self.epochs,
            seed: data_seed.wrapping_add(self.seed),
            min_count: self.min_count,
            // Reports feed the trace only (the harness shows no progress inside a run).
            report_interval_seconds: self.report_every_s,
            loss_sample: self.loss_sample,
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
            full_model: self.full_model,
        }
    }
}

/// Everything a point's input is made from (`prepare` reads the point through it alone, and
/// its `Debug` form is the input's key): a sweep over seeds, learning rates or ranks on one
/// corpus reads and counts the corpus once (8M words of wiki17m: about 4 s a point).
#[derive(Debug)]
struct InputSpec {
    planted: PlantedSpec,
    corpus: CorpusOptions,
    evaluate: bool,
}

impl InputSpec {
    fn of(point: &Word2vecPoint) -> InputSpec {
        InputSpec {
            planted: planted_spec(point),
            corpus: point.corpus_options(),
            evaluate: point.evaluate,
        }
    }
}

/// The shape of the point's planted synthetic corpus.
fn planted_spec(point: &Word2vecPoint) -> PlantedSpec {
    PlantedSpec {
        groups: point.groups,
        group_words: point.group_words,
        sentence_words: point.sentence_words,
        words: point.words,
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
        // Not an error of validation: only the ones above are.
        _ => "dim",
    }
}

impl TypedFamily for Word2vecFamily {
    type Point = Word2vecPoint;
    const NAME: &'static str = "word2vec";

    // Exact: the corpus, the pairs trained and the model traffic, counted per thread from seeded draws.
    fn exact_metrics(&self) -> &'static [&'static str] {
        &[
            "words",
            "vocab",
            "epochs",
            "kept_words_per_epoch",
            "pairs_per_epoch",
            "context_pairs_per_epoch",
            "cross_sentence_pair_share",
            "model_bytes_*",
            "input_rows_read_per_epoch",
            "output_rows_read_per_epoch",
            "bytes_per_word",
            "exchanges",
            "rows_exchanged",
            "exchange_words_max",
            "work_*",
        ]
    }
    // The output is a few quality figures of Hogwild training: no two variants (no two
    // threaded runs) give the same model.
    fn outputs_agree(&self) -> bool {
        false
    }
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
        if !(point.report_every_s.is_finite() && point.report_every_s > 0.0) {
            issues.push(PointIssue::new(
                &["report_every_s"],
                format!(
                    "`report_every_s` must be a positive number of seconds, got {}",
                    point.report_every_s
                ),
                "set `report_every_s` to the seconds between trace steps, e.g. 1",
            ));
        }
        // The crate's own validation, so each rule is written once (dim, window, negative,
        // sample, alpha, epochs).
        if let Err(e) = point.train_params(0).validate() {
            let key = train_key(&e);
            issues.push(PointIssue::new(
                &[key],
                format!("`{key}`: {e}"),
                format!("change `{key}`"),
            ));
        }
        if let Err(e) = planted_spec(point).validate() {
            issues.push(PointIssue::new(
                &[e.field],
                e.to_string(),
                format!("change `{}` (the planted corpus's shape)", e.field),
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

    fn input_key(&self, point: &Word2vecPoint) -> Option<String> {
        Some(format!("{:?}", InputSpec::of(point)))
    }

    fn prepare(
        &self,
        point: &Word2vecPoint,
        dataset: Option<&Path>,
        seed: u64,
    ) -> Result<PreparedInput> {
        let spec = InputSpec::of(point);
        let input = match dataset {
            None => {
                let corpus = spec.planted.corpus(seed)?;
                W2vInput {
                    corpus,
                    suite: None,
                    planted_group_words: Some(spec.planted.group_words),
                    data_seed: seed,
                }
            }
            Some(path) => {
                let corpus = Corpus::read(path, &spec.corpus)
                    .with_context(|| format!("reading the corpus {}", path.display()))?;
                let dir = path.parent().unwrap_or(Path::new("."));
                let has_suite = [
                    crate::families::word2vec::cli::WORDSIM353_FILE,
                    crate::families::word2vec::cli::SIMLEX999_FILE,
                    crate::families::word2vec::cli::ANALOGY_FILE,
                ]
                .iter()
                .all(|f| dir.join(f).is_file());
                let suite = if spec.evaluate && has_suite {
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

    /// The corpus as parbench trains it: its lines, its vocabulary's words only.
    fn peer_input(
        &self,
        input: &PreparedInput,
        point: &Word2vecPoint,
        dir: &Path,
    ) -> Result<PeerInput> {
        let input = w2v_input(input)?;
        let corpus = &input.corpus;
        let vocab = corpus.vocab();
        peer_files::write_with(&dir.join("corpus.txt"), |w| {
            use std::io::Write;
            let mut start = 0;
            for &end in corpus.line_ends() {
                for (i, &id) in corpus.ids()[start..end].iter().enumerate() {
                    if i > 0 {
                        w.write_all(b" ")?;
                    }
                    w.write_all(vocab.word(id).as_bytes())?;
                }
                w.write_all(b"\n")?;
                start = end;
            }
            Ok(())
        })?;
        let params = point.train_params(input.data_seed);
        let request = serde_json::json!({
            "dim": params.dim,
            "window": params.window,
            "negative": params.negative,
            "sample": params.sample,
            "alpha": params.alpha,
            "epochs": params.epochs,
            "seed": params.seed,
        });
        Ok(PeerInput {
            files: BTreeMap::from([("corpus".to_string(), "corpus.txt".to_string())]),
            params: request.as_object().cloned().unwrap_or_default(),
        })
    }

    /// The peer's model, put in parbench's vocabulary order and scored by its evaluator.
    fn peer_output(
        &self,
        input: &PreparedInput,
        point: &Word2vecPoint,
        dir: &Path,
        compute_s: f64,
    ) -> Result<Measurement> {
        let input = w2v_input(input)?;
        let path = dir.join("model.txt");
        let vectors = parbench_common::embeddings::read_word2vec_text(&path)?;
        if vectors.dim != point.dim {
            bail!(
                "{}: vectors of dimension {}, the point trains {}",
                path.display(),
                vectors.dim,
                point.dim
            );
        }
        let vocab = input.corpus.vocab();
        let mut ordered = Vec::with_capacity(vocab.len() * point.dim);
        for word in vocab.words() {
            let row = vectors.index.get(word.as_str()).ok_or_else(|| {
                anyhow!("{}: no vector for the corpus word `{word}`", path.display())
            })?;
            let row = *row as usize;
            ordered.extend(
                vectors.vecs[row * point.dim..(row + 1) * point.dim]
                    .iter()
                    .map(|&x| x as f32),
            );
        }
        let model = Model::new(vocab.words().to_vec(), point.dim, ordered)?;
        let words = input.corpus.num_words() as f64 * point.epochs as f64;
        let mut metrics = BTreeMap::from([
            ("words".to_string(), input.corpus.num_words() as f64),
            ("vocab".to_string(), vocab.len() as f64),
            ("epochs".to_string(), point.epochs as f64),
            (
                "words_per_s".to_string(),
                if compute_s > 0.0 {
                    words / compute_s
                } else {
                    0.0
                },
            ),
        ]);
        let mut m = Measurement::default();
        if point.evaluate {
            let t = Instant::now();
            let quality = quality_metrics(input, &model);
            m.phases_s
                .insert("eval".to_string(), t.elapsed().as_secs_f64());
            metrics.extend(quality);
        }
        m.metrics = metrics;
        Ok(m)
    }
}

fn w2v_input(input: &PreparedInput) -> Result<&W2vInput> {
    crate::family::prepared(input, "a word2vec corpus")
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
        let input = w2v_input(input)?;
        let params = point.train_params(input.data_seed);
        params.validate()?;
        let par = Par::threads(threads);
        let mut reports: Vec<EpochReport> = Vec::new();
        let mut progress = |r: &EpochReport| {
            reports.push(*r);
            Control::Continue
        };
        let (out, exchange) = if let Some(comm) = backend.communicator() {
            let job = word2vec::distributed::train_job(
                comm,
                point.ranks,
                point.inner.name(),
                &input.corpus,
                &params,
                par,
                &point.sync_options(),
                &mut progress,
            )?;
            let info = (
                job.words_sent_max,
                job.exchanges,
                job.rows_exchanged,
                job.exchange_seconds,
            );
            let out = job.train;
            if !backend.is_root() {
                return Ok(None);
            }
            // Only rank 0's output is here: its own work, on its threads.
            (out, Some((info, None)))
        } else if variant == DISTRIBUTED {
            let d = word2vec::Distributed {
                inner: point.inner.name().to_string(),
                ranks: point.ranks,
                sync: point.sync_options(),
            };
            let mut ranks = d.train_ranks(&input.corpus, &params, par, &mut progress)?;
            let words: u64 = ranks
                .iter()
                .map(|r| r.comm.total().words_sent)
                .max()
                .unwrap_or(0);
            // Every rank's training, on all the ranks' threads.
            let work = ranks
                .iter()
                .map(|r| r.train.work(params.dim, par.degree() * ranks.len()))
                .reduce(|a, b| a.then(&b));
            let first = ranks.remove(0);
            let info = (
                words,
                first.exchanges,
                first.rows_exchanged,
                first.exchange_seconds,
            );
            (first.train, Some((info, work)))
        } else {
            let trainer = word2vec::variant(variant)
                .ok_or_else(|| anyhow!("unknown word2vec variant {variant}"))?;
            (
                trainer.train(&input.corpus, &params, par, &mut progress)?,
                None,
            )
        };
        let mut m = measurement(&input.corpus, &params, &out);
        m.trace = trace(&reports);
        let work = match &exchange {
            Some((_, Some(work))) => *work,
            _ => out.work(params.dim, par.degree()),
        };
        m.metrics.extend(work_metrics(&work));
        if let Some(((words, exchanges, rows, seconds), _)) = exchange {
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
        q.insert(
            "planted_accuracy".to_string(),
            word2vec::generate::planted_accuracy(model),
        );
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

/// The trace of a run from its progress reports (see the module docs).
pub fn trace(reports: &[EpochReport]) -> Vec<TraceStep> {
    reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut metrics = BTreeMap::from([
                ("words_processed".to_string(), r.words_processed as f64),
                (
                    "progress".to_string(),
                    r.words_processed as f64 / r.words_total.max(1) as f64,
                ),
                ("epoch".to_string(), r.epoch as f64),
                (
                    "epoch_end".to_string(),
                    if r.epoch_finished { 1.0 } else { 0.0 },
                ),
                ("alpha".to_string(), r.alpha),
                ("words_per_s".to_string(), r.words_per_second),
            ]);
            if let Some(loss) = r.loss {
                metrics.insert("loss".to_string(), loss);
            }
            TraceStep {
                step: i + 1,
                time_s: r.elapsed_seconds,
                metrics,
            }
        })
        .collect()
}

/// The harness's view of one training run (see the module docs for the conventions).
pub fn measurement(corpus: &Corpus, params: &TrainParams, out: &TrainOutput) -> Measurement {
    let epochs = out.epochs_completed.max(1) as f64;
    let traffic = out.total_traffic();
    let read = traffic.bytes_read(params.dim) as f64 / epochs;
    let written = traffic.bytes_written(params.dim) as f64 / epochs;
    let pairs: u64 = out.epochs.iter().map(|e| e.pairs).sum();
    let kept: u64 = out.epochs.iter().map(|e| e.kept_words).sum();
    let context_pairs: u64 = out.epochs.iter().map(|e| e.context_pairs).sum();
    let cross: u64 = out.epochs.iter().map(|e| e.cross_sentence_pairs).sum();
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
        (
            "context_pairs_per_epoch".to_string(),
            context_pairs as f64 / epochs,
        ),
        // FULL-W2V Section 4.1: the pairings a stream that ignores sentence delimiters adds,
        // over those it would form respecting them (0 for the variants that do).
        (
            "cross_sentence_pair_share".to_string(),
            cross as f64 / (context_pairs - cross).max(1) as f64,
        ),
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
        trace: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::params::PointParams;
    use crate::family::{Family, Params, Value};

    fn issue_keys(p: &Word2vecPoint) -> Vec<Vec<&'static str>> {
        Word2vecFamily
            .check(p, &["gemm".to_string()])
            .into_iter()
            .map(|i| i.keys)
            .collect()
    }

    #[test]
    fn points_that_train_differently_on_one_corpus_share_its_input_key() {
        let key = |p: &Word2vecPoint| TypedFamily::input_key(&Word2vecFamily, p);
        let base = Word2vecPoint::default();
        let training = Word2vecPoint {
            alpha: 0.05,
            window: 10,
            ranks: 4,
            scale_alpha: !base.scale_alpha,
            ..base.clone()
        };
        assert!(key(&base).is_some());
        assert_eq!(key(&base), key(&training));
        let fewer_tokens = Word2vecPoint {
            max_tokens: Some(1000),
            ..base.clone()
        };
        let rarer_words = Word2vecPoint {
            min_count: base.min_count + 1,
            ..base.clone()
        };
        let unevaluated = Word2vecPoint {
            evaluate: !base.evaluate,
            ..base.clone()
        };
        let more_groups = Word2vecPoint {
            groups: base.groups + 1,
            ..base.clone()
        };
        for other in [&fewer_tokens, &rarer_words, &unevaluated, &more_groups] {
            assert_ne!(key(&base), key(other), "{other:?}");
        }
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
        assert_eq!(point.train_params(10).seed, 13);
        let defaults = Word2vecPoint::default().train_params(10);
        assert_eq!(defaults.epochs, 1);
        assert_eq!(
            defaults,
            TrainParams {
                epochs: 1,
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
