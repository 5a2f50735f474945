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
//! Each is written three times: portable loops (2 x 4 register blocks for the logits; each output
//! row summed in registers a block of lanes at a time), AVX2/FMA intrinsics used where the caller
//! is compiled for them (`FMA = true`), and AVX-512F intrinsics where the CPU has them too
//! (`avx512`, checked once per run by the caller): at d = 100 a row is 6 vectors and a masked
//! tail of 4 lanes in 512 bits, against 12 vectors and 4 lanes one by one in 256.

use crate::sampling::Sigmoid;
use crate::vecops::{dot, madd};

/// `S = X Y^T` (`n x d` times `d x m`, row-major), through the AVX2 kernel when `FMA`, the
/// AVX-512 one when `avx512` too.
#[inline(always)]
pub(crate) fn logits<const FMA: bool>(
    avx512: bool,
    x: &[f32],
    y: &[f32],
    d: usize,
    n: usize,
    m: usize,
    s: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if FMA {
        if avx512 {
            // SAFETY: `avx512` is true only where the CPU has AVX-512F (and AVX2 and FMA).
            unsafe { avx512::logits(x, y, d, n, m, s) };
        } else {
            // SAFETY: `FMA` is true only inside functions compiled for (and run on) AVX2 and FMA.
            unsafe { avx2::logits(x, y, d, n, m, s) };
        }
        return;
    }
    let _ = avx512;
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

/// [`add_combination`], through the AVX2 kernel where the caller is compiled for it, the
/// AVX-512 one when `avx512` too. All three add the same terms in the same order to each lane,
/// so they agree bit for bit (with `FMA`).
#[inline(always)]
pub(crate) fn combine<const FMA: bool>(
    avx512: bool,
    coefs: &[f32],
    rows: &[f32],
    d: usize,
    dest: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if FMA {
        if avx512 {
            // SAFETY: as for `avx512::logits` in `logits`.
            unsafe { avx512::add_combination(coefs, rows, d, dest) };
        } else {
            // SAFETY: as for `avx2::logits` in `logits`.
            unsafe { avx2::add_combination(coefs, rows, d, dest) };
        }
        return;
    }
    let _ = avx512;
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

/// `S = X Y^T` in blocks of up to 2 rows x `$cols` columns, edge blocks smaller: `$block::<R,
/// C>` (a vector module's `unsafe fn`, called inside an `unsafe` function compiled for its
/// instruction set) gives one block's dot products; `$shapes` lists every `(R, C)` it is
/// instantiated for, which must cover rows 1 and 2 at every width up to `$cols`.
#[cfg(target_arch = "x86_64")]
macro_rules! in_blocks {
    ($block:ident, $x:expr, $y:expr, $d:expr, $n:expr, $m:expr, $s:expr, $cols:literal,
     [$(($r:literal, $c:literal)),+]) => {{
        let (x, y, d, n, m, s): (&[f32], &[f32], usize, usize, usize, &mut [f32]) =
            ($x, $y, $d, $n, $m, $s);
        assert!(x.len() >= n * d && y.len() >= m * d && s.len() >= n * m);
        let xr = |i: usize| x[i * d..].as_ptr();
        let yr = |j: usize| y[j * d..].as_ptr();
        let mut i = 0;
        while i < n {
            let rows = (n - i).min(2);
            let mut j = 0;
            while j < m {
                let cols = (m - j).min($cols);
                match (rows, cols) {
                    $(($r, $c) => {
                        // SAFETY: rows i..i + R of x and j..j + C of y exist (asserted above),
                        // each of length d.
                        let b = unsafe {
                            $block::<$r, $c>(
                                std::array::from_fn(|a| xr(i + a)),
                                std::array::from_fn(|b| yr(j + b)),
                                d,
                            )
                        };
                        for a in 0..$r {
                            s[(i + a) * m + j..(i + a) * m + j + $c].copy_from_slice(&b[a]);
                        }
                    })+
                    _ => unreachable!("blocks of 1 or 2 rows and 1 to {} columns", $cols),
                }
                j += cols;
            }
            i += rows;
        }
    }};
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
        in_blocks! {
            block, x, y, d, n, m, s, 4,
            [(2, 4), (2, 3), (2, 2), (2, 1), (1, 4), (1, 3), (1, 2), (1, 1)]
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

/// The two products with AVX-512F intrinsics: as [`avx2`], in 16-lane vectors, each row's last
/// partial vector under a mask (masked loads read nothing past the row). With 32 registers the
/// logits block is 2 x 6, a whole batch's targets when K = 5.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// The lanes of a row's last vector: the `rest` (1 to 16) that remain.
    #[inline(always)]
    fn tail_mask(rest: usize) -> __mmask16 {
        debug_assert!((1..=16).contains(&rest));
        (u32::MAX >> (32 - rest)) as __mmask16
    }

    /// The `R x C` dot products of rows `xs` against rows `ys` (all of length `d`), lane by
    /// lane in 16-lane sums then reduced.
    ///
    /// # Safety
    /// The CPU has AVX-512F; every pointer is valid for `d` reads.
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[inline]
    unsafe fn block<const R: usize, const C: usize>(
        xs: [*const f32; R],
        ys: [*const f32; C],
        d: usize,
    ) -> [[f32; C]; R] {
        let mut acc = [[_mm512_setzero_ps(); C]; R];
        let full = d / 16 * 16;
        let mut k = 0;
        while k < full {
            // SAFETY: k + 16 <= d, within every row by the contract.
            let xv: [__m512; R] = std::array::from_fn(|r| unsafe { _mm512_loadu_ps(xs[r].add(k)) });
            for c in 0..C {
                // SAFETY: as above.
                let yv = unsafe { _mm512_loadu_ps(ys[c].add(k)) };
                for r in 0..R {
                    acc[r][c] = _mm512_fmadd_ps(xv[r], yv, acc[r][c]);
                }
            }
            k += 16;
        }
        if full < d {
            let mask = tail_mask(d - full);
            // SAFETY: the masked lanes are the k < d ones; the others are not read.
            let xv: [__m512; R] =
                std::array::from_fn(|r| unsafe { _mm512_maskz_loadu_ps(mask, xs[r].add(full)) });
            for c in 0..C {
                // SAFETY: as above.
                let yv = unsafe { _mm512_maskz_loadu_ps(mask, ys[c].add(full)) };
                for r in 0..R {
                    acc[r][c] = _mm512_fmadd_ps(xv[r], yv, acc[r][c]);
                }
            }
        }
        let mut out = [[0f32; C]; R];
        for r in 0..R {
            for c in 0..C {
                out[r][c] = _mm512_reduce_add_ps(acc[r][c]);
            }
        }
        out
    }

    /// `S = X Y^T` (`n x d` times `d x m`, row-major), in 2 x 6 blocks with edge blocks of
    /// fewer rows or columns.
    ///
    /// # Safety
    /// The CPU has AVX-512F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub unsafe fn logits(x: &[f32], y: &[f32], d: usize, n: usize, m: usize, s: &mut [f32]) {
        in_blocks! {
            block, x, y, d, n, m, s, 6,
            [(2, 6), (2, 5), (2, 4), (2, 3), (2, 2), (2, 1),
             (1, 6), (1, 5), (1, 4), (1, 3), (1, 2), (1, 1)]
        }
    }

    /// `V` vectors of `dest` from lane `k` (the last under `last`, all ones when whole) plus
    /// `sum_j coefs[j] rows[j]` over those lanes, the sums in `V` registers.
    ///
    /// # Safety
    /// The CPU has AVX-512F; lanes `k..k + 16 (V - 1)` and the `last` lanes of the vector after
    /// are inside `dest` and inside each of the `coefs.len()` rows of `rows` (each `d` long).
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[inline]
    unsafe fn chunk<const V: usize>(
        coefs: &[f32],
        rows: *const f32,
        d: usize,
        dest: *mut f32,
        k: usize,
        last: __mmask16,
    ) {
        let mut acc = [_mm512_setzero_ps(); V];
        for (j, &c) in coefs.iter().enumerate() {
            let cv = _mm512_set1_ps(c);
            // SAFETY: row j's lanes from k, as the contract says.
            let row = unsafe { rows.add(j * d + k) };
            for (a, acc) in acc.iter_mut().enumerate() {
                // SAFETY: whole vectors before the last, the last under its mask (contract).
                let r = unsafe {
                    if a + 1 < V {
                        _mm512_loadu_ps(row.add(16 * a))
                    } else {
                        _mm512_maskz_loadu_ps(last, row.add(16 * a))
                    }
                };
                *acc = _mm512_fmadd_ps(cv, r, *acc);
            }
        }
        for (a, acc) in acc.iter().enumerate() {
            // SAFETY: as for the loads above, in `dest`.
            unsafe {
                let p = dest.add(k + 16 * a);
                if a + 1 < V {
                    _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), *acc));
                } else {
                    let old = _mm512_maskz_loadu_ps(last, p);
                    _mm512_mask_storeu_ps(p, last, _mm512_add_ps(old, *acc));
                }
            }
        }
    }

    /// `dest += sum_j coefs[j] rows[j]` (`rows` is `coefs.len() x d`), 128 lanes of `dest` at
    /// a time in eight accumulators, then what remains (up to eight vectors, the last masked)
    /// in one pass over the terms: at d = 100 the whole row in seven registers.
    ///
    /// # Safety
    /// The CPU has AVX-512F, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub unsafe fn add_combination(coefs: &[f32], rows: &[f32], d: usize, dest: &mut [f32]) {
        assert!(rows.len() >= coefs.len() * d && dest.len() >= d);
        let (rp, dp) = (rows.as_ptr(), dest.as_mut_ptr());
        let mut k = 0;
        while k + 128 <= d {
            // SAFETY: k + 128 <= d: inside `dest` and every row (asserted).
            unsafe { chunk::<8>(coefs, rp, d, dp, k, !0) };
            k += 128;
        }
        let rest = d - k;
        if rest == 0 {
            return;
        }
        let vectors = rest.div_ceil(16);
        let last = tail_mask(rest - 16 * (vectors - 1));
        // SAFETY: the `vectors` vectors from k end at d under the mask of the last.
        unsafe {
            match vectors {
                1 => chunk::<1>(coefs, rp, d, dp, k, last),
                2 => chunk::<2>(coefs, rp, d, dp, k, last),
                3 => chunk::<3>(coefs, rp, d, dp, k, last),
                4 => chunk::<4>(coefs, rp, d, dp, k, last),
                5 => chunk::<5>(coefs, rp, d, dp, k, last),
                6 => chunk::<6>(coefs, rp, d, dp, k, last),
                7 => chunk::<7>(coefs, rp, d, dp, k, last),
                _ => chunk::<8>(coefs, rp, d, dp, k, last),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{cpu_has_avx512, cpu_has_fma};

    /// Row lengths around every vector width and block edge, and the shapes trained at.
    const DIMS: [usize; 16] = [
        1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 64, 100, 127, 128, 129, 300,
    ];

    /// Deterministic values in [-1, 1).
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// The paths this CPU can run, as `(name, FMA, avx512)`: the portable loops with fused
    /// multiply-adds stand for the sums the vector kernels must reproduce.
    fn paths() -> Vec<(&'static str, bool, bool)> {
        let mut p = vec![("portable", false, false)];
        if cpu_has_fma() {
            p.push(("avx2+fma", true, false));
        }
        if cpu_has_avx512() {
            p.push(("avx512f", true, true));
        }
        p
    }

    fn logits_on(
        path: (&str, bool, bool),
        x: &[f32],
        y: &[f32],
        d: usize,
        n: usize,
        m: usize,
    ) -> Vec<f32> {
        let mut s = vec![f32::NAN; n * m];
        match path.1 {
            true => logits::<true>(path.2, x, y, d, n, m, &mut s),
            false => logits::<false>(path.2, x, y, d, n, m, &mut s),
        }
        s
    }

    fn combine_on(
        path: (&str, bool, bool),
        coefs: &[f32],
        rows: &[f32],
        d: usize,
        dest: &mut [f32],
    ) {
        match path.1 {
            true => combine::<true>(path.2, coefs, rows, d, dest),
            false => combine::<false>(path.2, coefs, rows, d, dest),
        }
    }

    #[test]
    fn every_path_adds_a_combination_with_the_same_bits() {
        for d in DIMS {
            for terms in [1, 2, 6, 11] {
                let coefs = values(terms, d as u64 + 7);
                let rows = values(terms * d, d as u64 * 31 + terms as u64);
                let start = values(d, 99 + d as u64);
                // The fused sums of the portable loop, lane by lane in the terms' order.
                let mut want = start.clone();
                add_combination::<true>(&coefs, &rows, d, &mut want);
                for path in paths().into_iter().filter(|p| p.1) {
                    let mut got = start.clone();
                    combine_on(path, &coefs, &rows, d, &mut got);
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same,
                        "{}: d = {d}, {terms} terms: {got:?} != {want:?}",
                        path.0
                    );
                }
            }
        }
    }

    #[test]
    fn a_combination_touches_only_its_row() {
        // The masked tails write the row's lanes and nothing after them.
        for path in paths() {
            for d in DIMS {
                let coefs = [0.5f32, -2.0];
                let rows = values(2 * d, d as u64);
                let mut dest = vec![1.0f32; d + 17];
                combine_on(path, &coefs, &rows, d, &mut dest);
                assert!(dest[d..].iter().all(|&v| v == 1.0), "{}: d = {d}", path.0);
            }
        }
    }

    #[test]
    fn every_path_computes_the_logits_of_small_integers_exactly() {
        // Integer entries in [-3, 3]: every partial sum is a small integer, exact in f32 in any
        // order, so each path must give the plain sum.
        for path in paths() {
            for d in DIMS {
                for (n, m) in [(1, 1), (2, 6), (3, 5), (5, 7), (10, 6)] {
                    let int =
                        |v: Vec<f32>| -> Vec<f32> { v.iter().map(|x| (x * 3.5).trunc()).collect() };
                    let x = int(values(n * d, d as u64 + n as u64));
                    let y = int(values(m * d, 1000 + d as u64 * m as u64));
                    let got = logits_on(path, &x, &y, d, n, m);
                    for i in 0..n {
                        for j in 0..m {
                            let want: f32 = (0..d).map(|k| x[i * d + k] * y[j * d + k]).sum();
                            assert_eq!(
                                got[i * m + j],
                                want,
                                "{}: d = {d}, ({i}, {j}) of {n} x {m}",
                                path.0
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_path_computes_the_logits_to_f32_rounding() {
        for path in paths() {
            for d in DIMS {
                for (n, m) in [(1, 6), (2, 6), (4, 8), (9, 6), (10, 3)] {
                    let x = values(n * d, 5 + d as u64 * n as u64);
                    let y = values(m * d, 77 + d as u64 + m as u64);
                    let got = logits_on(path, &x, &y, d, n, m);
                    for i in 0..n {
                        for j in 0..m {
                            let pairs =
                                (0..d).map(|k| f64::from(x[i * d + k]) * f64::from(y[j * d + k]));
                            let want: f64 = pairs.clone().sum();
                            let scale: f64 = pairs.map(f64::abs).sum();
                            let err = (f64::from(got[i * m + j]) - want).abs();
                            // A sum of d products rounded in f32: at most about d ulps of the
                            // sum of magnitudes.
                            let tol = scale * d as f64 * f64::from(f32::EPSILON);
                            assert!(
                                err <= tol,
                                "{}: d = {d}, ({i}, {j}): {} vs {want}",
                                path.0,
                                got[i * m + j]
                            );
                        }
                    }
                }
            }
        }
    }
}
