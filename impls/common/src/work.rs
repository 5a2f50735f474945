//! The work a run cannot avoid, as the variant's own counters give it: the flops it must do and
//! the bytes it must move. The harness turns it into the least time the run could take on the
//! machine it ran on (a roofline bound from the measured FMA peak and triad bandwidths), so every
//! result can say how far it is from that limit.
//!
//! Bytes come in two kinds, because where they can live decides which bandwidth bounds them:
//! - **streamed** bytes are touched once per run (inputs loaded, outputs written): they come
//!   from memory whatever the caches hold;
//! - **reused** bytes are moved over a working set the run visits again and again (the rows of
//!   `K` every Sinkhorn iteration, the dense matrix a sparse kernel gathers from, the word2vec
//!   model): the working set's size, `reuse_footprint_bytes`, says whether it fits in the
//!   last-level cache, and so whether the cache's bandwidth or memory's bounds them.

/// The precision a run's flops are done in (an f32 FMA unit does twice the f64 lanes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// 32-bit floats.
    F32,
    /// 64-bit floats.
    F64,
}

/// The work one run did that no implementation of the same variant could skip.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Work {
    /// Floating-point operations (an FMA is two).
    pub flops: f64,
    /// What the flops are done in.
    pub precision: Precision,
    /// Bytes read or written once per run.
    pub stream_bytes: f64,
    /// Bytes moved over the reused working set, every pass counted.
    pub reuse_bytes: f64,
    /// Size of that working set.
    pub reuse_footprint_bytes: f64,
    /// Hardware threads the run used (ranks for in-process distributed variants).
    pub threads: usize,
}

/// Names of the result metrics a [`Work`] is stored as; families list `work_*` among their exact
/// metrics, since every one is counted, not timed.
pub const WORK_METRICS: [&str; 6] = [
    "work_flops_f64",
    "work_flops_f32",
    "work_stream_bytes",
    "work_reuse_bytes",
    "work_reuse_footprint_bytes",
    "work_threads",
];

impl Work {
    /// No work: a run that did nothing countable.
    pub fn none(threads: usize) -> Work {
        Work {
            flops: 0.0,
            precision: Precision::F64,
            stream_bytes: 0.0,
            reuse_bytes: 0.0,
            reuse_footprint_bytes: 0.0,
            threads,
        }
    }

    /// The sum of two runs' work, done one after the other on `self`'s threads (the footprint is
    /// the larger working set; precision is `self`'s unless `self` did no flops).
    pub fn then(&self, next: &Work) -> Work {
        Work {
            flops: self.flops + next.flops,
            precision: if self.flops > 0.0 {
                self.precision
            } else {
                next.precision
            },
            stream_bytes: self.stream_bytes + next.stream_bytes,
            reuse_bytes: self.reuse_bytes + next.reuse_bytes,
            reuse_footprint_bytes: self.reuse_footprint_bytes.max(next.reuse_footprint_bytes),
            threads: self.threads,
        }
    }

    /// The work of `n` runs like this one, one after another (the working set is the same).
    pub fn times(&self, n: f64) -> Work {
        Work {
            flops: self.flops * n,
            stream_bytes: self.stream_bytes * n,
            reuse_bytes: self.reuse_bytes * n,
            ..*self
        }
    }

    /// The metrics it is stored as, named as in [`WORK_METRICS`].
    pub fn metrics(&self) -> [(&'static str, f64); 6] {
        let (f64_flops, f32_flops) = match self.precision {
            Precision::F64 => (self.flops, 0.0),
            Precision::F32 => (0.0, self.flops),
        };
        [
            (WORK_METRICS[0], f64_flops),
            (WORK_METRICS[1], f32_flops),
            (WORK_METRICS[2], self.stream_bytes),
            (WORK_METRICS[3], self.reuse_bytes),
            (WORK_METRICS[4], self.reuse_footprint_bytes),
            (WORK_METRICS[5], self.threads as f64),
        ]
    }

    /// The work stored as metrics by [`Work::metrics`], or `None` when a metric is missing.
    pub fn from_metrics(get: impl Fn(&str) -> Option<f64>) -> Option<Work> {
        let f64_flops = get(WORK_METRICS[0])?;
        let f32_flops = get(WORK_METRICS[1])?;
        let (flops, precision) = if f32_flops > 0.0 {
            (f32_flops + f64_flops, Precision::F32)
        } else {
            (f64_flops, Precision::F64)
        };
        Some(Work {
            flops,
            precision,
            stream_bytes: get(WORK_METRICS[2])?,
            reuse_bytes: get(WORK_METRICS[3])?,
            reuse_footprint_bytes: get(WORK_METRICS[4])?,
            threads: get(WORK_METRICS[5])?.max(1.0) as usize,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_round_trip() {
        let w = Work {
            flops: 3e9,
            precision: Precision::F32,
            stream_bytes: 1e6,
            reuse_bytes: 5e8,
            reuse_footprint_bytes: 2e7,
            threads: 2,
        };
        let m: std::collections::BTreeMap<_, _> = w.metrics().into_iter().collect();
        assert_eq!(m["work_flops_f64"], 0.0);
        assert_eq!(m["work_flops_f32"], 3e9);
        assert_eq!(Work::from_metrics(|k| m.get(k).copied()), Some(w));
        assert_eq!(
            Work::from_metrics(|k| m.get(k).copied().filter(|_| k != "work_threads")),
            None
        );
    }

    #[test]
    fn then_adds_and_keeps_the_larger_footprint() {
        let a = Work {
            flops: 1.0,
            precision: Precision::F64,
            stream_bytes: 2.0,
            reuse_bytes: 3.0,
            reuse_footprint_bytes: 10.0,
            threads: 4,
        };
        let b = Work {
            reuse_footprint_bytes: 7.0,
            ..a
        };
        let s = a.then(&b);
        assert_eq!((s.flops, s.stream_bytes, s.reuse_bytes), (2.0, 4.0, 6.0));
        assert_eq!((s.reuse_footprint_bytes, s.threads), (10.0, 4));
        assert_eq!(
            Work::none(1)
                .then(&Work {
                    precision: Precision::F32,
                    ..a
                })
                .precision,
            Precision::F32
        );
    }
}
