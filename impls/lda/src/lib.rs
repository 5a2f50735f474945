//! Latent Dirichlet allocation by collapsed Gibbs sampling, sequential and parallel.
//!
//! Follows the master-worker MPI LDA of `../shared/papers/003_*.txt`, itself built on Newman et
//! al.'s approximate distributed LDA (AD-LDA). Every token (document d, word w, topic t) is
//! resampled in turn: remove it from the counts n_dk, n_kw, n_k, draw k with probability
//! proportional to `(n_dk + alpha)(n_kw + beta) / (n_k + W beta)`, add it back. Quality is the
//! joint log-likelihood log p(w, z) ([`LdaState::log_likelihood`]).
//!
//! Every variant implements [`LdaSampler`]:
//! - [`Sequential`] (`sequential`): the standard O(K)-per-token sampler; bit-for-bit repeatable.
//! - [`Sparse`] (`sparse`): SparseLDA's smoothing / document / topic-word buckets, the same
//!   distribution at about O(nonzero topics) per token.
//! - [`MetropolisHastings`] (`mh`): LightLDA / WarpLDA-style Metropolis-Hastings, O(1) per token
//!   whatever K: alternating word proposals (n_kw + beta) and document proposals
//!   (n_dk + alpha), each drawn from a random other token's topic, accepted against the exact
//!   collapsed conditional; bit-for-bit repeatable.
//! - [`WarpMetropolisHastings`] (`warp`): WarpLDA's delayed-update Metropolis-Hastings, O(1)
//!   per token and cache-resident: a document phase and a word phase per iteration, each
//!   accepting the proposals the other drew against one document's or one word's counts, with
//!   every token's topic and proposals kept in document-major and word-major records;
//!   bit-for-bit repeatable.
//! - [`SyncMasterWorker`] (`sync`): AD-LDA, `par.degree()` worker threads with a barrier and a
//!   merge at every checkpoint; repeatable for a seed and worker count.
//! - [`AsyncMasterWorker`] (`async`): the paper's asynchronous master-worker; dense or sparse
//!   deltas, blocking or non-blocking exchange; timing-dependent.
//!
//! Workers and master exchange only owned messages: over channels between threads (see
//! [`parallel`]'s docs), or as bytes over a communicator's point-to-point messages between the
//! ranks of an MPI job ([`LdaSampler::train_on_ranks`]).
//!
//! # Using it from the harness
//!
//! ```no_run
//! use lda::{variant, Control, Corpus, LdaParams, Par};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let corpus = Corpus::read_uci("docword.kos.txt".as_ref(), Some("vocab.kos.txt".as_ref()))?;
//! // or Corpus::read_text(path, &TextOptions { min_count: 5, max_docs: None })
//! let params = LdaParams { topics: 20, iterations: 100, checkpoint_docs: 500,
//!                          ..LdaParams::default() };
//! let sampler = variant("async").expect("known variant");
//! // Two workers; a worker thread the system refuses is LdaError::Threads.
//! let out = sampler.train(&corpus, &params, Par::threads(2), &mut |r| {
//!     // r.iteration, r.loglik (Some every likelihood_every iterations), r.elapsed_seconds
//!     Control::Continue
//! })?;
//! println!("{} tokens/s, log-likelihood {}", out.tokens_per_second, out.final_loglik);
//! for k in 0..params.topics {
//!     let words: Vec<String> =
//!         out.state.top_words(k, 10).iter().map(|&(w, _)| corpus.word_name(w)).collect();
//!     println!("topic {k}: {}", words.join(" "));
//! }
//! // Tables for --out: out.state.word_topic() (W x K counts), out.state.doc_topic() (D x K),
//! // or the distributions out.state.topic_word_distributions(beta) (K x W) and
//! // out.state.doc_topic_distributions(alpha) (D x K).
//! // Time split: out.workers[i].{sampling,sending,waiting,applying}_seconds; out.merges.
//! # Ok(()) }
//! ```
//!
//! Variant names for command lines and experiment files: [`variant_names`]; options of the
//! parallel variants parse with [`DeltaEncoding::from_name`] and [`InnerSampler::from_name`].
//! Set `likelihood_every = 0` to time sampling alone (the final log-likelihood is computed after
//! the timed run either way).

#![warn(missing_docs)]

pub mod asynchronous;
pub mod corpus;
pub mod generate;
pub mod kernel;
pub mod math;
pub mod metropolis;
pub mod model;
pub mod parallel;
pub mod problem;
pub mod quality;
pub mod reference;
pub mod sequential;
pub mod sparse;
pub mod sync;
pub mod warp;
pub(crate) mod wire;
pub mod work;

pub use asynchronous::AsyncMasterWorker;
pub use corpus::{Corpus, CorpusError, TextOptions};
pub use generate::{generate, SyntheticCorpus, SyntheticSpec};
pub use kernel::conditional_draw_counts;
pub use metropolis::{mh_chain_visits, MetropolisHastings};
pub use model::LdaState;
pub use problem::{
    dense_delta_bytes, Control, DeltaEncoding, InnerSampler, InvariantRecord, InvariantViolation,
    IterationReport, LdaError, LdaOutput, LdaParams, LoglikPoint, WorkerStats,
};
pub use quality::{hungarian, jensen_shannon, match_topics, TopicMatch};
pub use sequential::Sequential;
pub use sparse::Sparse;
pub use sync::SyncMasterWorker;
pub use warp::WarpMetropolisHastings;

pub use parbench_common::{Par, Work};
pub use work::TokenCost;

/// The instructions the samplers run with on this CPU: "avx2+fma" where the standard kernel
/// (`sequential`, and `sync` and `async` with it inside) draws four topics a step, "scalar"
/// elsewhere (the other samplers have no run-time dispatch). Reported with instruction counts,
/// which depend on the path.
pub fn simd_path() -> &'static str {
    sequential::simd_path()
}

/// One way of training LDA by collapsed Gibbs sampling.
pub trait LdaSampler: Send + Sync {
    /// The variant's name as used in experiment files and on the command line (`async`).
    fn name(&self) -> &'static str;

    /// Trains on `corpus` from the random initial state of `params.seed`. The master-worker
    /// variants run `par.degree()` worker threads (a thread the system refuses is
    /// [`LdaError::Threads`], never fewer workers); the sequential ones ignore `par`. `progress`
    /// hears about every completed iteration and may stop the run early by returning
    /// [`Control::Stop`]; the output then holds the state reached. Nothing is printed.
    fn train(
        &self,
        corpus: &Corpus,
        params: &LdaParams,
        par: Par,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<LdaOutput, LdaError>;

    /// Trains across the ranks of `comm` (MPI processes, or in-process ranks): every rank calls
    /// this with the same corpus and parameters; the master runs on rank 0 and gets the output,
    /// worker `i` on rank `i + 1` gets `None`: the workers are the `comm.size() - 1` ranks
    /// after the master, so a communicator of fewer than 2 ranks is [`LdaError::BadLaunch`].
    /// The result equals [`LdaSampler::train`]'s with as many worker threads whenever that one
    /// is repeatable (`sync`; `async` with one blocking worker). Only the master-worker variants
    /// run across ranks; the others refuse.
    fn train_on_ranks(
        &self,
        corpus: &Corpus,
        params: &LdaParams,
        comm: &dyn parbench_common::comm::Communicator,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<Option<LdaOutput>, LdaError> {
        let _ = (corpus, params, comm, progress);
        Err(LdaError::NotMasterWorker {
            variant: self.name(),
        })
    }

    /// [`LdaSampler::train`] with `par` in this process when `comm` is `None`, else
    /// [`LdaSampler::train_on_ranks`] across its ranks (which ignores `par`: the workers are
    /// the ranks).
    fn train_on(
        &self,
        corpus: &Corpus,
        params: &LdaParams,
        par: Par,
        comm: Option<&dyn parbench_common::comm::Communicator>,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<Option<LdaOutput>, LdaError> {
        match comm {
            Some(comm) => self.train_on_ranks(corpus, params, comm, progress),
            None => self.train(corpus, params, par, progress).map(Some),
        }
    }

    /// Whether the variant runs `par.degree()` worker threads (the sequential ones ignore it).
    fn is_parallel(&self) -> bool {
        false
    }

    /// What one token costs this sampler with `params` (the master-worker variants' is their
    /// inner sampler's).
    fn token_cost(&self, params: &LdaParams) -> TokenCost {
        params.inner.into()
    }

    /// The work the run that gave `out` could not avoid, for its time bound ([`work`]).
    fn work(&self, corpus: &Corpus, params: &LdaParams, out: &LdaOutput, par: Par) -> Work {
        let threads = if self.is_parallel() { par.degree() } else { 1 };
        work::sampling_work(self.token_cost(params), corpus, params, out, threads)
    }
}

/// Every variant, in the order the tables list them.
pub fn variants() -> Vec<Box<dyn LdaSampler>> {
    vec![
        Box::new(Sequential),
        Box::new(Sparse),
        Box::new(MetropolisHastings::default()),
        Box::new(WarpMetropolisHastings::default()),
        Box::new(SyncMasterWorker),
        Box::new(AsyncMasterWorker),
    ]
}

/// The variant called `name`, if there is one.
pub fn variant(name: &str) -> Option<Box<dyn LdaSampler>> {
    variants().into_iter().find(|v| v.name() == name)
}

/// Names of every variant.
pub fn variant_names() -> Vec<&'static str> {
    variants().iter().map(|v| v.name()).collect()
}
