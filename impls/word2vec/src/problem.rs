//! Parameters, progress reports, outputs and errors shared by every variant, and their validation.

use crate::corpus::CorpusError;
use crate::model::Model;
use parbench_common::par::PoolError;
use parbench_common::{Precision, Work};
use thiserror::Error;

/// What can be wrong with a training run's inputs.
#[derive(Debug, Error)]
pub enum W2vError {
    /// `dim` is 0 or above [`MAX_DIM`].
    #[error("the dimension must be between 1 and {max}, got {dim}")]
    BadDimension {
        /// The dimension asked for.
        dim: usize,
        /// [`MAX_DIM`].
        max: usize,
    },
    /// `window` is 0 or above [`MAX_WINDOW`].
    #[error("the window must be between 1 and {max}, got {window}")]
    BadWindow {
        /// The window asked for.
        window: usize,
        /// [`MAX_WINDOW`].
        max: usize,
    },
    /// `negative` is above [`MAX_NEGATIVE`].
    #[error("the number of negatives must be at most {max}, got {negative}")]
    BadNegative {
        /// The negatives asked for.
        negative: usize,
        /// [`MAX_NEGATIVE`].
        max: usize,
    },
    /// `sample` is negative or not finite (the value is carried).
    #[error("the subsampling threshold must be finite and non-negative (0 disables it), got {0}")]
    BadSample(f64),
    /// `alpha` is zero, negative or not finite (the value is carried).
    #[error("the learning rate alpha must be finite and positive, got {0}")]
    BadAlpha(f64),
    /// `epochs` is 0.
    #[error("the number of epochs must be at least 1, got 0")]
    NoEpochs,
    /// The corpus has no in-vocabulary token.
    #[error("the corpus has no words in its vocabulary, so there is nothing to train")]
    EmptyCorpus,
    /// The corpus could not be read.
    #[error(transparent)]
    Corpus(#[from] CorpusError),
    /// The distributed variant's communication failed or its options are invalid (the message says
    /// which).
    #[error("distributed training: {0}")]
    Exchange(String),
    /// The system refused one of the run's threads; the threads already started were stopped.
    #[error(transparent)]
    Threads(#[from] PoolError),
}

/// Everything a run needs besides the corpus. `Default` is word2vec.c's skip-gram setting
/// (`-cbow 0 -size 100 -window 5 -negative 5 -sample 1e-4 -alpha 0.025 -iter 5 -min-count 5`).
#[derive(Clone, Debug, PartialEq)]
pub struct TrainParams {
    /// Embedding dimension d.
    pub dim: usize,
    /// Maximum window W: `hogwild` and `gemm` draw a reduced window in `[1, W]` per center word;
    /// `full` and `full-register` use the fixed `ceil(W / 2)`.
    pub window: usize,
    /// Negative samples K per (context, center) pair (`hogwild`) or per center word (`gemm`,
    /// `full`, `full-register`, shared by its whole context).
    pub negative: usize,
    /// Subsampling threshold t (word2vec.c `-sample`); 0 keeps every word.
    pub sample: f64,
    /// Starting learning rate; decays linearly over all epochs to `alpha * 1e-4`.
    pub alpha: f64,
    /// Passes over the corpus.
    pub epochs: usize,
    /// Seeds the initial input vectors and every thread's stream (`Rng::stream(seed, thread)`;
    /// the threads are the `par` of [`crate::Trainer::train`]).
    pub seed: u64,
    /// Not used by training (the corpus is already encoded); recorded so a run's parameters
    /// say how its vocabulary was cut. See [`crate::CorpusOptions::min_count`].
    pub min_count: u64,
    /// Seconds between two progress reports during an epoch (one more comes at every epoch end).
    pub report_interval_seconds: f64,
    /// Pairs of the corpus over which every epoch's closing report estimates the training loss
    /// ([`EpochReport::loss`]); 0 (the default) estimates nothing. The estimate reads the model
    /// only, so the trained model is the same either way; its cost (O(pairs x negative x dim)
    /// per epoch) is inside the timed run.
    pub loss_sample: usize,
}

impl Default for TrainParams {
    fn default() -> Self {
        TrainParams {
            dim: 100,
            window: 5,
            negative: 5,
            sample: 1e-4,
            alpha: 0.025,
            epochs: 5,
            seed: 1,
            min_count: 5,
            report_interval_seconds: 0.5,
            loss_sample: 0,
        }
    }
}

/// Upper bounds that keep the per-thread scratch small and fixed; far beyond practical values.
pub const MAX_DIM: usize = 4096;
/// Largest window [`TrainParams::window`] accepted.
pub const MAX_WINDOW: usize = 64;
/// Most negatives [`TrainParams::negative`] accepted.
pub const MAX_NEGATIVE: usize = 256;

impl TrainParams {
    /// Rejects parameters no variant can run.
    pub fn validate(&self) -> Result<(), W2vError> {
        if self.dim == 0 || self.dim > MAX_DIM {
            return Err(W2vError::BadDimension {
                dim: self.dim,
                max: MAX_DIM,
            });
        }
        if self.window == 0 || self.window > MAX_WINDOW {
            return Err(W2vError::BadWindow {
                window: self.window,
                max: MAX_WINDOW,
            });
        }
        if self.negative > MAX_NEGATIVE {
            return Err(W2vError::BadNegative {
                negative: self.negative,
                max: MAX_NEGATIVE,
            });
        }
        if !(self.sample.is_finite() && self.sample >= 0.0) {
            return Err(W2vError::BadSample(self.sample));
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(W2vError::BadAlpha(self.alpha));
        }
        if self.epochs == 0 {
            return Err(W2vError::NoEpochs);
        }
        Ok(())
    }
}

/// Sent to the progress callback every [`TrainParams::report_interval_seconds`] during an epoch
/// and once when every thread has finished the epoch. Always called on the thread that called
/// [`crate::Trainer::train`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpochReport {
    /// The epoch under way (0-based).
    pub epoch: usize,
    /// Epochs of the run.
    pub epochs: usize,
    /// Whether this report closes `epoch`.
    pub epoch_finished: bool,
    /// Corpus words (in the vocabulary, before subsampling) processed so far, all epochs.
    pub words_processed: u64,
    /// `epochs x` corpus words: `words_processed / words_total` is the run's progress.
    pub words_total: u64,
    /// The learning rate the threads use now.
    pub alpha: f64,
    /// `words_processed / elapsed_seconds`.
    pub words_per_second: f64,
    /// Wall seconds since training started.
    pub elapsed_seconds: f64,
    /// The mean skip-gram negative-sampling loss per pair over a fixed sample of the corpus's
    /// pairs (see [`TrainParams::loss_sample`]), in closing reports when asked for; `None` in
    /// reports during an epoch (the threads are writing the model) and when not asked for.
    pub loss: Option<f64>,
}

/// What the progress callback wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Keep training.
    Continue,
    /// Stop soon: every thread finishes the sentence (or, for `full` and `full-register`, the
    /// block of words) it is in, and the output holds the model reached.
    Stop,
}

/// Rows of the two model matrices moved by the training loop, counted where a variant loads a
/// row from the shared model or stores an update into it (a local copy held in scratch, a
/// register block or a ring buffer is not traffic). Multiply by `4 d` for bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Rows of the input (word) matrix read.
    pub input_rows_read: u64,
    /// Rows of the input matrix updated (each a read-modify-write of the shared row).
    pub input_rows_written: u64,
    /// Rows of the output (context) matrix read.
    pub output_rows_read: u64,
    /// Rows of the output matrix updated.
    pub output_rows_written: u64,
}

impl Traffic {
    /// Bytes read from the model for vectors of dimension `dim` (f32).
    pub fn bytes_read(&self, dim: usize) -> u64 {
        (self.input_rows_read + self.output_rows_read) * 4 * dim as u64
    }
    /// Bytes written to the model.
    pub fn bytes_written(&self, dim: usize) -> u64 {
        (self.input_rows_written + self.output_rows_written) * 4 * dim as u64
    }
    pub(crate) fn add(&mut self, other: &Traffic) {
        self.input_rows_read += other.input_rows_read;
        self.input_rows_written += other.input_rows_written;
        self.output_rows_read += other.output_rows_read;
        self.output_rows_written += other.output_rows_written;
    }
}

/// What one epoch did, summed over the threads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EpochStats {
    /// Corpus words read (in the vocabulary, before subsampling).
    pub words: u64,
    /// Words that survived subsampling (the centers trained on).
    pub kept_words: u64,
    /// (context word, target) dot products: positive and negative examples.
    pub pairs: u64,
    /// (center, context) word pairings: the positive examples.
    pub context_pairs: u64,
    /// The pairings among them whose two words lie in different word2vec.c sentences (a
    /// line, cut every [`crate::corpus::MAX_SENTENCE_WORDS`] kept words). Only `full` and
    /// `full-register`, which read the corpus as one stream, form any (FULL-W2V Section 4.1).
    pub cross_sentence_pairs: u64,
    /// Model rows moved during the epoch.
    pub traffic: Traffic,
    /// Wall seconds of the epoch.
    pub seconds: f64,
}

impl EpochStats {
    /// Adds another thread's counts (the seconds are the epoch's, not summed).
    pub(crate) fn add_counts(&mut self, other: &EpochStats) {
        self.words += other.words;
        self.kept_words += other.kept_words;
        self.pairs += other.pairs;
        self.context_pairs += other.context_pairs;
        self.cross_sentence_pairs += other.cross_sentence_pairs;
        self.traffic.add(&other.traffic);
    }
}

/// The trained model and what the harness records about the run.
#[derive(Clone, Debug)]
pub struct TrainOutput {
    /// The input (word) vectors, the embeddings word2vec.c writes, words in vocabulary order.
    pub model: Model,
    /// The output (context) vectors, row-major `V x d`, same order.
    pub output_vectors: Vec<f32>,
    /// Epochs completed (fewer than requested when the callback stopped the run).
    pub epochs_completed: usize,
    /// Corpus words processed, all epochs (what words/s counts).
    pub words_processed: u64,
    /// Wall seconds of the training loop (model initialization and tables excluded).
    pub seconds: f64,
    /// `words_processed / seconds`.
    pub words_per_second: f64,
    /// Floating-point operations of the SGNS arithmetic, `6 d` per pair (dot product, gradient
    /// of the context word, update of the target), the same count for every variant so that
    /// GFLOP/s compares like with like.
    pub flops: f64,
    /// One entry per completed epoch.
    pub epochs: Vec<EpochStats>,
}

impl TrainOutput {
    /// Model traffic summed over the completed epochs.
    pub fn total_traffic(&self) -> Traffic {
        let mut t = Traffic::default();
        for e in &self.epochs {
            t.add(&e.traffic);
        }
        t
    }

    /// The work of the run for its time bound (see [`parbench_common::work`]): the SGNS flops
    /// in f32; the corpus's word ids streamed once per epoch; the model rows it moved (its own
    /// traffic counters, reads and writes) reused from a working set of both matrices.
    pub fn work(&self, dim: usize, threads: usize) -> Work {
        let traffic = self.total_traffic();
        Work {
            flops: self.flops,
            precision: Precision::F32,
            stream_bytes: 4.0 * self.words_processed as f64,
            reuse_bytes: (traffic.bytes_read(dim) + traffic.bytes_written(dim)) as f64,
            reuse_footprint_bytes: 4.0 * 2.0 * self.output_vectors.len() as f64,
            threads,
        }
    }
}
