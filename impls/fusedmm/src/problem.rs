//! Inputs, options, outputs and errors shared by every algorithm.

use crate::comm::{CommError, CommStats};
use crate::dense::Dense;
use parbench_common::{Csr, CsrError};
use thiserror::Error;

/// What can go wrong in a FusedMM run.
#[derive(Debug, Error, PartialEq)]
pub enum FusedMmError {
    #[error("A is {a_rows} x {a_cols} and B is {b_rows} x {b_cols}, but S is {m} x {n}: A must be {m} x r and B {n} x r with the same r >= 1")]
    Shape {
        m: usize,
        n: usize,
        a_rows: usize,
        a_cols: usize,
        b_rows: usize,
        b_cols: usize,
    },
    #[error("{algorithm} cannot run on p = {p} ranks with replication factor c = {c}: {reason}; c values that work for p = {p}: {valid:?}")]
    Grid {
        algorithm: &'static str,
        p: usize,
        c: usize,
        reason: &'static str,
        valid: Vec<usize>,
    },
    #[error("{algorithm} has no {strategy} strategy for {kernel} (it supports {supported:?})")]
    Unsupported {
        algorithm: &'static str,
        kernel: &'static str,
        strategy: &'static str,
        supported: Vec<&'static str>,
    },
    #[error("communication failed: {0}")]
    Comm(#[from] CommError),
    #[error("rank {rank} failed: {message}")]
    Rank { rank: usize, message: String },
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
    pub fn s(&self) -> &Csr {
        &self.s
    }
    pub fn a(&self) -> &Dense {
        &self.a
    }
    pub fn b(&self) -> &Dense {
        &self.b
    }
    pub fn m(&self) -> usize {
        self.s.nrows()
    }
    pub fn n(&self) -> usize {
        self.s.ncols()
    }
    pub fn r(&self) -> usize {
        self.a.cols()
    }
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
    pub fn from_name(name: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// A kernel's result: sparse (the pattern of `S`) for SDDMM, dense for the others.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelOutput {
    Sparse(Csr),
    Dense(Dense),
}

/// One rank's piece of a kernel's result, in global coordinates.
#[derive(Clone, Debug, PartialEq)]
pub enum RankPiece {
    /// Nonzeros `(row, col, value)` of an SDDMM output.
    Sparse(Vec<(usize, usize, f64)>),
    /// Rows `first_row ..` of a dense output.
    DenseRows { first_row: usize, block: Dense },
    /// Rows `first_row ..` and columns `first_col ..` of a dense output (the algorithms that
    /// split dense matrices by columns).
    DenseBlock {
        first_row: usize,
        first_col: usize,
        block: Dense,
    },
}

/// What one rank returns: its piece and the time it spent in local kernels.
#[derive(Clone, Debug, PartialEq)]
pub struct RankOutput {
    pub piece: RankPiece,
    pub compute_seconds: f64,
}

/// The assembled result of a distributed run and what every rank communicated.
#[derive(Clone, Debug, PartialEq)]
pub struct DistRun {
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
