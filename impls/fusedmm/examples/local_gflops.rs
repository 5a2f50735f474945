//! GFLOP/s of the local kernels on an Erdős-Rényi matrix (best of several repetitions).
//!
//! `cargo run --release -p fusedmm --example local_gflops -- [ROWS] [NNZ_PER_ROW] [R] [THREADS]`
//! (defaults 100000 32 64 2). Square `S`; `A`, `B` random; the transposed copy for SpMMB and
//! FusedMMB is built once outside the timing, as the distributed algorithms keep it.

use fusedmm::generate::erdos_renyi;
use fusedmm::kernels::{self, Transposed};
use fusedmm::{flops, Dense, Kernel, Par};
use std::time::Instant;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn best_seconds(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let (rows, per_row, r, threads) = (arg(1, 100_000), arg(2, 32), arg(3, 64), arg(4, 2));
    let s = erdos_renyi(rows, rows, per_row, 1, Par::threads(threads)).expect("ER matrix");
    let st = Transposed::new(&s).t;
    let a = Dense::random(rows, r, 2);
    let b = Dense::random(rows, r, 3);
    let nnz = s.nnz();
    println!("ER {rows} x {rows}, {per_row} nnz/row ({nnz} nnz), r = {r}");
    println!(
        "{:<10} {:>8} {:>10} {:>10}",
        "kernel", "threads", "seconds", "GFLOP/s"
    );
    for par in [Par::Seq, Par::threads(threads)] {
        let mut vals = vec![0.0; nnz];
        let mut out = Dense::zeros(rows, r);
        let cases: Vec<(Kernel, Box<dyn FnMut()>)> = vec![
            (
                Kernel::Sddmm,
                Box::new(|| kernels::sddmm((&s).into(), &a, &b, &mut vals, par)),
            ),
            (
                Kernel::SpmmA,
                Box::new(|| kernels::spmm_a((&s).into(), &b, &mut out, par)),
            ),
            (
                Kernel::SpmmB,
                Box::new(|| {
                    let mut o = Dense::zeros(rows, r);
                    kernels::spmm_b((&st).into(), &a, &mut o, par)
                }),
            ),
            (
                Kernel::FusedMmA,
                Box::new(|| {
                    let mut o = Dense::zeros(rows, r);
                    kernels::fusedmm_a((&s).into(), &a, &b, &mut o, par)
                }),
            ),
            (
                Kernel::FusedMmB,
                Box::new(|| {
                    let mut o = Dense::zeros(rows, r);
                    kernels::fusedmm_b((&st).into(), &a, &b, &mut o, par)
                }),
            ),
        ];
        for (kernel, mut f) in cases {
            let secs = best_seconds(5, &mut f);
            println!(
                "{:<10} {:>8} {:>10.4} {:>10.2}",
                kernel.name(),
                par.degree(),
                secs,
                flops(kernel, nnz, r) / secs / 1e9
            );
        }
        // The unfused sequence SDDMM then SpMMA, for comparison with fusedmma.
        let mut vals2 = vec![0.0; nnz];
        let secs = best_seconds(5, || {
            kernels::sddmm((&s).into(), &a, &b, &mut vals2, par);
            let mut o = Dense::zeros(rows, r);
            kernels::spmm_a(
                fusedmm::CsrRef::from(&s).with_values(&vals2),
                &b,
                &mut o,
                par,
            );
        });
        println!(
            "{:<10} {:>8} {:>10.4} {:>10.2}",
            "sddmm+spmma",
            par.degree(),
            secs,
            flops(Kernel::FusedMmA, nnz, r) / secs / 1e9
        );
    }
}
