//! A fixed amount of work timed before every point's runs, so that a time can be read as "so
//! many calibrations" rather than seconds: a host that is slower today (another tenant on the
//! core, a lower clock, a smaller machine of the same kind) slows the calibration as much as
//! the runs beside it, while a variant that does more work slows only itself.
//!
//! The work is arithmetic on data that stays in a core's L2 (a triad over three 64 KiB arrays,
//! and independent multiply-add chains), split over the point's threads, so a second core
//! taken from a two-thread run is taken from its calibration too. A triad over main memory
//! was tried first and dropped: on a shared host its time moved by 30% from one point to the
//! next, and the check divides every time by it. One calibration takes about 3 ms; the
//! executor takes the fastest of nine, and the check divides by the median over a whole run.

use parbench_common::Par;
use rayon::prelude::*;
use std::hint::black_box;
use std::time::Instant;

/// Elements of each triad array (64 KiB per array of f64: three fit in any L2 of 256 KiB).
const TRIAD_LEN: usize = 1 << 13;
/// Triad passes per calibration.
const TRIAD_PASSES: usize = 60;
/// Multiply-add steps per lane of each thread's share of the arithmetic part.
const FMA_STEPS: usize = 400_000;
/// Independent chains per thread, enough to fill the pipes without vector code.
const LANES: usize = 8;

/// The arrays the triad streams, allocated once per point and reused by every calibration.
pub struct Calibration {
    par: Par,
    pool: Option<std::sync::Arc<rayon::ThreadPool>>,
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Calibration {
    /// A calibration on `threads` threads (the point's), or why the pool cannot start.
    pub fn new(threads: usize) -> Result<Calibration, parbench_common::par::PoolError> {
        let par = Par::threads(threads);
        Ok(Calibration {
            par,
            pool: par.pool()?,
            a: vec![0.0; TRIAD_LEN],
            b: vec![1.0; TRIAD_LEN],
            c: vec![2.0; TRIAD_LEN],
        })
    }

    /// Seconds the fixed work took now.
    pub fn measure(&mut self) -> f64 {
        let threads = self.par.degree();
        let (a, b, c) = (&mut self.a, &self.b, &self.c);
        let mut work = || {
            let chunk = TRIAD_LEN.div_ceil(threads);
            for pass in 0..TRIAD_PASSES {
                let s = 0.5 + pass as f64;
                a.par_chunks_mut(chunk)
                    .zip(b.par_chunks(chunk))
                    .zip(c.par_chunks(chunk))
                    .for_each(|((a, b), c)| {
                        for ((x, y), z) in a.iter_mut().zip(b).zip(c) {
                            *x = y + s * z;
                        }
                    });
                black_box(&mut *a);
            }
            let total: f64 = (0..threads)
                .into_par_iter()
                .map(|t| multiply_add_chains(t as f64))
                .sum();
            black_box(total);
        };
        let start = Instant::now();
        match &self.pool {
            Some(pool) => pool.install(work),
            None => work(),
        }
        start.elapsed().as_secs_f64()
    }
}

/// `LANES` independent chains of `FMA_STEPS` multiply-adds each (a plain multiply and add, so
/// the work is the same with and without FMA hardware).
fn multiply_add_chains(seed: f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    for (i, a) in acc.iter_mut().enumerate() {
        *a = seed + i as f64 * 1e-3;
    }
    let (m, k) = (black_box(0.999_999), black_box(1e-7));
    for _ in 0..FMA_STEPS {
        for a in &mut acc {
            *a = *a * m + k;
        }
    }
    acc.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_does_its_work_on_the_threads_asked_for() {
        for threads in [1, 2] {
            let mut cal = Calibration::new(threads).unwrap();
            let t = cal.measure();
            assert!(t > 0.0 && t.is_finite());
            // The triad ran: every element holds b + s * c of the last pass.
            let s = 0.5 + (TRIAD_PASSES - 1) as f64;
            assert!(cal.a.iter().all(|&x| x == 1.0 + s * 2.0));
        }
        let chains = multiply_add_chains(1.0);
        assert!(chains.is_finite() && chains > 0.0);
    }
}
