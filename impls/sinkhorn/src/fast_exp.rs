//! Vectorized `exp` for the precompute phase (`K = exp(-lambda M)`: 720k exponentials at the
//! paper's shape, ~20 cycles each with glibc's scalar `exp`, 5 ms of a one-thread query).
//!
//! Algorithm, one kernel for AVX-512F (8 lanes) and AVX2 with FMA (4 lanes), written once over
//! [`crate::simd::Vector`]: Cody-Waite reduction `x = k ln2 + r`, `k = round(x / ln2)` obtained
//! exactly with the 1.5 * 2^52 shifter (one FMA), `r = x - k ln2_hi - k ln2_lo` with fdlibm's
//! split of ln2 (two FMAs), `|r| <= ln2 / 2`; `e^r` by its Taylor polynomial of degree 13 in
//! Horner form (truncation error `r^14 / 14! < 5e-18`, far below one ulp; rounding of the FMAs
//! ~1 ulp), then `2^k` built from the exponent bits, an exact scaling. Arguments outside
//! `[-708, 709]` (where `2^k` or the result leaves the normal range), and NaN, go lane by lane to
//! `f64::exp`, so subnormal results, underflow to 0, overflow to infinity and NaN propagate exactly
//! as in std. Measured error against std: at most 1 ulp over `[-760, 720]` (the tests allow 2).
//! Both widths round the same operations in the same order, so they agree bit for bit. Without
//! either instruction set, [`exp_in_place`] is std's `exp` per value.

/// Replaces every value of `xs` by its exponential.
pub fn exp_in_place(xs: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if lanes::exp_in_place(xs) {
        return;
    }
    exp_in_place_portable(xs)
}

/// The path [`exp_in_place`] takes without a vector instruction set, whatever the CPU has: std's
/// `exp` per value. Callable directly so that tests on a vector host still check it.
pub(crate) fn exp_in_place_portable(xs: &mut [f64]) {
    for x in xs {
        *x = x.exp();
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod lanes {
    use crate::simd::{has_avx2_fma, has_avx512f, Vector, Ymm, Zmm};
    use std::arch::x86_64::*;

    /// Arguments in this range take the vector path.
    const LOW: f64 = -708.0;
    const HIGH: f64 = 709.0;
    /// `1.5 * 2^52`: adding it rounds to an integer held in the low mantissa bits.
    const SHIFTER: f64 = 6755399441055744.0;
    /// fdlibm's split of ln2: the high part has 32 trailing zero bits, the low part the rest.
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    /// `1 / n!` for n = 13 down to 2.
    const INV_FACT: [f64; 12] = [
        1.0 / 6227020800.0,
        1.0 / 479001600.0,
        1.0 / 39916800.0,
        1.0 / 3628800.0,
        1.0 / 362880.0,
        1.0 / 40320.0,
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        1.0 / 2.0,
    ];

    /// The f64 vectors the kernel runs on, with the one integer step [`Vector`] lacks.
    pub(crate) trait ExpVector: Vector<E = f64> {
        /// `2^k` in each lane, where `shifted - shifter` is the integer `k` in
        /// `-1022..=1023` (held in `shifted`'s low mantissa bits).
        /// # Safety
        /// The type's instruction set.
        unsafe fn pow2(shifted: Self::V, shifter: Self::V) -> Self::V;
    }

    impl ExpVector for Zmm<f64> {
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn pow2(shifted: __m512d, shifter: __m512d) -> __m512d {
            let k = _mm512_sub_epi64(_mm512_castpd_si512(shifted), _mm512_castpd_si512(shifter));
            let biased = _mm512_add_epi64(k, _mm512_set1_epi64(1023));
            _mm512_castsi512_pd(_mm512_slli_epi64::<52>(biased))
        }
    }

    impl ExpVector for Ymm<f64> {
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn pow2(shifted: __m256d, shifter: __m256d) -> __m256d {
            let k = _mm256_sub_epi64(_mm256_castpd_si256(shifted), _mm256_castpd_si256(shifter));
            let biased = _mm256_add_epi64(k, _mm256_set1_epi64x(1023));
            _mm256_castsi256_pd(_mm256_slli_epi64::<52>(biased))
        }
    }

    /// A computation written once over the f64 vectors of [`ExpVector`], for [`Width::run`] to
    /// run compiled for one instruction set.
    pub(crate) trait OverLanes {
        type Output;
        /// # Safety
        /// `V`'s instruction set. Implementations are `#[inline(always)]`, so that their body
        /// is compiled inside the target-feature function [`Width::run`] calls.
        unsafe fn run<V: ExpVector>(self) -> Self::Output;
    }

    /// A vector width of [`ExpVector`] that this CPU has. Only [`Width::available`] and
    /// [`Width::widest`] make one, after checking the instruction set, so running a task at it
    /// ([`Width::run`]) is safe: the CPU checks live here once, for the dispatch and the tests.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct Width(Isa);

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Isa {
        Avx2,
        Avx512,
    }

    impl Isa {
        fn present(self) -> bool {
            match self {
                Isa::Avx2 => has_avx2_fma(),
                Isa::Avx512 => has_avx512f(),
            }
        }
    }

    impl Width {
        /// Every width this CPU has, narrowest first (the tests run each).
        #[cfg(test)]
        pub(crate) fn available() -> Vec<Width> {
            [Isa::Avx2, Isa::Avx512]
                .into_iter()
                .filter(|isa| isa.present())
                .map(Width)
                .collect()
        }

        /// The widest this CPU has, or `None` when it has neither AVX-512F nor AVX2 with FMA.
        pub(crate) fn widest() -> Option<Width> {
            [Isa::Avx512, Isa::Avx2]
                .into_iter()
                .find(|isa| isa.present())
                .map(Width)
        }

        /// The instruction set's name.
        #[cfg(test)]
        pub(crate) fn name(self) -> &'static str {
            match self.0 {
                Isa::Avx2 => "avx2+fma",
                Isa::Avx512 => "avx512f",
            }
        }

        /// `task` at the widest width this CPU has, or `None` (nothing run) when it has
        /// neither AVX-512F nor AVX2 with FMA.
        pub(crate) fn run_widest<T: OverLanes>(task: T) -> Option<T::Output> {
            Width::widest().map(|w| w.run(task))
        }

        /// `task` compiled for this width's instruction set.
        pub(crate) fn run<T: OverLanes>(self, task: T) -> T::Output {
            match self.0 {
                // SAFETY (both): a `Width` is only made where the CPU has its instruction set.
                Isa::Avx512 => unsafe { on_zmm(task) },
                Isa::Avx2 => unsafe { on_ymm(task) },
            }
        }
    }

    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn on_zmm<T: OverLanes>(task: T) -> T::Output {
        // SAFETY: AVX-512F (the caller's contract).
        unsafe { task.run::<Zmm<f64>>() }
    }

    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn on_ymm<T: OverLanes>(task: T) -> T::Output {
        // SAFETY: AVX2 and FMA (the caller's contract).
        unsafe { task.run::<Ymm<f64>>() }
    }

    /// Every value of a slice replaced by its exponential ([`exp_in_place`]'s kernel).
    pub(crate) struct ExpSlice<'a>(pub(crate) &'a mut [f64]);

    impl OverLanes for ExpSlice<'_> {
        type Output = ();
        #[inline(always)]
        unsafe fn run<V: ExpVector>(self) {
            // SAFETY: `V`'s instruction set (the caller's contract).
            unsafe { exp_slice::<V>(self.0) }
        }
    }

    /// Takes the widest kernel this CPU has and returns true, or returns false (doing nothing)
    /// when it has neither AVX-512F nor AVX2 with FMA.
    pub(super) fn exp_in_place(xs: &mut [f64]) -> bool {
        Width::run_widest(ExpSlice(xs)).is_some()
    }

    /// # Safety
    /// `V`'s instruction set.
    #[inline(always)]
    unsafe fn exp_slice<V: ExpVector>(xs: &mut [f64]) {
        let full = (1u32 << V::VL) - 1;
        let mut chunks = xs.chunks_exact_mut(V::VL);
        for c in &mut chunks {
            // SAFETY: `c` holds `VL` values, so the load and the store stay inside it; `V`'s
            // instruction set (the caller's contract) is all `exp_lanes` needs.
            unsafe {
                let x = V::loadu(c.as_ptr());
                let (y, ok) = exp_lanes::<V>(x, full);
                V::storeu(c.as_mut_ptr(), y);
                if ok != full {
                    fix_lanes::<V>(c, x, ok);
                }
            }
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            let mask = (1u32 << tail.len()) - 1;
            // SAFETY: masked loads and stores touch only the `tail.len()` values of `tail`;
            // `V`'s instruction set (the caller's contract).
            unsafe {
                let x = V::maskz_loadu(mask, tail.as_ptr());
                let (y, ok) = exp_lanes::<V>(x, mask);
                V::mask_storeu(tail.as_mut_ptr(), mask, y);
                if ok != mask {
                    fix_lanes::<V>(tail, x, ok);
                }
            }
        }
    }

    /// `exp` of the lanes of `mask` of `x` (the others' results are meaningless), std's for
    /// lanes outside the kernel's range, as [`exp_slice`] takes them.
    /// # Safety
    /// `V`'s instruction set.
    #[inline(always)]
    pub(crate) unsafe fn exp_checked<V: ExpVector>(x: V::V, mask: u32) -> V::V {
        // SAFETY: `V`'s instruction set (the caller's contract); `out` holds 8 values, at
        // least `VL` (AVX-512's f64 lanes), all the unaligned store and load touch.
        unsafe {
            let (y, ok) = exp_lanes::<V>(x, mask);
            if ok == mask {
                return y;
            }
            let mut out = [0.0; 8];
            V::storeu(out.as_mut_ptr(), y);
            fix_lanes::<V>(&mut out[..V::VL], x, ok | !mask);
            V::loadu(out.as_ptr())
        }
    }

    /// Lanes of `out` not in `ok` get std's `exp` of their argument in `x`.
    /// # Safety
    /// `V`'s instruction set.
    #[inline(always)]
    unsafe fn fix_lanes<V: ExpVector>(out: &mut [f64], x: V::V, ok: u32) {
        // The widest f64 vector has 8 lanes.
        let mut args = [0.0; 8];
        debug_assert!(V::VL <= args.len());
        // SAFETY: `args` holds at least `VL` values (8, AVX-512's f64 lanes), all the unaligned
        // store writes; `V`'s instruction set (the caller's contract).
        unsafe { V::storeu(args.as_mut_ptr(), x) };
        std_exp_outside(out, &args, ok);
    }

    /// `out[l] = exp(args[l])` for the lanes `l` not in `ok` (out of the vector path's range).
    #[cold]
    #[inline(never)]
    fn std_exp_outside(out: &mut [f64], args: &[f64], ok: u32) {
        for (l, (y, &x)) in out.iter_mut().zip(args).enumerate() {
            if ok & (1 << l) == 0 {
                *y = x.exp();
            }
        }
    }

    /// `exp` of the lanes of `mask`, and the lanes of `mask` whose argument was in
    /// `[LOW, HIGH]` (the others' results are meaningless).
    /// # Safety
    /// `V`'s instruction set.
    #[inline(always)]
    unsafe fn exp_lanes<V: ExpVector>(x: V::V, mask: u32) -> (V::V, u32) {
        // SAFETY: `V`'s instruction set (the caller's contract) is all these need.
        unsafe {
            let ok = V::mask_le(mask, V::splat(LOW), x) & V::mask_le(mask, x, V::splat(HIGH));
            let shifter = V::splat(SHIFTER);
            let shifted = V::fmadd(x, V::splat(std::f64::consts::LOG2_E), shifter);
            let k = V::vsub(shifted, shifter);
            // `x - k ln2_hi` rounded once, as an FNMADD would: negating a factor is exact.
            let r = V::fmadd(k, V::splat(-LN2_HI), x);
            let r = V::fmadd(k, V::splat(-LN2_LO), r);
            let mut p = V::splat(INV_FACT[0]);
            for &c in &INV_FACT[1..] {
                p = V::fmadd(p, r, V::splat(c));
            }
            let one = V::splat(1.0);
            p = V::fmadd(p, r, one);
            p = V::fmadd(p, r, one);
            (V::vmul(p, V::pow2(shifted, shifter)), ok)
        }
    }
}

/// `exp` in f32 arithmetic, eight lanes of AVX2 with FMA: the f32 solve's kernel rows
/// ([`crate::precompute`]), where taking each exponential in f64 cost more than the rest of the
/// phase together. The same scheme as the f64 kernel at f32's width: `k = round(x / ln2)` by
/// the `1.5 * 2^23` shifter, `r = x - k ln2` with Cephes' split of ln2 (`k ln2_hi` exact for
/// `|k| < 2^15`), `e^r` by its Taylor polynomial of degree 7 (truncation `r^8 / 8! < 6e-9`
/// relative, a twentieth of an f32 ulp), `2^k` from the exponent bits. Arguments outside
/// `[-87, 88]` (where `2^k` leaves the normal range) and NaN go lane by lane to std's `f32::exp`.
/// Measured against f64's `exp` rounded to f32: at most 1 ulp (the tests allow 2).
#[cfg(target_arch = "x86_64")]
pub(crate) mod f32x8 {
    use std::arch::x86_64::*;

    const LOW: f32 = -87.0;
    const HIGH: f32 = 88.0;
    /// `1.5 * 2^23`: adding it rounds to an integer held in the low mantissa bits.
    const SHIFTER: f32 = 12582912.0;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    /// `1 / n!` for n = 7 down to 2.
    const INV_FACT: [f32; 6] = [
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        1.0 / 2.0,
    ];

    /// `exp` of each lane of `x`.
    /// # Safety
    /// AVX2 and FMA.
    #[inline(always)]
    pub(crate) unsafe fn exp(x: __m256) -> __m256 {
        // SAFETY: AVX2 and FMA (the caller's contract) are all these need.
        unsafe {
            let inside = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(LOW)),
                _mm256_cmp_ps::<_CMP_LE_OQ>(x, _mm256_set1_ps(HIGH)),
            );
            let shifter = _mm256_set1_ps(SHIFTER);
            let shifted = _mm256_fmadd_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E), shifter);
            let k = _mm256_sub_ps(shifted, shifter);
            let r = _mm256_fmadd_ps(k, _mm256_set1_ps(-LN2_HI), x);
            let r = _mm256_fmadd_ps(k, _mm256_set1_ps(-LN2_LO), r);
            let mut p = _mm256_set1_ps(INV_FACT[0]);
            for &c in &INV_FACT[1..] {
                p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
            }
            let one = _mm256_set1_ps(1.0);
            p = _mm256_fmadd_ps(p, r, one);
            p = _mm256_fmadd_ps(p, r, one);
            let ki = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_castps_si256(shifter));
            let pow2 = _mm256_slli_epi32::<23>(_mm256_add_epi32(ki, _mm256_set1_epi32(127)));
            let y = _mm256_mul_ps(p, _mm256_castsi256_ps(pow2));
            let ok = _mm256_movemask_ps(inside);
            if ok == 0xFF {
                return y;
            }
            outside(x, y, ok)
        }
    }

    /// `y` with std's `exp` in the lanes not in `ok`.
    /// # Safety
    /// AVX2 and FMA.
    #[cold]
    #[inline(never)]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn outside(x: __m256, y: __m256, ok: i32) -> __m256 {
        let (mut xs, mut ys) = ([0.0f32; 8], [0.0f32; 8]);
        // SAFETY: both arrays hold 8 f32, all an unaligned 256-bit store writes.
        unsafe {
            _mm256_storeu_ps(xs.as_mut_ptr(), x);
            _mm256_storeu_ps(ys.as_mut_ptr(), y);
        }
        for (l, (y, x)) in ys.iter_mut().zip(xs).enumerate() {
            if ok & (1 << l) == 0 {
                *y = x.exp();
            }
        }
        // SAFETY: as above.
        unsafe { _mm256_loadu_ps(ys.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between two finite doubles of the same sign.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    /// One implementation of `exp_in_place`.
    type ExpPath = std::rc::Rc<dyn Fn(&mut [f64])>;

    /// Every implementation of `exp_in_place` this CPU can run, by name, narrowest first: the
    /// portable path always (called directly, so it is checked on a vector host too), each
    /// vector kernel only where the CPU has its instruction set (called directly too, not
    /// through the dispatch).
    fn paths() -> Vec<(&'static str, ExpPath)> {
        let mut paths: Vec<(&'static str, ExpPath)> =
            vec![("portable", std::rc::Rc::new(exp_in_place_portable))];
        #[cfg(target_arch = "x86_64")]
        for width in lanes::Width::available() {
            let exp = move |xs: &mut [f64]| width.run(lanes::ExpSlice(xs));
            paths.push((width.name(), std::rc::Rc::new(exp)));
        }
        paths
    }

    fn path_names() -> Vec<&'static str> {
        paths().iter().map(|p| p.0).collect()
    }

    /// Arguments across the precompute's range and the edges of the vector path.
    fn arguments() -> Vec<f64> {
        let mut args: Vec<f64> = vec![
            0.0, -0.0, 1e-300, -1e-300, 5e-324, 1e-17, -1e-17, 0.5, -0.5, 1.0, -1.0, -700.0,
            -708.0, -708.4, -709.0, -720.0, -745.0, -745.2, -746.0, -1e4, 700.0, 709.0, 709.7,
            709.8, 710.0, 1e4,
        ];
        // Dense sweep over the precompute's range (-lambda M, lambda M up to ~700) and beyond.
        let mut x = -760.0;
        while x < 720.0 {
            args.push(x);
            x += 0.012_345_678_9;
        }
        // Around multiples of ln2 / 2, where the reduction switches `k`.
        for k in -2000..2000 {
            let c = k as f64 * std::f64::consts::LN_2 / 2.0;
            args.extend([c, c.next_up(), c.next_down()]);
        }
        args
    }

    /// The bound: 2 ulp against std's `f64::exp` (the AVX-512F kernel measures at most 1), exact
    /// agreement where std gives 0 or infinity.
    const MAX_ULPS: u64 = 2;

    #[test]
    fn every_path_matches_std_exp_within_2_ulp() {
        let args = arguments();
        let names = path_names();
        eprintln!("fast_exp: checking the paths {names:?} against f64::exp");
        for (name, exp) in paths() {
            // Odd lengths exercise the masked tail.
            for len in [args.len(), args.len() - 3, 7, 1] {
                let mut ys = args[..len].to_vec();
                exp(&mut ys);
                for (&x, &y) in args.iter().zip(&ys) {
                    let e = x.exp();
                    if e == 0.0 || e.is_infinite() {
                        assert_eq!(y, e, "{name} (paths run: {names:?}): exp({x:e})");
                    } else {
                        assert!(
                            ulps(y, e) <= MAX_ULPS,
                            "{name} (paths run: {names:?}): exp({x:e}) = {y:e}, std {e:e}"
                        );
                    }
                }
            }
        }
        // The dispatch takes the widest path the CPU has.
        let mut dispatched = args.clone();
        exp_in_place(&mut dispatched);
        let (widest, exp) = paths().pop().unwrap();
        let mut direct = args.clone();
        exp(&mut direct);
        assert_eq!(
            dispatched.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
            direct.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
            "exp_in_place is not the {widest} path"
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_f32_kernel_matches_the_f64_exp_rounded_within_2_ulp() {
        if !crate::simd::has_avx2_fma() {
            eprintln!("fast_exp: no AVX2 and FMA here, the f32 kernel is not run");
            return;
        }
        let mut args: Vec<f32> = vec![
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            -86.9,
            -87.0,
            -87.1,
            -87.4,
            -100.0,
            -103.9,
            -104.0,
            -200.0,
            87.9,
            88.0,
            88.5,
            88.8,
            100.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN,
        ];
        let mut x = -110.0f32;
        while x < 95.0 {
            args.push(x);
            x += 0.000_731;
        }
        for k in -300..300 {
            let c = k as f32 * std::f32::consts::LN_2 / 2.0;
            args.extend([c, c.next_up(), c.next_down()]);
        }
        while !args.len().is_multiple_of(8) {
            args.push(0.5);
        }
        for (n, chunk) in args.chunks_exact(8).enumerate() {
            let mut ys = [0.0f32; 8];
            // SAFETY: the CPU has AVX2 and FMA (checked above); both arrays hold 8 values.
            unsafe {
                use std::arch::x86_64::*;
                let y = f32x8::exp(_mm256_loadu_ps(chunk.as_ptr()));
                _mm256_storeu_ps(ys.as_mut_ptr(), y);
            }
            for (&x, &y) in chunk.iter().zip(&ys) {
                let e = (x as f64).exp() as f32;
                let what = format!("exp({x:e}) = {y:e}, f64's rounded {e:e} (vector {n})");
                if x.is_nan() {
                    assert!(y.is_nan(), "{what}");
                } else if e == 0.0 || e.is_infinite() || e < f32::MIN_POSITIVE {
                    // Subnormal and extreme results: std's f32 `exp` (the slow lanes) or one
                    // rounding of the product, within an ulp of the smallest normal.
                    assert!(
                        (y - e).abs() <= f32::EPSILON * f32::MIN_POSITIVE || y == e,
                        "{what}"
                    );
                } else {
                    let ulps = crate::precompute::tests::ulps32(y, e);
                    assert!(ulps <= 2, "{what}: {ulps} ulps");
                }
            }
        }
    }

    #[test]
    fn the_vector_widths_agree_bit_for_bit() {
        let args = arguments();
        let vector: Vec<_> = paths().into_iter().skip(1).collect();
        eprintln!(
            "fast_exp: vector paths {:?}",
            vector.iter().map(|p| p.0).collect::<Vec<_>>()
        );
        let bits = |exp: &ExpPath| {
            let mut ys = args.clone();
            exp(&mut ys);
            ys.iter().map(|y| y.to_bits()).collect::<Vec<_>>()
        };
        if let Some((first, rest)) = vector.split_first() {
            let expected = bits(&first.1);
            for (name, exp) in rest {
                assert!(bits(exp) == expected, "{name} differs from {}", first.0);
            }
        }
    }

    #[test]
    fn special_values_follow_std_on_every_path() {
        let names = path_names();
        eprintln!("fast_exp: special values on the paths {names:?}");
        for (name, exp) in paths() {
            // Padded to a full vector and beyond, so both the vector body and the tail see them.
            let mut ys = vec![
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                0.0,
                -0.0,
                f64::MAX,
                f64::MIN,
                f64::MIN_POSITIVE,
                f64::NAN,
            ];
            exp(&mut ys);
            let what = format!("{name} (paths run: {names:?})");
            assert!(ys[0].is_nan(), "{what}");
            assert_eq!(ys[1], f64::INFINITY, "{what}");
            assert_eq!(ys[2], 0.0, "{what}");
            assert_eq!(ys[3], 1.0, "{what}");
            assert_eq!(ys[4], 1.0, "{what}");
            assert_eq!(ys[5], f64::INFINITY, "{what}");
            assert_eq!(ys[6], 0.0, "{what}");
            assert_eq!(ys[7], 1.0, "{what}");
            assert!(ys[8].is_nan(), "{what}");
        }
    }
}
