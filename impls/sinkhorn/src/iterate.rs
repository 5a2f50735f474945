//! The Sinkhorn iteration shared by the variants: the per-document `x`/`u` update with the
//! tolerance rule, the state of every document, and the loop that drives the iterations.
//!
//! Cost of the update: `O(v_s)` per active document and iteration (its reciprocals vectorized).

use crate::buffer::ZeroedBuf;
use crate::flops::update_flops;
use crate::pool::Pool;
use crate::problem::{Control, IterationReport, SinkhornParams, WmdError, WmdProblem};
use crate::real::Real;
use crate::row_kernel::{padded_stride, vectorized};
use rayon::prelude::*;

/// Updates one document after an iteration: checks the new column, measures its change
/// `max_s |x_new - x| / max_s |x_new|`, then `x = x_new`, `u = 1 / x`. Only the first `vs` entries
/// are touched, so the padding of `u` stays 0. A zero or non-finite `x` means `exp(-lambda M)`
/// underflowed somewhere upstream.
///
/// The reciprocals get a loop of their own so that it vectorizes: `v_s` scalar divisions were
/// most of the cost of an update (~50 ns per document). Maxima and quotients are exact, so the
/// results do not depend on how the loops are split.
#[inline]
pub fn update_doc<E: Real>(
    x: &mut [E],
    u: &mut [E],
    x_new: &[E],
    vs: usize,
    lambda: f64,
) -> Result<f64, WmdError> {
    let (x, u, x_new) = (&mut x[..vs], &mut u[..vs], &x_new[..vs]);
    let mut diff = E::ZERO;
    let mut scale = E::ZERO;
    let mut valid = true;
    // No early return and plain comparisons instead of NaN-aware maxima, so that the loop
    // vectorizes: it sits on the chain from one iteration's last axpy to the next one's first
    // dot product. A NaN makes `valid` false, so the maxima are only used when they are exact.
    for (&xn, &xo) in x_new.iter().zip(x.iter()) {
        valid &= xn.is_finite() & (xn > E::ZERO);
        let d = (xn - xo).abs();
        diff = if d > diff { d } else { diff };
        scale = if xn > scale { xn } else { scale };
    }
    if !valid {
        return Err(WmdError::Underflow { lambda });
    }
    x.copy_from_slice(x_new);
    for (u, &xn) in u.iter_mut().zip(x_new) {
        *u = E::ONE / xn;
    }
    Ok((diff / scale).to_f64())
}

/// [`update_doc`] for an active document followed by the tolerance rule: returns the change and
/// whether the document stays active (`active` is cleared when it converged).
#[inline]
pub fn settle_doc(
    x: &mut [f64],
    u: &mut [f64],
    x_new: &[f64],
    active: &mut bool,
    vs: usize,
    tol: Option<f64>,
    lambda: f64,
) -> Result<(f64, bool), WmdError> {
    let change = update_doc(x, u, x_new, vs, lambda)?;
    let converged = tol.is_some_and(|t| change <= t);
    if converged {
        *active = false;
    }
    Ok((change, !converged))
}

/// The starting point `x = 1 / v_s`, `u = 1 / x` for one document.
#[inline]
pub fn init_doc<E: Real>(x: &mut [E], u: &mut [E], vs: usize) {
    for s in 0..vs {
        x[s] = E::from_f64(1.0 / vs as f64);
        u[s] = E::ONE / x[s];
    }
}

/// `x`, `u` and the scratch `x_new` of every document, document-major (`N x stride`), with the
/// tolerance bookkeeping.
#[derive(Clone, Debug)]
pub struct DocState {
    /// Query words `v_s`: the entries of a document's `x` and `u` that are used.
    pub vs: usize,
    /// Row length of `x`, `u` and `x_new` (`v_s` padded to a multiple of
    /// [`crate::row_kernel::LANES`]).
    pub stride: usize,
    /// The current `x`, `N x stride`; padding entries are 0.
    pub x: ZeroedBuf,
    /// `u = 1 / x` over the first `v_s` entries of each row; the padding stays 0 so that padded dot
    /// products add exact zeros.
    pub u: ZeroedBuf,
    /// Where an iteration accumulates the new `x` of active documents.
    pub x_new: ZeroedBuf,
    /// Documents still iterating.
    pub active: Vec<bool>,
    /// Number of `true` entries of `active`.
    pub num_active: usize,
    /// Nonzeros of the active documents (the work of one iteration).
    pub active_nnz: usize,
    doc_len: Vec<usize>,
    tol: Option<f64>,
    lambda: f64,
}

impl DocState {
    /// Every document at the starting point `x = 1 / v_s` ([`init_doc`]), all active, with the
    /// tolerance and lambda of `params`.
    pub fn new(problem: &WmdProblem, params: &SinkhornParams) -> DocState {
        let n = problem.num_docs();
        let vs = problem.query().len();
        let stride = padded_stride(vs);
        let mut x = ZeroedBuf::zeroed(n * stride);
        let mut u = ZeroedBuf::zeroed(n * stride);
        for (x, u) in x.chunks_exact_mut(stride).zip(u.chunks_exact_mut(stride)) {
            init_doc(x, u, vs);
        }
        let doc_len: Vec<usize> = problem
            .docs_by_doc()
            .indptr()
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect();
        DocState {
            vs,
            stride,
            x,
            u,
            x_new: ZeroedBuf::zeroed(n * stride),
            active: vec![true; n],
            num_active: n,
            active_nnz: problem.nnz(),
            doc_len,
            tol: params.tol,
            lambda: params.lambda,
        }
    }

    /// Sets `x_new` of the active documents to 0 (inactive ones are left alone).
    pub fn clear_new(&mut self) {
        for (xn, &a) in self.x_new.chunks_exact_mut(self.stride).zip(&self.active) {
            if a {
                xn.fill(0.0);
            }
        }
    }

    /// Moves `x_new` into `x` and `u` for every active document and freezes the converged ones.
    /// Returns the largest change over the documents that ran this iteration.
    pub fn finish_iteration(&mut self, pool: &Pool) -> Result<f64, WmdError> {
        let (vs, stride, tol, lambda) = (self.vs, self.stride, self.tol, self.lambda);
        const DOCS: usize = 256;
        type Docs<'a> = (
            (((&'a mut [f64], &'a mut [f64]), &'a [f64]), &'a mut [bool]),
            &'a [usize],
        );
        let work = |((((x, u), xn), active), len): Docs| -> Result<(f64, usize, usize), WmdError> {
            vectorized(
                #[inline(always)]
                || -> Result<(f64, usize, usize), WmdError> {
                    let mut max_change = 0.0f64;
                    let (mut still, mut nnz) = (0, 0);
                    for ((((x, u), xn), a), &len) in x
                        .chunks_exact_mut(stride)
                        .zip(u.chunks_exact_mut(stride))
                        .zip(xn.chunks_exact(stride))
                        .zip(active.iter_mut())
                        .zip(len)
                    {
                        if !*a {
                            continue;
                        }
                        let change = update_doc(x, u, xn, vs, lambda)?;
                        max_change = max_change.max(change);
                        if tol.is_some_and(|t| change <= t) {
                            *a = false;
                        } else {
                            still += 1;
                            nnz += len;
                        }
                    }
                    Ok((max_change, still, nnz))
                },
            )
        };
        let many = self.active.len() > DOCS;
        let chunks = self
            .x
            .chunks_mut(DOCS * stride)
            .zip(self.u.chunks_mut(DOCS * stride))
            .zip(self.x_new.chunks(DOCS * stride))
            .zip(self.active.chunks_mut(DOCS))
            .zip(self.doc_len.chunks(DOCS));
        let parts: Vec<(f64, usize, usize)> = if pool.threads() > 1 && many {
            let chunks: Vec<_> = chunks.collect();
            pool.run(|| chunks.into_par_iter().map(work).collect::<Result<_, _>>())?
        } else {
            chunks.map(work).collect::<Result<_, _>>()?
        };
        self.num_active = parts.iter().map(|p| p.1).sum();
        self.active_nnz = parts.iter().map(|p| p.2).sum();
        Ok(parts.iter().fold(0.0, |m, p| m.max(p.0)))
    }

    /// Per-document nonzero counts.
    pub fn doc_lens(&self) -> &[usize] {
        &self.doc_len
    }

    /// The stopping tolerance and lambda (for [`settle_doc`]).
    pub fn tol_and_lambda(&self) -> (Option<f64>, f64) {
        (self.tol, self.lambda)
    }
}

/// The Sinkhorn loop shared by the variants that sweep all documents once per iteration: `step`
/// fills `x_new` of the active documents, then the driver updates `x`, `u`, applies the tolerance,
/// reports, and stops after `max_iter` iterations, when every document has converged, or when the
/// callback says so. Returns the iterations run. `step` returns the flops it did; they and the
/// update's are added to `flops`.
pub fn run_loop(
    params: &SinkhornParams,
    state: &mut DocState,
    pool: &Pool,
    progress: &mut dyn FnMut(&IterationReport) -> Control,
    flops: &mut f64,
    mut step: impl FnMut(&mut DocState) -> Result<f64, WmdError>,
) -> Result<usize, WmdError> {
    let mut iterations = 0;
    while iterations < params.max_iter && state.num_active > 0 {
        *flops += step(state)?;
        *flops += update_flops(state.num_active, state.vs);
        let max_change = state.finish_iteration(pool)?;
        iterations += 1;
        let report = IterationReport {
            iteration: iterations,
            max_iter: params.max_iter,
            active_docs: state.num_active,
            max_change,
        };
        if progress(&report) == Control::Stop {
            break;
        }
    }
    Ok(iterations)
}

/// Rejects a non-finite distance (the final step's own underflow check).
pub fn check_distances(distances: &[f64], lambda: f64) -> Result<(), WmdError> {
    if distances.iter().all(|d| d.is_finite()) {
        Ok(())
    } else {
        Err(WmdError::Underflow { lambda })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_reports_relative_change_and_underflow() {
        let mut x = vec![0.5, 0.5, 0.0, 0.0];
        let mut u = vec![2.0, 2.0, 0.0, 0.0];
        let change = update_doc(&mut x, &mut u, &[0.25, 1.0, 0.0, 0.0], 2, 1.0).unwrap();
        assert_eq!(change, 0.5);
        assert_eq!(u, vec![4.0, 1.0, 0.0, 0.0]);
        assert_eq!(
            update_doc(&mut x, &mut u, &[0.0, 1.0, 0.0, 0.0], 2, 3.0),
            Err(WmdError::Underflow { lambda: 3.0 })
        );
    }
}
