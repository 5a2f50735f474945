//! The floating-point type a solve runs in: `f64` (every variant) or `f32` (`doc-major-f32`).
//!
//! Everything that differs between the two sits here, so the kernels are written once, generic
//! over [`Real`]: where the embeddings come from ([`WmdProblem::vecs`] or the `f32` copy
//! [`WmdProblem::vecs_f32`]), the width of the row kernels' vectors and which kernels
//! [`Real::dispatch`] compiles, and how `exp` is taken. Inputs (document weights, query weights,
//! `lambda`) stay `f64` and are rounded where a kernel reads them; the distances a solve returns
//! are `f64` whatever it ran in.

use crate::buffer::Spares;
use crate::distance::QuerySide;
#[cfg(target_arch = "x86_64")]
use crate::distance_simd::QueryPack;
use crate::doc_major::{PartStats, SolveDocs};
use crate::precompute::KernelRows;
use crate::problem::{WmdError, WmdProblem};
use crate::row_kernel::KernelTask;
use parbench_common::work::Precision;
use std::fmt::Debug;
use std::ops::{Add, AddAssign, Div, Mul, Neg, Sub};

/// `f64` or `f32`, with what the Sinkhorn kernels need of each.
pub trait Real:
    Copy
    + Send
    + Sync
    + Debug
    + Default
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + 'static
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// Positive infinity.
    const INFINITY: Self;
    /// Values in one AVX2 vector: the row kernels' lane count, and what rows are padded to.
    const LANES: usize;
    /// Bytes per value.
    const BYTES: usize;
    /// The [`Precision`] work is counted in.
    const PRECISION: Precision;
    /// Below this fraction of `|a|^2 + |b|^2` the distance kernel's GEMM form
    /// `|a|^2 + |b|^2 - 2 a.b` has lost too many digits to cancellation (its absolute error is
    /// about the type's epsilon times `|a|^2 + |b|^2`), and the squared distance is summed
    /// directly. f64: 1e-4 keeps the relative error below ~1e-12, for the 1e-10 agreement the
    /// tests demand. f32: 1e-2 keeps it below ~1e-5, under the error f32's rounding leaves in
    /// the iteration anyway. Real embeddings rarely come this close except for identical words,
    /// which then get exactly 0.
    const CANCELLATION_RATIO: f64;

    /// The process's spare large buffers of this type ([`crate::buffer`]).
    fn spares() -> &'static Spares<Self>;
    /// `x` rounded to this type.
    fn from_f64(x: f64) -> Self;
    /// `self` as f64 (exact).
    fn to_f64(self) -> f64;
    /// Neither NaN nor infinite.
    fn is_finite(self) -> bool;
    /// `|self|`.
    fn abs(self) -> Self;
    /// The larger of the two (the other when one is NaN).
    fn max(self, other: Self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// `values` in this type: the slice itself for f64, rounded into `scratch` for f32.
    fn from_f64_slice<'a>(values: &'a [f64], scratch: &'a mut Vec<Self>) -> &'a [Self];
    /// The problem's embeddings in this type, row-major `V x d`.
    fn embeddings(problem: &WmdProblem) -> &[Self];
    /// The query side of a distance computation for `query_words` (see [`crate::distance`]):
    /// the microkernel's panels where the CPU has AVX-512F or AVX2 with FMA, else the GEMM's
    /// blocks.
    fn query_side(problem: &WmdProblem, query_words: &[u32]) -> QuerySide<Self>;
    /// The in-place microkernel on one tile of words ([`crate::distance_simd::distances`]).
    #[cfg(target_arch = "x86_64")]
    fn packed_distances(
        pack: &QueryPack<Self>,
        vecs: &[Self],
        words: &[u32],
        stride: usize,
        out: &mut [Self],
    );
    /// The kernel rows of `m` (word-major rows of `stride` values, `vs` of them used):
    /// `out[i] = exp(-lambda * m[i])` in f64, each within about one ulp. In f32 each row is
    /// first shifted by its smallest used distance, `exp(-lambda (m[i] - min_s m[s]))`, so its
    /// largest entry is 1: scaling a word's rows of `K`, `K / r` and `K .* M` by one factor
    /// leaves `x` and the distances unchanged (`v` takes the inverse factor), and f32's
    /// exponent range (down to about `exp(-87)`) then limits only the spread of a word's
    /// distances to the query, not the distances themselves.
    fn exp_neg_scaled(m: &[Self], lambda: f64, stride: usize, vs: usize, out: &mut [Self]);
    /// [`crate::precompute::kernel_rows`] by this type's own kernel, returning true, where it
    /// has one for this CPU and `stride` (f32 with AVX2 and FMA); false, having done nothing,
    /// where the generic rows should run.
    fn own_kernel_rows(_rows: &mut KernelRows<'_, Self>) -> bool {
        false
    }
    /// Runs `task` with the best row kernel for this type, this CPU and `stride`.
    fn dispatch<T: KernelTask<Self>>(stride: usize, task: T) -> T::Output;
    /// The document-major loop with a document in each vector lane ([`crate::doc_lanes`]),
    /// or `None` where it does not apply (then the row kernels run it).
    fn solve_docs_in_lanes(task: &mut SolveDocs<'_, Self>) -> Option<Result<PartStats, WmdError>>;
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const INFINITY: f64 = f64::INFINITY;
    const LANES: usize = 4;
    const BYTES: usize = 8;
    const PRECISION: Precision = Precision::F64;
    const CANCELLATION_RATIO: f64 = 1e-4;
    fn spares() -> &'static Spares<f64> {
        static SPARES: Spares<f64> = Spares::new();
        &SPARES
    }
    #[inline(always)]
    fn from_f64(x: f64) -> f64 {
        x
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
    #[inline(always)]
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    #[inline(always)]
    fn max(self, other: f64) -> f64 {
        f64::max(self, other)
    }
    #[inline(always)]
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    #[inline(always)]
    fn from_f64_slice<'a>(values: &'a [f64], _scratch: &'a mut Vec<f64>) -> &'a [f64] {
        values
    }
    fn embeddings(problem: &WmdProblem) -> &[f64] {
        problem.vecs()
    }
    fn query_side(problem: &WmdProblem, query_words: &[u32]) -> QuerySide<f64> {
        crate::distance::native_side(problem, query_words)
    }
    #[cfg(target_arch = "x86_64")]
    fn packed_distances(
        pack: &QueryPack<f64>,
        vecs: &[f64],
        words: &[u32],
        stride: usize,
        out: &mut [f64],
    ) {
        crate::distance_simd::distances(pack, vecs, words, stride, out)
    }
    fn exp_neg_scaled(m: &[f64], lambda: f64, _stride: usize, _vs: usize, out: &mut [f64]) {
        for (k, &d) in out.iter_mut().zip(m) {
            *k = -lambda * d;
        }
        crate::fast_exp::exp_in_place(out);
    }
    fn own_kernel_rows(rows: &mut KernelRows<'_, f64>) -> bool {
        #[cfg(target_arch = "x86_64")]
        return crate::precompute::lanes_f64::kernel_rows(rows);
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = rows;
            false
        }
    }
    fn solve_docs_in_lanes(task: &mut SolveDocs<'_, f64>) -> Option<Result<PartStats, WmdError>> {
        #[cfg(target_arch = "x86_64")]
        return crate::doc_lanes::solve_docs(task);
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = task;
            None
        }
    }
    #[inline(always)]
    fn dispatch<T: KernelTask<f64>>(stride: usize, task: T) -> T::Output {
        crate::row_kernel::dispatch(stride, task)
    }
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const INFINITY: f32 = f32::INFINITY;
    const LANES: usize = 8;
    const BYTES: usize = 4;
    const PRECISION: Precision = Precision::F32;
    const CANCELLATION_RATIO: f64 = 1e-2;
    fn spares() -> &'static Spares<f32> {
        static SPARES: Spares<f32> = Spares::new();
        &SPARES
    }
    #[inline(always)]
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
    #[inline(always)]
    fn abs(self) -> f32 {
        f32::abs(self)
    }
    #[inline(always)]
    fn max(self, other: f32) -> f32 {
        f32::max(self, other)
    }
    #[inline(always)]
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn from_f64_slice<'a>(values: &'a [f64], scratch: &'a mut Vec<f32>) -> &'a [f32] {
        scratch.clear();
        scratch.extend(values.iter().map(|&x| x as f32));
        scratch
    }
    fn embeddings(problem: &WmdProblem) -> &[f32] {
        problem.vecs_f32()
    }
    /// The AVX-512 microkernel where there is AVX-512F, else the GEMM path, as for f64.
    fn query_side(problem: &WmdProblem, query_words: &[u32]) -> QuerySide<f32> {
        crate::distance::native_side(problem, query_words)
    }
    #[cfg(target_arch = "x86_64")]
    fn packed_distances(
        pack: &QueryPack<f32>,
        vecs: &[f32],
        words: &[u32],
        stride: usize,
        out: &mut [f32],
    ) {
        crate::distance_simd::distances(pack, vecs, words, stride, out)
    }
    /// The exponentials are taken in f64 by the vectorized kernel and rounded once, so each is
    /// the correctly rounded f32 but for double rounding (at most one ulp); the f64 scratch is a
    /// few KB on the stack, in L1. Padding entries come out as 1 (the caller zeroes them).
    fn exp_neg_scaled(m: &[f32], lambda: f64, stride: usize, vs: usize, out: &mut [f32]) {
        const BLOCK: usize = 512;
        let rows = (BLOCK / stride).max(1);
        let mut wide = vec![0.0f64; rows * stride];
        for (m, out) in m.chunks(rows * stride).zip(out.chunks_mut(rows * stride)) {
            let wide = &mut wide[..m.len()];
            for (w, m) in wide.chunks_exact_mut(stride).zip(m.chunks_exact(stride)) {
                let shift = m[..vs].iter().fold(f32::INFINITY, |a, &b| a.min(b)) as f64;
                for (w, &d) in w[..vs].iter_mut().zip(m) {
                    *w = -lambda * (d as f64 - shift);
                }
                w[vs..].fill(0.0);
            }
            crate::fast_exp::exp_in_place(wide);
            for (o, &w) in out.iter_mut().zip(wide.iter()) {
                *o = w as f32;
            }
        }
    }
    fn own_kernel_rows(rows: &mut KernelRows<'_, f32>) -> bool {
        #[cfg(target_arch = "x86_64")]
        if rows.stride.is_multiple_of(8) && crate::simd::has_avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA (checked), `stride` is a multiple of 8, and a
            // `KernelRows` holds `r` of at most `stride` values and outputs as long as `m`.
            unsafe { crate::precompute::avx2::kernel_rows_f32(rows) };
            return true;
        }
        let _ = rows;
        false
    }
    fn solve_docs_in_lanes(task: &mut SolveDocs<'_, f32>) -> Option<Result<PartStats, WmdError>> {
        #[cfg(target_arch = "x86_64")]
        return crate::doc_lanes::solve_docs(task);
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = task;
            None
        }
    }
    #[inline(always)]
    fn dispatch<T: KernelTask<f32>>(stride: usize, task: T) -> T::Output {
        crate::row_kernel::dispatch_f32(stride, task)
    }
}

/// `v_s` rounded up to a multiple of `E::LANES`: the row length of every per-query array.
pub fn padded_stride_of<E: Real>(vs: usize) -> usize {
    vs.div_ceil(E::LANES) * E::LANES
}
