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

use super::params::{get_bool, get_f64, get_opt_usize, get_str, get_usize};
use crate::backend::Backend;
use crate::model::{Family, Measurement, ParamSpec, Params, PreparedInput};
use anyhow::{anyhow, bail, Context, Result};
use parbench_common::comm::{Communicator, Phase};
use parbench_common::rng::Rng;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;
use word2vec::eval::{EvalSuite, Evaluator};
use word2vec::{Control, Corpus, CorpusOptions, Model, SyncOptions, TrainOutput, TrainParams};

/// The data-parallel variant across in-process ranks ([`word2vec::Distributed`]).
const DISTRIBUTED: &str = "distributed";

pub struct Word2vecFamily;

/// The corpus of a point, the evaluation data that goes with it, and the data seed.
pub struct W2vInput {
    pub corpus: Corpus,
    /// Word similarity and analogy sets (datasets whose folder holds them).
    pub suite: Option<EvalSuite>,
    /// Words per planted group (synthetic corpora), for `planted_accuracy`.
    pub planted_group_words: Option<usize>,
    pub data_seed: u64,
}

/// The training settings of a point with `threads` threads (defaults: word2vec.c's, but one
/// epoch, the papers' throughput setting).
pub fn train_params(point: &Params, data_seed: u64, threads: usize) -> Result<TrainParams> {
    let defaults = TrainParams::default();
    let params = TrainParams {
        dim: get_usize(point, "dim", defaults.dim)?,
        window: get_usize(point, "window", defaults.window)?,
        negative: get_usize(point, "negative", defaults.negative)?,
        sample: get_f64(point, "sample", defaults.sample)?,
        alpha: get_f64(point, "alpha", defaults.alpha)?,
        epochs: get_usize(point, "epochs", 1)?,
        threads,
        seed: data_seed.wrapping_add(get_usize(point, "seed", 0)? as u64),
        min_count: get_usize(point, "min_count", defaults.min_count as usize)? as u64,
        // The harness shows no progress of its own inside a run; one report per epoch is enough.
        report_interval_seconds: 3600.0,
    };
    params.validate()?;
    Ok(params)
}

/// How the corpus of a point is read (`min_count` 5, whole corpus, whole vocabulary by default).
pub fn corpus_options(point: &Params) -> Result<CorpusOptions> {
    let max_tokens = get_opt_usize(point, "max_tokens")?;
    let max_vocab = get_opt_usize(point, "max_vocab")?;
    if max_tokens == Some(0) || max_vocab == Some(0) {
        bail!("max_tokens and max_vocab must be at least 1 when given");
    }
    Ok(CorpusOptions {
        min_count: get_usize(point, "min_count", 5)? as u64,
        max_vocab,
        max_tokens: max_tokens.map(|n| n as u64),
    })
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
    if groups < 2 || group_words < 2 || sentence_words < 2 || words < sentence_words {
        bail!(
            "synthetic corpus: need groups >= 2, group_words >= 2, sentence_words >= 2 and \
             words >= sentence_words (got {groups}, {group_words}, {sentence_words}, {words})"
        );
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

impl Family for Word2vecFamily {
    fn name(&self) -> &'static str {
        "word2vec"
    }

    fn variants(&self) -> Vec<&'static str> {
        let mut v = word2vec::variant_names();
        v.push(DISTRIBUTED);
        v
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec {
                name: "dim",
                kind: "integer",
                help: "embedding dimension d (default 100)",
            },
            ParamSpec {
                name: "window",
                kind: "integer",
                help: "maximum window W; full uses ceil(W/2) (default 5)",
            },
            ParamSpec {
                name: "negative",
                kind: "integer",
                help: "negative samples K (default 5)",
            },
            ParamSpec {
                name: "sample",
                kind: "float",
                help: "subsampling threshold, 0 keeps every word (default 1e-4)",
            },
            ParamSpec {
                name: "alpha",
                kind: "float",
                help: "starting learning rate (default 0.025)",
            },
            ParamSpec {
                name: "epochs",
                kind: "integer",
                help: "passes over the corpus (default 1)",
            },
            ParamSpec {
                name: "min_count",
                kind: "integer",
                help: "drop words seen fewer times (default 5)",
            },
            ParamSpec {
                name: "max_tokens",
                kind: "integer",
                help: "dataset: train on the first N words only (default: all)",
            },
            ParamSpec {
                name: "max_vocab",
                kind: "integer",
                help: "dataset: keep only the N most frequent words (pWord2Vec Table II)",
            },
            ParamSpec {
                name: "seed",
                kind: "integer",
                help: "added to the data seed for the run's seed (default 0)",
            },
            ParamSpec {
                name: "evaluate",
                kind: "boolean",
                help: "compute the quality metrics after training (default true)",
            },
            ParamSpec {
                name: "ranks",
                kind: "integer",
                help: "distributed: in-process ranks, each with `threads` threads (default 1)",
            },
            ParamSpec {
                name: "inner",
                kind: "string",
                help: "distributed: the variant each rank trains with (default gemm)",
            },
            ParamSpec {
                name: "sync_words",
                kind: "integer",
                help:
                    "distributed: corpus words per rank between model exchanges (default 1000000)",
            },
            ParamSpec {
                name: "hot_words",
                kind: "integer",
                help: "distributed: the most frequent words, exchanged every time (default 10000)",
            },
            ParamSpec {
                name: "rare_every",
                kind: "integer",
                help: "distributed: the other rows are exchanged every N exchanges (default 4)",
            },
            ParamSpec {
                name: "scale_alpha",
                kind: "boolean",
                help: "distributed: multiply alpha by the number of ranks (default true)",
            },
            ParamSpec {
                name: "groups",
                kind: "integer",
                help: "synthetic: planted word groups (default 10)",
            },
            ParamSpec {
                name: "group_words",
                kind: "integer",
                help: "synthetic: words per group (default 50)",
            },
            ParamSpec {
                name: "sentence_words",
                kind: "integer",
                help: "synthetic: words per sentence (default 20)",
            },
            ParamSpec {
                name: "words",
                kind: "integer",
                help: "synthetic: corpus length in words (default 200000)",
            },
        ]
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

    fn prepare(&self, point: &Params, dataset: Option<&Path>, seed: u64) -> Result<PreparedInput> {
        let evaluate = get_bool(point, "evaluate", true)?;
        let input = match dataset {
            None => {
                let groups = get_usize(point, "groups", 10)?;
                let group_words = get_usize(point, "group_words", 50)?;
                let corpus = planted_corpus(
                    groups,
                    group_words,
                    get_usize(point, "sentence_words", 20)?,
                    get_usize(point, "words", 200_000)?,
                    seed,
                )?;
                W2vInput {
                    corpus,
                    suite: None,
                    planted_group_words: Some(group_words),
                    data_seed: seed,
                }
            }
            Some(path) => {
                let corpus = Corpus::read(path, &corpus_options(point)?)
                    .with_context(|| format!("reading the corpus {}", path.display()))?;
                let dir = path.parent().unwrap_or(Path::new("."));
                let has_suite = [
                    crate::w2v_cmd::WORDSIM353_FILE,
                    crate::w2v_cmd::SIMLEX999_FILE,
                    crate::w2v_cmd::ANALOGY_FILE,
                ]
                .iter()
                .all(|f| dir.join(f).is_file());
                let suite = if evaluate && has_suite {
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
        point: &Params,
        threads: usize,
    ) -> Result<Measurement> {
        self.measure(variant, input, point, threads, &Backend::Local)?
            .context("internal: the local backend returned no measurement")
    }

    /// `distributed` runs one rank per process.
    fn processes(&self, point: &Params, _threads: usize) -> Result<usize> {
        get_usize(point, "ranks", 1)
    }

    fn run_on_ranks(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Params,
        threads: usize,
        backend: &Backend,
    ) -> Result<Option<Measurement>> {
        if variant != DISTRIBUTED {
            bail!("{variant} runs in one process; only {DISTRIBUTED} runs across MPI processes");
        }
        self.measure(variant, input, point, threads, backend)
    }
}

/// The exchange schedule of a point.
fn sync_options(point: &Params) -> Result<SyncOptions> {
    Ok(SyncOptions {
        sync_words: get_usize(point, "sync_words", 1_000_000)? as u64,
        hot_words: get_usize(point, "hot_words", 10_000)?,
        rare_every: get_usize(point, "rare_every", 4)?,
        scale_alpha: get_bool(point, "scale_alpha", true)?,
    })
}

/// `distributed` on the processes of an MPI job: this rank's model and the whole job's
/// counters, and (words sent by the busiest rank, exchanges, rows exchanged, exchange seconds).
fn train_across_processes(
    comm: &dyn Communicator,
    input: &W2vInput,
    point: &Params,
    params: &TrainParams,
) -> Result<(TrainOutput, (u64, usize, u64, f64))> {
    let ranks = get_usize(point, "ranks", 1)?;
    if ranks != comm.size() {
        bail!(
            "the point asks for {ranks} ranks, the MPI job has {} processes",
            comm.size()
        );
    }
    let inner = get_str(point, "inner", "gemm")?;
    let sync = sync_options(point)?;
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
        point: &Params,
        threads: usize,
        backend: &Backend,
    ) -> Result<Option<Measurement>> {
        let input = input
            .downcast_ref::<W2vInput>()
            .ok_or_else(|| anyhow!("internal: the prepared input is not a word2vec corpus"))?;
        let params = train_params(point, input.data_seed, threads)?;
        let (out, exchange) = if let Some(comm) = backend.communicator() {
            let (out, info) = train_across_processes(comm, input, point, &params)?;
            if !backend.is_root() {
                return Ok(None);
            }
            (out, Some(info))
        } else if variant == DISTRIBUTED {
            let d = word2vec::Distributed {
                inner: get_str(point, "inner", "gemm")?.to_string(),
                ranks: get_usize(point, "ranks", 1)?,
                sync: sync_options(point)?,
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
        if get_bool(point, "evaluate", true)? {
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
    use crate::model::Value;

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

    #[test]
    fn bad_parameters_are_errors() {
        let mut point = Params::new();
        point.insert("dim".into(), Value::Int(0));
        assert!(train_params(&point, 1, 1).is_err());
        let mut point = Params::new();
        point.insert("sample".into(), Value::Str("x".into()));
        assert!(train_params(&point, 1, 1).is_err());
        let mut point = Params::new();
        point.insert("max_tokens".into(), Value::Int(0));
        assert!(corpus_options(&point).is_err());
    }

    #[test]
    fn the_seed_parameter_offsets_the_data_seed() {
        let mut point = Params::new();
        point.insert("seed".into(), Value::Int(3));
        assert_eq!(train_params(&point, 10, 2).unwrap().seed, 13);
        assert_eq!(train_params(&Params::new(), 10, 2).unwrap().epochs, 1);
    }
}
