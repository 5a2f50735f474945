//! The per-token machinery every variant shares: the `Kernel` contract of a collapsed Gibbs
//! sampler over one document at a time, the sweep that drives it, and the single-threaded run
//! used by `sequential`, `sparse` and `mh` (`mh` brings its own corpus sweep, `CorpusSweep`).
//!
//! A kernel owns only derived caches (1 / (n_k + W beta), bucket sums, nonzero lists); the
//! counts live in `Tables` (n_kw, n_k) and the caller's n_dk row, so the same kernel runs on
//! the global tables (sequential) or on a worker's local copy (sync, async). After the tables are
//! replaced wholesale (a reply from the master) the caller must call `Kernel::prepare`.

use crate::corpus::Corpus;
use crate::model::LdaState;
use crate::problem::{
    Control, InnerSampler, InvariantRecord, IterationReport, LdaError, LdaOutput, LdaParams,
    LoglikPoint, WorkerStats,
};
use crate::sequential::StandardKernel;
use crate::sparse::SparseKernel;
use parbench_common::Rng;
use std::time::Instant;

/// The random stream of the single-threaded samplers (workers use `WORKER_STREAM + id`).
pub(crate) const SEQUENTIAL_STREAM: u64 = 0x5E0;

/// Word-topic counts n_kw (word-major `W x K`) and topic totals n_k.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tables {
    pub topics: usize,
    pub word_topic: Vec<u32>,
    pub topic_totals: Vec<u32>,
}

/// A collapsed Gibbs sampler's per-token steps. For each token of a document, [`sweep_doc`]
/// calls `remove` (take the token's topic out of the counts), `draw` (a topic from the
/// conditional given all other tokens) and `add` (put the new topic in).
pub(crate) trait Kernel: Send {
    /// Rebuilds every cache from `tables` (after they were replaced).
    fn prepare(&mut self, tables: &Tables);
    /// Sets up the caches for the document whose n_d· row is `ndk`.
    fn begin_doc(&mut self, ndk: &[u32], tables: &Tables);
    /// Removes one token of word `w` with topic `k` from the counts.
    fn remove(&mut self, w: u32, k: u32, ndk: &mut [u32], tables: &mut Tables);
    /// A topic drawn with probability proportional to
    /// `(n_dk + alpha) (n_kw + beta) / (n_k + W beta)` (the token is already removed).
    fn draw(&mut self, w: u32, ndk: &[u32], tables: &Tables, rng: &mut Rng) -> u32;
    /// Adds one token of word `w` with topic `k` to the counts.
    fn add(&mut self, w: u32, k: u32, ndk: &mut [u32], tables: &mut Tables);
    /// Restores whatever `begin_doc` changed in document-independent caches.
    fn end_doc(&mut self, ndk: &[u32], tables: &Tables);
}

/// Observes every topic change; the sparse delta encoding records them.
pub(crate) trait MoveLog {
    fn moved(&mut self, w: u32, old: u32, new: u32);
}

/// Records nothing (dense deltas are computed from the tables at exchange time).
pub(crate) struct NoLog;

impl MoveLog for NoLog {
    #[inline(always)]
    fn moved(&mut self, _: u32, _: u32, _: u32) {}
}

/// Resamples every token of one document in order.
#[inline]
pub(crate) fn sweep_doc<K: Kernel + ?Sized, L: MoveLog>(
    kernel: &mut K,
    words: &[u32],
    z: &mut [u32],
    ndk: &mut [u32],
    tables: &mut Tables,
    rng: &mut Rng,
    log: &mut L,
) {
    kernel.begin_doc(ndk, tables);
    for (&w, zi) in words.iter().zip(z.iter_mut()) {
        let old = *zi;
        kernel.remove(w, old, ndk, tables);
        let new = kernel.draw(w, ndk, tables, rng);
        kernel.add(w, new, ndk, tables);
        if new != old {
            *zi = new;
            log.moved(w, old, new);
        }
    }
    kernel.end_doc(ndk, tables);
}

/// The kernel for `inner`, with caches built from `tables`.
pub(crate) fn make_kernel(
    inner: InnerSampler,
    params: &LdaParams,
    num_words: usize,
    tables: &Tables,
) -> Box<dyn KernelSweep> {
    match inner {
        InnerSampler::Standard => {
            let mut k = StandardKernel::new(params, num_words);
            k.prepare(tables);
            Box::new(k)
        }
        InnerSampler::Sparse => {
            let mut k = SparseKernel::new(params, num_words);
            k.prepare(tables);
            Box::new(k)
        }
    }
}

/// A kernel behind dynamic dispatch, monomorphized per document rather than per token.
pub(crate) trait KernelSweep: Send {
    fn prepare_tables(&mut self, tables: &Tables);
    fn sweep(
        &mut self,
        words: &[u32],
        z: &mut [u32],
        ndk: &mut [u32],
        tables: &mut Tables,
        rng: &mut Rng,
        log: Option<&mut dyn MoveLogDyn>,
    );
    fn as_kernel(&mut self) -> &mut dyn KernelDyn;
}

/// Object-safe forwarding of [`MoveLog`].
pub(crate) trait MoveLogDyn {
    fn moved_dyn(&mut self, w: u32, old: u32, new: u32);
}

struct DynLog<'a>(&'a mut dyn MoveLogDyn);

impl MoveLog for DynLog<'_> {
    #[inline(always)]
    fn moved(&mut self, w: u32, old: u32, new: u32) {
        self.0.moved_dyn(w, old, new);
    }
}

/// Object-safe access to the per-token steps (for the conditional-distribution test hook).
pub(crate) trait KernelDyn {
    fn begin(&mut self, ndk: &[u32], tables: &Tables);
    fn remove_one(&mut self, w: u32, k: u32, ndk: &mut [u32], tables: &mut Tables);
    fn draw_one(&mut self, w: u32, ndk: &[u32], tables: &Tables, rng: &mut Rng) -> u32;
}

impl<K: Kernel> KernelDyn for K {
    fn begin(&mut self, ndk: &[u32], tables: &Tables) {
        self.begin_doc(ndk, tables);
    }
    fn remove_one(&mut self, w: u32, k: u32, ndk: &mut [u32], tables: &mut Tables) {
        self.remove(w, k, ndk, tables);
    }
    fn draw_one(&mut self, w: u32, ndk: &[u32], tables: &Tables, rng: &mut Rng) -> u32 {
        self.draw(w, ndk, tables, rng)
    }
}

impl<K: Kernel + 'static> KernelSweep for K {
    fn prepare_tables(&mut self, tables: &Tables) {
        self.prepare(tables);
    }
    fn sweep(
        &mut self,
        words: &[u32],
        z: &mut [u32],
        ndk: &mut [u32],
        tables: &mut Tables,
        rng: &mut Rng,
        log: Option<&mut dyn MoveLogDyn>,
    ) {
        match log {
            None => sweep_doc(self, words, z, ndk, tables, rng, &mut NoLog),
            Some(l) => sweep_doc(self, words, z, ndk, tables, rng, &mut DynLog(l)),
        }
    }
    fn as_kernel(&mut self) -> &mut dyn KernelDyn {
        self
    }
}

/// One token of a state, taken out for the test hooks that sample its conditional: its word and
/// topic, and copies of the counts (its document's row, n_kw, n_k) with `params` at the
/// state's K, the token still counted.
pub(crate) struct TokenProbe {
    pub word: u32,
    pub topic: u32,
    pub params: LdaParams,
    pub tables: Tables,
    pub ndk: Vec<u32>,
}

impl TokenProbe {
    /// Token `(doc, position)` of `state`, or the error naming it when there is none.
    pub(crate) fn new(
        corpus: &Corpus,
        state: &LdaState,
        params: &LdaParams,
        (doc, position): (usize, usize),
    ) -> Result<TokenProbe, LdaError> {
        params.validate()?;
        let k = state.topics();
        let &word = corpus
            .docs()
            .get(doc)
            .and_then(|words| words.get(position))
            .ok_or(LdaError::NoSuchToken { doc, position })?;
        Ok(TokenProbe {
            word,
            topic: state.assignments()[doc][position],
            params: LdaParams {
                topics: k,
                ..params.clone()
            },
            tables: Tables {
                topics: k,
                word_topic: state.word_topic().to_vec(),
                topic_totals: state.topic_totals().to_vec(),
            },
            ndk: state.doc_topic()[doc * k..(doc + 1) * k].to_vec(),
        })
    }
}

/// Test hook: how often `inner` draws each topic for token `(doc, position)` in `state`, over
/// `draws` independent draws from the same conditional (the token is removed once, then drawn
/// `draws` times without being put back). Returns K counts.
pub fn conditional_draw_counts(
    inner: InnerSampler,
    corpus: &Corpus,
    state: &LdaState,
    params: &LdaParams,
    token: (usize, usize),
    draws: usize,
    seed: u64,
) -> Result<Vec<u64>, LdaError> {
    let TokenProbe {
        word,
        topic,
        params,
        mut tables,
        mut ndk,
    } = TokenProbe::new(corpus, state, params, token)?;
    let mut kernel = make_kernel(inner, &params, corpus.num_words(), &tables);
    let kernel = kernel.as_kernel();
    kernel.begin(&ndk, &tables);
    kernel.remove_one(word, topic, &mut ndk, &mut tables);
    let mut rng = Rng::new(seed);
    let mut counts = vec![0u64; params.topics];
    for _ in 0..draws {
        counts[kernel.draw_one(word, &ndk, &tables, &mut rng) as usize] += 1;
    }
    Ok(counts)
}

/// One Gibbs sweep over the whole corpus, documents in corpus order: what the single-threaded
/// driver [`train_single_with`] repeats. The per-document kernels sweep document by document;
/// `mh` sweeps with its own token loop.
pub(crate) trait CorpusSweep {
    fn sweep_corpus(
        &mut self,
        corpus: &Corpus,
        assignments: &mut [Vec<u32>],
        doc_topic: &mut [u32],
        tables: &mut Tables,
        rng: &mut Rng,
    );

    /// Brings `assignments`, `doc_topic` and `tables` up to date with the sweeper's own state,
    /// before anything reads them. The driver calls it before an invariant check or a
    /// likelihood evaluation, and once after the last sweep. A sweeper that keeps them current
    /// as it goes (every one but `warp`, which samples from its own token records and keeps
    /// only n_k current) has nothing to do.
    fn settle(
        &mut self,
        _corpus: &Corpus,
        _assignments: &mut [Vec<u32>],
        _doc_topic: &mut [u32],
        _tables: &mut Tables,
    ) {
    }
}

impl CorpusSweep for Box<dyn KernelSweep> {
    fn sweep_corpus(
        &mut self,
        corpus: &Corpus,
        assignments: &mut [Vec<u32>],
        doc_topic: &mut [u32],
        tables: &mut Tables,
        rng: &mut Rng,
    ) {
        let k = tables.topics;
        for ((words, z), ndk) in corpus
            .docs()
            .iter()
            .zip(assignments.iter_mut())
            .zip(doc_topic.chunks_mut(k))
        {
            self.sweep(words, z, ndk, tables, rng, None);
        }
    }
}

/// The single-threaded run of `sequential` and `sparse`: one stream, documents in corpus order,
/// so a seed fixes every draw.
pub(crate) fn train_single(
    inner: InnerSampler,
    corpus: &Corpus,
    params: &LdaParams,
    progress: &mut dyn FnMut(&IterationReport) -> Control,
) -> Result<LdaOutput, LdaError> {
    train_single_with(corpus, params, progress, |tables, _| {
        make_kernel(inner, params, corpus.num_words(), tables)
    })
}

/// The single-threaded driver: validates `params`, draws the initial state of `params.seed`,
/// builds the sweeper from it with `build` (given the tables and the initial assignments), runs
/// `params.iterations` sweeps on the stream `SEQUENTIAL_STREAM` with the progress reports,
/// likelihood trace and invariant checks of the contract, and assembles the output.
pub(crate) fn train_single_with<S: CorpusSweep>(
    corpus: &Corpus,
    params: &LdaParams,
    progress: &mut dyn FnMut(&IterationReport) -> Control,
    build: impl FnOnce(&Tables, &[Vec<u32>]) -> S,
) -> Result<LdaOutput, LdaError> {
    params.validate()?;
    let k = params.topics;
    let state = LdaState::random(corpus, k, params.seed);
    let LdaState {
        mut assignments,
        mut doc_topic,
        word_topic,
        topic_totals,
        ..
    } = state;
    let mut tables = Tables {
        topics: k,
        word_topic,
        topic_totals,
    };
    let mut sweeper = build(&tables, &assignments);
    let mut rng = Rng::stream(params.seed, SEQUENTIAL_STREAM);
    let lengths: Vec<usize> = corpus.docs().iter().map(Vec::len).collect();
    let mut trace = Vec::new();
    let mut invariants = InvariantRecord::default();
    let mut stats = WorkerStats::default();
    let tokens_per_iteration = corpus.num_tokens() as u64;
    let start = Instant::now();
    let mut completed = 0;
    let mut settled = false;
    for iteration in 1..=params.iterations {
        let sweep_start = Instant::now();
        sweeper.sweep_corpus(
            corpus,
            &mut assignments,
            &mut doc_topic,
            &mut tables,
            &mut rng,
        );
        stats.sampling_seconds += sweep_start.elapsed().as_secs_f64();
        stats.tokens_sampled += tokens_per_iteration;
        completed = iteration;
        let due = params.likelihood_due(iteration);
        // Time the evaluation's settle as part of the evaluation: a run that evaluates nothing
        // settles once, at the end, inside its sampling time.
        let settle_start = Instant::now();
        settled = due || params.verify_invariants;
        if settled {
            sweeper.settle(corpus, &mut assignments, &mut doc_topic, &mut tables);
        }
        let settle_seconds = settle_start.elapsed().as_secs_f64();
        if params.verify_invariants {
            let (d, w, t) = crate::model::count_tables(corpus, &assignments, k, corpus.num_words());
            let outcome = crate::model::compare_tables("n_kw", &tables.word_topic, &w, k)
                .and_then(|_| crate::model::compare_tables("n_k", &tables.topic_totals, &t, k))
                .and_then(|_| crate::model::compare_tables("n_dk", &doc_topic, &d, k));
            invariants.check(Some(iteration), outcome);
        }
        let loglik = due.then(|| {
            let eval_start = Instant::now();
            let ll = crate::model::word_log_likelihood(
                &tables.word_topic,
                &tables.topic_totals,
                k,
                params.beta,
            ) + crate::model::doc_log_likelihood(&doc_topic, &lengths, k, params.alpha);
            trace.push(LoglikPoint {
                iteration,
                elapsed_seconds: start.elapsed().as_secs_f64(),
                loglik: ll,
                eval_seconds: settle_seconds + eval_start.elapsed().as_secs_f64(),
            });
            ll
        });
        let report = IterationReport {
            iteration,
            iterations: params.iterations,
            loglik,
            elapsed_seconds: start.elapsed().as_secs_f64(),
        };
        if progress(&report) == Control::Stop {
            break;
        }
    }
    // The last iteration's evaluation may have settled already.
    if !settled {
        let settle_start = Instant::now();
        sweeper.settle(corpus, &mut assignments, &mut doc_topic, &mut tables);
        stats.sampling_seconds += settle_start.elapsed().as_secs_f64();
    }
    let train_seconds = start.elapsed().as_secs_f64();
    let state = LdaState {
        topics: k,
        num_words: corpus.num_words(),
        assignments,
        doc_topic,
        word_topic: tables.word_topic,
        topic_totals: tables.topic_totals,
    };
    invariants.check(None, state.check_counts(corpus));
    Ok(finish(
        corpus,
        params,
        state,
        completed,
        trace,
        train_seconds,
        vec![stats],
        0,
        0.0,
        invariants,
    ))
}

/// Assembles the output, computing the final log-likelihood and the throughput.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish(
    corpus: &Corpus,
    params: &LdaParams,
    state: LdaState,
    iterations: usize,
    loglik_trace: Vec<LoglikPoint>,
    train_seconds: f64,
    workers: Vec<WorkerStats>,
    merges: usize,
    master_seconds: f64,
    invariants: InvariantRecord,
) -> LdaOutput {
    let tokens_sampled: u64 = workers.iter().map(|w| w.tokens_sampled).sum();
    let final_loglik = state.log_likelihood(corpus, params.alpha, params.beta);
    LdaOutput {
        state,
        iterations,
        loglik_trace,
        final_loglik,
        tokens_sampled,
        train_seconds,
        tokens_per_second: if train_seconds > 0.0 {
            tokens_sampled as f64 / train_seconds
        } else {
            0.0
        },
        workers,
        merges,
        master_seconds,
        invariants,
    }
}
