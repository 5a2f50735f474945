//! The paper's baseline (Section VI-A): a 1D block-row algorithm with no replication factor, the
//! distribution PETSc requires.
//!
//! Distribution over `p` ranks: rank `k` owns rows block `k` of `A` and of `S` (all columns; `R`
//! likewise), and block `k` of `B`; SpMMB uses a transposed copy of its block row of `S`.
//! - SDDMM and SpMMA need every row of `B`: a ring all-gather of `B` (propagation), then the
//!   local kernel on the block row. `(p - 1) n r / p` words per rank.
//! - SpMMB: the local `R_k^T A_k` is a full `n x r` partial sum, reduce-scattered to the owners
//!   of `B` (reduction). `(p - 1) n r / p` words per rank.
//! - FusedMMA / FusedMMB: SDDMM then SpMM as two independent calls (the paper compares against
//!   two back-to-back PETSc SpMMs), so `B` is gathered again for FusedMMA. Only
//!   [`Strategy::NoElision`].
//!
//! Unlike PETSc, the gather is sparsity agnostic (all of `B`, not only the rows the block row
//! touches), like every other algorithm here. Deterministic: every sum has a fixed order.

use crate::comm::{Communicator, Phase};
use crate::cost_model::{Cost, PhaseCost, Shape};
use crate::distributed::{block_range, extract_blocks, push_triplets, timed, word_counts};
use crate::kernels::{self, CsrRef, Kernel, Transposed};
use crate::problem::{FusedMmError, Problem, RankOutput, RankPiece, Strategy};
use crate::{Dense, DistAlgorithm};
use parbench_common::Par;

/// The 1D block-row baseline.
#[derive(Clone, Copy, Debug, Default)]
pub struct OneD;

impl DistAlgorithm for OneD {
    fn name(&self) -> &'static str {
        "1d"
    }

    fn check_grid(&self, p: usize, c: usize) -> Result<(), FusedMmError> {
        if p == 0 || c != 1 {
            return Err(FusedMmError::Grid {
                algorithm: self.name(),
                p,
                c,
                reason: "the 1D algorithm does not replicate (c must be 1, p at least 1)",
                valid: vec![1],
            });
        }
        Ok(())
    }

    /// The baseline has no replication factor: it runs at `c = 1` beside the others.
    fn replicates(&self) -> bool {
        false
    }

    /// `G = (p - 1) n r / p` words in `p - 1` messages: a ring all-gather of `B` (or
    /// reduce-scatter of the SpMMB output) over all ranks, once per pass.
    fn cost(&self, kernel: Kernel, _strategy: Strategy, s: Shape) -> Option<Cost> {
        let (n, r, p) = (s.n as f64, s.r as f64, s.p as f64);
        let g = PhaseCost::new((p - 1.0) * n * r / p, p - 1.0);
        let mut cost = Cost::default();
        match kernel {
            Kernel::Sddmm | Kernel::SpmmA => cost.add(Phase::Propagation, g, 1.0),
            Kernel::SpmmB => cost.add(Phase::Reduction, g, 1.0),
            Kernel::FusedMmA => cost.add(Phase::Propagation, g, 2.0),
            Kernel::FusedMmB => {
                cost.add(Phase::Propagation, g, 1.0);
                cost.add(Phase::Reduction, g, 1.0);
            }
        }
        Some(cost)
    }

    fn run_rank(
        &self,
        comm: &dyn Communicator,
        problem: &Problem,
        kernel: Kernel,
        _strategy: Strategy,
        _c: usize,
        par: Par,
    ) -> Result<RankOutput, FusedMmError> {
        let (p, k) = (comm.size(), comm.rank());
        let (m, n, r) = (problem.m(), problem.n(), problem.r());
        let rows_a = block_range(m, p, k);
        let rows_b = block_range(n, p, k);
        let a_k = problem.a().row_block(rows_a.start, rows_a.end);
        let b_k = problem.b().row_block(rows_b.start, rows_b.end);
        let s_k = extract_blocks(problem.s(), rows_a.clone(), 1, 1, |_| Some(0))?.remove(0);
        let b_counts = word_counts((0..p).map(|b| block_range(n, p, b)), r);
        let mut compute = 0.0;

        let gather_b = || -> Result<Dense, FusedMmError> {
            let all = comm.all_gather_f64(Phase::Propagation, b_k.data(), &b_counts)?;
            Ok(Dense::from_vec(n, r, all).expect("all-gather of the B blocks has n rows"))
        };
        let sddmm = |compute: &mut f64| -> Result<Vec<f64>, FusedMmError> {
            let b_full = gather_b()?;
            let mut vals = vec![0.0; s_k.nnz()];
            timed(compute, || {
                kernels::sddmm((&s_k).into(), &a_k, &b_full, &mut vals, par)
            });
            Ok(vals)
        };
        let spmm_a = |vals: &[f64], compute: &mut f64| -> Result<Dense, FusedMmError> {
            let b_full = gather_b()?;
            let mut out = Dense::zeros(rows_a.len(), r);
            timed(compute, || {
                kernels::spmm_a(CsrRef::from(&s_k).with_values(vals), &b_full, &mut out, par)
            });
            Ok(out)
        };
        let spmm_b = |vals: &[f64], compute: &mut f64| -> Result<Dense, FusedMmError> {
            // The transposed copy is setup (the paper stores it alongside S), not kernel time.
            let tr = Transposed::new(&s_k);
            let tvals = tr.gather_values(vals);
            let partial = timed(compute, || {
                let mut partial = Dense::zeros(n, r);
                kernels::spmm_b(
                    CsrRef::from(&tr.t).with_values(&tvals),
                    &a_k,
                    &mut partial,
                    par,
                );
                partial
            });
            let mine = comm.reduce_scatter_sum(Phase::Reduction, partial.data(), &b_counts)?;
            Ok(Dense::from_vec(rows_b.len(), r, mine).expect("reduce-scatter gives block k"))
        };
        let dense_a = |block| RankPiece::DenseRows {
            first_row: rows_a.start,
            block,
        };
        let dense_b = |block| RankPiece::DenseRows {
            first_row: rows_b.start,
            block,
        };

        let piece = match kernel {
            Kernel::Sddmm => {
                let vals = sddmm(&mut compute)?;
                let mut t = Vec::with_capacity(vals.len());
                push_triplets(&s_k, &vals, rows_a.start, 0, &mut t);
                RankPiece::Sparse(t)
            }
            Kernel::SpmmA => dense_a(spmm_a(s_k.values(), &mut compute)?),
            Kernel::SpmmB => dense_b(spmm_b(s_k.values(), &mut compute)?),
            Kernel::FusedMmA => {
                let vals = sddmm(&mut compute)?;
                dense_a(spmm_a(&vals, &mut compute)?)
            }
            Kernel::FusedMmB => {
                let vals = sddmm(&mut compute)?;
                dense_b(spmm_b(&vals, &mut compute)?)
            }
        };
        Ok(RankOutput {
            piece,
            compute_seconds: compute,
        })
    }
}
