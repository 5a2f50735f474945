//! Every LDA sampler, trained for a few sweeps on a synthetic corpus from [`lda::generate`]
//! (1000 documents of 100 to 300 tokens, about 200 000 tokens, over 2000 words) at K = 20 and
//! K = 1000: the single-threaded samplers (`sequential`, `sparse`, `mh`, `warp`) one group per
//! K, and the master-worker ones (`sync`, `async`) on two worker threads in a group of their own.
//!
//! Throughput is in tokens sampled per second (tokens times sweeps). A timed run is the whole
//! [`LdaSampler::train`] call: the random initial state, the sweeps and the final
//! log-likelihood, as a user of the crate pays for them; the log-likelihood is not evaluated
//! between sweeps. Defaults are short (10 samples, 3 s each) so that `cargo bench -p lda` ends
//! in about two minutes on two cores.

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use lda::{generate, variants, Control, Corpus, LdaParams, LdaSampler, Par, SyntheticSpec};
use std::time::Duration;

const DOCS: usize = 1000;
const TOPICS: [usize; 2] = [20, 1000];
const ITERATIONS: usize = 5;
const WORKERS: usize = 2;

fn corpus() -> Corpus {
    generate(&SyntheticSpec {
        docs: DOCS,
        words: 2000,
        topics: 20,
        min_len: 100,
        max_len: 300,
        seed: 1,
        ..SyntheticSpec::default()
    })
    .expect("valid synthetic spec")
    .corpus
}

fn params(topics: usize) -> LdaParams {
    LdaParams {
        topics,
        iterations: ITERATIONS,
        seed: 7,
        // A log-likelihood between sweeps would be timed with them; the final one is computed
        // whatever this says.
        likelihood_every: 0,
        ..LdaParams::default()
    }
}

fn train(v: &dyn LdaSampler, corpus: &Corpus, params: &LdaParams, par: Par) -> lda::LdaOutput {
    v.train(corpus, params, par, &mut |_| Control::Continue)
        .expect("train")
}

/// A group of this bench's settings, its throughput the corpus's tokens times the sweeps.
fn group<'a>(c: &'a mut Criterion, name: String, corpus: &Corpus) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(
            (corpus.num_tokens() * ITERATIONS) as u64,
        ));
    group
}

fn sequential(c: &mut Criterion) {
    let corpus = corpus();
    for topics in TOPICS {
        let params = params(topics);
        let mut group = group(c, format!("lda_d{DOCS}_k{topics}"), &corpus);
        for v in variants().iter().filter(|v| !v.is_parallel()) {
            group.bench_function(v.name(), |b| {
                b.iter(|| train(v.as_ref(), &corpus, &params, Par::Seq))
            });
        }
        group.finish();
    }
}

fn master_worker(c: &mut Criterion) {
    let corpus = corpus();
    let mut group = group(c, format!("lda_d{DOCS}_{WORKERS}workers"), &corpus);
    for topics in TOPICS {
        let params = params(topics);
        for v in variants().iter().filter(|v| v.is_parallel()) {
            group.bench_with_input(
                BenchmarkId::new(v.name(), format!("k{topics}")),
                &params,
                |b, params| b.iter(|| train(v.as_ref(), &corpus, params, Par::threads(WORKERS))),
            );
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = parbench_common::bench::criterion_config(env!("CARGO_TARGET_TMPDIR"));
    targets = sequential, master_worker
}
criterion_main!(benches);
