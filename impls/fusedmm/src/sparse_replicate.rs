//! 2.5D sparse replicating (paper Section V-D): `S` replicated along the fiber (its values
//! gathered and reduced there), both dense matrices shifted within square layers; no elision.
//!
//! Grid: `p = s^2 c` ranks (`s = sqrt(p / c)`), rank `(x s + y) c + l` at row `x`, column `y`
//! of layer `l`, as in [`crate::dense_replicate`].
//!
//! Distribution (the same for all five kernels): rows of `A` are cut into `s` blocks, rows of
//! `B` into `s` blocks and the `r` columns into `s c` blocks, layer `l` owning columns blocks
//! `l s .. l s + s`. With `z = (x + y) mod s`, rank `(x, y, l)` owns
//! - `A` rows block `x`, columns block `l s + z`; `B` rows block `y`, columns block `l s + z`
//!   (pre-skewed for Cannon, so there is no initial shift);
//! - the pattern of the block `S_xy` (rows block `x`, columns block `y`), which every rank of
//!   the fiber stores (the coordinates never move), and part `l` (of `c`, an even split of the
//!   block's nonzeros in CSR order) of its values. The SDDMM output `R` and the SpMM input use
//!   this same value split.
//!
//! A *round* is `s` steps: at step `t` the rank holds the `A` and `B` pieces of columns block
//! `l s + (x + y + t) mod s` (either may be an accumulator), computes with `S_xy`, and shifts
//! the `A` piece along the layer row (from `(x, y + 1)`) and the `B` piece along the layer
//! column (from `(x + 1, y)`). After `s` shifts both are home.
//! - SDDMM: a round accumulating the partial dot products of the layer's columns, a
//!   reduce-scatter of the block's sums along the fiber (reduction; only values move), then my
//!   part is scaled by my part of `S`.
//! - SpMMA (`R B`): all-gather the block's values along the fiber (replication), then a round
//!   with an `A` accumulator travelling with `B`. SpMMB likewise with a `B` accumulator.
//! - FusedMMA / FusedMMB: SDDMM then SpMM (no dense matrix is replicated, so neither elision
//!   applies; the all-gather of `R` between the two is the paper's all-reduce).
//!
//! Unlike the paper's description, which starts the SDDMM with an all-gather of `S`'s values,
//! the values are only needed after the reduction, where each rank scales its own part: the
//! no-elision FusedMM costs one reduce-scatter and one all-gather of values, not three
//! collectives.
//!
//! Cost per rank with even blocks (words): `W_S = (c - 1) nnz / p` in `c - 1` messages for a
//! gather or reduce-scatter of values (exact when every `S_xy` holds `nnz / s^2` nonzeros and
//! `c` divides that); a round is `D = s (m + n) r / p` in `2 s` messages (none when `s = 1`).
//! SDDMM `D + W_S` (reduction); SpMMA, SpMMB `W_S` (replication) `+ D`; FusedMM
//! `W_S + 2 D + W_S`. See [`crate::cost_model`]. Deterministic.

use crate::comm::{Communicator, Phase};
use crate::cost_model::{Cost, PhaseCost, Shape};
use crate::dense_replicate::{check_grid_25, grid_factors, layer_side};
use crate::distributed::{add_into, block_range, extract_blocks, ones_pattern, timed};
use crate::kernels::{self, CsrRef, Kernel, Transposed};
use crate::problem::{FusedMmError, Problem, RankOutput, RankPiece, Strategy};
use crate::{comm::even_counts, Dense, DistAlgorithm};
use parbench_common::{Csr, Par};
use std::ops::Range;

/// 2.5D sparse replicating.
#[derive(Clone, Copy, Debug, Default)]
pub struct SparseReplicate25;

struct Rank<'a> {
    fiber: &'a dyn Communicator,
    row: &'a dyn Communicator,
    col: &'a dyn Communicator,
    s: usize,
    c: usize,
    l: usize,
    x: usize,
    y: usize,
    r: usize,
    a_rows: Range<usize>,
    b_rows: Range<usize>,
    /// `S_xy` with values one, its transpose, and my part of its values.
    pattern: Csr,
    transposed: Option<Transposed>,
    part: Range<usize>,
    s_part: Vec<f64>,
    par: Par,
    compute: f64,
}

impl Rank<'_> {
    /// Columns of the pieces held at step `t`.
    fn cols_at(&self, t: usize) -> Range<usize> {
        let z = (self.x + self.y + t) % self.s;
        block_range(self.r, self.s * self.c, self.l * self.s + z)
    }

    fn value_counts(&self) -> Vec<usize> {
        even_counts(self.pattern.nnz(), self.c)
    }

    /// `s` steps with the `A` piece `a` and `B` piece `b` travelling; returns them home.
    fn round(
        &mut self,
        a: Dense,
        b: Dense,
        mut step: impl FnMut(&mut Self, &mut Dense, &mut Dense),
    ) -> Result<(Dense, Dense), FusedMmError> {
        let (mut a, mut b) = (a, b);
        for t in 0..self.s {
            step(self, &mut a, &mut b);
            if self.s > 1 {
                let w = self.cols_at(t + 1).len();
                let got = self.row.shift_f64(Phase::Propagation, a.data(), 1)?;
                a = Dense::from_vec(self.a_rows.len(), w, got).expect("shifted A piece");
                let got = self.col.shift_f64(Phase::Propagation, b.data(), 1)?;
                b = Dense::from_vec(self.b_rows.len(), w, got).expect("shifted B piece");
            }
        }
        Ok((a, b))
    }

    /// SDDMM: my part of `R_xy`.
    fn sddmm(&mut self, a: &Dense, b: &Dense) -> Result<Vec<f64>, FusedMmError> {
        let mut sums = vec![0.0; self.pattern.nnz()];
        self.round(a.clone(), b.clone(), |me, a, b| {
            let mut part = vec![0.0; me.pattern.nnz()];
            let (pattern, par) = (&me.pattern, me.par);
            timed(&mut me.compute, || {
                kernels::sddmm(pattern.into(), a, b, &mut part, par);
                add_into(&mut sums, &part);
            });
        })?;
        let mine = self
            .fiber
            .reduce_scatter_sum(Phase::Reduction, &sums, &self.value_counts())?;
        Ok(mine.iter().zip(&self.s_part).map(|(d, s)| s * d).collect())
    }

    /// All of `S_xy`'s values (or `R_xy`'s) from the parts along the fiber.
    fn gather_values(&self, part: &[f64]) -> Result<Vec<f64>, FusedMmError> {
        Ok(self
            .fiber
            .all_gather_f64(Phase::Replication, part, &self.value_counts())?)
    }

    /// SpMMA: `R_xy B` into an `A` accumulator travelling along the row.
    fn spmm_a(&mut self, part: &[f64], b: &Dense) -> Result<Dense, FusedMmError> {
        let vals = self.gather_values(part)?;
        let acc = Dense::zeros(self.a_rows.len(), self.cols_at(0).len());
        let (acc, _) = self.round(acc, b.clone(), |me, acc, b| {
            let (pattern, par) = (&me.pattern, me.par);
            timed(&mut me.compute, || {
                kernels::spmm_a(CsrRef::from(pattern).with_values(&vals), b, acc, par)
            });
        })?;
        Ok(acc)
    }

    /// SpMMB: `R_xy^T A` into a `B` accumulator travelling along the column.
    fn spmm_b(&mut self, part: &[f64], a: &Dense) -> Result<Dense, FusedMmError> {
        let vals = self.gather_values(part)?;
        if self.transposed.is_none() {
            self.transposed = Some(Transposed::new(&self.pattern));
        }
        let tvals = self
            .transposed
            .as_ref()
            .expect("built above")
            .gather_values(&vals);
        let acc = Dense::zeros(self.b_rows.len(), self.cols_at(0).len());
        let (_, acc) = self.round(a.clone(), acc, |me, a, acc| {
            let (tr, par) = (me.transposed.as_ref().expect("built above"), me.par);
            let tr = CsrRef::from(&tr.t).with_values(&tvals);
            timed(&mut me.compute, || kernels::spmm_b(tr, a, acc, par));
        })?;
        Ok(acc)
    }

    fn triplets(&self, vals: &[f64]) -> Vec<(usize, usize, f64)> {
        let (indptr, indices) = (self.pattern.indptr(), self.pattern.indices());
        let mut out = Vec::with_capacity(vals.len());
        let mut row = 0;
        for (k, &v) in self.part.clone().zip(vals) {
            while indptr[row + 1] <= k {
                row += 1;
            }
            out.push((
                self.a_rows.start + row,
                self.b_rows.start + indices[k] as usize,
                v,
            ));
        }
        out
    }
}

impl DistAlgorithm for SparseReplicate25 {
    fn name(&self) -> &'static str {
        "2.5d-sparse-replicate"
    }

    fn check_grid(&self, p: usize, c: usize) -> Result<(), FusedMmError> {
        check_grid_25(self.name(), p, c)
    }

    /// `W_S = (c - 1) nnz / p` words in `c - 1` messages (values of the replicated `S` along a
    /// fiber) and, with `s = sqrt(p / c)`, a round of `s` shifts of both dense inputs,
    /// `E = s (m + n) r / p` words in `2 s` messages (none when `s = 1`).
    fn cost(&self, kernel: Kernel, _strategy: Strategy, s: Shape) -> Option<Cost> {
        let side = layer_side(s.p, s.c)?;
        let (m, n, r, p, c) = (s.m as f64, s.n as f64, s.r as f64, s.p as f64, s.c as f64);
        let nnz = s.nnz as f64;
        let sd = side as f64;
        let values = PhaseCost::new((c - 1.0) * nnz / p, c - 1.0);
        let round = if side > 1 {
            PhaseCost::new(sd * (m + n) * r / p, 2.0 * sd)
        } else {
            PhaseCost::NONE
        };
        let mut cost = Cost::default();
        match kernel {
            Kernel::Sddmm => {
                cost.add(Phase::Propagation, round, 1.0);
                cost.add(Phase::Reduction, values, 1.0);
            }
            Kernel::SpmmA | Kernel::SpmmB => {
                cost.add(Phase::Replication, values, 1.0);
                cost.add(Phase::Propagation, round, 1.0);
            }
            Kernel::FusedMmA | Kernel::FusedMmB => {
                cost.add(Phase::Replication, values, 1.0);
                cost.add(Phase::Propagation, round, 2.0);
                cost.add(Phase::Reduction, values, 1.0);
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
        let (m, n, r) = (problem.m(), problem.n(), problem.r());
        let (cell, l) = (comm.rank() / c, comm.rank() % c);
        let (x, y) = (cell / s, cell % s);
        let fiber = comm.split(cell, l)?;
        let row = comm.split(l * s + x, y)?;
        let col = comm.split(l * s + y, x)?;
        let (a_rows, b_rows) = (block_range(m, s, x), block_range(n, s, y));
        let block =
            extract_blocks(problem.s(), a_rows.clone(), s, 1, |b| (b == y).then_some(0))?.remove(0);
        let part = block_range(block.nnz(), c, l);
        let mut me = Rank {
            fiber: &*fiber,
            row: &*row,
            col: &*col,
            s,
            c,
            l,
            x,
            y,
            r,
            a_rows: a_rows.clone(),
            b_rows: b_rows.clone(),
            pattern: ones_pattern(&block)?,
            transposed: None,
            s_part: block.values()[part.clone()].to_vec(),
            part,
            par,
            compute: 0.0,
        };
        let cols = me.cols_at(0);
        let a = problem.a().block(a_rows.clone(), cols.clone());
        let b = problem.b().block(b_rows.clone(), cols.clone());
        let a_piece = |block| RankPiece::DenseBlock {
            first_row: a_rows.start,
            first_col: cols.start,
            block,
        };
        let b_piece = |block| RankPiece::DenseBlock {
            first_row: b_rows.start,
            first_col: cols.start,
            block,
        };
        let s_part = me.s_part.clone();
        let piece = match kernel {
            Kernel::Sddmm => {
                let vals = me.sddmm(&a, &b)?;
                RankPiece::Sparse(me.triplets(&vals))
            }
            Kernel::SpmmA => a_piece(me.spmm_a(&s_part, &b)?),
            Kernel::SpmmB => b_piece(me.spmm_b(&s_part, &a)?),
            Kernel::FusedMmA => {
                let vals = me.sddmm(&a, &b)?;
                a_piece(me.spmm_a(&vals, &b)?)
            }
            Kernel::FusedMmB => {
                let vals = me.sddmm(&a, &b)?;
                b_piece(me.spmm_b(&vals, &a)?)
            }
        };
        Ok(RankOutput {
            piece,
            compute_seconds: me.compute,
        })
    }
}
