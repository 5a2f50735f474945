//! parbench's extension: document-major fused Sinkhorn, every iteration of a document back to back.
//!
//! The Sinkhorn iterations of different target documents never interact (`x[:, j]` depends only on
//! document `j`'s words), so the loop nest can be inverted: each thread owns whole documents
//! (rows of `c^T`, split with [`rows_balanced`] so threads get equal nonzeros), and for one
//! document runs *all* iterations and then the final step before moving on. A document's working
//! set, its `t` rows of `K^T` and `(K / r)^T` (`2 t stride` doubles, ~11 KB for 35 words and
//! `v_s = 19`) plus its `x`, `u`, stays in L1 across the iterations, so the kernel rows are read
//! from memory once per query instead of once per iteration, there are no write conflicts (no
//! per-thread accumulators, no reduction, no barrier per iteration), and the CSR is read once.
//! Flops are those of `fused`. Where the CPU has AVX-512F or AVX2 with FMA, [`crate::doc_lanes`]
//! runs 8 or 4 (f64) and 16 or 8 (f32) documents at once, one per vector lane, summing in
//! another order: the distances then agree with `fused`'s to rounding (5e-16 at the paper's
//! shape). With the row kernels (a query of more than 32 words, or neither instruction set)
//! the arithmetic per document is the same sequence of operations in the same order (words
//! increasing), so the distances equal `fused`'s bit for bit.
//!
//! Tolerance: each document stops on its own exactly as in the other variants.
//! Progress: iterations of different documents are interleaved, so per-iteration statistics
//! (largest change, documents still active) are collected per thread and merged; the callback then
//! hears one report per iteration index after the loop. `Control::Stop` ends that replay but cannot
//! shorten work already done (the loop of a whole query takes milliseconds).

use crate::flops::{final_flops, sddmm_spmm_flops, update_flops};
use crate::pool::Pool;
use crate::precompute::{QueryKernels, WordSet};
use crate::problem::{
    Control, IterationReport, PhaseTimes, SinkhornParams, WmdError, WmdOutput, WmdProblem,
};
use crate::real::Real;
use crate::row_kernel::{FusedRows, KernelTask, RowKernel};
use crate::{iterate, precompute};
use crate::{Par, WmdSolver, Work};
use parbench_common::partition::rows_balanced;
use parbench_common::{Csr, Precision};
use rayon::prelude::*;
use std::marker::PhantomData;
use std::time::Instant;

/// The document-major fused solve in `E`: [`DocMajorFused`] (`doc-major`, f64) or
/// [`DocMajorFusedF32`] (`doc-major-f32`).
#[derive(Clone, Copy, Debug, Default)]
pub struct DocMajor<E>(PhantomData<E>);

/// The document-major fused variant (`doc-major`).
pub type DocMajorFused = DocMajor<f64>;

/// [`DocMajorFused`] in f32 (`doc-major-f32`): the same solve on the embeddings, distances,
/// kernels, `x` and `u` rounded to f32, so twice the values fit in each vector and half the bytes
/// move (1.3-1.7x the speed of the f64 solve at the paper's shape on one thread:
/// `docs/results.md` says why not 2x). Inputs are rounded once; each document's distance is
/// accumulated and returned in f64.
///
/// Its error against the f64 solve is about f32's epsilon times the iteration's growth of
/// rounding, at most ~1e-7 of the largest distance at the paper's shape. Each word's kernel
/// rows are scaled so that their largest entry is 1 (`Real::exp_neg_scaled`), so f32's narrow
/// exponent range bounds only the spread `lambda (max_s M - min_s M)` of a word's distances to
/// the query words (about 87, against 708 for `lambda M` itself in f64); past it the solve
/// reports an underflow.
pub type DocMajorFusedF32 = DocMajor<f32>;

/// What one thread saw: per iteration index, the largest change and the documents still active
/// after it, plus the nonzeros it processed in the loop.
#[doc(hidden)]
#[derive(Clone, Debug, Default)]
pub struct PartStats {
    max_change: Vec<f64>,
    still_active: Vec<usize>,
    ran: Vec<usize>,
    pub(crate) loop_nnz: usize,
}

impl PartStats {
    pub(crate) fn record(&mut self, iteration: usize, change: f64, still: bool) {
        if self.max_change.len() <= iteration {
            self.max_change.resize(iteration + 1, 0.0);
            self.still_active.resize(iteration + 1, 0);
            self.ran.resize(iteration + 1, 0);
        }
        self.max_change[iteration] = self.max_change[iteration].max(change);
        self.ran[iteration] += 1;
        self.still_active[iteration] += usize::from(still);
    }
}

/// Per-thread scratch for one document.
struct DocScratch<E> {
    x: Vec<E>,
    u: Vec<E>,
    x_new: Vec<E>,
    rows: Vec<u32>,
    weights: Vec<E>,
}

/// All iterations and the final step of the documents `docs`, writing their distances to `out`.
#[doc(hidden)]
pub struct SolveDocs<'a, E: Real> {
    pub(crate) by_doc: &'a Csr,
    /// Each word's row in the kernel arrays.
    pub(crate) position: &'a [u32],
    pub(crate) kernels: &'a QueryKernels<E>,
    pub(crate) params: &'a SinkhornParams,
    pub(crate) docs: std::ops::Range<usize>,
    pub(crate) out: &'a mut [f64],
}

impl<E: Real> KernelTask<E> for SolveDocs<'_, E> {
    type Output = Result<PartStats, WmdError>;
    #[inline(always)]
    fn run<K: RowKernel<E>>(self, kernel: K) -> Self::Output {
        let SolveDocs {
            by_doc,
            position,
            kernels,
            params,
            docs,
            out,
        } = self;
        solve_docs(kernel, by_doc, position, kernels, params, docs, out)
    }
}

#[inline(always)]
fn solve_docs<E: Real, K: RowKernel<E>>(
    kernel: K,
    by_doc: &Csr,
    position: &[u32],
    kernels: &QueryKernels<E>,
    params: &SinkhornParams,
    docs: std::ops::Range<usize>,
    out: &mut [f64],
) -> Result<PartStats, WmdError> {
    let (vs, stride) = (kernels.vs, kernels.stride);
    let mut stats = PartStats::default();
    let mut s = DocScratch {
        x: vec![E::ZERO; stride],
        u: vec![E::ZERO; stride],
        x_new: vec![E::ZERO; stride],
        rows: Vec::new(),
        weights: Vec::new(),
    };
    for (j, dist) in docs.zip(out.iter_mut()) {
        let (words, weights) = by_doc.row(j);
        s.rows.clear();
        s.rows.extend(words.iter().map(|&w| position[w as usize]));
        let weights = E::from_f64_slice(weights, &mut s.weights);
        iterate::init_doc(&mut s.x, &mut s.u, vs);
        for iteration in 0..params.max_iter {
            let rows = FusedRows {
                kt: &kernels.kt,
                inv_r: &kernels.inv_r,
                stride,
                rows: &s.rows,
                weights,
            };
            kernel.fused_doc(rows, &s.u, &mut s.x_new);
            let change = iterate::update_doc(&mut s.x, &mut s.u, &s.x_new, vs, params.lambda)?;
            stats.loop_nnz += words.len();
            let converged = params.tol.is_some_and(|t| change <= t);
            stats.record(iteration, change, !converged);
            if converged {
                break;
            }
        }
        let mut wmd = 0.0f64;
        for (&k, &c) in s.rows.iter().zip(weights) {
            let k = k as usize;
            let w = c / kernel.dot(kernels.kt_row(k), &s.u);
            wmd += (w * kernel.dot(kernels.km_row(k), &s.u)).to_f64();
        }
        if !wmd.is_finite() {
            return Err(WmdError::Underflow {
                lambda: params.lambda,
            });
        }
        *dist = wmd;
    }
    Ok(stats)
}

impl<E: Real> WmdSolver for DocMajor<E> {
    fn name(&self) -> &'static str {
        match E::PRECISION {
            Precision::F64 => "doc-major",
            Precision::F32 => "doc-major-f32",
        }
    }

    fn is_parallel(&self) -> bool {
        true
    }

    /// The loop runs before the reports are replayed (the module's docs).
    fn stops_early(&self) -> bool {
        false
    }

    fn precision(&self) -> Precision {
        E::PRECISION
    }

    /// The embeddings in `E` (made once for f32, already there for f64).
    fn prepare(&self, problem: &WmdProblem) {
        E::embeddings(problem);
    }

    fn work(&self, problem: &WmdProblem, out: &WmdOutput, par: Par) -> Work {
        crate::flops::doc_major_work::<E>(problem, out, self.threads(par))
    }

    fn solve(
        &self,
        problem: &WmdProblem,
        params: &SinkhornParams,
        par: Par,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<WmdOutput, WmdError> {
        solve_doc_major::<E>(problem, params, par, progress)
    }

    /// The queries' shared work done once ([`crate::batch`]).
    fn solve_batch(
        &self,
        problem: &mut WmdProblem,
        queries: &[Vec<(u32, f64)>],
        params: &SinkhornParams,
        par: Par,
    ) -> Result<Vec<WmdOutput>, WmdError> {
        crate::batch::solve_batch::<E>(problem, queries, params, par)
    }
}

/// What every query against one collection shares in the document-major solve: the words some
/// document holds, each word's row in the kernel arrays, and the documents each thread owns.
pub(crate) struct Collection {
    pub(crate) words: WordSet,
    position: Vec<u32>,
    bounds: Vec<usize>,
}

impl Collection {
    pub(crate) fn new(problem: &WmdProblem, pool: &Pool) -> Collection {
        let words = WordSet::used(problem.docs_by_word());
        let position = words.position_map(problem.vocab());
        let bounds = rows_balanced(problem.docs_by_doc().indptr(), pool.threads());
        Collection {
            words,
            position,
            bounds,
        }
    }
}

/// The solve of both variants, in `E`.
fn solve_doc_major<E: Real>(
    problem: &WmdProblem,
    params: &SinkhornParams,
    par: Par,
    progress: &mut dyn FnMut(&IterationReport) -> Control,
) -> Result<WmdOutput, WmdError> {
    params.validate()?;
    let pool = Pool::new(par)?;
    let mut phases = PhaseTimes::default();
    let mut flops = 0.0;
    let collection = Collection::new(problem, &pool);
    let kernels = precompute::prepare_without_kr::<E>(
        problem,
        params,
        &collection.words,
        &pool,
        &mut phases,
        &mut flops,
    );
    solve_loop(
        problem,
        &collection,
        &kernels,
        params,
        &pool,
        (phases, flops),
        progress,
    )
}

/// The `loop` phase (every document's iterations and final step) on kernel arrays already made,
/// and the `final` phase's replay of the iterations to `progress`; `so_far` holds the phases and
/// flops of the work before it.
pub(crate) fn solve_loop<E: Real>(
    problem: &WmdProblem,
    collection: &Collection,
    kernels: &QueryKernels<E>,
    params: &SinkhornParams,
    pool: &Pool,
    so_far: (PhaseTimes, f64),
    progress: &mut dyn FnMut(&IterationReport) -> Control,
) -> Result<WmdOutput, WmdError> {
    let (mut phases, mut flops) = so_far;
    let by_doc = problem.docs_by_doc();
    let n = problem.num_docs();
    let loop_start = Instant::now();
    let bounds = &collection.bounds;
    let mut distances = vec![0.0; n];
    let mut pieces: Vec<(std::ops::Range<usize>, &mut [f64])> =
        Vec::with_capacity(bounds.len() - 1);
    let mut rest = distances.as_mut_slice();
    for w in bounds.windows(2) {
        let (head, tail) = rest.split_at_mut(w[1] - w[0]);
        pieces.push((w[0]..w[1], head));
        rest = tail;
    }
    let run = |(docs, out): (std::ops::Range<usize>, &mut [f64])| {
        let mut task = SolveDocs {
            by_doc,
            position: &collection.position,
            kernels,
            params,
            docs,
            out,
        };
        match E::solve_docs_in_lanes(&mut task) {
            Some(done) => done,
            None => E::dispatch(kernels.stride, task),
        }
    };
    let stats: Vec<PartStats> = if pool.threads() > 1 {
        pool.run(|| pieces.into_par_iter().map(run).collect::<Result<_, _>>())?
    } else {
        pieces.into_iter().map(run).collect::<Result<_, _>>()?
    };
    // The final step ran inside each document's loop; it is not separable, so "final" holds
    // only the merge of the statistics and `loop` the whole per-document work.
    phases.add("loop", loop_start.elapsed().as_secs_f64());

    let iterations = phases.time("final", || {
        let iterations = stats.iter().map(|s| s.max_change.len()).max().unwrap_or(0);
        for it in 0..iterations {
            let get = |v: &Vec<usize>| v.get(it).copied().unwrap_or(0);
            let report = IterationReport {
                iteration: it + 1,
                max_iter: params.max_iter,
                active_docs: stats.iter().map(|s| get(&s.still_active)).sum(),
                max_change: stats
                    .iter()
                    .map(|s| s.max_change.get(it).copied().unwrap_or(0.0))
                    .fold(0.0, f64::max),
            };
            let ran: usize = stats.iter().map(|s| get(&s.ran)).sum();
            flops += update_flops(ran, kernels.vs);
            if progress(&report) == Control::Stop {
                break;
            }
        }
        iterations
    });
    let loop_nnz: usize = stats.iter().map(|s| s.loop_nnz).sum();
    flops += sddmm_spmm_flops(loop_nnz, kernels.vs) + final_flops(problem.nnz(), kernels.vs);
    Ok(WmdOutput {
        distances,
        iterations,
        phases,
        flops,
        thread_kernel_s: Vec::new(),
    })
}
