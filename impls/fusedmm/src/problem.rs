//! Inputs, options, outputs and errors shared by every algorithm.

use crate::comm::{CommError, CommStats};
use crate::dense::Dense;
use parbench_common::{Csr, CsrError};
use thiserror::Error;

/// What can go wrong in a FusedMM run.
#[derive(Debug, Error, PartialEq)]
pub enum FusedMmError {
    /// `A` or `B` does not match `S`, or `r` is 0.
    #[error("A is {a_rows} x {a_cols} and B is {b_rows} x {b_cols}, but S is {m} x {n}: A must be {m} x r and B {n} x r with the same r >= 1")]
    Shape {
        /// Rows of `S`.
        m: usize,
        /// Columns of `S`.
        n: usize,
        /// Rows of `A`.
        a_rows: usize,
        /// Columns of `A`.
        a_cols: usize,
        /// Rows of `B`.
        b_rows: usize,
        /// Columns of `B`.
        b_cols: usize,
    },
    /// The algorithm cannot run on this `(p, c)` grid.
    #[error("{algorithm} cannot run on p = {p} ranks with replication factor c = {c}: {reason}; c values that work for p = {p}: {valid:?}")]
    Grid {
        /// The algorithm's name.
        algorithm: &'static str,
        /// Ranks.
        p: usize,
        /// Replication factor.
        c: usize,
        /// Why the grid does not work.
        reason: &'static str,
        /// The values of `c` that work for this `p`.
        valid: Vec<usize>,
    },
    /// The algorithm has no such strategy for the kernel.
    #[error("{algorithm} has no {strategy} strategy for {kernel} (it supports {supported:?})")]
    Unsupported {
        /// The algorithm's name.
        algorithm: &'static str,
        /// The kernel's name.
        kernel: &'static str,
        /// The strategy asked for.
        strategy: &'static str,
        /// The strategies it supports for this kernel.
        supported: Vec<&'static str>,
    },
    /// A communicator call failed.
    #[error("communication failed: {0}")]
    Comm(#[from] CommError),
    /// The system refused a thread (an in-process rank's, or a kernel's pool).
    #[error(transparent)]
    Threads(#[from] parbench_common::par::PoolError),
    /// A rank failed; the others were stopped.
    #[error("rank {rank} failed: {message}")]
    Rank {
        /// The rank that failed first.
        rank: usize,
        /// Its error, as text.
        message: String,
    },
    /// A sparse matrix of the run is not a valid CSR.
    #[error(transparent)]
    Csr(#[from] CsrError),
}

/// The inputs of every kernel: `S` (`m x n`), `A` (`m x r`), `B` (`n x r`). For SpMMA and SpMMB
/// the sparse matrix is taken as `R` itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    s: Csr,
    a: Dense,
    b: Dense,
}

impl Problem {
    /// Checks that the shapes agree.
    pub fn new(s: Csr, a: Dense, b: Dense) -> Result<Problem, FusedMmError> {
        if a.rows() != s.nrows() || b.rows() != s.ncols() || a.cols() != b.cols() || a.cols() == 0 {
            return Err(FusedMmError::Shape {
                m: s.nrows(),
                n: s.ncols(),
                a_rows: a.rows(),
                a_cols: a.cols(),
                b_rows: b.rows(),
                b_cols: b.cols(),
            });
        }
        Ok(Problem { s, a, b })
    }
    /// The sparse matrix `S` (`m x n`).
    pub fn s(&self) -> &Csr {
        &self.s
    }
    /// The dense `A` (`m x r`).
    pub fn a(&self) -> &Dense {
        &self.a
    }
    /// The dense `B` (`n x r`).
    pub fn b(&self) -> &Dense {
        &self.b
    }
    /// Rows of `S` and `A`.
    pub fn m(&self) -> usize {
        self.s.nrows()
    }
    /// Columns of `S`, rows of `B`.
    pub fn n(&self) -> usize {
        self.s.ncols()
    }
    /// Columns of `A` and `B` (at least 1).
    pub fn r(&self) -> usize {
        self.a.cols()
    }
    /// Nonzeros of `S`.
    pub fn nnz(&self) -> usize {
        self.s.nnz()
    }
}

/// How a distributed FusedMM combines its SDDMM and SpMM (paper Section IV-B). Kernels that are
/// not fused ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Two independent distributed calls, SDDMM then SpMM.
    NoElision,
    /// Replicate the dense input once and use it for both calls.
    ReplicationReuse,
    /// One propagation round running the local fused kernel at every step.
    LocalKernelFusion,
}

impl Strategy {
    /// Every strategy, in the order the tables list them.
    pub const ALL: [Strategy; 3] = [
        Strategy::NoElision,
        Strategy::ReplicationReuse,
        Strategy::LocalKernelFusion,
    ];
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::NoElision => "none",
            Strategy::ReplicationReuse => "reuse",
            Strategy::LocalKernelFusion => "fusion",
        }
    }
    /// The strategy called `name` on the command line ([`Strategy::name`]), if any.
    pub fn from_name(name: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// A kernel's result: sparse (the pattern of `S`) for SDDMM, dense for the others.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelOutput {
    /// SDDMM's output: the pattern of `S` with the sampled products.
    Sparse(Csr),
    /// The dense output of the SpMM and FusedMM kernels.
    Dense(Dense),
}

impl KernelOutput {
    /// The output as one vector, to compare variants entry by entry: the values of a sparse
    /// output in CSR order (the pattern of `S`), a dense output row by row.
    pub fn flatten(&self) -> Vec<f64> {
        match self {
            KernelOutput::Sparse(s) => s.values().to_vec(),
            KernelOutput::Dense(d) => d.data().to_vec(),
        }
    }
}

/// One rank's piece of a kernel's result, in global coordinates.
#[derive(Clone, Debug, PartialEq)]
pub enum RankPiece {
    /// Nonzeros `(row, col, value)` of an SDDMM output.
    Sparse(Vec<(usize, usize, f64)>),
    /// Rows `first_row ..` of a dense output.
    DenseRows {
        /// Global index of the block's first row.
        first_row: usize,
        /// The rows, every column of the output.
        block: Dense,
    },
    /// Rows `first_row ..` and columns `first_col ..` of a dense output (the algorithms that
    /// split dense matrices by columns).
    DenseBlock {
        /// Global index of the block's first row.
        first_row: usize,
        /// Global index of the block's first column.
        first_col: usize,
        /// The block.
        block: Dense,
    },
}

/// What one rank returns: its piece and the time it spent in local kernels.
#[derive(Clone, Debug, PartialEq)]
pub struct RankOutput {
    /// The rank's part of the result.
    pub piece: RankPiece,
    /// Seconds the rank spent in local kernels.
    pub compute_seconds: f64,
}

/// The assembled result of a distributed run and what every rank communicated.
#[derive(Clone, Debug, PartialEq)]
pub struct DistRun {
    /// The whole result, as one process would compute it.
    pub output: KernelOutput,
    /// Per rank, words and messages by phase.
    pub stats: Vec<CommStats>,
    /// Per rank, seconds in local kernels.
    pub compute_seconds: Vec<f64>,
    /// Wall time of the whole run (threads started to joined).
    pub wall_seconds: f64,
}

impl DistRun {
    /// Largest count over ranks of `f(stats)`: the paper's cost is the busiest rank's.
    pub fn max_over_ranks(&self, f: impl Fn(&CommStats) -> u64) -> u64 {
        self.stats.iter().map(f).max().unwrap_or(0)
    }
}
