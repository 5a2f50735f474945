//! Temporary: times the shared preparation phases alone (min over REPS).
use sinkhorn::distance::{precompute, query_distances, Pool, WordSet};
use sinkhorn::generate::{generate, SyntheticSpec};
use sinkhorn::Par;
use std::time::Instant;

fn main() {
    let threads: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2);
    let reps: usize = std::env::var("REPS").ok().and_then(|r| r.parse().ok()).unwrap_or(30);
    let problem = generate(&SyntheticSpec::paper()).expect("paper spec is valid");
    let words = WordSet::used(problem.docs_by_word());
    let pool = Pool::new(Par::threads(threads));
    let (mut td, mut tp) = (f64::INFINITY, f64::INFINITY);
    let mut sum = 0.0;
    for _ in 0..reps {
        let t = Instant::now();
        let m = query_distances(&problem, &words.words, &pool);
        td = td.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let k = precompute(&m, problem.query(), 10.0, &pool);
        tp = tp.min(t.elapsed().as_secs_f64());
        sum += m[12345] + k.kt[777] + k.km[999] + k.kr[4321];
    }
    let flops = 2.0 * words.words.len() as f64 * problem.query().len() as f64 * problem.dim() as f64;
    println!(
        "{threads}t distance {:.2} ms ({:.1} GFLOP/s)  precompute {:.2} ms   [{sum:e}]",
        td * 1e3,
        flops / td / 1e9,
        tp * 1e3
    );
}
