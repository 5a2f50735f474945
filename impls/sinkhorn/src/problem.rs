//! Inputs, parameters and outputs shared by every variant, and their validation.

use parbench_common::Csr;
use std::sync::OnceLock;
use std::time::Instant;
use thiserror::Error;

/// What can be wrong with a Sinkhorn-WMD problem or run.
#[derive(Debug, Error, PartialEq)]
pub enum WmdError {
    /// A query of a batch ([`crate::WmdSolver::solve_batch`]) is not a valid query.
    #[error("query {index} of the batch (counting from 0): {source}")]
    BatchQuery {
        /// Its position in the batch.
        index: usize,
        /// What is wrong with it.
        source: Box<WmdError>,
    },
    /// The embedding array is not `vocab x dim` long.
    #[error("embeddings have {len} values, expected vocabulary {vocab} x dimension {dim}")]
    EmbeddingShape {
        /// Length of the embedding array.
        len: usize,
        /// Vocabulary size V (rows of the document matrix).
        vocab: usize,
        /// Embedding dimension d.
        dim: usize,
    },
    /// An embedding component is NaN or infinite.
    #[error("embedding of word {word} has a non-finite value ({value}) in component {component}")]
    EmbeddingNotFinite {
        /// The word (row of the embeddings).
        word: usize,
        /// 0-based component within its vector.
        component: usize,
        /// The offending value.
        value: f64,
    },
    /// The query histogram has no words.
    #[error("the query histogram is empty or sums to zero")]
    EmptyQuery,
    /// The solve's threads could not be started.
    #[error(transparent)]
    Pool(#[from] parbench_common::par::PoolError),
    /// A query word id is not below the vocabulary size.
    #[error("query word {word} is out of the vocabulary (size {vocab})")]
    QueryWordOutOfRange {
        /// The word id.
        word: usize,
        /// Vocabulary size V.
        vocab: usize,
    },
    /// A query weight is zero, negative, NaN or infinite.
    #[error("query weight of word {word} is {weight}; weights must be finite and positive")]
    BadQueryWeight {
        /// The word carrying it.
        word: usize,
        /// The weight.
        weight: f64,
    },
    /// The query lists a word twice.
    #[error("query word {word} appears twice")]
    DuplicateQueryWord {
        /// The repeated word id.
        word: usize,
    },
    /// The query weights do not sum to 1 (within 1e-9).
    #[error("query weights sum to {sum}, expected 1 (normalize the histogram)")]
    QueryNotNormalized {
        /// Their sum.
        sum: f64,
    },
    /// The document matrix `c` does not have one row per vocabulary word.
    #[error("the document matrix has {rows} rows, expected one per vocabulary word ({vocab})")]
    DocsShape {
        /// Rows of `c`.
        rows: usize,
        /// Vocabulary size V.
        vocab: usize,
    },
    /// A target document's column of `c` sums to 0, or not to 1 (within 1e-9): histograms must be
    /// normalized.
    #[error("target document {doc} is empty (its column sums to {sum})")]
    EmptyDocument {
        /// The document (column of `c`).
        doc: usize,
        /// Its column sum.
        sum: f64,
    },
    /// A document weight is negative.
    #[error("target document {doc} has a negative weight {weight} for word {word}")]
    NegativeDocWeight {
        /// The document (column of `c`).
        doc: usize,
        /// The word (row of `c`).
        word: usize,
        /// The weight.
        weight: f64,
    },
    /// The document matrix has no columns.
    #[error("there are no target documents")]
    NoDocuments,
    /// `lambda` is zero, negative or not finite (the value is carried).
    #[error("lambda must be finite and positive, got {0}")]
    BadLambda(f64),
    /// The tolerance is negative or not finite (the value is carried).
    #[error("tolerance must be finite and non-negative, got {0}")]
    BadTolerance(f64),
    /// An iterate or a distance became zero or non-finite: `exp(-lambda M)` underflowed.
    #[error("the iteration produced a non-finite value (lambda {lambda} is probably too large for these distances: exp(-lambda * M) underflows to 0)")]
    Underflow {
        /// The `lambda` of the run (lower it, or scale the distances down).
        lambda: f64,
    },
}

/// A query histogram against a collection of target documents, with the word embeddings.
///
/// The documents are held in both orientations: `docs_by_word` is the paper's `c` (a V x N CSR,
/// rows are words, columns documents) and `docs_by_doc` its transpose (N x V). Both are built once
/// when the collection is loaded, since a collection serves many queries.
#[derive(Clone, Debug)]
pub struct WmdProblem {
    vecs: Vec<f64>,
    /// The embeddings rounded to f32, made on first use ([`WmdProblem::vecs_f32`]).
    vecs_f32: OnceLock<Vec<f32>>,
    dim: usize,
    query: Vec<(u32, f64)>,
    docs_by_word: Csr,
    docs_by_doc: Csr,
}

/// Relative slack allowed on "sums to 1" for histograms built from counts in floating point.
const NORMALIZATION_SLACK: f64 = 1e-9;

impl WmdProblem {
    /// Checks and assembles a problem.
    /// - `vecs`: row-major `V x dim` embeddings, all finite.
    /// - `query`: (word, weight) pairs, words distinct and `< V`, weights positive, summing to 1.
    /// - `docs_by_word`: `V x N` CSR, every column a normalized histogram (non-negative, sums to 1).
    pub fn new(
        vecs: Vec<f64>,
        dim: usize,
        query: Vec<(u32, f64)>,
        docs_by_word: Csr,
    ) -> Result<WmdProblem, WmdError> {
        let vocab = docs_by_word.nrows();
        if dim == 0 || vecs.len() != vocab * dim {
            return Err(WmdError::EmbeddingShape {
                len: vecs.len(),
                vocab,
                dim,
            });
        }
        if let Some(i) = vecs.iter().position(|v| !v.is_finite()) {
            return Err(WmdError::EmbeddingNotFinite {
                word: i / dim,
                component: i % dim,
                value: vecs[i],
            });
        }
        let query = checked_query(query, vocab)?;
        if docs_by_word.ncols() == 0 {
            return Err(WmdError::NoDocuments);
        }
        for word in 0..vocab {
            let (docs, weights) = docs_by_word.row(word);
            if let Some(k) = weights.iter().position(|&x| x < 0.0) {
                return Err(WmdError::NegativeDocWeight {
                    doc: docs[k] as usize,
                    word,
                    weight: weights[k],
                });
            }
        }
        for (doc, &s) in docs_by_word.column_sums().iter().enumerate() {
            if s <= 0.0 || (s - 1.0).abs() > NORMALIZATION_SLACK {
                return Err(WmdError::EmptyDocument { doc, sum: s });
            }
        }
        let docs_by_doc = docs_by_word.transpose();
        Ok(WmdProblem {
            vecs,
            vecs_f32: OnceLock::new(),
            dim,
            query,
            docs_by_word,
            docs_by_doc,
        })
    }

    /// Vocabulary size V.
    pub fn vocab(&self) -> usize {
        self.docs_by_word.nrows()
    }
    /// Embedding dimension d.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Number of target documents N.
    pub fn num_docs(&self) -> usize {
        self.docs_by_word.ncols()
    }
    /// Row-major `V x d` embeddings.
    pub fn vecs(&self) -> &[f64] {
        &self.vecs
    }
    /// The embeddings rounded to f32, what `doc-major-f32` reads (half the bytes). Made on the
    /// first call and kept, like `docs_by_doc`, for every later query against the collection
    /// ([`crate::WmdSolver::prepare`] makes it before a timed solve).
    pub fn vecs_f32(&self) -> &[f32] {
        self.vecs_f32
            .get_or_init(|| self.vecs.iter().map(|&x| x as f32).collect())
    }
    /// Embedding of one word.
    pub fn vec(&self, word: usize) -> &[f64] {
        &self.vecs[word * self.dim..(word + 1) * self.dim]
    }
    /// Query (word, weight) pairs sorted by word; `v_s = query().len()`.
    pub fn query(&self) -> &[(u32, f64)] {
        &self.query
    }
    /// The paper's `c`: `V x N`, rows are words.
    pub fn docs_by_word(&self) -> &Csr {
        &self.docs_by_word
    }
    /// `c` transposed: `N x V`, rows are documents.
    pub fn docs_by_doc(&self) -> &Csr {
        &self.docs_by_doc
    }
    /// Nonzeros of `c`.
    pub fn nnz(&self) -> usize {
        self.docs_by_word.nnz()
    }

    /// Puts `query` in place of the problem's query, checked as [`WmdProblem::new`] checks one:
    /// a batch of queries against one collection shares its embeddings and both orientations
    /// of `c` (built and checked once) instead of building a problem per query. On an error the
    /// problem keeps its query.
    pub fn set_query(&mut self, query: Vec<(u32, f64)>) -> Result<(), WmdError> {
        self.query = checked_query(query, self.vocab())?;
        Ok(())
    }
}

/// `query` sorted by word, or what is wrong with it: a word out of the vocabulary or repeated,
/// a weight that is not finite and positive, weights that do not sum to 1.
pub(crate) fn checked_query(
    mut query: Vec<(u32, f64)>,
    vocab: usize,
) -> Result<Vec<(u32, f64)>, WmdError> {
    if query.is_empty() {
        return Err(WmdError::EmptyQuery);
    }
    query.sort_by_key(|&(w, _)| w);
    for (i, &(w, weight)) in query.iter().enumerate() {
        if w as usize >= vocab {
            return Err(WmdError::QueryWordOutOfRange {
                word: w as usize,
                vocab,
            });
        }
        if !(weight.is_finite() && weight > 0.0) {
            return Err(WmdError::BadQueryWeight {
                word: w as usize,
                weight,
            });
        }
        if i > 0 && query[i - 1].0 == w {
            return Err(WmdError::DuplicateQueryWord { word: w as usize });
        }
    }
    let sum: f64 = query.iter().map(|&(_, x)| x).sum();
    if (sum - 1.0).abs() > NORMALIZATION_SLACK {
        return Err(WmdError::QueryNotNormalized { sum });
    }
    Ok(query)
}

/// Solver settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SinkhornParams {
    /// Entropic regularization: `K = exp(-lambda * M)`. Larger is closer to the exact WMD.
    pub lambda: f64,
    /// Iterations of the loop (each document's cap when a tolerance is set).
    pub max_iter: usize,
    /// Optional per-document stopping rule on the largest relative change of its column of `x`.
    pub tol: Option<f64>,
}

/// The settings parbench's experiments and `parbench wmd` use unless told otherwise (the one
/// place these defaults are written): lambda 10, 15 iterations, no tolerance.
impl Default for SinkhornParams {
    fn default() -> Self {
        SinkhornParams {
            lambda: 10.0,
            max_iter: 15,
            tol: None,
        }
    }
}

impl SinkhornParams {
    /// Rejects a non-positive lambda or a negative tolerance.
    pub fn validate(&self) -> Result<(), WmdError> {
        if !(self.lambda.is_finite() && self.lambda > 0.0) {
            return Err(WmdError::BadLambda(self.lambda));
        }
        if let Some(t) = self.tol {
            if !(t.is_finite() && t >= 0.0) {
                return Err(WmdError::BadTolerance(t));
            }
        }
        Ok(())
    }
}

/// Wall time of each phase, in the order the phases first ran.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhaseTimes(pub Vec<(&'static str, f64)>);

impl PhaseTimes {
    /// Adds `seconds` to phase `name` (creating it at the end if new).
    pub fn add(&mut self, name: &'static str, seconds: f64) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some((_, s)) => *s += seconds,
            None => self.0.push((name, seconds)),
        }
    }
    /// Runs `f`, adding its wall time to phase `name`.
    pub fn time<R>(&mut self, name: &'static str, f: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = f();
        self.add(name, t.elapsed().as_secs_f64());
        r
    }
    /// Seconds spent in phase `name` (0 if it never ran).
    pub fn get(&self, name: &str) -> f64 {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0.0, |&(_, s)| s)
    }
    /// Sum over phases.
    pub fn total(&self) -> f64 {
        self.0.iter().map(|&(_, s)| s).sum()
    }
}

/// Sent to the progress callback after every iteration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IterationReport {
    /// Iterations completed so far (1-based).
    pub iteration: usize,
    /// The iteration limit the run was given ([`SinkhornParams::max_iter`]).
    pub max_iter: usize,
    /// Documents still iterating (all of them without a tolerance).
    pub active_docs: usize,
    /// Largest relative change of `x` in this iteration over active documents.
    pub max_change: f64,
}

/// What the progress callback wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Go on with the next iteration.
    Continue,
    /// Stop after this iteration; the solver returns the distances of the state reached.
    Stop,
}

/// The distances and what the harness records about the run.
#[derive(Clone, Debug, PartialEq)]
pub struct WmdOutput {
    /// One Sinkhorn distance per target document.
    pub distances: Vec<f64>,
    /// Loop iterations run (the largest over documents).
    pub iterations: usize,
    /// Wall time per phase: `distance` (M), `precompute` (K, K/r, K.*M), `loop`, `final`, plus
    /// finer phases a variant chooses to report.
    pub phases: PhaseTimes,
    /// Floating-point operations of the work this variant actually did (dense work counted in
    /// full for `dense`), for effective GFLOP/s.
    pub flops: f64,
    /// Seconds each thread spent in the loop's kernel, summed over the iterations, from the
    /// variants that split that kernel among threads (empty from the others): how evenly the
    /// split shares the work, read within one run, whatever else the host runs meanwhile.
    pub thread_kernel_s: Vec<f64>,
}

impl WmdOutput {
    /// The busiest thread's kernel time over the mean of all threads' (1 for a perfect split;
    /// `None` without per-thread times).
    pub fn kernel_imbalance(&self) -> Option<f64> {
        let t = &self.thread_kernel_s;
        let mean = t.iter().sum::<f64>() / t.len() as f64;
        let busiest = t.iter().copied().fold(0.0, f64::max);
        (mean > 0.0).then(|| busiest / mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_kernel_times(thread_kernel_s: Vec<f64>) -> WmdOutput {
        WmdOutput {
            distances: Vec::new(),
            iterations: 1,
            phases: PhaseTimes::default(),
            flops: 0.0,
            thread_kernel_s,
        }
    }

    /// The busiest thread over the mean, by hand; nothing to say without times.
    #[test]
    fn kernel_imbalance_is_the_busiest_over_the_mean() {
        let of = |t: &[f64]| with_kernel_times(t.to_vec()).kernel_imbalance();
        assert_eq!(of(&[2.0, 2.0]), Some(1.0));
        assert_eq!(of(&[1.0, 3.0]), Some(1.5));
        assert_eq!(of(&[4.0, 0.0, 0.0, 0.0]), Some(4.0));
        assert_eq!(of(&[5.0]), Some(1.0));
        assert_eq!(of(&[]), None);
        assert_eq!(of(&[0.0, 0.0]), None);
    }
}
