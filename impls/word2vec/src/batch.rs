//! The small dense products of a batch of (context, target) pairs, shared by `gemm` (a center
//! word's context against the center and its negatives) and `full` (a window's contexts against
//! its targets):
//!
//! ```text
//! S  = X Y^T                  n x m logits (n contexts, m targets, rows of length d)
//! G  = alpha (labels - sigmoid(S))   label 1 for target 0 (the center word), else 0
//! dX = G Y,   dY = G^T X      added to the contexts' and the targets' rows
//! ```
//!
//! Each is written twice: portable loops (2 x 4 register blocks for the logits; each output row
//! summed in registers a block of lanes at a time), and AVX2/FMA intrinsics used where the caller
//! is compiled for them (`FMA = true`).

use crate::sampling::Sigmoid;
use crate::vecops::{dot, madd};

/// `S = X Y^T` (`n x d` times `d x m`, row-major), through the AVX2 kernel when `FMA`.
#[inline(always)]
pub(crate) fn logits<const FMA: bool>(
    x: &[f32],
    y: &[f32],
    d: usize,
    n: usize,
    m: usize,
    s: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if FMA {
        // SAFETY: `FMA` is true only inside functions compiled for (and run on) AVX2 and FMA.
        unsafe { avx2::logits(x, y, d, n, m, s) };
        return;
    }
    logits_portable::<FMA>(x, y, d, n, m, s)
}

/// Turns the logits `s` (rows of `m`) into the scaled errors `alpha (label - sigmoid(s))`,
/// label 1 in column 0 when `positive_first` (the center word) and 0 elsewhere.
#[inline(always)]
pub(crate) fn errors(s: &mut [f32], m: usize, alpha: f32, sigmoid: &Sigmoid, positive_first: bool) {
    for row in s.chunks_exact_mut(m) {
        for (j, v) in row.iter_mut().enumerate() {
            let label = if j == 0 && positive_first { 1.0 } else { 0.0 };
            *v = (label - sigmoid.eval(*v)) * alpha;
        }
    }
}

/// `S = X Y^T` for `n x d` `x` and `m x d` `y`, blocked 2 x 4 so each loaded chunk of a row
/// serves several dot products.
#[inline(always)]
fn logits_portable<const FMA: bool>(
    x: &[f32],
    y: &[f32],
    d: usize,
    n: usize,
    m: usize,
    s: &mut [f32],
) {
    let mut i = 0;
    while i + 2 <= n {
        let (x0, x1) = (&x[i * d..(i + 1) * d], &x[(i + 1) * d..(i + 2) * d]);
        let mut j = 0;
        while j + 4 <= m {
            let ys = [
                &y[j * d..(j + 1) * d],
                &y[(j + 1) * d..(j + 2) * d],
                &y[(j + 2) * d..(j + 3) * d],
                &y[(j + 3) * d..(j + 4) * d],
            ];
            let r = dot_2x4::<FMA>([x0, x1], ys);
            s[i * m + j..i * m + j + 4].copy_from_slice(&r[0]);
            s[(i + 1) * m + j..(i + 1) * m + j + 4].copy_from_slice(&r[1]);
            j += 4;
        }
        for j in j..m {
            let yj = &y[j * d..(j + 1) * d];
            s[i * m + j] = dot::<FMA>(x0, yj);
            s[(i + 1) * m + j] = dot::<FMA>(x1, yj);
        }
        i += 2;
    }
    if i < n {
        let xi = &x[i * d..(i + 1) * d];
        for j in 0..m {
            s[i * m + j] = dot::<FMA>(xi, &y[j * d..(j + 1) * d]);
        }
    }
}

/// Eight dot products of two rows against four, with 8-lane partial sums (with AVX2: 8
/// accumulator registers and 6 for the loads); the partial sums are added in a fixed order
/// that differs from [`dot`]'s, so results differ from it in the last bits.
#[inline(always)]
fn dot_2x4<const FMA: bool>(xs: [&[f32]; 2], ys: [&[f32]; 4]) -> [[f32; 4]; 2] {
    const L: usize = 8;
    let d = xs[0].len();
    let mut acc = [[[0f32; L]; 4]; 2];
    let full = d / L * L;
    let mut k = 0;
    while k < full {
        let xa = lanes::<L>(xs[0], k);
        let xb = lanes::<L>(xs[1], k);
        for (j, yj) in ys.iter().enumerate() {
            let yv = lanes::<L>(yj, k);
            for l in 0..L {
                acc[0][j][l] = madd::<FMA>(xa[l], yv[l], acc[0][j][l]);
                acc[1][j][l] = madd::<FMA>(xb[l], yv[l], acc[1][j][l]);
            }
        }
        k += L;
    }
    let mut out = [[0f32; 4]; 2];
    for r in 0..2 {
        for j in 0..4 {
            let a = &acc[r][j];
            let mut s = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
            for k in full..d {
                s = madd::<FMA>(xs[r][k], ys[j][k], s);
            }
            out[r][j] = s;
        }
    }
    out
}

/// [`add_combination`], through the AVX2 kernel where the caller is compiled for it.
#[inline(always)]
pub(crate) fn combine<const FMA: bool>(coefs: &[f32], rows: &[f32], d: usize, dest: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if FMA {
        // SAFETY: as for `avx2::logits` in `batch_update`.
        unsafe { avx2::add_combination(coefs, rows, d, dest) };
        return;
    }
    add_combination::<FMA>(coefs, rows, d, dest)
}

/// `dest += sum_j coefs[j] rows[j]` (`rows` is `coefs.len() x d`), one 16-lane chunk of `dest`
/// at a time with the sum held in registers: `dest` is loaded and stored once per chunk instead
/// of once per term, and no update matrix is stored. The terms are added in order from a zero
/// start, so the result is bit for bit that of accumulating `dX = G Y` row by row and adding it.
#[inline(always)]
fn add_combination<const FMA: bool>(coefs: &[f32], rows: &[f32], d: usize, dest: &mut [f32]) {
    const L: usize = 16;
    let dest = &mut dest[..d];
    let full = d / L * L;
    let mut k = 0;
    while k < full {
        let mut acc = [0f32; L];
        for (j, &c) in coefs.iter().enumerate() {
            let r = lanes::<L>(&rows[j * d..(j + 1) * d], k);
            for l in 0..L {
                acc[l] = madd::<FMA>(c, r[l], acc[l]);
            }
        }
        let out: &mut [f32; L] = (&mut dest[k..k + L]).try_into().expect("L lanes");
        for l in 0..L {
            out[l] += acc[l];
        }
        k += L;
    }
    for k in full..d {
        let mut acc = 0f32;
        for (j, &c) in coefs.iter().enumerate() {
            acc = madd::<FMA>(c, rows[j * d + k], acc);
        }
        dest[k] += acc;
    }
}

/// `s[k..k + L]` as an array (the length is right by construction, so the check folds away).
#[inline(always)]
fn lanes<const L: usize>(s: &[f32], k: usize) -> &[f32; L] {
    s[k..k + L].try_into().expect("a slice of length L")
}

/// The two products of a batch written with AVX2/FMA intrinsics. The portable loops above leave
/// the register allocation to LLVM, which (measured) vectorized the 2 x 4 logits block across
/// the wrong dimension (4-lane shuffles and stack spills) and kept one accumulator chain in the
/// row combination, bound by the FMA latency. Here every accumulator is an explicit register.
/// The arithmetic differs from the portable loops only in the order of the partial sums.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Sum of the 8 lanes.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn hsum(v: __m256) -> f32 {
        let quad = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
        _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps::<1>(pair, pair)))
    }

    /// The `R x C` dot products of rows `xs` against rows `ys` (all of length `d`): each chunk
    /// of 8 lanes of a row is loaded once and serves `C` (or `R`) products.
    ///
    /// # Safety
    /// Every pointer is valid for `d` reads.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn block<const R: usize, const C: usize>(
        xs: [*const f32; R],
        ys: [*const f32; C],
        d: usize,
    ) -> [[f32; C]; R] {
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let full = d / 8 * 8;
        let mut k = 0;
        while k < full {
            // SAFETY: k + 8 <= d, within every row by the contract.
            let xv: [__m256; R] = std::array::from_fn(|r| unsafe { _mm256_loadu_ps(xs[r].add(k)) });
            for c in 0..C {
                // SAFETY: as above.
                let yv = unsafe { _mm256_loadu_ps(ys[c].add(k)) };
                for r in 0..R {
                    acc[r][c] = _mm256_fmadd_ps(xv[r], yv, acc[r][c]);
                }
            }
            k += 8;
        }
        let mut out = [[0f32; C]; R];
        for r in 0..R {
            for c in 0..C {
                let mut sum = hsum(acc[r][c]);
                for k in full..d {
                    // SAFETY: k < d.
                    sum = unsafe { (*xs[r].add(k)).mul_add(*ys[c].add(k), sum) };
                }
                out[r][c] = sum;
            }
        }
        out
    }

    /// `S = X Y^T` (`n x d` times `d x m`, row-major), in 2 x 4 blocks with edge blocks
    /// of fewer rows or columns.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn logits(x: &[f32], y: &[f32], d: usize, n: usize, m: usize, s: &mut [f32]) {
        assert!(x.len() >= n * d && y.len() >= m * d && s.len() >= n * m);
        let xr = |i: usize| x[i * d..].as_ptr();
        let yr = |j: usize| y[j * d..].as_ptr();
        let mut i = 0;
        while i < n {
            let rows = (n - i).min(2);
            let mut j = 0;
            while j < m {
                let cols = (m - j).min(4);
                // SAFETY: rows i..i + rows of x and j..j + cols of y exist (asserted above),
                // each of length d.
                unsafe {
                    macro_rules! put {
                        ($r:literal, $c:literal) => {{
                            let b = block::<$r, $c>(
                                std::array::from_fn(|a| xr(i + a)),
                                std::array::from_fn(|b| yr(j + b)),
                                d,
                            );
                            for a in 0..$r {
                                s[(i + a) * m + j..(i + a) * m + j + $c].copy_from_slice(&b[a]);
                            }
                        }};
                    }
                    match (rows, cols) {
                        (2, 4) => put!(2, 4),
                        (2, 3) => put!(2, 3),
                        (2, 2) => put!(2, 2),
                        (2, _) => put!(2, 1),
                        (_, 4) => put!(1, 4),
                        (_, 3) => put!(1, 3),
                        (_, 2) => put!(1, 2),
                        _ => put!(1, 1),
                    }
                }
                j += cols;
            }
            i += rows;
        }
    }

    /// `dest += sum_j coefs[j] rows[j]` (`rows` is `coefs.len() x d`), 64 lanes of `dest` at a
    /// time in eight accumulators (enough independent chains to cover the FMA latency), then 8,
    /// then one by one.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn add_combination(coefs: &[f32], rows: &[f32], d: usize, dest: &mut [f32]) {
        assert!(rows.len() >= coefs.len() * d && dest.len() >= d);
        let (rp, dp) = (rows.as_ptr(), dest.as_mut_ptr());
        let mut k = 0;
        while k + 64 <= d {
            let mut acc = [_mm256_setzero_ps(); 8];
            for (j, &c) in coefs.iter().enumerate() {
                let cv = _mm256_set1_ps(c);
                for (a, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: j < coefs.len() and k + 64 <= d: inside `rows` (asserted).
                    let r = unsafe { _mm256_loadu_ps(rp.add(j * d + k + 8 * a)) };
                    *acc = _mm256_fmadd_ps(cv, r, *acc);
                }
            }
            for (a, acc) in acc.iter().enumerate() {
                // SAFETY: k + 64 <= d <= dest.len().
                unsafe {
                    let p = dp.add(k + 8 * a);
                    _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), *acc));
                }
            }
            k += 64;
        }
        while k + 8 <= d {
            let mut acc = _mm256_setzero_ps();
            for (j, &c) in coefs.iter().enumerate() {
                // SAFETY: as above, k + 8 <= d.
                let r = unsafe { _mm256_loadu_ps(rp.add(j * d + k)) };
                acc = _mm256_fmadd_ps(_mm256_set1_ps(c), r, acc);
            }
            // SAFETY: as above.
            unsafe {
                let p = dp.add(k);
                _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), acc));
            }
            k += 8;
        }
        for k in k..d {
            let mut acc = 0f32;
            for (j, &c) in coefs.iter().enumerate() {
                acc = c.mul_add(rows[j * d + k], acc);
            }
            dest[k] += acc;
        }
    }
}
