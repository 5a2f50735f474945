//! The query's distance matrix `M`: the Euclidean distances between the query words and the
//! selected vocabulary words, word-major (see [`crate::row_kernel`] for the layout).
//!
//! Cost for `n_w` selected words and embedding dimension `d`: `2 n_w v_s d` flops plus `2 n_w d`
//! for the norms. With AVX-512 or AVX2 an in-place microkernel ([`crate::distance_simd`]) reads
//! each embedding row once (91 MB at the paper's shape) instead of gathering the rows and letting
//! a GEMM pack them again (three passes); at the paper's shape it runs at ~100 GFLOP/s on 2
//! threads with AVX-512 (bandwidth-bound), ~60 on one. Elsewhere, one GEMM per block of words.

use crate::buffer::ZeroedBuf;
use crate::pool::Pool;
use crate::problem::WmdProblem;
use crate::real::{padded_stride_of, Real};
use crate::row_kernel::LANES;
use rayon::prelude::*;

/// Words per task of the distance computation: 256 embeddings of d = 300 are 600 KB, so a
/// gathered block stays in L2 while the GEMM reads it.
pub(crate) const DISTANCE_TILE: usize = 256;

/// The query side of a distance computation, made once and used for every tile of words: the
/// query words' embeddings, their squared norms, packed into panels where the AVX-512 kernel runs.
/// A batch of queries makes one for the union of its queries' words.
pub enum QuerySide<E> {
    /// The in-place microkernel's panels ([`crate::distance_simd`]).
    #[cfg(target_arch = "x86_64")]
    Packed(crate::distance_simd::QueryPack<E>),
    /// One GEMM per tile of words.
    Gemm {
        /// `v_s x d` row-major.
        vecs: Vec<E>,
        /// Their squared norms.
        norms: Vec<E>,
    },
}

impl<E: Real> QuerySide<E> {
    /// Query words (columns of the distance matrix).
    pub fn words(&self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            QuerySide::Packed(pack) => pack.vs(),
            QuerySide::Gemm { norms, .. } => norms.len(),
        }
    }

    /// The GEMM side of `query_words`, whatever the CPU (the portable path, and its tests).
    pub fn gemm(problem: &WmdProblem, query_words: &[u32]) -> QuerySide<E> {
        let (mut vecs, norms) = query_vectors::<E>(problem, query_words);
        // gemm's one-column case is a matrix-vector product that sums in another order than
        // its microkernels (whose columns do not depend on each other): a one-word query alone
        // would differ in rounding from the same word as a column of a batch's union. A zero
        // second column keeps every query on the microkernels; `gemm_tile` clears its output.
        if norms.len() == 1 {
            vecs.resize(2 * problem.dim(), E::ZERO);
        }
        QuerySide::Gemm { vecs, norms }
    }

    /// The distances of `words` to the query words into `out` (`words.len()` rows of `stride`;
    /// the first `words()` values of each row are written), sequentially. `gathered` is scratch
    /// reused across the tiles one thread runs: a fresh 600 KB buffer per tile would be a fresh
    /// mmap, and its page faults cost as much as the copy.
    pub fn tile(
        &self,
        problem: &WmdProblem,
        words: &[u32],
        stride: usize,
        out: &mut [E],
        gathered: &mut Vec<E>,
    ) {
        let vecs = E::embeddings(problem);
        match self {
            #[cfg(target_arch = "x86_64")]
            QuerySide::Packed(pack) => E::packed_distances(pack, vecs, words, stride, out),
            QuerySide::Gemm {
                vecs: query_vecs,
                norms,
            } => gemm_tile(
                vecs,
                problem.dim(),
                query_vecs,
                norms,
                words,
                stride,
                out,
                gathered,
            ),
        }
    }
}

/// Distances between the query words and `words`, as an `words.len() x stride` word-major matrix
/// (padding 0), `stride` the query's padded to `E`'s lanes. With AVX-512 or AVX2 the in-place
/// microkernel of [`crate::distance_simd`] reads each embedding row once; elsewhere a GEMM per
/// tile of [`DISTANCE_TILE`] words (gathered first when not consecutive). Tiles are spread over
/// the pool's threads.
pub fn query_distances<E: Real>(problem: &WmdProblem, words: &[u32], pool: &Pool) -> ZeroedBuf<E> {
    let query_words: Vec<u32> = problem.query().iter().map(|&(w, _)| w).collect();
    distances_with(problem, &E::query_side(problem, &query_words), words, pool)
}

/// [`query_distances`] from a given query side.
pub fn distances_with<E: Real>(
    problem: &WmdProblem,
    side: &QuerySide<E>,
    words: &[u32],
    pool: &Pool,
) -> ZeroedBuf<E> {
    let stride = padded_stride_of::<E>(side.words());
    let mut out = ZeroedBuf::zeroed(words.len() * stride);
    let tiles = words
        .chunks(DISTANCE_TILE)
        .zip(out.chunks_mut(DISTANCE_TILE * stride));
    let task = |gathered: &mut Vec<E>, (words, out): (&[u32], &mut [E])| {
        side.tile(problem, words, stride, out, gathered)
    };
    if pool.threads() > 1 && words.len() > DISTANCE_TILE {
        let tiles: Vec<_> = tiles.collect();
        pool.run(|| tiles.into_par_iter().for_each_init(Vec::new, task));
    } else {
        let mut gathered = Vec::new();
        tiles.for_each(|t| task(&mut gathered, t));
    }
    out
}

/// The embeddings of `query_words` (`v_s x d` row-major) and their squared norms.
fn query_vectors<E: Real>(problem: &WmdProblem, query_words: &[u32]) -> (Vec<E>, Vec<E>) {
    let d = problem.dim();
    let vecs = E::embeddings(problem);
    let query_vecs: Vec<E> = query_words
        .iter()
        .flat_map(|&w| vecs[w as usize * d..(w as usize + 1) * d].iter().copied())
        .collect();
    let query_norms: Vec<E> = query_vecs.chunks_exact(d).map(squared_norm).collect();
    (query_vecs, query_norms)
}

/// The side [`Real::query_side`] makes: the microkernel's panels where the CPU has AVX-512F or
/// AVX2 with FMA, else GEMM.
#[cfg(target_arch = "x86_64")]
pub(crate) fn native_side<E: Real>(problem: &WmdProblem, query_words: &[u32]) -> QuerySide<E> {
    let (vecs, norms) = query_vectors::<E>(problem, query_words);
    match crate::distance_simd::QueryPack::for_this_cpu(vecs, &norms, problem.dim()) {
        Ok(pack) => QuerySide::Packed(pack),
        Err(_) => QuerySide::gemm(problem, query_words),
    }
}

/// The side [`Real::query_side`] makes: GEMM.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn native_side<E: Real>(problem: &WmdProblem, query_words: &[u32]) -> QuerySide<E> {
    QuerySide::gemm(problem, query_words)
}

/// One tile of [`QuerySide::Gemm`]: one GEMM of the tile's embeddings (in place when the words
/// are consecutive) against the query block, then the norms and the square root, with the
/// cancellation fallback to a direct sum.
#[allow(clippy::too_many_arguments)]
fn gemm_tile<E: Real>(
    vecs: &[E],
    d: usize,
    query_vecs: &[E],
    query_norms: &[E],
    words: &[u32],
    stride: usize,
    out: &mut [E],
    gathered: &mut Vec<E>,
) {
    let vs = query_norms.len();
    // The GEMM's columns: `vs`, or 2 for a one-word query (see `QuerySide::gemm`).
    let columns = query_vecs.len() / d.max(1);
    let m = words.len();
    if m == 0 {
        return;
    }
    let cancellation = E::from_f64(E::CANCELLATION_RATIO);
    let first = words[0] as usize;
    let contiguous = words[m - 1] as usize - first + 1 == m;
    let lhs: &[E] = if contiguous {
        &vecs[first * d..(first + m) * d]
    } else {
        gathered.clear();
        for &w in words {
            gathered.extend_from_slice(&vecs[w as usize * d..(w as usize + 1) * d]);
        }
        gathered
    };
    assert!(columns >= vs && stride >= columns && out.len() >= m * stride);
    assert_eq!(query_vecs.len(), columns * d);
    // SAFETY: dst is `m x columns` inside `out` (m rows of `stride >= columns`, asserted), lhs
    // is `m x d` row-major, rhs is `d x columns` read from the `columns x d` row-major query
    // block; all pointers are valid for the extents gemm reads and writes, and `out` is
    // exclusively borrowed.
    unsafe {
        gemm::gemm(
            m,
            columns,
            d,
            out.as_mut_ptr(),
            1,
            stride as isize,
            false,
            lhs.as_ptr(),
            1,
            d as isize,
            query_vecs.as_ptr(),
            d as isize,
            1,
            E::ZERO,
            -(E::ONE + E::ONE),
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
    for (row, a) in out.chunks_exact_mut(stride).zip(lhs.chunks_exact(d)) {
        let na = squared_norm(a);
        for s in 0..vs {
            let scale = na + query_norms[s];
            let d2 = scale + row[s];
            row[s] = if d2 <= cancellation * scale {
                direct_distance(a, &query_vecs[s * d..(s + 1) * d])
            } else {
                d2.sqrt()
            };
        }
        row[vs..columns].fill(E::ZERO);
    }
}

/// `|a|^2` with four independent partial sums (vectorizable, unlike a single running sum).
fn squared_norm<E: Real>(a: &[E]) -> E {
    let mut acc = [E::ZERO; LANES];
    let chunks = a.chunks_exact(LANES);
    let mut tail = E::ZERO;
    for &x in chunks.remainder() {
        tail += x * x;
    }
    for c in chunks {
        for l in 0..LANES {
            acc[l] += c[l] * c[l];
        }
    }
    (acc[0] + acc[2]) + (acc[1] + acc[3]) + tail
}

/// `||a - b||` summed term by term (no cancellation): exactly 0 for identical vectors.
pub fn direct_distance<E: Real>(a: &[E], b: &[E]) -> E {
    let mut sum = E::ZERO;
    for (&x, &y) in a.iter().zip(b) {
        sum += (x - y) * (x - y);
    }
    sum.sqrt()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::precompute::WordSet;
    use parbench_common::Rng;
    use parbench_common::{Csr, Par};

    /// A problem over `vocab` random words of dimension `dim` with a `vs`-word query (words
    /// `0, 3, 6, ...`) and one document per word, so every word is used; word `vocab - 1` is a
    /// copy of query word 0 (distance exactly 0 by the cancellation fallback).
    pub(crate) fn random_problem(seed: u64, vocab: usize, dim: usize, vs: usize) -> WmdProblem {
        let mut rng = Rng::new(seed);
        let mut vecs: Vec<f64> = (0..vocab * dim).map(|_| rng.normal()).collect();
        let copy = vecs[..dim].to_vec();
        vecs[(vocab - 1) * dim..].copy_from_slice(&copy);
        let query: Vec<(u32, f64)> = (0..vs).map(|s| (3 * s as u32, 1.0 / vs as f64)).collect();
        let triplets: Vec<(usize, usize, f64)> = (0..vocab).map(|w| (w, w, 1.0)).collect();
        let c = Csr::from_triplets(vocab, vocab, &triplets).unwrap();
        WmdProblem::new(vecs, dim, query, c).unwrap()
    }

    fn query_words(p: &WmdProblem) -> Vec<u32> {
        p.query().iter().map(|&(w, _)| w).collect()
    }

    #[test]
    fn f32_distances_agree_with_f64_to_f32_precision() {
        for (vs, dim, vocab) in [(1, 5, 9), (19, 300, 301), (30, 37, 90)] {
            let p = random_problem(vs as u64, vocab, dim, vs);
            let stride = crate::real::padded_stride_of::<f32>(vs);
            let words = WordSet::used(p.docs_by_word()).words;
            for threads in [1, 2] {
                let pool = Pool::new(Par::threads(threads)).unwrap();
                // The dispatched path (the AVX-512 kernel where the host has it) and the GEMM.
                let fast = query_distances::<f32>(&p, &words, &pool);
                let gemm = distances_with(
                    &p,
                    &QuerySide::<f32>::gemm(&p, &query_words(&p)),
                    &words,
                    &pool,
                );
                for (k, &w) in words.iter().enumerate() {
                    for s in 0..stride {
                        let (got, other) = (fast[k * stride + s], gemm[k * stride + s]);
                        assert!((got - other).abs() <= 1e-5 * got.abs(), "{got} vs {other}");
                        if s >= vs {
                            assert_eq!(got, 0.0, "padding");
                            continue;
                        }
                        let q = p.query()[s].0 as usize;
                        let exact = direct_distance(p.vec(w as usize), p.vec(q));
                        if exact == 0.0 {
                            assert_eq!(got, 0.0, "word {w} = query word {q}");
                        }
                        // Rounding the inputs alone moves a distance by ~1e-7 relative.
                        let err = (got as f64 - exact).abs();
                        assert!(err <= 1e-5 * exact, "{got} vs {exact}");
                    }
                }
            }
        }
    }

    #[test]
    fn distance_kernels_agree_with_direct_distances() {
        // Strides below, at and above one 24-column panel; dimensions not multiples of 8; word
        // counts that leave short blocks; both sequential and threaded.
        for (vs, dim, vocab) in [(1, 5, 9), (19, 37, 301), (24, 16, 77), (30, 300, 90)] {
            let p = random_problem(vs as u64, vocab, dim, vs);
            let stride = crate::row_kernel::padded_stride(vs);
            let used = WordSet::used(p.docs_by_word());
            let scattered: Vec<u32> = used.words.iter().copied().filter(|w| w % 4 != 1).collect();
            for threads in [1, 2] {
                let pool = Pool::new(Par::threads(threads)).unwrap();
                for words in [&used.words, &scattered] {
                    let fast = query_distances::<f64>(&p, words, &pool);
                    let side = QuerySide::<f64>::gemm(&p, &query_words(&p));
                    let gemm = distances_with(&p, &side, words, &pool);
                    assert_direct(&p, words, &fast, stride, 1e-12);
                    assert_direct(&p, words, &gemm, stride, 1e-12);
                }
            }
        }
    }

    /// `got` (`words.len()` rows of `stride`, distances in `E`) against the direct distances to
    /// `p`'s query words, to `rel_tol`: exactly 0 where the words are equal, and 0 in the padding.
    fn assert_direct<E: Real>(
        p: &WmdProblem,
        words: &[u32],
        got: &[E],
        stride: usize,
        rel_tol: f64,
    ) {
        let vs = p.query().len();
        for (k, &w) in words.iter().enumerate() {
            let row = &got[k * stride..(k + 1) * stride];
            for (s, &(q, _)) in p.query().iter().enumerate() {
                let (got, exact) = (
                    row[s].to_f64(),
                    direct_distance(p.vec(w as usize), p.vec(q as usize)),
                );
                if exact == 0.0 {
                    assert_eq!(got, 0.0, "word {w} = query word {q}");
                }
                assert!(
                    (got - exact).abs() <= rel_tol * exact,
                    "vs {vs}: {got} vs {exact}"
                );
            }
            assert!(row[vs..].iter().all(|&x| x == E::ZERO), "padding");
        }
    }

    /// Every query width from 1 to 49 words: on an AVX-512 host each of the kernel's panel
    /// shapes (one to three vectors, the last a full vector or a half one) meets its own widths,
    /// and every one must give the direct distances, in both precisions.
    #[test]
    fn every_query_width_agrees_with_direct_distances() {
        let pool = Pool::new(Par::Seq).unwrap();
        for vs in 1..=49 {
            let p = random_problem(100 + vs as u64, 3 * vs + 11, 37, vs);
            let words = WordSet::used(p.docs_by_word()).words;
            let f64s = query_distances::<f64>(&p, &words, &pool);
            assert_direct(&p, &words, &f64s, padded_stride_of::<f64>(vs), 1e-12);
            let f32s = query_distances::<f32>(&p, &words, &pool);
            assert_direct(&p, &words, &f32s, padded_stride_of::<f32>(vs), 1e-5);
        }
    }

    /// A batch computes one distance pass against the union of its queries' words and takes
    /// each query's columns from it, which must be the query's own distances bit for bit.
    fn a_column_does_not_depend_on_the_others<E: Real>() {
        let p = random_problem(5, 400, 37, 3);
        let words = WordSet::used(p.docs_by_word()).words;
        let pool = Pool::new(Par::Seq).unwrap();
        let union = [0, 3, 6, 7, 11];
        for side_of in [QuerySide::<E>::gemm, E::query_side] {
            let all = distances_with(&p, &side_of(&p, &union), &words, &pool);
            let all_stride = padded_stride_of::<E>(union.len());
            for (column, &w) in union.iter().enumerate() {
                let alone = distances_with(&p, &side_of(&p, &[w]), &words, &pool);
                let stride = padded_stride_of::<E>(1);
                for k in 0..words.len() {
                    assert_eq!(
                        alone[k * stride].to_f64().to_bits(),
                        all[k * all_stride + column].to_f64().to_bits(),
                        "word {} to query word {w}",
                        words[k]
                    );
                    assert!(alone[k * stride + 1..(k + 1) * stride]
                        .iter()
                        .all(|&x| x == E::ZERO));
                }
            }
        }
    }

    #[test]
    fn a_query_words_distances_do_not_depend_on_the_other_query_words() {
        a_column_does_not_depend_on_the_others::<f64>();
        a_column_does_not_depend_on_the_others::<f32>();
    }
}
