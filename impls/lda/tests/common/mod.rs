//! Helpers shared by the LDA test binaries.
#![allow(dead_code)] // each test binary uses a different subset

use lda::{
    Control, Corpus, DeltaEncoding, InnerSampler, IterationReport, LdaOutput, LdaParams,
    LdaSampler, Par,
};

pub fn quiet(_: &IterationReport) -> Control {
    Control::Continue
}

/// A run with `workers` worker threads (the sequential variants ignore them).
pub fn train(v: &dyn LdaSampler, corpus: &Corpus, params: &LdaParams, workers: usize) -> LdaOutput {
    v.train(corpus, params, Par::threads(workers), &mut quiet)
        .unwrap_or_else(|e| panic!("{}: {e}", v.name()))
}

/// Every option combination a variant has: one for the sequential ones; inner sampler for
/// `sync`; inner sampler x delta encoding x blocking for `async`.
pub fn option_sets(v: &dyn LdaSampler, base: &LdaParams) -> Vec<LdaParams> {
    let mut sets = Vec::new();
    match v.name() {
        "sync" => {
            for inner in [InnerSampler::Standard, InnerSampler::Sparse] {
                sets.push(LdaParams {
                    inner,
                    ..base.clone()
                });
            }
        }
        "async" => {
            for inner in [InnerSampler::Standard, InnerSampler::Sparse] {
                for delta in [DeltaEncoding::Dense, DeltaEncoding::Sparse] {
                    for non_blocking in [false, true] {
                        sets.push(LdaParams {
                            inner,
                            delta,
                            non_blocking,
                            ..base.clone()
                        });
                    }
                }
            }
        }
        _ => sets.push(base.clone()),
    }
    sets
}

pub fn describe(v: &dyn LdaSampler, p: &LdaParams, workers: usize) -> String {
    format!(
        "{} (workers {}, checkpoint {}, inner {}, delta {}, non-blocking {})",
        v.name(),
        workers,
        p.checkpoint_docs,
        p.inner.name(),
        p.delta.name(),
        p.non_blocking
    )
}

/// Whether a variant's run is fixed by its seed (and worker count): every variant but `async`,
/// whose merges depend on thread timing. Quality claims are made on these, one seed each.
pub fn is_deterministic(v: &dyn LdaSampler) -> bool {
    v.name() != "async"
}

/// Checks an `async` run by what it guarantees whatever the timing: after every merge the master
/// recounted its tables from every worker's latest assignments and found them equal (one check
/// per merge plus one of the final state, no violation), the final state's counts are those of
/// its assignments, and every token was resampled once per iteration by its `workers`.
pub fn assert_async_conserves_counts(
    what: &str,
    corpus: &Corpus,
    params: &LdaParams,
    workers: usize,
    out: &LdaOutput,
) {
    assert!(params.verify_invariants, "{what}: run without the recounts");
    assert!(
        out.invariants.holds(),
        "{what}: {:?}",
        out.invariants.violations
    );
    assert_eq!(out.workers.len(), workers, "{what}");
    assert!(out.merges >= workers, "{what}: {} merges", out.merges);
    assert_eq!(
        out.invariants.checks,
        out.merges + 1,
        "{what}: one recount per merge and one of the final state"
    );
    assert_eq!(out.state.check_counts(corpus), Ok(()), "{what}");
    assert_eq!(
        out.tokens_sampled,
        (out.iterations * corpus.num_tokens()) as u64,
        "{what}: every token resampled once per iteration"
    );
    assert_eq!(out.iterations, params.iterations, "{what}");
}
