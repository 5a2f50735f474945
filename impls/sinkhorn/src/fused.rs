//! The paper's fused SDDMM_SpMM kernels, sequential.
//!
//! Type 1 (the loop): for every word row `i` of `c` and each of its nonzeros `(i, j)`,
//! `w = c_ij / (K^T[i] . u[:, j])` (the SDDMM) is consumed at once by
//! `x[:, j] += w * (K / r)^T[i]` (the SpMM): `v` is never stored, the CSR is read once per
//! iteration, and the row pair `K^T[i]`, `(K / r)^T[i]` stays in L1 while the row's nonzeros use it.
//! Type 2 (the final step, three dense and two sparse inputs): per nonzero,
//! `wmd_j += (c_ij / (K^T[i] . u_j)) * ((K .* M)^T[i] . u_j)`, which is
//! `sum_s u[s, j] ((K .* M) v)[s, j]` regrouped so that nothing of size `v_s x N` is written.
//!
//! Cost per iteration: `nnz (4 v_s + 1)` flops, reading the CSR once (12 bytes per nonzero) and
//! `x`, `u` columns at random (document-major, `stride` contiguous values each, `N x stride`
//! doubles: 800 KB at the paper's shape, in L2). `M` and `K` cover only the words some target
//! document uses.

use crate::flops::{final_flops, sddmm_spmm_flops};
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

/// The fused sequential variant (`fused`).
#[derive(Clone, Copy, Debug, Default)]
pub struct FusedSddmmSpmm;

/// A contiguous run of the nonzeros of `c` (restricted to a [`WordSet`]): nonzeros
/// `first .. end`, the first of which lies in selected row `row`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NonzeroRange {
    pub row: usize,
    pub first: usize,
    pub end: usize,
}

/// Calls `f(k, p)` for every nonzero `p` of the range with its selected row `k`, row by row.
#[inline(always)]
fn for_each_nonzero(words: &WordSet, range: NonzeroRange, mut f: impl FnMut(usize, usize)) {
    let mut k = range.row;
    let mut p = range.first;
    while p < range.end {
        let row_end = words.row_ptr[k + 1].min(range.end);
        while p < row_end {
            f(k, p);
            p += 1;
        }
        k += 1;
    }
}

/// SDDMM_SpMM type 1 over a range of nonzeros: `acc[:, j] += (c_ij / (K^T[i] . u_j)) A^T[i]`
/// for every nonzero of an active document, where `spmm_rows` is the word-major `A^T`
/// (`(K / r)^T` as in the paper, or `K^T` when the caller divides by `r` afterwards).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sddmm_spmm_type1(
    words: &WordSet,
    docs: &[u32],
    weights: &[f64],
    kernels: &QueryKernels,
    spmm_rows: &[f64],
    range: NonzeroRange,
    u: &[f64],
    active: &[bool],
    acc: &mut [f64],
) {
    row_kernel::dispatch(
        kernels.stride,
        Type1 {
            words,
            docs,
            weights,
            kernels,
            spmm_rows,
            range,
            u,
            active,
            acc,
        },
    )
}

struct Type1<'a> {
    words: &'a WordSet,
    docs: &'a [u32],
    weights: &'a [f64],
    kernels: &'a QueryKernels,
    spmm_rows: &'a [f64],
    range: NonzeroRange,
    u: &'a [f64],
    active: &'a [bool],
    acc: &'a mut [f64],
}

impl KernelTask for Type1<'_> {
    type Output = ();
    #[inline(always)]
    fn run<K: RowKernel>(self, kernel: K) {
        let Type1 {
            words,
            docs,
            weights,
            kernels,
            spmm_rows,
            range,
            u,
            active,
            acc,
        } = self;
        let stride = kernels.stride;
        for_each_nonzero(words, range, |k, p| {
            let j = docs[p] as usize;
            if !active[j] {
                return;
            }
            let uj = &u[j * stride..(j + 1) * stride];
            let w = weights[p] / kernel.dot(kernels.kt_row(k), uj);
            let a = &spmm_rows[k * stride..(k + 1) * stride];
            kernel.axpy(&mut acc[j * stride..(j + 1) * stride], w, a);
        });
    }
}

/// SDDMM_SpMM type 2 over a range of nonzeros:
/// `wmd_j += (c_ij / (K^T[i] . u_j)) ((K .* M)^T[i] . u_j)`.
pub(crate) fn sddmm_spmm_type2(
    words: &WordSet,
    docs: &[u32],
    weights: &[f64],
    kernels: &QueryKernels,
    range: NonzeroRange,
    u: &[f64],
    wmd: &mut [f64],
) {
    row_kernel::dispatch(
        kernels.stride,
        Type2 {
            words,
            docs,
            weights,
            kernels,
            range,
            u,
            wmd,
        },
    )
}

struct Type2<'a> {
    words: &'a WordSet,
    docs: &'a [u32],
    weights: &'a [f64],
    kernels: &'a QueryKernels,
    range: NonzeroRange,
    u: &'a [f64],
    wmd: &'a mut [f64],
}

impl KernelTask for Type2<'_> {
    type Output = ();
    #[inline(always)]
    fn run<K: RowKernel>(self, kernel: K) {
        let Type2 {
            words,
            docs,
            weights,
            kernels,
            range,
            u,
            wmd,
        } = self;
        let stride = kernels.stride;
        for_each_nonzero(words, range, |k, p| {
            let j = docs[p] as usize;
            let uj = &u[j * stride..(j + 1) * stride];
            let w = weights[p] / kernel.dot(kernels.kt_row(k), uj);
            wmd[j] += w * kernel.dot(kernels.km_row(k), uj);
        });
    }
}

impl WmdSolver for FusedSddmmSpmm {
    fn name(&self) -> &'static str {
        "fused"
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
        let all = NonzeroRange {
            row: 0,
            first: 0,
            end: c.nnz(),
        };
        let mut state = DocState::new(problem, params);

        let loop_start = Instant::now();
        let iterations =
            iterate::run_loop(params, &mut state, &pool, progress, &mut flops, |state| {
                state.clear_new();
                sddmm_spmm_type1(
                    &words,
                    c.indices(),
                    c.values(),
                    &kernels,
                    &kernels.kr,
                    all,
                    &state.u,
                    &state.active,
                    &mut state.x_new,
                );
                Ok(sddmm_spmm_flops(state.active_nnz, kernels.vs))
            })?;
        phases.add("loop", loop_start.elapsed().as_secs_f64());

        let distances = phases.time("final", || -> Result<Vec<f64>, WmdError> {
            let mut wmd = vec![0.0; problem.num_docs()];
            sddmm_spmm_type2(
                &words,
                c.indices(),
                c.values(),
                &kernels,
                all,
                &state.u,
                &mut wmd,
            );
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
