//! Row arithmetic written so that LLVM vectorizes it, compiled twice: once for the baseline
//! target and once inside `#[target_feature(enable = "avx2,fma")]` functions (see
//! [`crate::driver`]), chosen at run time.
//!
//! A float sum is not reassociated by the compiler, so a dot product keeps [`LANES`] partial
//! sums (one or two vector registers) and adds them in a fixed order at the end: the result is
//! deterministic for a given `FMA` choice, but differs in the last bits from a left-to-right
//! sum. `FMA = true` uses fused multiply-adds (`f32::mul_add`, which is a single instruction
//! only where the `fma` feature is enabled, hence the const parameter rather than always calling
//! it).

/// Partial sums kept by [`dot`]: two AVX2 registers, or one AVX-512 register.
pub const LANES: usize = 16;

/// `a b + c`, fused when `FMA` (the functions are compiled for FMA then).
#[inline(always)]
pub(crate) fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `<a, b>`; `a` and `b` have the same length.
#[inline(always)]
pub fn dot<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; LANES];
    let mut ac = a.chunks_exact(LANES);
    let mut bc = b.chunks_exact(LANES);
    for (x, y) in (&mut ac).zip(&mut bc) {
        for l in 0..LANES {
            acc[l] = madd::<FMA>(x[l], y[l], acc[l]);
        }
    }
    let mut tail = 0f32;
    for (x, y) in ac.remainder().iter().zip(bc.remainder()) {
        tail = madd::<FMA>(*x, *y, tail);
    }
    // Pairwise, fixed order.
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            acc[l] += acc[l + width];
        }
        width /= 2;
    }
    acc[0] + tail
}

/// `y += alpha x`.
#[inline(always)]
pub fn axpy<const FMA: bool>(alpha: f32, x: &[f32], y: &mut [f32]) {
    debug_assert_eq!(x.len(), y.len());
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi = madd::<FMA>(alpha, *xi, *yi);
    }
}

/// `y += x`.
#[inline(always)]
pub fn add(x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += *xi;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_and_axpy_match_plain_loops_on_awkward_lengths() {
        for n in [0usize, 1, 15, 16, 17, 33, 100, 301] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let exact: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
            for got in [dot::<false>(&a, &b), dot::<true>(&a, &b)] {
                assert!(
                    (got as f64 - exact).abs() <= 1e-5 * (1.0 + n as f64),
                    "n {n}: {got} vs {exact}"
                );
            }
            let mut y = b.clone();
            axpy::<false>(0.5, &a, &mut y);
            for i in 0..n {
                assert!((y[i] - (b[i] + 0.5 * a[i])).abs() < 1e-6);
            }
        }
    }
}
