//! The applications: ALS with batched CG against a direct Cholesky solve, the GAT forward pass
//! against a dense reference, and both on every distributed algorithm against the serial
//! kernels.

use fusedmm::apps::als::{self, AlsConfig};
use fusedmm::apps::gat::{self, GatLayer, HeadCombine};
use fusedmm::apps::{AppError, KernelExecution};
use fusedmm::distributed::divisors;
use fusedmm::generate::{erdos_renyi, rmat, RmatSpec};
use fusedmm::{algorithms, Csr, Dense, DistAlgorithm, Par, Strategy};

fn max_abs(x: &Dense) -> f64 {
    x.data().iter().fold(0.0, |m, v| m.max(v.abs()))
}

/// `max |x - y| <= tol * max(1, max |y|)`.
fn assert_close(what: &str, x: &Dense, y: &Dense, tol: f64) {
    assert_eq!((x.rows(), x.cols()), (y.rows(), y.cols()), "{what}: shape");
    let scale = max_abs(y).max(1.0);
    for (k, (a, b)) in x.data().iter().zip(y.data()).enumerate() {
        assert!(
            (a - b).abs() <= tol * scale,
            "{what}: entry {k}: {a:e} vs {b:e} (diff {:e}, allowed {:e})",
            (a - b).abs(),
            tol * scale
        );
    }
}

/// Every valid `(p, c)` of `alg` for the given `p`s.
fn grids(alg: &dyn DistAlgorithm, ps: &[usize]) -> Vec<(usize, usize)> {
    let mut g = Vec::new();
    for &p in ps {
        for c in divisors(p) {
            if alg.check_grid(p, c).is_ok() {
                g.push((p, c));
            }
        }
    }
    g
}

/// Ratings with some rows and columns left empty (users and items with no ratings).
fn ratings_with_gaps(m: usize, n: usize, per_row: usize, seed: u64) -> Csr {
    let full = erdos_renyi(m, n, per_row, seed, Par::Seq).unwrap();
    let mut t = Vec::new();
    for i in 0..m {
        if i % 7 == 3 {
            continue;
        }
        let (cols, vals) = full.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            if j as usize % 11 != 5 {
                t.push((i, j as usize, 5.0 * v));
            }
        }
    }
    Csr::from_triplets(m, n, &t).unwrap()
}

#[test]
fn als_with_enough_cg_steps_is_the_direct_solve() {
    let s = ratings_with_gaps(30, 26, 6, 3);
    let mut config = AlsConfig::new(4);
    config.outer_iterations = 3;
    let (a0, b0) = als::initial_factors(30, 26, 4, 9);
    let (ra, rb) = als::reference_als(&s, &a0, &b0, config.lambda, config.outer_iterations);
    for par in [Par::Seq, Par::Rayon(2)] {
        let out = als::als_from(
            &s,
            a0.clone(),
            b0.clone(),
            &config,
            KernelExecution::Serial(par),
        )
        .unwrap();
        assert_close("A against Cholesky", &out.a, &ra, 1e-8);
        assert_close("B against Cholesky", &out.b, &rb, 1e-8);
        // Rows with no ratings solve lambda a = 0.
        for i in (3..30).step_by(7) {
            assert!(
                out.a.row(i).iter().all(|v| v.abs() < 1e-12),
                "empty row {i}"
            );
        }
        let exact = als::loss(&s, &out.a, &out.b, config.lambda);
        let last = *out.loss.last().unwrap();
        assert!((last - exact).abs() <= 1e-12 * exact, "{last} vs {exact}");
        // In exact arithmetic CG needs r = 4 steps; rows stop early once converged.
        assert!(
            out.cg_steps.iter().all(|&k| (4..=10).contains(&k)),
            "{:?}",
            out.cg_steps
        );
    }
}

#[test]
fn als_loss_never_increases_with_few_cg_steps() {
    let s = ratings_with_gaps(60, 45, 8, 5);
    let mut config = AlsConfig::new(12);
    config.cg_iterations = 3;
    config.outer_iterations = 4;
    let out = als::als(&s, &config, KernelExecution::Serial(Par::Seq)).unwrap();
    assert_eq!(out.loss.len(), 2 * config.outer_iterations + 1);
    for w in out.loss.windows(2) {
        assert!(w[1] <= w[0] * (1.0 + 1e-12), "loss went up: {:?}", out.loss);
    }
    assert!(
        *out.loss.last().unwrap() < 0.5 * out.loss[0],
        "{:?}",
        out.loss
    );
    // With 3 < r CG steps the half steps are not exact: the direct solve does better after one
    // outer iteration from the same start.
    let (a0, b0) = als::initial_factors(60, 45, 12, config.seed);
    let (ra, rb) = als::reference_als(&s, &a0, &b0, config.lambda, 1);
    assert!(als::loss(&s, &ra, &rb, config.lambda) < out.loss[2]);

    // Accounting: one FusedMM per CG step plus one initial residual per half step, one SpMM
    // per half step, one SDDMM per loss.
    let t = out.times;
    let steps: usize = out.cg_steps.iter().sum();
    assert_eq!(steps, 2 * config.outer_iterations * config.cg_iterations);
    assert_eq!(t.fusedmm.calls, steps + 2 * config.outer_iterations);
    assert_eq!(t.spmm.calls, 2 * config.outer_iterations);
    assert_eq!(t.sddmm.calls, out.loss.len());
    // The serial kernels send nothing and spend no time communicating.
    for (kind, k) in [
        ("fusedmm", &t.fusedmm),
        ("spmm", &t.spmm),
        ("sddmm", &t.sddmm),
    ] {
        assert_eq!((k.words_sent, k.messages_sent), (0, 0), "{kind}");
        assert_eq!(k.comm_seconds, 0.0, "{kind}");
        // Serial: the kernels' time is their compute time, call for call.
        assert_eq!(k.compute_seconds, k.seconds, "{kind}");
    }
    // Every part of the breakdown is there and is a duration (how they compare is timing, which
    // the apps_breakdown example reports).
    for (part, v) in [
        ("fusedmm", t.fusedmm.seconds),
        ("spmm", t.spmm.seconds),
        ("sddmm", t.sddmm.seconds),
        ("other", t.other_seconds),
        ("total", t.total_seconds),
    ] {
        assert!(v.is_finite() && v >= 0.0, "{part}: {v}");
    }
}

#[test]
fn als_is_the_same_on_every_distributed_algorithm() {
    let s = ratings_with_gaps(23, 19, 5, 8);
    let mut config = AlsConfig::new(5);
    config.outer_iterations = 2;
    config.cg_iterations = 4;
    let serial = als::als(&s, &config, KernelExecution::Serial(Par::Seq)).unwrap();
    let mut runs = 0;
    for &alg in algorithms() {
        for (p, c) in grids(alg, &[1, 4, 6, 8]) {
            for &strategy in alg.strategies() {
                let backend = KernelExecution::Distributed {
                    algorithm: alg,
                    strategy,
                    p,
                    c,
                    par: Par::Seq,
                };
                let what = backend.name();
                let out = als::als(&s, &config, backend).unwrap();
                assert_close(&format!("{what}: A"), &out.a, &serial.a, 1e-10);
                assert_close(&format!("{what}: B"), &out.b, &serial.b, 1e-10);
                for (x, y) in out.loss.iter().zip(&serial.loss) {
                    assert!((x - y).abs() <= 1e-10 * y, "{what}: loss {x} vs {y}");
                }
                assert_eq!(
                    out.times.fusedmm.calls, serial.times.fusedmm.calls,
                    "{what}"
                );
                if p > 1 {
                    assert!(out.times.fusedmm.words_sent > 0, "{what}: no words counted");
                }
                runs += 1;
            }
        }
    }
    assert!(runs >= 20, "only {runs} distributed configurations");
}

#[test]
fn als_rejects_bad_input() {
    let s = ratings_with_gaps(10, 8, 3, 1);
    let serial = KernelExecution::Serial(Par::Seq);
    let mut config = AlsConfig::new(3);
    config.lambda = 0.0;
    assert!(matches!(
        als::als(&s, &config, serial),
        Err(AppError::Parameter(_))
    ));
    let config = AlsConfig::new(3);
    let (a, b) = als::initial_factors(10, 9, 3, 1);
    assert!(matches!(
        als::als_from(&s, a, b, &config, serial),
        Err(AppError::Parameter(_))
    ));
    let dense_shift = fusedmm::algorithm("1.5d-dense-shift").unwrap();
    let bad_grid = KernelExecution::Distributed {
        algorithm: dense_shift,
        strategy: Strategy::NoElision,
        p: 4,
        c: 3,
        par: Par::Seq,
    };
    assert!(matches!(
        als::als(&s, &config, bad_grid),
        Err(AppError::FusedMm(_))
    ));
    let one_d = fusedmm::algorithm("1d").unwrap();
    let bad_strategy = KernelExecution::Distributed {
        algorithm: one_d,
        strategy: Strategy::LocalKernelFusion,
        p: 2,
        c: 1,
        par: Par::Seq,
    };
    assert!(matches!(
        als::als(&s, &config, bad_strategy),
        Err(AppError::FusedMm(_))
    ));
}

/// A small R-MAT graph: power-law degrees and, at this size, empty rows.
fn small_graph(seed: u64) -> Csr {
    rmat(&RmatSpec::new(5, 3, seed)).unwrap()
}

#[test]
fn gat_matches_the_dense_reference() {
    let adjacency = small_graph(4);
    let empty_rows: Vec<usize> = (0..adjacency.nrows())
        .filter(|&i| adjacency.row(i).0.is_empty())
        .collect();
    assert!(
        !empty_rows.is_empty(),
        "the test graph should have empty rows"
    );
    let features = Dense::random(adjacency.nrows(), 7, 11);
    for combine in [HeadCombine::Concat, HeadCombine::Mean] {
        for slope in [0.2, 1.0] {
            let mut layer = GatLayer::random(7, 5, 3, combine, 21);
            layer.negative_slope = slope;
            let expected = gat::reference_forward(&adjacency, &features, &layer);
            assert_eq!(expected.cols(), layer.output_width());
            for par in [Par::Seq, Par::Rayon(2)] {
                let out =
                    gat::gat_forward(&adjacency, &features, &layer, KernelExecution::Serial(par))
                        .unwrap();
                let what = format!("{combine:?} slope {slope} {par:?}");
                assert_close(&what, &out.out, &expected, 1e-12);
                for &i in &empty_rows {
                    assert!(out.out.row(i).iter().all(|&v| v == 0.0), "{what}: row {i}");
                }
                assert_eq!(out.attention.len(), 3);
                for alpha in &out.attention {
                    for i in 0..adjacency.nrows() {
                        let row = &alpha[adjacency.indptr()[i]..adjacency.indptr()[i + 1]];
                        if !row.is_empty() {
                            let sum: f64 = row.iter().sum();
                            assert!((sum - 1.0).abs() < 1e-14, "{what}: row {i} sums to {sum}");
                            assert!(row.iter().all(|&a| a > 0.0 && a <= 1.0));
                        }
                    }
                }
                assert_eq!(out.times.sddmm.calls, 3);
                assert_eq!(out.times.spmm.calls, 3);
            }
        }
    }
}

#[test]
fn gat_softmax_survives_huge_scores() {
    // Scores in the thousands: exp without the row maximum subtracted would overflow.
    let adjacency = gat::with_self_loops(&small_graph(6)).unwrap();
    let mut features = Dense::random(adjacency.nrows(), 6, 2);
    features.data_mut().iter_mut().for_each(|x| *x *= 300.0);
    let layer = GatLayer::random(6, 4, 2, HeadCombine::Concat, 3);
    let out = gat::gat_forward(
        &adjacency,
        &features,
        &layer,
        KernelExecution::Serial(Par::Seq),
    )
    .unwrap();
    assert!(out.out.data().iter().all(|v| v.is_finite()));
    let expected = gat::reference_forward(&adjacency, &features, &layer);
    assert_close("huge scores", &out.out, &expected, 1e-12);
}

#[test]
fn gat_is_the_same_on_every_distributed_algorithm() {
    let adjacency = gat::with_self_loops(&small_graph(9)).unwrap();
    let features = Dense::random(adjacency.nrows(), 5, 1);
    let layer = GatLayer::random(5, 6, 2, HeadCombine::Concat, 7);
    let expected = gat::reference_forward(&adjacency, &features, &layer);
    for &alg in algorithms() {
        for (p, c) in grids(alg, &[2, 4, 8]) {
            let backend = KernelExecution::Distributed {
                algorithm: alg,
                strategy: Strategy::NoElision,
                p,
                c,
                par: Par::Seq,
            };
            let out = gat::gat_forward(&adjacency, &features, &layer, backend).unwrap();
            assert_close(&backend.name(), &out.out, &expected, 1e-12);
            assert!(out.times.sddmm.words_sent > 0 && out.times.spmm.words_sent > 0);
        }
    }
}

#[test]
fn self_loops_are_added_once() {
    let adjacency = small_graph(4);
    let looped = gat::with_self_loops(&adjacency).unwrap();
    let n = adjacency.nrows();
    let had = (0..n)
        .filter(|&i| adjacency.row(i).0.contains(&(i as u32)))
        .count();
    assert_eq!(looped.nnz(), adjacency.nnz() + n - had);
    assert!((0..n).all(|i| looped.row(i).0.contains(&(i as u32))));
    assert_eq!(gat::with_self_loops(&looped).unwrap(), looped);
}

#[test]
fn gat_rejects_bad_input() {
    let adjacency = small_graph(4);
    let features = Dense::random(adjacency.nrows(), 5, 1);
    let serial = KernelExecution::Serial(Par::Seq);
    let wrong_f = GatLayer::random(4, 3, 2, HeadCombine::Mean, 1);
    assert!(matches!(
        gat::gat_forward(&adjacency, &features, &wrong_f, serial),
        Err(AppError::Parameter(_))
    ));
    let no_heads = GatLayer::random(5, 3, 0, HeadCombine::Mean, 1);
    assert!(matches!(
        gat::gat_forward(&adjacency, &features, &no_heads, serial),
        Err(AppError::Parameter(_))
    ));
    let short = Dense::random(adjacency.nrows() - 1, 5, 1);
    let layer = GatLayer::random(5, 3, 1, HeadCombine::Mean, 1);
    assert!(matches!(
        gat::gat_forward(&adjacency, &short, &layer, serial),
        Err(AppError::Parameter(_))
    ));
}
