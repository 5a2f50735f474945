//! The time breakdown of a mid-size run of both applications (ALS with batched CG, the GAT
//! forward pass) on the serial kernels and on every distributed algorithm: where the time goes
//! (FusedMM, SpMM, SDDMM, projection, softmax, the rest), the GFLOP/s of ALS's FusedMMs and the
//! words the busiest rank sends. A report, not a test: nothing is asserted on time (the tests in
//! `tests/apps.rs` check the results and the exact call and word counts).
//!
//! `cargo run --release -p fusedmm --example apps_breakdown`

use fusedmm::apps::als::{self, AlsConfig};
use fusedmm::apps::gat::{self, GatLayer, HeadCombine};
use fusedmm::apps::KernelExecution;
use fusedmm::generate::{erdos_renyi, permute, random_permutation, rmat, RmatSpec};
use fusedmm::{algorithms, Dense, DistAlgorithm, Kernel, Par, Strategy};

/// The grid an algorithm runs on here: 4 ranks, replicated twice where its grid allows it (the
/// 1.5D algorithms), else not.
fn four_ranks(alg: &dyn DistAlgorithm) -> (usize, usize) {
    (4, if alg.check_grid(4, 2).is_ok() { 2 } else { 1 })
}

fn main() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ratings = erdos_renyi(20_000, 20_000, 20, 1, Par::threads(threads)).unwrap();
    let mut config = AlsConfig::new(32);
    config.outer_iterations = 3;
    let graph = rmat(&RmatSpec::new(14, 16, 2)).unwrap();
    let perm = random_permutation(graph.nrows(), 3);
    let graph = gat::with_self_loops(&permute(&graph, &perm, &perm).unwrap()).unwrap();
    let features = Dense::random(graph.nrows(), 64, 4);
    let layer = GatLayer::random(64, 32, 4, HeadCombine::Concat, 5);
    println!(
        "ALS: {} x {}, nnz {}, r {}, {} outer x 2 sides x {} CG; GAT: n {}, nnz {}, f 64, 4 heads of r 32",
        ratings.nrows(),
        ratings.ncols(),
        ratings.nnz(),
        config.rank,
        config.outer_iterations,
        config.cg_iterations,
        graph.nrows(),
        graph.nnz()
    );
    let algs = algorithms();
    let mut backends = vec![KernelExecution::Serial(Par::threads(threads))];
    for &alg in algs {
        let (p, c) = four_ranks(alg);
        for &strategy in alg.strategies() {
            backends.push(KernelExecution::Distributed {
                algorithm: alg,
                strategy,
                p,
                c,
                par: Par::Seq,
            });
        }
    }
    let gflops = |k: Kernel, calls: usize, nnz: usize, secs: f64| {
        fusedmm::flops(k, nnz, 32) * calls as f64 / secs / 1e9
    };
    for backend in backends {
        let out = als::als(&ratings, &config, backend).unwrap();
        let t = out.times;
        println!(
            "ALS {:<34} total {:6.2}s | FusedMM {:6.2}s ({} calls, {:5.2} GFLOP/s, compute {:6.2}s, comm {:6.2}s, max-rank words {:>11}) | SpMM {:5.2}s | SDDMM {:5.2}s | other (CG updates, loss) {:5.2}s | loss {:.4e} -> {:.4e}",
            backend.name(),
            t.total_seconds,
            t.fusedmm.seconds,
            t.fusedmm.calls,
            gflops(Kernel::FusedMmA, t.fusedmm.calls, ratings.nnz(), t.fusedmm.seconds),
            t.fusedmm.compute_seconds,
            t.fusedmm.comm_seconds,
            t.fusedmm.words_sent,
            t.spmm.seconds,
            t.sddmm.seconds,
            t.other_seconds,
            out.loss[0],
            out.loss.last().unwrap()
        );
    }
    let mut gat_backends = vec![KernelExecution::Serial(Par::threads(threads))];
    for &alg in algs {
        let (p, c) = four_ranks(alg);
        gat_backends.push(KernelExecution::Distributed {
            algorithm: alg,
            strategy: Strategy::NoElision,
            p,
            c,
            par: Par::Seq,
        });
    }
    for backend in gat_backends {
        let out = gat::gat_forward(&graph, &features, &layer, backend).unwrap();
        let t = out.times;
        println!(
            "GAT {:<34} total {:6.3}s | SDDMM {:6.3}s (words {:>10}) | SpMM {:6.3}s (words {:>10}) | projection {:6.3}s | softmax {:6.3}s | other {:6.3}s",
            backend.name(),
            t.total_seconds,
            t.sddmm.seconds,
            t.sddmm.words_sent,
            t.spmm.seconds,
            t.spmm.words_sent,
            t.projection_seconds,
            t.softmax_seconds,
            t.other_seconds
        );
    }
}
