//! Conformance suite: every check runs against every variant in `sinkhorn::variants()`, so a new
//! variant is tested by registering it there.

use parbench_common::{Csr, Rng};
use sinkhorn::generate::{generate, SyntheticSpec};
use sinkhorn::reference::reference_wmd;
use sinkhorn::{
    variants, Control, IterationReport, Par, Precision, SinkhornParams, WmdError, WmdOutput,
    WmdProblem, WmdSolver,
};

/// The agreement an f32 solve is held to, relative: its inputs are rounded to 24 bits and each
/// distance comes through tens of dependent roundings per iteration, so about a hundred ulps of
/// f32 (epsilon 1.2e-7). Measured at most ~1e-7 on these problems and 7e-8 at the paper's shape.
const F32_TOL: f64 = 1e-5;

/// `f64_tol` for the f64 variants, [`F32_TOL`] for `doc-major-f32`.
fn tolerance(v: &dyn WmdSolver, f64_tol: f64) -> f64 {
    match v.precision() {
        Precision::F64 => f64_tol,
        Precision::F32 => F32_TOL,
    }
}

fn quiet(_: &IterationReport) -> Control {
    Control::Continue
}

fn solve(
    v: &dyn WmdSolver,
    p: &WmdProblem,
    params: &SinkhornParams,
    threads: usize,
) -> Result<WmdOutput, WmdError> {
    v.solve(p, params, Par::threads(threads), &mut quiet)
}

/// Asserts `|actual - expected| <= rel * max(|expected|, 1e-300)` element-wise, printing both.
fn assert_close(what: &str, actual: &[f64], expected: &[f64], rel: f64) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths differ");
    for (j, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let err = (a - e).abs();
        assert!(
            err <= rel * e.abs().max(1e-300),
            "{what}: document {j}: expected {e:e}, actual {a:e} (relative error {:e} > {rel:e})",
            err / e.abs().max(1e-300)
        );
    }
}

/// A random problem with awkward features: documents of random length in `1..=max_len`, document
/// 0 a single word, document 1 (when there are two) sharing no word with the query, the query of
/// `vs` distinct words.
fn awkward_problem(
    seed: u64,
    vocab: usize,
    dim: usize,
    docs: usize,
    vs: usize,
    max_len: usize,
) -> WmdProblem {
    let mut rng = Rng::new(seed);
    let vecs: Vec<f64> = (0..vocab * dim)
        .map(|_| rng.normal() / (dim as f64).sqrt())
        .collect();
    let pick_distinct = |rng: &mut Rng, k: usize, avoid: &[u32]| -> Vec<u32> {
        let mut w: Vec<u32> = Vec::new();
        while w.len() < k {
            let x = rng.below(vocab as u64) as u32;
            if !w.contains(&x) && !avoid.contains(&x) {
                w.push(x);
            }
        }
        w.sort();
        w
    };
    let weights = |rng: &mut Rng, k: usize| -> Vec<f64> {
        let raw: Vec<f64> = (0..k).map(|_| 0.05 + rng.next_f64()).collect();
        let s: f64 = raw.iter().sum();
        raw.iter().map(|x| x / s).collect()
    };
    let qwords = pick_distinct(&mut rng, vs, &[]);
    let qweights = weights(&mut rng, vs);
    let query: Vec<(u32, f64)> = qwords.into_iter().zip(qweights).collect();
    let qw: Vec<u32> = query.iter().map(|q| q.0).collect();
    let mut triplets = Vec::new();
    for j in 0..docs {
        let len = if j == 0 {
            1
        } else {
            1 + rng.below(max_len as u64) as usize
        };
        let avoid: &[u32] = if j == 1 && vs < vocab { &qw } else { &[] };
        let len = len.min(vocab - avoid.len());
        let w = pick_distinct(&mut rng, len, avoid);
        for (word, c) in w.into_iter().zip(weights(&mut rng, len)) {
            triplets.push((word as usize, j, c));
        }
    }
    let c = Csr::from_triplets(vocab, docs, &triplets).unwrap();
    WmdProblem::new(vecs, dim, query, c).unwrap()
}

fn awkward_problems() -> Vec<(&'static str, WmdProblem)> {
    vec![
        ("vocab 31, 1-word query", awkward_problem(1, 31, 5, 9, 1, 6)),
        (
            "vocab 53, 7-word query",
            awkward_problem(2, 53, 7, 23, 7, 11),
        ),
        (
            "vocab 101, 19-word query",
            awkward_problem(3, 101, 12, 37, 19, 17),
        ),
        // Over 32 words: doc-major leaves its lanes loop for the row kernels (stride 40, past
        // the strides they hold in registers).
        (
            "vocab 211, 37-word query",
            awkward_problem(6, 211, 9, 29, 37, 23),
        ),
        (
            "vocab 13, query = whole vocab",
            awkward_problem(4, 13, 3, 5, 13, 4),
        ),
        (
            "synthetic zipf",
            generate(&SyntheticSpec {
                vocab: 997,
                dim: 20,
                docs: 61,
                words_per_doc: 9,
                query_words: 6,
                zipf_exponent: 1.1,
                seed: 5,
            })
            .unwrap(),
        ),
    ]
}

#[test]
fn every_variant_agrees_with_the_reference() {
    for (name, problem) in awkward_problems() {
        for params in [
            SinkhornParams {
                lambda: 1.0,
                max_iter: 15,
                tol: None,
            },
            SinkhornParams {
                lambda: 7.5,
                max_iter: 40,
                tol: Some(1e-7),
            },
            SinkhornParams {
                lambda: 3.0,
                max_iter: 0,
                tol: None,
            },
        ] {
            let expected = reference_wmd(&problem, &params).unwrap();
            for v in variants() {
                for threads in [1, 2, 3] {
                    let out = solve(v.as_ref(), &problem, &params, threads).unwrap();
                    let what = format!("{} on {name}, {params:?}, {threads} threads", v.name());
                    assert_close(
                        &what,
                        &out.distances,
                        &expected,
                        tolerance(v.as_ref(), 1e-10),
                    );
                    assert!(
                        out.iterations <= params.max_iter,
                        "{what}: {} iterations",
                        out.iterations
                    );
                }
            }
        }
    }
}

#[test]
fn one_word_query_and_one_word_documents_give_the_euclidean_distance() {
    let base = awkward_problem(11, 29, 6, 1, 1, 1);
    let q = base.query()[0].0 as usize;
    // Every document is one word (including the query's own word).
    let docs = 12;
    let triplets: Vec<(usize, usize, f64)> =
        (0..docs).map(|j| ((j * 5 + q) % 29, j, 1.0)).collect();
    let c = Csr::from_triplets(29, docs, &triplets).unwrap();
    let problem = WmdProblem::new(base.vecs().to_vec(), 6, base.query().to_vec(), c).unwrap();
    let expected: Vec<f64> = triplets
        .iter()
        .map(|&(w, _, _)| {
            problem
                .vec(q)
                .iter()
                .zip(problem.vec(w))
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    assert_eq!(expected[0], 0.0);
    for lambda in [0.1, 1.0, 10.0, 50.0] {
        let params = SinkhornParams {
            lambda,
            max_iter: 5,
            tol: None,
        };
        for v in variants() {
            let what = format!("{} at lambda {lambda}", v.name());
            // At lambda 50 the farthest word's exp(-lambda M) is below f32's range: the f32
            // solve's shifted kernel rows (`Real::exp_neg_scaled`) must still get it right.
            let out =
                solve(v.as_ref(), &problem, &params, 2).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(out.distances[0], 0.0, "{what}: a word against itself");
            assert_close(
                &what,
                &out.distances,
                &expected,
                tolerance(v.as_ref(), 1e-12),
            );
        }
    }
}

#[test]
fn a_document_against_itself_tends_to_zero_as_lambda_grows() {
    let base = awkward_problem(21, 40, 8, 1, 5, 1);
    let triplets: Vec<(usize, usize, f64)> = base
        .query()
        .iter()
        .map(|&(w, c)| (w as usize, 0, c))
        .collect();
    let c = Csr::from_triplets(40, 1, &triplets).unwrap();
    let problem = WmdProblem::new(base.vecs().to_vec(), 8, base.query().to_vec(), c).unwrap();
    for v in variants() {
        let d: Vec<f64> = [1.0, 10.0, 50.0]
            .iter()
            .map(|&lambda| {
                let params = SinkhornParams {
                    lambda,
                    max_iter: 1000,
                    tol: Some(1e-13),
                };
                solve(v.as_ref(), &problem, &params, 1).unwrap().distances[0]
            })
            .collect();
        assert!(
            d[0] > d[1] && d[1] > d[2],
            "{}: distances over lambda 1, 10, 50 must decrease: {d:?}",
            v.name()
        );
        assert!(
            d[2] < 1e-3 * d[0],
            "{}: at lambda 50 expected < {:e}, actual {:e}",
            v.name(),
            1e-3 * d[0],
            d[2]
        );
    }
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let good = awkward_problem(31, 17, 4, 3, 2, 3);
    let c = good.docs_by_word().clone();
    let q = good.query().to_vec();
    let vecs = good.vecs().to_vec();
    assert!(matches!(
        WmdProblem::new(vecs[1..].to_vec(), 4, q.clone(), c.clone()),
        Err(WmdError::EmbeddingShape { .. })
    ));
    assert!(matches!(
        WmdProblem::new(vecs.clone(), 5, q.clone(), c.clone()),
        Err(WmdError::EmbeddingShape { .. })
    ));
    let mut nan = vecs.clone();
    nan[9] = f64::NAN;
    assert!(matches!(
        WmdProblem::new(nan, 4, q.clone(), c.clone()),
        Err(WmdError::EmbeddingNotFinite { word: 2, .. })
    ));
    assert_eq!(
        WmdProblem::new(vecs.clone(), 4, vec![], c.clone()).unwrap_err(),
        WmdError::EmptyQuery
    );
    assert!(WmdProblem::new(vecs.clone(), 4, vec![(0, 0.0)], c.clone()).is_err());
    let empty_doc = Csr::from_triplets(17, 2, &[(3, 0, 1.0)]).unwrap();
    assert!(matches!(
        WmdProblem::new(vecs.clone(), 4, q.clone(), empty_doc),
        Err(WmdError::EmptyDocument { doc: 1, .. })
    ));

    for v in variants() {
        for lambda in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let params = SinkhornParams {
                lambda,
                max_iter: 3,
                tol: None,
            };
            assert!(
                matches!(
                    solve(v.as_ref(), &good, &params, 2),
                    Err(WmdError::BadLambda(_))
                ),
                "{}: lambda {lambda} must be rejected",
                v.name()
            );
        }
        let params = SinkhornParams {
            lambda: 1.0,
            max_iter: 3,
            tol: Some(-1.0),
        };
        assert!(
            matches!(
                solve(v.as_ref(), &good, &params, 1),
                Err(WmdError::BadTolerance(_))
            ),
            "{}",
            v.name()
        );
        // exp(-lambda M) underflows to 0 for every pair of distinct words.
        let params = SinkhornParams {
            lambda: 1e5,
            max_iter: 3,
            tol: None,
        };
        let got = solve(v.as_ref(), &good, &params, 2);
        assert_eq!(
            got.as_ref().err(),
            Some(&WmdError::Underflow { lambda: 1e5 }),
            "{}: got {got:?}",
            v.name()
        );
    }
}

#[test]
fn every_variant_repeats_bit_for_bit() {
    let problem = awkward_problem(41, 211, 9, 70, 8, 25);
    for params in [
        SinkhornParams {
            lambda: 4.0,
            max_iter: 12,
            tol: None,
        },
        SinkhornParams {
            lambda: 4.0,
            max_iter: 50,
            tol: Some(1e-6),
        },
    ] {
        for v in variants() {
            for threads in [1, 3] {
                let a = solve(v.as_ref(), &problem, &params, threads).unwrap();
                let b = solve(v.as_ref(), &problem, &params, threads).unwrap();
                assert_eq!(
                    a.distances,
                    b.distances,
                    "{} with {threads} threads",
                    v.name()
                );
                assert_eq!(a.iterations, b.iterations, "{}", v.name());
            }
        }
    }
}

#[test]
fn parallel_variants_equal_fused_for_any_thread_count() {
    let problem = awkward_problem(51, 307, 10, 90, 11, 30);
    let fused = sinkhorn::variant("fused").unwrap();
    for params in [
        SinkhornParams {
            lambda: 6.0,
            max_iter: 15,
            tol: None,
        },
        SinkhornParams {
            lambda: 6.0,
            max_iter: 60,
            tol: Some(1e-8),
        },
    ] {
        let expected = solve(fused.as_ref(), &problem, &params, 1).unwrap();
        for name in ["fused-par", "doc-major", "sparse"] {
            let v = sinkhorn::variant(name).unwrap();
            for threads in 1..=4 {
                let out = solve(v.as_ref(), &problem, &params, threads).unwrap();
                assert_close(
                    &format!("{name} with {threads} threads, {params:?}"),
                    &out.distances,
                    &expected.distances,
                    1e-12,
                );
                assert_eq!(
                    out.iterations, expected.iterations,
                    "{name} with {threads} threads"
                );
            }
        }
    }
}

#[test]
fn with_a_tolerance_a_document_does_not_depend_on_its_batch() {
    let problem = awkward_problem(61, 89, 6, 30, 6, 12);
    let params = SinkhornParams {
        lambda: 5.0,
        max_iter: 200,
        tol: Some(1e-6),
    };
    // The odd documents alone.
    let by_doc = problem.docs_by_doc();
    let mut triplets = Vec::new();
    for (jj, j) in (1..30).step_by(2).enumerate() {
        let (w, c) = by_doc.row(j);
        triplets.extend(w.iter().zip(c).map(|(&w, &c)| (w as usize, jj, c)));
    }
    let sub = WmdProblem::new(
        problem.vecs().to_vec(),
        6,
        problem.query().to_vec(),
        Csr::from_triplets(89, 15, &triplets).unwrap(),
    )
    .unwrap();
    for v in variants() {
        let all = solve(v.as_ref(), &problem, &params, 2).unwrap();
        let odd = solve(v.as_ref(), &sub, &params, 2).unwrap();
        let expected: Vec<f64> = (1..30).step_by(2).map(|j| all.distances[j]).collect();
        assert_close(
            &format!("{} on the odd documents", v.name()),
            &odd.distances,
            &expected,
            tolerance(v.as_ref(), 1e-12),
        );
        assert!(
            all.iterations < params.max_iter,
            "{}: the tolerance never stopped the loop",
            v.name()
        );
    }
}

#[test]
fn progress_reports_every_iteration_and_stop_is_honoured() {
    let problem = awkward_problem(71, 67, 5, 20, 4, 8);
    let params = SinkhornParams {
        lambda: 2.0,
        max_iter: 9,
        tol: None,
    };
    for v in variants() {
        let mut seen = Vec::new();
        let out = v
            .solve(
                &problem,
                &params,
                Par::threads(2),
                &mut |r: &IterationReport| {
                    seen.push(*r);
                    Control::Continue
                },
            )
            .unwrap();
        assert_eq!(out.iterations, 9, "{}", v.name());
        let its: Vec<usize> = seen.iter().map(|r| r.iteration).collect();
        assert_eq!(
            its,
            (1..=9).collect::<Vec<_>>(),
            "{}: report iterations",
            v.name()
        );
        for r in &seen {
            assert_eq!(
                r.active_docs,
                20,
                "{}: without a tolerance every document stays active",
                v.name()
            );
            assert_eq!(r.max_iter, 9);
            assert!(
                r.max_change.is_finite() && r.max_change >= 0.0,
                "{}: {r:?}",
                v.name()
            );
        }
        // Stop after 3 of 9 reports (no tolerance, so nothing else ends the loop first): no
        // report after the stop, and the output is exactly that of a run of the iterations it
        // reports. A variant that stops early ends its loop there, after 3; the others (the
        // document-major ones) run every document's iterations before they report, so a stop
        // ends the replay of their reports, not their work.
        let expected_iterations = if v.stops_early() { 3 } else { 9 };
        let mut calls = 0;
        let stopped = v
            .solve(
                &problem,
                &params,
                Par::threads(2),
                &mut |r: &IterationReport| {
                    calls += 1;
                    if r.iteration == 3 {
                        Control::Stop
                    } else {
                        Control::Continue
                    }
                },
            )
            .unwrap();
        assert_eq!(calls, 3, "{}: reports after Stop", v.name());
        assert_eq!(
            stopped.iterations,
            expected_iterations,
            "{}: iterations after a Stop at iteration 3",
            v.name()
        );
        let same = solve(
            v.as_ref(),
            &problem,
            &SinkhornParams {
                max_iter: expected_iterations,
                ..params
            },
            2,
        )
        .unwrap();
        assert_eq!(same.iterations, expected_iterations, "{}", v.name());
        assert_eq!(
            stopped.distances,
            same.distances,
            "{}: a stopped run is not the run of {expected_iterations} iterations",
            v.name()
        );
        if expected_iterations == 3 {
            // The stop made a difference: 3 iterations are not 9.
            assert_ne!(stopped.distances, out.distances, "{}", v.name());
        }
    }
}

#[test]
fn outputs_report_phases_and_flops() {
    let problem = awkward_problem(81, 97, 6, 25, 5, 10);
    let params = SinkhornParams {
        lambda: 3.0,
        max_iter: 5,
        tol: None,
    };
    let mut flops = Vec::new();
    for v in variants() {
        let out = solve(v.as_ref(), &problem, &params, 2).unwrap();
        for phase in ["distance", "precompute", "loop", "final"] {
            assert!(
                out.phases.0.iter().any(|(n, _)| *n == phase),
                "{}: phase {phase} missing in {:?}",
                v.name(),
                out.phases
            );
        }
        assert!(out.flops > 0.0, "{}: flops {}", v.name(), out.flops);
        flops.push((v.name(), out.flops));
    }
    let dense = flops.iter().find(|f| f.0 == "dense").unwrap().1;
    let fused = flops.iter().find(|f| f.0 == "fused").unwrap().1;
    assert!(
        dense > fused,
        "dense counts its dense products: dense {dense:e}, fused {fused:e}"
    );
}
