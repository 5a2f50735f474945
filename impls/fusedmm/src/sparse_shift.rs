//! 1.5D sparse shifting, dense replicating (paper Section V-B), with no elision and replication
//! reuse for FusedMM.
//!
//! Grid: `p = q c` ranks, rank `i c + j` at layer position `i` (of `q = p / c`) and fiber
//! position `j` (of `c`), as in [`crate::dense_shift`]: the *fiber* of `(i, j)` is the `c`
//! ranks sharing `i`, its *layer* the `q` ranks sharing `j`.
//!
//! Distribution (the same for all five kernels). Both dense matrices are split the same way:
//! rank `(i, j)` owns rows block `j` (of `c`) and columns block `i` (of `q`) of `A` and of `B`,
//! so the `r` columns are divided among the layer positions and the fiber splits rows. `S` is
//! stored twice, as the paper does: copy `S` at rank `(i, j)` is the block of rows block `i` (of
//! `q`) and columns block `j` (of `c`); copy `S^T` likewise for `S^T`. The SDDMM output and the
//! SpMM input `R` use copy `S`.
//!
//! One *round* over a layout (X replicated, Y stationary, T the copy with X's rows):
//! - replication: all-gather my X block along the fiber, giving all rows of X's column block
//!   `i` (`x` rows, `r / q` columns);
//! - `q` steps: at step `t` the rank holds T block `k = (i + t) mod q` (rows block `k`, columns
//!   block `j`) with the values travelling with it, computes with rows block `k` of its X slab
//!   and its stationary Y block, then shifts the T block (coordinates and values, three words a
//!   nonzero) to layer position `i - 1` (propagation). After `q` shifts every block is home;
//! - reduction (when the output is X-shaped): reduce-scatter the slab-sized accumulator along
//!   the fiber.
//!
//! Because the dense matrices are split by columns, a rank sees only part of each dot product:
//! SDDMM sends an accumulator with the T block, every rank of the layer adds its partial dot
//! products for its column block, and the home rank scales the complete sums by `S` (no extra
//! communication, as Section IV-A notes). For the same reason local kernel fusion is
//! impossible here (the fused kernel needs complete dot products).
//!
//! Kernels and strategies (A-layout: X = A, Y = B, T = S; B-layout: X = B, Y = A, T = S^T):
//! - SDDMM: A-layout, gather, round accumulating partial dot products.
//! - SpMMA: A-layout round with the `S` values travelling, `T_k Y` into the X slab, reduce-scatter.
//! - SpMMB: A-layout, gather, round adding `T_k^T X_k` into the stationary Y block.
//! - FusedMMA: no elision = SDDMM round then SpMMA round; replication reuse = B-layout SDDMM
//!   (giving `R^T`) then a Y-output round reusing the gathered `B`.
//! - FusedMMB: no elision = SDDMM round then SpMMB round (which all-gathers `A` again);
//!   replication reuse = A-layout SDDMM then a Y-output round reusing the gathered `A`.
//!
//! Cost per rank with even blocks (words; `W_X = (c - 1) x r / p` in `c - 1` messages for an
//! all-gather or reduce-scatter of X with `x` rows; `Z = 3 nnz / c` words in `2 q` messages for
//! a round of `q` sparse shifts, none when `q = 1`): SDDMM and SpMMB `W_A + Z`, SpMMA
//! `Z + W_A`; FusedMMA none `2 W_A + 2 Z`, reuse `W_B + 2 Z`; FusedMMB none `2 W_A + 2 Z`, reuse
//! `W_A + 2 Z`. `Z` is exact when every column block of `S` (row block for the B-layout) holds
//! `nnz / c` nonzeros. See [`crate::cost_model`]. Deterministic: the order of every sum is fixed
//! by the grid.

use crate::comm::{Communicator, Phase};
use crate::cost_model::{replicate_propagate_reduce, Cost, PhaseCost, Shape};
use crate::distributed::{
    add_into, block_range, divisors, extract_blocks, ones_pattern, push_triplets, shift_coo, timed,
    word_counts,
};
use crate::kernels::{self, CsrRef, Kernel, Transposed};
use crate::problem::{FusedMmError, Problem, RankOutput, RankPiece, Strategy};
use crate::{Dense, DistAlgorithm};
use parbench_common::{Csr, Par};
use std::ops::Range;

/// 1.5D sparse shifting, dense replicating.
#[derive(Clone, Copy, Debug, Default)]
pub struct SparseShift15;

/// One rank's view of one layout.
struct Layout<'a> {
    fiber: &'a dyn Communicator,
    layer: &'a dyn Communicator,
    q: usize,
    c: usize,
    i: usize,
    j: usize,
    x_rows: usize,
    y_rows: usize,
    /// My columns of the dense matrices (block `i` of `q`).
    cols: Range<usize>,
    x_block: Dense,
    y_block: Dense,
    /// My home T block (rows block `i` of `q`, columns block `j` of `c`): its pattern with
    /// values one, and its values.
    home: Csr,
    home_values: Vec<f64>,
    par: Par,
    compute: f64,
}

impl<'a> Layout<'a> {
    fn new(
        fiber: &'a dyn Communicator,
        layer: &'a dyn Communicator,
        x: &Dense,
        y: &Dense,
        t: &Csr,
        par: Par,
    ) -> Result<Layout<'a>, FusedMmError> {
        let (q, c, i, j) = (layer.size(), fiber.size(), layer.rank(), fiber.rank());
        let (x_rows, y_rows) = (x.rows(), y.rows());
        let cols = block_range(x.cols(), q, i);
        let home_t = extract_blocks(t, block_range(x_rows, q, i), c, 1, |b| {
            (b == j).then_some(0)
        })?
        .remove(0);
        Ok(Layout {
            fiber,
            layer,
            q,
            c,
            i,
            j,
            x_rows,
            y_rows,
            x_block: x.block(block_range(x_rows, c, j), cols.clone()),
            y_block: y.block(block_range(y_rows, c, j), cols.clone()),
            cols,
            home: ones_pattern(&home_t)?,
            home_values: home_t.values().to_vec(),
            par,
            compute: 0.0,
        })
    }

    fn width(&self) -> usize {
        self.cols.len()
    }

    fn fiber_counts(&self) -> Vec<usize> {
        word_counts(
            (0..self.c).map(|jj| block_range(self.x_rows, self.c, jj)),
            self.width(),
        )
    }

    /// Rows of X of T block `k`.
    fn t_rows(&self, k: usize) -> Range<usize> {
        block_range(self.x_rows, self.q, k)
    }

    /// All-gathers X's column block along the fiber and cuts it into the `q` row blocks the
    /// T blocks need.
    fn replicate_x(&self) -> Result<Vec<Dense>, FusedMmError> {
        let all = self.fiber.all_gather_f64(
            Phase::Replication,
            self.x_block.data(),
            &self.fiber_counts(),
        )?;
        let slab = Dense::from_vec(self.x_rows, self.width(), all).expect("X slab rows");
        Ok((0..self.q)
            .map(|k| {
                let rows = self.t_rows(k);
                slab.row_block(rows.start, rows.end)
            })
            .collect())
    }

    /// One round of `q` steps: the home T block travels around the layer with `values`, and
    /// `step(layout, k, pattern, values)` runs on the block `k` held at each step. Returns the
    /// values as they come home.
    fn round(
        &mut self,
        values: Vec<f64>,
        mut step: impl FnMut(&mut Self, usize, &Csr, &mut Vec<f64>),
    ) -> Result<Vec<f64>, FusedMmError> {
        let mut pattern = self.home.clone();
        let mut values = values;
        for t in 0..self.q {
            let k = (self.i + t) % self.q;
            step(self, k, &pattern, &mut values);
            if self.q > 1 {
                let next = (self.i + t + 1) % self.q;
                let ycols = self.home.ncols();
                (pattern, values) = shift_coo(
                    self.layer,
                    Phase::Propagation,
                    &pattern,
                    &values,
                    self.t_rows(next).len(),
                    ycols,
                )?;
            }
        }
        Ok(values)
    }

    /// SDDMM: partial dot products summed along the layer, scaled by the home values of `S`.
    fn sddmm(&mut self, x: &[Dense]) -> Result<Vec<f64>, FusedMmError> {
        let zeros = vec![0.0; self.home.nnz()];
        let sums = self.round(zeros, |lay, k, pattern, acc| {
            let (y, par) = (&lay.y_block, lay.par);
            let mut part = vec![0.0; pattern.nnz()];
            timed(&mut lay.compute, || {
                kernels::sddmm(pattern.into(), &x[k], y, &mut part, par);
                add_into(acc, &part);
            });
        })?;
        Ok(sums
            .iter()
            .zip(&self.home_values)
            .map(|(d, s)| s * d)
            .collect())
    }

    /// X output: `sum_k T_k Y` into the slab (with `values` travelling as T's values),
    /// reduce-scattered to my X block.
    fn x_output(&mut self, values: Vec<f64>) -> Result<Dense, FusedMmError> {
        let w = self.width();
        let mut acc: Vec<Dense> = (0..self.q)
            .map(|k| Dense::zeros(self.t_rows(k).len(), w))
            .collect();
        self.round(values, |lay, k, pattern, vals| {
            let (y, par) = (&lay.y_block, lay.par);
            timed(&mut lay.compute, || {
                kernels::spmm_a(CsrRef::from(pattern).with_values(vals), y, &mut acc[k], par)
            });
        })?;
        let slab = Dense::vstack(w, &acc);
        let mine =
            self.fiber
                .reduce_scatter_sum(Phase::Reduction, slab.data(), &self.fiber_counts())?;
        Ok(Dense::from_vec(self.x_block.rows(), w, mine).expect("X block rows"))
    }

    /// Y output: `sum_k T_k^T X_k` into my stationary Y block.
    fn y_output(&mut self, values: Vec<f64>, x: &[Dense]) -> Result<Dense, FusedMmError> {
        let mut acc = Dense::zeros(self.y_block.rows(), self.width());
        self.round(values, |lay, k, pattern, vals| {
            let par = lay.par;
            timed(&mut lay.compute, || {
                // Transposing the visiting block is part of the local SpMMB.
                let tr = Transposed::new(pattern);
                let tvals = tr.gather_values(vals);
                kernels::spmm_b(
                    CsrRef::from(&tr.t).with_values(&tvals),
                    &x[k],
                    &mut acc,
                    par,
                )
            });
        })?;
        Ok(acc)
    }

    /// My dense block of an X-shaped (or Y-shaped: the distributions agree) output.
    fn dense_piece(&self, rows: usize, block: Dense) -> RankPiece {
        RankPiece::DenseBlock {
            first_row: block_range(rows, self.c, self.j).start,
            first_col: self.cols.start,
            block,
        }
    }

    /// The SDDMM output of my home block in global coordinates.
    fn triplets(&self, vals: &[f64]) -> Vec<(usize, usize, f64)> {
        let mut out = Vec::with_capacity(vals.len());
        let row0 = self.t_rows(self.i).start;
        let col0 = block_range(self.y_rows, self.c, self.j).start;
        push_triplets(&self.home, vals, row0, col0, &mut out);
        out
    }
}

impl DistAlgorithm for SparseShift15 {
    fn name(&self) -> &'static str {
        "1.5d-sparse-shift"
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
        &[Strategy::NoElision, Strategy::ReplicationReuse]
    }

    /// Fiber collectives `W(x)` (see [`Shape::fiber`]) and `q = p / c` shifts of a COO block,
    /// `Z_1 = 3 nnz / c` words (indices and values, three words a nonzero) in `2 q` messages
    /// (none when `q = 1`); the average over ranks.
    fn cost(&self, kernel: Kernel, strategy: Strategy, s: Shape) -> Option<Cost> {
        let (p, c, nnz) = (s.p as f64, s.c as f64, s.nnz as f64);
        let z = if s.p / s.c > 1 {
            PhaseCost::new(3.0 * nnz / c, 2.0 * (p / c))
        } else {
            PhaseCost::NONE
        };
        Some(replicate_propagate_reduce(kernel, strategy, s, |_| z))
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
        let b_layout = kernel == Kernel::FusedMmA && strategy == Strategy::ReplicationReuse;
        let st;
        let mut lay = if b_layout {
            st = problem.s().transpose();
            Layout::new(&*fiber, &*layer, problem.b(), problem.a(), &st, par)?
        } else {
            Layout::new(&*fiber, &*layer, problem.a(), problem.b(), problem.s(), par)?
        };
        let (m, n) = (problem.m(), problem.n());
        let s_values = lay.home_values.clone();
        let piece = match (kernel, strategy) {
            (Kernel::Sddmm, _) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                RankPiece::Sparse(lay.triplets(&vals))
            }
            (Kernel::SpmmA, _) => {
                let out = lay.x_output(s_values)?;
                lay.dense_piece(m, out)
            }
            (Kernel::SpmmB, _) => {
                let x = lay.replicate_x()?;
                let out = lay.y_output(s_values, &x)?;
                lay.dense_piece(n, out)
            }
            (Kernel::FusedMmA, Strategy::ReplicationReuse) => {
                // B-layout: X = B, and the SDDMM gives R^T; Y-output is then R B.
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                let out = lay.y_output(vals, &x)?;
                lay.dense_piece(m, out)
            }
            (Kernel::FusedMmA, _) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                drop(x);
                let out = lay.x_output(vals)?;
                lay.dense_piece(m, out)
            }
            (Kernel::FusedMmB, Strategy::ReplicationReuse) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                let out = lay.y_output(vals, &x)?;
                lay.dense_piece(n, out)
            }
            (Kernel::FusedMmB, _) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                drop(x);
                // A second, independent call: it replicates X again.
                let x = lay.replicate_x()?;
                let out = lay.y_output(vals, &x)?;
                lay.dense_piece(n, out)
            }
        };
        Ok(RankOutput {
            piece,
            compute_seconds: lay.compute,
        })
    }
}
