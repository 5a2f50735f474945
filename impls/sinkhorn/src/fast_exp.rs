//! Vectorized `exp` for the precompute phase (`K = exp(-lambda M)`: 720k exponentials at the
//! paper's shape, ~20 cycles each with glibc's scalar `exp`).
//!
//! Algorithm (AVX-512F, 8 lanes): Cody-Waite reduction `x = k ln2 + r`, `k = round(x / ln2)`
//! obtained exactly with the 1.5 * 2^52 shifter (one FMA), `r = x - k ln2_hi - k ln2_lo` with
//! fdlibm's split of ln2 (two FMAs), `|r| <= ln2 / 2`; `e^r` by its Taylor polynomial of degree 13
//! in Horner form (truncation error `r^14 / 14! < 5e-18`, far below one ulp; rounding of the
//! FMAs ~1 ulp), then `2^k` built from the exponent bits, an exact scaling. Arguments outside
//! `[-708, 709]` (where `2^k` or the result leaves the normal range), and NaN, go lane by lane to
//! `f64::exp`, so subnormal results, underflow to 0, overflow to infinity and NaN propagate exactly
//! as in std. Measured error against std: at most 1 ulp over `[-760, 720]` (the tests allow 2).
//! Without AVX-512F, [`exp_in_place`] is std's `exp` per value.

/// Replaces every value of `xs` by its exponential.
pub fn exp_in_place(xs: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512f() {
        // SAFETY: the CPU supports AVX-512F (checked just above).
        unsafe { avx512::exp_in_place(xs) };
        return;
    }
    exp_in_place_portable(xs)
}

/// Whether [`exp_in_place`] takes the AVX-512F path on this CPU.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx512f() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// The path [`exp_in_place`] takes without AVX-512F, whatever the CPU has: std's `exp` per
/// value. Callable directly so that tests on an AVX-512 host still check it.
pub(crate) fn exp_in_place_portable(xs: &mut [f64]) {
    for x in xs {
        *x = x.exp();
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
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

    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn exp_in_place(xs: &mut [f64]) {
        let mut chunks = xs.chunks_exact_mut(8);
        for c in &mut chunks {
            // SAFETY: `c` holds 8 values, so the load and the store stay inside it; the CPU has
            // AVX-512F (this function's contract), all `exp8` and `fix_lanes` need.
            unsafe {
                let x = _mm512_loadu_pd(c.as_ptr());
                let (y, ok) = exp8(x);
                _mm512_storeu_pd(c.as_mut_ptr(), y);
                if ok != 0xff {
                    fix_lanes(c, x, ok);
                }
            }
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            let mask: __mmask8 = ((1u32 << tail.len()) - 1) as __mmask8;
            // SAFETY: masked loads and stores touch only the `tail.len()` values of `tail`; the
            // CPU has AVX-512F (this function's contract), all `exp8` and `fix_lanes` need.
            unsafe {
                let x = _mm512_maskz_loadu_pd(mask, tail.as_ptr());
                let (y, ok) = exp8(x);
                _mm512_mask_storeu_pd(tail.as_mut_ptr(), mask, y);
                if ok | !mask != 0xff {
                    fix_lanes(tail, x, ok);
                }
            }
        }
    }

    /// Lanes not in `ok` get std's `exp` of their argument.
    #[cold]
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    unsafe fn fix_lanes(out: &mut [f64], x: __m512d, ok: __mmask8) {
        let mut args = [0.0; 8];
        // SAFETY: `args` holds 8 values, all the unaligned store writes.
        unsafe { _mm512_storeu_pd(args.as_mut_ptr(), x) };
        for (l, y) in out.iter_mut().enumerate() {
            if ok & (1 << l) == 0 {
                *y = args[l].exp();
            }
        }
    }

    /// `exp` of 8 lanes, and the mask of lanes whose argument was in `[LOW, HIGH]` (the others'
    /// results are meaningless).
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn exp8(x: __m512d) -> (__m512d, __mmask8) {
        let ok = _mm512_cmp_pd_mask(x, _mm512_set1_pd(LOW), _CMP_GE_OQ)
            & _mm512_cmp_pd_mask(x, _mm512_set1_pd(HIGH), _CMP_LE_OQ);
        let shifter = _mm512_set1_pd(SHIFTER);
        let shifted = _mm512_fmadd_pd(x, _mm512_set1_pd(std::f64::consts::LOG2_E), shifter);
        let k = _mm512_sub_pd(shifted, shifter);
        let r = _mm512_fnmadd_pd(k, _mm512_set1_pd(LN2_HI), x);
        let r = _mm512_fnmadd_pd(k, _mm512_set1_pd(LN2_LO), r);
        let mut p = _mm512_set1_pd(INV_FACT[0]);
        for &c in &INV_FACT[1..] {
            p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c));
        }
        let one = _mm512_set1_pd(1.0);
        p = _mm512_fmadd_pd(p, r, one);
        p = _mm512_fmadd_pd(p, r, one);
        // `shifted`'s bits minus the shifter's are `k` as a 64-bit integer; `(k + 1023) << 52` is
        // `2^k`, a normal number for every in-range lane (`-1022 <= k <= 1023`).
        let ki = _mm512_sub_epi64(_mm512_castpd_si512(shifted), _mm512_castpd_si512(shifter));
        let scale = _mm512_slli_epi64::<52>(_mm512_add_epi64(ki, _mm512_set1_epi64(1023)));
        (_mm512_mul_pd(p, _mm512_castsi512_pd(scale)), ok)
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
    type ExpPath = fn(&mut [f64]);

    /// Every implementation of `exp_in_place` this CPU can run, by name: the portable path
    /// always (called directly, so it is checked on an AVX-512 host too), the AVX-512F kernel
    /// only where the CPU has it (called directly too, not through the dispatch).
    fn paths() -> Vec<(&'static str, ExpPath)> {
        let mut paths: Vec<(&'static str, ExpPath)> = vec![("portable", exp_in_place_portable)];
        #[cfg(target_arch = "x86_64")]
        if has_avx512f() {
            fn avx512(xs: &mut [f64]) {
                // SAFETY: only listed where the CPU has AVX-512F.
                unsafe { avx512::exp_in_place(xs) }
            }
            paths.push(("avx512f", avx512));
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
        let (widest, exp) = *paths().last().unwrap();
        let mut direct = args.clone();
        exp(&mut direct);
        assert_eq!(
            dispatched.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
            direct.iter().map(|y| y.to_bits()).collect::<Vec<_>>(),
            "exp_in_place is not the {widest} path"
        );
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
