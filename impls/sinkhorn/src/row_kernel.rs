//! The row operations every Sinkhorn kernel is built from (a dot product and an axpy on padded
//! rows), compiled per instruction set and stride, and the dispatch that picks the best for the
//! CPU.
//!
//! Layout: every per-query array is *word-major* ("on-the-fly transpose" in the paper): row `k`
//! holds the `v_s` values of one vocabulary word, padded with zeros to `stride` (a multiple of
//! [`LANES`]), so a kernel touching one nonzero `(word, doc)` reads two unit-stride rows of
//! `stride` values and never a column. `x` and `u` are stored document-major (`N x stride`) for
//! the same reason. The padding entries of `K` are 0 and those of `u` stay 0, so padded lanes add
//! exact zeros to every dot product and the results do not depend on the padding.

/// Width of the fixed-size chunks in the dot products and updates (one AVX2 vector of f64).
pub const LANES: usize = 4;

use crate::real::Real;

/// `v_s` rounded up to a multiple of [`LANES`] (the f64 kernels' rows).
pub fn padded_stride(vs: usize) -> usize {
    crate::real::padded_stride_of::<f64>(vs)
}

/// Dot product of two padded rows (portable kernel); the reduction order is fixed (lane-wise,
/// then a fixed tree), so every caller on the same rows gets the same bits.
#[inline(always)]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    Dynamic.dot(a, b)
}

/// `y += alpha * x` over padded rows (portable kernel).
#[inline(always)]
pub fn axpy(y: &mut [f64], alpha: f64, x: &[f64]) {
    Dynamic.axpy(y, alpha, x)
}

/// The two row operations of every Sinkhorn kernel, on rows of `stride` values (a multiple of
/// [`LANES`]). Implementations differ only in how they are compiled: [`Fixed`] knows the stride
/// at compile time (fully unrolled), [`Dynamic`] does not, and `Avx2` (x86-64 only, built only
/// by [`dispatch`] after checking the CPU) uses AVX2 vectors with fused multiply-adds. All use the
/// same lane-wise order, so results differ between the portable and the FMA kernels only by the
/// fused roundings, and are identical for every variant on one machine.
///
/// The f32 kernels (`E = f32`, built by [`dispatch_f32`]) work the same way on 8 lanes, reduced
/// as `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`.
pub trait RowKernel<E: Real = f64>: Copy + Send + Sync {
    /// Dot product of the first `stride` values of `a` and `b`, lane-wise then `(l0 + l2) + (l1 +
    /// l3)`.
    fn dot(self, a: &[E], b: &[E]) -> E;
    /// `y += alpha * x` over the first `stride` values.
    fn axpy(self, y: &mut [E], alpha: E, x: &[E]);

    /// One document's fused SDDMM + SpMM: `x_new = (sum (c / dot(kt[k], u)) kt[k]) .* inv_r`
    /// over its nonzeros in order (word row `k`, weight `c`), `kt[k]` row `k` of `K^T` (row
    /// length `stride`); `x_new` is overwritten. Dividing by `r` once a document, not once a
    /// nonzero, is what lets the solve skip making `(K / r)^T` (6 MB and a division an entry at
    /// the paper's shape), and each nonzero reads one kernel row, not two. The vector kernels
    /// keep `x_new` in registers for the whole document, so consecutive nonzeros do not wait on
    /// its store and reload; the operations and their order are those of [`RowKernel::axpy`]
    /// then one product a value, so the bits are.
    #[inline(always)]
    fn fused_doc(self, rows: FusedRows<'_, E>, u: &[E], x_new: &mut [E]) {
        fused_doc_in_memory(self, rows, u, x_new)
    }
}

/// What [`RowKernel::fused_doc`] reads of one document: its nonzeros (word rows and weights) and
/// the word-major kernel arrays they index.
#[derive(Clone, Copy, Debug)]
pub struct FusedRows<'a, E> {
    /// `K^T`, rows of `stride` values.
    pub kt: &'a [E],
    /// `1 / r_s` for each query word, padded with zeros to `stride` values
    /// ([`crate::precompute::QueryKernels::inv_r`]).
    pub inv_r: &'a [E],
    /// Row length of `kt`.
    pub stride: usize,
    /// The document's words, as rows of the arrays.
    pub rows: &'a [u32],
    /// The document's weights, one per row.
    pub weights: &'a [E],
}

/// Portable kernel for rows of exactly `S` values.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fixed<const S: usize>;

/// Portable kernel for rows of any multiple of [`LANES`] values.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dynamic;

#[inline(always)]
fn dot_lanes(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; LANES];
    for (ca, cb) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[l] += ca[l] * cb[l];
        }
    }
    (acc[0] + acc[2]) + (acc[1] + acc[3])
}

#[inline(always)]
fn axpy_lanes(y: &mut [f64], alpha: f64, x: &[f64]) {
    for (cy, cx) in y.chunks_exact_mut(LANES).zip(x.chunks_exact(LANES)) {
        for l in 0..LANES {
            cy[l] += alpha * cx[l];
        }
    }
}

impl RowKernel for Dynamic {
    #[inline(always)]
    fn dot(self, a: &[f64], b: &[f64]) -> f64 {
        dot_lanes(a, b)
    }
    #[inline(always)]
    fn axpy(self, y: &mut [f64], alpha: f64, x: &[f64]) {
        axpy_lanes(y, alpha, x)
    }
}

impl<const S: usize> RowKernel for Fixed<S> {
    #[inline(always)]
    fn dot(self, a: &[f64], b: &[f64]) -> f64 {
        dot_lanes(&a[..S], &b[..S])
    }
    #[inline(always)]
    fn axpy(self, y: &mut [f64], alpha: f64, x: &[f64]) {
        axpy_lanes(&mut y[..S], alpha, &x[..S])
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{fused_doc_in_memory, FusedRows, RowKernel, LANES};
    use std::arch::x86_64::*;

    /// AVX2 + FMA kernel for rows of `S` values (`S = 0`: any multiple of 4, read from the slice).
    /// The private field keeps it from being built outside [`super::dispatch`], which checks the
    /// CPU first; that is what makes the intrinsics below sound.
    #[derive(Clone, Copy, Debug)]
    pub struct Avx2<const S: usize>(());

    impl<const S: usize> Avx2<S> {
        /// # Safety
        /// The CPU must support AVX2 and FMA.
        #[inline(always)]
        pub(super) unsafe fn new() -> Self {
            Avx2(())
        }
    }

    impl<const S: usize> RowKernel for Avx2<S> {
        #[inline(always)]
        fn dot(self, a: &[f64], b: &[f64]) -> f64 {
            let n = if S == 0 { a.len() } else { S };
            assert!(a.len() >= n && b.len() >= n && n % LANES == 0);
            // SAFETY: an `Avx2` exists only after the AVX2 + FMA check (see `new`); every load
            // reads 4 values at `4 c + 4 <= n`, inside both slices (asserted above).
            unsafe {
                let mut acc = _mm256_setzero_pd();
                for c in 0..n / LANES {
                    let x = _mm256_loadu_pd(a.as_ptr().add(c * LANES));
                    let y = _mm256_loadu_pd(b.as_ptr().add(c * LANES));
                    acc = _mm256_fmadd_pd(x, y, acc);
                }
                // (a0 + a2) + (a1 + a3), the portable kernel's order.
                let pair = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
                _mm_cvtsd_f64(pair) + _mm_cvtsd_f64(_mm_unpackhi_pd(pair, pair))
            }
        }

        #[inline(always)]
        fn axpy(self, y: &mut [f64], alpha: f64, x: &[f64]) {
            let n = if S == 0 { y.len() } else { S };
            assert!(y.len() >= n && x.len() >= n && n % LANES == 0);
            // SAFETY: as in `dot`; loads and stores stay inside the asserted lengths.
            unsafe {
                let a = _mm256_set1_pd(alpha);
                for c in 0..n / LANES {
                    let py = y.as_mut_ptr().add(c * LANES);
                    let v = _mm256_fmadd_pd(
                        a,
                        _mm256_loadu_pd(x.as_ptr().add(c * LANES)),
                        _mm256_loadu_pd(py),
                    );
                    _mm256_storeu_pd(py, v);
                }
            }
        }

        #[inline(always)]
        fn fused_doc(self, rows: FusedRows<'_, f64>, u: &[f64], x_new: &mut [f64]) {
            const MAX_VECTORS: usize = 8;
            if S == 0 || S / LANES > MAX_VECTORS || rows.stride != S {
                return fused_doc_in_memory(self, rows, u, x_new);
            }
            assert!(x_new.len() >= S && rows.inv_r.len() >= S);
            // SAFETY: an `Avx2` exists only after the AVX2 + FMA check (see `new`); the stores
            // of `x_new` and loads of `inv_r` stay inside their asserted `S` values, and each
            // row is a checked slice of `S` values.
            unsafe {
                let mut acc = [_mm256_setzero_pd(); MAX_VECTORS];
                for (&k, &weight) in rows.rows.iter().zip(rows.weights) {
                    let k = k as usize * S;
                    let row = &rows.kt[k..k + S];
                    let w = weight / self.dot(row, u);
                    let a = _mm256_set1_pd(w);
                    for (c, acc) in acc.iter_mut().enumerate().take(S / LANES) {
                        *acc =
                            _mm256_fmadd_pd(a, _mm256_loadu_pd(row.as_ptr().add(c * LANES)), *acc);
                    }
                }
                for (c, acc) in acc.iter().enumerate().take(S / LANES) {
                    let inv = _mm256_loadu_pd(rows.inv_r.as_ptr().add(c * LANES));
                    _mm256_storeu_pd(x_new.as_mut_ptr().add(c * LANES), _mm256_mul_pd(*acc, inv));
                }
            }
        }
    }
}

/// [`RowKernel::fused_doc`] with `x_new` in memory: the trait's own loop, for the kernels that
/// override it and meet a stride they do not keep in registers.
#[inline(always)]
fn fused_doc_in_memory<E: Real, K: RowKernel<E>>(
    kernel: K,
    rows: FusedRows<'_, E>,
    u: &[E],
    x_new: &mut [E],
) {
    let stride = rows.stride;
    let x_new = &mut x_new[..stride];
    x_new.fill(E::ZERO);
    for (&k, &c) in rows.rows.iter().zip(rows.weights) {
        let k = k as usize * stride;
        let row = &rows.kt[k..k + stride];
        let w = c / kernel.dot(row, u);
        kernel.axpy(x_new, w, row);
    }
    for (x, &inv) in x_new.iter_mut().zip(&rows.inv_r[..stride]) {
        *x = *x * inv;
    }
}

/// A kernel body generic over the row kernel, so that [`dispatch`] can compile it once per
/// instruction set and stride.
pub trait KernelTask<E: Real = f64> {
    /// What the kernel body returns.
    type Output;
    /// Runs the body with `kernel`; monomorphized once per kernel type [`dispatch`] (or
    /// [`dispatch_f32`]) may pick.
    fn run<K: RowKernel<E>>(self, kernel: K) -> Self::Output;
}

/// Whether the AVX2 + FMA kernels can run here (checked once, then cached by std).
#[cfg(target_arch = "x86_64")]
fn has_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

macro_rules! by_stride {
    ($stride:expr, $task:expr, $kernel:ident) => {
        match $stride {
            4 => $task.run($kernel::<4>()),
            8 => $task.run($kernel::<8>()),
            12 => $task.run($kernel::<12>()),
            16 => $task.run($kernel::<16>()),
            20 => $task.run($kernel::<20>()),
            24 => $task.run($kernel::<24>()),
            28 => $task.run($kernel::<28>()),
            32 => $task.run($kernel::<32>()),
            _ => $task.run($kernel::<0>()),
        }
    };
}

#[inline(always)]
fn portable<const S: usize>() -> impl RowKernel {
    PortableKernel::<S>
}

/// `Fixed<S>`, or `Dynamic` behaviour for `S = 0`.
#[derive(Clone, Copy, Debug)]
struct PortableKernel<const S: usize>;

impl<const S: usize> RowKernel for PortableKernel<S> {
    #[inline(always)]
    fn dot(self, a: &[f64], b: &[f64]) -> f64 {
        if S == 0 {
            Dynamic.dot(a, b)
        } else {
            Fixed::<S>.dot(a, b)
        }
    }
    #[inline(always)]
    fn axpy(self, y: &mut [f64], alpha: f64, x: &[f64]) {
        if S == 0 {
            Dynamic.axpy(y, alpha, x)
        } else {
            Fixed::<S>.axpy(y, alpha, x)
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dispatch_fma<T: KernelTask>(stride: usize, task: T) -> T::Output {
    #[inline(always)]
    fn fma<const S: usize>() -> avx2::Avx2<S> {
        // SAFETY: only reached from `dispatch_fma`, which runs only after `has_fma()`.
        unsafe { avx2::Avx2::<S>::new() }
    }
    by_stride!(stride, task, fma)
}

/// Runs `task` with the best row kernel for this CPU and `stride`: AVX2 + FMA vectors when
/// available (the crate is built for baseline x86-64, where the compiler would emit scalar SSE2
/// code for these short rows), specialized for strides up to 32 (queries of up to 32 words).
/// Call it inside each thread's work: target features do not cross into rayon closures.
#[inline]
pub fn dispatch<T: KernelTask>(stride: usize, task: T) -> T::Output {
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above), all `dispatch_fma` needs.
        return unsafe { dispatch_fma(stride, task) };
    }
    by_stride!(stride, task, portable)
}

/// Lanes of the f32 kernels (one AVX2 vector of f32).
pub const LANES_F32: usize = 8;

/// Portable f32 kernel for rows of `S` values (`S = 0`: any multiple of [`LANES_F32`]).
#[derive(Clone, Copy, Debug)]
struct PortableF32<const S: usize>;

impl<const S: usize> RowKernel<f32> for PortableF32<S> {
    #[inline(always)]
    fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        let n = if S == 0 { a.len() } else { S };
        let mut acc = [0.0f32; LANES_F32];
        for (ca, cb) in a[..n]
            .chunks_exact(LANES_F32)
            .zip(b[..n].chunks_exact(LANES_F32))
        {
            for l in 0..LANES_F32 {
                acc[l] += ca[l] * cb[l];
            }
        }
        ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
    }
    #[inline(always)]
    fn axpy(self, y: &mut [f32], alpha: f32, x: &[f32]) {
        let n = if S == 0 { y.len() } else { S };
        for (cy, cx) in y[..n]
            .chunks_exact_mut(LANES_F32)
            .zip(x[..n].chunks_exact(LANES_F32))
        {
            for l in 0..LANES_F32 {
                cy[l] += alpha * cx[l];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2_f32 {
    use super::{fused_doc_in_memory, FusedRows, RowKernel, LANES_F32};
    use std::arch::x86_64::*;

    /// AVX2 + FMA f32 kernel for rows of `S` values (`S = 0`: any multiple of 8). Built only by
    /// [`super::dispatch_f32`] after the CPU check, as `Avx2` is.
    #[derive(Clone, Copy, Debug)]
    pub struct Avx2F32<const S: usize>(());

    impl<const S: usize> Avx2F32<S> {
        /// # Safety
        /// The CPU must support AVX2 and FMA.
        #[inline(always)]
        pub(super) unsafe fn new() -> Self {
            Avx2F32(())
        }
    }

    impl<const S: usize> RowKernel<f32> for Avx2F32<S> {
        #[inline(always)]
        fn dot(self, a: &[f32], b: &[f32]) -> f32 {
            let n = if S == 0 { a.len() } else { S };
            assert!(a.len() >= n && b.len() >= n && n % LANES_F32 == 0);
            // SAFETY: an `Avx2F32` exists only after the AVX2 + FMA check (see `new`); every
            // load reads 8 values at `8 c + 8 <= n`, inside both slices (asserted above).
            unsafe {
                let mut acc = _mm256_setzero_ps();
                for c in 0..n / LANES_F32 {
                    let x = _mm256_loadu_ps(a.as_ptr().add(c * LANES_F32));
                    let y = _mm256_loadu_ps(b.as_ptr().add(c * LANES_F32));
                    acc = _mm256_fmadd_ps(x, y, acc);
                }
                // ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), the portable order.
                let quad = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
                let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
                _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)))
            }
        }

        #[inline(always)]
        fn axpy(self, y: &mut [f32], alpha: f32, x: &[f32]) {
            let n = if S == 0 { y.len() } else { S };
            assert!(y.len() >= n && x.len() >= n && n % LANES_F32 == 0);
            // SAFETY: as in `dot`; loads and stores stay inside the asserted lengths.
            unsafe {
                let a = _mm256_set1_ps(alpha);
                for c in 0..n / LANES_F32 {
                    let py = y.as_mut_ptr().add(c * LANES_F32);
                    let v = _mm256_fmadd_ps(
                        a,
                        _mm256_loadu_ps(x.as_ptr().add(c * LANES_F32)),
                        _mm256_loadu_ps(py),
                    );
                    _mm256_storeu_ps(py, v);
                }
            }
        }

        #[inline(always)]
        fn fused_doc(self, rows: FusedRows<'_, f32>, u: &[f32], x_new: &mut [f32]) {
            const MAX_VECTORS: usize = 4;
            if S == 0 || S / LANES_F32 > MAX_VECTORS || rows.stride != S {
                return fused_doc_in_memory(self, rows, u, x_new);
            }
            assert!(x_new.len() >= S && rows.inv_r.len() >= S);
            // SAFETY: as in the f64 kernel's `fused_doc`.
            unsafe {
                let mut acc = [_mm256_setzero_ps(); MAX_VECTORS];
                for (&k, &weight) in rows.rows.iter().zip(rows.weights) {
                    let k = k as usize * S;
                    let row = &rows.kt[k..k + S];
                    let w = weight / self.dot(row, u);
                    let a = _mm256_set1_ps(w);
                    for (c, acc) in acc.iter_mut().enumerate().take(S / LANES_F32) {
                        *acc = _mm256_fmadd_ps(
                            a,
                            _mm256_loadu_ps(row.as_ptr().add(c * LANES_F32)),
                            *acc,
                        );
                    }
                }
                for (c, acc) in acc.iter().enumerate().take(S / LANES_F32) {
                    let inv = _mm256_loadu_ps(rows.inv_r.as_ptr().add(c * LANES_F32));
                    let x = _mm256_mul_ps(*acc, inv);
                    _mm256_storeu_ps(x_new.as_mut_ptr().add(c * LANES_F32), x);
                }
            }
        }
    }
}

macro_rules! by_stride_f32 {
    ($stride:expr, $task:expr, $kernel:ident) => {
        match $stride {
            8 => $task.run($kernel::<8>()),
            16 => $task.run($kernel::<16>()),
            24 => $task.run($kernel::<24>()),
            32 => $task.run($kernel::<32>()),
            _ => $task.run($kernel::<0>()),
        }
    };
}

#[inline(always)]
fn portable_f32<const S: usize>() -> PortableF32<S> {
    PortableF32::<S>
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dispatch_fma_f32<T: KernelTask<f32>>(stride: usize, task: T) -> T::Output {
    #[inline(always)]
    fn fma<const S: usize>() -> avx2_f32::Avx2F32<S> {
        // SAFETY: only reached from `dispatch_fma_f32`, which runs only after `has_fma()`.
        unsafe { avx2_f32::Avx2F32::<S>::new() }
    }
    by_stride_f32!(stride, task, fma)
}

/// [`dispatch`] for f32 rows: AVX2 + FMA when available, specialized for strides up to 32.
#[inline]
pub fn dispatch_f32<T: KernelTask<f32>>(stride: usize, task: T) -> T::Output {
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above), all it needs.
        return unsafe { dispatch_fma_f32(stride, task) };
    }
    by_stride_f32!(stride, task, portable_f32)
}

/// [`dispatch_f32`] always on the portable kernels, so tests check them on any host.
#[doc(hidden)]
pub fn dispatch_f32_portable<T: KernelTask<f32>>(stride: usize, task: T) -> T::Output {
    by_stride_f32!(stride, task, portable_f32)
}

/// Runs `f` compiled for AVX-512F (or AVX2) when the CPU has it, so that the plain loops it
/// inlines (the updates, the gathers) use the wide vectors; the crate itself targets baseline
/// x86-64. `f` must not rely on anything but ordinary arithmetic: results are the same either way.
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { avx512(f) };
        }
        if has_fma() {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            return unsafe { avx2(f) };
        }
    }
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_dot_and_axpy_ignore_zero_padding() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0, 0.0];
        let b = [2.0, 2.0, 2.0, 2.0, 2.0, 7.0, 7.0, 7.0];
        assert_eq!(dot(&a, &b), 30.0);
        let mut y = [1.0; 8];
        axpy(&mut y, 2.0, &a);
        assert_eq!(y, [3.0, 5.0, 7.0, 9.0, 11.0, 1.0, 1.0, 1.0]);
        assert_eq!(padded_stride(19), 20);
        assert_eq!(padded_stride(1), 4);
    }

    /// The dot product and the axpy of rows `a`, `b` through whichever f32 kernel a dispatch
    /// picks.
    struct RowOps<'a> {
        a: &'a [f32],
        b: &'a [f32],
    }

    impl KernelTask<f32> for RowOps<'_> {
        type Output = (f32, Vec<f32>);
        fn run<K: RowKernel<f32>>(self, kernel: K) -> Self::Output {
            let mut y = self.b.to_vec();
            kernel.axpy(&mut y, 0.5, self.a);
            (kernel.dot(self.a, self.b), y)
        }
    }

    /// One document through `fused_doc` and through the in-memory loop, with the same kernel.
    struct BothFused<'a, E> {
        rows: FusedRows<'a, E>,
        u: &'a [E],
    }

    impl<E: Real> KernelTask<E> for BothFused<'_, E> {
        type Output = (Vec<E>, Vec<E>);
        fn run<K: RowKernel<E>>(self, kernel: K) -> Self::Output {
            let start: Vec<E> = (0..self.rows.stride)
                .map(|i| E::from_f64(0.5 + i as f64 / 64.0))
                .collect();
            let (mut fused, mut memory) = (start.clone(), start);
            kernel.fused_doc(self.rows, self.u, &mut fused);
            fused_doc_in_memory(kernel, self.rows, self.u, &mut memory);
            (fused, memory)
        }
    }

    /// `K^T`, `1 / r` (padded with zeros), the document's rows and weights, and `u`.
    type FusedCase<E> = (Vec<E>, Vec<E>, Vec<u32>, Vec<E>, Vec<E>);

    /// Kernel rows of 5 words for `vs` query words (padding 0), a 7-nonzero document over them
    /// with a repeated word, and `u`; irrational-ish values so that every rounding matters.
    fn fused_case<E: Real>(vs: usize, stride: usize) -> FusedCase<E> {
        let value = |i: usize, j: usize| {
            if j < vs {
                E::from_f64(((i * 31 + j * 17) % 97) as f64 / 97.0 + 0.1f64.sqrt())
            } else {
                E::ZERO
            }
        };
        let kt = (0..5 * stride)
            .map(|n| value(n / stride, n % stride))
            .collect();
        let inv_r = (0..stride).map(|j| value(7, j)).collect();
        let rows = vec![3, 0, 4, 4, 1, 2, 3];
        let weights = (0..7)
            .map(|i| E::from_f64(1.0 / (i as f64 + 3.0)))
            .collect();
        let u = (0..stride).map(|j| value(11, j)).collect();
        (kt, inv_r, rows, weights, u)
    }

    #[test]
    fn fused_doc_in_registers_equals_the_in_memory_loop_bit_for_bit() {
        for vs in [1, 4, 7, 13, 19, 24, 29, 32, 37] {
            let stride = padded_stride(vs);
            let (kt, inv_r, rows, weights, u) = fused_case::<f64>(vs, stride);
            let rows = FusedRows {
                kt: &kt,
                inv_r: &inv_r,
                stride,
                rows: &rows,
                weights: &weights,
            };
            let (fused, memory) = dispatch(stride, BothFused { rows, u: &u });
            assert_eq!(fused, memory, "f64, stride {stride}");
            let stride = crate::real::padded_stride_of::<f32>(vs);
            let (kt, inv_r, rows, weights, u) = fused_case::<f32>(vs, stride);
            let rows = FusedRows {
                kt: &kt,
                inv_r: &inv_r,
                stride,
                rows: &rows,
                weights: &weights,
            };
            let (fused, memory) = dispatch_f32(stride, BothFused { rows, u: &u });
            assert_eq!(fused, memory, "f32, stride {stride}");
        }
    }

    #[test]
    fn f32_kernels_match_f64_arithmetic_on_every_stride_and_path() {
        // Strides with a fixed-size kernel (8..32) and one without (40); values k/8, exact in
        // f32, so the products and sums are exact below 2^24 and every path must agree with f64
        // arithmetic exactly. The padding (beyond `vs`) of `a` is 0, that of `b` is junk.
        for (vs, stride) in [(1, 8), (8, 8), (13, 16), (19, 24), (30, 32), (37, 40)] {
            let a: Vec<f32> = (0..stride)
                .map(|i| {
                    if i < vs {
                        (i % 7) as f32 / 8.0 + 0.25
                    } else {
                        0.0
                    }
                })
                .collect();
            let b: Vec<f32> = (0..stride)
                .map(|i| {
                    if i < vs {
                        3.0 - (i % 5) as f32 / 8.0
                    } else {
                        9.0
                    }
                })
                .collect();
            let dot: f64 = (0..vs).map(|i| a[i] as f64 * b[i] as f64).sum();
            let axpy: Vec<f32> = (0..stride).map(|i| b[i] + 0.5 * a[i]).collect();
            for (path, (d, y)) in [
                ("dispatched", dispatch_f32(stride, RowOps { a: &a, b: &b })),
                (
                    "portable",
                    dispatch_f32_portable(stride, RowOps { a: &a, b: &b }),
                ),
            ] {
                assert_eq!(d as f64, dot, "{path} dot at stride {stride}");
                assert_eq!(y, axpy, "{path} axpy at stride {stride}");
            }
        }
        assert_eq!(crate::real::padded_stride_of::<f32>(19), 24);
        assert_eq!(crate::real::padded_stride_of::<f32>(1), 8);
    }
}
