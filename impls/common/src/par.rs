//! Parallelism is a parameter of every kernel, never global state.

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

    /// Runs `f` inside a pool of `self.degree()` threads (or directly when sequential), so that
    /// rayon calls inside `f` use exactly the requested number of threads. Building a pool costs
    /// tens of microseconds, negligible next to the kernels that call this.
    pub fn install<R: Send>(self, f: impl FnOnce() -> R + Send) -> R {
        match self {
            Par::Seq => f(),
            Par::Rayon(n) => match rayon::ThreadPoolBuilder::new()
                .num_threads(n.max(1))
                .build()
            {
                Ok(pool) => pool.install(f),
                // A pool that cannot be built (no threads left) still gives a correct answer
                // on the caller's thread.
                Err(_) => f(),
            },
        }
    }
}
