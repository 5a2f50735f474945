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
//! - [`local`]: the serial kernels on the whole problem, the `local` and `local-unfused`
//!   variants (the equivalence reference of the distributed ones).
//! - [`generate`]: seeded Erdős-Rényi (fixed nonzeros per row), R-MAT and circulant matrices,
//!   random permutations. [`mtx`]: MatrixMarket reader and writer.
//! - [`comm`]: the [`comm::Communicator`] trait (MPI-shaped and object safe, so the algorithms
//!   run unchanged on every backend), the counting convention, [`comm::threads`], the
//!   in-process backend (one thread per rank, channels only), and with the `mpi` feature
//!   `comm::mpi`, the MPI backend (rsmpi on OpenMPI, one process per rank).
//! - here, in `lib.rs`: the [`DistAlgorithm`] trait every algorithm implements (its grid, its
//!   strategies and its cost model are methods), the registry [`algorithms`] and the named
//!   [`Variant`]s derived from it ([`variant_names`], [`variant`]).
//! - [`distributed`]: [`run_in_process`] and, with the `mpi` feature, `run_mpi` (the ranks of an
//!   MPI job), and the grid questions ([`distributed::valid_replications`],
//!   [`distributed::replication_for`]); one file per algorithm:
//!   [`one_d`] (the paper's 1D baseline),
//!   [`dense_shift`] (1.5D dense shifting, dense replicating, with the three FusedMM
//!   strategies), [`sparse_shift`] (1.5D sparse shifting, dense replicating: no elision and
//!   replication reuse), [`dense_replicate`] (2.5D dense replicating, Cannon-like layers: no
//!   elision and replication reuse) and [`sparse_replicate`] (2.5D sparse replicating: no
//!   elision).
//! - [`cost_model`]: words and messages per rank per phase, predicted (each algorithm's
//!   [`DistAlgorithm::cost`]), and the best `c`.
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
pub mod local;
pub mod mtx;
pub mod one_d;
pub mod problem;
pub mod reference;
pub mod sparse_replicate;
pub mod sparse_shift;

pub use cost_model::{Cost, Shape};
pub use dense::Dense;
pub use dense_replicate::DenseReplicate25;
pub use dense_shift::DenseShift15;
pub use distributed::run_in_process;
#[cfg(feature = "mpi")]
pub use distributed::run_mpi;
pub use kernels::{flops, Codegen, CsrRef, Kernel, Transposed};
pub use one_d::OneD;

/// The vector instructions the local kernels run with on this CPU, as their run-time dispatch
/// chose them: "avx2" or "baseline" (the target's own, SSE2 on x86-64). Reported with
/// instruction counts, which depend on the path.
pub fn simd_path() -> &'static str {
    kernels::simd_path()
}
pub use parbench_common::{Csr, Par};
pub use problem::{DistRun, FusedMmError, KernelOutput, Problem, RankOutput, RankPiece, Strategy};
pub use sparse_replicate::SparseReplicate25;
pub use sparse_shift::SparseShift15;

use comm::Communicator;
use std::sync::OnceLock;

/// One distributed algorithm for all five kernels, with one input and output distribution.
///
/// Required: the name, the grid it runs on and the run itself; everything else has a
/// documented default. Adding an algorithm is its file and one line in [`algorithms`]: the
/// variant names, `parbench list`, the `--algorithm` choices and the cost-model columns all
/// derive from the registry.
pub trait DistAlgorithm: Sync {
    /// The name used on the command line (`1.5d-dense-shift`).
    fn name(&self) -> &'static str;

    /// Whether `p` ranks with replication factor `c` form a valid grid; the error lists the
    /// values of `c` that would work.
    fn check_grid(&self, p: usize, c: usize) -> Result<(), FusedMmError>;

    /// The strategies this algorithm offers for a fused kernel (non-fused kernels ignore the
    /// strategy). Default: only [`Strategy::NoElision`].
    fn strategies(&self) -> &'static [Strategy] {
        &[Strategy::NoElision]
    }

    /// Whether the algorithm takes a replication factor. An algorithm that does not always
    /// runs at `c = 1` ([`distributed::replication_for`]), so an experiment sweeping `c` runs
    /// it beside the others at every `c`. Default: `true`.
    fn replicates(&self) -> bool {
        true
    }

    /// The words and messages every rank sends, per phase, when `kernel` runs with `strategy`
    /// on `shape` (paper Section V; see [`cost_model`]). Called through
    /// [`cost_model::predict`], which checks the grid and the strategy first. Default: `None`,
    /// no model (the harness then reports the measured counts alone).
    fn cost(&self, kernel: Kernel, strategy: Strategy, shape: Shape) -> Option<Cost> {
        let _ = (kernel, strategy, shape);
        None
    }

    /// Runs `kernel` on this rank of a `comm.size()`-rank grid with replication factor `c`.
    /// Every rank calls it with the same arguments.
    fn run_rank(
        &self,
        comm: &dyn Communicator,
        problem: &Problem,
        kernel: Kernel,
        strategy: Strategy,
        c: usize,
        par: Par,
    ) -> Result<RankOutput, FusedMmError>;
}

/// Every distributed algorithm, in the order the tables list them: the registry, the one list
/// a new algorithm is added to.
pub fn algorithms() -> &'static [&'static dyn DistAlgorithm] {
    &[
        &OneD,
        &DenseShift15,
        &SparseShift15,
        &DenseReplicate25,
        &SparseReplicate25,
    ]
}

/// The algorithm called `name`, if there is one.
pub fn algorithm(name: &str) -> Option<&'static dyn DistAlgorithm> {
    algorithms().iter().copied().find(|a| a.name() == name)
}

/// Names of every algorithm.
pub fn algorithm_names() -> Vec<&'static str> {
    algorithms().iter().map(|a| a.name()).collect()
}

/// One way of running a kernel that experiments name: the serial kernels on the whole problem,
/// or a distributed algorithm (whose strategy is a setting of the run, not part of the name:
/// [`DistAlgorithm::strategies`] lists those it offers).
#[derive(Clone, Copy)]
pub enum Variant {
    /// The serial kernels on the whole problem ([`local`]): `local` with the fused FusedMMA/B
    /// kernels (`fused`), `local-unfused` with FusedMMA/B as SDDMM then SpMM, `local-autovec`
    /// fused with the kernels compiled as [`Codegen::Autovec`].
    Local {
        /// Whether FusedMMA/B run as one fused kernel.
        fused: bool,
        /// How the gathering kernels are compiled.
        codegen: Codegen,
    },
    /// A distributed algorithm.
    Distributed {
        /// The algorithm.
        algorithm: &'static dyn DistAlgorithm,
    },
}

impl std::fmt::Debug for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Variant::Local { fused, codegen } => f
                .debug_struct("Local")
                .field("fused", fused)
                .field("codegen", codegen)
                .finish(),
            Variant::Distributed { algorithm } => f
                .debug_struct("Distributed")
                .field("algorithm", &algorithm.name())
                .finish(),
        }
    }
}

impl Variant {
    /// The algorithm of a distributed variant, `None` for a local one.
    pub fn distributed(self) -> Option<&'static dyn DistAlgorithm> {
        match self {
            Variant::Local { .. } => None,
            Variant::Distributed { algorithm } => Some(algorithm),
        }
    }
}

/// Every variant with its name, built once: the local ones, then every algorithm of
/// [`algorithms`] under its own name.
fn named_variants() -> &'static [(String, Variant)] {
    static ALL: OnceLock<Vec<(String, Variant)>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all = vec![
            (
                local::LOCAL.to_string(),
                Variant::Local {
                    fused: true,
                    codegen: Codegen::Tuned,
                },
            ),
            (
                local::LOCAL_UNFUSED.to_string(),
                Variant::Local {
                    fused: false,
                    codegen: Codegen::Tuned,
                },
            ),
            (
                local::LOCAL_AUTOVEC.to_string(),
                Variant::Local {
                    fused: true,
                    codegen: Codegen::Autovec,
                },
            ),
        ];
        for &algorithm in algorithms() {
            all.push((
                algorithm.name().to_string(),
                Variant::Distributed { algorithm },
            ));
        }
        all
    })
}

/// Names of every variant, in the order the tables list them: `local`, `local-unfused`,
/// `local-autovec`, then every algorithm (`1d`, `1.5d-dense-shift`, ...).
pub fn variant_names() -> Vec<&'static str> {
    named_variants().iter().map(|(n, _)| n.as_str()).collect()
}

/// The variant called `name`, if there is one.
pub fn variant(name: &str) -> Option<Variant> {
    named_variants()
        .iter()
        .find(|(n, _)| n == name)
        .map(|&(_, v)| v)
}

/// The algorithm of the distributed variant called `name` (`None` for a local variant or an
/// unknown name).
pub fn distributed_variant(name: &str) -> Option<&'static dyn DistAlgorithm> {
    variant(name).and_then(Variant::distributed)
}
