//! Parallelism is a parameter of every kernel, never global state.

use std::cell::RefCell;
use std::sync::Arc;

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

impl PoolError {
    /// `threads` asked for, refused for `reason` (what the system or the pool builder said).
    pub fn refused(threads: usize, reason: impl std::fmt::Display) -> PoolError {
        PoolError {
            threads,
            reason: reason.to_string(),
        }
    }
}

/// For code whose errors are plain messages (a rank body returning `Result<_, String>`).
impl From<PoolError> for String {
    fn from(e: PoolError) -> String {
        e.to_string()
    }
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
    ///
    /// Each calling thread keeps the pools it asked for, one per size, until it ends: a pool
    /// dropped after every run would leave its workers exiting while the next run starts, and a
    /// worker's exit frees its allocator caches into the heap at a moment the scheduler picks.
    /// That made the next run's heap, and with it how much `realloc` copies, a matter of timing:
    /// the binary embeddings reader's count under callgrind moved by 2% between unchanged runs.
    /// Kept per thread, not per process, so that in-process ranks (each on its own thread) still
    /// get pools of their own rather than sharing one.
    pub fn pool(self) -> Result<Option<Arc<rayon::ThreadPool>>, PoolError> {
        thread_local! {
            static POOLS: RefCell<Vec<(usize, Arc<rayon::ThreadPool>)>> = const { RefCell::new(Vec::new()) };
        }
        let n = match self {
            Par::Seq => return Ok(None),
            Par::Rayon(n) => n.max(1),
        };
        POOLS.with(|pools| {
            if let Some((_, pool)) = pools.borrow().iter().find(|(threads, _)| *threads == n) {
                return Ok(Some(Arc::clone(pool)));
            }
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map(Arc::new)
                .map_err(|e| PoolError::refused(n, e))?;
            pools.borrow_mut().push((n, Arc::clone(&pool)));
            Ok(Some(pool))
        })
    }

    /// Runs `f` inside a pool of `self.degree()` threads (or directly when sequential), so that
    /// rayon calls inside `f` use exactly the requested number of threads (the calling thread's
    /// pool of that size, built on its first use). The callers are leaf kernels without an error
    /// path: their entry points check [`Par::pool`] first, so a pool refused here (the system ran
    /// out of threads since) stops the program with the reason rather than silently running on
    /// one thread.
    pub fn install<R: Send>(self, f: impl FnOnce() -> R + Send) -> R {
        match self.pool() {
            Ok(None) => f(),
            Ok(Some(pool)) => pool.install(f),
            Err(e) => panic!("{e}"),
        }
    }
}

/// Starts a worker thread of `scope` running `f`, or says why the system refused it. Kernels that
/// run their own threads (rather than a rayon pool) start every one through this, so a refused
/// thread is an error the run returns, carrying `threads` (the threads the caller asked for in
/// all) and the system's reason, instead of the panic of `std::thread::Scope::spawn`.
pub fn spawn_scoped<'scope, 'env, F, T>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    threads: usize,
    f: F,
) -> Result<std::thread::ScopedJoinHandle<'scope, T>, PoolError>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    std::thread::Builder::new()
        .spawn_scoped(scope, f)
        .map_err(|e| PoolError::refused(threads, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scoped_worker_runs_its_closure_on_another_thread_and_returns_its_value() {
        let caller = std::thread::current().id();
        let mut borrowed = vec![1, 2, 3];
        let (sum, other_thread) = std::thread::scope(|scope| {
            let handle = spawn_scoped(scope, 1, || {
                borrowed.push(4);
                (
                    borrowed.iter().sum::<i32>(),
                    std::thread::current().id() != caller,
                )
            })
            .expect("the system starts one thread");
            handle.join().expect("the closure does not panic")
        });
        assert_eq!(sum, 10);
        assert!(other_thread);
        assert_eq!(borrowed, [1, 2, 3, 4]);
    }

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_refused_scoped_worker_is_an_error_with_the_threads_asked_for_and_the_scope_ends() {
        // A 4 EiB stack exceeds any address space, so the system refuses the thread whatever its
        // limit on thread counts: the path a refused thread takes.
        let huge = std::thread::Builder::new().stack_size(1 << 62);
        let refused = std::thread::scope(|scope| {
            let started = spawn_scoped(scope, 7, || 1).map(|h| h.join());
            let refused = huge
                .spawn_scoped(scope, || 2)
                .map(drop)
                .map_err(|e| PoolError::refused(7, e));
            assert!(matches!(started, Ok(Ok(1))));
            refused
        });
        let e = refused.expect_err("no system gives a thread an address space's worth of stack");
        assert_eq!(e.threads, 7);
        assert!(!e.reason.is_empty());
        assert!(
            e.to_string()
                .starts_with("cannot start a pool of 7 threads: "),
            "{e}"
        );
    }

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
    fn a_thread_keeps_one_pool_a_size_and_another_thread_gets_its_own() {
        let first = Par::Rayon(2).pool().unwrap().expect("a pool");
        let again = Par::Rayon(2).pool().unwrap().expect("a pool");
        assert!(Arc::ptr_eq(&first, &again));
        let other_size = Par::Rayon(3).pool().unwrap().expect("a pool");
        assert!(!Arc::ptr_eq(&first, &other_size));
        assert_eq!(other_size.current_num_threads(), 3);
        let elsewhere = std::thread::scope(|s| {
            s.spawn(|| Par::Rayon(2).pool().unwrap().expect("a pool"))
                .join()
                .unwrap()
        });
        assert!(!Arc::ptr_eq(&first, &elsewhere));
        assert_eq!(elsewhere.current_num_threads(), 2);
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
