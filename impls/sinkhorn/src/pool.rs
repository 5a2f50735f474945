//! The threads of one solve, shared by the parallel phases of every variant.

use parbench_common::par::PoolError;
use parbench_common::Par;

/// The threads of one solve: a rayon pool built once (parallel regions then cost an `install`,
/// not a pool construction each), or nothing for a sequential run.
pub struct Pool {
    pool: Option<std::sync::Arc<rayon::ThreadPool>>,
    threads: usize,
}

impl Pool {
    /// A pool of `par.degree()` threads, or why the system would not start them (an error,
    /// never a silent single thread).
    pub fn new(par: Par) -> Result<Pool, PoolError> {
        let pool = Par::threads(par.degree()).pool()?;
        let threads = if pool.is_some() { par.degree() } else { 1 };
        Ok(Pool { pool, threads })
    }

    /// Threads available (1 when sequential).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `op` on the calling thread with a scope whose spawned tasks run on the pool's threads
    /// (rayon's global pool when sequential, so a sequential caller should spawn nothing and not
    /// call this): for a persistent parallel region where the caller is one of the workers.
    pub fn in_place_scope<'s, R>(&self, op: impl FnOnce(&rayon::Scope<'s>) -> R) -> R {
        match &self.pool {
            Some(pool) => pool.in_place_scope(op),
            None => rayon::in_place_scope(op),
        }
    }

    /// Runs `f` inside the pool (or directly when sequential).
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}
