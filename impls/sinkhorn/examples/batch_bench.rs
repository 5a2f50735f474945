//! A batch of queries at the paper's shape: 16 queries of 19 words drawn as the generator draws
//! its query solved one at a time (`solve` per query) and as one batch (`solve_batch`), alternating,
//! best of `REPS`, with the per-query time of each and their ratio.
//! `REPS=3 cargo run --release -p sinkhorn --example batch_bench -- [threads] [f32]`

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
    let queries = sinkhorn::generate::queries(&spec, 16);
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
