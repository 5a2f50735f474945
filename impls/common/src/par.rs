//! Parallelism is a parameter of every kernel, never global state.

/// A pool of the requested threads could not be started (the system refused threads): an
/// error for the caller to report, never a silent fall back to fewer threads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot start a pool of {threads} threads: {reason}")]
pub struct PoolError {
    /// The threads asked for.
    pub threads: usize,
    /// What the thread pool builder said.
    pub reason: String,
}

/// How many threads a kernel may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Par {
    /// Run on the calling thread.
    Seq,
    /// Run on a rayon pool of this many threads (at least 1).
    Rayon(usize),
}

impl Par {
    /// `Par::Seq` for one thread, `Par::Rayon(n)` otherwise.
    pub fn threads(n: usize) -> Par {
        if n <= 1 {
            Par::Seq
        } else {
            Par::Rayon(n)
        }
    }

    /// Number of threads this setting allows.
    pub fn degree(self) -> usize {
        match self {
            Par::Seq => 1,
            Par::Rayon(n) => n.max(1),
        }
    }

    /// A rayon pool of `self.degree()` threads (`None` when sequential), or why it cannot be
    /// started. Entry points (a solve, a training run, a harness point) call this first, so a
    /// system that refuses the threads is reported as an error before any work.
    pub fn pool(self) -> Result<Option<rayon::ThreadPool>, PoolError> {
        match self {
            Par::Seq => Ok(None),
            Par::Rayon(n) => rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build()
                .map(Some)
                .map_err(|e| PoolError {
                    threads: n.max(1),
                    reason: e.to_string(),
                }),
        }
    }

    /// Runs `f` inside a pool of `self.degree()` threads (or directly when sequential), so that
    /// rayon calls inside `f` use exactly the requested number of threads. Building a pool costs
    /// tens of microseconds, negligible next to the kernels that call this. The callers are leaf
    /// kernels without an error path: their entry points check [`Par::pool`] first, so a pool
    /// refused here (the system ran out of threads since) stops the program with the reason
    /// rather than silently running on one thread.
    pub fn install<R: Send>(self, f: impl FnOnce() -> R + Send) -> R {
        match self.pool() {
            Ok(None) => f(),
            Ok(Some(pool)) => pool.install(f),
            Err(e) => panic!("{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_has_exactly_the_threads_asked_for_and_sequential_needs_none() {
        assert!(Par::Seq.pool().unwrap().is_none());
        let pool = Par::Rayon(3)
            .pool()
            .unwrap()
            .expect("a pool for three threads");
        assert_eq!(pool.current_num_threads(), 3);
        assert_eq!(Par::Rayon(3).install(rayon::current_num_threads), 3);
        assert_eq!(Par::Seq.degree(), 1);
    }

    #[test]
    fn a_refused_pool_reads_as_what_was_asked_and_why() {
        let e = PoolError {
            threads: 4,
            reason: "Resource temporarily unavailable".into(),
        };
        assert_eq!(
            e.to_string(),
            "cannot start a pool of 4 threads: Resource temporarily unavailable"
        );
    }
}
