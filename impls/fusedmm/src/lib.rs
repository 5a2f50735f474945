//! SDDMM, SpMM and FusedMM: shared-memory kernels and distributed-memory algorithms with exact
//! communication accounting.
//!
//! Follows Bharadwaj, Buluç and Demmel, "Distributed-Memory Sparse Kernels for Machine Learning"
//! (`../shared/papers/001_*.txt`). With `S` an `m x n` sparse matrix, `A` `m x r`, `B` `n x r`:
//! - `SDDMM(A, B, S) = S .* (A B^T)`, sparse with the pattern of `S`;
//! - `SpMMA(R, B) = R B` (`m x r`), `SpMMB(R, A) = R^T A` (`n x r`);
//! - `FusedMMA = SpMMA(SDDMM(A, B, S), B)`, `FusedMMB = SpMMB(SDDMM(A, B, S), A)`.
//!
//! Layout of the crate:
//! - [`dense`]: the row-major [`Dense`] matrix; sparse matrices are [`parbench_common::Csr`].
//! - [`kernels`]: the local kernels (rayon, nnz-balanced), the fused ones never storing `R`, and
//!   [`flops`] for GFLOP/s.
//! - [`reference`](mod@reference): dense, obviously right versions for the tests.
//! - [`generate`]: seeded Erdős-Rényi (fixed nonzeros per row) and R-MAT matrices, random
//!   permutations. [`mtx`]: MatrixMarket reader and writer.
//! - [`comm`]: the [`comm::Communicator`] trait (MPI-shaped and object safe, so the algorithms
//!   run unchanged on every backend), the counting convention, [`comm::threads`], the
//!   in-process backend (one thread per rank, channels only), and with the `mpi` feature
//!   `comm::mpi`, the MPI backend (rsmpi on OpenMPI, one process per rank).
//! - [`distributed`]: the [`DistAlgorithm`] trait every algorithm implements, [`run_in_process`]
//!   and, with the `mpi` feature, `run_mpi` (the ranks of an MPI job); one file per algorithm:
//!   [`one_d`] (the paper's 1D baseline),
//!   [`dense_shift`] (1.5D dense shifting, dense replicating, with the three FusedMM
//!   strategies), [`sparse_shift`] (1.5D sparse shifting, dense replicating: no elision and
//!   replication reuse), [`dense_replicate`] (2.5D dense replicating, Cannon-like layers: no
//!   elision and replication reuse) and [`sparse_replicate`] (2.5D sparse replicating: no
//!   elision).
//! - [`cost_model`]: words and messages per rank per phase, predicted, and the best `c`.
//! - [`apps`]: the applications, ALS with batched CG ([`apps::als`]) and a graph attention
//!   forward pass ([`apps::gat`]), on the serial kernels or any distributed algorithm, with a
//!   time breakdown.
//!
//! Status (issue 3; the MPI backend, issue 6).
//!
//! Done and tested:
//! - local kernels (checked against [`reference`](mod@reference) to `1e-12` relative to the sum of absolute
//!   terms, on empty rows, one row or column, prime sizes, `r = 1, 3, 16, 17`; thread-count
//!   independent); `examples/local_gflops.rs` prints GFLOP/s;
//! - generators, permutations, MatrixMarket reader and writer (errors with line numbers);
//! - the communicator and its in-process backend (collective results and counts on
//!   hand-computed cases, failure propagation instead of hangs);
//! - [`OneD`], [`DenseShift15`] (three strategies), [`SparseShift15`] and [`DenseReplicate25`]
//!   (no elision, replication reuse) and [`SparseReplicate25`] (no elision) for all five
//!   kernels, one distribution per algorithm (the column-split algorithms return
//!   [`RankPiece::DenseBlock`]s), against the serial kernels for `p` up to 18, every valid `c`,
//!   2.5D layers of side 1, 2 and 3, uneven, empty and zero-width blocks, ER and permuted R-MAT
//!   matrices;
//! - the MPI backend (feature `mpi`): `run_mpi` runs every algorithm, kernel and strategy across
//!   the processes of an MPI job; `examples/mpi_conformance.rs`, run under `mpirun` in CI,
//!   checks its results and per-rank, per-phase counts against the in-process backend;
//! - [`cost_model`] for all five, equal to the measured counts on every rank and phase where
//!   blocks divide evenly (p up to 12; for the algorithms that move nonzeros, on a pattern
//!   whose nonzeros split evenly), and the paper's claims: best-`c` ordering and `1/sqrt(2)`
//!   ratio of 1.5D dense shifting, sparse shifting winning at low `phi = nnz / (n r)` and losing
//!   at high `phi` (model and measured), 2.5D reuse below 2.5D no elision (model and measured,
//!   for `m = n`).
//!
//! Known limits: the 2.5D algorithms need `p / c` to be a perfect square; the cost model's
//! sparse terms are averages (a rank's count follows the nonzeros of the blocks it sees); the
//! in-process 2.5D sparse replicating FusedMM does one reduce-scatter and one all-gather of
//! values (the paper describes an extra initial all-gather, see [`sparse_replicate`]).
//!
//! Around this crate: criterion benches in `benches/kernels.rs`; the harness's `fusedmm` and
//! `fusedmm-apps` families, the `parbench fusedmm` command (`--backend local|mpi`) and
//! `experiments/fusedmm/`. The local kernels are plain loops (no cache blocking or
//! prefetching).

#![warn(missing_docs)]

pub mod apps;
/// The communicator lives in `parbench-common` (word2vec's distributed variant uses it too).
pub use parbench_common::comm;
pub mod cost_model;
pub mod dense;
pub mod dense_replicate;
pub mod dense_shift;
pub mod distributed;
pub mod generate;
pub mod kernels;
pub mod mtx;
pub mod one_d;
pub mod problem;
pub mod reference;
pub mod sparse_replicate;
pub mod sparse_shift;

pub use dense::Dense;
pub use dense_replicate::DenseReplicate25;
pub use dense_shift::DenseShift15;
#[cfg(feature = "mpi")]
pub use distributed::run_mpi;
pub use distributed::{run_in_process, DistAlgorithm};
pub use kernels::{flops, CsrRef, Kernel, Transposed};
pub use one_d::OneD;
pub use parbench_common::{Csr, Par};
pub use problem::{DistRun, FusedMmError, KernelOutput, Problem, RankOutput, RankPiece, Strategy};
pub use sparse_replicate::SparseReplicate25;
pub use sparse_shift::SparseShift15;

/// Every distributed algorithm, in the order the tables list them.
pub fn algorithms() -> Vec<Box<dyn DistAlgorithm>> {
    vec![
        Box::new(OneD),
        Box::new(DenseShift15),
        Box::new(SparseShift15),
        Box::new(DenseReplicate25),
        Box::new(SparseReplicate25),
    ]
}

/// The algorithm called `name`, if there is one.
pub fn algorithm(name: &str) -> Option<Box<dyn DistAlgorithm>> {
    algorithms().into_iter().find(|a| a.name() == name)
}

/// Names of every algorithm.
pub fn algorithm_names() -> Vec<&'static str> {
    algorithms().iter().map(|a| a.name()).collect()
}
