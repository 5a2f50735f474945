//! Collaborative filtering by alternating least squares with batched conjugate gradients, the
//! matrix-vector product of every CG step being one FusedMM (Zhao and Canny, "Sparse Allreduce",
//! and paper Section VI-E).
//!
//! Ratings `S` (`m x n`, observed entries only), factors `A` (`m x r`) and `B` (`n x r`), loss
//! `L(A, B) = sum_{(i,j) observed} (S_ij - <a_i, b_j>)^2 + lambda (|A|_F^2 + |B|_F^2)`.
//! With `B` fixed, row `i` of `A` solves the `r x r` normal equations
//! `(sum_{j in S_i} b_j b_j^T + lambda I) a_i = sum_{j in S_i} S_ij b_j`. The rows are solved
//! together by CG batched over rows: every row runs its own CG (its own step lengths), and the
//! products of all rows, `q_i = sum_{j in S_i} <p_i, b_j> b_j + lambda p_i`, are one
//! `FusedMMA(P, B, pattern of S) + lambda P` (SDDMM of `P` and `B` on the pattern, SpMM with `B`).
//! The right-hand sides are one `SpMMA(S, B)`. The side of `B` is the same with `FusedMMB(A, P)`
//! and `SpMMB(S, A)`. The loss needs the predictions on the observed entries: one
//! `SDDMM(A, B, pattern)`.
//!
//! CG starts from the current factors (warm start), so every CG step lowers the quadratic that
//! the half step minimizes and the loss never increases from one half step to the next, however
//! few CG iterations run. A row stops when its residual has dropped by `cg_tolerance` relative to
//! `max(|rhs_i|, |initial residual_i|)`; in exact arithmetic CG solves an `r x r` system in `r`
//! steps, so with `cg_iterations >= r` (and a tolerance near rounding) the result is the direct
//! solve of [`reference_als`].
//!
//! Cost per half step (A side): `cg_iterations + 1` FusedMMs (`4 r nnz` flops each; the extra one
//! is the initial residual), one SpMM (`2 r nnz`), and `O(m r)` per CG step for the vector
//! updates; one SDDMM (`2 r nnz`) per loss evaluation. With a distributed backend the FusedMM
//! communication is the algorithm's (see [`crate::cost_model`]); the CG updates are row-local in
//! every distribution (a row of `A` and its CG vectors live together), so they would need no
//! communication beyond the per-row scalars, which are local too.

use super::{pattern_with_value, AppError, KernelExecution, KernelTimes, SparseOp};
use crate::Dense;
use parbench_common::{Csr, Par};
use rayon::prelude::*;
use std::time::Instant;

/// Parameters of an ALS run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlsConfig {
    /// Width `r` of the factors.
    pub rank: usize,
    /// Regularization `lambda > 0` (it makes every normal-equation system positive definite).
    pub lambda: f64,
    /// CG iterations per half step (the paper's setting: 10).
    pub cg_iterations: usize,
    /// Outer iterations, each solving for `A` then for `B`.
    pub outer_iterations: usize,
    /// Relative residual at which a row's CG stops early.
    pub cg_tolerance: f64,
    /// Seed of the initial factors (uniform in `[-scale, scale)`, `scale = 1 / sqrt(r)`).
    pub seed: u64,
}

impl AlsConfig {
    /// `r = rank`, `lambda = 0.1`, 10 CG iterations, 5 outer iterations, tolerance `1e-12`.
    pub fn new(rank: usize) -> AlsConfig {
        AlsConfig {
            rank,
            lambda: 0.1,
            cg_iterations: 10,
            outer_iterations: 5,
            cg_tolerance: 1e-12,
            seed: 1,
        }
    }

    /// Why the configuration cannot run, if it cannot (`rank` of 0, `lambda` not positive,
    /// `cg_tolerance` negative); every ALS run checks it first.
    pub fn validate(&self) -> Result<(), AppError> {
        if self.rank == 0 {
            return Err(AppError::Parameter("ALS rank must be at least 1".into()));
        }
        if !(self.lambda > 0.0 && self.lambda.is_finite()) {
            return Err(AppError::Parameter(format!(
                "ALS lambda must be positive and finite, got {}",
                self.lambda
            )));
        }
        if !(self.cg_tolerance >= 0.0 && self.cg_tolerance.is_finite()) {
            return Err(AppError::Parameter(format!(
                "CG tolerance must be non-negative and finite, got {}",
                self.cg_tolerance
            )));
        }
        Ok(())
    }
}

/// Where an ALS run spent its time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AlsTimes {
    /// The CG products: FusedMMA and FusedMMB.
    pub fusedmm: KernelTimes,
    /// Right-hand sides: SpMMA and SpMMB of the ratings.
    pub spmm: KernelTimes,
    /// Loss evaluations: SDDMM on the pattern.
    pub sddmm: KernelTimes,
    /// Everything else: CG vector updates, `lambda P`, loss sums.
    pub other_seconds: f64,
    /// Wall time of the whole run.
    pub total_seconds: f64,
}

/// The result of an ALS run.
#[derive(Clone, Debug, PartialEq)]
pub struct AlsOutput {
    /// The row factors `A` (`m x rank`).
    pub a: Dense,
    /// The column factors `B` (`n x rank`); the predictions are `A B^T`.
    pub b: Dense,
    /// The loss before the first half step and after every half step (`2 outer + 1` values).
    pub loss: Vec<f64>,
    /// Number of CG iterations actually run per half step (fewer than asked when every row
    /// converged).
    pub cg_steps: Vec<usize>,
    /// Where the time went.
    pub times: AlsTimes,
}

/// The initial factors of [`als`]: uniform in `[-1/sqrt(r), 1/sqrt(r))` from `seed`.
pub fn initial_factors(m: usize, n: usize, r: usize, seed: u64) -> (Dense, Dense) {
    let scale = 1.0 / (r as f64).sqrt();
    let mut a = Dense::random(m, r, seed);
    let mut b = Dense::random(n, r, seed.wrapping_add(1));
    a.data_mut().iter_mut().for_each(|x| *x *= scale);
    b.data_mut().iter_mut().for_each(|x| *x *= scale);
    (a, b)
}

/// ALS from [`initial_factors`] of `config.seed`.
pub fn als(
    ratings: &Csr,
    config: &AlsConfig,
    backend: KernelExecution,
) -> Result<AlsOutput, AppError> {
    config.validate()?;
    let (a, b) = initial_factors(ratings.nrows(), ratings.ncols(), config.rank, config.seed);
    als_from(ratings, a, b, config, backend)
}

/// ALS from given factors (`config.rank` and `config.seed` are ignored: the factors' width is
/// the rank).
pub fn als_from(
    ratings: &Csr,
    a: Dense,
    b: Dense,
    config: &AlsConfig,
    backend: KernelExecution,
) -> Result<AlsOutput, AppError> {
    config.validate()?;
    let start = Instant::now();
    if a.rows() != ratings.nrows() || b.rows() != ratings.ncols() || a.cols() != b.cols() {
        return Err(AppError::Parameter(format!(
            "factors {} x {} and {} x {} do not fit ratings {} x {}",
            a.rows(),
            a.cols(),
            b.rows(),
            b.cols(),
            ratings.nrows(),
            ratings.ncols()
        )));
    }
    let par = match backend {
        KernelExecution::Serial(par) | KernelExecution::Distributed { par, .. } => par,
    };
    let ratings_op = SparseOp::new(backend, ratings.clone())?;
    let pattern_op = SparseOp::new(backend, pattern_with_value(ratings, 1.0)?)?;
    let mut times = AlsTimes::default();
    let (mut a, mut b) = (a, b);
    let mut loss = vec![loss_on(
        &pattern_op,
        ratings,
        &a,
        &b,
        config.lambda,
        &mut times,
    )?];
    let mut cg_steps = Vec::with_capacity(2 * config.outer_iterations);
    for _ in 0..config.outer_iterations {
        let rhs = ratings_op.spmm_a(None, &b, &mut times.spmm)?;
        let steps = batched_cg(&mut a, &rhs, config, par, &mut times, |p, t| {
            pattern_op.fusedmm_a(p, &b, t)
        })?;
        cg_steps.push(steps);
        loss.push(loss_on(
            &pattern_op,
            ratings,
            &a,
            &b,
            config.lambda,
            &mut times,
        )?);

        let rhs = ratings_op.spmm_b(&a, &mut times.spmm)?;
        let steps = batched_cg(&mut b, &rhs, config, par, &mut times, |p, t| {
            pattern_op.fusedmm_b(&a, p, t)
        })?;
        cg_steps.push(steps);
        loss.push(loss_on(
            &pattern_op,
            ratings,
            &a,
            &b,
            config.lambda,
            &mut times,
        )?);
    }
    times.total_seconds = start.elapsed().as_secs_f64();
    times.other_seconds =
        times.total_seconds - times.fusedmm.seconds - times.spmm.seconds - times.sddmm.seconds;
    Ok(AlsOutput {
        a,
        b,
        loss,
        cg_steps,
        times,
    })
}

/// Rows per unit of parallel work in the row-wise dense updates.
const ROW_CHUNK: usize = 256;

/// Per-row CG state.
#[derive(Clone, Copy, Default)]
struct RowState {
    /// `|r_i|^2`.
    rr: f64,
    /// The row stops once `rr <= stop`.
    stop: f64,
}

/// One chunk of rows of the CG arrays: `x`, residual, direction (row-major, width `w`), the
/// product `G p` of those rows (read only) and the rows' states.
type Chunk<'c> = (
    &'c mut [f64],
    &'c mut [f64],
    &'c mut [f64],
    &'c [f64],
    &'c mut [RowState],
);

/// Runs `f` on matching chunks of [`ROW_CHUNK`] rows, in parallel under `par`.
fn for_chunks(par: Par, w: usize, (x, res, p, q, state): Chunk, f: impl Fn(Chunk) + Sync + Send) {
    let n = ROW_CHUNK * w;
    match par {
        Par::Seq => x
            .chunks_mut(n)
            .zip(res.chunks_mut(n))
            .zip(p.chunks_mut(n))
            .zip(q.chunks(n))
            .zip(state.chunks_mut(ROW_CHUNK))
            .for_each(|((((x, r), p), q), s)| f((x, r, p, q, s))),
        Par::Rayon(_) => par.install(|| {
            x.par_chunks_mut(n)
                .zip(res.par_chunks_mut(n))
                .zip(p.par_chunks_mut(n))
                .zip(q.par_chunks(n))
                .zip(state.par_chunks_mut(ROW_CHUNK))
                .for_each(|((((x, r), p), q), s)| f((x, r, p, q, s)))
        }),
    }
}

/// Solves `G_i x_i = rhs_i` for every row at once by CG from the current `x`, where
/// `product(P)` returns the rows' `sum_j <p_i, y_j> y_j` (one FusedMM) and
/// `G_i p_i = product(P)_i + lambda p_i`. Returns the number of iterations run.
fn batched_cg<F>(
    x: &mut Dense,
    rhs: &Dense,
    config: &AlsConfig,
    par: Par,
    times: &mut AlsTimes,
    product: F,
) -> Result<usize, AppError>
where
    F: Fn(&Dense, &mut KernelTimes) -> Result<Dense, AppError>,
{
    let (rows, w, lambda) = (x.rows(), x.cols(), config.lambda);
    let tol2 = config.cg_tolerance * config.cg_tolerance;
    // Residual r = rhs - G x, and the first direction p = r.
    let gx = product(x, &mut times.fusedmm)?;
    let t = Instant::now();
    let mut res = rhs.clone();
    let mut p = Dense::zeros(rows, w);
    let mut state = vec![RowState::default(); rows];
    for_chunks(
        par,
        w,
        (
            x.data_mut(),
            res.data_mut(),
            p.data_mut(),
            gx.data(),
            &mut state,
        ),
        |(x, r, p, gx, s)| {
            for (li, s) in s.iter_mut().enumerate() {
                let cols = li * w..(li + 1) * w;
                let (x_i, r_i) = (&x[cols.clone()], &mut r[cols.clone()]);
                let (p_i, gx_i) = (&mut p[cols.clone()], &gx[cols]);
                let (mut rr, mut bb) = (0.0, 0.0);
                for l in 0..w {
                    bb += r_i[l] * r_i[l];
                    r_i[l] -= gx_i[l] + lambda * x_i[l];
                    rr += r_i[l] * r_i[l];
                    p_i[l] = r_i[l];
                }
                *s = RowState {
                    rr,
                    stop: tol2 * bb.max(rr),
                };
            }
        },
    );
    times.other_seconds += t.elapsed().as_secs_f64();

    let mut steps = 0;
    for _ in 0..config.cg_iterations {
        if state.iter().all(|s| s.rr <= s.stop) {
            break;
        }
        let gp = product(&p, &mut times.fusedmm)?;
        steps += 1;
        let t = Instant::now();
        for_chunks(
            par,
            w,
            (
                x.data_mut(),
                res.data_mut(),
                p.data_mut(),
                gp.data(),
                &mut state,
            ),
            |(x, r, p, gp, s)| {
                for (li, s) in s.iter_mut().enumerate() {
                    if s.rr <= s.stop {
                        continue;
                    }
                    let cols = li * w..(li + 1) * w;
                    let (x_i, r_i) = (&mut x[cols.clone()], &mut r[cols.clone()]);
                    let (p_i, gp_i) = (&mut p[cols.clone()], &gp[cols]);
                    let mut pq = 0.0;
                    for l in 0..w {
                        pq += p_i[l] * (gp_i[l] + lambda * p_i[l]);
                    }
                    if pq <= 0.0 || !pq.is_finite() {
                        // Only once the direction has vanished to rounding: stop the row.
                        s.stop = s.rr;
                        continue;
                    }
                    let alpha = s.rr / pq;
                    let mut rr_new = 0.0;
                    for l in 0..w {
                        x_i[l] += alpha * p_i[l];
                        r_i[l] -= alpha * (gp_i[l] + lambda * p_i[l]);
                        rr_new += r_i[l] * r_i[l];
                    }
                    let beta = rr_new / s.rr;
                    for l in 0..w {
                        p_i[l] = r_i[l] + beta * p_i[l];
                    }
                    s.rr = rr_new;
                }
            },
        );
        times.other_seconds += t.elapsed().as_secs_f64();
    }
    Ok(steps)
}

/// The loss, with the predictions computed by the backend's SDDMM.
fn loss_on(
    pattern_op: &SparseOp,
    ratings: &Csr,
    a: &Dense,
    b: &Dense,
    lambda: f64,
    times: &mut AlsTimes,
) -> Result<f64, AppError> {
    let predictions = pattern_op.sddmm(a, b, &mut times.sddmm)?;
    let t = Instant::now();
    let err: f64 = ratings
        .values()
        .iter()
        .zip(&predictions)
        .map(|(s, p)| (s - p) * (s - p))
        .sum();
    let reg = lambda * (squared_norm(a) + squared_norm(b));
    times.other_seconds += t.elapsed().as_secs_f64();
    Ok(err + reg)
}

fn squared_norm(x: &Dense) -> f64 {
    x.data().iter().map(|v| v * v).sum()
}

/// The loss `sum_observed (S_ij - <a_i, b_j>)^2 + lambda (|A|^2 + |B|^2)`, by plain loops.
pub fn loss(ratings: &Csr, a: &Dense, b: &Dense, lambda: f64) -> f64 {
    let mut err = 0.0;
    for i in 0..ratings.nrows() {
        let (cols, vals) = ratings.row(i);
        for (&j, &s) in cols.iter().zip(vals) {
            let pred: f64 = a
                .row(i)
                .iter()
                .zip(b.row(j as usize))
                .map(|(x, y)| x * y)
                .sum();
            err += (s - pred) * (s - pred);
        }
    }
    err + lambda * (squared_norm(a) + squared_norm(b))
}

/// Exact ALS for the tests: every row's normal equations formed in full and solved by a dense
/// Cholesky factorization, `O(nnz r^2 + (m + n) r^3)` per outer iteration. Returns the factors
/// after `outer_iterations` (A side, then B side, as [`als_from`]).
pub fn reference_als(
    ratings: &Csr,
    a: &Dense,
    b: &Dense,
    lambda: f64,
    outer_iterations: usize,
) -> (Dense, Dense) {
    let transposed = ratings.transpose();
    let (mut a, mut b) = (a.clone(), b.clone());
    for _ in 0..outer_iterations {
        a = solve_side_direct(ratings, &b, lambda);
        b = solve_side_direct(&transposed, &a, lambda);
    }
    (a, b)
}

/// Row `i` of the result solves `(sum_j y_j y_j^T + lambda I) x = sum_j S_ij y_j` over the
/// nonzeros `(i, j)` of `s`.
fn solve_side_direct(s: &Csr, y: &Dense, lambda: f64) -> Dense {
    let w = y.cols();
    let mut out = Dense::zeros(s.nrows(), w);
    for i in 0..s.nrows() {
        let mut g = vec![0.0; w * w];
        let mut rhs = vec![0.0; w];
        for l in 0..w {
            g[l * w + l] = lambda;
        }
        let (cols, vals) = s.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            let yj = y.row(j as usize);
            for l in 0..w {
                rhs[l] += v * yj[l];
                for k in 0..w {
                    g[l * w + k] += yj[l] * yj[k];
                }
            }
        }
        out.row_mut(i)
            .copy_from_slice(&cholesky_solve(&mut g, &rhs, w));
    }
    out
}

/// Solves `g x = rhs` for a symmetric positive definite `w x w` matrix `g` (overwritten by its
/// Cholesky factor).
fn cholesky_solve(g: &mut [f64], rhs: &[f64], w: usize) -> Vec<f64> {
    for j in 0..w {
        let mut d = g[j * w + j];
        for k in 0..j {
            d -= g[j * w + k] * g[j * w + k];
        }
        let d = d.sqrt();
        g[j * w + j] = d;
        for i in j + 1..w {
            let mut v = g[i * w + j];
            for k in 0..j {
                v -= g[i * w + k] * g[j * w + k];
            }
            g[i * w + j] = v / d;
        }
    }
    // Forward (L z = rhs), then backward (L^T x = z).
    let mut z = rhs.to_vec();
    for i in 0..w {
        for k in 0..i {
            z[i] -= g[i * w + k] * z[k];
        }
        z[i] /= g[i * w + i];
    }
    for i in (0..w).rev() {
        for k in i + 1..w {
            z[i] -= g[k * w + i] * z[k];
        }
        z[i] /= g[i * w + i];
    }
    z
}
