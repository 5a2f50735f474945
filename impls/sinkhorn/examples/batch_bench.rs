//! A batch of queries at the paper's shape: 16 queries of 19 Zipf-drawn words (the generator's
//! law) solved one at a time (`solve` per query) and as one batch (`solve_batch`), alternating,
//! best of `REPS`, with the per-query time of each and their ratio.
//! `REPS=3 cargo run --release -p sinkhorn --example batch_bench -- [threads] [f32]`

use parbench_common::rng::{Rng, Zipf};
use sinkhorn::generate::{generate, SyntheticSpec};
use sinkhorn::{Control, DocMajorFused, DocMajorFusedF32, Par, SinkhornParams, WmdSolver};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let f32_mode = args.next().is_some_and(|a| a == "f32");
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let spec = SyntheticSpec::paper();
    let mut problem = generate(&spec).expect("paper spec is valid");
    let zipf = Zipf::new(spec.vocab, spec.zipf_exponent);
    let mut rng = Rng::new(7);
    let queries: Vec<Vec<(u32, f64)>> = (0..16)
        .map(|_| {
            let mut words: Vec<u32> = Vec::new();
            while words.len() < spec.query_words {
                let w = zipf.sample(&mut rng) as u32;
                if !words.contains(&w) {
                    words.push(w);
                }
            }
            let weight = 1.0 / words.len() as f64;
            words.into_iter().map(|w| (w, weight)).collect()
        })
        .collect();
    let solver: Box<dyn WmdSolver> = if f32_mode {
        Box::new(DocMajorFusedF32::default())
    } else {
        Box::new(DocMajorFused::default())
    };
    solver.prepare(&problem);
    let params = SinkhornParams {
        lambda: 10.0,
        max_iter: 15,
        tol: None,
    };
    let par = Par::threads(threads);
    let (mut alone, mut batch) = (f64::INFINITY, f64::INFINITY);
    let mut checksum = 0.0;
    for _ in 0..reps {
        let t = Instant::now();
        for q in &queries {
            problem.set_query(q.clone()).expect("a valid query");
            let out = solver
                .solve(&problem, &params, par, &mut |_| Control::Continue)
                .expect("solves");
            checksum += out.distances[0];
        }
        alone = alone.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let outs = solver
            .solve_batch(&mut problem, &queries, &params, par)
            .expect("solves");
        batch = batch.min(t.elapsed().as_secs_f64());
        checksum += outs.iter().map(|o| o.distances[0]).sum::<f64>();
    }
    let n = queries.len() as f64;
    println!(
        "{} {threads}t: alone {:.1} ms/query, batch {:.1} ms/query, {:.2}x  [checksum {checksum:e}]",
        solver.name(),
        alone / n * 1e3,
        batch / n * 1e3,
        alone / batch
    );
}
