//! Sinkhorn Word Mover's Distance of one query document against many target documents.
//!
//! Follows Tithi & Petrini, "An Efficient Shared-memory Parallel Sinkhorn-Knopp Algorithm to Compute
//! the Word Mover's Distance" (`../shared/papers/000_*.txt`), whose Python reference is:
//!
//! ```text
//! sel = r > 0;  r = r[sel]                      # v_s entries
//! M = cdist(vecs[sel], vecs)                    # v_s x V Euclidean distances
//! x = ones(v_s, N) / v_s
//! K = exp(-lambda * M);  K_over_r = K / r       # row s divided by r[s]
//! repeat max_iter times:
//!     u = 1 / x
//!     v = c .* (1 / (K^T @ u))                  # V x N, only where c is nonzero
//!     x = K_over_r @ v                          # v_s x N
//! u = 1 / x;  v = c .* (1 / (K^T @ u))
//! wmd = column sums of u .* ((K .* M) @ v)      # N distances
//! ```
//!
//! Every variant implements [`WmdSolver`]; they differ only in how they run the loop:
//! - [`Dense`]: the paper's baseline, the full dense `V x N` product `K^T @ u`, then masked by `c`.
//! - [`SparseSddmmSpmm`]: SDDMM at the nonzeros of `c` into a stored sparse `v`, explicit
//!   transpose, then a separate SpMM.
//! - [`SparseSddmmSpmmPar`]: the same three steps, each split across threads (nonzeros for the
//!   SDDMM, whole documents for the transpose and the SpMM): the unfused baseline of
//!   [`FusedSddmmSpmmPar`] at every thread count.
//! - [`FusedSddmmSpmm`]: the paper's fused kernels (type 1 in the loop, type 2 for the final step),
//!   word-major layouts so every access is unit stride; sequential.
//! - [`FusedSddmmSpmmPar`]: the same kernels with the nonzeros split evenly across threads,
//!   per-thread accumulators for `x` and a reduction.
//! - [`FusedSddmmSpmmParRows`]: `fused-par` with equal numbers of word rows per thread instead
//!   of equal nonzeros, to show what the balancing buys on Zipf-skewed words.
//! - [`DocMajorFused`]: parbench's own extension: the documents are independent, so each thread
//!   owns whole documents (nnz-balanced) and runs every iteration of one document while its rows
//!   of `K` sit in L1; no conflicts, no reduction, one pass over `c` in all.
//! - [`DocMajorFusedF32`]: the same in f32 (embeddings, kernels, `x`, `u`; distances returned in
//!   f64), half the bytes at an error below 1e-7 of the largest distance at the paper's shape;
//!   every other variant computes in f64.
//!
//! Convergence: with `tol = None` every variant runs exactly `max_iter` iterations. With a
//! tolerance, each document stops on its own once the largest relative change of its column of
//! `x` is at most `tol`, so a document's distance never depends on which other documents share the
//! batch, and all variants agree.

#![warn(missing_docs)]

pub mod batch;
mod buffer;
pub mod corpus;
pub mod dense;
pub mod distance;
#[cfg(target_arch = "x86_64")]
mod distance_simd;
#[cfg(target_arch = "x86_64")]
mod doc_lanes;
pub mod doc_major;
mod fast_exp;
pub mod flops;
pub mod fused;
pub mod fused_par;
pub mod generate;
pub mod iterate;
pub mod knn;
pub mod pool;
pub mod precompute;
pub mod problem;
pub mod real;
pub mod reference;
pub mod row_kernel;
#[cfg(target_arch = "x86_64")]
mod simd;
pub mod sparse;
pub mod sparse_par;

pub use buffer::ZeroedBuf;
pub use dense::Dense;
pub use doc_major::{DocMajor, DocMajorFused, DocMajorFusedF32};
pub use fused::FusedSddmmSpmm;
pub use fused_par::{FusedSddmmSpmmPar, FusedSddmmSpmmParRows};
pub use problem::{
    Control, IterationReport, PhaseTimes, SinkhornParams, WmdError, WmdOutput, WmdProblem,
};
pub use sparse::SparseSddmmSpmm;
pub use sparse_par::SparseSddmmSpmmPar;

pub use parbench_common::{Par, Precision, Work};

/// The vector instructions the kernels run with on this CPU, as the run-time dispatch chose
/// them: "avx512f" (the distance, exp and fused type-1 kernels on 8-lane vectors, the row
/// kernels with AVX2 + FMA), "avx2+fma", or "portable" (baseline x86-64 or another
/// architecture). Reported with instruction counts, which depend on the path.
pub fn simd_path() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512f";
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return "avx2+fma";
        }
    }
    "portable"
}

/// One way of computing the Sinkhorn WMD of a query against every target document.
pub trait WmdSolver: Send + Sync {
    /// The variant's name as used in experiment files and on the command line (`fused-par`).
    fn name(&self) -> &'static str;

    /// Computes the N distances. `par` bounds the threads the variant may use (sequential
    /// variants ignore it); `progress` hears about every iteration and may stop the run early by
    /// returning [`Control::Stop`]. Inputs are validated by [`WmdProblem::new`], so a solver only
    /// checks what is specific to it.
    fn solve(
        &self,
        problem: &WmdProblem,
        params: &SinkhornParams,
        par: Par,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<WmdOutput, WmdError>;

    /// Solves every query of `queries` against `problem`'s documents and embeddings, in order
    /// (the problem's own query plays no part, and the problem is left as it was). Every query
    /// is checked before any work starts ([`WmdError::BatchQuery`] names the first bad one). By default
    /// one after another, each as [`WmdSolver::solve`] on the problem with the query in place;
    /// the document-major variants share the pool, the collection's layout and, across each
    /// group of queries, the distance phase ([`batch`]). Each query's distances are its own
    /// solve's either way.
    fn solve_batch(
        &self,
        problem: &mut WmdProblem,
        queries: &[Vec<(u32, f64)>],
        params: &SinkhornParams,
        par: Par,
    ) -> Result<Vec<WmdOutput>, WmdError> {
        // Every query checked before the first solve.
        let queries = batch::checked_batch(queries, problem.vocab())?;
        let own = problem.query().to_vec();
        let outputs = queries
            .into_iter()
            .map(|query| {
                problem.set_query(query)?;
                self.solve(problem, params, par, &mut |_| Control::Continue)
            })
            .collect();
        problem.set_query(own)?;
        outputs
    }

    /// What the variant computes in: f64, or f32 for `doc-major-f32` (whose distances then
    /// agree with the f64 variants' to about 1e-5, not 1e-10).
    fn precision(&self) -> Precision {
        Precision::F64
    }

    /// The work a variant needs done once per collection of documents and embeddings, not per
    /// query (the f32 copy of the embeddings for `doc-major-f32`). A solve does it itself when it
    /// was not done; callers that time solves call this first, as loading the collection would.
    fn prepare(&self, _problem: &WmdProblem) {}

    /// Whether [`Control::Stop`] ends the solve's work at the iteration it answers (every
    /// variant that sweeps all documents once per iteration), or only the replay of the reports
    /// after it: the document-major variants run every document's iterations before they report
    /// ([`doc_major`]), so a stop cannot shorten their work.
    fn stops_early(&self) -> bool {
        true
    }

    /// Whether the variant uses more than one thread when given `Par::Rayon(n)`.
    fn is_parallel(&self) -> bool {
        false
    }

    /// The work the solve that gave `out` could not avoid (see [`flops`]), for its time bound:
    /// the word-major passes unless the variant's structure moves other bytes.
    fn work(&self, problem: &WmdProblem, out: &WmdOutput, par: Par) -> Work {
        flops::word_major_work(problem, out, self.threads(par))
    }

    /// The threads a solve given `par` runs on.
    fn threads(&self, par: Par) -> usize {
        if self.is_parallel() {
            par.degree()
        } else {
            1
        }
    }
}

/// Every variant, in the order the tables list them.
pub fn variants() -> Vec<Box<dyn WmdSolver>> {
    vec![
        Box::new(Dense),
        Box::new(SparseSddmmSpmm),
        Box::new(SparseSddmmSpmmPar),
        Box::new(FusedSddmmSpmm),
        Box::new(FusedSddmmSpmmPar),
        Box::new(FusedSddmmSpmmParRows),
        Box::new(DocMajorFused::default()),
        Box::new(DocMajorFusedF32::default()),
    ]
}

/// The variant called `name`, if there is one.
pub fn variant(name: &str) -> Option<Box<dyn WmdSolver>> {
    variants().into_iter().find(|v| v.name() == name)
}

/// Names of every variant.
pub fn variant_names() -> Vec<&'static str> {
    variants().iter().map(|v| v.name()).collect()
}
