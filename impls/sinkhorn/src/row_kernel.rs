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

/// `v_s` rounded up to a multiple of [`LANES`].
pub fn padded_stride(vs: usize) -> usize {
    vs.div_ceil(LANES) * LANES
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
pub trait RowKernel: Copy + Send + Sync {
    /// Dot product of the first `stride` values of `a` and `b`, lane-wise then `(l0 + l2) + (l1 +
    /// l3)`.
    fn dot(self, a: &[f64], b: &[f64]) -> f64;
    /// `y += alpha * x` over the first `stride` values.
    fn axpy(self, y: &mut [f64], alpha: f64, x: &[f64]);
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
    use super::{RowKernel, LANES};
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
    }
}

/// A kernel body generic over the row kernel, so that [`dispatch`] can compile it once per
/// instruction set and stride.
pub trait KernelTask {
    /// What the kernel body returns.
    type Output;
    /// Runs the body with `kernel`; monomorphized once per kernel type [`dispatch`] may pick.
    fn run<K: RowKernel>(self, kernel: K) -> Self::Output;
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
}
