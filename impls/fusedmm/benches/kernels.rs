//! The local kernels on an Erdős-Rényi matrix (50 000 x 50 000, 32 nonzeros a row) for
//! `r = 16` and `r = 64`, on one thread and on every core: SDDMM, SpMMA, SpMMB, the fused
//! FusedMMA and FusedMMB, and the unfused sequences (SDDMM storing `R`, then SpMM reading it).
//!
//! Throughput is in nonzeros per second; GFLOP/s is that times the flops per nonzero of
//! [`fusedmm::flops`]: `2 r` for SDDMM and SpMM, `4 r` for the fused and unfused pairs (so at
//! `r = 64` one Melem/s is 0.128 GFLOP/s for SDDMM and SpMM, 0.256 for the pairs).
//!
//! The B-side kernels run on the transpose, built once outside the timed loop (the
//! applications and the distributed algorithms keep it too). Outputs are allocated once and
//! accumulated into (`out +=`), so the loop times the kernels and not the allocator; the
//! unfused pairs write `R` into a preallocated buffer and read it back, the traffic the fused
//! kernels avoid. Defaults are short (10 samples, 2 s each) so that `cargo bench -p fusedmm`
//! ends in a few minutes.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fusedmm::generate::erdos_renyi;
use fusedmm::kernels::{self, CsrRef, Transposed};
use fusedmm::{Dense, Par};
use std::hint::black_box;
use std::time::Duration;

const ROWS: usize = 50_000;
const NNZ_PER_ROW: usize = 32;
const WIDTHS: [usize; 2] = [16, 64];

fn thread_counts() -> Vec<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores > 1 {
        vec![1, cores]
    } else {
        vec![1]
    }
}

fn local_kernels(c: &mut Criterion) {
    let s = erdos_renyi(ROWS, ROWS, NNZ_PER_ROW, 1, Par::threads(2)).expect("valid ER shape");
    let st = Transposed::new(&s);
    let nnz = s.nnz();
    for r in WIDTHS {
        let a = Dense::random(ROWS, r, 2);
        let b = Dense::random(ROWS, r, 3);
        let mut group = c.benchmark_group(format!("local_er{ROWS}x{NNZ_PER_ROW}_r{r}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Elements(nnz as u64));
        let s_ref: CsrRef = (&s).into();
        let st_ref: CsrRef = (&st.t).into();
        let mut values = vec![0.0; nnz];
        let mut out = Dense::zeros(ROWS, r);
        for threads in thread_counts() {
            let par = Par::threads(threads);
            group.bench_function(BenchmarkId::new("sddmm", threads), |bench| {
                bench.iter(|| kernels::sddmm(s_ref, &a, &b, black_box(&mut values), par))
            });
            group.bench_function(BenchmarkId::new("spmm_a", threads), |bench| {
                bench.iter(|| kernels::spmm_a(s_ref, &b, black_box(&mut out), par))
            });
            group.bench_function(BenchmarkId::new("spmm_b", threads), |bench| {
                bench.iter(|| kernels::spmm_b(st_ref, &a, black_box(&mut out), par))
            });
            group.bench_function(BenchmarkId::new("fusedmm_a", threads), |bench| {
                bench.iter(|| kernels::fusedmm_a(s_ref, &a, &b, black_box(&mut out), par))
            });
            group.bench_function(BenchmarkId::new("fusedmm_b", threads), |bench| {
                bench.iter(|| kernels::fusedmm_b(st_ref, &a, &b, black_box(&mut out), par))
            });
            group.bench_function(BenchmarkId::new("sddmm_then_spmm_a", threads), |bench| {
                bench.iter(|| {
                    kernels::sddmm(s_ref, &a, &b, &mut values, par);
                    kernels::spmm_a(s_ref.with_values(&values), &b, black_box(&mut out), par)
                })
            });
            // R^T = S^T .* (B A^T): the SDDMM on the transpose gives R's values in the
            // transpose's order, ready for the SpMMB.
            group.bench_function(BenchmarkId::new("sddmm_then_spmm_b", threads), |bench| {
                bench.iter(|| {
                    kernels::sddmm(st_ref, &b, &a, &mut values, par);
                    kernels::spmm_b(st_ref.with_values(&values), &a, black_box(&mut out), par)
                })
            });
        }
        group.finish();
    }
}

/// Issue 14's tuning of the fused kernel at the shape the FusedMM library was compared on
/// (16k x 16k, 64 nonzeros a row, one thread): `fusedmm_a` over column panels with the tuned
/// code (what the `local` variant runs), against the kernel as found (`Codegen::Autovec`, no
/// panels, the `local-autovec` variant), at r = 32 (one panel) and r = 128 (four).
fn tuned_fused_kernel(c: &mut Criterion) {
    const TUNED_ROWS: usize = 16_384;
    let s = erdos_renyi(TUNED_ROWS, TUNED_ROWS, 64, 1, Par::Seq).expect("valid ER shape");
    for r in [32, 128] {
        let a = Dense::random(TUNED_ROWS, r, 2);
        let b = Dense::random(TUNED_ROWS, r, 3);
        let panels = kernels::ColumnPanels::new((&s).into(), r);
        let mut out = Dense::zeros(TUNED_ROWS, r);
        let mut group = c.benchmark_group(format!("fusedmm_a_16k_x64_r{r}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Elements(s.nnz() as u64));
        group.bench_function("as_found", |bench| {
            bench.iter(|| {
                kernels::fusedmm_a_with(
                    kernels::Codegen::Autovec,
                    (&s).into(),
                    &a,
                    &b,
                    black_box(&mut out),
                    Par::Seq,
                )
            })
        });
        group.bench_function("tuned", |bench| {
            bench.iter(|| match &panels {
                Some(p) => kernels::fusedmm_a_panels(p, &a, &b, black_box(&mut out), Par::Seq),
                None => kernels::fusedmm_a((&s).into(), &a, &b, black_box(&mut out), Par::Seq),
            })
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = parbench_common::bench::criterion_config(env!("CARGO_TARGET_TMPDIR"));
    targets = local_kernels, tuned_fused_kernel
}
criterion_main!(benches);
