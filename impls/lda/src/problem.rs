//! Parameters, outputs and errors shared by every variant, and their validation.

use crate::corpus::CorpusError;
use crate::model::LdaState;
use parbench_common::par::PoolError;
use thiserror::Error;

/// What can be wrong with an LDA run's inputs, or a run that failed.
#[derive(Debug, Error)]
pub enum LdaError {
    /// `topics` is 0 or above [`MAX_TOPICS`].
    #[error("the number of topics must be between 1 and {max}, got {topics}")]
    BadTopics {
        /// The topics asked for.
        topics: usize,
        /// [`MAX_TOPICS`].
        max: usize,
    },
    /// `alpha` is zero, negative or not finite (the value is carried).
    #[error("alpha must be finite and positive, got {0}")]
    BadAlpha(f64),
    /// `beta` is zero, negative or not finite (the value is carried).
    #[error("beta must be finite and positive, got {0}")]
    BadBeta(f64),
    /// `checkpoint_docs` is 0.
    #[error("the checkpoint interval must be at least 1 document, got 0")]
    BadCheckpoint,
    /// A document's given assignments do not have one topic per token.
    #[error("document {doc} has {found} topic assignments for {expected} tokens")]
    AssignmentShape {
        /// 0-based document.
        doc: usize,
        /// Its tokens.
        expected: usize,
        /// Assignments given for it.
        found: usize,
    },
    /// A given assignment names a topic not below the number of topics.
    #[error("document {doc}, token {position}: topic {topic} is outside 0..{topics}")]
    TopicOutOfRange {
        /// 0-based document.
        doc: usize,
        /// 0-based token position in the document.
        position: usize,
        /// The topic found.
        topic: u32,
        /// The number of topics K.
        topics: usize,
    },
    /// The given assignments cover another number of documents than the corpus has.
    #[error("the corpus has {docs} documents but the assignments cover {found}")]
    DocumentCount {
        /// Documents in the corpus.
        docs: usize,
        /// Documents the assignments cover.
        found: usize,
    },
    /// [`crate::conditional_draw_counts`] was asked for a document or token that does not exist.
    #[error("document {doc} has no token {position}")]
    NoSuchToken {
        /// 0-based document asked for.
        doc: usize,
        /// The position asked for.
        position: usize,
    },
    /// A [`crate::SyntheticSpec`] is inconsistent (the reason is carried).
    #[error("invalid synthetic corpus specification: {0}")]
    BadSpec(String),
    /// [`crate::LdaSampler::train_on_ranks`] was called on a variant that is not master-worker.
    #[error(
        "{variant} does not run across ranks: only the master-worker variants sync and async do"
    )]
    NotMasterWorker {
        /// The variant's name.
        variant: &'static str,
    },
    /// The communicator has fewer than 2 ranks: the master needs at least one worker.
    #[error("a master and its workers need at least 2 ranks, the job has {ranks} (run mpirun -np P+1 for P workers)")]
    BadLaunch {
        /// Ranks of the communicator.
        ranks: usize,
    },
    /// A worker (thread or rank) failed or broke the protocol; the run was abandoned.
    #[error("worker {worker} failed: {reason}")]
    WorkerFailed {
        /// 0-based worker id.
        worker: usize,
        /// What went wrong, for the message.
        reason: String,
    },
    /// The corpus could not be read or is invalid.
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    /// The system refused a worker thread; the workers already started were stopped.
    #[error(transparent)]
    Threads(#[from] PoolError),
}

/// How a worker encodes the change of its word-topic table since its last exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeltaEncoding {
    /// The whole `W x K` table of differences (`i32`), computed against a copy of the last table
    /// the master sent: O(W K) per exchange whatever changed.
    #[default]
    Dense,
    /// A hash map from `word * K + topic` to the net change, recorded while sampling (the
    /// paper's "sparse matrix representation"): O(changes) to send, one hash update per topic
    /// move to record.
    Sparse,
}

impl DeltaEncoding {
    /// `dense` or `sparse`.
    pub fn name(self) -> &'static str {
        match self {
            DeltaEncoding::Dense => "dense",
            DeltaEncoding::Sparse => "sparse",
        }
    }
    /// Parses [`DeltaEncoding::name`].
    pub fn from_name(name: &str) -> Option<DeltaEncoding> {
        [DeltaEncoding::Dense, DeltaEncoding::Sparse]
            .into_iter()
            .find(|e| e.name() == name)
    }
}

/// The per-token sampler a parallel variant's workers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum InnerSampler {
    /// O(K) per token: the full conditional, then a cumulative-sum search.
    #[default]
    Standard,
    /// SparseLDA's three buckets: about O(nonzero topics of the document and word) per token.
    Sparse,
}

impl InnerSampler {
    /// `standard` or `sparse`.
    pub fn name(self) -> &'static str {
        match self {
            InnerSampler::Standard => "standard",
            InnerSampler::Sparse => "sparse",
        }
    }
    /// Parses [`InnerSampler::name`].
    pub fn from_name(name: &str) -> Option<InnerSampler> {
        [InnerSampler::Standard, InnerSampler::Sparse]
            .into_iter()
            .find(|e| e.name() == name)
    }
}

/// Everything a run needs besides the corpus (the workers of `sync` and `async` are the `par`
/// of [`crate::LdaSampler::train`]). `Default` is the paper's setting on a small checkpoint:
/// K = 20, alpha = beta = 0.1, 100 iterations.
#[derive(Clone, Debug, PartialEq)]
pub struct LdaParams {
    /// K.
    pub topics: usize,
    /// Symmetric document-topic prior.
    pub alpha: f64,
    /// Symmetric topic-word prior.
    pub beta: f64,
    /// Sweeps over the corpus (every token resampled once per sweep).
    pub iterations: usize,
    /// Seeds the initial assignments, the document partition and every sampling stream.
    pub seed: u64,
    /// Documents a worker samples between two exchanges with the master (may be less or more
    /// than its share of the corpus, so exchanges fall within or across iterations).
    pub checkpoint_docs: usize,
    /// Evaluate the log-likelihood every this many iterations (0: only after the run, in
    /// [`LdaOutput::final_loglik`]). The evaluation is inside the timed run; set 0 to time
    /// sampling alone.
    pub likelihood_every: usize,
    /// How `async` workers encode their deltas (`sync` always merges dense tables).
    pub delta: DeltaEncoding,
    /// `async` only: keep sampling while the master's reply is in flight (double buffer).
    pub non_blocking: bool,
    /// The per-token sampler of `sync` and `async` workers.
    pub inner: InnerSampler,
    /// Test hook: after every merge (every iteration for the sequential variants) compare the
    /// global tables with a recount from the assignments, recording any difference in
    /// [`LdaOutput::invariants`]. Costs O(N + W K) per merge; workers then also send a copy of
    /// their assignments with every delta.
    pub verify_invariants: bool,
}

impl Default for LdaParams {
    fn default() -> Self {
        LdaParams {
            topics: 20,
            alpha: 0.1,
            beta: 0.1,
            iterations: 100,
            seed: 0,
            checkpoint_docs: 500,
            likelihood_every: 10,
            delta: DeltaEncoding::Dense,
            non_blocking: false,
            inner: InnerSampler::Standard,
            verify_invariants: false,
        }
    }
}

/// The largest K accepted: far beyond any practical run, it keeps topic ids in `u32` and the
/// sparse delta's `word * K + topic` keys in `u64` for any vocabulary.
pub const MAX_TOPICS: usize = 1 << 20;

impl LdaParams {
    /// Rejects parameters no variant can run.
    pub fn validate(&self) -> Result<(), LdaError> {
        if self.topics == 0 || self.topics > MAX_TOPICS {
            return Err(LdaError::BadTopics {
                topics: self.topics,
                max: MAX_TOPICS,
            });
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(LdaError::BadAlpha(self.alpha));
        }
        if !(self.beta.is_finite() && self.beta > 0.0) {
            return Err(LdaError::BadBeta(self.beta));
        }
        if self.checkpoint_docs == 0 {
            return Err(LdaError::BadCheckpoint);
        }
        Ok(())
    }

    /// Whether the log-likelihood is due after `iteration` (1-based).
    pub fn likelihood_due(&self, iteration: usize) -> bool {
        self.likelihood_every > 0
            && (iteration.is_multiple_of(self.likelihood_every) || iteration == self.iterations)
    }
}

/// Sent to the progress callback after every completed iteration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IterationReport {
    /// Iterations completed (1-based).
    pub iteration: usize,
    /// Iterations requested.
    pub iterations: usize,
    /// The joint log-likelihood, when due this iteration (see [`LdaParams::likelihood_every`]).
    pub loglik: Option<f64>,
    /// Wall seconds since sampling started.
    pub elapsed_seconds: f64,
}

/// What the progress callback wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Go on with the next iteration.
    Continue,
    /// Stop now; the output holds the state reached.
    Stop,
}

/// One point of the convergence curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoglikPoint {
    /// Iterations completed when the value was taken.
    pub iteration: usize,
    /// Wall seconds since sampling started, when the value was known.
    pub elapsed_seconds: f64,
    /// The joint log-likelihood log p(w, z) (natural log).
    pub loglik: f64,
    /// Wall seconds the evaluation itself took (on the thread that reported it).
    pub eval_seconds: f64,
}

/// How one worker spent its time and what it exchanged. The sequential variants report one
/// worker that only samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerStats {
    /// Tokens this worker resampled over the run.
    pub tokens_sampled: u64,
    /// In the sampling loop (including the log-likelihood's document part when due).
    pub sampling_seconds: f64,
    /// Encoding the delta and handing it to the channel.
    pub sending_seconds: f64,
    /// Blocked until the master's reply arrived.
    pub waiting_seconds: f64,
    /// Folding the master's table into the local one and rebuilding sampler caches.
    pub applying_seconds: f64,
    /// Deltas sent (the final flush included).
    pub exchanges: u64,
    /// Payload bytes of the deltas sent ([`DENSE_DELTA_ENTRY_BYTES`] per dense entry,
    /// [`SPARSE_DELTA_ENTRY_BYTES`] per sparse one).
    pub bytes_sent: u64,
    /// Payload bytes of the tables received (`u32` per entry).
    pub bytes_received: u64,
}

/// Bytes of a dense delta's entry: the change of one word-topic count, an `i32`.
pub const DENSE_DELTA_ENTRY_BYTES: u64 = 4;
/// Bytes of a sparse delta's entry: a `u64` key (word and topic) and the `i32` change.
pub const SPARSE_DELTA_ENTRY_BYTES: u64 = 12;

/// Bytes of one dense delta of a `words` x `topics` table: what the dense encoding sends at
/// every exchange, against which the sparse encoding's bytes are read.
pub fn dense_delta_bytes(words: usize, topics: usize) -> u64 {
    DENSE_DELTA_ENTRY_BYTES * (words as u64) * (topics as u64)
}

/// A difference between the global tables and a recount from the assignments.
#[derive(Clone, Debug, PartialEq)]
pub struct InvariantViolation {
    /// The merge (1-based) or iteration after which it was found; `None` for the final state.
    pub merge: Option<usize>,
    /// What differed, in words (the table and entry, or the merge that drove counts negative).
    pub detail: String,
}

/// The count-conservation checks a run made: always the final state, and with
/// [`LdaParams::verify_invariants`] every merge.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InvariantRecord {
    /// Recounts made (one per checked merge, plus the final state).
    pub checks: usize,
    /// Every difference found; empty when the counts were conserved.
    pub violations: Vec<InvariantViolation>,
}

impl InvariantRecord {
    pub(crate) fn check(&mut self, merge: Option<usize>, outcome: Result<(), String>) {
        self.checks += 1;
        if let Err(detail) = outcome {
            self.violations.push(InvariantViolation { merge, detail });
        }
    }
    /// No violation was found.
    pub fn holds(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The trained model and what the harness records about the run.
#[derive(Clone, Debug)]
pub struct LdaOutput {
    /// Final assignments and global counts (n_dk, n_kw, n_k).
    pub state: LdaState,
    /// Iterations completed (fewer than requested when the callback stopped the run).
    pub iterations: usize,
    /// The log-likelihood when due (see [`LdaParams::likelihood_every`]). For `sync` and `async`
    /// an intermediate value mixes workers at slightly different points (each document part is
    /// taken when its worker finished the iteration, the word part when the last one did).
    pub loglik_trace: Vec<LoglikPoint>,
    /// The exact log-likelihood of the final state (computed after the timed run).
    pub final_loglik: f64,
    /// Tokens resampled over the run, all workers together.
    pub tokens_sampled: u64,
    /// Wall seconds of the whole run (sampling, exchanges, likelihood evaluations).
    pub train_seconds: f64,
    /// `tokens_sampled / train_seconds`.
    pub tokens_per_second: f64,
    /// One entry per worker.
    pub workers: Vec<WorkerStats>,
    /// Deltas the master applied (0 for the sequential variants).
    pub merges: usize,
    /// Seconds the master spent merging deltas and copying tables for replies.
    pub master_seconds: f64,
    /// The count-conservation checks made and what they found.
    pub invariants: InvariantRecord,
}
