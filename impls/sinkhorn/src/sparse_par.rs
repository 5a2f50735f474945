//! `sparse-par`: the unfused SDDMM then SpMM of [`crate::sparse`], each step run by several
//! threads: the like-for-like baseline of [`crate::fused_par`] at every thread count, so the
//! fusion speedup over cores (the paper's Fig. 9) compares parallel with parallel.
//!
//! Each iteration, as `sparse`:
//! 1. **SDDMM** into the stored `v` (pattern of `c`, word-major): the nonzeros split into equal
//!    parts ([`nnz_balanced`], as `fused-par` splits them), each thread writing its own run of
//!    `v`, so no two threads write the same value.
//! 2. **Transpose**: `v^T`'s values gathered from `v` through the position each entry of `v^T`
//!    has in `v`. The pattern of `v` is `c`'s and never changes, so that position (and `v^T`'s
//!    document pointers and word rows) is found once per solve by the counting sort `sparse`
//!    runs every iteration; what stays per iteration is the traffic that fusion removes: `v`
//!    written, read, written again as `v^T` and read again.
//! 3. **SpMM** document by document over `v^T`: the documents split into parts of equal
//!    nonzeros, each thread writing the columns of `x` of its own documents (no accumulators, no
//!    reduction). Steps 2 and 3 run in one parallel pass, each thread gathering its documents'
//!    values just before its SpMM reads them.
//!
//! Results equal `sparse` bit for bit: every value of `v` and every column of `x` is computed by
//! the same operations in the same order, whichever thread does it.

use crate::flops::{final_flops, sddmm_spmm_flops};
use crate::fused::NonzeroRange;
use crate::iterate::DocState;
use crate::pool::Pool;
use crate::precompute::{QueryKernels, WordSet};
use crate::problem::{
    Control, IterationReport, PhaseTimes, SinkhornParams, WmdError, WmdOutput, WmdProblem,
};
use crate::row_kernel::{KernelTask, RowKernel};
use crate::sparse::{sddmm, spmm, transpose};
use crate::{iterate, precompute, row_kernel};
use crate::{Par, WmdSolver};
use parbench_common::partition::nnz_balanced;
use parbench_common::Csr;
use rayon::prelude::*;
use std::ops::Range;
use std::time::Instant;

/// The unfused parallel variant (`sparse-par`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SparseSddmmSpmmPar;

impl WmdSolver for SparseSddmmSpmmPar {
    fn name(&self) -> &'static str {
        "sparse-par"
    }

    fn is_parallel(&self) -> bool {
        true
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
        let c = problem.docs_by_word();
        let words = WordSet::used(c);
        let kernels = precompute::prepare(problem, params, &words, &pool, &mut phases, &mut flops);
        let mut v = SplitV::new(&words, c, pool.threads());
        let mut state = DocState::new(problem, params);

        let loop_start = Instant::now();
        let iterations =
            iterate::run_loop(params, &mut state, &pool, progress, &mut flops, |state| {
                state.clear_new();
                let (u, active) = (&state.u, &state.active);
                v.product(&pool, &kernels, u, active, &kernels.kr, &mut state.x_new);
                Ok(sddmm_spmm_flops(state.active_nnz, kernels.vs))
            })?;
        phases.add("loop", loop_start.elapsed().as_secs_f64());

        let distances = phases.time("final", || -> Result<Vec<f64>, WmdError> {
            let all = vec![true; problem.num_docs()];
            let mut kmv = vec![0.0; state.u.len()];
            v.product(&pool, &kernels, &state.u, &all, &kernels.km, &mut kmv);
            let wmd: Vec<f64> = kmv
                .chunks_exact(kernels.stride)
                .zip(state.u.chunks_exact(kernels.stride))
                .map(|(a, u)| row_kernel::dot(u, a))
                .collect();
            iterate::check_distances(&wmd, params.lambda)?;
            Ok(wmd)
        })?;
        flops += final_flops(c.nnz(), kernels.vs);
        Ok(WmdOutput {
            distances,
            iterations,
            phases,
            flops,
            thread_kernel_s: Vec::new(),
        })
    }
}

/// `v` and `v^T` with the parts each step splits them into.
struct SplitV<'a> {
    words: &'a WordSet,
    c: &'a Csr,
    /// The SDDMM's parts: runs of nonzeros of `c` (and `v`), equal in size.
    sddmm_parts: Vec<NonzeroRange>,
    /// The SpMM's parts: runs of whole documents, about equal in nonzeros.
    doc_parts: Vec<Range<usize>>,
    values: Vec<f64>,
    t_indptr: Vec<usize>,
    t_rows: Vec<u32>,
    /// Position in `values` of each entry of `v^T`.
    t_source: Vec<usize>,
    t_values: Vec<f64>,
}

impl<'a> SplitV<'a> {
    fn new(words: &'a WordSet, c: &'a Csr, parts: usize) -> SplitV<'a> {
        let n = c.ncols();
        let mut t_indptr = vec![0; n + 1];
        let mut t_rows = vec![0u32; c.nnz()];
        let mut t_source = vec![0usize; c.nnz()];
        transpose(words, c.indices(), &mut t_indptr, |slot, k, p| {
            t_rows[slot] = k as u32;
            t_source[slot] = p;
        });
        let sddmm_parts = nnz_balanced(&words.row_ptr, parts)
            .windows(2)
            .map(|w| NonzeroRange {
                row: w[0].row,
                first: w[0].nnz,
                end: w[1].nnz,
            })
            .collect();
        // Whole documents: each split point moves to the start of the document it falls in.
        let mut bounds: Vec<usize> = nnz_balanced(&t_indptr, parts)
            .iter()
            .map(|s| s.row.min(n))
            .collect();
        bounds[0] = 0;
        if let Some(last) = bounds.last_mut() {
            *last = n;
        }
        let doc_parts = bounds.windows(2).map(|w| w[0]..w[1].max(w[0])).collect();
        SplitV {
            words,
            c,
            sddmm_parts,
            doc_parts,
            values: vec![0.0; c.nnz()],
            t_indptr,
            t_rows,
            t_source,
            t_values: vec![0.0; c.nnz()],
        }
    }

    /// `out[:, j] = A @ (c .* 1 / (K^T u))[:, j]` for the active documents (`out` 0 there).
    fn product(
        &mut self,
        pool: &Pool,
        kernels: &QueryKernels,
        u: &[f64],
        active: &[bool],
        a: &[f64],
        out: &mut [f64],
    ) {
        let stride = kernels.stride;
        let (words, c) = (self.words, self.c);
        let mut runs = Vec::with_capacity(self.sddmm_parts.len());
        let mut rest = &mut self.values[..];
        for range in &self.sddmm_parts {
            let (run, tail) = rest.split_at_mut(range.end - range.first);
            runs.push((*range, run));
            rest = tail;
        }
        let sddmm_part = |(range, values): (NonzeroRange, &mut [f64])| {
            row_kernel::dispatch(
                stride,
                Sddmm {
                    words,
                    c,
                    kernels,
                    range,
                    u,
                    active,
                    values,
                },
            )
        };
        each_part(pool, runs, sddmm_part);

        let mut shares = Vec::with_capacity(self.doc_parts.len());
        let (mut t_rest, mut out_rest) = (&mut self.t_values[..], &mut *out);
        for docs in &self.doc_parts {
            let nnz = self.t_indptr[docs.end] - self.t_indptr[docs.start];
            let (t_values, t_tail) = t_rest.split_at_mut(nnz);
            let (out, out_tail) = out_rest.split_at_mut(docs.len() * stride);
            shares.push((docs.clone(), t_values, out));
            (t_rest, out_rest) = (t_tail, out_tail);
        }
        let (values, t_indptr) = (&self.values, &self.t_indptr);
        let (t_rows, t_source) = (&self.t_rows, &self.t_source);
        let spmm_part = |(docs, t_values, out): (Range<usize>, &mut [f64], &mut [f64])| {
            let span = t_indptr[docs.start]..t_indptr[docs.end];
            for (t, &p) in t_values.iter_mut().zip(&t_source[span]) {
                *t = values[p];
            }
            row_kernel::dispatch(
                stride,
                Spmm {
                    docs,
                    t_indptr,
                    t_rows,
                    t_values,
                    a,
                    stride,
                    active,
                    out,
                },
            )
        };
        each_part(pool, shares, spmm_part);
    }
}

/// Runs `f` on every part: on the pool's threads when it has several, in order otherwise (no
/// rayon scope for a sequential solve).
fn each_part<T: Send>(pool: &Pool, parts: Vec<T>, f: impl Fn(T) + Send + Sync) {
    if pool.threads() > 1 && parts.len() > 1 {
        pool.run(|| parts.into_par_iter().for_each(f));
    } else {
        parts.into_iter().for_each(f);
    }
}

struct Sddmm<'a> {
    words: &'a WordSet,
    c: &'a Csr,
    kernels: &'a QueryKernels,
    range: NonzeroRange,
    u: &'a [f64],
    active: &'a [bool],
    values: &'a mut [f64],
}

impl KernelTask for Sddmm<'_> {
    type Output = ();
    #[inline(always)]
    fn run<K: RowKernel>(self, kernel: K) {
        let Sddmm {
            words,
            c,
            kernels,
            range,
            u,
            active,
            values,
        } = self;
        let (docs, weights) = (c.indices(), c.values());
        sddmm(
            kernel, words, range, docs, weights, kernels, u, active, values,
        );
    }
}

struct Spmm<'a> {
    docs: Range<usize>,
    t_indptr: &'a [usize],
    t_rows: &'a [u32],
    t_values: &'a [f64],
    a: &'a [f64],
    stride: usize,
    active: &'a [bool],
    out: &'a mut [f64],
}

impl KernelTask for Spmm<'_> {
    type Output = ();
    #[inline(always)]
    fn run<K: RowKernel>(self, kernel: K) {
        let Spmm {
            docs,
            t_indptr,
            t_rows,
            t_values,
            a,
            stride,
            active,
            out,
        } = self;
        spmm(
            kernel, docs, t_indptr, t_rows, t_values, a, stride, active, out,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{generate, SyntheticSpec};
    use crate::SparseSddmmSpmm;

    fn spec(query_words: usize, docs: usize) -> SyntheticSpec {
        SyntheticSpec {
            vocab: 700,
            dim: 16,
            docs,
            words_per_doc: 12,
            query_words,
            zipf_exponent: 1.0,
            seed: 11 + query_words as u64,
        }
    }

    /// Bit for bit `sparse`'s distances and iterations, for strides with and without a vector
    /// kernel, with and without a tolerance, on thread counts that do and do not divide the
    /// documents, and with more threads than documents.
    #[test]
    fn equals_sparse_bit_for_bit() {
        for (vs, docs) in [(3, 300), (19, 301), (37, 250), (5, 2)] {
            let problem = generate(&spec(vs, docs)).unwrap();
            for tol in [None, Some(1e-9)] {
                let params = SinkhornParams {
                    lambda: 4.0,
                    max_iter: 20,
                    tol,
                };
                let quiet = &mut |_: &IterationReport| Control::Continue;
                let sparse = SparseSddmmSpmm
                    .solve(&problem, &params, Par::Seq, quiet)
                    .unwrap();
                for threads in [1, 2, 3] {
                    let par = SparseSddmmSpmmPar
                        .solve(&problem, &params, Par::threads(threads), quiet)
                        .unwrap();
                    let what = format!("vs {vs}, {docs} docs, {threads} threads, tol {tol:?}");
                    assert_eq!(par.iterations, sparse.iterations, "{what}");
                    assert_eq!(par.distances, sparse.distances, "{what}");
                    assert_eq!(par.flops, sparse.flops, "{what}");
                }
            }
        }
    }

    /// The parts cover every nonzero and every document once, in order.
    #[test]
    fn parts_tile_the_nonzeros_and_the_documents() {
        let problem = generate(&spec(7, 97)).unwrap();
        let c = problem.docs_by_word();
        let words = WordSet::used(c);
        for parts in [1, 2, 3, 8, 200] {
            let v = SplitV::new(&words, c, parts);
            let mut next = 0;
            for range in &v.sddmm_parts {
                assert_eq!(range.first, next, "{parts} parts");
                assert!(range.end >= range.first);
                next = range.end;
            }
            assert_eq!(next, c.nnz());
            let mut next = 0;
            for docs in &v.doc_parts {
                assert_eq!(docs.start, next, "{parts} parts");
                next = docs.end;
            }
            assert_eq!(next, problem.num_docs());
            // `v^T`'s sources are a permutation of the nonzeros.
            let mut seen = vec![false; c.nnz()];
            for &p in &v.t_source {
                assert!(!seen[p]);
                seen[p] = true;
            }
        }
    }
}
