//! The cost model on its own: the paper's claims about the 1.5D dense shifting strategies.

use fusedmm::cost_model::{best_c, predict, Shape};
use fusedmm::{Kernel, Strategy};

const ALG: &str = "1.5d-dense-shift";

fn words(kernel: Kernel, strategy: Strategy, n: usize, r: usize, p: usize, c: usize) -> f64 {
    predict(
        ALG,
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
    best_c(ALG, kernel, strategy, shape).unwrap()
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
    assert!(predict(ALG, Kernel::Sddmm, Strategy::NoElision, shape).is_none());
    assert!(predict(
        "2d",
        Kernel::Sddmm,
        Strategy::NoElision,
        Shape { c: 2, ..shape }
    )
    .is_none());
    assert!(predict(
        "1d",
        Kernel::FusedMmA,
        Strategy::ReplicationReuse,
        Shape { c: 1, ..shape }
    )
    .is_none());
}
