//! `sync` and `async` across the ranks of a communicator (here the in-process backend, the same
//! code path MPI takes): every message crosses as bytes, the master on rank 0.

use lda::{
    generate, variant, Corpus, DeltaEncoding, InnerSampler, LdaError, LdaOutput, LdaParams,
    LdaSampler, SyntheticSpec,
};
use parbench_common::comm::threads::run_threads;
use parbench_common::comm::Communicator;

mod common;
use common::*;

fn corpus() -> Corpus {
    let s = generate(&SyntheticSpec {
        docs: 41,
        words: 31,
        topics: 4,
        min_len: 3,
        max_len: 30,
        seed: 11,
        ..SyntheticSpec::default()
    })
    .unwrap();
    let mut docs = s.corpus.docs().to_vec();
    docs[5].clear();
    Corpus::new(docs, s.corpus.vocab().to_vec(), s.corpus.num_words()).unwrap()
}

/// Runs `name` on `ranks` in-process ranks; returns the master's output (and checks that every
/// other rank returned `None`).
fn on_ranks(name: &str, corpus: &Corpus, params: &LdaParams, ranks: usize) -> LdaOutput {
    let v = variant(name).unwrap();
    let runs = run_threads(ranks, |comm: &dyn Communicator| {
        v.train_on_ranks(corpus, params, comm, &mut quiet)
    })
    .unwrap_or_else(|f| panic!("{name}: rank {} failed: {}", f.rank, f.error));
    let mut runs = runs.into_iter().map(|r| r.value);
    let master = runs.next().unwrap().expect("rank 0 holds the output");
    assert!(runs.all(|r| r.is_none()), "only rank 0 returns the output");
    master
}

fn params() -> LdaParams {
    LdaParams {
        topics: 5,
        iterations: 4,
        checkpoint_docs: 3,
        likelihood_every: 2,
        verify_invariants: true,
        seed: 9,
        ..LdaParams::default()
    }
}

#[test]
fn sync_across_ranks_equals_sync_on_threads_bit_for_bit() {
    let corpus = corpus();
    for workers in [1, 2, 3] {
        for inner in [InnerSampler::Standard, InnerSampler::Sparse] {
            let p = LdaParams { inner, ..params() };
            let threads = train(variant("sync").unwrap().as_ref(), &corpus, &p, workers);
            // The workers are the ranks after the master.
            let ranks = on_ranks("sync", &corpus, &p, workers + 1);
            let what = describe(&lda::SyncMasterWorker, &p, workers);
            assert_eq!(ranks.workers.len(), workers, "{what}");
            assert_eq!(ranks.state, threads.state, "{what}");
            assert_eq!(ranks.final_loglik.to_bits(), threads.final_loglik.to_bits());
            assert_eq!(ranks.merges, threads.merges);
            assert_eq!(ranks.iterations, threads.iterations);
            assert!(
                ranks.invariants.holds(),
                "{:?}",
                ranks.invariants.violations
            );
            let (a, b): (Vec<_>, Vec<_>) = ranks
                .workers
                .iter()
                .zip(&threads.workers)
                .map(|(r, t)| {
                    (
                        (r.tokens_sampled, r.exchanges),
                        (t.tokens_sampled, t.exchanges),
                    )
                })
                .unzip();
            assert_eq!(a, b, "per-worker tokens and exchanges");
            let trace = |o: &LdaOutput| -> Vec<(usize, u64)> {
                o.loglik_trace
                    .iter()
                    .map(|t| (t.iteration, t.loglik.to_bits()))
                    .collect()
            };
            assert_eq!(trace(&ranks), trace(&threads));
        }
    }
}

#[test]
fn async_with_one_blocking_worker_across_ranks_equals_threads() {
    let corpus = corpus();
    for delta in [DeltaEncoding::Dense, DeltaEncoding::Sparse] {
        let p = LdaParams { delta, ..params() };
        let threads = train(variant("async").unwrap().as_ref(), &corpus, &p, 1);
        let ranks = on_ranks("async", &corpus, &p, 2);
        assert_eq!(ranks.state, threads.state, "delta {}", delta.name());
    }
}

#[test]
fn every_async_option_conserves_counts_across_ranks() {
    let corpus = corpus();
    for workers in [2, 3] {
        for p in option_sets(&lda::AsyncMasterWorker, &params()) {
            let out = on_ranks("async", &corpus, &p, workers + 1);
            let what = describe(&lda::AsyncMasterWorker, &p, workers);
            assert_eq!(out.workers.len(), workers, "{what}");
            assert!(
                out.invariants.holds(),
                "{what}: {:?}",
                out.invariants.violations
            );
            // A recount after every merge plus the final one.
            assert!(out.invariants.checks > out.merges, "{what}");
            assert_eq!(out.iterations, p.iterations, "{what}");
            assert_eq!(
                out.tokens_sampled,
                (corpus.num_tokens() * p.iterations) as u64,
                "{what}"
            );
            assert_eq!(out.state.check_counts(&corpus), Ok(()), "{what}");
        }
    }
}

#[test]
fn a_launch_without_a_worker_rank_is_refused() {
    // The workers are the ranks after the master, so only a job of one rank cannot run.
    let corpus = corpus();
    for name in ["sync", "async"] {
        let v = variant(name).unwrap();
        let out = run_threads(1, |comm: &dyn Communicator| {
            v.train_on_ranks(&corpus, &params(), comm, &mut quiet)
        });
        let failure = out.unwrap_err();
        assert!(
            matches!(failure.error, LdaError::BadLaunch { ranks: 1 }),
            "{name}: {:?}",
            failure.error
        );
        assert!(failure.error.to_string().contains("mpirun -np"));
    }
    let out = run_threads(2, |comm: &dyn Communicator| {
        lda::Sequential.train_on_ranks(&corpus, &params(), comm, &mut quiet)
    });
    assert!(matches!(
        out.unwrap_err().error,
        LdaError::NotMasterWorker {
            variant: "sequential"
        }
    ));
}

#[test]
fn a_worker_rank_that_fails_stops_the_master_instead_of_hanging() {
    let corpus = corpus();
    for name in ["sync", "async"] {
        let v = variant(name).unwrap();
        let out = run_threads(3, |comm: &dyn Communicator| {
            if comm.rank() == 2 {
                return Err(LdaError::WorkerFailed {
                    worker: 1,
                    reason: "injected".into(),
                });
            }
            v.train_on_ranks(&corpus, &params(), comm, &mut quiet)
        });
        let failure = out.unwrap_err();
        assert_eq!(failure.rank, 2, "{name}: the injected failure comes first");
    }
}
