//! The query's kernel arrays `K^T`, `(K / r)^T` and `(K .* M)^T`, word-major, for the words a
//! variant needs, and the two shared phases that build them (`distance`, then `precompute`).
//!
//! Cost for `n_w` selected words: `n_w v_s` exponentials, vectorized ([`crate::fast_exp`], within
//! 1 ulp of std's), plus a product or two each (`(K / r)^T` only for the variants that read it);
//! the `n_w x stride` arrays are [`ZeroedBuf`]s, an earlier query's buffers where the process has
//! some, written whole without clearing them first (`buffer.rs` says why, and why not huge pages).

use crate::buffer::ZeroedBuf;
use crate::flops::{distance_flops, precompute_flops};
use crate::pool::Pool;
use crate::problem::{PhaseTimes, SinkhornParams, WmdProblem};
use crate::real::{padded_stride_of, Real};
use parbench_common::Csr;
use rayon::prelude::*;

/// The words a variant needs kernel rows for, with the row pointers of `c` restricted to them.
#[derive(Clone, Debug)]
pub struct WordSet {
    /// Selected vocabulary words, increasing.
    pub words: Vec<u32>,
    /// `row_ptr[k]..row_ptr[k + 1]` are the nonzeros of `c` in word `words[k]` (indices into
    /// `c.indices()` / `c.values()`); length `words.len() + 1`.
    pub row_ptr: Vec<usize>,
}

impl WordSet {
    /// Every word of the vocabulary (the dense baseline).
    pub fn all(c: &Csr) -> WordSet {
        WordSet {
            words: (0..c.nrows() as u32).collect(),
            row_ptr: c.indptr().to_vec(),
        }
    }

    /// Only the words that occur in at least one target document: rows of `M`, `K` for the other
    /// words are never read by a sparse variant, so parbench does not compute them.
    pub fn used(c: &Csr) -> WordSet {
        let indptr = c.indptr();
        let mut words = Vec::new();
        let mut row_ptr = vec![0];
        for w in 0..c.nrows() {
            if indptr[w + 1] > indptr[w] {
                words.push(w as u32);
                row_ptr.push(indptr[w + 1]);
            }
        }
        WordSet { words, row_ptr }
    }

    /// `map[word]` = position of `word` in `words`, `u32::MAX` for words not selected.
    pub fn position_map(&self, vocab: usize) -> Vec<u32> {
        let mut map = vec![u32::MAX; vocab];
        for (k, &w) in self.words.iter().enumerate() {
            map[w as usize] = k as u32;
        }
        map
    }
}

/// The query's kernel arrays, word-major, for a [`WordSet`], in f64 or (`doc-major-f32`) f32.
#[derive(Clone, Debug)]
pub struct QueryKernels<E: Real = f64> {
    /// Query words `v_s`.
    pub vs: usize,
    /// Row length of every array (`v_s` padded).
    pub stride: usize,
    /// `K^T`: row `k` is `exp(-lambda M[:, words[k]])`.
    pub kt: ZeroedBuf<E>,
    /// `(K / r)^T`: row `k` is `K[s, words[k]] / r[s]`.
    pub kr: ZeroedBuf<E>,
    /// `(K .* M)^T`.
    pub km: ZeroedBuf<E>,
    /// `1 / r_s` for each query word, zeros to `stride` values like a kernel row (a loop that
    /// divides by `r` itself reads it).
    pub inv_r: Vec<E>,
}

impl<E: Real> QueryKernels<E> {
    /// Row `k` of `K^T` (`stride` values, padding 0).
    #[inline(always)]
    pub fn kt_row(&self, k: usize) -> &[E] {
        &self.kt[k * self.stride..(k + 1) * self.stride]
    }
    /// Row `k` of `(K / r)^T`; panics when the array was left empty ([`prepare_without_kr`]).
    #[inline(always)]
    pub fn kr_row(&self, k: usize) -> &[E] {
        &self.kr[k * self.stride..(k + 1) * self.stride]
    }
    /// Row `k` of `(K .* M)^T`.
    #[inline(always)]
    pub fn km_row(&self, k: usize) -> &[E] {
        &self.km[k * self.stride..(k + 1) * self.stride]
    }
}

impl<E: Real> QueryKernels<E> {
    /// The arrays for `rows` words of `query` (`(K / r)^T` left empty unless `with_kr`), from
    /// the spare buffers of earlier queries where there are some (no fresh pages to fault in).
    /// The contents are left as they were, for [`kernel_rows`] to overwrite whole, padding
    /// included; `1 / r` is filled in.
    pub(crate) fn for_rows(query: &[(u32, f64)], rows: usize, with_kr: bool) -> Self {
        let vs = query.len();
        let stride = padded_stride_of::<E>(vs);
        let len = rows * stride;
        QueryKernels {
            vs,
            stride,
            kt: ZeroedBuf::for_overwrite(len),
            kr: ZeroedBuf::for_overwrite(if with_kr { len } else { 0 }),
            km: ZeroedBuf::for_overwrite(len),
            inv_r: inverse_weights(query, stride),
        }
    }
}

/// `K^T`, `(K / r)^T` and `(K .* M)^T` from the word-major distances (in parallel over words).
pub fn precompute<E: Real>(
    m: &[E],
    query: &[(u32, f64)],
    lambda: f64,
    pool: &Pool,
) -> QueryKernels<E> {
    precompute_arrays(m, query, lambda, pool, true)
}

/// [`precompute`], leaving `kr` empty unless `with_kr` (a variant that divides by `r` itself
/// saves writing a 6 MB array).
fn precompute_arrays<E: Real>(
    m: &[E],
    query: &[(u32, f64)],
    lambda: f64,
    pool: &Pool,
    with_kr: bool,
) -> QueryKernels<E> {
    let vs = query.len();
    let stride = padded_stride_of::<E>(vs);
    let r: Vec<E> = query.iter().map(|&(_, r)| E::from_f64(r)).collect();
    let QueryKernels {
        mut kt,
        mut kr,
        mut km,
        inv_r,
        ..
    } = QueryKernels::for_rows(query, m.len() / stride, with_kr);
    const ROWS: usize = 1024;
    let chunk = ROWS * stride;
    type Rows<'a, E> = (((&'a [E], &'a mut [E]), &'a mut [E]), Option<&'a mut [E]>);
    let work = |(((m, kt), km), kr): Rows<E>| {
        kernel_rows(KernelRows {
            m,
            r: &r,
            lambda,
            stride,
            kt,
            km,
            kr,
        })
    };
    let kr_chunks = kr
        .chunks_mut(chunk)
        .map(Some)
        .chain(std::iter::repeat_with(|| None));
    let chunks = m
        .chunks(chunk)
        .zip(kt.chunks_mut(chunk))
        .zip(km.chunks_mut(chunk))
        .zip(kr_chunks);
    if pool.threads() > 1 && m.len() > chunk {
        let chunks: Vec<_> = chunks.collect();
        pool.run(|| chunks.into_par_iter().for_each(work));
    } else {
        chunks.for_each(work);
    }
    QueryKernels {
        vs,
        stride,
        kt,
        kr,
        km,
        inv_r,
    }
}

/// `1 / r_s` for each word of `query`, rounded to `E` once.
fn inverse_weights<E: Real>(query: &[(u32, f64)], stride: usize) -> Vec<E> {
    let mut inv_r: Vec<E> = query.iter().map(|&(_, r)| E::from_f64(1.0 / r)).collect();
    inv_r.resize(stride, E::ZERO);
    inv_r
}

/// One block of the precompute's work: rows of the word-major distances `m` (rows of
/// `stride`, the query's weights `r`, `r.len() <= stride` of each row used) and the same rows
/// of the arrays made from them, each as long as `m`.
pub struct KernelRows<'a, E> {
    /// Word-major distances, `stride` values a row.
    pub m: &'a [E],
    /// The query's weights.
    pub r: &'a [E],
    /// The entropic regularization.
    pub lambda: f64,
    /// Row length of every array.
    pub stride: usize,
    /// `K^T`.
    pub kt: &'a mut [E],
    /// `(K .* M)^T`.
    pub km: &'a mut [E],
    /// `(K / r)^T`, for the variants that read it.
    pub kr: Option<&'a mut [E]>,
}

/// Rows of `K^T`, `(K .* M)^T` and, when given, `(K / r)^T`, padding included, so a reused
/// buffer needs no clearing: by the type's own kernel where it has one for this CPU
/// ([`Real::own_kernel_rows`]), else by [`portable_kernel_rows`].
pub(crate) fn kernel_rows<E: Real>(mut rows: KernelRows<'_, E>) {
    if !E::own_kernel_rows(&mut rows) {
        portable_kernel_rows(rows)
    }
}

/// [`kernel_rows`] on any CPU: a block's exponentials taken at once ([`Real::exp_neg_scaled`],
/// vectorized, padding included), then the products row by row while the block is still in L2.
fn portable_kernel_rows<E: Real>(rows: KernelRows<'_, E>) {
    let KernelRows {
        m,
        r,
        lambda,
        stride,
        kt,
        km,
        mut kr,
    } = rows;
    let vs = r.len();
    E::exp_neg_scaled(m, lambda, stride, vs, kt);
    for (row, ((mrow, ktrow), kmrow)) in m
        .chunks_exact(stride)
        .zip(kt.chunks_exact_mut(stride))
        .zip(km.chunks_exact_mut(stride))
        .enumerate()
    {
        for s in 0..vs {
            kmrow[s] = ktrow[s] * mrow[s];
        }
        kmrow[vs..].fill(E::ZERO);
        if let Some(kr) = kr.as_deref_mut() {
            let krrow = &mut kr[row * stride..(row + 1) * stride];
            for s in 0..vs {
                krrow[s] = ktrow[s] / r[s];
            }
            krrow[vs..].fill(E::ZERO);
        }
        ktrow[vs..].fill(E::ZERO);
    }
}

/// The f32 rows of [`kernel_rows`] with AVX2 and FMA, one pass over each row: its smallest used
/// distance, then eight values a step shifted, scaled by `-lambda`, exponentiated in f32
/// ([`crate::fast_exp::f32x8`]) and multiplied or divided while in registers; padding is 0 in
/// every array. Against the portable rows (the argument and its exponential in f64, rounded
/// once), the argument `lambda (d - shift)` is rounded in f32, a relative error of about
/// `epsilon lambda (d - shift)` in the entry: at most about `epsilon / e` of the row's largest
/// entry (1), the order of the error f32 distances already carry (`epsilon lambda d`).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use super::KernelRows;
    use std::arch::x86_64::*;

    /// # Safety
    /// AVX2 and FMA; `stride` a multiple of 8 and at least `r.len()`; `kt`, `km` (and `kr`)
    /// as long as `m`, a whole number of rows.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn kernel_rows_f32(rows: &mut KernelRows<'_, f32>) {
        let KernelRows {
            m,
            r,
            lambda,
            stride,
            ref mut kt,
            ref mut km,
            ref mut kr,
        } = *rows;
        let vs = r.len();
        debug_assert!(stride.is_multiple_of(8) && vs <= stride && m.len().is_multiple_of(stride));
        debug_assert!(kt.len() == m.len() && km.len() == m.len());
        let mut r_padded = vec![1.0f32; stride];
        r_padded[..vs].copy_from_slice(r);
        let neg_lambda = _mm256_set1_ps(-lambda as f32);
        let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        // Lanes of a row's `j`-th vector that hold used values: lane < vs - 8 j.
        let used = |j: usize| {
            let left = vs as i32 - 8 * j as i32;
            _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane))
        };
        for (i, row) in m.chunks_exact(stride).enumerate() {
            let mut low = _mm256_set1_ps(f32::INFINITY);
            for (j, c) in row.chunks_exact(8).enumerate() {
                // SAFETY: `c` holds 8 values.
                let d = unsafe { _mm256_loadu_ps(c.as_ptr()) };
                // `min_ps` returns its second operand when the first is NaN: NaNs are
                // skipped, as `f32::min` skips them in the portable rows.
                low = _mm256_min_ps(_mm256_blendv_ps(low, d, used(j)), low);
            }
            let four = _mm_min_ps(_mm256_castps256_ps128(low), _mm256_extractf128_ps::<1>(low));
            let two = _mm_min_ps(four, _mm_movehl_ps(four, four));
            let one = _mm_min_ss(two, _mm_shuffle_ps::<1>(two, two));
            let shift = _mm256_set1_ps(_mm_cvtss_f32(one));
            for (j, c) in row.chunks_exact(8).enumerate() {
                let keep = used(j);
                let at = i * stride + 8 * j;
                // Padding takes the shift, an argument of 0, off the exponential's slow path.
                // SAFETY: `c` holds 8 values.
                let d = _mm256_blendv_ps(shift, unsafe { _mm256_loadu_ps(c.as_ptr()) }, keep);
                let x = _mm256_mul_ps(_mm256_sub_ps(d, shift), neg_lambda);
                // SAFETY: AVX2 and FMA (this function's contract); `at + 8 <= m.len()`, the
                // length of every output (the contract), and of `r_padded` past `8 j`.
                unsafe {
                    let k = _mm256_and_ps(crate::fast_exp::f32x8::exp(x), keep);
                    _mm256_storeu_ps(kt.as_mut_ptr().add(at), k);
                    let kd = _mm256_and_ps(_mm256_mul_ps(k, d), keep);
                    _mm256_storeu_ps(km.as_mut_ptr().add(at), kd);
                    if let Some(kr) = kr.as_deref_mut() {
                        let rs = _mm256_loadu_ps(r_padded.as_ptr().add(8 * j));
                        _mm256_storeu_ps(kr.as_mut_ptr().add(at), _mm256_div_ps(k, rs));
                    }
                }
            }
        }
    }
}

/// The f64 rows of [`kernel_rows`] with AVX-512F or AVX2 and FMA: one pass over each row, a
/// vector at a time scaled by `-lambda`, exponentiated ([`crate::fast_exp`]'s kernel) and
/// multiplied or divided while in registers, where the portable rows take three passes over
/// each block (the scaling, the exponentials, the products). The same values bit for bit: the
/// same exponential, the same products in the same order; padding is 0 in every array.
#[cfg(target_arch = "x86_64")]
pub(crate) mod lanes_f64 {
    use super::KernelRows;
    use crate::fast_exp::lanes::{exp_checked, ExpVector, OverLanes, Width};

    /// The rows by the widest kernel this CPU has, returning true, or false (doing nothing)
    /// when it has neither AVX-512F nor AVX2 with FMA.
    pub(crate) fn kernel_rows(rows: &mut KernelRows<'_, f64>) -> bool {
        Width::run_widest(Rows(rows)).is_some()
    }

    /// The rows as a task for [`crate::fast_exp::lanes`]' dispatch.
    pub(crate) struct Rows<'r, 'a>(pub(crate) &'r mut KernelRows<'a, f64>);

    impl OverLanes for Rows<'_, '_> {
        type Output = ();
        #[inline(always)]
        unsafe fn run<V: ExpVector>(self) {
            // SAFETY: `V`'s instruction set (the caller's contract).
            unsafe { rows_in::<V>(self.0) }
        }
    }

    /// # Safety
    /// `V`'s instruction set.
    #[inline(always)]
    unsafe fn rows_in<V: ExpVector>(rows: &mut KernelRows<'_, f64>) {
        let KernelRows {
            m,
            r,
            lambda,
            stride,
            ref mut kt,
            ref mut km,
            ref mut kr,
        } = *rows;
        let vs = r.len();
        assert!(vs <= stride && m.len().is_multiple_of(stride));
        assert!(kt.len() == m.len() && km.len() == m.len());
        assert!(kr.as_deref().is_none_or(|kr| kr.len() == m.len()));
        let mut r_padded = vec![1.0; stride.next_multiple_of(V::VL)];
        r_padded[..vs].copy_from_slice(r);
        // SAFETY: `V`'s instruction set (this function's contract); every load and store is of
        // the lanes of `inside`, the values `at + o .. at + o + n` of a row inside `m` and the
        // outputs (as long as `m`, asserted), and `r_padded` holds `o + VL` values.
        unsafe {
            let (neg_lambda, zero) = (V::splat(-lambda), V::zero());
            for at in (0..m.len()).step_by(stride) {
                for o in (0..stride).step_by(V::VL) {
                    let inside = (1u32 << (stride - o).min(V::VL)) - 1;
                    let used = (1u32 << vs.saturating_sub(o).min(V::VL)) - 1;
                    let d = V::maskz_loadu(inside, m.as_ptr().add(at + o));
                    let k = exp_checked::<V>(V::vmul(neg_lambda, d), used);
                    let k = V::blend(used, zero, k);
                    V::mask_storeu(kt.as_mut_ptr().add(at + o), inside, k);
                    let kd = V::blend(used, zero, V::vmul(k, d));
                    V::mask_storeu(km.as_mut_ptr().add(at + o), inside, kd);
                    if let Some(kr) = kr.as_deref_mut() {
                        let q = V::vdiv(k, V::loadu(r_padded.as_ptr().add(o)));
                        V::mask_storeu(
                            kr.as_mut_ptr().add(at + o),
                            inside,
                            V::blend(used, zero, q),
                        );
                    }
                }
            }
        }
    }
}

/// The `distance` and `precompute` phases for a word set, with their flops added to `flops`.
pub fn prepare<E: Real>(
    problem: &WmdProblem,
    params: &SinkhornParams,
    words: &WordSet,
    pool: &Pool,
    phases: &mut PhaseTimes,
    flops: &mut f64,
) -> QueryKernels<E> {
    prepare_arrays(problem, params, words, pool, phases, flops, true)
}

/// [`prepare`] without `(K / r)^T` (left empty) for a variant that multiplies by `K` and divides
/// by `r` afterwards; one product fewer per entry.
pub fn prepare_without_kr<E: Real>(
    problem: &WmdProblem,
    params: &SinkhornParams,
    words: &WordSet,
    pool: &Pool,
    phases: &mut PhaseTimes,
    flops: &mut f64,
) -> QueryKernels<E> {
    prepare_arrays(problem, params, words, pool, phases, flops, false)
}

fn prepare_arrays<E: Real>(
    problem: &WmdProblem,
    params: &SinkhornParams,
    words: &WordSet,
    pool: &Pool,
    phases: &mut PhaseTimes,
    flops: &mut f64,
    with_kr: bool,
) -> QueryKernels<E> {
    let vs = problem.query().len();
    let m = phases.time("distance", || {
        crate::distance::query_distances::<E>(problem, &words.words, pool)
    });
    *flops += distance_flops(words.words.len(), vs, problem.dim());
    let kernels = phases.time("precompute", || {
        precompute_arrays(&m, problem.query(), params.lambda, pool, with_kr)
    });
    *flops += precompute_flops(words.words.len(), vs, with_kr);
    kernels
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::distance::tests::random_problem;
    use parbench_common::Par;

    #[test]
    fn precompute_matches_std_exp_and_keeps_padding_zero() {
        let p = random_problem(7, 400, 12, 5);
        let words = WordSet::used(p.docs_by_word());
        let pool = Pool::new(Par::Seq).unwrap();
        let m = crate::distance::query_distances::<f64>(&p, &words.words, &pool);
        let lambda = 3.0;
        let k = precompute(&m, p.query(), lambda, &pool);
        let stride = k.stride;
        for (i, &d) in m.iter().enumerate() {
            let s = i % stride;
            if s >= k.vs {
                assert_eq!((k.kt[i], k.kr[i], k.km[i]), (0.0, 0.0, 0.0));
                continue;
            }
            let e = (-lambda * d).exp();
            assert!((k.kt[i] - e).abs() <= 4.0 * f64::EPSILON * e);
            assert!((k.kr[i] - e / p.query()[s].1).abs() <= 8.0 * f64::EPSILON * k.kr[i]);
            assert!((k.km[i] - e * d).abs() <= 8.0 * f64::EPSILON * k.km[i]);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn f64_rows_in_lanes_equal_the_portable_rows_bit_for_bit() {
        let widths = crate::fast_exp::lanes::Width::available();
        eprintln!(
            "precompute: f64 row kernels {:?}",
            widths.iter().map(|w| w.name()).collect::<Vec<_>>()
        );
        let mut rng = parbench_common::Rng::new(43);
        for (vs, lambda) in [
            (1, 3.0),
            (3, 3.0),
            (4, 10.0),
            (7, 10.0),
            (19, 10.0),
            (19, 200.0),
        ] {
            // Distances up to 5: at lambda 200 past the vector kernel's range, where std's
            // `exp` takes over (subnormals and 0).
            let (m, r, stride) = random_rows::<f64>(&mut rng, vs, 29, |rng, row| {
                for d in row {
                    *d = 5.0 * rng.next_f64();
                }
            });
            let run = |width: Option<crate::fast_exp::lanes::Width>| {
                let arrays = rows_by(&m, &r, lambda, stride, |mut rows| match width {
                    Some(w) => w.run(lanes_f64::Rows(&mut rows)),
                    None => portable_kernel_rows(rows),
                });
                arrays.map(|a| a.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
            };
            let portable = run(None);
            for &width in &widths {
                assert!(
                    run(Some(width)) == portable,
                    "{}: v_s {vs}, lambda {lambda}",
                    width.name()
                );
            }
            for (i, &kt) in portable[0].iter().enumerate() {
                if i % stride >= vs {
                    assert_eq!(kt, 0, "padding, v_s {vs}");
                }
            }
        }
    }

    /// `rows` random rows of distances for a query of `vs` words (`fill` draws each row's
    /// used values), NaN in the padding (which must not leak into any array), and the query's
    /// weights in `[0.01, 1.01)`; with the rows' stride.
    fn random_rows<E: Real>(
        rng: &mut parbench_common::Rng,
        vs: usize,
        rows: usize,
        mut fill: impl FnMut(&mut parbench_common::Rng, &mut [f64]),
    ) -> (Vec<E>, Vec<E>, usize) {
        let stride = padded_stride_of::<E>(vs);
        let mut m = vec![E::from_f64(f64::NAN); rows * stride];
        let mut row = vec![0.0; vs];
        for out in m.chunks_exact_mut(stride) {
            fill(rng, &mut row);
            for (o, &d) in out.iter_mut().zip(&row) {
                *o = E::from_f64(d);
            }
        }
        let r = (0..vs)
            .map(|_| E::from_f64(0.01 + rng.next_f64()))
            .collect();
        (m, r, stride)
    }

    /// `K^T`, `K .* M` and `K / r` of the rows `m` as `kernel` writes them into fresh arrays
    /// (set to -1 first, so that a value left unwritten shows).
    fn rows_by<E: Real>(
        m: &[E],
        r: &[E],
        lambda: f64,
        stride: usize,
        kernel: impl FnOnce(KernelRows<'_, E>),
    ) -> [Vec<E>; 3] {
        let fresh = || vec![-E::ONE; m.len()];
        let (mut kt, mut km, mut kr) = (fresh(), fresh(), fresh());
        kernel(KernelRows {
            m,
            r,
            lambda,
            stride,
            kt: &mut kt,
            km: &mut km,
            kr: Some(&mut kr),
        });
        [kt, km, kr]
    }

    /// Distance in f32 ulps between two finite floats of the same sign.
    pub(crate) fn ulps32(a: f32, b: f32) -> u32 {
        (a.to_bits() as i32 - b.to_bits() as i32).unsigned_abs()
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn f32_rows_on_avx2_match_the_portable_rows() {
        if !crate::simd::has_avx2_fma() {
            eprintln!("precompute: no AVX2 and FMA here, the f32 row kernel is not run");
            return;
        }
        let mut rng = parbench_common::Rng::new(41);
        // Row lengths around the vector width; spreads that keep every entry normal, and one
        // (lambda 40) that pushes a row's far entries to subnormals and 0.
        for (vs, lambda) in [
            (1, 3.0),
            (7, 3.0),
            (8, 10.0),
            (9, 10.0),
            (19, 10.0),
            (19, 40.0),
        ] {
            let (m, r, stride) = random_rows::<f32>(&mut rng, vs, 37, |rng, row| {
                let base = 0.5 + 2.0 * rng.next_f64();
                for d in row {
                    *d = base + 2.5 * rng.next_f64();
                }
            });
            let run = |own: bool| {
                let [kt, km, kr] = rows_by(&m, &r, lambda, stride, |mut rows| {
                    if own {
                        // SAFETY: the CPU has AVX2 and FMA (checked above); `stride` is a
                        // multiple of 8 (f32's padding) and every output is as long as `m`.
                        unsafe { avx2::kernel_rows_f32(&mut rows) };
                    } else {
                        portable_kernel_rows(rows);
                    }
                });
                (kt, km, kr)
            };
            let (kt, km, kr) = run(true);
            let (pkt, pkm, pkr) = run(false);
            let mut largest = 0.0f32;
            let shifts: Vec<f64> = m
                .chunks_exact(stride)
                .map(|row| row[..vs].iter().fold(f32::INFINITY, |a, &b| a.min(b)) as f64)
                .collect();
            for i in 0..m.len() {
                let what = format!("v_s {vs}, lambda {lambda}, entry {i}");
                if i % stride >= vs {
                    assert_eq!((kt[i], km[i], kr[i]), (0.0, 0.0, 0.0), "padding, {what}");
                    continue;
                }
                largest = largest.max(kt[i]);
                // The f32 argument `x = lambda (d - shift)` is rounded twice (about epsilon |x|
                // absolute), which `exp` turns into a relative error of about epsilon |x|; the
                // exponential, the product and the rounding to f32 add a few epsilon more.
                // Subnormal results: the same error, absolute at the smallest normal.
                let x = lambda * (m[i] as f64 - shifts[i / stride]);
                let tol = (4.0 + 2.0 * x) * f32::EPSILON as f64;
                for (a, b, name) in [
                    (kt[i], pkt[i], "K"),
                    (km[i], pkm[i], "K.*M"),
                    (kr[i], pkr[i], "K/r"),
                ] {
                    let scale = (b as f64).max(f32::MIN_POSITIVE as f64);
                    assert!(
                        ((a - b) as f64).abs() <= tol * scale,
                        "{name}: {a:e} against {b:e} ({} ulps, argument {x}), {what}",
                        ulps32(a, b)
                    );
                }
            }
            // Each row's largest entry is exactly 1, so the largest of all is too.
            assert_eq!(largest, 1.0, "v_s {vs}, lambda {lambda}");
        }
    }
}
