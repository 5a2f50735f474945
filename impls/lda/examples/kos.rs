//! Throughput and final log-likelihood of every variant on the UCI KOS corpus.
//!
//! ```text
//! cargo run --release -p lda --example kos -- /work/shared/data [iterations] [topics] [workers] [repeats]
//! ```
//!
//! Reads `docword.kos.txt` and `vocab.kos.txt` from the given directory. The likelihood is not
//! evaluated during the timed run (`likelihood_every = 0`). With `repeats > 1` each line is the
//! run with the best throughput (the others are disturbed by whatever else the machine runs).

use lda::{variant, Control, Corpus, DeltaEncoding, InnerSampler, LdaParams, Par};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(args.get(1).map_or("/work/shared/data", String::as_str));
    let iterations: usize = args.get(2).map_or(Ok(100), |s| s.parse())?;
    let topics: usize = args.get(3).map_or(Ok(20), |s| s.parse())?;
    let workers: usize = args.get(4).map_or(Ok(2), |s| s.parse())?;
    let repeats: usize = args.get(5).map_or(Ok(1), |s| s.parse())?;
    if workers == 0 {
        return Err("workers must be at least 1".into());
    }
    let corpus = Corpus::read_uci(
        &dir.join("docword.kos.txt"),
        Some(&dir.join("vocab.kos.txt")),
    )?;
    println!(
        "KOS: D = {}, W = {}, N = {} tokens; K = {topics}, {iterations} iterations",
        corpus.num_docs(),
        corpus.num_words(),
        corpus.num_tokens()
    );
    let base = LdaParams {
        topics,
        iterations,
        likelihood_every: 0,
        seed: 42,
        ..LdaParams::default()
    };
    let share = corpus.num_docs().div_ceil(workers);
    let runs: Vec<(&str, &str, LdaParams)> = vec![
        ("sequential", "", base.clone()),
        ("sparse", "", base.clone()),
        (
            "sync",
            "checkpoint = share / 10",
            LdaParams {
                checkpoint_docs: share / 10,
                ..base.clone()
            },
        ),
        (
            "sync",
            "sparse inner, checkpoint = share / 10",
            LdaParams {
                checkpoint_docs: share / 10,
                inner: InnerSampler::Sparse,
                ..base.clone()
            },
        ),
        (
            "async",
            "dense, blocking, checkpoint = share / 10",
            LdaParams {
                checkpoint_docs: share / 10,
                ..base.clone()
            },
        ),
        (
            "async",
            "sparse delta, non-blocking, checkpoint = share / 10",
            LdaParams {
                checkpoint_docs: share / 10,
                delta: DeltaEncoding::Sparse,
                non_blocking: true,
                ..base.clone()
            },
        ),
        (
            "async",
            "sparse inner, dense, non-blocking, checkpoint = share / 10",
            LdaParams {
                checkpoint_docs: share / 10,
                non_blocking: true,
                inner: InnerSampler::Sparse,
                ..base.clone()
            },
        ),
    ];
    println!(
        "{:<11} {:<58} {:>14} {:>16} {:>9} {:>9} {:>9}",
        "variant", "options", "tokens/s", "final loglik", "sample s", "send s", "wait s"
    );
    for (name, options, params) in runs {
        let sampler = variant(name).ok_or("unknown variant")?;
        let mut best: Option<lda::LdaOutput> = None;
        for _ in 0..repeats.max(1) {
            let out = sampler.train(&corpus, &params, Par::threads(workers), &mut |_| {
                Control::Continue
            })?;
            if best
                .as_ref()
                .is_none_or(|b| out.tokens_per_second > b.tokens_per_second)
            {
                best = Some(out);
            }
        }
        let out = best.ok_or("no run")?;
        let sum = |f: fn(&lda::WorkerStats) -> f64| out.workers.iter().map(f).sum::<f64>();
        println!(
            "{:<11} {:<58} {:>14.0} {:>16.1} {:>9.3} {:>9.3} {:>9.3}",
            name,
            options,
            out.tokens_per_second,
            out.final_loglik,
            sum(|w| w.sampling_seconds),
            sum(|w| w.sending_seconds),
            sum(|w| w.waiting_seconds),
        );
        if !out.invariants.holds() {
            println!("  INVARIANT VIOLATED: {:?}", out.invariants.violations);
        }
    }
    Ok(())
}
