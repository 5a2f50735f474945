//! Two applications whose sparse work is FusedMM-shaped (paper Section VI-E), each running that
//! work on the serial kernels or on any distributed algorithm, and reporting where the time went.
//!
//! - [`als`]: collaborative filtering by alternating least squares, every normal-equation system
//!   solved by conjugate gradients batched over all rows (Zhao and Canny): the matrix-vector
//!   product for all rows of one side is one FusedMMA (or FusedMMB for the other side).
//! - [`gat`]: a graph attention network forward pass: attention scores on the edges (SDDMM),
//!   softmax per row, aggregation (SpMM).
//!
//! Both call the sparse kernels through [`SparseOp`], which runs a kernel with a chosen
//! [`KernelExecution`]: the serial (rayon) kernels of [`crate::kernels`], or [`run_in_process`] with a
//! [`DistAlgorithm`], its FusedMM strategy and its `(p, c)` grid. The distributed call hands over
//! the whole problem and gets the assembled result back, so the applications' dense work (CG
//! updates, softmax, projections) runs on the assembled matrices: in a real distributed run it
//! would run on each rank's rows, which the distributions of the algorithms make local (see the
//! notes in each application). Every call is accounted in a [`KernelTimes`]: calls, wall time,
//! the busiest rank's compute time and the busiest rank's words and messages sent.

pub mod als;
pub mod gat;

use crate::distributed::run_in_process;
use crate::kernels::{self, CsrRef, Kernel};
use crate::problem::{DistRun, FusedMmError, KernelOutput, Problem, Strategy};
use crate::Dense;
use crate::DistAlgorithm;
use parbench_common::{Csr, CsrError, Par};
use std::time::Instant;
use thiserror::Error;

/// What can go wrong in an application.
#[derive(Debug, Error, PartialEq)]
pub enum AppError {
    /// A configuration value is out of range (the message names it).
    #[error("invalid parameter: {0}")]
    Parameter(String),
    /// A sparse kernel call failed (a bad grid or strategy, a failed rank).
    #[error(transparent)]
    FusedMm(#[from] FusedMmError),
    /// A matrix the application builds is not a valid CSR.
    #[error(transparent)]
    Csr(#[from] CsrError),
}

/// Where the sparse kernels run.
#[derive(Clone, Copy)]
pub enum KernelExecution<'a> {
    /// The local kernels of [`crate::kernels`] on the whole matrix.
    Serial(Par),
    /// A distributed algorithm on `p` in-process ranks with replication factor `c`; fused
    /// kernels use `strategy`, every rank's local kernels use `par`.
    Distributed {
        /// The distributed algorithm.
        algorithm: &'a dyn DistAlgorithm,
        /// Its FusedMM strategy (SDDMM and SpMM calls ignore it).
        strategy: Strategy,
        /// Number of in-process ranks.
        p: usize,
        /// Replication factor; must form a valid grid with `p` for `algorithm`.
        c: usize,
        /// Threads of every rank's local kernels.
        par: Par,
    },
}

impl std::fmt::Debug for KernelExecution<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl KernelExecution<'_> {
    /// A label: `serial` or `1.5d-dense-shift strategy=reuse p=4 c=2`.
    pub fn name(&self) -> String {
        match self {
            KernelExecution::Serial(_) => "serial".to_string(),
            KernelExecution::Distributed {
                algorithm,
                strategy,
                p,
                c,
                ..
            } => format!("{}/{} p={p} c={c}", algorithm.name(), strategy.name()),
        }
    }

    /// Checks the grid and strategy up front, so an application fails before doing any work.
    pub fn check(&self) -> Result<(), AppError> {
        if let KernelExecution::Distributed {
            algorithm,
            strategy,
            p,
            c,
            ..
        } = *self
        {
            algorithm.check_grid(p, c)?;
            crate::distributed::check_strategy(algorithm, Kernel::FusedMmA, strategy)?;
        }
        Ok(())
    }
}

/// Accounting of the sparse-kernel calls of one kind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KernelTimes {
    /// Kernel calls made.
    pub calls: usize,
    /// Wall time of the calls, including (distributed) building the problem and starting ranks.
    pub seconds: f64,
    /// Sum over calls of the busiest rank's time in local kernels (the serial kernels' time for
    /// the serial backend).
    pub compute_seconds: f64,
    /// Sum over calls of the longest time a rank spent inside communication calls (zero for the
    /// serial backend). What `seconds` has beyond compute and communication is setup: cloning
    /// the inputs into a [`Problem`], starting the rank threads, every rank cutting its blocks
    /// out of the global problem, and assembling the result.
    pub comm_seconds: f64,
    /// Sum over calls of the busiest rank's words sent (zero for the serial backend).
    pub words_sent: u64,
    /// Sum over calls of the busiest rank's messages sent.
    pub messages_sent: u64,
}

impl KernelTimes {
    fn add_run(&mut self, seconds: f64, run: Option<&DistRun>) {
        self.calls += 1;
        self.seconds += seconds;
        match run {
            None => self.compute_seconds += seconds,
            Some(run) => {
                self.compute_seconds += run.compute_seconds.iter().copied().fold(0.0, f64::max);
                self.comm_seconds += run
                    .stats
                    .iter()
                    .map(|s| s.total().seconds)
                    .fold(0.0, f64::max);
                self.words_sent += run.max_over_ranks(|s| s.total().words_sent);
                self.messages_sent += run.max_over_ranks(|s| s.total().messages_sent);
            }
        }
    }

    /// The sum of two accounts.
    pub fn plus(&self, other: &KernelTimes) -> KernelTimes {
        KernelTimes {
            calls: self.calls + other.calls,
            seconds: self.seconds + other.seconds,
            compute_seconds: self.compute_seconds + other.compute_seconds,
            comm_seconds: self.comm_seconds + other.comm_seconds,
            words_sent: self.words_sent + other.words_sent,
            messages_sent: self.messages_sent + other.messages_sent,
        }
    }
}

/// A sparse matrix `S` (`m x n`) bound to a backend: runs the five kernels with `S` (or `S` with
/// other values on the same pattern) as the sparse input. The serial backend keeps `S^T` for the
/// B-side kernels, built once.
pub struct SparseOp<'a> {
    backend: KernelExecution<'a>,
    s: Csr,
    /// `S^T` (serial backend only).
    st: Option<kernels::Transposed>,
}

impl<'a> SparseOp<'a> {
    /// Binds `s` to `backend`; fails at once when the backend's grid or strategy is invalid. The
    /// serial backend builds `S^T` here.
    pub fn new(backend: KernelExecution<'a>, s: Csr) -> Result<SparseOp<'a>, AppError> {
        backend.check()?;
        let st =
            matches!(backend, KernelExecution::Serial(_)).then(|| kernels::Transposed::new(&s));
        Ok(SparseOp { backend, s, st })
    }

    /// The sparse matrix `S`.
    pub fn s(&self) -> &Csr {
        &self.s
    }

    /// Where the kernels run.
    pub fn backend(&self) -> KernelExecution<'a> {
        self.backend
    }

    /// `S .* (A B^T)`, the values in the order of `S`'s nonzeros.
    pub fn sddmm(
        &self,
        a: &Dense,
        b: &Dense,
        times: &mut KernelTimes,
    ) -> Result<Vec<f64>, AppError> {
        match self.backend {
            KernelExecution::Serial(par) => {
                check_dense(&self.s, a, b)?;
                let start = Instant::now();
                let mut out = vec![0.0; self.s.nnz()];
                kernels::sddmm((&self.s).into(), a, b, &mut out, par);
                times.add_run(start.elapsed().as_secs_f64(), None);
                Ok(out)
            }
            KernelExecution::Distributed { .. } => {
                match self.distributed(None, a.clone(), b.clone(), Kernel::Sddmm, times)? {
                    KernelOutput::Sparse(r) => Ok(r.values().to_vec()),
                    KernelOutput::Dense(_) => Err(wrong_output(Kernel::Sddmm)),
                }
            }
        }
    }

    /// `R B` where `R` has the pattern of `S` and the given values (`S`'s own when `None`).
    pub fn spmm_a(
        &self,
        values: Option<&[f64]>,
        b: &Dense,
        times: &mut KernelTimes,
    ) -> Result<Dense, AppError> {
        check_values(&self.s, values)?;
        match self.backend {
            KernelExecution::Serial(par) => {
                check_rows("B", b, self.s.ncols())?;
                let start = Instant::now();
                let mut r: CsrRef = (&self.s).into();
                if let Some(v) = values {
                    r = r.with_values(v);
                }
                let mut out = Dense::zeros(self.s.nrows(), b.cols());
                kernels::spmm_a(r, b, &mut out, par);
                times.add_run(start.elapsed().as_secs_f64(), None);
                Ok(out)
            }
            KernelExecution::Distributed { .. } => {
                let a = Dense::zeros(self.s.nrows(), b.cols());
                dense_output(self.distributed(values, a, b.clone(), Kernel::SpmmA, times)?)
            }
        }
    }

    /// `R^T A` where `R` has the pattern of `S` and `S`'s values.
    pub fn spmm_b(&self, a: &Dense, times: &mut KernelTimes) -> Result<Dense, AppError> {
        match (&self.backend, &self.st) {
            (KernelExecution::Serial(par), Some(st)) => {
                check_rows("A", a, self.s.nrows())?;
                let start = Instant::now();
                let mut out = Dense::zeros(self.s.ncols(), a.cols());
                kernels::spmm_b((&st.t).into(), a, &mut out, *par);
                times.add_run(start.elapsed().as_secs_f64(), None);
                Ok(out)
            }
            _ => {
                let b = Dense::zeros(self.s.ncols(), a.cols());
                dense_output(self.distributed(None, a.clone(), b, Kernel::SpmmB, times)?)
            }
        }
    }

    /// `(S .* (A B^T)) B` (`m x r`).
    pub fn fusedmm_a(
        &self,
        a: &Dense,
        b: &Dense,
        times: &mut KernelTimes,
    ) -> Result<Dense, AppError> {
        match self.backend {
            KernelExecution::Serial(par) => {
                check_dense(&self.s, a, b)?;
                let start = Instant::now();
                let mut out = Dense::zeros(self.s.nrows(), b.cols());
                kernels::fusedmm_a((&self.s).into(), a, b, &mut out, par);
                times.add_run(start.elapsed().as_secs_f64(), None);
                Ok(out)
            }
            KernelExecution::Distributed { .. } => dense_output(self.distributed(
                None,
                a.clone(),
                b.clone(),
                Kernel::FusedMmA,
                times,
            )?),
        }
    }

    /// `(S .* (A B^T))^T A` (`n x r`).
    pub fn fusedmm_b(
        &self,
        a: &Dense,
        b: &Dense,
        times: &mut KernelTimes,
    ) -> Result<Dense, AppError> {
        match (&self.backend, &self.st) {
            (KernelExecution::Serial(par), Some(st)) => {
                check_dense(&self.s, a, b)?;
                let start = Instant::now();
                let mut out = Dense::zeros(self.s.ncols(), a.cols());
                kernels::fusedmm_b((&st.t).into(), a, b, &mut out, *par);
                times.add_run(start.elapsed().as_secs_f64(), None);
                Ok(out)
            }
            _ => dense_output(self.distributed(
                None,
                a.clone(),
                b.clone(),
                Kernel::FusedMmB,
                times,
            )?),
        }
    }

    /// One distributed call on `(S with values, a, b)`; the clones of the inputs that the
    /// owning [`Problem`] needs are part of the call's time.
    fn distributed(
        &self,
        values: Option<&[f64]>,
        a: Dense,
        b: Dense,
        kernel: Kernel,
        times: &mut KernelTimes,
    ) -> Result<KernelOutput, AppError> {
        let KernelExecution::Distributed {
            algorithm,
            strategy,
            p,
            c,
            par,
        } = self.backend
        else {
            return Err(AppError::Parameter(
                "a distributed call on the serial backend".to_string(),
            ));
        };
        let start = Instant::now();
        let s = match values {
            None => self.s.clone(),
            Some(v) => kernels::whole::with_values(&self.s, v.to_vec())?,
        };
        let problem = Problem::new(s, a, b)?;
        let strategy = if kernel.is_fused() {
            strategy
        } else {
            Strategy::NoElision
        };
        let run = run_in_process(algorithm, &problem, kernel, strategy, p, c, par)?;
        times.add_run(start.elapsed().as_secs_f64(), Some(&run));
        Ok(run.output)
    }
}

fn wrong_output(kernel: Kernel) -> AppError {
    AppError::Parameter(format!(
        "{} returned the wrong kind of output",
        kernel.name()
    ))
}

fn dense_output(out: KernelOutput) -> Result<Dense, AppError> {
    match out {
        KernelOutput::Dense(d) => Ok(d),
        KernelOutput::Sparse(_) => Err(AppError::Parameter(
            "a dense kernel returned a sparse output".to_string(),
        )),
    }
}

fn check_rows(name: &str, d: &Dense, rows: usize) -> Result<(), AppError> {
    if d.rows() != rows || d.cols() == 0 {
        return Err(AppError::Parameter(format!(
            "{name} is {} x {}, expected {rows} rows and at least one column",
            d.rows(),
            d.cols()
        )));
    }
    Ok(())
}

fn check_dense(s: &Csr, a: &Dense, b: &Dense) -> Result<(), AppError> {
    check_rows("A", a, s.nrows())?;
    check_rows("B", b, s.ncols())?;
    if a.cols() != b.cols() {
        return Err(AppError::Parameter(format!(
            "A has {} columns and B {}",
            a.cols(),
            b.cols()
        )));
    }
    Ok(())
}

fn check_values(s: &Csr, values: Option<&[f64]>) -> Result<(), AppError> {
    match values {
        Some(v) if v.len() != s.nnz() => Err(AppError::Parameter(format!(
            "{} values for a pattern of {} nonzeros",
            v.len(),
            s.nnz()
        ))),
        _ => Ok(()),
    }
}

/// `S`'s pattern with every value `value`.
pub fn pattern_with_value(s: &Csr, value: f64) -> Result<Csr, CsrError> {
    kernels::whole::with_values(s, vec![value; s.nnz()])
}

/// `x y` for `x` (`n x k`) and `y` (`k x w`), rows in parallel: the dense projections of the
/// applications.
pub fn matmul(x: &Dense, y: &Dense, par: Par) -> Dense {
    assert_eq!(x.cols(), y.rows(), "inner dimensions of a product");
    let (n, w) = (x.rows(), y.cols());
    let mut out = Dense::zeros(n, w);
    let row = |(i, out_row): (usize, &mut [f64])| {
        for (l, &xil) in x.row(i).iter().enumerate() {
            for (o, &ylj) in out_row.iter_mut().zip(y.row(l)) {
                *o += xil * ylj;
            }
        }
    };
    if w == 0 {
        return out;
    }
    match par {
        Par::Seq => out.data_mut().chunks_mut(w).enumerate().for_each(row),
        Par::Rayon(_) => par.install(|| {
            use rayon::prelude::*;
            out.data_mut().par_chunks_mut(w).enumerate().for_each(row)
        }),
    }
    out
}
