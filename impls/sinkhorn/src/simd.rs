//! The vectors of the x86-64 kernels: [`Zmm`] (AVX-512F, 8 f64 or 16 f32 lanes) and [`Ymm`]
//! (AVX2 with FMA, 4 or 8), behind one trait, [`Vector`], so that a kernel is written once and
//! compiled for each (the distance microkernel of [`crate::distance_simd`], the documents-in-lanes
//! loop of [`crate::doc_lanes`]). Each method needs the instruction set its type is named after;
//! the kernels' entry points check it ([`has_avx512f`], [`has_avx2_fma`]).

use crate::real::Real;
use std::arch::x86_64::*;
use std::marker::PhantomData;

/// Whether this CPU has AVX-512F (checked once, then cached by std).
pub(crate) fn has_avx512f() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// Whether this CPU has AVX2 and FMA.
pub(crate) fn has_avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// The AVX-512F vector of an element type and its operations, which [`Zmm`] takes. Every method
/// requires AVX-512F ([`has_avx512f`]).
pub trait Avx512Real: Real {
    /// The 512-bit vector.
    type V: Copy;
    /// Lanes per vector.
    const VL: usize;
    /// # Safety
    /// AVX-512F.
    unsafe fn zero() -> Self::V;
    /// # Safety
    /// AVX-512F; `p` 64-byte aligned with `VL` readable values.
    unsafe fn load(p: *const Self) -> Self::V;
    /// # Safety
    /// AVX-512F; `VL` readable values at `p`.
    unsafe fn loadu(p: *const Self) -> Self::V;
    /// # Safety
    /// AVX-512F; the lanes of `mask` readable at `p`.
    unsafe fn maskz_loadu(mask: u32, p: *const Self) -> Self::V;
    /// # Safety
    /// AVX-512F; the lanes of `mask` writable at `p`.
    unsafe fn mask_storeu(p: *mut Self, mask: u32, v: Self::V);
    /// # Safety
    /// AVX-512F.
    unsafe fn splat(x: Self) -> Self::V;
    /// `a b + c` with one rounding.
    /// # Safety
    /// AVX-512F.
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// [`Vector::fmadd_low_half`] with AVX-512F.
    /// # Safety
    /// AVX-512F.
    unsafe fn fmadd_low_half(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vadd(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vmul(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vsqrt(a: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vdiv(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vsub(a: Self::V, b: Self::V) -> Self::V;
    /// The larger of each pair (`b` where either is NaN).
    /// # Safety
    /// AVX-512F.
    unsafe fn vmax(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vabs(a: Self::V) -> Self::V;
    /// The lanes of `mask` where `a < b` (false where either is NaN).
    /// # Safety
    /// AVX-512F.
    unsafe fn mask_lt(mask: u32, a: Self::V, b: Self::V) -> u32;
    /// `b` in the lanes of `mask`, `a` elsewhere.
    /// # Safety
    /// AVX-512F.
    unsafe fn blend(mask: u32, a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F; `p` 64-byte aligned with `VL` writable values.
    unsafe fn store(p: *mut Self, v: Self::V);
    /// # Safety
    /// AVX-512F; `VL` writable values at `p`.
    unsafe fn storeu(p: *mut Self, v: Self::V);
    /// The lanes of `mask` where `a <= b`.
    /// # Safety
    /// AVX-512F.
    unsafe fn mask_le(mask: u32, a: Self::V, b: Self::V) -> u32;
    /// # Safety
    /// AVX-512F.
    unsafe fn reduce_add(a: Self::V) -> Self;
}

impl Avx512Real for f64 {
    type V = __m512d;
    const VL: usize = 8;
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn zero() -> __m512d {
        _mm512_setzero_pd()
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load(p: *const f64) -> __m512d {
        // SAFETY: the caller's contract.
        unsafe { _mm512_load_pd(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn loadu(p: *const f64) -> __m512d {
        // SAFETY: the caller's contract.
        unsafe { _mm512_loadu_pd(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn maskz_loadu(mask: u32, p: *const f64) -> __m512d {
        // SAFETY: the caller's contract.
        unsafe { _mm512_maskz_loadu_pd(mask as __mmask8, p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_storeu(p: *mut f64, mask: u32, v: __m512d) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_mask_storeu_pd(p, mask as __mmask8, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn splat(x: f64) -> __m512d {
        _mm512_set1_pd(x)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn fmadd(a: __m512d, b: __m512d, c: __m512d) -> __m512d {
        _mm512_fmadd_pd(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn fmadd_low_half(a: __m512d, b: __m512d, c: __m512d) -> __m512d {
        let half = |v| _mm512_castpd512_pd256(v);
        _mm512_castpd256_pd512(_mm256_fmadd_pd(half(a), half(b), half(c)))
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vadd(a: __m512d, b: __m512d) -> __m512d {
        _mm512_add_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vmul(a: __m512d, b: __m512d) -> __m512d {
        _mm512_mul_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vsqrt(a: __m512d) -> __m512d {
        _mm512_sqrt_pd(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vdiv(a: __m512d, b: __m512d) -> __m512d {
        _mm512_div_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vsub(a: __m512d, b: __m512d) -> __m512d {
        _mm512_sub_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vmax(a: __m512d, b: __m512d) -> __m512d {
        _mm512_max_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vabs(a: __m512d) -> __m512d {
        _mm512_abs_pd(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_lt(mask: u32, a: __m512d, b: __m512d) -> u32 {
        _mm512_mask_cmp_pd_mask(mask as __mmask8, a, b, _CMP_LT_OQ) as u32
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn blend(mask: u32, a: __m512d, b: __m512d) -> __m512d {
        _mm512_mask_blend_pd(mask as __mmask8, a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store(p: *mut f64, v: __m512d) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_store_pd(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn storeu(p: *mut f64, v: __m512d) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_storeu_pd(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_le(mask: u32, a: __m512d, b: __m512d) -> u32 {
        _mm512_mask_cmp_pd_mask(mask as __mmask8, a, b, _CMP_LE_OQ) as u32
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn reduce_add(a: __m512d) -> f64 {
        _mm512_reduce_add_pd(a)
    }
}

impl Avx512Real for f32 {
    type V = __m512;
    const VL: usize = 16;
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe { _mm512_load_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn loadu(p: *const f32) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn maskz_loadu(mask: u32, p: *const f32) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe { _mm512_maskz_loadu_ps(mask as __mmask16, p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_storeu(p: *mut f32, mask: u32, v: __m512) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_mask_storeu_ps(p, mask as __mmask16, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn splat(x: f32) -> __m512 {
        _mm512_set1_ps(x)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn fmadd_low_half(a: __m512, b: __m512, c: __m512) -> __m512 {
        let half = |v| _mm512_castps512_ps256(v);
        _mm512_castps256_ps512(_mm256_fmadd_ps(half(a), half(b), half(c)))
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vadd(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vmul(a: __m512, b: __m512) -> __m512 {
        _mm512_mul_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vsqrt(a: __m512) -> __m512 {
        _mm512_sqrt_ps(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vdiv(a: __m512, b: __m512) -> __m512 {
        _mm512_div_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vsub(a: __m512, b: __m512) -> __m512 {
        _mm512_sub_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vmax(a: __m512, b: __m512) -> __m512 {
        _mm512_max_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vabs(a: __m512) -> __m512 {
        _mm512_abs_ps(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_lt(mask: u32, a: __m512, b: __m512) -> u32 {
        _mm512_mask_cmp_ps_mask(mask as __mmask16, a, b, _CMP_LT_OQ) as u32
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn blend(mask: u32, a: __m512, b: __m512) -> __m512 {
        _mm512_mask_blend_ps(mask as __mmask16, a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store(p: *mut f32, v: __m512) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_store_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn storeu(p: *mut f32, v: __m512) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_le(mask: u32, a: __m512, b: __m512) -> u32 {
        _mm512_mask_cmp_ps_mask(mask as __mmask16, a, b, _CMP_LE_OQ) as u32
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn reduce_add(a: __m512) -> f32 {
        _mm512_reduce_add_ps(a)
    }
}

/// A vector of `VL` lanes of `E` and its operations. Every method needs the instruction set the
/// implementing type is named after (each method's `# Safety`).
pub(crate) trait Vector {
    type E: Real;
    type V: Copy;
    /// Lanes per vector.
    const VL: usize;
    /// # Safety
    /// The type's instruction set.
    unsafe fn zero() -> Self::V;
    /// # Safety
    /// The type's instruction set.
    unsafe fn splat(x: Self::E) -> Self::V;
    /// # Safety
    /// The type's instruction set; `VL` readable values at `p`, aligned to the vector's size.
    unsafe fn load(p: *const Self::E) -> Self::V;
    /// # Safety
    /// The type's instruction set; `VL` readable values at `p`.
    unsafe fn loadu(p: *const Self::E) -> Self::V;
    /// The lanes of `mask` from `p`, zero elsewhere.
    /// # Safety
    /// The type's instruction set; the lanes of `mask` readable at `p` (the others are not
    /// accessed).
    unsafe fn maskz_loadu(mask: u32, p: *const Self::E) -> Self::V;
    /// # Safety
    /// The type's instruction set; `VL` writable values at `p`, aligned to the vector's size.
    unsafe fn store(p: *mut Self::E, v: Self::V);
    /// # Safety
    /// The type's instruction set; `VL` writable values at `p`.
    unsafe fn storeu(p: *mut Self::E, v: Self::V);
    /// The lanes of `mask` to `p`.
    /// # Safety
    /// The type's instruction set; the lanes of `mask` writable at `p` (the others are not
    /// accessed).
    unsafe fn mask_storeu(p: *mut Self::E, mask: u32, v: Self::V);
    /// `a b + c`, rounded once.
    /// # Safety
    /// The type's instruction set.
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// Whether [`Vector::fmadd_low_half`] costs less than [`Vector::fmadd`]: with AVX-512 a
    /// 256-bit FMA where the core runs a 512-bit one as two halves (AMD's Zen 4).
    const HALF_FMA: bool = false;
    /// [`Vector::fmadd`] in the low `VL / 2` lanes; the others are unspecified.
    /// # Safety
    /// The type's instruction set.
    unsafe fn fmadd_low_half(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        // SAFETY: the caller's contract.
        unsafe { Self::fmadd(a, b, c) }
    }
    /// # Safety
    /// The type's instruction set.
    unsafe fn vadd(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// The type's instruction set.
    unsafe fn vsub(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// The type's instruction set.
    unsafe fn vmul(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// The type's instruction set.
    unsafe fn vdiv(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// The type's instruction set.
    unsafe fn vsqrt(a: Self::V) -> Self::V;
    /// The larger of each pair (`b` where either is NaN).
    /// # Safety
    /// The type's instruction set.
    unsafe fn vmax(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// The type's instruction set.
    unsafe fn vabs(a: Self::V) -> Self::V;
    /// The lanes of `mask` where `a < b` (false where either is NaN).
    /// # Safety
    /// The type's instruction set.
    unsafe fn mask_lt(mask: u32, a: Self::V, b: Self::V) -> u32;
    /// The lanes of `mask` where `a <= b` (false where either is NaN).
    /// # Safety
    /// The type's instruction set.
    unsafe fn mask_le(mask: u32, a: Self::V, b: Self::V) -> u32;
    /// `b` in the lanes of `mask`, `a` elsewhere.
    /// # Safety
    /// The type's instruction set.
    unsafe fn blend(mask: u32, a: Self::V, b: Self::V) -> Self::V;
    /// The sum of the lanes.
    /// # Safety
    /// The type's instruction set.
    unsafe fn reduce_add(a: Self::V) -> Self::E;
}

/// AVX-512F vectors: 8 f64 or 16 f32 lanes.
pub(crate) struct Zmm<E>(PhantomData<E>);

/// AVX2 vectors, with FMA: 4 f64 or 8 f32 lanes.
pub(crate) struct Ymm<E>(PhantomData<E>);

// The AVX-512 operations are `Avx512Real`'s, whose methods carry the target feature: these
// wrappers inline into the kernels compiled with it.
impl<E: Avx512Real> Vector for Zmm<E> {
    type E = E;
    type V = <E as Avx512Real>::V;
    const VL: usize = <E as Avx512Real>::VL;
    #[inline(always)]
    unsafe fn zero() -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::zero() }
    }
    #[inline(always)]
    unsafe fn splat(x: E) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::splat(x) }
    }
    #[inline(always)]
    unsafe fn load(p: *const E) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::load(p) }
    }
    #[inline(always)]
    unsafe fn loadu(p: *const E) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::loadu(p) }
    }
    #[inline(always)]
    unsafe fn maskz_loadu(mask: u32, p: *const E) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::maskz_loadu(mask, p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut E, v: Self::V) {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::store(p, v) }
    }
    #[inline(always)]
    unsafe fn storeu(p: *mut E, v: Self::V) {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::storeu(p, v) }
    }
    #[inline(always)]
    unsafe fn mask_storeu(p: *mut E, mask: u32, v: Self::V) {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::mask_storeu(p, mask, v) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::fmadd(a, b, c) }
    }
    const HALF_FMA: bool = true;
    #[inline(always)]
    unsafe fn fmadd_low_half(a: Self::V, b: Self::V, c: Self::V) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::fmadd_low_half(a, b, c) }
    }
    #[inline(always)]
    unsafe fn vadd(a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::vadd(a, b) }
    }
    #[inline(always)]
    unsafe fn vsub(a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::vsub(a, b) }
    }
    #[inline(always)]
    unsafe fn vmul(a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::vmul(a, b) }
    }
    #[inline(always)]
    unsafe fn vdiv(a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::vdiv(a, b) }
    }
    #[inline(always)]
    unsafe fn vsqrt(a: Self::V) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::vsqrt(a) }
    }
    #[inline(always)]
    unsafe fn vmax(a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::vmax(a, b) }
    }
    #[inline(always)]
    unsafe fn vabs(a: Self::V) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::vabs(a) }
    }
    #[inline(always)]
    unsafe fn mask_lt(mask: u32, a: Self::V, b: Self::V) -> u32 {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::mask_lt(mask, a, b) }
    }
    #[inline(always)]
    unsafe fn mask_le(mask: u32, a: Self::V, b: Self::V) -> u32 {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::mask_le(mask, a, b) }
    }
    #[inline(always)]
    unsafe fn blend(mask: u32, a: Self::V, b: Self::V) -> Self::V {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::blend(mask, a, b) }
    }
    #[inline(always)]
    unsafe fn reduce_add(a: Self::V) -> E {
        // SAFETY: the caller's contract is the delegate's.
        unsafe { E::reduce_add(a) }
    }
}

impl Vector for Ymm<f64> {
    type E = f64;
    type V = __m256d;
    const VL: usize = 4;
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn zero() -> __m256d {
        _mm256_setzero_pd()
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn splat(x: f64) -> __m256d {
        _mm256_set1_pd(x)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load(p: *const f64) -> __m256d {
        // SAFETY: the caller's contract.
        unsafe { _mm256_load_pd(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn loadu(p: *const f64) -> __m256d {
        // SAFETY: the caller's contract.
        unsafe { _mm256_loadu_pd(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn maskz_loadu(mask: u32, p: *const f64) -> __m256d {
        // A full mask takes the plain load: AVX2's masked loads and stores cost more, and
        // fused-par's held rows fill every vector (masks are constants there, so the test folds).
        // SAFETY: the caller's contract (all 4 lanes readable when the mask holds them all).
        unsafe {
            if mask & 0xF == 0xF {
                _mm256_loadu_pd(p)
            } else {
                _mm256_maskload_pd(p, lanes_f64(mask))
            }
        }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store(p: *mut f64, v: __m256d) {
        // SAFETY: the caller's contract.
        unsafe { _mm256_store_pd(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn storeu(p: *mut f64, v: __m256d) {
        // SAFETY: the caller's contract.
        unsafe { _mm256_storeu_pd(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mask_storeu(p: *mut f64, mask: u32, v: __m256d) {
        // SAFETY: the caller's contract (all 4 lanes writable when the mask holds them all).
        unsafe {
            if mask & 0xF == 0xF {
                _mm256_storeu_pd(p, v)
            } else {
                _mm256_maskstore_pd(p, lanes_f64(mask), v)
            }
        }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn fmadd(a: __m256d, b: __m256d, c: __m256d) -> __m256d {
        _mm256_fmadd_pd(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vadd(a: __m256d, b: __m256d) -> __m256d {
        _mm256_add_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vsub(a: __m256d, b: __m256d) -> __m256d {
        _mm256_sub_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vmul(a: __m256d, b: __m256d) -> __m256d {
        _mm256_mul_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vdiv(a: __m256d, b: __m256d) -> __m256d {
        _mm256_div_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vsqrt(a: __m256d) -> __m256d {
        _mm256_sqrt_pd(a)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vmax(a: __m256d, b: __m256d) -> __m256d {
        _mm256_max_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vabs(a: __m256d) -> __m256d {
        _mm256_andnot_pd(_mm256_set1_pd(-0.0), a)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mask_lt(mask: u32, a: __m256d, b: __m256d) -> u32 {
        mask & _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LT_OQ>(a, b)) as u32
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mask_le(mask: u32, a: __m256d, b: __m256d) -> u32 {
        mask & _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(a, b)) as u32
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn blend(mask: u32, a: __m256d, b: __m256d) -> __m256d {
        _mm256_blendv_pd(a, b, _mm256_castsi256_pd(lanes_f64(mask)))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn reduce_add(a: __m256d) -> f64 {
        let halves = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd::<1>(a));
        _mm_cvtsd_f64(_mm_add_sd(halves, _mm_unpackhi_pd(halves, halves)))
    }
}

impl Vector for Ymm<f32> {
    type E = f32;
    type V = __m256;
    const VL: usize = 8;
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn splat(x: f32) -> __m256 {
        _mm256_set1_ps(x)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: the caller's contract.
        unsafe { _mm256_load_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn loadu(p: *const f32) -> __m256 {
        // SAFETY: the caller's contract.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn maskz_loadu(mask: u32, p: *const f32) -> __m256 {
        // SAFETY: the caller's contract (all 8 lanes readable when the mask holds them all).
        unsafe {
            if mask & 0xFF == 0xFF {
                _mm256_loadu_ps(p)
            } else {
                _mm256_maskload_ps(p, lanes_f32(mask))
            }
        }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store(p: *mut f32, v: __m256) {
        // SAFETY: the caller's contract.
        unsafe { _mm256_store_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn storeu(p: *mut f32, v: __m256) {
        // SAFETY: the caller's contract.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mask_storeu(p: *mut f32, mask: u32, v: __m256) {
        // SAFETY: the caller's contract (all 8 lanes writable when the mask holds them all).
        unsafe {
            if mask & 0xFF == 0xFF {
                _mm256_storeu_ps(p, v)
            } else {
                _mm256_maskstore_ps(p, lanes_f32(mask), v)
            }
        }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vadd(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vsub(a: __m256, b: __m256) -> __m256 {
        _mm256_sub_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vmul(a: __m256, b: __m256) -> __m256 {
        _mm256_mul_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vdiv(a: __m256, b: __m256) -> __m256 {
        _mm256_div_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vsqrt(a: __m256) -> __m256 {
        _mm256_sqrt_ps(a)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vmax(a: __m256, b: __m256) -> __m256 {
        _mm256_max_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn vabs(a: __m256) -> __m256 {
        _mm256_andnot_ps(_mm256_set1_ps(-0.0), a)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mask_lt(mask: u32, a: __m256, b: __m256) -> u32 {
        mask & _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(a, b)) as u32
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn mask_le(mask: u32, a: __m256, b: __m256) -> u32 {
        mask & _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(a, b)) as u32
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn blend(mask: u32, a: __m256, b: __m256) -> __m256 {
        _mm256_blendv_ps(a, b, _mm256_castsi256_ps(lanes_f32(mask)))
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn reduce_add(a: __m256) -> f32 {
        let halves = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
        let pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
        _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)))
    }
}

/// All-ones in the 64-bit lanes of `mask`'s bits 0-3.
#[inline]
#[target_feature(enable = "avx2")]
fn lanes_f64(mask: u32) -> __m256i {
    let bits = _mm256_setr_epi64x(1, 2, 4, 8);
    _mm256_cmpeq_epi64(
        _mm256_and_si256(_mm256_set1_epi64x(i64::from(mask)), bits),
        bits,
    )
}

/// All-ones in the 32-bit lanes of `mask`'s bits 0-7.
#[inline]
#[target_feature(enable = "avx2")]
fn lanes_f32(mask: u32) -> __m256i {
    let bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(mask as i32), bits), bits)
}
