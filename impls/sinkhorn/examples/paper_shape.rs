//! Times every variant at the paper's shape (V 100k, d 300, N 5000, 19-word query, 15 iterations).
//! `cargo run --release -p sinkhorn --example paper_shape -- [threads] [variant...]`

use sinkhorn::generate::{generate, SyntheticSpec};
use sinkhorn::{variants, Control, Par, SinkhornParams};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(2);
    let only: Vec<&str> = args.iter().skip(1).map(|s| s.as_str()).collect();
    let t = Instant::now();
    // QUERY_WORDS=n changes the query length v_s (Fig. 10 sweeps it).
    let mut spec = SyntheticSpec::paper();
    if let Some(n) = std::env::var("QUERY_WORDS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        spec.query_words = n;
    }
    let problem = generate(&spec).expect("paper spec is valid");
    println!(
        "generate: {:.1} ms, nnz {}, used words {}",
        t.elapsed().as_secs_f64() * 1e3,
        problem.nnz(),
        (0..problem.vocab())
            .filter(|&w| !problem.docs_by_word().row(w).0.is_empty())
            .count()
    );
    // ITERS=n changes the iteration count (the loop's cost per iteration, and what is not).
    let max_iter = std::env::var("ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let params = SinkhornParams {
        lambda: 10.0,
        max_iter,
        tol: None,
    };
    let mut reference: Option<Vec<f64>> = None;
    for v in variants() {
        if !only.is_empty() && !only.contains(&v.name()) {
            continue;
        }
        let reps = if v.name() == "dense" {
            1
        } else {
            std::env::var("REPS")
                .ok()
                .and_then(|r| r.parse().ok())
                .unwrap_or(5)
        };
        let mut min_phase: Vec<(&str, f64)> = Vec::new();
        let mut best = None::<sinkhorn::WmdOutput>;
        let mut best_t = f64::INFINITY;
        for _ in 0..reps {
            let t = Instant::now();
            let out = v
                .solve(&problem, &params, Par::threads(threads), &mut |_| {
                    Control::Continue
                })
                .expect("solve");
            let el = t.elapsed().as_secs_f64();
            for &(n, p) in &out.phases.0 {
                match min_phase.iter_mut().find(|(m, _)| *m == n) {
                    Some((_, q)) => *q = q.min(p),
                    None => min_phase.push((n, p)),
                }
            }
            if el < best_t {
                best_t = el;
                best = Some(out);
            }
        }
        let out = best.expect("ran");
        let phases: Vec<String> = min_phase
            .iter()
            .map(|(n, s)| format!("{n} {:.2} ms", s * 1e3))
            .collect();
        let diff = reference.as_ref().map_or(0.0, |r| {
            r.iter()
                .zip(&out.distances)
                .map(|(a, b)| ((a - b) / a).abs())
                .fold(0.0, f64::max)
        });
        println!(
            "{:>10} {threads}t: {:8.2} ms  {:6.2} GFLOP/s  max rel diff {:.1e}  [{}]",
            v.name(),
            best_t * 1e3,
            out.flops / best_t / 1e9,
            diff,
            phases.join(", ")
        );
        if reference.is_none() {
            reference = Some(out.distances);
        }
    }
}
