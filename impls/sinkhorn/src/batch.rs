//! A batch of queries against one collection of documents and embeddings, solved document-major
//! (`doc-major`, `doc-major-f32`) with the work the queries can share done once.
//!
//! Shared by the whole batch: the thread pool, the words some document holds, their rows in the
//! kernel arrays, and the documents each thread owns ([`Collection`]). Shared by a group of
//! queries (as many as fit in [`GROUP_BYTES`] of kernel arrays): the distance phase. One query's
//! distance phase reads the embedding of every word some document holds (91 MB at the paper's
//! shape, f64) to compute `v_s` distances from each; a group computes the distances to the union
//! of its queries' words in that one pass, tile by tile, and while a tile's distances are in
//! cache every query of the group takes its columns and turns them into its rows of `K^T` and
//! `(K .* M)^T` (the loop divides by `r` itself). A word that several queries hold is computed once. The kernel
//! arrays of one group go back to the process's spare buffers ([`crate::buffer`], sized to hold
//! a whole group) and the next group's are cut from them (no fresh pages to fault in).
//!
//! Each query's distances are those its own solve gives: the distance kernels compute each
//! (word, query word) pair by the same sequence of operations whatever other query words share the
//! pass, and the kernel rows and the loop are the single solve's own functions.

use crate::distance::DISTANCE_TILE;
use crate::doc_major::{solve_loop, Collection};
use crate::flops::{distance_flops, precompute_flops};
use crate::pool::Pool;
use crate::precompute::{kernel_rows, KernelRows, QueryKernels};
use crate::problem::{
    checked_query, Control, PhaseTimes, SinkhornParams, WmdError, WmdOutput, WmdProblem,
};
use crate::real::{padded_stride_of, Real};
use parbench_common::Par;
use rayon::prelude::*;
use std::time::Instant;

/// The kernel arrays one group of queries may hold at once: 256 MB is five queries at the
/// paper's shape in f64 (three 16 MB arrays each), ten in f32.
pub const GROUP_BYTES: usize = 256 << 20;

/// Most queries in one group, however small their arrays: past this the union's distance tile
/// outgrows L2 and the pass stops gaining.
pub const MAX_GROUP: usize = 16;

/// The document-major solve of every query of `queries` against `problem`'s documents and
/// embeddings (the problem's own query plays no part), in order, each output as the query's own
/// solve gives it. Every query is checked as [`WmdProblem::set_query`] checks one before any work
/// starts. Phases per query: `kernels` (its share of its group's distance and kernel pass), then
/// `loop` and `final` as in a single solve.
pub fn solve_batch<E: Real>(
    problem: &WmdProblem,
    queries: &[Vec<(u32, f64)>],
    params: &SinkhornParams,
    par: Par,
) -> Result<Vec<WmdOutput>, WmdError> {
    params.validate()?;
    let queries = checked_batch(queries, problem.vocab())?;
    let pool = Pool::new(par)?;
    let collection = Collection::new(problem, &pool);
    let rows = collection.words.words.len();
    // `K^T` and `(K .* M)^T`.
    let array_bytes = |q: &[(u32, f64)]| 2 * rows * padded_stride_of::<E>(q.len()) * E::BYTES;
    let mut outputs = Vec::with_capacity(queries.len());
    let mut start = 0;
    while start < queries.len() {
        let mut end = start + 1;
        let mut bytes = array_bytes(&queries[start]);
        while end < queries.len()
            && end - start < MAX_GROUP
            && bytes + array_bytes(&queries[end]) <= GROUP_BYTES
        {
            bytes += array_bytes(&queries[end]);
            end += 1;
        }
        let group = &queries[start..end];
        let started = Instant::now();
        let (kernels, union) =
            group_kernels::<E>(problem, &collection, group, params.lambda, &pool);
        let share = started.elapsed().as_secs_f64() / group.len() as f64;
        // The distances were computed once per word of the union: each query is charged its
        // share of them, so the batch's flops are the work it did.
        let distance_share = distance_flops(rows, union, problem.dim()) / group.len() as f64;
        for (query, k) in group.iter().zip(&kernels) {
            let mut phases = PhaseTimes::default();
            phases.add("kernels", share);
            let flops = distance_share + precompute_flops(rows, query.len(), false);
            outputs.push(solve_loop(
                problem,
                &collection,
                k,
                params,
                &pool,
                (phases, flops),
                &mut |_| Control::Continue,
            )?);
        }
        start = end;
    }
    Ok(outputs)
}

/// Every query of a batch checked as [`WmdProblem::set_query`] checks one (and sorted by word),
/// or the first that is not valid, with its position.
pub(crate) fn checked_batch(
    queries: &[Vec<(u32, f64)>],
    vocab: usize,
) -> Result<Vec<Vec<(u32, f64)>>, WmdError> {
    queries
        .iter()
        .enumerate()
        .map(|(index, q)| {
            checked_query(q.clone(), vocab).map_err(|e| WmdError::BatchQuery {
                index,
                source: Box::new(e),
            })
        })
        .collect()
}

/// One tile's rows of one query's `K^T` and `(K .* M)^T`.
type TileRows<'a, E> = (&'a mut [E], &'a mut [E]);

/// Per-thread scratch of the group pass.
#[derive(Default)]
struct TileScratch<E> {
    /// The tile's distances to the union of the group's words.
    union: Vec<E>,
    /// One query's columns of them.
    query: Vec<E>,
    /// Embeddings gathered for the GEMM path.
    gathered: Vec<E>,
}

/// The kernel arrays of every query of `group`, from one distance pass over the collection's
/// words against the union of the group's query words, and the size of that union.
fn group_kernels<E: Real>(
    problem: &WmdProblem,
    collection: &Collection,
    group: &[Vec<(u32, f64)>],
    lambda: f64,
    pool: &Pool,
) -> (Vec<QueryKernels<E>>, usize) {
    let words = &collection.words.words;
    let mut union: Vec<u32> = group.iter().flatten().map(|&(w, _)| w).collect();
    union.sort_unstable();
    union.dedup();
    // Each query's words as columns of the union (its words are in it by construction).
    let columns: Vec<Vec<usize>> = group
        .iter()
        .map(|q| {
            q.iter()
                .map(|&(w, _)| union.partition_point(|&u| u < w))
                .collect()
        })
        .collect();
    let weights: Vec<Vec<E>> = group
        .iter()
        .map(|q| q.iter().map(|&(_, r)| E::from_f64(r)).collect())
        .collect();
    let side = E::query_side(problem, &union);
    let union_stride = padded_stride_of::<E>(union.len());
    let mut kernels: Vec<QueryKernels<E>> = group
        .iter()
        .map(|q| QueryKernels::for_rows(q, words.len(), false))
        .collect();

    // Every tile's rows of every query's arrays, tile by tile.
    let tiles = words.len().div_ceil(DISTANCE_TILE);
    let mut by_tile: Vec<Vec<TileRows<E>>> = (0..tiles).map(|_| Vec::new()).collect();
    for k in kernels.iter_mut() {
        let chunk = DISTANCE_TILE * k.stride;
        let QueryKernels { kt, km, .. } = k;
        let rows = kt.chunks_mut(chunk).zip(km.chunks_mut(chunk));
        for (tile, (kt, km)) in by_tile.iter_mut().zip(rows) {
            tile.push((kt, km));
        }
    }
    let task = |scratch: &mut TileScratch<E>, (t, rows): (usize, Vec<TileRows<E>>)| {
        let tile_words = &words[t * DISTANCE_TILE..((t + 1) * DISTANCE_TILE).min(words.len())];
        scratch
            .union
            .resize(tile_words.len() * union_stride, E::ZERO);
        side.tile(
            problem,
            tile_words,
            union_stride,
            &mut scratch.union,
            &mut scratch.gathered,
        );
        for ((kt, km), (cols, r)) in rows.into_iter().zip(columns.iter().zip(&weights)) {
            let stride = padded_stride_of::<E>(cols.len());
            scratch.query.clear();
            scratch.query.resize(tile_words.len() * stride, E::ZERO);
            for (row, all) in scratch
                .query
                .chunks_exact_mut(stride)
                .zip(scratch.union.chunks_exact(union_stride))
            {
                for (m, &c) in row.iter_mut().zip(cols) {
                    *m = all[c];
                }
            }
            kernel_rows(KernelRows {
                m: &scratch.query,
                r,
                lambda,
                stride,
                kt,
                km,
                kr: None,
            });
        }
    };
    let tasks = by_tile.into_iter().enumerate();
    if pool.threads() > 1 && tiles > 1 {
        let tasks: Vec<_> = tasks.collect();
        pool.run(|| {
            tasks
                .into_par_iter()
                .for_each_init(TileScratch::default, task)
        });
    } else {
        let mut scratch = TileScratch::default();
        tasks.for_each(|t| task(&mut scratch, t));
    }
    (kernels, union.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{generate as synthetic_problem, SyntheticSpec};
    use crate::precompute::WordSet;
    use crate::{DocMajorFused, DocMajorFusedF32, WmdSolver};

    /// Queries of `vs` words drawn from the first `span` words (so they share many), weights
    /// uneven and normalized.
    fn queries(count: usize, vs: usize, span: u32, seed: u64) -> Vec<Vec<(u32, f64)>> {
        let mut rng = parbench_common::Rng::new(seed);
        (0..count)
            .map(|_| {
                let mut words: Vec<u32> = Vec::new();
                while words.len() < vs {
                    let w = rng.below(span as u64) as u32;
                    if !words.contains(&w) {
                        words.push(w);
                    }
                }
                let raw: Vec<f64> = words.iter().map(|_| 0.5 + rng.next_f64()).collect();
                let sum: f64 = raw.iter().sum();
                words.into_iter().zip(raw.iter().map(|x| x / sum)).collect()
            })
            .collect()
    }

    fn check<S: WmdSolver>(solver: S, threads: usize) {
        let spec = SyntheticSpec {
            vocab: 3000,
            dim: 40,
            docs: 300,
            words_per_doc: 20,
            query_words: 7,
            zipf_exponent: 1.0,
            seed: 11,
        };
        let mut problem = synthetic_problem(&spec).unwrap();
        let params = SinkhornParams {
            lambda: 1.0,
            max_iter: 6,
            tol: None,
        };
        // Sizes below, at and above a lane multiple; many shared words.
        let mut batch = queries(5, 7, 60, 3);
        batch.extend(queries(4, 16, 40, 4));
        batch.push(vec![(2999, 1.0)]);
        let par = Par::threads(threads);
        let got = solver
            .solve_batch(&mut problem, &batch, &params, par)
            .unwrap();
        let default = single_queries(&solver, &mut problem, &batch, &params, par);
        assert_eq!(got.len(), batch.len());
        // One group; its queries share words, so the batch computed fewer distances: each
        // query's own flops less its distances, plus a share of the union's.
        let flops = |o: &[WmdOutput]| o.iter().map(|o| o.flops).sum::<f64>();
        let (rows, dim) = (WordSet::used(problem.docs_by_word()).words.len(), spec.dim);
        let mut union: Vec<u32> = batch.iter().flatten().map(|&(w, _)| w).collect();
        union.sort_unstable();
        union.dedup();
        let own: f64 = batch
            .iter()
            .map(|q| distance_flops(rows, q.len(), dim))
            .sum();
        assert!(union.len() < batch.iter().map(Vec::len).sum::<usize>());
        let want = flops(&default) - own + distance_flops(rows, union.len(), dim);
        assert!(
            (flops(&got) - want).abs() <= 1e-9 * want,
            "{} vs {want}",
            flops(&got)
        );
        for (q, (g, d)) in got.iter().zip(&default).enumerate() {
            assert_eq!(g.iterations, d.iterations);
            for (j, (a, b)) in g.distances.iter().zip(&d.distances).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-12 * b.abs(),
                    "{} query {q} doc {j}: batch {a} vs alone {b}",
                    solver.name()
                );
            }
        }
    }

    /// Each query solved alone, as the trait's default batch does.
    fn single_queries<S: WmdSolver>(
        solver: &S,
        problem: &mut WmdProblem,
        batch: &[Vec<(u32, f64)>],
        params: &SinkhornParams,
        par: Par,
    ) -> Vec<WmdOutput> {
        batch
            .iter()
            .map(|q| {
                problem.set_query(q.clone()).unwrap();
                solver
                    .solve(problem, params, par, &mut |_| Control::Continue)
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn a_batch_gives_each_query_its_own_solve() {
        for threads in [1, 2] {
            check(DocMajorFused::default(), threads);
            check(DocMajorFusedF32::default(), threads);
        }
    }

    #[test]
    fn groups_split_where_the_arrays_outgrow_the_budget() {
        // 300 docs of 20 words over 3000: most words used; arrays of 16-word queries in f64
        // are 3 x rows x 16 x 8 bytes, far under the budget, so MAX_GROUP bounds a group; 40
        // queries make three groups, and the outputs still come in order.
        let spec = SyntheticSpec {
            vocab: 500,
            dim: 8,
            docs: 40,
            words_per_doc: 6,
            query_words: 3,
            zipf_exponent: 1.0,
            seed: 2,
        };
        let mut problem = synthetic_problem(&spec).unwrap();
        let params = SinkhornParams::default();
        let batch = queries(2 * MAX_GROUP + 3, 3, 500, 9);
        let got = solve_batch::<f64>(&problem, &batch, &params, Par::Seq).unwrap();
        let alone = single_queries(
            &DocMajorFused::default(),
            &mut problem,
            &batch,
            &params,
            Par::Seq,
        );
        assert_eq!(got.len(), batch.len());
        for (g, a) in got.iter().zip(&alone) {
            for (x, y) in g.distances.iter().zip(&a.distances) {
                assert!((x - y).abs() <= 1e-12 * y.abs(), "batch {x} vs alone {y}");
            }
        }
    }

    #[test]
    fn a_bad_query_is_reported_before_any_work() {
        let spec = SyntheticSpec {
            vocab: 100,
            dim: 4,
            docs: 10,
            words_per_doc: 5,
            query_words: 3,
            zipf_exponent: 1.0,
            seed: 1,
        };
        let problem = synthetic_problem(&spec).unwrap();
        let batch = vec![vec![(1, 1.0)], vec![(1, 0.5), (100, 0.5)]];
        let err =
            solve_batch::<f64>(&problem, &batch, &SinkhornParams::default(), Par::Seq).unwrap_err();
        assert!(
            matches!(&err, WmdError::BatchQuery { index: 1, source }
                if matches!(**source, WmdError::QueryWordOutOfRange { word: 100, .. })),
            "{err}"
        );
        assert!(err.to_string().starts_with("query 1 of the batch"), "{err}");
        // The trait's default, one solve per query, checks them all first too.
        let mut problem = problem;
        let own = problem.query().to_vec();
        let err = crate::Dense
            .solve_batch(&mut problem, &batch, &SinkhornParams::default(), Par::Seq)
            .unwrap_err();
        assert!(
            matches!(err, WmdError::BatchQuery { index: 1, .. }),
            "{err}"
        );
        assert_eq!(problem.query(), own);
    }
}
