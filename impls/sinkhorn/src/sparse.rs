//! SDDMM, then an explicit transpose, then SpMM: the Python's sparse steps done one after the other
//! (the paper's unfused C++), sequential.
//!
//! Each iteration: (1) SDDMM at the nonzeros of `c`, word by word, into a stored `v` with the
//! pattern of `c` (`v_ij = c_ij / (K^T[i] . u_j)`); (2) the transpose `v^T` (a counting sort over
//! all nonzeros, indices and values, every iteration, as `v.T` does in scipy); (3) SpMM
//! `x[:, j] = sum_i v_ij (K / r)^T[i]`, document by document over `v^T`. Same flops as the fused
//! kernel, but `v` is written, read, written again and read again: about `4 x 12` extra bytes per
//! nonzero and two more passes over the CSR per iteration. That traffic is what fusing removes.
//! The final step does the same with `(K .* M)` into a `v_s x N` product, then `u .* ...` summed.

use crate::flops::{final_flops, sddmm_spmm_flops};
use crate::fused::NonzeroRange;
use crate::iterate::DocState;
use crate::pool::Pool;
use crate::precompute::{QueryKernels, WordSet};
use crate::problem::{
    Control, IterationReport, PhaseTimes, SinkhornParams, WmdError, WmdOutput, WmdProblem,
};
use crate::row_kernel::{KernelTask, RowKernel};
use crate::{iterate, precompute, row_kernel};
use crate::{Par, WmdSolver};
use std::time::Instant;

/// The unfused sequential variant (`sparse`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SparseSddmmSpmm;

/// `v` and its transpose, reused across iterations.
struct SparseV {
    values: Vec<f64>,
    t_indptr: Vec<usize>,
    /// Selected-row index (position in the [`WordSet`]) of each nonzero of `v^T`.
    t_rows: Vec<u32>,
    t_values: Vec<f64>,
}

impl SparseV {
    fn new(nnz: usize, docs: usize) -> SparseV {
        SparseV {
            values: vec![0.0; nnz],
            t_indptr: vec![0; docs + 1],
            t_rows: vec![0; nnz],
            t_values: vec![0.0; nnz],
        }
    }

    /// `v^T`, indices and values, every iteration.
    fn transpose(&mut self, words: &WordSet, c_docs: &[u32]) {
        let (t_rows, t_values, values) = (&mut self.t_rows, &mut self.t_values, &self.values);
        transpose(words, c_docs, &mut self.t_indptr, |slot, k, p| {
            t_rows[slot] = k as u32;
            t_values[slot] = values[p];
        });
    }
}

/// The transpose of the word-major pattern `c` (restricted to `words`) by a counting sort on the
/// document index: `t_indptr` gets where each document's nonzeros start in `v^T` (one entry
/// more than documents), and `place(slot, k, p)` is called for every nonzero `p` of row `k`
/// with its slot in `v^T` (rows come out in word order within a document).
#[inline(always)]
pub(crate) fn transpose(
    words: &WordSet,
    c_docs: &[u32],
    t_indptr: &mut [usize],
    mut place: impl FnMut(usize, usize, usize),
) {
    // Counts two places on, so that after the prefix sums `t_indptr[j + 1]` is where document
    // `j` starts: the placement's cursor, which it leaves where `j` ends, `t_indptr`'s final
    // value. No second array of cursors to allocate on every call (`sparse` transposes every
    // iteration). The last document's count moves no start, so it is not kept.
    t_indptr.fill(0);
    for &j in c_docs {
        if let Some(count) = t_indptr.get_mut(j as usize + 2) {
            *count += 1;
        }
    }
    for j in 2..t_indptr.len() {
        t_indptr[j] += t_indptr[j - 1];
    }
    for (k, row) in words.row_ptr.windows(2).enumerate() {
        for (p, &j) in (row[0]..row[1]).zip(&c_docs[row[0]..row[1]]) {
            let cursor = &mut t_indptr[j as usize + 1];
            place(*cursor, k, p);
            *cursor += 1;
        }
    }
}

/// The SDDMM over a run of nonzeros: `values[p - range.first] = c_p / (K^T[i] . u_j)` at every
/// nonzero `p` of an active document in `range` (0 at the others).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sddmm<K: RowKernel>(
    kernel: K,
    words: &WordSet,
    range: NonzeroRange,
    c_docs: &[u32],
    c_values: &[f64],
    kernels: &QueryKernels,
    u: &[f64],
    active: &[bool],
    values: &mut [f64],
) {
    let stride = kernels.stride;
    // The row walk of `fused`'s `for_each_nonzero`, written out: through a closure (per
    // nonzero or per row) this SDDMM took 2.2-2.4x the instructions in `gate_sinkhorn` (221M and
    // 244M against 101M), a cost `fused`'s kernels, which use it, do not show; why was not
    // pinned down.
    let (mut k, mut p) = (range.row, range.first);
    while p < range.end {
        let row_end = words.row_ptr[k + 1].min(range.end);
        let kt = kernels.kt_row(k);
        let out = &mut values[p - range.first..row_end - range.first];
        let (docs, weights) = (&c_docs[p..row_end], &c_values[p..row_end]);
        for ((v, &j), &c) in out.iter_mut().zip(docs).zip(weights) {
            let j = j as usize;
            *v = if active[j] {
                c / kernel.dot(kt, &u[j * stride..(j + 1) * stride])
            } else {
                0.0
            };
        }
        p = row_end;
        k += 1;
    }
}

/// The SpMM over documents `docs`: `out[:, j] += A @ v[:, j]` for the active ones, `A`
/// word-major, `v^T` given by its document pointers, rows and values (`t_values` starting at
/// document `docs.start`'s first nonzero, `out` at its column).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn spmm<K: RowKernel>(
    kernel: K,
    docs: std::ops::Range<usize>,
    t_indptr: &[usize],
    t_rows: &[u32],
    t_values: &[f64],
    a: &[f64],
    stride: usize,
    active: &[bool],
    out: &mut [f64],
) {
    let base = t_indptr[docs.start];
    for (j, out) in docs.zip(out.chunks_exact_mut(stride)) {
        if !active[j] {
            continue;
        }
        for q in t_indptr[j]..t_indptr[j + 1] {
            let k = t_rows[q] as usize;
            kernel.axpy(out, t_values[q - base], &a[k * stride..(k + 1) * stride]);
        }
    }
}

/// One SDDMM, transpose, SpMM sequence: `out[:, j] = A @ (c .* 1 / (K^T u))[:, j]` for the active
/// documents (`out` must be 0 there).
struct SparseProduct<'a> {
    v: &'a mut SparseV,
    words: &'a WordSet,
    c: &'a parbench_common::Csr,
    kernels: &'a QueryKernels,
    u: &'a [f64],
    active: &'a [bool],
    a: &'a [f64],
    out: &'a mut [f64],
}

impl KernelTask for SparseProduct<'_> {
    type Output = ();
    #[inline(always)]
    fn run<K: RowKernel>(self, kernel: K) {
        let SparseProduct {
            v,
            words,
            c,
            kernels,
            u,
            active,
            a,
            out,
        } = self;
        let all = NonzeroRange {
            row: 0,
            first: 0,
            end: c.nnz(),
        };
        let (docs, values) = (c.indices(), c.values());
        sddmm(
            kernel,
            words,
            all,
            docs,
            values,
            kernels,
            u,
            active,
            &mut v.values,
        );
        v.transpose(words, docs);
        let (t_indptr, t_rows, t_values) = (&v.t_indptr, &v.t_rows, &v.t_values);
        let stride = kernels.stride;
        let n = t_indptr.len() - 1;
        spmm(
            kernel,
            0..n,
            t_indptr,
            t_rows,
            t_values,
            a,
            stride,
            active,
            out,
        );
    }
}

impl WmdSolver for SparseSddmmSpmm {
    fn name(&self) -> &'static str {
        "sparse"
    }

    fn solve(
        &self,
        problem: &WmdProblem,
        params: &SinkhornParams,
        _par: Par,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<WmdOutput, WmdError> {
        params.validate()?;
        let pool = Pool::new(Par::Seq)?;
        let mut phases = PhaseTimes::default();
        let mut flops = 0.0;
        let c = problem.docs_by_word();
        let words = WordSet::used(c);
        let kernels = precompute::prepare(problem, params, &words, &pool, &mut phases, &mut flops);
        let stride = kernels.stride;
        let mut v = SparseV::new(c.nnz(), problem.num_docs());
        let mut state = DocState::new(problem, params);

        let loop_start = Instant::now();
        let iterations =
            iterate::run_loop(params, &mut state, &pool, progress, &mut flops, |state| {
                state.clear_new();
                let (u, active, a) = (&state.u, &state.active, &kernels.kr);
                let task = SparseProduct {
                    v: &mut v,
                    words: &words,
                    c,
                    kernels: &kernels,
                    u,
                    active,
                    a,
                    out: &mut state.x_new,
                };
                row_kernel::dispatch(stride, task);
                Ok(sddmm_spmm_flops(state.active_nnz, kernels.vs))
            })?;
        phases.add("loop", loop_start.elapsed().as_secs_f64());

        let distances = phases.time("final", || -> Result<Vec<f64>, WmdError> {
            let all = vec![true; problem.num_docs()];
            let mut kmv = vec![0.0; state.u.len()];
            let (u, a) = (&state.u, &kernels.km);
            let task = SparseProduct {
                v: &mut v,
                words: &words,
                c,
                kernels: &kernels,
                u,
                active: &all,
                a,
                out: &mut kmv,
            };
            row_kernel::dispatch(stride, task);
            let wmd: Vec<f64> = kmv
                .chunks_exact(stride)
                .zip(state.u.chunks_exact(stride))
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
