//! Every word2vec variant of [`word2vec::variants`] (`hogwild`, `gemm`, `full`,
//! `full-register`, `bidmach`), one epoch of skip-gram with negative sampling (window 5,
//! 5 negatives) on a planted synthetic corpus from [`word2vec::generate`] (2000 words of
//! vocabulary, 40 000 words of corpus), at d = 100 and d = 300, on one thread and on two.
//!
//! Throughput is in corpus words trained per second. Subsampling is off, so every word of the
//! corpus is trained and the count is exact; a timed run is the whole [`word2vec::Trainer::train`] call
//! (the model's random initialization and the sampling tables included). Defaults are short
//! (10 samples, 2 s each) so that `cargo bench -p word2vec` ends in about two minutes on two
//! cores.
//!
//! The small matrix products of the batched variants (`batch.rs`) are private to the crate and
//! are timed here only inside the variants that run them.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;
use word2vec::generate::PlantedSpec;
use word2vec::{variants, Control, Corpus, Par, TrainParams};

const DIMS: [usize; 2] = [100, 300];
const THREADS: [usize; 2] = [1, 2];

fn corpus() -> Corpus {
    PlantedSpec {
        groups: 20,
        group_words: 100,
        sentence_words: 20,
        words: 40_000,
    }
    .corpus(1)
    .expect("valid planted spec")
}

fn params(dim: usize) -> TrainParams {
    TrainParams {
        dim,
        window: 5,
        negative: 5,
        // The planted words are equally frequent: with subsampling, how many are trained would
        // depend on the vocabulary's size and not be the corpus length.
        sample: 0.0,
        epochs: 1,
        seed: 3,
        ..TrainParams::default()
    }
}

fn training(c: &mut Criterion) {
    let corpus = corpus();
    for dim in DIMS {
        let params = params(dim);
        let mut group = c.benchmark_group(format!("word2vec_w{}_d{dim}", corpus.num_words()));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Elements(
                corpus.num_words() * params.epochs as u64,
            ));
        for v in variants() {
            for threads in THREADS {
                group.bench_with_input(
                    BenchmarkId::new(v.name(), threads),
                    &threads,
                    |b, &threads| {
                        b.iter(|| {
                            v.train(&corpus, &params, Par::threads(threads), &mut |_| {
                                Control::Continue
                            })
                            .expect("train")
                        })
                    },
                );
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = parbench_common::bench::criterion_config(env!("CARGO_TARGET_TMPDIR"));
    targets = training
}
criterion_main!(benches);
