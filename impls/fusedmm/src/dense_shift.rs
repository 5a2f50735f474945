//! 1.5D dense shifting, dense replicating (paper Section V-A, Algorithm 1), with the three
//! FusedMM strategies of Section IV-B.
//!
//! Grid: `p = q c` ranks, rank `i c + j` at layer position `i` (of `q = p / c`) and fiber
//! position `j` (of `c`). The *fiber* of rank `(i, j)` is the `c` ranks sharing `i`, its *layer*
//! the `q` ranks sharing `j`.
//!
//! Distribution (the same for all five kernels): `A` and `B` are each cut into `p` row blocks,
//! rank `i c + j` owning block `i c + j` of both. The fiber `i` together owns the contiguous
//! *superblock* `i` (blocks `i c .. i c + c`). `S` is stored twice, as the paper does: copy `S` at
//! rank `(i, j)` holds the rows of `A`-superblock `i` restricted to the columns of the `B` blocks
//! `k c + j` (`k = 0 .. q`), as `q` CSR blocks; copy `S^T` likewise with the roles of `A` and `B`
//! exchanged. The SDDMM output and the SpMM sparse input `R` use copy `S`.
//!
//! One *pass* over a layout (X replicated, Y shifted, T the copy whose rows are X's):
//! - replication: all-gather my X block along the fiber, giving X's superblock `i`;
//! - `q` steps: at step `t` the rank holds Y block `((i + t) mod q) c + j` and computes with T
//!   block `k = (i + t) mod q`, then cyclically shifts the Y block (or an accumulator for it) to
//!   layer position `i - 1` (propagation). After `q` shifts every block is home again;
//! - reduction (when the output is X-shaped): reduce-scatter the superblock-sized accumulator
//!   along the fiber.
//!
//! Kernels and strategies (A-layout: X = A, Y = B, T = S; B-layout: X = B, Y = A, T = S^T):
//! - SDDMM: A-layout pass computing `R_k = T_k .* (X_i Y^T)`.
//! - SpMMA (`R B`): A-layout pass accumulating `R_k Y` into the X superblock, reduce-scatter.
//! - SpMMB (`R^T A`): A-layout pass accumulating `R_k^T X_i` into a shifted Y accumulator.
//! - FusedMMA: no elision = SDDMM pass + SpMMA pass; local kernel fusion = one A-layout pass of
//!   the fused kernel into the X accumulator, then reduce-scatter; replication reuse = B-layout
//!   SDDMM pass then a Y-accumulator pass reusing the gathered B (no second all-gather, no
//!   reduce-scatter).
//! - FusedMMB: no elision = SDDMM pass + SpMMB pass (which all-gathers A again); replication
//!   reuse = A-layout SDDMM then a Y-accumulator pass reusing the gathered A; local kernel
//!   fusion = one B-layout fused pass.
//!
//! Cost per rank with even blocks (words; `W_X = (c - 1) x r / p` for an all-gather or
//! reduce-scatter of X with `x` rows, `V_Y = y r / c` for `q` shifts of Y with `y` rows, no
//! shifts when `q = 1`): SDDMM `W_A + V_B`, SpMMA `V_B + W_A`, SpMMB `W_A + V_B`; FusedMMA
//! none `2 W_A + 2 V_B`, fusion `2 W_A + V_B`, reuse `W_B + 2 V_A`; FusedMMB none
//! `2 W_A + 2 V_B`, reuse `W_A + 2 V_B`, fusion `2 W_B + V_A`. See [`crate::cost_model`].
//! Deterministic: the order of every sum is fixed by the grid.

use crate::comm::{Communicator, Phase};
use crate::cost_model::{replicate_propagate_reduce, Cost, PhaseCost, Shape};
use crate::distributed::{
    block_range, divisors, extract_blocks, push_triplets, timed, word_counts,
};
use crate::kernels::{self, CsrRef, Kernel, Transposed};
use crate::problem::{FusedMmError, Problem, RankOutput, RankPiece, Strategy};
use crate::{Dense, DistAlgorithm};
use parbench_common::{Csr, Par};
use std::ops::Range;

/// 1.5D dense shifting, dense replicating.
#[derive(Clone, Copy, Debug, Default)]
pub struct DenseShift15;

/// One rank's view of one layout: its X and Y blocks and its blocks of T.
struct Layout<'a> {
    fiber: &'a dyn Communicator,
    layer: &'a dyn Communicator,
    p: usize,
    q: usize,
    c: usize,
    i: usize,
    j: usize,
    r: usize,
    /// Rows of X and of Y in all.
    x_rows: usize,
    y_rows: usize,
    x_block: Dense,
    y_block: Dense,
    /// `t[k]`: rows of X-superblock `i`, columns of Y block `k c + j`, local indices.
    t: Vec<Csr>,
    /// Transposes of `t` (with maps back to `t`'s order), built on first use by a Y-output pass.
    t_transposed: Vec<Transposed>,
    par: Par,
    compute: f64,
}

impl<'a> Layout<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        fiber: &'a dyn Communicator,
        layer: &'a dyn Communicator,
        c: usize,
        x: &Dense,
        y: &Dense,
        t: &Csr,
        par: Par,
    ) -> Result<Layout<'a>, FusedMmError> {
        let (q, i, j) = (layer.size(), layer.rank(), fiber.rank());
        let p = q * c;
        let (x_rows, y_rows) = (x.rows(), y.rows());
        let xb = block_range(x_rows, p, i * c + j);
        let yb = block_range(y_rows, p, i * c + j);
        let superblock = Self::superblock_of(x_rows, p, c, i);
        let t_blocks = extract_blocks(t, superblock, p, q, |b| (b % c == j).then_some(b / c))?;
        Ok(Layout {
            fiber,
            layer,
            p,
            q,
            c,
            i,
            j,
            r: x.cols(),
            x_rows,
            y_rows,
            x_block: x.row_block(xb.start, xb.end),
            y_block: y.row_block(yb.start, yb.end),
            t: t_blocks,
            t_transposed: Vec::new(),
            par,
            compute: 0.0,
        })
    }

    fn superblock_of(x_rows: usize, p: usize, c: usize, i: usize) -> Range<usize> {
        block_range(x_rows, p, i * c).start..block_range(x_rows, p, i * c + c - 1).end
    }

    fn superblock(&self) -> Range<usize> {
        Self::superblock_of(self.x_rows, self.p, self.c, self.i)
    }

    fn fiber_counts(&self) -> Vec<usize> {
        word_counts(
            (0..self.c).map(|jj| block_range(self.x_rows, self.p, self.i * self.c + jj)),
            self.r,
        )
    }

    /// Rows of the Y block held at step `t`.
    fn y_block_rows(&self, step: usize) -> usize {
        let k = (self.i + step) % self.q;
        block_range(self.y_rows, self.p, k * self.c + self.j).len()
    }

    /// All-gathers X's superblock along the fiber.
    fn replicate_x(&self) -> Result<Dense, FusedMmError> {
        let all = self.fiber.all_gather_f64(
            Phase::Replication,
            self.x_block.data(),
            &self.fiber_counts(),
        )?;
        Ok(Dense::from_vec(self.superblock().len(), self.r, all).expect("superblock rows"))
    }

    /// Shifts a block of Y (or of a Y accumulator) held at `step` one position down the layer.
    fn shift(&self, block: Dense, step: usize) -> Result<Dense, FusedMmError> {
        if self.q == 1 {
            return Ok(block);
        }
        let got = self.layer.shift_f64(Phase::Propagation, block.data(), 1)?;
        let rows = self.y_block_rows(step + 1);
        Ok(Dense::from_vec(rows, self.r, got).expect("shifted Y block rows"))
    }

    /// The SDDMM pass: `R_k = T_k .* (X_i Y_k^T)` for every k, given X's superblock.
    fn sddmm(&mut self, x_super: &Dense) -> Result<Vec<Vec<f64>>, FusedMmError> {
        let mut vals: Vec<Vec<f64>> = self.t.iter().map(|t| vec![0.0; t.nnz()]).collect();
        let mut y = self.y_block.clone();
        for step in 0..self.q {
            let k = (self.i + step) % self.q;
            let (t, par) = (&self.t[k], self.par);
            timed(&mut self.compute, || {
                kernels::sddmm(t.into(), x_super, &y, &mut vals[k], par)
            });
            y = self.shift(y, step)?;
        }
        Ok(vals)
    }

    /// The X-output pass: `sum_k R_k Y_k` (or the fused kernel when `fused_x` is given) into the
    /// superblock, reduce-scattered to my X block.
    fn x_output(
        &mut self,
        r_vals: Option<&[Vec<f64>]>,
        fused_x: Option<&Dense>,
    ) -> Result<Dense, FusedMmError> {
        let mut acc = Dense::zeros(self.superblock().len(), self.r);
        let mut y = self.y_block.clone();
        for step in 0..self.q {
            let k = (self.i + step) % self.q;
            let (t, par) = (&self.t[k], self.par);
            timed(&mut self.compute, || match (fused_x, r_vals) {
                (Some(x_super), _) => kernels::fusedmm_a(t.into(), x_super, &y, &mut acc, par),
                (None, Some(v)) => {
                    kernels::spmm_a(CsrRef::from(t).with_values(&v[k]), &y, &mut acc, par)
                }
                (None, None) => kernels::spmm_a(t.into(), &y, &mut acc, par),
            });
            y = self.shift(y, step)?;
        }
        let mine =
            self.fiber
                .reduce_scatter_sum(Phase::Reduction, acc.data(), &self.fiber_counts())?;
        Ok(Dense::from_vec(self.x_block.rows(), self.r, mine).expect("X block rows"))
    }

    /// The Y-output pass: `R_k^T X_i` accumulated into the Y accumulator that travels with the
    /// shifts and comes home after `q` steps.
    fn y_output(
        &mut self,
        r_vals: Option<&[Vec<f64>]>,
        x_super: &Dense,
    ) -> Result<Dense, FusedMmError> {
        if self.t_transposed.is_empty() {
            self.t_transposed = self.t.iter().map(Transposed::new).collect();
        }
        let mut acc = Dense::zeros(self.y_block.rows(), self.r);
        for step in 0..self.q {
            let k = (self.i + step) % self.q;
            let (tr, par) = (&self.t_transposed[k], self.par);
            let tvals = match r_vals {
                Some(v) => tr.gather_values(&v[k]),
                None => tr.t.values().to_vec(),
            };
            timed(&mut self.compute, || {
                kernels::spmm_b(
                    CsrRef::from(&tr.t).with_values(&tvals),
                    x_super,
                    &mut acc,
                    par,
                )
            });
            acc = self.shift(acc, step)?;
        }
        Ok(acc)
    }

    /// My X block's rows in all of X, and my Y block's.
    fn x_first_row(&self) -> usize {
        block_range(self.x_rows, self.p, self.i * self.c + self.j).start
    }
    fn y_first_row(&self) -> usize {
        block_range(self.y_rows, self.p, self.i * self.c + self.j).start
    }

    /// The SDDMM output in global coordinates (A-layout: rows of X, columns of Y).
    fn triplets(&self, vals: &[Vec<f64>]) -> Vec<(usize, usize, f64)> {
        let row0 = self.superblock().start;
        let mut out = Vec::new();
        for (k, t) in self.t.iter().enumerate() {
            let col0 = block_range(self.y_rows, self.p, k * self.c + self.j).start;
            push_triplets(t, &vals[k], row0, col0, &mut out);
        }
        out
    }
}

impl DistAlgorithm for DenseShift15 {
    fn name(&self) -> &'static str {
        "1.5d-dense-shift"
    }

    fn check_grid(&self, p: usize, c: usize) -> Result<(), FusedMmError> {
        if p == 0 || c == 0 || !p.is_multiple_of(c) {
            return Err(FusedMmError::Grid {
                algorithm: self.name(),
                p,
                c,
                reason: "the grid is p/c x c, so c must divide p",
                valid: divisors(p),
            });
        }
        Ok(())
    }

    fn strategies(&self) -> &'static [Strategy] {
        &Strategy::ALL
    }

    /// Fiber collectives `W(x)` (see [`Shape::fiber`]) and `q = p / c` cyclic shifts of blocks
    /// of `y / p` rows, `V(y) = y r / c` words in `q` messages (none when `q = 1`).
    fn cost(&self, kernel: Kernel, strategy: Strategy, s: Shape) -> Option<Cost> {
        let (r, p, c) = (s.r as f64, s.p as f64, s.c as f64);
        let q = p / c;
        let shift = |y: usize| {
            if s.p / s.c > 1 {
                PhaseCost::new(q * y as f64 * r / p, q)
            } else {
                PhaseCost::NONE
            }
        };
        Some(replicate_propagate_reduce(kernel, strategy, s, shift))
    }

    fn run_rank(
        &self,
        comm: &dyn Communicator,
        problem: &Problem,
        kernel: Kernel,
        strategy: Strategy,
        c: usize,
        par: Par,
    ) -> Result<RankOutput, FusedMmError> {
        let (i, j) = (comm.rank() / c, comm.rank() % c);
        let fiber = comm.split(i, j)?;
        let layer = comm.split(j, i)?;
        // B-layout only where a strategy needs it: it costs a transpose of S.
        let b_layout = matches!(
            (kernel, strategy),
            (Kernel::FusedMmA, Strategy::ReplicationReuse)
                | (Kernel::FusedMmB, Strategy::LocalKernelFusion)
        );
        let st;
        let mut lay = if b_layout {
            st = problem.s().transpose();
            Layout::new(&*fiber, &*layer, c, problem.b(), problem.a(), &st, par)?
        } else {
            Layout::new(
                &*fiber,
                &*layer,
                c,
                problem.a(),
                problem.b(),
                problem.s(),
                par,
            )?
        };
        let x_piece = |lay: &Layout, block| RankPiece::DenseRows {
            first_row: lay.x_first_row(),
            block,
        };
        let y_piece = |lay: &Layout, block| RankPiece::DenseRows {
            first_row: lay.y_first_row(),
            block,
        };
        let piece = match (kernel, strategy) {
            (Kernel::Sddmm, _) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                RankPiece::Sparse(lay.triplets(&vals))
            }
            (Kernel::SpmmA, _) => {
                let out = lay.x_output(None, None)?;
                x_piece(&lay, out)
            }
            (Kernel::SpmmB, _) => {
                let x = lay.replicate_x()?;
                let out = lay.y_output(None, &x)?;
                y_piece(&lay, out)
            }
            (Kernel::FusedMmA, Strategy::NoElision) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                drop(x);
                let out = lay.x_output(Some(&vals), None)?;
                x_piece(&lay, out)
            }
            (Kernel::FusedMmA, Strategy::LocalKernelFusion)
            | (Kernel::FusedMmB, Strategy::LocalKernelFusion) => {
                let x = lay.replicate_x()?;
                let out = lay.x_output(None, Some(&x))?;
                x_piece(&lay, out)
            }
            (Kernel::FusedMmA, Strategy::ReplicationReuse)
            | (Kernel::FusedMmB, Strategy::ReplicationReuse) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                let out = lay.y_output(Some(&vals), &x)?;
                y_piece(&lay, out)
            }
            (Kernel::FusedMmB, Strategy::NoElision) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                drop(x);
                // A second, independent call: it replicates X again.
                let x = lay.replicate_x()?;
                let out = lay.y_output(Some(&vals), &x)?;
                y_piece(&lay, out)
            }
        };
        Ok(RankOutput {
            piece,
            compute_seconds: lay.compute,
        })
    }
}
