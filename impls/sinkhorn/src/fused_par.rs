//! The fused kernels of [`crate::fused`] run by several threads, as in the paper's Section III.
//!
//! The nonzeros of `c` (restricted to the used words) are split into equal parts with
//! [`nnz_balanced`]; each part binary-searches the row holding its first nonzero, so Zipf-skewed
//! row lengths cannot unbalance the threads. Parts of the word-major CSR touch every document, so
//! two threads may add to the same `x[:, j]`: instead of atomics (no f64 atomics in Rust, and CAS
//! loops on a hot 800 KB array serialize), each part accumulates into its own `N x stride` buffer,
//! and a parallel reduction over document blocks sums the buffers (in part order) and performs the
//! `x`/`u` update. Extra cost per iteration: `parts` buffers zeroed and read once (`parts x 800 KB`
//! at the paper's shape), against `nnz (4 v_s + 1)` flops of kernel work.
//!
//! Results equal `fused` up to the order of the partial sums of rows cut between two parts.

use crate::distance::{self, DocState, Pool, WordSet};
use crate::fused::{sddmm_spmm_type1, sddmm_spmm_type2, NonzeroRange};
use crate::problem::{
    Control, IterationReport, PhaseTimes, SinkhornParams, WmdError, WmdOutput, WmdProblem,
};
use crate::{Par, WmdSolver};
use parbench_common::partition::nnz_balanced;
use rayon::prelude::*;
use std::time::Instant;

/// The fused parallel variant (`fused-par`).
#[derive(Clone, Copy, Debug, Default)]
pub struct FusedSddmmSpmmPar;

/// Documents per block of the reduction.
const REDUCE_DOCS: usize = 128;

impl WmdSolver for FusedSddmmSpmmPar {
    fn name(&self) -> &'static str {
        "fused-par"
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
        let pool = Pool::new(par);
        let mut phases = PhaseTimes::default();
        let mut flops = 0.0;
        let c = problem.docs_by_word();
        let n = problem.num_docs();
        let words = WordSet::used(c);
        let kernels = distance::prepare(problem, params, &words, &pool, &mut phases, &mut flops);
        let stride = kernels.stride;
        let parts = pool.threads();
        let ranges: Vec<NonzeroRange> = nnz_balanced(&words.row_ptr, parts)
            .windows(2)
            .map(|w| NonzeroRange {
                row: w[0].row,
                first: w[0].nnz,
                end: w[1].nnz,
            })
            .collect();
        let mut accs: Vec<Vec<f64>> = (0..parts).map(|_| vec![0.0; n * stride]).collect();
        let mut state = DocState::new(problem, params);

        let loop_start = Instant::now();
        let iterations =
            distance::run_loop(params, &mut state, &pool, progress, &mut flops, |state| {
                let (u, active) = (&state.u, &state.active);
                let kernel = |(acc, &range): (&mut Vec<f64>, &NonzeroRange)| {
                    acc.fill(0.0);
                    sddmm_spmm_type1(
                        &words,
                        c.indices(),
                        c.values(),
                        &kernels,
                        range,
                        u,
                        active,
                        acc,
                    );
                };
                if parts > 1 {
                    pool.run(|| accs.par_iter_mut().zip(&ranges).for_each(kernel));
                } else {
                    accs.iter_mut().zip(&ranges).for_each(kernel);
                }
                reduce(&accs, &state.active, stride, &mut state.x_new, &pool);
                Ok(distance::sddmm_spmm_flops(state.active_nnz, kernels.vs)
                    + (parts * state.num_active * stride) as f64)
            })?;
        phases.add("loop", loop_start.elapsed().as_secs_f64());

        let distances = phases.time("final", || -> Result<Vec<f64>, WmdError> {
            let u = &state.u;
            let kernel = |(wmd, &range): (&mut Vec<f64>, &NonzeroRange)| {
                wmd.fill(0.0);
                sddmm_spmm_type2(&words, c.indices(), c.values(), &kernels, range, u, wmd);
            };
            let mut partial: Vec<Vec<f64>> = (0..parts).map(|_| vec![0.0; n]).collect();
            if parts > 1 {
                pool.run(|| partial.par_iter_mut().zip(&ranges).for_each(kernel));
            } else {
                partial.iter_mut().zip(&ranges).for_each(kernel);
            }
            let mut wmd = partial.swap_remove(0);
            for p in &partial {
                for (a, b) in wmd.iter_mut().zip(p) {
                    *a += b;
                }
            }
            distance::check_distances(&wmd, params.lambda)?;
            Ok(wmd)
        })?;
        flops += distance::final_flops(c.nnz(), kernels.vs) + (parts * n) as f64;
        Ok(WmdOutput {
            distances,
            iterations,
            phases,
            flops,
        })
    }
}

/// `x_new[:, j] = sum_t accs[t][:, j]` for the active documents, in part order, blocks of
/// documents in parallel.
fn reduce(accs: &[Vec<f64>], active: &[bool], stride: usize, x_new: &mut [f64], pool: &Pool) {
    let block = REDUCE_DOCS * stride;
    let work = |(b, out): (usize, &mut [f64])| {
        let base = b * block;
        for (jj, xn) in out.chunks_exact_mut(stride).enumerate() {
            if !active[b * REDUCE_DOCS + jj] {
                continue;
            }
            let at = base + jj * stride;
            xn.copy_from_slice(&accs[0][at..at + stride]);
            for acc in &accs[1..] {
                for (x, a) in xn.iter_mut().zip(&acc[at..at + stride]) {
                    *x += a;
                }
            }
        }
    };
    if pool.threads() > 1 {
        pool.run(|| x_new.par_chunks_mut(block).enumerate().for_each(work));
    } else {
        x_new.chunks_mut(block).enumerate().for_each(work);
    }
}
