//! The cost model on its own: the paper's claims about the 1.5D dense shifting strategies,
//! sparse against dense shifting as phi = nnz / (n r) grows, and 2.5D replication reuse.

use fusedmm::cost_model::{best_c, predict, Shape};
use fusedmm::{DistAlgorithm, Kernel, Strategy};

const ALG: &str = "1.5d-dense-shift";

/// The registered algorithm called `name`.
fn by_name(name: &str) -> &'static dyn DistAlgorithm {
    fusedmm::algorithm(name).unwrap_or_else(|| panic!("no algorithm {name}"))
}

fn words(kernel: Kernel, strategy: Strategy, n: usize, r: usize, p: usize, c: usize) -> f64 {
    predict(
        by_name(ALG),
        kernel,
        strategy,
        Shape {
            m: n,
            n,
            r,
            nnz: 32 * n,
            p,
            c,
        },
    )
    .unwrap()
    .total_words()
}

fn best(kernel: Kernel, strategy: Strategy, n: usize, r: usize, p: usize) -> usize {
    let shape = Shape {
        m: n,
        n,
        r,
        nnz: 32 * n,
        p,
        c: 1,
    };
    best_c(by_name(ALG), kernel, strategy, shape).unwrap()
}

#[test]
fn best_replication_factor_orders_reuse_none_fusion() {
    for p in [4, 16, 64, 256, 1024, 4096] {
        let n = 1 << 20;
        for kernel in [Kernel::FusedMmA, Kernel::FusedMmB] {
            let none = best(kernel, Strategy::NoElision, n, 64, p);
            let reuse = best(kernel, Strategy::ReplicationReuse, n, 64, p);
            let fusion = best(kernel, Strategy::LocalKernelFusion, n, 64, p);
            assert!(
                reuse >= none && none >= fusion,
                "p={p} {}: best c reuse {reuse}, none {none}, fusion {fusion}",
                kernel.name()
            );
        }
    }
}

#[test]
fn both_elisions_approach_one_over_sqrt_two_of_the_unoptimized_sequence() {
    // The paper's ratio is for a continuous c; a p with many divisors (720720 * 16) has
    // divisors close to sqrt(p), sqrt(2p) and sqrt(p/2), so the discrete optimum is close too.
    let (n, r) = (1 << 30, 64);
    let p = 720_720 * 16;
    let at_best = |s| {
        words(
            Kernel::FusedMmA,
            s,
            n,
            r,
            p,
            best(Kernel::FusedMmA, s, n, r, p),
        )
    };
    let none = at_best(Strategy::NoElision);
    for s in [Strategy::ReplicationReuse, Strategy::LocalKernelFusion] {
        let ratio = at_best(s) / none;
        assert!(
            (ratio - 1.0 / 2f64.sqrt()).abs() < 0.001,
            "{}: ratio {ratio}, expected about {}",
            s.name(),
            1.0 / 2f64.sqrt()
        );
    }
}

#[test]
fn unknown_algorithms_and_invalid_grids_have_no_prediction() {
    let shape = Shape {
        m: 8,
        n: 8,
        r: 2,
        nnz: 16,
        p: 6,
        c: 4,
    };
    assert!(predict(by_name(ALG), Kernel::Sddmm, Strategy::NoElision, shape).is_none());
    assert!(fusedmm::algorithm("2d").is_none());
    assert!(predict(
        by_name("1d"),
        Kernel::FusedMmA,
        Strategy::ReplicationReuse,
        Shape { c: 1, ..shape }
    )
    .is_none());
}

fn shape(n: usize, r: usize, nnz: usize, p: usize) -> Shape {
    Shape {
        m: n,
        n,
        r,
        nnz,
        p,
        c: 1,
    }
}

/// Fewest words per rank over the strategies `alg` offers for FusedMMA and over `c`.
fn best_words(alg: &str, strategies: &[Strategy], s: Shape) -> f64 {
    strategies
        .iter()
        .filter_map(|&st| {
            let c = best_c(by_name(alg), Kernel::FusedMmA, st, s)?;
            Some(predict(by_name(alg), Kernel::FusedMmA, st, Shape { c, ..s })?.total_words())
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn sparse_shifting_beats_dense_shifting_at_low_phi_and_loses_at_high_phi() {
    let (n, r) = (1 << 20, 64);
    let none_reuse = [Strategy::NoElision, Strategy::ReplicationReuse];
    for p in [16, 64, 256, 1024, 4096] {
        for (phi, sparse_should_win) in [(0.01, true), (0.1, true), (2.0, false), (8.0, false)] {
            let s = shape(n, r, (phi * (n * r) as f64) as usize, p);
            let sparse = best_words("1.5d-sparse-shift", &none_reuse, s);
            let dense = best_words("1.5d-dense-shift", &Strategy::ALL, s);
            assert_eq!(
                sparse < dense,
                sparse_should_win,
                "p={p} phi={phi}: sparse shifting {sparse} words, dense shifting {dense}"
            );
        }
    }
}

#[test]
fn two_and_a_half_d_reuse_communicates_less_than_no_elision() {
    let (n, r) = (1 << 20, 64);
    for p in [4, 16, 64, 256, 1024, 4096] {
        for phi in [0.01, 1.0, 16.0] {
            let s = shape(n, r, (phi * (n * r) as f64) as usize, p);
            for kernel in [Kernel::FusedMmA, Kernel::FusedMmB] {
                let words = |st, c| {
                    predict(
                        by_name("2.5d-dense-replicate"),
                        kernel,
                        st,
                        Shape { c, ..s },
                    )
                    .map(|cost| cost.total_words())
                };
                // At every replication factor that replicates, and at each strategy's best.
                for c in fusedmm::dense_replicate::grid_factors(p) {
                    let (none, reuse) = (
                        words(Strategy::NoElision, c).unwrap(),
                        words(Strategy::ReplicationReuse, c).unwrap(),
                    );
                    assert!(
                        reuse <= none && (c == 1 || reuse < none),
                        "p={p} c={c} phi={phi} {}: reuse {reuse}, none {none}",
                        kernel.name()
                    );
                }
                let at_best = |st| {
                    let c = best_c(by_name("2.5d-dense-replicate"), kernel, st, s).unwrap();
                    words(st, c).unwrap()
                };
                let (none, reuse) = (
                    at_best(Strategy::NoElision),
                    at_best(Strategy::ReplicationReuse),
                );
                assert!(reuse <= none, "p={p} phi={phi}: reuse {reuse}, none {none}");
            }
        }
    }
}

#[test]
fn new_algorithms_have_no_prediction_for_strategies_they_lack_or_bad_grids() {
    let s = Shape {
        m: 8,
        n: 8,
        r: 2,
        nnz: 16,
        p: 8,
        c: 4,
    };
    assert!(predict(
        by_name("2.5d-dense-replicate"),
        Kernel::Sddmm,
        Strategy::NoElision,
        s
    )
    .is_none());
    assert!(predict(
        by_name("2.5d-sparse-replicate"),
        Kernel::Sddmm,
        Strategy::NoElision,
        s
    )
    .is_none());
    let s = Shape { c: 2, ..s };
    assert!(predict(
        by_name("2.5d-dense-replicate"),
        Kernel::Sddmm,
        Strategy::NoElision,
        s
    )
    .is_some());
    for (alg, strategy) in [
        ("1.5d-sparse-shift", Strategy::LocalKernelFusion),
        ("2.5d-dense-replicate", Strategy::LocalKernelFusion),
        ("2.5d-sparse-replicate", Strategy::ReplicationReuse),
    ] {
        assert!(
            predict(by_name(alg), Kernel::FusedMmA, strategy, s).is_none(),
            "{alg}"
        );
    }
}
