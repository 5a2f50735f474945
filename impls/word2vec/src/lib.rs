//! word2vec skip-gram with negative sampling (SGNS): the original Hogwild algorithm, pWord2Vec's
//! minibatched GEMM with shared negatives, and FULL-W2V's reuse scheme on the CPU, with the
//! corpus pipeline, the word2vec file formats and the standard quality evaluations.
//!
//! Follows Ji et al., "Parallelizing Word2Vec in Shared and Distributed Memory"
//! (`../shared/papers/002_*.txt`) and Randall et al., "FULL-W2V"
//! (`../shared/papers/004_*.txt`), both built on Mikolov et al.'s word2vec.c.
//!
//! Pipeline: [`Corpus::read`] streams a plain or gzip text once into a frequency-sorted
//! vocabulary (`min_count`) and a `u32` id per token; a [`Trainer`] trains on it with
//! word2vec.c's subsampling (`sample`), unigram^0.75 negatives, linearly decaying learning rate
//! and seeded per-thread streams ([`sampling`], [`driver`](crate) docs); the [`Model`] it returns
//! is written and read in word2vec text or binary format ([`io`]) and evaluated by
//! [`eval`] (WordSim-353 / SimLex-999 Spearman, Google analogies by 3CosAdd and 3CosMul,
//! nearest neighbours).
//!
//! Every variant implements [`Trainer`]; all share the model between threads Hogwild-style:
//! - [`Hogwild`] (`hogwild`): word2vec.c pair by pair (level-1 BLAS).
//! - [`Gemm`] (`gemm`): per center word, its context words against the center and K shared
//!   negatives as three small matrix products, written back once per batch.
//! - [`Full`] (`full`): fixed window `ceil(W/2)`, targets one at a time held locally, context
//!   vectors held in a ring buffer for their lifetime in the window.
//! - [`FullRegister`] (`full-register`): FULL-W2V's ablation FULL-Register, `full` without the
//!   ring buffer: every window reads its context rows from the model and writes them back.
//! - [`Bidmach`] (`bidmach`): BIDMach's CPU scheme, `gemm`'s batches as matrix-vector products
//!   one output row at a time, positives then negatives, with no blocking (pWord2Vec III-D).
//!
//! [`Distributed`] (`distributed`, pWord2Vec's data parallelism) also implements [`Trainer`]:
//! every rank (in-process, or an MPI process through [`distributed::train_rank`]) runs one of
//! the above on its share of the corpus, and the ranks average the model rows they changed
//! every `sync_words` words. It is built from its options ([`SyncOptions`]), so [`variants`]
//! does not list it.
//!
//! [`generate`] makes a seeded synthetic corpus with planted word groups, and scores how well
//! a model recovers them ([`generate::planted_accuracy`]).
//!
//! Every run counts the model rows it moves ([`Traffic`], per epoch in [`EpochStats`]): a few
//! integer additions per window, so counting is always on rather than a mode.
//!
//! # Using it from the harness
//!
//! ```no_run
//! use word2vec::{eval, io, variant, Control, Corpus, CorpusOptions, Par, TrainParams};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let corpus = Corpus::read(
//!     "wiki17m.txt.gz".as_ref(),
//!     &CorpusOptions { min_count: 5, max_vocab: None, max_tokens: None },
//! )?;
//! let params = TrainParams { dim: 100, window: 5, negative: 5, sample: 1e-4, alpha: 0.025,
//!                            epochs: 1, seed: 1, ..TrainParams::default() };
//! let trainer = variant("gemm").expect("known variant");
//! // Par::Seq for one thread; a thread the system refuses is W2vError::Threads.
//! let out = trainer.train(&corpus, &params, Par::threads(2), &mut |r| {
//!     // r.words_processed / r.words_total, r.alpha, r.words_per_second, r.epoch_finished
//!     Control::Continue
//! })?;
//! println!("{:.0} words/s, {:.2} GFLOP/s", out.words_per_second, out.flops / out.seconds / 1e9);
//! for (e, stats) in out.epochs.iter().enumerate() {
//!     // model bytes per epoch (FULL-W2V Table 4)
//!     println!("epoch {e}: {} B read, {} B written", stats.traffic.bytes_read(params.dim),
//!              stats.traffic.bytes_written(params.dim));
//! }
//! io::write_binary(&out.model, "vectors.bin".as_ref())?;          // or io::write_text
//! let model = io::read_model("vectors.bin".as_ref())?;             // either format
//! let suite = eval::EvalSuite::load("/work/shared/data".as_ref())?;
//! let report = suite.evaluate(&model);                              // every metric
//! println!("WS-353 {:.3}, 3CosAdd {:.1}%", report.wordsim353.spearman,
//!          100.0 * report.analogy.add.overall);
//! let neighbours = eval::Evaluator::new(&model).neighbors("king", 10); // [(word, cosine)]
//! # let _ = neighbours; Ok(()) }
//! ```
//!
//! Variant names for command lines and experiment files: [`variant_names`].

#![warn(missing_docs)]

mod batch;
pub mod bidmach;
pub mod corpus;
pub mod distributed;
mod driver;
pub mod eval;
pub mod full;
pub mod full_register;
pub mod gemm;
pub mod generate;
pub mod hogwild;
pub mod io;
mod loss;
pub mod model;
pub mod problem;
pub mod reference;
pub mod sampling;
mod vecops;

pub use bidmach::Bidmach;
pub use corpus::{Corpus, CorpusError, CorpusOptions, MAX_SENTENCE_WORDS};
pub use distributed::{Distributed, SyncOptions};
pub use full::Full;
pub use full_register::FullRegister;
pub use gemm::Gemm;
pub use hogwild::Hogwild;
pub use model::Model;
pub use problem::{Control, EpochReport, EpochStats, Traffic, TrainOutput, TrainParams, W2vError};

pub use parbench_common::Par;

/// The vector instructions the training kernels run with on this CPU, as their run-time
/// dispatch chose them: "avx512f" (the batched products of `gemm`, `full` and `full-register`
/// in 512-bit vectors, the rest with AVX2 + FMA), "avx2+fma" or "portable". Reported with
/// instruction counts, which depend on the path.
pub fn simd_path() -> &'static str {
    if driver::cpu_has_avx512() {
        "avx512f"
    } else if driver::cpu_has_fma() {
        "avx2+fma"
    } else {
        "portable"
    }
}

/// One way of training skip-gram with negative sampling.
pub trait Trainer: Send + Sync {
    /// The variant's name as used in experiment files and on the command line (`gemm`).
    fn name(&self) -> &'static str;

    /// Trains on `corpus` with `par.degree()` threads from the initial model of `params.seed`.
    /// A thread the system refuses stops the run with [`W2vError::Threads`] (never fewer
    /// threads than asked for). `progress` is called on the calling thread every
    /// `params.report_interval_seconds` and at the end of every epoch, and may stop the run by
    /// returning [`Control::Stop`]; the output then holds the model reached. Nothing is printed.
    fn train(
        &self,
        corpus: &Corpus,
        params: &TrainParams,
        par: Par,
        progress: &mut dyn FnMut(&EpochReport) -> Control,
    ) -> Result<TrainOutput, W2vError>;
}

/// Every variant, in the order the tables list them.
pub fn variants() -> Vec<Box<dyn Trainer>> {
    vec![
        Box::new(Hogwild),
        Box::new(Gemm),
        Box::new(Full),
        Box::new(FullRegister),
        Box::new(Bidmach),
    ]
}

/// The variant called `name`, if there is one.
pub fn variant(name: &str) -> Option<Box<dyn Trainer>> {
    variants().into_iter().find(|v| v.name() == name)
}

/// Names of every variant.
pub fn variant_names() -> Vec<&'static str> {
    variants().iter().map(|v| v.name()).collect()
}
