//! Words and messages each rank sends, per phase, for every algorithm, kernel and strategy, as
//! the implementation performs them (paper Section V, Table III), and the best replication factor.
//!
//! Each algorithm states its own model ([`DistAlgorithm::cost`], next to its code); [`predict`]
//! checks the grid and the strategy first, and [`best_c`] tries every valid `c`. The table
//! below collects the models of the crate's algorithms.
//!
//! Derived from the collective algorithms of [`crate::comm`] (ring all-gather and
//! reduce-scatter, cyclic shifts by send-receive; self transfers are free) and the passes of each
//! algorithm. Exact when `m` and `n` are multiples of `p` (every block the same size; then each
//! rank also receives exactly what it sends); with uneven blocks a rank's counts differ from the
//! prediction by at most the block-size rounding.
//!
//! Notation: `q = p / c`; an all-gather or reduce-scatter along a fiber of a matrix with `x` rows
//! costs `W(x) = (c - 1) x r / p` words in `c - 1` messages; `q` cyclic shifts of blocks of a
//! matrix with `y` rows cost `V(y) = q * y r / p = y r / c` words in `q` messages (none when
//! `q = 1`: the shift is to oneself).
//!
//! | algorithm | kernel, strategy | replication | propagation | reduction |
//! |---|---|---|---|---|
//! | 1d | SDDMM, SpMMA | | `G` | |
//! | 1d | SpMMB | | | `G` |
//! | 1d | FusedMMA | | `2G` | |
//! | 1d | FusedMMB | | `G` | `G` |
//! | 1.5d-dense-shift | SDDMM, SpMMB | `W(m)` | `V(n)` | |
//! | 1.5d-dense-shift | SpMMA | | `V(n)` | `W(m)` |
//! | 1.5d-dense-shift | FusedMMA none | `W(m)` | `2V(n)` | `W(m)` |
//! | 1.5d-dense-shift | FusedMMA reuse | `W(n)` | `2V(m)` | |
//! | 1.5d-dense-shift | FusedMMA fusion | `W(m)` | `V(n)` | `W(m)` |
//! | 1.5d-dense-shift | FusedMMB none | `2W(m)` | `2V(n)` | |
//! | 1.5d-dense-shift | FusedMMB reuse | `W(m)` | `2V(n)` | |
//! | 1.5d-dense-shift | FusedMMB fusion | `W(n)` | `V(m)` | `W(n)` |
//!
//! | 1.5d-sparse-shift | SDDMM, SpMMB | `W(m)` | `Z_1` | |
//! | 1.5d-sparse-shift | SpMMA | | `Z_1` | `W(m)` |
//! | 1.5d-sparse-shift | FusedMMA none | `W(m)` | `2 Z_1` | `W(m)` |
//! | 1.5d-sparse-shift | FusedMMA reuse | `W(n)` | `2 Z_1` | |
//! | 1.5d-sparse-shift | FusedMMB none | `2W(m)` | `2 Z_1` | |
//! | 1.5d-sparse-shift | FusedMMB reuse | `W(m)` | `2 Z_1` | |
//! | 2.5d-dense-replicate | as 1.5d-dense-shift none and reuse, with `V(y)` replaced by `Z_2 + D(y)` | | | |
//! | 2.5d-sparse-replicate | SDDMM | | `E` | `W_S` |
//! | 2.5d-sparse-replicate | SpMMA, SpMMB | `W_S` | `E` | |
//! | 2.5d-sparse-replicate | FusedMMA, FusedMMB none | `W_S` | `2E` | `W_S` |
//!
//! with `G = (p - 1) n r / p` in `p - 1` messages (ring all-gather or reduce-scatter of `B`);
//! `Z_1 = 3 nnz / c` words in `2 q` messages (`q` shifts of a COO block: indices and values are
//! two messages, three words a nonzero); for 2.5D with `s = sqrt(p / c)`: `Z_2 = 3 nnz s / p`
//! in `2 s` messages, `D(y) = s y r / p` in `s` messages, `E = s (m + n) r / p` in `2 s`
//! messages (all zero when `s = 1`) and `W_S = (c - 1) nnz / p` in `c - 1` messages (values of
//! the replicated `S` only). The sparse terms are exact when the nonzeros split evenly over the
//! blocks each rank sees (the tests use a checkerboard pattern); otherwise they are the average.
//! With `phi = nnz / (n r)` and `m = n`, sparse shifting with reuse costs
//! `(c - 1) n r / p + 6 phi n r / c` against dense shifting's `(c - 1) n r / p + 2 n r / c`:
//! sparse shifting wins when `phi < 1/3` at equal `c`.
//! For `m = n` the FusedMM totals are the paper's: no elision `2 (c-1) n r / p + 2 n r / c`
//! (best `c = sqrt(p)`), reuse `(c-1) n r / p + 2 n r / c` (best `c = sqrt(2p)`), fusion
//! `2 (c-1) n r / p + n r / c` (best `c = sqrt(p / 2)`).

use crate::comm::Phase;
use crate::distributed::{check_strategy, divisors};
use crate::kernels::Kernel;
use crate::problem::Strategy;
use crate::DistAlgorithm;

/// The sizes a prediction depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Rows of `S` (and of `A`).
    pub m: usize,
    /// Columns of `S` (rows of `B`).
    pub n: usize,
    /// Columns of the dense matrices `A` and `B`.
    pub r: usize,
    /// Nonzeros of `S`.
    pub nnz: usize,
    /// Ranks.
    pub p: usize,
    /// Replication factor.
    pub c: usize,
}

impl Shape {
    /// `W(x)`: an all-gather or reduce-scatter along a fiber of `c` ranks of a matrix with `x`
    /// rows (`m` or `n`), `(c - 1) x r / p` words in `c - 1` messages.
    pub fn fiber(&self, x: usize) -> PhaseCost {
        let (r, p, c) = (self.r as f64, self.p as f64, self.c as f64);
        PhaseCost::new((c - 1.0) * x as f64 * r / p, c - 1.0)
    }
}

/// Words and messages one rank sends in one phase.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseCost {
    /// Words sent (an `f64` or a `u32` index each, as in [`crate::comm`]'s counting convention); an
    /// average over ranks for the sparse terms.
    pub words: f64,
    /// Messages sent.
    pub messages: f64,
}

impl PhaseCost {
    /// Nothing sent (a shift to oneself, a fiber of one rank).
    pub const NONE: PhaseCost = PhaseCost::new(0.0, 0.0);

    /// `words` words in `messages` messages.
    pub const fn new(words: f64, messages: f64) -> PhaseCost {
        PhaseCost { words, messages }
    }
}

/// Predicted cost of one run, per rank, by phase.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    phases: [PhaseCost; 3],
}

impl Cost {
    /// The predicted cost of one phase.
    pub fn phase(&self, phase: Phase) -> PhaseCost {
        self.phases[phase as usize]
    }
    /// Adds `times` transfers of `cost` each to `phase` (how an algorithm's
    /// [`DistAlgorithm::cost`] builds its prediction).
    pub fn add(&mut self, phase: Phase, cost: PhaseCost, times: f64) {
        let p = &mut self.phases[phase as usize];
        p.words += times * cost.words;
        p.messages += times * cost.messages;
    }
    /// Words over all phases.
    pub fn total_words(&self) -> f64 {
        self.phases.iter().map(|p| p.words).sum()
    }
    /// Messages over all phases.
    pub fn total_messages(&self) -> f64 {
        self.phases.iter().map(|p| p.messages).sum()
    }
}

/// The phases of the algorithms that replicate one dense operand along fibers and propagate the
/// other operand around the layer (1.5D dense shifting, 2.5D dense replicating, 1.5D sparse
/// shifting), the structure the paper's Table III shares between them: for each kernel and
/// strategy, which matrix is replicated (`W(x)`, [`Shape::fiber`]), how many propagation rounds
/// run and over which operand, and what is reduced. `propagate(y)` is the cost of one
/// propagation round when the propagated dense operand has `y` rows (the sparse algorithm
/// propagates `S` and ignores `y`). Local kernel fusion is only offered by dense shifting.
pub(crate) fn replicate_propagate_reduce(
    kernel: Kernel,
    strategy: Strategy,
    s: Shape,
    propagate: impl Fn(usize) -> PhaseCost,
) -> Cost {
    use Phase::{Propagation as Prop, Reduction as Red, Replication as Repl};
    use Strategy::{LocalKernelFusion as Fusion, ReplicationReuse as Reuse};
    let w = |x: usize| s.fiber(x);
    let (m, n) = (s.m, s.n);
    let mut cost = Cost::default();
    let mut add = |phase, each, times| cost.add(phase, each, times);
    match (kernel, strategy) {
        (Kernel::Sddmm | Kernel::SpmmB, _) => {
            add(Repl, w(m), 1.0);
            add(Prop, propagate(n), 1.0);
        }
        (Kernel::SpmmA, _) => {
            add(Prop, propagate(n), 1.0);
            add(Red, w(m), 1.0);
        }
        (Kernel::FusedMmA, Reuse) => {
            add(Repl, w(n), 1.0);
            add(Prop, propagate(m), 2.0);
        }
        (Kernel::FusedMmA, Fusion) => {
            add(Repl, w(m), 1.0);
            add(Prop, propagate(n), 1.0);
            add(Red, w(m), 1.0);
        }
        (Kernel::FusedMmA, _) => {
            add(Repl, w(m), 1.0);
            add(Prop, propagate(n), 2.0);
            add(Red, w(m), 1.0);
        }
        (Kernel::FusedMmB, Reuse) => {
            add(Repl, w(m), 1.0);
            add(Prop, propagate(n), 2.0);
        }
        (Kernel::FusedMmB, Fusion) => {
            add(Repl, w(n), 1.0);
            add(Prop, propagate(m), 1.0);
            add(Red, w(n), 1.0);
        }
        (Kernel::FusedMmB, _) => {
            add(Repl, w(m), 2.0);
            add(Prop, propagate(n), 2.0);
        }
    }
    cost
}

/// The cost of `kernel` with `strategy` under `algorithm` ([`DistAlgorithm::cost`]); `None`
/// for an invalid grid ([`DistAlgorithm::check_grid`]), a strategy the algorithm does not offer
/// for a fused kernel, or an algorithm without a model.
pub fn predict(
    algorithm: &dyn DistAlgorithm,
    kernel: Kernel,
    strategy: Strategy,
    shape: Shape,
) -> Option<Cost> {
    if algorithm.check_grid(shape.p, shape.c).is_err()
        || check_strategy(algorithm, kernel, strategy).is_err()
    {
        return None;
    }
    algorithm.cost(kernel, strategy, shape)
}

/// The replication factor (a divisor of `shape.p`; `shape.c` is ignored) with the fewest words
/// per rank, the smallest on a tie; `None` when no valid grid has a prediction.
pub fn best_c(
    algorithm: &dyn DistAlgorithm,
    kernel: Kernel,
    strategy: Strategy,
    shape: Shape,
) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for c in divisors(shape.p) {
        if let Some(cost) = predict(algorithm, kernel, strategy, Shape { c, ..shape }) {
            let w = cost.total_words();
            if best.is_none_or(|(bw, _)| w < bw) {
                best = Some((w, c));
            }
        }
    }
    best.map(|(_, c)| c)
}
