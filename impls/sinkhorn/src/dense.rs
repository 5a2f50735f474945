//! The paper's baseline: the Python code's dense products, done for real.
//!
//! Every iteration computes the full dense `V x N` product `K^T @ u` with a threaded GEMM
//! (`2 V v_s N` flops, as MKL did under numpy), then keeps only the entries where `c` is nonzero
//! (`v = c ./ (K^T u)`) and multiplies `x = (K / r) @ v`. `M` and `K` cover the whole vocabulary,
//! as in the Python. The dense product is the point of the baseline: at the paper's shape it is
//! ~2e10 flops and 4 GB of output per iteration, against ~7e6 useful dot products.
//!
//! To bound memory, documents are processed in column blocks of at most [`BLOCK_BYTES`] of dense
//! product: block product (GEMM, column-major so each document's column is contiguous), mask
//! (gather at the block's nonzeros, document by document), SpMM (document by document, so threads
//! never write the same `x` column). Phases: `loop_dense_product`, `loop_mask`, `loop_spmm` inside
//! `loop`. The final step uses the same dense product, then `(K .* M) @ v` and the column sums of
//! `u .* (...)`.

use crate::iterate::DocState;
use crate::pool::Pool;
use crate::precompute::{QueryKernels, WordSet};
use crate::problem::{
    Control, IterationReport, PhaseTimes, SinkhornParams, WmdError, WmdOutput, WmdProblem,
};
use crate::{flops, iterate, precompute, row_kernel};
use crate::{Par, WmdSolver, Work};
use rayon::prelude::*;
use std::time::Instant;

/// The dense baseline (`dense`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Dense;

/// Bytes of dense `K^T @ u` held at once (one block of documents).
const BLOCK_BYTES: usize = 128 << 20;
/// Documents per block at most (beyond this the GEMM gains nothing).
const MAX_BLOCK_DOCS: usize = 512;

impl WmdSolver for Dense {
    fn name(&self) -> &'static str {
        "dense"
    }

    fn is_parallel(&self) -> bool {
        true
    }

    fn work(&self, problem: &WmdProblem, out: &WmdOutput, par: Par) -> Work {
        let block = block_docs(problem.vocab(), problem.num_docs());
        flops::dense_work(problem, out, self.threads(par), block)
    }

    fn solve(
        &self,
        problem: &WmdProblem,
        params: &SinkhornParams,
        par: Par,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<WmdOutput, WmdError> {
        params.validate()?;
        let pool = Pool::new(par)?;
        let mut phases = PhaseTimes::default();
        let mut flops = 0.0;
        let words = WordSet::all(problem.docs_by_word());
        let kernels = precompute::prepare(problem, params, &words, &pool, &mut phases, &mut flops);

        let n = problem.num_docs();
        let vocab = problem.vocab();
        let vs = kernels.vs;
        let block_docs = block_docs(vocab, n);
        let mut dense = vec![0.0; vocab * block_docs];
        let mut v = vec![0.0; problem.nnz()];
        let mut state = DocState::new(problem, params);

        let loop_start = Instant::now();
        phases.add("loop", 0.0);
        let iterations =
            iterate::run_loop(params, &mut state, &pool, progress, &mut flops, |state| {
                state.clear_new();
                for j0 in (0..n).step_by(block_docs) {
                    let j1 = (j0 + block_docs).min(n);
                    phases.time("loop_dense_product", || {
                        dense_product(
                            &kernels,
                            &state.u[j0 * kernels.stride..],
                            j1 - j0,
                            vocab,
                            &mut dense,
                            &pool,
                        )
                    });
                    phases.time("loop_mask", || {
                        mask(problem, &dense, vocab, j0, j1, &state.active, &mut v, &pool)
                    });
                    phases.time("loop_spmm", || {
                        spmm(
                            problem,
                            &kernels,
                            &v,
                            j0,
                            &state.active[j0..j1],
                            &mut state.x_new,
                            &pool,
                        )
                    });
                }
                Ok(dense_flops(vocab, vs, n) + (state.active_nnz * (2 + 2 * vs)) as f64)
            })?;
        phases.add("loop", loop_start.elapsed().as_secs_f64());

        let distances = phases.time("final", || -> Result<Vec<f64>, WmdError> {
            let all = vec![true; n];
            let mut acc = vec![0.0; n * kernels.stride];
            for j0 in (0..n).step_by(block_docs) {
                let j1 = (j0 + block_docs).min(n);
                dense_product(
                    &kernels,
                    &state.u[j0 * kernels.stride..],
                    j1 - j0,
                    vocab,
                    &mut dense,
                    &pool,
                );
                mask(problem, &dense, vocab, j0, j1, &all, &mut v, &pool);
                spmm_with(
                    problem,
                    &kernels.km,
                    kernels.stride,
                    &v,
                    j0,
                    &all[j0..j1],
                    &mut acc,
                    &pool,
                );
            }
            let d: Vec<f64> = acc
                .chunks_exact(kernels.stride)
                .zip(state.u.chunks_exact(kernels.stride))
                .map(|(a, u)| row_kernel::dot(u, a))
                .collect();
            iterate::check_distances(&d, params.lambda)?;
            Ok(d)
        })?;
        flops +=
            dense_flops(vocab, vs, n) + (problem.nnz() * (2 + 2 * vs)) as f64 + (2 * n * vs) as f64;
        Ok(WmdOutput {
            distances,
            iterations,
            phases,
            flops,
            thread_kernel_s: Vec::new(),
        })
    }
}

/// Documents per column block of the dense product.
fn block_docs(vocab: usize, docs: usize) -> usize {
    (BLOCK_BYTES / (8 * vocab))
        .clamp(1, MAX_BLOCK_DOCS)
        .min(docs)
}

/// Flops of one dense `V x v_s` by `v_s x N` product.
fn dense_flops(vocab: usize, vs: usize, docs: usize) -> f64 {
    2.0 * vocab as f64 * vs as f64 * docs as f64
}

/// `dense[:, 0..b] = K^T @ u[:, block]`, column-major (`dense[jj * V + i]`).
fn dense_product(
    kernels: &QueryKernels,
    u: &[f64],
    b: usize,
    vocab: usize,
    dense: &mut [f64],
    pool: &Pool,
) {
    let stride = kernels.stride;
    assert!(
        u.len() >= b * stride && dense.len() >= b * vocab && kernels.kt.len() >= vocab * stride
    );
    let parallelism = if pool.threads() > 1 {
        gemm::Parallelism::Rayon(pool.threads())
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: dst is `V x b` column-major inside `dense` (checked above), lhs is `K^T`, `V x v_s`
    // with row stride `stride`, rhs is `u` for the block, `v_s x b` with column stride `stride`;
    // all extents were checked against the slices, and `dense` is exclusively borrowed.
    pool.run(|| unsafe {
        gemm::gemm(
            vocab,
            b,
            kernels.vs,
            dense.as_mut_ptr(),
            vocab as isize,
            1,
            false,
            kernels.kt.as_ptr(),
            1,
            stride as isize,
            u.as_ptr(),
            stride as isize,
            1,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
    });
}

/// `v = c ./ dense` at the nonzeros of the block's active documents, stored in the order of
/// `docs_by_doc` (document-major).
#[allow(clippy::too_many_arguments)]
fn mask(
    problem: &WmdProblem,
    dense: &[f64],
    vocab: usize,
    j0: usize,
    j1: usize,
    active: &[bool],
    v: &mut [f64],
    pool: &Pool,
) {
    let by_doc = problem.docs_by_doc();
    let indptr = by_doc.indptr();
    let (lo, hi) = (indptr[j0], indptr[j1]);
    let one_doc = |j: usize, out: &mut [f64]| {
        let (words, weights) = by_doc.row(j);
        let col = &dense[(j - j0) * vocab..(j - j0 + 1) * vocab];
        for ((o, &w), &c) in out.iter_mut().zip(words).zip(weights) {
            *o = c / col[w as usize];
        }
    };
    let v = &mut v[lo..hi];
    // Split v by documents.
    let mut pieces: Vec<(usize, &mut [f64])> = Vec::with_capacity(j1 - j0);
    let mut rest = v;
    for j in j0..j1 {
        let (head, tail) = rest.split_at_mut(indptr[j + 1] - indptr[j]);
        if active[j] {
            pieces.push((j, head));
        }
        rest = tail;
    }
    if pool.threads() > 1 {
        pool.run(|| pieces.into_par_iter().for_each(|(j, out)| one_doc(j, out)));
    } else {
        pieces.into_iter().for_each(|(j, out)| one_doc(j, out));
    }
}

/// `x_new[:, j] = (K / r) @ v[:, j]` for the block's active documents.
fn spmm(
    problem: &WmdProblem,
    kernels: &QueryKernels,
    v: &[f64],
    j0: usize,
    active: &[bool],
    x_new: &mut [f64],
    pool: &Pool,
) {
    spmm_with(
        problem,
        &kernels.kr,
        kernels.stride,
        v,
        j0,
        active,
        x_new,
        pool,
    )
}

/// `out[:, j] += A @ v[:, j]` for word-major `A` over the documents `j0 .. j0 + active.len()`.
#[allow(clippy::too_many_arguments)]
fn spmm_with(
    problem: &WmdProblem,
    a: &[f64],
    stride: usize,
    v: &[f64],
    j0: usize,
    active: &[bool],
    out: &mut [f64],
    pool: &Pool,
) {
    let by_doc = problem.docs_by_doc();
    let indptr = by_doc.indptr();
    let one_doc = |(jj, out): (usize, &mut [f64])| {
        let j = j0 + jj;
        if !active[jj] {
            return;
        }
        let (words, _) = by_doc.row(j);
        for (&w, &vij) in words.iter().zip(&v[indptr[j]..indptr[j + 1]]) {
            let w = w as usize;
            row_kernel::axpy(out, vij, &a[w * stride..(w + 1) * stride]);
        }
    };
    let block = &mut out[j0 * stride..(j0 + active.len()) * stride];
    if pool.threads() > 1 {
        pool.run(|| block.par_chunks_mut(stride).enumerate().for_each(one_doc));
    } else {
        block.chunks_mut(stride).enumerate().for_each(one_doc);
    }
}
