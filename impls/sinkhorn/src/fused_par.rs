//! The fused kernels of [`crate::fused`] run by several threads, as in the paper's Section III.
//!
//! The nonzeros of `c` (restricted to the used words) are split into equal parts with
//! [`nnz_balanced`]; each part binary-searches the row holding its first nonzero, so Zipf-skewed
//! row lengths cannot unbalance the threads. Parts of the word-major CSR touch every document, so
//! two threads may add to the same `x[:, j]`: instead of atomics (no f64 atomics in Rust, and CAS
//! loops on a hot 800 KB array serialize), each part accumulates into its own `N x stride` buffer,
//! and a reduction over documents (each thread a contiguous share of them) sums the buffers in
//! part order, zeroes them for the next iteration, and performs the `x`/`u` update right away, so
//! the new `x` never makes a round trip through memory. Extra cost per iteration: the `parts`
//! buffers read and zeroed once (`parts x 800 KB` at the paper's shape), against
//! `nnz (4 v_s + 1)` flops of kernel work.
//!
//! Differences from a straight transcription, measured at the paper's shape on 2 threads (loop
//! 13.0-14.5 ms before, 10.6 ms after, best of 20-run minima; 1 thread: 23-24.5 -> 18 ms):
//! - One persistent parallel region for the whole loop (OpenMP style): the threads meet at
//!   barriers (three per iteration: after the kernel, after the reduction, after the serial
//!   bookkeeping and the progress report, which runs on the calling thread) instead of two
//!   rayon fork-joins per iteration plus a separate pass to zero the buffers. A waiter spins
//!   briefly, then sleeps, so a thread preempted by another process does not stall its partner
//!   for a whole time slice.
//! - The SpMM multiplies by `K`, not `K / r`, and the reduction divides by `r`: the kernel then
//!   reads one row of kernel values per word instead of two (half the 6 MB streamed from L3 per
//!   iteration), and with AVX-512 or AVX2 that row stays in registers for all the nonzeros of
//!   its word, and the random columns of `u` and the accumulators are prefetched ([`held_row`]).
//! - Not changed, on purpose: the split is the paper's equal-nonzero one. At this shape it leaves
//!   the thread holding the rare words (~33k rows of one or two nonzeros, each row's 160 B of `K`
//!   streamed from L3) ~40% slower than the other (10.3 vs 7.3 ms); splitting `nnz + rows`
//!   evenly instead balanced them (8.7 / 8.7 ms) in a trial.
//!
//! Results equal `fused` up to rounding: the order of the partial sums of rows cut between two
//! parts, and `(sum K v) / r` for `sum (K / r) v`.

use crate::buffer::ZeroedBuf;
use crate::flops::{final_flops, sddmm_spmm_flops, update_flops};
use crate::fused::{sddmm_spmm_type1, sddmm_spmm_type2, NonzeroRange};
use crate::iterate::DocState;
use crate::pool::Pool;
use crate::precompute::WordSet;
use crate::problem::{
    Control, IterationReport, PhaseTimes, SinkhornParams, WmdError, WmdOutput, WmdProblem,
};
use crate::{iterate, precompute, row_kernel};
use crate::{Par, WmdSolver};
use parbench_common::partition::nnz_balanced;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// The fused parallel variant (`fused-par`).
#[derive(Clone, Copy, Debug, Default)]
pub struct FusedSddmmSpmmPar;

/// `fused-par` with the word rows split into parts of equal row counts instead of equal
/// nonzeros (`fused-par-rows`): the plain row partition the paper's §III-D balancing replaces.
/// With Zipf-skewed words the parts' nonzeros differ widely (the frequent words have the lowest
/// ids at the synthetic shapes, so the first part holds most of the nonzeros), and the slowest
/// thread sets the pace; everything else, accumulators and reduction included, is `fused-par`'s,
/// so the two differ in the balance alone.
#[derive(Clone, Copy, Debug, Default)]
pub struct FusedSddmmSpmmParRows;

/// How the word rows of `c` are split among the threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Split {
    /// Equal nonzeros ([`nnz_balanced`]; a row may be cut between two parts).
    Nonzeros,
    /// Equal numbers of whole rows.
    Rows,
}

impl Split {
    fn ranges(self, row_ptr: &[usize], parts: usize) -> Vec<NonzeroRange> {
        match self {
            Split::Nonzeros => nnz_balanced(row_ptr, parts)
                .windows(2)
                .map(|w| NonzeroRange {
                    row: w[0].row,
                    first: w[0].nnz,
                    end: w[1].nnz,
                })
                .collect(),
            Split::Rows => {
                let rows = row_ptr.len() - 1;
                (0..parts)
                    .map(|t| {
                        let (first, last) = (t * rows / parts, (t + 1) * rows / parts);
                        NonzeroRange {
                            row: first,
                            first: row_ptr[first],
                            end: row_ptr[last],
                        }
                    })
                    .collect()
            }
        }
    }
}

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
        solve_split(problem, params, par, progress, Split::Nonzeros)
    }
}

impl WmdSolver for FusedSddmmSpmmParRows {
    fn name(&self) -> &'static str {
        "fused-par-rows"
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
        solve_split(problem, params, par, progress, Split::Rows)
    }
}

/// The solve of both variants, with the nonzeros split as `split` says.
fn solve_split(
    problem: &WmdProblem,
    params: &SinkhornParams,
    par: Par,
    progress: &mut dyn FnMut(&IterationReport) -> Control,
    split: Split,
) -> Result<WmdOutput, WmdError> {
    params.validate()?;
    let pool = Pool::new(par)?;
    let mut phases = PhaseTimes::default();
    let mut flops = 0.0;
    let c = problem.docs_by_word();
    let n = problem.num_docs();
    let words = WordSet::used(c);
    let kernels = precompute::prepare_without_kr::<f64>(
        problem,
        params,
        &words,
        &pool,
        &mut phases,
        &mut flops,
    );
    let parts = pool.threads();
    let ranges = split.ranges(&words.row_ptr, parts);
    let weights: Vec<f64> = problem.query().iter().map(|&(_, r)| r).collect();
    let mut state = DocState::new(problem, params);

    let loop_start = Instant::now();
    let (iterations, thread_kernel_s) = {
        let mut run = LoopRun {
            words: &words,
            c,
            kernels: &kernels,
            ranges: &ranges,
            weights: &weights,
            params,
            state: &mut state,
            flops: &mut flops,
        };
        run.run(&pool, progress)?
    };
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
        iterate::check_distances(&wmd, params.lambda)?;
        Ok(wmd)
    })?;
    flops += final_flops(c.nnz(), kernels.vs) + (parts * n) as f64;
    Ok(WmdOutput {
        distances,
        iterations,
        phases,
        flops,
        thread_kernel_s,
    })
}

/// The threads of the loop meet here three times per iteration, microseconds to a few hundred
/// microseconds apart, where a sleeping wake-up costs ~50-100 us in this VM: a waiter spins
/// briefly, then yields its core round after round (to whoever wants it: with other processes
/// running, possibly the very thread it waits for), and only then blocks on a condition
/// variable. `abort` releases
/// every waiter when a thread panicked, so that the others do not wait forever.
struct SpinBarrier {
    parties: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    aborted: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// Busy rounds before yielding (a few microseconds).
const SPINS: u32 = 1 << 8;
/// Rounds of `yield_now` before blocking (about a microsecond each when the core is not wanted
/// by another thread, which otherwise gets it).
const YIELDS: u32 = 1 << 11;

impl SpinBarrier {
    fn new(parties: usize) -> SpinBarrier {
        SpinBarrier {
            parties,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            aborted: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Returns false if the region was aborted. Everything a thread wrote before `wait` is
    /// visible to every thread after it (SeqCst on both counters).
    fn wait(&self) -> bool {
        let generation = self.generation.load(Ordering::SeqCst);
        if self.arrived.fetch_add(1, Ordering::SeqCst) + 1 == self.parties {
            self.arrived.store(0, Ordering::SeqCst);
            {
                // Under the lock, so that a waiter cannot check the generation, miss this bump
                // and then sleep through the notification.
                let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                self.generation.fetch_add(1, Ordering::SeqCst);
            }
            self.wake.notify_all();
            return !self.aborted.load(Ordering::SeqCst);
        }
        let released = || {
            self.generation.load(Ordering::SeqCst) != generation
                || self.aborted.load(Ordering::SeqCst)
        };
        for round in 0..SPINS + YIELDS {
            if released() {
                return !self.aborted.load(Ordering::SeqCst);
            }
            if round < SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        while !released() {
            guard = self.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
        !self.aborted.load(Ordering::SeqCst)
    }

    fn abort(&self) {
        {
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.aborted.store(true, Ordering::SeqCst);
        }
        self.wake.notify_all();
    }
}

/// A slice shared by the threads of the loop's parallel region, who take turns reading and
/// writing it between barriers.
struct Shared<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: `Shared` is a view of a slice that outlives the parallel region (see `LoopRun::run`);
// the region's barriers order every access (see `get` / `get_mut`).
unsafe impl<T: Send + Sync> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Shared<T> {}

impl<T> Shared<T> {
    fn new(slice: &mut [T]) -> Shared<T> {
        Shared {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
        }
    }

    /// # Safety
    /// No thread writes any part of the slice while the result lives.
    unsafe fn get(&self) -> &[T] {
        // SAFETY: `ptr` and `len` come from a live `&mut [T]` that outlives the parallel region
        // (`Shared::new`, `LoopRun::run`), and the caller guarantees no concurrent writer, so a
        // shared view of it is sound.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// # Safety
    /// No other thread reads or writes `range` while the result lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn get_mut(&self, range: std::ops::Range<usize>) -> &mut [T] {
        assert!(range.start <= range.end && range.end <= self.len);
        // SAFETY: `range` lies inside the slice (asserted above), which outlives the parallel
        // region (`Shared::new`, `LoopRun::run`); the caller guarantees no other thread touches
        // `range` meanwhile, so this is the only live reference to it.
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.end - range.start)
        }
    }
}

/// What one thread's reduction saw: the largest change, and the documents (and their nonzeros)
/// still active.
#[derive(Clone, Copy, Debug, Default)]
struct GatherStats {
    max_change: f64,
    still: usize,
    nnz: usize,
}

/// The loop's inputs and the state it advances.
struct LoopRun<'a> {
    words: &'a WordSet,
    c: &'a parbench_common::Csr,
    kernels: &'a precompute::QueryKernels,
    ranges: &'a [NonzeroRange],
    /// The query weights `r`.
    weights: &'a [f64],
    params: &'a SinkhornParams,
    state: &'a mut DocState,
    flops: &'a mut f64,
}

/// The views every thread of the region uses.
struct Region<'a> {
    words: &'a WordSet,
    c: &'a parbench_common::Csr,
    kernels: &'a precompute::QueryKernels,
    ranges: &'a [NonzeroRange],
    /// Row length of `x`, `u` and the accumulators.
    stride: usize,
    /// `[t]`: documents whose reduction thread `t` performs.
    doc_ranges: Vec<std::ops::Range<usize>>,
    weights: Vec<f64>,
    doc_lens: &'a [usize],
    tol: Option<f64>,
    lambda: f64,
    x: Shared<f64>,
    u: Shared<f64>,
    active: Shared<bool>,
    accs: Vec<Shared<f64>>,
    stats: Vec<Mutex<Result<GatherStats, WmdError>>>,
    barrier: SpinBarrier,
    go_on: AtomicBool,
    /// `[t]`: nanoseconds thread `t` spent in the kernel (only thread `t` adds to it).
    kernel_ns: Vec<AtomicU64>,
}

impl LoopRun<'_> {
    /// Runs the iterations; returns how many ran, and the seconds each thread spent in the
    /// kernel.
    fn run(
        &mut self,
        pool: &Pool,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<(usize, Vec<f64>), WmdError> {
        let (params, parts) = (self.params, self.ranges.len());
        if params.max_iter == 0 || self.state.num_active == 0 {
            return Ok((0, vec![0.0; parts]));
        }
        let (n, stride) = (self.state.active.len(), self.state.stride);
        // Zero on entry to every iteration: the reduction zeroes what it reads, and the kernel
        // never writes the columns of inactive documents.
        let mut accs: Vec<ZeroedBuf> = (0..parts).map(|_| ZeroedBuf::zeroed(n * stride)).collect();
        let (tol, lambda) = self.state.tol_and_lambda();
        let state = &mut *self.state;
        let doc_lens = state.doc_lens().to_vec();
        let region = Region {
            words: self.words,
            c: self.c,
            kernels: self.kernels,
            ranges: self.ranges,
            stride,
            doc_ranges: (0..parts)
                .map(|t| t * n / parts..(t + 1) * n / parts)
                .collect(),
            weights: self.weights.to_vec(),
            doc_lens: &doc_lens,
            tol,
            lambda,
            x: Shared::new(&mut state.x),
            u: Shared::new(&mut state.u),
            active: Shared::new(&mut state.active),
            accs: accs.iter_mut().map(|a| Shared::new(a)).collect(),
            stats: (0..parts)
                .map(|_| Mutex::new(Ok(GatherStats::default())))
                .collect(),
            barrier: SpinBarrier::new(parts),
            go_on: AtomicBool::new(true),
            kernel_ns: (0..parts).map(|_| AtomicU64::new(0)).collect(),
        };
        let region = &region;
        let mut iterations = 0;
        let mut counts = (state.num_active, state.active_nnz);
        let flops = &mut *self.flops;
        let outcome = if parts == 1 {
            // No other thread, no scope (which would start rayon's global pool).
            region.main_loop(params, progress, &mut iterations, &mut counts, flops)
        } else {
            pool.in_place_scope(|scope| {
                for t in 1..parts {
                    scope.spawn(move |_| region.worker(t));
                }
                // Thread 0 is the caller: it alone calls `progress`, which need not be `Send`.
                let main = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    region.main_loop(params, progress, &mut iterations, &mut counts, flops)
                }));
                match main {
                    Ok(result) => result,
                    Err(panic) => {
                        region.barrier.abort();
                        std::panic::resume_unwind(panic)
                    }
                }
            })
        };
        state.num_active = counts.0;
        state.active_nnz = counts.1;
        let kernel_s = region
            .kernel_ns
            .iter()
            .map(|ns| ns.load(Ordering::Relaxed) as f64 * 1e-9)
            .collect();
        outcome.map(|()| (iterations, kernel_s))
    }
}

impl Region<'_> {
    /// Thread `t`'s share of the kernel, timed (two clock reads per iteration and thread).
    fn kernel(&self, t: usize) {
        let start = Instant::now();
        self.kernel_part(t);
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.kernel_ns[t].fetch_add(ns, Ordering::Relaxed);
    }

    /// Thread `t`'s share of the kernel: its nonzeros into its accumulator.
    fn kernel_part(&self, t: usize) {
        // SAFETY: in the kernel phase `u` and `active` are only read, and accumulator `t` is
        // written by thread `t` alone; the barriers after the previous step and after this one
        // separate it from the reduction, which writes them.
        let (u, active, acc) = unsafe {
            (
                self.u.get(),
                self.active.get(),
                self.accs[t].get_mut(0..self.accs[t].len),
            )
        };
        let range = self.ranges[t];
        #[cfg(target_arch = "x86_64")]
        if held_row::type1(self.words, self.c, self.kernels, range, u, active, acc) {
            return;
        }
        sddmm_spmm_type1(
            self.words,
            self.c.indices(),
            self.c.values(),
            self.kernels,
            &self.kernels.kt,
            range,
            u,
            active,
            acc,
        );
    }

    /// Thread `t`'s share of the reduction and update: documents `doc_ranges[t]`.
    fn gather(&self, t: usize) -> Result<GatherStats, WmdError> {
        let docs = self.doc_ranges[t].clone();
        let stride = self.stride;
        let span = docs.start * stride..docs.end * stride;
        // SAFETY: in the reduction phase thread `t` alone reads or writes the columns of its
        // documents, in `x`, `u`, `active` and every accumulator; the ranges of different threads
        // are disjoint, and the barriers separate this phase from the kernel, which reads `u`
        // and `active` and writes the accumulators.
        let (x, u, active, mut accs) = unsafe {
            (
                self.x.get_mut(span.clone()),
                self.u.get_mut(span.clone()),
                self.active.get_mut(docs.clone()),
                self.accs
                    .iter()
                    .map(|a| a.get_mut(span.clone()))
                    .collect::<Vec<_>>(),
            )
        };
        let lens = &self.doc_lens[docs];
        let (vs, tol, lambda) = (self.weights.len(), self.tol, self.lambda);
        row_kernel::vectorized(
            #[inline(always)]
            || {
                let mut xn = vec![0.0; stride];
                let mut stats = GatherStats::default();
                for (jj, (((x, u), a), &len)) in x
                    .chunks_exact_mut(stride)
                    .zip(u.chunks_exact_mut(stride))
                    .zip(active.iter_mut())
                    .zip(lens)
                    .enumerate()
                {
                    if !*a {
                        continue;
                    }
                    sum_and_clear(&mut accs, jj * stride, &mut xn, &self.weights);
                    let (change, still) = iterate::settle_doc(x, u, &xn, a, vs, tol, lambda)?;
                    stats.max_change = stats.max_change.max(change);
                    if still {
                        stats.still += 1;
                        stats.nnz += len;
                    }
                }
                Ok(stats)
            },
        )
    }

    /// One of the threads `1..parts`: kernel, reduction, then wait while thread 0 reports.
    fn worker(&self, t: usize) {
        let body = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loop {
            self.kernel(t);
            if !self.barrier.wait() {
                return;
            }
            let stats = self.gather(t);
            *self.stats[t].lock().unwrap_or_else(|e| e.into_inner()) = stats;
            if !self.barrier.wait() || !self.barrier.wait() {
                return;
            }
            if !self.go_on.load(Ordering::SeqCst) {
                return;
            }
        }));
        if let Err(panic) = body {
            self.barrier.abort();
            std::panic::resume_unwind(panic);
        }
    }

    /// Thread 0: the same steps, plus the bookkeeping between the second and third barrier.
    fn main_loop(
        &self,
        params: &SinkhornParams,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
        iterations: &mut usize,
        counts: &mut (usize, usize),
        flops: &mut f64,
    ) -> Result<(), WmdError> {
        let vs = self.weights.len();
        let stride = self.stride;
        loop {
            self.kernel(0);
            if !self.barrier.wait() {
                return Ok(());
            }
            let stats = self.gather(0);
            *self.stats[0].lock().unwrap_or_else(|e| e.into_inner()) = stats;
            if !self.barrier.wait() {
                return Ok(());
            }
            let mut result = Ok(());
            let (mut max_change, mut still, mut nnz) = (0.0f64, 0, 0);
            for slot in &self.stats {
                let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
                match std::mem::replace(&mut *slot, Ok(GatherStats::default())) {
                    Ok(s) => {
                        max_change = max_change.max(s.max_change);
                        still += s.still;
                        nnz += s.nnz;
                    }
                    Err(e) => result = Err(e),
                }
            }
            let mut go_on = result.is_ok();
            if go_on {
                let (active_before, nnz_before) = *counts;
                *flops += sddmm_spmm_flops(nnz_before, vs)
                    + (active_before * (self.accs.len() * stride + vs)) as f64
                    + update_flops(active_before, vs);
                *counts = (still, nnz);
                *iterations += 1;
                let report = IterationReport {
                    iteration: *iterations,
                    max_iter: params.max_iter,
                    active_docs: still,
                    max_change,
                };
                go_on = progress(&report) == Control::Continue
                    && *iterations < params.max_iter
                    && still > 0;
            }
            self.go_on.store(go_on, Ordering::SeqCst);
            if !self.barrier.wait() || !go_on {
                return result;
            }
        }
    }
}

/// `xn = (sum_t accs[t][at..at + stride]) / r` (parts in order; the loop multiplies by `K`, not
/// `K / r`), then the accumulators' entries zeroed for the next iteration.
#[inline(always)]
fn sum_and_clear(accs: &mut [&mut [f64]], at: usize, xn: &mut [f64], weights: &[f64]) {
    let stride = xn.len();
    if let Some((first, rest)) = accs.split_first_mut() {
        let first = &mut first[at..at + stride];
        xn.copy_from_slice(first);
        first.fill(0.0);
        for acc in rest {
            let acc = &mut acc[at..at + stride];
            for (x, a) in xn.iter_mut().zip(acc.iter_mut()) {
                *x += *a;
                *a = 0.0;
            }
        }
    }
    for (x, r) in xn.iter_mut().zip(weights) {
        *x /= r;
    }
}

/// SDDMM_SpMM type 1 with AVX-512 or AVX2 for strides up to 32 (queries of up to 32 words),
/// `K^T` as the SpMM operand. Per word row, the row of `K^T` is loaded into registers once (at
/// most four zmm or eight ymm) and serves every nonzero of the row for both the dot product and
/// the axpy; per nonzero that leaves the `u_j` loads, `ceil(stride / lanes)` FMAs, one horizontal
/// sum, one division and the read-modify-write of `acc_j`, about half the instructions of the
/// 4-lane row kernels. With the instructions gone, the random reads of `u_j`, `acc_j` bound the
/// loop, so they are prefetched a few nonzeros ahead (with the 4-lane kernels, which are
/// instruction-bound, that gained nothing), and the rows of `K^T` a few rows ahead.
#[cfg(target_arch = "x86_64")]
mod held_row {
    use super::NonzeroRange;
    use crate::precompute::{QueryKernels, WordSet};
    use crate::simd::{has_avx2_fma, has_avx512f, Vector, Ymm, Zmm};
    use parbench_common::Csr;
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};

    /// Runs the kernel and returns true, or returns false (doing nothing) when the CPU has
    /// neither AVX-512F nor AVX2 with FMA, or the stride is not a multiple of 4 up to 32.
    pub(super) fn type1(
        words: &WordSet,
        c: &Csr,
        kernels: &QueryKernels,
        range: NonzeroRange,
        u: &[f64],
        active: &[bool],
        acc: &mut [f64],
    ) -> bool {
        let args = (
            words,
            c.indices(),
            c.values(),
            &kernels.kt[..],
            range,
            u,
            active,
            acc,
        );
        if has_avx512f() {
            // SAFETY: the CPU supports AVX-512F (checked).
            unsafe { zmm(kernels.stride, args) }
        } else if has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked).
            unsafe { ymm(kernels.stride, args) }
        } else {
            false
        }
    }

    type Args<'a> = (
        &'a WordSet,
        &'a [u32],
        &'a [f64],
        &'a [f64],
        NonzeroRange,
        &'a [f64],
        &'a [bool],
        &'a mut [f64],
    );

    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn zmm(stride: usize, args: Args) -> bool {
        // SAFETY: AVX-512F (the caller's contract).
        unsafe { by_stride::<Zmm<f64>>(stride, args) }
    }

    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn ymm(stride: usize, args: Args) -> bool {
        // SAFETY: AVX2 and FMA (the caller's contract).
        unsafe { by_stride::<Ymm<f64>>(stride, args) }
    }

    /// # Safety
    /// `V`'s instruction set.
    #[inline(always)]
    unsafe fn by_stride<V: Vector<E = f64>>(stride: usize, args: Args) -> bool {
        // SAFETY: `V`'s instruction set (the caller's contract).
        unsafe {
            match stride {
                4 => run::<V, 4>(args),
                8 => run::<V, 8>(args),
                12 => run::<V, 12>(args),
                16 => run::<V, 16>(args),
                20 => run::<V, 20>(args),
                24 => run::<V, 24>(args),
                28 => run::<V, 28>(args),
                32 => run::<V, 32>(args),
                _ => return false,
            }
        }
        true
    }

    /// Rows of `K^T` prefetched ahead. The part holding the rare words meets a new row every
    /// one or two nonzeros, streamed from L3; asking for it 32 rows early measured ~0.3 ms (3%)
    /// faster loops at the paper's shape (16 to 64 all help about as much).
    const ROWS_AHEAD: usize = 32;

    /// Nonzeros ahead whose columns of `u` and the accumulator are prefetched. The columns are
    /// read at random from `N x stride` arrays (800 KB each at the paper's shape, together
    /// beyond L2); asking for them 8 nonzeros early measured loops 15% faster on one thread
    /// (20.6-20.9 -> 17.6-17.8 ms) and ~1.5 ms faster on two (AVX-512, Intel Xeon).
    const DOCS_AHEAD: usize = 8;

    /// The most vectors a held row takes: 32 values in ymm registers.
    const MAX_VECTORS: usize = 8;

    /// Asks for every cache line of the `S` values at `row`. A prefetch is a hint and never
    /// faults; addresses are only computed (wrapping).
    #[inline(always)]
    fn prefetch_row<const S: usize>(row: *const f64) {
        let row = row as *const i8;
        for line in (0..S * 8).step_by(64) {
            // SAFETY: SSE, which every x86_64 CPU has; a prefetch never faults.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(line)) };
        }
        // The last line, when the row does not start on a line boundary.
        // SAFETY: as above.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(S * 8 - 1)) };
    }

    /// Lanes of vector `v` of a row of `S` values, `VL` to a vector.
    const fn lane_mask<const S: usize>(vl: usize, v: usize) -> u32 {
        let lanes = S.saturating_sub(vl * v);
        let lanes = if lanes > vl { vl } else { lanes };
        (1u32 << lanes) - 1
    }

    /// # Safety
    /// `V`'s instruction set.
    #[inline(always)]
    unsafe fn run<V: Vector<E = f64>, const S: usize>(args: Args) {
        let (words, docs, weights, kt, range, u, active, acc) = args;
        let nv = S.div_ceil(V::VL);
        assert!(nv <= MAX_VECTORS);
        let masks: [u32; MAX_VECTORS] = std::array::from_fn(|v| lane_mask::<S>(V::VL, v));
        assert!(range.end <= docs.len() && range.end <= weights.len());
        let mut k = range.row;
        let mut p = range.first;
        while p < range.end {
            let row_end = words.row_ptr[k + 1].min(range.end);
            let krow = &kt[k * S..(k + 1) * S];
            prefetch_row::<S>(kt.as_ptr().wrapping_add((k + ROWS_AHEAD) * S));
            // SAFETY (the unsafe blocks below): `V`'s instruction set is the caller's contract;
            // `VL v < S` for `v < nv`, so every pointer stays inside its slice of `S` values
            // (`krow`, `uj`, `aj`, bounds-checked) and every load and store covers only its lanes
            // inside them (`masks` covers `S` lanes); `aj` is borrowed mutably, so no other
            // reference sees the stores.
            // A loop, not `array::from_fn`: a closure is a function of its own, compiled
            // without the instruction set of the function it is written in.
            let mut kv = [unsafe { V::zero() }; MAX_VECTORS];
            for (v, held) in kv.iter_mut().enumerate().take(nv) {
                *held = unsafe { V::maskz_loadu(masks[v], krow.as_ptr().add(V::VL * v)) };
            }
            while p < row_end {
                if let Some(&ahead) = docs.get(p + DOCS_AHEAD) {
                    let at = ahead as usize * S;
                    prefetch_row::<S>(u.as_ptr().wrapping_add(at));
                    prefetch_row::<S>(acc.as_ptr().wrapping_add(at));
                }
                let j = docs[p] as usize;
                let c = weights[p];
                p += 1;
                if !active[j] {
                    continue;
                }
                let uj = &u[j * S..(j + 1) * S];
                let aj = &mut acc[j * S..(j + 1) * S];
                unsafe {
                    let mut d = V::vmul(kv[0], V::maskz_loadu(masks[0], uj.as_ptr()));
                    for v in 1..nv {
                        let x = V::maskz_loadu(masks[v], uj.as_ptr().add(V::VL * v));
                        d = V::fmadd(kv[v], x, d);
                    }
                    let w = V::splat(c / V::reduce_add(d));
                    for v in 0..nv {
                        let at = aj.as_mut_ptr().add(V::VL * v);
                        let y = V::maskz_loadu(masks[v], at);
                        V::mask_storeu(at, masks[v], V::fmadd(w, kv[v], y));
                    }
                }
            }
            k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{generate, SyntheticSpec};
    use crate::FusedSddmmSpmm;

    fn spec(query_words: usize) -> SyntheticSpec {
        SyntheticSpec {
            vocab: 700,
            dim: 16,
            docs: 300,
            words_per_doc: 12,
            query_words,
            zipf_exponent: 1.0,
            seed: 5 + query_words as u64,
        }
    }

    /// Every stride of the held-row kernel (4 to 32, AVX-512 or AVX2, masked and not) and one
    /// above it (40: the portable kernels), with and without a tolerance, for thread counts
    /// that do and do not divide the documents.
    #[test]
    fn equals_fused_for_every_stride_and_thread_count() {
        for vs in [3, 7, 11, 15, 19, 23, 27, 32, 37] {
            let problem = generate(&spec(vs)).unwrap();
            for tol in [None, Some(1e-9)] {
                let params = SinkhornParams {
                    lambda: 4.0,
                    max_iter: 25,
                    tol,
                };
                let quiet = &mut |_: &IterationReport| Control::Continue;
                let fused = FusedSddmmSpmm
                    .solve(&problem, &params, Par::Seq, quiet)
                    .unwrap();
                let variants: [&dyn WmdSolver; 2] = [&FusedSddmmSpmmPar, &FusedSddmmSpmmParRows];
                for (variant, threads) in
                    variants.into_iter().flat_map(|v| [(v, 1), (v, 2), (v, 3)])
                {
                    let name = variant.name();
                    let par = variant
                        .solve(&problem, &params, Par::threads(threads), quiet)
                        .unwrap();
                    assert_eq!(
                        par.iterations, fused.iterations,
                        "{name} vs {vs} {threads}t"
                    );
                    // One kernel time per thread, summed over the iterations; a part with no
                    // nonzeros may read 0 on a coarse clock, not all of them.
                    assert_eq!(par.thread_kernel_s.len(), threads, "{name} {threads}t");
                    assert!(
                        par.thread_kernel_s
                            .iter()
                            .all(|&s| s >= 0.0 && s.is_finite()),
                        "{name} {threads}t: {:?}",
                        par.thread_kernel_s
                    );
                    assert!(par.kernel_imbalance().is_some_and(|i| i >= 1.0));
                    for (a, b) in par.distances.iter().zip(&fused.distances) {
                        assert!(
                            (a - b).abs() <= 1e-12 * b.abs(),
                            "{name} vs {vs} {threads}t: {a} {b}"
                        );
                    }
                }
            }
        }
    }

    /// Both splits tile the nonzeros in order; the row split gives every part the same number
    /// of whole rows, the nonzero split the same number of nonzeros (within one).
    #[test]
    fn splits_tile_the_nonzeros() {
        // Rows of 5, 1, 1, 1, 1, 1 nonzeros: skewed as Zipf-drawn words are.
        let row_ptr = [0, 5, 6, 7, 8, 9, 10];
        for parts in [1, 2, 3, 6, 7] {
            for split in [Split::Nonzeros, Split::Rows] {
                let ranges = split.ranges(&row_ptr, parts);
                assert_eq!(ranges.len(), parts);
                let mut next = 0;
                for r in &ranges {
                    assert_eq!(r.first, next, "{split:?} {parts}");
                    // A part's first nonzero lies in its row.
                    if r.first < r.end {
                        let row = row_ptr[r.row]..row_ptr[r.row + 1];
                        assert!(row.contains(&r.first), "{split:?} {parts}: {r:?}");
                    }
                    next = r.end;
                }
                assert_eq!(next, 10, "{split:?} {parts}");
            }
        }
        let rows: Vec<usize> = Split::Rows
            .ranges(&row_ptr, 2)
            .iter()
            .map(|r| r.end - r.first)
            .collect();
        assert_eq!(rows, [7, 3], "three rows each: 5 + 1 + 1 against 1 + 1 + 1");
        let nnz: Vec<usize> = Split::Nonzeros
            .ranges(&row_ptr, 2)
            .iter()
            .map(|r| r.end - r.first)
            .collect();
        assert_eq!(nnz, [5, 5]);
    }

    /// A panic in the progress callback (on the calling thread, while the other threads wait at
    /// a barrier) reaches the caller instead of leaving the workers waiting forever.
    #[test]
    fn a_panicking_callback_does_not_hang_the_workers() {
        let problem = generate(&spec(5)).unwrap();
        let params = SinkhornParams {
            lambda: 4.0,
            max_iter: 10,
            tol: None,
        };
        let outcome = std::panic::catch_unwind(|| {
            FusedSddmmSpmmPar.solve(&problem, &params, Par::threads(2), &mut |r| {
                assert!(r.iteration < 3, "callback gives up");
                Control::Continue
            })
        });
        assert!(outcome.is_err());
        // The pool of that solve is gone; a new solve works.
        let again = FusedSddmmSpmmPar.solve(&problem, &params, Par::threads(2), &mut |_| {
            Control::Continue
        });
        assert_eq!(again.unwrap().iterations, 10);
    }
}
