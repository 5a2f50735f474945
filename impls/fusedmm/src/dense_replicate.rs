//! 2.5D dense replicating (paper Section V-C, Algorithm 2): Cannon-like rounds within square
//! layers, one dense matrix replicated along the fiber; no elision and replication reuse.
//!
//! Grid: `p = s^2 c` ranks (`s = sqrt(p / c)`), rank `(x s + y) c + l` at row `x`, column `y`
//! of layer `l`. The *fiber* of a rank is the `c` ranks sharing `(x, y)`.
//!
//! Distribution (the same for all five kernels). Rows of `A` and of `B` are cut into `s c`
//! blocks and the `r` columns into `s` blocks; rank `(x, y, l)` owns columns block `y` of
//! - `A` rows block `x c + l`, so the fiber owns `A` *superblock* `x` (blocks `x c .. x c + c`);
//! - `B` rows block `((x + y) mod s) c + l`: `B` is stored pre-skewed, so Cannon's initial
//!   shift is part of the distribution (the paper: "applications do not need to perform this
//!   initial shift if they fill the input and output buffers appropriately").
//!
//! Layer `l` handles the inner blocks `k c + l` (`k = 0 .. s`). `S` is stored twice: copy `S`
//! at rank `(x, y, l)` is the block of `A` superblock `x` rows and `B` block
//! `((x + y) mod s) c + l` columns; copy `S^T` is the block of `B` superblock `(x + y) mod s`
//! rows and `A` block `x c + l` columns. The SDDMM output and the SpMM input `R` use copy `S`.
//!
//! One *round* over a layout (X replicated, Y shifted, T the copy with X's rows): all-gather
//! my X block along the fiber (X's superblock `u`, my columns), then `s` steps: the rank holds
//! T block (superblock `u`, Y block `k c + l`) and Y block `k c + l` (or an accumulator for it),
//! computes, and shifts both by one position (propagation): T as COO with its travelling
//! values, Y as a dense block. After `s` steps everything is home; an X-shaped output is then
//! reduce-scattered along the fiber.
//! - A-layout (X = A, Y = B, T = S): `u = x`, step `t` holds `k = (x + y + t) mod s`; T shifts
//!   along the layer row (from `(x, y + 1)`), Y along the layer column (from `(x + 1, y)`), as in
//!   Cannon's algorithm.
//! - B-layout (X = B, Y = A, T = S^T), only for FusedMMA with replication reuse:
//!   `u = (x + y) mod s`, step `t` holds `k = (x + t) mod s`; Y shifts along the layer column
//!   and T along the anti-diagonal `x + y = const` (from `(x + 1, y - 1)`), which keeps `u`
//!   fixed. With this choice both layouts use the same distribution of `A` and `B` above.
//!
//! The dense matrices are split by columns, so SDDMM sends an accumulator with the T block that
//! every rank of the row adds its partial dot products to, and the home rank scales by `S`;
//! local kernel fusion is impossible.
//!
//! Kernels and strategies: SDDMM: A-layout round. SpMMA: A-layout round into the X superblock,
//! reduce-scatter. SpMMB: A-layout round into a travelling Y accumulator. FusedMMA: none =
//! SDDMM then SpMMA; reuse = B-layout SDDMM (`R^T`) then a Y-accumulator round reusing the
//! gathered `B`. FusedMMB: none = SDDMM then SpMMB (gathering `A` again); reuse = SDDMM then a
//! Y-accumulator round reusing the gathered `A`.
//!
//! Cost per rank with even blocks (words): `W_X = (c - 1) x r / p` in `c - 1` messages; a round
//! is `V_Y = Z + D_Y` with `Z = 3 nnz s / p` words in `2 s` messages (sparse shifts) and
//! `D_Y = s y r / p` in `s` messages (dense shifts), none when `s = 1`. SDDMM, SpMMB
//! `W_A + V_B`; SpMMA `V_B + W_A`; FusedMMA none `2 W_A + 2 V_B`, reuse `W_B + 2 V_A`; FusedMMB
//! none `2 W_A + 2 V_B`, reuse `W_A + 2 V_B`. `Z` is exact when every T block row of the
//! layer holds `nnz s / p` nonzeros. See [`crate::cost_model`]. Deterministic.

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

/// 2.5D dense replicating.
#[derive(Clone, Copy, Debug, Default)]
pub struct DenseReplicate25;

/// The side `s` of a layer when `p / c` is a perfect square.
pub fn layer_side(p: usize, c: usize) -> Option<usize> {
    if p == 0 || c == 0 || !p.is_multiple_of(c) {
        return None;
    }
    let q = p / c;
    let s = (q as f64).sqrt().round() as usize;
    (s * s == q).then_some(s)
}

/// The replication factors that give a 2.5D grid for `p`.
pub fn grid_factors(p: usize) -> Vec<usize> {
    divisors(p)
        .into_iter()
        .filter(|&c| layer_side(p, c).is_some())
        .collect()
}

/// Checks a 2.5D grid for `algorithm`.
pub(crate) fn check_grid_25(
    algorithm: &'static str,
    p: usize,
    c: usize,
) -> Result<(), FusedMmError> {
    if layer_side(p, c).is_none() {
        return Err(FusedMmError::Grid {
            algorithm,
            p,
            c,
            reason: "the grid is sqrt(p/c) x sqrt(p/c) x c, so c must divide p and p/c must be a perfect square",
            valid: grid_factors(p),
        });
    }
    Ok(())
}

/// One rank's view of one layout.
struct Layout<'a> {
    fiber: &'a dyn Communicator,
    sparse_comm: &'a dyn Communicator,
    dense_comm: &'a dyn Communicator,
    s: usize,
    c: usize,
    l: usize,
    /// X superblock of this rank.
    sup: usize,
    /// Y block index (of the layer's `s`) held at step 0.
    home_k: usize,
    x_rows: usize,
    y_rows: usize,
    cols: Range<usize>,
    x_block: Dense,
    y_block: Dense,
    home: Csr,
    home_values: Vec<f64>,
    par: Par,
    compute: f64,
}

/// Where a rank sits and which layout it runs.
struct Place {
    s: usize,
    c: usize,
    l: usize,
    y: usize,
    sup: usize,
    home_k: usize,
}

impl<'a> Layout<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        fiber: &'a dyn Communicator,
        sparse_comm: &'a dyn Communicator,
        dense_comm: &'a dyn Communicator,
        at: Place,
        x: &Dense,
        y: &Dense,
        t: &Csr,
        par: Par,
    ) -> Result<Layout<'a>, FusedMmError> {
        let Place {
            s,
            c,
            l,
            y: col,
            sup,
            home_k,
        } = at;
        let (x_rows, y_rows) = (x.rows(), y.rows());
        let cols = block_range(x.cols(), s, col);
        let superblock = superblock(x_rows, s, c, sup);
        let home_t = extract_blocks(t, superblock, s * c, 1, |b| {
            (b == home_k * c + l).then_some(0)
        })?
        .remove(0);
        let xb = block_range(x_rows, s * c, sup * c + l);
        let yb = block_range(y_rows, s * c, home_k * c + l);
        Ok(Layout {
            fiber,
            sparse_comm,
            dense_comm,
            s,
            c,
            l,
            sup,
            home_k,
            x_rows,
            y_rows,
            x_block: x.block(xb, cols.clone()),
            y_block: y.block(yb, cols.clone()),
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

    /// Rows of the Y block held at step `t`.
    fn y_rows_at(&self, t: usize) -> Range<usize> {
        let k = (self.home_k + t) % self.s;
        block_range(self.y_rows, self.s * self.c, k * self.c + self.l)
    }

    fn fiber_counts(&self) -> Vec<usize> {
        word_counts(
            (0..self.c).map(|jj| block_range(self.x_rows, self.s * self.c, self.sup * self.c + jj)),
            self.width(),
        )
    }

    /// All-gathers X's superblock (my columns) along the fiber.
    fn replicate_x(&self) -> Result<Dense, FusedMmError> {
        let all = self.fiber.all_gather_f64(
            Phase::Replication,
            self.x_block.data(),
            &self.fiber_counts(),
        )?;
        let rows = superblock(self.x_rows, self.s, self.c, self.sup).len();
        Ok(Dense::from_vec(rows, self.width(), all).expect("X superblock rows"))
    }

    /// One round of `s` steps: the home T block travels with `values` and a dense block
    /// travels with it (`dense`: my Y block, or a zero Y accumulator); `step` runs at every step
    /// on the T block and dense block held. Returns both as they come home.
    fn round(
        &mut self,
        values: Vec<f64>,
        dense: Dense,
        mut step: impl FnMut(&mut Self, &Csr, &mut Vec<f64>, &mut Dense),
    ) -> Result<(Vec<f64>, Dense), FusedMmError> {
        let (mut pattern, mut values, mut dense) = (self.home.clone(), values, dense);
        for t in 0..self.s {
            step(self, &pattern, &mut values, &mut dense);
            if self.s > 1 {
                let next = self.y_rows_at(t + 1).len();
                let nrows = pattern.nrows();
                (pattern, values) = shift_coo(
                    self.sparse_comm,
                    Phase::Propagation,
                    &pattern,
                    &values,
                    nrows,
                    next,
                )?;
                let got = self
                    .dense_comm
                    .shift_f64(Phase::Propagation, dense.data(), 1)?;
                dense = Dense::from_vec(next, self.width(), got).expect("shifted Y block rows");
            }
        }
        Ok((values, dense))
    }

    /// SDDMM: partial dot products summed along the round, scaled by the home values of `S`.
    fn sddmm(&mut self, x_sup: &Dense) -> Result<Vec<f64>, FusedMmError> {
        let zeros = vec![0.0; self.home.nnz()];
        let y = self.y_block.clone();
        let (sums, _) = self.round(zeros, y, |lay, pattern, acc, y| {
            let par = lay.par;
            let mut part = vec![0.0; pattern.nnz()];
            timed(&mut lay.compute, || {
                kernels::sddmm(pattern.into(), x_sup, y, &mut part, par);
                add_into(acc, &part);
            });
        })?;
        Ok(sums
            .iter()
            .zip(&self.home_values)
            .map(|(d, s)| s * d)
            .collect())
    }

    /// X output: `sum T Y` into the superblock, reduce-scattered to my X block.
    fn x_output(&mut self, values: Vec<f64>) -> Result<Dense, FusedMmError> {
        let mut acc = Dense::zeros(self.home.nrows(), self.width());
        let y = self.y_block.clone();
        self.round(values, y, |lay, pattern, vals, y| {
            let par = lay.par;
            timed(&mut lay.compute, || {
                kernels::spmm_a(CsrRef::from(pattern).with_values(vals), y, &mut acc, par)
            });
        })?;
        let mine =
            self.fiber
                .reduce_scatter_sum(Phase::Reduction, acc.data(), &self.fiber_counts())?;
        Ok(Dense::from_vec(self.x_block.rows(), self.width(), mine).expect("X block rows"))
    }

    /// Y output: `T^T X` into a Y accumulator that travels with the T block.
    fn y_output(&mut self, values: Vec<f64>, x_sup: &Dense) -> Result<Dense, FusedMmError> {
        let acc = Dense::zeros(self.y_block.rows(), self.width());
        let (_, acc) = self.round(values, acc, |lay, pattern, vals, acc| {
            let par = lay.par;
            timed(&mut lay.compute, || {
                let tr = Transposed::new(pattern);
                let tvals = tr.gather_values(vals);
                kernels::spmm_b(CsrRef::from(&tr.t).with_values(&tvals), x_sup, acc, par)
            });
        })?;
        Ok(acc)
    }

    fn x_piece(&self, block: Dense) -> RankPiece {
        let rows = block_range(self.x_rows, self.s * self.c, self.sup * self.c + self.l);
        RankPiece::DenseBlock {
            first_row: rows.start,
            first_col: self.cols.start,
            block,
        }
    }

    fn y_piece(&self, block: Dense) -> RankPiece {
        RankPiece::DenseBlock {
            first_row: self.y_rows_at(0).start,
            first_col: self.cols.start,
            block,
        }
    }

    fn triplets(&self, vals: &[f64]) -> Vec<(usize, usize, f64)> {
        let mut out = Vec::with_capacity(vals.len());
        let row0 = superblock(self.x_rows, self.s, self.c, self.sup).start;
        push_triplets(&self.home, vals, row0, self.y_rows_at(0).start, &mut out);
        out
    }
}

/// Rows of superblock `u` (blocks `u c .. u c + c` of `s c`).
fn superblock(rows: usize, s: usize, c: usize, u: usize) -> Range<usize> {
    block_range(rows, s * c, u * c).start..block_range(rows, s * c, u * c + c - 1).end
}

impl DistAlgorithm for DenseReplicate25 {
    fn name(&self) -> &'static str {
        "2.5d-dense-replicate"
    }

    fn check_grid(&self, p: usize, c: usize) -> Result<(), FusedMmError> {
        check_grid_25(self.name(), p, c)
    }

    fn strategies(&self) -> &'static [Strategy] {
        &[Strategy::NoElision, Strategy::ReplicationReuse]
    }

    /// As 1.5D dense shifting's no elision and reuse, with a shift round replaced by
    /// `s = sqrt(p / c)` sparse shifts (COO, two messages each) and `s` dense shifts:
    /// `Z_2 + D(y) = 3 nnz s / p + s y r / p` words in `3 s` messages (none when `s = 1`).
    fn cost(&self, kernel: Kernel, strategy: Strategy, s: Shape) -> Option<Cost> {
        let side = layer_side(s.p, s.c)?;
        let (r, p, nnz) = (s.r as f64, s.p as f64, s.nnz as f64);
        let sd = side as f64;
        let round = |y: usize| {
            if side > 1 {
                PhaseCost::new(3.0 * nnz * sd / p + sd * y as f64 * r / p, 3.0 * sd)
            } else {
                PhaseCost::NONE
            }
        };
        Some(replicate_propagate_reduce(kernel, strategy, s, round))
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
        let s = layer_side(comm.size(), c).ok_or(FusedMmError::Grid {
            algorithm: self.name(),
            p: comm.size(),
            c,
            reason: "p/c is not a perfect square",
            valid: grid_factors(comm.size()),
        })?;
        let (cell, l) = (comm.rank() / c, comm.rank() % c);
        let (x, y) = (cell / s, cell % s);
        let fiber = comm.split(cell, l)?;
        let col = comm.split(l * s + y, x)?;
        let b_layout = kernel == Kernel::FusedMmA && strategy == Strategy::ReplicationReuse;
        let st;
        let (sparse_comm, mut lay);
        if b_layout {
            sparse_comm = comm.split(l * s + (x + y) % s, x)?;
            st = problem.s().transpose();
            let at = Place {
                s,
                c,
                l,
                y,
                sup: (x + y) % s,
                home_k: x,
            };
            lay = Layout::new(
                &*fiber,
                &*sparse_comm,
                &*col,
                at,
                problem.b(),
                problem.a(),
                &st,
                par,
            )?;
        } else {
            sparse_comm = comm.split(l * s + x, y)?;
            let at = Place {
                s,
                c,
                l,
                y,
                sup: x,
                home_k: (x + y) % s,
            };
            lay = Layout::new(
                &*fiber,
                &*sparse_comm,
                &*col,
                at,
                problem.a(),
                problem.b(),
                problem.s(),
                par,
            )?;
        }
        let s_values = lay.home_values.clone();
        let piece = match (kernel, strategy) {
            (Kernel::Sddmm, _) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                RankPiece::Sparse(lay.triplets(&vals))
            }
            (Kernel::SpmmA, _) => {
                let out = lay.x_output(s_values)?;
                lay.x_piece(out)
            }
            (Kernel::SpmmB, _) => {
                let x = lay.replicate_x()?;
                let out = lay.y_output(s_values, &x)?;
                lay.y_piece(out)
            }
            (Kernel::FusedMmA, Strategy::ReplicationReuse)
            | (Kernel::FusedMmB, Strategy::ReplicationReuse) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                let out = lay.y_output(vals, &x)?;
                lay.y_piece(out)
            }
            (Kernel::FusedMmA, _) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                drop(x);
                let out = lay.x_output(vals)?;
                lay.x_piece(out)
            }
            (Kernel::FusedMmB, _) => {
                let x = lay.replicate_x()?;
                let vals = lay.sddmm(&x)?;
                drop(x);
                let x = lay.replicate_x()?;
                let out = lay.y_output(vals, &x)?;
                lay.y_piece(out)
            }
        };
        Ok(RankOutput {
            piece,
            compute_seconds: lay.compute,
        })
    }
}
