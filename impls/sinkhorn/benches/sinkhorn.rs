//! Every variant on a mid-size synthetic problem, and the fast variants at the paper's shape.
//! Throughput is reported in nonzeros of `c` times iterations per second.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sinkhorn::generate::{generate, SyntheticSpec};
use sinkhorn::{variants, Control, Par, SinkhornParams};
use std::time::Duration;

fn mid_size() -> SyntheticSpec {
    SyntheticSpec {
        vocab: 20_000,
        docs: 1_000,
        ..SyntheticSpec::paper()
    }
}

fn bench_shape(c: &mut Criterion, group_name: &str, spec: &SyntheticSpec, skip_dense: bool) {
    let problem = generate(spec).expect("valid spec");
    let params = SinkhornParams {
        lambda: 10.0,
        max_iter: 15,
        tol: None,
    };
    let mut group = c.benchmark_group(group_name);
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(
        (problem.nnz() * params.max_iter) as u64,
    ));
    for v in variants() {
        if skip_dense && v.name() == "dense" {
            continue;
        }
        let thread_counts: &[usize] = if v.is_parallel() { &[1, 2] } else { &[1] };
        for &threads in thread_counts {
            group.bench_with_input(
                BenchmarkId::new(v.name(), threads),
                &threads,
                |b, &threads| {
                    b.iter(|| {
                        v.solve(&problem, &params, Par::threads(threads), &mut |_| {
                            Control::Continue
                        })
                        .expect("solve")
                    })
                },
            );
        }
    }
    group.finish();
}

fn mid(c: &mut Criterion) {
    bench_shape(c, "sinkhorn_v20k_n1000", &mid_size(), false);
}

fn paper(c: &mut Criterion) {
    bench_shape(c, "sinkhorn_paper_shape", &SyntheticSpec::paper(), true);
}

criterion_group! {
    name = benches;
    config = parbench_common::bench::criterion_config(env!("CARGO_TARGET_TMPDIR"));
    targets = mid, paper
}
criterion_main!(benches);
