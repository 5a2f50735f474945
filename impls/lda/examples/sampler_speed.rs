//! Tokens per second and final log-likelihood of the one-thread samplers (`sparse`,
//! `sequential`, `mh`) on KOS at K = 20, 1000 and 10,000, in one run.
//!
//! ```text
//! cargo run --release -p lda --example sampler_speed -- [DATA_DIR] [ITERATIONS] [TOPICS,...] [MH_STEPS,...] [SAMPLERS,...]
//! ```
//!
//! Defaults: `/work/shared/data`, 5 iterations, `20,1000,10000`, `2` (extra step counts add
//! `mh/<steps>` rows), `sparse,sequential,mh` (the first one listed is the `vs` column's base).
//! `PARBENCH_DOCS=N` keeps the first N documents. With `PARBENCH_TRACE=1` the log-likelihood is evaluated after every iteration, and each row
//! also gives the sampling time (evaluations taken out) at which the sampler first came within 1%
//! of the best final log-likelihood at that K (a time-to-quality column). Every run starts from the same seeded state; the likelihood is not
//! evaluated inside the timed run. At K = 10,000 `sequential` (O(K) per token) runs one
//! iteration only, and its tokens/s is from that one.

use lda::{
    variant, Control, Corpus, LdaParams, LdaSampler, MetropolisHastings, Par,
    WarpMetropolisHastings,
};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(args.get(1).map_or("/work/shared/data", String::as_str));
    let iterations: usize = args.get(2).map_or(Ok(5), |s| s.parse())?;
    let topics: Vec<usize> = args
        .get(3)
        .map_or("20,1000,10000", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let steps: Vec<usize> = args
        .get(4)
        .map_or("2", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let only: Vec<String> = args
        .get(5)
        .map_or("sparse,sequential,mh", String::as_str)
        .split(',')
        .map(String::from)
        .collect();
    let mut corpus = Corpus::read_uci(&dir.join("docword.kos.txt"), None)?;
    // PARBENCH_DOCS=N keeps the first N documents (the quick runs' cut).
    if let Some(n) = std::env::var("PARBENCH_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        let docs = corpus.docs().iter().take(n).cloned().collect();
        corpus = Corpus::new(docs, corpus.vocab().to_vec(), corpus.num_words())?;
    }
    println!(
        "KOS: D = {}, W = {}, N = {} tokens; {iterations} iterations, one thread",
        corpus.num_docs(),
        corpus.num_words(),
        corpus.num_tokens()
    );
    println!(
        "{:>6} {:>10} {:>6} {:>12} {:>10} {:>16} {:>10}",
        "K", "sampler", "iters", "tokens/s", "seconds", "final loglik", "vs sparse"
    );
    let trace = std::env::var("PARBENCH_TRACE").is_ok_and(|v| v == "1");
    for &k in &topics {
        let mut rows = Vec::new();
        let mut samplers: Vec<(String, Box<dyn LdaSampler>)> = Vec::new();
        for name in &only {
            if let Some(steps) = name.strip_prefix("warp/") {
                let steps = steps.parse()?;
                samplers.push((name.clone(), Box::new(WarpMetropolisHastings { steps })));
                continue;
            }
            if name != "mh" {
                let v = variant(name).ok_or_else(|| format!("unknown sampler {name}"))?;
                samplers.push((name.clone(), v));
                continue;
            }
            for &s in &steps {
                let name = if s == lda::metropolis::DEFAULT_STEPS {
                    "mh".to_string()
                } else {
                    format!("mh/{s}")
                };
                samplers.push((name, Box::new(MetropolisHastings { steps: s })));
            }
        }
        let mut sparse_rate = None;
        for (name, sampler) in &samplers {
            let iters = if name == "sequential" && k >= 10_000 {
                1
            } else {
                iterations
            };
            let params = LdaParams {
                topics: k,
                iterations: iters,
                likelihood_every: usize::from(trace),
                seed: 42,
                ..LdaParams::default()
            };
            // One thread, as the header says (sync and async, if named, get one worker).
            let out = sampler.train(&corpus, &params, Par::Seq, &mut |_| Control::Continue)?;
            let rate = out.tokens_per_second;
            let sparse = *sparse_rate.get_or_insert(rate);
            // Sampling seconds at each evaluation: the clock minus the evaluations so far.
            let mut evals = 0.0;
            let curve: Vec<(f64, f64)> = out
                .loglik_trace
                .iter()
                .map(|p| {
                    evals += p.eval_seconds;
                    (p.elapsed_seconds - evals, p.loglik)
                })
                .collect();
            let line = format!(
                "{k:>6} {name:>10} {iters:>6} {rate:>12.0} {:>10.3} {:>16.1} {:>9.2}x",
                out.train_seconds - evals,
                out.final_loglik,
                rate / sparse
            );
            println!("{line}");
            rows.push((line, curve, out.final_loglik));
        }
        if trace {
            let best = rows.iter().map(|r| r.2).fold(f64::NEG_INFINITY, f64::max);
            let target = best - 0.01 * best.abs();
            println!("  K = {k}: sampling seconds to reach {target:.1} (1% below the best final):");
            for (line, curve, _) in &rows {
                let name = line.split_whitespace().nth(1).unwrap_or("?");
                match curve.iter().find(|p| p.1 >= target) {
                    Some(p) => println!("  {name:>10} {:>8.3} s", p.0),
                    None => println!("  {name:>10}    never"),
                }
            }
        }
    }
    Ok(())
}
