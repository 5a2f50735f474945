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
    let work = |(((m, kt), km), kr): Rows<E>| kernel_rows(m, &r, lambda, stride, kt, km, kr);
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

/// Rows of `K^T`, `(K .* M)^T` and, when given, `(K / r)^T` from the same rows of the
/// word-major distances `m` (rows of `stride`, the query's weights `r`), padding included, so a
/// reused buffer needs no clearing. A chunk's exponentials are taken at once (vectorized,
/// padding included), then the products row by row while the chunk is still in L2.
pub(crate) fn kernel_rows<E: Real>(
    m: &[E],
    r: &[E],
    lambda: f64,
    stride: usize,
    kt: &mut [E],
    km: &mut [E],
    mut kr: Option<&mut [E]>,
) {
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
mod tests {
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
}
