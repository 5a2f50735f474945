//! Times the shared preparation phases alone at the paper's shape: `distance` (the query's
//! distances to the 37.9k used words) and `precompute` (`K`, `K / r`, `K .* M`), min over `REPS`
//! runs, with the distance kernel's GFLOP/s; then the distance kernel on 64 words repeated
//! (rows in cache), which shows its compute-bound speed; then both phases again in f32.
//! `REPS=30 cargo run --release -p sinkhorn --example prep_bench -- [threads]`

use sinkhorn::distance::query_distances;
use sinkhorn::generate::{generate, SyntheticSpec};
use sinkhorn::pool::Pool;
use sinkhorn::precompute::{precompute, WordSet};
use sinkhorn::problem::WmdProblem;
use sinkhorn::real::Real;
use sinkhorn::Par;
use std::time::Instant;

fn main() {
    let threads: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2);
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(30);
    let problem = generate(&SyntheticSpec::paper()).expect("paper spec is valid");
    let words = WordSet::used(problem.docs_by_word());
    let pool = Pool::new(Par::threads(threads)).expect("a pool of the requested threads");
    let flops = 2.0 * (words.words.len() * problem.query().len() * problem.dim()) as f64;
    let (distance, prep, mut checksum) = time_phases::<f64>(&problem, &words, &pool, reps);
    let hot_words: Vec<u32> = (0..words.words.len() as u32).map(|i| i % 64).collect();
    let mut hot = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        let m = query_distances::<f64>(&problem, &hot_words, &pool);
        hot = hot.min(t.elapsed().as_secs_f64());
        checksum += m[5];
    }
    println!(
        "{threads}t: distance {:.2} ms ({:.1} GFLOP/s; rows in cache {:.2} ms, {:.1} GFLOP/s), \
         precompute {:.2} ms  [checksum {checksum:e}]",
        distance * 1e3,
        flops / distance / 1e9,
        hot * 1e3,
        flops / hot / 1e9,
        prep * 1e3,
    );
    let (distance, prep, check) = time_phases::<f32>(&problem, &words, &pool, reps);
    println!(
        "{threads}t f32: distance {:.2} ms ({:.1} GFLOP/s), precompute {:.2} ms  [checksum {check:e}]",
        distance * 1e3,
        flops / distance / 1e9,
        prep * 1e3,
    );
}

/// The minimum times of the `distance` and `precompute` phases in `E` over `reps` runs, and a
/// checksum of what they made (printed, so that nothing is optimized away).
fn time_phases<E: Real>(
    problem: &WmdProblem,
    words: &WordSet,
    pool: &Pool,
    reps: usize,
) -> (f64, f64, f64) {
    let (mut distance, mut prep) = (f64::INFINITY, f64::INFINITY);
    let mut checksum = 0.0;
    for _ in 0..reps {
        let t = Instant::now();
        let m = query_distances::<E>(problem, &words.words, pool);
        distance = distance.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let k = precompute(&m, problem.query(), 10.0, pool);
        prep = prep.min(t.elapsed().as_secs_f64());
        checksum += (m[12345] + k.kt[777] + k.km[999] + k.kr[4321]).to_f64();
    }
    (distance, prep, checksum)
}
