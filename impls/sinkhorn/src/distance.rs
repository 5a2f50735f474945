//! The query's distance matrix `M`: the Euclidean distances between the query words and the
//! selected vocabulary words, word-major (see [`crate::row_kernel`] for the layout).
//!
//! Cost for `n_w` selected words and embedding dimension `d`: `2 n_w v_s d` flops plus `2 n_w d`
//! for the norms. With AVX-512 an in-place microkernel ([`crate::distance_avx512`]) reads each
//! embedding row once (91 MB at the paper's shape) instead of gathering the rows and letting a
//! GEMM pack them again (three passes); at the paper's shape it runs at ~100 GFLOP/s on 2 threads
//! (bandwidth-bound), ~60 on one. Elsewhere, one GEMM per block of words.

use crate::buffer::ZeroedBuf;
use crate::pool::Pool;
use crate::problem::WmdProblem;
use crate::real::{padded_stride_of, Real};
use crate::row_kernel::LANES;
use rayon::prelude::*;

/// Words per GEMM block of the distance computation: 256 embeddings of d = 300 are 600 KB, so a
/// gathered block stays in L2 while the GEMM reads it.
const DISTANCE_BLOCK: usize = 256;

/// Words per parallel task of the distance computation.
const DISTANCE_TASK_WORDS: usize = 256;

/// Distances between the query words and `words`, as an `words.len() x stride` word-major matrix
/// (padding 0). With AVX-512 the in-place microkernel of [`crate::distance_avx512`] reads each
/// embedding row once; elsewhere a GEMM per block of [`DISTANCE_BLOCK`] words (gathered first when
/// not consecutive). Tasks of words are spread over the pool's threads.
pub fn query_distances(problem: &WmdProblem, words: &[u32], pool: &Pool) -> ZeroedBuf {
    #[cfg(target_arch = "x86_64")]
    if crate::distance_avx512::available() {
        return query_distances_avx512::<f64>(problem, words, pool);
    }
    query_distances_gemm(problem, words, pool)
}

/// The query's embeddings (`v_s x d` row-major) and their squared norms.
fn query_vectors<E: Real>(problem: &WmdProblem) -> (Vec<E>, Vec<E>) {
    let d = problem.dim();
    let vecs = E::embeddings(problem);
    let query_vecs: Vec<E> = problem
        .query()
        .iter()
        .flat_map(|&(w, _)| vecs[w as usize * d..(w as usize + 1) * d].iter().copied())
        .collect();
    let query_norms: Vec<E> = query_vecs.chunks_exact(d).map(squared_norm).collect();
    (query_vecs, query_norms)
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn query_distances_avx512<E: crate::distance_avx512::Avx512Real>(
    problem: &WmdProblem,
    words: &[u32],
    pool: &Pool,
) -> ZeroedBuf<E> {
    use crate::distance_avx512::{distances, QueryPack};
    let stride = padded_stride_of::<E>(problem.query().len());
    let (query_vecs, query_norms) = query_vectors::<E>(problem);
    let pack = QueryPack::new(&query_vecs, &query_norms, problem.dim());
    let vecs = E::embeddings(problem);
    let mut out = ZeroedBuf::zeroed(words.len() * stride);
    let task = |(words, out): (&[u32], &mut [E])| {
        // SAFETY: `available()` said the CPU has AVX-512F (checked by the caller); the target
        // feature does not cross into rayon's closure, hence the call in each task.
        unsafe { distances(&pack, vecs, words, stride, out) }
    };
    let tasks = words
        .chunks(DISTANCE_TASK_WORDS)
        .zip(out.chunks_mut(DISTANCE_TASK_WORDS * stride));
    if pool.threads() > 1 && words.len() > DISTANCE_TASK_WORDS {
        let tasks: Vec<_> = tasks.collect();
        pool.run(|| tasks.into_par_iter().for_each(task));
    } else {
        tasks.for_each(task);
    }
    out
}

/// The portable path of [`query_distances`], and the f32 one: one GEMM per block of words, in
/// `E` from the problem's embeddings in `E`, rows padded to `E`'s lanes.
pub(crate) fn query_distances_gemm<E: Real>(
    problem: &WmdProblem,
    words: &[u32],
    pool: &Pool,
) -> ZeroedBuf<E> {
    let d = problem.dim();
    let vs = problem.query().len();
    let stride = padded_stride_of::<E>(vs);
    let vecs = E::embeddings(problem);
    let (query_vecs, query_norms) = query_vectors::<E>(problem);
    let cancellation = E::from_f64(E::CANCELLATION_RATIO);
    let mut out = ZeroedBuf::zeroed(words.len() * stride);

    // `gathered` is reused across the blocks one thread runs: a fresh 600 KB buffer per block
    // would be a fresh mmap, and its page faults cost as much as the copy.
    let block = |gathered: &mut Vec<E>, (words, out): (&[u32], &mut [E])| {
        let m = words.len();
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
        // SAFETY: dst is `m x vs` inside `out` (m rows of `stride >= vs`), lhs is `m x d`
        // row-major, rhs is `d x vs` read from the `vs x d` row-major query block; all pointers
        // are valid for the extents gemm reads and writes, and `out` is exclusively borrowed.
        unsafe {
            gemm::gemm(
                m,
                vs,
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
        }
    };
    let blocks = words
        .chunks(DISTANCE_BLOCK)
        .zip(out.chunks_mut(DISTANCE_BLOCK * stride));
    if pool.threads() > 1 && words.len() > DISTANCE_BLOCK {
        let blocks: Vec<_> = blocks.collect();
        pool.run(|| blocks.into_par_iter().for_each_init(Vec::new, block));
    } else {
        let mut gathered = Vec::new();
        blocks.for_each(|b| block(&mut gathered, b));
    }
    out
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

    #[test]
    fn f32_distances_agree_with_f64_to_f32_precision() {
        for (vs, dim, vocab) in [(1, 5, 9), (19, 300, 301), (30, 37, 90)] {
            let p = random_problem(vs as u64, vocab, dim, vs);
            let stride = crate::real::padded_stride_of::<f32>(vs);
            let words = WordSet::used(p.docs_by_word()).words;
            for threads in [1, 2] {
                let pool = Pool::new(Par::threads(threads)).unwrap();
                // The dispatched path (the AVX-512 kernel where the host has it) and the GEMM.
                let fast = <f32 as Real>::distances(&p, &words, &pool);
                let gemm = query_distances_gemm::<f32>(&p, &words, &pool);
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
                    let fast = query_distances(&p, words, &pool);
                    let gemm = query_distances_gemm(&p, words, &pool);
                    for (k, &w) in words.iter().enumerate() {
                        for s in 0..stride {
                            let (f, g) = (fast[k * stride + s], gemm[k * stride + s]);
                            if s >= vs {
                                assert_eq!((f, g), (0.0, 0.0), "padding");
                                continue;
                            }
                            let q = p.query()[s].0 as usize;
                            let exact = direct_distance(p.vec(w as usize), p.vec(q));
                            if exact == 0.0 {
                                assert_eq!((f, g), (0.0, 0.0), "word {w} = query word {q}");
                            }
                            assert!((f - exact).abs() <= 1e-12 * exact, "{f} vs {exact}");
                            assert!((g - exact).abs() <= 1e-12 * exact, "{g} vs {exact}");
                        }
                    }
                }
            }
        }
    }
}
